/* SPDX-License-Identifier: MIT */
/* Signal watchers, and the process-wide registry behind them, on every system. How a signal
 * is caught is the system's: sigaction on POSIX (signal_posix.c), the console's control
 * events on Windows (signal_win.c); either calls mux__sig_deliver when one arrives.
 *
 * A signal is process-wide but watchers live in loops, possibly several loops in several
 * threads, and all of them must hear of it. One handler serves every watched signal: it
 * bumps a per-signal delivery count and wakes every loop that watches the signal through
 * its backend's wake entry (which is async-signal-safe). Each loop remembers the count it last saw,
 * so deliveries are never lost, and those that arrive together are coalesced into one callback.
 *
 * The handler may run in any thread at any moment, so the registry it reads is a fixed
 * array of slots with atomic fields. A loop leaving its slot (or changing its wake-up
 * descriptor, after a fork) clears the slot's loop and then waits for the slot's in-handler
 * count to drop to zero before closing anything, so a handler never writes to a descriptor
 * that was closed (or reused) under it.
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "backend/backend.h"
#include "internal.h"

#define MUX__SIG_SLOTS 64

struct mux__sig_slot {
    struct mux__loop *loop;  /* atomic: the loop to wake, or NULL */
    int users;               /* atomic: handlers inside this slot right now */
    uint64_t mask;           /* atomic: signals the loop watches, bit signum - 1 */
    struct mux__loop *owner; /* under mux__sig_lock */
};

static struct mux__sig_slot mux__sig_slots[MUX__SIG_SLOTS];
static unsigned mux__sig_counts[MUX__NSIG]; /* atomic */
static pthread_mutex_t mux__sig_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned mux__sig_installed[MUX__NSIG]; /* loops watching, per signal */

int mux__sig_watched(int signum)
{
    return __atomic_load_n(&mux__sig_installed[signum], __ATOMIC_SEQ_CST) != 0;
}

void mux__sig_deliver(int signum)
{
    int saved = errno;
    uint64_t bit = 1ull << (signum - 1);
    __atomic_fetch_add(&mux__sig_counts[signum], 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < MUX__SIG_SLOTS; i++) {
        struct mux__sig_slot *s = &mux__sig_slots[i];
        if (!(__atomic_load_n(&s->mask, __ATOMIC_SEQ_CST) & bit))
            continue;
        __atomic_fetch_add(&s->users, 1, __ATOMIC_SEQ_CST);
        struct mux__loop *loop = __atomic_load_n(&s->loop, __ATOMIC_SEQ_CST);
        if (loop)
            (void)loop->backend->wake(loop); /* nothing to tell from inside a handler */
        __atomic_fetch_sub(&s->users, 1, __ATOMIC_SEQ_CST);
    }
    errno = saved;
}

static void mux__sig_slot_publish(struct mux__sig_slot *s, struct mux__loop *loop)
{
    __atomic_store_n(&s->loop, loop, __ATOMIC_SEQ_CST);
    while (!loop && __atomic_load_n(&s->users, __ATOMIC_SEQ_CST) != 0)
        sched_yield(); /* a handler in another thread is finishing its wake-up */
}

/* Called with the lock held. */
static int mux__sig_slot_take(struct mux__loop *loop)
{
    if (loop->sig_slot >= 0)
        return 0;
    for (int i = 0; i < MUX__SIG_SLOTS; i++) {
        struct mux__sig_slot *s = &mux__sig_slots[i];
        if (s->owner)
            continue;
        s->owner = loop;
        __atomic_store_n(&s->mask, 0, __ATOMIC_SEQ_CST);
        mux__sig_slot_publish(s, loop);
        loop->sig_slot = i;
        return 0;
    }
    return -ENOSPC;
}

/* Called with the lock held. */
static void mux__sig_slot_release(struct mux__loop *loop)
{
    if (loop->sig_slot < 0)
        return;
    struct mux__sig_slot *s = &mux__sig_slots[loop->sig_slot];
    __atomic_store_n(&s->mask, 0, __ATOMIC_SEQ_CST);
    mux__sig_slot_publish(s, NULL);
    s->owner = NULL;
    loop->sig_slot = -1;
}

int mux__sig_attach(struct mux__loop *loop, int signum)
{
    if (loop->sig_refs[signum]++ > 0)
        return 0;
    uint64_t bit = 1ull << (signum - 1);
    pthread_mutex_lock(&mux__sig_lock);
    int err = mux__sig_slot_take(loop);
    if (err == 0 && mux__sig_installed[signum] == 0)
        err = mux__sig_catch(signum);
    if (err == 0) {
        __atomic_fetch_add(&mux__sig_installed[signum], 1, __ATOMIC_SEQ_CST);
        /* Count first, then listen: a delivery from now on is seen as a change. */
        loop->sig_seen[signum] = __atomic_load_n(&mux__sig_counts[signum], __ATOMIC_SEQ_CST);
        loop->sig_mask |= bit;
        __atomic_fetch_or(&mux__sig_slots[loop->sig_slot].mask, bit, __ATOMIC_SEQ_CST);
    } else {
        loop->sig_refs[signum]--;
        if (loop->sig_mask == 0)
            mux__sig_slot_release(loop);
    }
    pthread_mutex_unlock(&mux__sig_lock);
    return err;
}

