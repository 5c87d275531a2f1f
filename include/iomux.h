/* SPDX-License-Identifier: MIT */
/* iomux: a portable event-notification library.
 *
 * One loop per thread. Watchers are allocated by the caller, usually embedded in the
 * caller's own structs; starting and stopping them never allocates per call (the loop's
 * tables grow geometrically the first time a new high-water mark is reached, and a start
 * that would need memory it cannot get returns -ENOMEM). Every function that can fail
 * returns 0 (or a count) on success and a negative errno on failure; mux_strerror() names
 * the code. Misuse -- NULL pointers, negative fds, unknown flags, a watcher that was never
 * initialised, a loop that was closed -- returns -EINVAL and never crashes.
 *
 * Life cycle of every watcher type X:
 *     mux_X_init(w, cb, ...)    set the callback and parameters; the watcher is inactive.
 *                               Init clears the whole struct, `data` included: set `data`
 *                               after init. Never init an active watcher.
 *     mux_X_start(loop, w, ...) make it active: -EBUSY if it already is
 *     mux_X_stop(loop, w)       make it inactive: 0 also when it was not active. Once stop
 *                               returns, the callback will not run again (not even for an
 *                               event already gathered) and the memory may be freed.
 * Starting and stopping any watcher from any callback, its own included, is safe.
 *
 * Only mux_async_send() may be called from another thread or from a signal handler, and the
 * channel calls that say so (mux_chan_send and its kin) from another thread.
 *
 * Every active watcher keeps mux_run(MUX_RUN_DEFAULT) running, signal and async watchers
 * included; a loop whose only active watchers are prepare or check watchers blocks until
 * something else happens. Stop what should not keep the loop alive.
 */
#ifndef IOMUX_H
#define IOMUX_H

#include <stddef.h>
#include <stdint.h>
#ifdef _WIN32
#include <signal.h>
#include <winsock2.h>
#include <ws2tcpip.h>
/* The signals Windows delivers, as console events (docs/signal.md): SIGINT and SIGBREAK are the
 * C runtime's; these two, which it lacks, have the numbers libuv gives them. */
#ifndef SIGHUP
#define SIGHUP 1 /* the console closed */
#endif
#ifndef SIGWINCH
#define SIGWINCH 28 /* the console window changed its size */
#endif
#if defined(_MSC_VER) && !defined(_SSIZE_T_DEFINED)
typedef intptr_t ssize_t;
#define _SSIZE_T_DEFINED
#endif
#else
#include <sys/socket.h>
#include <sys/types.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define MUX_VERSION_MAJOR 0
#define MUX_VERSION_MINOR 1
#define MUX_VERSION_PATCH 0
/* The three numbers as one, 0xMMmmpp, for comparisons in the preprocessor. */
#define MUX_VERSION_HEX ((MUX_VERSION_MAJOR << 16) | (MUX_VERSION_MINOR << 8) | MUX_VERSION_PATCH)

/* Returns the library's version as (major << 16) | (minor << 8) | patch. */
unsigned mux_version(void);
/* Returns the library's version as a static string such as "0.1.0". */
const char *mux_version_string(void);

/* Returns a static, human-readable description of a negative errno returned by iomux, such
 * as "EINVAL: invalid argument"; an unknown code gives "unknown error". Never NULL. */
const char *mux_strerror(int err);

/* Errors of name resolution (include/iomux/work.h): getaddrinfo's EAI_* codes, negative as
 * errno values are and outside their range (mux_strerror names them). EAI_MEMORY comes as
 * -ENOMEM, and EAI_SYSTEM as the system's negative errno. */
enum {
    MUX_EAI_AGAIN = -3001,    /* a temporary failure: no resolver answered in time */
    MUX_EAI_BADFLAGS = -3002, /* hints with flags the resolver does not take */
    MUX_EAI_FAIL = -3003,     /* a failure that asking again will not mend */
    MUX_EAI_FAMILY = -3004,   /* an address family the resolver does not know */
    MUX_EAI_NODATA = -3005,   /* the name exists, with no address of the asked kind */
    MUX_EAI_NONAME = -3006,   /* the name or service is not known */
    MUX_EAI_SERVICE = -3007,  /* the service is not known for the socket type */
    MUX_EAI_SOCKTYPE = -3008, /* a socket type the resolver does not know */
    MUX_EAI_OVERFLOW = -3009, /* a name did not fit its buffer (getnameinfo) */
};

/* ---------------------------------------------------------------------------------------
 * Loop
 * ------------------------------------------------------------------------------------ */

/* Readiness events of an io watcher, and revents bits passed to its callback. */
enum {
    MUX_READ = 0x01,  /* the fd is readable (or at end of file, or has an error pending) */
    MUX_WRITE = 0x02, /* the fd is writable (or has an error pending) */
    MUX_EDGE = 0x04,  /* events flag: edge-triggered where the backend has it (epoll); a
                         level-triggered backend reports a superset, which a correct
                         edge-triggered program (reading until EAGAIN) handles unchanged */
    MUX_ERROR = 0x08, /* revents only: the backend found the fd invalid (closed behind the
                         loop's back) or could not watch it (epoll_ctl's ENOMEM, ENOSPC);
                         the watcher has been stopped before its callback */
    MUX_RDHUP = 0x10, /* the peer hung up its sending side (shutdown(SHUT_WR) or close; the
                         writer of a pipe closed): seen without reading, data still unread
                         or not. An event of its own (a watcher may ask for it alone), on the
                         backends that mux_io_events_supported says have it; level-triggered
                         as MUX_READ is, unless with MUX_EDGE */
};

/* Run modes of mux_run. */
enum {
    MUX_RUN_DEFAULT = 0, /* run until no watcher is active or mux_loop_stop is called */
    MUX_RUN_ONCE = 1,    /* one iteration; blocks until at least one event unless nothing
                            is active, an idle watcher is, or callbacks that were already due
                            (a stream's close, a write done at once) ran first */
    MUX_RUN_NOWAIT = 2,  /* one iteration that never blocks */
};

/* Flags of mux_loop_options_t. */
enum {
    MUX_LOOP_IGNORE_ENV = 0x1, /* do not read the IOMUX_BACKEND environment variable */
    MUX_LOOP_ONE_THREAD = 0x2, /* only the first thread that runs the loop may run it: mux_run
                                  from another says -EEXIST, on every backend. On io_uring the
                                  kernel then defers its completion work to the loop's waits
                                  (IORING_SETUP_DEFER_TASKRUN), which a busy server's
                                  many-connection echo measured cheaper (docs/backends.md) */
};

typedef struct mux_loop_options {
    const char *backend; /* a backend name ("epoll", "poll", "select", ...), or NULL for
                            IOMUX_BACKEND from the environment, or else the best available */
    unsigned flags;      /* MUX_LOOP_* flags; unknown bits are -EINVAL */
} mux_loop_options_t;

struct mux__loop;

/* A loop. The caller owns the memory; mux_loop_init fills it, mux_loop_close empties it.
 * After close, every call on it returns -EINVAL until it is initialised again. */
typedef struct mux_loop {
    void *data;              /* free for the caller */
    struct mux__loop *impl_; /* private */
} mux_loop_t;

/* Initialises `loop` (caller-owned) with the backend that `opts` (may be NULL) names, else
 * the one the IOMUX_BACKEND environment variable names (an empty value counts as unset),
 * else the first of mux_backend_name()'s list that opens, passing by the opt-in ones (rtsig,
 * which opens only when named). A named backend, from either
 * place, is used or init fails: there is no fallback from a name.
 * Returns 0; -EINVAL for NULL, bad flags or a backend name this build does not know;
 * -ENOTSUP for a known backend that this platform lacks; the backend's own error (-ENOSYS,
 * -EPERM, ...) when the kernel refuses a named backend; -ENOMEM. */
int mux_loop_init(mux_loop_t *loop, const mux_loop_options_t *opts);

/* Closes the loop and releases its kernel resources and memory. Returns 0; -EBUSY while
 * any watcher is active (the loop is left untouched); -EINVAL for NULL, a closed loop, or
 * a call from inside mux_run. */
int mux_loop_close(mux_loop_t *loop);

/* Runs the loop in `mode` (MUX_RUN_*). Returns what mux_loop_active would, the number of
 * watchers, streams and listeners still active (0 when it ran out of work), or a negative errno:
 * -EINVAL for bad arguments, -EBUSY when called from inside its own mux_run, a kernel error from
 * the backend's wait, or the backend's refusal to watch the loop's own wake-up descriptor
 * (-ENOMEM, -ENOSPC: the next mux_run tries again; until then signals, asyncs and children
 * may wait). In a child after fork, the loop first re-creates its kernel state; when
 * the kernel refuses (-EMFILE, or -EPERM in a sandbox), every mux_run returns that error and
 * tries again, and the loop runs as soon as it succeeds. */
