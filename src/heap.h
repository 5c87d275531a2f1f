/* SPDX-License-Identifier: MIT */
/* A 4-ary min-heap of (deadline, link) nodes, used for timers and periodics.
 *
 * Nodes are 16 bytes, so the four children of a node share one 64-byte cache line once the
 * array is aligned; the deadline is cached in the node so that sifting never touches the
 * watchers. Equal deadlines are ordered by the link's start sequence, which makes timers
 * with the same deadline fire in the order they were started. Capacity is reserved before
 * insertion (mux__heap_reserve), so insert, remove and update never allocate or fail.
 */
#ifndef IOMUX_HEAP_H
#define IOMUX_HEAP_H

#include <stdint.h>
#include <stdlib.h>

#include "iomux.h"
#include "platform/platform.h" /* mux__aligned_alloc: the heap's array */


struct mux__hnode {
    uint64_t at;
    struct mux__hlink *link;
};

struct mux__heap {
    struct mux__hnode *v;
    uint32_t n, cap;
};

static inline int mux__hless(const struct mux__hnode *a, const struct mux__hnode *b)
{
    return a->at < b->at || (a->at == b->at && a->link->seq < b->link->seq);
}

static inline void mux__heap_put(struct mux__heap *h, uint32_t i, struct mux__hnode node)
{
    h->v[i] = node;
    node.link->index = i;
}

/* The sifts keep the array and the count in locals: every move stores the node's index
 * through its link, which the compiler must otherwise assume may change them. */
static inline void mux__heap_up(struct mux__heap *h, uint32_t i)
{
    struct mux__hnode *v = h->v, node = v[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 4;
        if (!mux__hless(&node, &v[p]))
            break;
        v[i] = v[p];
        v[i].link->index = i;
        i = p;
    }
    v[i] = node;
    node.link->index = i;
}

static inline void mux__heap_down(struct mux__heap *h, uint32_t i)
{
    struct mux__hnode *v = h->v, node = v[i];
    uint32_t n = h->n;
    for (;;) {
        uint32_t c = 4 * i + 1, best = c;
        if (__builtin_expect(c + 3 < n, 1)) { /* all four children: the common case, unrolled */
            if (mux__hless(&v[c + 1], &v[best]))
                best = c + 1;
            if (mux__hless(&v[c + 2], &v[best]))
                best = c + 2;
            if (mux__hless(&v[c + 3], &v[best]))
                best = c + 3;
        } else if (c < n) {
            for (uint32_t k = c + 1; k < n; k++)
                if (mux__hless(&v[k], &v[best]))
                    best = k;
        } else {
            break;
        }
        if (!mux__hless(&v[best], &node))
            break;
        v[i] = v[best];
        v[i].link->index = i;
        i = best;
    }
    v[i] = node;
    node.link->index = i;
}

/* Restores order after the node at i changed its key either way. */
static inline void mux__heap_fix(struct mux__heap *h, uint32_t i)
{
    if (i > 0 && mux__hless(&h->v[i], &h->v[(i - 1) / 4]))
        mux__heap_up(h, i);
    else
        mux__heap_down(h, i);
}

/* Makes room for `extra` more nodes. 0 or -ENOMEM. */
static inline int mux__heap_reserve(struct mux__heap *h, uint32_t extra)
{
    if (h->n + extra <= h->cap)
        return 0;
    uint32_t cap = h->cap ? h->cap * 2 : 64;
    while (cap < h->n + extra)
        cap *= 2;
    void *v = mux__aligned_alloc(64, (size_t)cap * sizeof *h->v);
    if (!v)
        return -12; /* ENOMEM, without dragging errno.h into every user */
    for (uint32_t i = 0; i < h->n; i++)
        ((struct mux__hnode *)v)[i] = h->v[i];
    mux__aligned_free(h->v);
    h->v = v;
    h->cap = cap;
    return 0;
}

static inline void mux__heap_insert(struct mux__heap *h, struct mux__hlink *l, uint64_t at)
{
    struct mux__hnode node = {at, l};
    mux__heap_put(h, h->n++, node);
    mux__heap_up(h, h->n - 1);
}

static inline void mux__heap_remove(struct mux__heap *h, struct mux__hlink *l)
{
    uint32_t i = l->index;
    if (i != --h->n) {
        mux__heap_put(h, i, h->v[h->n]);
        mux__heap_fix(h, i);
    }
}

static inline void mux__heap_update(struct mux__heap *h, struct mux__hlink *l, uint64_t at)
{
    h->v[l->index].at = at;
    mux__heap_fix(h, l->index);
}

/* Restores order after every key changed. */
static inline void mux__heap_rebuild(struct mux__heap *h)
{
    for (uint32_t i = h->n / 4 + 1; i-- > 0;)
        if (i < h->n)
            mux__heap_down(h, i);
}

static inline uint64_t mux__heap_at(const struct mux__heap *h, const struct mux__hlink *l)
{
    return h->v[l->index].at;
}

#endif
