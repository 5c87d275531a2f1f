/* SPDX-License-Identifier: MIT */
/* What a file-system watcher is whatever the platform's mechanism: its initialisation, its
 * release and its state, and what every mechanism's start begins and ends with. Starting and
 * stopping it are the mechanism's (fs_event_inotify.c, fs_event_kqueue.c, fs_event_win.c;
 * fs_event_none.c where there is none). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

MUX_EXPORT int mux_fs_event_init(mux_fs_event_t *w, mux_fs_event_cb cb, const char *path)
{
    if (!w || !cb || !path || !*path)
        return -EINVAL;
    size_t n = strlen(path) + 1;
    char *copy = malloc(n);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, path, n);
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_FS_EVENT;
    w->cb_ = cb;
    w->path_ = copy;
    w->wd_ = -1;
    return 0;
}

MUX_EXPORT int mux_fs_event_free(mux_fs_event_t *w)
{
    if (!w || w->h_.type != MUX__T_FS_EVENT)
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        return -EBUSY;
    free(w->path_);
    w->path_ = NULL;
    return 0;
}

MUX_EXPORT int mux_fs_event_is_active(const mux_fs_event_t *w)
{
    if (!w || w->h_.type != MUX__T_FS_EVENT)
        return -EINVAL;
    return (w->h_.flags & MUX__W_ACTIVE) != 0;
}

int mux__fs_event_begin(struct mux__loop *loop, const mux_fs_event_t *w)
{
    if (!loop || !w || w->h_.type != MUX__T_FS_EVENT || !w->path_)
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        return -EBUSY;
    int err = mux__reserve(loop);
    if (err == 0 && !loop->fsn)
        err = mux__fsn_open(loop);
    return err;
}

void mux__fs_event_join(struct mux__loop *loop, mux_fs_event_t **head, mux_fs_event_t *w, int id)
{
    while (*head) /* appended: the watchers of a path run in start order */
        head = &(*head)->next_;
    *head = w;
    w->next_ = NULL;
    w->wd_ = id;
    mux__activate(loop, &w->h_);
}
