/* SPDX-License-Identifier: MIT */
/* libiomux-event: bufferevent rate limits, as libevent's token buckets.
 *
 * A bucket holds tokens (bytes) for reading and for writing. It starts with one tick's rate,
 * gains a tick's rate at every tick boundary, never above the burst, and every byte read or
 * written takes one. A bufferevent whose bucket is empty (zero or below: a read may overdraw)
 * stops reading or writing until the tick that brings it above zero. Ticks are counted on
 * the monotonic clock from the configuration's tick length, and a bucket is refilled lazily,
 * when it is looked at, for the ticks that passed since.
 *
 * A group is one bucket that its members share: a member may take at once what is left over
 * the members, no less than the group's minimum share; the group's timer refills the bucket
 * every tick and wakes the members an empty bucket stopped. The timers are the library's own
 * events (not listed, and not keeping event_base_dispatch running, as libevent's). */
#include "bufferevent_internal.h"

#include <stdint.h>
#include <string.h>

#include "sys.h"

struct ev_token_bucket_cfg {
    size_t read_rate, read_burst, write_rate, write_burst;
    struct timeval tick;
    uint64_t tick_ms;
};

struct bucket {
    ev_ssize_t rd, wr;
    uint64_t tick;    /* the tick it was last refilled at */
    uint64_t tick_ms; /* the length of the ticks `tick` counts */
};

struct bufferevent_rate_limit_group {
    struct ev_token_bucket_cfg cfg; /* a copy: the program may free its own */
    struct bucket b;
    struct event refill;
    struct evx_ratelim *members;
    int n;
    size_t min_share;
    ev_uint64_t total_read, total_written;
};

struct evx_ratelim {
    const struct ev_token_bucket_cfg *cfg; /* the bufferevent's own, or NULL */
    struct bucket b;
    struct event refill; /* while its own bucket is empty: the next tick */
    struct bufferevent_rate_limit_group *group;
    struct evx_ratelim *next, *prev; /* in the group */
    struct evx_bev *bev;
};

static uint64_t now_ms(void)
{
    return evx_sys_mono_ms();
}

static uint64_t tick_now(const struct ev_token_bucket_cfg *cfg)
{
    return now_ms() / cfg->tick_ms;
}

/* `ticks` is at least 1 (bucket_refill calls only when a tick boundary passed). */
static ev_ssize_t add_capped(ev_ssize_t level, size_t rate, uint64_t ticks, size_t burst)
{
    if (level >= (ev_ssize_t)burst)
        return level;
    uint64_t room = (uint64_t)((ev_ssize_t)burst - level);
    uint64_t add = rate && ticks > room / rate ? room : rate * ticks;
    return level + (ev_ssize_t)(add < room ? add : room);
}

static void bucket_init(struct bucket *bk, const struct ev_token_bucket_cfg *cfg)
{
    bk->rd = (ev_ssize_t)cfg->read_rate;
    bk->wr = (ev_ssize_t)cfg->write_rate;
    bk->tick = tick_now(cfg);
    bk->tick_ms = cfg->tick_ms;
}

/* A configuration with another tick length starts the count again from now: the old count
 * in the new unit would be a tick far ahead (a longer tick: no refill for ages) or far behind
 * (a shorter one: the bucket full at once). */
static void bucket_refill(struct bucket *bk, const struct ev_token_bucket_cfg *cfg)
{
    uint64_t t = tick_now(cfg);
    if (bk->tick_ms != cfg->tick_ms) {
        bk->tick = t;
        bk->tick_ms = cfg->tick_ms;
        return;
    }
    if (t <= bk->tick)
        return;
    bk->rd = add_capped(bk->rd, cfg->read_rate, t - bk->tick, cfg->read_burst);
    bk->wr = add_capped(bk->wr, cfg->write_rate, t - bk->tick, cfg->write_burst);
    bk->tick = t;
}

/* The time from now to the next tick boundary. */
static struct timeval until_next_tick(const struct ev_token_bucket_cfg *cfg)
{
    uint64_t ms = now_ms(), next = (ms / cfg->tick_ms + 1) * cfg->tick_ms, d = next - ms;
    struct timeval tv = {.tv_sec = (time_t)(d / 1000), .tv_usec = (long)(d % 1000) * 1000};
    return tv;
}

/* ---- configurations ---- */

