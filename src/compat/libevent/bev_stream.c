/* SPDX-License-Identifier: MIT */
/* libiomux-event: the socket kind of bufferevent, on an iomux stream.
 *
 * Reading: the streams of a base's bufferevents read into one buffer of 16 KB that they share
 * (iomux writes a read buffer only in a receive whose callback follows at once), and each read
 * is copied into the input at once: onto its last chunk where it fits, else into a fresh
 * chunk, recycled per thread. A buffer per bufferevent, waiting for its next read, would hold
 * 16 KB per idle connection, and every read would land in memory no cache still held: with
 * many sessions that was slower than the copy (docs/studies.md has the echo study's run). A
 * bufferevent set to read more at a time (bufferevent_set_max_single_read) reads into chunks
 * of its own instead: a read that filled more than a little of one hands the chunk itself to
 * the input, and reading goes on into a fresh one.
 * Writing: what the read callback adds to the output goes in one gathered write when the
 * callback returns; adding to it from anywhere else queues the bufferevent on its base, and
 * the base's prepare watcher, just before the loop waits, sends each queued output's chunks
 * in one gathered write (the output is frozen at the front until it is done).
 *
 * The bufferevent is "busy" (it keeps event_base_dispatch running, as its read and write
 * events keep libevent's) while it reads, writes, waits to write or connects. The kind holds
 * a reference on the bufferevent from the stream's opening until it has closed. */
#include "bufferevent_internal.h"

#include <errno.h>
#include <string.h>

#include "sys.h"

#define EVX_READ_COPY 2048 /* reads up to this size are copied onto the input's last chunk */

static struct evx_bev *of_stream(mux_stream_t *s)
{
    return (struct evx_bev *)((char *)s - offsetof(struct evx_bev, stream));
}

static void update_busy(struct evx_bev *b)
{
    int busy = !b->freed && (b->reading || b->in_flight || b->queued || b->connecting);
    if (busy != (int)b->busy) {
        b->pub.ev_base->nbusy += busy ? 1 : -1;
        b->busy = (unsigned)busy;
    }
}

/* ---- reading ---- */

static void on_read(mux_stream_t *s, ssize_t n, char *buf);
static void write_some(struct evx_bev *b);

/* Reads of max_read bytes (the shared landing buffer up to 16 KB); under a rate limit, of
 * what the limit allows now. */
static int read_start(struct evx_bev *b, size_t len)
{
    struct event_base *base = b->pub.ev_base;
    int r;
    if (len <= EVX_CHAIN_READ) {
        if (!base->landing && !(base->landing = evx_malloc(EVX_CHAIN_READ)))
            return -ENOMEM;
        r = mux_read_start(&b->stream, base->landing, len, on_read);
    } else {
        if (!b->rchain && !(b->rchain = evx_chain_new(len)))
            return -ENOMEM;
        r = mux_read_start(&b->stream, b->rchain->buf, b->rchain->cap, on_read);
    }
    if (r == 0) {
        b->reading = 1;
        b->read_len = len;
    }
    update_busy(b);
    return r;
}

static void read_stop(struct evx_bev *b)
{
    if (b->reading)
        mux_read_stop(&b->stream);
    b->reading = 0;
    update_busy(b);
}

/* Reading runs while it is wanted (enabled, below the high-water mark, allowed by the rate
 * limits) and the stream is connected. */
static void read_update(struct evx_bev *b)
{
    int want = b->open && !b->connecting && evx_bev_wants_read(b);
    size_t len = b->max_read;
    if (want && b->rl) {
        len = evx_bev_read_max(b);
        want = len > 0;
    }
    if (want && b->reading && len != b->read_len)
        read_stop(b); /* a rate limit changed how much one read may take */
    if (want && !b->reading) {
        int r = read_start(b, len);
        if (r < 0)
            evx_bev_eventcb(b, BEV_EVENT_READING | BEV_EVENT_ERROR, -r, 0);
    } else if (!want && b->reading) {
        read_stop(b);
    }
}

/* Takes `n` bytes the stream read into `buf`. Returns 0, or -ENOMEM when they could not be
 * kept (reading has stopped then). */
static int take_read(struct evx_bev *b, const char *buf, size_t n)
{
    struct evbuffer *in = b->pub.input;
    struct evx_chain *last = in->last, *ch = b->rchain;
    size_t old = in->total;
    if ((buf != (ch ? ch->buf : NULL) || n <= EVX_READ_COPY) && last &&
        last->cap - last->misalign - last->off >= n) {
        memcpy(last->buf + last->misalign + last->off, buf, n);
        last->off += n;
        in->total += n;
    } else if (buf == b->pub.ev_base->landing) {
        if (!(ch = evx_chain_new(n > EVX_CHAIN_READ ? n : EVX_CHAIN_READ))) {
            read_stop(b);
            return -ENOMEM;
        }
        memcpy(ch->buf, buf, n);
        ch->off = n;
        evx_buffer_append_chain(in, ch);
    } else {
        ch->off = n;
        evx_buffer_append_chain(in, ch);
        b->rchain = evx_chain_new(b->read_len);
        mux_read_stop(&b->stream);
        int r = b->rchain ? mux_read_start(&b->stream, b->rchain->buf, b->rchain->cap, on_read)
                          : -ENOMEM;
        if (r < 0) {
            b->reading = 0;
            update_busy(b);
            evx_buffer_changed(in, old);
            return r;
        }
    }
    evx_buffer_changed(in, old);
    return 0;
}

