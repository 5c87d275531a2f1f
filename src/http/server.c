/* SPDX-License-Identifier: MIT */
/* The HTTP/1.1 server (include/iomux/http.h): a listener, and a state machine per
 * connection on the stream layer.
 *
 * A connection reads into a buffer of the server's pool (on io_uring the kernel picks one
 * as the bytes arrive, and receives cost no system call), appends the bytes to its own
 * buffer, where requests wait to be parsed, and gives the pool's buffer back at once: an idle
 * connection holds no pool buffer. A pool that runs dry (more reads completed in one go
 * than it has buffers) pauses those connections' reading until the next loop iteration. One request
 * at a time is in its handler: HEAD (its head is being read), BODY (the body is copied out, decoded
 * when chunked), HANDLER (the handler has the exchange; reading pauses once the buffer holds 4 KB
 * more), then HEAD for the next request, already buffered when the client pipelines.
 * Responses are queued on the stream as they are made, so they leave in the order of the requests.
 * A refused request gets its status with Connection: close; then the connection shuts down its
 * writing side, reads and drops what the client still sends for up to 2 s (so that closing
 * with unread bytes does not reset the connection before the answer arrives), and closes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_internal.h"
#include "internal.h"
#include "platform/platform.h"
#include "stream/stream.h"

#ifndef ESHUTDOWN /* Windows: a send after a shutdown is -EPIPE there (platform/win.c) */
#define ESHUTDOWN EPIPE
#endif

#define MUX__HTTP_READ   16384 /* bytes per read: the size of the pool's buffers */
#define MUX__HTTP_POOL   256   /* buffers in the server's pool */
#define MUX__HTTP_PIPE   4096  /* bytes read ahead while the handler has the exchange */
#define MUX__HTTP_LINGER (2000ull * 1000000)
#define MUX__NS_PER_S    1000000000ull

enum { ST_HEAD, ST_BODY, ST_HANDLER, ST_DONE };
enum { T_NONE, T_IDLE, T_HEADER, T_LINGER, T_STREAM, T_HANDLER };

struct mux__http_conn;

struct mux_http_exchange {
    struct mux__http_conn *c;
};

struct mux__http_srv {
    mux_http_server_t *pub;
    mux_loop_t *loop;
    mux_http_server_options_t o;
    mux_http_handler_cb cb;
    mux_listener_t l;
    int listening, lopen, closing;
    int draining;            /* closing, but requests in flight may finish */
    int in_close;            /* closing every connection: not done before the loop ends */
    mux_timer_t drain_timer; /* the drain's end: what is left is closed then */
    void (*close_cb)(mux_http_server_t *srv);
    struct mux__link conns; /* open connections, and closed ones kept for their answer */
    uint32_t nconns;
    uint32_t norphans;  /* of them, closed ones kept for the answer to a dropped exchange */
    int64_t date_sec;   /* the wall clock's second the Date field says */
    uint64_t date_next; /* mux_now's time at which to look at the wall clock again */
    char date[32];
    size_t date_len;
    mux_bufpool_t pool;
    char *pool_mem;
    uint32_t *pool_slots;
    struct mux__link dry;  /* connections waiting for a buffer of the pool */
    mux_timer_t dry_timer; /* restarts them */
    uint32_t dry_rounds;   /* restarts in a row without a read that got bytes */
};

struct mux__http_conn {
    mux_stream_t s;
    struct mux__http_srv *srv;
    struct mux__link link;     /* the server's connections */
    struct mux__link dry_link; /* the server's dry list (next is NULL when not on it) */
    mux_timer_t timer;
    mux_http_exchange_t x;
    mux_http_request_t req;
    mux_http_header_t *hdrs;
    char *buf; /* received, not yet consumed: the current head first */
    size_t len, cap, prev_len, head_len;
    char *body;
    size_t body_len, body_cap;
    uint64_t body_left;
    mux_http_chunked_t ch;
    uint32_t requests;
    uint8_t state, tkind, reading, closing, closed, keep, head, chunked, in_process;
    uint8_t streaming;  /* the server's stream_bodies: the handler reads the body */
    uint8_t body_done;  /* the body has been read to its end */
    uint8_t eof_told;   /* the reader was told the end (0) or an error */
    uint8_t in_body_cb; /* the reader is being called */
    uint8_t dropping;   /* answered before the body was read: its rest is dropped */
    uint8_t answered;   /* answered: the next request is for mux__conn_process */
    uint8_t cont;       /* 100 Continue was sent for this request */
    int body_err;       /* how the body ended, when it did not end well */
    mux_http_body_cb body_cb;
    uint8_t body_to;             /* the stream's read timeout is the body's (else none) */
    struct mux__http_out *spare; /* a response buffer kept for the next response */
    uint8_t nodelay;             /* TCP_NODELAY is set */
    uint8_t close_after;         /* closes once its writes are out */
    uint8_t extra;               /* bytes came after its last request, and were dropped */
    uint64_t deadline;           /* when tkind happens (mux_now's clock) */
    uint64_t tfire;              /* when the timer fires, if it is active */
    uint64_t hdeadline;          /* when the handler's time to answer is up */
    uint8_t orphan;  /* the exchange was dropped unanswered and its handler not told: kept
                        for the answer, which is refused (or for the server's close) */
    uint8_t in_drop; /* the handler is being told that its exchange is dropped */
    uint8_t blocked; /* answers held past max_output: the next request waits */
    size_t out_bytes; /* the memory of answers whose writes have not been called back */
    int cause;       /* why the connection closes, for a handler that holds an exchange */
    mux_http_cancel_cb cancel_cb;
    void *cancel_arg;
    socklen_t peer_len; /* the client's address, kept when the server logs */
    struct sockaddr_storage peer;
};

struct mux__http_out {
    mux_write_t w;
    mux_buf_t b[2]; /* the head (and the body copied after it), and a lent body */
    struct mux__http_conn *c;
    size_t cap;
    void (*done)(void *arg, int status); /* a file body's: the file is no longer read */
    void *arg;
    char data[];
};

static void mux__conn_process(struct mux__http_conn *c);
static void mux__conn_read(mux_stream_t *s, ssize_t n, char *buf);
static void mux__conn_unlink_dry(struct mux__http_conn *c);
static void mux__conn_body_error(struct mux__http_conn *c, int err);
static void mux__conn_refuse(struct mux__http_conn *c, int status);
static void mux__srv_drain_end(mux_loop_t *loop, mux_timer_t *t);
static void mux__conn_log(struct mux__http_conn *c, int status, uint64_t body_bytes);

