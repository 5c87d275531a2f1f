/* SPDX-License-Identifier: MIT */
/* fs_event watchers on kqueue (the BSDs, macOS): EVFILT_VNODE, in one kqueue per loop made at
 * the first start and kept apart from the loop's backend, so that it works whatever backend
 * the loop runs. On Linux it is built against libkqueue in the portable build, for the tests.
 *
 * What is odd about EVFILT_VNODE, and what this file does about it:
 *   - A watch is a registration of an open descriptor: the path is opened (read-only, or
 *     O_EVTONLY where there is one, so that the watch does not hold a volume busy). Watchers
 *     of one file or directory (by device and inode) share one descriptor and registration,
 *     and are called in start order.
 *   - The kernel names nothing. A watched file's own changes are bits (NOTE_WRITE,
 *     NOTE_ATTRIB, ...), reported with the file's name. A directory says only that its
 *     entries changed (NOTE_WRITE): it is read again and compared with what was read before,
 *     by name and inode, which gives each created, removed and renamed entry by name. A
 *     change to an entry's contents or attributes does not change the directory, so it is
 *     not reported (a watcher of the file itself hears it), and an entry created and removed
 *     between two reads is never seen: no overflow can be told, as no queue overflows.
 *   - The watched path removed, renamed or revoked (NOTE_DELETE, NOTE_RENAME, NOTE_REVOKE)
 *     is MUX_FS_GONE: the watcher is stopped, as on inotify.
 *   - Registrations are EV_CLEAR: the changes between two looks come as one event per watch,
 *     which is how they are coalesced. Each look takes what the queue has with a timeout of
 *     0, first every watch's bits, then the calls, watch by watch.
 *   - A kqueue is not inherited by fork: the child makes its own and registers the same
 *     descriptors again (inherited), and never closes the parent's number.
 *   - The loop looks when the queue's descriptor is readable (an io watcher). libkqueue's
 *     descriptor never is (it is a pipe's write end, and the events are in an epoll set of its
 *     own), so against libkqueue the loop looks on a timer (MUX__FSK_TICK_NS) while a watch
 *     exists; the rest is the same code.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/event.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h" /* MUX__KILL_ERRNO_SHIFT */
#include "internal.h"

#ifndef NOTE_REVOKE
#define NOTE_REVOKE 0 /* libkqueue has none */
#endif
#ifdef O_EVTONLY
#define MUX__FSK_OPEN O_EVTONLY /* macOS: an fd for events only */
#else
#define MUX__FSK_OPEN O_RDONLY
#endif
#define MUX__FSK_NOTES                                                                         \
    (NOTE_DELETE | NOTE_WRITE | NOTE_EXTEND | NOTE_ATTRIB | NOTE_LINK | NOTE_RENAME | NOTE_REVOKE)
#define MUX__FSK_GONE (NOTE_DELETE | NOTE_RENAME | NOTE_REVOKE)
#define MUX__FSK_BATCH 64

#ifdef LIBKQUEUE
#define MUX__FSK_TICK_NS 10000000u /* libkqueue's queue cannot be polled: looked at so often */
/* Exported by libkqueue but not declared in its header: frees the kqueues closed so far. */
void libkqueue_drain_pending_close(void) __attribute__((weak));
#endif

/* A directory's entry, as read: its name (in the listing's blob) and inode. */
struct mux__fsk_ent {
    const char *name;
    size_t off; /* the name's place in the blob while it grows */
    ino_t ino;
};

struct mux__fsk_list {
    struct mux__fsk_ent *e;
    size_t n;
    char *blob;
};

/* One registration: a watched file or directory, and its watchers. */
struct mux__fsw {
    int fd;
    int dir;
    uint32_t id; /* the registration's udata: events of a dropped one are passed by */
    dev_t dev;
    ino_t ino;
    unsigned got; /* the NOTE_* bits of this look */
    int dead;     /* dropped while its events were told: freed after */
    mux_fs_event_t *head;
    struct mux__fsk_list list; /* a directory's entries, sorted by name */
};

