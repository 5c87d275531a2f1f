/* SPDX-License-Identifier: MIT */
/* libiomux-event: events. An event is one iomux watcher (io for EV_READ/EV_WRITE, signal for
 * EV_SIGNAL) plus a timer for its timeout. The watchers' callbacks do not call the program:
 * they put the event on its priority's active queue, which event_base_loop (base.c) runs the
 * way libevent does. A persistent event's timer repeats with its timeout and is restarted
 * with mux_timer_again on every activation, which costs no heap operation when the deadline
 * moves later -- libevent's own idiom for idle timeouts, at libev's price. */
#include "event_internal.h"
#include "sys.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#define EVX_IO_EVENTS    (EV_READ | EV_WRITE | EV_CLOSED)
#define mux__unlikely(x) __builtin_expect(!!(x), 0)

static void *self_cbarg_token = &self_cbarg_token;

/* EV_CLOSED is the watcher's MUX_RDHUP where the backend reports the peer's hang-up
 * (EV_FEATURE_EARLY_CLOSE); on the others it needs the fd's readability, and a read-ready
 * fd is peeked at (closed_or_not). A NULL base: readiness only. EV_ET asks for an edge only
 * where the backend has a real one (libevent's EV_FEATURE_ET): on the others an EV_ET event
 * is level-triggered, as libevent's poll backend makes it. */
static unsigned mux_events_of(short events, const struct event_base *base)
{
    int edge = (events & EV_ET) && base && (base->features & EV_FEATURE_ET);
    int rdhup = (events & EV_CLOSED) && base && (base->features & EV_FEATURE_EARLY_CLOSE);
    return (events & EV_READ || (events & EV_CLOSED && !rdhup) ? MUX_READ : 0) |
           (events & EV_WRITE ? MUX_WRITE : 0) | (rdhup ? MUX_RDHUP : 0) | (edge ? MUX_EDGE : 0);
}

/* ---- the active queues ---- */

void evx_activate(struct event *ev, short res)
{
    struct event_base *base = ev->ev_base;
    if (ev->ev_flags & EVLIST_ACTIVE) {
        ev->ev_res |= res;
        return;
    }
    if (ev->ev_pri < base->running_pri) /* more urgent than what runs: run it first */
        base->docontinue = 1;
    struct evx_queue *q = &base->active[ev->ev_pri];
    ev->ev_res = res;
    ev->ev_flags |= EVLIST_ACTIVE;
    ev->ev_active_next_ = NULL;
    ev->ev_active_prev_ = q->tail;
    if (q->tail)
        q->tail->ev_active_next_ = ev;
    else
        q->head = ev;
    q->tail = ev;
    if (++base->nactive > base->max_active)
        base->max_active = base->nactive;
}

void evx_unqueue(struct event *ev)
{
    struct event_base *base = ev->ev_base;
    struct evx_queue *q = &base->active[ev->ev_pri];
    if (ev->ev_active_prev_)
        ev->ev_active_prev_->ev_active_next_ = ev->ev_active_next_;
    else
        q->head = ev->ev_active_next_;
    if (ev->ev_active_next_)
        ev->ev_active_next_->ev_active_prev_ = ev->ev_active_prev_;
    else
        q->tail = ev->ev_active_prev_;
    ev->ev_flags &= (unsigned short)~EVLIST_ACTIVE;
    ev->ev_ncalls_ = 0;
    base->nactive--;
}

/* ---- the base's list of added events ---- */

static void link_added(struct event *ev)
{
    struct event_base *base = ev->ev_base;
    ev->ev_prev_ = NULL;
    ev->ev_next_ = base->added;
    if (base->added)
        base->added->ev_prev_ = ev;
    base->added = ev;
    if (ev->ev_flags & EVX_INTERNAL)
        base->ninternal++;
    if (++base->nadded > base->max_added)
        base->max_added = base->nadded;
}

static void unlink_added(struct event *ev)
{
    struct event_base *base = ev->ev_base;
    if (ev->ev_prev_)
        ev->ev_prev_->ev_next_ = ev->ev_next_;
    else
        base->added = ev->ev_next_;
    if (ev->ev_next_)
        ev->ev_next_->ev_prev_ = ev->ev_prev_;
    if (ev->ev_flags & EVX_INTERNAL)
        base->ninternal--;
    base->nadded--;
}

