/* SPDX-License-Identifier: MIT */
/* io_uring's native operations for the stream layer (backend.h's operation half): sends,
 * receives into pool buffers the kernel picks from a provided-buffer ring, and multishot
 * accepts. Receives into a caller buffer, connects and shutdowns are left to the emulation
 * (MUX__CAP_* of the descriptor in uring.c): a receive in flight would own a caller buffer
 * that a read stop promises back at once, a connect's address would have to outlive the
 * call until the wait submits it, and a shutdown is one cheap system call either way.
 *
 * What is odd about them, and what this file does about it:
 * - Submission. An operation costs no system call of its own: the wait's one io_uring_enter
 *   submits it. A send is written straight into the SQ ring by the submitting call (the
 *   kernel sees it only at that enter) when nothing is queued ahead of it and the ring is
 *   this process's: in a forked child that has not renewed the ring yet, the SQ ring's
 *   memory is still shared with the parent, so there it is queued. The other kinds are
 *   queued, and the wait writes their SQEs: a receive's buffer ring must be registered first,
 *   and a queue keeps their order with the cancels. An operation carries its struct mux__op's
 *   address in the user data, and its links in its private space (struct mux__uop): it is on
 *   the queue and/or on the list of operations in flight, and on neither once its last
 *   completion came, so its owner may free it or hand its private space to the emulation.
 * - One enter per echo is not to be had with a send's completion: the send of an iteration
 *   goes in the enter that waits, but the kernel completes it inside that enter (loopback
 *   has room), so the wait returns at once with its CQE, and the next block needs a second
 *   enter. A hand-written server gets the same (bench/README.md, the io_uring floor: 2.00
 *   enters per echo at one session). Skipping the send's CQE (IOSQE_CQE_SKIP_SUCCESS with
 *   MSG_WAITALL | MSG_DONTWAIT, which posts a CQE only for a short or failed send) would let
 *   the wait block, but the write's callback would then come only with the next event,
 *   however long that takes: a program that closes after its answer would hang. Not done.
 * - Completions reaped after the wait's enter (st->post_enter) carry MUX__OPC_NOW: their
 *   owners deliver at once, user callbacks included, as the poll CQEs' watchers are called
 *   from the reap (uring.c), with no round trip through the pending queue. What a callback
 *   submits goes into the SQ ring (or the queue) for the next enter, like a poll's re-arm;
 *   nothing reaps or enters from inside it. A reap made before the enter (an early submit
 *   of a full SQ ring) passes no such flag: its completions only record results and queue
 *   tasks (mux__op_complete).
 * - Refusals. A listener with a full batch of accepted connections refuses the next
 *   completion of its multishot accept, and a stream refuses its multishot receive's next
 *   buffer while the last one waits for delivery: that CQE, and the later ones of the same
 *   operation, are copied out of the ring and offered again in the next iteration, in
 *   order, while everything else goes on. The ring never stalls. A stopped reader parks
 *   them instead: they are not offered again, and no wait returns early for them (it would
 *   spin), until the owner sets loop->ops_unpark. A buffer a kept CQE names left the
 *   kernel's ring when the CQE was reaped (inring counts it out then, once).
 * - Cancel (IORING_OP_ASYNC_CANCEL by user data) is itself asynchronous: the operation's
 *   last CQE comes later (-ECANCELED, or its result if it finished first), and its owner
 *   waits for it. An operation cancelled before it was submitted ends with the next wait.
 * - A send takes a length that the kernel stores as an int, and moves at most MAX_RW_COUNT
 *   per call: longer ones are clamped and complete short. A send of several buffers is a
 *   sendmsg, whose msghdr the kernel reads when the SQE is submitted (stable submission,
 *   IORING_FEAT_SUBMIT_STABLE, 5.5): it lives in a slot per SQE, not in the stream.
 * - Provided buffers: a pool that serves receives on this loop gets a buffer ring
 *   (IORING_REGISTER_PBUF_RING, 5.19), a page-aligned array the kernel takes buffers from
 *   (head, its own) and the library gives them back to (tail, in the shared memory: no
 *   system call). The kernel picks a buffer only when data is there, so an armed receive
 *   pins no memory. The ring is a queue, so a ring holding every free buffer would cycle
 *   through all of them, each receive landing in the buffer used longest ago: cold in the
 *   cache, and on the first round a page fault that clears a page (a large share of an echo
 *   server's CPU: docs/studies.md). So the ring holds only as many buffers as the receives
 *   in flight may take before the next reap tops it up, plus MUX__RING_SLACK; the other free
 *   buffers wait on the pool's free list, most recently used first, and top the ring up when
 *   a receive is armed, and after every reap and before every enter for what receives took
 *   and sends gave back meanwhile: one store of the ring's tail per batch, not one per buffer
 *   (a pool has no hook for a buffer that comes back). A stream's receive counts one buffer:
 *   the kernel takes buffers only while it runs, so the ring is full whenever it does, but
 *   for the callbacks' own system calls (task work runs on their way back), which the slack
 *   covers; a multishot receive that still finds the ring empty ends with -ENOBUFS, which its
 *   owner answers with a single receive. A multishot datagram receive counts MUX__RING_DGRAM,
 *   and its ring is topped up at each of its CQEs as well: the kernel runs it as task work on
 *   any return from a system call (the echo's sendmmsg), a datagram per buffer, until the
 *   socket is empty, all between two reaps; a ring that runs dry ends it (-ENOBUFS), and
 *   arming it again costs an SQE, an enter and a poll. Counted as one, an echo server's
 *   receive ended every 9 datagrams (9 per loop iteration); as two batches it ends about
 *   every 70 under a closed loop of 256 in flight. CPU per 64-byte datagram over the
 *   hand-written recvmmsg floor's, interleaved runs: 1.10x with one, 0.97x with two batches,
 *   0.96x with four, 1.02x with eight (never dry, but more CQEs kept past the reader's batch
 *   and a larger working set); bench/README.md, "The datagram study".
 * - The reap hands an operation's CQE to its owner inline (uring.h, mux__uring_ops_cqe):
 *   its flags pass on with one mask (MUX__OPC_MORE and _NONEMPTY have the CQE flags'
 *   values), and only a kept operation's, a datagram's and a refused one go through this
 *   file.
 * - Multishot receives (6.0) never poll first: with IORING_RECVSEND_POLL_FIRST, one that
 *   has emptied the socket misses an end of stream that came before (6.18 here: a socketpair
 *   holding 8 bytes and a shutdown gives two CQEs and then none, where without the flag the
 *   third says 0). Arming without it costs one receive that finds the socket empty, once
 *   per multishot, not per buffer.
 * - After a fork or lost CQEs the ring is new: the buffer rings are registered again with
 *   every buffer the caller does not hold, and every operation that was in flight completes
 *   (-ECANCELED in a fork's child: its owner submits it again; -EIO after lost CQEs, as a
 *   send may have been done unseen), through the kept CQEs, from the next wait. CQEs kept
 *   for the owners were the old ring's; in a child, a connection accepted there is the
 *   parent's, and is closed.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/uring/uring.h"
#include "iomux/udp.h" /* MUX_UDP_POOL_HEADROOM */

