/* SPDX-License-Identifier: MIT */
/* The io_uring backend's own state, shared by its two files: uring.c (the ring, the poll
 * requests of the readiness half, the wait) and ops.c (the native operations and the
 * pools' provided-buffer rings). Nothing outside src/backend/uring/ includes this. */
#ifndef IOMUX_BACKEND_URING_H
#define IOMUX_BACKEND_URING_H

#include <liburing.h>
#include <sys/socket.h>

#include "backend/backend.h"

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

struct mux__upool; /* ops.c: a pool's provided-buffer ring */

struct mux__uring {
    struct io_uring ring;
    int ring_ok;   /* `ring` holds a ring that close must release */
    unsigned skip; /* IOSQE_CQE_SKIP_SUCCESS when the kernel has it */
    int *rearm;    /* fds whose request completed, to re-arm before a wait */
    uint32_t nrearm, rearm_cap;
    uint32_t ndone;         /* the first ndone of them have had their watchers run */
    uint8_t deferred;       /* IORING_SETUP_DEFER_TASKRUN: task work runs in waits only */
    uint8_t taskrun_flag;   /* IORING_SETUP_TASKRUN_FLAG: the kernel flags pending task work */
    uint8_t post_enter;     /* between the wait's enter and its return: re-arms may be queued */
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
/* An operation's CQE from the reap. 0, or -ENOMEM when it could not be kept for later (it
 * must stay in the ring). */
int mux__uring_ops_cqe(struct mux__loop *loop, const struct io_uring_cqe *cqe);
/* Offers the kept CQEs again; returns how many were taken. */
unsigned mux__uring_ops_redeliver(struct mux__loop *loop);
/* Before the ring is replaced: `lost` (CQEs were lost) or a fork's child. */
void mux__uring_ops_drop_ring(struct mux__loop *loop, int lost);
/* After: buffer rings to register again; operations in flight end (fork: -ECANCELED, lost
 * CQEs: -EIO). */
void mux__uring_ops_new_ring(struct mux__loop *loop, int lost);
void mux__uring_submit(struct mux__loop *loop, struct mux__op *op);
void mux__uring_cancel(struct mux__loop *loop, struct mux__op *op);
int mux__uring_pool_attach(struct mux__loop *loop, mux_bufpool_t *pool);
int mux__uring_pool_detach(struct mux__loop *loop, mux_bufpool_t *pool);

#endif
