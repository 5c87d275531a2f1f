/* SPDX-License-Identifier: MIT */
/* Child processes on POSIX systems: mux_spawn with posix_spawn, the exit through a pidfd or
 * a child watcher (Windows: spawn_win.c).
 *
 * What is odd about it, and what this file does about it:
 * - fork() copies the page tables of the parent, which takes milliseconds for a process of
 *   a few gigabytes, and the child of a multi-threaded parent may only call async-signal-
 *   safe functions until it execs. posix_spawn does neither: glibc (2.24 on) clones the
 *   process sharing its memory (CLONE_VM | CLONE_VFORK) onto a stack of its own, runs the
 *   file actions there and execs, and reports a failure of any of them, the exec's included,
 *   as posix_spawn's own result: a program that does not exist is ENOENT to the caller, not a
 *   child that exits 127. macOS and the BSDs report it the same way.
 * - The child must not inherit the loop's state: every descriptor the library opens is
 *   close-on-exec, its signal mask is cleared (the rtsig backend blocks its signals in the
 *   loop's thread) and every signal goes back to its default action (SIG_IGN survives exec,
 *   and a program started with SIGPIPE ignored misbehaves), both by the spawn attributes.
 * - The standard descriptors are file actions (dup2, close) run in the child. A source
 *   descriptor below 3 could be overwritten by an earlier dup2 (stdout and stderr swapped),
 *   and one that is close-on-exec keeps that flag under its own number, so every source is
 *   first duplicated above 2 in the parent, and the duplicate is what the child's dup2
 *   takes. A slot closed in the child is only closed if it is open (a close action on a
 *   descriptor that is not open fails the spawn on some systems).
 * - The working directory is a file action where the system has one (glibc 2.29, macOS
 *   10.15, FreeBSD 13.1: posix_spawn_file_actions_addchdir_np); elsewhere a working
 *   directory is -ENOTSUP rather than a chdir of the whole parent.
 * - A PATH search (a file name without a slash) is posix_spawnp's, which searches the
 *   parent's PATH, not the child's environment.
 * - The exit. Linux (5.3 on) gives a pidfd for the child: it becomes readable when the child
 *   ends, and waitid(P_PIDFD) reaps it, so no SIGCHLD handler is installed and nothing that
 *   another library does with SIGCHLD can take the exit away. Its readiness is an io watcher
 *   (a part of the handle), on every backend. Without pidfds (the portable build, an older
 *   kernel: ENOSYS) the handle uses a child watcher for its pid, and SIGCHLD. Either way an
 *   any-pid child watcher of the program's may reap the child first: the exit is then
 *   reported with exit_status -ECHILD.
 * - pidfd_send_signal signals the process the pidfd names even if its pid was reused;
 *   without a pidfd, kill() is safe until the handle reaps the child, since an unreaped
 *   child keeps its pid.
 */
#ifndef MUX_HAVE_SOCK_FLAGS /* CMake defines what it found, as 1 */
#define MUX_HAVE_SOCK_FLAGS 0
#endif
#ifndef MUX_HAVE_SPAWN_CHDIR
#define MUX_HAVE_SPAWN_CHDIR 0
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__linux__) && !defined(MUX_PORTABLE_POSIX)
#include <sys/syscall.h>
#endif

#include "internal.h"
#include "iomux/process.h"
#include "process/process.h"
#include "backend/backend.h"

#if defined(SYS_pidfd_open) && defined(SYS_pidfd_send_signal)
#define MUX__PIDFD 1
#ifndef P_PIDFD
#define P_PIDFD 3 /* Linux's idtype for waitid, which glibc before 2.36 does not name */
#endif
#else
#define MUX__PIDFD 0
#endif

extern char **environ;

static void mux__process_status(mux_process_t *p, int wstatus)
{
    if (WIFSIGNALED(wstatus))
        mux__process_ended(p, 0, WTERMSIG(wstatus));
    else
        mux__process_ended(p, WEXITSTATUS(wstatus), 0);
}