int mux_run(mux_loop_t *loop, int mode);

/* Makes the running mux_run return after the current iteration. Called while the loop
 * is not running, it makes the next mux_run return after one iteration that does not
 * block. Returns 0 or -EINVAL. */
int mux_loop_stop(mux_loop_t *loop);

/* Returns the number of referenced active watchers plus open streams, listeners and channels
 * (each counting once, whatever it is doing), or -EINVAL: what keeps mux_run(MUX_RUN_DEFAULT)
 * running, which returns when it is 0. A handle unreferenced with mux_unref is not counted
 * (libuv's uv_loop_alive, libev's ev_refcount). */
int mux_loop_active(const mux_loop_t *loop);

/* Returns the name of the loop's backend ("epoll", ...), or NULL for a closed loop. */
const char *mux_loop_backend(const mux_loop_t *loop);

/* Returns the io watcher events the loop's backend takes: MUX_READ | MUX_WRITE | MUX_EDGE on
 * every backend (MUX_EDGE is level-triggered where the kernel has no edge), and MUX_RDHUP
 * where the kernel reports the peer's hang-up without a read (epoll: EPOLLRDHUP; io_uring's
 * and Linux's poll: POLLRDHUP). 0 for NULL or a closed loop. */
unsigned mux_io_events_supported(const mux_loop_t *loop);

/* What a handle is, as mux_loop_walk tells it: the type `handle` points to. */
enum {
    MUX_HANDLE_IO = 1,   /* mux_io_t */
    MUX_HANDLE_TIMER,    /* mux_timer_t */
    MUX_HANDLE_PERIODIC, /* mux_periodic_t */
    MUX_HANDLE_SIGNAL,   /* mux_signal_t */
    MUX_HANDLE_CHILD,    /* mux_child_t */
    MUX_HANDLE_IDLE,     /* mux_idle_t */
    MUX_HANDLE_PREPARE,  /* mux_prepare_t */
    MUX_HANDLE_CHECK,    /* mux_check_t */
    MUX_HANDLE_FORK,     /* mux_fork_t */
    MUX_HANDLE_ASYNC,    /* mux_async_t */
    MUX_HANDLE_STREAM,   /* mux_stream_t */
    MUX_HANDLE_LISTENER, /* mux_listener_t */
    MUX_HANDLE_CHAN,     /* mux_chan_t */
    MUX_HANDLE_CLEANUP,  /* mux_cleanup_t (not reported by mux_loop_walk: it runs at close) */
    MUX_HANDLE_FS_EVENT, /* mux_fs_event_t */
    MUX_HANDLE_FS_POLL,  /* mux_fs_poll_t */
    MUX_HANDLE_PROCESS,  /* mux_process_t (include/iomux/process.h) */
    MUX_HANDLE_UDP,      /* mux_udp_t (include/iomux/udp.h) */
};
typedef void (*mux_walk_cb)(mux_loop_t *loop, int kind, void *handle, void *arg);
/* Calls `cb` once for every active watcher and every stream, listener and channel that is
 * open and not closing, in no particular order: to close everything at shutdown, for
 * instance, so that mux_run(MUX_RUN_DEFAULT) returns and the loop can be closed. The parts a
 * stream, listener or channel is made of are not handles of their own and are not reported.
 * `cb` may stop the watcher, or close the stream, listener or channel, it is given, and
 * start or stop others; a handle
 * that is no longer active (or is closing) when its turn comes is skipped. It must not free
 * the memory of a handle it has not been given yet. Returns the number of calls made, or
 * -EINVAL (NULL arguments, a closed loop), -ENOMEM. */
int mux_loop_walk(mux_loop_t *loop, mux_walk_cb cb, void *arg);

/* References (libuv's uv_ref/uv_unref, libev's ev_ref/ev_unref). Every handle is referenced
 * until mux_unref: while active or open it keeps mux_run(MUX_RUN_DEFAULT) running. An
 * unreferenced one works as before, fires and is called, but does not keep the loop running:
 * a loop with only unreferenced ones returns from mux_run at once (a periodic flush, a SIGHUP
 * handler, a library's housekeeping timer). `kind` is what `handle` is (MUX_HANDLE_*, as
 * mux_loop_walk reports it), and `loop` the loop it runs on. A watcher keeps the setting
 * across stops and starts (its init clears it); a stream, listener or channel can be
 * unreferenced while it is open, until it is closed. An unreferenced handle still counts for
 * mux_loop_close (-EBUSY until it is stopped or closed). Cost: a counter, nothing per event.
 * Return 0, or -EINVAL: NULL, a kind that is not `handle`'s (or a watcher not initialised),
 * a stream, listener or channel not open. */
int mux_ref(mux_loop_t *loop, int kind, void *handle);
int mux_unref(mux_loop_t *loop, int kind, void *handle);
/* 1 when `handle` is referenced, 0 when not, or -EINVAL as mux_ref. */
int mux_has_ref(mux_loop_t *loop, int kind, void *handle);

/* Re-creates the loop's kernel state (backend instance, wake-up descriptor) in a child
 * after fork(); fork watchers run on the child's next iteration. The loop also notices a
 * fork made through fork() by itself, so calling this is only needed after a raw clone.
 * Returns 0 or -EINVAL. */
int mux_loop_fork(mux_loop_t *loop);

/* Returns the loop's cached monotonic time in nanoseconds; 0 for NULL or a closed loop.
 * The clock is read at most once per iteration: the first time something asks for the
 * time after the wait, so that every callback of an iteration sees the same value and an
 * iteration that needs no time reads no clock. Timers are relative to this time. */
uint64_t mux_now(const mux_loop_t *loop);

/* Refreshes the cached time from the monotonic clock. Returns 0 or -EINVAL. */
int mux_now_update(mux_loop_t *loop);

/* Returns the wall-clock time (CLOCK_REALTIME) in nanoseconds since the Unix epoch, as
 * periodic watchers see it; 0 for NULL or a closed loop. */
int64_t mux_wall_now(const mux_loop_t *loop);

/* Returns the name of the i-th backend compiled into this build, in order of preference,
 * or NULL when i is past the end. */
const char *mux_backend_name(size_t i);

/* Returns 0 when backend `name` can be opened on this machine now, -EINVAL for an unknown
 * name, -ENOTSUP when this platform lacks it, or the kernel's refusal (-ENOSYS, -EPERM). */
int mux_backend_probe(const char *name);

/* ---------------------------------------------------------------------------------------
 * Watchers. Fields ending in '_' are private: read and write only `data`.
 * ------------------------------------------------------------------------------------ */

/* Private header shared by every watcher type. */
struct mux__whdr {
    uint32_t pending; /* 1 + index in the loop's pending queue, or 0 */
    uint8_t type;     /* MUX__T_* of the watcher, set by init */
    uint8_t flags;    /* MUX__W_* state bits */
    uint16_t aux;     /* per-type */
};

/* Private heap link of timers and periodics. */
struct mux__hlink {
    uint64_t seq;   /* start order, the tie-break for equal deadlines */
    uint32_t index; /* position in the loop's heap */
    uint32_t aux;   /* per-type */
};

/* Private list link of idle, prepare, check, fork and async watchers. */
struct mux__link {
    struct mux__link *next;
    struct mux__link *prev;
};

/* io: readiness of a file descriptor. Any number of io watchers may watch one fd. */
typedef struct mux_io mux_io_t;
/* `revents` holds MUX_READ, MUX_WRITE and/or MUX_RDHUP, or MUX_ERROR (with the watched
 * events). */
typedef void (*mux_io_cb)(mux_loop_t *loop, mux_io_t *w, unsigned revents);
struct mux_io {
    void *data;
    struct mux__whdr h_;
    mux_io_cb cb_;
    mux_io_t *next_;
    int fd_;
    unsigned events_;
};

/* Initialises `w` to watch `fd` (>= 0) for `events` (MUX_READ, MUX_WRITE and/or MUX_RDHUP,
 * optionally MUX_EDGE; none of the three is -EINVAL). Returns 0 or -EINVAL. The caller keeps
 * ownership of `w` and of `fd`; closing the fd does not stop the watcher: stop it first.
 * When the kernel refuses to watch the fd (it was closed: EBADF), the watcher is stopped and
 * called with MUX_ERROR; poll and select find that out on the next iteration, epoll and
 * io_uring only when the loop next tells the kernel about the fd (docs/io.md has the
 * details). Fds that cannot be polled (regular files: epoll's EPERM) are reported ready on
 * every iteration, as poll and select do. */
int mux_io_init(mux_io_t *w, mux_io_cb cb, int fd, unsigned events);
/* Changes the fd and events of an inactive watcher (as after a close and re-open of the
 * fd). Returns 0, -EBUSY if active, -EINVAL. */
