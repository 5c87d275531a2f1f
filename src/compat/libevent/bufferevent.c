/* SPDX-License-Identifier: MIT */
/* libiomux-event: socket bufferevents on iomux streams.
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
 * in one gathered write (the output is frozen at the front until it is done). Callbacks come
 * straight from the stream's callbacks, not through the base's priority queues.
 *
 * The bufferevent is "busy" (it keeps event_base_dispatch running, as its read and write
 * events keep libevent's) while it reads, writes, waits to write or connects. */
#include "event_internal.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include <errno.h>
#include <string.h>

#include "sys.h"

#define EVX_READ_DEFAULT EVX_CHAIN_READ
#define EVX_READ_COPY    2048 /* reads up to this size are copied onto the input's last chunk */
#define EVX_WRITE_IOV    64

struct bufferevent {
    mux_stream_t stream;
    mux_write_t wreq;
    struct event_base *base;
    struct evbuffer *input, *output;
    bufferevent_data_cb readcb, writecb;
    bufferevent_event_cb eventcb;
    void *cbarg;
    struct evx_chain *rchain; /* what the stream reads into */
    struct bufferevent *next_flush;
    evutil_socket_t fd; /* the program's descriptor (the stream may hold a duplicate) */
    int options;
    short enabled;
    unsigned open : 1, connecting : 1, reading : 1, suspended : 1, queued : 1, freed : 1, busy : 1,
        in_readcb : 1;
    size_t wm_read_low, wm_read_high, wm_write_low, wm_write_high;
    size_t max_read;
    size_t in_flight; /* bytes of the output in the current write */
    mux_stream_timeouts_t timeouts;
    mux_buf_t wv[EVX_WRITE_IOV];
};

static void update_busy(struct bufferevent *bev)
{
    int busy = !bev->freed && (bev->reading || bev->in_flight || bev->queued || bev->connecting);
    if (busy != bev->busy) {
        bev->base->nbusy += busy ? 1 : -1;
        bev->busy = (unsigned)busy;
    }
}

/* The callbacks run straight from the stream's; each counts as an event run for
 * EVLOOP_ONCE, as the read or write event behind it would in libevent. */
static void event_cb(struct bufferevent *bev, short what, int err)
{
    if (err)
        errno = err;
    if (bev->eventcb && !bev->freed) {
        bev->base->ndirect++;
        bev->eventcb(bev, what, bev->cbarg);
    }
}

/* ---- reading ---- */

static void on_read(mux_stream_t *s, ssize_t n, char *buf);
static void write_some(struct bufferevent *bev);

static int read_start(struct bufferevent *bev)
{
    struct event_base *base = bev->base;
    int r;
    if (bev->max_read <= EVX_CHAIN_READ) {
        if (!base->landing && !(base->landing = evx_malloc(EVX_CHAIN_READ)))
            return -ENOMEM;
        r = mux_read_start(&bev->stream, base->landing, bev->max_read, on_read);
    } else {
        if (!bev->rchain && !(bev->rchain = evx_chain_new(bev->max_read)))
            return -ENOMEM;
        r = mux_read_start(&bev->stream, bev->rchain->buf, bev->rchain->cap, on_read);
    }
    if (r == 0)
        bev->reading = 1;
    update_busy(bev);
    return r;
}

static void read_stop(struct bufferevent *bev)
{
    if (bev->reading)
        mux_read_stop(&bev->stream);
    bev->reading = 0;
    update_busy(bev);
}

/* Reading runs while it is enabled, the stream is connected and the input is below its
 * high-water mark. */
static void read_update(struct bufferevent *bev)
{
    int want = bev->open && !bev->connecting && !bev->freed && (bev->enabled & EV_READ) &&
               !(bev->wm_read_high && bev->input->total >= bev->wm_read_high);
    bev->suspended = bev->wm_read_high && bev->input->total >= bev->wm_read_high;
    if (want && !bev->reading) {
        int r = read_start(bev);
        if (r < 0)
            event_cb(bev, BEV_EVENT_READING | BEV_EVENT_ERROR, -r);
    } else if (!want && bev->reading) {
        read_stop(bev);
    }
}

/* Takes `n` bytes the stream read into `buf`. Returns 0, or -ENOMEM when they could not be
 * kept (reading has stopped then). */
