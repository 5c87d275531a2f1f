/* SPDX-License-Identifier: MIT */
/* The initialisers of signal and child watchers, one for every platform: Windows, which can
 * start neither (src/platform/win_nosig.c), initialises them as POSIX does, for portable
 * code. */
#include <string.h>

#include "internal.h"

MUX_EXPORT int mux_signal_init(mux_signal_t *w, mux_signal_cb cb, int signum)
{
    if (!w || !cb || signum <= 0 || signum >= MUX__NSIG)
        return -EINVAL;
#ifndef _WIN32 /* where signals can be watched: the system's, and not the two uncatchable */
    if (signum >= NSIG || signum == SIGKILL || signum == SIGSTOP)
        return -EINVAL;
#endif
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_SIGNAL;
    w->cb_ = cb;
    w->signum_ = signum;
    return 0;
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