static void mux__process_child_cb(mux_loop_t *pub, mux_child_t *w, int pid, int wstatus)
{
    (void)pub;
    (void)pid;
    mux__process_status(mux__container_of(w, mux_process_t, child_), wstatus);
}

#if MUX__PIDFD
static void mux__process_pidfd_close(struct mux__loop *loop, mux_process_t *p)
{
    int fd = (int)p->handle_;
    mux__io_stop_internal(loop, &p->io_);
    if (loop->backend->closing)
        loop->backend->closing(loop, fd);
    close(fd);
    p->handle_ = -1;
}

static int mux__process_watch_child(struct mux__loop *loop, mux_process_t *p);

/* The pidfd is readable: the child has ended. */
static void mux__process_pidfd_cb(mux_loop_t *pub, mux_io_t *w, unsigned revents)
{
    mux_process_t *p = mux__container_of(w, mux_process_t, io_);
    struct mux__loop *loop = mux__loop_of(pub);
    int exit_status = 0, term_signal = 0;
    if (revents & MUX_ERROR) {
        /* The backend would not watch the pidfd (epoll's ENOMEM): the child watcher, then. */
        unsigned e = revents >> MUX__KILL_ERRNO_SHIFT;
        mux__process_pidfd_close(loop, p);
        int err = e && e != EBADF ? mux__process_watch_child(loop, p) : -EBADF;
        if (err != 0)
            mux__process_ended(p, err, 0);
        return;
    }
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int r;
    while ((r = waitid((idtype_t)P_PIDFD, (id_t)p->handle_, &si, WEXITED | WNOHANG)) < 0 &&
           errno == EINTR)
        ;
    if (r == 0 && si.si_pid == 0)
        return; /* not yet: a report ahead of the exit */
    if (r == 0 && si.si_code == CLD_EXITED)
        exit_status = si.si_status;
    else if (r == 0)
        term_signal = si.si_status; /* CLD_KILLED, CLD_DUMPED */
    else
        exit_status = -errno; /* ECHILD: reaped by another waiter */
    mux__process_pidfd_close(loop, p);
    mux__process_ended(p, exit_status, term_signal);
}

/* Watches the child's end through a pidfd. 0, or -errno: no pidfd here (the handle falls
 * back to a child watcher). */
static int mux__process_watch_pidfd(struct mux__loop *loop, mux_process_t *p)
{
    int fd = (int)syscall(SYS_pidfd_open, p->pid_, 0); /* close-on-exec, always */
    if (fd < 0)
        return -errno;
    int err = fd >= loop->backend->fd_limit ? -EMFILE : 0; /* select: FD_SETSIZE */
    if (err == 0)
        err = mux_io_init(&p->io_, mux__process_pidfd_cb, fd, MUX_READ);
    if (err == 0) {
        p->io_.h_.flags |= MUX__W_NOREF; /* a part of the handle, which counts itself */
        err = mux__io_start_internal(loop, &p->io_);
    }
    if (err != 0) {
        close(fd);
        return err;
    }
    p->handle_ = fd;
    return 0;
}
#endif

static int mux__process_watch_child(struct mux__loop *loop, mux_process_t *p)
{
    mux_child_init(&p->child_, mux__process_child_cb, p->pid_);
    p->child_.h_.flags |= MUX__W_NOREF;
    return mux_child_start(loop->pub, &p->child_);
}

static int mux__process_watch(struct mux__loop *loop, mux_process_t *p)
{
    p->handle_ = -1;
#if MUX__PIDFD
    int err = mux__process_watch_pidfd(loop, p);
    if (err != -ENOSYS && err != -EMFILE && err != -EPERM)
        return err;
#endif
    return mux__process_watch_child(loop, p);
}

/* ---- starting --------------------------------------------------------------------- */

/* What the spawn needs beyond the options: the descriptors made for it. */
struct mux__spawn {
    int parent[3]; /* the parent's end of a MUX_STDIO_STREAM slot's pair, or -1 */
    int extra[3];  /* descriptors to close once the child has started, or -1 */
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
};

