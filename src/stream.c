/* Streams on readiness backends: connected TCP and Unix sockets, completion-style.
 *
 * The stream does the non-blocking system calls itself. A write is tried at once when
 * nothing is queued (speculative I/O): on a healthy connection it completes without ever
 * asking the kernel for writability. Reads go until a short read or EAGAIN, at most
 * MUX__READ_BUDGET per readiness, so one fast sender cannot starve the other connections.
 *
 * Completions are delivered from the stream's io watcher: finishing an operation puts it
 * on the stream's done list and queues the watcher with MUX__DEFER, so a callback never
 * runs inside the call that caused it. Delivery order is connect, writes in queue order,
 * shutdown, and last close, after which the stream's memory is the caller's.
 *
 * Timeouts cost nothing per read or write: the stream only records when bytes last moved,
 * and its one timer, when it fires, checks whether a deadline really passed and otherwise
 * sleeps again until the earliest one that still could.
 *
 * On a completion backend (io_uring) the stream hands the kernel its operations instead:
 * writes become one send (or sendmsg) in flight at a time, queued as an SQE that rides on
 * the loop's next wait, so a write costs no system call of its own; reads from a pool
 * become receives into buffers the kernel picks from the pool's provided-buffer ring.
 * Reads into one caller buffer keep the readiness path (a poll, then recv): a receive in
 * flight owns its buffer until the kernel completes it, and mux_read_stop promises the
 * buffer back at once. With a pool that problem does not exist -- the kernel takes a
 * buffer only when data is there -- and a receive that completes after a stop is kept,
 * buffer and all, and delivered first when reading starts again. An operation's
 * completion only records its result and queues the stream's io watcher; the callbacks
 * run from there, as on the readiness path. Closing cancels what is in flight, and the
 * close callback (the caller's memory back) waits for the last completion.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend.h"
#include "internal.h"

#define MUX__READ_BUDGET 16
#define MUX__IOV_BATCH   64

enum {
    S_OPEN = 0x001,
    S_CONNECTING = 0x002,
    S_CONNECTED = 0x004,
    S_READING = 0x008,
    S_SHUTTING = 0x010, /* shutdown asked for */
    S_SHUT = 0x020,     /* write side shut down (or failed to) */
    S_CLOSING = 0x040,
    S_UNIX = 0x080,
    S_DEFER_CONNECT = 0x100,
    S_DEFER_SHUTDOWN = 0x200,
    S_IN_CB = 0x400, /* inside the io callback: it delivers before returning */
    /* completion backends */
    S_NWRITE = 0x800,  /* writes are sends handed to the kernel */
    S_NREAD = 0x1000,  /* this read is a receive from a pool's buffer ring */
    S_ROP = 0x2000,    /* a receive is in flight */
    S_WOP = 0x4000,    /* a send is in flight */
    S_RDONE = 0x8000,  /* a receive completed: rres_, rgot_, roff_ */
    S_WDONE = 0x10000, /* the send completed: wres_ */
    S_WHOLD = 0x20000, /* the send in flight is of a write that already failed */
    S_RSHORT = 0x40000 /* the last receive emptied the socket */
};

static int mux__stream_valid(const mux_stream_t *s)
{
    return s && s->loop_ && (s->flags_ & S_OPEN) && !(s->flags_ & S_CLOSING);
}

static int mux__stream_has_deliveries(const mux_stream_t *s)
{
    return s->done_head_ ||
           (s->flags_ & (S_DEFER_CONNECT | S_DEFER_SHUTDOWN | S_CLOSING | S_RDONE | S_WDONE));
}

/* Makes the io watcher ask for what the stream needs now. */
static void mux__stream_interest(mux_stream_t *s)
{
    unsigned want = 0;
    if ((s->flags_ & (S_READING | S_NREAD)) == S_READING)
        want |= MUX_READ;
    if ((s->flags_ & S_CONNECTING) || (s->wq_head_ && !(s->flags_ & S_NWRITE)))
        want |= MUX_WRITE;
    mux_loop_t *pub = s->loop_->pub;
    int active = (s->io_.h_.flags & MUX__W_ACTIVE) != 0;
    if (!want) {
        if (active) {
            mux_io_stop(pub, &s->io_); /* this also drops a queued delivery: queue it again */
            if (mux__stream_has_deliveries(s) && !(s->flags_ & S_IN_CB))
                mux__queue(s->loop_, &s->io_.h_, MUX__DEFER);
        }
        return;
    }
    if (want != s->io_.events_)
        mux_io_modify(pub, &s->io_, want);
    if (!active)
        mux_io_start(pub, &s->io_);
}

