/* SPDX-License-Identifier: MIT */
/* Timers: relative deadlines on the loop's monotonic clock, in a 4-ary heap (heap.h).
 *
 * mux_timer_again is the idle-timeout primitive, restarted at every read of every
 * connection. Lehmann measured libev's 2-3x advantage over libevent with timeouts
 * (docs/studies.md, study 2) from moving the deadline in one heap fix-up instead of a
 * removal and an insertion; iomux does less: a deadline that moves later is only recorded
 * (due_), and the timer keeps its earlier place in the heap, the technique libev's manual
 * recommends to its users, done inside the library. When that earlier place comes to the
 * top of the heap -- when the next wait's timeout is computed, or when it is found expired
 * -- the timer is moved to its real deadline, once, instead of at every restart. So the
 * wait never wakes for a deadline that moved, and a restart costs a few stores and a
 * comparison with the timer's children (its start sequence, the tie-break of equal
 * deadlines, grows: that can only move it down, and almost never does).
 */
#include <string.h>

#include "internal.h"

static int mux__timer_valid(const mux_timer_t *t)
{
    return t && t->h_.type == MUX__T_TIMER;
}

static uint64_t mux__sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

MUX_EXPORT int mux_timer_init(mux_timer_t *t, mux_timer_cb cb)
{
    if (!t || !cb)
        return -EINVAL;
    memset(t, 0, sizeof *t);
    t->h_.type = MUX__T_TIMER;
    t->cb_ = cb;
    return 0;
}

static int mux__timer_insert(struct mux__loop *loop, mux_timer_t *t, uint64_t at)
{
    int err = mux__reserve(loop);
    if (err == 0)
        err = mux__heap_reserve(&loop->timers, 1);
    if (err != 0)
        return err;
    t->hl_.seq = ++loop->seq;
    t->due_ = at;
    mux__heap_insert(&loop->timers, &t->hl_, at);
    mux__activate(loop, &t->h_);
    return 0;
}

MUX_EXPORT int mux_timer_start(mux_loop_t *pub, mux_timer_t *t, uint64_t after_ns,
                               uint64_t repeat_ns)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__timer_valid(t))
        return -EINVAL;
    if (t->h_.flags & MUX__W_ACTIVE)
        return -EBUSY;
    mux__unqueue(loop, &t->h_); /* an expiry gathered before the restart is void */
    t->repeat_ = repeat_ns;
    return mux__timer_insert(loop, t, mux__sat_add(mux__now(loop), after_ns));
}

MUX_EXPORT int mux_timer_stop(mux_loop_t *pub, mux_timer_t *t)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__timer_valid(t))
        return -EINVAL;
    mux__unqueue(loop, &t->h_);
    if (t->h_.flags & MUX__W_ACTIVE) {
        mux__heap_remove(&loop->timers, &t->hl_);
        mux__deactivate(loop, &t->h_);
    }
    return 0;
}

/* The rare parts of mux_timer_again, out of line so that its common path stays short. */
static __attribute__((noinline)) void mux__timer_move(struct mux__heap *h, mux_timer_t *t,
                                                      uint64_t at)
{
    mux__heap_update(h, &t->hl_, at);
}

static __attribute__((noinline)) void mux__timer_resift(struct mux__heap *h, uint32_t i)
{
    mux__heap_down(h, i);
}

/* Moves the deadline of the active timer `t` to `at`: later is only recorded (see the top),
 * earlier moves it in the heap now. Its start sequence is renewed as by a start. */
static inline void mux__timer_redue(struct mux__loop *loop, mux_timer_t *t, uint64_t at)
{
    struct mux__heap *h = &loop->timers;
    uint32_t i = t->hl_.index;
    t->hl_.seq = ++loop->seq;
    t->due_ = at;
    if (mux__unlikely(at < h->v[i].at))
        mux__timer_move(h, t, at); /* earlier (a shorter repeat): move it now */
    else if (4 * i + 1 < h->n)
        mux__timer_resift(h, i); /* later: only the tie-break moved (see the top); a leaf,
                                    three nodes in four, has nothing to compare with */
}

