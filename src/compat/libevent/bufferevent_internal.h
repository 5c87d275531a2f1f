/* SPDX-License-Identifier: MIT */
/* Private to libiomux-event: what the three kinds of bufferevent share, and what each one
 * does its own way.
 *
 * A bufferevent is a struct evx_bev, whose first member is libevent's public struct
 * bufferevent: the fields programs read (input, output, the callbacks, the watermarks, the
 * enabled events, the timeouts) are the bufferevent's only copy of that state. The kinds:
 *
 * - a socket's (bev_stream.c): an iomux stream, reading and writing by completion;
 * - any other descriptor's (bev_fd.c): the public ev_read and ev_write events and read(2) /
 *   writev(2), as libevent's socket bufferevent does on every descriptor;
 * - a pair's end (bev_pair.c): what one end writes moves to the other's input.
 *
 * The common part (bufferevent.c) owns the callbacks, the watermarks, deferred callbacks and
 * the memory; ratelim.c the token buckets every kind asks before it reads or writes. */
#ifndef IOMUX_EVENT_BUFFEREVENT_INTERNAL_H
#define IOMUX_EVENT_BUFFEREVENT_INTERNAL_H

#include "event_internal.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_struct.h>
#include <event2/bufferevent_compat.h>

#define EVX_WRITE_IOV    64
#define EVX_MAX_SINGLE   16384 /* libevent's default most read or written at once */

struct evx_bev;
struct evx_ratelim;

/* What a kind does its own way. Every hook may be called on a freed bufferevent's way out
 * (the common part checks `freed` before it runs a program's callback). */
struct bufferevent_ops {
    const char *type;
    /* Something reading or writing depends on changed (enabled, watermarks, a rate limit):
     * start or stop reading and writing to match. */
    void (*update)(struct evx_bev *b);
    /* The output gained bytes (on the hot path of every evbuffer_add to an output). */
    void (*output_added)(struct evx_bev *b);
    /* bufferevent_flush: 0 when nothing was to be done, 1 when something was, -1 on error. */
    int (*flush)(struct evx_bev *b, short iotype, enum bufferevent_flush_mode mode);
    /* The program freed the bufferevent (callbacks are off): let go of the descriptor, then
     * drop the kind's reference (evx_bev_unref) once nothing of the kind's will touch it. */
    void (*release)(struct evx_bev *b);
    /* The timeouts in the public fields changed. Returns 0, or -1. */
    int (*set_timeouts)(struct evx_bev *b);
    /* The descriptor, or -1. */
    evutil_socket_t (*getfd)(struct evx_bev *b);
};

extern const struct bufferevent_ops evx_bev_stream_ops;
extern const struct bufferevent_ops evx_bev_fd_ops;
extern const struct bufferevent_ops evx_bev_pair_ops;

/* Callbacks a deferred run owes (BEV_OPT_DEFER_CALLBACKS, pairs, bufferevent_trigger). */
enum {
    EVX_PEND_READ = 0x1,
    EVX_PEND_WRITE = 0x2,
};

struct evx_bev {
    struct bufferevent pub; /* first: the public layout */
    int options;
    int refs;          /* the program's (until freed), the kind's, and callbacks running */
    unsigned freed : 1, in_readcb : 1, rd_blocked : 1, wr_blocked : 1;
    size_t max_read, max_write;  /* bufferevent_set_max_single_read / _write */
    struct evx_ratelim *rl;      /* rate limits, or NULL */
    struct event deferred;       /* runs the callbacks owed below, from the active queue */
    unsigned pend;               /* EVX_PEND_* */
    short pend_what;             /* the event callback's BEV_EVENT_* bits owed */
    int pend_errno;
    /* ---- a socket's (bev_stream.c) ---- */
    mux_stream_t stream;
    mux_write_t wreq;
    struct evx_chain *rchain;      /* what the stream reads into (a large max_read) */
    struct evx_bev *next_flush;
    evutil_socket_t fd;            /* the program's descriptor (the stream may hold a dup) */
    unsigned open : 1, connecting : 1, reading : 1, queued : 1, busy : 1, closing : 1;
    size_t read_len;               /* the length of the read the stream was started with */
    size_t in_flight;              /* bytes of the output in the current write */
    mux_stream_timeouts_t timeouts;
    mux_buf_t wv[EVX_WRITE_IOV];
    /* ---- a pair's end (bev_pair.c) ---- */
    struct evx_bev *partner;
};

static inline struct evx_bev *evx_bev_of(struct bufferevent *bev)
{
    return (struct evx_bev *)bev;
}

/* ---- bufferevent.c: the common part ---- */

/* A new bufferevent of kind `ops` in `base` (its events and buffers set up, one reference:
 * the program's). NULL when out of memory. */
struct evx_bev *evx_bev_new(struct event_base *base, const struct bufferevent_ops *ops,
                            int options);
/* Frees at once what evx_bev_new made, for a kind whose own set-up failed. */
void evx_bev_destroy(struct evx_bev *b);
void evx_bev_ref(struct evx_bev *b);
/* Drops a reference; the last one frees the memory. Returns 1 when it did. */
int evx_bev_unref(struct evx_bev *b);

/* Reading is wanted: enabled, not suspended by the high watermark or a rate limit. */
int evx_bev_wants_read(const struct evx_bev *b);
/* Writing is wanted: enabled and the output holds bytes (and no rate limit holds it). */
int evx_bev_wants_write(const struct evx_bev *b);
/* How many bytes to read / write at most now (the single maximum and the rate limits; for
 * reading, the room below the high watermark too): 0 when none. */
size_t evx_bev_read_max(struct evx_bev *b);
size_t evx_bev_write_max(struct evx_bev *b);

/* The kind read `n` bytes into the input: the rate limits are charged, and the read callback
 * runs (or is owed) when the input reached the low watermark. */
void evx_bev_did_read(struct evx_bev *b, size_t n);
/* The kind wrote `n` bytes of the output: charged, and the write callback runs (or is owed)
 * when the output fell to the low watermark. */
void evx_bev_did_write(struct evx_bev *b, size_t n);
/* The read / write callback, now or deferred as the options say, watermarks checked. */
void evx_bev_readcb(struct evx_bev *b, int options);
void evx_bev_writecb(struct evx_bev *b, int options);
/* The event callback with BEV_EVENT_* `what` and errno `err` (0: errno is left as it is). */
void evx_bev_eventcb(struct evx_bev *b, short what, int err, int options);

/* ---- ratelim.c ---- */

/* Limits on reading / writing now (0: none, or the rate limit's bytes). */
ev_ssize_t evx_rl_read_max(struct evx_bev *b);
ev_ssize_t evx_rl_write_max(struct evx_bev *b);
/* Charges `n` bytes read / written to the buckets; a bucket it empties suspends the
 * bufferevent (or the group) until its next tick. */
void evx_rl_charge_read(struct evx_bev *b, size_t n);
void evx_rl_charge_write(struct evx_bev *b, size_t n);
/* The bufferevent (which has a limit or a group) is being freed: out of its group, its
 * timer stopped, its state freed. */
void evx_rl_free(struct evx_bev *b);

/* ---- bev_stream.c ---- */

/* Opens the stream transport on socket `fd` (the bufferevent must be a stream one that is
 * not open). Returns 0, or a negative errno. */
int evx_bev_stream_open(struct evx_bev *b, evutil_socket_t fd);

/* ---- bev_fd.c ---- */

/* Sets the descriptor of a descriptor bufferevent (its events re-assigned). 0 or -1. */
int evx_bev_fd_set(struct evx_bev *b, evutil_socket_t fd);

#endif