#define MUX__SEND_MAX        0x7ffff000u /* Linux's MAX_RW_COUNT; a CQE's result is an int */
#define MUX__URING_SENDV_MAX 1024u       /* UIO_MAXIOV */
#define MUX__RING_SLACK      8u

_Static_assert(MUX__OPC_MORE == IORING_CQE_F_MORE &&
                   MUX__OPC_NONEMPTY == IORING_CQE_F_SOCK_NONEMPTY,
               "a CQE's flags pass on as a completion's with one mask");

static struct mux__op *mux__op_of_uop(struct mux__uop *u)
{
    return (struct mux__op *)(void *)((char *)u - offsetof(struct mux__op, priv_));
}

static uint64_t mux__op_ud(const struct mux__op *op)
{
    return (uint64_t)MUX__UD_OP << 62 | (uint64_t)(uintptr_t)op;
}

static void mux__ulist_init(struct mux__uop *anchor, int queue)
{
    if (queue)
        anchor->qnext = anchor->qprev = anchor;
    else
        anchor->next = anchor->prev = anchor;
}

/* ---- buffer rings ----------------------------------------------------------------- */

static size_t mux__upool_bytes(const struct mux__upool *up)
{
    return ((size_t)up->rmask + 1) * sizeof(struct io_uring_buf);
}

/* Moves free buffers from the pool's free list into the ring until it holds enough, and
 * publishes them with one store of the ring's tail. */
