/* SPDX-License-Identifier: MIT */
/* Streams: connected TCP and Unix sockets, completion-style, as one state machine over the
 * backend's operations (backend.h). Whether the kernel runs an operation (io_uring) or the
 * library emulates it with non-blocking system calls (epoll, poll, select) is the operation
 * layer's business: this file never asks which backend runs.
 *
 * A stream has two operation slots: rop_ for the receive, wop_ for the one send, connect or
 * shutdown in flight. Writes queue up behind the send in flight and go out in order: the
 * next send takes the head's buffers, or, with several writes queued, the buffers of as
 * many of them as fit MUX__GATHER_MAX (one sendmsg, or one io_uring SENDMSG, for many small
 * writes), and its completion finishes every write it covered. A completion only records its
 * result in the stream; the stream's task delivers everything due, in this order: a
 * finished send, connect, or shutdown is taken in; the connect callback; a receive; the
 * write callbacks in queue order; the shutdown callback; and last, once no operation is in
 * flight, the close callback, after which the stream's memory is the caller's. The task runs
 * from the loop's pending queue, or at once when the completion came from where the loop
 * dispatches callbacks (MUX__OPC_NOW); either way a callback never runs inside the call
 * that caused it. Two completions at once take a short cut when nothing else is due (the
 * receive of bytes into a pool buffer, and the send that finishes the one queued write), and
 * the common reply (one buffer, to an idle stream, where the kernel sends) skips the queue's
 * walk: the echo's round trip, whose cost the cost table counts (bench/README.md). A pool
 * write there (mux_write_pool) goes with no request at all (S_PSEND): the stream notes the
 * buffer, and the send gets a request of the stream's, at the head of the queue, only when
 * something comes after it (mux__psend_materialize).
 *
 * Receives are submitted from the task only, as its last step, and a receive that completes
 * is delivered before anything else runs: bytes put in a caller buffer reach the read
 * callback first, so mux_read_stop can give the buffer back at once. A receive into a pool
 * buffer that completes after a stop (the kernel had it in flight) is kept, buffer and all,
 * and delivered first when reading starts again.
 *
 * Where the backend has them (io_uring from 6.0), pool reads use one multishot receive: it
 * stays armed while reading and across read stops (an echo server stops at every message),
 * completing once per buffer. The stream holds one completion at a time: the next one is
 * refused until that is delivered (the backend offers it again from the next wait), or,
 * while stopped, parked, and the receive cancelled, so a stopped reader holds a few
 * buffers at most and the kernel's socket buffer takes the rest, as with single receives.
 *
 * A write to an empty queue, where sends are emulated, is sent from mux_write itself, as
 * the emulation would have at once: most finish there, their callbacks from the task.
 *
 * Hints keep the system calls down: a receive polls first unless the last one said data is
 * left (the kernel's NONEMPTY, kept across a read stop, or the emulation's guess that a
 * filled buffer means more, which is not, nor across a write: a peer waiting for an answer
 * has sent nothing more), and a send after one that found the socket full polls first too.
 *
 * Timeouts cost nothing per read or write: the stream only records when bytes last moved,
 * and its one timer, when it fires, checks whether a deadline really passed and otherwise
 * sleeps again until the earliest one that still could.
 */
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "stream/bufpool.h"
#include "stream/listener.h"
#include "stream/op.h"
#include "stream/stream.h"

enum {
    S_OPEN = 0x0001,
    S_CONNECTED = 0x0002,
    S_UNIX = 0x0004,
    S_CLOSING = 0x0008,
    S_READING = 0x0010,   /* the caller wants reads */
    S_RDONE = 0x0020,     /* a receive completed: rres_, rgot_, roff_ wait for delivery */
    S_RMORE = 0x0040,     /* the kernel said data is left in the socket */
    S_WDONE = 0x0080,     /* the send, connect or shutdown completed: wres_ */
    S_WFULL = 0x0100,     /* the last send found the socket full */
    S_WHOLD = 0x0200,     /* the send in flight is of writes that failed meanwhile */
    S_SHUTTING = 0x0400,  /* shutdown asked for */
    S_SHUT = 0x0800,      /* write side shut down (or failed to) */
    S_DCONNECT = 0x1000,  /* the connect callback is due */
    S_DSHUT = 0x2000,     /* the shutdown callback is due */
    S_IN_TASK = 0x4000,   /* inside the task, which delivers everything before it returns */
    S_POOL = 0x8000,      /* reads take buffers from rto_.pool (else into rto_.buf) */
    S_RFILLED = 0x10000,  /* the last receive filled its buffer: data may be left (a guess) */
    S_CTIMEOUT = 0x20000, /* a timeout cancelled the connect: it ends with -ETIMEDOUT */
    S_RSINGLE = 0x40000,  /* a multishot receive ran the ring dry: the next is a single one */
    S_RSURPLUS = 0x80000, /* stopped, a multishot receive parked a completion: ended */
    S_HIDDEN = 0x100000,  /* a part of a service's handle: not walked (mux__stream_hide) */
    S_PIPE = 0x200000,    /* on a pipe's handle, not a socket (mux__stream_open_pipe) */
    S_PGONE = 0x400000,   /* the pipe was closed by its shutdown: reads find the end */
    S_PSEND = 0x800000,   /* the send in flight is a pool write's, with no request (wpool_) */
};

/* ssize_t's largest value (the signed twin of size_t), which limits.h has only on POSIX. */
#define MUX__SSIZE_MAX  (SIZE_MAX >> 1)
#define MUX__GATHER_MAX 64 /* buffers of queued writes gathered into one send */

static int mux__stream_valid(const mux_stream_t *s)
{
    return s && s->loop_ && (s->flags_ & S_OPEN) && !(s->flags_ & S_CLOSING);
}

static int mux__stream_walkable(const void *s)
{
    return mux__stream_valid(s) && !(((const mux_stream_t *)s)->flags_ & S_HIDDEN);
}

void mux__stream_hide(mux_stream_t *s)
{
    s->flags_ |= S_HIDDEN;
}

/* A loop's open streams, for the walk. */
static const struct mux__handles_type mux__stream_type = {
    .kind = MUX_HANDLE_STREAM,
    .link_off = offsetof(mux_stream_t, link_),
    .flags_off = offsetof(mux_stream_t, flags_),
    .size = sizeof(struct mux__handles),
    .walkable = mux__stream_walkable,
};

/* Something became due: the task delivers it (now, if it is running). */
static void mux__stream_kick(mux_stream_t *s)
{
    if (!(s->flags_ & S_IN_TASK))
        mux__task_queue(s->loop_, &s->task_);
}

static void mux__stream_run(struct mux__task *t);
static void mux__stream_deliver(mux_stream_t *s);
static void mux__pwrite_free_all(mux_stream_t *s);
static void mux__pwrite_done(mux_write_t *req, int status);
struct mux__pwrite;
static inline void mux__pwrite_sent(mux_stream_t *s, struct mux__pwrite *w);
static void mux__psend_materialize(mux_stream_t *s);

/* After a callback run at once by a fast path below: the task's rounds only if the callback
 * made something due (else they would find nothing: no completion or callback due, no
 * close, and the receive armed or not wanted). */
static inline void mux__stream_after(mux_stream_t *s)
{
    unsigned f = s->flags_;
    if (mux__likely(!(f & (S_WDONE | S_DCONNECT | S_RDONE | S_DSHUT | S_CLOSING)) &&
                    !s->done_head_ && !s->fail_ &&
                    (!(f & S_READING) || mux__op_in_flight(&s->rop_)))) {
        s->flags_ = f & ~(unsigned)S_IN_TASK;
        return;
    }
    mux__stream_deliver(s);
}

/* A completion came in: delivered at once where the loop dispatches callbacks (NOW), else by
 * the task. */
static void mux__stream_completed(mux_stream_t *s, unsigned flags)
{
    if ((flags & MUX__OPC_NOW) && !(s->flags_ & S_IN_TASK))
        mux__stream_run(&s->task_);
    else
        mux__stream_kick(s);
}

static void mux__op_hint(struct mux__op *op, unsigned hint)
{
    op->flags_ = (uint8_t)((op->flags_ & ~(MUX__OPF_POLL_FIRST | MUX__OPF_MULTI)) | hint);
}

/* ---- writes ------------------------------------------------------------------------ */

static void mux__write_done(mux_stream_t *s, mux_write_t *req, int status)
{
    req->status_ = status;
    req->next_ = NULL;
    if (s->done_tail_)
        s->done_tail_->next_ = req;
    else
        s->done_head_ = req;
    s->done_tail_ = req;
}

/* The head of the queue is written: it leaves the queue for delivery. */
static void mux__write_pop_done(mux_stream_t *s, mux_write_t *req)
{
    s->wq_head_ = req->next_;
    if (!s->wq_head_)
        s->wq_tail_ = NULL;
    mux__write_done(s, req, 0);
}

/* Advances `req` by `n` written bytes: its buffers', then its file's. */
static void mux__write_advance(mux_write_t *req, size_t n)
{
    req->left_ -= n;
    while (n > 0 && req->idx_ < req->nbufs_) {
        size_t room = req->bufs_[req->idx_].len - req->off_;
        if (n < room) {
            req->off_ += n;
            return;
        }
        n -= room;
        req->off_ = 0;
        req->idx_++;
    }
    req->foff_ += n; /* the rest is the file's */
}

static int mux__stream_connecting(const mux_stream_t *s)
{
    return mux__op_in_flight(&s->wop_) && s->wop_.kind_ == MUX__OP_CONNECT;
}

