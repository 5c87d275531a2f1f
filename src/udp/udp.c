/* SPDX-License-Identifier: MIT */
/* Datagram sockets: mux_udp_t, one completion-shaped state machine over the backend's
 * datagram operations (MUX__OP_DGRAM_RECV and _SEND, backend.h), which io_uring runs natively
 * where it pays (a multishot recvmsg into a pool's buffer ring) and the readiness emulation
 * runs with recvmmsg and sendmmsg everywhere else (stream/ready_ops.c). Like stream.c, this
 * file never asks which backend runs.
 *
 * A socket has two operation slots: rop_, a receive of a batch of datagrams into the
 * messages of its receive state (rx_), and wop_, a send of a batch of queued datagrams from
 * those of its send state (tx_). A completion only records its result; the socket's task
 * delivers, in this order: a send batch's outcome taken in, the received datagrams one
 * callback each, the send callbacks in queue order, and last, once no operation is in
 * flight, the close callback. As in streams, the task runs from the loop's pending queue, or
 * at once when the completion came from where the loop dispatches callbacks (MUX__OPC_NOW).
 *
 * Batching. Sends are queued, never tried inside mux_udp_send: what is queued in one go (an
 * echo server answering a batch of datagrams from its receive callbacks) leaves in one
 * sendmmsg, right after the batch's last callback, before the next receive. A receive takes
 * up to its batch size per system call; one that filled the batch suggests more are
 * waiting, and the next is tried at once.
 *
 * Multishot (io_uring, a pool): the receive stays armed and completes once per datagram,
 * each into the next message of the batch; the task delivers what came, and a completion
 * finding the batch full is refused until then (the backend offers it again from the next
 * wait). The kernel's header sits in the pool buffer before the datagram, which is why every
 * backend leaves MUX_UDP_POOL_HEADROOM bytes there: a buffer holds the same datagram
 * everywhere.
 *
 * GSO. A mux_udp_send_gso is one message that the kernel cuts (UDP_SEGMENT) where it can,
 * found once per socket; elsewhere its segments go as messages of their own, and the
 * request is called back when the last has gone. GRO (MUX_UDP_GRO) is switched on for
 * receives into caller buffers large enough for a coalesced receive (64 KB); the task cuts it
 * back into datagrams, one callback each.
 */
#include <stdlib.h>
#include <string.h>

#include "iomux/udp.h"
#include "platform/platform.h"
#include "stream/bufpool.h"
#include "stream/op.h"

enum {
    U_OPEN = 0x0001,
    U_CLOSING = 0x0002,
    U_READING = 0x0004,
    U_POOL = 0x0008,      /* receives take buffers from rx_->batch.pool */
    U_RDONE = 0x0010,     /* the receive completed: rres_, and rx_'s messages, to deliver */
    U_WDONE = 0x0020,     /* the send completed: wres_ */
    U_IN_TASK = 0x0040,   /* inside the task, which delivers everything before it returns */
    U_V6 = 0x0080,        /* an IPv6 socket */
    U_CONNECTED = 0x0100, /* connected: sends go to the peer */
    U_RFILLED = 0x0200,   /* the last receive filled its batch: more may wait */
    U_WFULL = 0x0400,     /* the last send found the socket full */
    U_GRO_ASKED = 0x0800, /* MUX_UDP_GRO */
    U_GRO = 0x1000,       /* the socket coalesces now */
    U_GSO_KNOWN = 0x2000, /* whether the kernel cuts sends is known: U_GSO */
    U_GSO = 0x4000,
    U_RDRY = 0x8000, /* a multishot receive ended for a dry buffer ring, and was armed again */
};

#define MUX__GRO_MIN 65535u /* a receive buffer that holds any coalesced receive */

/* The receive's state, allocated by the first receive. */
struct mux__udp_rx {
    struct mux__dbatch batch;
    struct mux__dmsg m[MUX_UDP_BATCH];
    mux_udp_addr_t a[MUX_UDP_BATCH];
    mux_buf_t bufs[MUX_UDP_BATCH]; /* the caller's buffers */
    uint32_t nbufs;
    uint32_t count; /* messages received, to deliver */
    uint32_t next;  /* the next of them */
    uint32_t seg;   /* bytes of m[next] delivered (a coalesced receive cut in datagrams) */
};

/* The send's state, allocated by the first send. */
struct mux__udp_tx {
    struct mux__dbatch batch;
    struct mux__dmsg m[MUX_UDP_SEND_BATCH];
    mux_udp_send_t *req[MUX_UDP_SEND_BATCH]; /* the request each message is of */
    mux_buf_t seg[MUX_UDP_SEND_BATCH];       /* segments cut here (no kernel GSO) */
};

static int mux__udp_valid(const mux_udp_t *u)
{
    return u && u->loop_ && (u->flags_ & U_OPEN) && !(u->flags_ & U_CLOSING);
}

static int mux__udp_walkable(const void *u)
{
    return mux__udp_valid(u);
}

