/* SPDX-License-Identifier: MIT */
/* The stream layer's operations, emulated with non-blocking system calls over the readiness
 * half of the backend: shared by epoll, poll, select (and any later readiness backend), and
 * used by io_uring for the kinds it does not run natively.
 *
 * How an operation runs here:
 * - Speculative I/O. A receive, send or accept is tried at once when it is submitted: a
 *   write on a healthy connection, or a read with data already waiting, completes inside the
 *   submitting call without asking the kernel for readiness. Only when the system call says
 *   EAGAIN does the operation wait, on an io watcher of its own (in its private space), for
 *   the socket to become ready, and is tried again from that watcher's callback.
 * - Hints. MUX__OPF_POLL_FIRST (the owner's guess that the socket is not ready: the last
 *   receive was short, the last send left bytes behind) skips the attempt that would only
 *   say EAGAIN. A receive that filled its buffer completes with MUX__OPC_FILLED: the next
 *   one should try at once, which is how reading goes on until EAGAIN.
 * - Budget. A sender faster than the loop could keep a reader completing inside its own
 *   submits forever, and no other watcher would run. So receives complete at most
 *   MUX__READ_BUDGET times per loop iteration, and accepts `a_.batch` times; past that, the
 *   operation waits for the next readiness report. Sends have no budget: the program itself
 *   makes them.
 * - Sends, from buffers or from a file, go on while the socket takes bytes (a partial send
 *   is followed by another at once), and complete with the total once it is all sent or
 *   the socket is full.
 * - A receive's or accept's watcher stays started after a completion, since the owner
 *   usually submits the next one at once: starting and stopping it every time would touch
 *   the fd's interest twice per operation. A report to an idle operation stops it. A send's
 *   stops (a writable socket would report every iteration). Cancel, and going native, stop
 *   it for good.
 * - Connect starts with connect(2): done at once (a Unix socket), EINPROGRESS (wait for
 *   writability, then read SO_ERROR), or failed. Shutdown is one shutdown(2). Neither is
 *   worth a wait of its own.
 * - Completions from the watcher's callback carry MUX__OPC_NOW: that callback runs where the
 *   loop dispatches callbacks, outside any call of the owner's, so the owner delivers at
 *   once, and bytes read into a caller buffer reach the read callback before anything else
 *   runs (a read stop never finds bytes taken from the socket and not yet delivered). The
 *   owner may even close and free the operation there: nothing here touches it afterwards.
 * - An fd the backend finds invalid (closed behind the loop's back) stops the watcher with
 *   MUX_ERROR: the operation completes with -EBADF.
 */
#include "backend/backend.h"
#include "internal.h"
#include "platform/platform.h"
#include "stream/bufpool.h"
#include "stream/ready_ops.h"

/* The outcome of one attempt at an operation's system call: done with (res, buf, flags), or
 * again: the socket said EAGAIN. */
struct mux__attempt {
    int again;
    int res;
    char *buf;
    unsigned flags;
};

#define MUX__AGAIN ((struct mux__attempt){1, 0, NULL, 0})

static struct mux__attempt mux__done(int res, char *buf, unsigned flags)
{
    return (struct mux__attempt){0, res, buf, flags};
}

static struct mux__op *mux__op_of(mux_io_t *w)
{
    return mux__container_of(w, struct mux__op, priv_.io);
}

static void mux__ready_io_cb(mux_loop_t *pub, mux_io_t *w, unsigned revents);

/* Receives and accepts wait for readability, the others for writability. */
#define MUX__READ_KINDS                                                                            \
    (MUX__CAP(MUX__OP_RECV) | MUX__CAP(MUX__OP_RECV_POOL) | MUX__CAP(MUX__OP_ACCEPT) |          \
     MUX__CAP(MUX__OP_DGRAM_RECV))

static unsigned mux__ready_events(const struct mux__op *op)
{
    return MUX__CAP(op->kind_) & MUX__READ_KINDS ? MUX_READ : MUX_WRITE;
}

/* Stops the watcher and forgets it: priv_ may be used for something else now. */
void mux__ready_release(struct mux__loop *loop, struct mux__op *op)
{
    if (!(op->flags_ & MUX__OPF_WATCH))
        return;
    mux__io_stop_internal(loop, &op->priv_.io);
    op->flags_ &= (uint8_t)~MUX__OPF_WATCH;
}

