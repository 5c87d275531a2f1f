/* SPDX-License-Identifier: MIT */
/* The io_uring backend's own state, shared by its two files: uring.c (the ring, the poll
 * requests of the readiness half, the wait) and ops.c (the native operations and the
 * pools' provided-buffer rings). Nothing outside src/backend/uring/ includes this. */
#ifndef IOMUX_BACKEND_URING_H
#define IOMUX_BACKEND_URING_H

#include <liburing.h>
#include <sys/socket.h>

#include "backend/backend.h"
#include "iomux/udp.h" /* MUX_UDP_BATCH */

#ifndef IORING_CQE_F_SOCK_NONEMPTY
#define IORING_CQE_F_SOCK_NONEMPTY (1U << 2)
#endif

/* User data: kind in bits 62-63, generation in bits 32-61, fd in bits 0-31; or, for an
 * operation (MUX__UD_OP), the struct mux__op's address in bits 0-61. */
enum { MUX__UD_POLL = 0, MUX__UD_UPDATE = 1, MUX__UD_REMOVE = 2, MUX__UD_OP = 3 };

/* An operation's private space (mux__op.priv_) on this backend. */
struct mux__uop {
    struct mux__uop *next, *prev;   /* the operations in flight in the kernel */
    struct mux__uop *qnext, *qprev; /* the queue of work for the next wait */
    uint8_t queue;                  /* MUX__Q_*: what the next wait does with it */
    uint8_t state;                  /* MUX__OPS_*: where it is */
};
_Static_assert(sizeof(struct mux__uop) <= sizeof(((struct mux__op *)0)->priv_),
               "an operation's private space holds io_uring's links");

/* A CQE kept for the next reap (its owner had no room for it). */
struct mux__cqe {
    uint64_t ud;
    int32_t res;
    uint32_t flags;
};

#define MUX__RING_DGRAM (2u * MUX_UDP_BATCH) /* a multishot datagram receive's buffers (ops.c) */

/* mux__uop.queue: what the next wait does; mux__uop.state: where the operation is. */
enum { MUX__Q_SUBMIT = 0x1, MUX__Q_CANCEL = 0x2, MUX__Q_DROP = 0x4 };
enum {
    MUX__OPS_QUEUED = 0x1,
    MUX__OPS_FLIGHT = 0x2,
    MUX__OPS_KEPT = 0x4,    /* CQEs of it are kept (st->defer) */
    MUX__OPS_REFUSED = 0x8, /* refused in this redelivery: its later CQEs are not offered */
    MUX__OPS_PARKED = 0x10, /* its owner parked them (backend.h, "Multishot") */
    MUX__OPS_POOL = 0x20,   /* a receive counted in its pool's `armed` */
    MUX__OPS_DGRAM = 0x40,  /* a datagram receive: its CQEs take the general way */
};

/* A pool's provided-buffer ring (ops.c has its essay). */
struct mux__upool {
    mux_bufpool_t *pool;
    struct io_uring_buf_ring *ring;
    struct mux__upool *next;
    uint16_t bgid, rmask;
    uint8_t registered;
    uint32_t inring; /* buffers in the ring */
    uint32_t armed;  /* buffers the receives in flight may take before the next reap */
};

struct mux__uring {
    struct io_uring ring;
    int ring_ok;   /* `ring` holds a ring that close must release */
    unsigned skip; /* IOSQE_CQE_SKIP_SUCCESS when the kernel has it */
    int *rearm;    /* fds whose request completed, to re-arm before a wait */
    uint32_t nrearm, rearm_cap;
    uint32_t ndone;         /* the first ndone of them have had their watchers run */
    uint8_t deferred;       /* IORING_SETUP_DEFER_TASKRUN: task work runs in waits only */
    uint8_t one_thread;     /* the loop is MUX_LOOP_ONE_THREAD's: deferred unless told not */
    uint8_t taskrun_flag;   /* IORING_SETUP_TASKRUN_FLAG: the kernel flags pending task work */
    uint8_t post_enter;     /* MUX__OPC_NOW between the wait's enter and its return, else 0:
                               re-arms may be queued, and operations' owners deliver at once */
    uint8_t disabled;       /* created disabled: the first wait enables it */
    uint8_t submit_all;     /* IORING_SETUP_SUBMIT_ALL: a failing SQE does not stop the batch */
    uint8_t pools_pending;  /* a pool's ring is not registered yet */
    uint16_t next_bgid;     /* the next pool's buffer group */
    struct mux__uop ops;    /* anchor of the operations in flight */
    struct mux__uop queue;  /* anchor of the work queued for the next wait */
    struct mux__cqe *defer; /* operation CQEs taken out of the ring, not yet taken */
    uint32_t ndefer, defer_cap;
    uint8_t defer_retry; /* a kept CQE is not parked: the next wait does not block */
    unsigned sq_head;    /* the SQ ring's head as last read: the kernel only moves it on */
    struct msghdr *msgs; /* one per SQE slot: a sendmsg's header, read when submitted */
    unsigned nmsgs;
    struct mux__upool *pools; /* pools with a provided-buffer ring */
};