static void mux__upool_topup(struct mux__upool *up)
{
    if (up->inring >= up->armed + MUX__RING_SLACK)
        return;
    uint32_t want = up->armed + MUX__RING_SLACK - up->inring, k = 0;
    mux_bufpool_t *p = up->pool;
    struct io_uring_buf_ring *br = up->ring;
    unsigned size = (unsigned)mux__bufpool_size(p);
    for (; k < want; k++) {
        uint32_t i = mux__bufpool_lend(p);
        if (i == MUX__POOL_NONE)
            break;
        io_uring_buf_ring_add(br, mux__bufpool_addr(p, i), size, (unsigned short)i, up->rmask,
                              (int)k);
    }
    if (k) {
        up->inring += k;
        io_uring_buf_ring_advance(br, (int)k);
    }
}

/* An empty ring, then as many buffers as it should hold. */
static void mux__upool_fill(struct mux__upool *up)
{
    mux__bufpool_reclaim(up->pool);
    io_uring_buf_ring_init(up->ring);
    up->inring = 0;
    mux__upool_topup(up);
}

static int mux__upool_register(struct mux__uring *st, struct mux__upool *up)
{
    struct io_uring_buf_reg reg;
    memset(&reg, 0, sizeof reg);
    reg.ring_addr = (uint64_t)(uintptr_t)up->ring;
    reg.ring_entries = (uint32_t)up->rmask + 1;
    reg.bgid = up->bgid;
    int err = io_uring_register_buf_ring(&st->ring, &reg, 0);
    up->registered = err == 0;
    return err;
}

/* Whether the ring holds fewer buffers than it should (a top-up may have work). */
static inline int mux__upool_short(const struct mux__upool *up)
{
    return up->inring < up->armed + MUX__RING_SLACK;
}

/* Tops up every pool's ring that holds fewer buffers than it should: once per reap and
 * before each enter, so that buffers taken by receives and given back by sends in one batch
 * go into the ring with one store of its tail, not one each. */
void mux__uring_ops_topup(struct mux__uring *st)
{
    for (struct mux__upool *up = st->pools; up; up = up->next)
        if (mux__upool_short(up))
            mux__upool_topup(up);
}

int mux__uring_pool_attach(struct mux__loop *loop, mux_bufpool_t *p)
{
    struct mux__uring *st = loop->bdata;
    uint32_t count = mux__bufpool_count(p);
    if (count > 32768 || mux__bufpool_size(p) > MUX__SEND_MAX || st->next_bgid == UINT16_MAX)
        return -ENOTSUP; /* beyond what a buffer ring holds: receives are emulated */
    struct mux__upool *up = calloc(1, sizeof *up);
    if (!up)
        return -ENOMEM;
    uint32_t n = 1;
    while (n < count)
        n <<= 1;
    up->rmask = (uint16_t)(n - 1);
    void *mem = mmap(NULL, mux__upool_bytes(up), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        free(up);
        return -ENOMEM; /* anonymous memory refused (the locked-memory limit, or none left) */
    }
    up->pool = p;
    up->ring = mem;
    up->bgid = st->next_bgid++;
    st->pools_pending = 1; /* the next wait registers it, before it submits a receive */
    /* No hook for buffers that come back: the ring is topped up in batches (above). */
    mux__bufpool_bind(p, loop, up, NULL);
    mux__upool_fill(up);
    up->next = st->pools;
    st->pools = up;
    return 0;
}

/* ---- the queue and the list in flight --------------------------------------------- */

static void mux__op_enqueue(struct mux__uring *st, struct mux__op *op, unsigned what)
{
    struct mux__uop *u = mux__uop_of(op);
    u->queue |= (uint8_t)what;
    if (u->state & MUX__OPS_QUEUED)
        return;
    u->state |= MUX__OPS_QUEUED;
    u->qprev = st->queue.qprev;
    u->qnext = &st->queue;
    st->queue.qprev->qnext = u;
    st->queue.qprev = u;
}

/* How many buffers of the ring an operation in flight may take before the next reap. */
static uint32_t mux__op_takes(const struct mux__op *op)
{
    return op->kind_ == MUX__OP_DGRAM_RECV ? MUX__RING_DGRAM : 1u;
}

