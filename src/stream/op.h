/* SPDX-License-Identifier: MIT */
/* The operation layer: starts an operation natively on the loop's backend or emulated
 * (ready_ops.c), by the capability bits, and cancels it the same way. The stream layer uses
 * only these; the contract they rest on is at the top of backend/backend.h. */
#ifndef IOMUX_STREAM_OP_H
#define IOMUX_STREAM_OP_H

#include "backend/backend.h"
#include "stream/ready_ops.h"
#include "stream/bufpool.h"

/* Whether the loop's backend runs `op` natively: its kind is in loop->caps and, for a pool
 * receive (of a stream or of datagrams), the pool's buffers are in this loop's kernel ring. */
static inline int mux__op_native(const struct mux__loop *loop, const struct mux__op *op)
{
    if (!(loop->caps & MUX__CAP(op->kind_)))
        return 0;
    if (op->kind_ == MUX__OP_DGRAM_RECV) /* from a pool bound to the loop, or the backend
                                            reads caller buffers the "Buffers" way (IOCP) */
        return op->a_.dgram->pool ? mux__bufpool_native(op->a_.dgram->pool, loop)
                                  : (loop->caps & MUX__CAP_DGRAM_BUF) != 0;
    return op->kind_ != MUX__OP_RECV_POOL || mux__bufpool_native(op->a_.pool, loop);
}

/* Starts `op`, natively or emulated. Its completions come to op->done_. */
static inline void mux__op_submit(struct mux__loop *loop, struct mux__op *op)
{
    op->flags_ = (uint8_t)((op->flags_ & ~MUX__OPF_NATIVE) | MUX__OPF_FLIGHT);
    if (mux__op_native(loop, op)) {
        if (mux__unlikely(op->flags_ & MUX__OPF_WATCH))
            mux__ready_release(loop, op); /* the slot was emulated before: priv_ changes hands */
        op->flags_ |= MUX__OPF_NATIVE;
        loop->backend->submit(loop, op);
    } else {
        mux__ready_submit(loop, op);
    }
}

/* mux__op_submit of an operation whose kind the caller found in loop->caps, and not a pool
 * receive: the backend runs it. */
static inline void mux__op_submit_native(struct mux__loop *loop, struct mux__op *op)
{
    if (mux__unlikely(op->flags_ & MUX__OPF_WATCH)) {
        mux__ready_submit_native(loop, op); /* the slot was emulated before (out of line) */
        return;
    }
    op->flags_ |= MUX__OPF_FLIGHT | MUX__OPF_NATIVE;
    loop->backend->submit(loop, op);
}

/* Asks `op` to end early if it is in flight (see "Cancel" at the top), and stops the
 * emulation's watcher if it kept one started. */
static inline void mux__op_cancel(struct mux__loop *loop, struct mux__op *op)
{
    if ((op->flags_ & (MUX__OPF_FLIGHT | MUX__OPF_NATIVE)) == (MUX__OPF_FLIGHT | MUX__OPF_NATIVE))
        loop->backend->cancel(loop, op);
    else if (op->flags_ & (MUX__OPF_FLIGHT | MUX__OPF_WATCH))
        mux__ready_cancel(loop, op);
}

static inline int mux__op_in_flight(const struct mux__op *op)
{
    return (op->flags_ & MUX__OPF_FLIGHT) != 0;
}

#endif
