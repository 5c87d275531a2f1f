/* SPDX-License-Identifier: MIT */
/* fs_event watchers on Linux: inotify, one descriptor per loop, made at the first start.
 *
 * What is odd about inotify, and what this file does about it:
 *   - A watch is per inode, not per path or per caller: adding a path whose inode is watched
 *     already returns the same watch descriptor (wd), so the watchers of one wd are a list,
 *     and the watch is removed when the last of them stops. Events still queued for a removed
 *     wd arrive afterwards (with IN_IGNORED last): a wd no watch has is passed by.
 *   - A watched path that goes away says so (IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT) and
 *     the kernel drops the watch (IN_IGNORED); a moved one would go on being watched under
 *     another name, so it is removed here: the caller hears MUX_FS_GONE, its watcher stopped.
 *   - The queue is bounded (fs.inotify.max_queued_events): past it the kernel drops events
 *     and queues one IN_Q_OVERFLOW (wd -1), which every watcher of the loop hears.
 *   - One read returns whole events, each a header and a NUL-padded name. The events of one
 *     iteration are read together (up to a budget) and coalesced: one call per watch and
 *     name, its events or-ed, in the order they first came.
 *   - The descriptor is inherited across fork with the parent's watches: the child makes its
 *     own and adds its watches again, or it would take the parent's events.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "backend/backend.h" /* MUX__KILL_ERRNO_SHIFT */
#include "internal.h"
#include "platform/platform.h"

#define MUX__FSN_MASK                                                                          \
    (IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |           \
     IN_DELETE_SELF | IN_MOVE_SELF)
#define MUX__FSN_READ 65536u /* bytes read per iteration at most: the rest comes at the next */

/* The watchers of one kernel watch. */
struct mux__fsw {
    int wd;
    mux_fs_event_t *head;
};

/* One coalesced event of a batch: a watch (or -1: the overflow) and a name. */
struct mux__fse {
    int wd;
    uint32_t hash;
    uint32_t slot;    /* where the batch's index keeps it */
    const char *name; /* in the batch's buffer; NULL: the watch's own path */
    unsigned events;
};

struct mux__fsn {
    int fd;
    mux_io_t io;             /* a part of the machinery (MUX__W_NOREF), not counted */
    struct mux__fsw *w;      /* sorted by wd, which the kernel hands out in increasing order */
    uint32_t nw, wcap;
    mux_fs_event_t *next;    /* the delivery's next watcher: a stop of it moves this on */
    char *buf;               /* the batch's bytes */
    struct mux__fse *ev;     /* the batch's events, coalesced */
    uint32_t nev;
    uint32_t *slot;          /* index + 1 of an event, by (wd, name) hash */
    uint32_t nslot;          /* a power of two, at least twice the most events a read holds */
};

/* ---- the watches ------------------------------------------------------------------------ */

static struct mux__fsw *mux__fsw_find(struct mux__fsn *n, int wd)
{
    uint32_t lo = 0, hi = n->nw;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (n->w[mid].wd < wd)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n->nw && n->w[lo].wd == wd ? &n->w[lo] : NULL;
}

/* The watch of `wd`, made when there is none: NULL without memory. */
static struct mux__fsw *mux__fsw_get(struct mux__fsn *n, int wd)
{
    struct mux__fsw *f = mux__fsw_find(n, wd);
    if (f)
        return f;
    if (n->nw == n->wcap) {
        uint32_t cap = n->wcap ? n->wcap * 2 : 8;
        struct mux__fsw *v = realloc(n->w, cap * sizeof *v);
        if (!v)
            return NULL;
        n->w = v;
        n->wcap = cap;
    }
    uint32_t i = n->nw;
    while (i > 0 && n->w[i - 1].wd > wd) /* at the end, unless the kernel's ids wrapped */
        i--;
    memmove(&n->w[i + 1], &n->w[i], (n->nw - i) * sizeof *n->w);
    n->nw++;
    n->w[i] = (struct mux__fsw){.wd = wd};
    return &n->w[i];
}

static void mux__fsw_drop(struct mux__fsn *n, struct mux__fsw *f)
{
    uint32_t i = (uint32_t)(f - n->w);
    memmove(&n->w[i], &n->w[i + 1], (n->nw - i - 1) * sizeof *n->w);
    n->nw--;
}

