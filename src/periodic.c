/* SPDX-License-Identifier: MIT */
/* Periodic watchers: deadlines on the wall clock (CLOCK_REALTIME), in their own heap.
 *
 * The wall clock can jump (settimeofday, a VM resumed, NTP stepping). A periodic keeps its
 * meaning across a jump -- "on every full hour" stays on the full hour -- by being
 * rescheduled from its offset and interval whenever the loop sees the clock move by more
 * than it could have drifted: through a timerfd that the kernel cancels on every clock set
 * (Linux), and by comparing the wall clock with the monotonic clock on each iteration.
 * Waits are capped at MUX__PERIODIC_MAX_WAIT so that a jump is noticed even without help.
 */
#include <string.h>

#include "internal.h"

#define MUX__PERIODIC_MAX_WAIT 60000000000ll /* ns */

static int mux__periodic_valid(const mux_periodic_t *p)
{
    return p && p->h_.type == MUX__T_PERIODIC;
}

/* The first offset + k * interval after `wall`, or the offset of a one-shot. A time past
 * what int64_t holds (a huge interval) is INT64_MAX: never, in practice. */
static uint64_t mux__periodic_next(const mux_periodic_t *p, int64_t wall)
{
    if (!p->interval_)
        return (uint64_t)p->offset_;
    int64_t iv = (int64_t)p->interval_, d = wall - p->offset_, step, at;
    int64_t k = d >= 0 ? d / iv + 1 : -((-d) / iv) + ((-d) % iv == 0 ? 1 : 0);
    if (__builtin_mul_overflow(k, iv, &step) || __builtin_add_overflow(p->offset_, step, &at))
        return INT64_MAX;
    return at < 0 ? 0 : (uint64_t)at;
}

MUX_EXPORT int mux_periodic_init(mux_periodic_t *p, mux_periodic_cb cb)
{
    if (!p || !cb)
        return -EINVAL;
    memset(p, 0, sizeof *p);
    p->h_.type = MUX__T_PERIODIC;
    p->cb_ = cb;
    return 0;
}

MUX_EXPORT int mux_periodic_start(mux_loop_t *pub, mux_periodic_t *p, int64_t offset_ns,
                                  uint64_t interval_ns)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__periodic_valid(p) || offset_ns < 0 || interval_ns > INT64_MAX)
        return -EINVAL;
    if (p->h_.flags & MUX__W_ACTIVE)
        return -EBUSY;
    mux__unqueue(loop, &p->h_); /* a firing gathered before the restart is void */
    int err = mux__reserve(loop);
    if (err == 0)
        err = mux__heap_reserve(&loop->periodics, 1);
    if (err != 0)
        return err;
    mux__clock_watch(loop);
    if (loop->periodics.n == 0) {
        loop->wall_minus_mono = mux__wall_ns() - (int64_t)mux__mono_ns();
        loop->clock_jumped = 0;
    }
    p->offset_ = offset_ns;
    p->interval_ = interval_ns;
    p->hl_.seq = ++loop->seq;
    mux__heap_insert(&loop->periodics, &p->hl_, mux__periodic_next(p, mux__wall_ns()));
    mux__activate(loop, &p->h_);
    return 0;
}

MUX_EXPORT int mux_periodic_stop(mux_loop_t *pub, mux_periodic_t *p)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__periodic_valid(p))
        return -EINVAL;
    mux__unqueue(loop, &p->h_);
    if (p->h_.flags & MUX__W_ACTIVE) {
        mux__heap_remove(&loop->periodics, &p->hl_);
        mux__deactivate(loop, &p->h_);
    }
    return 0;
}

MUX_EXPORT int64_t mux_periodic_at(const mux_loop_t *pub, const mux_periodic_t *p)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__periodic_valid(p) || !(p->h_.flags & MUX__W_ACTIVE))
        return -EINVAL;
    return (int64_t)mux__heap_at(&loop->periodics, &p->hl_);
}

/* Reschedules every periodic if the wall clock moved against the monotonic one by more
 * than 1 ms since the last look, or the kernel said it was set. Slewing can cross that
 * line over a long wait too; rescheduling then is harmless, as it recomputes the same
 * times from offset and interval. */
static void mux__periodics_clock_check(struct mux__loop *loop, int64_t wall)
{
    uint64_t mono = mux__mono_ns();
    int64_t diff = wall - (int64_t)mono, drift = diff - loop->wall_minus_mono;
    if (drift < 0)
        drift = -drift;
    loop->wall_minus_mono = diff;
    if (drift <= 1000000 && !loop->clock_jumped)
        return;
    loop->clock_jumped = 0;
    struct mux__heap *h = &loop->periodics;
    for (uint32_t i = 0; i < h->n; i++) {
        mux_periodic_t *p = mux__container_of(h->v[i].link, mux_periodic_t, hl_);
        h->v[i].at = mux__periodic_next(p, wall);
    }
    mux__heap_rebuild(h);
}

int64_t mux__periodics_timeout(struct mux__loop *loop)
{
    if (loop->periodics.n == 0)
        return -1;
    int64_t wall = mux__wall_ns();
    mux__periodics_clock_check(loop, wall);
    int64_t d = (int64_t)loop->periodics.v[0].at - wall;
    if (d < 0)
        return 0;
    return d > MUX__PERIODIC_MAX_WAIT ? MUX__PERIODIC_MAX_WAIT : d;
}

void mux__periodics_expire(struct mux__loop *loop)
{
    struct mux__heap *h = &loop->periodics;
    int64_t wall = mux__wall_ns();
    mux__periodics_clock_check(loop, wall);
    while (h->n && (int64_t)h->v[0].at <= wall) {
        mux_periodic_t *p = mux__container_of(h->v[0].link, mux_periodic_t, hl_);
        if (p->interval_) {
            mux__heap_update(h, &p->hl_, mux__periodic_next(p, wall));
        } else {
            mux__heap_remove(h, &p->hl_);
            mux__deactivate(loop, &p->h_);
        }
        mux__queue(loop, &p->h_, 0);
    }
}
