/* SPDX-License-Identifier: MIT */
/* What a file-system watcher is whatever the platform's mechanism: its initialisation, its
 * release and its state. Starting and stopping it are the mechanism's (fs_event_inotify.c,
 * fs_event_kqueue.c, fs_event_win.c; fs_event_none.c where there is none). */
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
