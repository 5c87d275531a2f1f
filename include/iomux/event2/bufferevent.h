/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: bufferevents (<event2/bufferevent.h>). On a socket, one is an
 * iomux stream: reads go into the input evbuffer's chunks, 16 KB at a time (libevent reads
 * 4 KB), and the output evbuffer's chunks leave in one gathered write per loop turn. On any
 * other descriptor the base can watch (a pipe, a pty, a FIFO, a character device) it reads
 * and writes with read(2) and writev(2) when its events say so, as libevent's does. Pairs,
 * rate limits and groups of rate limits are there too. */
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

/* A bufferevent on `fd`: a connected socket, any other descriptor the base can watch (a pipe,
 * a pty, a FIFO, a character device), or -1 (for bufferevent_socket_connect or
 * bufferevent_setfd). A NULL base is the current one (event_init's). NULL on failure. */
EVENT2_EXPORT_SYMBOL struct bufferevent *bufferevent_socket_new(struct event_base *base,
                                                                evutil_socket_t fd, int options);
EVENT2_EXPORT_SYMBOL int bufferevent_socket_connect(struct bufferevent *bev,
                                                    const struct sockaddr *sa, int socklen);
EVENT2_EXPORT_SYMBOL int bufferevent_socket_get_dns_error(struct bufferevent *bev);
/* Moves a bufferevent that reads and writes nothing yet (nothing enabled) to `base`. Returns 0,
 * or -1. */