static int take_read(struct bufferevent *bev, const char *buf, size_t n)
{
    struct evbuffer *in = bev->input;
    struct evx_chain *last = in->last, *ch = bev->rchain;
    if ((buf != (ch ? ch->buf : NULL) || n <= EVX_READ_COPY) && last &&
        last->cap - last->misalign - last->off >= n) {
        memcpy(last->buf + last->misalign + last->off, buf, n);
        last->off += n;
        in->total += n;
        return 0; /* the stream goes on reading into the same buffer */
    }
    if (buf == bev->base->landing) {
        if (!(ch = evx_chain_new(n > EVX_CHAIN_READ ? n : EVX_CHAIN_READ))) {
            read_stop(bev);
            return -ENOMEM;
        }
        memcpy(ch->buf, buf, n);
        ch->off = n;
        evx_buffer_append_chain(in, ch);
        return 0;
    }
    ch->off = n;
    evx_buffer_append_chain(in, ch);
    bev->rchain = evx_chain_new(bev->max_read);
    mux_read_stop(&bev->stream);
    int r = bev->rchain ? mux_read_start(&bev->stream, bev->rchain->buf, bev->rchain->cap, on_read)
                        : -ENOMEM;
    if (r < 0) {
        bev->reading = 0;
        update_busy(bev);
        return r;
    }
    return 0;
}

static void on_read(mux_stream_t *s, ssize_t n, char *buf)
{
    struct bufferevent *bev = (struct bufferevent *)s;
    if (n > 0) {
        int r = take_read(bev, buf, (size_t)n);
        if (r < 0) /* out of memory: reading has stopped */
            event_cb(bev, BEV_EVENT_READING | BEV_EVENT_ERROR, -r);
        if (bev->wm_read_high && bev->input->total >= bev->wm_read_high)
            read_update(bev);
        if (bev->readcb && !bev->freed && bev->input->total >= bev->wm_read_low) {
            bev->base->ndirect++;
            bev->in_readcb = 1;
            bev->readcb(bev, bev->cbarg);
            bev->in_readcb = 0;
            /* What the callback wrote goes now, gathered into one write, while the
             * bufferevent is still in the cache; through the base's queue, every
             * bufferevent of a busy loop was touched a second time before the loop waited.
             * A callback that freed the bufferevent leaves it readable here: its memory
             * goes when its stream has closed. */
            if (bev->output->total && !bev->queued) {
                write_some(bev);
                update_busy(bev);
            }
        }
        return;
    }
    /* The end, an error or a timeout: reading has stopped; as libevent, it is disabled. */
    bev->reading = 0;
    bev->enabled &= (short)~EV_READ;
    update_busy(bev);
    if (n == 0)
        event_cb(bev, BEV_EVENT_READING | BEV_EVENT_EOF, 0);
    else if (n == -ETIMEDOUT)
        event_cb(bev, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, ETIMEDOUT);
    else
        event_cb(bev, BEV_EVENT_READING | BEV_EVENT_ERROR, (int)-n);
}

void evx_bev_input_drained(struct bufferevent *bev)
{
    if (bev->suspended && !(bev->input->total >= bev->wm_read_high))
        read_update(bev);
}

/* ---- writing ---- */

static void on_written(mux_write_t *req, int status);

static void write_some(struct bufferevent *bev)
{
    struct evbuffer *out = bev->output;
    if (bev->in_flight || !bev->open || bev->connecting || bev->freed ||
        !(bev->enabled & EV_WRITE) || !out->total)
        return;
    unsigned n = 0;
    size_t bytes = 0;
    for (struct evx_chain *ch = out->first; ch && n < EVX_WRITE_IOV; ch = ch->next) {
        if (!ch->off)
            continue;
        bev->wv[n++] = mux_buf_init(ch->buf + ch->misalign, ch->off);
        bytes += ch->off;
    }
    out->frozen_front++; /* the chunks stay where they are until the write is done */
    int r = mux_write(&bev->stream, &bev->wreq, bev->wv, n, on_written);
    if (r < 0) {
        out->frozen_front--;
        event_cb(bev, BEV_EVENT_WRITING | BEV_EVENT_ERROR, -r);
        return;
    }
    bev->in_flight = bytes;
    update_busy(bev);
}

