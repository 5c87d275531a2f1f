/* SPDX-License-Identifier: MIT */
/* What the child-process files share (spawn.c on POSIX, spawn_win.c on Windows). */
#ifndef IOMUX_PROCESS_PROCESS_H
#define IOMUX_PROCESS_PROCESS_H

#include <string.h>

#include "internal.h"
#include "iomux/process.h"
#include "stream/stream.h"

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

/* What every mux_spawn starts with: the checks (-EINVAL), room for the handle and its streams
 * so that they open once the child runs, and the loop's registry of processes. The registry,
 * or NULL with *err set. */
static inline struct mux__handles *mux__spawn_begin(struct mux__loop *loop, mux_process_t *p,
                                                    const mux_spawn_options_t *opts,
                                                    mux_exit_cb cb, int *err)
{
    if (!loop || !p || !opts || !cb || !mux__spawn_valid(opts)) {
        *err = -EINVAL;
        return NULL;
    }
    *err = mux__pend_grow(loop, loop->active + loop->noref + 4 + MUX__INTERNAL_MAX);
    struct mux__handles *procs = *err == 0 ? mux__handles_get(loop, &mux__process_type) : NULL;
    if (!procs && *err == 0)
        *err = -ENOMEM;
    return procs;
}

/* The handle of child `pid`, as its spawn sets it up (`data` kept). */
static inline void mux__process_reset(mux_process_t *p, struct mux__loop *loop, mux_exit_cb cb,
                                      int pid)
{
    void *data = p->data;
    memset(p, 0, sizeof *p);
    p->data = data;
    p->loop_ = loop;
    p->exit_cb_ = cb;
    p->pid_ = pid;
}

/* Opens the parent's end `ends[i]` of each stream slot as its stream, as a pipe's where
 * `pipe` (NULL: none) says so (a named pipe on Windows' iocp: stream.h, mux__stream_open_pipe);
 * those it opened are set to MUX_OS_SOCK_INVALID. 0 or -errno. */
static inline int mux__spawn_open_streams(struct mux__loop *loop, const mux_spawn_options_t *opts,
                                          mux_os_sock_t ends[3], const int *pipe)
{
    int err = 0;
    for (int i = 0; i < 3 && err == 0; i++) {
        if (ends[i] == MUX_OS_SOCK_INVALID)
            continue;
        mux_stream_t *s = opts->stdio[i].stream;
        err = pipe && pipe[i] ? mux__stream_open_pipe(loop, s, ends[i])
                              : mux_stream_open(loop->pub, s, ends[i]);
        if (err == 0)
            ends[i] = MUX_OS_SOCK_INVALID; /* the stream's */
    }
    return err;
}

/* A spawn that failed after its child started closes the streams it opened for it. */
static inline void mux__spawn_close_streams(const mux_spawn_options_t *opts)
{
    for (int i = 0; i < 3; i++)
        if (opts->stdio[i].kind == MUX_STDIO_STREAM && mux_stream_loop(opts->stdio[i].stream))
            mux_stream_close(opts->stdio[i].stream, NULL);
}

/* The child runs and is watched: the handle is active, counted until its exit. */
static inline void mux__spawn_done(struct mux__loop *loop, struct mux__handles *procs,
                                   mux_process_t *p, const mux_spawn_options_t *opts)
{
    p->flags_ = MUX__P_RUNNING | (opts->flags & MUX_SPAWN_PROCESS_GROUP ? MUX__P_GROUP : 0);
    mux__handle_open(loop, procs, &p->link_, &p->flags_);
}

/* Whether a signal may go to the child: 0; -ESRCH once it has ended; -EINVAL for a handle that
 * is not active, and for a negative (group) signal to a child without a group of its own. */
static inline int mux__process_signallable(const mux_process_t *p, int signum)
{
    int state = p->flags_ & MUX__P_STATE;
    if (state == MUX__P_ENDED)
        return -ESRCH;
    if (state != MUX__P_RUNNING || (signum < 0 && !(p->flags_ & MUX__P_GROUP)))
        return -EINVAL; /* a negative one: the child's group is the parent's */
    return 0;
}

/* The child was reaped: the handle is the caller's again, from the callback on. */
static inline void mux__process_ended(mux_process_t *p, int exit_status, int term_signal)
{
    mux__handle_close(p->loop_, &p->link_, &p->flags_);
    p->flags_ = MUX__P_ENDED;
    p->exit_cb_(p, exit_status, term_signal);
}

#endif
