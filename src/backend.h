/* The backend contract: every kernel mechanism fits these few entries.
 *
 * The loop core owns the fd table (struct mux__fd) and the batch of changed fds. Just
 * before it waits, it calls `change` once for every fd whose wanted events changed in this
 * iteration (or that a watcher was newly pointed at), and then `wait`. From inside `wait`
 * the backend reports readiness with mux__fd_event(), which queues the watchers and
 * returns the events still wanted on that fd, so that a backend can drop interest the
 * loop no longer has. A backend that finds an fd invalid calls mux__fd_kill().
 */
#ifndef IOMUX_BACKEND_H
#define IOMUX_BACKEND_H

#include "internal.h"

struct mux__backend {
    const char *name;
    /* Highest fd + 1 the backend can watch (select: FD_SETSIZE), or INT_MAX. */
    int fd_limit;
    /* Creates the kernel state. 0, or -errno when the kernel refuses the mechanism. */
    int (*open)(struct mux__loop *loop);
    /* Releases everything open created. */
    void (*close)(struct mux__loop *loop);
    /* In a child after fork: re-creates the kernel state without touching the parent's.
     * The core then re-applies every watched fd with `force` set. 0 or -errno. */
    int (*fork)(struct mux__loop *loop);
    /* Makes the kernel watch `fd` for `want` (MUX_READ | MUX_WRITE | MUX_EDGE, or 0).
     * `force`: the fd may have been closed and re-opened since the kernel last saw it, so
     * a cached registration must not be trusted. 0 or -errno (the core reports it to the
     * fd's watchers). */
    int (*change)(struct mux__loop *loop, int fd, unsigned want, int force);
    /* Waits at most `timeout_ns` (-1: no limit, 0: poll) and reports events. Returns 0 or
     * -errno; -EINTR is not an error. */
    int (*wait)(struct mux__loop *loop, int64_t timeout_ns);

    /* Completion backends only (NULL on readiness backends): the stream layer's native
     * operations. Each only queues work for the loop's next wait, which submits it (no
     * system call here, and the kernel's ring is only touched from inside mux_run, after a
     * fork was handled). op->done_ runs from wait for every completion; the operation is
     * in flight until a completion with `more` == 0. Completions only record results and
     * queue watchers: they never submit. `op` must not be in flight already. */
    /* A receive into a buffer the kernel picks from `pool` (attached with pool_attach). */
    void (*op_recv)(struct mux__loop *loop, struct mux__op *op, int fd, mux_bufpool_t *pool,
                    int poll_first);
    /* A send of msg->msg_iov (MSG_NOSIGNAL). One buffer is taken from `msg` now; with more,
     * `msg` and its iovec array are read when the wait submits and must stay valid. */
    void (*op_send)(struct mux__loop *loop, struct mux__op *op, int fd, const struct msghdr *msg);
    /* A multishot accept: one completion per connection (non-blocking, close-on-exec). */
    void (*op_accept)(struct mux__loop *loop, struct mux__op *op, int fd);
    /* Asks for `op` to end early. Its last completion still comes (-ECANCELED, or its
     * result if it finished first), from the next wait at the earliest. */
    void (*op_cancel)(struct mux__loop *loop, struct mux__op *op);
    /* Hands the free buffers of `pool` to the kernel (registered with the next wait). 0, or
     * -errno: reads from it then take the readiness path. The pool stays attached until the
     * loop closes. */
    int (*pool_attach)(struct mux__loop *loop, mux_bufpool_t *pool);
    /* Gives buffer `i` of an attached pool back to the kernel. */
    void (*pool_put)(mux_bufpool_t *pool, uint32_t i);
};

/* mux__op.done_ flags */
#define MUX__OPF_MORE     0x1 /* further completions follow (multishot) */
#define MUX__OPF_NONEMPTY 0x2 /* a receive left data in the socket */

#define MUX__POOL_INUSE UINT32_MAX /* mux_bufpool.free_[i] of a buffer the caller holds */

/* NULL-terminated, in order of preference; generated from CMakeLists.txt. */
extern const struct mux__backend *const mux__backends[];

/* Queues the watchers of `fd` for `revents`; returns the events the loop still wants on
 * `fd` (0 when nothing watches it). Safe for any fd value. Inline: it runs per event. */
static inline unsigned mux__fd_event(struct mux__loop *loop, int fd, unsigned revents)
{
    if (mux__unlikely((uint32_t)fd >= loop->nfds))
        return 0;
    struct mux__fd *e = &loop->fds[fd];
    for (mux_io_t *w = e->head; w; w = w->next_) {
        unsigned r = revents & w->events_ & MUX__IO_EVENTS;
        if (!r)
            continue;
        if (mux__unlikely(w->h_.flags & MUX__W_INTERNAL))
            mux__internal_event(loop, w);
        else
            mux__queue(loop, &w->h_, r);
    }
    return e->want;
}
/* Stops every watcher of `fd` and queues it with MUX_ERROR: the fd is not valid. */
void mux__fd_kill(struct mux__loop *loop, int fd);

#endif