static void on_written(mux_write_t *req, int status)
{
    struct bufferevent *bev =
        (struct bufferevent *)((char *)req - offsetof(struct bufferevent, wreq));
    size_t sent = bev->in_flight;
    bev->output->frozen_front--;
    bev->in_flight = 0;
    update_busy(bev);
    if (status < 0) {
        if (status != -ECANCELED) /* not the bufferevent's own close */
            event_cb(bev,
                     BEV_EVENT_WRITING |
                         (status == -ETIMEDOUT ? BEV_EVENT_TIMEOUT : BEV_EVENT_ERROR),
                     -status);
        return;
    }
    evbuffer_drain(bev->output, sent);
    if (bev->output->total)
        write_some(bev);
    else if (bev->writecb && !bev->freed && bev->output->total <= bev->wm_write_low) {
        bev->base->ndirect++;
        bev->writecb(bev, bev->cbarg);
    }
}

void evx_bev_flush_all(struct event_base *base)
{
    while (base->flush_head) {
        struct bufferevent *bev = base->flush_head;
        base->flush_head = bev->next_flush;
        bev->queued = 0;
        write_some(bev);
        update_busy(bev);
    }
    mux_prepare_stop(&base->loop, &base->flusher);
}

void evx_bev_output_added(struct bufferevent *bev)
{
    /* A write in flight sends the rest when it is done; the read callback running writes
     * what it added when it returns. */
    if (bev->queued || bev->in_flight || bev->freed || bev->in_readcb)
        return;
    struct event_base *base = bev->base;
    if (!base->flush_head)
        mux_prepare_start(&base->loop, &base->flusher);
    bev->queued = 1;
    bev->next_flush = base->flush_head;
    base->flush_head = bev;
    update_busy(bev);
}

static void unqueue(struct bufferevent *bev)
{
    struct bufferevent **p = &bev->base->flush_head;
    while (*p && *p != bev)
        p = &(*p)->next_flush;
    if (*p)
        *p = bev->next_flush;
    bev->queued = 0;
}

/* ---- life ---- */

static int open_stream(struct bufferevent *bev, evutil_socket_t fd)
{
    /* Without BEV_OPT_CLOSE_ON_FREE the program keeps its descriptor: the stream, which
     * closes what it holds, gets a duplicate. */
    evutil_socket_t sfd = bev->options & BEV_OPT_CLOSE_ON_FREE ? fd : evx_sys_dup(fd);
    if (sfd < 0)
        return -errno;
    int r = mux_stream_open(&bev->base->loop, &bev->stream, (mux_os_sock_t)sfd);
    if (r < 0) {
        if (sfd != fd)
            evx_sys_close(sfd);
        return r;
    }
    bev->fd = fd;
    bev->open = 1;
    if (bev->timeouts.read_ns || bev->timeouts.write_ns)
        mux_stream_set_timeouts(&bev->stream, &bev->timeouts);
    return 0;
}

EVX_EXPORT struct bufferevent *bufferevent_socket_new(struct event_base *base, evutil_socket_t fd,
                                                      int options)
{
    if (!base)
        return NULL;
    struct bufferevent *bev = evx_calloc(1, sizeof *bev);
    if (!bev)
        return NULL;
    bev->base = base;
    bev->options = options;
    bev->fd = -1;
    bev->enabled = EV_WRITE; /* libevent's default: writing on, reading off */
    bev->max_read = EVX_READ_DEFAULT;
    bev->input = evbuffer_new();
    bev->output = evbuffer_new();
    int r = bev->input && bev->output ? 0 : -ENOMEM;
    if (r == 0 && fd >= 0)
        r = open_stream(bev, fd);
    if (r < 0) {
        evx_warn("bufferevent_socket_new: %s (fd %d)", mux_strerror(r), (int)fd);
        evbuffer_free(bev->input);
        evbuffer_free(bev->output);
        evx_free(bev);
        return NULL;
    }
    bev->input->bev_in = bev;
    bev->output->bev_out = bev;
    return bev;
}

static void on_connect(mux_stream_t *s, int status)
{
    struct bufferevent *bev = (struct bufferevent *)s;
    bev->connecting = 0;
    update_busy(bev);
    if (status < 0) {
        event_cb(bev, BEV_EVENT_ERROR, -status);
        return;
    }
    mux_os_sock_t sock;
    if (mux_stream_socket(s, &sock) == 0)
        bev->fd = sock;
    event_cb(bev, BEV_EVENT_CONNECTED, 0);
    read_update(bev);
    write_some(bev);
}