static void mux__stream_defer(mux_stream_t *s)
{
    if (!(s->flags_ & S_IN_CB))
        mux__queue(s->loop_, &s->io_.h_, MUX__DEFER);
}

static void mux__write_done(mux_stream_t *s, mux_write_t *req, int status)
{
    req->status_ = status;
    req->next_ = NULL;
    if (s->done_tail_)
        s->done_tail_->next_ = req;
    else
        s->done_head_ = req;
    s->done_tail_ = req;
}

/* The head of the queue is written: it leaves the queue for delivery. */
static void mux__write_pop_done(mux_stream_t *s, mux_write_t *req)
{
    s->wq_head_ = req->next_;
    if (!s->wq_head_)
        s->wq_tail_ = NULL;
    mux__write_done(s, req, 0);
}

/* Bytes arrived: the read and idle deadlines start again (the clock only when they apply). */
static void mux__stream_read_moved(mux_stream_t *s)
{
    if (s->to_.idle_ns | s->to_.read_ns)
        s->last_read_ = mux__now(s->loop_);
}

/* Every queued write fails with `status`. A send in flight is cancelled, and the failed
 * writes are delivered only once it completed: the kernel may read their buffers until then. */
static void mux__writes_fail(mux_stream_t *s, int status)
{
    mux_write_t *req;
    if ((s->flags_ & (S_WOP | S_WDONE)) && s->wq_head_ && !(s->flags_ & S_WHOLD)) {
        s->flags_ |= S_WHOLD; /* the send's result, when it comes, is of a failed write */
        if (s->flags_ & S_WOP)
            s->loop_->backend->op_cancel(s->loop_, &s->wop_);
    }
    while ((req = s->wq_head_) != NULL) {
        s->wq_head_ = req->next_;
        mux__write_done(s, req, status);
    }
    s->wq_tail_ = NULL;
    s->wq_bytes_ = 0;
}

static void mux__stream_do_shutdown(mux_stream_t *s)
{
    s->flags_ |= S_SHUT | S_DEFER_SHUTDOWN;
    s->shutdown_status_ = shutdown(s->fd_, SHUT_WR) == 0 ? 0 : -errno;
}

/* After the queue drained or failed: a shutdown that waited for it happens now, the io
 * watcher follows, and finished operations get delivered. */
static void mux__stream_settle(mux_stream_t *s)
{
    if (!s->wq_head_ && (s->flags_ & S_SHUTTING) && !(s->flags_ & S_SHUT))
        mux__stream_do_shutdown(s);
    mux__stream_interest(s);
    if (s->done_head_ || (s->flags_ & (S_DEFER_SHUTDOWN | S_DEFER_CONNECT)))
        mux__stream_defer(s);
}

/* Advances `req` by `n` written bytes. */
static void mux__write_advance(mux_write_t *req, size_t n)
{
    req->left_ -= n;
    while (n > 0) {
        size_t room = req->iov_[req->iovidx_].iov_len - req->off_;
        if (n < room) {
            req->off_ += n;
            return;
        }
        n -= room;
        req->off_ = 0;
        req->iovidx_++;
    }
}

/* Writes as much of the queue as the socket takes now. */
static void mux__stream_flush(mux_stream_t *s)
{
    mux_write_t *req;
    while ((req = s->wq_head_) != NULL) {
        if (req->left_ > 0) {
            struct iovec iov[MUX__IOV_BATCH];
            int n = 0;
            for (int i = req->iovidx_; i < req->iovcnt_ && n < MUX__IOV_BATCH; i++) {
                if (req->iov_[i].iov_len == 0)
                    continue;
                iov[n] = req->iov_[i];
                if (i == req->iovidx_) {
                    iov[n].iov_base = (char *)iov[n].iov_base + req->off_;
                    iov[n].iov_len -= req->off_;
                }
                n++;
            }
            /* Zero-length entries are skipped above; advance past them too. */
            while (req->iov_[req->iovidx_].iov_len == 0)
                req->iovidx_++;
            /* One buffer, the common case, skips sendmsg's import of a msghdr and iovec. */
            struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
            ssize_t w =
                n == 1 ? send(s->fd_, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL | MSG_DONTWAIT)
                       : sendmsg(s->fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    break;
                mux__writes_fail(s, -errno);
                break;
            }
            if (s->to_.idle_ns | s->to_.write_ns)
                s->last_write_ = mux__now(s->loop_);
            s->wq_bytes_ -= (size_t)w;
            mux__write_advance(req, (size_t)w);
            if (req->left_ > 0)
                continue;
        }
        mux__write_pop_done(s, req);
    }
    mux__stream_settle(s);
}