struct mux__fsn {
    int kq;
    uint32_t next_id;
    struct mux__fsw **w; /* in start order */
    uint32_t nw, wcap;
    mux_fs_event_t *next;  /* the delivery's next watcher: a stop of it moves this on */
    struct mux__fsw *busy; /* the watch whose events are being told */
#ifdef MUX__FSK_TICK_NS
    mux_timer_t tick; /* a part of the machinery (MUX__W_NOREF), not counted */
#else
    mux_io_t io; /* the same */
#endif
};

/* ---- a directory's listing ---------------------------------------------------------------- */

static void mux__fsk_list_free(struct mux__fsk_list *l)
{
    free(l->e);
    free(l->blob);
    *l = (struct mux__fsk_list){0};
}

static int mux__fsk_by_name(const void *a, const void *b)
{
    return strcmp(((const struct mux__fsk_ent *)a)->name, ((const struct mux__fsk_ent *)b)->name);
}

/* Appends one entry. 0 or -ENOMEM. */
static int mux__fsk_list_add(struct mux__fsk_list *l, size_t *ecap, size_t *used, size_t *bcap,
                             const char *name, ino_t ino)
{
    size_t len = strlen(name) + 1;
    if (*used + len > *bcap) {
        size_t cap = *bcap * 2 > *used + len ? *bcap * 2 : *used + len + 256;
        char *b = realloc(l->blob, cap);
        if (!b)
            return -ENOMEM;
        l->blob = b;
        *bcap = cap;
    }
    if (l->n == *ecap) {
        size_t cap = *ecap ? *ecap * 2 : 16;
        struct mux__fsk_ent *e = realloc(l->e, cap * sizeof *e);
        if (!e)
            return -ENOMEM;
        l->e = e;
        *ecap = cap;
    }
    memcpy(l->blob + *used, name, len);
    l->e[l->n++] = (struct mux__fsk_ent){.off = *used, .ino = ino};
    *used += len;
    return 0;
}

/* Reads the directory open as `fd` (through a descriptor of its own, so that it is read even
 * after a rename) into *l, sorted by name. 0 or a negative errno. */
static int mux__fsk_list_read(int fd, struct mux__fsk_list *l)
{
    *l = (struct mux__fsk_list){0};
    int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    DIR *d = fdopendir(dfd);
    if (!d) {
        int err = -errno;
        close(dfd);
        return err;
    }
    size_t ecap = 0, used = 0, bcap = 0;
    int err = 0;
    struct dirent *de;
    while (err == 0 && (errno = 0, de = readdir(d)) != NULL) {
        const char *s = de->d_name;
        if (s[0] == '.' && (s[1] == 0 || (s[1] == '.' && s[2] == 0)))
            continue;
        err = mux__fsk_list_add(l, &ecap, &used, &bcap, s, de->d_ino);
    }
    if (err == 0 && errno != 0)
        err = -errno;
    closedir(d);
    if (err != 0) {
        mux__fsk_list_free(l);
        return err;
    }
    for (size_t i = 0; i < l->n; i++)
        l->e[i].name = l->blob + l->e[i].off;
    if (l->n > 1)
        qsort(l->e, l->n, sizeof *l->e, mux__fsk_by_name);
    return 0;
}

/* ---- the watches -------------------------------------------------------------------------- */

static struct mux__fsw *mux__fsw_by_id(struct mux__fsn *n, uint32_t id)
{
    for (uint32_t i = 0; i < n->nw; i++)
        if (n->w[i]->id == id)
            return n->w[i];
    return NULL;
}

static int mux__fsk_register(struct mux__fsn *n, struct mux__fsw *f, unsigned short flags)
{
    struct kevent kev;
    EV_SET(&kev, (uintptr_t)f->fd, EVFILT_VNODE, flags, MUX__FSK_NOTES, 0,
           (void *)(uintptr_t)f->id);
    /* An interrupted call applied its change before it was interrupted. */
    if (kevent(n->kq, &kev, 1, NULL, 0, NULL) != 0 && errno != EINTR)
        return -errno;
    return 0;
}