static int mux__wop_is_send(const mux_stream_t *s)
{
    return s->wop_.kind_ == MUX__OP_SEND || s->wop_.kind_ == MUX__OP_SENDV ||
           s->wop_.kind_ == MUX__OP_SENDFILE;
}

/* Every queued write fails with `status`. A send in flight is cancelled, and the failed
 * writes are delivered only once it completed: the kernel may read their buffers until then. */
static void mux__writes_fail(mux_stream_t *s, int status)
{
    mux_write_t *req;
    if (s->flags_ & S_PSEND)
        mux__psend_materialize(s);
    if (!s->wq_head_)
        return;
    if (mux__wop_is_send(s) && (mux__op_in_flight(&s->wop_) || (s->flags_ & S_WDONE))) {
        s->flags_ |= S_WHOLD; /* the send's result, when it comes, is of a failed write */
        mux__op_cancel(s->loop_, &s->wop_);
    }
    while ((req = s->wq_head_) != NULL) {
        s->wq_head_ = req->next_;
        mux__write_done(s, req, status);
    }
    s->wq_tail_ = NULL;
    s->wq_bytes_ = 0;
    mux__stream_kick(s);
}

/* Fills gv_ with what is left of the queued writes from `req`, the head, on: at most
 * MUX__GATHER_MAX buffers, empty ones left out, up to the first file (its bytes go in a send
 * of their own). Returns how many, 0 when gv_ cannot be had (the head then goes alone). */
static uint32_t mux__stream_gather(mux_stream_t *s, const mux_write_t *req)
{
    if (!s->gv_ && !(s->gv_ = malloc(MUX__GATHER_MAX * sizeof *s->gv_)))
        return 0;
    uint32_t k = 0;
    for (; req; req = req->next_) {
        for (uint32_t i = req->idx_; i < req->nbufs_; i++) {
            size_t off = i == req->idx_ ? req->off_ : 0;
            if (req->bufs_[i].len == off)
                continue;
            if (k == MUX__GATHER_MAX)
                return k;
            s->gv_[k].base = req->bufs_[i].base + off;
            s->gv_[k].len = req->bufs_[i].len - off;
            k++;
        }
        if (req->ffd_ >= 0)
            return k;
    }
    return k;
}

/* The pipe's handle is closed (a pipe stream's shutdown or close): the operations it ran under
 * are cancelled first, and forget it, so that a completion that comes afterwards touches no
 * handle (backend.h, "Pipes"). */
static void mux__stream_pipe_close(mux_stream_t *s)
{
    mux__op_cancel(s->loop_, &s->rop_);
    mux__op_cancel(s->loop_, &s->wop_);
    mux__pipe_close(s->sock_);
    s->sock_ = s->rop_.sock_ = s->wop_.sock_ = MUX_OS_SOCK_INVALID;
}

/* A pipe has no half-close: the shutdown of a stream on one, once its writes have gone,
 * closes the pipe (the child reads what was written, then the end of its input). Reading ends
 * there too: a receive in flight is cancelled, and reads find the end of the stream (0). */
static void mux__stream_pipe_shut(mux_stream_t *s)
{
    mux__stream_pipe_close(s);
    s->status_ = 0;
    s->flags_ |= S_SHUT | S_DSHUT | S_PGONE;
    mux__stream_kick(s);
}

/* Hands the head of the queue to the backend when the write slot is free; with nothing left
 * to write, a shutdown that waited for the queue goes now. Empty writes finish here. */
static void mux__stream_send_next(mux_stream_t *s)
{
    if (mux__op_in_flight(&s->wop_) || (s->flags_ & (S_WDONE | S_CLOSING)))
        return; /* the slot's last completion is taken in first */
    struct mux__op *op = &s->wop_;
    mux_write_t *req;
    while ((req = s->wq_head_) != NULL && req->left_ == 0) {
        mux__write_pop_done(s, req);
        mux__stream_kick(s);
    }
    if (!req) {
        if ((s->flags_ & (S_SHUTTING | S_SHUT)) != S_SHUTTING)
            return;
        if (s->flags_ & S_PIPE) {
            mux__stream_pipe_shut(s);
        } else {
            op->kind_ = MUX__OP_SHUTDOWN;
            mux__op_hint(op, 0);
            mux__op_submit(s->loop_, op);
        }
        return;
    }
    while (req->idx_ < req->nbufs_ && req->bufs_[req->idx_].len == req->off_) {
        req->idx_++; /* empty or finished buffers */
        req->off_ = 0;
    }
    uint32_t n;
    if (req->idx_ == req->nbufs_) { /* the buffers are out: the file's bytes */
        op->kind_ = MUX__OP_SENDFILE;
        op->a_.file.fd = req->ffd_;
        op->a_.file.off = req->foff_;
        op->a_.file.len = req->left_ < UINT32_MAX ? (uint32_t)req->left_ : UINT32_MAX;
    } else if ((req->next_ || req->ffd_ >= 0) && (n = mux__stream_gather(s, req)) > 1) {
        op->kind_ = MUX__OP_SENDV;
        op->a_.bufs.v = s->gv_;
        op->a_.bufs.n = n;
    } else if (req->off_ > 0 || req->idx_ + 1 == req->nbufs_) { /* one buffer, or the last */
        op->kind_ = MUX__OP_SEND;
        op->a_.buf.base = req->bufs_[req->idx_].base + req->off_;
        op->a_.buf.len = req->bufs_[req->idx_].len - req->off_;
    } else {
        op->kind_ = MUX__OP_SENDV;
        op->a_.bufs.v = &req->bufs_[req->idx_];
        op->a_.bufs.n = req->nbufs_ - req->idx_;
    }
    /* A file's bytes after the write's own buffers (a response's head) wait for the socket
     * to report room rather than follow at once: sent at once, they made large files go
     * slower, the client spending more CPU per byte (docs/studies.md has the run). */
    int after_bufs = op->kind_ == MUX__OP_SENDFILE && req->nbufs_ > 0;
    mux__op_hint(op, (s->flags_ & S_WFULL) || after_bufs ? MUX__OPF_POLL_FIRST : 0);
    mux__op_submit(s->loop_, op);
}

/* The send of `req`, the first write of an empty queue: one buffer's goes out at once, as
 * send_next would send it, without its walk of the queue (a reply's common case). */
static void mux__stream_send_first(mux_stream_t *s, mux_write_t *req)
{
    struct mux__op *op = &s->wop_;
    if (req->nbufs_ != 1 || req->ffd_ >= 0 || req->left_ == 0 || mux__op_in_flight(op) ||
        (s->flags_ & (S_WDONE | S_CLOSING))) {
        mux__stream_send_next(s);
        return;
    }
    op->kind_ = MUX__OP_SEND;
    /* What a direct send left of it (mux__write): its buffer from off_ on. */
    op->a_.buf = mux_buf_init(req->bufs_[0].base + req->off_, req->bufs_[0].len - req->off_);
    mux__op_hint(op, s->flags_ & S_WFULL ? MUX__OPF_POLL_FIRST : 0);
    mux__op_submit(s->loop_, op);
}

/* The send in flight completed with `res` (bytes, or -errno). */
static void mux__stream_sent(mux_stream_t *s, int res)
{
    int stale = (s->flags_ & S_WHOLD) != 0; /* its writes failed meanwhile */
    s->flags_ &= ~(unsigned)S_WHOLD;
    mux_write_t *req = s->wq_head_;
    if (!stale && req && res >= 0) {
        if (s->to_.idle_ns | s->to_.write_ns)
            s->last_write_ = mux__now(s->loop_);
        /* The send covered the head's bytes first, then the next write's (gathered). */
        size_t n = (size_t)res;
        for (;;) {
            size_t take = n < req->left_ ? n : req->left_;
            mux__write_advance(req, take);
            n -= take;
            if (req->left_ != 0)
                break;
            mux__write_pop_done(s, req);
            if (n == 0 || (req = s->wq_head_) == NULL)
                break;
        }
    } else if (!stale && req && res != -ECANCELED && res != -EINTR && res != -EAGAIN) {
        mux__writes_fail(s, res);
    }
    mux__stream_send_next(s);
}

/* The write slot's operation completed: a send, the connect, or the shutdown. */
static void mux__stream_wop_finished(mux_stream_t *s)
{
    int res = s->wres_;
    switch (s->wop_.kind_) {
    case MUX__OP_CONNECT:
        if (res == -ECANCELED && (s->flags_ & S_CTIMEOUT))
            res = -ETIMEDOUT;
        s->status_ = res;
        s->flags_ |= S_DCONNECT | (res == 0 ? S_CONNECTED : 0);
        s->last_read_ = s->last_write_ = mux__now(s->loop_);
        return;
    case MUX__OP_SHUTDOWN:
        s->status_ = res;
        s->flags_ |= S_SHUT | S_DSHUT;
        return;
    default:
        if (!(s->flags_ & S_CLOSING))
            mux__stream_sent(s, res);
        else
            s->flags_ &= ~(unsigned)S_WHOLD;
    }
}

/* Stream states in which a completion delivered at once (MUX__OPC_NOW) cannot take the fast
 * paths below: something else is due first, or the general path has more to do. */
#define S_FAST_WNOT                                                                               \
    (S_IN_TASK | S_CLOSING | S_WHOLD | S_RDONE | S_DCONNECT | S_DSHUT | S_SHUTTING | S_WDONE)
