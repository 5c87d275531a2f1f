/* SPDX-License-Identifier: MIT */
/* Buffer pools: equal buffers carved from caller memory, handed out to reads.
 *
 * The free list is threaded through the caller's `free_slots` array, most recently used
 * first: a buffer given back is the next one handed out, while it is still in the cache.
 * free_[i] is the next free index, or one of three marks: the caller holds the buffer, a
 * stream sends from it, or a kernel ring holds it (MUX__POOL_INUSE, MUX__POOL_SEND,
 * MUX__POOL_LENT). A pool that a loop's kernel reads into
 * (io_uring's provided-buffer rings) is bound to that loop until the loop closes; the backend
 * keeps its own state for it (kring_) and is told when a buffer comes back (kput_), to refill
 * its ring. The calls a backend makes on a pool are the contract's (backend/backend.h,
 * "Buffer pools"): the pool knows nothing of backends.
 */
#include <stdint.h>
#include <string.h>

#include "stream/bufpool.h"

MUX_EXPORT int mux_bufpool_init(mux_bufpool_t *p, void *mem, size_t size, uint32_t count,
                                uint32_t *free_slots)
{
    /* At most INT_MAX: mux_bufpool_available returns the count as an int. */
    if (!p || !mem || !size || !count || count > INT32_MAX || !free_slots ||
        size > SIZE_MAX / count)
        return -EINVAL;
    void *data = p->data;
    memset(p, 0, sizeof *p);
    p->data = data;
    p->mem_ = mem;
    p->size_ = size;
    p->count_ = p->nfree_ = count;
    p->free_ = free_slots;
    for (uint32_t i = 0; i < count; i++)
        free_slots[i] = i + 1; /* next free; count ends the list */
    return 0;
}

MUX_EXPORT int mux_bufpool_put(mux_bufpool_t *p, char *buf)
{
    if (!p || !p->mem_ || !buf || buf < p->mem_)
        return -EINVAL;
    size_t off = (size_t)(buf - p->mem_);
    if (off % p->size_ || off / p->size_ >= p->count_)
        return -EINVAL;
    uint32_t i = (uint32_t)(off / p->size_);
    if (p->free_[i] != MUX__POOL_INUSE)
        return -EINVAL; /* already free */
    p->free_[i] = p->head_;
    p->head_ = i;
    p->nfree_++;
    if (p->kput_)
        p->kput_(p);
    return 0;
}

MUX_EXPORT int mux_bufpool_available(const mux_bufpool_t *p)
{
    return p && p->mem_ ? (int)p->nfree_ : -EINVAL;
}

char *mux__bufpool_get(mux_bufpool_t *p)
{
    if (p->head_ == p->count_ || p->kring_)
        return NULL;
    uint32_t i = p->head_;
    p->head_ = p->free_[i];
    p->free_[i] = MUX__POOL_INUSE;
    p->nfree_--;
    return mux__bufpool_addr(p, i);
}