int mux_io_set(mux_io_t *w, int fd, unsigned events);
/* Changes the events of a watcher, active or not; takes effect before the next wait, and
 * an event already gathered for a dropped direction is discarded. Returns 0, -EINVAL, or
 * -ENOTSUP for MUX_RDHUP on a loop whose backend lacks it (the watcher is left as it was). */
int mux_io_modify(mux_loop_t *loop, mux_io_t *w, unsigned events);
/* Starts watching. Returns 0; -EBUSY if already active; -EINVAL for bad arguments or an fd
 * the backend cannot watch (select: fd >= FD_SETSIZE); -ENOTSUP for MUX_RDHUP on a backend
 * that lacks it (mux_io_events_supported); -ENOMEM. */
int mux_io_start(mux_loop_t *loop, mux_io_t *w);
/* Stops watching. Returns 0 (also when inactive) or -EINVAL. */
int mux_io_stop(mux_loop_t *loop, mux_io_t *w);
/* Returns 1 when active, 0 when not, -EINVAL for NULL or an uninitialised watcher. */
int mux_io_is_active(const mux_io_t *w);
/* Returns the watched fd, or -EINVAL. */
int mux_io_fd(const mux_io_t *w);

/* timer: relative to the loop's monotonic time, in nanoseconds. Equal deadlines fire in
 * start order; a timer never fires before its deadline. */
typedef struct mux_timer mux_timer_t;
typedef void (*mux_timer_cb)(mux_loop_t *loop, mux_timer_t *t);
struct mux_timer {
    void *data;
    struct mux__whdr h_;
    mux_timer_cb cb_;
    uint64_t repeat_;
    struct mux__hlink hl_;
    uint64_t due_; /* the deadline; its place in the loop's heap may still be an earlier one */
};

/* Initialises `t`. Returns 0 or -EINVAL. */
int mux_timer_init(mux_timer_t *t, mux_timer_cb cb);
/* Fires `after_ns` from mux_now(loop), then every `repeat_ns` if that is not 0 (a timer
 * that falls behind skips the missed periods rather than firing in a burst). A one-shot
 * timer is already inactive when its callback runs, so it may be started again from
 * there; a repeating one is active. Returns 0, -EBUSY if active, -EINVAL, -ENOMEM. */
int mux_timer_start(mux_loop_t *loop, mux_timer_t *t, uint64_t after_ns, uint64_t repeat_ns);
/* Stops the timer. Returns 0 (also when inactive) or -EINVAL. */
int mux_timer_stop(mux_loop_t *loop, mux_timer_t *t);
/* Restarts an idle timeout: the timer becomes due `repeat` from now (started if inactive);
 * with a repeat of 0 it is stopped. Moving a deadline later costs no heap operation.
 * Returns 0, -EINVAL, -ENOMEM. */
int mux_timer_again(mux_loop_t *loop, mux_timer_t *t);
/* Sets the repeat used by the next expiry or mux_timer_again. Returns 0 or -EINVAL. */
int mux_timer_set_repeat(mux_timer_t *t, uint64_t repeat_ns);
/* Returns the nanoseconds until the timer is due (0 if overdue), -EINVAL if inactive. */
int64_t mux_timer_remaining(const mux_loop_t *loop, const mux_timer_t *t);
/* Returns 1 when active, 0 when not, -EINVAL. */
int mux_timer_is_active(const mux_timer_t *t);

/* periodic: wall-clock time (CLOCK_REALTIME, nanoseconds since the Unix epoch). Follows
 * the wall clock across jumps: after the clock is set, every periodic is rescheduled. */
typedef struct mux_periodic mux_periodic_t;
typedef void (*mux_periodic_cb)(mux_loop_t *loop, mux_periodic_t *p);
struct mux_periodic {
    void *data;
    struct mux__whdr h_;
    mux_periodic_cb cb_;
    int64_t offset_;
    uint64_t interval_;
    struct mux__hlink hl_;
};

/* Initialises `p`. Returns 0 or -EINVAL. */
int mux_periodic_init(mux_periodic_t *p, mux_periodic_cb cb);
/* With interval_ns 0: fires once at wall-clock time `offset_ns` (at once if it has passed)
 * and is inactive when its callback runs. Otherwise fires at every offset_ns + k * interval_ns of
 * the wall clock, the next one after now (offset 0, interval 3600e9: on every full hour, UTC).
 * Returns 0, -EBUSY if active, -EINVAL (offset_ns < 0), -ENOMEM. */
int mux_periodic_start(mux_loop_t *loop, mux_periodic_t *p, int64_t offset_ns,
                       uint64_t interval_ns);
/* Stops the periodic. Returns 0 (also when inactive) or -EINVAL. */
int mux_periodic_stop(mux_loop_t *loop, mux_periodic_t *p);
/* Returns the wall-clock time of the next firing, or -EINVAL if inactive. */
int64_t mux_periodic_at(const mux_loop_t *loop, const mux_periodic_t *p);

/* signal: delivered through the loop, never in a signal handler, to every active watcher
 * of that signal in every loop. Signals that arrive together are coalesced into one call.
 * The process's previous disposition is restored when the last watcher of the signal in
 * the process stops. On Windows, the console's events: SIGINT (Ctrl-C), SIGBREAK
 * (Ctrl-Break), SIGHUP (the console closed) and SIGWINCH (its window resized). */
typedef struct mux_signal mux_signal_t;
typedef void (*mux_signal_cb)(mux_loop_t *loop, mux_signal_t *w, int signum);
struct mux_signal {
    void *data;
    struct mux__whdr h_;
    mux_signal_cb cb_;
    mux_signal_t *next_;
    int signum_;
};

/* Initialises `w` for `signum` (1 .. NSIG-1, not SIGKILL or SIGSTOP; on Windows 1 .. 63).
 * Returns 0 or -EINVAL. */
int mux_signal_init(mux_signal_t *w, mux_signal_cb cb, int signum);
/* Starts the watcher. Returns 0, -EBUSY if active, -EINVAL, -ENOSPC when more loops than
 * the library supports (64) watch signals at once, or sigaction's error; on Windows
 * -ENOTSUP for a signal other than the four it delivers. */
int mux_signal_start(mux_loop_t *loop, mux_signal_t *w);
/* Stops the watcher. Returns 0 (also when inactive) or -EINVAL. */
int mux_signal_stop(mux_loop_t *loop, mux_signal_t *w);

/* child: the exit (or death by signal) of a child process, reaped by the loop with
 * waitpid. A watcher for one pid stops itself before its callback; a watcher for any pid
 * (pid 0) stays active and is called once per reaped child. Only children that some loop
 * watches are reaped, except that an any-pid watcher reaps every child. On Windows, any
 * process the program may open (SYNCHRONIZE) can be watched by its id, its end learnt from
 * its handle; there is no any-pid watcher (docs/child.md). */
typedef struct mux_child mux_child_t;
/* `wstatus` is waitpid's status: use WIFEXITED, WEXITSTATUS, WIFSIGNALED, WTERMSIG. On
 * Windows, the process's exit code (GetExitCodeProcess). */
typedef void (*mux_child_cb)(mux_loop_t *loop, mux_child_t *w, int pid, int wstatus);
struct mux_child {
    void *data;
    struct mux__whdr h_;
    mux_child_cb cb_;
    mux_child_t *next_;
    int pid_;
    int rpid_;
#ifdef _WIN32
    void *proc_;  /* the process's handle while watched */
    void *wait_;  /* the wait registered on it */
    int exited_;  /* atomic: the wait saw it end */
    int pad_;
#endif
};

/* Initialises `w` for child `pid` (> 0), or for any child (0). Returns 0 or -EINVAL. */
int mux_child_init(mux_child_t *w, mux_child_cb cb, int pid);
/* Starts the watcher; a child that already exited is reported on the next iteration.
 * Returns 0, -EBUSY if active, -EINVAL, -ENOSPC (see mux_signal_start). On Windows also
 * -ESRCH (no such process), -EACCES (one the program may not open), -ENOTSUP (pid 0). */
int mux_child_start(mux_loop_t *loop, mux_child_t *w);
/* Stops the watcher. Returns 0 (also when inactive) or -EINVAL. */
int mux_child_stop(mux_loop_t *loop, mux_child_t *w);

/* idle: called once per iteration while no other event is pending; while an idle watcher
 * is active the loop polls without blocking. */
typedef struct mux_idle mux_idle_t;
typedef void (*mux_idle_cb)(mux_loop_t *loop, mux_idle_t *w);
struct mux_idle {
    void *data;
    struct mux__whdr h_;
    mux_idle_cb cb_;
    struct mux__link link_;
};
int mux_idle_init(mux_idle_t *w, mux_idle_cb cb);    /* 0 or -EINVAL */
int mux_idle_start(mux_loop_t *loop, mux_idle_t *w); /* 0, -EBUSY, -EINVAL */
int mux_idle_stop(mux_loop_t *loop, mux_idle_t *w);  /* 0 or -EINVAL */