/* Makes `t` due at `at`, started if inactive; an expiry gathered but not yet dispatched is
 * void (the deadline moved). 0 or -ENOMEM. */
static int mux__timer_reset(struct mux__loop *loop, mux_timer_t *t, uint64_t at)
{
    mux__unqueue(loop, &t->h_);
    if (!(t->h_.flags & MUX__W_ACTIVE))
        return mux__timer_insert(loop, t, at);
    mux__timer_redue(loop, t, at);
    return 0;
}

int mux__timer_set(struct mux__loop *loop, mux_timer_t *t, uint64_t at)
{
    t->repeat_ = 0;
    return mux__timer_reset(loop, t, at);
}

MUX_EXPORT int mux_timer_again(mux_loop_t *pub, mux_timer_t *t)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__timer_valid(t))
        return -EINVAL;
    if (!t->repeat_)
        return mux_timer_stop(pub, t);
    /* The classic case: an io callback pushes its idle timeout back. */
    return mux__timer_reset(loop, t, mux__sat_add(mux__now(loop), t->repeat_));
}

/* Moves the timers at the top of the heap whose deadline moved later (mux_timer_again) to
 * their real deadline, until the top is a real one. */
static void mux__timers_settle(struct mux__heap *h)
{
    while (h->n) {
        mux_timer_t *t = mux__container_of(h->v[0].link, mux_timer_t, hl_);
        if (mux__likely(t->due_ == h->v[0].at))
            return;
        mux__heap_update(h, &t->hl_, t->due_);
    }
}

MUX_EXPORT int mux_timer_set_repeat(mux_timer_t *t, uint64_t repeat_ns)
{
    if (!mux__timer_valid(t))
        return -EINVAL;
    t->repeat_ = repeat_ns;
    return 0;
}

MUX_EXPORT int64_t mux_timer_remaining(const mux_loop_t *pub, const mux_timer_t *t)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__timer_valid(t) || !(t->h_.flags & MUX__W_ACTIVE))
        return -EINVAL;
    uint64_t at = t->due_;
    uint64_t now = mux__now(loop), left = at > now ? at - now : 0;
    return left > INT64_MAX ? INT64_MAX : (int64_t)left;
}

MUX_EXPORT int mux_timer_is_active(const mux_timer_t *t)
{
    return mux__timer_valid(t) ? (t->h_.flags & MUX__W_ACTIVE) != 0 : -EINVAL;
}

/* The settling, out of line: most waits find the top settled and need none of it. */
static __attribute__((noinline)) void mux__timers_settle_cold(struct mux__heap *h)
{
    mux__timers_settle(h);
}

int64_t mux__timers_timeout(struct mux__loop *loop)
{
    struct mux__heap *h = &loop->timers;
    if (h->n == 0)
        return -1;
    /* settle's own first test, inline; settling moves timers, never removes one */
    if (mux__unlikely(mux__container_of(h->v[0].link, mux_timer_t, hl_)->due_ != h->v[0].at))
        mux__timers_settle_cold(h);
    uint64_t at = h->v[0].at, now = mux__now(loop);
    if (at <= now)
        return 0;
    uint64_t d = at - now;
    return d > INT64_MAX ? INT64_MAX : (int64_t)d;
}

void mux__timers_expire(struct mux__loop *loop)
{
    struct mux__heap *h = &loop->timers;
    uint64_t now = mux__now(loop);
    while (h->n && h->v[0].at <= now) {
        mux_timer_t *t = mux__container_of(h->v[0].link, mux_timer_t, hl_);
        if (t->due_ != h->v[0].at) {
            mux__heap_update(h, &t->hl_, t->due_); /* its deadline moved: not due yet */
            continue;
        }
        if (t->repeat_) {
            /* Keep the cadence; after a stall, skip the missed periods. */
            uint64_t at = mux__sat_add(h->v[0].at, t->repeat_);
            if (at <= now)
                at = mux__sat_add(now, t->repeat_);
            t->due_ = at;
            mux__heap_update(h, &t->hl_, at);
        } else {
            mux__heap_remove(h, &t->hl_);
            mux__deactivate(loop, &t->h_);
        }
        mux__queue(loop, &t->h_, 0);
    }
}
