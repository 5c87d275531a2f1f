/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: <event2/bufferevent_compat.h>, libevent 1.x's bufferevent
 * names that libevent 2.1 keeps for old programs. */
#ifndef IOMUX_EVENT2_BUFFEREVENT_COMPAT_H_INCLUDED_
#define IOMUX_EVENT2_BUFFEREVENT_COMPAT_H_INCLUDED_

#include <event2/visibility.h>
#include <event2/util.h>
#include <event2/bufferevent.h>

#ifdef __cplusplus
extern "C" {
#endif

#define evbuffercb bufferevent_data_cb
#define everrorcb bufferevent_event_cb

/* A bufferevent on `fd` (a socket, a pipe, a pty, any descriptor the base can watch) in the
 * current base (event_init's), with its callbacks set: bufferevent_socket_new(NULL, fd, 0)
 * and bufferevent_setcb. NULL on failure. */
EVENT2_EXPORT_SYMBOL struct bufferevent *bufferevent_new(evutil_socket_t fd, evbuffercb readcb,
                                                         evbuffercb writecb, everrorcb errorcb,
                                                         void *cbarg);
/* Read and write timeouts in seconds (0: none). */
EVENT2_EXPORT_SYMBOL void bufferevent_settimeout(struct bufferevent *bufev, int timeout_read,
                                                 int timeout_write);

#define EVBUFFER_READ BEV_EVENT_READING
#define EVBUFFER_WRITE BEV_EVENT_WRITING
#define EVBUFFER_EOF BEV_EVENT_EOF
#define EVBUFFER_ERROR BEV_EVENT_ERROR
#define EVBUFFER_TIMEOUT BEV_EVENT_TIMEOUT

#define EVBUFFER_INPUT(x) bufferevent_get_input(x)
#define EVBUFFER_OUTPUT(x) bufferevent_get_output(x)

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_BUFFEREVENT_COMPAT_H_INCLUDED_ */
