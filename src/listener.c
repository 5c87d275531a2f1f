/* Listeners: bind, listen, and accept in batches on readiness backends.
 *
 * Running out of descriptors (EMFILE, ENFILE) is the classic way to lose an accept loop:
 * the pending connection keeps the socket readable, accept keeps failing, and a
 * level-triggered loop spins. A listener that hits it stops watching its socket, tells
 * its callback once, and resumes as soon as a stream of the same loop is closed (a
 * descriptor is free again), or after MUX__ACCEPT_RETRY at the latest for descriptors
 * freed elsewhere. Nothing in the backlog is dropped: it is served when accept can work.
 *
 * On a completion backend (io_uring) the listener keeps one multishot accept in the kernel
 * instead of a poll: every connection arrives as a completion carrying its fd, with no
 * system call of ours. Completions wait in afd_ until the listener's watcher runs; when
 * that batch is full, the listener refuses the next one and the backend keeps it (and the
 * accept's later ones) for the next iteration, so nothing is dropped and one listener
 * cannot flood a loop iteration. The kernel ends the accept on an error (EMFILE
 * included): the listener then pauses exactly as above and arms a new accept when it
 * resumes.
 */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend.h"
#include "internal.h"

#define MUX__ACCEPT_RETRY 100000000ull /* ns */

enum {
    L_OPEN = 0x1,
    L_CLOSING = 0x2,
    L_PAUSED = 0x4,
    L_NATIVE = 0x8, /* accepts through the backend's multishot accept */
    L_AOP = 0x10,   /* that accept is in flight */
};

#define MUX__ACCEPT_SLOTS ((unsigned)(sizeof(((mux_listener_t *)0)->afd_) / sizeof(int)))

static int mux__listener_valid(const mux_listener_t *l)
{
    return l && l->loop_ && (l->flags_ & L_OPEN) && !(l->flags_ & L_CLOSING);
}

static void mux__listener_unpause(mux_listener_t *l)
{
    struct mux__loop *loop = l->loop_;
    mux_listener_t **pp = &loop->paused;
    while (*pp && *pp != l)
        pp = &(*pp)->next_paused_;
    if (*pp)
        *pp = l->next_paused_;
    l->next_paused_ = NULL;
    l->flags_ &= ~(unsigned)L_PAUSED;
    mux_timer_stop(loop->pub, &l->retry_);
}

/* Watches for connections again: the accept in the kernel, or the readiness watcher. */
static void mux__listener_arm(mux_listener_t *l)
{
    struct mux__loop *loop = l->loop_;
    if (!(l->flags_ & L_NATIVE)) {
        mux_io_start(loop->pub, &l->io_);
        return;
    }
    if (l->flags_ & L_AOP)
        return;
    loop->backend->op_accept(loop, &l->aop_, l->fd_);
    l->flags_ |= L_AOP;
}

static void mux__listener_pause(mux_listener_t *l)
{
    struct mux__loop *loop = l->loop_;
    mux_io_stop(loop->pub, &l->io_);
    l->flags_ |= L_PAUSED;
    l->next_paused_ = loop->paused;
    loop->paused = l;
    mux_timer_start(loop->pub, &l->retry_, MUX__ACCEPT_RETRY, 0);
}

