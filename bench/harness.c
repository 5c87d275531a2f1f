/* SPDX-License-Identifier: MIT */
/* The harness's shared parts: driver registry, the per-event work, the transport. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_DRIVERS 32

static const struct bench_driver *drivers[MAX_DRIVERS];
static size_t ndrivers;

struct bench_counters bench_count;
struct bench_fds bench_fds;

void bench_register(const struct bench_driver *d)
{
    if (ndrivers == MAX_DRIVERS)
        bench_fail("too many drivers (raise MAX_DRIVERS in harness.c)");
    drivers[ndrivers++] = d;
}

const struct bench_driver *bench_find(const char *name)
{
    for (size_t i = 0; i < ndrivers; i++)
        if (strcmp(drivers[i]->name, name) == 0)
            return drivers[i];
    return NULL;
}

const struct bench_driver *bench_driver_at(size_t i)
{
    return i < ndrivers ? drivers[i] : NULL;
}

/* Reads one token from slot i: one byte of a socketpair, one unit of a semaphore eventfd
 * (EFD_SEMAPHORE makes every read take exactly 1, so one callback is one token on both
 * transports and the callback count is exact). Returns 1, or 0 when nothing was there. */
static int take(size_t i)
{
    if (bench_fds.transport == BENCH_EVENTFD) {
        uint64_t v;
        ssize_t r = read(bench_fds.rfd[i], &v, sizeof v);
        if (r == (ssize_t)sizeof v)
            return 1;
        if (r < 0 && errno != EAGAIN)
            bench_count.errors++;
        return 0;
    }
    char c;
    ssize_t r = read(bench_fds.rfd[i], &c, 1);
    if (r == 1)
        return 1;
    if (r < 0 && errno != EAGAIN)
        bench_count.errors++;
    return 0;
}

void bench_put(size_t i)
{
    ssize_t r;
    if (bench_fds.transport == BENCH_EVENTFD) {
        uint64_t one = 1;
        r = write(bench_fds.wfd[i], &one, sizeof one);
        if (r != (ssize_t)sizeof one)
            bench_count.errors++;
    } else {
        r = write(bench_fds.wfd[i], "e", 1);
        if (r != 1)
            bench_count.errors++;
    }
}

void bench_readable(size_t i)
{
    bench_count.callbacks++;
    if (!take(i)) {
        bench_count.spurious++;
        return;
    }
    bench_count.tokens++;
    if (bench_count.writes_left > 0) {
        bench_count.writes_left--;
        bench_put(i + 1 == bench_fds.n ? 0 : i + 1);
    }
}

void bench_timer_fired(size_t i)
{
    (void)i;
    bench_count.timer_fires++;
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int open_slot(enum bench_transport t, size_t i)
{
    if (t == BENCH_EVENTFD) {
        int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE);
        if (fd < 0)
            return -errno;
        bench_fds.rfd[i] = bench_fds.wfd[i] = fd;
        return 0;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    /* Both ends non-blocking: a callback that finds nothing must not hang the run. */
    if (set_nonblock(sv[0]) < 0 || set_nonblock(sv[1]) < 0) {
        int err = -errno;
        close(sv[0]);
        close(sv[1]);
        return err;
    }
    bench_fds.rfd[i] = sv[0];
    bench_fds.wfd[i] = sv[1];
    return 0;
}

int bench_fds_open(enum bench_transport t, size_t n, size_t *made)
{
    bench_fds.transport = t;
    bench_fds.rfd = calloc(n ? n : 1, sizeof(int));
    bench_fds.wfd = calloc(n ? n : 1, sizeof(int));
    if (!bench_fds.rfd || !bench_fds.wfd)
        return -ENOMEM;
    bench_fds.n = 0;
    for (size_t i = 0; i < n; i++) {
        int err = open_slot(t, i);
        if (err < 0) {
            *made = i;
            return err;
        }
        bench_fds.n = i + 1;
    }
    *made = n;
    return 0;
}

void bench_fds_close(void)
{
    for (size_t i = 0; i < bench_fds.n; i++) {
        close(bench_fds.rfd[i]);
        if (bench_fds.wfd[i] != bench_fds.rfd[i])
            close(bench_fds.wfd[i]);
    }
    free(bench_fds.rfd);
    free(bench_fds.wfd);
    memset(&bench_fds, 0, sizeof bench_fds);
}

int bench_fds_max(void)
{
    int m = -1;
    for (size_t i = 0; i < bench_fds.n; i++)
        if (bench_fds.rfd[i] > m)
            m = bench_fds.rfd[i];
    return m;
}

void bench_raise_nofile(long *before, long *after, long *hard)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
        *before = *after = *hard = -1;
        return;
    }
    *before = (long)rl.rlim_cur;
    *hard = (long)rl.rlim_max;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl); /* a failure shows as after == before */
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    *after = (long)rl.rlim_cur;
}

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_fail(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("FAIL: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

void bench_print_array(const char *key, const double *v, size_t n)
{
    printf(",\"%s\":[", key);
    for (size_t i = 0; i < n; i++)
        printf("%s%.4f", i ? "," : "", v[i]);
    putchar(']');
}

void bench_print_head(const char *study, const struct bench_opts *o)
{
    printf("RESULT {\"study\":\"%s\",\"driver\":\"%s\",\"transport\":\"%s\",\"n\":%zu", study,
           o->driver->name, o->transport == BENCH_EVENTFD ? "eventfd" : "socketpair", o->n);
}

uint64_t bench_drain(const struct bench_driver *d, uint64_t expect)
{
    uint64_t dispatches = 0, idle = 0, last = bench_count.tokens, stalled_since = 0;
    while (bench_count.tokens < expect) {
        int r = d->dispatch();
        if (r < 0)
            bench_fail("%s: dispatch failed: %s", d->name, strerror(-r));
        dispatches++;
        if (bench_count.tokens != last) {
            last = bench_count.tokens;
            idle = stalled_since = 0;
            continue;
        }
        if (bench_count.spurious || bench_count.errors)
            return dispatches; /* bench_check names the problem */
        if (++idle % 4096 != 0)
            continue;
        uint64_t now = bench_now_ns();
        if (!stalled_since)
            stalled_since = now;
        else if (now - stalled_since > 5000000000u)
            bench_fail("%s missed events: %llu of %llu tokens read, then nothing in %llu "
                       "dispatches over 5 s",
                       d->name, (unsigned long long)bench_count.tokens,
                       (unsigned long long)expect, (unsigned long long)idle);
    }
    return dispatches;
}

void bench_check(const struct bench_driver *d, const char *where, uint64_t expect)
{
    const struct bench_counters *c = &bench_count;
    if (c->callbacks == expect && c->tokens == expect && !c->spurious && !c->errors &&
        !c->timer_fires && !c->writes_left)
        return;
    bench_fail("%s, %s: expected %llu callbacks reading one token each; got %llu callbacks, "
               "%llu tokens, %llu spurious, %llu i/o errors, %llu timers fired, %llu writes "
               "left",
               d->name, where, (unsigned long long)expect, (unsigned long long)c->callbacks,
               (unsigned long long)c->tokens, (unsigned long long)c->spurious,
               (unsigned long long)c->errors, (unsigned long long)c->timer_fires,
               (unsigned long long)c->writes_left);
}
