/* SPDX-License-Identifier: MIT */
/* libiomux-event: what every bufferevent shares, whatever it reads from (bufferevent_internal.h
 * says which kinds there are): making and freeing one, its callbacks and when they run, its
 * watermarks, the enabled events, the public calls that only set state, and libevent 1.x's
 * names for them.
 *
 * Callbacks run at once, from the kind's own callback, unless the bufferevent was made with
 * BEV_OPT_DEFER_CALLBACKS (a pair always is, as libevent's are): then what is owed is noted
 * and the bufferevent's `deferred` event is made active, so that the callbacks run from the
 * base's active queue in the order libevent runs them (connected, read, write, the rest).
 *
 * Memory: the program holds a reference until bufferevent_free, a kind holds one while it
 * has something in flight that will call back (a stream until it has closed), and every
 * callback into the program holds one while it runs, so that a callback may free the
 * bufferevent it was called for. */
#include "bufferevent_internal.h"

#include <errno.h>
#include <string.h>

#include "sys.h"

/* ---- references ---- */

void evx_bev_ref(struct evx_bev *b)
{
    b->refs++;
}

void evx_bev_destroy(struct evx_bev *b)
{
    evbuffer_free(b->pub.input);
    evbuffer_free(b->pub.output);
    evx_free(b);
}

int evx_bev_unref(struct evx_bev *b)
{
    if (--b->refs > 0)
        return 0;
    evx_chain_free(b->rchain);
    evx_bev_destroy(b);
    return 1;
}

/* ---- callbacks ---- */

static void run_deferred(evutil_socket_t fd, short what, void *arg);

static void schedule(struct evx_bev *b)
{
    if (!(b->deferred.ev_flags & EVLIST_ACTIVE))
        evx_activate(&b->deferred, EV_TIMEOUT);
}

/* The program's callbacks, with a reference held. Each returns 1 when the bufferevent went
 * (freed from inside and nothing else held it). */
static int call_read(struct evx_bev *b)
{
    bufferevent_data_cb cb = b->pub.readcb;
    b->pub.ev_base->ndirect++;
    evx_bev_ref(b);
    cb(&b->pub, b->pub.cbarg);
    return evx_bev_unref(b);
}

static int call_write(struct evx_bev *b)
{
    bufferevent_data_cb cb = b->pub.writecb;
    b->pub.ev_base->ndirect++;
    evx_bev_ref(b);
    cb(&b->pub, b->pub.cbarg);
    return evx_bev_unref(b);
}

static int call_event(struct evx_bev *b, short what, int err)
{
    bufferevent_event_cb cb = b->pub.errorcb;
    if (err)
        errno = err;
    b->pub.ev_base->ndirect++;
    evx_bev_ref(b);
    cb(&b->pub, what, b->pub.cbarg);
    return evx_bev_unref(b);
}

void evx_bev_readcb(struct evx_bev *b, int options)
{
    if (b->freed || !b->pub.readcb)
        return;
    if ((b->options | options) & BEV_OPT_DEFER_CALLBACKS) {
        b->pend |= EVX_PEND_READ;
        schedule(b);
        return;
    }
    call_read(b);
}

void evx_bev_writecb(struct evx_bev *b, int options)
{
    if (b->freed || !b->pub.writecb)
        return;
    if ((b->options | options) & BEV_OPT_DEFER_CALLBACKS) {
        b->pend |= EVX_PEND_WRITE;
        schedule(b);
        return;
    }
    call_write(b);
}

void evx_bev_eventcb(struct evx_bev *b, short what, int err, int options)
{
    if (b->freed || !b->pub.errorcb)
        return;
    if ((b->options | options) & BEV_OPT_DEFER_CALLBACKS) {
        b->pend_what |= what;
        if (err)
            b->pend_errno = err;
        schedule(b);
        return;
    }
    call_event(b, what, err);
}

/* The owed callbacks, in libevent's order: a connection's news first, then reading, writing
 * and the rest of the events. Each is taken off just before it runs, and the later ones are
 * looked at after the earlier ran, as libevent does: what a read callback owes anew to the
 * event callback (a bufferevent_trigger_event from inside it) runs in this same pass, while
 * a read it owes anew makes the event active again for the next pass. */
