/* SPDX-License-Identifier: MIT */
/* The backend contract: every kernel mechanism fits these few entries.
 *
 * A backend exports one `const struct mux__backend`, from one file (src/backend/<name>.c), or
 * from a folder of its own when it needs several (src/backend/uring/). It has up to two
 * halves, and its capability bits (`caps`) say which parts of them it runs itself. This file
 * has, in order: the capability bits, the operation kinds and flags, the entries, the calls a
 * backend makes on the loop (readiness reports), on an operation (its completion), and on a
 * buffer pool.
 *
 * The readiness half (every backend but a pure completion one such as IOCP). The loop core
 * owns the fd table (struct mux__fd) and the batch of changed fds. Just before it waits, it
 * calls `change` once for every fd whose wanted events changed in this iteration (or that a
 * watcher was newly pointed at), and then `wait`. From inside `wait` the backend reports
 * readiness with mux__fd_event(), which runs or queues the watchers and returns the events
 * wanted on that fd, so that a backend can drop interest the loop no longer has. Watchers'
 * callbacks may therefore run inside `wait`: a backend reports from a loop that a callback
 * cannot disturb (callbacks never wait, apply changes, or reap completions; they may start
 * and stop watchers and submit operations, which only queue work for the next wait). A
 * backend that finds an fd invalid calls mux__fd_kill(..., -EBADF).
 *
 * The wake-up. `wake` makes the loop's current or next wait return. It is the one entry any
 * thread or a signal handler may call: async sends and signals come through it. Backends
 * with MUX__CAP_WAKE_FD leave it to the core's wake-up descriptor (an eventfd or a pipe),
 * which they watch like any fd; another one posts to its kernel queue and sets loop->woken
 * when its wait sees the post.
 *
 * The operation half: what the stream layer runs on. An operation (struct mux__op, in
 * iomux.h) is a receive into a caller buffer or into a pool's buffer, a send of one or
 * several buffers or from a file, an accept, a connect or a shutdown, on one socket. The owner (a
 * stream or a listener) fills its kind and arguments and calls mux__op_submit() (stream/op.h);
 * the operation is in flight (MUX__OPF_FLIGHT) until its last completion. A backend runs
 * natively the kinds whose MUX__CAP_ bit it has (loop->caps); every other kind is emulated
 * with non-blocking system calls over the readiness half (stream/ready_ops.c), so a readiness
 * backend
 * implements none of this half and io_uring only the kinds that pay. The rules, for both:
 * - Completion. The backend calls mux__op_complete(op, res, buf, flags): `res` is the byte
 *   count, the accepted socket, 0, or a negative errno; `buf` is the pool buffer a receive
 *   filled (the owner's until mux_bufpool_put); `flags` are MUX__OPC_*. The owner's done_
 *   only records the result and queues its own delivery (a task), or cancels the multishot
 *   operation whose completion it refuses: it never calls user code and never submits (a
 *   cancel only queues), so a completion may come from inside `wait`, and from inside the
 *   submitting call itself (an emulated operation that could be done at once). Except with
 *   MUX__OPC_NOW: the completion comes from where the loop dispatches callbacks (the
 *   emulation's watcher), so the owner delivers at once, user callbacks included, and may
 *   free the operation: the completer does not touch it after done_ returns.
 * - Multishot. An accept or a pool receive with MUX__OPF_MULTI stays armed and completes
 *   once per connection or per buffer filled with MUX__OPC_MORE, until a completion without
 *   it. Only backends with MUX__CAP_ACCEPT_MULTI or MUX__CAP_RECV_MULTI are given one. The
 *   owner of a multishot operation may refuse a completion when it has no room: done_
 *   returns 1 ("not now": the backend offers it again, with the operation's later ones in
 *   order, from the next wait, which does not block) or 2 ("parked": not offered again, and
 *   no wait returns early for it, until the owner sets loop->ops_unpark; then from the
 *   next wait, which does not block).
 * - Buffers. The arguments, the buffers and the buffer arrays are read until the last
 *   completion, except a connect's address, which is read during the submitting call only.
 *   A receive into a caller buffer gives the buffer back when `cancel` returns, and its
 *   bytes must reach the owner with nothing run in between (a read stop promises both): it
 *   completes with bytes inside its submit or with MUX__OPC_NOW, and otherwise only with
 *   -EAGAIN and MUX__OPC_NONEMPTY ("readable: submit again", no byte taken). A kernel that
 *   keeps the buffer until a completion (io_uring) cannot promise that, so io_uring leaves
 *   this kind to the emulation; IOCP runs it natively that way, as libuv does on Windows: a
 *   zero-byte receive completes with -EAGAIN and MUX__OPC_NONEMPTY, and the next submit,
 *   which the owner makes without MUX__OPF_POLL_FIRST, reads with a non-blocking call and
 *   completes inside itself (at most 16 times per loop iteration, the emulation's budget).
 * - Cancel. `cancel` asks an operation in flight to end early. Its last completion still
 *   comes, from inside the cancel (emulated: -ECANCELED at once) or from a later wait
 *   (native: -ECANCELED, or its result when it finished first). Its owner gives no memory
 *   back before that.
 * - Fork. In a child, native operations in flight complete with -ECANCELED from the
 *   backend's `fork`; their owners submit them again.
 * - Space. Every operation has 40 bytes of backend-private space (priv_): the emulation's io
 *   watcher, io_uring's links, or an OVERLAPPED (32 bytes on 64-bit Windows) and a pointer.
 * - Sockets. A backend whose kernel binds a socket to its queue for good (IOCP's completion
 *   port) does so in `adopt`, which the stream and listener layers call once per socket
 *   before its first operation.
 * - Pipes. With MUX__CAP_PIPE, a stream's operations may run on a pipe's handle instead of a
 *   socket (a child's standard handle on Windows, spawn_win.c): the owner sets MUX__OPF_PIPE
 *   in the operation's flags once, and submits only receives (into a caller buffer or a pool)
 *   and sends, which the backend runs natively by the rules above; `adopt` gets the handle. The
 *   other end's close is the end of the stream for a receive and -EPIPE for a send. The owner
 *   closes the handle itself, and sets sock_ to MUX_OS_SOCK_INVALID in the operations it
 *   closed it under, so that a completion that comes afterwards touches no handle (the number
 *   may be another file's by then).
 *
 * Buffer pools. A pool (mux_bufpool_t) is a data structure the stream layer's receives and the
 * backends' share: buffers carved from the caller's memory, on a free list (stream/bufpool.c
 * has the public calls). A backend whose kernel picks receive buffers from a ring
 * (MUX__CAP(MUX__OP_RECV_POOL)) binds a pool in pool_attach, with a hook the pool calls when
 * the caller gives a buffer back, to top the ring up, and lends free buffers to its kernel
 * with the calls at the end of this file.
 */
