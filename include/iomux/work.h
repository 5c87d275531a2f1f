/* SPDX-License-Identifier: MIT */
/* iomux services off the loop's thread: the worker pool, name resolution on it, and a stream
 * connect by host name (docs/work.md).
 *
 * The pool is a bounded set of threads shared by every loop of the process, started the first
 * time work is queued (one more thread each time work waits and none is idle, up to the
 * pool's size). A request is queued from a loop's thread; its function runs on a pool thread;
 * its completion is called back on that loop, from the loop's iteration, never from inside the
 * call that queued or cancelled it. Nothing here blocks the loop: the queue's lock is held for
 * a few pointer moves.
 *
 * Every request is the caller's memory, as watchers are: it must stay in place, untouched,
 * from the call that starts it until its callback, which is called exactly once and from
 * which the memory is the caller's again. A request pending on a loop keeps mux_run running
 * and counts in mux_loop_active, as a watcher does, until its callback has run.
 */
#ifndef IOMUX_WORK_H
#define IOMUX_WORK_H

#include "iomux.h"
#ifndef _WIN32
#include <netdb.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * The worker pool (as libuv's uv_queue_work).
 * ------------------------------------------------------------------------------------ */

typedef struct mux_work mux_work_t;
/* Runs on a pool thread: may block, must not call the loop (except mux_async_send). */
typedef void (*mux_work_cb)(mux_work_t *w);
/* Runs on the loop that queued `w`: `status` is 0 once the work function has run, or
 * -ECANCELED when mux_work_cancel took it off the queue before it started. */
typedef void (*mux_work_done_cb)(mux_work_t *w, int status);

struct mux_work {
    void *data;
    /* private */
    void *home_; /* the loop's state for the pool */
    mux_work_cb work_cb_;
    mux_work_done_cb done_cb_;
    mux_work_t *next_, *prev_;
    void (*reap_)(mux_work_t *w); /* a request abandoned while it ran: freed by the thread */
    int state_;
    int status_;
};

#define MUX_WORK_POOL_MAX     1024 /* the largest pool */
#define MUX_WORK_POOL_DEFAULT 4    /* without mux_work_pool_size or IOMUX_THREADPOOL_SIZE */

/* Queues `work` to run on a pool thread, then `done` (may be NULL) on `loop`. `w->data` is
 * kept; `w` must not be queued again before its done callback. Returns 0; -EINVAL (NULL
 * loop, request or work function); -ENOMEM; or, when the pool has no thread yet and none can
 * start, the thread creation's error (-EAGAIN). Call from the loop's thread. */
int mux_work_queue(mux_loop_t *loop, mux_work_t *w, mux_work_cb work, mux_work_done_cb done);
/* Takes `w` off the queue if no thread has started it: its done callback then comes from the
 * loop with -ECANCELED. Returns 0; -EBUSY when it is running or has run (its callback comes
 * with 0); -EINVAL when it is not pending. Call from its loop's thread. */
int mux_work_cancel(mux_work_t *w);
/* Sets the number of pool threads (1 .. MUX_WORK_POOL_MAX), before the pool has started;
 * the default is IOMUX_THREADPOOL_SIZE from the environment when that is a number in range,
 * else MUX_WORK_POOL_DEFAULT. Returns 0, -EINVAL, or -EBUSY once work was queued. */
int mux_work_pool_size(unsigned threads);
/* Returns the pool's size (what it may grow to); `started`, if not NULL, receives how many
 * of its threads run now. Thread-safe. */
unsigned mux_work_pool_threads(unsigned *started);

/* ---------------------------------------------------------------------------------------
 * Name resolution: getaddrinfo and getnameinfo on the pool.
 *
 * The system's resolver runs on a pool thread; its answer comes back on the loop. A lookup
 * can be cancelled at any time before its callback: one still queued never runs, one that
 * runs is abandoned (its thread finishes the system's call and frees what it got), and either
 * way the callback comes with -ECANCELED. Names under ".invalid" are refused at once with
 * MUX_EAI_NONAME, as RFC 6761 asks of resolver libraries, without asking the system.
 * ------------------------------------------------------------------------------------ */

typedef struct mux_getaddrinfo mux_getaddrinfo_t;
/* `status` 0: `res` is the list of addresses, the caller's until mux_freeaddrinfo. Else
 * `res` is NULL and `status` is MUX_EAI_* or a negative errno (-ECANCELED, -ENOMEM). */
typedef void (*mux_getaddrinfo_cb)(mux_getaddrinfo_t *req, int status, struct addrinfo *res);

typedef struct mux_getnameinfo mux_getnameinfo_t;
/* `status` 0: `host` and `service` hold the names (valid during the call). Else both are
 * NULL and `status` is MUX_EAI_* or a negative errno. */
typedef void (*mux_getnameinfo_cb)(mux_getnameinfo_t *req, int status, const char *host,
                                   const char *service);

struct mux__lookup; /* the part a pool thread works on (src/work/resolve.c) */

