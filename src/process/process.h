/* SPDX-License-Identifier: MIT */
/* What the child-process files share (spawn.c on POSIX, spawn_win.c on Windows). */
#ifndef IOMUX_PROCESS_PROCESS_H
#define IOMUX_PROCESS_PROCESS_H

#include "iomux/process.h"

/* 1 when the options are well formed (a file, known flags and stdio kinds, a stream for a
 * stream slot, a descriptor for a descriptor slot): the same -EINVAL on every system. */
static inline int mux__spawn_valid(const mux_spawn_options_t *o)
{
    if (!o->file || !*o->file || (o->flags & ~(unsigned)MUX_SPAWN_PROCESS_GROUP))
        return 0;
    for (int i = 0; i < 3; i++) {
        const mux_stdio_t *s = &o->stdio[i];
        if (s->kind < MUX_STDIO_INHERIT || s->kind > MUX_STDIO_FD ||
            (s->kind == MUX_STDIO_STREAM && !s->stream) || (s->kind == MUX_STDIO_FD && s->fd < 0))
            return 0;
    }
    return 1;
}

#endif