/* Takes `w` off its watch; the watch goes with its last watcher (`alive`: the kernel still
 * has it, and is told). */
static void mux__fs_detach(struct mux__loop *loop, mux_fs_event_t *w, int alive)
{
    struct mux__fsn *n = loop->fsn;
    struct mux__fsw *f = mux__fsw_find(n, w->wd_);
    if (n->next == w)
        n->next = w->next_;
    if (f) {
        mux_fs_event_t **pp = &f->head;
        while (*pp && *pp != w)
            pp = &(*pp)->next_;
        if (*pp)
            *pp = w->next_;
        if (!f->head) {
            if (alive)
                inotify_rm_watch(n->fd, f->wd);
            mux__fsw_drop(n, f);
        }
    }
    w->next_ = NULL;
    w->wd_ = -1;
    mux__deactivate(loop, &w->h_);
}

/* ---- reading and delivering --------------------------------------------------------------- */

static uint32_t mux__fse_hash(int wd, const char *name)
{
    uint32_t h = 2166136261u ^ (uint32_t)wd;
    for (const char *p = name; p && *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h | 1; /* never 0 */
}

static int mux__fse_same(const struct mux__fse *e, int wd, uint32_t hash, const char *name)
{
    if (e->wd != wd || e->hash != hash)
        return 0;
    return e->name == name || (e->name && name && strcmp(e->name, name) == 0);
}

/* Adds an event to the batch, or its bits to the batch's event of the same watch and name. */
static void mux__fse_add(struct mux__fsn *n, int wd, const char *name, unsigned events)
{
    uint32_t hash = mux__fse_hash(wd, name), mask = n->nslot - 1;
    uint32_t i = hash & mask;
    while (n->slot[i]) {
        struct mux__fse *e = &n->ev[n->slot[i] - 1];
        if (mux__fse_same(e, wd, hash, name)) {
            e->events |= events;
            return;
        }
        i = (i + 1) & mask;
    }
    n->ev[n->nev] = (struct mux__fse){wd, hash, i, name, events};
    n->slot[i] = ++n->nev;
}

/* Empties the batch: only the slots its events took are cleared. */
static void mux__fse_clear(struct mux__fsn *n)
{
    for (uint32_t i = 0; i < n->nev; i++)
        n->slot[n->ev[i].slot] = 0;
    n->nev = 0;
}

static unsigned mux__fs_bits(uint32_t mask)
{
    unsigned ev = 0;
    if (mask & IN_MODIFY)
        ev |= MUX_FS_CHANGE;
    if (mask & IN_ATTRIB)
        ev |= MUX_FS_ATTRIB;
    if (mask & IN_CREATE)
        ev |= MUX_FS_CREATE;
    if (mask & IN_DELETE)
        ev |= MUX_FS_DELETE;
    if (mask & (IN_MOVED_FROM | IN_MOVED_TO))
        ev |= MUX_FS_RENAME;
    if (mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED))
        ev |= MUX_FS_GONE;
    return ev;
}

/* Reads what the kernel has (one read's worth) into the batch. Returns the bytes read, or a
 * negative errno when reading failed (other than EAGAIN). */
static ssize_t mux__fsn_read(struct mux__fsn *n)
{
    ssize_t r;
    do
        r = read(n->fd, n->buf, MUX__FSN_READ);
    while (r < 0 && errno == EINTR);
    mux__fse_clear(n);
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return -errno;
    size_t len = r > 0 ? (size_t)r : 0; /* else EAGAIN: nothing, or taken already */
    for (size_t off = 0; off + sizeof(struct inotify_event) <= len;) {
        struct inotify_event *ie = (struct inotify_event *)(n->buf + off);
        off += sizeof *ie + ie->len;
        if (ie->mask & IN_Q_OVERFLOW) {
            mux__fse_add(n, -1, NULL, MUX_FS_OVERFLOW);
            continue;
        }
        unsigned ev = mux__fs_bits(ie->mask);
        if (ev)
            mux__fse_add(n, ie->wd, ie->len ? ie->name : NULL, ev);
    }
    return (ssize_t)len;
}

