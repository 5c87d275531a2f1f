/* SPDX-License-Identifier: MIT */
/* The kqueue floor: level-triggered EVFILT_READ written by hand, the kqueue counterpart of
 * raw_epoll.c. Stopping a watcher only marks it; the registration is deleted lazily when an
 * event arrives for a stopped slot, so stop-then-start costs no kevent() call. A slot's
 * registration carries its number in udata. Where it is measured here, kevent() is libkqueue's
 * (over epoll): the floor of what iomux adds to kevent(), not a BSD kernel's cost. */
#include "../harness.h"
#include "raw_timers.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/event.h>
#include <time.h>
#include <unistd.h>

enum { WANTED = 1, IN_KERNEL = 2, MAX_EVENTS = 1024 };

static const struct bench_setup *setup;
static int kq = -1;
static unsigned char *state;
static struct raw_timers timers;
static struct kevent events[MAX_EVENTS];

static const char *unavailable(const char *variant)
{
    (void)variant;
    return NULL;
}

static int identify(const char *variant, char *buf, size_t len)
{
    (void)variant;
#ifdef LIBKQUEUE
    snprintf(buf, len, "kevent(2), level-triggered (libkqueue over epoll)");
#else
    snprintf(buf, len, "kevent(2), level-triggered");
#endif
    return 0;
}

static int open_(const char *variant, const struct bench_setup *s)
{
    (void)variant;
    setup = s;
    if ((kq = kqueue()) < 0)
        return -errno;
    if (!(state = calloc(s->n, 1)) || (s->timeouts && raw_timers_open(&timers, s->n) < 0))
        return -ENOMEM;
    return 0;
}

static int ctl(size_t i, unsigned short flags)
{
    struct kevent ch;
    EV_SET(&ch, setup->fd[i], EVFILT_READ, flags, 0, 0, (void *)(uintptr_t)i);
    return kevent(kq, &ch, 1, NULL, 0, NULL) < 0 ? -errno : 0;
}

static int start(size_t i)
{
    if (!(state[i] & IN_KERNEL)) {
        int r = ctl(i, EV_ADD);
        if (r < 0)
            return r;
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
    static const struct timespec zero = {0, 0};
    int n = kevent(kq, NULL, 0, events, MAX_EVENTS, &zero);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    if (setup->timeouts)
        timers.now = bench_now_ns();
    for (int k = 0; k < n; k++) {
        size_t i = (size_t)(uintptr_t)events[k].udata;
        if (!(state[i] & WANTED)) {
            ctl(i, EV_DELETE);
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
    close(kq);
    kq = -1;
    free(state);
    if (setup->timeouts)
        raw_timers_close(&timers);
    return 0;
}

static const struct bench_driver driver = {
    .name = "raw-kqueue", .unavailable = unavailable, .identify = identify, .open = open_,
    .start = start, .stop = stop, .dispatch = dispatch, .close = close_};

__attribute__((constructor)) static void register_driver(void)
{
    bench_register(&driver);
}