/* prepare: called once per iteration just before the loop waits for events. */
typedef struct mux_prepare mux_prepare_t;
typedef void (*mux_prepare_cb)(mux_loop_t *loop, mux_prepare_t *w);
struct mux_prepare {
    void *data;
    struct mux__whdr h_;
    mux_prepare_cb cb_;
    struct mux__link link_;
};
int mux_prepare_init(mux_prepare_t *w, mux_prepare_cb cb); /* 0 or -EINVAL */
int mux_prepare_start(mux_loop_t *loop, mux_prepare_t *w); /* 0, -EBUSY, -EINVAL */
int mux_prepare_stop(mux_loop_t *loop, mux_prepare_t *w);  /* 0 or -EINVAL */

/* check: called once per iteration just after the wait, after the io, timer, periodic,
 * signal, child, async and idle callbacks of that iteration. */
typedef struct mux_check mux_check_t;
typedef void (*mux_check_cb)(mux_loop_t *loop, mux_check_t *w);
struct mux_check {
    void *data;
    struct mux__whdr h_;
    mux_check_cb cb_;
    struct mux__link link_;
};
int mux_check_init(mux_check_t *w, mux_check_cb cb);   /* 0 or -EINVAL */
int mux_check_start(mux_loop_t *loop, mux_check_t *w); /* 0, -EBUSY, -EINVAL */
int mux_check_stop(mux_loop_t *loop, mux_check_t *w);  /* 0 or -EINVAL */

/* fork: called in the child on its first iteration after a fork, once the loop's kernel
 * state has been re-created. */
typedef struct mux_fork mux_fork_t;
typedef void (*mux_fork_cb)(mux_loop_t *loop, mux_fork_t *w);
struct mux_fork {
    void *data;
    struct mux__whdr h_;
    mux_fork_cb cb_;
    struct mux__link link_;
};
int mux_fork_init(mux_fork_t *w, mux_fork_cb cb);    /* 0 or -EINVAL */
int mux_fork_start(mux_loop_t *loop, mux_fork_t *w); /* 0, -EBUSY, -EINVAL */
int mux_fork_stop(mux_loop_t *loop, mux_fork_t *w);  /* 0 or -EINVAL */

/* async: a wake-up from another thread or a signal handler. Sends that arrive before the
 * loop gets to the watcher are coalesced into one call, and a send is never lost: after
 * the last send returns, the callback runs at least once more.
 *
 * A send may overlap mux_async_stop: the stop waits until every send already inside
 * mux_async_send has returned, and a send that starts after the stop returns -EINVAL. So a
 * loop may stop its watcher, close, and free the loop as soon as the stop returns, even from
 * the callback of the very send that told it to (a controller telling a worker's loop to
 * end). What the sender must still guarantee: the watcher's own memory stays valid while any
 * thread or signal handler may call mux_async_send on it. The usual ways:
 *   - the senders are threads the loop's thread joins before it frees the watcher;
 *   - or the senders check a flag of yours under your own lock, and the loop's thread
 *     clears the flag under that lock before it frees the watcher:
 *         sender:       lock(m); if (open) mux_async_send(&w); unlock(m);
 *         loop thread:  lock(m); open = 0; unlock(m); mux_async_stop(loop, &w); free
 *   - a signal handler: block the signal (or restore its disposition) before the free.
 * mux_async_init resets the watcher: no send may overlap it. */
typedef struct mux_async mux_async_t;
typedef void (*mux_async_cb)(mux_loop_t *loop, mux_async_t *w);
struct mux_async {
    void *data;
    struct mux__whdr h_;
    mux_async_cb cb_;
    struct mux__loop *loop_;
    struct mux__link link_;
    int sent_;
    int busy_; /* sends inside mux_async_send: mux_async_stop waits for them */
};
int mux_async_init(mux_async_t *w, mux_async_cb cb);   /* 0 or -EINVAL */
int mux_async_start(mux_loop_t *loop, mux_async_t *w); /* 0, -EBUSY, -EINVAL */
int mux_async_stop(mux_loop_t *loop, mux_async_t *w);  /* 0 or -EINVAL */
/* cleanup: called once when the loop closes (libev's ev_cleanup), the last started first, so
 * that a library layered on a loop frees what it hangs on it: stops its own (unreferenced)
 * watchers, frees its state. A started cleanup watcher keeps nothing running and is not a
 * reason for mux_loop_close's -EBUSY; mux_loop_close runs the cleanups (each stopped before
 * its call) once no referenced watcher or handle is active, then closes the loop unless one
 * is active again or left active (-EBUSY, with the cleanups done). Its callback may stop
 * watchers and start more cleanup watchers (they run too), not start others. */
typedef struct mux_cleanup mux_cleanup_t;
typedef void (*mux_cleanup_cb)(mux_loop_t *loop, mux_cleanup_t *w);
struct mux_cleanup {
    void *data;
    struct mux__whdr h_;
    mux_cleanup_cb cb_;
    struct mux__link link_;
};
int mux_cleanup_init(mux_cleanup_t *w, mux_cleanup_cb cb);   /* 0 or -EINVAL */
int mux_cleanup_start(mux_loop_t *loop, mux_cleanup_t *w); /* 0, -EBUSY, -EINVAL */
int mux_cleanup_stop(mux_loop_t *loop, mux_cleanup_t *w);  /* 0 or -EINVAL */

/* fs_event: changes to a file or to the entries of a directory (docs/fs.md), from the
 * kernel's notifications: inotify on Linux, one descriptor per loop; kqueue's EVFILT_VNODE on
 * the BSDs and macOS, one kqueue per loop (a directory's entries found by reading it again:
 * created, removed and renamed ones only); ReadDirectoryChangesW on Windows; where the
 * platform has none of its own, mux_fs_event_start says -ENOTSUP and mux_fs_poll_t serves.
 * The events of one iteration for one name are coalesced into one call. */
enum {
    MUX_FS_CHANGE = 0x01,   /* contents written */
    MUX_FS_ATTRIB = 0x02,   /* metadata: permissions, owner, times, links */
    MUX_FS_CREATE = 0x04,   /* an entry appeared in the watched directory */
    MUX_FS_DELETE = 0x08,   /* an entry was removed from it */
    MUX_FS_RENAME = 0x10,   /* an entry was moved into it, out of it, or renamed in it */
    MUX_FS_GONE = 0x20,     /* the watched path itself was removed or moved away (or its file
                               system unmounted): the watcher is stopped before this call */
    MUX_FS_OVERFLOW = 0x40, /* the kernel's queue overflowed: events were lost (`name` is
                               NULL); look again at what is watched */
};
typedef struct mux_fs_event mux_fs_event_t;
/* `name` is the entry's name for an event in a watched directory, the watched file's own
 * name (its last path component) for an event on a watched file, NULL for MUX_FS_OVERFLOW;
 * valid during the call. `events` holds MUX_FS_* bits. `status` is 0, or a negative errno when
 * watching failed (the backend refused the notification descriptor, or reading it failed):
 * the watcher is stopped before the call, and `events` is 0. */
typedef void (*mux_fs_event_cb)(mux_loop_t *loop, mux_fs_event_t *w, const char *name,
                                unsigned events, int status);
struct mux_fs_event {
    void *data;
    struct mux__whdr h_;
    mux_fs_event_cb cb_;
    char *path_;            /* a copy of the path, made by init, freed by mux_fs_event_free */
    mux_fs_event_t *next_;  /* the watchers of the same kernel watch */
    int wd_;                /* the kernel's watch, while active */
};
/* Initialises `w` for `path` (copied: NUL-terminated, not empty). Returns 0, -EINVAL,
 * -ENOMEM. The copy is freed by mux_fs_event_free (before `w` is initialised again). */
int mux_fs_event_init(mux_fs_event_t *w, mux_fs_event_cb cb, const char *path);
/* Starts watching. Returns 0; -EBUSY if active; -ENOENT (the path does not exist), -ENOTDIR,
 * -EACCES, -ELOOP, -ENAMETOOLONG; -ENOSPC (the user's limit of watches, inotify's
 * max_user_watches), -EMFILE (of notification descriptors); -ENOTSUP where the platform has
 * no notifications (use mux_fs_poll_t); -EINVAL; -ENOMEM. */
int mux_fs_event_start(mux_loop_t *loop, mux_fs_event_t *w);
/* Stops watching; no callback follows. Returns 0 (also when inactive) or -EINVAL. */
int mux_fs_event_stop(mux_loop_t *loop, mux_fs_event_t *w);
/* Frees init's copy of the path; `w` must be inactive (-EBUSY otherwise). 0 or -EBUSY. */
int mux_fs_event_free(mux_fs_event_t *w);
/* Returns 1 when active, 0 when not (also after MUX_FS_GONE stopped it), -EINVAL. */
int mux_fs_event_is_active(const mux_fs_event_t *w);