void mux__sig_detach(struct mux__loop *loop, int signum)
{
    if (--loop->sig_refs[signum] > 0)
        return;
    uint64_t bit = 1ull << (signum - 1);
    pthread_mutex_lock(&mux__sig_lock);
    loop->sig_mask &= ~bit;
    __atomic_fetch_and(&mux__sig_slots[loop->sig_slot].mask, ~bit, __ATOMIC_SEQ_CST);
    if (__atomic_sub_fetch(&mux__sig_installed[signum], 1, __ATOMIC_SEQ_CST) == 0)
        mux__sig_release(signum);
    if (loop->sig_mask == 0)
        mux__sig_slot_release(loop);
    pthread_mutex_unlock(&mux__sig_lock);
}

void mux__sig_poll(struct mux__loop *loop)
{
    for (uint64_t m = loop->sig_mask; m; m &= m - 1) {
        int signum = __builtin_ctzll(m) + 1;
        unsigned c = __atomic_load_n(&mux__sig_counts[signum], __ATOMIC_SEQ_CST);
        if (c == loop->sig_seen[signum])
            continue;
        loop->sig_seen[signum] = c;
        if (signum == MUX__SIGCHLD && loop->nchildren)
            loop->recheck = 1;
        for (mux_signal_t *w = loop->sig_head[signum]; w; w = w->next_)
            mux__queue(loop, &w->h_, 0);
    }
}

void mux__sig_loop_quiesce(struct mux__loop *loop)
{
    if (loop->sig_slot >= 0)
        mux__sig_slot_publish(&mux__sig_slots[loop->sig_slot], NULL);
}

void mux__sig_loop_fork(struct mux__loop *loop)
{
    if (loop->sig_slot >= 0)
        mux__sig_slot_publish(&mux__sig_slots[loop->sig_slot], loop);
}

void mux__sig_loop_close(struct mux__loop *loop)
{
    pthread_mutex_lock(&mux__sig_lock);
    mux__sig_slot_release(loop);
    pthread_mutex_unlock(&mux__sig_lock);
}

void mux__sig_atfork_child(void)
{
    /* Another thread of the parent may have held it; the child has only this thread. */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&mux__sig_lock, &fresh, sizeof fresh);
    /* Handlers that were running in other threads at the fork do not exist here; their
     * count would make a slot's release wait forever. */
    for (int i = 0; i < MUX__SIG_SLOTS; i++)
        __atomic_store_n(&mux__sig_slots[i].users, 0, __ATOMIC_SEQ_CST);
}

/* ---- public ------------------------------------------------------------------------ */

MUX_EXPORT int mux_signal_init(mux_signal_t *w, mux_signal_cb cb, int signum)
{
    if (!w || !cb || signum <= 0 || signum >= MUX__NSIG || !mux__sig_valid(signum))
        return -EINVAL;
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_SIGNAL;
    w->cb_ = cb;
    w->signum_ = signum;
    return 0;
}

static int mux__signal_valid(const mux_signal_t *w)
{
    return w && w->h_.type == MUX__T_SIGNAL;
}

MUX_EXPORT int mux_signal_start(mux_loop_t *pub, mux_signal_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__signal_valid(w))
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        return -EBUSY;
    int err = mux__sig_deliverable(w->signum_);
    if (err == 0)
        err = mux__reserve(loop);
    if (err == 0)
        err = mux__sig_attach(loop, w->signum_);
    if (err != 0)
        return err;
    mux_signal_t **pp = &loop->sig_head[w->signum_]; /* append: called in start order */
    while (*pp)
        pp = &(*pp)->next_;
    *pp = w;
    w->next_ = NULL;
    mux__activate(loop, &w->h_);
    return 0;
}

MUX_EXPORT int mux_signal_stop(mux_loop_t *pub, mux_signal_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__signal_valid(w))
        return -EINVAL;
    mux__unqueue(loop, &w->h_);
    if (!(w->h_.flags & MUX__W_ACTIVE))
        return 0;
    mux_signal_t **pp = &loop->sig_head[w->signum_];
    while (*pp != w)
        pp = &(*pp)->next_;
    *pp = w->next_;
    w->next_ = NULL;
    mux__deactivate(loop, &w->h_);
    mux__sig_detach(loop, w->signum_);
    return 0;
}