#define S_FAST_RNOT (S_IN_TASK | S_CLOSING | S_RDONE | S_DCONNECT | S_WDONE)

/* The send of the one queued write, of one buffer, completed in full, from where the loop
 * dispatches callbacks, with nothing else due: what the task would do (the send taken in, the
 * write popped, its callback), without the task's rounds. Returns 1 when it did. */
static inline int mux__stream_sent_fast(mux_stream_t *s, int res, unsigned flags)
{
    mux_write_t *req = s->wq_head_;
    if (!(flags & MUX__OPC_NOW) || res <= 0 || (s->flags_ & S_FAST_WNOT) || !req || req->next_ ||
        (size_t)res != req->left_ || s->done_head_ || s->fail_ || s->wop_.kind_ != MUX__OP_SEND)
        return 0;
    s->wq_bytes_ -= (size_t)res;
    unsigned f = (s->flags_ & ~(unsigned)S_WFULL) | (flags & MUX__OPC_FULL ? (unsigned)S_WFULL : 0);
    if (s->to_.idle_ns | s->to_.write_ns)
        s->last_write_ = mux__now(s->loop_);
    req->left_ = 0;
    req->next_ = NULL;
    req->status_ = 0;
    s->wq_head_ = s->wq_tail_ = NULL;
    if (req->cb_ == mux__pwrite_done) {
        /* mux_write_pool's: its buffer goes back, and no callback runs, so nothing else became
         * due (the checks above): the task's rounds only for a receive to arm. */
        s->flags_ = f;
        mux__pwrite_sent(s, (struct mux__pwrite *)(void *)req);
        if (mux__unlikely((f & S_READING) && !mux__op_in_flight(&s->rop_)))
            mux__stream_run(&s->task_);
        return 1;
    }
    s->flags_ = f | S_IN_TASK;
    req->cb_(req, 0);
    mux__stream_after(s);
    return 1;
}

/* The write slot's completion, past the fast case below. */
static __attribute__((noinline)) int mux__stream_wop_slow(mux_stream_t *s, int res, unsigned flags)
{
    unsigned f = s->flags_;
    if (f & S_PSEND) {
        /* mux_write_pool's send, without a request: sent whole, its buffer goes back, and
         * nothing else became due (no callback runs; nothing was queued behind it, or it would
         * have a request). Anything else, and it gets its request, for the general path. */
        if (res > 0 && (size_t)res == s->wq_bytes_ && !(f & (S_CLOSING | S_SHUTTING))) {
            s->wq_bytes_ = 0;
            f = (f & ~(unsigned)(S_PSEND | S_WFULL)) |
                (flags & MUX__OPC_FULL ? (unsigned)S_WFULL : 0);
            s->flags_ = f;
            if (s->to_.idle_ns)
                s->last_write_ = mux__now(s->loop_);
            mux__bufpool_sent(s->wpool_, s->widx_);
            if ((f & S_READING) && !mux__op_in_flight(&s->rop_))
                mux__stream_completed(s, flags); /* the task's rounds, for a receive to arm */
            return 0;
        }
        mux__psend_materialize(s);
    }
    if (mux__stream_sent_fast(s, res, flags))
        return 0;
    /* The queue's size drops as the bytes leave, not when the task takes the result in. */
    if (res > 0 && mux__wop_is_send(s) && !(s->flags_ & (S_WHOLD | S_CLOSING)))
        s->wq_bytes_ -= (size_t)res;
    s->wres_ = res;
    s->flags_ = (s->flags_ & ~(unsigned)S_WFULL) | S_WDONE |
                (flags & MUX__OPC_FULL ? (unsigned)S_WFULL : 0);
    mux__stream_completed(s, flags);
    return 0;
}

/* The echo's case first, with no call and so no registers to save: mux_write_pool's send
 * without a request (S_PSEND) went whole, no deadline clock to restart, a pool that wants no
 * word of buffers coming back, and the receive armed (or not wanted). Its buffer goes back
 * on the pool's free list and nothing else is due. */
static int mux__stream_wop_done(struct mux__op *op, int res, char *buf, unsigned flags)
{
    mux_stream_t *s = mux__container_of(op, mux_stream_t, wop_);
    (void)buf;
    unsigned f = s->flags_;
    mux_bufpool_t *p = s->wpool_;
    if (mux__likely((f & (S_PSEND | S_CLOSING | S_SHUTTING)) == S_PSEND && res > 0 &&
                    (size_t)res == s->wq_bytes_ && !s->to_.idle_ns && !mux__bufpool_hooked(p) &&
                    (!(f & S_READING) || mux__op_in_flight(&s->rop_)))) {
        s->wq_bytes_ = 0;
        s->flags_ =
            (f & ~(unsigned)(S_PSEND | S_WFULL)) | (flags & MUX__OPC_FULL ? (unsigned)S_WFULL : 0);
        mux__bufpool_sent_unhooked(p, s->widx_);
        return 0;
    }
    return mux__stream_wop_slow(s, res, flags);
}

/* ---- reads ------------------------------------------------------------------------- */

/* Bytes arrived: the read and idle deadlines start again (the clock only when they apply). */
static void mux__stream_read_moved(mux_stream_t *s)
{
    if (s->to_.idle_ns | s->to_.read_ns)
        s->last_read_ = mux__now(s->loop_);
}

static void mux__stream_stop_reading(mux_stream_t *s)
{
    /* A guess does not outlive a stop: a reader that stops per message, like an echo server,
     * fills its buffer and then finds the socket empty. What the kernel said does. */
    s->flags_ &= ~(unsigned)(S_READING | S_RFILLED);
    /* A pool receive that completes anyway is kept for the next start. One not in flight
     * has nothing to cancel: an emulated one keeps its watcher for the next start (a report
     * meanwhile stops it, stream/ready_ops.c), which an echo server, stopping and starting
     * at every message, would otherwise stop and start each time. Close stops it for good.
     * A multishot receive stays armed; a second completion ends it (rop_done). */
    if (mux__op_in_flight(&s->rop_) && !(s->rop_.flags_ & MUX__OPF_MULTI))
        mux__op_cancel(s->loop_, &s->rop_);
}

/* A multishot receive's next completion while the last one waits for delivery: refused
 * (backend.h, "Multishot"), or, closing, its buffer given back. */
static __attribute__((noinline)) int mux__stream_rop_surplus(mux_stream_t *s, struct mux__op *op,
                                                             char *buf, unsigned flags)
{
    if (s->flags_ & S_CLOSING) {
        if (buf)
            mux_bufpool_put(op->a_.pool, buf);
        if (!(flags & MUX__OPC_MORE))
            mux__stream_completed(s, flags); /* the close waits for its end */
        return 0;
    }
    if (s->flags_ & S_READING)
        return 1;                    /* next, once the one waiting is delivered */
    if (!(s->flags_ & S_RSURPLUS)) { /* data goes on arriving: end it (once) */
        s->flags_ |= S_RSURPLUS;
        mux__op_cancel(s->loop_, op);
    }
    return 2; /* until reading starts again */
}

static int mux__stream_rop_slow(mux_stream_t *s, struct mux__op *op, int res, char *buf,
                                unsigned flags);

static int mux__stream_rop_done(struct mux__op *op, int res, char *buf, unsigned flags)
{
    mux_stream_t *s = mux__container_of(op, mux_stream_t, rop_);
    unsigned f = s->flags_;
    if (mux__likely((flags & MUX__OPC_NOW) && res > 0 && buf &&
                    (f & (S_FAST_RNOT | S_READING | S_POOL)) == (S_READING | S_POOL))) {
        /* Bytes in a pool buffer, from where the loop dispatches callbacks, with nothing due
         * before them (the top's order): delivered as the task would, without its rounds. */
        s->flags_ = (f & ~(unsigned)(S_RMORE | S_RFILLED)) | S_IN_TASK |
                    (flags & MUX__OPC_NONEMPTY ? S_RMORE : 0) |
                    (flags & MUX__OPC_FILLED ? (unsigned)S_RFILLED : 0);
        mux__stream_read_moved(s);
        s->read_cb_(s, res, buf);
        mux__stream_after(s);
        return 0;
    }
    return mux__stream_rop_slow(s, op, res, buf, flags);
}

/* A receive's completion past the fast case above. */
static __attribute__((noinline)) int mux__stream_rop_slow(mux_stream_t *s, struct mux__op *op,
                                                          int res, char *buf, unsigned flags)
{
    if (mux__unlikely(s->flags_ & S_RDONE))
        return mux__stream_rop_surplus(s, op, buf, flags);
    s->flags_ = (s->flags_ & ~(unsigned)(S_RMORE | S_RFILLED)) |
                (flags & MUX__OPC_NONEMPTY ? S_RMORE : 0) |
                (flags & MUX__OPC_FILLED ? (unsigned)S_RFILLED : 0);
    if (mux__unlikely(res == -ENOBUFS && (op->flags_ & MUX__OPF_MULTI))) {
        /* The kernel's ring ran dry, which a burst can do with buffers left in the pool: a
         * single receive says whether the pool is empty. */
        s->flags_ |= S_RSINGLE;
        res = -EAGAIN;
    }
    if (res == -ECANCELED || res == -EAGAIN || res == -EINTR) {
        /* Nothing to deliver: stopped, or the ring was renewed (fork). */
        if (s->flags_ & (S_READING | S_CLOSING))
            mux__stream_completed(s, flags); /* the next receive; or the close, waiting */
        return 0;
    }
    s->flags_ |= S_RDONE;
    s->rres_ = res;
    s->rgot_ = buf;
    s->roff_ = 0;
    mux__stream_completed(s, flags);
    return 0;
}

