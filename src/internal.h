/* SPDX-License-Identifier: MIT */
/* Private to the library: the loop's state and the helpers the watcher files share.
 *
 * This is the core's header, and it names nothing of the layers above the core: a layer above
 * registers the kinds of handle it opens with the loop (struct mux__handles, below), and runs
 * its deliveries as tasks (struct mux__task) from the loop's pending queue. */
#ifndef IOMUX_INTERNAL_H
#define IOMUX_INTERNAL_H

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "iomux.h"
#include "heap.h"

#if defined(MUX_BUILDING_SHARED) && defined(_WIN32)
#define MUX_EXPORT __declspec(dllexport)
#elif defined(MUX_BUILDING_SHARED)
#define MUX_EXPORT __attribute__((visibility("default")))
#else
#define MUX_EXPORT
#endif

#define mux__container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define mux__likely(x)                       __builtin_expect(!!(x), 1)
#define mux__unlikely(x)                     __builtin_expect(!!(x), 0)

/* Watcher types, stored in mux__whdr.type by init. 0 means "never initialised". */
enum {
    MUX__T_IO = MUX_HANDLE_IO, /* a watcher's type is the kind mux_loop_walk reports */
    MUX__T_TIMER = MUX_HANDLE_TIMER,
    MUX__T_PERIODIC = MUX_HANDLE_PERIODIC,
    MUX__T_SIGNAL = MUX_HANDLE_SIGNAL,
    MUX__T_CHILD = MUX_HANDLE_CHILD,
    MUX__T_IDLE = MUX_HANDLE_IDLE,
    MUX__T_PREPARE = MUX_HANDLE_PREPARE,
    MUX__T_CHECK = MUX_HANDLE_CHECK,
    MUX__T_FORK = MUX_HANDLE_FORK,
    MUX__T_ASYNC = MUX_HANDLE_ASYNC,
    MUX__T_CLEANUP = MUX_HANDLE_CLEANUP,
    MUX__T_FS_EVENT = MUX_HANDLE_FS_EVENT,
    MUX__T_FS_POLL = MUX_HANDLE_FS_POLL,
    MUX__T_TASK = 32, /* struct mux__task: an upper layer's deliveries, not a handle */
};

/* mux__whdr.flags */
enum {
    MUX__W_ACTIVE = 0x01,   /* started and not stopped */
    MUX__W_INTERNAL = 0x02, /* the loop's own; not counted in mux_loop_active */
    MUX__W_NEWFD = 0x04,    /* io: fd set since the last start; the kernel must be told */
    MUX__W_NOREF = 0x08,    /* a part of an upper layer's handle, which counts once itself */
    MUX__W_UNREF = 0x10,    /* the caller's mux_unref: active, it does not keep mux_run going */
    MUX__W_KERNEL = 0x20,   /* child: the backend's kernel watches the pid (no SIGCHLD) */
};

/* Bits of an upper layer's handle's flags word (struct mux__handles_type.flags_off), which the
 * core keeps: its own bits stay below them. */
#define MUX__H_COUNTED 0x40000000u /* open: counted in the loop's active, until its close ends */
#define MUX__H_UNREF   0x80000000u /* the caller's mux_unref */

#define MUX__IO_EVENTS (MUX_READ | MUX_WRITE)
/* What a watcher may ask for and be told: the directions, and the peer's hang-up on the
 * backends with MUX__CAP_RDHUP (the core refuses it on the others, so they never see it). */
#define MUX__IO_WATCH (MUX__IO_EVENTS | MUX_RDHUP)

/* One entry per fd number. The k* fields are the backend's, about the kernel's side: zero
 * in a new entry, and kmask zeroed again when the backend makes a new kernel object. */
