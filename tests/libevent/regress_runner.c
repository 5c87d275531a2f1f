/* SPDX-License-Identifier: MIT */
/* The fixtures and main() for libevent's own regression cases, as tests/libevent/extract.py
 * takes them out of libevent's source: what regress.h declares (the socketpair and base a case
 * asks for with TT_NEED_SOCKETPAIR / TT_NEED_BASE, the globals of the 1.x-style "legacy" cases,
 * a few helpers), written for iomux against libevent's public API only. The groups are
 * main/, signal/ and et/, run by libevent's tinytest. */
#include "util-internal.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_compat.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <event2/util.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _WIN32
#include <io.h>
#include <windows.h>
#endif

#include "evbuffer-internal.h"
#include "regress.h"
#include "regress_testutils.h"

/* regress.c defines these itself, and the extracted definitions always include them
 * (extract.py's RUNNER_GLOBALS); weak here for an older extraction, where the system has weak
 * data (PE, Windows', has none). */
#ifdef _WIN32
extern evutil_socket_t pair[2];
extern int test_ok, called;
extern struct event_base *global_base;
#else
__attribute__((weak)) evutil_socket_t pair[2] = {-1, -1};
__attribute__((weak)) int test_ok;
__attribute__((weak)) int called;
__attribute__((weak)) struct event_base *global_base;
#endif
int in_legacy_test_wrapper; /* regress_main.c's, which is not taken */
int libevent_tests_running_in_debug_mode;
struct evutil_weakrand_state test_weakrand_state;

long timeval_msec_diff(const struct timeval *start, const struct timeval *end)
{
    long ms = (long)(end->tv_sec - start->tv_sec) * 1000;
    return ms + (long)(end->tv_usec - start->tv_usec) / 1000;
}

#ifndef _WIN32 /* no fork there: regress.c calls none */
pid_t regress_fork(void)
{
    return fork();
}
#endif

int evutil_socket_connect_(evutil_socket_t *fd, const struct sockaddr *sa, int socklen)
{
    int made = *fd < 0;
    if (made && ((*fd = socket(sa->sa_family, SOCK_STREAM, 0)) < 0 ||
                 evutil_make_socket_nonblocking(*fd) < 0))
        goto fail;
    if (connect(*fd, sa, (socklen_t)socklen) == 0)
        return 1;
    if (errno == EINPROGRESS || errno == EINTR)
        return 0;
    if (errno == ECONNREFUSED)
        return 2;
fail:
    if (made && *fd >= 0) {
        int err = errno;
        close(*fd);
        errno = err;
    }
    if (made)
        *fd = -1;
    return -1;
}

int regress_get_listener_addr(struct evconnlistener *lev, struct sockaddr *sa,
                              ev_socklen_t *socklen)
{
    evutil_socket_t fd = evconnlistener_get_fd(lev);
    return fd < 0 ? -1 : getsockname(fd, sa, socklen);
}

/* libevent's own check walks its chains. This one checks what the public API shows of
 * them: the extents evbuffer_peek lists add up to the length, no empty one stands before
 * one with data (libevent keeps empty chains at the end only), and the contiguous space is
 * the first extent. */
int evbuffer_validate_(struct evbuffer *buf)
{
    size_t len = evbuffer_get_length(buf), sum = 0;
    int n = evbuffer_peek(buf, -1, NULL, NULL, 0), empty = 0, ok = n >= 0;
    struct evbuffer_iovec *v = calloc(n > 0 ? (size_t)n : 1, sizeof *v);
    if (!v)
        exit(1);
    if (ok && evbuffer_peek(buf, -1, NULL, v, n) != n)
        ok = 0;
    for (int i = 0; ok && i < n; i++) {
        if (v[i].iov_len && empty)
            ok = 0; /* data behind an empty extent */
        empty |= v[i].iov_len == 0;
        sum += v[i].iov_len;
    }
    if (ok && sum != len)
        ok = 0;
    if (ok && evbuffer_get_contiguous_space(buf) != (n > 0 ? v[0].iov_len : 0))
        ok = 0;
    if (!ok)
        fprintf(stderr, "evbuffer_validate_: %d extents, %zu bytes in them, length %zu, "
                        "contiguous space %zu\n",
                n, sum, len, evbuffer_get_contiguous_space(buf));
    free(v);
    return ok;
}

int regress_make_tmpfile(const void *data, size_t len, char **filename_out)
{
    char name[] = "/tmp/iomux-regress-XXXXXX";
#ifdef _WIN32
    int fd = _mktemp(name) ? _open(name, _O_CREAT | _O_EXCL | _O_RDWR | _O_BINARY, 0600) : -1;
#else
    int fd = mkstemp(name);
#endif
    if (fd < 0)
        return -1;
    if (write(fd, data, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) < 0) {
        close(fd);
        return -1;
    }
    if (filename_out)
        *filename_out = strdup(name);
    else
        unlink(name);
    return fd;
}