/* Submits the next receive, from the task only (see the top of the file). */
static void mux__stream_recv_next(mux_stream_t *s)
{
    struct mux__op *op = &s->rop_;
    if ((s->flags_ & (S_READING | S_CLOSING | S_RDONE)) != S_READING || mux__op_in_flight(op))
        return;
    if (mux__unlikely(s->flags_ & S_PGONE)) { /* the pipe was shut: the end, at once */
        s->flags_ |= S_RDONE;
        s->rres_ = 0;
        s->rgot_ = NULL;
        s->roff_ = 0;
        return;
    }
    unsigned hint = s->flags_ & (S_RMORE | S_RFILLED) ? 0 : MUX__OPF_POLL_FIRST;
    if (s->flags_ & S_POOL) {
        op->kind_ = MUX__OP_RECV_POOL;
        op->a_.pool = s->rto_.pool;
        if ((s->loop_->caps & MUX__CAP_RECV_MULTI) && !(s->flags_ & S_RSINGLE) &&
            mux__op_native(s->loop_, op))
            hint |= MUX__OPF_MULTI;
        s->flags_ &= ~(unsigned)(S_RSINGLE | S_RSURPLUS);
    } else {
        op->kind_ = MUX__OP_RECV;
        op->a_.buf = s->rto_.buf;
    }
    mux__op_hint(op, hint);
    mux__op_submit(s->loop_, op);
}

/* Delivers a completed receive. Bytes kept in a pool buffer since a stop, with reading
 * restarted into a caller buffer, are copied there a buffer at a time. */
static void mux__stream_received(mux_stream_t *s)
{
    int res = s->rres_;
    char *buf = s->rgot_;
    mux_bufpool_t *from = s->rop_.a_.pool;
    if (res > 0 && buf && !(s->flags_ & S_POOL)) {
        size_t n = (size_t)res - s->roff_;
        if (n > s->rto_.buf.len)
            n = s->rto_.buf.len;
        memcpy(s->rto_.buf.base, buf + s->roff_, n);
        s->roff_ += (uint32_t)n;
        if (s->roff_ == (uint32_t)res) {
            s->flags_ &= ~(unsigned)S_RDONE;
            s->rgot_ = NULL;
            mux_bufpool_put(from, buf);
        }
        mux__stream_read_moved(s);
        s->read_cb_(s, (ssize_t)n, s->rto_.buf.base);
        return;
    }
    s->flags_ &= ~(unsigned)S_RDONE;
    s->rgot_ = NULL;
    if (res > 0) {
        if (!buf) {
            buf = s->rto_.buf.base;
        } else if (s->roff_) {
            res -= (int)s->roff_;
            memmove(buf, buf + s->roff_, (size_t)res);
        }
        mux__stream_read_moved(s);
        s->read_cb_(s, res, buf);
        return;
    }
    if (buf)
        mux_bufpool_put(from, buf);
    mux__stream_stop_reading(s);
    s->read_cb_(s, res, NULL); /* 0 (end of stream), -ENOBUFS, -ECONNRESET, ... */
}

/* ---- delivery ---------------------------------------------------------------------- */

/* Fails the reader and every queued write with `err` (a timeout, or a timer that could not
 * be armed). From a loop callback only: the read callback runs from here. */
static void mux__stream_fail(mux_stream_t *s, int err)
{
    if (err == -ETIMEDOUT && mux__stream_connecting(s)) {
        s->flags_ |= S_CTIMEOUT; /* its completion, -ECANCELED, becomes -ETIMEDOUT */
        mux__op_cancel(s->loop_, &s->wop_);
    }
    mux__writes_fail(s, err);
    mux__stream_send_next(s); /* a shutdown that waited for the writes goes */
    if (s->flags_ & S_READING) {
        mux__stream_stop_reading(s);
        s->read_cb_(s, err, NULL);
    }
}

/* The stream is closed and nothing is in flight: its memory goes back to the caller. */
static void mux__stream_finish(mux_stream_t *s)
{
    struct mux__loop *loop = s->loop_;
    mux_close_cb cb = s->close_cb_;
    if (s->rgot_)
        mux_bufpool_put(s->rop_.a_.pool, s->rgot_); /* kept since a stop, never delivered */
    free(s->gv_);
    s->gv_ = NULL;
    mux__pwrite_free_all(s);
    mux__unqueue(loop, &s->task_.h_);
    mux__handle_close(loop, &s->link_, &s->flags_);
    s->flags_ = 0;
    s->loop_ = NULL;
    if (cb)
        cb(s);
}

/* Delivers everything that is due, in the order given at the top of the file. */
static void mux__stream_run(struct mux__task *t)
{
    mux_stream_t *s = mux__container_of(t, mux_stream_t, task_);
    s->flags_ |= S_IN_TASK;
    mux__stream_deliver(s);
}

/* The task's body, with S_IN_TASK set; it clears it (or the stream is finished). */
static void mux__stream_deliver(mux_stream_t *s)
{
    for (;;) {
        unsigned f = s->flags_;
        if (f & S_WDONE) {
            s->flags_ &= ~(unsigned)S_WDONE;
            mux__stream_wop_finished(s);
        } else if (f & S_DCONNECT) {
            s->flags_ &= ~(unsigned)S_DCONNECT;
            s->cb_.connect(s, s->status_);
        } else if ((f & (S_RDONE | S_READING | S_CLOSING)) == (S_RDONE | S_READING)) {
            mux__stream_received(s); /* first: bytes in a caller buffer wait for nothing */
        } else if (s->done_head_ && !(f & S_WHOLD)) {
            mux_write_t *req = s->done_head_;
            s->done_head_ = req->next_;
            if (!s->done_head_)
                s->done_tail_ = NULL;
            req->next_ = NULL;
            req->cb_(req, req->status_);
        } else if (f & S_DSHUT) {
            s->flags_ &= ~(unsigned)S_DSHUT;
            s->cb_.shutdown(s, s->status_);
        } else if (s->fail_ && !(f & S_CLOSING)) {
            int err = s->fail_;
            s->fail_ = 0;
            mux__stream_fail(s, err);
        } else if (f & S_CLOSING) {
            if (!mux__op_in_flight(&s->rop_) && !mux__op_in_flight(&s->wop_)) {
                mux__stream_finish(s); /* the memory is the caller's from here on */
                return;
            }
            break; /* the last completions come first */
        } else if ((f & (S_READING | S_RDONE)) == S_READING && !mux__op_in_flight(&s->rop_)) {
            mux__stream_recv_next(s);
            if (!(s->flags_ & S_RDONE))
                break; /* waiting for bytes; a receive done at once is delivered next */
        } else {
            break;
        }
    }
    s->flags_ &= ~(unsigned)S_IN_TASK;
}

/* ---- timeouts ---------------------------------------------------------------------- */

/* A connect counts as writing: the idle and write timeouts cover it. */
static uint64_t mux__stream_next_deadline(mux_stream_t *s, uint64_t now, int *expired)
{
    uint64_t next = UINT64_MAX,
             last = s->last_read_ > s->last_write_ ? s->last_read_ : s->last_write_;
    struct {
        uint64_t limit, since;
        int applies;
    } c[3] = {
        {s->to_.idle_ns, last, 1},
        {s->to_.read_ns, s->last_read_, (s->flags_ & S_READING) != 0},
        {s->to_.write_ns, s->last_write_,
         s->wq_head_ != NULL || (s->flags_ & S_PSEND) || mux__stream_connecting(s)},
    };
    *expired = 0;
    for (int i = 0; i < 3; i++) {
        if (!c[i].limit || !c[i].applies)
            continue;
        uint64_t at = c[i].since + c[i].limit;
        if (at < c[i].since)
            continue; /* beyond the end of time: never */
        if (at <= now)
            *expired = 1;
        else if (at < next)
            next = at;
    }
    return next;
}

/* Sleeps until the earliest deadline that applies now; none applies: no timer. Reading
 * and writing arm it again when they start. 0, or -ENOMEM (the timer heap cannot grow). */
static int mux__stream_arm_timer(mux_stream_t *s)
{
    int expired;
    uint64_t now = mux__now(s->loop_), at = mux__stream_next_deadline(s, now, &expired);
    if (!expired && at == UINT64_MAX) {
        mux_timer_stop(s->loop_->pub, &s->timer_);
        return 0;
    }
    /* Usually a deadline moved later (bytes moved): no heap operation (timer.c). */
    return mux__timer_set(s->loop_, &s->timer_, expired ? now : at);
}

/* Arms the timer from inside an operation the caller asked for; a failure reaches the
 * reader and the writes from the task, as a timeout would. */
static void mux__stream_rearm_timer(mux_stream_t *s)
{
    int err = mux__stream_arm_timer(s);
    if (err != 0 && !s->fail_) {
        s->fail_ = err;
        mux__stream_kick(s);
    }
}

/* A deadline at `at` began (reading or writing started): the timer moves only when it
 * sleeps past it. One that wakes first finds nothing expired and sleeps again until the
 * earliest deadline then, this one included. */
static void mux__stream_deadline(mux_stream_t *s, uint64_t limit, uint64_t since)
{
    const mux_timer_t *t = &s->timer_;
    if ((t->h_.flags & MUX__W_ACTIVE) && t->due_ <= since + limit) /* as next_deadline adds */
        return; /* its deadline: the heap may still hold an earlier one (timer.c) */
    mux__stream_rearm_timer(s);
}