static const struct mux__handles_type mux__udp_type = {
    .kind = MUX_HANDLE_UDP,
    .link_off = offsetof(mux_udp_t, link_),
    .flags_off = offsetof(mux_udp_t, flags_),
    .size = sizeof(struct mux__handles),
    .walkable = mux__udp_walkable,
};

static void mux__udp_run(struct mux__task *t);

static void mux__udp_kick(mux_udp_t *u)
{
    if (!(u->flags_ & U_IN_TASK))
        mux__task_queue(u->loop_, &u->task_);
}

static void mux__udp_completed(mux_udp_t *u, unsigned flags)
{
    if ((flags & MUX__OPC_NOW) && !(u->flags_ & U_IN_TASK))
        mux__udp_run(&u->task_);
    else
        mux__udp_kick(u);
}

static void mux__op_hint(struct mux__op *op, unsigned hint)
{
    op->flags_ = (uint8_t)((op->flags_ & ~(MUX__OPF_POLL_FIRST | MUX__OPF_MULTI)) | hint);
}

/* ---- receiving ------------------------------------------------------------------------ */

/* Gives back the pool buffers of messages received and not delivered (a stop, a close). */
static void mux__udp_rx_drop(mux_udp_t *u)
{
    struct mux__udp_rx *rx = u->rx_;
    if (rx && rx->batch.pool)
        for (uint32_t i = rx->next; i < rx->count; i++)
            mux_bufpool_put(rx->batch.pool, rx->m[i].pbuf);
    if (rx) {
        rx->count = rx->next = rx->seg = 0;
        rx->batch.k = 0;
    }
    u->flags_ &= ~(unsigned)U_RDONE;
    u->rres_ = 0;
}

static int mux__udp_rop_done(struct mux__op *op, int res, char *buf, unsigned flags)
{
    mux_udp_t *u = mux__container_of(op, mux_udp_t, rop_);
    struct mux__udp_rx *rx = u->rx_;
    if (op->flags_ & MUX__OPF_MULTI) {
        if (res > 0) {
            if (u->flags_ & U_CLOSING) { /* nobody will take it */
                mux_bufpool_put(rx->batch.pool, buf);
                if (!(flags & MUX__OPC_MORE))
                    mux__udp_completed(u, flags); /* the close waits for its end */
                return 0;
            }
            if (rx->count == rx->batch.n)
                return u->flags_ & U_READING ? 1 : 2; /* next time; or once reading again */
            rx->count++;
            rx->batch.k = rx->count;
            u->flags_ = (u->flags_ & ~(unsigned)U_RDRY) | U_RDONE;
            if (flags & MUX__OPC_MORE) {
                mux__udp_kick(u);
                return 0;
            }
            mux__udp_completed(u, flags); /* it ended with this one */
            return 0;
        }
        /* The kernel's ring ran dry in a burst, with buffers left in the pool: armed again,
         * once; dry again before any datagram (a ring the kernel would not register), the
         * reader is told. */
        if (res == -ENOBUFS && !(u->flags_ & U_RDRY) && mux_bufpool_available(rx->batch.pool) > 0) {
            u->flags_ |= U_RDRY;
            res = -EAGAIN;
        }
    }
    if (res == -ECANCELED || res == -EAGAIN || res == -EINTR) {
        if (res == -EAGAIN && (flags & MUX__OPC_NONEMPTY)) /* readable: the next one reads */
            u->flags_ |= U_RFILLED;
        if (u->flags_ & (U_READING | U_CLOSING))
            mux__udp_completed(u, flags); /* the next receive; or the close, waiting */
        return 0;
    }
    u->flags_ = (u->flags_ & ~(unsigned)U_RFILLED) | U_RDONE |
                (flags & MUX__OPC_FILLED ? (unsigned)U_RFILLED : 0);
    if (res > 0) {
        rx->count = (uint32_t)res;
        u->rres_ = 0;
    } else { /* delivered after what the multishot receive took before it */
        u->rres_ = res == 0 ? -EIO : res; /* a datagram socket has no end of stream */
    }
    mux__udp_completed(u, flags);
    return 0;
}

/* Submits the next receive, from the task only. */
static void mux__udp_recv_next(mux_udp_t *u)
{
    struct mux__op *op = &u->rop_;
    struct mux__udp_rx *rx = u->rx_;
    if ((u->flags_ & (U_READING | U_CLOSING | U_RDONE)) != U_READING || mux__op_in_flight(op))
        return;
    struct mux__dbatch *b = &rx->batch;
    unsigned hint = u->flags_ & U_RFILLED ? 0 : MUX__OPF_POLL_FIRST;
    b->k = 0;
    b->flags = u->flags_ & U_GRO ? MUX__DB_GRO : 0;
    op->kind_ = MUX__OP_DGRAM_RECV;
    op->a_.dgram = b;
    if (u->flags_ & U_POOL) {
        b->n = MUX_UDP_BATCH;
        if ((u->loop_->caps & MUX__CAP_RECV_MULTI) && mux__op_native(u->loop_, op))
            hint = MUX__OPF_MULTI;
    } else {
        b->n = rx->nbufs;
        for (uint32_t i = 0; i < b->n; i++) {
            b->m[i].buf = rx->bufs[i].base;
            b->m[i].cap = (uint32_t)rx->bufs[i].len;
        }
    }
    for (uint32_t i = 0; i < b->n; i++)
        b->m[i].addrlen = sizeof rx->a[i];
    mux__op_hint(op, hint);
    mux__op_submit(u->loop_, op);
}