static void mux__op_link(struct mux__uring *st, struct mux__op *op)
{
    struct mux__uop *u = mux__uop_of(op);
    u->next = st->ops.next;
    u->prev = &st->ops;
    st->ops.next->prev = u;
    st->ops.next = u;
    u->state |= MUX__OPS_FLIGHT;
    mux_bufpool_t *pool = mux__op_pool(op);
    if (pool) {
        /* buffers for it before it can reach the kernel (a full SQ ring is submitted
         * early, in the middle of a flush) */
        struct mux__upool *up = mux__upool_of(pool);
        up->armed += mux__op_takes(op);
        u->state |= MUX__OPS_POOL | (op->kind_ == MUX__OP_DGRAM_RECV ? MUX__OPS_DGRAM : 0);
        mux__upool_topup(up);
    }
}

static void mux__uring_prep_op(struct mux__uring *st, struct io_uring_sqe *sqe, struct mux__op *op);

void mux__uring_submit(struct mux__loop *loop, struct mux__op *op)
{
    struct mux__uring *st = loop->bdata;
    struct io_uring_sqe *sqe;
    if (mux__likely(op->kind_ == MUX__OP_SEND && st->queue.qnext == &st->queue && st->ring_ok &&
                    !mux__forked_since(loop) && (sqe = mux__uring_sqe(st)) != NULL)) {
        /* A send of one buffer, the common reply: its SQE written here, as below, with no
         * pool to count and no switch. */
        uint32_t len = op->a_.buf.len > MUX__SEND_MAX ? MUX__SEND_MAX : (uint32_t)op->a_.buf.len;
        *sqe = (struct io_uring_sqe){.opcode = IORING_OP_SEND,
                                     .fd = op->sock_,
                                     .addr = (uint64_t)(uintptr_t)op->a_.buf.base,
                                     .len = len,
                                     .msg_flags = MSG_NOSIGNAL,
                                     .user_data = mux__op_ud(op)};
        struct mux__uop *u = mux__uop_of(op);
        u->queue = 0;
        u->state = MUX__OPS_FLIGHT;
        u->next = st->ops.next;
        u->prev = &st->ops;
        st->ops.next->prev = u;
        st->ops.next = u;
        return;
    }
    /* Not in flight, so on no list: its private space may hold anything (the emulation's). */
    memset(mux__uop_of(op), 0, sizeof(struct mux__uop));
    /* A send goes straight into the SQ ring, for the next wait's enter to submit, when nothing
     * is queued ahead of it (the queue keeps the order) and the ring is this process's (in a
     * child that has not renewed it, the SQ ring's memory is still shared with the parent).
     * The other kinds wait for the queue: a receive's buffer ring is registered by the wait. */
    if ((op->kind_ == MUX__OP_SEND || op->kind_ == MUX__OP_SENDV) &&
        st->queue.qnext == &st->queue && mux__likely(st->ring_ok) &&
        !mux__forked_since(loop) && (sqe = mux__uring_sqe(st)) != NULL) {
        mux__uring_prep_op(st, sqe, op);
        mux__op_link(st, op);
        return;
    }
    mux__op_enqueue(st, op, MUX__Q_SUBMIT);
}

void mux__uring_cancel(struct mux__loop *loop, struct mux__op *op)
{
    struct mux__uop *u = mux__uop_of(op);
    if (u->queue & MUX__Q_SUBMIT) /* never submitted: it ends with the next wait */
        u->queue = (uint8_t)((u->queue & ~MUX__Q_SUBMIT) | MUX__Q_DROP);
    else if (u->state & MUX__OPS_FLIGHT)
        mux__op_enqueue(loop->bdata, op, MUX__Q_CANCEL);
}