/* ---- the watchers' callbacks ---- */

static short closed_or_not(const struct event *ev)
{
    return evx_sys_peer_closed(ev->ev_fd) ? EV_CLOSED : 0;
}

static void on_io_slow(struct event *ev, unsigned revents)
{
    short res = 0;
    if (revents & MUX_ERROR) /* the kernel refused the fd: libevent's poll reports it ready */
        revents |= mux_events_of(ev->ev_events, NULL);
    if (revents & MUX_READ) {
        if (ev->ev_events & EV_READ)
            res |= EV_READ;
        if ((ev->ev_events & EV_CLOSED) && !(ev->ev_base->features & EV_FEATURE_EARLY_CLOSE))
            res |= closed_or_not(ev);
    }
    if ((revents & MUX_RDHUP) && (ev->ev_events & EV_CLOSED))
        res |= EV_CLOSED;
    if (revents & MUX_WRITE)
        res |= EV_WRITE;
    if (!res)
        return;
    if ((ev->ev_events & EV_ET) && (ev->ev_base->features & EV_FEATURE_ET))
        res |= EV_ET; /* libevent tells an edge-triggered callback that it was */
    evx_activate(ev, res);
}

static void on_io(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    static const short ev_of[4] = {0, EV_READ, EV_WRITE, EV_READ | EV_WRITE};
    struct event *ev = (struct event *)((char *)w - offsetof(struct event, ev_w_.io));
    (void)loop;
    if (mux__unlikely((revents & MUX_ERROR) || (ev->ev_events & (EV_CLOSED | EV_ET)))) {
        on_io_slow(ev, revents);
        return;
    }
    short res = ev_of[revents & 3] & ev->ev_events;
    if (!res)
        return;
    struct event_base *base = ev->ev_base;
    /* With one priority and nothing queued, the callback runs here and now: the order is the
     * one the queue would give (first come, first run, anything queued meanwhile after it),
     * without the queue's cost. After a loopbreak the rest wait in the queue, as there. */
    if (base->npri == 1 && !base->nactive && !(ev->ev_x_ & EVX_ONCE) &&
        !__atomic_load_n(&base->gotbreak, __ATOMIC_ACQUIRE)) {
        if (!(ev->ev_events & EV_PERSIST))
            evx_del(ev, 0);
        else if (ev->ev_flags & EVLIST_TIMEOUT)
            mux_timer_again(&base->loop, &ev->ev_timer_); /* the timeout counts from now */
        base->ndirect++;
        base->running = ev;
        ev->ev_callback(ev->ev_fd, res, ev->ev_arg);
        base->running = NULL; /* `ev` may be gone */
        return;
    }
    evx_activate(ev, res);
}

static void on_signal(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    struct event *ev = (struct event *)((char *)w - offsetof(struct event, ev_w_.sig));
    (void)loop, (void)signum;
    if (ev->ev_ncalls_ < SHRT_MAX)
        ev->ev_ncalls_++;
    evx_activate(ev, EV_SIGNAL);
}

static void on_timeout(mux_loop_t *loop, mux_timer_t *t)
{
    struct event *ev = (struct event *)((char *)t - offsetof(struct event, ev_timer_));
    (void)loop;
    if (!(ev->ev_events & EV_PERSIST))
        evx_del(ev, 1); /* as libevent: a one-shot event that timed out is no longer added */
    evx_activate(ev, EV_TIMEOUT);
}

/* ---- assignment ---- */

EVX_EXPORT void *event_self_cbarg(void)
{
    return self_cbarg_token;
}