static void mux__fsw_free(struct mux__fsw *f)
{
    mux__fsk_list_free(&f->list);
    free(f);
}

/* The registration goes (deleted before the close: libkqueue keeps it otherwise), and the
 * watch with it, or after its delivery when that is under way. */
static void mux__fsw_drop(struct mux__loop *loop, struct mux__fsw *f)
{
    struct mux__fsn *n = loop->fsn;
    (void)mux__fsk_register(n, f, EV_DELETE); /* an error: gone with the file already */
    close(f->fd);
    f->fd = -1;
    uint32_t i = 0;
    while (i < n->nw && n->w[i] != f)
        i++;
    if (i < n->nw) {
        memmove(&n->w[i], &n->w[i + 1], (n->nw - i - 1) * sizeof *n->w);
        n->nw--;
    }
    if (n->busy == f)
        f->dead = 1;
    else
        mux__fsw_free(f);
#ifdef MUX__FSK_TICK_NS
    if (n->nw == 0)
        mux_timer_stop(loop->pub, &n->tick); /* nothing to look at */
#endif
}

/* Takes `w` off its watch; the watch goes with its last watcher. */
static void mux__fsk_detach(struct mux__loop *loop, mux_fs_event_t *w)
{
    struct mux__fsn *n = loop->fsn;
    struct mux__fsw *f = mux__fsw_by_id(n, (uint32_t)w->wd_);
    if (n->next == w)
        n->next = w->next_;
    if (f) {
        mux_fs_event_t **pp = &f->head;
        while (*pp && *pp != w)
            pp = &(*pp)->next_;
        if (*pp)
            *pp = w->next_;
        if (!f->head)
            mux__fsw_drop(loop, f);
    }
    w->next_ = NULL;
    w->wd_ = -1;
    mux__deactivate(loop, &w->h_);
}

/* ---- telling ------------------------------------------------------------------------------ */

/* The last component of a watcher's path, copied (a callback may free the path): the name of
 * an event on the path itself. */
static const char *mux__fsk_base(const mux_fs_event_t *w, char *buf, size_t cap)
{
    const char *p = w->path_ + strlen(w->path_);
    while (p > w->path_ && p[-1] == '/') /* "dir/" */
        p--;
    const char *end = p;
    while (p > w->path_ && p[-1] != '/')
        p--;
    if (p == end) /* "/" */
        p = w->path_, end = p + strlen(p);
    size_t k = (size_t)(end - p) < cap - 1 ? (size_t)(end - p) : cap - 1;
    memcpy(buf, p, k);
    buf[k] = 0;
    return buf;
}

/* Calls the watchers of `f` for one event (name NULL: the watched path's own). A callback may
 * stop or start any watcher: the next one is kept where a stop moves it on (n->next). */
static void mux__fsk_tell(struct mux__loop *loop, struct mux__fsw *f, const char *name,
                          unsigned events, int status)
{
    struct mux__fsn *n = loop->fsn;
    for (mux_fs_event_t *w = f->head; w; w = n->next) {
        n->next = w->next_;
        char base[256];
        const char *nm = name ? name : mux__fsk_base(w, base, sizeof base);
        if ((events & MUX_FS_GONE) || status != 0)
            mux__fsk_detach(loop, w);
        w->cb_(loop->pub, w, nm, events, status);
    }
    n->next = NULL;
}

/* What a directory's two listings differ by, per name: an entry that went, one that came, or
 * both (replaced). An inode that went under one name and came under another is a rename. */
struct mux__fsk_chg {
    const char *name;
    ino_t went, came;
    unsigned char how; /* 1: went, 2: came */
};