EVX_EXPORT struct ev_token_bucket_cfg *ev_token_bucket_cfg_new(size_t read_rate,
                                                               size_t read_burst,
                                                               size_t write_rate,
                                                               size_t write_burst,
                                                               const struct timeval *tick_len)
{
    if (read_rate > read_burst || write_rate > write_burst || read_burst > EV_RATE_LIMIT_MAX ||
        write_burst > EV_RATE_LIMIT_MAX || read_rate < 1 || write_rate < 1)
        return NULL;
    struct timeval tick = {.tv_sec = 1};
    if (tick_len) {
        if (tick_len->tv_sec < 0 || tick_len->tv_usec < 0 ||
            (tick_len->tv_sec == 0 && tick_len->tv_usec < 1000))
            return NULL;
        tick = *tick_len;
    }
    struct ev_token_bucket_cfg *cfg = evx_calloc(1, sizeof *cfg);
    if (!cfg)
        return NULL;
    cfg->read_rate = read_rate;
    cfg->read_burst = read_burst;
    cfg->write_rate = write_rate;
    cfg->write_burst = write_burst;
    cfg->tick = tick;
    cfg->tick_ms = (uint64_t)tick.tv_sec * 1000u + (uint64_t)tick.tv_usec / 1000u;
    return cfg;
}

EVX_EXPORT void ev_token_bucket_cfg_free(struct ev_token_bucket_cfg *cfg)
{
    evx_free(cfg);
}

/* ---- what the bufferevent is allowed ---- */

/* Blocks or unblocks reading and writing after the buckets changed, and arms the timer
 * that ends a block of the bufferevent's own bucket. */
static void recompute(struct evx_bev *b)
{
    struct evx_ratelim *rl = b->rl;
    int rd = 0, wr = 0;
    if (rl->cfg) {
        bucket_refill(&rl->b, rl->cfg);
        rd = rl->b.rd <= 0;
        wr = rl->b.wr <= 0;
        if ((rd || wr) && !event_pending(&rl->refill, EV_TIMEOUT, NULL)) {
            struct timeval tv = until_next_tick(rl->cfg);
            event_add(&rl->refill, &tv);
        }
    }
    if (rl->group) {
        rd |= rl->group->b.rd <= 0;
        wr |= rl->group->b.wr <= 0;
    }
    int changed = (unsigned)rd != b->rd_blocked || (unsigned)wr != b->wr_blocked;
    b->rd_blocked = (unsigned)rd;
    b->wr_blocked = (unsigned)wr;
    if (changed && !b->freed)
        b->pub.be_ops->update(b);
}

static void on_refill(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    recompute(arg);
}

static ev_ssize_t group_share(struct bufferevent_rate_limit_group *g, ev_ssize_t level)
{
    if (level <= 0)
        return 0;
    ev_ssize_t share = level / (g->n ? g->n : 1);
    return share < (ev_ssize_t)g->min_share ? (ev_ssize_t)g->min_share : share;
}

static ev_ssize_t limit(struct evx_bev *b, int writing)
{
    struct evx_ratelim *rl = b->rl;
    ev_ssize_t n = EV_SSIZE_MAX;
    if (rl->cfg) {
        bucket_refill(&rl->b, rl->cfg);
        n = writing ? rl->b.wr : rl->b.rd;
    }
    if (rl->group) {
        bucket_refill(&rl->group->b, &rl->group->cfg);
        ev_ssize_t s = group_share(rl->group, writing ? rl->group->b.wr : rl->group->b.rd);
        if (s < n)
            n = s;
    }
    return n < 0 ? 0 : n;
}

ev_ssize_t evx_rl_read_max(struct evx_bev *b)
{
    return limit(b, 0);
}

ev_ssize_t evx_rl_write_max(struct evx_bev *b)
{
    return limit(b, 1);
}

static void group_recompute(struct bufferevent_rate_limit_group *g)
{
    for (struct evx_ratelim *m = g->members; m;) {
        struct evx_ratelim *next = m->next; /* an update may free nothing, but be careful */
        recompute(m->bev);
        m = next;
    }
}

static void charge(struct evx_bev *b, size_t n, int writing)
{
    struct evx_ratelim *rl = b->rl;
    if (rl->cfg) {
        bucket_refill(&rl->b, rl->cfg);
        *(writing ? &rl->b.wr : &rl->b.rd) -= (ev_ssize_t)n;
    }
    struct bufferevent_rate_limit_group *g = rl->group;
    if (g) {
        bucket_refill(&g->b, &g->cfg);
        ev_ssize_t *lvl = writing ? &g->b.wr : &g->b.rd;
        int was = *lvl > 0;
        *lvl -= (ev_ssize_t)n;
        *(writing ? &g->total_written : &g->total_read) += n;
        if (was && *lvl <= 0) {
            group_recompute(g);
            return;
        }
    }
    recompute(b);
}

void evx_rl_charge_read(struct evx_bev *b, size_t n)
{
    charge(b, n, 0);
}

void evx_rl_charge_write(struct evx_bev *b, size_t n)
{
    charge(b, n, 1);
}