struct mux__fd {
    mux_io_t *head;  /* watchers of this fd */
    uint32_t kgen;   /* generation of the fd's kernel registration (epoll, io_uring), bumped
                      * whenever it is replaced, so that events of an old one are recognised */
    uint8_t want;    /* events wanted by the watchers, as last applied */
    uint8_t kmask;   /* what the kernel has (the registered events, the backend's flags) */
    uint8_t changed; /* MUX__FD_* */
    uint8_t pad_;
    int32_t next_change; /* link in the loop's change list */
    uint32_t kslot;      /* where the backend keeps the fd: poll's array index + 1, IOCP's
                          * poll slot + 1, io_uring's last poll request in the SQ ring */
};

enum {
    MUX__FD_CHANGED = 0x1, /* on the change list */
    MUX__FD_FORCE = 0x2,   /* a watcher was newly pointed at it */
};

struct mux__pending {
    struct mux__whdr *w; /* NULL when the watcher stopped after it was queued */
    unsigned revents;
};

/* A circular doubly linked list of idle / prepare / check / fork / async watchers;
 * `hdr_off` is the distance from a watcher's link_ to its h_. */
struct mux__hooklist {
    struct mux__link anchor;
    uint32_t count;
    ptrdiff_t hdr_off;
};

#define MUX__NSIG 65 /* signal numbers below this are watched (1 .. 64) */

struct mux__loop {
    mux_loop_t *pub;
    const struct mux__backend *backend;
    void *bdata; /* the backend's own state */

    uint64_t now;         /* cached monotonic ns; read it through mux__now() */
    uint8_t now_stale;    /* the clock was not read this iteration yet */
    uint8_t dispatched;   /* a watcher was called from inside this iteration's wait */
    uint32_t active;      /* active watchers, and the open handles of the layers above */
    uint32_t noref;       /* active watchers that are parts of those handles (MUX__W_NOREF) */
    uint32_t unrefd;      /* of `active`, those the caller unreferenced (mux_unref) */
    uint8_t running;      /* inside mux_run */
    union {
        struct {
            uint8_t stop;    /* mux_loop_stop was called */
            uint8_t forked;  /* fork work to do at the top of the next iteration */
            uint8_t recheck; /* children to reap: do not block */
            uint8_t woken;   /* the wake-up descriptor was readable */
        };
        uint32_t attention; /* any of the four, in one load: the next wait does not block */
    };
    uint8_t ops_unpark;   /* an operation's owner takes its parked completions again */
    uint8_t clock_set;    /* the wall clock was set (timerfd) */
    uint8_t clock_jumped; /* periodics must be rescheduled */
    uint8_t reapply;      /* the backend refused the loop's own fd: apply it again */
    uint8_t choosing;     /* the backend is opening as the automatic choice, not named */
    uint8_t one_thread;   /* MUX_LOOP_ONE_THREAD: run only by `owner`, once it is set */
    const void *owner;    /* the running thread's mux__thread_token, from the first mux_run */
    unsigned caps;        /* MUX__CAP_*: the backend's, as its open narrowed them */
    int error;            /* a failure found while gathering, returned by mux_run */
    unsigned fork_gen;
    uint32_t iter; /* iterations run, for the operation emulation's budget */

    /* The fd table, in leaves of MUX__FD_LEAF entries, each allocated the first time an fd
     * of its range is watched: its memory follows the fds in use, not their numbers. And the
     * change list threaded through it. */
    struct mux__fd **fdl;
    uint32_t nleaves;
    int32_t changes; /* head of the change list, -1 when empty */

    /* pending queue, FIFO; capacity kept >= active watchers */
    struct mux__pending *pend;
    uint32_t npend, pend_cap;

    struct mux__heap timers;
    struct mux__heap periodics;
    uint64_t seq;            /* start counter, the tie-break of both heaps */
    int64_t wall_minus_mono; /* last seen difference of the two clocks */

    struct mux__hooklist idles, prepares, checks, forks, asyncs;
    struct mux__hooklist cleanups; /* not counted: they run when the loop closes */
    struct mux__hooklist fs_polls; /* for mux_loop_walk: their timers are not handles */
    struct mux__fsn *fsn;          /* fs_event's kernel notifications, from the first start */
    uint8_t closing;               /* mux_loop_close is running the cleanups */