/* Fills the SQE of an operation to start, every field of it. */
static void mux__uring_prep_op(struct mux__uring *st, struct io_uring_sqe *sqe, struct mux__op *op)
{
    *sqe = (struct io_uring_sqe){.fd = op->sock_, .user_data = mux__op_ud(op)};
    switch (op->kind_) {
    case MUX__OP_RECV_POOL:
        sqe->opcode = IORING_OP_RECV;
        sqe->flags = IOSQE_BUFFER_SELECT;
        sqe->buf_group = mux__upool_of(op->a_.pool)->bgid;
        if (op->flags_ & MUX__OPF_MULTI) {
            /* A CQE per buffer filled, of the buffer's size; never polling first (the top). */
            sqe->ioprio = IORING_RECV_MULTISHOT;
            break;
        }
        sqe->len = (uint32_t)mux__bufpool_size(op->a_.pool);
        /* The socket is likely empty: wait for data before trying. */
        sqe->ioprio = op->flags_ & MUX__OPF_POLL_FIRST ? IORING_RECVSEND_POLL_FIRST : 0;
        break;
    case MUX__OP_DGRAM_RECV: {
        /* Multishot (the descriptor's caps: 6.0): a CQE per datagram, into a buffer of the
         * ring, laid out as the kernel's header, the sender's address and the bytes. */
        struct msghdr *msg = &st->msgs[sqe - st->ring.sq.sqes];
        memset(msg, 0, sizeof *msg);
        msg->msg_namelen = sizeof(struct sockaddr_in6);
        sqe->opcode = IORING_OP_RECVMSG;
        sqe->addr = (uint64_t)(uintptr_t)msg;
        sqe->len = 1;
        sqe->flags = IOSQE_BUFFER_SELECT;
        sqe->buf_group = mux__upool_of(op->a_.dgram->pool)->bgid;
        sqe->ioprio = IORING_RECV_MULTISHOT;
        break;
    }
    case MUX__OP_SEND:
        sqe->opcode = IORING_OP_SEND;
        sqe->addr = (uint64_t)(uintptr_t)op->a_.buf.base;
        sqe->len = (uint32_t)(op->a_.buf.len > MUX__SEND_MAX ? MUX__SEND_MAX : op->a_.buf.len);
        sqe->msg_flags = MSG_NOSIGNAL;
        break;
    case MUX__OP_SENDV: {
        struct msghdr *msg = &st->msgs[sqe - st->ring.sq.sqes];
        memset(msg, 0, sizeof *msg);
        msg->msg_iov = (struct iovec *)(uintptr_t)op->a_.bufs.v; /* laid out alike */
        msg->msg_iovlen =
            op->a_.bufs.n > MUX__URING_SENDV_MAX ? MUX__URING_SENDV_MAX : op->a_.bufs.n;
        sqe->opcode = IORING_OP_SENDMSG;
        sqe->addr = (uint64_t)(uintptr_t)msg;
        sqe->len = 1;
        sqe->msg_flags = MSG_NOSIGNAL;
        break;
    }
    default: /* MUX__OP_ACCEPT, multishot: the descriptor's caps promise nothing else */
        sqe->opcode = IORING_OP_ACCEPT;
        sqe->ioprio = IORING_ACCEPT_MULTISHOT;
        sqe->accept_flags = SOCK_NONBLOCK | SOCK_CLOEXEC;
        break;
    }
}

void mux__uring_ops_register(struct mux__uring *st)
{
    if (mux__likely(!st->pools_pending))
        return;
    st->pools_pending = 0;
    for (struct mux__upool *up = st->pools; up; up = up->next)
        if (!up->registered && mux__upool_register(st, up) != 0)
            st->pools_pending = 1; /* tried again next wait; its receives: -ENOBUFS */
}

struct mux__op *mux__uring_ops_head(struct mux__uring *st, unsigned *ended)
{
    struct mux__uop *u;
    while ((u = st->queue.qnext) != &st->queue) {
        struct mux__op *op = mux__op_of_uop(u);
        if (u->queue & MUX__Q_DROP) { /* cancelled before it was submitted */
            mux__op_dequeue(op);
            mux__op_complete(op, -ECANCELED, NULL, 0);
            (*ended)++;
        } else if (!(u->queue & (MUX__Q_SUBMIT | MUX__Q_CANCEL))) {
            mux__op_dequeue(op); /* a cancel whose operation ended meanwhile */
        } else {
            return op;
        }
    }
    return NULL;
}

void mux__uring_ops_prep(struct mux__uring *st, struct io_uring_sqe *sqe, struct mux__op *op)
{
    unsigned what = mux__uop_of(op)->queue;
    mux__op_dequeue(op);
    if (what & MUX__Q_CANCEL) {
        *sqe = (struct io_uring_sqe){.opcode = IORING_OP_ASYNC_CANCEL,
                                     .fd = -1,
                                     .user_data = (uint64_t)MUX__UD_REMOVE << 62,
                                     .addr = mux__op_ud(op),
                                     .flags = (uint8_t)st->skip};
        return;
    }
    mux__uring_prep_op(st, sqe, op);
    mux__op_link(st, op);
}

