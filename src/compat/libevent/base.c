/* SPDX-License-Identifier: MIT */
/* libiomux-event: configurations, bases and the loop. event_base_loop turns the iomux loop
 * once (without waiting while callbacks are queued, or when asked not to), then runs the
 * most urgent non-empty priority queue to its end -- events queued meanwhile at that
 * priority included -- and leaves lower priorities for the next turn, as libevent does. */
#include "event_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

struct event_base *evx_current_base;

struct event_config {
    char **avoid;
    int navoid;
    int require;
    int flags;
};

/* ---- configuration ---- */

EVX_EXPORT struct event_config *event_config_new(void)
{
    return evx_calloc(1, sizeof(struct event_config));
}

EVX_EXPORT void event_config_free(struct event_config *cfg)
{
    if (!cfg)
        return;
    for (int i = 0; i < cfg->navoid; i++)
        evx_free(cfg->avoid[i]);
    evx_free(cfg->avoid);
    evx_free(cfg);
}

EVX_EXPORT int event_config_avoid_method(struct event_config *cfg, const char *method)
{
    if (!cfg || !method)
        return -1;
    size_t len = strlen(method) + 1;
    char *copy = evx_malloc(len);
    char **grown = evx_malloc(sizeof *grown * (size_t)(cfg->navoid + 1));
    if (!copy || !grown) {
        evx_free(copy);
        evx_free(grown);
        return -1;
    }
    memcpy(copy, method, len);
    if (cfg->navoid)
        memcpy(grown, cfg->avoid, sizeof *grown * (size_t)cfg->navoid);
    evx_free(cfg->avoid);
    cfg->avoid = grown;
    cfg->avoid[cfg->navoid++] = copy;
    return 0;
}

EVX_EXPORT int event_config_require_features(struct event_config *cfg, int features)
{
    if (!cfg)
        return -1;
    cfg->require = features;
    return 0;
}

EVX_EXPORT int event_config_set_flag(struct event_config *cfg, int flag)
{
    if (!cfg)
        return -1;
    cfg->flags |= flag;
    return 0;
}

EVX_EXPORT int event_config_set_num_cpus_hint(struct event_config *cfg, int cpus)
{
    (void)cpus;
    return cfg ? 0 : -1;
}

EVX_EXPORT int event_config_set_max_dispatch_interval(struct event_config *cfg,
                                                      const struct timeval *max_interval,
                                                      int max_callbacks, int min_priority)
{
    (void)max_interval, (void)max_callbacks, (void)min_priority;
    return cfg ? 0 : -1;
}

/* ---- backends ---- */

int evx_backend_features(const char *name)
{
#ifdef _WIN32
    /* Windows' backends watch sockets only, as libevent's there; iocp's readiness costs
     * O(1) per event (the AFD driver's poll requests), select's O(n). */
    return strcmp(name, "iocp") == 0 ? EV_FEATURE_O1 : 0;
#endif
    /* Every iomux backend watches any fd: one the kernel cannot poll (a regular file) is
     * reported ready on every turn, as poll does. Only epoll and kqueue (EV_CLEAR) have a
     * real edge trigger. */
    if (strcmp(name, "epoll") == 0 || strcmp(name, "kqueue") == 0)
        return EV_FEATURE_ET | EV_FEATURE_O1 | EV_FEATURE_FDS;
    if (strcmp(name, "uring") == 0)
        return EV_FEATURE_O1 | EV_FEATURE_FDS;
    return EV_FEATURE_FDS;
}

EVX_EXPORT const char **event_get_supported_methods(void)
{
    static const char *methods[16];
    size_t n = 0;
    for (size_t i = 0; n + 1 < sizeof methods / sizeof *methods; i++) {
        const char *name = mux_backend_name(i);
        if (!name)
            break;
        if (mux_backend_probe(name) == 0)
            methods[n++] = name;
    }
    methods[n] = NULL;
    return methods;
}

/* libevent's EVENT_NO<METHOD> variables ("EVENT_NOEPOLL=1") take a backend out. */
static int env_avoids(const char *name)
{
    char var[64] = "EVENT_NO";
    size_t k = strlen(var);
    for (; *name && k + 1 < sizeof var; name++)
        var[k++] = (char)toupper((unsigned char)*name);
    var[k] = '\0';
    return getenv(var) != NULL;
}