/* ---- completion backends: the kernel does the I/O ------------------------------------ */

static void mux__stream_stop_reading(mux_stream_t *s);

/* Hands the head of the queue to the kernel (with the loop's next wait), if no send is in
 * flight. Empty writes finish here. */
static void mux__stream_send_next(mux_stream_t *s)
{
    mux_write_t *req;
    while ((req = s->wq_head_) != NULL && req->left_ == 0)
        mux__write_pop_done(s, req);
    if (!req || (s->flags_ & S_WOP))
        return;
    while (req->iov_[req->iovidx_].iov_len == req->off_) { /* empty or finished buffers */
        req->iovidx_++;
        req->off_ = 0;
    }
    const struct iovec *cur = &req->iov_[req->iovidx_];
    struct iovec one;
    s->msg_.msg_name = NULL;
    s->msg_.msg_namelen = 0;
    s->msg_.msg_control = NULL;
    s->msg_.msg_controllen = 0;
    s->msg_.msg_flags = 0;
    if (req->off_ > 0 || req->iovidx_ + 1 == req->iovcnt_) {
        /* One buffer (the rest of it): the kernel takes its address from the SQE now. */
        one.iov_base = (char *)cur->iov_base + req->off_;
        one.iov_len = cur->iov_len - req->off_;
        s->msg_.msg_iov = &one;
        s->msg_.msg_iovlen = 1;
    } else {
        /* Several: the kernel reads msg_ and the caller's array when the wait submits. */
        int n = req->iovcnt_ - req->iovidx_;
        s->msg_.msg_iov = (struct iovec *)cur;
        s->msg_.msg_iovlen = (size_t)(n > 1024 ? 1024 : n); /* UIO_MAXIOV */
    }
    s->loop_->backend->op_send(s->loop_, &s->wop_, s->fd_, &s->msg_);
    s->flags_ |= S_WOP;
}

/* The send in flight completed with `res` (bytes, or -errno). */
static void mux__stream_sent(mux_stream_t *s, int res)
{
    int stale = (s->flags_ & S_WHOLD) != 0; /* its write failed meanwhile */
    s->flags_ &= ~(unsigned)S_WHOLD;
    if (s->flags_ & S_CLOSING)
        return;
    mux_write_t *req = s->wq_head_;
    if (!stale && req && res >= 0) {
        if (s->to_.idle_ns | s->to_.write_ns)
            s->last_write_ = mux__now(s->loop_);
        s->wq_bytes_ -= (size_t)res;
        mux__write_advance(req, (size_t)res);
        if (req->left_ == 0)
            mux__write_pop_done(s, req);
    } else if (!stale && req && res != -ECANCELED && res != -EINTR && res != -EAGAIN) {
        mux__writes_fail(s, res);
    }
    mux__stream_send_next(s);
    mux__stream_settle(s);
}

static int mux__stream_wop_done(struct mux__op *op, int res, char *buf, unsigned flags)
{
    mux_stream_t *s = mux__container_of(op, mux_stream_t, wop_);
    (void)buf;
    (void)flags;
    s->flags_ = (s->flags_ & ~(unsigned)S_WOP) | S_WDONE;
    s->wres_ = res;
    mux__queue(s->loop_, &s->io_.h_, MUX__DEFER);
    return 0;
}

static int mux__stream_rop_done(struct mux__op *op, int res, char *buf, unsigned flags)
{
    mux_stream_t *s = mux__container_of(op, mux_stream_t, rop_);
    s->flags_ = (s->flags_ & ~(unsigned)(S_ROP | S_RSHORT)) | S_RDONE;
    /* The socket is empty now (the kernel says whether data is left): the next receive
     * waits for data before it tries, which spares a receive that would find nothing. */
    if (!(flags & MUX__OPF_NONEMPTY))
        s->flags_ |= S_RSHORT;
    s->rres_ = res;
    s->rgot_ = buf;
    s->roff_ = 0;
    mux__queue(s->loop_, &s->io_.h_, MUX__DEFER);
    return 0;
}

/* Asks the kernel for the next receive from the pool (with the loop's next wait). */
static void mux__stream_recv_next(mux_stream_t *s)
{
    s->loop_->backend->op_recv(s->loop_, &s->rop_, s->fd_, s->pool_, (s->flags_ & S_RSHORT) != 0);
    s->flags_ |= S_ROP;
}

/* Delivers a completed receive: the one just in, or one kept since a stop. Into a caller
 * buffer (reading restarted in that mode), the kept bytes are copied a buffer at a time. */