#ifndef IOMUX_BACKEND_H
#define IOMUX_BACKEND_H

#include "internal.h"

/* Capability bits: the operation kinds a backend runs natively (bit 1 << MUX__OP_*), and: */
#define MUX__CAP_ACCEPT_MULTI (1u << 8)  /* an accept may stay armed (MUX__OPF_MULTI) */
#define MUX__CAP_WAKE_FD      (1u << 9)  /* wake-ups come through the core's wake-up descriptor */
#define MUX__CAP_RECV_MULTI   (1u << 10) /* a pool receive may stay armed (MUX__OPF_MULTI) */
/* Opt-in: the automatic choice (no name in the options or IOMUX_BACKEND) passes the backend
 * by, wherever it sits in the registry; it opens only when named (rtsig). */
#define MUX__CAP_NAMED_ONLY   (1u << 11)
/* The kernel reports the peer's hang-up without a read: io watchers may ask for MUX_RDHUP,
 * which reaches `change` in `want` and is reported like a direction. */
#define MUX__CAP_RDHUP        (1u << 12)
/* A datagram receive into the caller's buffers runs natively too, the way a stream's receive
 * into a caller's buffer does (IOCP, "Buffers" below); without it only a pool's does. */
#define MUX__CAP_DGRAM_BUF    (1u << 13)
/* Operations may run on a pipe (MUX__OPF_PIPE): the stream of a child's standard handle is a
 * named pipe on Windows where the backend drives one (IOCP), a socket elsewhere ("Pipes"). */