static int config_avoids(const struct event_config *cfg, const char *name)
{
    for (int i = 0; cfg && i < cfg->navoid; i++)
        if (strcmp(cfg->avoid[i], name) == 0)
            return 1;
    return 0;
}

/* EV_FEATURE_EARLY_CLOSE is the loop's own to tell (poll has it on Linux only): the loop is
 * opened before it is known, and closed again when it lacks a feature required. */
static int try_backend(struct event_base *base, const char *name, int flags, int require)
{
    int features = evx_backend_features(name);
    if ((features & require & ~EV_FEATURE_EARLY_CLOSE) != (require & ~EV_FEATURE_EARLY_CLOSE))
        return -1;
    mux_loop_options_t opts = {.backend = name, .flags = MUX_LOOP_IGNORE_ENV};
    if (mux_loop_init(&base->loop, &opts) < 0)
        return -1;
    if (mux_io_events_supported(&base->loop) & MUX_RDHUP)
        features |= EV_FEATURE_EARLY_CLOSE;
    if ((features & require) != require) {
        mux_loop_close(&base->loop);
        return -1;
    }
    base->features = features;
    base->flags = flags;
    if (!(flags & EVENT_BASE_FLAG_IGNORE_ENV) && getenv("EVENT_SHOW_METHOD"))
        evx_warn("libevent using: %s", name);
    return 0;
}

/* io_uring is no libevent method: it stands in front of epoll, as the better of what Linux
 * offers. A program that sets EVENT_NOEPOLL (tmux does) gets what libevent would give it,
 * poll, then select: io_uring is passed over too, unless libevent's three methods are all
 * avoided (then it is what is left, as the regression cases ask for it). */
static int env_avoids_uring(void)
{
    return env_avoids("epoll") && !(env_avoids("poll") && env_avoids("select"));
}

/* The backend: IOMUX_BACKEND's when it is set (and the configuration does not avoid it),
 * else the first of iomux's order that neither the configuration nor an EVENT_NO<METHOD>
 * variable avoids and that has the features required. */
static int open_loop(struct event_base *base, const struct event_config *cfg)
{
    int flags = cfg ? cfg->flags : 0, require = cfg ? cfg->require : 0;
    int use_env = !(flags & EVENT_BASE_FLAG_IGNORE_ENV);
    /* As libevent: the variable sets the flag. The base's clock is CLOCK_MONOTONIC either
     * way (iomux's loop reads no coarse clock, and its waits keep nanoseconds), which is what
     * the flag asks libevent for on Linux. */
    if (use_env && getenv("EVENT_PRECISE_TIMER"))
        flags |= EVENT_BASE_FLAG_PRECISE_TIMER;
    const char *want = use_env ? getenv("IOMUX_BACKEND") : NULL;
    if (want && *want && !config_avoids(cfg, want) && try_backend(base, want, flags, require) == 0)
        return 0;
    for (size_t i = 0;; i++) {
        const char *name = mux_backend_name(i);
        if (!name)
            return -1;
        if (config_avoids(cfg, name) || (use_env && env_avoids(name)))
            continue;
        if (use_env && strcmp(name, "uring") == 0 && env_avoids_uring())
            continue;
        if (try_backend(base, name, flags, require) == 0)
            return 0;
    }
}

static void flush_cb(mux_loop_t *loop, mux_prepare_t *w)
{
    (void)w;
    evx_bev_flush_all(loop->data);
}

static void keepalive_cb(mux_loop_t *loop, mux_async_t *w)
{
    (void)loop, (void)w;
}

EVX_EXPORT struct event_base *event_base_new_with_config(const struct event_config *cfg)
{
    struct event_base *base = evx_calloc(1, sizeof *base);
    if (!base)
        return NULL;
    if (open_loop(base, cfg) < 0) {
        evx_free(base);
        return NULL;
    }
    base->loop.data = base;
    base->active = &base->active_one;
    base->npri = 1;
    base->running_pri = -1;
    base->fd_limit = evx_sys_fd_limit();
    /* Always started: it keeps a loop with nothing added waiting (EVLOOP_NO_EXIT_ON_EMPTY),
     * and it is how event_base_loopbreak from another thread wakes the loop. */
    mux_prepare_init(&base->flusher, flush_cb);
    if (mux_async_init(&base->keepalive, keepalive_cb) < 0 ||
        mux_async_start(&base->loop, &base->keepalive) < 0) {
        mux_loop_close(&base->loop);
        evx_free(base);
        return NULL;
    }
    return base;
}