struct mux_getaddrinfo {
    void *data;
    /* private */
    struct mux__lookup *job_; /* NULL once the callback is due from task_ */
    mux_getaddrinfo_cb cb_;
    struct mux__loop *loop_;
    struct mux__task task_; /* the callback of a lookup abandoned while it ran, or answered
                               without the pool */
    int status_;            /* what task_ delivers */
    int pending_;
};

struct mux_getnameinfo {
    void *data;
    /* private */
    struct mux__lookup *job_;
    mux_getnameinfo_cb cb_;
    struct mux__loop *loop_;
    struct mux__task task_;
    int status_;
    int pending_;
};

/* Looks up `node` and/or `service` (either may be NULL, not both) as getaddrinfo(3) does,
 * with `hints` (may be NULL: any family, and, unlike getaddrinfo's own default, AI_ADDRCONFIG
 * off). The strings and hints are copied. `req->data` is kept. Returns 0 (the answer comes
 * to `cb`), -EINVAL (NULL loop, request or callback, no name at all, a name longer than 1024
 * bytes), -ENOMEM, or the pool's error (mux_work_queue). A request must not be passed again
 * before its callback. */
int mux_getaddrinfo(mux_loop_t *loop, mux_getaddrinfo_t *req, mux_getaddrinfo_cb cb,
                    const char *node, const char *service, const struct addrinfo *hints);
/* Cancels a pending lookup: its callback comes from the loop with -ECANCELED (and no list).
 * Returns 0, or -EINVAL when it is not pending (its callback has run, or is running). */
int mux_getaddrinfo_cancel(mux_getaddrinfo_t *req);
/* Frees a list a lookup returned (NULL is fine). */
void mux_freeaddrinfo(struct addrinfo *res);

/* Looks up the names of `addr` as getnameinfo(3) does with `flags` (NI_*). The address is
 * copied. Returns 0, -EINVAL (bad arguments, an address longer than sockaddr_storage),
 * -ENOMEM, or the pool's error. */
int mux_getnameinfo(mux_loop_t *loop, mux_getnameinfo_t *req, mux_getnameinfo_cb cb,
                    const struct sockaddr *addr, socklen_t addrlen, int flags);
/* As mux_getaddrinfo_cancel. */
int mux_getnameinfo_cancel(mux_getnameinfo_t *req);

/* ---------------------------------------------------------------------------------------
 * A stream connect by host name, with Happy Eyeballs (RFC 8305).
 *
 * The name is resolved on the pool; the addresses are tried in an order that alternates the
 * families, starting with the resolver's first choice (IPv6, where the host has a route for
 * it), and a new attempt starts when the one before fails or has not succeeded within the
 * attempt delay (250 ms), while the earlier ones go on: the first to connect wins, and the
 * others are closed. The winner becomes the caller's stream, open and connected, as after
 * mux_stream_connect. A dial counts in mux_loop_active (with the lookup and the attempts it
 * makes, which mux_loop_walk does not report) until its callback has run and the attempts
 * that lost are closed (an iteration later).
 * ------------------------------------------------------------------------------------ */

typedef struct mux_dial mux_dial_t;
/* `status` 0: `d`'s stream is open and connected (close it when done with it). Else it was
 * never opened, and `status` is the error of the last attempt (-ECONNREFUSED, ...), of the
 * lookup (MUX_EAI_*), -ETIMEDOUT, or -ECANCELED. */
typedef void (*mux_dial_cb)(mux_dial_t *d, int status);

typedef struct mux_dial_options {
    int family;                /* AF_UNSPEC (0), AF_INET or AF_INET6 */
    uint64_t attempt_delay_ns; /* 0: 250 ms; at least 10 ms (RFC 8305 says 100 ms) */
    uint64_t timeout_ns;       /* the whole dial, the lookup included; 0: none */
} mux_dial_options_t;

struct mux__dial; /* the attempts (src/work/dial.c) */

struct mux_dial {
    void *data;
    /* private */
    struct mux__dial *job_;
    mux_stream_t *stream_;
    mux_dial_cb cb_;
};

/* Connects `s` (the caller's; `s->data` is kept) to `host` (a name or a numeric address),
 * port or service `service`. `opts` may be NULL. `d->data` is kept. Returns 0 (the outcome
 * comes to `cb`), -EINVAL (bad arguments, unknown option values), -ENOMEM, or the pool's
 * error. */
int mux_dial(mux_loop_t *loop, mux_dial_t *d, mux_stream_t *s, const char *host,
             const char *service, const mux_dial_options_t *opts, mux_dial_cb cb);
/* As mux_dial, with the addresses given (a list as getaddrinfo returns, read during the call
 * only) instead of a name to look up: the addresses of the family asked for, IPv4 and IPv6,
 * are tried in Happy Eyeballs' order. Returns 0, -EINVAL (bad arguments, no such address in
 * the list), -ENOMEM. */
int mux_dial_addrinfo(mux_loop_t *loop, mux_dial_t *d, mux_stream_t *s,
                      const struct addrinfo *addrs, const mux_dial_options_t *opts, mux_dial_cb cb);
/* Cancels a pending dial: its callback comes from the loop with -ECANCELED, and the stream
 * is not opened. Returns 0, or -EINVAL when it is not pending. */
int mux_dial_cancel(mux_dial_t *d);

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_WORK_H */