/* A copy of `fd` numbered 3 or more, close-on-exec. */
static int mux__dup_above_stdio(int fd)
{
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    return d < 0 ? -errno : d;
}

/* A socket pair for a stream slot: the parent's end, and the child's (blocking, as a
 * program expects its standard descriptors), both close-on-exec and numbered 3 or more. */
static int mux__stdio_pair(int sv[2])
{
#if MUX_HAVE_SOCK_FLAGS
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -errno;
#else
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return -errno;
    for (int i = 0; i < 2; i++)
        if (fcntl(sv[i], F_SETFD, FD_CLOEXEC) != 0) {
            int err = -errno;
            close(sv[0]);
            close(sv[1]);
            return err;
        }
#endif
    for (int i = 0; i < 2; i++)
        if (sv[i] < 3) { /* the parent runs with a standard descriptor closed */
            int d = mux__dup_above_stdio(sv[i]);
            if (d < 0) {
                close(sv[0]);
                close(sv[1]);
                return d;
            }
            close(sv[i]);
            sv[i] = d;
        }
    return 0;
}

/* The file actions of slot `i`. 0 or -errno. */
static int mux__spawn_slot(struct mux__loop *loop, struct mux__spawn *sp, const mux_stdio_t *s,
                           int i)
{
    int src = -1, err;
    switch (s->kind) {
    case MUX_STDIO_CLOSE:
        if (fcntl(i, F_GETFD) < 0)
            return 0; /* not open: closed already */
        return -posix_spawn_file_actions_addclose(&sp->fa, i);
    case MUX_STDIO_STREAM: {
        int sv[2];
        if ((err = mux__stdio_pair(sv)) != 0)
            return err;
        sp->parent[i] = sv[0];
        sp->extra[i] = src = sv[1];
        if (sv[0] >= loop->backend->fd_limit) /* select: FD_SETSIZE */
            return -EMFILE;
        break;
    }
    case MUX_STDIO_FD:
        if ((src = mux__dup_above_stdio(s->fd)) < 0)
            return src; /* -EBADF: not open */
        sp->extra[i] = src;
        break;
    default:
        return 0; /* inherited */
    }
    return -posix_spawn_file_actions_adddup2(&sp->fa, src, i);
}

/* The attributes: an empty signal mask, every signal at its default action, and a process
 * group of its own when asked. */
static int mux__spawn_attr(posix_spawnattr_t *attr, unsigned flags)
{
    sigset_t all, none;
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    sigemptyset(&none);
    short f = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (flags & MUX_SPAWN_PROCESS_GROUP)
        f |= POSIX_SPAWN_SETPGROUP;
    int err = posix_spawnattr_setsigmask(attr, &none);
    if (err == 0)
        err = posix_spawnattr_setsigdefault(attr, &all);
    if (err == 0 && (flags & MUX_SPAWN_PROCESS_GROUP))
        err = posix_spawnattr_setpgroup(attr, 0);
    if (err == 0)
        err = posix_spawnattr_setflags(attr, f);
    return -err;
}

static void mux__spawn_cleanup(struct mux__spawn *sp, int close_parent)
{
    for (int i = 0; i < 3; i++) {
        if (sp->extra[i] >= 0)
            close(sp->extra[i]);
        if (close_parent && sp->parent[i] >= 0)
            close(sp->parent[i]);
    }
    posix_spawn_file_actions_destroy(&sp->fa);
    posix_spawnattr_destroy(&sp->attr);
}

/* Starts the child: its pid, or -errno (with every descriptor made for it closed). On
 * success the parents' ends of the stream slots are left in sp->parent, and the rest is
 * the caller's to clean up. */