_Static_assert(sizeof(struct io_uring_recvmsg_out) + sizeof(struct sockaddr_in6) ==
                   MUX_UDP_POOL_HEADROOM,
               "a datagram lies MUX_UDP_POOL_HEADROOM bytes into its buffer, as the emulation's");

/* A datagram's CQE of `res` bytes in `buf`: the next message of its batch, if there is room
 * (else the owner refuses it). Returns the completion's result: 1 datagram, or -EIO for a
 * buffer the kernel did not lay out as it says. */
static int mux__uring_dgram(struct mux__op *op, char *buf, int res)
{
    struct mux__dbatch *b = op->a_.dgram;
    if (b->k >= b->n)
        return 1;
    struct msghdr tmpl;
    memset(&tmpl, 0, sizeof tmpl);
    tmpl.msg_namelen = sizeof(struct sockaddr_in6);
    struct io_uring_recvmsg_out *o = io_uring_recvmsg_validate(buf, res, &tmpl);
    if (!o)
        return -EIO;
    struct mux__dmsg *m = &b->m[b->k];
    m->pbuf = buf;
    m->buf = io_uring_recvmsg_payload(o, &tmpl);
    m->cap = (uint32_t)(mux__bufpool_size(b->pool) - MUX_UDP_POOL_HEADROOM);
    m->len = io_uring_recvmsg_payload_length(o, res, &tmpl);
    m->flags = o->flags & MSG_TRUNC ? MUX__DMSG_TRUNC : 0;
    m->gso = 0;
    uint32_t nlen = o->namelen < m->addrlen ? o->namelen : m->addrlen;
    memcpy(m->addr, io_uring_recvmsg_name(o), nlen);
    m->addrlen = nlen;
    return 1;
}

/* One CQE of an operation. Returns 0, or its owner's refusal (1 or 2, backend.h). Inline in
 * the reap's path; the cold callers (redelivery, a ring renewed) go through the copy below. */
static inline __attribute__((always_inline)) int mux__uring_op_cqe_inline(struct mux__loop *loop,
                                                                         uint64_t ud, int res,
                                                                         unsigned flags)
{
    struct mux__op *op = mux__cqe_op(ud);
    unsigned more = flags & IORING_CQE_F_MORE;
    unsigned opf =
        (more ? MUX__OPC_MORE : 0) | (flags & IORING_CQE_F_SOCK_NONEMPTY ? MUX__OPC_NONEMPTY : 0);
    if (mux__likely(((struct mux__uring *)loop->bdata)->post_enter)) {
        /* After the wait's enter, where the loop dispatches callbacks (as the poll CQEs'
         * watchers are called from here): the owner delivers at once, with no round trip
         * through the pending queue. The first callback marks the wait over, as
         * mux__fd_report does, so that the clock is read again. */
        opf |= MUX__OPC_NOW;
        if (!loop->dispatched) {
            loop->dispatched = 1;
            loop->now_stale = 1;
        }
    }
    char *buf = NULL;
    uint32_t bid = 0;
    mux_bufpool_t *pool = NULL;
    if (flags & IORING_CQE_F_BUFFER) { /* the owner's from done_ on, until mux_bufpool_put */
        pool = mux__op_pool(op);
        bid = flags >> IORING_CQE_BUFFER_SHIFT;
        buf = mux__bufpool_taken(pool, bid);
        if (op->kind_ == MUX__OP_DGRAM_RECV && res >= 0)
            res = mux__uring_dgram(op, buf, res);
    }
    if (!more)
        mux__op_unlink(op);
    int refused = mux__op_complete(op, res, buf, opf);
    if (mux__unlikely(refused != 0)) {
        if (buf) /* its buffer comes again with it */
            mux__bufpool_untake(pool, bid);
        if (!more)
            mux__op_link(loop->bdata, op); /* still in flight: this completion comes again */
    }
    return refused;
}

static __attribute__((noinline)) int mux__uring_op_cqe(struct mux__loop *loop, uint64_t ud,
                                                       int res, unsigned flags)
{
    return mux__uring_op_cqe_inline(loop, ud, res, flags);
}