/* Delivers the received datagrams, one callback each, while the caller reads. */
static void mux__udp_received(mux_udp_t *u)
{
    struct mux__udp_rx *rx = u->rx_;
    if (u->rres_ < 0 && rx->next == rx->count) { /* after the datagrams that came before it */
        int err = u->rres_;
        u->rres_ = 0;
        mux__udp_rx_drop(u);
        u->flags_ &= ~(unsigned)U_READING;
        u->recv_cb_(u, err, NULL);
        return;
    }
    while (rx->next < rx->count && (u->flags_ & (U_READING | U_CLOSING)) == U_READING) {
        struct mux__dmsg *m = &rx->m[rx->next];
        mux_dgram_t d;
        d.base = m->buf + rx->seg;
        d.len = m->len - rx->seg;
        if (m->gso && d.len > m->gso) /* one of the datagrams the kernel coalesced */
            d.len = m->gso;
        d.addr = m->addr;
        d.addrlen = (socklen_t)m->addrlen;
        d.flags = m->flags & MUX__DMSG_TRUNC && rx->seg + d.len == m->len ? MUX_UDP_TRUNC : 0;
        d.buf = m->pbuf;
        rx->seg += (uint32_t)d.len;
        if (rx->seg >= m->len) {
            rx->seg = 0;
            rx->next++;
        }
        u->recv_cb_(u, 0, &d);
    }
    if (rx->next == rx->count && u->rres_ == 0) {
        rx->count = rx->next = rx->seg = 0;
        rx->batch.k = 0;
        u->flags_ &= ~(unsigned)U_RDONE;
        if (u->rop_.flags_ & MUX__OPF_MULTI)
            u->loop_->ops_unpark = 1; /* refused completions: offered from the next wait */
    }
}

/* ---- sending ---------------------------------------------------------------------------- */

static void mux__udp_send_done(mux_udp_t *u, mux_udp_send_t *req, int status)
{
    req->status_ = status;
    req->next_ = NULL;
    if (u->done_tail_)
        u->done_tail_->next_ = req;
    else
        u->done_head_ = req;
    u->done_tail_ = req;
}

/* The head of the queue is done (sent, or failed with `status`). */
static void mux__udp_pop(mux_udp_t *u, int status)
{
    mux_udp_send_t *req = u->wq_head_;
    u->wq_head_ = req->next_;
    if (!u->wq_head_)
        u->wq_tail_ = NULL;
    u->wq_count_--;
    for (uint32_t i = 0; i < req->nbufs_; i++)
        u->wq_bytes_ -= req->bufs_[i].len;
    mux__udp_send_done(u, req, status);
}

/* Whether the kernel cuts sends into datagrams (asked once per socket). */
static int mux__udp_gso(mux_udp_t *u)
{
    if (!(u->flags_ & U_GSO_KNOWN))
        u->flags_ |= U_GSO_KNOWN | (mux__sock_gso(u->sock_) ? (unsigned)U_GSO : 0);
    return (u->flags_ & U_GSO) != 0;
}

/* Appends the messages of `req` to the batch, from its segment nseg_ on; 0 when they do not
 * all fit (the request waits for the next batch, unless it is the first). */
static int mux__udp_batch_add(mux_udp_t *u, mux_udp_send_t *req, uint32_t *n)
{
    struct mux__udp_tx *tx = u->tx_;
    uint32_t k = *n;
    if (req->gso_ && !mux__udp_gso(u)) { /* each segment a datagram of its own */
        size_t len = req->bufs_[0].len, seg = req->gso_;
        size_t off = (size_t)req->nseg_ * seg;
        for (; off < len && k < MUX_UDP_SEND_BATCH; off += seg, k++) {
            tx->seg[k] = mux_buf_init(req->bufs_[0].base + off, len - off < seg ? len - off : seg);
            tx->m[k].bufs = &tx->seg[k];
            tx->m[k].nbufs = 1;
            tx->m[k].gso = 0;
            tx->m[k].addr = req->addrlen_ ? &req->addr_.sa : NULL;
            tx->m[k].addrlen = req->addrlen_;
            tx->req[k] = req;
        }
        *n = k;
        return 1;
    }
    if (k == MUX_UDP_SEND_BATCH)
        return 0;
    tx->m[k].bufs = req->bufs_;
    tx->m[k].nbufs = req->nbufs_;
    tx->m[k].gso = req->gso_;
    tx->m[k].addr = req->addrlen_ ? &req->addr_.sa : NULL;
    tx->m[k].addrlen = req->addrlen_;
    tx->req[k] = req;
    *n = k + 1;
    return 1;
}

