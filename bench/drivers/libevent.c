/* SPDX-License-Identifier: MIT */
/* libevent 2.1 through its event2 API, on its epoll backend (others avoided, then
 * checked). Re-arming is event_del + event_add. The idle timeout is libevent's own idiom:
 * a persistent read event added with a timeout, which libevent restarts by itself every
 * time the event becomes active, so the callback makes no extra call. */
#include "../harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    (void)variant;
    for (const char **m = event_get_supported_methods(); m && *m; m++)
        if (strcmp(*m, "epoll") == 0)
            return NULL;
    return "libevent built without epoll";
}

/* Debian's libev exports event_add & co. too: check that ours resolve into libevent. */
static int identify(const char *variant, char *buf, size_t len)
{
    Dl_info a = {0}, b = {0};
    (void)variant;
    dladdr((void *)(uintptr_t)event_base_loop, &a);
    dladdr((void *)(uintptr_t)event_add, &b);
    const char *wa = a.dli_fname ? a.dli_fname : "?", *wb = b.dli_fname ? b.dli_fname : "?";
    int ok = strstr(wa, "libevent") && strstr(wb, "libevent") &&
             strncmp(event_get_version(), "2.1", 3) == 0;
    snprintf(buf, len, "libevent %s, epoll (%s)%s", event_get_version(), wa,
             ok ? "" : ": event_add or event_base_loop is not libevent 2.1's");
    return ok ? 0 : -1;
}

static int open_(const char *variant, const struct bench_setup *s)
{
    (void)variant;
    struct event_config *cfg = event_config_new();
    if (!cfg)
        return -ENOMEM;
    event_config_avoid_method(cfg, "select");
    event_config_avoid_method(cfg, "poll");
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!base)
        return -ENOMEM;
    if (strcmp(event_base_get_method(base), "epoll") != 0)
        bench_fail("libevent opened %s, not epoll", event_base_get_method(base));
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

static const struct bench_driver driver = {
    .name = "libevent", .unavailable = unavailable, .identify = identify, .open = open_,
    .start = start, .stop = stop, .dispatch = dispatch, .close = close_};

__attribute__((constructor)) static void register_driver(void)
{
    bench_register(&driver);
}