/* Keeps an operation's CQE for the next reap. 0, or -ENOMEM. */
static int mux__uring_defer(struct mux__uring *st, const struct io_uring_cqe *cqe)
{
    if (st->ndefer == st->defer_cap) {
        uint32_t cap = st->defer_cap ? st->defer_cap * 2 : 64;
        struct mux__cqe *d = realloc(st->defer, (size_t)cap * sizeof *d);
        if (!d)
            return -ENOMEM;
        st->defer = d;
        st->defer_cap = cap;
    }
    st->defer[st->ndefer++] = (struct mux__cqe){cqe->user_data, cqe->res, cqe->flags};
    return 0;
}

/* Keeps a CQE that its owner refused (1: offered again, 2: parked) or that follows a kept one
 * of the same operation: its later CQEs are kept too, in order. 0, or -ENOMEM. */
static int mux__uring_keep(struct mux__uring *st, struct mux__uop *u,
                           const struct io_uring_cqe *cqe, int refused)
{
    int err = mux__uring_defer(st, cqe);
    if (err == 0) {
        u->state |= MUX__OPS_KEPT | (refused == 2 ? MUX__OPS_PARKED : 0);
        if (!(u->state & MUX__OPS_PARKED))
            st->defer_retry = 1;
    }
    return err;
}

int mux__uring_ops_cqe_slow(struct mux__loop *loop, const struct io_uring_cqe *cqe)
{
    struct mux__uring *st = loop->bdata;
    struct mux__op *op = mux__cqe_op(cqe->user_data);
    struct mux__uop *u = mux__uop_of(op);
    int refused = 1;
    if (cqe->flags & IORING_CQE_F_BUFFER) {
        /* The kernel took it from the ring, whether its owner takes the CQE now or later;
         * the reap tops the ring up once it has handled its batch, and at once for a
         * multishot datagram receive, which takes buffers between reaps (the top). */
        struct mux__upool *up = mux__upool_of(mux__op_pool(op));
        up->inring--;
        if ((u->state & MUX__OPS_DGRAM) && (cqe->flags & IORING_CQE_F_MORE))
            mux__upool_topup(up);
    }
    /* Once one of an operation's CQEs is kept, its later ones are too: in order. */
    if (mux__likely(!(u->state & MUX__OPS_KEPT)) &&
        (refused = mux__uring_op_cqe_inline(loop, cqe->user_data, cqe->res, cqe->flags)) == 0)
        return 0;
    return mux__uring_keep(st, u, cqe, refused);
}