EVX_EXPORT int event_assign(struct event *ev, struct event_base *base, evutil_socket_t fd,
                            short events, event_callback_fn callback, void *arg)
{
    if (!base)
        base = evx_current_base; /* libevent 1.x's event_set: the base event_init made */
    if (!ev || !callback) {
        evx_warn("event_assign: the %s is NULL", !ev ? "event" : "callback");
        return -1;
    }
    if (ev->ev_magic_ == EVX_MAGIC &&
        (ev->ev_flags & (EVLIST_INSERTED | EVLIST_TIMEOUT | EVLIST_ACTIVE))) {
        evx_warn("event_assign: the event is pending or active: event_del it first");
        return -1;
    }
    if ((events & EV_SIGNAL) && (events & (EV_READ | EV_WRITE | EV_CLOSED))) {
        evx_warn("event_assign: EV_SIGNAL is not compatible with EV_READ, EV_WRITE or EV_CLOSED");
        return -1;
    }
    if (arg == self_cbarg_token)
        arg = ev;
    /* Every field set here; the watchers' inits clear their own (bench.c re-assigns every
     * event on every round, so this is no memset of the whole struct). */
    ev->ev_active_next_ = ev->ev_active_prev_ = NULL;
    ev->ev_next_ = ev->ev_prev_ = NULL;
    ev->ev_base = base;
    ev->ev_callback = callback;
    ev->ev_arg = arg;
    ev->ev_fd = fd;
    ev->ev_events = events;
    ev->ev_res = 0;
    ev->ev_flags = EVLIST_INIT;
    ev->ev_pri = (unsigned char)(base ? base->mid_pri : 0);
    ev->ev_x_ = 0;
    ev->ev_ncalls_ = 0;
    ev->ev_err_ = 0;
    ev->ev_magic_ = EVX_MAGIC;
    /* A bad fd or signal number is refused by event_add, as libevent does, not here. */
    if (events & EV_SIGNAL)
        ev->ev_err_ = (short)mux_signal_init(&ev->ev_w_.sig, on_signal, fd);
    else if (events & EVX_IO_EVENTS)
        ev->ev_err_ = (short)mux_io_init(&ev->ev_w_.io, on_io, fd, mux_events_of(events, base));
    return 0;
}

EVX_EXPORT struct event *event_new(struct event_base *base, evutil_socket_t fd, short events,
                                   event_callback_fn cb, void *arg)
{
    struct event *ev = evx_calloc(1, sizeof *ev);
    if (!ev)
        return NULL;
    if (arg == self_cbarg_token)
        arg = ev;
    if (event_assign(ev, base, fd, events, cb, arg) < 0) {
        evx_free(ev);
        return NULL;
    }
    return ev;
}

static __attribute__((noinline, cold)) int not_assigned(const struct event *ev, const char *what)
{
    evx_warn("%s: %s", what,
             !ev ? "the event is NULL"
             : ev->ev_magic_ != EVX_MAGIC || !(ev->ev_flags & EVLIST_INIT)
                 ? "the event was never assigned (event_assign or event_new)"
                 : "the event has no base (event_set before event_init: use event_base_set)");
    return 0;
}

static inline int assigned(const struct event *ev, const char *what)
{
    if (mux__unlikely(!ev || ev->ev_magic_ != EVX_MAGIC || !(ev->ev_flags & EVLIST_INIT) ||
                      !ev->ev_base))
        return not_assigned(ev, what);
    return 1;
}

EVX_EXPORT void event_free(struct event *ev)
{
    if (!ev)
        return;
    if (event_initialized(ev) && ev->ev_base)
        evx_del(ev, 0);
    ev->ev_magic_ = 0;
    evx_free(ev);
}

EVX_EXPORT void event_debug_unassign(struct event *ev)
{
    if (ev && ev->ev_magic_ == EVX_MAGIC && !(ev->ev_flags & ~EVLIST_INIT))
        ev->ev_flags = 0;
}

EVX_EXPORT void event_set(struct event *ev, evutil_socket_t fd, short events,
                          void (*callback)(evutil_socket_t, short, void *), void *arg)
{
    /* libevent 1.x: assign to the current base (event_init's); failures are logged. */
    event_assign(ev, NULL, fd, events, callback, arg);
}

