/* SPDX-License-Identifier: MIT */
/* iomux on each of its backends: one driver per backend name, the backend forced through
 * the loop options (the environment is ignored) and checked with mux_loop_backend().
 * Re-arming is mux_io_stop + mux_io_start; the idle timeout is mux_timer_again.
 * iomux-uring-edge (variant "uring+edge") watches with MUX_EDGE on io_uring, where such a
 * watcher is one multishot poll request, beside the hand-written multishot loop
 * (raw-uring-multi); study 1 only (harness.h, `edge`). */
#include "../harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <iomux.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

struct slot {
    mux_io_t io; /* first: a watcher pointer is a slot pointer */
    mux_timer_t timer;
};

static const struct bench_setup *setup;
static mux_loop_t loop;
static struct slot *slots;

/* A variant is a backend name, with "+edge" for edge-triggered watchers. */
static const char *backend_of(const char *variant, char *buf, size_t len)
{
    snprintf(buf, len, "%s", variant);
    char *plus = strchr(buf, '+');
    if (plus)
        *plus = '\0';
    return buf;
}

static unsigned events_of(const char *variant)
{
    return strstr(variant, "+edge") ? MUX_READ | MUX_EDGE : MUX_READ;
}

static void on_read(mux_loop_t *l, mux_io_t *w, unsigned revents)
{
    struct slot *s = (struct slot *)w;
    (void)revents;
    bench_readable((size_t)(s - slots));
    if (setup->timeouts)
        mux_timer_again(l, &s->timer);
}

static void on_timeout(mux_loop_t *l, mux_timer_t *t)
{
    (void)l;
    bench_timer_fired((size_t)(uintptr_t)t->data);
}

static const char *unavailable(const char *variant)
{
    static char why[128];
    char b[32];
    int r = mux_backend_probe(backend_of(variant, b, sizeof b));
    if (r == 0)
        return NULL;
    snprintf(why, sizeof why, "mux_backend_probe: %s", mux_strerror(r));
    return why;
}

static int identify(const char *variant, char *buf, size_t len)
{
    Dl_info info = {0};
    dladdr((void *)(uintptr_t)mux_run, &info);
    const char *where = info.dli_fname ? info.dli_fname : "?";
    int same = mux_version() == ((MUX_VERSION_MAJOR << 16) | (MUX_VERSION_MINOR << 8) |
                                 MUX_VERSION_PATCH);
    char b[32];
    snprintf(buf, len, "iomux %s, backend %s%s (%s)%s", mux_version_string(),
             backend_of(variant, b, sizeof b),
             events_of(variant) & MUX_EDGE ? ", MUX_EDGE watchers" : "", where,
             same ? "" : ": library version differs from the header's");
    return same ? 0 : -1;
}

static int open_(const char *variant, const struct bench_setup *s)
{
    char b[32];
    const char *backend = backend_of(variant, b, sizeof b);
    mux_loop_options_t opts = {.backend = backend, .flags = MUX_LOOP_IGNORE_ENV};
    int r = mux_loop_init(&loop, &opts);
    if (r < 0)
        return r;
    const char *got = mux_loop_backend(&loop);
    if (!got || strcmp(got, backend) != 0)
        bench_fail("iomux opened backend %s, not %s", got ? got : "(none)", backend);
    setup = s;
    if (!(slots = calloc(s->n, sizeof *slots)))
        return -ENOMEM;
    for (size_t i = 0; i < s->n; i++) {
        if ((r = mux_io_init(&slots[i].io, on_read, s->fd[i], events_of(variant))) < 0 ||
            (r = mux_timer_init(&slots[i].timer, on_timeout)) < 0)
            return r;
        slots[i].timer.data = (void *)(uintptr_t)i;
        if (s->timeouts && (r = mux_timer_set_repeat(&slots[i].timer, s->timeout_ns[i])) < 0)
            return r;
    }
    return 0;
}

static int start(size_t i)
{
    int r = mux_io_start(&loop, &slots[i].io);
    if (r == 0 && setup->timeouts)
        r = mux_timer_again(&loop, &slots[i].timer);
    return r;
}

static int stop(size_t i)
{
    int r = mux_io_stop(&loop, &slots[i].io);
    if (r == 0 && setup->timeouts)
        r = mux_timer_stop(&loop, &slots[i].timer);
    return r;
}

static int dispatch(void)
{
    int r = mux_run(&loop, MUX_RUN_NOWAIT);
    return r < 0 ? r : 0;
}

static int close_(void)
{
    int r = mux_loop_close(&loop);
    free(slots);
    slots = NULL;
    return r;
}

#define IOMUX_DRIVER(backend, limit)                                                       \
    {.name = "iomux-" backend, .variant = backend, .max_fd = limit,                        \
     .unavailable = unavailable, .identify = identify, .open = open_, .start = start,      \
     .stop = stop, .dispatch = dispatch, .close = close_}

/* Every backend iomux may have; the ones not built report themselves unavailable. rtsig
 * is opt-in in the loop (never chosen unless named), so named here it runs like the others. */
static const struct bench_driver drivers[] = {
    IOMUX_DRIVER("uring", 0), IOMUX_DRIVER("epoll", 0),  IOMUX_DRIVER("kqueue", 0),
    IOMUX_DRIVER("rtsig", 0), IOMUX_DRIVER("poll", 0),   IOMUX_DRIVER("select", FD_SETSIZE),
    {.name = "iomux-uring-edge", .variant = "uring+edge", .edge = 1, .unavailable = unavailable,
     .identify = identify, .open = open_, .start = start, .stop = stop, .dispatch = dispatch,
     .close = close_}};

__attribute__((constructor)) static void register_drivers(void)
{
    for (size_t i = 0; i < sizeof drivers / sizeof drivers[0]; i++)
        bench_register(&drivers[i]);
}