EVX_EXPORT struct event_base *event_base_new(void)
{
    return event_base_new_with_config(NULL);
}

EVX_EXPORT struct event_base *event_init(void)
{
    struct event_base *base = event_base_new();
    if (base)
        evx_current_base = base;
    return base;
}

static void free_events(struct event_base *base)
{
    while (base->added) {
        struct event *ev = base->added;
        evx_del(ev, 0);
        if (ev->ev_x_ & EVX_ONCE)
            evx_free(ev);
    }
    for (int p = 0; p < base->npri; p++)
        while (base->active[p].head) {
            struct event *ev = base->active[p].head;
            evx_unqueue(ev);
            if (ev->ev_x_ & EVX_ONCE)
                evx_free(ev);
        }
}

EVX_EXPORT void event_base_free(struct event_base *base)
{
    if (!base && !(base = evx_current_base))
        return;
    if (base->running_loop) {
        evx_warn("event_base_free: the base is running: free it after event_base_loop returns");
        return;
    }
    free_events(base);
    /* Bufferevents freed just before: their streams close in a turn or two of the loop. */
    for (int turns = 0; base->nclosing && turns < 1000; turns++)
        if (mux_run(&base->loop, MUX_RUN_NOWAIT) < 0)
            break;
    mux_async_stop(&base->loop, &base->keepalive);
    mux_prepare_stop(&base->loop, &base->flusher);
    int r = mux_loop_close(&base->loop);
    if (r < 0) /* bufferevents or listeners not freed keep the loop: it is left open */
        evx_warn("event_base_free: %s: free every bufferevent and listener first", mux_strerror(r));
    else
        evx_free(base->landing); /* a stream left open may still read into it */
    if (base->active != &base->active_one)
        evx_free(base->active);
    if (evx_current_base == base)
        evx_current_base = NULL;
    evx_free(base);
}

EVX_EXPORT void event_base_free_nofinalize(struct event_base *base)
{
    event_base_free(base);
}

EVX_EXPORT const char *event_base_get_method(const struct event_base *base)
{
    return base ? mux_loop_backend(&base->loop) : NULL;
}

EVX_EXPORT const char *event_get_method(void)
{
    return event_base_get_method(evx_current_base);
}

EVX_EXPORT int event_base_get_features(const struct event_base *base)
{
    return base ? base->features : 0;
}

EVX_EXPORT int event_base_priority_init(struct event_base *base, int npri)
{
    if (!base || base->nactive || npri < 1 || npri >= EVENT_MAX_PRIORITIES)
        return -1;
    if (npri == base->npri)
        return 0;
    struct evx_queue *q = &base->active_one;
    if (npri > 1 && !(q = evx_calloc((size_t)npri, sizeof *q)))
        return -1;
    if (base->active != &base->active_one)
        evx_free(base->active);
    base->active = q;
    base->npri = npri;
    base->mid_pri = npri / 2;
    /* Events added meanwhile at a priority that is no more move to the least urgent one. */
    for (struct event *ev = base->added; ev; ev = ev->ev_next_)
        if (ev->ev_pri >= npri)
            ev->ev_pri = (unsigned char)(npri - 1);
    return 0;
}

EVX_EXPORT int event_priority_init(int npri)
{
    return event_base_priority_init(evx_current_base, npri);
}

EVX_EXPORT int event_base_get_npriorities(struct event_base *base)
{
    if (!base && !(base = evx_current_base))
        return 0;
    return base->npri;
}

EVX_EXPORT int event_reinit(struct event_base *base)
{
    if (!base)
        return -1;
    int r = mux_loop_fork(&base->loop);
    if (r < 0) {
        evx_warn("event_reinit: %s", mux_strerror(r));
        return -1;
    }
    return 0;
}

/* ---- running ---- */

/* event_base_loopbreak may set the flag from another thread. */
static int breaking(const struct event_base *base)
{
    return __atomic_load_n(&base->gotbreak, __ATOMIC_ACQUIRE);
}