/* ---- a bufferevent's own limit ---- */

static struct evx_ratelim *rl_get(struct evx_bev *b)
{
    if (b->rl)
        return b->rl;
    struct evx_ratelim *rl = evx_calloc(1, sizeof *rl);
    if (!rl)
        return NULL;
    rl->bev = b;
    event_assign(&rl->refill, b->pub.ev_base, -1, 0, on_refill, b);
    rl->refill.ev_flags |= EVX_INTERNAL;
    b->rl = rl;
    return rl;
}

static void group_leave(struct evx_ratelim *rl)
{
    struct bufferevent_rate_limit_group *g = rl->group;
    if (!g)
        return;
    if (rl->prev)
        rl->prev->next = rl->next;
    else
        g->members = rl->next;
    if (rl->next)
        rl->next->prev = rl->prev;
    rl->next = rl->prev = NULL;
    rl->group = NULL;
    g->n--;
}

/* Drops the state when neither an own limit nor a group is left. */
static void rl_settle(struct evx_bev *b)
{
    struct evx_ratelim *rl = b->rl;
    if (rl->cfg || rl->group) {
        recompute(b);
        return;
    }
    event_del(&rl->refill);
    evx_free(rl);
    b->rl = NULL;
    b->rd_blocked = b->wr_blocked = 0;
    if (!b->freed)
        b->pub.be_ops->update(b);
}

void evx_rl_free(struct evx_bev *b)
{
    group_leave(b->rl);
    b->rl->cfg = NULL;
    rl_settle(b);
}

EVX_EXPORT int bufferevent_set_rate_limit(struct bufferevent *bev,
                                          struct ev_token_bucket_cfg *cfg)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || b->freed)
        return -1;
    if (!cfg && !b->rl)
        return 0;
    struct evx_ratelim *rl = rl_get(b);
    if (!rl)
        return -1;
    if (cfg && rl->cfg) { /* the new rates, the level kept within the new burst */
        if (rl->b.rd > (ev_ssize_t)cfg->read_burst)
            rl->b.rd = (ev_ssize_t)cfg->read_burst;
        if (rl->b.wr > (ev_ssize_t)cfg->write_burst)
            rl->b.wr = (ev_ssize_t)cfg->write_burst;
    } else if (cfg) {
        bucket_init(&rl->b, cfg);
    }
    rl->cfg = cfg;
    if (!cfg)
        event_del(&rl->refill);
    rl_settle(b);
    return 0;
}

EVX_EXPORT const struct ev_token_bucket_cfg *
bufferevent_get_token_bucket_cfg(const struct bufferevent *bev)
{
    const struct evx_bev *b = (const struct evx_bev *)bev;
    return b && b->rl ? b->rl->cfg : NULL;
}

EVX_EXPORT ev_ssize_t bufferevent_get_read_limit(struct bufferevent *bev)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || !b->rl || !b->rl->cfg)
        return EV_SSIZE_MAX;
    bucket_refill(&b->rl->b, b->rl->cfg);
    return b->rl->b.rd;
}

EVX_EXPORT ev_ssize_t bufferevent_get_write_limit(struct bufferevent *bev)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || !b->rl || !b->rl->cfg)
        return EV_SSIZE_MAX;
    bucket_refill(&b->rl->b, b->rl->cfg);
    return b->rl->b.wr;
}

EVX_EXPORT ev_ssize_t bufferevent_get_max_to_read(struct bufferevent *bev)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    return b ? (ev_ssize_t)evx_bev_read_max(b) : -1;
}

EVX_EXPORT ev_ssize_t bufferevent_get_max_to_write(struct bufferevent *bev)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    return b ? (ev_ssize_t)evx_bev_write_max(b) : -1;
}

static int decrement(struct bufferevent *bev, ev_ssize_t decr, int writing)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || !b->rl || !b->rl->cfg)
        return -1;
    bucket_refill(&b->rl->b, b->rl->cfg);
    *(writing ? &b->rl->b.wr : &b->rl->b.rd) -= decr;
    recompute(b);
    return 0;
}

EVX_EXPORT int bufferevent_decrement_read_limit(struct bufferevent *bev, ev_ssize_t decr)
{
    return decrement(bev, decr, 0);
}

EVX_EXPORT int bufferevent_decrement_write_limit(struct bufferevent *bev, ev_ssize_t decr)
{
    return decrement(bev, decr, 1);
}

/* ---- groups ---- */

static void on_group_tick(evutil_socket_t fd, short what, void *arg)
{
    struct bufferevent_rate_limit_group *g = arg;
    (void)fd, (void)what;
    bucket_refill(&g->b, &g->cfg);
    group_recompute(g);
}