#include "standins.c" /* evutil_weakrand_*, evutil_make_internal_pipe_ */

void evutil_usleep_(const struct timeval *tv)
{
#ifdef _WIN32
    Sleep((DWORD)(tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000));
#else
    struct timespec ts = {.tv_sec = tv->tv_sec, .tv_nsec = tv->tv_usec * 1000L};
    while (nanosleep(&ts, &ts) < 0)
        ;
#endif
}

/* libevent's own consistency check, which libiomux-event offers too. */
void event_base_assert_ok_(struct event_base *base);

static void quiet_log(int severity, const char *msg)
{
    (void)severity, (void)msg;
}

void *basic_test_setup(const struct testcase_t *tc)
{
    struct basic_test_data *d = calloc(1, sizeof *d);
    if (!d)
        exit(1);
    d->pair[0] = d->pair[1] = -1;
    if (tc->flags & TT_ENABLE_IOCP_FLAG) {
        free(d);
        return (void *)TT_SKIP;
    }
    if ((tc->flags & TT_NEED_THREADS) && evthread_use_pthreads() < 0)
        exit(1);
    if (tc->flags & TT_NEED_SOCKETPAIR) {
        if (evutil_socketpair(AF_UNIX, SOCK_STREAM, 0, d->pair) < 0 ||
            evutil_make_socket_nonblocking(d->pair[0]) < 0 ||
            evutil_make_socket_nonblocking(d->pair[1]) < 0) {
            perror("regress: socketpair");
            exit(1);
        }
    }
    if (tc->flags & TT_NEED_BASE) {
        d->base = (tc->flags & TT_LEGACY) ? event_init() : event_base_new();
        if (!d->base) {
            fprintf(stderr, "regress: no event base\n");
            exit(1);
        }
    }
    if (tc->flags & TT_NO_LOGS)
        event_set_log_callback(quiet_log);
    d->setup_data = tc->setup_data;
    return d;
}

int basic_test_cleanup(const struct testcase_t *tc, void *ptr)
{
    struct basic_test_data *d = ptr;
    if (tc->flags & TT_NO_LOGS)
        event_set_log_callback(NULL);
    for (int i = 0; i < 2; i++)
        if (d->pair[i] >= 0)
            evutil_closesocket(d->pair[i]);
    if (d->base) {
        event_base_assert_ok_(d->base);
        event_base_free(d->base);
    }
    if (tc->flags & TT_FORK)
        libevent_global_shutdown();
    free(d);
    return 1;
}

const struct testcase_setup_t basic_setup = {basic_test_setup, basic_test_cleanup};

static void *legacy_test_setup(const struct testcase_t *tc)
{
    struct basic_test_data *d = basic_test_setup(tc);
    if (d == (void *)TT_SKIP || !d)
        return d;
    global_base = d->base;
    pair[0] = d->pair[0];
    pair[1] = d->pair[1];
    d->legacy_test_fn = (void (*)(void))tc->setup_data;
    return d;
}

void run_legacy_test_fn(void *ptr)
{
    struct basic_test_data *d = ptr;
    test_ok = called = 0;
    in_legacy_test_wrapper = 1;
    d->legacy_test_fn();
    in_legacy_test_wrapper = 0;
    if (!test_ok)
        tt_abort_msg("Legacy unit test failed");
end:
    test_ok = 0;
}

static int legacy_test_cleanup(const struct testcase_t *tc, void *ptr)
{
    int r = basic_test_cleanup(tc, ptr);
    pair[0] = pair[1] = -1;
    global_base = NULL;
    return r;
}

const struct testcase_setup_t legacy_setup = {legacy_test_setup, legacy_test_cleanup};

/* The groups' table, written by extract.py (groups.c): one per libevent test file's table. */
extern struct testgroup_t regress_groups[];

int main(int argc, const char **argv)
{
    evutil_weakrand_seed_(&test_weakrand_state, 0);
    /* run-regress names the backend it switched the others off for: it must be the one. */
    const char *want = getenv("IOMUX_REGRESS_METHOD");
    if (want) {
        struct event_base *b = event_base_new();
        if (!b) {
            printf("SKIP: backend %s does not open here (event_base_new failed)\n", want);
            return 77;
        }
        int same = strcmp(event_base_get_method(b), want) == 0;
        printf("backend: %s\n", event_base_get_method(b));
        event_base_free(b);
        if (!same) {
            printf("FAIL: asked for backend %s\n", want);
            return 1;
        }
    }
    if (getenv("EVENT_DEBUG_MODE"))
        event_enable_debug_mode();
    return tinytest_main(argc, argv, regress_groups) ? 1 : 0;
}