static int mux__spawn_run(struct mux__loop *loop, struct mux__spawn *sp,
                          const mux_spawn_options_t *o)
{
    int err = -posix_spawn_file_actions_init(&sp->fa);
    if (err != 0)
        return err;
    if ((err = -posix_spawnattr_init(&sp->attr)) != 0) {
        posix_spawn_file_actions_destroy(&sp->fa);
        return err;
    }
    err = mux__spawn_attr(&sp->attr, o->flags);
    for (int i = 0; i < 3 && err == 0; i++)
        err = mux__spawn_slot(loop, sp, &o->stdio[i], i);
    if (err == 0 && o->cwd) {
#if MUX_HAVE_SPAWN_CHDIR
        err = -posix_spawn_file_actions_addchdir_np(&sp->fa, o->cwd);
#else
        err = -ENOTSUP;
#endif
    }
    pid_t pid = -1;
    if (err == 0) {
        char *const argv0[] = {(char *)o->file, NULL};
        char *const *argv = o->argv ? o->argv : argv0;
        char *const *env = o->env ? o->env : environ;
        if (strchr(o->file, '/'))
            err = -posix_spawn(&pid, o->file, &sp->fa, &sp->attr, argv, env);
        else
            err = -posix_spawnp(&pid, o->file, &sp->fa, &sp->attr, argv, env);
    }
    if (err != 0) {
        mux__spawn_cleanup(sp, 1);
        return err;
    }
    return (int)pid;
}

/* The child started, but the handle cannot watch it: it is killed and reaped at once (a
 * child killed with SIGKILL is gone in a moment), so that nothing is left behind. */
static void mux__spawn_undo(int pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

MUX_EXPORT int mux_spawn(mux_loop_t *pub, mux_process_t *p, const mux_spawn_options_t *opts,
                         mux_exit_cb cb)
{
    struct mux__loop *loop = mux__loop_of(pub);
    int err;
    struct mux__handles *procs = mux__spawn_begin(loop, p, opts, cb, &err);
    if (!procs)
        return err;
    struct mux__spawn sp;
    for (int i = 0; i < 3; i++)
        sp.parent[i] = sp.extra[i] = -1;
    int pid = mux__spawn_run(loop, &sp, opts);
    if (pid < 0)
        return pid;
    mux__process_reset(p, loop, cb, pid);
    err = mux__process_watch(loop, p);
    if (err == 0)
        err = mux__spawn_open_streams(loop, opts, sp.parent, NULL);
    mux__spawn_cleanup(&sp, 1);
    if (err != 0) { /* rare: the loop's tables could not grow */
        mux__spawn_close_streams(opts);
        if (p->handle_ >= 0) {
            mux__io_stop_internal(loop, &p->io_);
            close((int)p->handle_);
        }
        mux_child_stop(pub, &p->child_);
        mux__spawn_undo(pid);
        return err;
    }
    mux__spawn_done(loop, procs, p, opts);
    return 0;
}

MUX_EXPORT int mux_process_kill(mux_process_t *p, int signum)
{
    if (!p || signum <= -NSIG || signum >= NSIG)
        return -EINVAL;
    int err = mux__process_signallable(p, signum);
    if (err != 0)
        return err;
    if (signum < 0)
        return kill(-p->pid_, -signum) == 0 ? 0 : -errno;
#if MUX__PIDFD
    if (p->handle_ >= 0)
        return syscall(SYS_pidfd_send_signal, (int)p->handle_, signum, NULL, 0) == 0 ? 0 : -errno;
#endif
    return kill(p->pid_, signum) == 0 ? 0 : -errno;
}

MUX_EXPORT int mux_process_detach(mux_process_t *p)
{
    if (!p || (p->flags_ & MUX__P_STATE) != MUX__P_RUNNING)
        return -EINVAL;
    struct mux__loop *loop = p->loop_;
#if MUX__PIDFD
    if (p->handle_ >= 0)
        mux__process_pidfd_close(loop, p);
#endif
    mux_child_stop(loop->pub, &p->child_); /* -EINVAL when it was never initialised */
    mux__handle_close(loop, &p->link_, &p->flags_);
    p->flags_ = MUX__P_IDLE;
    return 0;
}

MUX_EXPORT int mux_process_pid(const mux_process_t *p)
{
    if (!p || (p->flags_ & MUX__P_STATE) != MUX__P_RUNNING)
        return -EINVAL;
    return p->pid_;
}