EVX_EXPORT int event_base_set(struct event_base *base, struct event *ev)
{
    if (!base || !event_initialized(ev)) {
        evx_warn("event_base_set: %s", !base ? "the base is NULL" : "the event was never assigned");
        return -1;
    }
    if (ev->ev_flags != EVLIST_INIT) {
        evx_warn("event_base_set: the event is pending or active");
        return -1;
    }
    ev->ev_base = base;
    ev->ev_pri = (unsigned char)base->mid_pri;
    if ((ev->ev_events & EVX_IO_EVENTS) && !(ev->ev_events & EV_SIGNAL) && !ev->ev_err_)
        mux_io_set(&ev->ev_w_.io, ev->ev_fd, mux_events_of(ev->ev_events, base));
    return 0;
}

EVX_EXPORT int event_priority_set(struct event *ev, int pri)
{
    if (!assigned(ev, "event_priority_set") || (ev->ev_flags & EVLIST_ACTIVE) || pri < 0 ||
        pri >= ev->ev_base->npri)
        return -1;
    ev->ev_pri = (unsigned char)pri;
    return 0;
}

/* ---- adding and deleting ---- */

static uint64_t ns_of(const struct timeval *tv)
{
    if (tv->tv_sec < 0 || tv->tv_usec < 0)
        return 1;
    uint64_t ns = (uint64_t)tv->tv_sec * 1000000000u + (uint64_t)tv->tv_usec * 1000u;
    return ns ? ns : 1; /* 0 would stop the timer: "now" is the next iteration */
}

/* libevent's common timeouts: event_base_init_common_timeout hands out a pointer into the
 * base's table; its value is the duration itself, so any timeval works the same here. */
/* libevent refuses to watch one fd both edge- and level-triggered. */
static int mixes_triggers(const struct event *ev)
{
    for (const struct event *o = ev->ev_base->added; o; o = o->ev_next_)
        if (o->ev_fd == ev->ev_fd && (o->ev_flags & EVLIST_INSERTED) &&
            !(o->ev_events & EV_SIGNAL) && ((o->ev_events ^ ev->ev_events) & EV_ET))
            return 1;
    return 0;
}

static int start_watcher(struct event *ev)
{
    struct event_base *base = ev->ev_base;
    mux_loop_t *loop = &base->loop;
    int r = ev->ev_err_;
    if (r == 0 && !(ev->ev_events & EV_SIGNAL) && ev->ev_fd >= base->fd_limit)
        r = -EBADF; /* beyond the hard limit on descriptors: it cannot be open */
    if (r == 0 && !(ev->ev_events & EV_SIGNAL) && (base->n_et || (ev->ev_events & EV_ET)) &&
        mixes_triggers(ev)) {
        evx_warn("event_add: tried to mix edge-triggered and level-triggered events on fd %d",
                 (int)ev->ev_fd);
        return -EINVAL;
    }
    if (r == 0)
        r = ev->ev_events & EV_SIGNAL ? mux_signal_start(loop, &ev->ev_w_.sig)
                                      : mux_io_start(loop, &ev->ev_w_.io);
    if (r < 0) {
        evx_warn("event_add: %s (%s %d)", mux_strerror(r),
                 ev->ev_events & EV_SIGNAL ? "signal" : "fd", (int)ev->ev_fd);
        return r;
    }
    if (ev->ev_events & EV_ET)
        base->n_et++;
    return 0;
}

