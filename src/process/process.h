/* SPDX-License-Identifier: MIT */
/* What the child-process files share (spawn.c on POSIX, spawn_win.c on Windows). */
#ifndef IOMUX_PROCESS_PROCESS_H
#define IOMUX_PROCESS_PROCESS_H

#include "internal.h"
#include "iomux/process.h"

enum {
    MUX__P_IDLE = 0,    /* never spawned, or detached */
    MUX__P_RUNNING = 1, /* spawned, not yet reaped */
    MUX__P_ENDED = 2,   /* reaped, and called back */
};

/* mux_process_t.flags_ bits above the state */
#define MUX__P_GROUP 0x10 /* spawned with MUX_SPAWN_PROCESS_GROUP */
#define MUX__P_STATE 0x0f

static inline int mux__process_walkable(const void *h)
{
    return (((const mux_process_t *)h)->flags_ & MUX__P_STATE) == MUX__P_RUNNING;
}

/* The loop's registry of process handles (mux_loop_walk, ref and unref). */
static const struct mux__handles_type mux__process_type = {
    .kind = MUX_HANDLE_PROCESS,
    .link_off = offsetof(mux_process_t, link_),
    .flags_off = offsetof(mux_process_t, flags_),
    .size = sizeof(struct mux__handles),
    .walkable = mux__process_walkable,
};

/* The child was reaped: the handle is the caller's again, from the callback on. */
static inline void mux__process_ended(mux_process_t *p, int exit_status, int term_signal)
{
    mux__handle_close(p->loop_, &p->link_, &p->flags_);
    p->flags_ = MUX__P_ENDED;
    p->exit_cb_(p, exit_status, term_signal);
}

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
