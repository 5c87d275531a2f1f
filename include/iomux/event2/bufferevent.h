/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: socket bufferevents (<event2/bufferevent.h>) on iomux's
 * stream layer. Reads go straight into the input evbuffer's chunks, 16 KB at a time (libevent
 * reads 4 KB); the output evbuffer's chunks leave in one gathered write per loop turn. */
#ifndef IOMUX_EVENT2_BUFFEREVENT_H_INCLUDED_
#define IOMUX_EVENT2_BUFFEREVENT_H_INCLUDED_

#include <event2/visibility.h>
#include <event2/util.h>

#include <sys/time.h>

#ifdef __cplusplus
extern "C" {
#endif

struct bufferevent;
struct event_base;
struct evbuffer;
struct sockaddr;

#define BEV_EVENT_READING 0x01
#define BEV_EVENT_WRITING 0x02
#define BEV_EVENT_EOF 0x10
#define BEV_EVENT_ERROR 0x20
#define BEV_EVENT_TIMEOUT 0x40
#define BEV_EVENT_CONNECTED 0x80

enum bufferevent_options {
    BEV_OPT_CLOSE_ON_FREE = 1 << 0,
    BEV_OPT_THREADSAFE = 1 << 1,
    BEV_OPT_DEFER_CALLBACKS = 1 << 2,
    BEV_OPT_UNLOCK_CALLBACKS = 1 << 3,
};

enum bufferevent_flush_mode { BEV_NORMAL = 0, BEV_FLUSH = 1, BEV_FINISHED = 2 };

typedef void (*bufferevent_data_cb)(struct bufferevent *bev, void *ctx);
typedef void (*bufferevent_event_cb)(struct bufferevent *bev, short what, void *ctx);

/* A bufferevent on connected socket `fd` (or -1, for bufferevent_socket_connect). */
EVENT2_EXPORT_SYMBOL struct bufferevent *bufferevent_socket_new(struct event_base *base,
                                                                evutil_socket_t fd, int options);
EVENT2_EXPORT_SYMBOL int bufferevent_socket_connect(struct bufferevent *bev,
                                                    const struct sockaddr *sa, int socklen);
EVENT2_EXPORT_SYMBOL int bufferevent_socket_get_dns_error(struct bufferevent *bev);
/* Frees it once its socket is closed; callbacks stop at once; unsent output is dropped. */
EVENT2_EXPORT_SYMBOL void bufferevent_free(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL void bufferevent_setcb(struct bufferevent *bev, bufferevent_data_cb readcb,
                                            bufferevent_data_cb writecb,
                                            bufferevent_event_cb eventcb, void *cbarg);
EVENT2_EXPORT_SYMBOL void bufferevent_getcb(struct bufferevent *bev, bufferevent_data_cb *readcb,
                                            bufferevent_data_cb *writecb,
                                            bufferevent_event_cb *eventcb, void **cbarg);
EVENT2_EXPORT_SYMBOL int bufferevent_setfd(struct bufferevent *bev, evutil_socket_t fd);
EVENT2_EXPORT_SYMBOL evutil_socket_t bufferevent_getfd(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL struct event_base *bufferevent_get_base(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL int bufferevent_write(struct bufferevent *bev, const void *data, size_t size);
EVENT2_EXPORT_SYMBOL int bufferevent_write_buffer(struct bufferevent *bev, struct evbuffer *buf);
EVENT2_EXPORT_SYMBOL size_t bufferevent_read(struct bufferevent *bev, void *data, size_t size);
EVENT2_EXPORT_SYMBOL int bufferevent_read_buffer(struct bufferevent *bev, struct evbuffer *buf);
EVENT2_EXPORT_SYMBOL struct evbuffer *bufferevent_get_input(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL struct evbuffer *bufferevent_get_output(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL int bufferevent_enable(struct bufferevent *bev, short event);
EVENT2_EXPORT_SYMBOL int bufferevent_disable(struct bufferevent *bev, short event);
EVENT2_EXPORT_SYMBOL short bufferevent_get_enabled(struct bufferevent *bev);
/* Read and write timeouts (NULL: none), as iomux's stream timeouts. */
EVENT2_EXPORT_SYMBOL int bufferevent_set_timeouts(struct bufferevent *bev,
                                                  const struct timeval *timeout_read,
                                                  const struct timeval *timeout_write);
EVENT2_EXPORT_SYMBOL void bufferevent_setwatermark(struct bufferevent *bev, short events,
                                                   size_t lowmark, size_t highmark);
EVENT2_EXPORT_SYMBOL int bufferevent_getwatermark(struct bufferevent *bev, short events,
                                                  size_t *lowmark, size_t *highmark);
EVENT2_EXPORT_SYMBOL int bufferevent_flush(struct bufferevent *bev, short iotype,
                                           enum bufferevent_flush_mode mode);
EVENT2_EXPORT_SYMBOL int bufferevent_priority_set(struct bufferevent *bev, int pri);
EVENT2_EXPORT_SYMBOL int bufferevent_get_priority(const struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL int bufferevent_set_max_single_read(struct bufferevent *bev, size_t size);
EVENT2_EXPORT_SYMBOL ev_ssize_t bufferevent_get_max_single_read(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL void bufferevent_lock(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL void bufferevent_unlock(struct bufferevent *bev);

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_BUFFEREVENT_H_INCLUDED_ */