/* The last component of a watcher's path: the name of an event on the path itself. */
static const char *mux__fs_base(const mux_fs_event_t *w)
{
    const char *p = w->path_ + strlen(w->path_);
    while (p > w->path_ && p[-1] == '/') /* "dir/" */
        p--;
    const char *end = p;
    while (p > w->path_ && p[-1] != '/')
        p--;
    return p < end ? p : w->path_;
}

/* Calls the watchers of one watch for one event. A callback may stop or start any watcher,
 * so the next one is kept where a stop moves it on (n->next). */
static void mux__fs_deliver(struct mux__loop *loop, struct mux__fsw *f, const struct mux__fse *e)
{
    struct mux__fsn *n = loop->fsn;
    int wd = f->wd, gone = (e->events & MUX_FS_GONE) != 0;
    if (gone) /* the kernel is done with it, or it watches a path that moved: let go now */
        inotify_rm_watch(n->fd, wd);
    for (mux_fs_event_t *w = f->head; w; w = n->next) {
        n->next = w->next_;
        char base[256];
        const char *name = e->name;
        if (!name) { /* its own path: the name may be longer than fits, then it is cut */
            size_t k = strlen(mux__fs_base(w));
            k = k < sizeof base - 1 ? k : sizeof base - 1;
            memcpy(base, mux__fs_base(w), k);
            base[k] = 0;
            name = base;
        }
        if (gone)
            mux__fs_detach(loop, w, 0);
        w->cb_(loop->pub, w, name, e->events, 0);
    }
}

static void mux__fsn_fail(struct mux__loop *loop, int err);

static void mux__fsn_cb(mux_loop_t *pub, mux_io_t *io, unsigned revents)
{
    (void)io;
    struct mux__loop *loop = mux__loop_of(pub);
    struct mux__fsn *n = loop->fsn;
    if (revents & MUX_ERROR) { /* the backend refused the descriptor: watching has ended */
        int err = (int)(revents >> MUX__KILL_ERRNO_SHIFT);
        mux__fsn_fail(loop, err ? -err : -EIO);
        return;
    }
    ssize_t r = mux__fsn_read(n);
    if (r < 0) {
        mux__fsn_fail(loop, (int)r);
        return;
    }
    if (r == 0)
        return;
    for (uint32_t i = 0; i < n->nev && loop->fsn; i++) {
        struct mux__fse e = n->ev[i];
        if (e.wd >= 0) {
            struct mux__fsw *f = mux__fsw_find(n, e.wd);
            if (f) /* else removed since: its events are stale */
                mux__fs_deliver(loop, f, &e);
            continue;
        }
        /* The overflow: every watcher hears it once, the watches in turn. Stops and starts
         * in a callback move the array: it is searched again by wd each time. */
        for (int wd = 0;;) {
            uint32_t k = 0;
            while (k < n->nw && n->w[k].wd <= wd)
                k++;
            if (k == n->nw)
                break;
            wd = n->w[k].wd;
            mux__fs_deliver(loop, &n->w[k], &e);
        }
    }
}

/* Watching failed: every watcher is stopped, then told `err`, and the loop's descriptor goes
 * (the next start makes a new one). A callback may start watchers again: those are on the
 * new descriptor, and are not told. */
static void mux__fsn_fail(struct mux__loop *loop, int err)
{
    struct mux__fsn *n = loop->fsn;
    mux_fs_event_t *all = NULL;
    for (uint32_t i = 0; i < n->nw; i++)
        for (mux_fs_event_t *w = n->w[i].head, *next; w; w = next) {
            next = w->next_;
            w->next_ = all;
            all = w;
            w->wd_ = -1;
            mux__deactivate(loop, &w->h_);
        }
    n->nw = 0;
    mux__fsn_close(loop);
    for (mux_fs_event_t *w = all, *next; w; w = next) {
        next = w->next_;
        w->next_ = NULL;
        if (!(w->h_.flags & MUX__W_ACTIVE)) /* not started again by a callback before */
            w->cb_(loop->pub, w, mux__fs_base(w), 0, err);
    }
}

/* ---- the loop's descriptor ------------------------------------------------------------------ */

static int mux__fsn_watch(struct mux__loop *loop, struct mux__fsn *n)
{
    mux_io_init(&n->io, mux__fsn_cb, n->fd, MUX_READ);
    n->io.h_.flags |= MUX__W_NOREF; /* the watchers count, not their machinery */
    return mux__io_start_internal(loop, &n->io);
}