static void run_deferred(evutil_socket_t fd, short what, void *arg)
{
    struct evx_bev *b = arg;
    (void)fd, (void)what;
    evx_bev_ref(b);
    if ((b->pend_what & BEV_EVENT_CONNECTED) && !b->freed && b->pub.errorcb) {
        b->pend_what &= (short)~BEV_EVENT_CONNECTED;
        call_event(b, BEV_EVENT_CONNECTED, 0);
    }
    if ((b->pend & EVX_PEND_READ) && !b->freed && b->pub.readcb) {
        b->pend &= ~(unsigned)EVX_PEND_READ;
        call_read(b);
    }
    if ((b->pend & EVX_PEND_WRITE) && !b->freed && b->pub.writecb) {
        b->pend &= ~(unsigned)EVX_PEND_WRITE;
        call_write(b);
    }
    if (b->pend_what && !b->freed && b->pub.errorcb) {
        short w = b->pend_what;
        int err = b->pend_errno;
        b->pend_what = 0;
        b->pend_errno = 0;
        call_event(b, w, err);
    }
    evx_bev_unref(b);
}

/* ---- reading and writing, as far as the kinds share it ---- */

int evx_bev_wants_read(const struct evx_bev *b)
{
    const struct bufferevent *p = &b->pub;
    return !b->freed && (p->enabled & EV_READ) && !b->rd_blocked &&
           !(p->wm_read.high && evbuffer_get_length(p->input) >= p->wm_read.high);
}

int evx_bev_wants_write(const struct evx_bev *b)
{
    const struct bufferevent *p = &b->pub;
    return !b->freed && (p->enabled & EV_WRITE) && !b->wr_blocked &&
           evbuffer_get_length(p->output) > 0;
}

size_t evx_bev_read_max(struct evx_bev *b)
{
    size_t n = b->max_read;
    if (b->rl) {
        ev_ssize_t lim = evx_rl_read_max(b);
        if (lim <= 0)
            return 0;
        if ((size_t)lim < n)
            n = (size_t)lim;
    }
    size_t have = evbuffer_get_length(b->pub.input), high = b->pub.wm_read.high;
    if (high && have + n > high)
        n = have < high ? high - have : 0;
    return n;
}

size_t evx_bev_write_max(struct evx_bev *b)
{
    size_t n = b->max_write;
    if (b->rl) {
        ev_ssize_t lim = evx_rl_write_max(b);
        if (lim <= 0)
            return 0;
        if ((size_t)lim < n)
            n = (size_t)lim;
    }
    return n;
}

void evx_bev_did_read(struct evx_bev *b, size_t n)
{
    if (b->rl)
        evx_rl_charge_read(b, n);
    if (evbuffer_get_length(b->pub.input) >= b->pub.wm_read.low)
        evx_bev_readcb(b, 0);
}

void evx_bev_did_write(struct evx_bev *b, size_t n)
{
    if (b->rl)
        evx_rl_charge_write(b, n);
    if (evbuffer_get_length(b->pub.output) <= b->pub.wm_write.low)
        evx_bev_writecb(b, 0);
}

void evx_bev_output_added(struct evx_bev *b)
{
    b->pub.be_ops->output_added(b);
}

void evx_bev_input_drained(struct evx_bev *b)
{
    /* Reading waits only for the input to fall below the high watermark. */
    size_t high = b->pub.wm_read.high;
    if (high && !b->freed && evbuffer_get_length(b->pub.input) < high)
        b->pub.be_ops->update(b);
}

/* ---- life ---- */

struct evx_bev *evx_bev_new(struct event_base *base, const struct bufferevent_ops *ops,
                            int options)
{
    struct evx_bev *b = evx_calloc(1, sizeof *b);
    if (!b)
        return NULL;
    struct bufferevent *p = &b->pub;
    p->ev_base = base;
    p->be_ops = ops;
    p->enabled = EV_WRITE; /* libevent's default: writing on, reading off */
    p->input = evbuffer_new();
    p->output = evbuffer_new();
    b->options = options;
    b->refs = 1;
    b->fd = -1;
    b->max_read = b->max_write = EVX_MAX_SINGLE;
    if (!p->input || !p->output) {
        evx_bev_destroy(b);
        return NULL;
    }
    p->input->bev_in = b;
    p->output->bev_out = b;
    /* Assigned, never added: event_initialized() is true of a bufferevent's events, as with
     * libevent; the kinds that use them assign them again. */
    event_assign(&p->ev_read, base, -1, 0, run_deferred, b);
    event_assign(&p->ev_write, base, -1, 0, run_deferred, b);
    event_assign(&b->deferred, base, -1, 0, run_deferred, b);
    b->deferred.ev_flags |= EVX_INTERNAL;
    return b;
}

