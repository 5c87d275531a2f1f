/* SPDX-License-Identifier: MIT */
/* libiomux-event when an allocation fails: through event_set_mem_functions, the n-th next
 * allocation libiomux-event asks for fails, and the call that needed it must fail the way
 * its API says (NULL, -1, or an error event on a bufferevent) and leave what it was given as
 * it was. The sanitized build checks that nothing leaks on those paths. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/event_compat.h>
#include <event2/listener.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "event_fixture.h"
#include "harness.h"

static long countdown; /* the allocation that fails: 1 is the next one; 0: none */
static long failed;

static void *failing_malloc(size_t n)
{
    if (countdown > 0 && --countdown == 0) {
        failed++;
        return NULL;
    }
    return malloc(n);
}

/* From now on, the n-th allocation fails (once). */
static void fail_nth(long n)
{
    event_set_mem_functions(failing_malloc, realloc, free);
    countdown = n;
    failed = 0;
}

static void fail_none(void)
{
    countdown = 0;
}

CORE_TEST(event_calls_fail_cleanly_when_an_allocation_fails) {
    fail_nth(1);
    CHECK(event_base_new() == NULL); /* the base itself */
    CHECK_EQ(failed, 1);
    fail_nth(1);
    CHECK(event_init() == NULL);
    CHECK(event_get_method() == NULL); /* no current base was made */
    fail_none();
    struct event_base *base = event_base_new();
    CHECK(base != NULL);
    struct event_config *cfg = event_config_new();
    for (long n = 1; n <= 2; n++) { /* the method's copy, then the grown list */
        fail_nth(n);
        CHECK_EQ(event_config_avoid_method(cfg, "poll"), -1);
        CHECK_EQ(failed, 1);
    }
    fail_none();
    CHECK_EQ(event_config_avoid_method(cfg, "poll"), 0);
    event_config_free(cfg);
    fail_nth(1);
    CHECK_EQ(event_base_priority_init(base, 3), -1);
    CHECK_EQ(event_base_get_npriorities(base), 1); /* unchanged */
    int n = 0;
    fail_nth(1);
    CHECK(event_new(base, -1, 0, evt_count_cb, &n) == NULL);
    fail_nth(1);
    CHECK_EQ(event_base_once(base, -1, EV_TIMEOUT, evt_count_cb, &n, NULL), -1);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE), 0);
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fail_nth(1);
    CHECK(evconnlistener_new(base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE, 0, sv[0]) == NULL);
    CHECK_GE(fcntl(sv[0], F_GETFD), 0); /* the caller's still */
    fail_none();
    CHECK_EQ(failed, 1);
    close(sv[0]);
    close(sv[1]);
    event_base_free(base);
    event_set_mem_functions(NULL, NULL, NULL);
}

CORE_TEST(evbuffer_calls_fail_cleanly_when_an_allocation_fails) {
    fail_nth(1);
    CHECK(evbuffer_new() == NULL);
    fail_none();
    struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
    CHECK_EQ(evbuffer_add(src, "world", 5), 0);
    CHECK_EQ(evbuffer_prepend(src, "hello ", 6), 0); /* two chunks */
    /* A move that copies part of a chunk needs room in dst. */
    fail_nth(1);
    CHECK_EQ(evbuffer_remove_buffer(src, dst, 3), -1);
    CHECK_STR_EQ(evt_buffer_text(src), "hello world");
    CHECK_EQ(evbuffer_get_length(dst), 0);
    /* A pull-up across chunks needs a chunk for the whole. */
    fail_nth(1);
    CHECK(evbuffer_pullup(src, 8) == NULL);
    CHECK_EQ(evbuffer_get_contiguous_space(src), 6);
    CHECK_STR_EQ(evt_buffer_text(src), "hello world");
    /* A reservation, and a read, need a chunk when the last has no room. */
    struct evbuffer_iovec v;
    fail_nth(1);
    CHECK_EQ(evbuffer_reserve_space(dst, 10, &v, 1), -1);
    int p[2];
    make_pipe(p);
    CHECK_EQ(write(p[1], "abc", 3), 3);
    fail_nth(1);
    CHECK_EQ(evbuffer_read(dst, p[0], 3), -1);
    fail_none();
    CHECK_EQ(evbuffer_read(dst, p[0], 3), 3); /* the bytes waited */
    CHECK_STR_EQ(evt_buffer_text(dst), "abc");
    close(p[0]);
    close(p[1]);
    evbuffer_free(src);
    evbuffer_free(dst);
    event_set_mem_functions(NULL, NULL, NULL);
}

TEST(bufferevent_socket_new_fails_cleanly_at_each_of_its_allocations) {
    struct event_base *base = evt_base_open();
    int sv[2];
    make_socketpair(sv);
    for (long n = 1; n <= 3; n++) { /* the bufferevent, its input, its output */
        fail_nth(n);
        CHECK(bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE) == NULL);
        CHECK_EQ(failed, 1);
        CHECK_GE(fcntl(sv[0], F_GETFD), 0); /* not closed: the socket is still the caller's */
    }
    CHECK(strstr(evt_last_warning, "bufferevent_socket_new: ") != NULL);
    fail_none();
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
    event_set_mem_functions(NULL, NULL, NULL);
}

static short last_what;
static int last_errno;

static void record_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev, (void)arg;
    last_what = what;
    last_errno = errno;
}