int mux__fsn_open(struct mux__loop *loop)
{
    struct mux__fsn *n = calloc(1, sizeof *n);
    if (!n)
        return -ENOMEM;
    n->nslot = 2 * (MUX__FSN_READ / sizeof(struct inotify_event)); /* twice the most events */
    n->buf = malloc(MUX__FSN_READ);
    n->ev = malloc(n->nslot / 2 * sizeof *n->ev);
    n->slot = calloc(n->nslot, sizeof *n->slot);
    int err = -ENOMEM;
    if (n->buf && n->ev && n->slot) {
        n->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        err = n->fd < 0 ? -errno : 0;
    }
    if (err == 0 && (err = mux__fsn_watch(loop, n)) != 0)
        close(n->fd);
    if (err != 0) {
        free(n->buf);
        free(n->ev);
        free(n->slot);
        free(n);
        return err;
    }
    loop->fsn = n;
    return 0;
}

void mux__fsn_close(struct mux__loop *loop)
{
    struct mux__fsn *n = loop->fsn;
    if (!n)
        return;
    if (n->io.h_.flags & MUX__W_ACTIVE)
        mux__io_stop_internal(loop, &n->io);
    close(n->fd);
    free(n->w);
    free(n->buf);
    free(n->ev);
    free(n->slot);
    free(n);
    loop->fsn = NULL;
}

/* In a child after fork: a descriptor of its own, and its watches added again. A path that
 * went away meanwhile is reported gone. */
int mux__fsn_fork(struct mux__loop *loop)
{
    struct mux__fsn *n = loop->fsn;
    if (!n)
        return 0;
    if (n->io.h_.flags & MUX__W_ACTIVE)
        mux__io_stop_internal(loop, &n->io);
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0)
        return -errno;
    close(n->fd);
    n->fd = fd;
    struct mux__fsw *old = n->w;
    uint32_t nold = n->nw;
    n->w = NULL;
    n->nw = n->wcap = 0;
    mux_fs_event_t *gone = NULL;
    for (uint32_t i = 0; i < nold; i++)
        for (mux_fs_event_t *w = old[i].head, *next; w; w = next) {
            next = w->next_;
            int wd = inotify_add_watch(fd, w->path_, MUX__FSN_MASK);
            struct mux__fsw *f = wd >= 0 ? mux__fsw_get(n, wd) : NULL;
            if (f) {
                w->wd_ = wd;
                w->next_ = f->head;
                f->head = w;
            } else { /* gone, or no memory: stopped, and said so below */
                w->next_ = gone;
                gone = w;
            }
        }
    free(old);
    int err = mux__fsn_watch(loop, n);
    for (mux_fs_event_t *w = gone, *next; w; w = next) {
        next = w->next_;
        w->next_ = NULL;
        w->wd_ = -1;
        mux__deactivate(loop, &w->h_);
        w->cb_(loop->pub, w, mux__fs_base(w), MUX_FS_GONE, 0);
    }
    return err;
}

void mux__fsn_walk(struct mux__loop *loop, void (*add)(void *ctx, struct mux__whdr *h), void *ctx)
{
    struct mux__fsn *n = loop->fsn;
    for (uint32_t i = 0; n && i < n->nw; i++)
        for (mux_fs_event_t *w = n->w[i].head; w; w = w->next_)
            add(ctx, &w->h_);
}

/* ---- the watchers ------------------------------------------------------------------------ */

MUX_EXPORT int mux_fs_event_start(mux_loop_t *pub, mux_fs_event_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    int err = mux__fs_event_begin(loop, w);
    if (err != 0)
        return err;
    struct mux__fsn *n = loop->fsn;
    int wd = inotify_add_watch(n->fd, w->path_, MUX__FSN_MASK);
    if (wd < 0)
        return -errno;
    struct mux__fsw *f = mux__fsw_get(n, wd);
    if (!f) {
        if (!mux__fsw_find(n, wd))
            inotify_rm_watch(n->fd, wd);
        return -ENOMEM;
    }
    mux__fs_event_join(loop, &f->head, w, wd);
    return 0;
}

MUX_EXPORT int mux_fs_event_stop(mux_loop_t *pub, mux_fs_event_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_FS_EVENT)
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        mux__fs_detach(loop, w, 1);
    return 0;
}