static void mux__stream_received(mux_stream_t *s)
{
    int res = s->rres_;
    char *buf = s->rgot_;
    if (res > 0 && !s->pool_) {
        size_t n = (size_t)res - s->roff_;
        if (n > s->rlen_)
            n = s->rlen_;
        memcpy(s->rbuf_, buf + s->roff_, n);
        s->roff_ += n;
        if (s->roff_ == (size_t)res) {
            s->flags_ &= ~(unsigned)S_RDONE;
            s->rgot_ = NULL;
            mux_bufpool_put(s->rop_.pool_, buf);
        } else {
            mux__queue(s->loop_, &s->io_.h_, MUX__DEFER); /* the rest next */
        }
        mux__stream_read_moved(s);
        s->read_cb_(s, (ssize_t)n, s->rbuf_);
        return;
    }
    s->flags_ &= ~(unsigned)S_RDONE;
    s->rgot_ = NULL;
    if (res > 0) {
        if (s->roff_) {
            res -= (int)s->roff_;
            memmove(buf, buf + s->roff_, (size_t)res);
            s->roff_ = 0;
        }
        mux__stream_read_moved(s);
        s->read_cb_(s, res, buf);
        return;
    }
    if (buf)
        mux_bufpool_put(s->rop_.pool_, buf);
    if (res == -ECANCELED || res == -EINTR || res == -EAGAIN)
        return; /* not an end: the next receive follows */
    mux__stream_stop_reading(s);
    s->read_cb_(s, res, NULL); /* 0 (end of stream), -ENOBUFS, -ECONNRESET, ... */
}

static void mux__stream_stop_reading(mux_stream_t *s)
{
    s->flags_ &= ~(unsigned)S_READING;
    if (s->flags_ & S_ROP) /* a receive that completes anyway is kept for the next start */
        s->loop_->backend->op_cancel(s->loop_, &s->rop_);
    mux__stream_interest(s);
}

static char *mux__bufpool_get(mux_bufpool_t *p);

static void mux__stream_read(mux_stream_t *s)
{
    for (int i = 0; i < MUX__READ_BUDGET; i++) {
        char *buf = s->rbuf_;
        size_t len = s->rlen_;
        if (s->pool_) {
            buf = mux__bufpool_get(s->pool_);
            len = s->pool_->size_;
            if (!buf) {
                mux__stream_stop_reading(s);
                s->read_cb_(s, -ENOBUFS, NULL);
                return;
            }
        }
        ssize_t n = recv(s->fd_, buf, len, 0);
        if (n > 0) {
            mux__stream_read_moved(s);
            s->read_cb_(s, n, buf);
            if (!(s->flags_ & S_READING) || (size_t)n < len)
                return; /* stopped, or a short read: the socket is empty */
            continue;
        }
        int err = n == 0 ? 0 : -errno;
        if (s->pool_)
            mux_bufpool_put(s->pool_, buf);
        if (err == -EINTR)
            continue;
        if (err == -EAGAIN || err == -EWOULDBLOCK)
            return;
        mux__stream_stop_reading(s);
        s->read_cb_(s, err, NULL);
        return;
    }
}

static void mux__stream_connected(mux_stream_t *s)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(s->fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    s->flags_ &= ~(unsigned)S_CONNECTING;
    if (err == 0)
        s->flags_ |= S_CONNECTED;
    s->connect_status_ = -err;
    s->flags_ |= S_DEFER_CONNECT;
    s->last_read_ = s->last_write_ = mux__now(s->loop_);
    mux__stream_interest(s);
}

/* Runs every completion that is due, close last; after the close callback the stream is
 * the caller's and is not touched again. */
static void mux__stream_deliver(mux_stream_t *s)
{
    for (;;) {
        if (s->flags_ & S_DEFER_CONNECT) {
            s->flags_ &= ~(unsigned)S_DEFER_CONNECT;
            s->connect_cb_(s, s->connect_status_);
        } else if (s->done_head_) {
            if (s->flags_ & S_WHOLD)
                return; /* the kernel may still read a failed write's buffers */
            mux_write_t *req = s->done_head_;
            s->done_head_ = req->next_;
            if (!s->done_head_)
                s->done_tail_ = NULL;
            req->next_ = NULL;
            req->cb_(req, req->status_);
        } else if (s->flags_ & S_DEFER_SHUTDOWN) {
            s->flags_ &= ~(unsigned)S_DEFER_SHUTDOWN;
            s->shutdown_cb_(s, s->shutdown_status_);
        } else if (s->flags_ & S_CLOSING) {
            if (s->flags_ & (S_ROP | S_WOP))
                return; /* the last completions come first */
            if (s->rgot_)
                mux_bufpool_put(s->rop_.pool_, s->rgot_);
            struct mux__loop *loop = s->loop_;
            mux_close_cb cb = s->close_cb_;
            mux__unqueue(loop, &s->io_.h_);
            s->flags_ = 0;
            s->loop_ = NULL;
            loop->active--;
            if (cb)
                cb(s);
            return;
        } else {
            return;
        }
    }
}