static void mux__stream_timer_cb(mux_loop_t *pub, mux_timer_t *t)
{
    mux_stream_t *s = mux__container_of(t, mux_stream_t, timer_);
    int expired;
    (void)pub;
    mux__stream_next_deadline(s, mux__now(s->loop_), &expired);
    if (!expired) {
        mux__stream_rearm_timer(s);
        return;
    }
    mux__stream_fail(s, -ETIMEDOUT);
    /* Still open (the callback may have closed it): keep watching. */
    if (mux__stream_valid(s)) {
        s->last_read_ = s->last_write_ = mux__now(s->loop_);
        mux__stream_rearm_timer(s);
    }
}

/* ---- opening ----------------------------------------------------------------------- */

/* `adopted`: the socket is bound to the loop's backend already (a stream moved). */
static int mux__stream_setup_as(struct mux__loop *loop, mux_stream_t *s, mux_os_sock_t sock,
                                unsigned flags, int adopted)
{
    int err = mux__reserve(loop); /* room to queue its task whenever it needs to */
    struct mux__handles *streams = err == 0 ? mux__handles_get(loop, &mux__stream_type) : NULL;
    if (err == 0 && !streams)
        err = -ENOMEM;
    if (err == 0 && !adopted && loop->backend->adopt)
        err = loop->backend->adopt(loop, sock);
    if (err != 0)
        return err;
    void *data = s->data;
    memset(s, 0, sizeof *s);
    s->data = data;
    s->loop_ = loop;
    s->sock_ = sock;
    s->flags_ = S_OPEN | flags;
    mux_timer_init(&s->timer_, mux__stream_timer_cb);
    s->timer_.h_.flags |= MUX__W_NOREF;
    mux__task_init(&s->task_, mux__stream_run);
    s->rop_.done_ = mux__stream_rop_done;
    s->rop_.sock_ = sock;
    s->wop_.done_ = mux__stream_wop_done;
    s->wop_.sock_ = sock;
    s->last_read_ = s->last_write_ = mux__now(loop);
    mux__handle_open(loop, streams, &s->link_, &s->flags_); /* counted until its close ends */
    return 0;
}

static int mux__stream_setup(struct mux__loop *loop, mux_stream_t *s, mux_os_sock_t sock,
                             unsigned flags)
{
    return mux__stream_setup_as(loop, s, sock, flags, 0);
}

int mux__stream_move(mux_stream_t *from, mux_stream_t *to)
{
    struct mux__loop *loop = from->loop_;
    if (!mux__stream_valid(from) || !(from->flags_ & S_CONNECTED) ||
        (from->flags_ & (S_READING | S_RDONE | S_WDONE | S_SHUTTING | S_IN_TASK)) ||
        mux__op_in_flight(&from->rop_) || mux__op_in_flight(&from->wop_) || from->wq_head_ ||
        from->done_head_ || (from->timer_.h_.flags & MUX__W_ACTIVE))
        return -EBUSY;
    if (mux__reserve(loop) != 0) /* as setup would: then nothing fails past this point */
        return -ENOMEM;
    /* Nothing is in flight: the emulation's watchers go, as in a close; the socket stays. */
    mux__ready_release(loop, &from->rop_);
    mux__ready_release(loop, &from->wop_);
    mux_os_sock_t sock = from->sock_;
    unsigned flags = from->flags_ & (S_CONNECTED | S_UNIX);
    free(from->gv_);
    from->gv_ = NULL;
    mux__pwrite_free_all(from);
    mux__unqueue(loop, &from->task_.h_);
    mux__handle_close(loop, &from->link_, &from->flags_);
    from->flags_ = 0;
    from->loop_ = NULL;
    return mux__stream_setup_as(loop, to, sock, flags, 1); /* reserved: it cannot fail */
}

MUX_EXPORT int mux_stream_open(mux_loop_t *pub, mux_stream_t *s, mux_os_sock_t sock)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !s || sock == MUX_OS_SOCK_INVALID)
        return -EINVAL;
#ifndef _WIN32
    if (sock < 0 || sock >= loop->backend->fd_limit) /* select: FD_SETSIZE */
        return -EINVAL;
#endif
    int family = mux__sock_adopt(sock);
    if (family < 0)
        return family;
    return mux__stream_setup(loop, s, sock, S_CONNECTED | (family == AF_UNIX ? S_UNIX : 0));
}

int mux__stream_pipes(const struct mux__loop *loop)
{
    return (loop->caps & MUX__CAP_PIPE) != 0;
}

int mux__stream_open_pipe(struct mux__loop *loop, mux_stream_t *s, mux_os_sock_t pipe)
{
    if (!mux__stream_pipes(loop))
        return -ENOTSUP;
    int err = mux__stream_setup(loop, s, pipe, S_CONNECTED | S_PIPE);
    if (err != 0)
        return err;
    s->rop_.flags_ = s->wop_.flags_ = MUX__OPF_PIPE; /* kept by every submit */
    return 0;
}

int mux__stream_open_set_up(struct mux__loop *loop, mux_stream_t *s, mux_os_sock_t sock,
                            int is_unix)
{
#ifndef _WIN32
    if (sock < 0 || sock >= loop->backend->fd_limit) /* select: FD_SETSIZE */
        return -EINVAL;
#endif
    return mux__stream_setup(loop, s, sock, S_CONNECTED | (is_unix ? S_UNIX : 0));
}

MUX_EXPORT int mux_stream_accept(mux_listener_t *l, mux_stream_t *s, mux_os_sock_t sock)
{
    if (!mux__listener_valid(l) || !s || sock == MUX_OS_SOCK_INVALID)
        return -EINVAL;
    return mux__stream_open_set_up(l->loop_, s, sock, mux__listener_is_unix(l));
}

MUX_EXPORT int mux_stream_connect(mux_loop_t *pub, mux_stream_t *s, const struct sockaddr *addr,
                                  socklen_t addrlen, mux_connect_cb cb)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !s || !addr || !cb || addrlen < (socklen_t)sizeof addr->sa_family)
        return -EINVAL;
    int family = addr->sa_family;
    if (family != AF_INET && family != AF_INET6 && family != AF_UNIX)
        return -EAFNOSUPPORT;
    int sock = mux__sock_stream(family);
    if (sock < 0)
        return sock;
    int err = sock >= loop->backend->fd_limit ? -EMFILE : 0; /* select: FD_SETSIZE */
    if (err == 0)
        err = mux__stream_setup(loop, s, (mux_os_sock_t)sock, family == AF_UNIX ? S_UNIX : 0);
    if (err != 0) {
        mux__sock_close((mux_os_sock_t)sock);
        return err;
    }
    s->cb_.connect = cb;
    struct mux__op *op = &s->wop_;
    op->kind_ = MUX__OP_CONNECT;
    op->a_.addr.sa = addr;
    op->a_.addr.len = (uint32_t)addrlen;
    mux__op_submit(loop, op);
    return 0;
}

/* ---- the caller's calls ------------------------------------------------------------ */

/* A multishot receive may have parked completions: offered again from the next wait
 * (the close gives their buffers back). */
static void mux__stream_unpark(mux_stream_t *s)
{
    if ((s->rop_.flags_ & (MUX__OPF_FLIGHT | MUX__OPF_MULTI)) == (MUX__OPF_FLIGHT | MUX__OPF_MULTI))
        s->loop_->ops_unpark = 1;
}

static inline __attribute__((always_inline)) void mux__read_start(mux_stream_t *s, mux_read_cb cb)
{
    s->read_cb_ = cb;
    s->flags_ |= S_READING;
    mux__stream_kick(s); /* a kept receive first, else the next one */
    mux__stream_unpark(s);
    if (s->to_.idle_ns | s->to_.read_ns) { /* no clock read for a stream without them */
        s->last_read_ = mux__now(s->loop_);
        if (s->to_.read_ns)
            mux__stream_deadline(s, s->to_.read_ns, s->last_read_);
    }
}

/* Whether `s` may start reading: 0, -EBUSY already reading, -ENOTCONN not connected. */
static int mux__read_can_start(const mux_stream_t *s)
{
    if (s->flags_ & S_READING)
        return -EBUSY;
    return s->flags_ & S_CONNECTED ? 0 : -ENOTCONN;
}

MUX_EXPORT int mux_read_start(mux_stream_t *s, char *buf, size_t len, mux_read_cb cb)
{
    if (!mux__stream_valid(s) || !buf || !len || !cb)
        return -EINVAL;
    int err = mux__read_can_start(s);
    if (err != 0)
        return err;
    s->rto_.buf = mux_buf_init(buf, len);
    s->flags_ &= ~(unsigned)S_POOL;
    if (mux__op_in_flight(&s->rop_) && (s->rop_.flags_ & MUX__OPF_MULTI))
        mux__op_cancel(s->loop_, &s->rop_); /* a pool's, kept armed since a stop: end it */
    mux__read_start(s, cb);
    return 0;
}