#define MUX__CAP_PIPE         (1u << 14)
#define MUX__CAP_OPS          0x300ffu   /* the operation-kind bits (datagrams': 16, 17) */

/* mux__op.kind_ */
enum {
    MUX__OP_RECV,      /* into a_.buf */
    MUX__OP_RECV_POOL, /* into a buffer of a_.pool */
    MUX__OP_SEND,      /* from a_.buf */
    MUX__OP_SENDV,     /* from the a_.bufs.n buffers at a_.bufs.v */
    MUX__OP_ACCEPT,    /* a_.batch: connections per readiness (emulation) */
    MUX__OP_CONNECT,   /* to a_.addr */
    MUX__OP_SHUTDOWN,  /* of the write side */
    MUX__OP_SENDFILE,  /* a_.file.len bytes of a_.file.fd from a_.file.off */
    /* Datagrams (src/udp/), whose capability bits sit above the others' flags: */
    MUX__OP_DGRAM_RECV = 16, /* up to a_.dgram->n datagrams into its messages (or a pool) */
    MUX__OP_DGRAM_SEND = 17, /* the a_.dgram->n datagrams of its messages, in order */
};
#define MUX__CAP(kind) (1u << (kind))

/* A datagram of an operation's batch (MUX__OP_DGRAM_*). A receive fills `len`, `flags`,
 * `addr`/`addrlen` and `gso` of the first `res` messages; a send reads `bufs`, `nbufs`,
 * `addr`/`addrlen` (0: the connected peer) and `gso` of the first `n`, and completes with
 * how many went (a datagram that fails, when it is the first, fails the operation: -errno).
 * Buffers and addresses are the owner's, read and written until the completion. */
struct mux__dmsg {
    const mux_buf_t *bufs;          /* send: the datagram's bytes */
    char *buf;                      /* receive: where its bytes go, `cap` of them */
    char *pbuf;                     /* receive from a pool: the pool buffer `buf` lies in */
    uint32_t nbufs;                 /* send */
    uint32_t cap;                   /* receive */
    uint32_t len;                   /* receive: the bytes in `buf` (at most `cap`) */
    uint16_t flags;                 /* receive: MUX__DMSG_* */
    uint16_t gso;                   /* send: cut into datagrams of this many bytes (UDP GSO);
                                       receive: the kernel coalesced datagrams of this size */
    uint32_t addrlen;      /* the length of `addr` (receive: its room, then the sender's) */
    struct sockaddr *addr; /* send: the destination (NULL: the peer); receive: the sender */
};
#define MUX__DMSG_TRUNC 0x1 /* the datagram was longer than `cap`: cut */

/* An operation's datagrams. A receive from a pool (`pool` not NULL) takes a buffer per
 * datagram, and puts the datagram `headroom` bytes into it (room for io_uring's header,
 * the same on every backend); its messages' buf, pbuf and cap are set by the receive, and
 * its owner resets every addrlen to the room of its addr before it submits. A multishot
 * receive (MUX__OPF_MULTI) fills one message per completion, m[k], and only while k < n:
 * the owner moves k on as it takes them, and refuses a completion when k == n. */
struct mux__dbatch {
    struct mux__dmsg *m;
    uint32_t n;
    uint32_t k;
    uint32_t headroom;
    uint32_t flags; /* MUX__DB_* */
    mux_bufpool_t *pool;
};
#define MUX__DB_GRO 0x1 /* the socket coalesces (UDP GRO): receives ask for the segment size */

/* mux__op.flags_: the owner's (set before submit) */
#define MUX__OPF_POLL_FIRST 0x01 /* the socket is likely not ready: wait before trying */
#define MUX__OPF_MULTI                                                                             \
    0x02 /* stay armed: an accept (MUX__CAP_ACCEPT_MULTI), a pool receive                          \
            (MUX__CAP_RECV_MULTI) */
#define MUX__OPF_PIPE 0x04 /* sock_ is a pipe's handle, not a socket ("Pipes"): kept by submits */
/* the operation layer's */
#define MUX__OPF_FLIGHT 0x10 /* submitted, its last completion not yet in */
#define MUX__OPF_NATIVE 0x20 /* the backend runs it (else the emulation) */
#define MUX__OPF_WATCH  0x40 /* priv_.io is the emulation's watcher (started or queued) */

