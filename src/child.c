/* SPDX-License-Identifier: MIT */
/* Child watchers on POSIX systems: the loop reaps the children it watches when SIGCHLD
 * arrives, or, for a watcher of one pid on a backend whose kernel reports exits (kqueue's
 * EVFILT_PROC), when the kernel says so (Windows has none: child_win.c).
 *
 * SIGCHLD only says "some child changed state", and several exits can merge into one
 * delivery, so every delivery (and every start, for a child that exited before anyone
 * watched it) makes the loop ask waitpid(WNOHANG) for each watched pid. Watchers for any
 * pid reap one child per iteration -- each such watcher can carry one status at a time --
 * and keep the loop from blocking until waitpid finds nothing more.
 */
#include <errno.h>
#include <string.h>
#include <sys/wait.h>

#include "backend/backend.h"
#include "internal.h"

static int mux__child_valid(const mux_child_t *w)
{
    return w && w->h_.type == MUX__T_CHILD;
}

static void mux__child_unlink(struct mux__loop *loop, mux_child_t *w)
{
    mux_child_t **pp = &loop->children;
    while (*pp != w)
        pp = &(*pp)->next_;
    *pp = w->next_;
    w->next_ = NULL;
    mux__deactivate(loop, &w->h_);
    loop->nchildren--;
    if (!(w->h_.flags & MUX__W_KERNEL))
        mux__sig_detach(loop, SIGCHLD);
}

/* The backend's kernel watches the pid, or SIGCHLD tells of every child. */
static int mux__child_watch(struct mux__loop *loop, mux_child_t *w)
{
    w->h_.flags &= (uint8_t)~MUX__W_KERNEL;
    if (w->pid_ && loop->backend->child && loop->backend->child(loop, w->pid_) == 0) {
        w->h_.flags |= MUX__W_KERNEL;
        return 0;
    }
    return mux__sig_attach(loop, SIGCHLD);
}

/* waitpid(WNOHANG), again when a signal interrupted it. */
static int mux__waitpid(int pid, int *status)
{
    int r;
    while ((r = waitpid(pid, status, WNOHANG)) < 0 && errno == EINTR)
        ;
    return r;
}

void mux__children_reap(struct mux__loop *loop)
{
    int status, any = 0, busy = 0;
    loop->recheck = 0;
    for (mux_child_t *w = loop->children, *next; w; w = next) {
        next = w->next_;
        if (w->pid_ == 0) {
            any = 1;
            busy |= w->h_.pending != 0;
            continue;
        }
        if (mux__waitpid(w->pid_, &status) == w->pid_) {
            mux__child_unlink(loop, w);
            w->rpid_ = w->pid_;
            mux__queue(loop, &w->h_, (unsigned)status);
        }
    }
    if (!any)
        return;
    if (busy) { /* an any-pid watcher still holds the last status: reap next time */
        loop->recheck = 1;
        return;
    }
    int pid = mux__waitpid(-1, &status);
    if (pid <= 0)
        return;
    for (mux_child_t *w = loop->children; w; w = w->next_)
        if (w->pid_ == 0) {
            w->rpid_ = pid;
            mux__queue(loop, &w->h_, (unsigned)status);
        }
    loop->recheck = 1; /* there may be more */
}

/* The kernel may report the exit before the child can be reaped (libuv found FreeBSD, macOS
 * and OpenBSD do: waitpid with WNOHANG then returns 0), so this reap waits for it, which is
 * short: the child is on its way out. A pid that no watcher of this loop has is left alone. */
void mux__child_exited(struct mux__loop *loop, int pid)
{
    int status, r = 0;
    for (mux_child_t *w = loop->children, *next; w; w = next) {
        next = w->next_;
        if (w->pid_ != pid)
            continue;
        while (r == 0 && (r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
            r = 0;
        if (r != pid)
            return; /* reaped by someone else */
        mux__child_unlink(loop, w);
        w->rpid_ = pid;
        mux__queue(loop, &w->h_, (unsigned)status);
    }
}

MUX_EXPORT int mux_child_init(mux_child_t *w, mux_child_cb cb, int pid)
{
    if (!w || !cb || pid < 0)
        return -EINVAL;
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_CHILD;
    w->cb_ = cb;
    w->pid_ = pid;
    return 0;
}

MUX_EXPORT int mux_child_start(mux_loop_t *pub, mux_child_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__child_valid(w))
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        return -EBUSY;
    int err = mux__reserve(loop);
    if (err == 0)
        err = mux__child_watch(loop, w);
    if (err != 0)
        return err;
    loop->nchildren++;
    w->next_ = loop->children;
    loop->children = w;
    w->rpid_ = 0;
    mux__activate(loop, &w->h_);
    loop->recheck = 1; /* the child may be gone already */
    return 0;
}

MUX_EXPORT int mux_child_stop(mux_loop_t *pub, mux_child_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__child_valid(w))
        return -EINVAL;
    mux__unqueue(loop, &w->h_);
    if (w->h_.flags & MUX__W_ACTIVE)
        mux__child_unlink(loop, w);
    return 0;
}
