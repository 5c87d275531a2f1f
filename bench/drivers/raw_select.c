/* SPDX-License-Identifier: MIT */
/* select(2) written by hand: a master fd_set copied before each call, then a scan of the
 * slots that stops once it has seen as many ready fds as select said. Only fds below
 * FD_SETSIZE fit (max_fd), so the harness skips the sizes whose fds go past it. */
#include "../harness.h"
#include "raw_timers.h"

#include <errno.h>
#include <stdio.h>
#include <sys/select.h>

static const struct bench_setup *setup;
static fd_set master;
static int maxfd;
static struct raw_timers timers;

static const char *unavailable(const char *variant)
{
    (void)variant;
    return NULL;
}

static int identify(const char *variant, char *buf, size_t len)
{
    (void)variant;
    snprintf(buf, len, "select(2), FD_SETSIZE %d", FD_SETSIZE);
    return 0;
}

static int open_(const char *variant, const struct bench_setup *s)
{
    (void)variant;
    setup = s;
    FD_ZERO(&master);
    maxfd = -1;
    for (size_t i = 0; i < s->n; i++) {
        if (s->fd[i] >= FD_SETSIZE)
            return -EINVAL;
        if (s->fd[i] > maxfd)
            maxfd = s->fd[i];
    }
    if (s->timeouts && raw_timers_open(&timers, s->n) < 0)
        return -ENOMEM;
    return 0;
}

static int start(size_t i)
{
    FD_SET(setup->fd[i], &master);
    if (setup->timeouts)
        raw_timers_set(&timers, (uint32_t)i, setup->timeout_ns[i]);
    return 0;
}

static int stop(size_t i)
{
    FD_CLR(setup->fd[i], &master);
    if (setup->timeouts)
        raw_timers_remove(&timers, (uint32_t)i);
    return 0;
}

static int dispatch(void)
{
    fd_set ready = master;
    struct timeval zero = {0, 0};
    int n = select(maxfd + 1, &ready, NULL, NULL, &zero);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    if (setup->timeouts)
        timers.now = bench_now_ns();
    for (size_t i = 0; n > 0 && i < setup->n; i++) {
        if (!FD_ISSET(setup->fd[i], &ready))
            continue;
        n--;
        bench_readable(i);
        if (setup->timeouts)
            raw_timers_set(&timers, (uint32_t)i, setup->timeout_ns[i]);
    }
    if (setup->timeouts)
        raw_timers_expire(&timers);
    return 0;
}

static int close_(void)
{
    if (setup->timeouts)
        raw_timers_close(&timers);
    return 0;
}

static const struct bench_driver driver = {
    .name = "raw-select", .max_fd = FD_SETSIZE, .unavailable = unavailable,
    .identify = identify, .open = open_, .start = start, .stop = stop, .dispatch = dispatch,
    .close = close_};

__attribute__((constructor)) static void register_driver(void)
{
    bench_register(&driver);
}