/* A socket gets the stream kind; any other descriptor the descriptor kind (POSIX only). */
static int is_socket(evutil_socket_t fd)
{
    return evx_sys_is_socket(fd);
}

EVX_EXPORT struct bufferevent *bufferevent_socket_new(struct event_base *base, evutil_socket_t fd,
                                                      int options)
{
    if (!base && !(base = evx_current_base)) {
        evx_warn("bufferevent_socket_new: no base (and no event_init before)");
        return NULL;
    }
    int sock = fd >= 0 ? is_socket(fd) : 1;
    if (sock < 0) {
        evx_warn("bufferevent_socket_new: %s (fd %d)", mux_strerror(sock), (int)fd);
        return NULL;
    }
    struct evx_bev *b = evx_bev_new(base, sock ? &evx_bev_stream_ops : &evx_bev_fd_ops, options);
    if (!b) {
        evx_warn("bufferevent_socket_new: %s (fd %d)", mux_strerror(-ENOMEM), (int)fd);
        return NULL;
    }
    int r = 0;
    if (fd >= 0)
        r = sock ? evx_bev_stream_open(b, fd) : evx_bev_fd_set(b, fd);
    if (r < 0) {
        evx_warn("bufferevent_socket_new: %s (fd %d)", mux_strerror(r), (int)fd);
        evx_bev_destroy(b);
        return NULL;
    }
    return &b->pub;
}

EVX_EXPORT struct bufferevent *bufferevent_new(evutil_socket_t fd, bufferevent_data_cb readcb,
                                               bufferevent_data_cb writecb,
                                               bufferevent_event_cb errorcb, void *cbarg)
{
    struct bufferevent *bev = bufferevent_socket_new(NULL, fd, 0);
    if (bev)
        bufferevent_setcb(bev, readcb, writecb, errorcb, cbarg);
    return bev;
}

EVX_EXPORT void bufferevent_free(struct bufferevent *bev)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || b->freed)
        return;
    b->freed = 1;
    bev->readcb = bev->writecb = NULL;
    bev->errorcb = NULL;
    b->pend = 0;
    b->pend_what = 0;
    evx_del(&b->deferred, 0);
    if (b->rl)
        evx_rl_free(b);
    bev->be_ops->release(b);
    evx_bev_unref(b);
}

EVX_EXPORT int bufferevent_base_set(struct event_base *base, struct bufferevent *bev)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!base || !b || b->freed)
        return -1;
    if (bev->ev_base == base)
        return 0;
    /* Nothing may be in flight on the old base: no stream, no event added, nothing owed. */
    if (b->open || b->rl || (bev->ev_read.ev_flags & ~EVLIST_INIT) ||
        (bev->ev_write.ev_flags & ~EVLIST_INIT) || (b->deferred.ev_flags & EVLIST_ACTIVE)) {
        evx_warn("bufferevent_base_set: the bufferevent is in use on its base already");
        return -1;
    }
    bev->ev_base = base;
    event_base_set(base, &bev->ev_read);
    event_base_set(base, &bev->ev_write);
    event_base_set(base, &b->deferred);
    return 0;
}

/* A bufferevent made without a descriptor takes one: a socket keeps the stream kind, any
 * other descriptor makes it a descriptor one (nothing of the stream's was started yet). */
EVX_EXPORT int bufferevent_setfd(struct bufferevent *bev, evutil_socket_t fd)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || b->freed || fd < 0 || bev->be_ops == &evx_bev_pair_ops)
        return -1;
    int sock = is_socket(fd);
    if (sock < 0 || b->open) {
        evx_warn("bufferevent_setfd: %s (fd %d)",
                 sock < 0 ? mux_strerror(sock) : "the bufferevent has a socket already", (int)fd);
        return -1;
    }
    int r;
    if (sock && bev->be_ops == &evx_bev_stream_ops) {
        r = evx_bev_stream_open(b, fd);
    } else if (!sock) {
        bev->be_ops = &evx_bev_fd_ops;
        r = evx_bev_fd_set(b, fd);
    } else {
        evx_warn("bufferevent_setfd: a descriptor bufferevent cannot take a socket (fd %d)", (int)fd);
        return -1;
    }
    if (r < 0) {
        evx_warn("bufferevent_setfd: %s (fd %d)", mux_strerror(r), (int)fd);
        return -1;
    }
    bev->be_ops->update(b);
    return 0;
}