void mux__ready_submit_native(struct mux__loop *loop, struct mux__op *op)
{
    mux__ready_release(loop, op);
    op->flags_ |= MUX__OPF_FLIGHT | MUX__OPF_NATIVE;
    loop->backend->submit(loop, op);
}

/* The watcher, initialised for this operation's direction. (Its socket is the operation's
 * for the operation's life: an owner that is opened again starts from zeroed operations.) */
static void mux__ready_watcher(struct mux__loop *loop, struct mux__op *op)
{
    mux_io_t *w = &op->priv_.io;
    unsigned events = mux__ready_events(op);
    if (mux__likely((op->flags_ & MUX__OPF_WATCH) && w->events_ == events))
        return;
    mux__ready_release(loop, op);
    mux_io_init(w, mux__ready_io_cb, op->sock_, events); /* forces a fresh registration */
    w->h_.flags |= MUX__W_NOREF; /* a part of a stream or listener, which counts itself */
    w->data = NULL;              /* the budget's iteration stamp */
    op->streak_ = 0;
    op->flags_ |= MUX__OPF_WATCH;
}

static unsigned mux__ready_budget(const struct mux__op *op)
{
    if (op->kind_ == MUX__OP_ACCEPT)
        return op->a_.batch;
    return op->kind_ <= MUX__OP_RECV_POOL || op->kind_ == MUX__OP_DGRAM_RECV ? MUX__READ_BUDGET
                                                                           : UINT16_MAX;
}

/* Whether the operation has completed its budget's worth in this iteration already. */
static int mux__ready_spent(const struct mux__loop *loop, const struct mux__op *op)
{
    return (uintptr_t)op->priv_.io.data == (uintptr_t)loop->iter &&
           op->streak_ >= mux__ready_budget(op);
}

/* Completes the operation. With MUX__OPC_NOW (from the watcher's callback) the owner may
 * deliver at once and even free the operation: nothing touches it after this. */
static void mux__ready_finish(struct mux__loop *loop, struct mux__op *op, struct mux__attempt a,
                              unsigned now)
{
    mux_io_t *w = &op->priv_.io;
    if ((uintptr_t)w->data != (uintptr_t)loop->iter) {
        w->data = (void *)(uintptr_t)loop->iter;
        op->streak_ = 0;
    }
    if (op->streak_ < UINT16_MAX)
        op->streak_++;
    (void)mux__op_complete(op, a.res, a.buf, a.flags | now); /* one-shot: never refused */
}

/* Waits for readiness (the watcher started, if it is not). */
static void mux__ready_arm(struct mux__loop *loop, struct mux__op *op)
{
    mux_io_t *w = &op->priv_.io;
    if (w->h_.flags & MUX__W_ACTIVE)
        return;
    int err = mux__io_start_internal(loop, w); /* -ENOMEM, or -EINVAL past select's limit */
    if (err != 0)
        mux__ready_finish(loop, op, mux__done(err, NULL, 0), 0);
}

static struct mux__attempt mux__ready_recv(struct mux__op *op)
{
    char *buf = op->a_.buf.base;
    size_t len = op->a_.buf.len;
    if (op->kind_ == MUX__OP_RECV_POOL) {
        buf = mux__bufpool_get(op->a_.pool);
        len = mux__bufpool_size(op->a_.pool);
        if (!buf)
            return mux__done(-ENOBUFS, NULL, 0);
    }
    if (len > MUX__RES_MAX)
        len = MUX__RES_MAX;
    ssize_t n = mux__sock_recv(op->sock_, buf, len);
    if (n > 0) { /* a full buffer: maybe more */
        unsigned more = (size_t)n == len ? MUX__OPC_FILLED : 0;
        return mux__done((int)n, op->kind_ == MUX__OP_RECV_POOL ? buf : NULL, more);
    }
    if (op->kind_ == MUX__OP_RECV_POOL)
        mux_bufpool_put(op->a_.pool, buf); /* was never the caller's: cannot fail */
    return n == -EAGAIN ? MUX__AGAIN : mux__done((int)n, NULL, 0); /* 0: end of stream */
}

