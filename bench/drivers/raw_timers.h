/* SPDX-License-Identifier: MIT */
/* The idle timers of the hand-written drivers: a plain binary min-heap of slot numbers
 * keyed by deadline, with each slot's heap position kept so that restarting a timer is
 * one sift. It is what a careful programmer writes by hand, and so the floor that the
 * libraries' timer code is compared with. Only the raw drivers include it.
 */
#ifndef BENCH_RAW_TIMERS_H
#define BENCH_RAW_TIMERS_H

#include "../harness.h"

#include <stdlib.h>

struct raw_timers {
    uint64_t *due;  /* due[slot]: deadline in ns */
    uint32_t *heap; /* slot numbers, heap-ordered by due */
    uint32_t *pos;  /* pos[slot]: 1 + index in heap, 0 when not in it */
    size_t len;
    uint64_t now; /* cached once per dispatch, like the libraries do */
};

static inline int raw_timers_open(struct raw_timers *t, size_t n)
{
    t->due = calloc(n, sizeof *t->due);
    t->heap = calloc(n, sizeof *t->heap);
    t->pos = calloc(n, sizeof *t->pos);
    t->len = 0;
    t->now = bench_now_ns();
    return t->due && t->heap && t->pos ? 0 : -1;
}

static inline void raw_timers_close(struct raw_timers *t)
{
    free(t->due);
    free(t->heap);
    free(t->pos);
}

static inline void raw_timers_place(struct raw_timers *t, size_t k, uint32_t slot)
{
    t->heap[k] = slot;
    t->pos[slot] = (uint32_t)k + 1;
}

static inline void raw_timers_sift(struct raw_timers *t, size_t k)
{
    uint32_t slot = t->heap[k];
    uint64_t due = t->due[slot];
    while (k > 0 && t->due[t->heap[(k - 1) / 2]] > due) {
        raw_timers_place(t, k, t->heap[(k - 1) / 2]);
        k = (k - 1) / 2;
    }
    for (;;) {
        size_t c = 2 * k + 1;
        if (c >= t->len)
            break;
        if (c + 1 < t->len && t->due[t->heap[c + 1]] < t->due[t->heap[c]])
            c++;
        if (t->due[t->heap[c]] >= due)
            break;
        raw_timers_place(t, k, t->heap[c]);
        k = c;
    }
    raw_timers_place(t, k, slot);
}

/* Starts or restarts the timer of `slot` to fire `after_ns` from the cached time. */
static inline void raw_timers_set(struct raw_timers *t, uint32_t slot, uint64_t after_ns)
{
    t->due[slot] = t->now + after_ns;
    if (!t->pos[slot]) {
        t->heap[t->len] = slot;
        t->pos[slot] = (uint32_t)++t->len;
    }
    raw_timers_sift(t, t->pos[slot] - 1);
}

static inline void raw_timers_remove(struct raw_timers *t, uint32_t slot)
{
    if (!t->pos[slot])
        return;
    size_t k = t->pos[slot] - 1;
    t->pos[slot] = 0;
    if (k == --t->len)
        return;
    raw_timers_place(t, k, t->heap[t->len]);
    raw_timers_sift(t, k);
}

/* Fires every timer due at the cached time. */
static inline void raw_timers_expire(struct raw_timers *t)
{
    while (t->len && t->due[t->heap[0]] <= t->now) {
        uint32_t slot = t->heap[0];
        raw_timers_remove(t, slot);
        bench_timer_fired(slot);
    }
}

#endif