/* Sends what is queued, up to a batch, when the send slot is free. */
static void mux__udp_send_next(mux_udp_t *u)
{
    struct mux__op *op = &u->wop_;
    if (!u->wq_head_ || mux__op_in_flight(op) || (u->flags_ & (U_WDONE | U_CLOSING)))
        return;
    uint32_t n = 0;
    for (mux_udp_send_t *req = u->wq_head_; req && n < MUX_UDP_SEND_BATCH; req = req->next_)
        if (!mux__udp_batch_add(u, req, &n))
            break;
    u->tx_->batch.m = u->tx_->m;
    u->tx_->batch.n = n;
    op->kind_ = MUX__OP_DGRAM_SEND;
    op->a_.dgram = &u->tx_->batch;
    mux__op_hint(op, u->flags_ & U_WFULL ? MUX__OPF_POLL_FIRST : 0);
    mux__op_submit(u->loop_, op);
}

static int mux__udp_wop_done(struct mux__op *op, int res, char *buf, unsigned flags)
{
    mux_udp_t *u = mux__container_of(op, mux_udp_t, wop_);
    (void)buf;
    u->wres_ = res;
    u->flags_ = (u->flags_ & ~(unsigned)U_WFULL) | U_WDONE |
                (flags & MUX__OPC_FULL ? (unsigned)U_WFULL : 0);
    mux__udp_completed(u, flags);
    return 0;
}

/* The send batch completed: `res` messages went, or the first failed. */
static void mux__udp_sent(mux_udp_t *u)
{
    struct mux__udp_tx *tx = u->tx_;
    int res = u->wres_;
    if (u->flags_ & U_CLOSING)
        return; /* the close fails them all */
    if (res == -ECANCELED || res == -EINTR || res == -EAGAIN)
        return;
    if (res < 0) {
        u->wq_head_->nseg_ = 0;
        mux__udp_pop(u, res); /* that datagram's error; the others go on */
        return;
    }
    for (int i = 0; i < res; i++) {
        mux_udp_send_t *req = tx->req[i];
        if (req->gso_ && tx->m[i].bufs == &tx->seg[i]) { /* a segment cut here */
            req->nseg_++;
            if ((size_t)req->nseg_ * req->gso_ < req->bufs_[0].len)
                continue; /* more of it to go */
            req->nseg_ = 0;
        }
        mux__udp_pop(u, 0);
    }
}

/* ---- delivery ---------------------------------------------------------------------------- */

static void mux__udp_finish(mux_udp_t *u)
{
    struct mux__loop *loop = u->loop_;
    mux_udp_close_cb cb = u->close_cb_;
    mux__udp_rx_drop(u);
    if (loop->backend->closing)
        loop->backend->closing(loop, (int)u->sock_);
    mux__ready_release(loop, &u->rop_);
    mux__ready_release(loop, &u->wop_);
    mux__sock_close(u->sock_);
    free(u->rx_);
    free(u->tx_);
    u->rx_ = NULL;
    u->tx_ = NULL;
    mux__unqueue(loop, &u->task_.h_);
    mux__handle_close(loop, &u->link_, &u->flags_);
    u->flags_ = 0;
    u->loop_ = NULL;
    u->sock_ = MUX_OS_SOCK_INVALID;
    if (cb)
        cb(u);
}

static void mux__udp_run(struct mux__task *t)
{
    mux_udp_t *u = mux__container_of(t, mux_udp_t, task_);
    u->flags_ |= U_IN_TASK;
    for (;;) {
        unsigned f = u->flags_;
        if (f & U_WDONE) {
            u->flags_ &= ~(unsigned)U_WDONE;
            mux__udp_sent(u);
        } else if ((f & (U_RDONE | U_READING | U_CLOSING)) == (U_RDONE | U_READING)) {
            mux__udp_received(u);
            mux__udp_send_next(u); /* what the callbacks queued, in one batch */
        } else if (u->done_head_) {
            mux_udp_send_t *req = u->done_head_;
            u->done_head_ = req->next_;
            if (!u->done_head_)
                u->done_tail_ = NULL;
            req->next_ = NULL;
            req->cb_(req, req->status_);
        } else if (f & U_CLOSING) {
            if (!mux__op_in_flight(&u->rop_) && !mux__op_in_flight(&u->wop_)) {
                while (u->wq_head_)
                    mux__udp_pop(u, -ECANCELED);
                if (u->done_head_)
                    continue;       /* their callbacks first */
                mux__udp_finish(u); /* the memory is the caller's from here on */
                return;
            }
            break; /* the last completions come first */
        } else if (u->wq_head_ && !mux__op_in_flight(&u->wop_)) {
            mux__udp_send_next(u);
            if (!(u->flags_ & U_WDONE))
                break;
        } else if ((f & (U_READING | U_RDONE)) == U_READING && !mux__op_in_flight(&u->rop_)) {
            mux__udp_recv_next(u);
            if (!(u->flags_ & U_RDONE))
                break; /* waiting for datagrams; a batch taken at once is delivered next */
        } else {
            break;
        }
    }
    u->flags_ &= ~(unsigned)U_IN_TASK;
}

/* ---- opening ------------------------------------------------------------------------------ */