/* ---- settings ---- */

EVX_EXPORT void bufferevent_setcb(struct bufferevent *bev, bufferevent_data_cb readcb,
                                  bufferevent_data_cb writecb, bufferevent_event_cb eventcb,
                                  void *cbarg)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || b->freed)
        return;
    bev->readcb = readcb;
    bev->writecb = writecb;
    bev->errorcb = eventcb;
    bev->cbarg = cbarg;
}

EVX_EXPORT void bufferevent_getcb(struct bufferevent *bev, bufferevent_data_cb *readcb,
                                  bufferevent_data_cb *writecb, bufferevent_event_cb *eventcb,
                                  void **cbarg)
{
    if (!bev)
        return;
    if (readcb)
        *readcb = bev->readcb;
    if (writecb)
        *writecb = bev->writecb;
    if (eventcb)
        *eventcb = bev->errorcb;
    if (cbarg)
        *cbarg = bev->cbarg;
}

EVX_EXPORT evutil_socket_t bufferevent_getfd(struct bufferevent *bev)
{
    return bev ? bev->be_ops->getfd((struct evx_bev *)bev) : -1;
}

EVX_EXPORT struct event_base *bufferevent_get_base(struct bufferevent *bev)
{
    return bev ? bev->ev_base : NULL;
}

EVX_EXPORT struct bufferevent *bufferevent_get_underlying(struct bufferevent *bev)
{
    (void)bev;
    return NULL;
}

EVX_EXPORT struct evbuffer *bufferevent_get_input(struct bufferevent *bev)
{
    return bev ? bev->input : NULL;
}

EVX_EXPORT struct evbuffer *bufferevent_get_output(struct bufferevent *bev)
{
    return bev ? bev->output : NULL;
}

EVX_EXPORT int bufferevent_write(struct bufferevent *bev, const void *data, size_t size)
{
    return bev ? evbuffer_add(bev->output, data, size) : -1;
}

EVX_EXPORT int bufferevent_write_buffer(struct bufferevent *bev, struct evbuffer *buf)
{
    return bev ? evbuffer_add_buffer(bev->output, buf) : -1;
}

EVX_EXPORT size_t bufferevent_read(struct bufferevent *bev, void *data, size_t size)
{
    int n = bev ? evbuffer_remove(bev->input, data, size) : -1;
    return n < 0 ? 0 : (size_t)n;
}

EVX_EXPORT int bufferevent_read_buffer(struct bufferevent *bev, struct evbuffer *buf)
{
    return bev ? evbuffer_add_buffer(buf, bev->input) : -1;
}

EVX_EXPORT int bufferevent_enable(struct bufferevent *bev, short event)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || b->freed)
        return -1;
    bev->enabled |= (short)(event & (EV_READ | EV_WRITE));
    bev->be_ops->update(b);
    return 0;
}

EVX_EXPORT int bufferevent_disable(struct bufferevent *bev, short event)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || b->freed)
        return -1;
    bev->enabled &= (short)~(event & (EV_READ | EV_WRITE));
    bev->be_ops->update(b);
    return 0;
}

EVX_EXPORT short bufferevent_get_enabled(struct bufferevent *bev)
{
    return bev ? bev->enabled : 0;
}

static void set_tv(struct timeval *to, const struct timeval *from)
{
    if (from && from->tv_sec >= 0 && from->tv_usec >= 0 && (from->tv_sec || from->tv_usec))
        *to = *from;
    else
        to->tv_sec = 0, to->tv_usec = 0;
}

EVX_EXPORT int bufferevent_set_timeouts(struct bufferevent *bev, const struct timeval *tv_read,
                                        const struct timeval *tv_write)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || b->freed)
        return -1;
    set_tv(&bev->timeout_read, tv_read);
    set_tv(&bev->timeout_write, tv_write);
    return bev->be_ops->set_timeouts(b);
}

EVX_EXPORT void bufferevent_settimeout(struct bufferevent *bev, int timeout_read,
                                       int timeout_write)
{
    struct timeval r = {.tv_sec = timeout_read > 0 ? timeout_read : 0};
    struct timeval w = {.tv_sec = timeout_write > 0 ? timeout_write : 0};
    bufferevent_set_timeouts(bev, &r, &w);
}