EVX_EXPORT struct bufferevent_rate_limit_group *
bufferevent_rate_limit_group_new(struct event_base *base, const struct ev_token_bucket_cfg *cfg)
{
    if (!base || !cfg)
        return NULL;
    struct bufferevent_rate_limit_group *g = evx_calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->cfg = *cfg;
    g->min_share = 64;
    bucket_init(&g->b, &g->cfg);
    event_assign(&g->refill, base, -1, EV_PERSIST, on_group_tick, g);
    g->refill.ev_flags |= EVX_INTERNAL;
    event_add(&g->refill, &g->cfg.tick);
    return g;
}

EVX_EXPORT int bufferevent_rate_limit_group_set_cfg(struct bufferevent_rate_limit_group *g,
                                                    const struct ev_token_bucket_cfg *cfg)
{
    if (!g || !cfg)
        return -1;
    int same_tick = g->cfg.tick_ms == cfg->tick_ms;
    g->cfg = *cfg;
    if (g->b.rd > (ev_ssize_t)cfg->read_burst)
        g->b.rd = (ev_ssize_t)cfg->read_burst;
    if (g->b.wr > (ev_ssize_t)cfg->write_burst)
        g->b.wr = (ev_ssize_t)cfg->write_burst;
    if (!same_tick)
        event_add(&g->refill, &g->cfg.tick);
    return 0;
}

EVX_EXPORT int bufferevent_rate_limit_group_set_min_share(struct bufferevent_rate_limit_group *g,
                                                          size_t share)
{
    if (!g || share > EV_SSIZE_MAX)
        return -1;
    g->min_share = share ? share : 1;
    return 0;
}

EVX_EXPORT void bufferevent_rate_limit_group_free(struct bufferevent_rate_limit_group *g)
{
    if (!g)
        return;
    while (g->members) {
        struct evx_bev *b = g->members->bev;
        group_leave(g->members);
        rl_settle(b);
    }
    event_del(&g->refill);
    evx_free(g);
}

EVX_EXPORT int bufferevent_add_to_rate_limit_group(struct bufferevent *bev,
                                                   struct bufferevent_rate_limit_group *g)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || !g || b->freed)
        return -1;
    struct evx_ratelim *rl = rl_get(b);
    if (!rl)
        return -1;
    if (rl->group == g)
        return 0;
    group_leave(rl);
    rl->group = g;
    rl->next = g->members;
    rl->prev = NULL;
    if (g->members)
        g->members->prev = rl;
    g->members = rl;
    g->n++;
    recompute(b);
    return 0;
}

EVX_EXPORT int bufferevent_remove_from_rate_limit_group(struct bufferevent *bev)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b)
        return -1;
    if (b->rl && b->rl->group) {
        group_leave(b->rl);
        rl_settle(b);
    }
    return 0;
}

EVX_EXPORT ev_ssize_t
bufferevent_rate_limit_group_get_read_limit(struct bufferevent_rate_limit_group *g)
{
    if (!g)
        return -1;
    bucket_refill(&g->b, &g->cfg);
    return g->b.rd;
}

EVX_EXPORT ev_ssize_t
bufferevent_rate_limit_group_get_write_limit(struct bufferevent_rate_limit_group *g)
{
    if (!g)
        return -1;
    bucket_refill(&g->b, &g->cfg);
    return g->b.wr;
}

static int group_decrement(struct bufferevent_rate_limit_group *g, ev_ssize_t decr, int writing)
{
    if (!g)
        return -1;
    bucket_refill(&g->b, &g->cfg);
    *(writing ? &g->b.wr : &g->b.rd) -= decr;
    group_recompute(g);
    return 0;
}

EVX_EXPORT int bufferevent_rate_limit_group_decrement_read(struct bufferevent_rate_limit_group *g,
                                                           ev_ssize_t decr)
{
    return group_decrement(g, decr, 0);
}

EVX_EXPORT int bufferevent_rate_limit_group_decrement_write(struct bufferevent_rate_limit_group *g,
                                                            ev_ssize_t decr)
{
    return group_decrement(g, decr, 1);
}

EVX_EXPORT void bufferevent_rate_limit_group_get_totals(struct bufferevent_rate_limit_group *g,
                                                        ev_uint64_t *total_read_out,
                                                        ev_uint64_t *total_written_out)
{
    if (!g)
        return;
    if (total_read_out)
        *total_read_out = g->total_read;
    if (total_written_out)
        *total_written_out = g->total_written;
}

EVX_EXPORT void bufferevent_rate_limit_group_reset_totals(struct bufferevent_rate_limit_group *g)
{
    if (g)
        g->total_read = g->total_written = 0;
}
