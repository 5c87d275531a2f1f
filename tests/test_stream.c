/* Streams: bulk echo with content checks, half-close, resets, refused connects, back-pressure,
 * close with writes in flight, IPv6 and Unix sockets, adopted fds, socket options, timeouts,
 * read stop/start, buffer pools. Real sockets on loopback only; server and client share one
 * loop unless a case says otherwise. */
#include <fcntl.h>
#include <sys/time.h>

#include "stream_util.h"

/* ---- 64 MB echo through one connection ---- */

#define BULK_TOTAL (64ull << 20)
#define BULK_CHUNK (256u << 10)
#define BULK_INFLIGHT 4
#define BULK_POOL_SIZE 16384
#define BULK_POOL_COUNT 8

struct bulk {
    mux_stream_t s;
    mux_write_t w[BULK_INFLIGHT];
    mux_buf_t iov[BULK_INFLIGHT];
    char *wbuf[BULK_INFLIGHT];
    uint64_t queued, written, received;
    int reads, use_pool;
    volatile int closed;
    mux_bufpool_t pool;
    uint32_t slots[BULK_POOL_COUNT];
    char *pool_mem;
    char rbuf[65536];
};

static void bulk_write_cb(mux_write_t *req, int status);

static void bulk_queue_next(struct bulk *b, int slot)
{
    size_t n = BULK_TOTAL - b->queued < BULK_CHUNK ? (size_t)(BULK_TOTAL - b->queued)
                                                   : BULK_CHUNK;
    pattern_fill(b->wbuf[slot], b->queued, n);
    b->iov[slot].base = b->wbuf[slot];
    b->iov[slot].len = n;
    b->w[slot].data = b;
    b->queued += n;
    CHECK_EQ(mux_write(&b->s, &b->w[slot], &b->iov[slot], 1, bulk_write_cb), 0);
}

static void bulk_write_cb(mux_write_t *req, int status)
{
    struct bulk *b = req->data;
    int slot = (int)(req - b->w);
    CHECK_EQ(status, 0);
    b->written += b->iov[slot].len;
    if (b->queued < BULK_TOTAL)
        bulk_queue_next(b, slot);
}

static void bulk_closed_cb(mux_stream_t *s)
{
    struct bulk *b = s->data;
    CHECK_EQ(b->closed, 0);
    b->closed = 1;
}

static void bulk_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct bulk *b = s->data;
    CHECK_GT(nread, 0);
    if (b->use_pool) {
        CHECK_LE((size_t)nread, BULK_POOL_SIZE);
    } else {
        CHECK(buf == b->rbuf);
    }
    CHECK_LE(b->received + (uint64_t)nread, BULK_TOTAL);
    if (!pattern_ok(buf, b->received, (size_t)nread))
        harness_fail(__FILE__, __LINE__, "echoed bytes match what was sent", NULL);
    b->received += (uint64_t)nread;
    b->reads++;
    if (b->use_pool)
        CHECK_EQ(mux_bufpool_put(&b->pool, buf), 0);
    if (b->received == BULK_TOTAL)
        CHECK_EQ(mux_stream_close(s, bulk_closed_cb), 0);
}

static void bulk_connect_cb(mux_stream_t *s, int status)
{
    struct bulk *b = s->data;
    CHECK_EQ(status, 0);
    if (b->use_pool)
        CHECK_EQ(mux_read_start_pool(s, &b->pool, bulk_read_cb), 0);
    else
        CHECK_EQ(mux_read_start(s, b->rbuf, sizeof b->rbuf, bulk_read_cb), 0);
    for (int i = 0; i < BULK_INFLIGHT; i++)
        bulk_queue_next(b, i);
}

static void bulk_echo(int use_pool)
{
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    struct server srv;
    struct sockaddr_storage a;
    server_start(&loop, &srv, 1, &a, addr_v4(&a, 0), NULL);
    srv.close_after_accepts = 1;
    struct bulk *b = calloc(1, sizeof *b);
    CHECK(b != NULL);
    b->use_pool = use_pool;
    for (int i = 0; i < BULK_INFLIGHT; i++)
        CHECK((b->wbuf[i] = malloc(BULK_CHUNK)) != NULL);
    if (use_pool) {
        CHECK((b->pool_mem = malloc((size_t)BULK_POOL_SIZE * BULK_POOL_COUNT)) != NULL);
        CHECK_EQ(mux_bufpool_init(&b->pool, b->pool_mem, BULK_POOL_SIZE, BULK_POOL_COUNT,
                                  b->slots),
                 0);
    }
    b->s.data = b;
    CHECK_EQ(mux_stream_connect(&loop, &b->s, (struct sockaddr *)&srv.addr, srv.addrlen,
                                bulk_connect_cb),
             0);
    run_for(&loop, &b->closed, 15000, "the client got all 64 MB back");
    run_for(&loop, &srv.listener_closed, 2000, "the listener closed");
    while (srv.peers_closed < 1)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(b->written, BULK_TOTAL);
    CHECK_EQ(b->received, BULK_TOTAL);
    CHECK_EQ(srv.accepted, 1);
    CHECK_EQ(srv.peers[0].echoed, BULK_TOTAL);
    if (use_pool)
        CHECK_EQ(mux_bufpool_available(&b->pool), BULK_POOL_COUNT);
    loop_finish(&loop);
    for (int i = 0; i < BULK_INFLIGHT; i++)
        free(b->wbuf[i]);
    free(b->pool_mem);
    free(b);
    server_free(&srv);
}

TEST(stream_echo_64mb_caller_buffer_content_intact) {
    bulk_echo(0);
}

TEST(stream_echo_64mb_buffer_pool_content_intact) {
    bulk_echo(1);
}

/* ---- half-close ---- */

struct halfclose {
    mux_stream_t cli;
    mux_write_t cw, sw;
    mux_buf_t civ, siv;
    char crbuf[256], creply[256], srbuf[256], sreq[256];
    size_t ncreply, nsreq;
    int client_write_status, shutdown_calls, shutdown_status, client_eof, server_eof;
    int order; /* 1: client write cb, 2: shutdown cb */
    int write_order, shutdown_order;
    struct peer_hc {
        mux_stream_t s;
        int closed;
    } srv_s;
    mux_listener_t l;
    int listener_closed;
    volatile int client_closed, server_closed;
};

static void hc_client_closed(mux_stream_t *s)
{
    struct halfclose *h = s->data;
    h->client_closed++;
}

static void hc_server_closed(mux_stream_t *s)
{
    struct halfclose *h = s->data;
    h->server_closed++;
}

static void hc_server_write_cb(mux_write_t *req, int status)
{
    struct halfclose *h = req->data;
    CHECK_EQ(status, 0);
    CHECK_EQ(mux_stream_close(&h->srv_s.s, hc_server_closed), 0);
}