static void mux__stream_io_cb(mux_loop_t *pub, mux_io_t *w, unsigned revents)
{
    mux_stream_t *s = mux__container_of(w, mux_stream_t, io_);
    (void)pub;
    s->flags_ |= S_IN_CB;
    if (s->flags_ & S_WDONE) {
        s->flags_ &= ~(unsigned)S_WDONE;
        mux__stream_sent(s, s->wres_);
    }
    if ((s->flags_ & (S_RDONE | S_READING | S_CLOSING)) == (S_RDONE | S_READING))
        mux__stream_received(s);
    if ((s->flags_ & (S_NREAD | S_READING | S_CLOSING | S_ROP | S_RDONE)) == (S_NREAD | S_READING))
        mux__stream_recv_next(s);
    if (!(s->flags_ & S_CLOSING)) {
        if (revents & MUX_ERROR) { /* the fd was closed behind the stream's back */
            if (s->flags_ & S_CONNECTING) {
                s->flags_ &= ~(unsigned)S_CONNECTING;
                s->connect_status_ = -EBADF;
                s->flags_ |= S_DEFER_CONNECT;
            }
            mux__writes_fail(s, -EBADF);
            mux__stream_settle(s);
            if (s->flags_ & S_READING) {
                mux__stream_stop_reading(s);
                s->read_cb_(s, -EBADF, NULL);
            }
        }
        if ((revents & MUX_WRITE) && (s->flags_ & S_CONNECTING))
            mux__stream_connected(s);
        else if ((revents & MUX_WRITE) && s->wq_head_)
            mux__stream_flush(s);
        if ((revents & MUX_READ) && (s->flags_ & (S_READING | S_CLOSING | S_RDONE)) == S_READING)
            mux__stream_read(s);
    }
    s->flags_ &= ~(unsigned)S_IN_CB;
    mux__stream_deliver(s);
}

/* Timeouts: see the top of the file. */
static uint64_t mux__stream_next_deadline(mux_stream_t *s, uint64_t now, int *expired)
{
    uint64_t next = UINT64_MAX,
             last = s->last_read_ > s->last_write_ ? s->last_read_ : s->last_write_;
    struct {
        uint64_t limit, since;
        int applies;
    } c[3] = {
        {s->to_.idle_ns, last, 1},
        {s->to_.read_ns, s->last_read_, (s->flags_ & S_READING) != 0},
        {s->to_.write_ns, s->last_write_, s->wq_head_ != NULL},
    };
    *expired = 0;
    for (int i = 0; i < 3; i++) {
        if (!c[i].limit || !c[i].applies)
            continue;
        uint64_t at = c[i].since + c[i].limit;
        if (at < c[i].since)
            continue; /* beyond the end of time: never */
        if (at <= now)
            *expired = 1;
        else if (at < next)
            next = at;
    }
    return next;
}

/* Sleeps until the earliest deadline that applies now; none applies: no timer. Reading
 * and writing arm it again when they start. */
static void mux__stream_arm_timer(mux_stream_t *s)
{
    mux_loop_t *pub = s->loop_->pub;
    int expired;
    uint64_t now = mux__now(s->loop_), at = mux__stream_next_deadline(s, now, &expired);
    mux_timer_stop(pub, &s->timer_);
    if (expired || at != UINT64_MAX)
        mux_timer_start(pub, &s->timer_, expired ? 0 : at - now, 0);
}

static void mux__stream_timer_cb(mux_loop_t *pub, mux_timer_t *t)
{
    mux_stream_t *s = mux__container_of(t, mux_stream_t, timer_);
    int expired;
    (void)pub;
    mux__stream_next_deadline(s, mux__now(s->loop_), &expired);
    if (!expired) {
        mux__stream_arm_timer(s);
        return;
    }
    mux__writes_fail(s, -ETIMEDOUT);
    mux__stream_settle(s);
    if (s->flags_ & S_READING) {
        mux__stream_stop_reading(s);
        s->read_cb_(s, -ETIMEDOUT, NULL);
    }
    /* Still open (the callback may have closed it): keep watching. */
    if (mux__stream_valid(s)) {
        s->last_read_ = s->last_write_ = mux__now(s->loop_);
        mux__stream_arm_timer(s);
    }
}