/* An SQE slot at the SQ ring's tail, or NULL when the ring is full. liburing's
 * io_uring_get_sqe without its reads of the setup flags, and with the ring's head as last read
 * (st->sq_head): the kernel only moves it on, so a stale one errs on the full side, and it is
 * read again only then. The SQE keeps whatever it held: the caller writes every field. */
static inline struct io_uring_sqe *mux__uring_sqe(struct mux__uring *st)
{
    struct io_uring_sq *sq = &st->ring.sq;
    unsigned tail = sq->sqe_tail;
    if (__builtin_expect(tail - st->sq_head >= sq->ring_entries, 0)) {
        st->sq_head = IO_URING_READ_ONCE(*sq->khead);
        if (tail - st->sq_head >= sq->ring_entries)
            return NULL;
    }
    sq->sqe_tail = tail + 1;
    return &sq->sqes[tail & sq->ring_mask];
}

/* An operation's io_uring part, in its private space. */
static inline struct mux__uop *mux__uop_of(struct mux__op *op)
{
    return (struct mux__uop *)(void *)op->priv_.word;
}

/* The operation whose address a CQE's user data carries (MUX__UD_OP). */
static inline struct mux__op *mux__cqe_op(uint64_t ud)
{
    return (struct mux__op *)(uintptr_t)(ud & ~(3ull << 62));
}

static inline struct mux__upool *mux__upool_of(const mux_bufpool_t *p)
{
    return mux__bufpool_kring(p);
}

/* The pool a receive takes its buffers from: a stream's, or a datagram socket's, or NULL. */
static inline mux_bufpool_t *mux__op_pool(const struct mux__op *op)
{
    if (op->kind_ == MUX__OP_RECV_POOL)
        return op->a_.pool;
    return op->kind_ == MUX__OP_DGRAM_RECV ? op->a_.dgram->pool : NULL;
}

static inline void mux__op_dequeue(struct mux__op *op)
{
    struct mux__uop *u = mux__uop_of(op);
    u->qprev->qnext = u->qnext;
    u->qnext->qprev = u->qprev;
    u->qnext = u->qprev = NULL;
    u->queue = 0;
    u->state &= (uint8_t)~MUX__OPS_QUEUED;
}

/* The operation's last CQE came: it leaves every list (a cancel still queued has nothing
 * left to end). */
static inline void mux__op_unlink(struct mux__op *op)
{
    struct mux__uop *u = mux__uop_of(op);
    u->prev->next = u->next;
    u->next->prev = u->prev;
    u->next = u->prev = NULL;
    if (mux__unlikely(u->state & (MUX__OPS_POOL | MUX__OPS_QUEUED))) {
        if (u->state & MUX__OPS_POOL) /* what mux__op_takes counted at its link (ops.c) */
            mux__upool_of(mux__op_pool(op))->armed -=
                u->state & MUX__OPS_DGRAM ? MUX__RING_DGRAM : 1u;
        if (u->state & MUX__OPS_QUEUED)
            mux__op_dequeue(op);
    }
    u->state &= (uint8_t)~(MUX__OPS_FLIGHT | MUX__OPS_POOL | MUX__OPS_DGRAM);
}