EVX_EXPORT int event_add(struct event *ev, const struct timeval *tv)
{
    if (!assigned(ev, "event_add"))
        return -1;
    struct event_base *base = ev->ev_base;
    int was_added = (ev->ev_flags & (EVLIST_INSERTED | EVLIST_TIMEOUT)) != 0;
    if ((ev->ev_events & (EVX_IO_EVENTS | EV_SIGNAL)) && !(ev->ev_flags & EVLIST_INSERTED)) {
        if (start_watcher(ev) < 0)
            return -1;
        ev->ev_flags |= EVLIST_INSERTED | (ev->ev_events & EV_SIGNAL ? EVLIST_SIGNAL : 0);
    }
    if (tv) {
        /* A timeout given again replaces the old one. An active one-shot timeout already
         * ran its course: libevent takes the event off the active queue, since it is no
         * longer due. */
        if ((ev->ev_flags & EVLIST_ACTIVE) && (ev->ev_res & EV_TIMEOUT)) {
            if (ev->ev_base->pncalls && ev->ev_base->running == ev)
                *ev->ev_base->pncalls = 0;
            evx_unqueue(ev);
        }
        if (!(ev->ev_x_ & EVX_TIMER)) {
            mux_timer_init(&ev->ev_timer_, on_timeout);
            ev->ev_x_ |= EVX_TIMER;
        }
        uint64_t ns = ns_of(tv);
        /* The timeout counts from now: outside the loop (or without its time cache) the
         * loop's time is the last turn's, however long ago, where libevent reads the clock. */
        if (!base->running_loop || (base->flags & EVENT_BASE_FLAG_NO_CACHE_TIME))
            mux_now_update(&base->loop);
        if (mux_timer_set_repeat(&ev->ev_timer_, ns) < 0 ||
            mux_timer_again(&base->loop, &ev->ev_timer_) < 0) {
            evx_warn("event_add: could not start the timeout");
            return -1;
        }
        ev->ev_flags |= EVLIST_TIMEOUT;
    }
    if (!was_added && (ev->ev_flags & (EVLIST_INSERTED | EVLIST_TIMEOUT))) {
        if (mux__unlikely(ev->ev_pri >= base->npri)) /* assigned before priority_init lowered it */
            ev->ev_pri = (unsigned char)(base->npri - 1);
        link_added(ev);
    }
    return 0;
}

/* Takes the event out of everything; `keep_active` leaves it queued (event_del does not,
 * the loop does when it deletes a one-shot event just before running it). */
void evx_del(struct event *ev, int keep_active)
{
    struct event_base *base = ev->ev_base;
    mux_loop_t *loop = &base->loop;
    int was_added = (ev->ev_flags & (EVLIST_INSERTED | EVLIST_TIMEOUT)) != 0;
    if (ev->ev_flags & EVLIST_INSERTED) {
        if (ev->ev_events & EV_SIGNAL)
            mux_signal_stop(loop, &ev->ev_w_.sig);
        else
            mux_io_stop(loop, &ev->ev_w_.io);
        if (ev->ev_events & EV_ET)
            base->n_et--;
    }
    if (ev->ev_flags & EVLIST_TIMEOUT)
        mux_timer_stop(loop, &ev->ev_timer_);
    ev->ev_flags &= (unsigned short)~(EVLIST_INSERTED | EVLIST_SIGNAL | EVLIST_TIMEOUT);
    if (was_added)
        unlink_added(ev);
    if (!keep_active && (ev->ev_flags & EVLIST_ACTIVE))
        evx_unqueue(ev);
    if (base->pncalls && base->running == ev)
        *base->pncalls = 0; /* a signal callback being repeated stops repeating */
}

EVX_EXPORT int event_del(struct event *ev)
{
    if (!assigned(ev, "event_del"))
        return -1;
    evx_del(ev, 0);
    return 0;
}

EVX_EXPORT int event_del_noblock(struct event *ev)
{
    return event_del(ev);
}

EVX_EXPORT int event_del_block(struct event *ev)
{
    return event_del(ev);
}

EVX_EXPORT int event_remove_timer(struct event *ev)
{
    if (!assigned(ev, "event_remove_timer"))
        return -1;
    if (ev->ev_flags & EVLIST_TIMEOUT) {
        mux_timer_stop(&ev->ev_base->loop, &ev->ev_timer_);
        ev->ev_flags &= (unsigned short)~EVLIST_TIMEOUT;
        if (!(ev->ev_flags & EVLIST_INSERTED))
            unlink_added(ev);
    }
    if ((ev->ev_flags & EVLIST_ACTIVE) && (ev->ev_res & EV_TIMEOUT)) {
        ev->ev_res &= ~EV_TIMEOUT;
        if (!ev->ev_res)
            evx_unqueue(ev);
    }
    return 0;
}