static int mux__udp_setup(struct mux__loop *loop, mux_udp_t *u, mux_os_sock_t sock, int family)
{
#ifndef _WIN32
    if (sock >= loop->backend->fd_limit) /* select: FD_SETSIZE */
        return -EINVAL;
#endif
    int err = mux__reserve(loop);
    struct mux__handles *hs = err == 0 ? mux__handles_get(loop, &mux__udp_type) : NULL;
    if (err == 0 && !hs)
        err = -ENOMEM;
    if (err == 0 && loop->backend->adopt)
        err = loop->backend->adopt(loop, sock);
    if (err != 0)
        return err;
    void *data = u->data;
    memset(u, 0, sizeof *u);
    u->data = data;
    u->loop_ = loop;
    u->sock_ = sock;
    u->flags_ = U_OPEN | (family == AF_INET6 ? (unsigned)U_V6 : 0);
    mux__task_init(&u->task_, mux__udp_run);
    u->rop_.done_ = mux__udp_rop_done;
    u->rop_.sock_ = sock;
    u->wop_.done_ = mux__udp_wop_done;
    u->wop_.sock_ = sock;
    mux__handle_open(loop, hs, &u->link_, &u->flags_);
    return 0;
}

static int mux__udp_family_ok(const struct sockaddr *addr, socklen_t len)
{
    if (addr->sa_family == AF_INET)
        return len >= (socklen_t)sizeof(struct sockaddr_in);
    if (addr->sa_family == AF_INET6)
        return len >= (socklen_t)sizeof(struct sockaddr_in6);
    return 0;
}

/* The socket options of mux_udp_bind's flags, before the bind. */
static int mux__udp_bind_opts(mux_os_sock_t sock, int family, unsigned flags)
{
    int on = 1, err = 0;
    if (flags & MUX_UDP_REUSEADDR)
        err = mux__sock_setopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (err == 0 && (flags & MUX_UDP_REUSEPORT)) {
#ifdef SO_REUSEPORT
        err = mux__sock_setopt(sock, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
#else
        err = -ENOTSUP;
#endif
    }
    if (err == 0 && (flags & MUX_UDP_V6ONLY) && family == AF_INET6)
        err = mux__sock_setopt(sock, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    return err;
}

MUX_EXPORT int mux_udp_bind(mux_loop_t *pub, mux_udp_t *u, const struct sockaddr *addr,
                            socklen_t addrlen, unsigned flags)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !u || !addr || addrlen < (socklen_t)sizeof addr->sa_family ||
        (flags & ~(unsigned)(MUX_UDP_REUSEADDR | MUX_UDP_REUSEPORT | MUX_UDP_V6ONLY | MUX_UDP_GRO)))
        return -EINVAL;
    if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
        return -EAFNOSUPPORT;
    if (!mux__udp_family_ok(addr, addrlen))
        return -EINVAL;
    int sock = mux__sock_dgram(addr->sa_family);
    if (sock < 0)
        return sock;
    int err = mux__udp_bind_opts((mux_os_sock_t)sock, addr->sa_family, flags);
    if (err == 0)
        err = mux__sock_bind((mux_os_sock_t)sock, addr, addrlen);
    if (err == 0)
        err = mux__udp_setup(loop, u, (mux_os_sock_t)sock, addr->sa_family);
    if (err != 0) {
        mux__sock_close((mux_os_sock_t)sock);
        return err;
    }
    if (flags & MUX_UDP_GRO)
        u->flags_ |= U_GRO_ASKED;
    return 0;
}

MUX_EXPORT int mux_udp_open(mux_loop_t *pub, mux_udp_t *u, mux_os_sock_t sock)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !u || sock == MUX_OS_SOCK_INVALID)
        return -EINVAL;
#ifndef _WIN32
    if (sock < 0)
        return -EINVAL;
#endif
    int family = mux__sock_dgram_adopt(sock);
    if (family < 0)
        return family;
    if (family != AF_INET && family != AF_INET6)
        return -EINVAL;
    return mux__udp_setup(loop, u, sock, family);
}

MUX_EXPORT int mux_udp_connect(mux_udp_t *u, const struct sockaddr *addr, socklen_t addrlen)
{
    if (!mux__udp_valid(u) || (addr && !mux__udp_family_ok(addr, addrlen)))
        return -EINVAL;
    int err = mux__sock_dgram_connect(u->sock_, addr, addrlen);
    if (err == 0)
        u->flags_ = addr ? u->flags_ | U_CONNECTED : u->flags_ & ~(unsigned)U_CONNECTED;
    return err;
}

/* ---- the caller's calls ------------------------------------------------------------------- */

static int mux__udp_rx_get(mux_udp_t *u)
{
    if (u->rx_)
        return 0;
    struct mux__udp_rx *rx = calloc(1, sizeof *rx);
    if (!rx)
        return -ENOMEM;
    rx->batch.m = rx->m;
    for (uint32_t i = 0; i < MUX_UDP_BATCH; i++)
        rx->m[i].addr = &rx->a[i].sa;
    u->rx_ = rx;
    return 0;
}