MUX_EXPORT int mux_read_start_pool(mux_stream_t *s, mux_bufpool_t *pool, mux_read_cb cb)
{
    /* !mem_: what mux_bufpool_available refuses, inline (an echo server restarts per message). */
    if (!mux__stream_valid(s) || !pool || !pool->mem_ || !cb)
        return -EINVAL;
    int err = mux__read_can_start(s); /* before the pool is bound */
    if (err != 0)
        return err;
    /* A receive of another pool still in flight (stopped, not yet ended), or bytes kept in a
     * buffer of another pool: restart with that pool. */
    int other = s->rop_.kind_ == MUX__OP_RECV_POOL && s->rop_.a_.pool != pool;
    if (other && (mux__op_in_flight(&s->rop_) || ((s->flags_ & S_RDONE) && s->rgot_))) {
        if (s->rop_.flags_ & MUX__OPF_MULTI) /* kept armed since the stop: end it now */
            mux__op_cancel(s->loop_, &s->rop_);
        return -EBUSY;
    }
    struct mux__loop *loop = s->loop_, *owner = mux__bufpool_owner(pool);
    if (owner && owner != loop)
        return -EINVAL; /* its buffers are in another loop's kernel ring */
    /* Attached, the pool's receives run in the kernel; refused (a pool larger than a ring
     * holds: -ENOTSUP), they are emulated. Only a lack of memory stops the start: the
     * backend's receives need the state the attach makes (IOCP counts them in it). */
    if (!owner && (loop->caps & MUX__CAP(MUX__OP_RECV_POOL))) {
        int r = loop->backend->pool_attach(loop, pool);
        if (r != 0 && r != -ENOTSUP)
            return r;
    }
    s->rto_.pool = pool;
    s->flags_ |= S_POOL;
    mux__read_start(s, cb);
    return 0;
}

MUX_EXPORT int mux_bufpool_detach(mux_bufpool_t *pool)
{
    if (!pool || !pool->mem_)
        return -EINVAL;
    struct mux__loop *loop = mux__bufpool_owner(pool);
    return loop ? loop->backend->pool_detach(loop, pool) : 0;
}

MUX_EXPORT int mux_read_stop(mux_stream_t *s)
{
    if (!mux__stream_valid(s))
        return -EINVAL;
    if (s->flags_ & S_READING)
        mux__stream_stop_reading(s);
    return 0;
}

/* What a write to an empty queue sends at once where the operation layer would emulate the
 * send, without its round trip (submit, attempt, completion, the slot taken in): the bytes
 * that went, with the socket's fullness noted and the idle clock restarted; or -1 when it did
 * not try or the socket said an error (the normal path meets it again and reports it).
 * Inlined in both callers: called, it cost an epoll echo 27 instructions (779 against 756). */
static inline __attribute__((always_inline)) ssize_t
mux__stream_send_now(mux_stream_t *s, const mux_buf_t *bufs, unsigned nbufs, size_t left)
{
    if ((s->flags_ & (S_WDONE | S_WFULL | S_CLOSING)) || mux__op_in_flight(&s->wop_) ||
        (s->loop_->caps & MUX__CAP(MUX__OP_SEND)) || nbufs > MUX__GATHER_MAX)
        return -1;
    ssize_t w = left ? mux__sock_send(s->sock_, bufs, nbufs) : 0;
    if (w < 0) {
        if (w == -EAGAIN)
            s->flags_ |= S_WFULL; /* the send waits for writability */
        return -1;
    }
    if (s->to_.idle_ns | s->to_.write_ns)
        s->last_write_ = mux__now(s->loop_);
    if ((size_t)w < left)
        s->flags_ |= S_WFULL; /* short: the socket is full */
    return w;
}

/* mux_write's send at once (mux__stream_send_now). Returns 1 when the write is done with (its
 * callback comes from the task); else 0, with the bytes that went taken off `req` and *left:
 * the normal path sends the rest. */
static int mux__stream_send_direct(mux_stream_t *s, mux_write_t *req, const mux_buf_t *bufs,
                                   unsigned nbufs, size_t *left)
{
    ssize_t w = mux__stream_send_now(s, bufs, nbufs, *left);
    if (w < 0)
        return 0;
    if ((size_t)w == *left) {
        req->left_ = 0;
        mux__write_done(s, req, 0);
        mux__stream_kick(s);
        return 1;
    }
    mux__write_advance(req, (size_t)w);
    *left -= (size_t)w;
    return 0;
}

/* What every write checks: the stream can take it, and its bytes add up (to *left). */
static int mux__write_args(const mux_stream_t *s, const mux_buf_t *bufs, unsigned nbufs,
                           size_t *left)
{
    if (!mux__stream_valid(s) || (nbufs > 0 && !bufs))
        return -EINVAL;
    if (s->flags_ & (S_SHUTTING | S_SHUT))
        return -EPIPE;
    if (!(s->flags_ & S_CONNECTED))
        return -ENOTCONN;
    size_t sum = 0;
    for (unsigned i = 0; i < nbufs; i++)
        if (__builtin_add_overflow(sum, (size_t)bufs[i].len, &sum))
            return -EINVAL; /* more bytes than a size_t counts */
    *left = sum;
    /* writev's rule: one write's bytes add up to what an ssize_t holds, so that the queue's
     * size and a write's count are never read as an error. */
    return sum > MUX__SSIZE_MAX ? -EINVAL : 0;
}

static int mux__write(mux_stream_t *s, mux_write_t *req, const mux_buf_t *bufs, unsigned nbufs,
                      int fd, uint64_t off, uint64_t flen, mux_write_cb cb)
{
    size_t left;
    if (!req || !cb || nbufs > INT32_MAX)
        return -EINVAL;
    int err = mux__write_args(s, bufs, nbufs, &left);
    if (err != 0)
        return err;
    if (flen > SIZE_MAX || __builtin_add_overflow(left, (size_t)flen, &left) ||
        left > MUX__SSIZE_MAX)
        return -EINVAL;
    if (fd >= 0 && (s->flags_ & S_PIPE))
        return -ENOTSUP; /* no file send runs on a pipe: the caller reads and writes */
    if (left > MUX__SSIZE_MAX - s->wq_bytes_)
        return -EOVERFLOW; /* the queue's size would no longer fit its ssize_t */
    if (s->flags_ & S_PSEND)
        mux__psend_materialize(s); /* a pool write's send is in flight: queued behind it */
    req->cb_ = cb;
    req->next_ = NULL;
    req->bufs_ = bufs;
    req->nbufs_ = nbufs;
    req->idx_ = 0;
    req->off_ = 0;
    req->left_ = left;
    req->status_ = 0;
    req->ffd_ = fd;
    req->foff_ = off;
    /* A guess does not outlive an answer either: a peer that waits for this one, as a client
     * of an echo or a request-response protocol does, has sent nothing more yet. */
    s->flags_ &= ~(unsigned)S_RFILLED;
    int first = s->wq_head_ == NULL;
    if (first && !flen && mux__stream_send_direct(s, req, bufs, nbufs, &left))
        return 0;
    if (first) {
        s->wq_head_ = req;
        if (s->to_.idle_ns | s->to_.write_ns)
            s->last_write_ = mux__now(s->loop_);
    } else {
        s->wq_tail_->next_ = req;
    }
    s->wq_tail_ = req;
    s->wq_bytes_ += left;
    if (first) {
        mux__stream_send_first(s, req);
        /* A write deadline may come before the one the timer sleeps for now. */
        if (s->wq_head_ && s->to_.write_ns)
            mux__stream_deadline(s, s->to_.write_ns, s->last_write_);
    }
    return 0;
}

/* The states in which a stream takes a write at once: open and connected, nothing shut or
 * closing, the write slot's last completion taken in. */
#define S_WRITE_MASK (S_OPEN | S_CONNECTED | S_CLOSING | S_SHUTTING | S_SHUT | S_WDONE)
#define S_WRITE_OK   (S_OPEN | S_CONNECTED)

/* Whether a write of the one buffer `b` to `s` goes straight to a kernel that sends (io_uring):
 * the arguments are good, the stream can take it, and nothing is queued or in flight before it.
 * The common reply, which then skips mux__write's general path (the same checks, the same
 * outcome). */
static inline int mux__write_fast(const mux_stream_t *s, const mux_buf_t *b)
{
    return s && s->loop_ && (s->flags_ & S_WRITE_MASK) == S_WRITE_OK && !s->wq_head_ &&
           !s->wq_bytes_ && !mux__op_in_flight(&s->wop_) &&
           (s->loop_->caps & MUX__CAP(MUX__OP_SEND)) &&
           (size_t)b->len - 1 < (size_t)MUX__SSIZE_MAX; /* 1 to SSIZE_MAX bytes */
}

/* A write of the one buffer `b` handed straight to a kernel that sends: what mux__write_fast
 * said may be done. */
static inline void mux__write_now(mux_stream_t *s, mux_write_t *req, const mux_buf_t *b,
                                  mux_write_cb cb)
{
    size_t len = b->len;
    *req = (mux_write_t){.data = req->data, .cb_ = cb, .bufs_ = b, .nbufs_ = 1, .left_ = len,
                         .ffd_ = -1};
    s->flags_ &= ~(unsigned)S_RFILLED; /* as mux__write: a peer waits for this answer */
    s->wq_head_ = s->wq_tail_ = req;
    s->wq_bytes_ = len;
    if (s->to_.idle_ns | s->to_.write_ns)
        s->last_write_ = mux__now(s->loop_);
    struct mux__op *op = &s->wop_;
    op->kind_ = MUX__OP_SEND;
    op->a_.buf = *b;
    mux__op_hint(op, s->flags_ & S_WFULL ? MUX__OPF_POLL_FIRST : 0);
    mux__op_submit(s->loop_, op);
    if (s->wq_head_ && s->to_.write_ns)
        mux__stream_deadline(s, s->to_.write_ns, s->last_write_);
}

/* A write of the one buffer `b`: straight to the kernel when it sends and nothing is ahead
 * (mux__write_fast), else through mux__write. */
