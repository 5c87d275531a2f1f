/* SPDX-License-Identifier: MIT */
/* Listeners: bind, listen, and accept over the backend's accept operation.
 *
 * Where the backend can keep an accept armed (MUX__CAP_ACCEPT_MULTI: io_uring), the listener
 * submits one and every connection arrives as a completion carrying its socket. Elsewhere
 * each accept completes once and the listener submits the next from its task; emulated, that
 * is an accept(2) tried at once, up to the listener's batch per loop iteration, and a wait
 * for readability when the backlog is empty. Either way connections wait in afd_ until the
 * task hands them to the callback; when that batch is full, the listener refuses the next
 * completion of an armed accept and the backend offers it again in a later iteration, so
 * nothing is dropped and one listener cannot flood a loop iteration.
 *
 * Running out of descriptors (EMFILE, ENFILE) is the classic way to lose an accept loop:
 * the pending connection keeps the socket readable, accept keeps failing, and a
 * level-triggered loop spins. A listener whose accept fails that way (or worse) stops
 * accepting, tells its callback once, and resumes as soon as a stream of the same loop is
 * closed (a descriptor is free again), or after MUX__ACCEPT_RETRY at the latest for
 * descriptors freed elsewhere. Nothing in the backlog is dropped: it is served when accept
 * can work.
 */
#include <string.h>

#include "platform/platform.h"
#include "stream/listener.h"
#include "stream/op.h"

#define MUX__ACCEPT_RETRY 100000000ull /* ns */

enum {
    L_OPEN = 0x1,
    L_CLOSING = 0x2,
    L_PAUSED = 0x4,
    L_IN_TASK = 0x8, /* inside the task, which hands out everything before it returns */
    L_UNIX = 0x10,   /* bound to a Unix path */
};

int mux__listener_valid(const mux_listener_t *l)
{
    return l && l->loop_ && (l->flags_ & L_OPEN) && !(l->flags_ & L_CLOSING);
}

int mux__listener_is_unix(const mux_listener_t *l)
{
    return (l->flags_ & L_UNIX) != 0;
}

/* A loop's listeners: the open ones, for the walk, and those waiting for a descriptor. */
struct mux__listeners {
    struct mux__handles h;
    mux_listener_t *paused;
};

static int mux__listener_walkable(const void *l)
{
    return mux__listener_valid(l);
}

static const struct mux__handles_type mux__listener_type = {
    .kind = MUX_HANDLE_LISTENER,
    .link_off = offsetof(mux_listener_t, link_),
    .flags_off = offsetof(mux_listener_t, flags_),
    .size = sizeof(struct mux__listeners),
    .walkable = mux__listener_walkable,
};

static struct mux__listeners *mux__listeners_of(struct mux__loop *loop)
{
    return (struct mux__listeners *)mux__handles_find(loop, &mux__listener_type);
}

static void mux__listener_kick(mux_listener_t *l)
{
    if (!(l->flags_ & L_IN_TASK))
        mux__task_queue(l->loop_, &l->task_);
}

static void mux__listener_unpause(mux_listener_t *l)
{
    struct mux__loop *loop = l->loop_;
    mux_listener_t **pp = &mux__listeners_of(loop)->paused;
    while (*pp && *pp != l)
        pp = &(*pp)->next_paused_;
    if (*pp)
        *pp = l->next_paused_;
    l->next_paused_ = NULL;
    l->flags_ &= ~(unsigned)L_PAUSED;
    mux_timer_stop(loop->pub, &l->retry_);
}

/* Accepts connections again, unless an accept is armed already. */
static void mux__listener_arm(mux_listener_t *l)
{
    struct mux__loop *loop = l->loop_;
    struct mux__op *op = &l->aop_;
    if (mux__op_in_flight(op) || l->nafd_ == MUX__ACCEPT_SLOTS)
        return; /* armed; or the batch is full, and the task arms it once it is handed out */
    op->kind_ = MUX__OP_ACCEPT;
    op->a_.batch = l->batch_;
    op->flags_ = (uint8_t)((op->flags_ & ~MUX__OPF_MULTI) |
                           (loop->caps & MUX__CAP_ACCEPT_MULTI ? MUX__OPF_MULTI : 0));
    mux__op_submit(loop, op);
}

/* Stops accepting until a stream closes or the retry timer fires. 0, or the timer's error:
 * then only a stream's close resumes it. */