/* fs_poll: a path's status looked at every `interval_ns` (libev's ev_stat, libuv's
 * uv_fs_poll), where the kernel gives no notifications and for network file systems. The
 * callback runs when anything of the status changed: size, times, inode, device, mode, owner,
 * links; or when the path starts or stops existing (status -ENOENT), or cannot be looked at
 * (another -errno), once per change of status. `prev` is what was seen before, `curr` now
 * (all zero while the path does not exist). The first look is at start, and what it sees is
 * what the next ones are compared with; when the path cannot be looked at then (-ENOENT, ...),
 * the callback says so at once, from the loop. The look is a stat(2) on the loop's thread. */
typedef struct mux_fs_stat {
    uint64_t size, ino, dev;
    int64_t mtime_ns, ctime_ns;
    uint32_t mode, nlink, uid, gid;
} mux_fs_stat_t;
typedef struct mux_fs_poll mux_fs_poll_t;
typedef void (*mux_fs_poll_cb)(mux_loop_t *loop, mux_fs_poll_t *w, int status,
                               const mux_fs_stat_t *prev, const mux_fs_stat_t *curr);
struct mux_fs_poll {
    void *data;
    struct mux__whdr h_;
    mux_fs_poll_cb cb_;
    char *path_;
    uint64_t interval_;
    int status_;
    mux_fs_stat_t last_;
    mux_timer_t timer_;
    struct mux__link link_; /* the loop's fs_poll watchers */
};
/* Initialises `w` for `path` (copied), looked at every `interval_ns` (> 0). Returns 0,
 * -EINVAL, -ENOMEM; the copy is freed by mux_fs_poll_free (before `w` is initialised again). */
int mux_fs_poll_init(mux_fs_poll_t *w, mux_fs_poll_cb cb, const char *path, uint64_t interval_ns);
int mux_fs_poll_start(mux_loop_t *loop, mux_fs_poll_t *w); /* 0, -EBUSY, -EINVAL, -ENOMEM */
int mux_fs_poll_stop(mux_loop_t *loop, mux_fs_poll_t *w);  /* 0 or -EINVAL */
int mux_fs_poll_free(mux_fs_poll_t *w);                    /* 0, or -EBUSY while active */

/* Wakes the loop of the started watcher `w` and makes its callback run. Thread-safe and
 * async-signal-safe; must not race with mux_async_stop of the same watcher. Everything the
 * sending thread wrote before the send is visible to the callback that the send causes
 * (the send is a sequentially consistent atomic operation). Returns 0, -EINVAL when `w` is
 * NULL or not started, or the error of the wake-up (-EBADF in a fork's child whose loop has
 * not re-created its kernel state yet: the callback still runs once it has). */
int mux_async_send(mux_async_t *w);
/* Returns 1 when a send is waiting for the loop, 0 when not, -EINVAL. Thread-safe. */
int mux_async_pending(const mux_async_t *w);

/* ---------------------------------------------------------------------------------------
 * Streams: completion-style TCP (IPv4, IPv6) and Unix-domain stream sockets.
 *
 * The caller asks for an operation and is called back when it is done. A stream holds
 * references to the caller's buffers and buffer arrays while operations are in flight, so
 * closing is asynchronous: mux_stream_close(s, cb), and the memory of the stream, of its
 * unfinished write requests and of their buffers may be reused from `cb` on. Every queued
 * write is called back exactly once: 0 when all its bytes were written, a negative errno
 * when it failed, -ECANCELED when the stream was closed first. Callbacks never run from
 * inside the call that caused them; they run from the loop, after the current callback.
 * Every struct is the caller's, and reads, writes and accepts allocate nothing. The loop's
 * own tables grow when a stream or listener opens (-ENOMEM then), and on io_uring a pool's
 * first use on a loop allocates that pool's ring of provided buffers, kept until the loop
 * closes. The `data` field of every struct is the caller's: the library keeps it (open,
 * connect, listen, bufpool_init) and never reads it. SIGPIPE is never raised.
 * ------------------------------------------------------------------------------------ */

/* A buffer: base and length. Laid out as the system's scatter/gather element (struct iovec
 * here; WSABUF, length first, on Windows), so that an array of them goes to the kernel as
 * it is. */
#ifdef _WIN32
typedef struct mux_buf {
    unsigned long len;
    char *base;
} mux_buf_t;
#else
typedef struct mux_buf {
    char *base;
    size_t len;
} mux_buf_t;
#endif

/* Returns a mux_buf_t for `len` bytes at `base`. */
static inline mux_buf_t mux_buf_init(void *base, size_t len)
{
    mux_buf_t b;
    b.base = (char *)base;
    b.len = len; /* Windows: at most ULONG_MAX per buffer */
    return b;
}

/* The system's socket handle: a file descriptor here, a SOCKET on Windows. */
#ifdef _WIN32
typedef SOCKET mux_os_sock_t;
#define MUX_OS_SOCK_INVALID INVALID_SOCKET
#else
typedef int mux_os_sock_t;
#define MUX_OS_SOCK_INVALID (-1)
#endif

typedef struct mux_stream mux_stream_t;
typedef struct mux_write mux_write_t;
typedef struct mux_listener mux_listener_t;
typedef struct mux_bufpool mux_bufpool_t;

/* Private: work the loop runs from its pending queue (a stream's or listener's deliveries). */
struct mux__task {
    struct mux__whdr h_;
    void (*run_)(struct mux__task *t);
};

struct mux__dbatch;  /* private: a batch of datagrams (src/backend/backend.h) */
struct mux__pwrite;  /* private: a mux_write_pool's request (src/stream/stream.c) */
struct mux__pwblock; /* private: a block of them */

/* Private: one operation (receive, send, accept, connect, shutdown) handed to the loop's
 * backend, which runs it natively (io_uring, IOCP) or emulates it with non-blocking system
 * calls (readiness backends). src/backend/backend.h has the contract. */
struct mux__op {
    int (*done_)(struct mux__op *op, int res, char *buf, unsigned flags);
    mux_os_sock_t sock_;
    uint8_t kind_;    /* MUX__OP_* */
    uint8_t flags_;   /* MUX__OPF_* */
    uint16_t streak_; /* emulation: completions in a row without waiting */
    union {
        mux_buf_t buf;       /* receive into, or send from, one buffer */
        mux_bufpool_t *pool; /* receive into a buffer of the pool */
        struct {
            const mux_buf_t *v;
            uint32_t n;
        } bufs; /* send from several buffers */
        struct {
            const struct sockaddr *sa;
            uint32_t len;
        } addr;         /* connect: read during the submitting call only */
        unsigned batch; /* accept: connections taken per readiness */
        struct {
            uint64_t off;
            uint32_t len;
            int fd;
        } file;                   /* send from a file */
        struct mux__dbatch *dgram; /* datagrams to receive or send (include/iomux/udp.h) */
    } a_;
    union {
        mux_io_t io;   /* the readiness emulation's watcher */
        void *word[5]; /* a completion backend's own (io_uring's links; an OVERLAPPED fits) */
    } priv_;
};

/* `nread` > 0: that many bytes are in `buf`. 0: the peer shut down its side (end of
 * stream). < 0: a negative errno (-ECONNRESET, -ETIMEDOUT from a timeout, -ENOBUFS when the
 * pool is empty). After 0 or an error, reading has stopped and `buf` is NULL. With a pool,
 * `buf` is the caller's until it is given back with mux_bufpool_put. */
typedef void (*mux_read_cb)(mux_stream_t *s, ssize_t nread, char *buf);
/* `status`: 0, or a negative errno; -ECANCELED when the stream was closed first. */
typedef void (*mux_write_cb)(mux_write_t *req, int status);
/* `status`: 0 when connected, else a negative errno (-ECONNREFUSED, -ENETUNREACH, ...,
 * -ECANCELED when closed first). After a failure, close the stream. */
typedef void (*mux_connect_cb)(mux_stream_t *s, int status);
/* `status`: the result of shutting down the write side, which happens once every write
 * queued before it has ended (each write's own callback says how): 0, a negative errno, or
 * -ECANCELED when the stream was closed first. */
