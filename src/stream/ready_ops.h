/* SPDX-License-Identifier: MIT */
/* The operations emulated with non-blocking system calls over the readiness half, for every
 * kind a backend does not run natively (ready_ops.c). Started and cancelled through op.h. */
#ifndef IOMUX_STREAM_READY_OPS_H
#define IOMUX_STREAM_READY_OPS_H

struct mux__loop;
struct mux__op;

void mux__ready_submit(struct mux__loop *loop, struct mux__op *op);
/* Stops the emulation's watcher; an operation in flight completes with -ECANCELED. */
void mux__ready_cancel(struct mux__loop *loop, struct mux__op *op);
/* Stops the emulation's watcher for good: priv_ is free for a native operation. */
void mux__ready_release(struct mux__loop *loop, struct mux__op *op);
/* The emulation's watcher released, `op` started on the backend (mux__op_submit_native's
 * rare case, out of line: a slot emulated before). */
void mux__ready_submit_native(struct mux__loop *loop, struct mux__op *op);

#endif