EVENT2_EXPORT_SYMBOL int bufferevent_base_set(struct event_base *base, struct bufferevent *bufev);
/* A filter's underlying bufferevent: always NULL here (there are no filters). */
EVENT2_EXPORT_SYMBOL struct bufferevent *bufferevent_get_underlying(struct bufferevent *bufev);
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
EVENT2_EXPORT_SYMBOL int bufferevent_set_max_single_write(struct bufferevent *bev, size_t size);
EVENT2_EXPORT_SYMBOL ev_ssize_t bufferevent_get_max_single_write(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL void bufferevent_lock(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL void bufferevent_unlock(struct bufferevent *bev);

/* ---- triggering the callbacks by hand ---- */
#define BEV_TRIG_IGNORE_WATERMARKS 0x10000
#define BEV_TRIG_DEFER_CALLBACKS BEV_OPT_DEFER_CALLBACKS
/* Runs the read and/or write callback (`iotype`) as if data had come or gone: only when the
 * watermarks allow it, unless BEV_TRIG_IGNORE_WATERMARKS; from the loop's next turn with
 * BEV_TRIG_DEFER_CALLBACKS (or a bufferevent made with BEV_OPT_DEFER_CALLBACKS). */
EVENT2_EXPORT_SYMBOL void bufferevent_trigger(struct bufferevent *bufev, short iotype,
                                              int options);
/* Runs the event callback with `what` (BEV_EVENT_*), deferred as bufferevent_trigger is. */
EVENT2_EXPORT_SYMBOL void bufferevent_trigger_event(struct bufferevent *bufev, short what,
                                                    int options);

/* ---- pairs ---- */
/* Two bufferevents in `base` joined to each other: what one writes, the other reads, without
 * a descriptor. pair[0] and pair[1] are set. Returns 0, or -1. */
EVENT2_EXPORT_SYMBOL int bufferevent_pair_new(struct event_base *base, int options,
                                              struct bufferevent *pair[2]);
/* The other end of a pair (NULL once it was freed, or for one that is no pair). */
EVENT2_EXPORT_SYMBOL struct bufferevent *bufferevent_pair_get_partner(struct bufferevent *bev);

/* ---- rate limits: token buckets refilled once per tick ---- */
struct ev_token_bucket_cfg;
struct bufferevent_rate_limit_group;

#define EV_RATE_LIMIT_MAX EV_SSIZE_MAX

/* A bucket configuration: `read_rate` / `write_rate` bytes per tick (of `tick_len`, one
 * second for NULL), never more than `read_burst` / `write_burst` at once. NULL when a rate
 * exceeds its burst or a value exceeds EV_RATE_LIMIT_MAX. Free it after every bufferevent and
 * group that uses it. */
EVENT2_EXPORT_SYMBOL struct ev_token_bucket_cfg *
ev_token_bucket_cfg_new(size_t read_rate, size_t read_burst, size_t write_rate,
                        size_t write_burst, const struct timeval *tick_len);
EVENT2_EXPORT_SYMBOL void ev_token_bucket_cfg_free(struct ev_token_bucket_cfg *cfg);
/* Limits the bufferevent with `cfg` (NULL: no limit of its own). The bufferevent refers to
 * `cfg`, which must outlive that. Returns 0, or -1. */
EVENT2_EXPORT_SYMBOL int bufferevent_set_rate_limit(struct bufferevent *bev,
                                                    struct ev_token_bucket_cfg *cfg);
EVENT2_EXPORT_SYMBOL const struct ev_token_bucket_cfg *
bufferevent_get_token_bucket_cfg(const struct bufferevent *bev);
/* A group: one bucket that its members share, each member allowed its share of what is
 * left (the bucket's level over the members, no less than the group's minimum share). */
EVENT2_EXPORT_SYMBOL struct bufferevent_rate_limit_group *
bufferevent_rate_limit_group_new(struct event_base *base, const struct ev_token_bucket_cfg *cfg);
EVENT2_EXPORT_SYMBOL int bufferevent_rate_limit_group_set_cfg(
    struct bufferevent_rate_limit_group *group, const struct ev_token_bucket_cfg *cfg);
/* The least a member may read or write at once while the group has any tokens (default 64;
 * 0 is taken as 1). Returns 0, or -1. */
EVENT2_EXPORT_SYMBOL int bufferevent_rate_limit_group_set_min_share(
    struct bufferevent_rate_limit_group *group, size_t share);
/* Frees the group; its members leave it first. */
EVENT2_EXPORT_SYMBOL void bufferevent_rate_limit_group_free(struct bufferevent_rate_limit_group *g);
EVENT2_EXPORT_SYMBOL int bufferevent_add_to_rate_limit_group(struct bufferevent *bev,
                                                             struct bufferevent_rate_limit_group *g);
EVENT2_EXPORT_SYMBOL int bufferevent_remove_from_rate_limit_group(struct bufferevent *bev);
/* The bufferevent's own buckets' levels (EV_SSIZE_MAX without a limit of its own). */
EVENT2_EXPORT_SYMBOL ev_ssize_t bufferevent_get_read_limit(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL ev_ssize_t bufferevent_get_write_limit(struct bufferevent *bev);
/* How much the bufferevent would read / write at once now, every limit counted. */
EVENT2_EXPORT_SYMBOL ev_ssize_t bufferevent_get_max_to_read(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL ev_ssize_t bufferevent_get_max_to_write(struct bufferevent *bev);
EVENT2_EXPORT_SYMBOL ev_ssize_t
bufferevent_rate_limit_group_get_read_limit(struct bufferevent_rate_limit_group *g);
EVENT2_EXPORT_SYMBOL ev_ssize_t
bufferevent_rate_limit_group_get_write_limit(struct bufferevent_rate_limit_group *g);
/* Take `decr` tokens out of (a negative `decr`: put them into) a bucket. Returns 0, or -1
 * without a limit. */
EVENT2_EXPORT_SYMBOL int bufferevent_decrement_read_limit(struct bufferevent *bev, ev_ssize_t decr);
EVENT2_EXPORT_SYMBOL int bufferevent_decrement_write_limit(struct bufferevent *bev,
                                                           ev_ssize_t decr);
EVENT2_EXPORT_SYMBOL int
bufferevent_rate_limit_group_decrement_read(struct bufferevent_rate_limit_group *g, ev_ssize_t decr);
EVENT2_EXPORT_SYMBOL int
bufferevent_rate_limit_group_decrement_write(struct bufferevent_rate_limit_group *g,
                                             ev_ssize_t decr);
/* Bytes the group's members read and wrote since it was made or reset. */
EVENT2_EXPORT_SYMBOL void bufferevent_rate_limit_group_get_totals(
    struct bufferevent_rate_limit_group *grp, ev_uint64_t *total_read_out,
    ev_uint64_t *total_written_out);
EVENT2_EXPORT_SYMBOL void
bufferevent_rate_limit_group_reset_totals(struct bufferevent_rate_limit_group *grp);

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_BUFFEREVENT_H_INCLUDED_ */