typedef void (*mux_shutdown_cb)(mux_stream_t *s, int status);
/* From here on the stream's memory is the caller's again. */
typedef void (*mux_close_cb)(mux_stream_t *s);
/* A new connection: `sock` (non-blocking, close-on-exec) is the caller's, to hand to
 * mux_stream_open or to close, and `status` is 0. Or `sock` is MUX_OS_SOCK_INVALID and
 * `status` a negative errno, and the listener has paused: -EMFILE/-ENFILE (out of
 * descriptors), -ENOBUFS/-ENOMEM, or another error of accept (errors that concern one
 * connection, such as -ECONNABORTED, are skipped silently). It resumes by itself as soon as
 * a stream of this loop closes, else within 100 ms, and serves its backlog then; should the
 * 100 ms timer not start, the callback is called again with its error (-ENOMEM) and only a
 * stream's close resumes it. */
typedef void (*mux_accept_cb)(mux_listener_t *l, mux_os_sock_t sock, int status);
typedef void (*mux_listener_close_cb)(mux_listener_t *l);

/* A pool of equal buffers in caller memory, for reads that should not pin one buffer per
 * idle connection. */
struct mux_bufpool {
    void *data;
    char *mem_;
    size_t size_;
    uint32_t count_, nfree_, head_, pad_;
    uint32_t *free_;                    /* free list threaded through caller memory; in-use marks */
    struct mux__loop *loop_;            /* the loop whose kernel holds the free buffers, or NULL */
    void *kring_;                       /* that loop's backend's state for the pool */
    void (*kput_)(mux_bufpool_t *pool); /* tells that backend a buffer came back */
};

/* Makes `pool` hand out `count` (1 .. INT32_MAX) buffers of `size` bytes carved from
 * `mem` (count * size bytes, which must fit a size_t), using `free_slots` (count entries) for its bookkeeping;
 * `pool->data` is kept. All three are the
 * caller's and must outlive the pool's use: where the kernel picks the buffers (io_uring),
 * until the loop that reads from it is closed (the pool's free buffers are that kernel's
 * then, and a pool serves that one loop: mux_read_start_pool elsewhere returns -EINVAL, a
 * reader elsewhere gets -ENOBUFS). Align `mem` to 64 bytes (a page is best) and make `size`
 * a multiple of 64: the kernel copies into misaligned buffers far more slowly
 * (docs/studies.md).
 * Returns 0 or -EINVAL. */
int mux_bufpool_init(mux_bufpool_t *pool, void *mem, size_t size, uint32_t count,
                     uint32_t *free_slots);
/* Gives a buffer that a read callback received back to its pool. Returns 0, or -EINVAL for
 * a pointer that is not a buffer of this pool or that is already free. */
int mux_bufpool_put(mux_bufpool_t *pool, char *buf);
/* Gives a pool's memory back to the caller before the loop it serves closes: the kernel's
 * ring of its free buffers is taken down (io_uring), and a later read from the pool binds it
 * again. Returns 0 (also for a pool that serves no loop's kernel), -EBUSY while a receive
 * from it is in flight (a stream reads from it, or was stopped with a receive pending),
 * -EINVAL. */
int mux_bufpool_detach(mux_bufpool_t *pool);
/* Returns the number of free buffers, or -EINVAL. */
int mux_bufpool_available(const mux_bufpool_t *pool);

/* A write request: caller-owned, passed to mux_write or mux_write_file, the caller's again
 * in its callback; until then it must not be passed to either again. */
struct mux_write {
    void *data;
    mux_write_cb cb_;
    mux_write_t *next_;
    const mux_buf_t *bufs_;
    uint32_t nbufs_, idx_;
    size_t off_;  /* bytes of bufs_[idx_] already written */
    size_t left_; /* bytes not yet written, the file's included (its last part) */
    int status_;
    int ffd_;       /* the file after the buffers, or -1 */
    uint64_t foff_; /* where its next byte is read from */
};

/* Per-stream timeouts, in nanoseconds; 0 disables one. When one expires, the read
 * callback (if reading) gets -ETIMEDOUT and queued writes fail with -ETIMEDOUT. A connect
 * counts as writing: set on a stream that is still connecting, the idle and write timeouts
 * end the connect, and the connect callback gets -ETIMEDOUT. */
typedef struct mux_stream_timeouts {
    uint64_t idle_ns;  /* no byte read or written for this long */
    uint64_t read_ns;  /* reading, and no byte arrived for this long */
    uint64_t write_ns; /* writes queued, and no byte left for this long */
} mux_stream_timeouts_t;

struct mux_stream {
    void *data;
    /* private */
    struct mux__loop *loop_;
    mux_os_sock_t sock_;
    unsigned flags_;
    mux_read_cb read_cb_;
    union {
        mux_buf_t buf;       /* the caller's read buffer */
        mux_bufpool_t *pool; /* or the pool reads take buffers from */
    } rto_;
    mux_write_t *wq_head_, *wq_tail_;     /* queued, in order */
    mux_write_t *done_head_, *done_tail_; /* finished, callbacks not yet run */
    size_t wq_bytes_;
    /* the buffers of queued writes gathered into one send (allocated at the first need) */
    mux_buf_t *gv_;
    /* mux_write_pool's requests: the free ones, and every block of them (allocated as needed) */
    struct mux__pwrite *pw_free_;
    struct mux__pwblock *pw_blocks_;
    mux_bufpool_t *wpool_; /* the pool of the send in flight without a request (S_PSEND) */
    union { /* never due together: a shutdown needs the connect delivered */
        mux_connect_cb connect;
        mux_shutdown_cb shutdown;
    } cb_;
    mux_close_cb close_cb_;
    int status_;    /* the connect's or the shutdown's, not yet delivered */
    int fail_;      /* an error for the reader and the writes, not yet delivered */
    int rres_;      /* the result of the last receive, not yet delivered */
    int wres_;      /* and of the send, connect or shutdown */
    char *rgot_;    /* the pool buffer of that receive */
    uint32_t roff_; /* bytes of it already copied into a caller buffer */
    uint32_t widx_; /* the index in wpool_ of that send's buffer */
    mux_stream_timeouts_t to_;
    uint64_t last_read_, last_write_;
    mux_timer_t timer_;
    struct mux__task task_;
    struct mux__op rop_, wop_; /* the receive; the send, connect or shutdown */
    struct mux__link link_;    /* the loop's open streams, for mux_loop_walk */
};

/* Adopts `sock`, a connected stream socket (it is made non-blocking), as stream `s` of
 * `loop`; `s->data` is kept, every other field is set. On success the stream owns the
 * socket and closes it in mux_stream_close; on failure the socket stays the caller's, to
 * close. Returns 0, -EINVAL (also for a socket the backend cannot watch: select's
 * FD_SETSIZE), -EBADF, -ENOMEM. */
int mux_stream_open(mux_loop_t *loop, mux_stream_t *s, mux_os_sock_t sock);
/* As mux_stream_open, on `l`'s loop, for a socket that `l` handed to its accept callback
 * (libuv's uv_accept): it is set up already, so nothing is asked of the kernel. Returns 0,
 * -EINVAL (also for a listener that is closing, and a socket the backend cannot watch),
 * -ENOMEM. */
int mux_stream_accept(mux_listener_t *l, mux_stream_t *s, mux_os_sock_t sock);
/* Starts connecting `s` to a TCP or Unix address; `cb` is called once. `addr` is read
 * during this call only. `s->data` is kept. Returns 0 (the result comes to `cb`; close the
 * stream in any case when done with it), or without calling `cb` (the stream is then not
 * open): -EINVAL, -EAFNOSUPPORT, -EMFILE (also for a socket select cannot watch), -ENOMEM, or
 * another error of socket() (-ENFILE, -EACCES, ...). */
int mux_stream_connect(mux_loop_t *loop, mux_stream_t *s, const struct sockaddr *addr,
                       socklen_t addrlen, mux_connect_cb cb);
/* Starts continuous reads into the caller's buffer `buf` of `len` bytes: every callback
 * sees the data at the start of `buf`; the next read reuses it after the callback returns.
 * The buffer is written only by a receive whose callback follows at once, on every backend,
 * so the streams of one loop may share one buffer, if each callback takes what it needs
 * before it returns (no memory per idle reader; a pool saves the copy instead).
 * Returns 0, -EINVAL, -EBUSY if already reading, -ENOTCONN before connect completed. */
int mux_read_start(mux_stream_t *s, char *buf, size_t len, mux_read_cb cb);
/* As mux_read_start, but every read takes a fresh buffer from `pool` (on io_uring the kernel
 * picks it as the bytes arrive). Also -EINVAL when the pool serves another loop's kernel,
 * -EBUSY while a receive from another pool, stopped, is still in flight or has bytes kept
 * for the next start (restart with that pool), -ENOMEM when the loop cannot take the pool
 * into its kernel's care (io_uring's buffer ring, IOCP's bookkeeping) for want of memory. */
int mux_read_start_pool(mux_stream_t *s, mux_bufpool_t *pool, mux_read_cb cb);
/* Stops reading; no read callback runs after it returns, and a caller buffer is the
 * caller's again. Returns 0 or -EINVAL. */
