/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: the core API of <event2/event.h>, on an iomux loop.
 *
 * A program written against libevent 2.1's <event2/event.h> builds against this header
 * unchanged and links with -liomux-event (pkg-config iomux-event). docs/libevent.md says what
 * is emulated, what differs and why. In short: an event_base is one iomux loop, owned by one
 * thread; events are iomux watchers (io, signal, timer) whose callbacks are queued by
 * priority and run the way libevent runs them (only the most urgent non-empty priority per
 * iteration; a persistent event's timeout restarted on every activation). Functions return
 * what libevent's return: 0 or -1 (with a warning through event_set_log_callback), NULL. */
#ifndef IOMUX_EVENT2_EVENT_H_INCLUDED_
#define IOMUX_EVENT2_EVENT_H_INCLUDED_

#include <event2/visibility.h>
#include <event2/util.h>

#include <stdio.h>
#include <sys/time.h>

#ifdef __cplusplus
extern "C" {
#endif

struct event_base;
struct event;
struct event_config;

/* What an event waits for, and what its callback is told. */
#define EV_TIMEOUT 0x01
#define EV_READ 0x02
#define EV_WRITE 0x04
#define EV_SIGNAL 0x08
#define EV_PERSIST 0x10
#define EV_ET 0x20
#define EV_FINALIZE 0x40
#define EV_CLOSED 0x80

/* event_base_loop flags. */
#define EVLOOP_ONCE 0x01
#define EVLOOP_NONBLOCK 0x02
#define EVLOOP_NO_EXIT_ON_EMPTY 0x04

/* Backend features (event_base_get_features, event_config_require_features). */
enum event_method_feature {
    EV_FEATURE_ET = 0x01,
    EV_FEATURE_O1 = 0x02,
    EV_FEATURE_FDS = 0x04,
    EV_FEATURE_EARLY_CLOSE = 0x08,
};

/* event_config_set_flag flags. */
enum event_base_config_flag {
    EVENT_BASE_FLAG_NOLOCK = 0x01,
    EVENT_BASE_FLAG_IGNORE_ENV = 0x02,
    EVENT_BASE_FLAG_STARTUP_IOCP = 0x04,
    EVENT_BASE_FLAG_NO_CACHE_TIME = 0x08,
    EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST = 0x10,
    EVENT_BASE_FLAG_PRECISE_TIMER = 0x20,
};

#define EVENT_MAX_PRIORITIES 256

#define EVENT_LOG_DEBUG 0
#define EVENT_LOG_MSG 1
#define EVENT_LOG_WARN 2
#define EVENT_LOG_ERR 3
#define _EVENT_LOG_DEBUG EVENT_LOG_DEBUG
#define _EVENT_LOG_MSG EVENT_LOG_MSG
#define _EVENT_LOG_WARN EVENT_LOG_WARN
#define _EVENT_LOG_ERR EVENT_LOG_ERR
#define EVENT_DBG_NONE 0
#define EVENT_DBG_ALL 0xffffffffu

#define EVENT_BASE_COUNT_ACTIVE 1U
#define EVENT_BASE_COUNT_VIRTUAL 2U
#define EVENT_BASE_COUNT_ADDED 4U

typedef void (*event_callback_fn)(evutil_socket_t, short, void *);
typedef void (*event_finalize_callback_fn)(struct event *, void *);
typedef void (*event_log_cb)(int severity, const char *msg);
typedef void (*event_fatal_cb)(int err);
typedef int (*event_base_foreach_event_cb)(const struct event_base *, const struct event *,
                                           void *);

/* ---- configuration ---- */
EVENT2_EXPORT_SYMBOL struct event_config *event_config_new(void);
EVENT2_EXPORT_SYMBOL void event_config_free(struct event_config *cfg);
/* Never use the backend named `method` ("epoll", "uring", "poll", "select"). */
EVENT2_EXPORT_SYMBOL int event_config_avoid_method(struct event_config *cfg, const char *method);
EVENT2_EXPORT_SYMBOL int event_config_require_features(struct event_config *cfg, int feature);
EVENT2_EXPORT_SYMBOL int event_config_set_flag(struct event_config *cfg, int flag);
EVENT2_EXPORT_SYMBOL int event_config_set_num_cpus_hint(struct event_config *cfg, int cpus);
EVENT2_EXPORT_SYMBOL int event_config_set_max_dispatch_interval(struct event_config *cfg,
                                                                const struct timeval *max_interval,
                                                                int max_callbacks,
                                                                int min_priority);

/* ---- bases ---- */
EVENT2_EXPORT_SYMBOL struct event_base *event_base_new(void);
EVENT2_EXPORT_SYMBOL struct event_base *event_base_new_with_config(const struct event_config *cfg);
/* Frees the base. Events still added are deleted (not freed) first. */
EVENT2_EXPORT_SYMBOL void event_base_free(struct event_base *base);
EVENT2_EXPORT_SYMBOL void event_base_free_nofinalize(struct event_base *base);
EVENT2_EXPORT_SYMBOL const char *event_base_get_method(const struct event_base *base);
EVENT2_EXPORT_SYMBOL const char **event_get_supported_methods(void);
EVENT2_EXPORT_SYMBOL int event_base_get_features(const struct event_base *base);
EVENT2_EXPORT_SYMBOL int event_base_priority_init(struct event_base *base, int npriorities);
EVENT2_EXPORT_SYMBOL int event_base_get_npriorities(struct event_base *base);
/* In a child after fork(): re-creates the base's kernel state. Returns 0 or -1. */
EVENT2_EXPORT_SYMBOL int event_reinit(struct event_base *base);
EVENT2_EXPORT_SYMBOL int event_base_get_num_events(struct event_base *base, unsigned int flags);
EVENT2_EXPORT_SYMBOL int event_base_get_max_events(struct event_base *base, unsigned int flags,
                                                   int clear);
EVENT2_EXPORT_SYMBOL void event_base_dump_events(struct event_base *base, FILE *f);
EVENT2_EXPORT_SYMBOL const struct timeval *
event_base_init_common_timeout(struct event_base *base, const struct timeval *duration);

/* ---- running ---- */
EVENT2_EXPORT_SYMBOL int event_base_dispatch(struct event_base *base);
/* Returns 0, 1 when no events were left to wait for, -1 on error (a reentrant call). */
EVENT2_EXPORT_SYMBOL int event_base_loop(struct event_base *base, int flags);
EVENT2_EXPORT_SYMBOL int event_base_loopexit(struct event_base *base, const struct timeval *tv);
EVENT2_EXPORT_SYMBOL int event_base_loopbreak(struct event_base *base);
EVENT2_EXPORT_SYMBOL int event_base_loopcontinue(struct event_base *base);
EVENT2_EXPORT_SYMBOL int event_base_got_exit(struct event_base *base);
EVENT2_EXPORT_SYMBOL int event_base_got_break(struct event_base *base);
EVENT2_EXPORT_SYMBOL int event_base_once(struct event_base *base, evutil_socket_t fd,
                                         short events, event_callback_fn callback, void *arg,
                                         const struct timeval *tv);
EVENT2_EXPORT_SYMBOL int event_base_gettimeofday_cached(struct event_base *base,
                                                        struct timeval *tv);
EVENT2_EXPORT_SYMBOL int event_base_update_cache_time(struct event_base *base);
EVENT2_EXPORT_SYMBOL struct event *event_base_get_running_event(struct event_base *base);
EVENT2_EXPORT_SYMBOL int event_base_foreach_event(struct event_base *base,
                                                  event_base_foreach_event_cb fn, void *arg);
EVENT2_EXPORT_SYMBOL void event_base_active_by_fd(struct event_base *base, evutil_socket_t fd,
                                                  short events);
EVENT2_EXPORT_SYMBOL void event_base_active_by_signal(struct event_base *base, int sig);

/* ---- events ---- */
EVENT2_EXPORT_SYMBOL struct event *event_new(struct event_base *base, evutil_socket_t fd,
                                             short events, event_callback_fn callback,
                                             void *callback_arg);
EVENT2_EXPORT_SYMBOL void event_free(struct event *ev);
EVENT2_EXPORT_SYMBOL int event_assign(struct event *ev, struct event_base *base,
                                      evutil_socket_t fd, short events,
                                      event_callback_fn callback, void *callback_arg);
EVENT2_EXPORT_SYMBOL void *event_self_cbarg(void);
EVENT2_EXPORT_SYMBOL int event_base_set(struct event_base *base, struct event *ev);
EVENT2_EXPORT_SYMBOL int event_add(struct event *ev, const struct timeval *timeout);
EVENT2_EXPORT_SYMBOL int event_remove_timer(struct event *ev);
EVENT2_EXPORT_SYMBOL int event_del(struct event *ev);
EVENT2_EXPORT_SYMBOL int event_del_noblock(struct event *ev);
EVENT2_EXPORT_SYMBOL int event_del_block(struct event *ev);
EVENT2_EXPORT_SYMBOL void event_active(struct event *ev, int res, short ncalls);
EVENT2_EXPORT_SYMBOL int event_pending(const struct event *ev, short events, struct timeval *tv);
EVENT2_EXPORT_SYMBOL int event_initialized(const struct event *ev);
EVENT2_EXPORT_SYMBOL int event_priority_set(struct event *ev, int priority);
EVENT2_EXPORT_SYMBOL int event_get_priority(const struct event *ev);
EVENT2_EXPORT_SYMBOL evutil_socket_t event_get_fd(const struct event *ev);
EVENT2_EXPORT_SYMBOL struct event_base *event_get_base(const struct event *ev);
EVENT2_EXPORT_SYMBOL short event_get_events(const struct event *ev);
EVENT2_EXPORT_SYMBOL event_callback_fn event_get_callback(const struct event *ev);
EVENT2_EXPORT_SYMBOL void *event_get_callback_arg(const struct event *ev);
EVENT2_EXPORT_SYMBOL void event_get_assignment(const struct event *event,
                                               struct event_base **base_out,
                                               evutil_socket_t *fd_out, short *events_out,
                                               event_callback_fn *callback_out, void **arg_out);
EVENT2_EXPORT_SYMBOL size_t event_get_struct_event_size(void);
EVENT2_EXPORT_SYMBOL int event_finalize(unsigned flags, struct event *ev,
                                        event_finalize_callback_fn cb);
EVENT2_EXPORT_SYMBOL int event_free_finalize(unsigned flags, struct event *ev,
                                             event_finalize_callback_fn cb);
EVENT2_EXPORT_SYMBOL void event_debug_unassign(struct event *ev);
#define event_get_signal(ev) ((int)event_get_fd(ev))

#define evtimer_assign(ev, b, cb, arg) event_assign((ev), (b), -1, 0, (cb), (arg))
#define evtimer_new(b, cb, arg) event_new((b), -1, 0, (cb), (arg))
#define evtimer_add(ev, tv) event_add((ev), (tv))
#define evtimer_del(ev) event_del(ev)
#define evtimer_pending(ev, tv) event_pending((ev), EV_TIMEOUT, (tv))
#define evtimer_initialized(ev) event_initialized(ev)
#define evsignal_add(ev, tv) event_add((ev), (tv))
#define evsignal_assign(ev, b, x, cb, arg) \
    event_assign((ev), (b), (x), EV_SIGNAL | EV_PERSIST, cb, (arg))
#define evsignal_new(b, x, cb, arg) event_new((b), (x), EV_SIGNAL | EV_PERSIST, (cb), (arg))
#define evsignal_del(ev) event_del(ev)
#define evsignal_pending(ev, tv) event_pending((ev), EV_SIGNAL, (tv))
#define evsignal_initialized(ev) event_initialized(ev)

/* ---- the library ---- */
#define LIBEVENT_VERSION "2.1.12-stable"
#define LIBEVENT_VERSION_NUMBER 0x02010c00
/* The libevent API version emulated: "2.1.12-stable". mux_version_string() names iomux's. */
EVENT2_EXPORT_SYMBOL const char *event_get_version(void);
EVENT2_EXPORT_SYMBOL ev_uint32_t event_get_version_number(void);
EVENT2_EXPORT_SYMBOL void event_set_log_callback(event_log_cb cb);
EVENT2_EXPORT_SYMBOL void event_set_fatal_callback(event_fatal_cb cb);
EVENT2_EXPORT_SYMBOL void event_enable_debug_mode(void);
EVENT2_EXPORT_SYMBOL void event_enable_debug_logging(ev_uint32_t which);
EVENT2_EXPORT_SYMBOL void event_set_mem_functions(void *(*malloc_fn)(size_t sz),
                                                  void *(*realloc_fn)(void *ptr, size_t sz),
                                                  void (*free_fn)(void *ptr));
EVENT2_EXPORT_SYMBOL void libevent_global_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_EVENT_H_INCLUDED_ */