static int mux__listener_pause(mux_listener_t *l)
{
    struct mux__loop *loop = l->loop_;
    struct mux__listeners *ls = mux__listeners_of(loop);
    mux__op_cancel(loop, &l->aop_);
    l->flags_ |= L_PAUSED;
    l->next_paused_ = ls->paused;
    ls->paused = l;
    return mux_timer_start(loop->pub, &l->retry_, MUX__ACCEPT_RETRY, 0);
}

void mux__listeners_resume(struct mux__loop *loop)
{
    struct mux__listeners *ls = mux__listeners_of(loop);
    if (!ls)
        return; /* no listener ever opened on this loop */
    mux_listener_t *l;
    while ((l = ls->paused) != NULL) {
        mux__listener_unpause(l);
        mux__listener_arm(l);
    }
}

static void mux__listener_retry_cb(mux_loop_t *pub, mux_timer_t *t)
{
    mux_listener_t *l = mux__container_of(t, mux_listener_t, retry_);
    (void)pub;
    mux__listener_unpause(l);
    mux__listener_arm(l);
}

static void mux__listener_run(struct mux__task *t);

/* A connection, or how the accept ended. */
static int mux__listener_aop_done(struct mux__op *op, int res, char *buf, unsigned flags)
{
    mux_listener_t *l = mux__container_of(op, mux_listener_t, aop_);
    (void)buf;
    if (res >= 0 && (l->flags_ & L_CLOSING)) {
        mux__sock_close((mux_os_sock_t)res);
    } else if (res >= 0) {
        unsigned slots = l->batch_ < MUX__ACCEPT_SLOTS ? l->batch_ : MUX__ACCEPT_SLOTS;
        if (l->nafd_ == slots)
            return 1; /* a full batch: this one waits for the next iteration */
        l->afd_[l->nafd_++] = (mux_os_sock_t)res;
        l->agen_ = mux__fork_gen;
    } else if (res != -ECANCELED || !(flags & MUX__OPC_MORE)) {
        l->aerr_ = res;
    }
    if ((flags & MUX__OPC_NOW) && !(l->flags_ & L_IN_TASK))
        mux__listener_run(&l->task_); /* from the loop's dispatch: hand it out at once */
    else
        mux__listener_kick(l);
    return 0;
}

/* Handles how the accept ended: most errors concern one connection and the listener goes
 * on; running out of descriptors or memory (or worse) pauses it. */
static void mux__listener_settle(mux_listener_t *l, int err)
{
    switch (-err) {
    case 0:
    case ECANCELED: /* a pause's cancel, or the kernel's ring was renewed (fork) */
    case EINTR:
    case EAGAIN:
    case ECONNABORTED:
    case EPROTO:
    case EPERM:
        mux__listener_arm(l);
        return;
    default: {
        int terr = mux__listener_pause(l);
        l->cb_(l, MUX_OS_SOCK_INVALID, err);
        if (terr != 0 && (l->flags_ & L_PAUSED))
            l->cb_(l, MUX_OS_SOCK_INVALID, terr); /* no retry timer: resumed by closes only */
    }
    }
}

static void mux__listener_run(struct mux__task *t)
{
    mux_listener_t *l = mux__container_of(t, mux_listener_t, task_);
    l->flags_ |= L_IN_TASK;
    do {
        unsigned i = 0, n = l->nafd_;
        /* A callback may close the listener, or fork: in the child the connections still in
         * the batch are the parent's to serve (the kernel gave them to the parent's accept). */
        for (; i < n && !(l->flags_ & L_CLOSING) && l->agen_ == mux__fork_gen; i++)
            l->cb_(l, l->afd_[i], 0);
        for (; i < n; i++)
            mux__sock_close(l->afd_[i]); /* not wanted, or the parent's */
        l->nafd_ = 0;
        int err = l->aerr_;
        l->aerr_ = 0;
        if (l->flags_ & L_CLOSING) {
            if (!mux__op_in_flight(&l->aop_)) { /* the accept's last completion came */
                struct mux__loop *loop = l->loop_;
                mux_listener_close_cb cb = l->close_cb_;
                mux__unqueue(loop, &l->task_.h_);
                mux__handle_close(loop, &l->link_, &l->flags_);
                l->flags_ = 0;
                l->loop_ = NULL;
                if (cb)
                    cb(l);
                return;
            }
            break;
        }
        if (!(l->flags_ & L_PAUSED))
            mux__listener_settle(l, err); /* may accept at once: hand those out too */
    } while (l->nafd_ > 0 || l->aerr_ != 0);
    l->flags_ &= ~(unsigned)L_IN_TASK;
}