static inline int mux__write_one(mux_stream_t *s, mux_write_t *req, const mux_buf_t *b,
                                 mux_write_cb cb)
{
    if (!mux__write_fast(s, b))
        return mux__write(s, req, b, 1, -1, 0, 0, cb);
    mux__write_now(s, req, b, cb);
    return 0;
}

MUX_EXPORT int mux_write(mux_stream_t *s, mux_write_t *req, const mux_buf_t *bufs, unsigned nbufs,
                         mux_write_cb cb)
{
    if (nbufs != 1 || !req || !cb || !bufs)
        return mux__write(s, req, bufs, nbufs, -1, 0, 0, cb);
    return mux__write_one(s, req, bufs, cb);
}

/* ---- writes from pool buffers (mux_write_pool) ------------------------------------ */

/* The request of a pool write: a write request of its one buffer, and which buffer of which
 * pool to give back when it ends. Its callback is the library's (mux__pwrite_done), so the
 * write takes the queue's path like any other and keeps its order among them. */
struct mux__pwrite {
    mux_write_t req; /* req.data: the stream */
    mux_buf_t buf;
    mux_bufpool_t *pool;
    uint32_t idx; /* the buffer's index in the pool */
    struct mux__pwrite *next_free;
};

#define MUX__PW_BLOCK 8 /* requests per block: an echo has one or two queued at a time */

struct mux__pwblock {
    struct mux__pwblock *next;
    struct mux__pwrite w[MUX__PW_BLOCK];
};

/* A new block of free requests. 0, or -ENOMEM. */
static __attribute__((noinline)) int mux__pwrite_grow(mux_stream_t *s)
{
    struct mux__pwblock *b = malloc(sizeof *b);
    if (!b)
        return -ENOMEM;
    b->next = s->pw_blocks_;
    s->pw_blocks_ = b;
    for (int i = MUX__PW_BLOCK - 1; i >= 0; i--) {
        b->w[i].next_free = s->pw_free_;
        s->pw_free_ = &b->w[i];
    }
    return 0;
}

/* A free request, from a new block when every one is in use; NULL when none can be had. */
static struct mux__pwrite *mux__pwrite_get(mux_stream_t *s)
{
    if (mux__unlikely(!s->pw_free_) && mux__pwrite_grow(s) != 0)
        return NULL;
    struct mux__pwrite *w = s->pw_free_;
    s->pw_free_ = w->next_free;
    return w;
}

static void mux__pwrite_put(mux_stream_t *s, struct mux__pwrite *w)
{
    w->next_free = s->pw_free_;
    s->pw_free_ = w;
}

/* The stream's memory goes back to the caller: every request with it (none is in use then). */
static void mux__pwrite_free_all(mux_stream_t *s)
{
    struct mux__pwblock *b;
    while ((b = s->pw_blocks_) != NULL) {
        s->pw_blocks_ = b->next;
        free(b);
    }
    s->pw_free_ = NULL;
}

/* The pool write whose send is in flight without a request (S_PSEND) gets one, at the head of
 * the queue, which is empty (anything queued after it makes it one first): the request it
 * would have had from the start, so the general path takes its completion in. The request
 * was set aside when the send went (a free one on the list, which only this takes from while
 * S_PSEND is set), so this cannot fail. */
static void mux__psend_materialize(mux_stream_t *s)
{
    struct mux__pwrite *w = s->pw_free_;
    s->pw_free_ = w->next_free;
    s->flags_ &= ~(unsigned)S_PSEND;
    w->buf = s->wop_.a_.buf;
    w->pool = s->wpool_;
    w->idx = s->widx_;
    w->req = (mux_write_t){.data = s,
                           .cb_ = mux__pwrite_done,
                           .bufs_ = &w->buf,
                           .nbufs_ = 1,
                           .left_ = w->buf.len,
                           .ffd_ = -1};
    s->wq_head_ = s->wq_tail_ = &w->req;
}

/* A pool write was sent whole: its buffer goes back to the pool, its request to the stream. */
static inline void mux__pwrite_sent(mux_stream_t *s, struct mux__pwrite *w)
{
    mux__bufpool_sent(w->pool, w->idx);
    mux__pwrite_put(s, w);
}

/* A pool write ended: its buffer goes back to the pool, and an error (other than the close's
 * -ECANCELED) reaches the reader, as a receive's would. From the task (the fast path of a
 * send's completion calls mux__pwrite_sent itself). */
static void mux__pwrite_done(mux_write_t *req, int status)
{
    struct mux__pwrite *w = (struct mux__pwrite *)(void *)req;
    mux_stream_t *s = req->data;
    mux__pwrite_sent(s, w);
    if (mux__unlikely(status < 0) && status != -ECANCELED &&
        (s->flags_ & (S_READING | S_CLOSING)) == S_READING) {
        mux__stream_stop_reading(s);
        s->read_cb_(s, status, NULL);
    }
}

/* A pool write to an empty queue, sent at once (mux__stream_send_now). Returns the bytes that
 * went: 0 when the socket took none or said an error (the queued send meets it again). */
static size_t mux__pwrite_direct(mux_stream_t *s, char *buf, size_t len)
{
    if (s->wq_head_)
        return 0;
    mux_buf_t b = mux_buf_init(buf, len);
    ssize_t w = mux__stream_send_now(s, &b, 1, len);
    if (w <= 0)
        return 0;
    s->flags_ &= ~(unsigned)S_RFILLED; /* a peer waits for this answer, as in mux__write */
    return (size_t)w;
}

/* The most a pool write sends: what a write's count says (ssize_t), on Windows what one
 * WSABUF holds. */
#ifdef _WIN32
#define MUX__WPOOL_MAX ((size_t)ULONG_MAX)
#else
#define MUX__WPOOL_MAX MUX__SSIZE_MAX
#endif

/* Whether mux_write_pool of `len` bytes to `s` (not NULL) sends with no request: open and
 * reading from a pool (so connected), nothing shut or closing, `len` from 1 to what a send
 * takes, a kernel that sends (io_uring, IOCP), nothing queued or in flight before it (the
 * write slot's last completion taken in), and a free request to set aside. A write deadline
 * watches the send as it would the queue's head (mux__stream_next_deadline). */
static inline int mux__write_pool_fast(const mux_stream_t *s, size_t len)
{
    const struct mux__loop *loop = s->loop_;
    return loop && (s->flags_ & (S_WRITE_MASK | S_POOL | S_PSEND)) == (S_WRITE_OK | S_POOL) &&
           len - 1 < MUX__WPOOL_MAX && !s->wq_head_ && !s->wq_bytes_ &&
           !mux__op_in_flight(&s->wop_) && s->pw_free_ && (loop->caps & MUX__CAP(MUX__OP_SEND));
}

/* The end of mux_write_pool's fast case for a stream with an idle or a write timeout: the
 * clock is read (a call), so out of line, where saving registers costs only the streams that
 * have one. As mux__write_now: a write deadline may come before the one the timer sleeps for
 * now (usually not: no heap operation). */
static __attribute__((noinline)) int mux__psend_timed(mux_stream_t *s, struct mux__loop *loop)
{
    s->last_write_ = mux__now(loop);
    mux__op_submit_native(loop, &s->wop_);
    if (s->to_.write_ns)
        mux__stream_deadline(s, s->to_.write_ns, s->last_write_);
    return 0;
}

/* mux_write_pool past the fast case: every check, and the queue. */
static __attribute__((noinline)) int mux__write_pool_slow(mux_stream_t *s, char *buf, size_t len)
{
    /* A stream that reads from a pool is connected: S_POOL stands for that too. */
    if (!s || !s->loop_ || !buf || len - 1 >= MUX__SSIZE_MAX ||
        (s->flags_ & (S_OPEN | S_CLOSING | S_POOL)) != (S_OPEN | S_POOL))
        return -EINVAL;
#ifdef _WIN32
    if (len > ULONG_MAX)
        return -EINVAL; /* more than one WSABUF holds */
#endif
    if (s->flags_ & (S_SHUTTING | S_SHUT))
        return -EPIPE;
    mux_bufpool_t *pool = s->rto_.pool;
    int native = (s->loop_->caps & MUX__CAP(MUX__OP_SEND)) != 0;
    if (native && !s->pw_free_ && mux__pwrite_grow(s) == 0 && mux__write_pool_fast(s, len))
        return mux_write_pool(s, buf, len); /* a request to set aside was all it lacked */
    if (s->flags_ & S_PSEND)
        mux__psend_materialize(s); /* before a request is taken: this one is set aside */
    if (len > MUX__SSIZE_MAX - s->wq_bytes_)
        return -EOVERFLOW;
    int idx = mux__bufpool_send(pool, buf, len); /* from here on the buffer is the stream's */
    if (idx < 0)
        return idx;
    size_t sent = native ? 0 : mux__pwrite_direct(s, buf, len);
    if (sent == len) {
        mux__bufpool_sent(pool, (uint32_t)idx); /* sent whole: back at once */
        return 0;
    }
    struct mux__pwrite *w = mux__pwrite_get(s);
    if (mux__unlikely(!w)) {
        if (sent == 0) {
            mux__bufpool_unsend(pool, (uint32_t)idx); /* the caller's again */
            return -ENOMEM;
        }
        /* Bytes went already: the rest is lost with the buffer, and the reader hears why. */
        mux__bufpool_sent(pool, (uint32_t)idx);
        if (!s->fail_)
            s->fail_ = -ENOMEM;
        mux__stream_kick(s);
        return 0;
    }
    w->req.data = s;
    w->buf = mux_buf_init(buf + sent, len - sent);
    w->pool = pool;
    w->idx = (uint32_t)idx;
    int err = mux__write(s, &w->req, &w->buf, 1, -1, 0, 0, mux__pwrite_done);
    if (mux__unlikely(err != 0)) { /* the checks above make this unreachable */
        mux__pwrite_put(s, w);
        mux__bufpool_unsend(pool, (uint32_t)idx);
    }
    return err;
}