/* Completion flags (done_'s `flags`) */
/* MORE and NONEMPTY have the values of io_uring's CQE flags (IORING_CQE_F_MORE,
 * IORING_CQE_F_SOCK_NONEMPTY), so that its completions pass them on with one mask. */
#define MUX__OPC_MORE     0x2  /* further completions follow (multishot) */
#define MUX__OPC_NONEMPTY 0x4  /* the kernel says data is left: the next receive may try at once */
#define MUX__OPC_FILLED   0x8  /* a receive filled its buffer: data may be left (a guess) */
#define MUX__OPC_FULL     0x10 /* a send stopped at a full socket: the next should poll first */
#define MUX__OPC_NOW      0x20 /* from the loop's dispatch: the owner may deliver at once */

/* Limits every backend's operations keep to. */
#define MUX__READ_BUDGET 16         /* receives completed inside their submits per iteration */
#define MUX__RES_MAX     0x7ffff000 /* a completion's byte count fits an int (Linux's cap too) */
#define MUX__SENDV_MAX   64         /* buffers gathered per send */

struct mux__backend {
    const char *name;
    /* MUX__CAP_* the backend can have; `open` may narrow them for a loop (loop->caps), never
     * widen them. */
    unsigned caps;
    /* Highest fd + 1 the backend can watch (select: FD_SETSIZE), or INT_MAX. */
    int fd_limit;
    /* Creates the kernel state. 0, or -errno when the kernel refuses the mechanism. */
    int (*open)(struct mux__loop *loop);
    /* Releases everything open created. */
    void (*close)(struct mux__loop *loop);
    /* In a child after fork: re-creates the kernel state without touching the parent's.
     * The core then re-applies every watched fd with `force` set. 0 or -errno. */
    int (*fork)(struct mux__loop *loop);
    /* Makes the kernel watch `fd` for `want` (MUX_READ | MUX_WRITE | MUX_EDGE, MUX_RDHUP with
     * MUX__CAP_RDHUP, or 0).
     * `force`: the fd may have been closed and re-opened since the kernel last saw it, so
     * a cached registration must not be trusted. 0 or -errno (the core reports it to the
     * fd's watchers). */
    int (*change)(struct mux__loop *loop, int fd, unsigned want, int force);
    /* May be NULL. The library is about to close `fd` itself (a stream's or listener's
     * socket), after every watcher of it stopped: the kernel forgets its registration with
     * the close, and a backend that caches it can forget it too, so that the next file
     * with that number is registered without a failed attempt first. */
    void (*closing)(struct mux__loop *loop, int fd);
    /* May be NULL. `sock` becomes the socket of a stream or listener of this loop, before any
     * operation on it: a completion backend binds it to its kernel queue here (IOCP: the
     * completion port), so that every operation on it completes there. 0 or -errno (the open,
     * connect or listen then fails with it). */
    int (*adopt)(struct mux__loop *loop, mux_os_sock_t sock);
    /* May be NULL. Makes the kernel report the exit of child `pid` (kqueue's EVFILT_PROC), so
     * that a watcher of it needs no SIGCHLD: the wait then calls mux__child_exited. 0, or
     * -errno (the watcher uses SIGCHLD). The registration may outlive the watcher: the exit of
     * a pid no watcher has is ignored. */
    int (*child)(struct mux__loop *loop, int pid);
    /* Waits at most `timeout_ns` (-1: no limit, 0: poll) and reports events. Returns 0 or
     * -errno; -EINTR is not an error. */
    int (*wait)(struct mux__loop *loop, int64_t timeout_ns);
    /* Makes the current or next wait return. Any thread, async-signal-safe. 0 or -errno. */
    int (*wake)(struct mux__loop *loop);

