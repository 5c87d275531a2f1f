/* SPDX-License-Identifier: MIT */
/* The floor: level-triggered epoll written by hand. Stopping a watcher only marks it;
 * the kernel registration is dropped lazily if an event arrives for a stopped slot, so
 * that stop-then-start (the chain study's re-arm) costs no system call, as it costs none
 * in the libraries that batch their interest changes. */
#include "../harness.h"
#include "raw_timers.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

enum { WANTED = 1, IN_KERNEL = 2, MAX_EVENTS = 1024 };

static const struct bench_setup *setup;
static int ep = -1;
static unsigned char *state;
static struct raw_timers timers;
static struct epoll_event events[MAX_EVENTS];

static const char *unavailable(const char *variant)
{
    (void)variant;
    return NULL;
}

static int identify(const char *variant, char *buf, size_t len)
{
    (void)variant;
    snprintf(buf, len, "epoll_wait(2), level-triggered");
    return 0;
}

static int open_(const char *variant, const struct bench_setup *s)
{
    (void)variant;
    setup = s;
    if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return -errno;
    if (!(state = calloc(s->n, 1)) || (s->timeouts && raw_timers_open(&timers, s->n) < 0))
        return -ENOMEM;
    return 0;
}

static int start(size_t i)
{
    if (!(state[i] & IN_KERNEL)) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, setup->fd[i], &ev) < 0)
            return -errno;
    }
    state[i] = WANTED | IN_KERNEL;
    if (setup->timeouts)
        raw_timers_set(&timers, (uint32_t)i, setup->timeout_ns[i]);
    return 0;
}

static int stop(size_t i)
{
    state[i] &= (unsigned char)~WANTED;
    if (setup->timeouts)
        raw_timers_remove(&timers, (uint32_t)i);
    return 0;
}

static int dispatch(void)
{
    int n = epoll_wait(ep, events, MAX_EVENTS, 0);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    if (setup->timeouts)
        timers.now = bench_now_ns();
    for (int k = 0; k < n; k++) {
        size_t i = (size_t)events[k].data.u64;
        if (!(state[i] & WANTED)) {
            epoll_ctl(ep, EPOLL_CTL_DEL, setup->fd[i], NULL);
            state[i] = 0;
            continue;
        }
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
    close(ep);
    ep = -1;
    free(state);
    if (setup->timeouts)
        raw_timers_close(&timers);
    return 0;
}

static const struct bench_driver driver = {
    .name = "raw-epoll", .unavailable = unavailable, .identify = identify, .open = open_,
    .start = start, .stop = stop, .dispatch = dispatch, .close = close_};

__attribute__((constructor)) static void register_driver(void)
{
    bench_register(&driver);
}