    /* wake-up (MUX__CAP_WAKE_FD): an eventfd or a pipe that async sends and signals write */
    int wake_rfd, wake_wfd; /* wake_wfd is read by signal handlers: atomic */
    mux_io_t wake_io;
    int async_pending; /* atomic: a send is waiting */
    int clock_fd;      /* readable when the wall clock is set (platform.h), or -1 */
    mux_io_t clock_io;

    /* signals and children */
    int sig_slot;                      /* index in the process registry, or -1 */
    uint64_t sig_mask;                 /* signals this loop has watchers for (bit signum - 1) */
    unsigned sig_seen[MUX__NSIG];      /* last delivery count seen, per signal */
    mux_signal_t *sig_head[MUX__NSIG]; /* watchers per signal */
    uint32_t sig_refs[MUX__NSIG]; /* watchers per signal (child watchers waiting for SIGCHLD) */
    mux_child_t *children;
    uint32_t nchildren;

    struct mux__handles *handles; /* the layers above: one entry per kind of handle (walk.c) */
};

/* The loop behind the caller's handle, or NULL (a NULL handle, or one not initialised or
 * closed): every public call on a loop starts here. */
static inline struct mux__loop *mux__loop_of(const mux_loop_t *pub)
{
    return pub ? pub->impl_ : NULL;
}

#define MUX__FD_LEAF_BITS 8
#define MUX__FD_LEAF      (1u << MUX__FD_LEAF_BITS)

/* The fd table's entry of `fd`, whose leaf exists (mux__fd_reserve succeeded for it). */
static inline struct mux__fd *mux__fd_at(const struct mux__loop *loop, int fd)
{
    return &loop->fdl[(uint32_t)fd >> MUX__FD_LEAF_BITS][(uint32_t)fd & (MUX__FD_LEAF - 1)];
}

/* The entry of any fd value, or NULL when no fd of its range was ever watched. */
static inline struct mux__fd *mux__fd_find(const struct mux__loop *loop, int fd)
{
    uint32_t i = (uint32_t)fd >> MUX__FD_LEAF_BITS; /* a negative fd: far past the end */
    if (mux__unlikely(i >= loop->nleaves || !loop->fdl[i]))
        return NULL;
    return &loop->fdl[i][(uint32_t)fd & (MUX__FD_LEAF - 1)];
}

/* loop.c; the clocks (mux__mono_ns, mux__wall_ns) are the platform seam's (platform.h) */
extern unsigned mux__fork_gen; /* bumped in every child by pthread_atfork */

/* A fork happened since the loop last knew (in the child: the kernel objects it holds
 * are the parent's, and must not be touched until the loop renews them). */
static inline int mux__forked_since(const struct mux__loop *loop)
{
    return mux__unlikely(loop->fork_gen != mux__fork_gen);
}

/* The loop's time, read from the clock at most once per iteration and only when something
 * asks: an iteration that needs no time (no timer due, no timeout) costs no clock read. */
static inline uint64_t mux__now(struct mux__loop *loop)
{
    if (loop->now_stale) {
        loop->now = mux__mono_ns();
        loop->now_stale = 0;
    }
    return loop->now;
}

/* loop.c */
int mux__pend_grow(struct mux__loop *loop, uint32_t need);
void mux__internal_event(struct mux__loop *loop, mux_io_t *w);

/* Room in the pending queue for one more active watcher, and the loop's own watchers
 * (wake-up, clock), which are not counted. 0 or -ENOMEM; inline: it runs on every start. */
#define MUX__INTERNAL_MAX 4
static inline int mux__reserve(struct mux__loop *loop)
{
    uint32_t need = loop->active + loop->noref + 1 + MUX__INTERNAL_MAX;
    return mux__likely(need <= loop->pend_cap) ? 0 : mux__pend_grow(loop, need);
}

