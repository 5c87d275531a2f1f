/* SPDX-License-Identifier: MIT */
/* mux_loop_walk: every active watcher of a loop and every open handle of the layers above
 * (streams, listeners, channels), for a program that wants to close them all at shutdown;
 * and the registry of those layers' kinds of handle (struct mux__handles, internal.h).
 *
 * The handles are gathered first, from the structures the loop already keeps (the fd table's
 * watcher lists, the two heaps, the signal and child lists, the hook lists, and the lists of
 * open handles the layers above registered), and the callback runs afterwards for each one
 * that is still active: it may stop or close what it is given, and that changes those
 * structures under a walk that read them directly. The watchers that are parts of an upper
 * layer's handles (MUX__W_NOREF) and the loop's own (MUX__W_INTERNAL) are not handles of the
 * caller's and are left out.
 */
#include <stdlib.h>

#include "internal.h"

/* Every watcher type starts with `data` and then its header, so one offset turns a header
 * into the watcher the caller knows. */
#define MUX__WHDR_OFF offsetof(mux_io_t, h_)
_Static_assert(
    offsetof(mux_timer_t, h_) == MUX__WHDR_OFF && offsetof(mux_periodic_t, h_) == MUX__WHDR_OFF &&
        offsetof(mux_signal_t, h_) == MUX__WHDR_OFF && offsetof(mux_child_t, h_) == MUX__WHDR_OFF &&
        offsetof(mux_idle_t, h_) == MUX__WHDR_OFF && offsetof(mux_prepare_t, h_) == MUX__WHDR_OFF &&
        offsetof(mux_check_t, h_) == MUX__WHDR_OFF && offsetof(mux_fork_t, h_) == MUX__WHDR_OFF &&
        offsetof(mux_async_t, h_) == MUX__WHDR_OFF &&
        offsetof(mux_cleanup_t, h_) == MUX__WHDR_OFF &&
        offsetof(mux_fs_event_t, h_) == MUX__WHDR_OFF &&
        offsetof(mux_fs_poll_t, h_) == MUX__WHDR_OFF,
    "every watcher's header follows its data pointer");

struct mux__walk {
    struct mux__walked {
        int kind;
        void *handle;
        int (*walkable)(const void *handle); /* an upper layer's handle; NULL: a watcher */
    } * v;
    size_t n, cap;
    int err;
};

static void mux__walk_add(struct mux__walk *w, int kind, void *handle,
                          int (*walkable)(const void *handle))
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        struct mux__walked *v = realloc(w->v, cap * sizeof *v);
        if (!v) {
            w->err = -ENOMEM;
            return;
        }
        w->v = v;
        w->cap = cap;
    }
    w->v[w->n++] = (struct mux__walked){kind, handle, walkable};
}

/* A watcher of the caller's (not a part of an upper layer's handle, not the loop's own). */
static void mux__walk_watcher(struct mux__walk *w, struct mux__whdr *h)
{
    if ((h->flags & MUX__W_ACTIVE) && !(h->flags & (MUX__W_NOREF | MUX__W_INTERNAL)))
        mux__walk_add(w, h->type, (char *)h - MUX__WHDR_OFF, NULL);
}

static void mux__walk_fs_add(void *ctx, struct mux__whdr *h)
{
    mux__walk_watcher(ctx, h);
}

static void mux__walk_gather(struct mux__loop *loop, struct mux__walk *w)
{
    for (uint32_t i = 0; i < loop->nleaves; i++)
        if (loop->fdl[i])
            for (uint32_t k = 0; k < MUX__FD_LEAF; k++)
                for (mux_io_t *io = loop->fdl[i][k].head; io; io = io->next_)
                    mux__walk_watcher(w, &io->h_);
    for (uint32_t i = 0; i < loop->timers.n; i++)
        mux__walk_watcher(w, &mux__container_of(loop->timers.v[i].link, mux_timer_t, hl_)->h_);
    for (uint32_t i = 0; i < loop->periodics.n; i++)
        mux__walk_watcher(w,
                          &mux__container_of(loop->periodics.v[i].link, mux_periodic_t, hl_)->h_);
    for (int signum = 1; signum < (int)(sizeof loop->sig_head / sizeof loop->sig_head[0]); signum++)
        for (mux_signal_t *s = loop->sig_head[signum]; s; s = s->next_)
            mux__walk_watcher(w, &s->h_);
    for (mux_child_t *c = loop->children; c; c = c->next_)
        mux__walk_watcher(w, &c->h_);
    struct mux__hooklist *hooks[] = {&loop->idles, &loop->prepares, &loop->checks, &loop->forks,
                                     &loop->asyncs, &loop->fs_polls};
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
        for (struct mux__link *k = hooks[i]->anchor.next; k != &hooks[i]->anchor; k = k->next)
            mux__walk_watcher(w, mux__hook_hdr(hooks[i], k));
    mux__fsn_walk(loop, mux__walk_fs_add, w);
    for (struct mux__handles *hs = loop->handles; hs; hs = hs->next) {
        const struct mux__handles_type *t = hs->type;
        for (struct mux__link *k = hs->open.next; k != &hs->open; k = k->next) {
            void *handle = (char *)k - t->link_off;
            if (t->walkable(handle))
                mux__walk_add(w, t->kind, handle, t->walkable);
        }
    }
}