static const struct {
    short status;
    const char *reason;
} mux__reasons[] = {
    {100, "Continue"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {204, "No Content"},
    {206, "Partial Content"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {303, "See Other"},
    {304, "Not Modified"},
    {307, "Temporary Redirect"},
    {308, "Permanent Redirect"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {411, "Length Required"},
    {412, "Precondition Failed"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {415, "Unsupported Media Type"},
    {416, "Range Not Satisfiable"},
    {417, "Expectation Failed"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
};

static const char *mux__reason(int status)
{
    for (size_t i = 0; i < sizeof mux__reasons / sizeof mux__reasons[0]; i++)
        if (mux__reasons[i].status == status)
            return mux__reasons[i].reason;
    return "Status";
}

int mux__http_same(mux_http_str_t s, const char *lit)
{
    size_t n = strlen(lit);
    if (s.len != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s.base[i];
        if ((c >= 'A' && c <= 'Z' ? c + 32 : c) != lit[i])
            return 0;
    }
    return 1;
}

MUX_EXPORT int mux_http_header_get(const mux_http_request_t *req, const char *name,
                                   mux_http_str_t *value)
{
    if (!req || !name || !value || (req->nheaders && !req->headers))
        return -EINVAL;
    char low[64];
    size_t n = strlen(name);
    if (n >= sizeof low)
        return -ENOENT;
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    for (uint32_t i = 0; i < req->nheaders; i++)
        if (mux__http_same(req->headers[i].name, low)) {
            *value = req->headers[i].value;
            return 0;
        }
    return -ENOENT;
}

/* ---- connections: life and death ------------------------------------------------------ */

static void mux__conn_free(struct mux__http_conn *c);

/* The server's close ends once every connection is closed: the exchanges its handlers still
 * hold without an answer (orphans) go with it. */
static void mux__srv_maybe_done(struct mux__http_srv *srv)
{
    if (!srv->closing || srv->nconns > srv->norphans || srv->lopen || srv->in_close)
        return;
    srv->in_close = 1;
    while (srv->conns.next != &srv->conns)
        mux__conn_free(mux__container_of(srv->conns.next, struct mux__http_conn, link));
    srv->in_close = 0;
    mux_http_server_t *pub = srv->pub;
    void (*cb)(mux_http_server_t *) = srv->close_cb;
    mux_timer_stop(srv->loop, &srv->dry_timer);
    mux_timer_stop(srv->loop, &srv->drain_timer);
    /* Every stream is closed, so no receive is in flight: the pool leaves the kernel. */
    if (mux_bufpool_detach(&srv->pool) == 0)
        mux__aligned_free(srv->pool_mem);
    free(srv->pool_slots);
    free(srv);
    pub->impl_ = NULL;
    if (cb)
        cb(pub);
}

static void mux__srv_error(struct mux__http_srv *srv, int err)
{
    if (srv->o.on_error && err < 0)
        srv->o.on_error(srv->pub, err);
}

/* Errors of the client's or the network's making, which are not the server's to report. */
static int mux__peer_error(int err)
{
    return err == -ECONNRESET || err == -EPIPE || err == -ETIMEDOUT || err == -ECONNABORTED ||
           err == -ENOTCONN || err == -ESHUTDOWN || err == -EHOSTUNREACH || err == -ENETUNREACH ||
           err == -ECANCELED;
}

/* The connection fails for a reason of the server's own: reported, then closed. */
static void mux__conn_close(struct mux__http_conn *c);
static void mux__conn_fail(struct mux__http_conn *c, int err)
{
    if (!c->closing && !mux__peer_error(err))
        mux__srv_error(c->srv, err);
    if (!c->cause)
        c->cause =
            err == -ECONNRESET || err == -EPIPE || err == -ECONNABORTED ? -ECONNRESET : -ECANCELED;
    mux__conn_close(c);
}

static void mux__conn_free(struct mux__http_conn *c)
{
    struct mux__http_srv *srv = c->srv;
    mux__conn_unlink_dry(c);
    mux__link_remove(&c->link);
    srv->nconns--;
    if (c->x.c)
        srv->norphans--;
    free(c->buf);
    free(c->body);
    free(c->hdrs);
    free(c->spare);
    free(c);
    mux__srv_maybe_done(srv);
}

/* The exchange the handler holds ends unanswered, for `reason`: a reader of its body hears
 * it first (and may still answer, to -ECANCELED), then the exchange's cancel callback, after
 * which it is gone. Without a callback it stays, an orphan, for the answer the handler may
 * still give (refused with -ECANCELED), or until the server closes. */
static void mux__conn_drop(struct mux__http_conn *c, int reason)
{
    c->in_drop = 1;
    mux__conn_body_error(c, reason);
    if (c->x.c && c->cancel_cb) {
        mux_http_cancel_cb cb = c->cancel_cb;
        c->cancel_cb = NULL;
        c->x.c = NULL;
        cb(&c->x, c->cancel_arg, reason);
    }
    c->in_drop = 0;
    if (c->x.c)
        c->orphan = 1;
}

static void mux__conn_closed(mux_stream_t *s)
{
    struct mux__http_conn *c = s->data;
    c->closed = 1;
    if (c->x.c && !c->orphan)
        mux__conn_drop(c, c->cause ? c->cause : -ECANCELED);
    if (c->x.c) { /* an orphan: freed by its answer, or once the server has closed */
        c->srv->norphans++;
        mux__srv_maybe_done(c->srv);
        return;
    }
    mux__conn_free(c);
}

static void mux__conn_close(struct mux__http_conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    mux_timer_stop(c->srv->loop, &c->timer);
    if (mux_stream_close(&c->s, mux__conn_closed) != 0)
        mux__conn_closed(&c->s); /* cannot happen: the stream is open and not closing */
}

/* Sets the connection's deadline: `kind` happens `ns` from now (T_NONE: nothing does). The
 * timer is moved only when it would fire after the new deadline: one that fires earlier
 * finds the deadline later and sleeps again for the rest, so the idle timeout set after
 * every answer on a kept-alive connection costs no timer operation (libev's idea for idle
 * timeouts). */
static void mux__conn_timer(struct mux__http_conn *c, int kind, uint64_t ns)
{
    c->tkind = (uint8_t)kind;
    if (kind == T_NONE)
        return; /* a timer still armed fires, finds nothing due, and stops */
    mux_loop_t *loop = c->srv->loop;
    c->deadline = mux_now(loop) + ns;
    if (mux_timer_is_active(&c->timer) && c->tfire <= c->deadline)
        return;
    mux_timer_stop(loop, &c->timer);
    int r = mux_timer_start(loop, &c->timer, ns, 0);
    if (r != 0)
        mux__conn_fail(c, r); /* no timer, no bound on how long it may hold on */
    c->tfire = c->deadline;
}

/* The stream's timeouts: always the write timeout, and the body's read timeout while a
 * body is read. Set only when that changes. */
static void mux__conn_body_timeout(struct mux__http_conn *c, int on)
{
    if (on == c->body_to)
        return;
    c->body_to = (uint8_t)on;
    mux_stream_timeouts_t to = {.read_ns = on ? c->srv->o.body_timeout_ns : 0,
                                .write_ns = c->srv->o.write_timeout_ns};
    mux_stream_set_timeouts(&c->s, &to);
}

static void mux__conn_unlink_dry(struct mux__http_conn *c)
{
    if (c->dry_link.next)
        mux__link_remove(&c->dry_link);
}

static void mux__conn_reading(struct mux__http_conn *c, int on)
{
    if (!on)
        mux__conn_unlink_dry(c); /* waiting for a buffer to read: not any more */
    if (c->closing || on == c->reading)
        return;
    int r = on ? mux_read_start_pool(&c->s, &c->srv->pool, mux__conn_read) : mux_read_stop(&c->s);
    if (r != 0 && on) {
        mux__conn_fail(c, r);
        return;
    }
    c->reading = (uint8_t)on;
}

/* ---- writing ------------------------------------------------------------------------- */

static void mux__linger_read(mux_stream_t *s, ssize_t n, char *buf)
{
    struct mux__http_conn *c = s->data;
    if (n > 0)
        mux_bufpool_put(&c->srv->pool, buf);
    else
        mux__conn_close(c); /* the client is done too, or gone (or the pool dry) */
}

static void mux__conn_shut(mux_stream_t *s, int status)
{
    struct mux__http_conn *c = s->data;
    if (status != 0 || c->closing) {
        mux__conn_close(c);
        return;
    }
    /* Lingering close: drop what still comes, until the client closes or 2 s pass. */
    if (c->reading)
        mux_read_stop(&c->s);
    c->reading = 0;
    if (mux_read_start_pool(&c->s, &c->srv->pool, mux__linger_read) != 0) {
        mux__conn_close(c);
        return;
    }
    c->reading = 1;
    mux__conn_timer(c, T_LINGER, MUX__HTTP_LINGER);
}

/* Response buffers up to this size are kept for the connection's next response. */
#define MUX__HTTP_SPARE 65536

static void mux__conn_written(mux_write_t *w, int status)
{
    struct mux__http_out *o = mux__container_of(w, struct mux__http_out, w);
    struct mux__http_conn *c = o->c;
    if (o->done) {
        o->done(o->arg, status);
        o->done = NULL;
    }
    c->out_bytes -= o->cap;
    if (!c->spare && o->cap <= MUX__HTTP_SPARE)
        c->spare = o; /* a keep-alive connection answers the next one without malloc */
    else
        free(o);
    if (status != 0) {
        mux__conn_fail(c, status);
    } else if (c->close_after && mux_stream_write_queue_size(&c->s) == 0) {
        mux__conn_close(c); /* every byte is with the kernel, which sends them, then FIN */
    } else if (c->blocked && !c->closing && c->out_bytes <= c->srv->o.max_output) {
        c->blocked = 0; /* the answers drained: the next request is read */
        mux__conn_process(c);
    }
}

/* A buffer for a response of `len` bytes: the connection's spare when it is big enough. */
static struct mux__http_out *mux__out_new(struct mux__http_conn *c, size_t len)
{
    struct mux__http_out *o = c->spare;
    if (o && o->cap >= len) {
        c->spare = NULL;
        return o;
    }
    size_t cap = len < 1024 ? 1024 : len;
    o = malloc(sizeof *o + cap);
    if (o) {
        o->c = c;
        o->cap = cap;
        o->done = NULL;
    }
    return o;
}

/* Sends the `len` bytes of `o`, and then `flen` bytes of the file `fd` from `foff` when
 * `flen` is not 0. On failure the connection fails, and a file's `done` hears of it. */
static int mux__out_send_file(struct mux__http_conn *c, struct mux__http_out *o, size_t len, int fd,
                              uint64_t foff, uint64_t flen, const mux_buf_t *lent)
{
    o->b[0] = (mux_buf_t){.base = o->data, .len = len};
    if (lent)
        o->b[1] = *lent;
    int r = flen ? mux__write_os_file(&c->s, &o->w, o->b, 1, fd, (int64_t)foff, flen,
                                      mux__conn_written)
                 : mux_write(&c->s, &o->w, o->b, lent ? 2 : 1, mux__conn_written);
    if (r != 0) { /* the answer is not sent: its file's `done` is not called */
        free(o);
        mux__conn_fail(c, r);
        return r;
    }
    c->out_bytes += o->cap;
    return 0;
}

static int mux__out_send(struct mux__http_conn *c, struct mux__http_out *o, size_t len)
{
    return mux__out_send_file(c, o, len, -1, 0, 0, NULL);
}

/* The Date field's value. The wall clock is read once a second, when the loop's time (read
 * once per iteration anyway) passes the moment the wall clock's second was due to end. */
static const char *mux__date(struct mux__http_srv *srv)
{
    uint64_t mono = mux_now(srv->loop);
    if (mono < srv->date_next)
        return srv->date;
    int64_t wall = mux_wall_now(srv->loop), sec = wall / (int64_t)MUX__NS_PER_S;
    if (sec != srv->date_sec) {
        srv->date_len = mux__http_date(sec, srv->date);
        srv->date_sec = sec;
    }
    srv->date_next = mono + (MUX__NS_PER_S - (uint64_t)(wall % (int64_t)MUX__NS_PER_S));
    return srv->date;
}

/* No more requests on this connection: once the queued responses are out, shut down. */
static void mux__conn_finish(struct mux__http_conn *c)
{
    c->state = ST_DONE;
    mux__conn_timer(c, T_NONE, 0);
    mux__conn_reading(c, 0);
    if (!c->closing && mux_stream_shutdown(&c->s, mux__conn_shut) != 0)
        mux__conn_close(c);
}

/* The client said this request is its last (HTTP/1.0 without keep-alive, or Connection:
 * close), sent nothing after it, and its body was read: nothing is left to read, so the
 * connection closes once the answer is out, without the half-close and the lingering read
 * (which are there for a client whose unread bytes would turn the close into a reset, as
 * nginx does). */
static int mux__conn_last_word(const struct mux__http_conn *c)
{
    return !(c->req.flags & MUX_HTTP_KEEP_ALIVE) && c->body_done && c->len == c->head_len &&
           !c->extra;
}

/* Answers what the server refuses by itself, and ends the connection. */
static void mux__conn_refuse(struct mux__http_conn *c, int status)
{
    if (c->closing)
        return;
    const char *reason = mux__reason(status);
    char body[64];
    int blen = snprintf(body, sizeof body, "%d %s\n", status, reason);
    struct mux__http_out *o = mux__out_new(c, 256 + (size_t)blen);
    if (!o) {
        mux__conn_fail(c, -ENOMEM);
        return;
    }
    int n = snprintf(o->data, 256,
                     "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %d\r\nConnection: close\r\n\r\n",
                     status, reason, mux__date(c->srv), blen);
    memcpy(o->data + n, body, (size_t)blen);
    if (c->srv->o.on_log)
        mux__conn_log(c, status, (uint64_t)blen);
    if (mux__out_send(c, o, (size_t)n + (size_t)blen) == 0)
        mux__conn_finish(c);
}

/* ---- reading ------------------------------------------------------------------------- */

static int mux__append(char **p, size_t *cap, size_t len, const char *src, size_t n)
{
    if (n == 0)
        return 0;
    if (len + n > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < len + n)
            c *= 2;
        char *q = realloc(*p, c);
        if (!q)
            return -ENOMEM;
        *p = q;
        *cap = c;
    }
    memcpy(*p + len, src, n);
    return 0;
}

/* Turns the parsed request's strings into offsets into `base` (to_offsets), or offsets back
 * into pointers into `base`. While the buffer moves they are offsets, kept plus one (so an
 * absent string, NULL, stays absent) in the pointers as integers: a pointer into the freed
 * buffer is never read. */
static void mux__req_rebase(mux_http_request_t *r, char *base, int to_offsets)
{
    mux_http_str_t *strs[3] = {&r->method, &r->target, &r->host};
    for (uint32_t i = 0; i < 3 + 2 * r->nheaders; i++) {
        mux_http_str_t *str = i < 3              ? strs[i]
                              : (i - 3) % 2 == 0 ? &r->headers[(i - 3) / 2].name
                                                 : &r->headers[(i - 3) / 2].value;
        if (!str->base)
            continue;
        if (to_offsets)
            str->base = (char *)(uintptr_t)(str->base - base + 1);
        else
            str->base = base + ((uintptr_t)str->base - 1);
    }
}

/* Makes room for `need` bytes in the connection's buffer. The parsed request's strings
 * point into it: when it moves they are moved along. 0 or -ENOMEM. */
static int mux__conn_grow(struct mux__http_conn *c, size_t need)
{
    if (need <= c->cap)
        return 0;
    size_t cap = c->cap ? c->cap : 4096;
    while (cap < need)
        cap *= 2;
    if (c->head_len)
        mux__req_rebase(&c->req, c->buf, 1);
    char *p = realloc(c->buf, cap);
    if (p) {
        c->buf = p;
        c->cap = cap;
    }
    if (c->head_len)
        mux__req_rebase(&c->req, c->buf, 0); /* the old buffer, if realloc failed */
    return p ? 0 : -ENOMEM;
}

/* The body of a streamed request ended badly (the connection failed, or it was over the
 * limit): its reader hears of it once. */
static void mux__conn_body_error(struct mux__http_conn *c, int err)
{
    if (c->state != ST_HANDLER || !c->streaming || c->eof_told)
        return;
    c->body_err = err;
    if (c->body_cb) {
        c->eof_told = 1;
        c->body_cb(&c->x, NULL, err);
    }
}

/* The pool was dry: reading starts again at the next iteration, when the buffers taken in
 * this one are back (every read gives its buffer back at once). A pool still dry after
 * many iterations in a row with no read getting bytes is not short of buffers but broken
 * (the kernel refused its ring): those connections fail with -ENOBUFS, reported. */
#define MUX__HTTP_DRY_ROUNDS 64

static void mux__srv_dry_cb(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    struct mux__http_srv *srv = t->data;
    int broken = ++srv->dry_rounds > MUX__HTTP_DRY_ROUNDS;
    while (srv->dry.next != &srv->dry) {
        struct mux__http_conn *c =
            mux__container_of(srv->dry.next, struct mux__http_conn, dry_link);
        mux__link_remove(&c->dry_link);
        if (broken)
            mux__conn_fail(c, -ENOBUFS);
        else
            mux__conn_reading(c, 1);
    }
}

static void mux__conn_read(mux_stream_t *s, ssize_t n, char *buf)
{
    struct mux__http_conn *c = s->data;
    if (n == -ENOBUFS) {
        c->reading = 0;
        if (!c->dry_link.next)
            mux__link_insert(&c->srv->dry, &c->dry_link);
        int r = 0;
        if (!mux_timer_is_active(&c->srv->dry_timer))
            r = mux_timer_start(c->srv->loop, &c->srv->dry_timer, 0, 0);
        if (r != 0)
            mux__conn_fail(c, r);
        return;
    }
    if (n <= 0) {
        c->reading = 0; /* reading has stopped */
        /* The end of the stream or an error (a body that stalled: -ETIMEDOUT). A client
         * that ends its sending while a handler holds its request is taken as gone, as
         * nginx takes it (its 499): nothing tells a half-close from a close, and a client
         * that closed must not hold a descriptor until the handler's time is up. An answer
         * already queued still goes out before the end (below). */
        if (n == 0 && c->state == ST_HANDLER && c->body_done) {
            c->cause = -ECONNRESET;
            mux__conn_close(c);
            return;
        }
        if (n == 0 && ((c->state == ST_HEAD && c->len == 0) || c->dropping) &&
            mux_stream_write_queue_size(&c->s) > 0) {
            mux__conn_finish(c); /* after an answer: it still goes, then the end */
            return;
        }
        int err = n == 0 ? -ECONNRESET : (int)n; /* ended within a body */
        if (c->state == ST_HANDLER && c->streaming && (n == 0 || n == -ETIMEDOUT)) {
            /* The client stopped sending (half-closed, or stalled) but may still read:
             * the reader hears of it, and the answer goes before the end. */
            c->keep = 0;
            mux__conn_body_error(c, err);
            return;
        }
        mux__conn_body_error(c, err);
        mux__conn_fail(c, err);
        return;
    }
    if (c->state == ST_HANDLER && !c->keep && c->body_done) {
        mux_bufpool_put(&c->srv->pool, buf); /* after the last request: not read */
        c->srv->dry_rounds = 0;
        c->extra = 1;
        return;
    }
    if (mux__conn_grow(c, c->len + (size_t)n) != 0) {
        mux_bufpool_put(&c->srv->pool, buf);
        mux__conn_fail(c, -ENOMEM);
        return;
    }
    memcpy(c->buf + c->len, buf, (size_t)n);
    c->len += (size_t)n;
    mux_bufpool_put(&c->srv->pool, buf);
    c->srv->dry_rounds = 0;
    if (c->state == ST_HANDLER && !(c->body_cb && !c->eof_told)) {
        /* Pipelined requests wait; past a few KB, reading waits too. */
        if (c->len - c->head_len > MUX__HTTP_PIPE)
            mux__conn_reading(c, 0);
        return;
    }
    mux__conn_process(c);
}

/* The handler's time to answer starts again (at its call, and at each piece of a streamed
 * body given to its reader), on the connection's timer unless that waits for T_STREAM. */
static void mux__conn_handler_clock(struct mux__http_conn *c)
{
    c->hdeadline = mux_now(c->srv->loop) + c->srv->o.handler_timeout_ns;
    if (c->tkind != T_STREAM)
        mux__conn_timer(c, T_HANDLER, c->srv->o.handler_timeout_ns);
}

/* The handler's time is up: the exchange is dropped (-ETIMEDOUT), and unless a reader of its
 * body answered on hearing that, the client gets 503 and the connection ends. */
static void mux__conn_expire(struct mux__http_conn *c)
{
    if (c->state != ST_HANDLER || !c->x.c || c->orphan)
        return;
    c->keep = 0;
    mux__conn_drop(c, -ETIMEDOUT);
    if (c->state == ST_HANDLER)
        mux__conn_refuse(c, 503);
}

static void mux__conn_handle(struct mux__http_conn *c)
{
    /* While the handler holds the exchange, pipelined bytes (or a streamed body) may come:
     * room for all that is read before reading pauses, so that the request's strings stay
     * where they are. The last request of a connection with its body read needs none:
     * what follows it is dropped (mux__conn_read). */
    if ((c->keep || !c->body_done) &&
        mux__conn_grow(c, c->len + MUX__HTTP_PIPE + MUX__HTTP_READ) != 0) {
        mux__conn_fail(c, -ENOMEM);
        return;
    }
    c->state = ST_HANDLER;
    if (c->body_done)
        mux__conn_body_timeout(c, 0);
    c->x.c = c;
    c->cancel_cb = NULL;
    mux__conn_handler_clock(c);
    c->srv->cb(&c->x);
}

/* Takes body bytes out of the buffer: into the exchange's copy (B_COPY), to the handler's
 * reader (B_STREAM: one piece per call), or away (B_DROP: the rest of a body the handler did
 * not read). Returns 1 when the body is complete, 2 when a piece went to the reader, 0 when
 * more must come, -1 when the request was refused or the connection is ending. */
enum { B_COPY, B_STREAM, B_DROP };

/* A body the server will not take: refused with `status` before the handler has it, or
 * else `err` for its reader, and the end of the connection after the answer. -1. */
static int mux__conn_body_refused(struct mux__http_conn *c, int mode, int status, int err)
{
    if (mode == B_COPY) {
        mux__conn_refuse(c, status);
        return -1;
    }
    mux__conn_body_error(c, err);
    c->keep = 0;
    mux__conn_reading(c, 0);
    if (mode == B_DROP) /* answered already */
        mux__conn_finish(c);
    return -1;
}

static int mux__conn_body(struct mux__http_conn *c, int mode)
{
    const mux_http_limits_t *lim = &c->srv->o.limits;
    char *p = c->buf + c->head_len;
    size_t avail = c->len - c->head_len;
    size_t used, got;
    int end;
    if (c->chunked) {
        if (avail == 0)
            return 0; /* the head came alone: the chunks are still to come */
        char *d = p;
        if (mode == B_COPY) {
            if (mux__append(&c->body, &c->body_cap, c->body_len, p, avail) != 0) {
                mux__conn_fail(c, -ENOMEM);
                return -1;
            }
            d = c->body + c->body_len;
        }
        got = avail;
        ssize_t r = mux_http_chunked_decode(&c->ch, d, &got);
        if (r == -EBADMSG)
            return mux__conn_body_refused(c, mode, 400, -EBADMSG);
        used = r >= 0 ? avail - (size_t)r : avail;
        end = r >= 0;
    } else {
        got = used = avail < c->body_left ? avail : (size_t)c->body_left;
        if (mode == B_COPY && mux__append(&c->body, &c->body_cap, c->body_len, p, got) != 0) {
            mux__conn_fail(c, -ENOMEM);
            return -1;
        }
        c->body_left -= got;
        end = c->body_left == 0;
    }
    c->body_len += got;
    if (c->body_len > lim->max_body) /* chunked: no length said so beforehand */
        return mux__conn_body_refused(c, mode, 413, -EMSGSIZE);
    if (mode == B_STREAM && got) {
        /* The piece stays where it is during the call; what the handler does meanwhile
         * (answer, stop reading) takes effect in mux__conn_process afterwards. */
        mux__conn_handler_clock(c);
        c->in_body_cb = 1;
        c->body_cb(&c->x, p, (ssize_t)got);
        c->in_body_cb = 0;
    }
    memmove(p, p + used, avail - used);
    c->len -= used;
    if (end)
        return 1;
    return mode == B_STREAM && got ? 2 : 0;
}

/* Sends 100 Continue, once per request. 0, or -1 when the connection is failing. */
static int mux__conn_continue(struct mux__http_conn *c)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (c->cont)
        return 0;
    struct mux__http_out *o = mux__out_new(c, sizeof cont - 1);
    if (!o) {
        mux__conn_fail(c, -ENOMEM);
        return -1;
    }
    c->cont = 1;
    memcpy(o->data, cont, sizeof cont - 1);
    return mux__out_send(c, o, sizeof cont - 1) != 0 ? -1 : 0;
}

/* The response went out: what is left of the request is dropped, and the next one read. */
static void mux__conn_next(struct mux__http_conn *c)
{
    memmove(c->buf, c->buf + c->head_len, c->len - c->head_len);
    c->len -= c->head_len;
    c->head_len = 0;
    c->body_cb = NULL;
    c->dropping = !c->body_done;
    if (!c->dropping)
        c->body_len = 0; /* a body being dropped goes on counting against max_body */
    c->state = c->dropping ? ST_BODY : ST_HEAD;
    if (c->dropping)
        mux__conn_body_timeout(c, 1);
    if (c->len == 0 && c->cap > 65536) { /* a big request's room: not kept while idle */
        free(c->buf);
        c->buf = NULL;
        c->cap = 0;
    }
}

static void mux__conn_process(struct mux__http_conn *c)
{
    if (c->in_process)
        return; /* a respond from inside the handler: the loop below goes on */
    c->in_process = 1;
    struct mux__http_srv *srv = c->srv;
    while (!c->closing) {
        if (c->answered) { /* answered from inside a callback of this loop */
            c->answered = 0;
            mux__conn_next(c);
        }
        if (c->state == ST_HEAD) {
            if (c->len == 0) {
                if (srv->draining) {
                    mux__conn_finish(c); /* no more requests: the answers go, then the end */
                    break;
                }
                if (c->tkind != T_IDLE && c->requests > 0)
                    mux__conn_timer(c, T_IDLE, srv->o.idle_timeout_ns);
                break;
            }
            if (c->out_bytes > srv->o.max_output) {
                /* Back-pressure: a client that pipelines and does not read gets no more
                 * answers made until these are written (mux__conn_written goes on then);
                 * the write timeout bounds one that never reads. What counts is the
                 * answers' memory until their writes are called back, not the bytes the
                 * socket has yet to take: a send done at once is called back only from
                 * the loop, and a burst of pipelined requests must not make thousands of
                 * answers before that. */
                c->blocked = 1;
                mux__conn_timer(c, T_NONE, 0);
                mux__conn_reading(c, 0);
                break;
            }
            ssize_t r =
                mux_http_parse_request(&c->req, c->buf, c->len, c->prev_len, &srv->o.limits);
            if (r == -EAGAIN) {
                /* Part of a head: the rest must come in time (from the first part on). */
                if (c->tkind != T_HEADER)
                    mux__conn_timer(c, T_HEADER, srv->o.header_timeout_ns);
                c->prev_len = c->len;
                break;
            }
            if (r < 0) {
                mux__conn_refuse(c, c->req.status ? c->req.status : 400);
                break;
            }
            c->head_len = (size_t)r;
            c->prev_len = 0;
            c->head = c->req.method.len == 4 && memcmp(c->req.method.base, "HEAD", 4) == 0;
            c->keep = (c->req.flags & MUX_HTTP_KEEP_ALIVE) &&
                      c->requests + 1 < srv->o.max_requests && !srv->draining;
            c->chunked = (c->req.flags & MUX_HTTP_CHUNKED) != 0;
            c->body_left = c->req.content_length;
            c->body_len = 0;
            c->body_done = !c->chunked && !c->body_left;
            c->eof_told = 0;
            c->body_err = 0;
            c->cont = 0;
            if (c->chunked)
                mux_http_chunked_init(&c->ch);
            if (c->tkind != T_NONE)
                mux__conn_timer(c, T_NONE, 0);
            c->state = ST_BODY;
            if (c->streaming) {
                mux__conn_handle(c); /* the body comes when the handler reads it */
                continue;
            }
            if (!c->body_done)
                mux__conn_body_timeout(c, 1);
            if (!c->body_done && (c->req.flags & MUX_HTTP_EXPECT_CONTINUE) &&
                c->len == c->head_len && mux__conn_continue(c) != 0)
                break;
        }
        if (c->state == ST_BODY) { /* read whole for the handler, or dropped after it */
            int done = c->body_done ? 1 : mux__conn_body(c, c->dropping ? B_DROP : B_COPY);
            if (done <= 0)
                break;
            c->body_done = 1;
            if (c->dropping) {
                c->dropping = 0;
                mux__conn_body_timeout(c, 0);
                c->state = ST_HEAD;
            } else {
                mux__conn_handle(c);
            }
            continue;
        }
        if (c->state == ST_HANDLER && c->body_cb && !c->eof_told) { /* streaming to it */
            if (!c->body_done) {
                int r = mux__conn_body(c, B_STREAM);
                if (r < 0 || r == 0)
                    break;
                if (r == 1)
                    c->body_done = 1;
                continue;
            }
            c->eof_told = 1;
            mux__conn_body_timeout(c, 0);
            c->body_cb(&c->x, NULL, 0);
            continue;
        }
        break;
    }
    c->in_process = 0;
    if (!c->closing && !c->blocked &&
        (c->state == ST_HEAD || c->state == ST_BODY ||
         (c->state == ST_HANDLER && c->body_cb && !c->body_done)))
        mux__conn_reading(c, 1);
}

/* ---- the exchange ---------------------------------------------------------------------- */

MUX_EXPORT const mux_http_request_t *mux_http_exchange_request(const mux_http_exchange_t *x)
{
    return x && x->c ? &x->c->req : NULL;
}

MUX_EXPORT mux_http_str_t mux_http_exchange_body(const mux_http_exchange_t *x)
{
    if (!x || !x->c)
        return (mux_http_str_t){NULL, 0};
    return (mux_http_str_t){x->c->body, x->c->body_len};
}

void mux__http_exchange_error(const mux_http_exchange_t *x, int err)
{
    if (x && x->c)
        mux__srv_error(x->c->srv, err);
}

mux_loop_t *mux__http_exchange_loop(const mux_http_exchange_t *x)
{
    return x && x->c ? x->c->srv->loop : NULL;
}

MUX_EXPORT mux_http_server_t *mux_http_exchange_server(const mux_http_exchange_t *x)
{
    return x && x->c ? x->c->srv->pub : NULL;
}

static int mux__exchange_release(mux_http_exchange_t *x);

MUX_EXPORT int mux_http_exchange_on_cancel(mux_http_exchange_t *x, mux_http_cancel_cb cb, void *arg)
{
    if (!x || !x->c)
        return -EINVAL;
    if (mux__exchange_release(x))
        return -ECANCELED; /* dropped already: gone now, as after an answer */
    if (x->c->state != ST_HANDLER)
        return -EINVAL;
    x->c->cancel_cb = cb;
    x->c->cancel_arg = arg;
    return 0;
}

/* An access log's line: the answer of `status` with a body of `body_bytes`, to the request
 * whose head was read (or to a client whose head was refused before that). */
static void mux__conn_log(struct mux__http_conn *c, int status, uint64_t body_bytes)
{
    struct mux__http_srv *srv = c->srv;
    mux_http_log_t e = {
        .req = c->head_len ? &c->req : NULL,
        .peer = c->peer_len ? (const struct sockaddr *)&c->peer : NULL,
        .peer_len = c->peer_len,
        .status = status,
        .body_bytes = body_bytes,
        .time_s = srv->date_sec,
    };
    srv->o.on_log(srv->pub, &e);
}

static char *mux__put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* v in decimal: its digits counted first, then written from the last, two at a time (a
 * division per two digits instead of per digit: every response writes its length). */
static char *mux__put_u64(char *p, uint64_t v)
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324"
                                "25262728293031323334353637383940414243444546474849"
                                "50515253545556575859606162636465666768697071727374"
                                "75767778798081828384858687888990919293949596979899";
    int n = 1;
    for (uint64_t t = v; t >= 10; t /= 10)
        n++;
    char *q = p + n;
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        *--q = pairs[d + 1];
        *--q = pairs[d];
    }
    if (v >= 10) {
        *--q = pairs[v * 2 + 1];
        *--q = pairs[v * 2];
    } else {
        *--q = (char)('0' + v);
    }
    return p + n;
}

static int mux__field_ok(const mux_http_header_t *h)
{
    if (!h->name.base || h->name.len == 0 || (h->value.len && !h->value.base))
        return 0;
    for (size_t i = 0; i < h->name.len; i++) {
        unsigned char ch = (unsigned char)h->name.base[i];
        if (!mux__http_tchar[ch])
            return 0;
    }
    for (size_t i = 0; i < h->value.len; i++) {
        unsigned char ch = (unsigned char)h->value.base[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return 0;
    }
    switch (h->name.len) { /* the server's own fields */
    case 4:
        return !mux__http_same(h->name, "date");
    case 10:
        return !mux__http_same(h->name, "connection");
    case 14:
        return !mux__http_same(h->name, "content-length");
    case 17:
        return !mux__http_same(h->name, "transfer-encoding");
    default:
        return 1;
    }
}

/* A response's body: bytes in buffers (copied), or a file's range. */
struct mux__body {
    const mux_buf_t *v;
    unsigned n;
    size_t len; /* the buffers', or the file's */
    int fd;     /* -1: the buffers; else the system's own file (mux__file_os) */
    uint64_t off;
    void (*done)(void *arg, int status);
    void *arg;
    int own;  /* the fields are the library's own: well formed, none of the server's */
    int lent; /* the one buffer is not copied: it stays valid until `done` */
    const char *raw; /* own fields made beforehand, each with its CRLF (with no `headers`) */
    size_t raw_len;
};

/* An exchange that was dropped (its connection closed, or its time up) is let go: 1, with
 * its connection freed if that is closed, unless the handler is being told of the drop. */
static int mux__exchange_release(mux_http_exchange_t *x)
{
    struct mux__http_conn *c = x->c;
    if (!c->orphan && !c->closed)
        return 0;
    if (c->closed && !c->in_drop)
        c->srv->norphans -= c->orphan;
    x->c = NULL;
    c->orphan = 0;
    if (c->state == ST_HANDLER)
        c->state = ST_DONE;
    if (c->closed && !c->in_drop)
        mux__conn_free(c);
    return 1;
}

static int mux__respond(mux_http_exchange_t *x, int status, const mux_http_header_t *headers,
                        uint32_t nheaders, const struct mux__body *b)
{
    if (!x || !x->c)
        return -EINVAL;
    if (mux__exchange_release(x))
        return -ECANCELED;
    if (x->c->state != ST_HANDLER || status < 200 || status > 599 || (nheaders && !headers))
        return -EINVAL;
    struct mux__http_conn *c = x->c;
    size_t hbytes = b->raw_len, len = b->len;
    for (uint32_t i = 0; i < nheaders; i++) {
        if (!b->own && !mux__field_ok(&headers[i]))
            return -EINVAL;
        hbytes += headers[i].name.len + headers[i].value.len + 4;
    }
    x->c = NULL;
    if (c->closing) { /* closing: its close callback frees it */
        c->state = ST_DONE;
        return -ECANCELED;
    }
    /* A body the handler did not read to its end is dropped to find the next request,
     * unless the client waits for a 100 Continue that was not sent (it may never send the
     * body) or the body failed: then the connection ends with this answer. */
    if (!c->body_done && ((c->req.flags & MUX_HTTP_EXPECT_CONTINUE && !c->cont) || c->body_err))
        c->keep = 0;
    if (c->srv->draining)
        c->keep = 0; /* the server is shutting down: this answer is the connection's last */
    int nobody = status == 204 || status == 304;
    int send_body = !nobody && !c->head && len;
    int file = b->fd >= 0 && send_body;
    int lend = b->lent && send_body;
    if (file && !c->nodelay) {
        /* The head goes apart from the file's bytes, and must not wait for the ACK of the
         * segment before it (Nagle); a Unix socket has nothing to turn off. */
        c->nodelay = 1;
        (void)mux_stream_nodelay(&c->s, 1);
    }
    size_t cap = 160 + hbytes + (send_body && !file && !lend ? len : 0);
    struct mux__http_out *o = mux__out_new(c, cap);
    if (!o) {
        mux__conn_fail(c, -ENOMEM);
        c->state = ST_DONE;
        return -ENOMEM;
    }
    o->done = b->done;
    o->arg = b->arg;
    char *p = o->data;
    if (status == 200) { /* most answers: no lookup, no number to write */
        p = mux__put(p, "HTTP/1.1 200 OK\r\nDate: ", 23);
    } else {
        const char *reason = mux__reason(status);
        p = mux__put(p, "HTTP/1.1 ", 9);
        p = mux__put_u64(p, (uint64_t)status);
        *p++ = ' ';
        p = mux__put(p, reason, strlen(reason));
        p = mux__put(p, "\r\nDate: ", 8);
    }
    const char *date = mux__date(c->srv);
    p = mux__put(p, date, c->srv->date_len);
    p = mux__put(p, "\r\n", 2);
    if (!nobody) {
        p = mux__put(p, "Content-Length: ", 16);
        p = mux__put_u64(p, len);
        p = mux__put(p, "\r\n", 2);
    }
    if (!c->keep)
        p = mux__put(p, "Connection: close\r\n", 19);
    else if (c->req.version == 10) /* an HTTP/1.0 client closes unless told otherwise */
        p = mux__put(p, "Connection: keep-alive\r\n", 24);
    for (uint32_t i = 0; i < nheaders; i++) {
        memcpy(p, headers[i].name.base, headers[i].name.len);
        p += headers[i].name.len;
        *p++ = ':';
        *p++ = ' ';
        if (headers[i].value.len)
            memcpy(p, headers[i].value.base, headers[i].value.len);
        p += headers[i].value.len;
        *p++ = '\r';
        *p++ = '\n';
    }
    if (b->raw_len)
        p = mux__put(p, b->raw, b->raw_len);
    *p++ = '\r';
    *p++ = '\n';
    if (send_body && !file && !lend)
        for (unsigned i = 0; i < b->n; i++) {
            if (b->v[i].len)
                memcpy(p, b->v[i].base, b->v[i].len);
            p += b->v[i].len;
        }
    c->requests++;
    c->body_cb = NULL;
    if (c->srv->o.on_log)
        mux__conn_log(c, status, send_body ? len : 0);
    int r = mux__out_send_file(c, o, (size_t)(p - o->data), b->fd, b->off, file ? len : 0,
                               lend ? &b->v[0] : NULL);
    if (r != 0) {
        c->state = ST_DONE;
        return r; /* the connection is closing: the answer is lost with it */
    }
    if (!c->keep && mux__conn_last_word(c)) {
        c->state = ST_DONE;
        c->close_after = 1;
        mux__conn_timer(c, T_NONE, 0);
        mux__conn_reading(c, 0);
        return 0;
    }
    if (!c->keep) {
        mux__conn_finish(c);
        return 0;
    }
    c->answered = 1; /* the head is no longer needed: what follows it is the next request */
    mux__conn_process(c);
    return 0;
}

MUX_EXPORT int mux_http_exchange_read(mux_http_exchange_t *x, mux_http_body_cb cb)
{
    if (!x || !x->c || x->c->state != ST_HANDLER || !x->c->streaming)
        return -EINVAL;
    struct mux__http_conn *c = x->c;
    if (c->closing)
        return -ECANCELED;
    if (c->eof_told)
        return c->body_err ? c->body_err : -EALREADY;
    c->body_cb = cb;
    /* The body's timeout runs while somebody waits for the body. */
    mux__conn_body_timeout(c, cb && !c->body_done);
    if (!cb)
        return 0; /* reading pauses once 4 KB are buffered */
    if (!c->body_done && (c->req.flags & MUX_HTTP_EXPECT_CONTINUE) && mux__conn_continue(c) != 0)
        return -ECANCELED;
    if (c->in_process || c->in_body_cb)
        return 0; /* mux__conn_process goes on with the reader */
    /* What is buffered, or the end, comes from the loop, not from inside this call. */
    mux__conn_timer(c, T_STREAM, 0);
    return c->closing ? -ECANCELED : 0;
}

MUX_EXPORT int mux_http_respond(mux_http_exchange_t *x, int status,
                                const mux_http_header_t *headers, uint32_t nheaders,
                                const void *body, size_t len)
{
    if (len && !body)
        return -EINVAL;
    mux_buf_t v = {.base = (char *)(uintptr_t)body, .len = len};
    struct mux__body b = {.v = &v, .n = 1, .len = len, .fd = -1};
    return mux__respond(x, status, headers, nheaders, &b);
}

int mux__http_respond_own(mux_http_exchange_t *x, int status, const mux_http_header_t *headers,
                          uint32_t nheaders, const void *body, size_t len, int fd, uint64_t off,
                          void (*done)(void *arg, int status), void *arg)
{
    mux_buf_t v = {.base = (char *)(uintptr_t)body, .len = len};
    struct mux__body b = {.v = &v,
                          .n = 1,
                          .len = len,
                          .fd = fd,
                          .off = off,
                          .done = done,
                          .arg = arg,
                          .own = 1,
                          .lent = fd < 0 && done != NULL};
    return mux__respond(x, status, headers, nheaders, &b);
}

int mux__http_respond_raw(mux_http_exchange_t *x, int status, const char *fields,
                          size_t flen, const void *body, size_t len,
                          void (*done)(void *arg, int status), void *arg)
{
    mux_buf_t v = {.base = (char *)(uintptr_t)body, .len = len};
    struct mux__body b = {.v = &v,
                          .n = 1,
                          .len = len,
                          .fd = -1,
                          .done = done,
                          .arg = arg,
                          .own = 1,
                          .lent = done != NULL,
                          .raw = fields,
                          .raw_len = flen};
    return mux__respond(x, status, NULL, 0, &b);
}

MUX_EXPORT int mux_http_respond_v(mux_http_exchange_t *x, int status,
                                  const mux_http_header_t *headers, uint32_t nheaders,
                                  const mux_buf_t *bufs, unsigned nbufs)
{
    if (nbufs && !bufs)
        return -EINVAL;
    struct mux__body b = {.v = bufs, .n = nbufs, .fd = -1};
    for (unsigned i = 0; i < nbufs; i++)
        if ((bufs[i].len && !bufs[i].base) || __builtin_add_overflow(b.len, bufs[i].len, &b.len))
            return -EINVAL;
    return mux__respond(x, status, headers, nheaders, &b);
}

MUX_EXPORT int mux_http_respond_file(mux_http_exchange_t *x, int status,
                                     const mux_http_header_t *headers, uint32_t nheaders, int fd,
                                     int64_t off, uint64_t len, void (*done)(void *arg, int status),
                                     void *arg)
{
    if (fd < 0 || off < 0 || len > (uint64_t)(INT64_MAX - off) || len > SIZE_MAX)
        return -EINVAL;
    struct mux__body b = {
        .len = (size_t)len,
        .fd = mux__file_os(fd),
        .off = (uint64_t)off,
        .done = done,
        .arg = arg};
    return mux__respond(x, status, headers, nheaders, &b);
}

/* ---- the server ------------------------------------------------------------------------ */

static void mux__conn_timeout(mux_loop_t *loop, mux_timer_t *t)
{
    struct mux__http_conn *c = t->data;
    int kind = c->tkind;
    if (kind == T_NONE)
        return; /* what it was set for is over */
    uint64_t now = mux_now(loop);
    if (now < c->deadline) { /* moved later since it was set: sleep for the rest */
        int r = mux_timer_start(loop, t, c->deadline - now, 0);
        if (r != 0)
            mux__conn_fail(c, r);
        c->tfire = c->deadline;
        return;
    }
    c->tkind = T_NONE;
    if (kind == T_STREAM) {
        mux__conn_process(c); /* a reader started: what is buffered goes to it */
        if (!c->closing && c->state == ST_HANDLER && c->tkind == T_NONE) {
            uint64_t left = c->hdeadline > now ? c->hdeadline - now : 0;
            mux__conn_timer(c, T_HANDLER, left); /* the handler's clock goes on */
        }
    } else if (kind == T_HANDLER) {
        mux__conn_expire(c);
    } else if (kind == T_IDLE && mux_stream_write_queue_size(&c->s) > 0) {
        /* Idle, but the last answer is still going out (a big file to a slow reader): the
         * idle time starts again, and the write timeout bounds a client that stalls. */
        mux__conn_timer(c, T_IDLE, c->srv->o.idle_timeout_ns);
    } else if (kind == T_HEADER && c->len > 0 && c->state == ST_HEAD)
        mux__conn_refuse(c, 408); /* part of a head, and the rest did not come */
    else
        mux__conn_close(c); /* idle, silent since it connected, or lingering */
}

/* A connection's memory, before its stream is opened; NULL when there is none. */
static struct mux__http_conn *mux__conn_alloc(struct mux__http_srv *srv)
{
    struct mux__http_conn *c = calloc(1, sizeof *c);
    if (c && !(c->hdrs = calloc(srv->o.limits.max_headers, sizeof *c->hdrs))) {
        free(c);
        return NULL;
    }
    if (!c)
        return NULL;
    c->srv = srv;
    c->streaming = srv->o.stream_bodies != 0;
    c->s.data = c;
    c->req.headers = c->hdrs;
    c->req.headers_cap = srv->o.limits.max_headers;
    return c;
}

static void mux__conn_free_unopened(struct mux__http_conn *c)
{
    free(c->hdrs);
    free(c);
}

/* A connection whose stream was just opened on the server's loop starts reading. */
static void mux__conn_start(struct mux__http_conn *c)
{
    struct mux__http_srv *srv = c->srv;
    mux__link_insert(&srv->conns, &c->link);
    srv->nconns++;
    mux_timer_init(&c->timer, mux__conn_timeout);
    c->timer.data = c;
    mux_stream_timeouts_t to = {.write_ns = srv->o.write_timeout_ns};
    mux_stream_set_timeouts(&c->s, &to);
    mux_os_sock_t sock;
    c->peer_len = sizeof c->peer;
    if (!srv->o.on_log || mux_stream_socket(&c->s, &sock) != 0 ||
        getpeername(sock, (struct sockaddr *)&c->peer, &c->peer_len) != 0)
        c->peer_len = 0; /* no log, or no address to log */
    /* A connection that sends nothing gets the header timeout, not the idle one. */
    mux__conn_timer(c, T_HEADER, srv->o.header_timeout_ns);
    mux__conn_reading(c, 1);
}

static void mux__srv_accept(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    struct mux__http_srv *srv = l->data;
    if (status != 0) {
        mux__srv_error(srv, status); /* the listener pauses and resumes by itself */
        return;
    }
    struct mux__http_conn *c = NULL;
    if (srv->closing || srv->nconns >= srv->o.max_connections) {
        mux__sock_close(sock);
        return;
    }
    if (!(c = mux__conn_alloc(srv))) {
        mux__sock_close(sock);
        mux__srv_error(srv, -ENOMEM);
        return;
    }
    int r = mux_stream_accept(l, &c->s, sock);
    if (r != 0) {
        mux__conn_free_unopened(c);
        mux__sock_close(sock);
        mux__srv_error(srv, r);
        return;
    }
    mux__conn_start(c);
}

MUX_EXPORT int mux_http_server_adopt(mux_http_server_t *pub, mux_chan_t *ch, mux_msg_t *msg)
{
    struct mux__http_srv *srv = pub ? pub->impl_ : NULL;
    if (!srv || !ch || !msg || msg->sock == MUX_OS_SOCK_INVALID || mux_chan_loop(ch) != srv->loop)
        return -EINVAL;
    if (srv->closing)
        return -ECANCELED;
    if (srv->nconns >= srv->o.max_connections)
        return -EBUSY;
    struct mux__http_conn *c = mux__conn_alloc(srv);
    if (!c)
        return -ENOMEM;
    int r = mux_chan_stream_open(ch, &c->s, msg);
    if (r != 0) {
        mux__conn_free_unopened(c);
        return r;
    }
    mux__conn_start(c);
    return 0;
}

MUX_EXPORT int mux_http_server_init(mux_http_server_t *pub, mux_loop_t *loop,
                                    const mux_http_server_options_t *opts, mux_http_handler_cb cb)
{
    if (!pub || !loop || !cb)
        return -EINVAL;
    struct mux__http_srv *srv = calloc(1, sizeof *srv);
    if (!srv)
        return -ENOMEM;
    if (opts)
        srv->o = *opts;
    mux_http_limits_t *l = &srv->o.limits;
    if (!l->max_head)
        l->max_head = MUX_HTTP_DEFAULT_MAX_HEAD;
    if (!l->max_target)
        l->max_target = MUX_HTTP_DEFAULT_MAX_TARGET;
    if (!l->max_headers)
        l->max_headers = MUX_HTTP_DEFAULT_MAX_HEADERS;
    if (!l->max_body)
        l->max_body = MUX_HTTP_DEFAULT_MAX_BODY;
    if (!srv->o.header_timeout_ns)
        srv->o.header_timeout_ns = 10 * MUX__NS_PER_S;
    if (!srv->o.idle_timeout_ns)
        srv->o.idle_timeout_ns = 60 * MUX__NS_PER_S;
    if (!srv->o.body_timeout_ns)
        srv->o.body_timeout_ns = 10 * MUX__NS_PER_S;
    if (!srv->o.write_timeout_ns)
        srv->o.write_timeout_ns = 30 * MUX__NS_PER_S;
    if (!srv->o.handler_timeout_ns)
        srv->o.handler_timeout_ns = 60 * MUX__NS_PER_S;
    if (!srv->o.max_output)
        srv->o.max_output = 256 * 1024;
    if (!srv->o.max_requests)
        srv->o.max_requests = 1000;
    if (!srv->o.max_connections)
        srv->o.max_connections = 10000;
    srv->pool_slots = calloc(MUX__HTTP_POOL, sizeof *srv->pool_slots);
    if (!srv->pool_slots ||
        !(srv->pool_mem = mux__aligned_alloc(4096, (size_t)MUX__HTTP_POOL * MUX__HTTP_READ)) ||
        mux_bufpool_init(&srv->pool, srv->pool_mem, MUX__HTTP_READ, MUX__HTTP_POOL,
                         srv->pool_slots) != 0) {
        mux__aligned_free(srv->pool_mem);
        free(srv->pool_slots);
        free(srv);
        return -ENOMEM;
    }
    mux__link_init(&srv->conns);
    mux__link_init(&srv->dry);
    mux_timer_init(&srv->dry_timer, mux__srv_dry_cb);
    srv->dry_timer.data = srv;
    mux_timer_init(&srv->drain_timer, mux__srv_drain_end);
    srv->drain_timer.data = srv;
    srv->pub = pub;
    srv->loop = loop;
    srv->cb = cb;
    srv->date_sec = -1;
    pub->impl_ = srv;
    return 0;
}

MUX_EXPORT int mux_http_server_listen(mux_http_server_t *pub, const struct sockaddr *addr,
                                      socklen_t addrlen, const mux_listen_options_t *lopts)
{
    struct mux__http_srv *srv = pub ? pub->impl_ : NULL;
    if (!srv || srv->closing)
        return -EINVAL;
    if (srv->listening)
        return -EBUSY;
    srv->l.data = srv;
    int r = mux_listen(srv->loop, &srv->l, addr, addrlen, lopts, mux__srv_accept);
    if (r == 0)
        srv->listening = srv->lopen = 1;
    return r;
}

MUX_EXPORT int mux_http_server_address(const mux_http_server_t *pub, struct sockaddr *addr,
                                       socklen_t *len)
{
    const struct mux__http_srv *srv = pub ? pub->impl_ : NULL;
    if (!srv || !srv->listening)
        return -EINVAL;
    return mux_listener_address(&srv->l, addr, len);
}

static void mux__srv_listener_closed(mux_listener_t *l)
{
    struct mux__http_srv *srv = l->data;
    srv->lopen = 0;
    mux__srv_maybe_done(srv);
}

/* Closes every connection now; the close ends in mux__srv_maybe_done once they are closed. */
static void mux__srv_close_all(struct mux__http_srv *srv)
{
    srv->draining = 0;
    mux_timer_stop(srv->loop, &srv->drain_timer);
    srv->in_close = 1; /* no end of the close while the list is walked */
    for (struct mux__link *k = srv->conns.next, *next; k != &srv->conns; k = next) {
        next = k->next;
        struct mux__http_conn *c = mux__container_of(k, struct mux__http_conn, link);
        if (!c->closing)
            c->cause = -ECANCELED; /* what a handler holding an exchange hears */
        mux__conn_close(c);
    }
    srv->in_close = 0;
    mux__srv_maybe_done(srv); /* nothing to wait for: done now */
}

static void mux__srv_stop_listening(struct mux__http_srv *srv)
{
    if (srv->lopen && mux_listener_close(&srv->l, mux__srv_listener_closed) != 0)
        srv->lopen = 0;
}

MUX_EXPORT int mux_http_server_close(mux_http_server_t *pub, void (*cb)(mux_http_server_t *))
{
    struct mux__http_srv *srv = pub ? pub->impl_ : NULL;
    if (!srv)
        return -EINVAL;
    if (srv->closing && !srv->draining)
        return -EALREADY;
    if (!srv->draining || cb)
        srv->close_cb = cb;
    srv->closing = 1;
    mux__srv_stop_listening(srv);
    mux__srv_close_all(srv);
    return 0;
}

static void mux__srv_drain_end(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    mux__srv_close_all(t->data); /* what is left after the drain's time */
}

MUX_EXPORT int mux_http_server_drain(mux_http_server_t *pub, uint64_t timeout_ns,
                                     void (*cb)(mux_http_server_t *srv))
{
    struct mux__http_srv *srv = pub ? pub->impl_ : NULL;
    if (!srv)
        return -EINVAL;
    if (srv->closing)
        return -EALREADY;
    /* From the call, not from the loop's last turn (a drain is rare: one clock read). */
    mux_now_update(srv->loop);
    int r = mux_timer_start(srv->loop, &srv->drain_timer, timeout_ns, 0);
    if (r != 0)
        return r;
    srv->closing = srv->draining = 1;
    srv->close_cb = cb;
    mux__srv_stop_listening(srv);
    srv->in_close = 1;
    for (struct mux__link *k = srv->conns.next, *next; k != &srv->conns; k = next) {
        next = k->next;
        struct mux__http_conn *c = mux__container_of(k, struct mux__http_conn, link);
        /* A connection between requests ends now (after the answers it is sending); the
         * others end after the answer to the request they are on. */
        if (!c->closing && c->state == ST_HEAD && c->len == 0 && !c->blocked)
            mux__conn_process(c);
    }
    srv->in_close = 0;
    mux__srv_maybe_done(srv);
    return 0;
}
