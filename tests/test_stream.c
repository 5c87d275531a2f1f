/* SPDX-License-Identifier: MIT */
/* Streams: their life cycle. Connects over TCP, IPv6 and Unix sockets (refused ones and
 * missing paths included), adopted fds, bulk echo with content checks, half-close, peer
 * resets, closing with writes in flight, socket options, and a fork with open streams.
 * Reading, writing, timeouts and buffer pools have files of their own. Real sockets on
 * loopback only; server and client share one loop unless a case says otherwise. */
#include <fcntl.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "stream_util.h"

/* ---- 64 MB echo through one connection ---- */

#define BULK_TOTAL      (64ull << 20)
#define BULK_CHUNK      (256u << 10)
#define BULK_INFLIGHT   4
#define BULK_POOL_SIZE  16384
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
    size_t n = BULK_TOTAL - b->queued < BULK_CHUNK ? (size_t)(BULK_TOTAL - b->queued) : BULK_CHUNK;
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
        CHECK_EQ(mux_bufpool_init(&b->pool, b->pool_mem, BULK_POOL_SIZE, BULK_POOL_COUNT, b->slots),
                 0);
    }
    b->s.data = b;
    CHECK_EQ(mux_stream_connect(&loop, &b->s, (struct sockaddr *)&srv.addr, srv.addrlen,
                                bulk_connect_cb),
             0);
#ifdef _WIN32
    harness_watchdog(110); /* under Wine, 64 MB take seconds, more on a loaded machine */
    run_for(&loop, &b->closed, 90000, "the client got all 64 MB back");
#else
    run_for(&loop, &b->closed, 15000, "the client got all 64 MB back");
#endif
    run_for(&loop, &srv.listener_closed, 2000, "the listener closed");
    run_for(&loop, (volatile int *)&srv.peers_closed, 2000, "the server's stream closed");
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

static void hc_accept_cb(mux_listener_t *l, mux_os_sock_t fd, int status)
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

static void rst_accept_cb(mux_listener_t *l, mux_os_sock_t fd, int status)
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
    CHECK_EQ(mux_stream_connect(&loop, &r->cli, (struct sockaddr *)&a, alen, rst_connect_cb), 0);
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
    CHECK_EQ(mux_stream_connect(&loop, &f.s, (const struct sockaddr *)a, alen, refused_connect_cb),
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
    tmpdir_make_unix(dir, sizeof dir);
    char path[128];
    snprintf(path, sizeof path, "%s/missing", dir);
    struct sockaddr_storage a;
    socklen_t alen = addr_unix(&a, path);
    refused_run(&a, alen, -ENOENT, -ENOENT);
    tmpdir_remove(dir, "missing");
}