static void mux__stream_setup(struct mux__loop *loop, mux_stream_t *s, int fd, unsigned flags)
{
    void *data = s->data;
    memset(s, 0, sizeof *s);
    s->data = data;
    s->loop_ = loop;
    s->fd_ = fd;
    s->flags_ = S_OPEN | flags;
    mux_io_init(&s->io_, mux__stream_io_cb, fd, MUX_READ);
    mux_timer_init(&s->timer_, mux__stream_timer_cb);
    s->io_.h_.flags |= MUX__W_NOREF;
    s->timer_.h_.flags |= MUX__W_NOREF;
    s->rop_.done_ = mux__stream_rop_done;
    s->wop_.done_ = mux__stream_wop_done;
    if (loop->native)
        s->flags_ |= S_NWRITE;
    s->last_read_ = s->last_write_ = mux__now(loop);
    loop->active++; /* the stream itself, until its close callback */
}

MUX_EXPORT int mux_stream_open(mux_loop_t *pub, mux_stream_t *s, int fd)
{
    struct mux__loop *loop = mux__L(pub);
    if (!loop || !s || fd < 0)
        return -EINVAL;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -errno == -ENOTSOCK ? -EINVAL : -errno;
    if (fd >= loop->backend->fd_limit) /* select: FD_SETSIZE */
        return -EINVAL;
    if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return -errno;
    mux__stream_setup(loop, s, fd, S_CONNECTED | (ss.ss_family == AF_UNIX ? S_UNIX : 0));
    return 0;
}

MUX_EXPORT int mux_stream_connect(mux_loop_t *pub, mux_stream_t *s, const struct sockaddr *addr,
                                  socklen_t addrlen, mux_connect_cb cb)
{
    struct mux__loop *loop = mux__L(pub);
    if (!loop || !s || !addr || !cb || addrlen < sizeof(sa_family_t))
        return -EINVAL;
    int family = addr->sa_family;
    if (family != AF_INET && family != AF_INET6 && family != AF_UNIX)
        return -EAFNOSUPPORT;
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (fd >= loop->backend->fd_limit) { /* select: FD_SETSIZE */
        close(fd);
        return -EMFILE;
    }
    mux__stream_setup(loop, s, fd, family == AF_UNIX ? S_UNIX : 0);
    s->connect_cb_ = cb;
    int r;
    do
        r = connect(fd, addr, addrlen);
    while (r != 0 && errno == EINTR);
    if (r != 0 && errno == EINPROGRESS) {
        s->flags_ |= S_CONNECTING;
        mux__stream_interest(s);
        return 0;
    }
    s->connect_status_ = r == 0 ? 0 : -errno;
    s->flags_ |= S_DEFER_CONNECT | (r == 0 ? S_CONNECTED : 0);
    mux__stream_defer(s);
    return 0;
}

/* Whether `s` may start reading: 0, -EBUSY already reading, -ENOTCONN not connected. */
static int mux__read_can_start(const mux_stream_t *s)
{
    if (s->flags_ & S_READING)
        return -EBUSY;
    return s->flags_ & S_CONNECTED ? 0 : -ENOTCONN;
}

static void mux__read_start(mux_stream_t *s, mux_read_cb cb)
{
    s->read_cb_ = cb;
    s->flags_ |= S_READING;
    s->last_read_ = mux__now(s->loop_);
    if (s->flags_ & S_RDONE) /* a receive kept since the stop comes first */
        mux__queue(s->loop_, &s->io_.h_, MUX__DEFER);
    else if ((s->flags_ & (S_NREAD | S_ROP)) == S_NREAD)
        mux__stream_recv_next(s);
    mux__stream_interest(s);
    if (s->to_.read_ns)
        mux__stream_arm_timer(s);
}

MUX_EXPORT int mux_read_start(mux_stream_t *s, char *buf, size_t len, mux_read_cb cb)
{
    if (!mux__stream_valid(s) || !buf || !len || !cb)
        return -EINVAL;
    int err = mux__read_can_start(s);
    if (err != 0)
        return err;
    s->rbuf_ = buf;
    s->rlen_ = len;
    s->pool_ = NULL;
    s->flags_ &= ~(unsigned)S_NREAD;
    mux__read_start(s, cb);
    return 0;
}

