/* SPDX-License-Identifier: MIT */
/* libiomux-event: paired bufferevents (bufferevent_pair_new). What one end adds to its
 * output moves to the other end's input at once, while the writer has writing enabled and
 * the reader reading, up to the reader's high watermark and within both ends' rate limits.
 * Callbacks are always deferred, as libevent's pairs do, so that a write from inside a
 * callback does not run the partner's callback inside it. Freeing one end unlinks the
 * other, whose output then stays where it is. */
#include "bufferevent_internal.h"

/* Moves what `src` may send and `dst` may take. */
static void transfer(struct evx_bev *src, struct evx_bev *dst)
{
    if (!dst || src->freed || dst->freed || !(src->pub.enabled & EV_WRITE) ||
        !(dst->pub.enabled & EV_READ))
        return;
    size_t n = evbuffer_get_length(src->pub.output);
    if (!n)
        return;
    size_t have = evbuffer_get_length(dst->pub.input), high = dst->pub.wm_read.high;
    if (high)
        n = have < high ? (n < high - have ? n : high - have) : 0;
    if (src->rl) {
        size_t w = evx_bev_write_max(src);
        n = n < w ? n : w;
    }
    if (dst->rl) {
        size_t r = evx_bev_read_max(dst);
        n = n < r ? n : r;
    }
    if (!n)
        return;
    size_t old = evbuffer_get_length(dst->pub.input);
    if (evbuffer_remove_buffer(src->pub.output, dst->pub.input, n) <= 0)
        return;
    evx_buffer_changed(dst->pub.input, old);
    evx_bev_ref(src);
    evx_bev_ref(dst);
    evx_bev_did_read(dst, n);
    evx_bev_did_write(src, n);
    evx_bev_unref(dst);
    evx_bev_unref(src);
}

static void pair_update(struct evx_bev *b)
{
    struct evx_bev *p = b->partner;
    transfer(b, p);
    if (b->partner == p && p)
        transfer(p, b);
}

static void pair_output_added(struct evx_bev *b)
{
    transfer(b, b->partner);
}

static int pair_flush(struct evx_bev *b, short iotype, enum bufferevent_flush_mode mode)
{
    struct evx_bev *p = b->partner;
    if (!p || mode == BEV_NORMAL)
        return 0;
    if (iotype & EV_READ)
        transfer(p, b);
    if (iotype & EV_WRITE)
        transfer(b, p);
    if (mode == BEV_FINISHED && b->partner) {
        short what = BEV_EVENT_EOF;
        if (iotype & EV_READ)
            what |= BEV_EVENT_WRITING;
        if (iotype & EV_WRITE)
            what |= BEV_EVENT_READING;
        evx_bev_eventcb(b->partner, what, 0, 0);
    }
    return 0;
}

static void pair_release(struct evx_bev *b)
{
    if (b->partner)
        b->partner->partner = NULL;
    b->partner = NULL;
}

static int pair_set_timeouts(struct evx_bev *b)
{
    (void)b;
    return 0; /* nothing waits on a descriptor: a pair's ends never time out, as libevent's */
}

static evutil_socket_t pair_getfd(struct evx_bev *b)
{
    (void)b;
    return -1;
}

const struct bufferevent_ops evx_bev_pair_ops = {
    .type = "pair",
    .update = pair_update,
    .output_added = pair_output_added,
    .flush = pair_flush,
    .release = pair_release,
    .set_timeouts = pair_set_timeouts,
    .getfd = pair_getfd,
};

EVX_EXPORT int bufferevent_pair_new(struct event_base *base, int options,
                                    struct bufferevent *pair[2])
{
    if (!pair || (!base && !(base = evx_current_base)))
        return -1;
    options |= BEV_OPT_DEFER_CALLBACKS;
    struct evx_bev *a = evx_bev_new(base, &evx_bev_pair_ops, options);
    struct evx_bev *b = a ? evx_bev_new(base, &evx_bev_pair_ops, options) : NULL;
    if (!b) {
        if (a)
            evx_bev_destroy(a);
        return -1;
    }
    a->partner = b;
    b->partner = a;
    pair[0] = &a->pub;
    pair[1] = &b->pub;
    return 0;
}

EVX_EXPORT struct bufferevent *bufferevent_pair_get_partner(struct bufferevent *bev)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || bev->be_ops != &evx_bev_pair_ops || !b->partner || b->partner->freed)
        return NULL;
    return &b->partner->pub;
}