/* Sends while the socket takes bytes: the total, or the error if no byte went. */
static struct mux__attempt mux__ready_send(struct mux__op *op)
{
    const mux_buf_t *v = op->kind_ == MUX__OP_SEND ? &op->a_.buf : op->a_.bufs.v;
    uint32_t n = op->kind_ == MUX__OP_SEND ? 1 : op->a_.bufs.n, i = 0;
    size_t off = 0, total = 0;
    ssize_t w = 0;
    if (n == 1 && v[0].len <= MUX__RES_MAX) { /* one buffer, the common case: no gathering */
        w = mux__sock_send(op->sock_, v, 1);
        if (w == (ssize_t)v[0].len)
            return mux__done((int)w, NULL, 0);
        if (w < 0)
            return w == -EAGAIN ? MUX__AGAIN : mux__done((int)w, NULL, 0);
        total = off = (size_t)w; /* short: the rest may go too, or the socket is full */
    }
    while (i < n && total < MUX__RES_MAX) {
        if (v[i].len == off) { /* an empty buffer, or one fully sent */
            i++;
            off = 0;
            continue;
        }
        /* The rest of this buffer and the next ones, trimmed so the total fits an int. */
        mux_buf_t part[MUX__SENDV_MAX];
        uint32_t k = 0;
        size_t room = MUX__RES_MAX - total;
        for (uint32_t j = i; j < n && k < MUX__SENDV_MAX && room > 0; j++) {
            size_t skip = j == i ? off : 0, len = v[j].len - skip;
            if (len == 0)
                continue;
            part[k].base = v[j].base + skip;
            part[k].len = len < room ? len : room;
            room -= part[k++].len;
        }
        w = mux__sock_send(op->sock_, part, k);
        if (w <= 0)
            break; /* EAGAIN: the socket is full */
        total += (size_t)w;
        for (size_t left = (size_t)w; left > 0;) { /* advance past what went */
            size_t room_i = v[i].len - off;
            if (left < room_i) {
                off += left;
                break;
            }
            left -= room_i;
            i++;
            off = 0;
        }
    }
    if (total > 0 || w >= 0) /* an error after some bytes shows on the next send */
        return mux__done((int)total, NULL, w == -EAGAIN ? MUX__OPC_FULL : 0);
    return w == -EAGAIN ? MUX__AGAIN : mux__done((int)w, NULL, 0);
}

/* Sends the file's bytes while the socket takes them, as mux__ready_send does. */
static struct mux__attempt mux__ready_sendfile(struct mux__op *op)
{
    size_t total = 0, len = op->a_.file.len < MUX__RES_MAX ? op->a_.file.len : MUX__RES_MAX;
    ssize_t w = 0;
    while (total < len) {
        w = mux__sock_sendfile(op->sock_, op->a_.file.fd, op->a_.file.off + total, len - total);
        if (w <= 0)
            break;
        total += (size_t)w;
    }
    if (total > 0) /* an error after some bytes shows on the next send */
        return mux__done((int)total, NULL, w == -EAGAIN ? MUX__OPC_FULL : 0);
    return w == -EAGAIN ? MUX__AGAIN : mux__done((int)w, NULL, 0);
}

static struct mux__attempt mux__ready_accept(struct mux__op *op)
{
    for (;;) {
        int fd = mux__sock_accept(op->sock_);
        switch (fd) {
        case -EAGAIN:
            return MUX__AGAIN;
        case -ECONNABORTED: /* the peer gave up while in the backlog */
        case -EPROTO:
        case -EPERM: /* a firewall said no to this one */
            continue;
        default:
            return mux__done(fd, NULL, 0); /* a connection, or EMFILE and worse */
        }
    }
}

/* Datagrams: a batch per system call (recvmmsg, sendmmsg where the system has them). A
 * receive from a pool takes its buffers first and gives back those left empty, the last
 * taken first, so that the pool's free list stays most recently used first. */
static struct mux__attempt mux__ready_dgram_recv(struct mux__op *op)
{
    struct mux__dbatch *b = op->a_.dgram;
    unsigned n = b->n;
    if (b->pool) {
        size_t size = mux__bufpool_size(b->pool);
        for (n = 0; n < b->n; n++) {
            char *p = mux__bufpool_get(b->pool);
            if (!p)
                break;
            b->m[n].pbuf = p;
            b->m[n].buf = p + b->headroom;
            b->m[n].cap = (uint32_t)(size - b->headroom);
        }
        if (n == 0)
            return mux__done(-ENOBUFS, NULL, 0);
    }
    int r = mux__sock_recvmmsg(op->sock_, b->m, n, (b->flags & MUX__DB_GRO) != 0);
    if (b->pool)
        for (unsigned i = n; i-- > (r > 0 ? (unsigned)r : 0);)
            mux_bufpool_put(b->pool, b->m[i].pbuf); /* never the caller's: cannot fail */
    if (r == -EAGAIN)
        return MUX__AGAIN;
    return mux__done(r, NULL, r > 0 && (unsigned)r == n ? MUX__OPC_FILLED : 0);
}

