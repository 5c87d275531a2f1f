/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: <event2/bufferevent_struct.h>, struct bufferevent with the
 * public fields libevent 2.1 exposes, in libevent's order, for programs written before 2.0
 * that read them (tmux reads `input` and `output` throughout). The fields are the
 * bufferevent's own state, not copies: the emulation keeps the callbacks, watermarks, enabled
 * events and timeouts in them. Writing to them directly is as unsupported as with libevent;
 * use the functions of <event2/bufferevent.h>. */
#ifndef IOMUX_EVENT2_BUFFEREVENT_STRUCT_H_INCLUDED_
#define IOMUX_EVENT2_BUFFEREVENT_STRUCT_H_INCLUDED_

#include <event2/event-config.h>
#include <event2/util.h>
#include <event2/event_struct.h>
#include <event2/bufferevent.h>

#include <sys/time.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct event_watermark {
    size_t low;
    size_t high;
};

struct bufferevent_ops;

struct bufferevent {
    struct event_base *ev_base;
    const struct bufferevent_ops *be_ops; /* which kind: socket, descriptor or pair */
    struct event ev_read;                 /* a descriptor bufferevent's read event */
    struct event ev_write;                /* its write event */
    struct evbuffer *input;
    struct evbuffer *output;
    struct event_watermark wm_read;
    struct event_watermark wm_write;
    bufferevent_data_cb readcb;
    bufferevent_data_cb writecb;
    bufferevent_event_cb errorcb;
    void *cbarg;
    struct timeval timeout_read;
    struct timeval timeout_write;
    short enabled; /* EV_READ, EV_WRITE */
};

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_BUFFEREVENT_STRUCT_H_INCLUDED_ */
