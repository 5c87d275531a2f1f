/* SPDX-License-Identifier: MIT */
/* libev through its native API, on its epoll backend (forced, then checked). Re-arming is
 * ev_io_stop + ev_io_start; the idle timeout is an ev_timer restarted with ev_timer_again,
 * the idiom libev's documentation recommends for exactly this case. */
#include "../harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slot {
    ev_io io; /* first: a watcher pointer is a slot pointer */
    ev_timer timer;
};

static const struct bench_setup *setup;
static struct ev_loop *loop;
static struct slot *slots;

static void on_read(struct ev_loop *l, ev_io *w, int revents)
{
    struct slot *s = (struct slot *)w;
    (void)revents;
    bench_readable((size_t)(s - slots));
    if (setup->timeouts)
        ev_timer_again(l, &s->timer);
}

static void on_timeout(struct ev_loop *l, ev_timer *t, int revents)
{
    (void)l, (void)revents;
    bench_timer_fired((size_t)(uintptr_t)t->data);
}

static const char *unavailable(const char *variant)
{
    (void)variant;
    return ev_supported_backends() & EVBACKEND_EPOLL ? NULL : "libev built without epoll";
}

/* Debian's libev also exports libevent's old names (event_add, ...): resolve our entry
 * points and make sure they live in libev itself. */
static int identify(const char *variant, char *buf, size_t len)
{
    Dl_info info = {0};
    (void)variant;
    dladdr((void *)(uintptr_t)ev_run, &info);
    const char *where = info.dli_fname ? info.dli_fname : "?";
    const char *base = strrchr(where, '/') ? strrchr(where, '/') + 1 : where;
    int ok = ev_version_major() == EV_VERSION_MAJOR && strncmp(base, "libev.", 6) == 0;
    snprintf(buf, len, "libev %d.%d, epoll (%s)%s", ev_version_major(), ev_version_minor(),
             where, ok ? "" : ": not libev, or not the version of its header");
    return ok ? 0 : -1;
}

static int open_(const char *variant, const struct bench_setup *s)
{
    (void)variant;
    if (!(loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV)))
        return -ENOMEM;
    if (ev_backend(loop) != EVBACKEND_EPOLL)
        bench_fail("libev opened backend %#x, not epoll", ev_backend(loop));
    setup = s;
    if (!(slots = calloc(s->n, sizeof *slots)))
        return -ENOMEM;
    for (size_t i = 0; i < s->n; i++) {
        ev_io_init(&slots[i].io, on_read, s->fd[i], EV_READ);
        ev_init(&slots[i].timer, on_timeout);
        slots[i].timer.repeat = s->timeouts ? (ev_tstamp)s->timeout_ns[i] / 1e9 : 0.;
        slots[i].timer.data = (void *)(uintptr_t)i;
    }
    return 0;
}

static int start(size_t i)
{
    ev_io_start(loop, &slots[i].io);
    if (setup->timeouts)
        ev_timer_again(loop, &slots[i].timer);
    return 0;
}

static int stop(size_t i)
{
    ev_io_stop(loop, &slots[i].io);
    if (setup->timeouts)
        ev_timer_stop(loop, &slots[i].timer);
    return 0;
}

static int dispatch(void)
{
    ev_run(loop, EVRUN_NOWAIT);
    return 0;
}

static int close_(void)
{
    ev_loop_destroy(loop);
    free(slots);
    return 0;
}

static const struct bench_driver driver = {
    .name = "libev", .unavailable = unavailable, .identify = identify, .open = open_,
    .start = start, .stop = stop, .dispatch = dispatch, .close = close_};

__attribute__((constructor)) static void register_driver(void)
{
    bench_register(&driver);
}