static struct mux__attempt mux__ready_dgram_send(struct mux__op *op)
{
    struct mux__dbatch *b = op->a_.dgram;
    int r = mux__sock_sendmmsg(op->sock_, b->m, b->n);
    if (r == -EAGAIN)
        return MUX__AGAIN;
    return mux__done(r, NULL, r >= 0 && (unsigned)r < b->n ? MUX__OPC_FULL : 0);
}

/* One attempt at the operation's system call. */
static struct mux__attempt mux__ready_try(struct mux__op *op)
{
    switch (op->kind_) {
    case MUX__OP_RECV:
    case MUX__OP_RECV_POOL:
        return mux__ready_recv(op);
    case MUX__OP_SEND:
    case MUX__OP_SENDV:
        return mux__ready_send(op);
    case MUX__OP_SENDFILE:
        return mux__ready_sendfile(op);
    case MUX__OP_ACCEPT:
        return mux__ready_accept(op);
    case MUX__OP_CONNECT: /* writable: the connect has finished, one way or the other */
        return mux__done(mux__sock_error(op->sock_), NULL, 0);
    case MUX__OP_DGRAM_RECV:
        return mux__ready_dgram_recv(op);
    case MUX__OP_DGRAM_SEND:
        return mux__ready_dgram_send(op);
    default:
        return mux__done(-EINVAL, NULL, 0);
    }
}

static void mux__ready_io_cb(mux_loop_t *pub, mux_io_t *w, unsigned revents)
{
    struct mux__loop *loop = mux__loop_of(pub);
    struct mux__op *op = mux__op_of(w);
    if (!(op->flags_ & MUX__OPF_FLIGHT)) {
        mux__io_stop_internal(loop, w); /* kept started for a next operation that did not come */
        return;
    }
    struct mux__attempt a;
    if (revents & MUX_ERROR) { /* the core stopped the watcher: the fd is not valid, or the
                                  backend could not watch it (its errno, from the core) */
        unsigned e = revents >> MUX__KILL_ERRNO_SHIFT;
        a = mux__done(e ? -(int)e : -EBADF, NULL, 0);
    } else {
        a = mux__ready_try(op);
        if (a.again)
            return; /* a stale report: the watcher stays */
        /* A receive or accept keeps its watcher for the next one; a send or connect does not,
         * as a writable socket would report it on every iteration while the next send goes
         * out speculatively anyway. Now: the owner may free the operation in finish. */
        if (mux__ready_events(op) == MUX_WRITE)
            mux__io_stop_internal(loop, w);
    }
    mux__ready_finish(loop, op, a, MUX__OPC_NOW);
}

void mux__ready_submit(struct mux__loop *loop, struct mux__op *op)
{
    struct mux__attempt a;
    mux__ready_watcher(loop, op);
    switch (op->kind_) {
    case MUX__OP_CONNECT: {
        int r = mux__sock_connect(op->sock_, op->a_.addr.sa, (socklen_t)op->a_.addr.len);
        if (r == -EINPROGRESS) {
            mux__ready_arm(loop, op);
            return;
        }
        a = mux__done(r, NULL, 0);
        break;
    }
    case MUX__OP_SHUTDOWN:
        a = mux__done(mux__sock_shutdown(op->sock_), NULL, 0);
        break;
    default:
        if ((op->flags_ & MUX__OPF_POLL_FIRST) || mux__ready_spent(loop, op) ||
            (a = mux__ready_try(op)).again) {
            mux__ready_arm(loop, op);
            return;
        }
    }
    mux__ready_finish(loop, op, a, 0);
}

void mux__ready_cancel(struct mux__loop *loop, struct mux__op *op)
{
    if (op->flags_ & MUX__OPF_WATCH)
        mux__io_stop_internal(loop, &op->priv_.io);
    if (op->flags_ & MUX__OPF_FLIGHT)
        mux__ready_finish(loop, op, mux__done(-ECANCELED, NULL, 0), 0);
}