TEST(stream_connect_unix_stale_socket_file_is_refused) {
    char dir[64];
    tmpdir_make_unix(dir, sizeof dir);
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
    int calls[INFLIGHT_N], status[INFLIGHT_N], order[INFLIGHT_N], ncalls, close_calls, close_order;
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
    run_for(&loop, (volatile int *)&srv.peers_closed, 2000, "the server's stream closed");
    run_for(&loop, &srv.listener_closed, 2000, "the listener closed");
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
    tmpdir_make_unix(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/sock", dir);
    struct sockaddr_storage a;
    echo_one(&a, addr_unix(&a, path), "hello over a Unix socket", AF_UNIX);
    tmpdir_remove(dir, "sock");
}

TEST(stream_nodelay_and_keepalive_are_enotsup_on_unix_sockets) {
#ifdef _WIN32
    SKIP("Wine does not implement AF_UNIX sockets (Windows 10 has them; Wine's socket() "
         "refuses the family with WSAEAFNOSUPPORT)");
#endif
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
#ifdef _WIN32
    int v = 0; /* Wine writes one byte for a boolean option */
#else
    int v = -1;
#endif
    socklen_t len = sizeof v;
    CHECK_EQ(getsockopt(fd, level, name, &v, &len), 0);
    return v;
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
#ifndef _WIN32 /* Wine cannot read TCP_KEEPIDLE back */
    CHECK_EQ(sockopt_int(p[0], IPPROTO_TCP, TCP_KEEPIDLE), 37);
#endif
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
#ifndef _WIN32 /* Windows cannot tell whether a socket blocks */
    CHECK_EQ(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
#endif
    struct adopted d;
    memset(&d, 0, sizeof d);
    d.s.data = &d;
    CHECK_EQ(mux_stream_open(&loop, &d.s, p[0]), 0);
    CHECK(d.s.data == &d); /* data is kept */
#ifndef _WIN32
    CHECK_NE(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
#endif
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

/* ---- fork: a child closes every stream before its first mux_run ---- */

/* The child must not touch the parent's SQ ring (io_uring), and the parent's streams go on
 * reading. On io_uring this failed before c2ca5a2; the other backends passed. */

#define FK_N     300
#define FK_SIZE  256
#define FK_COUNT 512
#define FK_MSG   80

struct fk;

struct fks {
    mux_stream_t s;
    struct fk *f;
    int peer;
    char want[FK_MSG];
    size_t wantlen;
    char got[FK_SIZE];
    size_t ngot;
    int reads, close_calls;
};

struct fk {
    struct fks st[FK_N];
    mux_bufpool_t pool;
    uint32_t slots[FK_COUNT];
    char *mem;
    int in_child;
    int child_reads, child_closed, child_close_twice;
    int complete; /* streams with all their message */
    int closed;
};

static void fk_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct fks *x = s->data;
    struct fk *f = x->f;
    if (f->in_child) { /* the child closed everything before it ran: nothing may come */
        f->child_reads++;
        if (nread > 0 && in_pool(buf, f->mem, FK_SIZE, FK_COUNT))
            mux_bufpool_put(&f->pool, buf);
        return;
    }
    CHECK_GT(nread, 0);
    CHECK(in_pool(buf, f->mem, FK_SIZE, FK_COUNT));
    CHECK_LE(x->ngot + (size_t)nread, x->wantlen); /* nothing more than its message */
    memcpy(x->got + x->ngot, buf, (size_t)nread);
    x->ngot += (size_t)nread;
    x->reads++;
    CHECK_EQ(mux_bufpool_put(&f->pool, buf), 0);
    if (x->ngot == x->wantlen) {
        if (memcmp(x->got, x->want, x->wantlen) != 0)
            harness_fail(__FILE__, __LINE__, "each stream reads exactly its own message", x->got);
        f->complete++;
    }
}

static void fk_closed_cb(mux_stream_t *s)
{
    struct fks *x = s->data;
    struct fk *f = x->f;
    if (f->in_child) {
        if (x->close_calls++ == 0)
            f->child_closed++;
        else
            f->child_close_twice++;
        return;
    }
    x->close_calls++;
    CHECK_EQ(x->close_calls, 1);
    f->closed++;
}

/* What the child saw, as bits of its exit status (0: all well). */
enum {
    FKC_CLOSE_REFUSED = 1, /* mux_stream_close did not return 0 */
    FKC_RUN_ERROR = 2,     /* mux_run failed */
    FKC_TIMEOUT = 4,       /* the close callbacks did not all come within 5 s */
    FKC_READ = 8,          /* a read callback ran in the child */
    FKC_TWICE = 16,        /* a close callback ran twice */
    FKC_POOL = 32,         /* the pool is not whole after the closes */
    FKC_LOOP_CLOSE = 64,   /* the child's loop did not close clean */
};

static _Noreturn void fk_child_side(mux_loop_t *loop, struct fk *f)
{
    alarm(10); /* the harness's alarm is not inherited; its handler exits 1 */
    f->in_child = 1;
    int code = 0;
    /* Before any mux_run of the child: the ring the loop still holds is the parent's. */
    for (int i = 0; i < FK_N; i++)
        if (mux_stream_close(&f->st[i].s, fk_closed_cb) != 0)
            code |= FKC_CLOSE_REFUSED;
    uint64_t end = mono_ns() + 5000 * MS;
    while (f->child_closed < FK_N) {
        if (mux_run(loop, MUX_RUN_NOWAIT) < 0) {
            code |= FKC_RUN_ERROR;
            break;
        }
        if (mono_ns() > end) {
            code |= FKC_TIMEOUT;
            break;
        }
    }
    if (f->child_reads)
        code |= FKC_READ;
    if (f->child_close_twice)
        code |= FKC_TWICE;
    if (mux_bufpool_available(&f->pool) != FK_COUNT)
        code |= FKC_POOL;
    if (!(code & (FKC_TIMEOUT | FKC_RUN_ERROR)) &&
        (mux_run(loop, MUX_RUN_NOWAIT) != 0 || mux_loop_close(loop) != 0))
        code |= FKC_LOOP_CLOSE;
    child_exit(code);
}

TEST(fork_child_closes_streams_before_running_parent_keeps_serving) {
    if (raise_nofile_limit() < 2 * FK_N + 64)
        SKIP("RLIMIT_NOFILE too low for 300 socketpairs");
    mux_loop_t loop;
    loop_open(&loop);
    struct fk *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    f->mem = page_alloc((size_t)FK_SIZE * FK_COUNT);
    CHECK_EQ(mux_bufpool_init(&f->pool, f->mem, FK_SIZE, FK_COUNT, f->slots), 0);
    uint64_t st = 0x5eed;
    for (int i = 0; i < FK_N; i++) {
        struct fks *x = &f->st[i];
        int sv[2];
        make_socketpair(sv);
        x->f = f;
        x->peer = sv[1];
        x->s.data = x;
        /* A distinct message of a distinct length (20 to 75 bytes). */
        int n = snprintf(x->want, sizeof x->want, "stream %03d: ", i);
        CHECK_GT(n, 0);
        for (size_t j = (size_t)n; j < sizeof x->want; j++)
            x->want[j] = (char)('a' + prng_next(&st) % 26);
        x->wantlen = 20 + (size_t)(i * 7 % 56);
        CHECK_LE(x->wantlen, sizeof x->want);
        CHECK_EQ(mux_stream_open(&loop, &x->s, sv[0]), 0);
        CHECK_EQ(mux_read_start_pool(&x->s, &f->pool, fk_read_cb), 0);
    }
    /* One iteration: the receives (or polls) are in the kernel before the fork. */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), FK_N);
    CHECK_EQ(f->complete, 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0)
        fk_child_side(&loop, f);
    int status = 0;
    pid_t w;
    do
        w = waitpid(pid, &status, 0);
    while (w < 0 && errno == EINTR);
    CHECK_EQ(w, pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr,
                "child: %s %d (bits: 1 close refused, 2 run error, 4 timeout, 8 read, "
                "16 closed twice, 32 pool, 64 loop close)\n",
                WIFEXITED(status) ? "exit" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    /* The parent's streams still read, each exactly its own message. */
    for (int i = 0; i < FK_N; i++)
        write_all(f->st[i].peer, f->st[i].want, f->st[i].wantlen);
    mux_timer_t tick;
    CHECK_EQ(mux_timer_init(&tick, ticker_cb), 0);
    CHECK_EQ(mux_timer_start(&loop, &tick, 5 * MS, 5 * MS), 0);
    uint64_t end = mono_ns() + 5000 * MS;
    while (f->complete < FK_N) {
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
        if (f->complete < FK_N && mono_ns() > end) {
            int stuck = 0;
            for (int i = 0; i < FK_N; i++)
                stuck += f->st[i].ngot < f->st[i].wantlen;
            fprintf(stderr, "%d of %d streams never got their message\n", stuck, FK_N);
            harness_fail(__FILE__, __LINE__, "every stream of the parent reads its message",
                         "not within 5 s");
        }
    }
    run_ms(&loop, 20); /* and nothing more */
    CHECK_EQ(mux_timer_stop(&loop, &tick), 0);
    CHECK_EQ(f->complete, FK_N);
    for (int i = 0; i < FK_N; i++) {
        CHECK_EQ(f->st[i].ngot, f->st[i].wantlen);
        CHECK_GE(f->st[i].reads, 1);
    }
    CHECK_EQ(mux_bufpool_available(&f->pool), FK_COUNT);
    for (int i = 0; i < FK_N; i++)
        CHECK_EQ(mux_stream_close(&f->st[i].s, fk_closed_cb), 0);
    end = mono_ns() + 2000 * MS;
    while (f->closed < FK_N) {
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(mux_bufpool_available(&f->pool), FK_COUNT);
    loop_finish(&loop);
    for (int i = 0; i < FK_N; i++)
        close(f->st[i].peer);
    free(f->mem);
    free(f);
}

static void once_closed_cb(mux_stream_t *s)
{
    ++*(int *)s->data;
}

static void once_timer_cb(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    ++*(int *)t->data;
}

/* The fault sweep found MUX_RUN_ONCE sleeping after the close callbacks it had just run:
 * with nothing else to happen, until a timer (here 10 s) woke it. Callbacks that were due
 * are that run's events, as in libuv's UV_RUN_ONCE: the run does not block after them. */
TEST(stream_run_once_returns_after_the_close_callbacks_without_blocking) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2], closed = 0, fired = 0;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    mux_stream_t a, b;
    a.data = b.data = &closed;
    CHECK_EQ(mux_stream_open(&loop, &a, sv[0]), 0);
    CHECK_EQ(mux_stream_open(&loop, &b, sv[1]), 0);
    char buf[16];
    CHECK_EQ(mux_read_start(&b, buf, sizeof buf, peer_read_cb), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    mux_timer_t t;
    CHECK_EQ(mux_timer_init(&t, once_timer_cb), 0);
    t.data = &fired;
    CHECK_EQ(mux_timer_start(&loop, &t, 10000 * MS, 0), 0);
    CHECK_EQ(mux_stream_close(&a, once_closed_cb), 0);
    CHECK_EQ(mux_stream_close(&b, once_closed_cb), 0);
    while (closed < 2)
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1); /* the timer */
    CHECK_EQ(closed, 2);
    CHECK_EQ(fired, 0);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    loop_close(&loop);
}
