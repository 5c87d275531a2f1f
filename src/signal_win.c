/* SPDX-License-Identifier: MIT */
/* Signal watchers on Windows: there are none to have.
 *
 * Windows has no POSIX signals: the C runtime's signal() serves SIGINT, SIGBREAK and a few
 * faults, from a thread of its own, with no mask and no way to wait for them. So a signal
 * watcher initialises as everywhere (signal.c), for portable code, and mux_signal_start
 * returns -ENOTSUP; docs/signal.md says so. The loop's hooks for signals do nothing here.
 */
#include <string.h>

#include "internal.h"

MUX_EXPORT int mux_signal_init(mux_signal_t *w, mux_signal_cb cb, int signum)
{
    if (!w || !cb || signum <= 0 || signum >= MUX__NSIG)
        return -EINVAL;
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_SIGNAL;
    w->cb_ = cb;
    w->signum_ = signum;
    return 0;
}

MUX_EXPORT int mux_signal_start(mux_loop_t *pub, mux_signal_t *w)
{
    if (!mux__loop_of(pub) || !w || w->h_.type != MUX__T_SIGNAL)
        return -EINVAL;
    return -ENOTSUP;
}

MUX_EXPORT int mux_signal_stop(mux_loop_t *pub, mux_signal_t *w)
{
    if (!mux__loop_of(pub) || !w || w->h_.type != MUX__T_SIGNAL)
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
