/* SPDX-License-Identifier: MIT */
/* fs_event watchers where this build has no kernel notifications of its own (the portable
 * POSIX build, and systems whose mechanism is not written yet): a watcher initialises, and its
 * start says -ENOTSUP, so that a program falls back on mux_fs_poll_t. */
#include <errno.h>

#include "internal.h"

int mux__fsn_open(struct mux__loop *loop)
{
    (void)loop;
    return -ENOTSUP;
}

int mux__fsn_fork(struct mux__loop *loop)
{
    (void)loop;
    return 0;
}

void mux__fsn_close(struct mux__loop *loop)
{
    (void)loop;
}

void mux__fsn_walk(struct mux__loop *loop, void (*add)(void *ctx, struct mux__whdr *h), void *ctx)
{
    (void)loop, (void)add, (void)ctx;
}

MUX_EXPORT int mux_fs_event_start(mux_loop_t *pub, mux_fs_event_t *w)
{
    return mux__fs_event_begin(mux__loop_of(pub), w); /* -ENOTSUP from mux__fsn_open */
}

MUX_EXPORT int mux_fs_event_stop(mux_loop_t *pub, mux_fs_event_t *w)
{
    if (!mux__loop_of(pub) || !w || w->h_.type != MUX__T_FS_EVENT)
        return -EINVAL;
    return 0;
}