/* Switches GRO to what a start into buffers of `len` bytes wants: on only when asked for and
 * every buffer holds a coalesced receive. */
static void mux__udp_gro(mux_udp_t *u, size_t len)
{
    int want = (u->flags_ & U_GRO_ASKED) && len >= MUX__GRO_MIN;
    if (want == !!(u->flags_ & U_GRO))
        return;
    if (mux__sock_gro(u->sock_, want) == 0)
        u->flags_ = want ? u->flags_ | U_GRO : u->flags_ & ~(unsigned)U_GRO;
}

static void mux__udp_read_start(mux_udp_t *u, mux_udp_recv_cb cb)
{
    u->recv_cb_ = cb;
    u->flags_ |= U_READING;
    mux__udp_kick(u);
    if (u->rop_.flags_ & MUX__OPF_MULTI)
        u->loop_->ops_unpark = 1; /* what the receive parked while stopped */
}

MUX_EXPORT int mux_udp_recv_start(mux_udp_t *u, const mux_buf_t *bufs, unsigned nbufs,
                                  mux_udp_recv_cb cb)
{
    if (!mux__udp_valid(u) || !bufs || nbufs < 1 || nbufs > MUX_UDP_BATCH || !cb)
        return -EINVAL;
    size_t least = SIZE_MAX;
    for (unsigned i = 0; i < nbufs; i++) {
        if (!bufs[i].base || bufs[i].len == 0 || bufs[i].len > UINT32_MAX)
            return -EINVAL;
        if (bufs[i].len < least)
            least = bufs[i].len;
    }
    if (u->flags_ & U_READING)
        return -EBUSY;
    if ((u->flags_ & U_POOL) && (mux__op_in_flight(&u->rop_) || (u->flags_ & U_RDONE)))
        return -EBUSY; /* a pool's receive, stopped, still holds datagrams: restart with it */
    int err = mux__udp_rx_get(u);
    if (err != 0)
        return err;
    memcpy(u->rx_->bufs, bufs, nbufs * sizeof *bufs);
    u->rx_->nbufs = nbufs;
    u->rx_->batch.pool = NULL;
    u->rx_->batch.headroom = 0;
    u->flags_ &= ~(unsigned)U_POOL;
    mux__udp_gro(u, least);
    mux__udp_read_start(u, cb);
    return 0;
}

MUX_EXPORT int mux_udp_recv_start_pool(mux_udp_t *u, mux_bufpool_t *pool, mux_udp_recv_cb cb)
{
    if (!mux__udp_valid(u) || !pool || !pool->mem_ || !cb ||
        mux__bufpool_size(pool) <= MUX_UDP_POOL_HEADROOM)
        return -EINVAL;
    if (u->flags_ & U_READING)
        return -EBUSY;
    struct mux__loop *loop = u->loop_, *owner = mux__bufpool_owner(pool);
    if (owner && owner != loop)
        return -EINVAL; /* its buffers are in another loop's kernel ring */
    if (u->rx_ && u->rx_->batch.pool && u->rx_->batch.pool != pool &&
        (mux__op_in_flight(&u->rop_) || (u->flags_ & U_RDONE)))
        return -EBUSY; /* another pool's datagrams are still held: restart with it */
    int err = mux__udp_rx_get(u);
    if (err != 0)
        return err;
    if (!owner && (loop->caps & MUX__CAP(MUX__OP_DGRAM_RECV))) {
        int r = loop->backend->pool_attach(loop, pool);
        if (r != 0 && r != -ENOTSUP)
            return r;
    }
    u->rx_->batch.pool = pool;
    u->rx_->batch.headroom = MUX_UDP_POOL_HEADROOM;
    u->flags_ |= U_POOL;
    mux__udp_gro(u, 0); /* a pool buffer holds one datagram */
    mux__udp_read_start(u, cb);
    return 0;
}

MUX_EXPORT int mux_udp_recv_stop(mux_udp_t *u)
{
    if (!mux__udp_valid(u))
        return -EINVAL;
    u->flags_ &= ~(unsigned)(U_READING | U_RFILLED);
    /* Datagrams already in the caller's buffers are dropped: the buffers are the caller's
     * again. A pool's are kept for the next start. */
    if (!(u->flags_ & U_POOL))
        mux__udp_rx_drop(u);
    if (mux__op_in_flight(&u->rop_))
        mux__op_cancel(u->loop_, &u->rop_);
    return 0;
}

/* Checks a datagram's destination against the socket. 0 or -errno. */
static int mux__udp_dest(const mux_udp_t *u, const struct sockaddr *addr, socklen_t addrlen)
{
    if (!addr)
        return u->flags_ & U_CONNECTED ? 0 : -EDESTADDRREQ;
    if (u->flags_ & U_CONNECTED)
        return -EISCONN;
    if (addrlen < (socklen_t)sizeof addr->sa_family || addrlen > (socklen_t)sizeof(mux_udp_addr_t))
        return -EINVAL;
    int v6 = (u->flags_ & U_V6) != 0;
    if (addr->sa_family != (v6 ? AF_INET6 : AF_INET))
        return -EAFNOSUPPORT;
    return mux__udp_family_ok(addr, addrlen) ? 0 : -EINVAL;
}

