/* SPDX-License-Identifier: MIT */
/* iomux child processes: mux_spawn (docs/process.md).
 *
 * A process handle is the caller's memory, as a watcher is. mux_spawn starts the program and
 * makes the handle active; the exit callback runs once, from the loop, when the child has
 * ended and been reaped (no zombie is left), and from that callback on the memory is the
 * caller's again. Until then the handle counts in mux_loop_active and is reported by
 * mux_loop_walk (MUX_HANDLE_PROCESS), and mux_loop_close returns -EBUSY.
 *
 * On POSIX systems the child is started with posix_spawn, which does not copy the parent's
 * memory (glibc clones with the parent's address space and waits until the child has
 * exec'd, so a large process spawns as fast as a small one). Its end is learned through a
 * pidfd on Linux 5.3 and later (a descriptor that becomes readable when the process ends:
 * no SIGCHLD, no handler, nothing another library's SIGCHLD handling could take away), and
 * elsewhere through a child watcher (mux_child_t, SIGCHLD). On Windows the child is started
 * with CreateProcessW and its end learned through a child watcher on its process handle
 * (docs/process.md, "Windows").
 */
#ifndef IOMUX_PROCESS_H
#define IOMUX_PROCESS_H

#include "iomux.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mux_process mux_process_t;
/* The child ended: `exit_status` is its exit code (0 .. 255) and `term_signal` 0, or it
 * was killed by signal `term_signal` (exit_status 0). The handle is inactive, and the
 * caller's, from here on. */
typedef void (*mux_exit_cb)(mux_process_t *p, int exit_status, int term_signal);

/* What one of the child's standard descriptors (0, 1, 2) is. */
enum {
    MUX_STDIO_INHERIT = 0, /* the parent's own descriptor of that number (the default) */
    MUX_STDIO_CLOSE,       /* closed in the child */
    MUX_STDIO_STREAM,      /* one end of a new socket pair, whose other end the parent gets as
                              `stream`, opened on the loop (Windows: a loopback TCP pair) */
    MUX_STDIO_FD,          /* the parent's descriptor `fd`, which stays the parent's (Windows:
                              a handle's value, as a socket's is passed) */
};

typedef struct mux_stdio {
    int kind;             /* MUX_STDIO_* */
    mux_stream_t *stream; /* MUX_STDIO_STREAM: the caller's; `stream->data` is kept */
    int fd;               /* MUX_STDIO_FD */
} mux_stdio_t;

/* mux_spawn_options_t.flags */
enum {
    MUX_SPAWN_PROCESS_GROUP = 0x1, /* the child leads a new process group (its pid), so that
                                      mux_process_kill with a negative signal reaches its
                                      children too (Windows: a job object of its own) */
};

typedef struct mux_spawn_options {
    const char *file;     /* the program: a path, or a name looked up in PATH */
    char *const *argv;    /* argv[0] .. NULL; NULL means { file, NULL } */
    char *const *env;     /* "NAME=value" .. NULL; NULL means the parent's environment */
    const char *cwd;      /* the child's working directory; NULL means the parent's */
    mux_stdio_t stdio[3]; /* stdin, stdout, stderr; zeroed means inherited */
    unsigned flags;       /* MUX_SPAWN_*; unknown bits are -EINVAL */
} mux_spawn_options_t;

struct mux_process {
    void *data;
    /* private */
    struct mux__loop *loop_;
    mux_exit_cb exit_cb_;
    int pid_;
    unsigned flags_; /* its state, and the loop's reference bits */
    int status_, signal_; /* how it ended, not yet delivered */
    intptr_t handle_;     /* the pidfd (Linux), or the process handle (Windows), or -1 */
    mux_io_t io_;         /* the pidfd's readiness */
    mux_child_t child_;   /* or a child watcher, without a pidfd */
    void *job_;           /* Windows: the job of a MUX_SPAWN_PROCESS_GROUP child */
    struct mux__task task_;
    struct mux__link link_; /* the loop's processes, for mux_loop_walk */
};

/* Starts `opts->file` as a child process of the caller, handle `p` (the caller's; `p->data`
 * is kept) on `loop`, and calls `cb` once when it has ended. The streams of MUX_STDIO_STREAM
 * slots are open when it returns 0 (close them as any stream). Returns 0; -EINVAL (NULL
 * arguments, no file, unknown flags or stdio kinds, a MUX_STDIO_STREAM slot without a
 * stream, a negative MUX_STDIO_FD); -ENOENT when the program does not exist (or a PATH
 * search found none), -EACCES when it may not be run, -ENOEXEC, and the other errors of
 * starting a program (-ENOTDIR, -E2BIG, -ENOMEM, -EMFILE, ... and -ENOENT for a working
 * directory that does not exist); -ENOTSUP for a working directory where the system cannot
 * set one. On an error nothing was started and no stream was opened. */
int mux_spawn(mux_loop_t *loop, mux_process_t *p, const mux_spawn_options_t *opts, mux_exit_cb cb);
/* Sends signal `signum` to the child (0: only checks that it is there); a negative `signum`
 * sends -signum to its process group (MUX_SPAWN_PROCESS_GROUP). Returns 0; -ESRCH once the
 * child has ended (its exit is being delivered, or was); -EINVAL for a handle that is not
 * active or a bad signal number; kill's error. On Windows SIGTERM, SIGKILL, SIGINT and
 * SIGQUIT end the process (TerminateProcess), 0 checks, any other is -ENOSYS. */
int mux_process_kill(mux_process_t *p, int signum);
/* Stops watching the child, as a watcher's stop does: no exit callback will come, and the
 * handle's memory is the caller's when it returns. The child is left as it is: running, or,
 * once it ends, a zombie until something waits for it (waitpid, an any-pid child watcher).
 * For a program that leaves a daemon running, or gives up on a loop that can no longer
 * wait. Returns 0, or -EINVAL for a handle that is not active. */
int mux_process_detach(mux_process_t *p);
/* Returns the child's process id, or -EINVAL for a handle that is not active. */
int mux_process_pid(const mux_process_t *p);

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_PROCESS_H */
