/* SPDX-License-Identifier: MIT */
/* bench/libev-compat: the libevent 2.x calls that libevent's test/bench.c and
 * test/bench_cascade.c make, on top of libev's libevent 1.4 emulation (Debian's
 * libev-libevent-dev: an <event.h> over libev.so, which exports libevent's 1.4 names).
 * bench/libevent_study.py puts this directory first and the directory holding libev's
 * <event.h> second on the include path, so that both programs compile unchanged.
 *
 *   event_assign                  event_set + event_base_set, as libevent 1.4 programs do
 *   event_config_new, _free,      a set of libev backends to avoid
 *   event_config_avoid_method
 *   event_base_new_with_config    ev_loop_new with the backends not avoided; LIBEV_FLAGS in the
 *                                 environment overrides that, as in libev itself. NULL (and a
 *                                 line on stderr) when libev opened an avoided backend
 *   event_get_supported_methods   the names of ev_supported_backends()
 *   event_init                    libev's
 *
 * event_base_new_with_config and event_init print "libev-compat: libev 4.33 using: <backend>"
 * on stderr when EVENT_SHOW_METHOD is set, as libevent does ("libevent using: epoll"). libev's
 * <event.h> is reached with #include_next (GCC and Clang).
 *
 * libev's emulation does not restart a persistent event's timeout when the event fires (its
 * timeout is an ev_timer started by event_add alone); libevent 2.x does. */
#ifndef BENCH_LIBEV_COMPAT_EVENT_H
#define BENCH_LIBEV_COMPAT_EVENT_H

#include <evutil.h>

#include_next <event.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    unsigned int flag;
} bench_libev_backends[] = {
    {"epoll", EVBACKEND_EPOLL},       {"io_uring", EVBACKEND_IOURING},
    {"linuxaio", EVBACKEND_LINUXAIO}, {"kqueue", EVBACKEND_KQUEUE},
    {"devpoll", EVBACKEND_DEVPOLL},   {"port", EVBACKEND_PORT},
    {"poll", EVBACKEND_POLL},         {"select", EVBACKEND_SELECT},
};
#define BENCH_LIBEV_NBACKENDS (sizeof bench_libev_backends / sizeof bench_libev_backends[0])

static inline const char *bench_libev_backend_name(unsigned int flag)
{
    for (size_t i = 0; i < BENCH_LIBEV_NBACKENDS; i++)
        if (bench_libev_backends[i].flag == flag)
            return bench_libev_backends[i].name;
    return "?";
}

/* libevent's EVENT_SHOW_METHOD, for the loop libev opened. */
static inline void bench_libev_show(void *base)
{
    if (base && getenv("EVENT_SHOW_METHOD"))
        fprintf(stderr, "libev-compat: libev %d.%d using: %s\n", ev_version_major(),
                ev_version_minor(), bench_libev_backend_name(ev_backend((struct ev_loop *)base)));
}

static inline int event_assign(struct event *ev, struct event_base *base, evutil_socket_t fd,
                               short events, event_callback_fn cb, void *arg)
{
    event_set(ev, fd, events, cb, arg);
    return event_base_set(base, ev);
}

struct event_config {
    unsigned int avoid; /* EVBACKEND_* flags */
};

static inline struct event_config *event_config_new(void)
{
    return (struct event_config *)calloc(1, sizeof(struct event_config));
}

static inline void event_config_free(struct event_config *cfg)
{
    free(cfg);
}

static inline int event_config_avoid_method(struct event_config *cfg, const char *method)
{
    for (size_t i = 0; i < BENCH_LIBEV_NBACKENDS; i++)
        if (strcmp(bench_libev_backends[i].name, method) == 0) {
            cfg->avoid |= bench_libev_backends[i].flag;
            return 0;
        }
    return -1;
}

static inline const char **event_get_supported_methods(void)
{
    static const char *methods[BENCH_LIBEV_NBACKENDS + 1];
    size_t n = 0;
    for (size_t i = 0; i < BENCH_LIBEV_NBACKENDS; i++)
        if (ev_supported_backends() & bench_libev_backends[i].flag)
            methods[n++] = bench_libev_backends[i].name;
    methods[n] = NULL;
    return methods;
}

static inline struct event_base *event_base_new_with_config(const struct event_config *cfg)
{
    unsigned int allowed = ev_supported_backends() & ~(cfg ? cfg->avoid : 0u);
    struct ev_loop *loop = ev_loop_new(allowed);
    if (!loop)
        return NULL;
    if (!(ev_backend(loop) & allowed)) {
        fprintf(stderr, "libev-compat: libev opened backend %s, which the configuration "
                "avoids (LIBEV_FLAGS=%s)\n", bench_libev_backend_name(ev_backend(loop)),
                getenv("LIBEV_FLAGS") ? getenv("LIBEV_FLAGS") : "unset");
        ev_loop_destroy(loop);
        return NULL;
    }
    bench_libev_show(loop);
    return (struct event_base *)loop;
}

static inline void *bench_libev_event_init(void)
{
    void *base = (event_init)();
    bench_libev_show(base);
    return base;
}
#define event_init() bench_libev_event_init()

#endif