void mux__listeners_resume(struct mux__loop *loop)
{
    mux_listener_t *l;
    while ((l = loop->paused) != NULL) {
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

static void mux__listener_accept(mux_listener_t *l)
{
    for (unsigned i = 0; i < l->batch_ && !(l->flags_ & L_CLOSING); i++) {
        int fd = accept4(l->fd_, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            l->cb_(l, fd, 0);
            continue;
        }
        switch (errno) {
        case EAGAIN:
#if EWOULDBLOCK != EAGAIN
        case EWOULDBLOCK:
#endif
            return;
        case EINTR:
        case ECONNABORTED: /* the peer gave up while in the backlog */
        case EPROTO:
        case EPERM: /* a firewall said no to this one */
            continue;
        case EMFILE:
        case ENFILE:
        case ENOBUFS:
        case ENOMEM: {
            int err = -errno;
            mux__listener_pause(l);
            l->cb_(l, -1, err);
            return;
        }
        default:
            l->cb_(l, -1, -errno);
            return;
        }
    }
}

/* The multishot accept completed: a connection, or the end of the accept. */
static int mux__listener_aop_done(struct mux__op *op, int res, char *buf, unsigned flags)
{
    mux_listener_t *l = mux__container_of(op, mux_listener_t, aop_);
    unsigned more = flags & MUX__OPF_MORE;
    (void)buf;
    if (res >= 0 && (l->flags_ & L_CLOSING)) {
        close(res);
    } else if (res >= 0) {
        unsigned slots = l->batch_ < MUX__ACCEPT_SLOTS ? l->batch_ : MUX__ACCEPT_SLOTS;
        if (l->nafd_ == slots)
            return 1; /* a full batch: this one waits for the next iteration */
        l->afd_[l->nafd_++] = res;
        l->agen_ = mux__fork_gen;
    } else if (res != -ECANCELED || !more) {
        l->aerr_ = res;
    }
    if (!more)
        l->flags_ &= ~(unsigned)L_AOP;
    mux__queue(l->loop_, &l->io_.h_, MUX__DEFER);
    return 0;
}

/* Hands the connections the accept completed with to the callback, then re-arms it. */
static void mux__listener_deliver(mux_listener_t *l)
{
    unsigned i = 0;
    /* A callback may close the listener, or fork: in the child the connections still in
     * the batch are the parent's to serve (the kernel gave them to the parent's accept). */
    for (; i < l->nafd_ && !(l->flags_ & L_CLOSING) && l->agen_ == mux__fork_gen; i++)
        l->cb_(l, l->afd_[i], 0);
    for (; i < l->nafd_; i++)
        close(l->afd_[i]); /* not wanted, or the parent's: this process's copies go */
    l->nafd_ = 0;
    int err = l->aerr_;
    l->aerr_ = 0;
    if (l->flags_ & (L_CLOSING | L_PAUSED))
        return;
    switch (-err) {
    case 0:
    case ECANCELED: /* the ring was rebuilt (fork) */
    case EINTR:
    case EAGAIN:
    case ECONNABORTED:
    case EPROTO:
    case EPERM:
        mux__listener_arm(l);
        return;
    default:
        /* Out of descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM), or worse: wait for a close
         * or the retry timer rather than ask again at once. */
        if (l->flags_ & L_AOP)
            l->loop_->backend->op_cancel(l->loop_, &l->aop_);
        mux__listener_pause(l);
        l->cb_(l, -1, err);
    }
}

static void mux__listener_io_cb(mux_loop_t *pub, mux_io_t *w, unsigned revents)
{
    mux_listener_t *l = mux__container_of(w, mux_listener_t, io_);
    (void)pub;
    if ((revents & MUX_READ) && !(l->flags_ & L_CLOSING))
        mux__listener_accept(l);
    if ((l->flags_ & L_NATIVE) && (revents & MUX__DEFER))
        mux__listener_deliver(l);
    if ((l->flags_ & L_CLOSING) && (revents & MUX__DEFER)) {
        if (l->flags_ & L_AOP)
            return; /* the accept's last completion comes first */
        struct mux__loop *loop = l->loop_;
        mux_listener_close_cb cb = l->close_cb_;
        mux__unqueue(loop, &l->io_.h_);
        l->flags_ = 0;
        l->loop_ = NULL;
        loop->active--;
        if (cb)
            cb(l);
    }
}

static int mux__listen_socket(const struct sockaddr *addr, socklen_t len, unsigned flags,
                              int backlog)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int on = 1, err = 0;
    if (addr->sa_family != AF_UNIX && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0)
        err = -errno;
    if (!err && (flags & MUX_LISTEN_REUSEPORT) &&
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0)
        err = -errno;
    if (!err && (flags & MUX_LISTEN_V6ONLY) && addr->sa_family == AF_INET6 &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0)
        err = -errno;
    if (!err && bind(fd, addr, len) != 0)
        err = -errno;
    if (!err && listen(fd, backlog > 0 ? backlog : SOMAXCONN) != 0)
        err = -errno;
    if (err) {
        close(fd);
        return err;
    }
    return fd;
}

MUX_EXPORT int mux_listen(mux_loop_t *pub, mux_listener_t *l, const struct sockaddr *addr,
                          socklen_t addrlen, const mux_listen_options_t *opts, mux_accept_cb cb)
{
    struct mux__loop *loop = mux__L(pub);
    unsigned flags = opts ? opts->flags : 0;
    if (!loop || !l || !addr || !cb || addrlen < sizeof(sa_family_t) ||
        (flags & ~(unsigned)(MUX_LISTEN_REUSEPORT | MUX_LISTEN_V6ONLY)) ||
        (opts && opts->backlog < 0))
        return -EINVAL;
    if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6 && addr->sa_family != AF_UNIX)
        return -EAFNOSUPPORT;
    int fd = mux__listen_socket(addr, addrlen, flags, opts ? opts->backlog : 0);
    if (fd < 0)
        return fd;
    void *data = l->data;
    memset(l, 0, sizeof *l);
    l->data = data;
    l->loop_ = loop;
    l->fd_ = fd;
    l->flags_ = L_OPEN;
    l->batch_ = opts && opts->batch ? opts->batch : 64;
    l->cb_ = cb;
    mux_io_init(&l->io_, mux__listener_io_cb, fd, MUX_READ);
    mux_timer_init(&l->retry_, mux__listener_retry_cb);
    l->io_.h_.flags |= MUX__W_NOREF;
    l->retry_.h_.flags |= MUX__W_NOREF;
    l->aop_.done_ = mux__listener_aop_done;
    int err;
    if (loop->native) {
        l->flags_ |= L_NATIVE | L_AOP;
        loop->backend->op_accept(loop, &l->aop_, fd);
        err = 0;
    } else {
        err = mux_io_start(pub, &l->io_);
    }
    if (err != 0) {
        close(fd);
        l->loop_ = NULL;
        l->flags_ = 0;
        return err;
    }
    loop->active++; /* the listener itself, until its close callback */
    return 0;
}

MUX_EXPORT int mux_listener_address(const mux_listener_t *l, struct sockaddr *addr, socklen_t *len)
{
    if (!mux__listener_valid(l) || !addr || !len)
        return -EINVAL;
    return getsockname(l->fd_, addr, len) == 0 ? 0 : -errno;
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
    mux_io_stop(loop->pub, &l->io_);
    if (l->flags_ & L_AOP)
        loop->backend->op_cancel(loop, &l->aop_);
    close(l->fd_);
    l->fd_ = -1;
    l->flags_ |= L_CLOSING;
    l->close_cb_ = cb;
    mux__queue(loop, &l->io_.h_, MUX__DEFER);
    return 0;
}
