/* SPDX-License-Identifier: MIT */
/* Channels: a bounded multi-producer, single-consumer queue into one loop.
 *
 * The ring is an array of slots, each with a sequence number that says whose turn the slot
 * is (the shape of Vyukov's bounded queue): slot i starts at sequence i. A sender reads the
 * tail position p; the slot p & mask is free for it when its sequence is p, and the sender
 * claims it by moving the tail from p to p + 1 with a compare-and-swap, writes the message
 * and stores p + 1 into the sequence: published. A sequence below p means the slot still
 * holds the message of the previous lap (or one claimed and not yet published): the channel
 * is full. The loop takes slot h & mask when its sequence is h + 1, copies the message out
 * and stores h + capacity, which frees the slot for the sender of the next lap. Positions are
 * 64-bit and never wrap. Senders contend only on the tail; the loop touches no shared word
 * but the slots.
 *
 * Waking the loop costs one check per message and one wake-up per burst. wake_ says that the
 * loop has been woken and has not begun to take messages yet; a sender that publishes and
 * finds it set has nothing to do, because the loop clears it before it looks at the slots.
 * Both sides use sequentially consistent operations for the two words (publish, then read
 * wake_; clear wake_, then read the sequence), so at least one of them sees the other: the
 * loop finds the message, or the sender wakes the loop. A slot claimed but not yet published
 * when the loop looks is left for the wake-up its sender makes after publishing.
 *
 * Closing must not free the slots, or stop the async, under a sender that is still inside a
 * call. users_ counts the senders inside a call, with MUX__CHAN_CLOSED as its top bit: a
 * sender adds one on entry and finds out at once whether the channel is closed; close sets
 * the bit and waits (yielding) until the count drops to zero, which takes as long as the
 * rest of a send: a few atomic operations and a wake-up. The count lives in the caller's
 * struct, not in the slots, so that a late sender finds the bit after the slots are gone.
 *
 * The wake-up is an async watcher of the loop, part of the channel (not reported by the
 * walk, not counted: the channel counts once). Messages are taken from its callback, at
 * most a capacity's worth per call; a channel that stays full after that wakes its loop
 * again, so other work gets its turn between bursts. io_uring's IORING_OP_MSG_RING could
 * post the wake-up straight into the receiving ring without the eventfd write, but only
 * from a sender that is itself an io_uring loop, and the wake-up is already once per burst:
 * docs/chan.md says what it would save.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "stream/listener.h"
#include "stream/stream.h"

#define MUX__CHAN_CLOSED 0x80000000u /* users_: no new call gets in */
#define MUX__CHAN_DONE   0x40000000u /* users_: the close has finished */
#define MUX__CHAN_COUNT  0x3fffffffu /* users_: calls inside */

enum {
    MUX__MSG_ACCEPTED = 0x1, /* the socket came from a listener: set up as the library's are */
    MUX__MSG_UNIX = 0x2,     /* ... and it is a Unix-domain socket */
};

struct mux__chan_slot {
    uint64_t seq; /* atomic: whose turn the slot is (see above) */
    mux_msg_t msg;
};

/* Allocated at open, cache-line aligned: the loop's own position on a line of its own, so
 * that taking a message does not disturb the senders' line (the tail, in the caller's
 * struct), then the waiters for room, then the slots. */
struct mux__chan_ring {
    _Alignas(64) uint64_t head; /* the next slot the loop takes (its thread only) */
    _Alignas(64) mux_async_t *room[MUX_CHAN_ROOM_WAITERS]; /* atomic: waiting for room */
    _Alignas(64) struct mux__chan_slot slot[];
};

/* Open and not closed. */
static int mux__chan_walkable(const void *h)
{
    const mux_chan_t *c = h;
    return c && c->ring_ && !(__atomic_load_n(&c->users_, __ATOMIC_SEQ_CST) & MUX__CHAN_CLOSED);
}

/* A loop's open channels, for the walk. */
static const struct mux__handles_type mux__chan_type = {
    .kind = MUX_HANDLE_CHAN,
    .link_off = offsetof(mux_chan_t, link_),
    .flags_off = offsetof(mux_chan_t, flags_),
    .size = sizeof(struct mux__handles),
    .walkable = mux__chan_walkable,
};

