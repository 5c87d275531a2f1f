/* SPDX-License-Identifier: MIT */
/* Child watchers on Windows: there are none to have.
 *
 * Windows has no SIGCHLD: a process's end is a handle becoming signalled, which a completion
 * port does not report without a thread per wait (RegisterWaitForSingleObject). So a child
 * watcher initialises as everywhere (child.c), for portable code, and mux_child_start returns
 * -ENOTSUP; docs/child.md says so. The loop's hook for children does nothing here.
 */
#include <string.h>

#include "internal.h"

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
    if (!mux__loop_of(pub) || !w || w->h_.type != MUX__T_CHILD)
        return -EINVAL;
    return -ENOTSUP;
}

MUX_EXPORT int mux_child_stop(mux_loop_t *pub, mux_child_t *w)
{
    if (!mux__loop_of(pub) || !w || w->h_.type != MUX__T_CHILD)
        return -EINVAL;
    return 0;
}

void mux__children_reap(struct mux__loop *loop)
{
    loop->recheck = 0;
}