static void hc_server_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct halfclose *h = s->data;
    if (nread > 0) {
        CHECK_LE(h->nsreq + (size_t)nread, sizeof h->sreq);
        memcpy(h->sreq + h->nsreq, buf, (size_t)nread);
        h->nsreq += (size_t)nread;
        return;
    }
    CHECK_EQ(nread, 0); /* end of stream, not an error */
    h->server_eof++;
    CHECK_EQ(h->nsreq, strlen("request"));
    CHECK(memcmp(h->sreq, "request", h->nsreq) == 0);
    /* The read side is done; the write side is still open. */
    h->siv.base = (char *)"reply";
    h->siv.len = 5;
    h->sw.data = h;
    CHECK_EQ(mux_write(s, &h->sw, &h->siv, 1, hc_server_write_cb), 0);
}

static void hc_accept_cb(mux_listener_t *l, int fd, int status)
{
    struct halfclose *h = l->data;
    CHECK_EQ(status, 0);
    CHECK_GE(fd, 0);
    h->srv_s.s.data = h;
    CHECK_EQ(mux_stream_open(mux_listener_loop(l), &h->srv_s.s, fd), 0);
    CHECK_EQ(mux_read_start(&h->srv_s.s, h->srbuf, sizeof h->srbuf, hc_server_read_cb), 0);
    CHECK_EQ(mux_listener_close(l, NULL), 0);
}

static void hc_client_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct halfclose *h = s->data;
    if (nread > 0) {
        CHECK_EQ(h->client_eof, 0);
        CHECK_LE(h->ncreply + (size_t)nread, sizeof h->creply);
        memcpy(h->creply + h->ncreply, buf, (size_t)nread);
        h->ncreply += (size_t)nread;
        return;
    }
    CHECK_EQ(nread, 0);
    h->client_eof++;
    CHECK_EQ(mux_stream_close(s, hc_client_closed), 0);
}

static void hc_client_write_cb(mux_write_t *req, int status)
{
    struct halfclose *h = req->data;
    h->client_write_status = status;
    h->write_order = ++h->order;
}

static void hc_shutdown_cb(mux_stream_t *s, int status)
{
    struct halfclose *h = s->data;
    h->shutdown_calls++;
    h->shutdown_status = status;
    h->shutdown_order = ++h->order;
}

static void hc_connect_cb(mux_stream_t *s, int status)
{
    struct halfclose *h = s->data;
    CHECK_EQ(status, 0);
    h->civ.base = (char *)"request";
    h->civ.len = 7;
    h->cw.data = h;
    CHECK_EQ(mux_write(s, &h->cw, &h->civ, 1, hc_client_write_cb), 0);
    CHECK_EQ(mux_stream_shutdown(s, hc_shutdown_cb), 0);
    CHECK_EQ(mux_read_start(s, h->crbuf, sizeof h->crbuf, hc_client_read_cb), 0);
}

TEST(stream_half_close_server_reads_eof_then_replies_client_gets_reply_then_eof) {
    mux_loop_t loop;
    loop_open(&loop);
    struct halfclose h;
    memset(&h, 0, sizeof h);
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    h.l.data = &h;
    CHECK_EQ(mux_listen(&loop, &h.l, (struct sockaddr *)&a, alen, NULL, hc_accept_cb), 0);
    alen = sizeof a;
    CHECK_EQ(mux_listener_address(&h.l, (struct sockaddr *)&a, &alen), 0);
    h.cli.data = &h;
    CHECK_EQ(mux_stream_connect(&loop, &h.cli, (struct sockaddr *)&a, alen, hc_connect_cb), 0);
    run_for(&loop, &h.client_closed, 5000, "the client read the reply and end of stream");
    run_for(&loop, &h.server_closed, 2000, "the server closed");
    CHECK_EQ(h.client_write_status, 0);
    CHECK_EQ(h.shutdown_calls, 1);
    CHECK_EQ(h.shutdown_status, 0);
    CHECK_EQ(h.write_order, 1); /* the write is called back before the shutdown */
    CHECK_EQ(h.shutdown_order, 2);
    CHECK_EQ(h.server_eof, 1);
    CHECK_EQ(h.ncreply, 5);
    CHECK(memcmp(h.creply, "reply", 5) == 0);
    CHECK_EQ(h.client_eof, 1);
    CHECK_EQ(h.client_closed, 1);
    CHECK_EQ(h.server_closed, 1);
    loop_finish(&loop);
}

/* ---- peer reset while a large write is in flight ---- */

#define RST_BIG (32u << 20)

struct reset {
    mux_stream_t cli, srv;
    mux_listener_t l;
    mux_write_t w[3];
    mux_buf_t iov[3];
    char *big;
    char small[2][4096];
    char srbuf[65536];
    size_t server_read;
    int calls[3], status[3], order[3], ncalls;
    volatile int client_closed, server_closed;
};

static void rst_server_closed(mux_stream_t *s)
{
    struct reset *r = s->data;
    r->server_closed++;
}

static void rst_client_closed(mux_stream_t *s)
{
    struct reset *r = s->data;
    r->client_closed++;
}

static void rst_server_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct reset *r = s->data;
    (void)buf;
    CHECK_GT(nread, 0);
    r->server_read += (size_t)nread;
    if (r->server_read < 65536)
        return;
    struct linger lg = {1, 0}; /* close sends RST */
    CHECK_EQ(setsockopt(stream_fd(s), SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    CHECK_EQ(mux_stream_close(s, rst_server_closed), 0);
}

static void rst_accept_cb(mux_listener_t *l, int fd, int status)
{
    struct reset *r = l->data;
    CHECK_EQ(status, 0);
    r->srv.data = r;
    CHECK_EQ(mux_stream_open(mux_listener_loop(l), &r->srv, fd), 0);
    CHECK_EQ(mux_read_start(&r->srv, r->srbuf, sizeof r->srbuf, rst_server_read_cb), 0);
    CHECK_EQ(mux_listener_close(l, NULL), 0);
}

static void rst_write_cb(mux_write_t *req, int status)
{
    struct reset *r = req->data;
    int i = (int)(req - r->w);
    r->calls[i]++;
    r->status[i] = status;
    r->order[i] = ++r->ncalls;
    if (r->ncalls == 3)
        CHECK_EQ(mux_stream_close(&r->cli, rst_client_closed), 0);
}

static void rst_connect_cb(mux_stream_t *s, int status)
{
    struct reset *r = s->data;
    CHECK_EQ(status, 0);
    r->iov[0].base = r->big;
    r->iov[0].len = RST_BIG;
    for (int i = 1; i < 3; i++) {
        r->iov[i].base = r->small[i - 1];
        r->iov[i].len = sizeof r->small[i - 1];
    }
    for (int i = 0; i < 3; i++) {
        r->w[i].data = r;
        CHECK_EQ(mux_write(s, &r->w[i], &r->iov[i], 1, rst_write_cb), 0);
    }
    CHECK_GT(mux_stream_write_queue_size(s), 0);
}

TEST(stream_peer_reset_mid_write_fails_every_queued_write_once) {
    mux_loop_t loop;
    loop_open(&loop);
    struct reset *r = calloc(1, sizeof *r);
    CHECK(r != NULL);
    CHECK((r->big = malloc(RST_BIG)) != NULL);
    memset(r->big, 'r', RST_BIG);
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    r->l.data = r;
    CHECK_EQ(mux_listen(&loop, &r->l, (struct sockaddr *)&a, alen, NULL, rst_accept_cb), 0);
    alen = sizeof a;
    CHECK_EQ(mux_listener_address(&r->l, (struct sockaddr *)&a, &alen), 0);
    r->cli.data = r;
    CHECK_EQ(mux_stream_connect(&loop, &r->cli, (struct sockaddr *)&a, alen, rst_connect_cb),
             0);
    run_for(&loop, &r->client_closed, 5000, "every write was called back after the reset");
    run_for(&loop, &r->server_closed, 1000, "the server closed");
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(r->calls[i], 1);
        CHECK_EQ(r->order[i], i + 1);
        if (r->status[i] != -ECONNRESET && r->status[i] != -EPIPE)
            harness_fail_cmp(__FILE__, __LINE__, "status", "in", "{-ECONNRESET, -EPIPE}",
                             r->status[i], -ECONNRESET);
    }
    run_ms(&loop, 20);
    CHECK_EQ(r->ncalls, 3); /* and never again */
    CHECK_EQ(r->client_closed, 1);
    loop_finish(&loop);
    free(r->big);
    free(r);
}