static int mux__udp_tx_get(mux_udp_t *u)
{
    if (u->tx_)
        return 0;
    u->tx_ = calloc(1, sizeof *u->tx_);
    return u->tx_ ? 0 : -ENOMEM;
}

static int mux__udp_queue(mux_udp_t *u, mux_udp_send_t *req, const mux_buf_t *bufs, unsigned nbufs,
                          uint16_t gso, const struct sockaddr *addr, socklen_t addrlen,
                          mux_udp_send_cb cb)
{
    int err = mux__udp_dest(u, addr, addrlen);
    if (err == 0)
        err = mux__udp_tx_get(u);
    if (err != 0)
        return err;
    req->cb_ = cb;
    req->next_ = NULL;
    req->bufs_ = bufs;
    req->nbufs_ = nbufs;
    req->gso_ = gso;
    req->nseg_ = 0;
    req->status_ = 0;
    req->addrlen_ = addr ? addrlen : 0;
    if (addr)
        memcpy(&req->addr_, addr, addrlen);
    if (u->wq_tail_)
        u->wq_tail_->next_ = req;
    else
        u->wq_head_ = req;
    u->wq_tail_ = req;
    u->wq_count_++;
    for (unsigned i = 0; i < nbufs; i++)
        u->wq_bytes_ += bufs[i].len;
    mux__udp_kick(u); /* inside the task, its delivery sends them after the callbacks */
    return 0;
}

/* A datagram's buffers: 1 .. 64 of them, adding up to at most 65,535 bytes. */
static int mux__udp_bufs_ok(const mux_buf_t *bufs, unsigned nbufs)
{
    if (!bufs || nbufs < 1 || nbufs > 64)
        return 0;
    size_t total = 0;
    for (unsigned i = 0; i < nbufs; i++) {
        if (bufs[i].len && !bufs[i].base)
            return 0;
        total += bufs[i].len;
        if (total > 65535)
            return 0;
    }
    return 1;
}

MUX_EXPORT int mux_udp_send(mux_udp_t *u, mux_udp_send_t *req, const mux_buf_t *bufs,
                            unsigned nbufs, const struct sockaddr *addr, socklen_t addrlen,
                            mux_udp_send_cb cb)
{
    if (!mux__udp_valid(u) || !req || !cb || !mux__udp_bufs_ok(bufs, nbufs))
        return -EINVAL;
    return mux__udp_queue(u, req, bufs, nbufs, 0, addr, addrlen, cb);
}

MUX_EXPORT int mux_udp_send_gso(mux_udp_t *u, mux_udp_send_t *req, const char *base, size_t len,
                                size_t segment, const struct sockaddr *addr, socklen_t addrlen,
                                mux_udp_send_cb cb)
{
    if (!mux__udp_valid(u) || !req || !cb || !base || len == 0 || segment == 0 || segment > 65507 ||
        len > 65535 || (len + segment - 1) / segment > MUX_UDP_GSO_MAX)
        return -EINVAL;
    req->gbuf_ = mux_buf_init((void *)(uintptr_t)base, len); /* its own array of one */
    return mux__udp_queue(u, req, &req->gbuf_, 1, (uint16_t)segment, addr, addrlen, cb);
}

MUX_EXPORT ssize_t mux_udp_try_send(mux_udp_t *u, const mux_buf_t *bufs, unsigned nbufs,
                                    const struct sockaddr *addr, socklen_t addrlen)
{
    if (!mux__udp_valid(u) || !mux__udp_bufs_ok(bufs, nbufs))
        return -EINVAL;
    int err = mux__udp_dest(u, addr, addrlen);
    if (err != 0)
        return err;
    if (u->wq_head_ || mux__op_in_flight(&u->wop_) ||
        (u->loop_->caps & MUX__CAP(MUX__OP_DGRAM_SEND)))
        return -EAGAIN;
    struct mux__dmsg m;
    memset(&m, 0, sizeof m);
    m.bufs = bufs;
    m.nbufs = nbufs;
    m.addr = (struct sockaddr *)(uintptr_t)addr;
    m.addrlen = addr ? addrlen : 0;
    int r = mux__sock_sendmmsg(u->sock_, &m, 1);
    if (r < 0)
        return r;
    size_t total = 0;
    for (unsigned i = 0; i < nbufs; i++)
        total += bufs[i].len;
    return (ssize_t)total;
}

MUX_EXPORT int mux_udp_send_queue_count(const mux_udp_t *u)
{
    return mux__udp_valid(u) ? (int)u->wq_count_ : -EINVAL;
}

MUX_EXPORT int mux_udp_close(mux_udp_t *u, mux_udp_close_cb cb)
{
    if (!u || !u->loop_ || !(u->flags_ & U_OPEN))
        return -EINVAL;
    if (u->flags_ & U_CLOSING)
        return -EALREADY;
    u->flags_ |= U_CLOSING;
    u->flags_ &= ~(unsigned)U_READING;
    u->close_cb_ = cb;
    mux__op_cancel(u->loop_, &u->rop_);
    mux__op_cancel(u->loop_, &u->wop_);
    mux__udp_kick(u);
    return 0;
}

