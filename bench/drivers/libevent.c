/* SPDX-License-Identifier: MIT */
/* libevent 2.1 through its event2 API, on its epoll backend (the other methods avoided, then
 * checked). Re-arming is event_del + event_add. The idle timeout is libevent's own idiom:
 * a persistent read event added with a timeout, which libevent restarts by itself every
 * time the event becomes active, so the callback makes no extra call.
 *
 * Compiled a second time with BENCH_IOMUX_EVENT defined, against libiomux-event (iomux's
 * libevent 2.1 emulation, include/iomux/event2/, linked statically): the same code, so the
 * difference between the drivers "libevent" and "iomux-event-<backend>" is the library, and
 * between "iomux-event-<backend>" and "iomux-<backend>" the cost of the emulation. There it
 * is one driver per iomux backend (epoll, uring), each forced by avoiding every other method
 * of event_get_supported_methods(), as libevent's own test/bench.c -m does. */
#include "../harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef BENCH_IOMUX_EVENT
#include <iomux.h>
#define LIBRARY "libiomux-event"
#else
#define LIBRARY "libevent"
#endif

static const struct bench_setup *setup;
static struct event_base *base;
static struct event **events;
static struct timeval *timeout;

static void on_event(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    if (what & EV_TIMEOUT)
        bench_timer_fired((size_t)(uintptr_t)arg);
    if (what & EV_READ)
        bench_readable((size_t)(uintptr_t)arg);
}

static const char *unavailable(const char *variant)
{
    static char why[96];
    for (const char **m = event_get_supported_methods(); m && *m; m++)
        if (strcmp(*m, variant) == 0)
            return NULL;
    snprintf(why, sizeof why, LIBRARY ": no method %s in event_get_supported_methods()",
             variant);
    return why;
}

#ifdef BENCH_IOMUX_EVENT
/* libiomux-event is linked statically, so its functions lie in this executable, where
 * dladdr() names the executable: check instead that event_add and event_base_loop lie in the
 * same object as iomux's own mux_run (both archives are linked into this executable), and
 * that neither libevent nor libev (whose libev.so exports event_add & co. too) is loaded. */
static int identify(const char *variant, char *buf, size_t len)
{
    static const char *const foreign[] = {"libevent-2.1.so.7", "libevent_core-2.1.so.7",
                                          "libev.so.4"};
    Dl_info a = {0}, b = {0}, m = {0};
    dladdr((void *)(uintptr_t)event_add, &a);
    dladdr((void *)(uintptr_t)event_base_loop, &b);
    dladdr((void *)(uintptr_t)mux_run, &m);
    const char *loaded = NULL;
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0] && !loaded; i++) {
        void *h = dlopen(foreign[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            loaded = foreign[i];
            dlclose(h);
        }
    }
    const char *where = m.dli_fname ? m.dli_fname : "?";
    int same = a.dli_fbase && a.dli_fbase == m.dli_fbase && b.dli_fbase == m.dli_fbase;
    int ok = same && !loaded && strncmp(event_get_version(), "2.1", 3) == 0;
    snprintf(buf, len, "libiomux-event (libevent %s API) on iomux %s, backend %s, static (%s)%s%s",
             event_get_version(), mux_version_string(), variant, where,
             same ? "" : ": event_add or event_base_loop is not in the object iomux is in",
             loaded ? ": a libevent or libev shared object is loaded" : "");
    return ok ? 0 : -1;
}
#else
/* Debian's libev exports event_add & co. too: check that ours resolve into libevent. */
static int identify(const char *variant, char *buf, size_t len)
{
    Dl_info a = {0}, b = {0};
    dladdr((void *)(uintptr_t)event_base_loop, &a);
    dladdr((void *)(uintptr_t)event_add, &b);
    const char *wa = a.dli_fname ? a.dli_fname : "?", *wb = b.dli_fname ? b.dli_fname : "?";
    int ok = strstr(wa, "libevent") && strstr(wb, "libevent") &&
             strncmp(event_get_version(), "2.1", 3) == 0;
    snprintf(buf, len, "libevent %s, %s (%s)%s", event_get_version(), variant, wa,
             ok ? "" : ": event_add or event_base_loop is not libevent 2.1's");
    return ok ? 0 : -1;
}
#endif

static int open_(const char *variant, const struct bench_setup *s)
{
    struct event_config *cfg = event_config_new();
    if (!cfg)
        return -ENOMEM;
    for (const char **m = event_get_supported_methods(); m && *m; m++)
        if (strcmp(*m, variant) != 0)
            event_config_avoid_method(cfg, *m);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!base)
        return -ENOMEM;
    if (strcmp(event_base_get_method(base), variant) != 0)
        bench_fail(LIBRARY " opened %s, not %s", event_base_get_method(base), variant);
    setup = s;
    events = calloc(s->n, sizeof *events);
    timeout = calloc(s->n, sizeof *timeout);
    if (!events || !timeout)
        return -ENOMEM;
    for (size_t i = 0; i < s->n; i++) {
        events[i] = event_new(base, s->fd[i], EV_READ | EV_PERSIST, on_event, (void *)(uintptr_t)i);
        if (!events[i])
            return -ENOMEM;
        if (s->timeouts)
            timeout[i] = (struct timeval){.tv_sec = (time_t)(s->timeout_ns[i] / 1000000000u),
                                          .tv_usec = (long)(s->timeout_ns[i] % 1000000000u / 1000)};
    }
    return 0;
}

static int start(size_t i)
{
    return event_add(events[i], setup->timeouts ? &timeout[i] : NULL) < 0 ? -EINVAL : 0;
}

static int stop(size_t i)
{
    return event_del(events[i]) < 0 ? -EINVAL : 0;
}

static int dispatch(void)
{
    /* ONCE | NONBLOCK: one pass, as libevent's own bench.c runs it. */
    return event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK) < 0 ? -EIO : 0;
}

static int close_(void)
{
    for (size_t i = 0; i < setup->n; i++)
        event_free(events[i]);
    event_base_free(base);
    free(events);
    free(timeout);
    return 0;
}

#define LIBEVENT_DRIVER(driver_name, backend)                                              \
    {.name = driver_name, .variant = backend, .unavailable = unavailable,                  \
     .identify = identify, .open = open_, .start = start, .stop = stop, .dispatch = dispatch, \
     .close = close_}

static const struct bench_driver drivers[] = {
#ifdef BENCH_IOMUX_EVENT
    LIBEVENT_DRIVER("iomux-event-epoll", "epoll"), LIBEVENT_DRIVER("iomux-event-uring", "uring"),
#else
    LIBEVENT_DRIVER("libevent", "epoll"),
#endif
};

__attribute__((constructor)) static void register_drivers(void)
{
    for (size_t i = 0; i < sizeof drivers / sizeof drivers[0]; i++)
        bench_register(&drivers[i]);
}