static void run_one(struct event_base *base, struct event *ev, short res, short ncalls)
{
    base->running = ev;
    if (!(ev->ev_events & EV_SIGNAL) && !(ev->ev_x_ & EVX_ONCE)) { /* the common case */
        ev->ev_callback(ev->ev_fd, res, ev->ev_arg);
        base->running = NULL;
        return;
    }
    /* A signal that arrived n times (or was activated with ncalls n) runs n callbacks unless
     * event_del, loopbreak or a free stops them; nothing of `ev` is read after the last. */
    short left = ncalls > 0 ? ncalls : 1;
    event_callback_fn cb = ev->ev_callback;
    evutil_socket_t fd = ev->ev_fd;
    void *arg = ev->ev_arg;
    int once = ev->ev_x_ & EVX_ONCE;
    base->pncalls = &left;
    for (;;) {
        left--;
        cb(fd, res, arg);
        if (left <= 0 || breaking(base))
            break;
        cb = ev->ev_callback, arg = ev->ev_arg;
    }
    base->running = NULL;
    base->pncalls = NULL;
    if (once)
        evx_free(ev);
}

/* Runs the most urgent non-empty queue. Returns the callbacks run, or -1 on loopbreak. */
static int run_active(struct event_base *base)
{
    for (int p = 0; p < base->npri; p++) {
        struct evx_queue *q = &base->active[p];
        if (!q->head)
            continue;
        int n = 0;
        base->running_pri = p;
        for (struct event *ev; (ev = q->head);) {
            short ncalls = ev->ev_ncalls_, res = ev->ev_res;
            /* evx_unqueue of the head, inline */
            if ((q->head = ev->ev_active_next_))
                q->head->ev_active_prev_ = NULL;
            else
                q->tail = NULL;
            ev->ev_flags &= (unsigned short)~EVLIST_ACTIVE;
            ev->ev_ncalls_ = 0;
            base->nactive--;
            if (!(ev->ev_events & EV_PERSIST))
                evx_del(ev, 0);
            else if ((ev->ev_flags & EVLIST_TIMEOUT) && !(res & EV_TIMEOUT))
                mux_timer_again(&base->loop, &ev->ev_timer_); /* the timeout counts from now */
            n++;
            run_one(base, ev, res, ncalls);
            if (breaking(base) || base->docontinue)
                break;
        }
        base->running_pri = -1;
        return breaking(base) ? -1 : n;
    }
    return 0;
}

EVX_EXPORT int event_base_loop(struct event_base *base, int flags)
{
    if (!base && !(base = evx_current_base))
        return -1;
    if (base->running_loop) {
        evx_warn("event_base_loop: reentrant invocation. Only one event_base_loop can run on "
                 "each event_base at once.");
        return -1;
    }
    base->running_loop = 1;
    base->gotterm = 0;
    __atomic_store_n(&base->gotbreak, 0, __ATOMIC_RELAXED);
    int ret = 0;
    for (;;) {
        base->docontinue = 0;
        if (base->gotterm || breaking(base))
            break;
        int nowait = (flags & EVLOOP_NONBLOCK) || base->nactive;
        if (base->nadded == base->ninternal && !base->nactive && !base->nbusy &&
            !(flags & EVLOOP_NO_EXIT_ON_EMPTY)) {
            ret = 1;
            break;
        }
        base->tv_cache_set = 0;
        base->ndirect = 0;
        int r = mux_run(&base->loop, nowait ? MUX_RUN_NOWAIT : MUX_RUN_ONCE);
        if (r < 0) {
            evx_warn("event_base_loop: %s", mux_strerror(r));
            ret = -1;
            break;
        }
        /* Callbacks ran in the turn itself (io events of a one-priority base, bufferevents)
         * or from the queue now: as libevent, EVLOOP_ONCE ends once some ran and none is
         * left, EVLOOP_NONBLOCK once a turn found nothing to run. One that ran in the turn
         * and broke the loop is the last: what the turn queued waits for the next loop. */
        int ran = base->ndirect > 0;
        if (base->nactive && !breaking(base) && run_active(base) > 0)
            ran = 1;
        if ((flags & EVLOOP_ONCE) && !base->nactive && ran)
            break;
        if ((flags & EVLOOP_NONBLOCK) && !ran)
            break;
    }
    base->tv_cache_set = 0;
    base->running_loop = 0;
    return ret;
}

EVX_EXPORT int event_base_dispatch(struct event_base *base)
{
    return event_base_loop(base, 0);
}

EVX_EXPORT int event_dispatch(void)
{
    return event_base_loop(evx_current_base, 0);
}