static int mux__fsk_by_ino(const void *a, const void *b)
{
    ino_t x = *(const ino_t *)a, y = *(const ino_t *)b;
    return x < y ? -1 : x > y;
}

static int mux__fsk_has(const ino_t *v, size_t n, ino_t ino)
{
    return n && bsearch(&ino, v, n, sizeof *v, mux__fsk_by_ino) != NULL;
}

/* The changes from old to new, in name order, into *out (*nout of them). 0 or -ENOMEM. */
static int mux__fsk_diff(const struct mux__fsk_list *old, const struct mux__fsk_list *new,
                         struct mux__fsk_chg **out, size_t *nout, ino_t **inos)
{
    size_t cap = old->n + new->n, k = 0, i = 0, j = 0;
    struct mux__fsk_chg *c = malloc((cap ? cap : 1) * sizeof *c);
    ino_t *v = malloc((cap ? cap : 1) * sizeof *v);
    if (!c || !v) {
        free(c);
        free(v);
        return -ENOMEM;
    }
    while (i < old->n || j < new->n) {
        int cmp = i == old->n ? 1 : j == new->n ? -1 : strcmp(old->e[i].name, new->e[j].name);
        if (cmp == 0 && old->e[i].ino == new->e[j].ino) {
            i++, j++;
            continue;
        }
        struct mux__fsk_chg ch = {.name = cmp <= 0 ? old->e[i].name : new->e[j].name};
        if (cmp <= 0)
            ch.went = old->e[i++].ino, ch.how |= 1;
        if (cmp >= 0)
            ch.came = new->e[j++].ino, ch.how |= 2;
        c[k++] = ch;
    }
    *out = c;
    *nout = k;
    *inos = v;
    return 0;
}

/* A directory read again and compared: each entry that changed told by name. Returns 0, or a
 * negative errno when it could not be read (the listing is kept). */
static int mux__fsk_reread(struct mux__loop *loop, struct mux__fsw *f)
{
    struct mux__fsk_list now;
    int err = mux__fsk_list_read(f->fd, &now);
    struct mux__fsk_chg *c = NULL;
    ino_t *v = NULL;
    size_t nc = 0;
    if (err == 0 && (err = mux__fsk_diff(&f->list, &now, &c, &nc, &v)) != 0)
        mux__fsk_list_free(&now);
    if (err != 0)
        return err;
    /* The inodes that went first, then those that came, each part sorted for the look-ups. */
    size_t nwent = 0, ncame = 0;
    for (size_t i = 0; i < nc; i++)
        if (c[i].how & 1)
            v[nwent++] = c[i].went;
    for (size_t i = 0; i < nc; i++)
        if (c[i].how & 2)
            v[nwent + ncame++] = c[i].came;
    qsort(v, nwent, sizeof *v, mux__fsk_by_ino);
    qsort(v + nwent, ncame, sizeof *v, mux__fsk_by_ino);
    /* The old listing's names are told, so it is freed only after. */
    struct mux__fsk_list old = f->list;
    f->list = now;
    for (size_t i = 0; i < nc && !f->dead; i++) {
        unsigned ev = 0;
        if (c[i].how & 1)
            ev |= mux__fsk_has(v + nwent, ncame, c[i].went) ? MUX_FS_RENAME : MUX_FS_DELETE;
        if (c[i].how & 2)
            ev |= mux__fsk_has(v, nwent, c[i].came) ? MUX_FS_RENAME : MUX_FS_CREATE;
        mux__fsk_tell(loop, f, c[i].name, ev, 0);
    }
    mux__fsk_list_free(&old);
    free(c);
    free(v);
    return 0;
}