/* Start and stop bookkeeping of every watcher: inline, they run on every start and stop. */
static inline void mux__activate(struct mux__loop *loop, struct mux__whdr *h)
{
    h->flags |= MUX__W_ACTIVE;
    if (h->flags & MUX__W_NOREF) {
        loop->noref++;
    } else if (!(h->flags & MUX__W_INTERNAL)) {
        loop->active++;
        loop->unrefd += (h->flags & MUX__W_UNREF) != 0;
    }
}

static inline void mux__deactivate(struct mux__loop *loop, struct mux__whdr *h)
{
    h->flags &= (uint8_t)~MUX__W_ACTIVE;
    if (h->flags & MUX__W_NOREF) {
        loop->noref--;
    } else if (!(h->flags & MUX__W_INTERNAL)) {
        loop->active--;
        loop->unrefd -= (h->flags & MUX__W_UNREF) != 0;
    }
}

/* What keeps mux_run(MUX_RUN_DEFAULT) running: the active watchers and open handles that the
 * caller did not unreference. */
static inline uint32_t mux__refs(const struct mux__loop *loop)
{
    return loop->active - loop->unrefd;
}

/* Takes `h` out of the pending queue: its callback will not run for what was gathered. */
static inline void mux__unqueue(struct mux__loop *loop, struct mux__whdr *h)
{
    if (h->pending) {
        loop->pend[h->pending - 1].w = NULL;
        h->pending = 0;
    }
}

/* Puts `fd`, whose entry is `e`, on the batch of changes applied before the next wait (once
 * per iteration). */
static inline void mux__fd_mark(struct mux__loop *loop, struct mux__fd *e, int fd)
{
    if (!(e->changed & MUX__FD_CHANGED)) {
        e->changed |= MUX__FD_CHANGED;
        e->next_change = loop->changes;
        loop->changes = fd;
    }
}

/* The same by fd number; `force`: the kernel must be told even if the events are unchanged. */
static inline void mux__fd_touch(struct mux__loop *loop, int fd, int force)
{
    struct mux__fd *e = mux__fd_at(loop, fd);
    if (force)
        e->changed |= MUX__FD_FORCE;
    mux__fd_mark(loop, e, fd);
}

/* Queues `h` with `revents`, or adds them to its queued entry. Capacity is kept at least
 * the number of active watchers, and every watcher is queued at most once, so the growth
 * path only runs for tasks queued from inside callbacks (an upper layer's completions). */
static inline void mux__queue(struct mux__loop *loop, struct mux__whdr *h, unsigned revents)
{
    if (h->pending) {
        loop->pend[h->pending - 1].revents |= revents;
        return;
    }
    if (mux__unlikely(loop->npend == loop->pend_cap) &&
        mux__pend_grow(loop, loop->npend + 1) != 0) {
        loop->error = -ENOMEM;
        return;
    }
    loop->pend[loop->npend].w = h;
    loop->pend[loop->npend].revents = revents;
    h->pending = ++loop->npend;
}
/* Queues `t` to run from the pending queue, once however often it is queued before it runs. */
static inline void mux__task_queue(struct mux__loop *loop, struct mux__task *t)
{
    mux__queue(loop, &t->h_, 0);
}
static inline void mux__task_init(struct mux__task *t, void (*run)(struct mux__task *))
{
    t->h_ = (struct mux__whdr){.type = MUX__T_TASK};
    t->run_ = run;
}

int mux__clock_watch(struct mux__loop *loop);
/* The backend entry for MUX__CAP_WAKE_FD: writes the core's wake-up descriptor. */
int mux__wake_fd(struct mux__loop *loop);

/* io.c */
void mux__fd_apply(struct mux__loop *loop);
int mux__fd_grow(struct mux__loop *loop, int fd);
/* Makes the fd table hold `fd` (>= 0). 0 or -ENOMEM. */
static inline int mux__fd_reserve(struct mux__loop *loop, int fd)
{
    return mux__likely(mux__fd_find(loop, fd) != NULL) ? 0 : mux__fd_grow(loop, fd);
}
void mux__fd_table_free(struct mux__loop *loop);
/* The backend refused to watch `fd` after all (kqueue finds out in its wait): as when its
 * `change` returns `err`. */