EVX_EXPORT int event_loop(int flags)
{
    return event_base_loop(evx_current_base, flags);
}

static void loopexit_cb(evutil_socket_t fd, short what, void *arg)
{
    struct event_base *base = arg;
    (void)fd, (void)what;
    base->gotterm = 1;
}

EVX_EXPORT int event_base_loopexit(struct event_base *base, const struct timeval *tv)
{
    if (!base && !(base = evx_current_base))
        return -1;
    return event_base_once(base, -1, EV_TIMEOUT, loopexit_cb, base, tv);
}

EVX_EXPORT int event_loopexit(const struct timeval *tv)
{
    return event_base_loopexit(evx_current_base, tv);
}

EVX_EXPORT int event_base_loopbreak(struct event_base *base)
{
    if (!base && !(base = evx_current_base))
        return -1;
    /* The one call that may come from another thread (evthread_use_pthreads programs stop
     * their loop this way): a flag the loop reads, and the loop's wake-up. */
    __atomic_store_n(&base->gotbreak, 1, __ATOMIC_RELEASE);
    mux_async_send(&base->keepalive);
    return 0;
}

EVX_EXPORT int event_loopbreak(void)
{
    return event_base_loopbreak(evx_current_base);
}

EVX_EXPORT int event_base_loopcontinue(struct event_base *base)
{
    if (!base)
        return -1;
    base->docontinue = 1;
    return 0;
}

EVX_EXPORT int event_base_got_exit(struct event_base *base)
{
    return base ? base->gotterm : 0;
}

EVX_EXPORT int event_base_got_break(struct event_base *base)
{
    return base ? breaking(base) : 0;
}

EVX_EXPORT int event_base_once(struct event_base *base, evutil_socket_t fd, short events,
                               event_callback_fn cb, void *arg, const struct timeval *tv)
{
    if (!base || !cb || (events & (EV_SIGNAL | EV_PERSIST)))
        return -1;
    int timer_only = (events & (EV_TIMEOUT | EV_READ | EV_WRITE | EV_CLOSED)) == EV_TIMEOUT;
    if (!timer_only && !(events & (EV_READ | EV_WRITE | EV_CLOSED)))
        return -1;
    struct event *ev = evx_calloc(1, sizeof *ev);
    if (!ev)
        return -1;
    short what = timer_only ? 0 : (short)(events & (EV_READ | EV_WRITE | EV_CLOSED));
    if (event_assign(ev, base, timer_only ? -1 : fd, what, cb, arg) < 0) {
        evx_free(ev);
        return -1;
    }
    ev->ev_x_ |= EVX_ONCE;
    if (timer_only && (!tv || !evutil_timerisset(tv))) {
        evx_activate(ev, EV_TIMEOUT);
        return 0;
    }
    if (event_add(ev, tv) < 0) {
        evx_free(ev);
        return -1;
    }
    return 0;
}

EVX_EXPORT int event_once(evutil_socket_t fd, short events,
                          void (*cb)(evutil_socket_t, short, void *), void *arg,
                          const struct timeval *tv)
{
    return event_base_once(evx_current_base, fd, events, cb, arg, tv);
}

EVX_EXPORT int event_base_gettimeofday_cached(struct event_base *base, struct timeval *tv)
{
    if (!base && !(base = evx_current_base))
        return evutil_gettimeofday(tv, NULL);
    if (!base->running_loop || (base->flags & EVENT_BASE_FLAG_NO_CACHE_TIME))
        return evutil_gettimeofday(tv, NULL);
    /* The time of this turn of the loop: read the first time someone asks for it. */
    if (!base->tv_cache_set) {
        evutil_gettimeofday(&base->tv_cache, NULL);
        base->tv_cache_set = 1;
    }
    *tv = base->tv_cache;
    return 0;
}

EVX_EXPORT int event_base_update_cache_time(struct event_base *base)
{
    if (!base && !(base = evx_current_base))
        return -1;
    if (base->running_loop && !(base->flags & EVENT_BASE_FLAG_NO_CACHE_TIME)) {
        evutil_gettimeofday(&base->tv_cache, NULL);
        base->tv_cache_set = 1;
    }
    mux_now_update(&base->loop);
    return 0;
}

EVX_EXPORT struct event *event_base_get_running_event(struct event_base *base)
{
    return base ? base->running : NULL;
}