/* Tells what one look found for one watch. */
static void mux__fsk_watch_events(struct mux__loop *loop, struct mux__fsw *f)
{
    struct mux__fsn *n = loop->fsn;
    unsigned got = f->got, own = 0;
    f->got = 0;
    if (got & MUX__FSK_GONE)
        own |= MUX_FS_GONE;
    if (!f->dir && (got & (NOTE_WRITE | NOTE_EXTEND)))
        own |= MUX_FS_CHANGE;
    if ((got & NOTE_ATTRIB) || (!f->dir && (got & NOTE_LINK)))
        own |= MUX_FS_ATTRIB; /* a file's link count is its metadata, as on inotify */
    n->busy = f;
    if (f->dir && (got & (NOTE_WRITE | NOTE_EXTEND | NOTE_LINK))) {
        int err = mux__fsk_reread(loop, f);
        if (err != 0 && !(own & MUX_FS_GONE) && !f->dead)
            mux__fsk_tell(loop, f, NULL, 0, err); /* watching it has ended */
    }
    if (own && !f->dead)
        mux__fsk_tell(loop, f, NULL, own, 0);
    n->busy = NULL;
    if (f->dead)
        mux__fsw_free(f);
}

static void mux__fsk_fail(struct mux__loop *loop, int err);

/* A look: every event the queue has, its bits gathered per watch, then told watch by watch in
 * start order (a watch stopped or started meanwhile changes the array: scanned again). */
static void mux__fsk_look(struct mux__loop *loop)
{
    struct mux__fsn *n = loop->fsn;
    struct kevent ev[MUX__FSK_BATCH];
    const struct timespec zero = {0, 0};
    int r, any = 0;
    for (int round = 0; round < 16; round++) {
        r = kevent(n->kq, NULL, 0, ev, MUX__FSK_BATCH, &zero);
        if (r < 0 && errno == EINTR)
            break; /* the rest at the next look */
        if (r < 0) {
            mux__fsk_fail(loop, -errno);
            return;
        }
        for (int i = 0; i < r; i++) {
            struct mux__fsw *f = mux__fsw_by_id(n, (uint32_t)(uintptr_t)ev[i].udata);
            if (!f || ev[i].filter != EVFILT_VNODE || (ev[i].flags & EV_ERROR))
                continue; /* a dropped registration's */
            f->got |= ev[i].fflags;
            any = 1;
        }
        if (r < MUX__FSK_BATCH)
            break;
    }
#ifdef MUX__FSK_TICK_NS
    /* libkqueue hears a watched directory's removal only once its last descriptor is closed
     * (inotify's IN_DELETE_SELF waits for that, and the watch holds one): looked at here. */
    for (uint32_t i = 0; i < n->nw; i++) {
        struct stat st;
        if (n->w[i]->dir && fstat(n->w[i]->fd, &st) == 0 && st.st_nlink == 0) {
            n->w[i]->got |= NOTE_DELETE;
            any = 1;
        }
    }
#endif
    for (uint32_t i = 0; any && i < n->nw;) {
        if (!n->w[i]->got) {
            i++;
            continue;
        }
        mux__fsk_watch_events(loop, n->w[i]);
        if (!loop->fsn)
            return; /* a callback's failure closed it all */
        i = 0;
    }
}

#ifdef MUX__FSK_TICK_NS
static void mux__fsk_tick(mux_loop_t *pub, mux_timer_t *t)
{
    (void)t;
    mux__fsk_look(mux__loop_of(pub));
}
#else
static void mux__fsk_io(mux_loop_t *pub, mux_io_t *io, unsigned revents)
{
    (void)io;
    struct mux__loop *loop = mux__loop_of(pub);
    if (revents & MUX_ERROR) { /* the backend refused the descriptor: watching has ended */
        int err = (int)(revents >> MUX__KILL_ERRNO_SHIFT);
        mux__fsk_fail(loop, err ? -err : -EIO);
        return;
    }
    mux__fsk_look(loop);
}
#endif

/* Watching failed: every watcher is stopped, then told `err`, and the loop's queue goes (the
 * next start makes a new one). Watchers a callback starts again are on the new queue. */