EVX_EXPORT void bufferevent_setwatermark(struct bufferevent *bev, short events, size_t low,
                                         size_t high)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || b->freed)
        return;
    if (events & EV_WRITE) {
        bev->wm_write.low = low;
        bev->wm_write.high = high;
    }
    if (events & EV_READ) {
        bev->wm_read.low = low;
        /* libevent: a high mark below the low one is taken as the low one. */
        bev->wm_read.high = high && high < low ? low : high;
        bev->be_ops->update(b);
    }
}

EVX_EXPORT int bufferevent_getwatermark(struct bufferevent *bev, short events, size_t *low,
                                        size_t *high)
{
    if (!bev || (events != EV_READ && events != EV_WRITE))
        return -1;
    const struct event_watermark *wm = events == EV_READ ? &bev->wm_read : &bev->wm_write;
    if (low)
        *low = wm->low;
    if (high)
        *high = wm->high;
    return 0;
}

EVX_EXPORT int bufferevent_flush(struct bufferevent *bev, short iotype,
                                 enum bufferevent_flush_mode mode)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || b->freed)
        return -1;
    return bev->be_ops->flush(b, iotype, mode);
}

EVX_EXPORT void bufferevent_trigger(struct bufferevent *bev, short iotype, int options)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || b->freed)
        return;
    int watch = !(options & BEV_TRIG_IGNORE_WATERMARKS);
    evx_bev_ref(b);
    if ((iotype & EV_READ) && (!watch || evbuffer_get_length(bev->input) >= bev->wm_read.low))
        evx_bev_readcb(b, options & BEV_TRIG_DEFER_CALLBACKS);
    if ((iotype & EV_WRITE) && (!watch || evbuffer_get_length(bev->output) <= bev->wm_write.low))
        evx_bev_writecb(b, options & BEV_TRIG_DEFER_CALLBACKS);
    evx_bev_unref(b);
}

EVX_EXPORT void bufferevent_trigger_event(struct bufferevent *bev, short what, int options)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (b && !b->freed)
        evx_bev_eventcb(b, what, 0, options & BEV_TRIG_DEFER_CALLBACKS);
}

EVX_EXPORT int bufferevent_priority_set(struct bufferevent *bev, int pri)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || pri < 0 || pri >= bev->ev_base->npri)
        return -1;
    /* The events a descriptor bufferevent's callbacks run from, and the deferred callbacks'
     * (a socket's run straight from its stream, whatever the priority). */
    int r = 0;
    struct event *evs[] = {&bev->ev_read, &bev->ev_write, &b->deferred};
    for (size_t i = 0; i < sizeof evs / sizeof *evs; i++)
        if (!(evs[i]->ev_flags & EVLIST_ACTIVE))
            evs[i]->ev_pri = (unsigned char)pri;
        else
            r = -1;
    return r;
}

EVX_EXPORT int bufferevent_get_priority(const struct bufferevent *bev)
{
    return bev ? bev->ev_read.ev_pri : -1;
}

EVX_EXPORT int bufferevent_set_max_single_read(struct bufferevent *bev, size_t size)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || size > (1u << 30))
        return -1;
    b->max_read = size ? size : EVX_MAX_SINGLE;
    bev->be_ops->update(b);
    return 0;
}

EVX_EXPORT ev_ssize_t bufferevent_get_max_single_read(struct bufferevent *bev)
{
    return bev ? (ev_ssize_t)((struct evx_bev *)bev)->max_read : -1;
}

EVX_EXPORT int bufferevent_set_max_single_write(struct bufferevent *bev, size_t size)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || size > (1u << 30))
        return -1;
    b->max_write = size ? size : EVX_MAX_SINGLE;
    return 0;
}

EVX_EXPORT ev_ssize_t bufferevent_get_max_single_write(struct bufferevent *bev)
{
    return bev ? (ev_ssize_t)((struct evx_bev *)bev)->max_write : -1;
}

EVX_EXPORT int bufferevent_socket_get_dns_error(struct bufferevent *bev)
{
    (void)bev;
    return 0;
}

EVX_EXPORT void bufferevent_lock(struct bufferevent *bev)
{
    (void)bev;
}

EVX_EXPORT void bufferevent_unlock(struct bufferevent *bev)
{
    (void)bev;
}