MUX_EXPORT int mux_read_start_pool(mux_stream_t *s, mux_bufpool_t *pool, mux_read_cb cb)
{
    if (!mux__stream_valid(s) || !pool || !pool->mem_ || !cb)
        return -EINVAL;
    int err = mux__read_can_start(s); /* before the pool is attached */
    if (err != 0)
        return err;
    struct mux__loop *loop = s->loop_;
    if (pool->ring_ && (pool->loop_ != loop || !loop->native))
        return -EINVAL; /* its buffers are in another loop's kernel ring */
    if ((s->flags_ & S_RDONE) && s->rgot_ && s->rop_.pool_ != pool)
        return -EBUSY; /* bytes kept in a buffer of the other pool: restart with that one */
    unsigned nread = 0;
    if (loop->native && (pool->ring_ || loop->backend->pool_attach(loop, pool) == 0))
        nread = S_NREAD;
    if ((s->flags_ & S_ROP) && !(nread && s->rop_.pool_ == pool))
        return -EBUSY; /* a cancelled receive of the other mode is still in flight */
    s->rbuf_ = NULL;
    s->rlen_ = 0;
    s->pool_ = pool;
    s->flags_ = (s->flags_ & ~(unsigned)S_NREAD) | nread;
    mux__read_start(s, cb);
    return 0;
}

MUX_EXPORT int mux_read_stop(mux_stream_t *s)
{
    if (!mux__stream_valid(s))
        return -EINVAL;
    if (s->flags_ & S_READING)
        mux__stream_stop_reading(s);
    return 0;
}

MUX_EXPORT int mux_write(mux_stream_t *s, mux_write_t *req, const struct iovec *iov, int iovcnt,
                         mux_write_cb cb)
{
    if (!mux__stream_valid(s) || !req || !cb || iovcnt < 0 || (iovcnt > 0 && !iov))
        return -EINVAL;
    if (s->flags_ & (S_SHUTTING | S_SHUT))
        return -EPIPE;
    if (!(s->flags_ & S_CONNECTED))
        return -ENOTCONN;
    size_t left = 0;
    for (int i = 0; i < iovcnt; i++)
        left += iov[i].iov_len;
    req->cb_ = cb;
    req->next_ = NULL;
    req->iov_ = iov;
    req->iovcnt_ = iovcnt;
    req->iovidx_ = 0;
    req->off_ = 0;
    req->left_ = left;
    req->status_ = 0;
    int first = s->wq_head_ == NULL;
    if (first) {
        s->wq_head_ = req;
        s->last_write_ = mux__now(s->loop_);
    } else {
        s->wq_tail_->next_ = req;
    }
    s->wq_tail_ = req;
    s->wq_bytes_ += left;
    if (first && (s->flags_ & S_NWRITE)) {
        mux__stream_send_next(s);
        if (s->wq_head_ && s->to_.write_ns)
            mux__stream_arm_timer(s);
        mux__stream_settle(s);
    } else if (first) {
        mux__stream_flush(s); /* speculative: most writes finish right here */
        /* A write deadline may come before the one the timer sleeps for now. */
        if (s->wq_head_ && s->to_.write_ns)
            mux__stream_arm_timer(s);
    }
    return 0;
}

MUX_EXPORT ssize_t mux_stream_write_queue_size(const mux_stream_t *s)
{
    if (!s || !s->loop_ || !(s->flags_ & S_OPEN))
        return -EINVAL;
    return (ssize_t)s->wq_bytes_;
}

MUX_EXPORT int mux_stream_shutdown(mux_stream_t *s, mux_shutdown_cb cb)
{
    if (!mux__stream_valid(s) || !cb)
        return -EINVAL;
    if (s->flags_ & (S_SHUTTING | S_SHUT))
        return -EBUSY;
    if (!(s->flags_ & S_CONNECTED))
        return -ENOTCONN;
    s->flags_ |= S_SHUTTING;
    s->shutdown_cb_ = cb;
    if (!s->wq_head_) {
        mux__stream_do_shutdown(s);
        mux__stream_defer(s);
    }
    return 0;
}

MUX_EXPORT int mux_stream_close(mux_stream_t *s, mux_close_cb cb)
{
    if (!s || !s->loop_ || !(s->flags_ & S_OPEN))
        return -EINVAL;
    if (s->flags_ & S_CLOSING)
        return -EALREADY;
    struct mux__loop *loop = s->loop_;
    s->flags_ |= S_CLOSING;
    s->flags_ &= ~(unsigned)S_READING;
    s->close_cb_ = cb;
    mux_io_stop(loop->pub, &s->io_);
    mux_timer_stop(loop->pub, &s->timer_);
    if (s->flags_ & S_ROP)
        loop->backend->op_cancel(loop, &s->rop_);
    mux__writes_fail(s, -ECANCELED);
    if (s->flags_ & S_CONNECTING) {
        s->flags_ &= ~(unsigned)S_CONNECTING;
        s->connect_status_ = -ECANCELED;
        s->flags_ |= S_DEFER_CONNECT;
    }
    if ((s->flags_ & S_SHUTTING) && !(s->flags_ & S_SHUT)) {
        s->shutdown_status_ = -ECANCELED;
        s->flags_ |= S_SHUT | S_DEFER_SHUTDOWN;
    }
    close(s->fd_);
    s->fd_ = -1;
    mux__listeners_resume(loop); /* a descriptor is free again */
    mux__stream_defer(s);
    return 0;
}