int mux_read_stop(mux_stream_t *s);
/* Queues a write of the `nbufs` buffers of `bufs`, after the writes already queued. The
 * array and the buffers must stay untouched until `cb`; `req` is the caller's. A write is
 * tried at once when nothing is queued (where the kernel runs the operations, it is sent
 * with the loop's next wait). Returns 0 (cb will be called), or without calling cb: -EINVAL
 * (also for more than INT32_MAX buffers, or lengths that add up past SSIZE_MAX, as writev
 * refuses them), -EOVERFLOW when the bytes queued with this write's would pass SSIZE_MAX (what
 * mux_stream_write_queue_size counts), -EPIPE after shutdown, -ENOTCONN. */
int mux_write(mux_stream_t *s, mux_write_t *req, const mux_buf_t *bufs, unsigned nbufs,
              mux_write_cb cb);
/* As mux_write, followed by `len` bytes of the file `fd` from offset `off`: a response's
 * head and its body, say. The file's bytes go from the kernel's page cache to the socket
 * (sendfile) where the system has that, else through a buffer, read as they are sent: the
 * file must stay open, and its bytes in place, until `cb`. A file that ends before `len`
 * bytes fails the write, and the writes queued after it, with -ENODATA (what went before
 * stays sent); a read error as a send error does. Returns what mux_write returns, and -EINVAL for a negative `fd` or `off`, or a
 * range that ends past INT64_MAX, and -ENOTSUP on a stream on a pipe (docs/process.md); a
 * descriptor that is not a readable file shows in `cb` (-EBADF, -EINVAL). */
int mux_write_file(mux_stream_t *s, mux_write_t *req, const mux_buf_t *bufs, unsigned nbufs,
                   int fd, int64_t off, uint64_t len, mux_write_cb cb);
/* Sends what the socket takes at once of the `nbufs` buffers of `bufs`, and queues nothing:
 * no request, no callback, the buffers the caller's again on return (libuv's uv_try_write).
 * It sends only with no write queued or in flight, on a backend where the program makes the
 * sends (epoll, poll, select, rtsig). Returns the bytes sent, fewer than asked when the socket
 * filled up or past the first 64 buffers that hold bytes (mux_write the rest; empty buffers
 * are passed by, wherever they are), 0 for no bytes asked;
 * -EAGAIN when none went: the socket is full, writes are queued ahead, or the
 * backend sends through the kernel's own queue (io_uring, IOCP: use mux_write). Else -EINVAL,
 * -EPIPE after shutdown, -ENOTCONN, or the send's error (-ECONNRESET, -EPIPE), which the next
 * write meets again; -EINVAL also for lengths that add up past SSIZE_MAX. Bytes sent restart
 * the idle timeout. */
ssize_t mux_try_write(mux_stream_t *s, const mux_buf_t *bufs, unsigned nbufs);
/* Sends `len` bytes from `buf`, which lies in a buffer that a read callback of `s` received
 * from the pool `s` reads from (mux_read_start_pool), and gives that buffer back to the pool
 * when the send ends, whether it succeeded or failed; no request, no callback. It is queued
 * after the writes already queued, as mux_write's are, and tried at once when nothing is queued
 * (where the program makes the sends, a buffer sent whole there is back in the pool before this
 * returns; where the kernel sends, io_uring, it goes with the loop's next wait). From the call
 * on the buffer is the stream's: mux_bufpool_put and another mux_write_pool of it are -EINVAL.
 * A send that fails (-ECONNRESET, -EPIPE, -ETIMEDOUT from the write timeout) gives the read
 * callback that error, with a NULL buffer, as a receive's error would, and reading stops; if
 * the stream is not reading then, the error goes to no one (mux_write's callbacks of the
 * writes queued after it still get it). Closing the stream gives back the buffers of the sends
 * not done, before the close callback. The stream keeps its own requests for these writes,
 * allocated as more are queued at once than ever before (-ENOMEM), freed at close. Returns 0,
 * or with the buffer still the caller's: -EINVAL (a closed stream, `len` 0 or past the end of
 * the buffer, a pointer that is not in a buffer of the stream's pool, or a buffer not the
 * caller's), -EOVERFLOW (as mux_write), -EPIPE after shutdown, -ENOMEM. */
int mux_write_pool(mux_stream_t *s, char *buf, size_t len);
/* Returns the bytes queued and not yet written (for back-pressure), or -EINVAL. It is never
 * past SSIZE_MAX: mux_write refuses a write that would take it there (-EOVERFLOW). */
ssize_t mux_stream_write_queue_size(const mux_stream_t *s);
/* Shuts down the write side once every queued write is done (half-close); `cb` is called
 * once. Returns 0, -EINVAL, -EBUSY when already shutting down, -ENOTCONN. */
int mux_stream_shutdown(mux_stream_t *s, mux_shutdown_cb cb);
/* Closes the stream: reading stops, unfinished writes, connect and shutdown are called
 * back with -ECANCELED, the socket is closed, then `cb` (may be NULL) is called. Returns 0,
 * -EINVAL, -EALREADY when already closing. */
int mux_stream_close(mux_stream_t *s, mux_close_cb cb);
/* Sets TCP_NODELAY (on != 0) or clears it. Returns 0, -EINVAL, -ENOTSUP for a Unix
 * socket (or a pipe: a child's stream on Windows), or setsockopt's error. */
int mux_stream_nodelay(mux_stream_t *s, int on);
/* Enables TCP keep-alive with `idle_s` seconds (1 .. INT32_MAX) before the first probe, or
 * disables it (on == 0). Returns 0, -EINVAL, -ENOTSUP for a Unix socket (or a pipe), or
 * setsockopt's error. */
int mux_stream_keepalive(mux_stream_t *s, int on, unsigned idle_s);
/* Sets the stream's timeouts (NULL: none). Returns 0, -EINVAL, -ENOMEM. */
int mux_stream_set_timeouts(mux_stream_t *s, const mux_stream_timeouts_t *to);
/* Writes the stream's socket to `*sock`. Returns 0, -EINVAL for NULL or a stream that is
 * not open, or -ENOTSOCK for a stream on a pipe (a child's standard handle on Windows'
 * iocp: docs/process.md). */
int mux_stream_socket(const mux_stream_t *s, mux_os_sock_t *sock);
/* Returns the loop of a stream that is open or closing, or NULL from its close callback on
 * (and for a stream never opened). */
mux_loop_t *mux_stream_loop(const mux_stream_t *s);

/* Listeners. */
enum {
    MUX_LISTEN_REUSEPORT = 0x1, /* SO_REUSEPORT: several listeners (loops) share a port */
    MUX_LISTEN_V6ONLY = 0x2,    /* IPV6_V6ONLY on an IPv6 address */
    /* CPU steering of a sharded port (docs/multicore.md): both imply
     * MUX_LISTEN_REUSEPORT, for TCP only (-EINVAL for a Unix path), and are -ENOTSUP where
     * the system has no such thing (Linux has both). Run the listener's loop on that CPU. */
    MUX_LISTEN_INCOMING_CPU = 0x4, /* SO_INCOMING_CPU: of the port's listeners, this one takes
                                      the connections whose handshake the kernel processed
                                      on CPU `cpu` (Linux 6.2 on; before, a hint only) */
    MUX_LISTEN_CPU_BPF = 0x8,      /* a classic BPF program on the port's SO_REUSEPORT group
                                      picks the group's listener by CPU: the k-th listener to
                                      join the group (bind order) takes the connections of
                                      CPU k; a CPU past the last goes by the kernel's hash.
                                      Bind listener k from the loop of CPU k; `cpu` unused */
};

typedef struct mux_listen_options {
    int backlog;    /* 0: SOMAXCONN */
    unsigned flags; /* MUX_LISTEN_*; unknown bits are -EINVAL */
    unsigned batch; /* connections handed to the callback per loop iteration at most; 0: 64
                       (where the kernel accepts, io_uring: also at most 16) */
    int cpu;        /* MUX_LISTEN_INCOMING_CPU: the CPU (>= 0) whose connections it takes */
} mux_listen_options_t;

#define MUX__ACCEPT_SLOTS 16

struct mux_listener {
    void *data;
    /* private */
    struct mux__loop *loop_;
    mux_os_sock_t sock_;
    unsigned flags_;
    unsigned batch_;
    int aerr_; /* how the accept ended, not yet handled */
    mux_accept_cb cb_;
    mux_listener_close_cb close_cb_;
    mux_listener_t *next_paused_;
    mux_timer_t retry_;
    struct mux__task task_;
    struct mux__op aop_;
    mux_os_sock_t afd_[MUX__ACCEPT_SLOTS]; /* accepted, not yet handed to the callback */
    unsigned nafd_;
    unsigned agen_;         /* the process (fork generation) those were accepted in */
    struct mux__link link_; /* the loop's open listeners, for mux_loop_walk */
};