static void mux__fsk_fail(struct mux__loop *loop, int err)
{
    struct mux__fsn *n = loop->fsn;
    mux_fs_event_t *all = NULL;
    for (uint32_t i = 0; i < n->nw; i++)
        for (mux_fs_event_t *w = n->w[i]->head, *next; w; w = next) {
            next = w->next_;
            w->next_ = all;
            all = w;
            w->wd_ = -1;
            mux__deactivate(loop, &w->h_);
        }
    for (uint32_t i = 0; i < n->nw; i++)
        n->w[i]->head = NULL;
    mux__fsn_close(loop);
    for (mux_fs_event_t *w = all, *next; w; w = next) {
        char base[256];
        next = w->next_;
        w->next_ = NULL;
        if (!(w->h_.flags & MUX__W_ACTIVE)) /* not started again by a callback before */
            w->cb_(loop->pub, w, mux__fsk_base(w, base, sizeof base), 0, err);
    }
}

/* ---- the loop's queue --------------------------------------------------------------------- */

static int mux__fsk_queue(struct mux__fsn *n)
{
    n->kq = kqueue();
    if (n->kq < 0)
        return -errno;
    (void)fcntl(n->kq, F_SETFD, FD_CLOEXEC);
    return 0;
}

/* The loop looks at the queue when it is readable; against libkqueue, on a timer started
 * with the first watch. */
static int mux__fsk_watch(struct mux__loop *loop, struct mux__fsn *n)
{
#ifdef MUX__FSK_TICK_NS
    if (n->nw == 0 || (n->tick.h_.flags & MUX__W_ACTIVE))
        return 0;
    return mux_timer_start(loop->pub, &n->tick, MUX__FSK_TICK_NS, MUX__FSK_TICK_NS);
#else
    if (n->io.h_.flags & MUX__W_ACTIVE)
        return 0;
    mux_io_init(&n->io, mux__fsk_io, n->kq, MUX_READ);
    n->io.h_.flags |= MUX__W_NOREF; /* the watchers count, not their machinery */
    return mux__io_start_internal(loop, &n->io);
#endif
}

static void mux__fsk_unwatch(struct mux__loop *loop, struct mux__fsn *n)
{
#ifdef MUX__FSK_TICK_NS
    mux_timer_stop(loop->pub, &n->tick);
#else
    if (n->io.h_.flags & MUX__W_ACTIVE)
        mux__io_stop_internal(loop, &n->io);
#endif
}

static void mux__fsk_queue_close(int kq)
{
    close(kq);
#ifdef LIBKQUEUE
    if (libkqueue_drain_pending_close) /* its descriptors go now, not from its thread later */
        libkqueue_drain_pending_close();
#endif
}