MUX_EXPORT int mux_udp_address(const mux_udp_t *u, struct sockaddr *addr, socklen_t *len)
{
    if (!mux__udp_valid(u) || !addr || !len)
        return -EINVAL;
    return mux__sock_name(u->sock_, addr, len);
}

MUX_EXPORT int mux_udp_peer(const mux_udp_t *u, struct sockaddr *addr, socklen_t *len)
{
    if (!mux__udp_valid(u) || !addr || !len)
        return -EINVAL;
    return mux__sock_peer(u->sock_, addr, len);
}

static int mux__udp_int_opt(mux_udp_t *u, int level4, int name4, int level6, int name6, int v)
{
    if (!mux__udp_valid(u))
        return -EINVAL;
    if (u->flags_ & U_V6)
        return mux__sock_setopt(u->sock_, level6, name6, &v, sizeof v);
    return mux__sock_setopt(u->sock_, level4, name4, &v, sizeof v);
}

MUX_EXPORT int mux_udp_set_broadcast(mux_udp_t *u, int on)
{
    return mux__udp_int_opt(u, SOL_SOCKET, SO_BROADCAST, SOL_SOCKET, SO_BROADCAST, on != 0);
}

MUX_EXPORT int mux_udp_set_ttl(mux_udp_t *u, int ttl)
{
    if (ttl < 1 || ttl > 255)
        return -EINVAL;
    return mux__udp_int_opt(u, IPPROTO_IP, IP_TTL, IPPROTO_IPV6, IPV6_UNICAST_HOPS, ttl);
}

MUX_EXPORT int mux_udp_set_multicast_ttl(mux_udp_t *u, int ttl)
{
    if (ttl < 0 || ttl > 255)
        return -EINVAL;
    return mux__udp_int_opt(u, IPPROTO_IP, IP_MULTICAST_TTL, IPPROTO_IPV6, IPV6_MULTICAST_HOPS,
                            ttl);
}

MUX_EXPORT int mux_udp_set_multicast_loop(mux_udp_t *u, int on)
{
    return mux__udp_int_opt(u, IPPROTO_IP, IP_MULTICAST_LOOP, IPPROTO_IPV6, IPV6_MULTICAST_LOOP,
                            on != 0);
}

MUX_EXPORT int mux_udp_set_multicast_interface(mux_udp_t *u, const struct sockaddr *iface)
{
    if (!mux__udp_valid(u))
        return -EINVAL;
    int v6 = (u->flags_ & U_V6) != 0;
    if (iface && iface->sa_family != (v6 ? AF_INET6 : AF_INET))
        return -EINVAL;
    if (v6) {
        unsigned index = iface ? ((const struct sockaddr_in6 *)iface)->sin6_scope_id : 0;
        return mux__sock_setopt(u->sock_, IPPROTO_IPV6, IPV6_MULTICAST_IF, &index, sizeof index);
    }
    struct in_addr a;
    memset(&a, 0, sizeof a);
    if (iface)
        a = ((const struct sockaddr_in *)iface)->sin_addr;
    return mux__sock_setopt(u->sock_, IPPROTO_IP, IP_MULTICAST_IF, &a, sizeof a);
}

MUX_EXPORT int mux_udp_membership(mux_udp_t *u, const struct sockaddr *group,
                                  const struct sockaddr *iface, int join)
{
    if (!mux__udp_valid(u) || !group)
        return -EINVAL;
    int v6 = (u->flags_ & U_V6) != 0;
    if (group->sa_family != (v6 ? AF_INET6 : AF_INET) ||
        (iface && iface->sa_family != group->sa_family))
        return -EINVAL;
    if (!v6) {
        struct ip_mreq mr;
        memset(&mr, 0, sizeof mr);
        mr.imr_multiaddr = ((const struct sockaddr_in *)group)->sin_addr;
        if (iface)
            mr.imr_interface = ((const struct sockaddr_in *)iface)->sin_addr;
        return mux__sock_setopt(u->sock_, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP,
                                &mr, sizeof mr);
    }
    struct ipv6_mreq mr;
    memset(&mr, 0, sizeof mr);
    mr.ipv6mr_multiaddr = ((const struct sockaddr_in6 *)group)->sin6_addr;
    mr.ipv6mr_interface = iface ? ((const struct sockaddr_in6 *)iface)->sin6_scope_id : 0;
    return mux__sock_setopt(u->sock_, IPPROTO_IPV6, join ? IPV6_JOIN_GROUP : IPV6_LEAVE_GROUP, &mr,
                            sizeof mr);
}

MUX_EXPORT int mux_udp_socket(const mux_udp_t *u, mux_os_sock_t *sock)
{
    if (!mux__udp_valid(u) || !sock)
        return -EINVAL;
    *sock = u->sock_;
    return 0;
}

MUX_EXPORT mux_loop_t *mux_udp_loop(const mux_udp_t *u)
{
    return u && u->loop_ ? u->loop_->pub : NULL;
}
