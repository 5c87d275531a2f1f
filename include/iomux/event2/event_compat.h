/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: the libevent 1.x calls of <event2/event_compat.h>, which
 * act on a global "current" base that event_init() creates. */
#ifndef IOMUX_EVENT2_EVENT_COMPAT_H_INCLUDED_
#define IOMUX_EVENT2_EVENT_COMPAT_H_INCLUDED_

#include <event2/visibility.h>
#include <event2/util.h>

#include <sys/time.h>

#ifdef __cplusplus
extern "C" {
#endif

struct event;
struct event_base;

EVENT2_EXPORT_SYMBOL struct event_base *event_init(void);
EVENT2_EXPORT_SYMBOL int event_dispatch(void);
EVENT2_EXPORT_SYMBOL int event_loop(int flags);
EVENT2_EXPORT_SYMBOL int event_loopexit(const struct timeval *tv);
EVENT2_EXPORT_SYMBOL int event_loopbreak(void);
EVENT2_EXPORT_SYMBOL int event_once(evutil_socket_t fd, short events,
                                    void (*callback)(evutil_socket_t, short, void *), void *arg,
                                    const struct timeval *tv);
EVENT2_EXPORT_SYMBOL const char *event_get_method(void);
EVENT2_EXPORT_SYMBOL int event_priority_init(int npriorities);
EVENT2_EXPORT_SYMBOL void event_set(struct event *ev, evutil_socket_t fd, short events,
                                    void (*callback)(evutil_socket_t, short, void *), void *arg);

#define evtimer_set(ev, cb, arg) event_set((ev), -1, 0, (cb), (arg))
#define evsignal_set(ev, x, cb, arg) event_set((ev), (x), EV_SIGNAL | EV_PERSIST, (cb), (arg))
#define timeout_add(ev, tv) event_add((ev), (tv))
#define timeout_set(ev, cb, arg) event_set((ev), -1, 0, (cb), (arg))
#define timeout_del(ev) event_del(ev)
#define timeout_pending(ev, tv) event_pending((ev), EV_TIMEOUT, (tv))
#define timeout_initialized(ev) event_initialized(ev)
#define signal_add(ev, tv) event_add((ev), (tv))
#define signal_set(ev, x, cb, arg) event_set((ev), (x), EV_SIGNAL | EV_PERSIST, (cb), (arg))
#define signal_del(ev) event_del(ev)
#define signal_pending(ev, tv) event_pending((ev), EV_SIGNAL, (tv))
#define signal_initialized(ev) event_initialized(ev)
#define EVENT_FD(ev) ((int)event_get_fd(ev))
#define EVENT_SIGNAL(ev) event_get_signal(ev)

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_EVENT_COMPAT_H_INCLUDED_ */