static void on_read(mux_stream_t *s, ssize_t n, char *buf)
{
    struct evx_bev *b = of_stream(s);
    if (n > 0) {
        int r = take_read(b, buf, (size_t)n);
        if (r < 0) /* out of memory: reading has stopped */
            evx_bev_eventcb(b, BEV_EVENT_READING | BEV_EVENT_ERROR, -r, 0);
        const struct bufferevent *p = &b->pub;
        if (b->rl || (p->wm_read.high && p->input->total >= p->wm_read.high))
            read_update(b);
        evx_bev_ref(b);
        b->in_readcb = 1;
        evx_bev_did_read(b, (size_t)n);
        b->in_readcb = 0;
        if (b->rl)
            read_update(b);
        /* What the callback wrote goes now, gathered into one write, while the bufferevent
         * is still in the cache; through the base's queue, every bufferevent of a busy loop
         * was touched a second time before the loop waited. */
        if (p->output->total && !b->queued) {
            write_some(b);
            update_busy(b);
        }
        evx_bev_unref(b);
        return;
    }
    /* The end, an error or a timeout: reading has stopped; as libevent, it is disabled. */
    b->reading = 0;
    b->pub.enabled &= (short)~EV_READ;
    update_busy(b);
    if (n == 0)
        evx_bev_eventcb(b, BEV_EVENT_READING | BEV_EVENT_EOF, 0, 0);
    else if (n == -ETIMEDOUT)
        evx_bev_eventcb(b, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, ETIMEDOUT, 0);
    else
        evx_bev_eventcb(b, BEV_EVENT_READING | BEV_EVENT_ERROR, (int)-n, 0);
}

/* ---- writing ---- */

static void on_written(mux_write_t *req, int status);

static void write_some(struct evx_bev *b)
{
    struct evbuffer *out = b->pub.output;
    if (b->in_flight || !b->open || b->connecting || !evx_bev_wants_write(b))
        return;
    size_t limit = b->rl || b->max_write != EVX_MAX_SINGLE ? evx_bev_write_max(b) : SIZE_MAX;
    if (!limit)
        return; /* the rate limit's next tick writes (evx_rl_* calls update) */
    unsigned n = 0;
    size_t bytes = 0;
    for (struct evx_chain *ch = out->first; ch && n < EVX_WRITE_IOV && bytes < limit;
         ch = ch->next) {
        if (!ch->off)
            continue;
        size_t len = ch->off < limit - bytes ? ch->off : limit - bytes;
        b->wv[n++] = mux_buf_init(ch->buf + ch->misalign, len);
        bytes += len;
    }
    out->frozen_front++; /* the chunks stay where they are until the write is done */
    int r = mux_write(&b->stream, &b->wreq, b->wv, n, on_written);
    if (r < 0) {
        out->frozen_front--;
        evx_bev_eventcb(b, BEV_EVENT_WRITING | BEV_EVENT_ERROR, -r, 0);
        return;
    }
    b->in_flight = bytes;
    update_busy(b);
}

static void on_written(mux_write_t *req, int status)
{
    struct evx_bev *b = (struct evx_bev *)((char *)req - offsetof(struct evx_bev, wreq));
    size_t sent = b->in_flight;
    b->pub.output->frozen_front--;
    b->in_flight = 0;
    update_busy(b);
    if (status < 0) {
        if (status != -ECANCELED) /* not the bufferevent's own close */
            evx_bev_eventcb(b,
                            BEV_EVENT_WRITING |
                                (status == -ETIMEDOUT ? BEV_EVENT_TIMEOUT : BEV_EVENT_ERROR),
                            -status, 0);
        return;
    }
    evbuffer_drain(b->pub.output, sent);
    evx_bev_ref(b);
    write_some(b);
    evx_bev_did_write(b, sent);
    evx_bev_unref(b);
}

void evx_bev_flush_all(struct event_base *base)
{
    while (base->flush_head) {
        struct evx_bev *b = base->flush_head;
        base->flush_head = b->next_flush;
        b->queued = 0;
        write_some(b);
        update_busy(b);
    }
    mux_prepare_stop(&base->loop, &base->flusher);
}

static void stream_output_added(struct evx_bev *b)
{
    /* A write in flight sends the rest when it is done; the read callback running writes
     * what it added when it returns. */
    if (b->queued || b->in_flight || b->freed || b->in_readcb)
        return;
    struct event_base *base = b->pub.ev_base;
    if (!base->flush_head)
        mux_prepare_start(&base->loop, &base->flusher);
    b->queued = 1;
    b->next_flush = base->flush_head;
    base->flush_head = b;
    update_busy(b);
}