/* Binds a listening socket to `addr` (TCP; SO_REUSEADDR is always set) or to a Unix path
 * (AF_UNIX; an existing socket file at the path is not removed) and starts accepting:
 * `cb` runs once per accepted connection. `opts` may be NULL (the defaults); `l->data` is
 * kept. Returns 0, -EINVAL (bad arguments, unknown flags, a negative backlog, both steering
 * flags, a negative `cpu` with MUX_LISTEN_INCOMING_CPU, steering on a Unix path, a socket
 * the backend cannot watch), -EAFNOSUPPORT (not IPv4, IPv6 or Unix), -ENOTSUP (steering this
 * system lacks), -ENOMEM, or the socket calls' error (-EADDRINUSE, -EACCES, ...). */
int mux_listen(mux_loop_t *loop, mux_listener_t *l, const struct sockaddr *addr, socklen_t addrlen,
               const mux_listen_options_t *opts, mux_accept_cb cb);
/* Writes the bound address (to learn the port after binding port 0). Returns 0, -EINVAL,
 * or getsockname's error. */
int mux_listener_address(const mux_listener_t *l, struct sockaddr *addr, socklen_t *len);
/* Returns the loop of a listener that is open or closing, or NULL from its close callback
 * on. */
mux_loop_t *mux_listener_loop(const mux_listener_t *l);
/* Stops accepting and closes the socket; `cb` (may be NULL) runs from the loop once the
 * listener's memory is the caller's again. Returns 0, -EINVAL, -EALREADY. */
int mux_listener_close(mux_listener_t *l, mux_listener_close_cb cb);

/* ---------------------------------------------------------------------------------------
 * Channels: messages from any thread to one loop (docs/chan.md).
 *
 * A channel is a bounded queue that any number of threads send to and one loop receives
 * from: the way to hand an accepted connection, or any other message, to the loop of
 * another thread. A send takes no lock: it claims a slot with one compare-and-swap and
 * publishes it with one atomic store, and only the first message of a burst wakes the loop
 * (one wake-up per burst, as mux_async_send coalesces). The loop calls the channel's
 * callback once per message, in the order the slots were claimed, so the messages of one
 * sender arrive in the order it sent them. A full channel refuses a message (-EAGAIN)
 * rather than block; mux_chan_notify_room says when to try again.
 * ------------------------------------------------------------------------------------ */

typedef struct mux_chan mux_chan_t;

/* A message: two words of the caller's and, if `sock` is not MUX_OS_SOCK_INVALID, a socket
 * that travels with it. The channel owns that socket from a successful send on: the
 * receiving callback may open a stream with it (mux_chan_stream_open) or take it (copy it and
 * set `sock` to MUX_OS_SOCK_INVALID); a socket still in the message when the callback
 * returns, or when the channel is closed, is closed. */
typedef struct mux_msg {
    void *ptr;          /* the caller's */
    uint64_t value;     /* the caller's */
    mux_os_sock_t sock; /* a socket handed over, or MUX_OS_SOCK_INVALID */
    uint32_t flags_;    /* private: how the socket was set up; a send ignores it */
} mux_msg_t;

/* Called on the channel's loop once per message. `status` is 0 for a message delivered, or
 * -ECANCELED for a message still queued when the channel was closed (mux_chan_close calls
 * the callback for each of those before it returns; free what `ptr` holds, say). `msg` is
 * valid during the call only. The callback may close the channel, and free it then. */
typedef void (*mux_chan_cb)(mux_chan_t *c, mux_msg_t *msg, int status);

#define MUX_CHAN_MAX          (1u << 24) /* the largest capacity */
#define MUX_CHAN_ROOM_WAITERS 64         /* asyncs waiting for room at once (notify_room) */

struct mux__chan_ring;

struct mux_chan {
    void *data;
    /* private */
    struct mux__chan_ring *ring_; /* the slots, allocated by open, freed by close */
    struct mux__loop *loop_;
    mux_chan_cb cb_;
    uint64_t tail_; /* atomic: the next slot a sender claims */
    uint32_t mask_; /* capacity - 1 */
    uint32_t users_; /* atomic: senders inside a call, and the closed and done bits */
    int wake_;       /* atomic: the loop has been woken and has not begun taking yet */
    int nroom_;      /* atomic: asyncs waiting for room */
    int firing_;     /* atomic: the loop is sending the asyncs waiting for room */
    unsigned flags_; /* the loop's bits (counted, unreferenced) */
    int *gone_;      /* set to 1 when the callback closed the channel */
    mux_async_t async_;
    struct mux__link link_; /* the loop's open channels, for mux_loop_walk */
};

/* Opens channel `c` (caller-owned; `c->data` is kept) with room for `capacity` messages (1 ..
 * MUX_CHAN_MAX, rounded up to a power of two), received by `loop`, which calls `cb` for each.
 * The slots are allocated here, once; nothing is allocated per message. The channel keeps
 * the loop running (it counts as one active handle) until it is closed. Call from the loop's
 * thread. Returns 0, -EINVAL, -ENOMEM. */
int mux_chan_open(mux_loop_t *loop, mux_chan_t *c, uint32_t capacity, mux_chan_cb cb);

/* Sends a copy of `*msg` (its socket, if any, becomes the channel's: see mux_msg_t). Any
 * thread, the loop's own included; not from a signal handler. Returns 0; -EAGAIN when the
 * channel is full (nothing was sent: the socket is still the caller's); -EPIPE once the
 * channel is closed, while its memory still exists (free a channel only once no thread can
 * send to it); -EINVAL; or the wake-up's error (-EBADF in a fork's child whose loop has not
 * re-created its kernel state yet; the message is queued all the same). */
int mux_chan_send(mux_chan_t *c, const mux_msg_t *msg);

/* Sends a connection that listener `from` handed to its accept callback (call it from there,
 * on `from`'s thread) with `ptr`, `value` 0: the receiving loop opens it with
 * mux_chan_stream_open without asking the kernel anything, as mux_stream_accept does.
 * Returns what mux_chan_send returns, and -EINVAL for a NULL or closing listener or an
 * invalid socket; on any error the socket is still the caller's, to close or send again. */
int mux_chan_send_socket(mux_chan_t *c, const mux_listener_t *from, mux_os_sock_t sock,
                         void *ptr);

/* On the channel's loop, from its callback: opens stream `s` (`s->data` is kept) on that
 * loop with the socket `msg` carries, as mux_stream_accept does for a socket that came from
 * mux_chan_send_socket, else as mux_stream_open does. On success the stream owns the socket
 * and msg->sock is MUX_OS_SOCK_INVALID. Returns 0, -EINVAL (no socket, a closed channel, or
 * a socket the backend cannot watch), or mux_stream_open's errors; the socket then stays in
 * the message, and is closed when the callback returns unless the caller takes it. */
int mux_chan_stream_open(mux_chan_t *c, mux_stream_t *s, mux_msg_t *msg);

/* Asks the channel's loop to send `a` once it has taken at least one message out after this
 * call: the way a sender that met -EAGAIN waits for room. One-shot (ask again for the next
 * time). Any thread. `a` must be started on the caller's loop and stay started until it is
 * sent, the channel is closed (which sends every async still waiting; a send then returns
 * -EPIPE), or mux_chan_cancel_room returns for it. Room may come between the -EAGAIN and this
 * call: after it, try the send once more before waiting. An async already waiting is not
 * added twice. Returns 0, -EINVAL, -EPIPE when the channel is closed, -EBUSY when
 * MUX_CHAN_ROOM_WAITERS asyncs wait already. */
int mux_chan_notify_room(mux_chan_t *c, mux_async_t *a);

/* Withdraws `a` from the asyncs waiting for room: once it returns, the channel will not send
 * `a` (a send already made stays made: stopping `a` drops it), so `a` may be stopped. Any
 * thread. Waits, yielding, for a loop that is sending the waiting asyncs at that moment (or
 * closing the channel) to finish. Returns 0, also when `a` was not waiting or the channel is
 * closed, or -EINVAL. */
int mux_chan_cancel_room(mux_chan_t *c, mux_async_t *a);

/* Closes the channel, from its loop's thread (its callback included): sends begun before it
 * finish first (they are short), later ones return -EPIPE; every message still queued goes to
 * the callback with -ECANCELED, its socket closed after that call unless taken; every async
 * waiting for room is sent. When it returns, nothing refers to the channel any more except
 * senders that have yet to learn it is closed: the slots are freed, and `c` may be freed once
 * no thread will send to it again. Returns 0, -EINVAL (NULL, not open, or already closed). */
int mux_chan_close(mux_chan_t *c);

/* Returns the loop of an open channel, or NULL. */
mux_loop_t *mux_chan_loop(const mux_chan_t *c);

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_H */
