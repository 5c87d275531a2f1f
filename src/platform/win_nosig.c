/* SPDX-License-Identifier: MIT */
/* Signal and child watchers on Windows: there are none to have.
 *
 * Windows has no POSIX signals (the C runtime's signal() serves SIGINT, SIGBREAK and a few
 * faults, from a thread of its own, with no mask and no way to wait for them) and no SIGCHLD:
 * a process's end is a handle becoming signalled, which a completion port does not report
 * without a thread per wait (RegisterWaitForSingleObject). So the watchers initialise as
 * everywhere (src/watch_init.c), for portable code, and mux_signal_start and
 * mux_child_start return -ENOTSUP;
 * docs/signal.md and docs/child.md say so. The loop's hooks for them do nothing here.
 */
#include "internal.h"

MUX_EXPORT int mux_signal_start(mux_loop_t *pub, mux_signal_t *w)
{
    if (!mux__L(pub) || !w || w->h_.type != MUX__T_SIGNAL)
        return -EINVAL;
    return -ENOTSUP;
}

MUX_EXPORT int mux_signal_stop(mux_loop_t *pub, mux_signal_t *w)
{
    if (!mux__L(pub) || !w || w->h_.type != MUX__T_SIGNAL)
        return -EINVAL;
    return 0;
}

MUX_EXPORT int mux_child_start(mux_loop_t *pub, mux_child_t *w)
{
    if (!mux__L(pub) || !w || w->h_.type != MUX__T_CHILD)
        return -EINVAL;
    return -ENOTSUP;
}

MUX_EXPORT int mux_child_stop(mux_loop_t *pub, mux_child_t *w)
{
    if (!mux__L(pub) || !w || w->h_.type != MUX__T_CHILD)
        return -EINVAL;
    return 0;
}

int mux__sig_attach(struct mux__loop *loop, int signum)
{
    (void)loop, (void)signum;
    return -ENOTSUP;
}

void mux__sig_detach(struct mux__loop *loop, int signum)
{
    (void)loop, (void)signum;
}

void mux__sig_poll(struct mux__loop *loop)
{
    (void)loop;
}

void mux__sig_loop_quiesce(struct mux__loop *loop)
{
    (void)loop;
}

void mux__sig_loop_fork(struct mux__loop *loop)
{
    (void)loop;
}

void mux__sig_loop_close(struct mux__loop *loop)
{
    (void)loop;
}

void mux__sig_atfork_child(void)
{
}

void mux__children_reap(struct mux__loop *loop)
{
    loop->recheck = 0;
}
