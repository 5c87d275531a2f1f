/* SPDX-License-Identifier: MIT */
/* Buffer pools, inside the library: bufpool.c is the only file that reads or writes the
 * fields of mux_bufpool_t; everything else goes through these calls.
 *
 * Each buffer is in one of three states: on the free list; the caller's (a read callback
 * was given it, and mux_bufpool_put gives it back); or lent to a kernel that picks receive
 * buffers itself (a backend with MUX__CAP_RECV_POOL keeps some free buffers in its ring).
 * A lent buffer still counts as free for mux_bufpool_available.
 */
#ifndef IOMUX_BUFPOOL_H
#define IOMUX_BUFPOOL_H

#include "internal.h"

#define MUX__POOL_NONE UINT32_MAX

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

/* For the backend that holds the pool: */
/* The pool's free buffers are `loop`'s kernel's from now on; `kring` is the backend's state
 * for it, and `kput` is called whenever a buffer goes back on the free list. */
void mux__bufpool_bind(mux_bufpool_t *p, struct mux__loop *loop, void *kring,
                       void (*kput)(mux_bufpool_t *p));
/* The loop closes or its kernel ring is gone: the pool serves any loop again. */
void mux__bufpool_unbind(mux_bufpool_t *p);
void *mux__bufpool_kring(const mux_bufpool_t *p); /* the backend's state, as bound */
uint32_t mux__bufpool_count(const mux_bufpool_t *p);
size_t mux__bufpool_size(const mux_bufpool_t *p);
char *mux__bufpool_addr(const mux_bufpool_t *p, uint32_t i);
/* Lends the most recently used free buffer to the kernel: its index, or MUX__POOL_NONE. */
uint32_t mux__bufpool_lend(mux_bufpool_t *p);
/* The kernel filled lent buffer `i`: it is the caller's now. Its address. */
char *mux__bufpool_taken(mux_bufpool_t *p, uint32_t i);
/* Undoes mux__bufpool_taken: its completion was refused, to come again. */
void mux__bufpool_untake(mux_bufpool_t *p, uint32_t i);
/* Every buffer that is not the caller's goes back on the free list (the ring was reset). */
void mux__bufpool_reclaim(mux_bufpool_t *p);

#endif