static void unqueue(struct evx_bev *b)
{
    struct evx_bev **p = &b->pub.ev_base->flush_head;
    while (*p && *p != b)
        p = &(*p)->next_flush;
    if (*p)
        *p = b->next_flush;
    b->queued = 0;
}

/* ---- the kind's hooks ---- */

static void stream_update(struct evx_bev *b)
{
    read_update(b);
    if (b->pub.output->total && (b->pub.enabled & EV_WRITE))
        stream_output_added(b);
}

static int stream_flush(struct evx_bev *b, short iotype, enum bufferevent_flush_mode mode)
{
    (void)mode;
    if (!(iotype & EV_WRITE) || !b->queued)
        return 0;
    unqueue(b);
    write_some(b);
    update_busy(b);
    return 1;
}

static void on_closed(mux_stream_t *s)
{
    struct evx_bev *b = of_stream(s);
    b->pub.ev_base->nclosing--;
    evx_bev_unref(b);
}

static void stream_release(struct evx_bev *b)
{
    read_stop(b);
    if (b->queued)
        unqueue(b);
    b->connecting = 0;
    update_busy(b);
    if (!b->open)
        return;
    /* The kind's reference goes once the stream has closed: a write in flight ends with
     * -ECANCELED. event_base_free turns the loop until every such close is done. */
    b->pub.ev_base->nclosing++;
    mux_stream_close(&b->stream, on_closed);
}

static uint64_t tv_ns(const struct timeval *tv)
{
    return (uint64_t)tv->tv_sec * 1000000000u + (uint64_t)tv->tv_usec * 1000u;
}

static int stream_set_timeouts(struct evx_bev *b)
{
    b->timeouts.read_ns = tv_ns(&b->pub.timeout_read);
    b->timeouts.write_ns = tv_ns(&b->pub.timeout_write);
    return b->open && mux_stream_set_timeouts(&b->stream, &b->timeouts) < 0 ? -1 : 0;
}

static evutil_socket_t stream_getfd(struct evx_bev *b)
{
    return b->fd;
}

const struct bufferevent_ops evx_bev_stream_ops = {
    .type = "socket",
    .update = stream_update,
    .output_added = stream_output_added,
    .flush = stream_flush,
    .release = stream_release,
    .set_timeouts = stream_set_timeouts,
    .getfd = stream_getfd,
};

/* ---- opening and connecting ---- */

int evx_bev_stream_open(struct evx_bev *b, evutil_socket_t fd)
{
    if (b->open)
        return -EBUSY;
    /* Without BEV_OPT_CLOSE_ON_FREE the program keeps its descriptor: the stream, which
     * closes what it holds, gets a duplicate. */
    evutil_socket_t sfd = b->options & BEV_OPT_CLOSE_ON_FREE ? fd : evx_sys_dup(fd);
    if (sfd < 0)
        return -errno;
    int r = mux_stream_open(&b->pub.ev_base->loop, &b->stream, (mux_os_sock_t)sfd);
    if (r < 0) {
        if (sfd != fd)
            evx_sys_close(sfd);
        return r;
    }
    b->fd = fd;
    b->open = 1;
    evx_bev_ref(b); /* the kind's, until the stream has closed */
    if (b->timeouts.read_ns || b->timeouts.write_ns)
        mux_stream_set_timeouts(&b->stream, &b->timeouts);
    return 0;
}

static void on_connect(mux_stream_t *s, int status)
{
    struct evx_bev *b = of_stream(s);
    b->connecting = 0;
    update_busy(b);
    if (status < 0) {
        evx_bev_eventcb(b, BEV_EVENT_ERROR, -status, 0);
        return;
    }
    mux_os_sock_t sock;
    if (mux_stream_socket(s, &sock) == 0)
        b->fd = sock;
    evx_bev_ref(b);
    evx_bev_eventcb(b, BEV_EVENT_CONNECTED, 0, 0);
    if (!b->freed) {
        read_update(b);
        write_some(b);
        update_busy(b);
    }
    evx_bev_unref(b);
}

EVX_EXPORT int bufferevent_socket_connect(struct bufferevent *bev, const struct sockaddr *sa,
                                          int socklen)
{
    struct evx_bev *b = (struct evx_bev *)bev;
    if (!b || !sa || socklen <= 0 || b->freed)
        return -1;
    if (bev->be_ops != &evx_bev_stream_ops || b->open) {
        evx_warn("bufferevent_socket_connect: the bufferevent has a socket already");
        return -1;
    }
    int r = mux_stream_connect(&bev->ev_base->loop, &b->stream, sa, (socklen_t)socklen,
                               on_connect);
    if (r < 0) {
        errno = -r;
        return -1;
    }
    b->open = 1;
    b->connecting = 1;
    evx_bev_ref(b);                      /* the kind's, until the stream has closed */
    b->options |= BEV_OPT_CLOSE_ON_FREE; /* the socket is the bufferevent's own */
    if (b->timeouts.read_ns || b->timeouts.write_ns)
        mux_stream_set_timeouts(&b->stream, &b->timeouts);
    update_busy(b);
    return 0;
}