MUX_EXPORT int mux_listen(mux_loop_t *pub, mux_listener_t *l, const struct sockaddr *addr,
                          socklen_t addrlen, const mux_listen_options_t *opts, mux_accept_cb cb)
{
    struct mux__loop *loop = mux__loop_of(pub);
    unsigned flags = opts ? opts->flags : 0;
    unsigned steer_flags = MUX_LISTEN_INCOMING_CPU | MUX_LISTEN_CPU_BPF;
    if (!loop || !l || !addr || !cb || addrlen < (socklen_t)sizeof addr->sa_family ||
        (flags & ~(unsigned)(MUX_LISTEN_REUSEPORT | MUX_LISTEN_V6ONLY | steer_flags)) ||
        (flags & steer_flags) == steer_flags || (opts && opts->backlog < 0) ||
        ((flags & MUX_LISTEN_INCOMING_CPU) && opts->cpu < 0))
        return -EINVAL;
    if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6 && addr->sa_family != AF_UNIX)
        return -EAFNOSUPPORT;
    if ((flags & steer_flags) && addr->sa_family == AF_UNIX)
        return -EINVAL; /* no CPU steering for Unix sockets */
    int steer = flags & MUX_LISTEN_INCOMING_CPU ? MUX__STEER_INCOMING_CPU
                : flags & MUX_LISTEN_CPU_BPF    ? MUX__STEER_CPU_BPF
                                                : MUX__STEER_NONE;
    int err = mux__reserve(loop); /* room to queue its task whenever it needs to */
    if (err != 0)
        return err;
    struct mux__handles *ls = mux__handles_get(loop, &mux__listener_type);
    if (!ls)
        return -ENOMEM;
    int fd = mux__sock_listen(addr, addrlen, (flags & (MUX_LISTEN_REUSEPORT | steer_flags)) != 0,
                              (flags & MUX_LISTEN_V6ONLY) != 0, opts ? opts->backlog : 0, steer,
                              opts ? opts->cpu : 0);
    if (fd < 0)
        return fd;
    if (fd >= loop->backend->fd_limit) { /* select: FD_SETSIZE */
        mux__sock_close(fd);
        return -EINVAL;
    }
    err = loop->backend->adopt ? loop->backend->adopt(loop, fd) : 0;
    if (err != 0) {
        mux__sock_close(fd);
        return err;
    }
    void *data = l->data;
    memset(l, 0, sizeof *l);
    l->data = data;
    l->loop_ = loop;
    l->sock_ = fd;
    l->flags_ = L_OPEN | (addr->sa_family == AF_UNIX ? L_UNIX : 0);
    l->batch_ = opts && opts->batch ? opts->batch : 64;
    l->cb_ = cb;
    mux_timer_init(&l->retry_, mux__listener_retry_cb);
    l->retry_.h_.flags |= MUX__W_NOREF;
    mux__task_init(&l->task_, mux__listener_run);
    l->aop_.done_ = mux__listener_aop_done;
    l->aop_.sock_ = fd;
    mux__handle_open(loop, ls, &l->link_, &l->flags_); /* counted until its close ends */
    mux__listener_arm(l);
    return 0;
}

MUX_EXPORT int mux_listener_address(const mux_listener_t *l, struct sockaddr *addr, socklen_t *len)
{
    if (!mux__listener_valid(l) || !addr || !len)
        return -EINVAL;
    return mux__sock_name(l->sock_, addr, len);
}

MUX_EXPORT mux_loop_t *mux_listener_loop(const mux_listener_t *l)
{
    return l && l->loop_ && (l->flags_ & L_OPEN) ? l->loop_->pub : NULL;
}

MUX_EXPORT int mux_listener_close(mux_listener_t *l, mux_listener_close_cb cb)
{
    if (!l || !l->loop_ || !(l->flags_ & L_OPEN))
        return -EINVAL;
    if (l->flags_ & L_CLOSING)
        return -EALREADY;
    struct mux__loop *loop = l->loop_;
    if (l->flags_ & L_PAUSED)
        mux__listener_unpause(l);
    l->flags_ |= L_CLOSING;
    l->close_cb_ = cb;
    mux__op_cancel(loop, &l->aop_);
    mux__sock_close(l->sock_);
    l->sock_ = MUX_OS_SOCK_INVALID;
    mux__listener_kick(l);
    return 0;
}