/* ---- refused connects ---- */

struct refused {
    mux_stream_t s;
    int calls, status, close_calls;
    volatile int closed;
};

static void refused_closed_cb(mux_stream_t *s)
{
    struct refused *f = s->data;
    f->close_calls++;
    f->closed = 1;
}

static void refused_connect_cb(mux_stream_t *s, int status)
{
    struct refused *f = s->data;
    f->calls++;
    f->status = status;
    CHECK_EQ(mux_stream_close(s, refused_closed_cb), 0);
}

static void refused_run(const struct sockaddr_storage *a, socklen_t alen, int want1, int want2)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct refused f;
    memset(&f, 0, sizeof f);
    f.s.data = &f;
    CHECK_EQ(mux_stream_connect(&loop, &f.s, (const struct sockaddr *)a, alen,
                                refused_connect_cb),
             0);
    CHECK_EQ(f.calls, 0); /* never from inside the call */
    run_for(&loop, &f.closed, 3000, "the connect callback ran and the stream closed");
    CHECK_EQ(f.calls, 1);
    if (f.status != want1 && f.status != want2)
        harness_fail_cmp(__FILE__, __LINE__, "f.status", "==", "want", f.status, want1);
    CHECK_EQ(f.close_calls, 1);
    loop_finish(&loop);
}

TEST(stream_connect_tcp_port_without_listener_is_refused) {
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, closed_port(AF_INET));
    refused_run(&a, alen, -ECONNREFUSED, -ECONNREFUSED);
}

TEST(stream_connect_unix_missing_path_is_enoent) {
    char dir[64];
    tmpdir_make(dir, sizeof dir);
    char path[128];
    snprintf(path, sizeof path, "%s/missing", dir);
    struct sockaddr_storage a;
    socklen_t alen = addr_unix(&a, path);
    refused_run(&a, alen, -ENOENT, -ENOENT);
    tmpdir_remove(dir, "missing");
}

TEST(stream_connect_unix_stale_socket_file_is_refused) {
    char dir[64];
    tmpdir_make(dir, sizeof dir);
    char path[128];
    snprintf(path, sizeof path, "%s/stale", dir);
    struct sockaddr_storage a;
    socklen_t alen = addr_unix(&a, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    CHECK_EQ(bind(fd, (struct sockaddr *)&a, alen), 0);
    CHECK_EQ(listen(fd, 1), 0);
    CHECK_EQ(close(fd), 0); /* the file stays, nobody listens */
    refused_run(&a, alen, -ECONNREFUSED, -ECONNREFUSED);
    tmpdir_remove(dir, "stale");
}

/* ---- a slow reader: back-pressure, then every byte in order ---- */

#define SLOW_FIRST (16u << 20)
#define SLOW_NEXT (1u << 20)
#define SLOW_N 8 /* the first write and 7 of SLOW_NEXT */
#define SLOW_TOTAL ((uint64_t)SLOW_FIRST + (SLOW_N - 1) * (uint64_t)SLOW_NEXT)

struct slow {
    mux_stream_t cli, srv;
    mux_listener_t l;
    mux_timer_t start_reading;
    mux_write_t w[SLOW_N];
    mux_buf_t iov[SLOW_N];
    char *data; /* SLOW_TOTAL bytes of pattern, written in order */
    ssize_t qsize[SLOW_N];
    int order[SLOW_N], status[SLOW_N], calls[SLOW_N], ncalls;
    uint64_t received;
    int server_reading;
    volatile int connected, accepted, client_closed, server_closed, all_written;
    char srbuf[65536];
};

static void slow_client_closed(mux_stream_t *s)
{
    ((struct slow *)s->data)->client_closed = 1;
}

static void slow_server_closed(mux_stream_t *s)
{
    ((struct slow *)s->data)->server_closed = 1;
}

static void slow_write_cb(mux_write_t *req, int status)
{
    struct slow *w = req->data;
    int i = (int)(req - w->w);
    w->calls[i]++;
    w->status[i] = status;
    w->order[i] = ++w->ncalls;
    if (w->ncalls == SLOW_N)
        w->all_written = 1;
}

static void slow_server_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct slow *w = s->data;
    CHECK_GT(nread, 0);
    CHECK_LE(w->received + (uint64_t)nread, SLOW_TOTAL);
    if (!pattern_ok(buf, w->received, (size_t)nread))
        harness_fail(__FILE__, __LINE__, "the slow reader got the bytes in order", NULL);
    w->received += (uint64_t)nread;
    if (w->received == SLOW_TOTAL)
        CHECK_EQ(mux_stream_close(s, slow_server_closed), 0);
}

static void slow_accept_cb(mux_listener_t *l, int fd, int status)
{
    struct slow *w = l->data;
    CHECK_EQ(status, 0);
    w->srv.data = w;
    CHECK_EQ(mux_stream_open(mux_listener_loop(l), &w->srv, fd), 0);
    CHECK_EQ(mux_listener_close(l, NULL), 0);
    w->accepted = 1;
}

static void slow_connect_cb(mux_stream_t *s, int status)
{
    struct slow *w = s->data;
    CHECK_EQ(status, 0);
    uint64_t off = 0;
    for (int i = 0; i < SLOW_N; i++) {
        size_t n = i == 0 ? SLOW_FIRST : SLOW_NEXT;
        w->iov[i].base = w->data + off;
        w->iov[i].len = n;
        w->w[i].data = w;
        off += n;
        CHECK_EQ(mux_write(s, &w->w[i], &w->iov[i], 1, slow_write_cb), 0);
        w->qsize[i] = mux_stream_write_queue_size(s);
    }
    w->connected = 1;
}

