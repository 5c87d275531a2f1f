/* SPDX-License-Identifier: MIT */
/* Buffer pools, the stream layer's side: what the emulated receive and the streams ask of a
 * pool. The backends' side (lending free buffers to a kernel ring) is in the backend contract
 * (backend/backend.h, "Buffer pools"); bufpool.c and those calls are the only code that reads
 * or writes the fields of mux_bufpool_t.
 *
 * Each buffer is in one of three states: on the free list; the caller's (a read callback
 * was given it, and mux_bufpool_put gives it back); or lent to a kernel that picks receive
 * buffers itself (a backend with MUX__CAP_RECV_POOL keeps some free buffers in its ring).
 * A lent buffer still counts as free for mux_bufpool_available.
 */
#ifndef IOMUX_STREAM_BUFPOOL_H
#define IOMUX_STREAM_BUFPOOL_H

#include "backend/backend.h"

/* A free buffer for the caller (the emulated receive), or NULL when there is none or the free
 * buffers are a kernel ring's (another loop reads from this pool natively). */
char *mux__bufpool_get(mux_bufpool_t *p);
/* The loop whose kernel holds the pool's free buffers, or NULL. */
static inline struct mux__loop *mux__bufpool_owner(const mux_bufpool_t *p)
{
    return p->loop_;
}
/* Whether `loop`'s kernel picks this pool's buffers (its receives run natively). */
static inline int mux__bufpool_native(const mux_bufpool_t *p, const struct mux__loop *loop)
{
    return p->loop_ == loop;
}

#endif
