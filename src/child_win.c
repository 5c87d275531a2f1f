/* SPDX-License-Identifier: MIT */
/* Child watchers on Windows: a process's end, learnt from its handle.
 *
 * What is odd about Windows here, and what this file does about it:
 * - There is no SIGCHLD and no waitpid. A process is a kernel object that becomes signalled
 *   when it ends, and keeps its exit code for as long as someone holds a handle to it. So a
 *   watcher opens the process by its id when it starts (OpenProcess: SYNCHRONIZE and the
 *   right to read its exit code), which also keeps the id from going to another process
 *   while it is watched. A process that has ended already is still there for a handle its
 *   creator holds (CreateProcess's): a watcher started late finds it signalled at once.
 * - Neither a completion port nor select() waits for a handle. A wait is registered on it
 *   (RegisterWaitForSingleObject, one-shot), whose callback runs on a thread of the system's
 *   pool when the process ends: it marks the watcher and hands the registry (signal.c) a
 *   number of the library's own, MUX__SIGCHLD, which wakes every loop watching children
 *   through its backend's wake-up (on iocp, a packet posted to the completion port). Each
 *   loop then looks at its own watchers, as loops do on POSIX at a SIGCHLD.
 * - Stopping a watcher takes its wait off and waits for a callback running at that moment to
 *   finish (UnregisterWaitEx with INVALID_HANDLE_VALUE), so that nothing touches the watcher
 *   once the stop returned.
 * - A process has no parent that reaps it: there is no "any child" to wait for. A watcher for
 *   pid 0 initialises, for portable code, and refuses to start (-ENOTSUP). The status given to
 *   the callback is the exit code (GetExitCodeProcess); a process ended by TerminateProcess
 *   has the code its killer chose.
 */
#include <errno.h>
#include <string.h>

#include <windows.h>

#include "internal.h"
#include "platform/win.h"

static int mux__child_valid(const mux_child_t *w)
{
    return w && w->h_.type == MUX__T_CHILD;
}

static VOID CALLBACK mux__child_ended(PVOID arg, BOOLEAN timed_out)
{
    mux_child_t *w = arg;
    (void)timed_out; /* INFINITE: never */
    __atomic_store_n(&w->exited_, 1, __ATOMIC_SEQ_CST);
    mux__sig_deliver(MUX__SIGCHLD);
}

/* Takes the wait off (waiting for its callback if it runs now) and closes the handle. */
static void mux__child_release(mux_child_t *w)
{
    if (w->wait_)
        UnregisterWaitEx(w->wait_, INVALID_HANDLE_VALUE);
    if (w->proc_)
        CloseHandle(w->proc_);
    w->wait_ = w->proc_ = NULL;
}

static void mux__child_unlink(struct mux__loop *loop, mux_child_t *w)
{
    mux_child_t **pp = &loop->children;
    while (*pp != w)
        pp = &(*pp)->next_;
    *pp = w->next_;
    w->next_ = NULL;
    mux__deactivate(loop, &w->h_);
    if (--loop->nchildren == 0)
        mux__sig_detach(loop, MUX__SIGCHLD);
}

void mux__children_reap(struct mux__loop *loop)
{
    loop->recheck = 0;
    for (mux_child_t *w = loop->children, *next; w; w = next) {
        next = w->next_;
        if (!__atomic_load_n(&w->exited_, __ATOMIC_SEQ_CST))
            continue;
        DWORD code = 0;
        if (!GetExitCodeProcess(w->proc_, &code))
            code = (DWORD)-1;
        mux__child_release(w);
        mux__child_unlink(loop, w);
        w->rpid_ = w->pid_;
        mux__queue(loop, &w->h_, (unsigned)code);
    }
}

/* The process `pid`, opened to be waited for. The handle, or NULL with *err set. */
static HANDLE mux__child_open(int pid, int *err)
{
    HANDLE h = OpenProcess(SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!h) {
        DWORD e = GetLastError();
        *err = e == ERROR_INVALID_PARAMETER ? -ESRCH : mux__win_errno(e);
    }
    return h;
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
    if (w->pid_ == 0)
        return -ENOTSUP; /* no process has children to wait for as a group */
    int err = mux__reserve(loop);
    if (err == 0 && loop->nchildren == 0)
        err = mux__sig_attach(loop, MUX__SIGCHLD);
    if (err != 0)
        return err;
    w->exited_ = 0;
    w->rpid_ = 0;
    w->proc_ = mux__child_open(w->pid_, &err);
    if (w->proc_ && !RegisterWaitForSingleObject(&w->wait_, w->proc_, mux__child_ended, w,
                                                 INFINITE, WT_EXECUTEONLYONCE)) {
        err = mux__win_errno(GetLastError());
        w->wait_ = NULL;
    }
    if (err != 0) {
        mux__child_release(w);
        if (loop->nchildren == 0)
            mux__sig_detach(loop, MUX__SIGCHLD);
        return err;
    }
    loop->nchildren++;
    w->next_ = loop->children;
    loop->children = w;
    mux__activate(loop, &w->h_);
    return 0;
}

MUX_EXPORT int mux_child_stop(mux_loop_t *pub, mux_child_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__child_valid(w))
        return -EINVAL;
    mux__unqueue(loop, &w->h_);
    if (w->h_.flags & MUX__W_ACTIVE) {
        mux__child_release(w);
        mux__child_unlink(loop, w);
    }
    return 0;
}