/* A bufferevent on sv[0] with its event callback recorded. */
static struct bufferevent *recording_bev(struct event_base *base, int fd)
{
    struct bufferevent *bev = bufferevent_socket_new(base, fd, 0);
    CHECK(bev != NULL);
    bufferevent_setcb(bev, NULL, NULL, record_event, NULL);
    last_what = 0;
    last_errno = 0;
    return bev;
}

/* On Windows the iocp backend binds a socket to the loop's completion port when a stream
 * first takes it, and Windows binds a socket once: a second bufferevent gets a new pair. */
static void fresh_pair_on_windows(int sv[2])
{
#ifdef _WIN32
    close(sv[0]);
    close(sv[1]);
    make_socketpair(sv);
#else
    (void)sv;
#endif
}

TEST(a_bufferevent_that_cannot_get_a_read_buffer_reports_a_reading_error) {
    struct event_base *base = evt_base_open();
    int sv[2];
    make_socketpair(sv);
    /* The base's shared read buffer, taken by the first bufferevent that reads. */
    struct bufferevent *bev = recording_bev(base, sv[0]);
    fail_nth(1);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    CHECK_EQ(last_what, BEV_EVENT_READING | BEV_EVENT_ERROR);
    CHECK_EQ(last_errno, ENOMEM);
    fail_none();
    bufferevent_free(bev);
    fresh_pair_on_windows(sv);
    /* A bufferevent reading more than 16 KB at a time has a chunk of its own. */
    bev = recording_bev(base, sv[0]);
    CHECK_EQ(bufferevent_set_max_single_read(bev, 65536), 0);
    fail_nth(1);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    CHECK_EQ(last_what, BEV_EVENT_READING | BEV_EVENT_ERROR);
    CHECK_EQ(last_errno, ENOMEM);
    fail_none();
    bufferevent_free(bev);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
    event_set_mem_functions(NULL, NULL, NULL);
}

TEST(a_bufferevent_that_cannot_keep_what_it_read_stops_with_a_reading_error) {
    struct event_base *base = evt_base_open();
    int sv[2];
    make_socketpair(sv);
    struct bufferevent *bev = recording_bev(base, sv[0]);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0); /* the shared buffer exists now */
    CHECK_EQ(write(sv[1], "lost", 4), 4);
    fail_nth(1); /* the input's first chunk */
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(last_what, BEV_EVENT_READING | BEV_EVENT_ERROR);
    CHECK_EQ(last_errno, ENOMEM);
    CHECK_EQ(evbuffer_get_length(bufferevent_get_input(bev)), 0);
    fail_none();
    bufferevent_free(bev);
    fresh_pair_on_windows(sv);
    /* With chunks of its own, the chunk after a read handed to the input. */
    bev = recording_bev(base, sv[0]);
    CHECK_EQ(bufferevent_set_max_single_read(bev, 65536), 0);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    static char big[8192];
    memset(big, 'b', sizeof big);
    CHECK_EQ(write(sv[1], big, sizeof big), (ssize_t)sizeof big);
    fail_nth(1);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(last_what, BEV_EVENT_READING | BEV_EVENT_ERROR);
    CHECK_EQ(last_errno, ENOMEM);
    CHECK_GT(evbuffer_get_length(bufferevent_get_input(bev)), 0); /* what was read is kept */
    fail_none();
    bufferevent_free(bev);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
    event_set_mem_functions(NULL, NULL, NULL);
}

TEST(pairs_and_rate_limits_fail_cleanly_when_an_allocation_fails) {
    struct event_base *base = evt_base_open();
    struct bufferevent *pair[2] = {NULL, NULL};
    long n = 1;
    for (;; n++) { /* each end and its two buffers: every one may fail */
        fail_nth(n);
        if (bufferevent_pair_new(base, 0, pair) == 0)
            break;
        CHECK_EQ(failed, 1);
        CHECK_LT(n, 100);
    }
    fail_none();
    CHECK_GE(n, 5); /* the second end was made after the first */
    struct timeval hour = {3600, 0};
    fail_nth(1);
    CHECK(ev_token_bucket_cfg_new(10, 10, 10, 10, &hour) == NULL);
    fail_none();
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(10, 10, 10, 10, &hour);
    CHECK(cfg != NULL);
    fail_nth(1);
    CHECK_EQ(bufferevent_set_rate_limit(pair[0], cfg), -1);
    CHECK(bufferevent_get_token_bucket_cfg(pair[0]) == NULL); /* as it was: no limit */
    fail_nth(1);
    CHECK(bufferevent_rate_limit_group_new(base, cfg) == NULL);
    fail_none();
    struct bufferevent_rate_limit_group *g = bufferevent_rate_limit_group_new(base, cfg);
    CHECK(g != NULL);
    fail_nth(1);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(pair[0], g), -1);
    fail_none();
    CHECK_EQ(bufferevent_get_max_to_read(pair[0]), 16384); /* in no group */
    /* Once made, the limit's state makes no more allocations. */
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], cfg), 0);
    fail_nth(1);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(pair[1], g), 0);
    CHECK_EQ(failed, 0);
    fail_none();
    CHECK_EQ(bufferevent_get_max_to_read(pair[1]), 10);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    bufferevent_rate_limit_group_free(g);
    ev_token_bucket_cfg_free(cfg);
    evt_base_close(base);
    event_set_mem_functions(NULL, NULL, NULL);
}