TEST(stream_slow_reader_queue_grows_then_every_byte_arrives_in_order) {
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    struct slow *w = calloc(1, sizeof *w);
    CHECK(w != NULL);
    CHECK((w->data = malloc(SLOW_TOTAL)) != NULL);
    pattern_fill(w->data, 0, SLOW_TOTAL);
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    w->l.data = w;
    CHECK_EQ(mux_listen(&loop, &w->l, (struct sockaddr *)&a, alen, NULL, slow_accept_cb), 0);
    alen = sizeof a;
    CHECK_EQ(mux_listener_address(&w->l, (struct sockaddr *)&a, &alen), 0);
    w->cli.data = w;
    CHECK_EQ(mux_stream_connect(&loop, &w->cli, (struct sockaddr *)&a, alen, slow_connect_cb),
             0);
    run_for(&loop, &w->connected, 3000, "connected");
    run_for(&loop, &w->accepted, 3000, "accepted");
    /* 16 MB cannot fit in the socket buffers of a peer that does not read. */
    CHECK_GT(w->qsize[0], 0);
    CHECK_LE(w->qsize[0], SLOW_FIRST);
    /* Later writes are queued behind it, untried: the queue grows by exactly their size. */
    for (int i = 1; i < SLOW_N; i++)
        CHECK_EQ(w->qsize[i], w->qsize[i - 1] + (ssize_t)SLOW_NEXT);
    run_ms(&loop, 150);
    CHECK_EQ(w->ncalls, 0); /* nothing can finish while the peer does not read */
    ssize_t q = mux_stream_write_queue_size(&w->cli);
    CHECK_GT(q, (ssize_t)((SLOW_N - 1) * (uint64_t)SLOW_NEXT));
    CHECK_LE(q, w->qsize[SLOW_N - 1]);
    CHECK_EQ(mux_read_start(&w->srv, w->srbuf, sizeof w->srbuf, slow_server_read_cb), 0);
    run_for(&loop, &w->server_closed, 8000, "the reader got every byte");
    run_for(&loop, &w->all_written, 2000, "every write was called back");
    CHECK_EQ(w->received, SLOW_TOTAL);
    for (int i = 0; i < SLOW_N; i++) {
        CHECK_EQ(w->calls[i], 1);
        CHECK_EQ(w->status[i], 0);
        CHECK_EQ(w->order[i], i + 1);
    }
    CHECK_EQ(mux_stream_write_queue_size(&w->cli), 0);
    CHECK_EQ(mux_stream_close(&w->cli, slow_client_closed), 0);
    run_for(&loop, &w->client_closed, 1000, "the client closed");
    loop_finish(&loop);
    free(w->data);
    free(w);
}

/* ---- close with writes in flight ---- */

#define INFLIGHT_N 5

struct inflight {
    mux_stream_t s;
    mux_write_t w[INFLIGHT_N];
    mux_buf_t iov[INFLIGHT_N];
    char *big;
    int *calls, *status, *order, *ncalls, *close_calls, *close_order;
    volatile int *closed;
};

struct inflight_log {
    int calls[INFLIGHT_N], status[INFLIGHT_N], order[INFLIGHT_N], ncalls, close_calls,
        close_order;
    volatile int closed;
};

static void inflight_write_cb(mux_write_t *req, int status)
{
    struct inflight *f = req->data;
    int i = (int)(req - f->w);
    f->calls[i]++;
    f->status[i] = status;
    f->order[i] = ++*f->ncalls;
}

static void inflight_closed_cb(mux_stream_t *s)
{
    struct inflight *f = s->data;
    (*f->close_calls)++;
    *f->close_order = ++*f->ncalls;
    *f->closed = 1;
    /* The stream, its requests and their buffers are the caller's again: free them here,
     * and AddressSanitizer reports any later touch by the library. */
    free(f->big);
    free(f);
}

TEST(stream_close_cancels_unfinished_writes_in_order_before_close_cb) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct inflight_log log;
    memset(&log, 0, sizeof log);
    struct inflight *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    f->calls = log.calls;
    f->status = log.status;
    f->order = log.order;
    f->ncalls = &log.ncalls;
    f->close_calls = &log.close_calls;
    f->close_order = &log.close_order;
    f->closed = &log.closed;
    CHECK((f->big = malloc(INFLIGHT_N << 20)) != NULL);
    memset(f->big, 'c', INFLIGHT_N << 20);
    f->s.data = f;
    CHECK_EQ(mux_stream_open(&loop, &f->s, sv[0]), 0);
    for (int i = 0; i < INFLIGHT_N; i++) {
        f->iov[i].base = f->big + ((size_t)i << 20);
        f->iov[i].len = 1u << 20;
        f->w[i].data = f;
        CHECK_EQ(mux_write(&f->s, &f->w[i], &f->iov[i], 1, inflight_write_cb), 0);
    }
    run_ms(&loop, 20); /* the peer does not read: nothing can finish */
    CHECK_EQ(log.ncalls, 0);
    CHECK_GT(mux_stream_write_queue_size(&f->s), (ssize_t)(INFLIGHT_N - 1) << 20);
    CHECK_EQ(mux_stream_close(&f->s, inflight_closed_cb), 0);
    CHECK_EQ(log.ncalls, 0); /* not from inside the call */
    run_for(&loop, &log.closed, 2000, "the close callback ran");
    for (int i = 0; i < INFLIGHT_N; i++) {
        CHECK_EQ(log.calls[i], 1);
        CHECK_EQ(log.status[i], -ECANCELED);
        CHECK_EQ(log.order[i], i + 1);
    }
    CHECK_EQ(log.close_calls, 1);
    CHECK_EQ(log.close_order, INFLIGHT_N + 1);
    run_ms(&loop, 10);
    CHECK_EQ(log.ncalls, INFLIGHT_N + 1); /* nothing more */
    loop_finish(&loop);
    /* The stream closed its fd: the peer sees end of stream after the bytes already sent. */
    char buf[65536];
    ssize_t n;
    while ((n = read(sv[1], buf, sizeof buf)) > 0) {
    }
    CHECK_EQ(n, 0);
    close(sv[1]);
}

/* ---- IPv6, Unix sockets, socket options, adopted fds ---- */

static void echo_one(const struct sockaddr_storage *listen_addr, socklen_t len, const char *msg,
                     int family)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct server srv;
    server_start(&loop, &srv, 1, listen_addr, len, NULL);
    CHECK_EQ(srv.addr.ss_family, family);
    srv.close_after_accepts = 1;
    struct client c;
    client_start(&loop, &c, &srv.addr, srv.addrlen, msg);
    run_for(&loop, &c.closed, 3000, "the client got its echo");
    client_check_echoed(&c);
    while (srv.peers_closed < 1 || !srv.listener_closed)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    loop_finish(&loop);
    server_free(&srv);
}

TEST(stream_ipv6_loopback_echo) {
    if (!have_ipv6_loopback())
        SKIP("no IPv6 loopback (::1) on this machine");
    struct sockaddr_storage a;
    echo_one(&a, addr_v6(&a, 0), "hello over ::1", AF_INET6);
}

