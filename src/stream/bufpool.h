/* SPDX-License-Identifier: MIT */
/* Buffer pools, the stream layer's side: what the emulated receive and the streams ask of a
 * pool. The backends' side (lending free buffers to a kernel ring) is in the backend contract
 * (backend/backend.h, "Buffer pools"); bufpool.c and those calls are the only code that reads
 * or writes the fields of mux_bufpool_t.
 *
 * Each buffer is in one of four states: on the free list; the caller's (a read callback
 * was given it, and mux_bufpool_put gives it back); a stream's, which sends from it and gives
 * it back when the send ends (mux_write_pool); or lent to a kernel that picks receive
 * buffers itself (a backend with MUX__CAP_RECV_POOL keeps some free buffers in its ring).
 * A lent buffer still counts as free for mux_bufpool_available.
 */
#ifndef IOMUX_STREAM_BUFPOOL_H
#define IOMUX_STREAM_BUFPOOL_H

#include "backend/backend.h"

/* A free buffer for the caller (the emulated receive), or NULL when there is none or the free
 * buffers are a kernel ring's (another loop reads from this pool natively). */
char *mux__bufpool_get(mux_bufpool_t *p);
/* Hands the caller's buffer holding `buf` to a send of `len` bytes from `buf` (mux_write_pool):
 * from here until mux__bufpool_sent, mux_bufpool_put and a second send refuse it. Returns the
 * buffer's index, or -EINVAL for a pointer that is not in one of the pool's buffers, a buffer
 * the caller does not hold, or `len` past the buffer's end. Inline: it is on every echo. */
static inline int mux__bufpool_send(mux_bufpool_t *p, const char *buf, size_t len)
{
    if (buf < p->mem_)
        return -EINVAL;
    size_t off = (size_t)(buf - p->mem_), i = off / p->size_;
    if (i >= p->count_ || p->free_[i] != MUX__POOL_INUSE || len > p->size_ - (off - i * p->size_))
        return -EINVAL;
    p->free_[i] = MUX__POOL_SEND;
    return (int)i;
}
/* Buffer `i`'s send ended: it goes back on the free list, first in line, as mux_bufpool_put
 * puts a buffer (without its checks: `i` is a buffer the stream holds). */
static inline void mux__bufpool_sent(mux_bufpool_t *p, uint32_t i)
{
    p->free_[i] = p->head_;
    p->head_ = i;
    p->nfree_++;
    if (p->kput_)
        p->kput_(p);
}
/* Whether the pool's backend hears of every buffer that comes back (its hook), which
 * mux__bufpool_sent calls. */
static inline int mux__bufpool_hooked(const mux_bufpool_t *p)
{
    return p->kput_ != NULL;
}
/* mux__bufpool_sent for a pool with no hook: no call, for a path that saves no registers. */
static inline void mux__bufpool_sent_unhooked(mux_bufpool_t *p, uint32_t i)
{
    p->free_[i] = p->head_;
    p->head_ = i;
    p->nfree_++;
}
/* Buffer `i`'s send was never queued: the caller's again. */
static inline void mux__bufpool_unsend(mux_bufpool_t *p, uint32_t i)
{
    p->free_[i] = MUX__POOL_INUSE;
}
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