EVX_EXPORT int bufferevent_socket_connect(struct bufferevent *bev, const struct sockaddr *sa,
                                          int socklen)
{
    if (!bev || !sa || socklen <= 0 || bev->freed)
        return -1;
    if (bev->open) {
        evx_warn("bufferevent_socket_connect: the bufferevent has a socket already");
        return -1;
    }
    int r = mux_stream_connect(&bev->base->loop, &bev->stream, sa, (socklen_t)socklen, on_connect);
    if (r < 0) {
        errno = -r;
        return -1;
    }
    bev->open = 1;
    bev->connecting = 1;
    bev->options |= BEV_OPT_CLOSE_ON_FREE; /* the socket is the bufferevent's own */
    if (bev->timeouts.read_ns || bev->timeouts.write_ns)
        mux_stream_set_timeouts(&bev->stream, &bev->timeouts);
    update_busy(bev);
    return 0;
}

EVX_EXPORT int bufferevent_socket_get_dns_error(struct bufferevent *bev)
{
    (void)bev;
    return 0;
}

static void free_now(struct bufferevent *bev)
{
    evx_chain_free(bev->rchain);
    evbuffer_free(bev->input);
    evbuffer_free(bev->output);
    evx_free(bev);
}

static void on_closed(mux_stream_t *s)
{
    struct bufferevent *bev = (struct bufferevent *)s;
    bev->base->nclosing--;
    free_now(bev);
}

EVX_EXPORT void bufferevent_free(struct bufferevent *bev)
{
    if (!bev || bev->freed)
        return;
    read_stop(bev);
    if (bev->queued)
        unqueue(bev);
    bev->freed = 1;
    bev->connecting = 0;
    update_busy(bev);
    bev->readcb = bev->writecb = NULL;
    bev->eventcb = NULL;
    if (!bev->open) {
        free_now(bev);
        return;
    }
    /* The memory goes once the stream has closed: a write in flight ends with -ECANCELED.
     * event_base_free turns the loop until every such close is done. */
    bev->base->nclosing++;
    mux_stream_close(&bev->stream, on_closed);
}

EVX_EXPORT void bufferevent_setcb(struct bufferevent *bev, bufferevent_data_cb readcb,
                                  bufferevent_data_cb writecb, bufferevent_event_cb eventcb,
                                  void *cbarg)
{
    if (!bev || bev->freed)
        return;
    bev->readcb = readcb;
    bev->writecb = writecb;
    bev->eventcb = eventcb;
    bev->cbarg = cbarg;
}

EVX_EXPORT void bufferevent_getcb(struct bufferevent *bev, bufferevent_data_cb *readcb,
                                  bufferevent_data_cb *writecb, bufferevent_event_cb *eventcb,
                                  void **cbarg)
{
    if (!bev)
        return;
    if (readcb)
        *readcb = bev->readcb;
    if (writecb)
        *writecb = bev->writecb;
    if (eventcb)
        *eventcb = bev->eventcb;
    if (cbarg)
        *cbarg = bev->cbarg;
}

EVX_EXPORT int bufferevent_setfd(struct bufferevent *bev, evutil_socket_t fd)
{
    if (!bev || bev->freed || fd < 0)
        return -1;
    if (bev->open) {
        evx_warn("bufferevent_setfd: the bufferevent has a socket already");
        return -1;
    }
    int r = open_stream(bev, fd);
    if (r < 0) {
        evx_warn("bufferevent_setfd: %s (fd %d)", mux_strerror(r), (int)fd);
        return -1;
    }
    read_update(bev);
    if (bev->output->total)
        evx_bev_output_added(bev);
    return 0;
}

EVX_EXPORT evutil_socket_t bufferevent_getfd(struct bufferevent *bev)
{
    return bev ? bev->fd : -1;
}

EVX_EXPORT struct event_base *bufferevent_get_base(struct bufferevent *bev)
{
    return bev ? bev->base : NULL;
}

EVX_EXPORT struct evbuffer *bufferevent_get_input(struct bufferevent *bev)
{
    return bev ? bev->input : NULL;
}

EVX_EXPORT struct evbuffer *bufferevent_get_output(struct bufferevent *bev)
{
    return bev ? bev->output : NULL;
}

EVX_EXPORT int bufferevent_write(struct bufferevent *bev, const void *data, size_t size)
{
    return bev ? evbuffer_add(bev->output, data, size) : -1;
}

EVX_EXPORT int bufferevent_write_buffer(struct bufferevent *bev, struct evbuffer *buf)
{
    return bev ? evbuffer_add_buffer(bev->output, buf) : -1;
}