/* Whether a gathered handle is still one to report: a callback before may have stopped or
 * closed it. */
static int mux__walk_still(const struct mux__walked *h)
{
    if (h->walkable)
        return h->walkable(h->handle);
    const struct mux__whdr *hdr = (const struct mux__whdr *)((char *)h->handle + MUX__WHDR_OFF);
    return (hdr->flags & MUX__W_ACTIVE) != 0;
}

MUX_EXPORT int mux_loop_walk(mux_loop_t *pub, mux_walk_cb cb, void *arg)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !cb)
        return -EINVAL;
    struct mux__walk w = {0};
    mux__walk_gather(loop, &w);
    int calls = 0;
    if (w.err == 0)
        for (size_t i = 0; i < w.n; i++)
            if (mux__walk_still(&w.v[i])) {
                cb(pub, w.v[i].kind, w.v[i].handle, arg);
                calls++;
            }
    free(w.v);
    return w.err ? w.err : calls;
}

/* ---- the kinds of handle of the layers above ----------------------------------------- */

struct mux__handles *mux__handles_get(struct mux__loop *loop, const struct mux__handles_type *type)
{
    struct mux__handles *h = mux__handles_find(loop, type);
    if (h)
        return h;
    h = calloc(1, type->size);
    if (!h)
        return NULL;
    h->type = type;
    mux__link_init(&h->open);
    h->next = loop->handles;
    loop->handles = h;
    return h;
}

void mux__handles_free(struct mux__loop *loop)
{
    for (struct mux__handles *h = loop->handles, *next; h; h = next) {
        next = h->next;
        free(h);
    }
    loop->handles = NULL;
}

/* ---- references: what keeps mux_run going ------------------------------------------------ */

/* Kinds of handle that are watchers (their header follows their data pointer). */
static int mux__watcher_kind(int kind)
{
    return (kind >= MUX_HANDLE_IO && kind <= MUX_HANDLE_ASYNC) || kind == MUX_HANDLE_FS_EVENT ||
           kind == MUX_HANDLE_FS_POLL;
}

/* The flags word of a handle of `kind` on `loop` (a watcher's header, or an upper layer's
 * handle's word), and in *counted whether it counts in the loop's active now; NULL for a kind
 * the loop does not know or a watcher never initialised as that kind. */
static void *mux__ref_flags(struct mux__loop *loop, int kind, void *handle, int *counted)
{
    if (mux__watcher_kind(kind)) {
        struct mux__whdr *h = (struct mux__whdr *)((char *)handle + MUX__WHDR_OFF);
        if (h->type != kind || (h->flags & (MUX__W_NOREF | MUX__W_INTERNAL)))
            return NULL;
        *counted = (h->flags & MUX__W_ACTIVE) != 0;
        return h;
    }
    for (struct mux__handles *hs = loop->handles; hs; hs = hs->next)
        if (hs->type->kind == kind && hs->type->flags_off) { /* 0: `data`, no flags word */
            unsigned *flags = (unsigned *)((char *)handle + hs->type->flags_off);
            *counted = (*flags & MUX__H_COUNTED) != 0;
            return *counted ? flags : NULL; /* an upper layer's handle: only while open */
        }
    return NULL;
}

/* Sets whether `handle` is referenced; 0 or -EINVAL. */
static int mux__ref_set(mux_loop_t *pub, int kind, void *handle, int ref)
{
    struct mux__loop *loop = mux__loop_of(pub);
    int counted = 0;
    void *f = loop && handle ? mux__ref_flags(loop, kind, handle, &counted) : NULL;
    if (!f)
        return -EINVAL;
    int was_ref;
    if (mux__watcher_kind(kind)) {
        struct mux__whdr *h = f;
        was_ref = !(h->flags & MUX__W_UNREF);
        h->flags = (uint8_t)(ref ? h->flags & ~MUX__W_UNREF : h->flags | MUX__W_UNREF);
    } else {
        unsigned *flags = f;
        was_ref = !(*flags & MUX__H_UNREF);
        *flags = ref ? *flags & ~MUX__H_UNREF : *flags | MUX__H_UNREF;
    }
    if (counted && was_ref != ref)
        loop->unrefd += ref ? (uint32_t)-1 : 1u;
    return 0;
}

MUX_EXPORT int mux_ref(mux_loop_t *loop, int kind, void *handle)
{
    return mux__ref_set(loop, kind, handle, 1);
}

MUX_EXPORT int mux_unref(mux_loop_t *loop, int kind, void *handle)
{
    return mux__ref_set(loop, kind, handle, 0);
}

MUX_EXPORT int mux_has_ref(mux_loop_t *pub, int kind, void *handle)
{
    struct mux__loop *loop = mux__loop_of(pub);
    int counted = 0;
    void *f = loop && handle ? mux__ref_flags(loop, kind, handle, &counted) : NULL;
    if (!f)
        return -EINVAL;
    if (mux__watcher_kind(kind))
        return !(((struct mux__whdr *)f)->flags & MUX__W_UNREF);
    return !(*(unsigned *)f & MUX__H_UNREF);
}