void mux__fd_refuse(struct mux__loop *loop, int fd, int err);
/* Forgets what every fd's kernel registration was (kmask): the backend made a new kernel
 * object. Visits the leaves in use only. */
void mux__fd_forget_kernel(struct mux__loop *loop);
int mux__io_start_internal(struct mux__loop *loop, mux_io_t *w);
void mux__io_stop_internal(struct mux__loop *loop, mux_io_t *w);
void mux__fd_refresh_all(struct mux__loop *loop);

/* timer.c, periodic.c */
/* Makes `t` due at `at` (absolute, the loop's clock), one-shot, started if inactive; an
 * expiry gathered but not yet dispatched is void. The library's own timers use it (the
 * deadlines of the layers above). 0 or -ENOMEM. */
int mux__timer_set(struct mux__loop *loop, mux_timer_t *t, uint64_t at);
void mux__timers_expire(struct mux__loop *loop);
int64_t mux__timers_timeout(struct mux__loop *loop); /* -1: none */
void mux__periodics_expire(struct mux__loop *loop);
int64_t mux__periodics_timeout(struct mux__loop *loop);

/* signal.c, child.c */
/* A signal arrived: every loop that watches it is woken, and its watchers run from there.
 * Async-signal-safe, any thread (signal.c). */
void mux__sig_deliver(int signum);
/* Whether some loop of the process watches `signum` now (signal.c). */
int mux__sig_watched(int signum);
/* How the system delivers signals (signal_posix.c, signal_win.c): whether mux_signal_init
 * takes `signum`; 0, or -ENOTSUP for one the system never delivers (mux_signal_start's
 * answer); and catching it from the first watcher of the process on, until the last stops
 * (called under the registry's lock). */
int mux__sig_valid(int signum);
int mux__sig_deliverable(int signum);
int mux__sig_catch(int signum);
void mux__sig_release(int signum);
#ifdef _WIN32
/* Windows has no SIGCHLD: child_win.c delivers this number of the library's own, which no
 * signal watcher can start, when a watched process ends. */
#define MUX__SIGCHLD (MUX__NSIG - 1)
#else
#define MUX__SIGCHLD SIGCHLD
#endif
int mux__sig_attach(struct mux__loop *loop, int signum);
void mux__sig_detach(struct mux__loop *loop, int signum);
void mux__sig_poll(struct mux__loop *loop);         /* queue watchers of signals that arrived */
void mux__sig_loop_quiesce(struct mux__loop *loop); /* no handler wakes it until ... */
void mux__sig_loop_fork(struct mux__loop *loop);    /* ... this, after a fork */
void mux__sig_loop_close(struct mux__loop *loop);
void mux__sig_atfork_child(void);
void mux__children_reap(struct mux__loop *loop);
/* The backend saw child `pid` exit (kqueue's EVFILT_PROC): reaps it for its watchers. */
void mux__child_exited(struct mux__loop *loop, int pid);

/* A circular doubly linked list through struct mux__link (hooks.c's lists, and the open
 * handles of the layers above). */
static inline void mux__link_init(struct mux__link *anchor)
{
    anchor->next = anchor->prev = anchor;
}
static inline void mux__link_insert(struct mux__link *anchor, struct mux__link *k)
{
    k->next = anchor;
    k->prev = anchor->prev;
    anchor->prev->next = k;
    anchor->prev = k;
}
static inline void mux__link_remove(struct mux__link *k)
{
    k->prev->next = k->next;
    k->next->prev = k->prev;
    k->next = k->prev = NULL;
}

/* The header of the watcher whose link_ is `k` in hook list `l`. */
static inline struct mux__whdr *mux__hook_hdr(const struct mux__hooklist *l, struct mux__link *k)
{
    return (struct mux__whdr *)((char *)k + l->hdr_off);
}