/* ---- senders: any thread ------------------------------------------------------------- */

/* Enters a call from a sender: 0 while the channel is open, -EPIPE once it is closed,
 * -EINVAL for a channel never opened. Pair every 0 with mux__chan_leave. */
static int mux__chan_enter(mux_chan_t *c)
{
    uint32_t u = __atomic_add_fetch(&c->users_, 1, __ATOMIC_SEQ_CST);
    if (mux__likely(!(u & MUX__CHAN_CLOSED) && c->ring_))
        return 0;
    __atomic_sub_fetch(&c->users_, 1, __ATOMIC_SEQ_CST);
    return (u & MUX__CHAN_CLOSED) ? -EPIPE : -EINVAL;
}

static void mux__chan_leave(mux_chan_t *c)
{
    __atomic_sub_fetch(&c->users_, 1, __ATOMIC_SEQ_CST);
}

/* Wakes the loop unless it is woken already (once per burst). */
static int mux__chan_wake(mux_chan_t *c)
{
    if (__atomic_load_n(&c->wake_, __ATOMIC_SEQ_CST) ||
        __atomic_exchange_n(&c->wake_, 1, __ATOMIC_SEQ_CST))
        return 0;
    return mux_async_send(&c->async_);
}

/* Claims a slot and publishes `msg` in it: 0 or -EAGAIN (full). */
static int mux__chan_push(mux_chan_t *c, const mux_msg_t *msg, uint32_t flags)
{
    struct mux__chan_ring *r = c->ring_;
    uint64_t pos = __atomic_load_n(&c->tail_, __ATOMIC_RELAXED);
    struct mux__chan_slot *s;
    for (;;) {
        s = &r->slot[pos & c->mask_];
        uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (__atomic_compare_exchange_n(&c->tail_, &pos, pos + 1, 1, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                break;
            /* pos now holds the tail another sender moved it to */
        } else if (diff < 0) {
            return -EAGAIN; /* the previous lap's message is still there */
        } else {
            pos = __atomic_load_n(&c->tail_, __ATOMIC_RELAXED); /* overtaken: catch up */
        }
    }
    s->msg = *msg;
    s->msg.flags_ = flags;
    __atomic_store_n(&s->seq, pos + 1, __ATOMIC_SEQ_CST); /* published; then read wake_ */
    return 0;
}

static int mux__chan_send(mux_chan_t *c, const mux_msg_t *msg, uint32_t flags)
{
    int err = mux__chan_enter(c);
    if (err != 0)
        return err;
    err = mux__chan_push(c, msg, flags);
    if (err == 0)
        err = mux__chan_wake(c);
    mux__chan_leave(c);
    return err;
}

MUX_EXPORT int mux_chan_send(mux_chan_t *c, const mux_msg_t *msg)
{
    if (!c || !msg)
        return -EINVAL;
    return mux__chan_send(c, msg, 0);
}

MUX_EXPORT int mux_chan_send_socket(mux_chan_t *c, const mux_listener_t *from, mux_os_sock_t sock,
                                    void *ptr)
{
    if (!c || sock == MUX_OS_SOCK_INVALID || !mux__listener_valid(from))
        return -EINVAL;
    mux_msg_t msg = {.ptr = ptr, .value = 0, .sock = sock};
    uint32_t flags = MUX__MSG_ACCEPTED | (mux__listener_is_unix(from) ? MUX__MSG_UNIX : 0);
    return mux__chan_send(c, &msg, flags);
}

MUX_EXPORT int mux_chan_notify_room(mux_chan_t *c, mux_async_t *a)
{
    if (!c || !a || a->h_.type != MUX__T_ASYNC)
        return -EINVAL;
    int err = mux__chan_enter(c);
    if (err != 0)
        return err;
    struct mux__chan_ring *r = c->ring_;
    err = -EBUSY;
    for (int i = 0; i < MUX_CHAN_ROOM_WAITERS && err != 0; i++)
        if (__atomic_load_n(&r->room[i], __ATOMIC_SEQ_CST) == a)
            err = 0; /* waiting already */
    for (int i = 0; i < MUX_CHAN_ROOM_WAITERS && err != 0; i++) {
        mux_async_t *none = NULL;
        if (__atomic_compare_exchange_n(&r->room[i], &none, a, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            /* Counted after the slot is set: the loop that sees the count finds the slot, and
             * a loop that freed a slot before reading a zero count is seen by the send the
             * caller tries next. */
            __atomic_add_fetch(&c->nroom_, 1, __ATOMIC_SEQ_CST);
            err = 0;
        }
    }
    mux__chan_leave(c);
    return err;
}

MUX_EXPORT int mux_chan_cancel_room(mux_chan_t *c, mux_async_t *a)
{
    if (!c || !a)
        return -EINVAL;
    int err = mux__chan_enter(c);
    if (err == -EPIPE) { /* a close may be sending the waiting asyncs: let it finish */
        while (!(__atomic_load_n(&c->users_, __ATOMIC_SEQ_CST) & MUX__CHAN_DONE))
            sched_yield();
        return 0;
    }
    if (err != 0)
        return err;
    struct mux__chan_ring *r = c->ring_;
    int found = 0;
    for (int i = 0; i < MUX_CHAN_ROOM_WAITERS && !found; i++) {
        mux_async_t *want = a;
        if (__atomic_compare_exchange_n(&r->room[i], &want, NULL, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            __atomic_sub_fetch(&c->nroom_, 1, __ATOMIC_SEQ_CST);
            found = 1;
        }
    }
    /* Not in a slot: never waiting, or the loop took it out, and then it counted itself in
     * firing_ before it did: once that is zero, its send is over. */
    while (!found && __atomic_load_n(&c->firing_, __ATOMIC_SEQ_CST) != 0)
        sched_yield();
    mux__chan_leave(c);
    return 0;
}

/* ---- the loop's side ----------------------------------------------------------------- */

/* Sends every async waiting for room; `all`: whatever the count says (closing). firing_
 * tells mux_chan_cancel_room that an async taken out of its slot may be being sent. */
static void mux__chan_room(mux_chan_t *c, int all)
{
    if (!all && __atomic_load_n(&c->nroom_, __ATOMIC_SEQ_CST) == 0)
        return;
    struct mux__chan_ring *r = c->ring_;
    __atomic_add_fetch(&c->firing_, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < MUX_CHAN_ROOM_WAITERS; i++) {
        mux_async_t *a = __atomic_exchange_n(&r->room[i], NULL, __ATOMIC_SEQ_CST);
        if (a) {
            __atomic_sub_fetch(&c->nroom_, 1, __ATOMIC_SEQ_CST);
            (void)mux_async_send(a); /* its loop's failure to wake is its own to report */
        }
    }
    __atomic_sub_fetch(&c->firing_, 1, __ATOMIC_SEQ_CST);
}

/* Takes the next published message into `out`: 1, or 0 when there is none. */
static int mux__chan_pop(mux_chan_t *c, mux_msg_t *out)
{
    struct mux__chan_ring *r = c->ring_;
    struct mux__chan_slot *s = &r->slot[r->head & c->mask_];
    if (__atomic_load_n(&s->seq, __ATOMIC_SEQ_CST) != r->head + 1)
        return 0; /* empty, or claimed and not yet published: its sender wakes us */
    *out = s->msg;
    __atomic_store_n(&s->seq, r->head + c->mask_ + 1, __ATOMIC_SEQ_CST); /* the next lap's */
    r->head++;
    return 1;
}

/* Hands one message to the callback, and closes a socket it left in it. 1 when the callback
 * closed the channel (whose memory may be gone). */
static int mux__chan_deliver(mux_chan_t *c, mux_msg_t *m, int status)
{
    int gone = 0;
    c->gone_ = &gone;
    c->cb_(c, m, status);
    if (!gone)
        c->gone_ = NULL;
    if (m->sock != MUX_OS_SOCK_INVALID)
        mux__sock_close(m->sock);
    return gone;
}

static void mux__chan_ready(mux_loop_t *pub, mux_async_t *a)
{
    mux_chan_t *c = mux__container_of(a, mux_chan_t, async_);
    (void)pub;
    __atomic_store_n(&c->wake_, 0, __ATOMIC_SEQ_CST); /* before the slots are read */
    uint32_t n = 0;
    mux_msg_t m;
    for (; n <= c->mask_ && mux__chan_pop(c, &m); n++)
        if (mux__chan_deliver(c, &m, 0))
            return;
    if (n > c->mask_) { /* a whole capacity taken: let other work run, then go on */
        __atomic_store_n(&c->wake_, 1, __ATOMIC_SEQ_CST);
        (void)mux_async_send(&c->async_);
    }
    if (n > 0)
        mux__chan_room(c, 0);
}

MUX_EXPORT int mux_chan_open(mux_loop_t *pub, mux_chan_t *c, uint32_t capacity, mux_chan_cb cb)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !c || !cb || capacity == 0 || capacity > MUX_CHAN_MAX)
        return -EINVAL;
    uint32_t cap = 1;
    while (cap < capacity)
        cap <<= 1;
    int err = mux__reserve(loop);
    if (err != 0)
        return err;
    struct mux__handles *chans = mux__handles_get(loop, &mux__chan_type);
    if (!chans)
        return -ENOMEM;
    size_t size = sizeof(struct mux__chan_ring) + (size_t)cap * sizeof(struct mux__chan_slot);
    struct mux__chan_ring *r = mux__aligned_alloc(64, size);
    if (!r)
        return -ENOMEM;
    memset(r, 0, size);
    for (uint32_t i = 0; i < cap; i++)
        r->slot[i].seq = i;
    void *data = c->data;
    memset(c, 0, sizeof *c);
    c->data = data;
    c->loop_ = loop;
    c->cb_ = cb;
    c->mask_ = cap - 1;
    c->ring_ = r;
    mux_async_init(&c->async_, mux__chan_ready);
    c->async_.h_.flags |= MUX__W_NOREF; /* a part of the channel, which counts once */
    err = mux_async_start(pub, &c->async_);
    if (err != 0) {
        mux__aligned_free(r);
        c->ring_ = NULL;
        return err;
    }
    mux__handle_open(loop, chans, &c->link_, &c->flags_);
    /* Published for senders in other threads by whatever hands them `c` (a thread's start,
     * a lock): nothing here is read by a sender before that. */
    return 0;
}


MUX_EXPORT int mux_chan_stream_open(mux_chan_t *c, mux_stream_t *s, mux_msg_t *msg)
{
    if (!mux__chan_walkable(c) || !s || !msg || msg->sock == MUX_OS_SOCK_INVALID)
        return -EINVAL;
    int err;
    if (msg->flags_ & MUX__MSG_ACCEPTED)
        err = mux__stream_open_set_up(c->loop_, s, msg->sock, (msg->flags_ & MUX__MSG_UNIX) != 0);
    else
        err = mux_stream_open(c->loop_->pub, s, msg->sock);
    if (err == 0)
        msg->sock = MUX_OS_SOCK_INVALID;
    return err;
}

MUX_EXPORT int mux_chan_close(mux_chan_t *c)
{
    if (!mux__chan_walkable(c))
        return -EINVAL;
    struct mux__loop *loop = c->loop_;
    __atomic_or_fetch(&c->users_, MUX__CHAN_CLOSED, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&c->users_, __ATOMIC_SEQ_CST) & MUX__CHAN_COUNT)
        sched_yield(); /* a sender is finishing its call */
    mux_async_stop(loop->pub, &c->async_);
    mux__handle_close(loop, &c->link_, &c->flags_);
    if (c->gone_) /* closed from the callback: the delivery loop must not touch c again */
        *c->gone_ = 1;
    c->gone_ = NULL;
    /* Every send has ended, so every claimed slot is published. */
    mux_msg_t m;
    while (mux__chan_pop(c, &m)) {
        c->cb_(c, &m, -ECANCELED);
        if (m.sock != MUX_OS_SOCK_INVALID)
            mux__sock_close(m.sock);
    }
    mux__chan_room(c, 1);
    mux__aligned_free(c->ring_);
    c->ring_ = NULL;
    c->loop_ = NULL;
    __atomic_or_fetch(&c->users_, MUX__CHAN_DONE, __ATOMIC_SEQ_CST);
    return 0;
}

MUX_EXPORT mux_loop_t *mux_chan_loop(const mux_chan_t *c)
{
    return mux__chan_walkable(c) ? c->loop_->pub : NULL;
}