int mux__uring_ops_refused(struct mux__loop *loop, const struct io_uring_cqe *cqe, int refused)
{
    struct mux__uring *st = loop->bdata;
    struct mux__op *op = mux__cqe_op(cqe->user_data);
    if (cqe->flags & IORING_CQE_F_BUFFER) /* its buffer comes again with it */
        mux__bufpool_untake(op->a_.pool, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
    if (!(cqe->flags & IORING_CQE_F_MORE))
        mux__op_link(st, op); /* still in flight: this completion comes again */
    return mux__uring_keep(st, mux__uop_of(op), cqe, refused);
}

unsigned mux__uring_ops_redeliver(struct mux__loop *loop)
{
    struct mux__uring *st = loop->bdata;
    uint32_t i, k = 0, n = st->ndefer;
    if (mux__likely(n == 0))
        return 0;
    for (i = 0; i < n; i++)
        mux__uop_of(mux__cqe_op(st->defer[i].ud))->state &=
            (uint8_t) ~(MUX__OPS_KEPT | MUX__OPS_REFUSED | MUX__OPS_PARKED);
    for (i = 0; i < n; i++) {
        struct mux__cqe d = st->defer[i];
        struct mux__uop *u = mux__uop_of(mux__cqe_op(d.ud));
        int refused = 1;
        if ((u->state & MUX__OPS_REFUSED) ||
            (refused = mux__uring_op_cqe(loop, d.ud, d.res, d.flags)) != 0) {
            u->state |= MUX__OPS_REFUSED | (refused == 2 ? MUX__OPS_PARKED : 0);
            st->defer[k++] = d;
        }
    }
    st->ndefer = k;
    st->defer_retry = 0;
    for (i = 0; i < k; i++) {
        struct mux__uop *u = mux__uop_of(mux__cqe_op(st->defer[i].ud));
        u->state = (uint8_t)((u->state & ~MUX__OPS_REFUSED) | MUX__OPS_KEPT);
        if (!(u->state & MUX__OPS_PARKED))
            st->defer_retry = 1;
    }
    return n - k;
}

/* ---- life cycle ------------------------------------------------------------------- */

int mux__uring_ops_open(struct mux__uring *st)
{
    mux__ulist_init(&st->ops, 0);
    mux__ulist_init(&st->queue, 1);
    st->next_bgid = 1;
    st->nmsgs = st->ring.sq.ring_entries;
    st->msgs = calloc(st->nmsgs, sizeof *st->msgs);
    return st->msgs ? 0 : -ENOMEM;
}

int mux__uring_pool_detach(struct mux__loop *loop, mux_bufpool_t *p)
{
    struct mux__uring *st = loop->bdata;
    struct mux__upool *up = mux__upool_of(p), **pp = &st->pools;
    if (up->armed)
        return -EBUSY;
    while (*pp != up)
        pp = &(*pp)->next;
    *pp = up->next;
    if (up->registered && st->ring_ok)
        io_uring_unregister_buf_ring(&st->ring, up->bgid);
    munmap(up->ring, mux__upool_bytes(up));
    mux__bufpool_unbind(p);
    free(up);
    return 0;
}

void mux__uring_ops_close(struct mux__uring *st)
{
    struct mux__upool *up;
    while ((up = st->pools) != NULL) {
        st->pools = up->next;
        munmap(up->ring, mux__upool_bytes(up));
        mux__bufpool_unbind(up->pool);
        free(up);
    }
    free(st->defer);
    free(st->msgs);
}

void mux__uring_ops_drop_ring(struct mux__loop *loop, int lost)
{
    struct mux__uring *st = loop->bdata;
    if (lost && st->ring_ok) /* its receives must not pick buffers any more */
        for (struct mux__upool *up = st->pools; up; up = up->next)
            if (up->registered)
                io_uring_unregister_buf_ring(&st->ring, up->bgid);
    for (uint32_t i = 0; i < st->ndefer; i++) {
        struct mux__cqe d = st->defer[i];
        struct mux__op *op = mux__cqe_op(d.ud);
        mux__uop_of(op)->state &= (uint8_t) ~(MUX__OPS_KEPT | MUX__OPS_REFUSED | MUX__OPS_PARKED);
        int taken = lost && mux__uring_op_cqe(loop, d.ud, d.res, d.flags) == 0;
        if (!taken && op->kind_ == MUX__OP_ACCEPT && d.res >= 0)
            close(d.res); /* the parent's, or refused again: nobody here will take it */
    }
    st->ndefer = 0;
    st->defer_retry = 0;
}

void mux__uring_ops_new_ring(struct mux__loop *loop, int lost)
{
    struct mux__uring *st = loop->bdata;
    if (st->ring_ok && st->ring.sq.ring_entries > st->nmsgs) {
        /* A larger ring (IOMUX_URING_ENTRIES changed since): a msghdr per SQE slot. */
        struct msghdr *m = calloc(st->ring.sq.ring_entries, sizeof *m);
        if (m) {
            free(st->msgs);
            st->msgs = m;
            st->nmsgs = st->ring.sq.ring_entries;
        } else {
            loop->caps &= ~MUX__CAP(MUX__OP_SENDV); /* no header for every slot: emulated */
        }
    }
    for (struct mux__upool *up = st->pools; up; up = up->next) {
        up->registered = 0;
        st->pools_pending = 1;
        mux__upool_fill(up);
    }
    /* Every operation in flight ends as a CQE of its own would end it: kept and offered from
     * the next wait, so that an owner holding an earlier completion refuses it as it may any
     * other (a stream's multishot receive does). Without memory to keep it, at once. */
    struct mux__uop *u, *next;
    for (u = st->ops.next; u != &st->ops; u = next) {
        next = u->next;
        struct mux__op *op = mux__op_of_uop(u);
        struct io_uring_cqe end = {.user_data = mux__op_ud(op), .res = lost ? -EIO : -ECANCELED};
        if (mux__uring_defer(st, &end) == 0) {
            u->state |= MUX__OPS_KEPT;
            st->defer_retry = 1;
        } else {
            mux__op_unlink(op);
            mux__op_complete(op, end.res, NULL, 0);
        }
    }
}