/* walk.c: the handles of the layers above the core.
 *
 * A layer above registers each kind of handle it opens: a `const struct mux__handles_type`
 * of its own, and, per loop, a struct mux__handles made the first time a handle of that kind
 * opens on the loop (the layer's per-loop state, which may go on past it: `size`). The loop
 * holds it without knowing what it is, finds it by its type, reports its open handles in
 * mux_loop_walk, and frees it when the loop closes (none is open then: each open handle
 * counts in `active`). The layer links its handles on `open` and takes them off itself. */
struct mux__handles_type {
    int kind;           /* MUX_HANDLE_*: what mux_loop_walk calls these handles */
    size_t link_off;    /* where a handle keeps its struct mux__link */
    size_t flags_off;   /* where it keeps the `unsigned` flags word with the MUX__H_* bits
                           (mux__handle_open/close keep them; never 0, where `data` is) */
    size_t size;        /* of the per-loop state, which begins with struct mux__handles */
    int (*walkable)(const void *handle); /* open and not closing: the walk reports it */
};
struct mux__handles {
    const struct mux__handles_type *type;
    struct mux__handles *next; /* the loop's next kind */
    struct mux__link open;     /* the open handles (closing ones included) */
};
/* The loop's state for handles of `type`, allocated zeroed (`open` empty) the first time:
 * NULL when that fails (-ENOMEM). */
struct mux__handles *mux__handles_get(struct mux__loop *loop, const struct mux__handles_type *type);
/* The same, or NULL when no handle of `type` ever opened on the loop. */
static inline struct mux__handles *mux__handles_find(const struct mux__loop *loop,
                                                     const struct mux__handles_type *type)
{
    struct mux__handles *h = loop->handles;
    while (h && h->type != type)
        h = h->next;
    return h;
}
void mux__handles_free(struct mux__loop *loop); /* the loop closes */

/* A handle of `hs`'s kind opens: linked, and counted in `active` (referenced) until
 * mux__handle_close. `flags` is its flags word, whose MUX__H_* bits these two keep. */
static inline void mux__handle_open(struct mux__loop *loop, struct mux__handles *hs,
                                    struct mux__link *link, unsigned *flags)
{
    mux__link_insert(&hs->open, link);
    *flags = (*flags & ~MUX__H_UNREF) | MUX__H_COUNTED;
    loop->active++;
}

/* Its close has ended (its close callback is due): no longer linked or counted. */
static inline void mux__handle_close(struct mux__loop *loop, struct mux__link *link,
                                     unsigned *flags)
{
    mux__link_remove(link);
    loop->active--;
    loop->unrefd -= (*flags & MUX__H_UNREF) != 0;
    *flags &= ~(MUX__H_COUNTED | MUX__H_UNREF);
}

/* hooks.c, async.c */
void mux__hooks_init(struct mux__loop *loop);
int mux__hook_start(struct mux__loop *loop, struct mux__hooklist *l, struct mux__link *k);
void mux__hook_stop(struct mux__loop *loop, struct mux__hooklist *l, struct mux__link *k);
void mux__hooks_queue(struct mux__loop *loop, struct mux__hooklist *l);
/* Runs and stops the cleanup watchers, the last started first (mux_loop_close). */
void mux__cleanups_run(struct mux__loop *loop);

/* fs_event.c (one file per platform): the loop's notification state, after a fork and at
 * close; the walk's fs_event watchers. */
int mux__fsn_open(struct mux__loop *loop); /* at the first start */
int mux__fsn_fork(struct mux__loop *loop);
void mux__fsn_close(struct mux__loop *loop);
void mux__fsn_walk(struct mux__loop *loop, void (*add)(void *ctx, struct mux__whdr *h), void *ctx);
/* fs_event.c: a start's checks, room and first notification state (0 or a negative errno);
 * and its end, the watcher appended to its path's list (`head`) under the mechanism's `id`. */
int mux__fs_event_begin(struct mux__loop *loop, const mux_fs_event_t *w);
void mux__fs_event_join(struct mux__loop *loop, mux_fs_event_t **head, mux_fs_event_t *w, int id);
void mux__asyncs_poll(struct mux__loop *loop);

#endif