EVX_EXPORT size_t bufferevent_read(struct bufferevent *bev, void *data, size_t size)
{
    int n = bev ? evbuffer_remove(bev->input, data, size) : -1;
    return n < 0 ? 0 : (size_t)n;
}

EVX_EXPORT int bufferevent_read_buffer(struct bufferevent *bev, struct evbuffer *buf)
{
    return bev ? evbuffer_add_buffer(buf, bev->input) : -1;
}

EVX_EXPORT int bufferevent_enable(struct bufferevent *bev, short event)
{
    if (!bev || bev->freed)
        return -1;
    bev->enabled |= (short)(event & (EV_READ | EV_WRITE));
    read_update(bev);
    if ((event & EV_WRITE) && bev->output->total)
        evx_bev_output_added(bev);
    return 0;
}

EVX_EXPORT int bufferevent_disable(struct bufferevent *bev, short event)
{
    if (!bev || bev->freed)
        return -1;
    bev->enabled &= (short)~(event & (EV_READ | EV_WRITE));
    read_update(bev);
    return 0;
}

EVX_EXPORT short bufferevent_get_enabled(struct bufferevent *bev)
{
    return bev ? bev->enabled : 0;
}

static uint64_t tv_ns(const struct timeval *tv)
{
    if (!tv || tv->tv_sec < 0 || tv->tv_usec < 0)
        return 0;
    return (uint64_t)tv->tv_sec * 1000000000u + (uint64_t)tv->tv_usec * 1000u;
}

EVX_EXPORT int bufferevent_set_timeouts(struct bufferevent *bev, const struct timeval *tv_read,
                                        const struct timeval *tv_write)
{
    if (!bev || bev->freed)
        return -1;
    bev->timeouts.read_ns = tv_ns(tv_read);
    bev->timeouts.write_ns = tv_ns(tv_write);
    return bev->open && mux_stream_set_timeouts(&bev->stream, &bev->timeouts) < 0 ? -1 : 0;
}

EVX_EXPORT void bufferevent_setwatermark(struct bufferevent *bev, short events, size_t low,
                                         size_t high)
{
    if (!bev)
        return;
    if (events & EV_WRITE) {
        bev->wm_write_low = low;
        bev->wm_write_high = high;
    }
    if (events & EV_READ) {
        bev->wm_read_low = low;
        bev->wm_read_high = high;
        read_update(bev);
    }
}

EVX_EXPORT int bufferevent_getwatermark(struct bufferevent *bev, short events, size_t *low,
                                        size_t *high)
{
    if (!bev || (events != EV_READ && events != EV_WRITE))
        return -1;
    if (low)
        *low = events == EV_READ ? bev->wm_read_low : bev->wm_write_low;
    if (high)
        *high = events == EV_READ ? bev->wm_read_high : bev->wm_write_high;
    return 0;
}

EVX_EXPORT int bufferevent_flush(struct bufferevent *bev, short iotype,
                                 enum bufferevent_flush_mode mode)
{
    (void)mode;
    if (!bev || bev->freed)
        return -1;
    if (!(iotype & EV_WRITE) || !bev->queued)
        return 0;
    unqueue(bev);
    write_some(bev);
    update_busy(bev);
    return 1;
}

EVX_EXPORT int bufferevent_priority_set(struct bufferevent *bev, int pri)
{
    return bev && pri >= 0 && pri < bev->base->npri ? 0 : -1;
}

EVX_EXPORT int bufferevent_get_priority(const struct bufferevent *bev)
{
    return bev ? bev->base->npri / 2 : -1;
}

EVX_EXPORT int bufferevent_set_max_single_read(struct bufferevent *bev, size_t size)
{
    if (!bev || size > (1u << 30))
        return -1;
    bev->max_read = size ? size : EVX_READ_DEFAULT;
    if (bev->reading) { /* reads of the new size from the next one on */
        read_stop(bev);
        read_update(bev);
    }
    return 0;
}

EVX_EXPORT ev_ssize_t bufferevent_get_max_single_read(struct bufferevent *bev)
{
    return bev ? (ev_ssize_t)bev->max_read : -1;
}

EVX_EXPORT void bufferevent_lock(struct bufferevent *bev)
{
    (void)bev;
}

EVX_EXPORT void bufferevent_unlock(struct bufferevent *bev)
{
    (void)bev;
}
