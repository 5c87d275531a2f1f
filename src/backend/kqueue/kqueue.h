/* SPDX-License-Identifier: MIT */
/* The kqueue backend's state, shared by kqueue.c (the backend, what a BSD or macOS compiles)
 * and, when it is built against libkqueue, libkqueue.c (what kqueue in a library over epoll
 * needs on top). libkqueue's <sys/event.h> defines LIBKQUEUE. */
#ifndef IOMUX_BACKEND_KQUEUE_H
#define IOMUX_BACKEND_KQUEUE_H

#include <sys/types.h>
#include <sys/event.h>

#include "backend/backend.h"

struct mux__kqueue {
    int kq;
    int user;    /* EVFILT_USER wakes the loop (else the core's wake-up descriptor) */
    int rebuild; /* make a new queue (kevent failed; libkqueue kept a file it cannot drop) */
    int renewed; /* libkqueue: the last wait made a new queue */
    int nev;
    struct kevent *ev; /* what kevent returns; never fewer entries than nchg */
    struct kevent *chg;
    int nchg, chg_cap;
};

#ifdef LIBKQUEUE
#define MUX__KQ_EMULATED 1
/* libkqueue.c: each says what it makes up for at its definition. */
int mux__kq_apply_emulated(struct mux__kqueue *st, int nchg);
void mux__kq_delete_now(struct mux__kqueue *st, int fd, unsigned dirs);
int mux__kq_took_error(int fd, const struct kevent *k);
int mux__kq_returned_early(struct mux__loop *loop, struct mux__kqueue *st, int n,
                           int64_t timeout_ns);
void mux__kq_closed(void);
#else
#define MUX__KQ_EMULATED 0
/* A kernel's kqueue needs none of it. */
static inline int mux__kq_apply_emulated(struct mux__kqueue *st, int nchg)
{
    (void)st, (void)nchg;
    return 0;
}
static inline void mux__kq_delete_now(struct mux__kqueue *st, int fd, unsigned dirs)
{
    (void)st, (void)fd, (void)dirs;
}
static inline int mux__kq_took_error(int fd, const struct kevent *k)
{
    (void)fd, (void)k;
    return 0;
}
static inline int mux__kq_returned_early(struct mux__loop *loop, struct mux__kqueue *st, int n,
                                         int64_t timeout_ns)
{
    (void)loop, (void)st, (void)n, (void)timeout_ns;
    return 0;
}
static inline void mux__kq_closed(void)
{
}
#endif

#endif