EVX_EXPORT const struct timeval *event_base_init_common_timeout(struct event_base *base,
                                                                const struct timeval *duration)
{
    /* A common timeout is an optimisation for many timeouts of one duration; iomux's timer
     * heap needs none, so the duration itself is handed back, kept in the base. */
    if (!base || !duration || duration->tv_sec < 0 || duration->tv_usec < 0)
        return NULL;
    struct timeval d = {.tv_sec = duration->tv_sec + duration->tv_usec / 1000000,
                        .tv_usec = duration->tv_usec % 1000000};
    duration = &d;
    for (int i = 0; i < base->ncommon; i++)
        if (!evutil_timercmp(&base->common[i], duration, !=))
            return &base->common[i];
    if (base->ncommon == (int)(sizeof base->common / sizeof *base->common))
        return NULL;
    base->common[base->ncommon] = *duration;
    return &base->common[base->ncommon++];
}

/* ---- looking at the events ---- */

EVX_EXPORT int event_base_get_num_events(struct event_base *base, unsigned int flags)
{
    if (!base)
        return -1;
    int n = 0;
    if (flags & EVENT_BASE_COUNT_ACTIVE)
        n += base->nactive;
    if (flags & EVENT_BASE_COUNT_VIRTUAL)
        n += base->nvirtual;
    if (flags & EVENT_BASE_COUNT_ADDED)
        n += base->nadded - base->ninternal;
    return n;
}

EVX_EXPORT int event_base_get_max_events(struct event_base *base, unsigned int flags, int clear)
{
    if (!base)
        return -1;
    int n = 0;
    if (flags & EVENT_BASE_COUNT_ACTIVE) {
        n += base->max_active;
        if (clear)
            base->max_active = 0;
    }
    if (flags & EVENT_BASE_COUNT_ADDED) {
        n += base->max_added;
        if (clear)
            base->max_added = 0;
    }
    return n;
}

EVX_EXPORT int event_base_foreach_event(struct event_base *base, event_base_foreach_event_cb fn,
                                        void *arg)
{
    if (!base || !fn)
        return -1;
    for (struct event *ev = base->added; ev; ev = ev->ev_next_) {
        if (ev->ev_flags & EVX_INTERNAL)
            continue;
        int r = fn(base, ev, arg);
        if (r)
            return r;
    }
    /* Events that are active without being added: event_active on an idle event. */
    for (int p = 0; p < base->npri; p++)
        for (struct event *ev = base->active[p].head; ev; ev = ev->ev_active_next_) {
            if (ev->ev_flags & (EVLIST_INSERTED | EVLIST_TIMEOUT | EVX_INTERNAL))
                continue;
            int r = fn(base, ev, arg);
            if (r)
                return r;
        }
    return 0;
}

/* event_base_dump_events writes libevent's format, which programs and libevent's own
 * checker (test/check-dumpevents.py) read: the inserted events with their timeouts on the
 * wall clock, then the active ones with their priority and what they are active for. The
 * library's own events are listed too, marked Internal, as libevent lists its own. */
static void dump_inserted(FILE *f, const struct event *ev)
{
    if (!(ev->ev_flags & (EVLIST_INSERTED | EVLIST_TIMEOUT)))
        return;
    fprintf(f, "  %p [%s %d]%s%s%s%s%s%s%s", (const void *)ev,
            ev->ev_events & EV_SIGNAL ? "sig" : "fd ", (int)ev->ev_fd,
            ev->ev_events & EV_READ ? " Read" : "", ev->ev_events & EV_WRITE ? " Write" : "",
            ev->ev_events & EV_CLOSED ? " EOF" : "", ev->ev_events & EV_SIGNAL ? " Signal" : "",
            ev->ev_events & EV_PERSIST ? " Persist" : "", ev->ev_events & EV_ET ? " ET" : "",
            ev->ev_flags & EVLIST_INTERNAL ? " Internal" : "");
    struct timeval tv;
    if ((ev->ev_flags & EVLIST_TIMEOUT) && event_pending(ev, EV_TIMEOUT, &tv))
        fprintf(f, " Timeout=%ld.%06d", (long)tv.tv_sec, (int)tv.tv_usec);
    fputc('\n', f);
}