    /* The operation half (NULL without MUX__CAP_OPS bits). */
    /* Starts `op` (not in flight; a kind in loop->caps). May only queue it for the next
     * wait; never calls done_ from inside itself, except for a receive into a caller buffer
     * that finds bytes waiting (see "Buffers" above). */
    void (*submit)(struct mux__loop *loop, struct mux__op *op);
    /* See "Cancel" above. */
    void (*cancel)(struct mux__loop *loop, struct mux__op *op);
    /* Hands the free buffers of `pool` to the kernel, binding it to the loop
     * (mux__bufpool_bind, with a hook for buffers that come back). 0, or -errno: receives
     * from it are emulated then. The pool stays bound until the loop closes. */
    int (*pool_attach)(struct mux__loop *loop, mux_bufpool_t *pool);
    /* Takes the pool's buffers back from the kernel and unbinds it (mux_bufpool_detach).
     * 0, or -EBUSY while a receive that may take one of them is in flight. */
    int (*pool_detach)(struct mux__loop *loop, mux_bufpool_t *pool);
};

/* NULL-terminated, in order of preference; generated from CMakeLists.txt. */
extern const struct mux__backend *const mux__backends[];

/* Queues every watcher of the entry `e` that wants some of `revents`. */
static inline void mux__fd_queue(struct mux__loop *loop, struct mux__fd *e, unsigned revents)
{
    for (mux_io_t *w = e->head; w; w = w->next_) {
        unsigned r = revents & w->events_ & MUX__IO_WATCH;
        if (!r)
            continue;
        if (mux__unlikely(w->h_.flags & MUX__W_INTERNAL))
            mux__internal_event(loop, w);
        else
            mux__queue(loop, &w->h_, r);
    }
}

/* Reports `revents` to the watchers of the fd whose entry is `e`. Inline: it runs per event.
 *
 * The common case, one watcher on the fd, is called at once, from inside the backend's
 * wait, as libuv does: no round trip through the pending queue. That is safe because the
 * callback runs where a queued one would (after the wait's system call, before the timers
 * are gathered), the backend reads nothing of `e` or of the watcher after it, and a
 * watcher that a callback stops before its event comes up in the batch is no longer on its
 * fd's list, as if it had been taken out of the queue. One case must not be called at once:
 * a watcher a callback has just pointed at this fd number (MUX__FD_FORCE: the event may be
 * the old file's), whose event is dropped (the forced change reports the new file's
 * readiness on the next wait). An fd with several watchers has them queued, in start order.
 * A callback may fork: in the child, a backend stops touching its kernel objects (shared with
 * the parent) as soon as mux__forked_since() says so. io_uring also leaves the rest of its
 * batch (completions of the parent's ring's operations); a readiness backend reports the
 * rest (readiness of files the child shares, a hint its watchers act on as on any other),
 * which costs it no check per event. */
static inline void mux__fd_report(struct mux__loop *loop, struct mux__fd *e, unsigned revents)
{
    mux_io_t *w = e->head;
    if (mux__likely(w && !w->next_ && !(w->h_.flags & MUX__W_INTERNAL) && !w->h_.pending &&
                    !(e->changed & MUX__FD_FORCE))) {
        unsigned r = revents & w->events_ & MUX__IO_WATCH;
        if (r) {
            if (!loop->dispatched) { /* the first callback: the wait is over */
                loop->dispatched = 1;
                loop->now_stale = 1;
            }
            w->cb_(loop->pub, w, r);
        }
        return;
    }
    if (!(e->changed & MUX__FD_FORCE))
        mux__fd_queue(loop, e, revents);
}

/* The same by fd number, for any fd value; returns the events the loop wanted on `fd` as
 * last applied (0 when nothing watches it). */
static inline unsigned mux__fd_event(struct mux__loop *loop, int fd, unsigned revents)
{
    struct mux__fd *e = mux__fd_find(loop, fd);
    if (mux__unlikely(!e))
        return 0;
    unsigned want = e->want;
    mux__fd_report(loop, e, revents);
    return want;
}

/* Stops every watcher of `fd` and queues it with MUX_ERROR: the fd is not valid (`err`
 * -EBADF), or the backend cannot watch it (its -errno). The library's own watchers (a
 * stream's, a listener's: MUX__W_NOREF) also get the errno, in the revents bits from
 * MUX__KILL_ERRNO_SHIFT up; the caller's see MUX_ERROR only, as the API says. */
#define MUX__KILL_ERRNO_SHIFT 16
void mux__fd_kill(struct mux__loop *loop, int fd, int err);

/* ---- operations (stream/op.h starts them; backends complete them) ---------------- */