TEST(stream_unix_socket_echo) {
    char dir[64], path[128];
    tmpdir_make(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/sock", dir);
    struct sockaddr_storage a;
    echo_one(&a, addr_unix(&a, path), "hello over a Unix socket", AF_UNIX);
    tmpdir_remove(dir, "sock");
}

TEST(stream_nodelay_and_keepalive_are_enotsup_on_unix_sockets) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_stream_t s;
    CHECK_EQ(mux_stream_open(&loop, &s, sv[0]), 0);
    CHECK_EQ(mux_stream_nodelay(&s, 1), -ENOTSUP);
    CHECK_EQ(mux_stream_nodelay(&s, 0), -ENOTSUP);
    CHECK_EQ(mux_stream_keepalive(&s, 1, 30), -ENOTSUP);
    CHECK_EQ(mux_stream_keepalive(&s, 0, 0), -ENOTSUP);
    CHECK_EQ(mux_stream_close(&s, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&loop);
    close(sv[1]);
}

static int sockopt_int(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof v;
    CHECK_EQ(getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

/* A connected loopback TCP pair made with plain system calls: out[0] is the accepted end. */
static void tcp_pair(int out[2])
{
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(lfd, 0);
    CHECK_EQ(bind(lfd, (struct sockaddr *)&a, alen), 0);
    CHECK_EQ(listen(lfd, 1), 0);
    CHECK_EQ(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
    out[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(out[1], 0);
    CHECK_EQ(connect(out[1], (struct sockaddr *)&a, alen), 0);
    out[0] = accept(lfd, NULL, NULL);
    CHECK_GE(out[0], 0);
    close(lfd);
}

TEST(stream_nodelay_and_keepalive_set_the_tcp_options) {
    mux_loop_t loop;
    loop_open(&loop);
    int p[2];
    tcp_pair(p);
    mux_stream_t s;
    CHECK_EQ(mux_stream_open(&loop, &s, p[0]), 0);
    CHECK_EQ(mux_stream_nodelay(&s, 1), 0);
    CHECK_NE(sockopt_int(p[0], IPPROTO_TCP, TCP_NODELAY), 0);
    CHECK_EQ(mux_stream_nodelay(&s, 0), 0);
    CHECK_EQ(sockopt_int(p[0], IPPROTO_TCP, TCP_NODELAY), 0);
    CHECK_EQ(mux_stream_keepalive(&s, 1, 37), 0);
    CHECK_NE(sockopt_int(p[0], SOL_SOCKET, SO_KEEPALIVE), 0);
    CHECK_EQ(sockopt_int(p[0], IPPROTO_TCP, TCP_KEEPIDLE), 37);
    CHECK_EQ(mux_stream_keepalive(&s, 0, 0), 0);
    CHECK_EQ(sockopt_int(p[0], SOL_SOCKET, SO_KEEPALIVE), 0);
    CHECK_EQ(mux_stream_close(&s, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&loop);
    close(p[1]);
}

struct adopted {
    mux_stream_t s;
    mux_write_t w;
    mux_buf_t iov;
    char rbuf[64];
    int reads;
    volatile int got, written, closed;
};

static void adopted_write_cb(mux_write_t *req, int status)
{
    struct adopted *d = req->data;
    CHECK_EQ(status, 0);
    d->written = 1;
}

static void adopted_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct adopted *d = s->data;
    CHECK_EQ(nread, 4);
    CHECK(memcmp(buf, "ping", 4) == 0);
    d->reads++;
    d->got = 1;
    d->iov.base = (char *)"pong";
    d->iov.len = 4;
    d->w.data = d;
    CHECK_EQ(mux_write(s, &d->w, &d->iov, 1, adopted_write_cb), 0);
}

static void adopted_closed_cb(mux_stream_t *s)
{
    ((struct adopted *)s->data)->closed = 1;
}

TEST(stream_open_adopts_an_accepted_fd) {
    mux_loop_t loop;
    loop_open(&loop);
    int p[2];
    tcp_pair(p); /* p[0] came from accept(2): blocking */
    CHECK_EQ(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
    struct adopted d;
    memset(&d, 0, sizeof d);
    d.s.data = &d;
    CHECK_EQ(mux_stream_open(&loop, &d.s, p[0]), 0);
    CHECK(d.s.data == &d); /* data is kept */
    CHECK_NE(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
    CHECK_EQ(stream_fd(&d.s), p[0]);
    CHECK(mux_stream_loop(&d.s) == &loop);
    CHECK_EQ(mux_stream_write_queue_size(&d.s), 0);
    CHECK_EQ(mux_read_start(&d.s, d.rbuf, sizeof d.rbuf, adopted_read_cb), 0);
    CHECK_EQ(write(p[1], "ping", 4), 4);
    run_for(&loop, &d.written, 3000, "the adopted stream read and answered");
    char buf[8];
    struct timeval tv = {2, 0};
    CHECK_EQ(setsockopt(p[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    CHECK_EQ(recv(p[1], buf, sizeof buf, 0), 4);
    CHECK(memcmp(buf, "pong", 4) == 0);
    CHECK_EQ(mux_stream_close(&d.s, adopted_closed_cb), 0);
    run_for(&loop, &d.closed, 1000, "closed");
    CHECK_EQ(d.reads, 1);
    CHECK(mux_stream_loop(&d.s) == NULL);
    CHECK_EQ(recv(p[1], buf, sizeof buf, 0), 0); /* the stream closed the adopted fd */
    loop_finish(&loop);
    close(p[1]);
}

/* ---- timeouts ---- */

struct tmo {
    mux_stream_t s;
    mux_write_t w;
    mux_buf_t iov;
    mux_timer_t feeder;
    int peer, feeds;
    char *big;
    char rbuf[64];
    int reads, read_err_calls, read_err, write_calls, write_status, close_on_read_error;
    int shutdown_calls, shutdown_status;
    uint64_t t0, t_read_err, t_write, last_read_now;
    volatile int read_failed, write_done, shut, closed;
};

static void tmo_closed_cb(mux_stream_t *s)
{
    ((struct tmo *)s->data)->closed = 1;
}

static void tmo_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct tmo *t = s->data;
    (void)buf;
    if (nread > 0) {
        t->reads++;
        t->last_read_now = mux_now(mux_stream_loop(s));
        return;
    }
    t->read_err_calls++;
    t->read_err = (int)nread;
    t->t_read_err = mono_ns();
    t->read_failed = 1;
    if (t->close_on_read_error)
        CHECK_EQ(mux_stream_close(s, tmo_closed_cb), 0);
}

static void tmo_write_cb(mux_write_t *req, int status)
{
    struct tmo *t = req->data;
    t->write_calls++;
    t->write_status = status;
    t->t_write = mono_ns();
    t->write_done = 1;
}

static void tmo_open(mux_loop_t *loop, struct tmo *t, const mux_stream_timeouts_t *to)
{
    memset(t, 0, sizeof *t);
    int sv[2];
    make_socketpair(sv);
    t->peer = sv[1];
    t->s.data = t;
    CHECK_EQ(mux_stream_open(loop, &t->s, sv[0]), 0);
    CHECK_EQ(mux_now_update(loop), 0);
    CHECK_EQ(mux_stream_set_timeouts(&t->s, to), 0);
    t->t0 = mux_now(loop);
}

/* Queues a write that cannot finish: 8 MB into a socket pair whose peer does not read. */
static void tmo_write_stuck(struct tmo *t)
{
    CHECK((t->big = malloc(8u << 20)) != NULL);
    memset(t->big, 't', 8u << 20);
    t->iov.base = t->big;
    t->iov.len = 8u << 20;
    t->w.data = t;
    CHECK_EQ(mux_write(&t->s, &t->w, &t->iov, 1, tmo_write_cb), 0);
}

static void tmo_done(mux_loop_t *loop, struct tmo *t)
{
    if (!t->closed) {
        CHECK_EQ(mux_stream_close(&t->s, tmo_closed_cb), 0);
        run_for(loop, &t->closed, 1000, "closed");
    }
    loop_finish(loop);
    close(t->peer);
    free(t->big);
}

/* Never early; late by at most `slack_ms` (a loaded machine, sanitizers). */
static void check_on_time(uint64_t from, uint64_t at, uint64_t want_ms, uint64_t slack_ms)
{
    CHECK_GE(at - from, want_ms * MS);
    CHECK_LE(at - from, (want_ms + slack_ms) * MS);
}

TEST(stream_idle_timeout_fails_the_read_with_etimedout_on_time) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.idle_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    t.close_on_read_error = 1;
    CHECK_EQ(mux_read_start(&t.s, t.rbuf, sizeof t.rbuf, tmo_read_cb), 0);
    run_for(&loop, &t.closed, 3000, "the idle timeout fired");
    CHECK_EQ(t.read_err_calls, 1);
    CHECK_EQ(t.read_err, -ETIMEDOUT);
    CHECK_EQ(t.reads, 0);
    check_on_time(t.t0, t.t_read_err, 100, 400);
    tmo_done(&loop, &t);
}

static void tmo_feed_cb(mux_loop_t *loop, mux_timer_t *tm)
{
    struct tmo *t = tm->data;
    write_byte(t->peer);
    if (++t->feeds == 5)
        CHECK_EQ(mux_timer_stop(loop, tm), 0);
}

TEST(stream_read_timeout_restarts_with_every_read) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.read_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    t.close_on_read_error = 1;
    CHECK_EQ(mux_read_start(&t.s, t.rbuf, sizeof t.rbuf, tmo_read_cb), 0);
    /* A byte every 40 ms for 200 ms: twice the timeout in total, never 100 ms of silence. */
    CHECK_EQ(mux_timer_init(&t.feeder, tmo_feed_cb), 0);
    t.feeder.data = &t;
    CHECK_EQ(mux_timer_start(&loop, &t.feeder, 40 * MS, 40 * MS), 0);
    run_for(&loop, &t.closed, 3000, "the read timeout fired after the last byte");
    CHECK_EQ(t.reads, 5);
    CHECK_EQ(t.read_err_calls, 1);
    CHECK_EQ(t.read_err, -ETIMEDOUT);
    check_on_time(t.last_read_now, t.t_read_err, 100, 400);
    tmo_done(&loop, &t);
}

TEST(stream_write_timeout_fails_a_stuck_write_with_etimedout) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.write_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    tmo_write_stuck(&t);
    run_for(&loop, &t.write_done, 3000, "the write timeout fired");
    CHECK_EQ(t.write_calls, 1);
    CHECK_EQ(t.write_status, -ETIMEDOUT);
    check_on_time(t.t0, t.t_write, 100, 400);
    CHECK_EQ(mux_stream_write_queue_size(&t.s), 0);
    tmo_done(&loop, &t);
}

/* The contract: when a timeout expires, the read callback gets -ETIMEDOUT and queued
 * writes fail with -ETIMEDOUT. Both must be delivered, also when nobody closes the stream. */
TEST(stream_write_timeout_while_reading_calls_back_both_read_and_write) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.write_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    CHECK_EQ(mux_read_start(&t.s, t.rbuf, sizeof t.rbuf, tmo_read_cb), 0);
    tmo_write_stuck(&t);
    run_for(&loop, &t.read_failed, 3000, "the read callback got the timeout");
    CHECK_EQ(t.read_err, -ETIMEDOUT);
    run_for(&loop, &t.write_done, 1000, "the write callback got the timeout");
    CHECK_EQ(t.write_calls, 1);
    CHECK_EQ(t.write_status, -ETIMEDOUT);
    check_on_time(t.t0, t.t_write, 100, 400);
    tmo_done(&loop, &t);
}

TEST(stream_write_timeout_is_not_delayed_by_a_longer_idle_timeout) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.idle_ns = 3000 * MS, .write_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    tmo_write_stuck(&t);
    run_for(&loop, &t.write_done, 2000, "the 100 ms write timeout fired (idle is 3 s)");
    CHECK_EQ(t.write_status, -ETIMEDOUT);
    check_on_time(t.t0, t.t_write, 100, 400);
    tmo_done(&loop, &t);
}

/* ---- read stop and start ---- */

struct rss {
    mux_stream_t s;
    char buf1[16], buf2[16];
    int calls;
    char seen[3][8];
    char *where[3];
    volatile int got;
};

static void rss_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct rss *r = s->data;
    CHECK_EQ(nread, 4);
    CHECK_LT(r->calls, 3);
    memcpy(r->seen[r->calls], buf, 4);
    r->where[r->calls] = buf;
    r->calls++;
    r->got = 1;
    if (r->calls == 1) {
        /* Restarting from inside the callback is allowed and switches buffers. */
        CHECK_EQ(mux_read_stop(s), 0);
        CHECK_EQ(mux_read_start(s, r->buf2, sizeof r->buf2, rss_read_cb), 0);
        CHECK_EQ(mux_read_start(s, r->buf2, sizeof r->buf2, rss_read_cb), -EBUSY);
    } else if (r->calls == 2) {
        CHECK_EQ(mux_read_stop(s), 0);
        CHECK_EQ(mux_read_stop(s), 0); /* stopping twice is fine */
    }
}

TEST(stream_read_stop_and_start_inside_the_read_callback) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct rss r;
    memset(&r, 0, sizeof r);
    r.s.data = &r;
    CHECK_EQ(mux_stream_open(&loop, &r.s, sv[0]), 0);
    CHECK_EQ(mux_read_start(&r.s, r.buf1, sizeof r.buf1, rss_read_cb), 0);
    CHECK_EQ(write(sv[1], "aaaa", 4), 4);
    run_for(&loop, &r.got, 2000, "first read");
    r.got = 0;
    CHECK_EQ(write(sv[1], "bbbb", 4), 4);
    run_for(&loop, &r.got, 2000, "second read, into the new buffer");
    r.got = 0;
    CHECK_EQ(write(sv[1], "cccc", 4), 4);
    run_ms(&loop, 50);
    CHECK_EQ(r.calls, 2); /* stopped: the pending bytes wait */
    CHECK_EQ(mux_read_start(&r.s, r.buf1, sizeof r.buf1, rss_read_cb), 0);
    run_for(&loop, &r.got, 2000, "third read after the restart");
    CHECK_EQ(r.calls, 3);
    CHECK(memcmp(r.seen[0], "aaaa", 4) == 0);
    CHECK(memcmp(r.seen[1], "bbbb", 4) == 0);
    CHECK(memcmp(r.seen[2], "cccc", 4) == 0);
    CHECK(r.where[0] == r.buf1);
    CHECK(r.where[1] == r.buf2);
    CHECK(r.where[2] == r.buf1);
    CHECK_EQ(mux_stream_close(&r.s, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&loop);
    close(sv[1]);
}

/* ---- buffer pools ---- */

struct pooled {
    mux_stream_t s;
    mux_bufpool_t pool;
    char mem[2 * 4];
    uint32_t slots[2];
    char *held[8];
    int nheld, put_back, calls, enobufs, eof;
    char data[32];
    size_t ndata;
    volatile int stopped;
};

static void pooled_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct pooled *p = s->data;
    p->calls++;
    if (nread == -ENOBUFS) {
        CHECK(buf == NULL);
        p->enobufs++;
        p->stopped = 1;
        return;
    }
    if (nread == 0) {
        p->eof++;
        p->stopped = 1;
        return;
    }
    CHECK_GT(nread, 0);
    CHECK(buf >= p->mem && buf < p->mem + sizeof p->mem);
    CHECK_LE(p->ndata + (size_t)nread, sizeof p->data);
    memcpy(p->data + p->ndata, buf, (size_t)nread);
    p->ndata += (size_t)nread;
    if (p->put_back) {
        CHECK_EQ(mux_bufpool_put(&p->pool, buf), 0);
    } else {
        CHECK_LT(p->nheld, 8);
        p->held[p->nheld++] = buf;
    }
}

TEST(stream_pool_runs_dry_with_enobufs_and_reading_resumes_after_put) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct pooled p;
    memset(&p, 0, sizeof p);
    CHECK_EQ(mux_bufpool_init(&p.pool, p.mem, 4, 2, p.slots), 0);
    CHECK_EQ(mux_bufpool_available(&p.pool), 2);
    p.s.data = &p;
    CHECK_EQ(mux_stream_open(&loop, &p.s, sv[0]), 0);
    CHECK_EQ(mux_read_start_pool(&p.s, &p.pool, pooled_read_cb), 0);
    CHECK_EQ(write(sv[1], "0123456789ABCDEF", 16), 16);
    /* The callback keeps both buffers: the third read finds the pool empty. */
    run_for(&loop, &p.stopped, 2000, "the pool ran dry");
    CHECK_EQ(p.calls, 3);
    CHECK_EQ(p.enobufs, 1);
    CHECK_EQ(p.nheld, 2);
    CHECK_EQ(p.ndata, 8);
    CHECK(memcmp(p.data, "01234567", 8) == 0);
    CHECK(p.held[0] != p.held[1]);
    CHECK_EQ(mux_bufpool_available(&p.pool), 0);
    run_ms(&loop, 30);
    CHECK_EQ(p.calls, 3); /* reading has stopped */
    CHECK_EQ(mux_bufpool_put(&p.pool, p.held[0]), 0);
    CHECK_EQ(mux_bufpool_put(&p.pool, p.held[1]), 0);
    CHECK_EQ(mux_bufpool_available(&p.pool), 2);
    p.put_back = 1;
    p.stopped = 0;
    CHECK_EQ(mux_read_start_pool(&p.s, &p.pool, pooled_read_cb), 0);
    CHECK_EQ(shutdown(sv[1], SHUT_WR), 0);
    run_for(&loop, &p.stopped, 2000, "the rest and end of stream");
    CHECK_EQ(p.eof, 1);
    CHECK_EQ(p.enobufs, 1);
    CHECK_EQ(p.ndata, 16);
    CHECK(memcmp(p.data, "0123456789ABCDEF", 16) == 0);
    CHECK_EQ(mux_bufpool_available(&p.pool), 2); /* end of stream kept no buffer */
    CHECK_EQ(mux_stream_close(&p.s, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&loop);
    close(sv[1]);
}

struct poolonly {
    mux_stream_t s;
    mux_bufpool_t pool;
    char arena[16]; /* the pool's two 4-byte buffers are arena[4..12) */
    uint32_t slots[2];
    char *got;
    volatile int read;
};

static void poolonly_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct poolonly *p = s->data;
    CHECK_EQ(nread, 4);
    CHECK(memcmp(buf, "wxyz", 4) == 0);
    p->got = buf;
    p->read = 1;
    CHECK_EQ(mux_read_stop(s), 0);
}

TEST(stream_bufpool_put_rejects_foreign_misaligned_and_double_freed_pointers) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct poolonly p;
    memset(&p, 0, sizeof p);
    char *mem = p.arena + 4;
    CHECK_EQ(mux_bufpool_init(&p.pool, mem, 4, 2, p.slots), 0);
    p.s.data = &p;
    CHECK_EQ(mux_stream_open(&loop, &p.s, sv[0]), 0);
    CHECK_EQ(mux_read_start_pool(&p.s, &p.pool, poolonly_read_cb), 0);
    CHECK_EQ(write(sv[1], "wxyz", 4), 4);
    run_for(&loop, &p.read, 2000, "a read from the pool");
    CHECK(p.got == mem || p.got == mem + 4);
    CHECK_EQ(mux_bufpool_available(&p.pool), 1);
    char *other = p.got == mem ? mem + 4 : mem; /* never handed out: free */
    char foreign[4];
    CHECK_EQ(mux_bufpool_put(&p.pool, foreign), -EINVAL);
    CHECK_EQ(mux_bufpool_put(&p.pool, p.arena), -EINVAL);    /* below the pool */
    CHECK_EQ(mux_bufpool_put(&p.pool, mem + 8), -EINVAL);    /* just past its end */
    CHECK_EQ(mux_bufpool_put(&p.pool, p.got + 1), -EINVAL);  /* inside a buffer */
    CHECK_EQ(mux_bufpool_put(&p.pool, other), -EINVAL);      /* free already */
    CHECK_EQ(mux_bufpool_put(&p.pool, NULL), -EINVAL);
    CHECK_EQ(mux_bufpool_put(NULL, p.got), -EINVAL);
    CHECK_EQ(mux_bufpool_available(&p.pool), 1);             /* none of that counted */
    CHECK_EQ(mux_bufpool_put(&p.pool, p.got), 0);
    CHECK_EQ(mux_bufpool_available(&p.pool), 2);
    CHECK_EQ(mux_bufpool_put(&p.pool, p.got), -EINVAL);      /* double free */
    CHECK_EQ(mux_bufpool_available(&p.pool), 2);
    CHECK_EQ(mux_stream_close(&p.s, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&loop);
    close(sv[1]);
}

/* ---- many iovecs, empty ones among them ---- */

#define IOV_N 200

struct iovw {
    mux_stream_t s;
    mux_write_t w[2];
    mux_buf_t iov[IOV_N];
    char *data;
    size_t total;
    int calls[2], status[2], ncalls;
    volatile int done;
};

static void iovw_cb(mux_write_t *req, int status)
{
    struct iovw *v = req->data;
    int i = (int)(req - v->w);
    v->calls[i]++;
    v->status[i] = status;
    if (++v->ncalls == 2)
        v->done = 1;
}

TEST(stream_write_of_many_iovecs_with_empty_ones_arrives_intact) {
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct iovw *v = calloc(1, sizeof *v);
    CHECK(v != NULL);
    /* Lengths 0, 1, 2, ... up to ~40 KB with every seventh empty: more iovecs than one
     * sendmsg takes, and more bytes than the socket buffer, so partial writes split them. */
    size_t lens[IOV_N];
    for (int i = 0; i < IOV_N; i++) {
        lens[i] = i % 7 == 3 ? 0 : (size_t)(i * 211 % 40000);
        v->total += lens[i];
    }
    CHECK((v->data = malloc(v->total)) != NULL);
    pattern_fill(v->data, 0, v->total);
    size_t off = 0;
    for (int i = 0; i < IOV_N; i++) {
        v->iov[i].base = v->data + off;
        v->iov[i].len = lens[i];
        off += lens[i];
    }
    v->s.data = v;
    CHECK_EQ(mux_stream_open(&loop, &v->s, sv[0]), 0);
    v->w[0].data = v->w[1].data = v;
    CHECK_EQ(mux_write(&v->s, &v->w[0], v->iov, IOV_N, iovw_cb), 0);
    CHECK_EQ(mux_write(&v->s, &v->w[1], v->iov, 0, iovw_cb), 0); /* nothing to write */
    char *got = malloc(v->total);
    CHECK(got != NULL);
    size_t ngot = 0;
    uint64_t end = mono_ns() + 5000 * MS;
    while (ngot < v->total || !v->done) {
        ssize_t n = read(sv[1], got + ngot, v->total - ngot);
        if (n > 0)
            ngot += (size_t)n;
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(ngot, v->total);
    CHECK(pattern_ok(got, 0, ngot));
    CHECK_EQ(v->calls[0], 1);
    CHECK_EQ(v->calls[1], 1);
    CHECK_EQ(v->status[0], 0);
    CHECK_EQ(v->status[1], 0);
    CHECK_EQ(mux_stream_close(&v->s, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&loop);
    close(sv[1]);
    free(got);
    free(v->data);
    free(v);
}

/* ---- when callbacks run ---- */

struct when {
    mux_stream_t s;
    mux_write_t w;
    mux_buf_t iov;
    char rbuf[16];
    int write_calls, write_status, close_calls;
    volatile int written, closed;
};

static void when_write_cb(mux_write_t *req, int status)
{
    struct when *x = req->data;
    x->write_calls++;
    x->write_status = status;
    x->written = 1;
}

static void when_closed_cb(mux_stream_t *s)
{
    struct when *x = s->data;
    x->close_calls++;
    x->closed = 1;
}

static void when_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    (void)s;
    (void)nread;
    (void)buf;
}

TEST(stream_write_and_close_callbacks_never_run_inside_the_call) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct when x;
    memset(&x, 0, sizeof x);
    x.s.data = &x;
    CHECK_EQ(mux_stream_open(&loop, &x.s, sv[0]), 0);
    x.iov.base = (char *)"abc";
    x.iov.len = 3;
    x.w.data = &x;
    CHECK_EQ(mux_write(&x.s, &x.w, &x.iov, 1, when_write_cb), 0);
    CHECK_EQ(x.write_calls, 0); /* written already (speculative), called back later */
    /* io_uring: the send goes to the kernel with the loop's next wait */
    CHECK_EQ(mux_stream_write_queue_size(&x.s), native_streams(&loop) ? 3 : 0);
    run_for(&loop, &x.written, 1000, "the write callback");
    CHECK_EQ(x.write_calls, 1);
    CHECK_EQ(x.write_status, 0);
    CHECK_EQ(mux_stream_close(&x.s, when_closed_cb), 0);
    CHECK_EQ(x.close_calls, 0);
    run_for(&loop, &x.closed, 1000, "the close callback");
    CHECK_EQ(x.close_calls, 1);
    loop_finish(&loop);
    char buf[8];
    CHECK_EQ(read(sv[1], buf, sizeof buf), 3);
    close(sv[1]);
}

/* A write that finished at once is waiting for delivery; stopping the reads before the loop
 * runs must not lose its callback (every queued write is called back exactly once). */
TEST(stream_finished_write_is_called_back_after_read_stop_outside_callbacks) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct when x;
    memset(&x, 0, sizeof x);
    x.s.data = &x;
    CHECK_EQ(mux_stream_open(&loop, &x.s, sv[0]), 0);
    CHECK_EQ(mux_read_start(&x.s, x.rbuf, sizeof x.rbuf, when_read_cb), 0);
    x.iov.base = (char *)"abc";
    x.iov.len = 3;
    x.w.data = &x;
    CHECK_EQ(mux_write(&x.s, &x.w, &x.iov, 1, when_write_cb), 0);
    CHECK_EQ(mux_read_stop(&x.s), 0);
    run_for(&loop, &x.written, 1000, "the write callback after mux_read_stop");
    CHECK_EQ(x.write_calls, 1);
    CHECK_EQ(x.write_status, 0);
    CHECK_EQ(mux_stream_close(&x.s, when_closed_cb), 0);
    run_for(&loop, &x.closed, 1000, "the close callback");
    loop_finish(&loop);
    close(sv[1]);
}

