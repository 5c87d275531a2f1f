/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: struct event, for programs that embed events in their own
 * structs and set them up with event_assign. Its layout is iomux's, not libevent's: use the
 * accessor functions of <event2/event.h>. The fields libevent 2.1 programs are known to read
 * directly (ev_fd, ev_base, ev_events, ev_res, ev_flags, ev_pri, ev_callback, ev_arg) carry
 * libevent's names and meanings. */
#ifndef IOMUX_EVENT2_EVENT_STRUCT_H_INCLUDED_
#define IOMUX_EVENT2_EVENT_STRUCT_H_INCLUDED_

#include <event2/visibility.h>
#include <event2/util.h>

#include <iomux.h>
#include <sys/time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ev_flags: where the event is. */
#define EVLIST_TIMEOUT 0x01
#define EVLIST_INSERTED 0x02
#define EVLIST_SIGNAL 0x04
#define EVLIST_ACTIVE 0x08
#define EVLIST_INTERNAL 0x10
#define EVLIST_ACTIVE_LATER 0x20
#define EVLIST_FINALIZING 0x40
#define EVLIST_INIT 0x80
#define EVLIST_ALL 0xff

struct event_base;

struct event {
    union {
        mux_io_t io;      /* EV_READ / EV_WRITE events */
        mux_signal_t sig; /* EV_SIGNAL events */
    } ev_w_;
    mux_timer_t ev_timer_; /* the timeout, when one was given */
    struct event *ev_active_next_, *ev_active_prev_; /* the base's queue of its priority */
    struct event *ev_next_, *ev_prev_;               /* the base's list of added events */
    struct event_base *ev_base;
    void (*ev_callback)(evutil_socket_t, short, void *);
    void *ev_arg;
    evutil_socket_t ev_fd; /* the fd, or the signal number for EV_SIGNAL */
    short ev_events;       /* EV_* asked for */
    short ev_res;          /* EV_* passed to the callback */
    unsigned short ev_flags; /* EVLIST_* */
    unsigned char ev_pri;
    unsigned char ev_x_;    /* private bits: event_base_once's event, timer set up */
    short ev_ncalls_;       /* signal deliveries still to be passed on */
    short ev_err_;          /* the negative errno event_assign met (bad fd or signal), or 0 */
    unsigned ev_magic_; /* set by event_assign: tells an assigned event from other memory */
};

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_EVENT_STRUCT_H_INCLUDED_ */