int mux__fsn_open(struct mux__loop *loop)
{
    struct mux__fsn *n = calloc(1, sizeof *n);
    if (!n)
        return -ENOMEM;
#ifdef MUX__FSK_TICK_NS
    mux_timer_init(&n->tick, mux__fsk_tick);
    n->tick.h_.flags |= MUX__W_NOREF; /* the watchers count, not their machinery */
#endif
    int err = mux__fsk_queue(n);
    if (err == 0 && (err = mux__fsk_watch(loop, n)) != 0)
        mux__fsk_queue_close(n->kq);
    if (err != 0) {
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
    mux__fsk_unwatch(loop, n);
    for (uint32_t i = 0; i < n->nw; i++) {
        close(n->w[i]->fd); /* the queue's close takes the registrations */
        if (n->w[i] == n->busy)
            n->w[i]->dead = 1;
        else
            mux__fsw_free(n->w[i]);
    }
    mux__fsk_queue_close(n->kq);
    free(n->w);
    free(n);
    loop->fsn = NULL;
}

/* In a child after fork: a queue of its own (the parent's was not inherited, and its number is
 * not closed), the same descriptors registered again. One that cannot be is told its errno,
 * its watchers stopped. */
int mux__fsn_fork(struct mux__loop *loop)
{
    struct mux__fsn *n = loop->fsn;
    if (!n)
        return 0;
    mux__fsk_unwatch(loop, n);
    int err = mux__fsk_queue(n);
    if (err == 0 && (err = mux__fsk_watch(loop, n)) != 0)
        mux__fsk_queue_close(n->kq);
    if (err != 0)
        return err; /* tried again at the next run */
    for (uint32_t i = 0; i < n->nw;) {
        struct mux__fsw *f = n->w[i];
        int rerr = mux__fsk_register(n, f, EV_ADD | EV_CLEAR);
        if (rerr == 0) {
            i++;
            continue;
        }
        n->busy = f;
        mux__fsk_tell(loop, f, NULL, 0, rerr);
        n->busy = NULL;
        if (f->dead)
            mux__fsw_free(f);
        i = 0; /* the callbacks may have changed the array */
    }
    return 0;
}

void mux__fsn_walk(struct mux__loop *loop, void (*add)(void *ctx, struct mux__whdr *h), void *ctx)
{
    struct mux__fsn *n = loop->fsn;
    for (uint32_t i = 0; n && i < n->nw; i++)
        for (mux_fs_event_t *w = n->w[i]->head; w; w = w->next_)
            add(ctx, &w->h_);
}

/* ---- the watchers ------------------------------------------------------------------------ */

/* A new watch of the file or directory open as `fd`: listed, registered, added. */
static int mux__fsw_new(struct mux__loop *loop, int fd, const struct stat *st,
                        struct mux__fsw **out)
{
    struct mux__fsn *n = loop->fsn;
    if (n->nw == n->wcap) {
        uint32_t cap = n->wcap ? n->wcap * 2 : 8;
        struct mux__fsw **v = realloc(n->w, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        n->w = v;
        n->wcap = cap;
    }
    struct mux__fsw *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    *f = (struct mux__fsw){.fd = fd, .dir = S_ISDIR(st->st_mode), .id = ++n->next_id,
                           .dev = st->st_dev, .ino = st->st_ino};
    if (f->id == 0 || f->id == (uint32_t)-1) /* -1 is no watch's (wd_) */
        f->id = n->next_id = 1;
    int err = f->dir ? mux__fsk_list_read(fd, &f->list) : 0;
    if (err == 0 && (err = mux__fsk_register(n, f, EV_ADD | EV_CLEAR)) != 0)
        (void)mux__fsk_register(n, f, EV_DELETE); /* in case it was made all the same */
    if (err != 0) {
        mux__fsw_free(f);
        return err;
    }
    n->w[n->nw++] = f;
    if ((err = mux__fsk_watch(loop, n)) != 0) {
        n->nw--;
        (void)mux__fsk_register(n, f, EV_DELETE); /* the caller closes `fd` */
        mux__fsw_free(f);
        return err;
    }
    *out = f;
    return 0;
}

MUX_EXPORT int mux_fs_event_start(mux_loop_t *pub, mux_fs_event_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    int err = mux__fs_event_begin(loop, w);
    if (err != 0)
        return err;
    struct mux__fsn *n = loop->fsn;
    /* O_NONBLOCK: a FIFO's open would wait for a writer. */
    int fd = open(w->path_, MUX__FSK_OPEN | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    struct mux__fsw *f = NULL;
    if (fstat(fd, &st) != 0) {
        err = -errno;
    } else {
        for (uint32_t i = 0; i < n->nw && !f; i++)
            if (n->w[i]->dev == st.st_dev && n->w[i]->ino == st.st_ino)
                f = n->w[i];
        if (f)
            close(fd); /* watched already: its registration serves */
        else if ((err = mux__fsw_new(loop, fd, &st, &f)) != 0)
            f = NULL;
    }
    if (!f) {
        close(fd);
        return err;
    }
    mux__fs_event_join(loop, &f->head, w, (int)f->id);
    return 0;
}

MUX_EXPORT int mux_fs_event_stop(mux_loop_t *pub, mux_fs_event_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_FS_EVENT)
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        mux__fsk_detach(loop, w);
    return 0;
}