/* ops.c, called by uring.c only (ops.c calls nothing of uring.c's) */
int mux__uring_ops_open(struct mux__uring *st);   /* 0 or -ENOMEM */
void mux__uring_ops_close(struct mux__uring *st); /* pools go back to serving any loop */
/* Registers the buffer rings of newly attached pools; before operations are submitted. */
void mux__uring_ops_register(struct mux__uring *st);
/* The first queued operation that needs an SQE, or NULL. Those ahead of it that need none
 * are done with on the way: a cancel of one never submitted ends it (counted in *ended). */
struct mux__op *mux__uring_ops_head(struct mux__uring *st, unsigned *ended);
/* Takes `op` (the head) off the queue and fills `sqe` for it: its start, or its cancel. */
void mux__uring_ops_prep(struct mux__uring *st, struct io_uring_sqe *sqe, struct mux__op *op);
/* An operation's CQE from the reap, the general way (below). 0, or -ENOMEM when it could not
 * be kept for later (it must stay in the ring). */
int mux__uring_ops_cqe_slow(struct mux__loop *loop, const struct io_uring_cqe *cqe);
/* A CQE that the fast way below handed to its owner, who refused it: undone and kept. 0, or
 * -ENOMEM as above. */
int mux__uring_ops_refused(struct mux__loop *loop, const struct io_uring_cqe *cqe, int refused);
/* Moves free pool buffers into every buffer ring that holds fewer than it should; after a
 * reap and before an enter (buffers that come back wait for it). */
void mux__uring_ops_topup(struct mux__uring *st);
/* Offers the kept CQEs again; returns how many were taken. */
unsigned mux__uring_ops_redeliver(struct mux__loop *loop);
/* Before the ring is replaced: `lost` (CQEs were lost) or a fork's child. */
void mux__uring_ops_drop_ring(struct mux__loop *loop, int lost);
/* After: buffer rings to register again; operations in flight end (fork: -ECANCELED, lost
 * CQEs: -EIO). */
void mux__uring_ops_new_ring(struct mux__loop *loop, int lost);
void mux__uring_submit(struct mux__loop *loop, struct mux__op *op);

/* An operation's CQE from the reap, inline in it: straight to its owner (one call, done_)
 * when none of its CQEs is kept and it is no datagram receive (whose buffer needs reading
 * first); the rest, and a refusal, go the general way (ops.c). 0, or -ENOMEM as above. */
/* One CQE of an operation, from the reap, which passes the wait's MUX__OPC_NOW (or 0) as
 * `now` and has marked the wait over (loop->dispatched) when it is set. */
static inline __attribute__((always_inline)) int
mux__uring_ops_cqe(struct mux__loop *loop, const struct io_uring_cqe *cqe, unsigned now)
{
    struct mux__op *op = mux__cqe_op(cqe->user_data);
    unsigned flags = cqe->flags;
    if (mux__unlikely(mux__uop_of(op)->state & (MUX__OPS_KEPT | MUX__OPS_DGRAM)))
        return mux__uring_ops_cqe_slow(loop, cqe);
    char *buf = NULL;
    if (flags & IORING_CQE_F_BUFFER) { /* the owner's from done_ on, until mux_bufpool_put */
        mux_bufpool_t *pool = op->a_.pool;
        mux__upool_of(pool)->inring--; /* out of the ring; the reap tops it up after its batch */
        buf = mux__bufpool_taken(pool, flags >> IORING_CQE_BUFFER_SHIFT);
    }
    /* After the wait's enter, where the loop dispatches callbacks (as the poll CQEs' watchers
     * are called from the reap), the owner delivers at once (MUX__OPC_NOW), with no round
     * trip through the pending queue. */
    unsigned opf = (flags & (MUX__OPC_MORE | MUX__OPC_NONEMPTY)) | now;
    if (!(flags & IORING_CQE_F_MORE))
        mux__op_unlink(op);
    int refused = mux__op_complete(op, cqe->res, buf, opf);
    return mux__likely(refused == 0) ? 0 : mux__uring_ops_refused(loop, cqe, refused);
}
void mux__uring_cancel(struct mux__loop *loop, struct mux__op *op);
int mux__uring_pool_attach(struct mux__loop *loop, mux_bufpool_t *pool);
int mux__uring_pool_detach(struct mux__loop *loop, mux_bufpool_t *pool);

#endif