static void dump_active(FILE *f, const struct event *ev)
{
    if (!(ev->ev_flags & EVLIST_ACTIVE))
        return;
    fprintf(f, "  %p [%s %d, priority=%d]%s%s%s%s%s active%s\n", (const void *)ev,
            ev->ev_events & EV_SIGNAL ? "sig" : "fd ", (int)ev->ev_fd, (int)ev->ev_pri,
            ev->ev_res & EV_READ ? " Read" : "", ev->ev_res & EV_WRITE ? " Write" : "",
            ev->ev_res & EV_CLOSED ? " EOF" : "", ev->ev_res & EV_SIGNAL ? " Signal" : "",
            ev->ev_res & EV_TIMEOUT ? " Timeout" : "",
            ev->ev_flags & EVLIST_INTERNAL ? " [Internal]" : "");
}

/* Every added event, then those active without being added, internal ones included. */
static void dump_each(const struct event_base *base, FILE *f,
                      void (*fn)(FILE *, const struct event *))
{
    for (const struct event *ev = base->added; ev; ev = ev->ev_next_)
        fn(f, ev);
    for (int p = 0; p < base->npri; p++)
        for (const struct event *ev = base->active[p].head; ev; ev = ev->ev_active_next_)
            if (!(ev->ev_flags & (EVLIST_INSERTED | EVLIST_TIMEOUT)))
                fn(f, ev);
}

EVX_EXPORT void event_base_dump_events(struct event_base *base, FILE *f)
{
    if (!base || !f)
        return;
    fprintf(f, "Inserted events:\n");
    dump_each(base, f, dump_inserted);
    fprintf(f, "Active events:\n");
    dump_each(base, f, dump_active);
}

EVX_EXPORT void event_base_active_by_fd(struct event_base *base, evutil_socket_t fd, short events)
{
    if (!base)
        return;
    for (struct event *ev = base->added; ev; ev = ev->ev_next_) {
        if (ev->ev_fd != fd || (ev->ev_events & EV_SIGNAL))
            continue;
        if (events & EV_TIMEOUT) {
            if (ev->ev_flags & EVLIST_TIMEOUT)
                evx_activate(ev, EV_TIMEOUT);
        } else if ((ev->ev_flags & EVLIST_INSERTED) &&
                   (ev->ev_events & events & (EV_READ | EV_WRITE | EV_CLOSED))) {
            evx_activate(ev, (short)(ev->ev_events & events & (EV_READ | EV_WRITE | EV_CLOSED)));
        }
    }
}

EVX_EXPORT void event_base_active_by_signal(struct event_base *base, int sig)
{
    if (!base)
        return;
    for (struct event *ev = base->added; ev; ev = ev->ev_next_)
        if ((ev->ev_flags & EVLIST_INSERTED) && (ev->ev_events & EV_SIGNAL) && ev->ev_fd == sig) {
            ev->ev_ncalls_++;
            evx_activate(ev, EV_SIGNAL);
        }
}

/* libevent's internal consistency check, which its regression tests call: the lists and
 * counters must agree. Aborts with a message when they do not. */
EVX_EXPORT void event_base_assert_ok_(struct event_base *base);
EVX_EXPORT void event_base_assert_ok_(struct event_base *base)
{
    int added = 0, active = 0;
    for (struct event *ev = base->added; ev; ev = ev->ev_next_) {
        if (!(ev->ev_flags & (EVLIST_INSERTED | EVLIST_TIMEOUT)) || ev->ev_base != base ||
            (ev->ev_next_ && ev->ev_next_->ev_prev_ != ev))
            evx_fatal("event_base_assert_ok_: the added list is broken at %p", (void *)ev);
        added++;
    }
    for (int p = 0; p < base->npri; p++) {
        struct event *prev = NULL;
        for (struct event *ev = base->active[p].head; ev; prev = ev, ev = ev->ev_active_next_) {
            if (!(ev->ev_flags & EVLIST_ACTIVE) || ev->ev_pri != p || ev->ev_active_prev_ != prev)
                evx_fatal("event_base_assert_ok_: active queue %d is broken at %p", p, (void *)ev);
            active++;
        }
        if (base->active[p].tail != prev)
            evx_fatal("event_base_assert_ok_: active queue %d has the wrong tail", p);
    }
    if (added != base->nadded || active != base->nactive)
        evx_fatal("event_base_assert_ok_: %d added and %d active counted, %d and %d recorded",
                  added, active, base->nadded, base->nactive);
}