static int mux__stream_tcp_opt(mux_stream_t *s, int level, int name, int value)
{
    if (!mux__stream_valid(s))
        return -EINVAL;
    if (s->flags_ & S_UNIX)
        return -ENOTSUP;
    return setsockopt(s->fd_, level, name, &value, sizeof value) == 0 ? 0 : -errno;
}

MUX_EXPORT int mux_stream_nodelay(mux_stream_t *s, int on)
{
    return mux__stream_tcp_opt(s, IPPROTO_TCP, TCP_NODELAY, on != 0);
}

MUX_EXPORT int mux_stream_keepalive(mux_stream_t *s, int on, unsigned idle_s)
{
    if (on && (idle_s == 0 || idle_s > INT32_MAX))
        return -EINVAL;
    int err = mux__stream_tcp_opt(s, SOL_SOCKET, SO_KEEPALIVE, on != 0);
    if (err == 0 && on)
        err = mux__stream_tcp_opt(s, IPPROTO_TCP, TCP_KEEPIDLE, (int)idle_s);
    return err;
}

MUX_EXPORT int mux_stream_set_timeouts(mux_stream_t *s, const mux_stream_timeouts_t *to)
{
    if (!mux__stream_valid(s))
        return -EINVAL;
    static const mux_stream_timeouts_t none;
    s->to_ = to ? *to : none;
    s->last_read_ = s->last_write_ = mux__now(s->loop_);
    if (s->to_.idle_ns || s->to_.read_ns || s->to_.write_ns)
        mux__stream_arm_timer(s);
    else
        mux_timer_stop(s->loop_->pub, &s->timer_);
    return 0;
}

MUX_EXPORT int mux_stream_fd(const mux_stream_t *s)
{
    return mux__stream_valid(s) ? s->fd_ : -EINVAL;
}

MUX_EXPORT mux_loop_t *mux_stream_loop(const mux_stream_t *s)
{
    return s && s->loop_ && (s->flags_ & S_OPEN) ? s->loop_->pub : NULL;
}

/* ---- buffer pools ------------------------------------------------------------------ */

MUX_EXPORT int mux_bufpool_init(mux_bufpool_t *p, void *mem, size_t size, uint32_t count,
                                uint32_t *free_slots)
{
    if (!p || !mem || !size || !count || count == MUX__POOL_INUSE || !free_slots)
        return -EINVAL;
    void *data = p->data;
    memset(p, 0, sizeof *p);
    p->data = data;
    p->mem_ = mem;
    p->size_ = size;
    p->count_ = p->nfree_ = count;
    p->free_ = free_slots;
    for (uint32_t i = 0; i < count; i++)
        free_slots[i] = i + 1; /* next free; count ends the list */
    p->head_ = 0;
    return 0;
}

static char *mux__bufpool_get(mux_bufpool_t *p)
{
    if (!p->nfree_ || p->ring_)
        return NULL; /* empty, or its free buffers are an io_uring loop's (-ENOBUFS) */
    uint32_t i = p->head_;
    p->head_ = p->free_[i];
    p->free_[i] = MUX__POOL_INUSE;
    p->nfree_--;
    return p->mem_ + (size_t)i * p->size_;
}

MUX_EXPORT int mux_bufpool_put(mux_bufpool_t *p, char *buf)
{
    if (!p || !p->mem_ || !buf || buf < p->mem_)
        return -EINVAL;
    size_t off = (size_t)(buf - p->mem_);
    if (off % p->size_ || off / p->size_ >= p->count_)
        return -EINVAL;
    uint32_t i = (uint32_t)(off / p->size_);
    if (p->free_[i] != MUX__POOL_INUSE)
        return -EINVAL; /* already free */
    if (p->ring_) {     /* back into the kernel's ring */
        p->loop_->backend->pool_put(p, i);
        p->nfree_++;
        return 0;
    }
    p->free_[i] = p->head_;
    p->head_ = i;
    p->nfree_++;
    return 0;
}

MUX_EXPORT int mux_bufpool_available(const mux_bufpool_t *p)
{
    return p && p->mem_ ? (int)p->nfree_ : -EINVAL;
}