TEST(stream_loop_close_is_ebusy_until_the_stream_close_callback_ran) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct when x;
    memset(&x, 0, sizeof x);
    x.s.data = &x;
    CHECK_EQ(mux_stream_open(&loop, &x.s, sv[0]), 0);
    CHECK_EQ(mux_loop_close(&loop), -EBUSY); /* an idle open stream counts */
    CHECK_EQ(mux_stream_close(&x.s, when_closed_cb), 0);
    CHECK_EQ(mux_loop_close(&loop), -EBUSY); /* closing, its callback has not run */
    run_for(&loop, &x.closed, 1000, "the close callback");
    CHECK_EQ(x.close_calls, 1);
    loop_finish(&loop);
    close(sv[1]);
}

/* ---- shutdown behind writes that fail ---- */

static void tmo_shutdown_cb(mux_stream_t *s, int status)
{
    struct tmo *t = s->data;
    t->shutdown_calls++;
    t->shutdown_status = status;
    t->shut = 1;
}

/* A shutdown waits for the queued writes; when they fail (here by the write timeout) the
 * shutdown callback must still run, once, without the stream being closed first. */
TEST(stream_shutdown_callback_runs_when_the_writes_before_it_time_out) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.write_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    tmo_write_stuck(&t);
    CHECK_EQ(mux_stream_shutdown(&t.s, tmo_shutdown_cb), 0);
    run_for(&loop, &t.write_done, 3000, "the write timeout fired");
    CHECK_EQ(t.write_status, -ETIMEDOUT);
    run_for(&loop, &t.shut, 1000, "the shutdown callback ran after the failed write");
    CHECK_EQ(t.shutdown_calls, 1);
    tmo_done(&loop, &t);
}