MUX_EXPORT int mux_write_pool(mux_stream_t *s, char *buf, size_t len)
{
    if (mux__likely(s && buf && mux__write_pool_fast(s, len))) {
        /* The echo's case, where the kernel sends (mux__write_pool_fast). The send goes
         * straight into the kernel's queue, from the whole buffer, with no request: its
         * completion gives the buffer back (wop_done). A free request is set aside for it,
         * for when anything other than that completion comes first (mux__psend_materialize).
         * The call last, with nothing to do after it: no register to save. */
        mux_bufpool_t *pool = s->rto_.pool;
        int idx = mux__bufpool_send(pool, buf, len); /* from here on the buffer is the stream's */
        if (mux__unlikely(idx < 0))
            return idx;
        struct mux__loop *loop = s->loop_;
        s->wpool_ = pool;
        s->widx_ = (uint32_t)idx;
        s->wq_bytes_ = len;
        unsigned f = s->flags_ & ~(unsigned)S_RFILLED; /* as mux__write: a peer waits for it */
        s->flags_ = f | S_PSEND;
        struct mux__op *op = &s->wop_;
        op->kind_ = MUX__OP_SEND;
        op->a_.buf = mux_buf_init(buf, len);
        mux__op_hint(op, f & S_WFULL ? MUX__OPF_POLL_FIRST : 0);
        if (s->to_.idle_ns | s->to_.write_ns)
            return mux__psend_timed(s, loop);
        mux__op_submit_native(loop, op);
        return 0;
    }
    return mux__write_pool_slow(s, buf, len);
}

MUX_EXPORT int mux_write_file(mux_stream_t *s, mux_write_t *req, const mux_buf_t *bufs,
                              unsigned nbufs, int fd, int64_t off, uint64_t len, mux_write_cb cb)
{
    if (fd < 0 || off < 0 || len > (uint64_t)(INT64_MAX - off))
        return -EINVAL;
    return mux__write(s, req, bufs, nbufs, mux__file_os(fd), (uint64_t)off, len, cb);
}

int mux__write_os_file(mux_stream_t *s, mux_write_t *req, const mux_buf_t *bufs, unsigned nbufs,
                       int file, int64_t off, uint64_t len, mux_write_cb cb)
{
    if (file < 0 || off < 0 || len > (uint64_t)(INT64_MAX - off))
        return -EINVAL;
    return mux__write(s, req, bufs, nbufs, file, (uint64_t)off, len, cb);
}

/* libuv's uv_try_write: a send now or nothing, never a queued write and so no callback, which
 * is what a reply that usually fits the socket at once needs (an echo: one send, with none of
 * the request's bookkeeping). It goes out only where mux_write would have sent it at once: no
 * write queued or in flight (the queue keeps the order), and a backend that leaves sends to
 * the program (where the kernel runs them, the reply goes through mux_write's queue). */
MUX_EXPORT ssize_t mux_try_write(mux_stream_t *s, const mux_buf_t *bufs, unsigned nbufs)
{
    if (nbufs == 1 && bufs && mux__write_fast(s, bufs))
        return -EAGAIN; /* where the kernel sends, as below, without the general checks */
    size_t left;
    int err = mux__write_args(s, bufs, nbufs, &left);
    if (err != 0 || left == 0)
        return err;
    if (s->wq_head_ || mux__op_in_flight(&s->wop_) || (s->loop_->caps & MUX__CAP(MUX__OP_SEND)))
        return -EAGAIN;
    /* Past what one system call gathers, the first buffers that hold bytes go (a short
     * write): empty ones are passed by, or a gather of only empty ones would send nothing and
     * call the socket full. Up to that many, the kernel passes them by itself. */
    mux_buf_t gv[MUX__GATHER_MAX];
    if (nbufs > MUX__GATHER_MAX) {
        unsigned k = 0;
        for (unsigned i = 0; i < nbufs && k < MUX__GATHER_MAX; i++)
            if (bufs[i].len != 0)
                gv[k++] = bufs[i];
        bufs = gv;
        nbufs = k;
    }
    ssize_t w = mux__sock_send(s->sock_, bufs, nbufs);
    if (w <= 0) {
        if (w == -EAGAIN || w == 0)
            s->flags_ |= S_WFULL;    /* a mux_write of the rest waits for room, no try first */
        return w == 0 ? -EAGAIN : w; /* or the error the next write meets too */
    }
    /* Bytes went: the idle timeout starts again, and the guess that a filled read buffer
     * means more is waiting ends, as with mux_write (a peer waits for this reply). */
    s->flags_ &= ~(unsigned)S_RFILLED;
    if (s->to_.idle_ns)
        s->last_write_ = mux__now(s->loop_);
    return w;
}

MUX_EXPORT ssize_t mux_stream_write_queue_size(const mux_stream_t *s)
{
    if (!s || !s->loop_ || !(s->flags_ & S_OPEN))
        return -EINVAL;
    return (ssize_t)s->wq_bytes_;
}

MUX_EXPORT int mux_stream_shutdown(mux_stream_t *s, mux_shutdown_cb cb)
{
    if (!mux__stream_valid(s) || !cb)
        return -EINVAL;
    if (s->flags_ & (S_SHUTTING | S_SHUT))
        return -EBUSY;
    if (!(s->flags_ & S_CONNECTED))
        return -ENOTCONN;
    s->flags_ |= S_SHUTTING;
    s->cb_.shutdown = cb;
    mux__stream_send_next(s); /* at once unless writes are queued */
    return 0;
}

MUX_EXPORT int mux_stream_close(mux_stream_t *s, mux_close_cb cb)
{
    if (!s || !s->loop_ || !(s->flags_ & S_OPEN))
        return -EINVAL;
    if (s->flags_ & S_CLOSING)
        return -EALREADY;
    struct mux__loop *loop = s->loop_;
    s->flags_ &= ~(unsigned)S_READING;
    s->close_cb_ = cb;
    mux_timer_stop(loop->pub, &s->timer_);
    mux__writes_fail(s, -ECANCELED);
    s->flags_ |= S_CLOSING;
    /* A connect in flight ends with -ECANCELED (or its result, had it finished), which its
     * callback gets. A shutdown that waited for the writes is cancelled here. */
    int shut_busy =
        s->wop_.kind_ == MUX__OP_SHUTDOWN && (mux__op_in_flight(&s->wop_) || (s->flags_ & S_WDONE));
    if ((s->flags_ & (S_SHUTTING | S_SHUT)) == S_SHUTTING && !shut_busy) {
        s->status_ = -ECANCELED;
        s->flags_ |= S_SHUT | S_DSHUT;
    }
    mux__stream_unpark(s); /* parked completions: their buffers go back */
    if (s->flags_ & S_PIPE) {
        if (!(s->flags_ & S_PGONE)) /* a shutdown closed it already */
            mux__stream_pipe_close(s);
    } else {
        mux__op_cancel(loop, &s->rop_);
        mux__op_cancel(loop, &s->wop_);
#ifndef _WIN32
        if (loop->backend->closing)
            loop->backend->closing(loop, s->sock_);
#endif
        mux__sock_close(s->sock_);
        s->sock_ = MUX_OS_SOCK_INVALID;
        mux__listeners_resume(loop); /* a descriptor is free again */
    }
    mux__stream_kick(s);
    return 0;
}

MUX_EXPORT int mux_stream_nodelay(mux_stream_t *s, int on)
{
    if (!mux__stream_valid(s))
        return -EINVAL;
    return s->flags_ & (S_UNIX | S_PIPE) ? -ENOTSUP : mux__sock_nodelay(s->sock_, on);
}

MUX_EXPORT int mux_stream_keepalive(mux_stream_t *s, int on, unsigned idle_s)
{
    if (!mux__stream_valid(s) || (on && (idle_s == 0 || idle_s > INT32_MAX)))
        return -EINVAL;
    return s->flags_ & (S_UNIX | S_PIPE) ? -ENOTSUP : mux__sock_keepalive(s->sock_, on, idle_s);
}

MUX_EXPORT int mux_stream_set_timeouts(mux_stream_t *s, const mux_stream_timeouts_t *to)
{
    if (!mux__stream_valid(s))
        return -EINVAL;
    static const mux_stream_timeouts_t none;
    s->to_ = to ? *to : none;
    s->last_read_ = s->last_write_ = mux__now(s->loop_);
    return mux__stream_arm_timer(s);
}

MUX_EXPORT int mux_stream_socket(const mux_stream_t *s, mux_os_sock_t *sock)
{
    if (!mux__stream_valid(s) || !sock)
        return -EINVAL;
    if (s->flags_ & S_PIPE)
        return -ENOTSOCK; /* a pipe's handle: no socket call would take it */
    *sock = s->sock_;
    return 0;
}

MUX_EXPORT mux_loop_t *mux_stream_loop(const mux_stream_t *s)
{
    return s && s->loop_ && (s->flags_ & S_OPEN) ? s->loop_->pub : NULL;
}