/* Hands one completion to the owner. Returns nonzero when the owner refused it (it stays in
 * flight and the backend offers it again later). */
static inline int mux__op_complete(struct mux__op *op, int res, char *buf, unsigned flags)
{
    uint8_t was = op->flags_;
    if (!(flags & MUX__OPC_MORE))
        op->flags_ &= (uint8_t)~MUX__OPF_FLIGHT;
    int refused = op->done_(op, res, buf, flags);
    if (mux__unlikely(refused))
        op->flags_ = was;
    return refused;
}

/* ---- buffer pools: what a backend whose kernel picks receive buffers does with one ---- */

/* mux_bufpool_t.free_[i]: the index of the next free buffer, or one of these marks. */
#define MUX__POOL_INUSE UINT32_MAX       /* the caller's */
#define MUX__POOL_LENT  (UINT32_MAX - 1) /* in a kernel's ring */
#define MUX__POOL_SEND  (UINT32_MAX - 2) /* a stream sends from it (mux_write_pool) */
#define MUX__POOL_NONE  UINT32_MAX       /* mux__bufpool_lend: no free buffer */

static inline char *mux__bufpool_addr(const mux_bufpool_t *p, uint32_t i)
{
    return p->mem_ + (size_t)i * p->size_;
}
static inline uint32_t mux__bufpool_count(const mux_bufpool_t *p)
{
    return p->count_;
}
static inline size_t mux__bufpool_size(const mux_bufpool_t *p)
{
    return p->size_;
}
/* The pool's free buffers are `loop`'s kernel's from now on; `kring` is the backend's state
 * for it, and `kput`, unless NULL, is called whenever a buffer goes back on the free list
 * (io_uring passes none: it refills its ring in batches, after each reap and before each
 * enter). */
static inline void mux__bufpool_bind(mux_bufpool_t *p, struct mux__loop *loop, void *kring,
                                     void (*kput)(mux_bufpool_t *p))
{
    p->loop_ = loop;
    p->kring_ = kring;
    p->kput_ = kput;
}
/* The backend's state for the pool, as bound. */
static inline void *mux__bufpool_kring(const mux_bufpool_t *p)
{
    return p->kring_;
}
/* Lends the most recently used free buffer to the kernel: its index, or MUX__POOL_NONE. */
static inline uint32_t mux__bufpool_lend(mux_bufpool_t *p)
{
    if (p->head_ == p->count_)
        return MUX__POOL_NONE;
    uint32_t i = p->head_;
    p->head_ = p->free_[i];
    p->free_[i] = MUX__POOL_LENT;
    return i;
}
/* Puts lent buffer `i`, which the kernel did not fill, back at the head of the free list (a
 * backend that lends one at a time, to read into it at once: IOCP). */
static inline void mux__bufpool_unlend(mux_bufpool_t *p, uint32_t i)
{
    p->free_[i] = p->head_;
    p->head_ = i;
}
/* The kernel filled lent buffer `i`: it is the caller's now. Its address. */
static inline char *mux__bufpool_taken(mux_bufpool_t *p, uint32_t i)
{
    p->free_[i] = MUX__POOL_INUSE;
    p->nfree_--;
    return mux__bufpool_addr(p, i);
}
/* Undoes mux__bufpool_taken: its completion was refused, to come again. */
static inline void mux__bufpool_untake(mux_bufpool_t *p, uint32_t i)
{
    p->free_[i] = MUX__POOL_LENT;
    p->nfree_++;
}
/* Every buffer that is neither the caller's nor a send's goes back on the free list (the ring
 * was reset). */
static inline void mux__bufpool_reclaim(mux_bufpool_t *p)
{
    uint32_t head = p->count_;
    for (uint32_t i = p->count_; i-- > 0;)
        if (p->free_[i] != MUX__POOL_INUSE && p->free_[i] != MUX__POOL_SEND) {
            p->free_[i] = head;
            head = i;
        }
    p->head_ = head;
}
/* The loop closes or its kernel ring is gone: the pool serves any loop again. */
static inline void mux__bufpool_unbind(mux_bufpool_t *p)
{
    mux__bufpool_reclaim(p);
    p->loop_ = NULL;
    p->kring_ = NULL;
    p->kput_ = NULL;
}

#endif