EVX_EXPORT void event_active(struct event *ev, int res, short ncalls)
{
    if (!assigned(ev, "event_active"))
        return;
    if (ev->ev_pri >= ev->ev_base->npri) /* set before event_base_priority_init lowered it */
        ev->ev_pri = (unsigned char)(ev->ev_base->npri - 1);
    if ((ev->ev_events & EV_SIGNAL) && ncalls > 0 && ev->ev_ncalls_ <= SHRT_MAX - ncalls)
        ev->ev_ncalls_ += ncalls;
    evx_activate(ev, (short)res);
}

EVX_EXPORT int event_finalize(unsigned flags, struct event *ev, event_finalize_callback_fn cb)
{
    (void)flags;
    if (!assigned(ev, "event_finalize"))
        return -1;
    evx_del(ev, 0);
    /* A base runs in one thread: once deleted, the event's callback cannot be running
     * anywhere but below us, and the loop touches the event no more after it returns. */
    if (cb)
        cb(ev, ev->ev_arg);
    return 0;
}

EVX_EXPORT int event_free_finalize(unsigned flags, struct event *ev, event_finalize_callback_fn cb)
{
    if (event_finalize(flags, ev, cb) < 0)
        return -1;
    ev->ev_magic_ = 0;
    evx_free(ev);
    return 0;
}

/* ---- questions ---- */

EVX_EXPORT int event_pending(const struct event *ev, short events, struct timeval *tv)
{
    if (!assigned(ev, "event_pending"))
        return 0;
    short flags = 0;
    if (ev->ev_flags & EVLIST_INSERTED)
        flags |= ev->ev_events & (EVX_IO_EVENTS | EV_SIGNAL);
    if (ev->ev_flags & EVLIST_ACTIVE)
        flags |= ev->ev_res;
    if (ev->ev_flags & EVLIST_TIMEOUT) {
        flags |= EV_TIMEOUT;
        if (tv && (events & EV_TIMEOUT)) {
            /* The deadline on the wall clock, as libevent gives it. */
            struct event_base *base = ev->ev_base;
            int64_t left = mux_timer_remaining(&base->loop, &ev->ev_timer_);
            struct timeval now;
            event_base_gettimeofday_cached(base, &now);
            int64_t us = (int64_t)now.tv_sec * 1000000 + now.tv_usec + (left < 0 ? 0 : left) / 1000;
            tv->tv_sec = (time_t)(us / 1000000);
            tv->tv_usec = (long)(us % 1000000);
        }
    }
    return flags & events & (EVX_IO_EVENTS | EV_SIGNAL | EV_TIMEOUT);
}

EVX_EXPORT int event_initialized(const struct event *ev)
{
    return ev && ev->ev_magic_ == EVX_MAGIC && (ev->ev_flags & EVLIST_INIT) ? 1 : 0;
}

EVX_EXPORT int event_get_priority(const struct event *ev)
{
    return ev ? ev->ev_pri : -1;
}

EVX_EXPORT evutil_socket_t event_get_fd(const struct event *ev)
{
    return ev ? ev->ev_fd : -1;
}

EVX_EXPORT struct event_base *event_get_base(const struct event *ev)
{
    return ev ? ev->ev_base : NULL;
}

EVX_EXPORT short event_get_events(const struct event *ev)
{
    return ev ? ev->ev_events : 0;
}

EVX_EXPORT event_callback_fn event_get_callback(const struct event *ev)
{
    return ev ? ev->ev_callback : NULL;
}

EVX_EXPORT void *event_get_callback_arg(const struct event *ev)
{
    return ev ? ev->ev_arg : NULL;
}

EVX_EXPORT void event_get_assignment(const struct event *ev, struct event_base **base_out,
                                     evutil_socket_t *fd_out, short *events_out,
                                     event_callback_fn *callback_out, void **arg_out)
{
    if (!ev)
        return;
    if (base_out)
        *base_out = ev->ev_base;
    if (fd_out)
        *fd_out = ev->ev_fd;
    if (events_out)
        *events_out = ev->ev_events;
    if (callback_out)
        *callback_out = ev->ev_callback;
    if (arg_out)
        *arg_out = ev->ev_arg;
}

EVX_EXPORT size_t event_get_struct_event_size(void)
{
    return sizeof(struct event);
}
