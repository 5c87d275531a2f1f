/* SPDX-License-Identifier: MIT */
/* The HTTP/1.1 server, over real loopback sockets, with raw bytes from the client side:
 * keep-alive, pipelining, bodies, 100-continue, HEAD, refusals, limits and timeouts. */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "iomux/http.h"
#include "http_client.h"
#include "stream_util.h"

struct hs {
    mux_loop_t loop;
    mux_http_server_t srv;
    mux_timer_t tick;
    uint16_t port;
    int calls, defer, closed;
    mux_http_exchange_t *pending;
    int pending_result;
};

/* Answers "METHOD TARGET BODYLEN:BODY", with X-Test: yes; or keeps the exchange. */
static void hs_handler(mux_http_exchange_t *x)
{
    struct hs *h = mux_http_exchange_server(x)->data;
    h->calls++;
    if (h->defer) {
        h->pending = x;
        return;
    }
    const mux_http_request_t *req = mux_http_exchange_request(x);
    mux_http_str_t body = mux_http_exchange_body(x);
    char out[4096];
    int n = snprintf(out, sizeof out, "%.*s %.*s %zu:%.*s", (int)req->method.len,
                     req->method.base, (int)req->target.len, req->target.base, body.len,
                     (int)(body.len < 1024 ? body.len : 1024), body.base ? body.base : "");
    mux_http_header_t hdr = {{"X-Test", 6}, {"yes", 3}};
    CHECK_EQ(mux_http_respond(x, 200, &hdr, 1, out, (size_t)n), 0);
}

static void hs_open_with(struct hs *h, const mux_http_server_options_t *o,
                         mux_http_handler_cb cb)
{
    memset(h, 0, sizeof *h);
    loop_open(&h->loop);
    CHECK_EQ(mux_http_server_init(&h->srv, &h->loop, o, cb), 0);
    h->srv.data = h;
    struct sockaddr_storage ss;
    socklen_t len = addr_v4(&ss, 0);
    CHECK_EQ(mux_http_server_listen(&h->srv, (struct sockaddr *)&ss, len, NULL), 0);
    len = sizeof ss;
    CHECK_EQ(mux_http_server_address(&h->srv, (struct sockaddr *)&ss, &len), 0);
    h->port = addr_port(&ss);
    CHECK_EQ(mux_timer_init(&h->tick, ticker_cb), 0);
    CHECK_EQ(mux_timer_start(&h->loop, &h->tick, 1 * MS, 1 * MS), 0);
}

static void hs_open(struct hs *h, const mux_http_server_options_t *o)
{
    hs_open_with(h, o, hs_handler);
}

static void hs_srv_closed(mux_http_server_t *srv)
{
    ((struct hs *)srv->data)->closed = 1;
}

static void hs_close(struct hs *h)
{
    CHECK_EQ(mux_http_server_close(&h->srv, hs_srv_closed), 0);
    uint64_t end = mono_ns() + 5000 * MS;
    while (!h->closed) {
        CHECK_GE(mux_run(&h->loop, MUX_RUN_ONCE), 0);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(mux_timer_stop(&h->loop, &h->tick), 0);
    loop_close(&h->loop);
}

/* Pumps until the handler kept an exchange (h->defer). */
static void cl_wait_pending(struct hs *h, struct hclient *c)
{
    uint64_t end = mono_ns() + 5000 * MS;
    while (!h->pending) {
        hc_pump(&h->loop, c);
        CHECK_LT(mono_ns(), end);
    }
}

/* Runs the server's loop, taking what the client got, until `cond` holds: for 5 s at most.
 * What a case waits for comes as soon as the machine lets it, never after a fixed pause that
 * a loaded machine may not honour; fixed pauses only show that something does not happen. */
#define HS_UNTIL(h, c, cond)                                                                 \
    do {                                                                                     \
        uint64_t until_end_ = mono_ns() + 5000 * MS;                                         \
        while (!(cond)) {                                                                    \
            hc_pump(&(h)->loop, c);                                                         \
            CHECK_LT(mono_ns(), until_end_);                                                 \
        }                                                                                    \
    } while (0)

TEST(http_server_get_keep_alive_and_pipelined_answers_in_order) {
    struct hs h;
    hs_open(&h, NULL);
    static struct hclient c;
    hc_open(&c, h.port);
    static struct hanswer r;
    hc_sends(&h.loop, &c, "GET /a?x=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 200);
    CHECK(strncmp(r.head, "HTTP/1.1 200 OK\r\nDate: ", 23) == 0);
    CHECK(ha_has(&r, " GMT\r\n"));
    CHECK(ha_has(&r, "\r\nContent-Length: 13\r\n"));
    CHECK(ha_has(&r, "\r\nX-Test: yes\r\n"));
    CHECK(!ha_has(&r, "Connection: close"));
    CHECK_STR_EQ(r.body, "GET /a?x=1 0:");
    /* Three pipelined in one write: answered in order on the same connection. */
    hc_sends(&h.loop, &c,
             "GET /b HTTP/1.1\r\nHost: t\r\n\r\nPOST /c HTTP/1.1\r\nHost: t\r\n"
             "Content-Length: 3\r\n\r\nxyzGET /d HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "GET /b 0:");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "POST /c 3:xyz");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "GET /d 0:");
    CHECK_EQ(h.calls, 4);
    hc_close(&c);
    hs_close(&h);
}

TEST(http_server_http10_closes_unless_keep_alive) {
    struct hs h;
    hs_open(&h, NULL);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /old HTTP/1.0\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK(ha_has(&r, "\r\nConnection: keep-alive\r\n")); /* an HTTP/1.0 client needs it */
    hc_sends(&h.loop, &c, "GET /2 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "GET /2 0:");
    CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);
    hs_close(&h);
}

TEST(http_server_bodies_by_length_and_chunked_in_pieces) {
    struct hs h;
    hs_open(&h, NULL);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "POST /l HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello");
    run_ms(&h.loop, 20);
    CHECK_EQ(h.calls, 0); /* not before the whole body */
    hc_sends(&h.loop, &c, " world");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "POST /l 11:hello world");
    hc_sends(&h.loop, &c, "POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
    run_ms(&h.loop, 20);
    hc_sends(&h.loop, &c,
             "lo\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
             "GET /n HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "POST /c 11:hello world");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "GET /n 0:");
    hc_close(&c);
    hs_close(&h);
}

TEST(http_server_refuses_malformed_with_its_status_and_serves_the_others) {
    struct hs h;
    hs_open(&h, NULL);
    static struct hclient bad, good;
    static struct hanswer r;
    static const struct {
        const char *req;
        int status;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: t\r\nBad Header: v\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: t\r\nX: a\r\n folded\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
         400},
        {"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
        {"GET / HTTP/1.1\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n", 413},
        {"PUT / HTTP/1.1\r\nHost: t\r\nExpect: nope\r\n\r\n", 417},
        {"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
        {"GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505},
    };
    hc_open(&good, h.port);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hc_open(&bad, h.port);
        hc_sends(&h.loop, &bad, cases[i].req);
        CHECK_EQ(hc_answer(&h.loop, &bad, &r, 0), 0);
        if (r.status != cases[i].status)
            fprintf(stderr, "case %zu: %s", i, r.head);
        CHECK_EQ(r.status, cases[i].status);
        CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
        hc_wait_eof(&h.loop, &bad);
        hc_close(&bad);
        /* The other connection goes on. */
        hc_sends(&h.loop, &good, "GET /ok HTTP/1.1\r\nHost: t\r\n\r\n");
        CHECK_EQ(hc_answer(&h.loop, &good, &r, 0), 0);
        CHECK_STR_EQ(r.body, "GET /ok 0:");
    }
    CHECK_EQ(h.calls, 9);
    hc_close(&good);
    hs_close(&h);
}

TEST(http_server_limits_414_and_431) {
    struct hs h;
    hs_open(&h, NULL);
    static struct hclient c;
    static char big[80000];
    static struct hanswer r;
    hc_open(&c, h.port);
    int n = sprintf(big, "GET /");
    memset(big + n, 'a', 9000);
    strcpy(big + n + 9000, " HTTP/1.1\r\nHost: t\r\n\r\n");
    hc_sends(&h.loop, &c, big);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 414);
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);
    hc_open(&c, h.port);
    n = sprintf(big, "GET / HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 101; i++)
        n += sprintf(big + n, "X-%d: v\r\n", i);
    strcpy(big + n, "\r\n");
    hc_sends(&h.loop, &c, big);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 431);
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);
    CHECK_EQ(h.calls, 0);
    hs_close(&h);
}

TEST(http_server_expect_100_continue_before_the_body) {
    struct hs h;
    hs_open(&h, NULL);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c,
             "PUT /f HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
             "Content-Length: 4\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 100);
    CHECK_STR_EQ(r.head, "HTTP/1.1 100 Continue\r\n\r\n");
    CHECK_EQ(h.calls, 0);
    hc_sends(&h.loop, &c, "data");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 200);
    CHECK_STR_EQ(r.body, "PUT /f 4:data");
    hc_close(&c);
    hs_close(&h);
}

TEST(http_server_head_gets_the_headers_without_the_body) {
    struct hs h;
    hs_open(&h, NULL);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "HEAD /x HTTP/1.1\r\nHost: t\r\n\r\nGET /y HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 1), 0);
    CHECK_EQ(r.status, 200);
    CHECK(ha_has(&r, "\r\nContent-Length: 10\r\n")); /* "HEAD /x 0:", not sent */
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);         /* the next starts right after the head */
    CHECK_STR_EQ(r.body, "GET /y 0:");
    hc_close(&c);
    hs_close(&h);
}

TEST(http_server_header_timeout_408_and_silent_connections_closed) {
    struct hs h;
    mux_http_server_options_t o = {.header_timeout_ns = 150 * MS};
    hs_open(&h, &o);
    static struct hclient slow, silent;
    static struct hanswer r;
    hc_open(&slow, h.port);
    hc_open(&silent, h.port);
    hc_sends(&h.loop, &slow, "GET / HTTP/1.1\r\nHo");
    CHECK_EQ(hc_answer(&h.loop, &slow, &r, 0), 0);
    CHECK_EQ(r.status, 408);
    hc_wait_eof(&h.loop, &slow);
    hc_wait_eof(&h.loop, &silent); /* closed with nothing sent */
    CHECK_EQ(h.calls, 0);
    hc_close(&slow);
    hc_close(&silent);
    hs_close(&h);
}

TEST(http_server_max_requests_then_close) {
    struct hs h;
    mux_http_server_options_t o = {.max_requests = 2};
    hs_open(&h, &o);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /1 HTTP/1.1\r\nHost: t\r\n\r\nGET /2 HTTP/1.1\r\nHost: t\r\n\r\n"
                     "GET /3 HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK(!ha_has(&r, "Connection: close"));
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
    CHECK_STR_EQ(r.body, "GET /2 0:");
    hc_wait_eof(&h.loop, &c); /* the third is never answered */
    CHECK_EQ(h.calls, 2);
    hc_close(&c);
    hs_close(&h);
}

static void hs_later(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    struct hs *h = t->data;
    mux_http_exchange_t *x = h->pending;
    h->pending = NULL; /* the answer lets the next request in, which may set it again */
    h->pending_result = mux_http_respond(x, 201, NULL, 0, "later", 5);
}

TEST(http_server_answer_later_and_close_while_one_waits) {
    struct hs h;
    hs_open(&h, NULL);
    h.defer = 1;
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_wait_pending(&h, &c);
    run_ms(&h.loop, 20);
    CHECK_EQ(h.calls, 1); /* the second waits for the first's answer */
    mux_timer_t later;
    CHECK_EQ(mux_timer_init(&later, hs_later), 0);
    later.data = &h;
    CHECK_EQ(mux_timer_start(&h.loop, &later, 5 * MS, 0), 0);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 201);
    CHECK_STR_EQ(r.body, "later");
    CHECK_EQ(h.pending_result, 0);
    cl_wait_pending(&h, &c);
    CHECK_EQ(h.calls, 2);
    /* Closed while the second waits: until the close has ended, its answer is refused, and
     * the close ends without it. */
    mux_http_exchange_t *x = h.pending;
    CHECK_EQ(mux_http_server_close(&h.srv, hs_srv_closed), 0);
    CHECK_EQ(mux_http_respond(x, 200, NULL, 0, "x", 1), -ECANCELED);
    CHECK_EQ(mux_http_respond(x, 200, NULL, 0, "x", 1), -EINVAL); /* let go: gone */
    uint64_t end = mono_ns() + 5000 * MS;
    while (!h.closed) {
        CHECK_GE(mux_run(&h.loop, MUX_RUN_ONCE), 0);
        CHECK_LT(mono_ns(), end);
    }
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);
    CHECK_EQ(mux_timer_stop(&h.loop, &h.tick), 0);
    loop_close(&h.loop);
}

TEST(http_server_respond_refuses_bad_arguments) {
    struct hs h;
    hs_open(&h, NULL);
    h.defer = 1;
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_wait_pending(&h, &c);
    mux_http_header_t cl = {{"Content-Length", 14}, {"5", 1}};
    mux_http_header_t crlf = {{"X-A", 3}, {"a\r\nb", 4}};
    mux_http_header_t sp = {{"X A", 3}, {"v", 1}};
    CHECK_EQ(mux_http_respond(h.pending, 200, &cl, 1, NULL, 0), -EINVAL);
    CHECK_EQ(mux_http_respond(h.pending, 200, &crlf, 1, NULL, 0), -EINVAL);
    CHECK_EQ(mux_http_respond(h.pending, 200, &sp, 1, NULL, 0), -EINVAL);
    /* The server's own fields, in any case: Date, Connection, Transfer-Encoding. */
    mux_http_header_t own[3] = {{{"date", 4}, {"x", 1}},
                                {{"CONNECTION", 10}, {"close", 5}},
                                {{"Transfer-Encoding", 17}, {"chunked", 7}}};
    for (int i = 0; i < 3; i++)
        CHECK_EQ(mux_http_respond(h.pending, 200, &own[i], 1, NULL, 0), -EINVAL);
    mux_buf_t holes[2] = {mux_buf_init(NULL, 3), mux_buf_init("x", 1)};
    CHECK_EQ(mux_http_respond_v(h.pending, 200, NULL, 0, holes, 2), -EINVAL);
    CHECK_EQ(mux_http_respond_v(h.pending, 200, NULL, 0, NULL, 2), -EINVAL);
    CHECK_EQ(mux_http_respond_file(h.pending, 200, NULL, 0, -1, 0, 1, NULL, NULL), -EINVAL);
    CHECK_EQ(mux_http_respond_file(h.pending, 200, NULL, 0, 0, -1, 1, NULL, NULL), -EINVAL);
    CHECK_EQ(mux_http_exchange_read(h.pending, NULL), -EINVAL); /* bodies are not streamed */
    CHECK_EQ(mux_http_respond(h.pending, 100, NULL, 0, NULL, 0), -EINVAL);
    CHECK_EQ(mux_http_respond(h.pending, 600, NULL, 0, NULL, 0), -EINVAL);
    CHECK_EQ(mux_http_respond(h.pending, 200, NULL, 0, NULL, 3), -EINVAL);
    CHECK_EQ(mux_http_respond(NULL, 200, NULL, 0, NULL, 0), -EINVAL);
    CHECK_EQ(mux_http_respond(h.pending, 204, NULL, 0, NULL, 0), 0);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 204);
    CHECK(!ha_has(&r, "Content-Length"));
    CHECK_EQ(mux_http_server_init(NULL, &h.loop, NULL, hs_handler), -EINVAL);
    CHECK_EQ(mux_http_server_listen(&h.srv, NULL, 0, NULL), -EBUSY);
    hc_close(&c);
    hs_close(&h);
    CHECK_EQ(mux_http_server_close(&h.srv, NULL), -EINVAL); /* closed: impl_ is gone */
}

/* The handler's cancel callback: records why, and lets go of the exchange. */
struct hcancel {
    mux_http_exchange_t *x;
    int calls, reason;
};

static void hs_cancel_cb(mux_http_exchange_t *x, void *arg, int reason)
{
    struct hcancel *k = arg;
    CHECK(x == k->x);
    CHECK(mux_http_exchange_request(x) == NULL); /* gone already */
    k->calls++;
    k->reason = reason;
}

/* Waits until the cancel callback ran. */
static void hs_wait_cancel(struct hs *h, struct hclient *c, struct hcancel *k)
{
    uint64_t end = mono_ns() + 5000 * MS;
    while (k->calls == 0) {
        hc_pump(&h->loop, c);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(k->calls, 1);
}

/* A client that ends its sending while the handler holds its request is taken as gone (as
 * nginx takes it): the exchange is cancelled with -ECONNRESET and the connection closed, so
 * that no descriptor waits for a handler on a client that left. An exchange without a cancel
 * callback is kept for its answer, which is refused, and then freed. */
TEST(http_server_client_that_ends_while_the_handler_holds_cancels_the_exchange) {
    struct hs h;
    hs_open(&h, NULL);
    h.defer = 1;
    static struct hclient c;
    struct hcancel k = {0};
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /h HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_wait_pending(&h, &c);
    k.x = h.pending;
    CHECK_EQ(mux_http_exchange_on_cancel(h.pending, hs_cancel_cb, &k), 0);
    CHECK_EQ(mux_http_exchange_on_cancel(NULL, hs_cancel_cb, &k), -EINVAL);
    CHECK_EQ(shutdown(c.fd, SHUT_WR), 0);
    hs_wait_cancel(&h, &c, &k);
    CHECK_EQ(k.reason, -ECONNRESET);
    h.pending = NULL;
    hc_wait_eof(&h.loop, &c); /* closed, nothing sent */
    hc_close(&c);
    /* Without a cancel callback: a reset, then the answer comes, and is refused. */
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /r HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_wait_pending(&h, &c);
    struct linger lg = {1, 0};
    CHECK_EQ(setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    int fds = open_fds();
    hc_close(&c); /* a reset: the server closes its end */
    uint64_t end = mono_ns() + 5000 * MS;
    while (open_fds() != fds - 2) {
        CHECK_GE(mux_run(&h.loop, MUX_RUN_ONCE), 0);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(mux_http_respond(h.pending, 200, NULL, 0, "late", 4), -ECANCELED);
    h.pending = NULL;
    CHECK_EQ(h.calls, 2);
    hs_close(&h);
}

/* The server's close does not wait for handlers that hold exchanges of clients that left: each
 * cancel callback hears why, the exchanges without one are freed (no leak at exit), and the
 * close's callback runs, so that mux_run(MUX_RUN_DEFAULT) returns. */
TEST(http_server_close_ends_while_handlers_hold_exchanges_of_clients_gone) {
    struct hs h;
    hs_open(&h, NULL);
    h.defer = 1;
    static struct hclient c1, c2, c3;
    struct hcancel k1 = {0}, k3 = {0};
    /* One whose client resets (with a cancel callback), one whose client resets (without),
     * one whose client stays (with). */
    hc_open(&c1, h.port);
    hc_sends(&h.loop, &c1, "GET /1 HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_wait_pending(&h, &c1);
    k1.x = h.pending;
    CHECK_EQ(mux_http_exchange_on_cancel(h.pending, hs_cancel_cb, &k1), 0);
    h.pending = NULL;
    hc_open(&c2, h.port);
    hc_sends(&h.loop, &c2, "GET /2 HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_wait_pending(&h, &c2);
    h.pending = NULL; /* held, never answered, no callback */
    hc_open(&c3, h.port);
    hc_sends(&h.loop, &c3, "GET /3 HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_wait_pending(&h, &c3);
    k3.x = h.pending;
    CHECK_EQ(mux_http_exchange_on_cancel(h.pending, hs_cancel_cb, &k3), 0);
    h.pending = NULL;
    struct linger lg = {1, 0};
    CHECK_EQ(setsockopt(c1.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    CHECK_EQ(setsockopt(c2.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    hc_close(&c1);
    hc_close(&c2);
    hs_wait_cancel(&h, &c3, &k1);
    CHECK_EQ(k1.reason, -ECONNRESET);
    run_ms(&h.loop, 20);
    CHECK_EQ(k3.calls, 0);
    CHECK_EQ(mux_timer_stop(&h.loop, &h.tick), 0);
    CHECK_EQ(mux_http_server_close(&h.srv, hs_srv_closed), 0);
    /* Nothing but the server's connections keeps the loop: it returns once they closed. */
    uint64_t end = mono_ns() + 5000 * MS;
    while (!h.closed) {
        CHECK_GE(mux_run(&h.loop, MUX_RUN_DEFAULT), 0);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(k3.calls, 1);
    CHECK_EQ(k3.reason, -ECANCELED);
    CHECK_EQ(k1.calls, 1);
    CHECK_EQ(h.calls, 3);
    hc_wait_eof(&h.loop, &c3);
    hc_close(&c3);
    loop_close(&h.loop);
}

/* A handler that does not answer in handler_timeout_ns: the client gets 503 with
 * Connection: close and the end of the connection, the cancel callback hears -ETIMEDOUT;
 * without one, the late answer is refused. */
TEST(http_server_handler_that_does_not_answer_in_time_gets_503) {
    struct hs h;
    mux_http_server_options_t o = {.handler_timeout_ns = 50 * MS};
    hs_open(&h, &o);
    h.defer = 1;
    static struct hclient c;
    struct hcancel k = {0};
    static struct hanswer r;
    hc_open(&c, h.port);
    uint64_t t0 = mono_ns();
    hc_sends(&h.loop, &c, "GET /slow HTTP/1.1\r\nHost: t\r\n\r\nGET /next HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_wait_pending(&h, &c);
    k.x = h.pending;
    CHECK_EQ(mux_http_exchange_on_cancel(h.pending, hs_cancel_cb, &k), 0);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_GE(mono_ns() - t0, 50 * MS);
    CHECK_EQ(r.status, 503);
    CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
    CHECK(ha_has(&r, "\r\nContent-Type: text/plain\r\n"));
    CHECK_EQ(k.calls, 1);
    CHECK_EQ(k.reason, -ETIMEDOUT);
    hc_wait_eof(&h.loop, &c); /* the pipelined request is not answered */
    CHECK_EQ(h.calls, 1);
    hc_close(&c);
    /* Without a cancel callback. */
    h.pending = NULL;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_wait_pending(&h, &c);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 503);
    CHECK_EQ(mux_http_respond(h.pending, 200, NULL, 0, "late", 4), -ECANCELED);
    h.pending = NULL;
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);
    /* A handler that answers in time is not touched by the timeout. */
    h.defer = 0;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /fast HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 200);
    run_ms(&h.loop, 100);
    hc_sends(&h.loop, &c, "GET /again HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 200);
    CHECK_STR_EQ(r.body, "GET /again 0:");
    hc_close(&c);
    hs_close(&h);
}

/* While a handler holds its exchange, pipelined requests keep arriving into the
 * connection's buffer: the request it holds must stay readable (an earlier version moved
 * the buffer under it). */
TEST(http_server_request_stays_valid_while_pipelined_bytes_arrive) {
    struct hs h;
    hs_open(&h, NULL);
    h.defer = 1;
    static struct hclient c;
    static char more[32768];
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /first HTTP/1.1\r\nHost: t\r\nX-Keep: this value\r\n\r\n");
    cl_wait_pending(&h, &c);
    size_t n = 0;
    while (n + 40 < sizeof more)
        n += (size_t)sprintf(more + n, "GET /next HTTP/1.1\r\nHost: t\r\n\r\n");
    hc_send(&h.loop, &c, more, n);
    run_ms(&h.loop, 30);
    const mux_http_request_t *req = mux_http_exchange_request(h.pending);
    CHECK(req->target.len == 6 && memcmp(req->target.base, "/first", 6) == 0);
    mux_http_str_t v;
    CHECK_EQ(mux_http_header_get(req, "x-keep", &v), 0);
    CHECK(v.len == 10 && memcmp(v.base, "this value", 10) == 0);
    h.defer = 0;
    mux_http_exchange_t *x = h.pending;
    h.pending = NULL;
    CHECK_EQ(mux_http_respond(x, 200, NULL, 0, "1", 1), 0);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "1");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "GET /next 0:");
    hc_close(&c);
    hs_close(&h);
}

/* ---- static files ---- */

static mux_http_static_t files;

static void hs_files(mux_http_exchange_t *x)
{
    struct hs *h = mux_http_exchange_server(x)->data;
    h->calls++;
    CHECK_EQ(mux_http_serve_static(x, &files), 0);
}

static void put_file(const char *dir, const char *name, const char *content)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK_EQ(fputs(content, f) >= 0, 1);
    CHECK_EQ(fclose(f), 0);
}

static void get(struct hs *h, struct hclient *c, const char *req, struct hanswer *r)
{
    hc_sends(&h->loop, c, req);
    CHECK_EQ(hc_answer(&h->loop, c, r, 0), 0);
}

static const char *field(const struct hanswer *r, const char *name, char *out, size_t cap)
{
    const char *p = strstr(r->head, name);
    if (!p)
        return NULL;
    p += strlen(name);
    size_t n = strcspn(p, "\r");
    CHECK_LT(n, cap);
    memcpy(out, p, n);
    out[n] = 0;
    return out;
}

TEST(http_server_static_files_conditional_ranges_and_no_escape) {
    char dir[64], path[600];
    tmpdir_make(dir, sizeof dir);
    put_file(dir, "a.txt", "hello file\n");
    put_file(dir, "index.html", "<p>root</p>\n");
    put_file(dir, ".secret", "no\n");
    snprintf(path, sizeof path, "%s/sub", dir);
    CHECK_EQ(mkdir(path, 0755), 0);
    put_file(dir, "sub/index.html", "<p>sub</p>\n");
    memset(&files, 0, sizeof files);
    CHECK_EQ(mux_http_static_init(&files, dir), 0);

    struct hs h;
    hs_open_with(&h, NULL, hs_files);

    static struct hclient c;
    static struct hanswer r;
    char etag[64], lm[64], v[64];
    hc_open(&c, h.port);
    get(&h, &c, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_EQ(r.status, 200);
    CHECK_STR_EQ(r.body, "hello file\n");
    CHECK(ha_has(&r, "\r\nContent-Type: text/plain; charset=utf-8\r\n"));
    CHECK(ha_has(&r, "\r\nAccept-Ranges: bytes\r\n"));
    CHECK(field(&r, "\r\nETag: ", etag, sizeof etag) != NULL);
    CHECK(field(&r, "\r\nLast-Modified: ", lm, sizeof lm) != NULL);
    char req[512];
    /* 304 by the tag, by the date; If-None-Match wins over a date that would match. */
    snprintf(req, sizeof req, "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: %s\r\n\r\n", etag);
    get(&h, &c, req, &r);
    CHECK_EQ(r.status, 304);
    CHECK_EQ(r.body_len, 0);
    snprintf(req, sizeof req, "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\n\r\n",
             lm);
    get(&h, &c, req, &r);
    CHECK_EQ(r.status, 304);
    snprintf(req, sizeof req,
             "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"other\"\r\n"
             "If-Modified-Since: %s\r\n\r\n",
             lm);
    get(&h, &c, req, &r);
    CHECK_EQ(r.status, 200);
    /* Ranges */
    get(&h, &c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=1-4\r\n\r\n", &r);
    CHECK_EQ(r.status, 206);
    CHECK_STR_EQ(r.body, "ello");
    CHECK_STR_EQ(field(&r, "\r\nContent-Range: ", v, sizeof v), "bytes 1-4/11");
    get(&h, &c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=-5\r\n\r\n", &r);
    CHECK_STR_EQ(r.body, "file\n");
    get(&h, &c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=50-\r\n\r\n", &r);
    CHECK_EQ(r.status, 416);
    CHECK_STR_EQ(field(&r, "\r\nContent-Range: ", v, sizeof v), "bytes */11");
    get(&h, &c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1,3-4\r\n\r\n", &r);
    CHECK_EQ(r.status, 206); /* several ranges: multipart (test_http_static.c has the rest) */
    CHECK(ha_has(&r, "\r\nContent-Type: multipart/byteranges; boundary="));
    /* Directories */
    get(&h, &c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_STR_EQ(r.body, "<p>root</p>\n");
    CHECK(ha_has(&r, "\r\nContent-Type: text/html; charset=utf-8\r\n"));
    get(&h, &c, "GET /sub?x=1 HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_EQ(r.status, 301);
    CHECK_STR_EQ(field(&r, "\r\nLocation: ", v, sizeof v), "/sub/?x=1");
    get(&h, &c, "GET /sub/ HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_STR_EQ(r.body, "<p>sub</p>\n");
    /* What must not be served */
    static const struct {
        const char *target;
        int status;
    } no[] = {
        {"/.secret", 403},             /* hidden */
        {"/../etc/passwd", 403},       /* above the root */
        {"/%2e%2e/etc/passwd", 403},   /* the same, encoded */
        {"/sub%2f..%2f..%2fetc", 403}, /* an encoded slash */
        {"/missing", 404},
        {"/a.txt/x", 404},
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", no[i].target);
        get(&h, &c, req, &r);
        if (r.status != no[i].status)
            fprintf(stderr, "%s: %d\n", no[i].target, r.status);
        CHECK_EQ(r.status, no[i].status);
    }
    get(&h, &c, "POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", &r);
    CHECK_EQ(r.status, 405);
    CHECK_STR_EQ(field(&r, "\r\nAllow: ", v, sizeof v), "GET, HEAD");
    hc_sends(&h.loop, &c, "HEAD /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 1), 0);
    CHECK(ha_has(&r, "\r\nContent-Length: 11\r\n"));
    get(&h, &c, "GET /sub/index.html HTTP/1.1\r\nHost: t\r\n\r\n", &r); /* right after it */
    CHECK_STR_EQ(r.body, "<p>sub</p>\n");
    hc_close(&c);
    hs_close(&h);
    mux_http_static_close(&files);
    /* Clean the directory up. */
    static const char *names[] = {"a.txt", "index.html", ".secret", "sub/index.html"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        CHECK_EQ(unlink(path), 0);
    }
    snprintf(path, sizeof path, "%s/sub", dir);
    CHECK_EQ(rmdir(path), 0);
    CHECK_EQ(rmdir(dir), 0);
}

/* A symbolic link that stays below the root is served; one that leads out of it is not, as
 * if it were not there. */
TEST(http_server_static_link_inside_served_link_outside_not) {
    char dir[64], outside[64], path[600];
    tmpdir_make(dir, sizeof dir);
    tmpdir_make(outside, sizeof outside);
    put_file(dir, "a.txt", "hello file\n");
    put_file(outside, "b.txt", "not for the web\n");
    snprintf(path, sizeof path, "%s/in", dir);
    CHECK_EQ(symlink("a.txt", path), 0);
    char target[600];
    snprintf(target, sizeof target, "%s/b.txt", outside);
    snprintf(path, sizeof path, "%s/out", dir);
    CHECK_EQ(symlink(target, path), 0);
    memset(&files, 0, sizeof files);
    CHECK_EQ(mux_http_static_init(&files, dir), 0);
    struct hs h;
    hs_open_with(&h, NULL, hs_files);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    get(&h, &c, "GET /in HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_EQ(r.status, 200);
    CHECK_STR_EQ(r.body, "hello file\n");
    get(&h, &c, "GET /out HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_EQ(r.status, 404);
    hc_close(&c);
    hs_close(&h);
    mux_http_static_close(&files);
    static const char *names[] = {"a.txt", "in", "out"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        CHECK_EQ(unlink(path), 0);
    }
    snprintf(path, sizeof path, "%s/b.txt", outside);
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(rmdir(dir), 0);
    CHECK_EQ(rmdir(outside), 0);
}

/* The open-file cache: a file changed in place, and one replaced by another under its
 * name, are served anew once their check is due (a second at most). */
TEST(http_server_static_file_changed_on_disk_is_served_anew) {
    char dir[64], path[600];
    tmpdir_make(dir, sizeof dir);
    put_file(dir, "f.txt", "version one\n");
    memset(&files, 0, sizeof files);
    CHECK_EQ(mux_http_static_init(&files, dir), 0);
    struct hs h;
    hs_open_with(&h, NULL, hs_files);
    static struct hclient c;
    static struct hanswer r;
    char tag1[64], tag2[64];
    hc_open(&c, h.port);
    get(&h, &c, "GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_STR_EQ(r.body, "version one\n");
    CHECK(field(&r, "\r\nETag: ", tag1, sizeof tag1) != NULL);
    /* Changed in place (same size, a later time). */
    sleep_ms(20);
    put_file(dir, "f.txt", "version two\n");
    sleep_ms(1100);
    get(&h, &c, "GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_STR_EQ(r.body, "version two\n");
    CHECK(field(&r, "\r\nETag: ", tag2, sizeof tag2) != NULL);
    CHECK(strcmp(tag1, tag2) != 0);
    /* Replaced: a new file renamed over the name. */
    put_file(dir, "g.tmp", "version three\n");
    char from[600];
    snprintf(from, sizeof from, "%s/g.tmp", dir);
    snprintf(path, sizeof path, "%s/f.txt", dir);
    CHECK_EQ(rename(from, path), 0);
    sleep_ms(1100);
    get(&h, &c, "GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_STR_EQ(r.body, "version three\n");
    /* Removed: 404. */
    CHECK_EQ(unlink(path), 0);
    sleep_ms(1100);
    get(&h, &c, "GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_EQ(r.status, 404);
    hc_close(&c);
    hs_close(&h);
    mux_http_static_close(&files);
    CHECK_EQ(rmdir(dir), 0);
}

/* The fuzz target of the connection found a chunked head that came alone (no byte of the
 * body yet) decoded from a null buffer: undefined behaviour that clang's UBSan stops at
 * (gcc's does not check a null pointer plus 0). This case checks what the server does; the
 * seed tests/fuzz/corpus/http_parser/chunked-head-alone makes every fuzz run of the
 * connection (core.fuzz_http_server) replay the input first. */
TEST(http_server_chunked_head_alone_then_its_chunks) {
    struct hs h;
    hs_open(&h, NULL);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    run_ms(&h.loop, 20);
    CHECK_EQ(h.calls, 0);
    hc_sends(&h.loop, &c, "3\r\nabc\r\n0\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "POST /c 3:abc");
    hc_close(&c);
    hs_close(&h);
}

/* ---- bodies from buffers and from files ---- */

#define FB_FILE (300u * 1024)
#define FB_OFF  1000u
#define FB_LEN  100000u

struct fb {
    int fd, done_calls, done_status;
};
static struct fb fb;

static void fb_done(void *arg, int status)
{
    struct fb *f = arg;
    f->done_calls++;
    f->done_status = status;
}

static void hs_bodies(mux_http_exchange_t *x)
{
    struct hs *h = mux_http_exchange_server(x)->data;
    h->calls++;
    const mux_http_request_t *req = mux_http_exchange_request(x);
    if (req->target.len == 2 && memcmp(req->target.base, "/v", 2) == 0) {
        mux_buf_t v[4] = {mux_buf_init("one,", 4), mux_buf_init(NULL, 0), mux_buf_init("two,", 4),
                          mux_buf_init("three", 5)};
        CHECK_EQ(mux_http_respond_v(x, 200, NULL, 0, v, 4), 0);
    } else {
        mux_http_header_t t = {{"Content-Type", 12}, {"application/octet-stream", 24}};
        CHECK_EQ(mux_http_respond_file(x, 200, &t, 1, fb.fd, FB_OFF, FB_LEN, fb_done, &fb), 0);
    }
}

/* Waits for a response whose body is `blen` bytes, checks the body against the pattern from
 * `off`, and takes it out of the client's buffer. */
static void cl_pattern_response(struct hs *h, struct hclient *c, uint64_t off, size_t blen)
{
    uint64_t end = mono_ns() + 10000 * MS;
    char *e;
    size_t hl = 0;
    while (!(e = memmem(c->buf, c->len, "\r\n\r\n", 4)) ||
           c->len < (hl = (size_t)(e - c->buf) + 4) + blen) {
        CHECK(!c->eof);
        hc_pump(&h->loop, c);
        CHECK_LT(mono_ns(), end);
    }
    char cl[64];
    snprintf(cl, sizeof cl, "\r\nContent-Length: %zu\r\n", blen);
    CHECK(memmem(c->buf, hl, cl, strlen(cl)) != NULL);
    CHECK(strncmp(c->buf, "HTTP/1.1 200 OK\r\n", 17) == 0);
    CHECK(pattern_ok(c->buf + hl, off, blen));
    memmove(c->buf, c->buf + hl + blen, c->len - hl - blen);
    c->len -= hl + blen;
}

/* A body gathered from buffers (one empty); a file's range with its done callback called
 * once it is sent, a HEAD of it (no body; done still called), and a pipelined pair of them,
 * answered in order; the arguments refused. */
TEST(http_server_bodies_from_buffers_and_from_a_file) {
    pattern_init();
    char path[] = "/tmp/iomux-http-file-XXXXXX";
    fb = (struct fb){.fd = mkstemp(path)};
    CHECK_GE(fb.fd, 0);
    CHECK_EQ(unlink(path), 0);
    static char content[FB_FILE];
    pattern_fill(content, 0, sizeof content);
    CHECK_EQ(write(fb.fd, content, sizeof content), (ssize_t)sizeof content);
    struct hs h;
    hs_open_with(&h, NULL, hs_bodies);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    get(&h, &c, "GET /v HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_EQ(r.status, 200);
    CHECK_STR_EQ(r.body, "one,two,three");
    hc_sends(&h.loop, &c, "GET /f HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_pattern_response(&h, &c, FB_OFF, FB_LEN);
    /* Where the kernel sends the file (TransmitFile), the bytes can reach the client before
     * the server's loop has heard that the send is done. */
    uint64_t sent_by = mono_ns() + 5000 * MS;
    while (fb.done_calls < 1 && mono_ns() < sent_by)
        hc_pump(&h.loop, &c);
    CHECK_EQ(fb.done_calls, 1);
    CHECK_EQ(fb.done_status, 0);
    hc_sends(&h.loop, &c, "HEAD /f HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 1), 0);
    CHECK(ha_has(&r, "\r\nContent-Length: 100000\r\n"));
    uint64_t end = mono_ns() + 5000 * MS;
    while (fb.done_calls < 2) {
        hc_pump(&h.loop, &c);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(fb.done_status, 0);
    CHECK_EQ(c.len, 0);
    hc_sends(&h.loop, &c, "GET /f HTTP/1.1\r\nHost: t\r\n\r\nGET /v HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_pattern_response(&h, &c, FB_OFF, FB_LEN);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "one,two,three");
    CHECK_EQ(fb.done_calls, 3);
    CHECK_EQ(h.calls, 5);
    hc_close(&c);
    /* A client that half-closes right after its request still gets the whole answer. */
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /f HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(shutdown(c.fd, SHUT_WR), 0);
    cl_pattern_response(&h, &c, FB_OFF, FB_LEN);
    hc_wait_eof(&h.loop, &c);
    CHECK_EQ(fb.done_calls, 4);
    hc_close(&c);
    hs_close(&h);
    CHECK_EQ(close(fb.fd), 0);
}


/* A file above MUX_HTTP_STATIC_INLINE goes from its descriptor, whole and as a range. A
 * response still sending when the static files are closed finishes from the descriptor it
 * holds, and that descriptor is closed once it is done. */
TEST(http_server_static_big_file_is_sent_from_its_descriptor) {
    pattern_init();
    char dir[64], path[600];
    tmpdir_make(dir, sizeof dir);
    size_t big = 3u << 20;
    char *content = malloc(big);
    CHECK(content != NULL);
    pattern_fill(content, 0, big);
    snprintf(path, sizeof path, "%s/big.bin", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK_EQ(fwrite(content, 1, big, f), big);
    CHECK_EQ(fclose(f), 0);
    free(content);
    /* And one of 40,000 bytes: kept in memory, lent to its answers without a copy. */
    char *mid = malloc(40000);
    CHECK(mid != NULL);
    pattern_fill(mid, 0, 40000);
    snprintf(path, sizeof path, "%s/mid.bin", dir);
    f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK_EQ(fwrite(mid, 1, 40000, f), 40000);
    CHECK_EQ(fclose(f), 0);
    free(mid);
    mux_loop_t first; /* a backend's library may keep descriptors from its first loop on */
    loop_open(&first);
    loop_close(&first);
    int fds_before = open_fds();
    memset(&files, 0, sizeof files);
    CHECK_EQ(mux_http_static_init(&files, dir), 0);
    struct hs h;
    hs_open_with(&h, NULL, hs_files);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /mid.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /mid.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_pattern_response(&h, &c, 0, 40000);
    cl_pattern_response(&h, &c, 0, 40000);
    get(&h, &c, "GET /mid.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=30000-30099\r\n\r\n", &r);
    CHECK_EQ(r.status, 206);
    CHECK(pattern_ok(r.body, 30000, 100));
    get(&h, &c, "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=100-4194\r\n\r\n", &r);
    CHECK_EQ(r.status, 206);
    CHECK(ha_has(&r, "\r\nContent-Range: bytes 100-4194/3145728\r\n"));
    CHECK_EQ(r.body_len, 4095);
    CHECK(pattern_ok(r.body, 100, 4095));
    /* The whole: more than the socket buffers hold while the client does not read. */
    hc_sends(&h.loop, &c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    run_ms(&h.loop, 50);
    mux_http_static_close(&files);
    size_t got = 0, hl = 0;
    uint64_t end = mono_ns() + 10000 * MS;
    while (got < big) { /* the body does not fit the client's buffer: checked as it comes */
        hc_pump(&h.loop, &c);
        if (!hl) {
            char *e = memmem(c.buf, c.len, "\r\n\r\n", 4);
            if (!e)
                continue;
            hl = (size_t)(e - c.buf) + 4;
            CHECK(strncmp(c.buf, "HTTP/1.1 200 OK\r\n", 17) == 0);
            CHECK(memmem(c.buf, hl, "\r\nContent-Length: 3145728\r\n", 27) != NULL);
            memmove(c.buf, c.buf + hl, c.len - hl);
            c.len -= hl;
        }
        CHECK_LE(got + c.len, big);
        CHECK(pattern_ok(c.buf, got, c.len));
        got += c.len;
        c.len = 0;
        CHECK(!c.eof);
        CHECK_LT(mono_ns(), end);
    }
    run_ms(&h.loop, 20);
    hc_close(&c);
    /* A client that goes in the middle of the body: the server lives on (sendfile's EPIPE
     * raises no SIGPIPE, whose default action would end this process) and serves the next. */
    CHECK(signal(SIGPIPE, SIG_DFL) != SIG_ERR);
    CHECK_EQ(mux_http_static_init(&files, dir), 0);
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    while (c.len == 0)
        hc_pump(&h.loop, &c);
    hc_close(&c);
    run_ms(&h.loop, 100);
    hc_open(&c, h.port);
    get(&h, &c, "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=0-99\r\n\r\n", &r);
    CHECK_EQ(r.status, 206);
    CHECK(pattern_ok(r.body, 0, 100));
    hc_close(&c);
    mux_http_static_close(&files);
    hs_close(&h);
    CHECK_EQ(open_fds(), fds_before); /* the cache's descriptor too */
    CHECK_EQ(unlink(path), 0);
    snprintf(path, sizeof path, "%s/big.bin", dir);
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(rmdir(dir), 0);
}

/* ---- bodies streamed to the handler ---- */

struct sb {
    size_t total;
    int pieces, ends, end_status, in_read_call, read_rc;
    uint32_t sum; /* of the bytes, in order */
    char first[32];
    mux_http_exchange_t *x;
};
static struct sb sb;

static void sb_answer(mux_http_exchange_t *x)
{
    char out[160];
    int n = snprintf(out, sizeof out, "n=%zu pieces=%d sum=%u first=%s end=%d", sb.total, sb.pieces,
                     sb.sum, sb.first, sb.end_status);
    int r = mux_http_respond(x, 200, NULL, 0, out, (size_t)n);
    CHECK(r == 0 || r == -ECANCELED);
}

static void sb_body(mux_http_exchange_t *x, const char *data, ssize_t len)
{
    CHECK_EQ(sb.in_read_call, 0); /* never from inside mux_http_exchange_read */
    if (len > 0) {
        if (sb.total < sizeof sb.first - 1) {
            size_t k = sizeof sb.first - 1 - sb.total;
            memcpy(sb.first + sb.total, data, (size_t)len < k ? (size_t)len : k);
        }
        for (ssize_t i = 0; i < len; i++)
            sb.sum = sb.sum * 31 + (unsigned char)data[i];
        sb.total += (size_t)len;
        sb.pieces++;
        return;
    }
    sb.ends++;
    sb.end_status = (int)len;
    sb_answer(x);
}

/* /read: reads the body, answers at its end (or its error); /ignore: answers at once;
 * /later: keeps the exchange for the case to read. */
static void hs_stream(mux_http_exchange_t *x)
{
    struct hs *h = mux_http_exchange_server(x)->data;
    h->calls++;
    const mux_http_request_t *req = mux_http_exchange_request(x);
    CHECK_EQ(mux_http_exchange_body(x).len, 0);
    sb = (struct sb){0};
    if (req->target.len == 5 && memcmp(req->target.base, "/read", 5) == 0) {
        sb.in_read_call = 1;
        sb.read_rc = mux_http_exchange_read(x, sb_body);
        sb.in_read_call = 0;
        CHECK_EQ(sb.read_rc, 0);
    } else if (req->target.len == 6 && memcmp(req->target.base, "/later", 6) == 0) {
        sb.x = x;
    } else {
        CHECK_EQ(mux_http_respond(x, 200, NULL, 0, "ignored", 7), 0);
    }
}

static uint32_t sum_of(const char *p, size_t n)
{
    uint32_t s = 0;
    for (size_t i = 0; i < n; i++)
        s = s * 31 + (unsigned char)p[i];
    return s;
}

/* The handler is called at the head; the body reaches its reader in pieces as they come,
 * by length and chunked, then its end; the next request on the connection is served. A
 * request without a body gives the reader its end at once. */
TEST(http_server_streamed_body_reaches_the_reader_in_pieces) {
    mux_http_server_options_t o = {.stream_bodies = 1};
    struct hs h;
    hs_open_with(&h, &o, hs_stream);
    static struct hclient c;
    static struct hanswer r;
    char want[200];
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello");
    HS_UNTIL(&h, &c, sb.total == 5);
    CHECK_EQ(h.calls, 1); /* at the head */
    CHECK_EQ(sb.total, 5);
    CHECK_EQ(sb.ends, 0);
    hc_sends(&h.loop, &c, " world");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    snprintf(want, sizeof want, "n=11 pieces=2 sum=%u first=hello world end=0",
             sum_of("hello world", 11));
    CHECK_STR_EQ(r.body, want);
    hc_sends(&h.loop, &c, "POST /read HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
    HS_UNTIL(&h, &c, sb.total == 3);
    hc_sends(&h.loop, &c,
             "lo\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
             "GET /read HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    /* "hel", then "lo" and " world" decoded together (they came in one read) */
    snprintf(want, sizeof want, "n=11 pieces=2 sum=%u first=hello world end=0",
             sum_of("hello world", 11));
    CHECK_STR_EQ(r.body, want);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "n=0 pieces=0 sum=0 first= end=0");
    CHECK_EQ(h.calls, 3);
    hc_close(&c);
    hs_close(&h);
}

/* Answered without reading: the body (by length, 200 KB; chunked) is read and dropped after
 * the answer and the pipelined request behind it is answered. A client waiting for 100
 * Continue gets no 100, and the answer with Connection: close. */
TEST(http_server_streamed_body_not_read_is_dropped_and_the_next_request_found) {
    mux_http_server_options_t o = {.stream_bodies = 1};
    struct hs h;
    hs_open_with(&h, &o, hs_stream);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    static char big[200000];
    memset(big, 'b', sizeof big);
    hc_sends(&h.loop, &c, "POST /ignore HTTP/1.1\r\nHost: t\r\nContent-Length: 200000\r\n\r\n");
    hc_send(&h.loop, &c, big, sizeof big);
    hc_sends(&h.loop, &c, "POST /ignore HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n0\r\n\r\nGET /read HTTP/1.1\r\nHost: t\r\n\r\n");
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
        CHECK_EQ(r.status, 200);
        CHECK_STR_EQ(r.body, "ignored");
        CHECK(!ha_has(&r, "Connection: close"));
    }
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "n=0 pieces=0 sum=0 first= end=0");
    CHECK_EQ(h.calls, 3);
    /* A body being dropped whose chunked framing breaks ends the connection. */
    hc_sends(&h.loop, &c, "POST /ignore HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "ignored");
    hc_sends(&h.loop, &c, "3\r\nabcXX and more that is never a chunk");
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c,
             "PUT /ignore HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 200); /* not 100 */
    CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);
    hs_close(&h);
}

/* 100 Continue goes when the handler starts reading, not before; a reader started later
 * (from a timer) gets what was buffered meanwhile from the loop; the reader may answer
 * from inside its call. The body's timeout does not run while nobody reads. */
TEST(http_server_streamed_body_continue_on_read_and_a_late_reader) {
    mux_http_server_options_t o = {.stream_bodies = 1, .body_timeout_ns = 100 * MS};
    struct hs h;
    hs_open_with(&h, &o, hs_stream);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "PUT /later HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                     "Content-Length: 4\r\n\r\n");
    HS_UNTIL(&h, &c, sb.x != NULL);
    run_ms(&h.loop, 300); /* past the body's timeout: it does not run with no reader */
    CHECK(!c.eof);
    CHECK_EQ(c.len, 0); /* no 100 Continue yet */
    sb.in_read_call = 1;
    CHECK_EQ(mux_http_exchange_read(sb.x, sb_body), 0);
    sb.in_read_call = 0;
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 100);
    hc_sends(&h.loop, &c, "data");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    char want[200];
    snprintf(want, sizeof want, "n=4 pieces=1 sum=%u first=data end=0", sum_of("data", 4));
    CHECK_STR_EQ(r.body, want);
    /* Buffered before the reader starts: delivered from the loop after the call. */
    hc_sends(&h.loop, &c, "POST /later HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nxyz");
    HS_UNTIL(&h, &c, sb.x != NULL);
    run_ms(&h.loop, 300);
    sb.in_read_call = 1;
    CHECK_EQ(mux_http_exchange_read(sb.x, sb_body), 0);
    sb.in_read_call = 0;
    CHECK_EQ(sb.total, 0);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    snprintf(want, sizeof want, "n=3 pieces=1 sum=%u first=xyz end=0", sum_of("xyz", 3));
    CHECK_STR_EQ(r.body, want);
    CHECK_EQ(mux_http_exchange_read(sb.x, sb_body), -EINVAL); /* answered: gone */
    hc_close(&c);
    hs_close(&h);
}

/* The reader hears how a body ended badly: broken chunked framing (-EBADMSG: the answer goes
 * with Connection: close), a chunked body over max_body (-EMSGSIZE), a body that stalls
 * (-ETIMEDOUT), a client that goes mid-body (-ECONNRESET). Without stream_bodies the call
 * is -EINVAL. */
TEST(http_server_streamed_body_errors_reach_the_reader) {
    mux_http_server_options_t o = {
        .stream_bodies = 1, .limits = {.max_body = 100}, .body_timeout_ns = 200 * MS};
    struct hs h;
    hs_open_with(&h, &o, hs_stream);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "POST /read HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabcXX");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    char want[40];
    snprintf(want, sizeof want, "end=%d", -EBADMSG);
    CHECK(strstr(r.body, want) != NULL);
    CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
    CHECK_EQ(sb.ends, 1);
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);

    hc_open(&c, h.port);
    static char chunk[300];
    int n = snprintf(chunk, sizeof chunk, "POST /read HTTP/1.1\r\nHost: t\r\n"
                                          "Transfer-Encoding: chunked\r\n\r\n80\r\n");
    memset(chunk + n, 'z', 128);
    hc_send(&h.loop, &c, chunk, (size_t)n + 128);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    snprintf(want, sizeof want, "end=%d", -EMSGSIZE);
    CHECK(strstr(r.body, want) != NULL);
    CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
    hc_close(&c);

    hc_open(&c, h.port);
    sb = (struct sb){0};
    hc_sends(&h.loop, &c, "POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nab");
    uint64_t end = mono_ns() + 5000 * MS;
    while (sb.ends == 0) {
        hc_pump(&h.loop, &c);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(sb.end_status, -ETIMEDOUT);
    CHECK_EQ(sb.total, 2);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0); /* the answer given in the reader goes out */
    snprintf(want, sizeof want, "end=%d", -ETIMEDOUT);
    CHECK(strstr(r.body, want) != NULL);
    CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);

    hc_open(&c, h.port);
    sb = (struct sb){0};
    hc_sends(&h.loop, &c, "POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    HS_UNTIL(&h, &c, sb.total == 3);
    CHECK_EQ(shutdown(c.fd, SHUT_WR), 0); /* gone mid-body, but still reading */
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(sb.end_status, -ECONNRESET);
    snprintf(want, sizeof want, "end=%d", -ECONNRESET);
    CHECK(strstr(r.body, want) != NULL);
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);
    /* The server closed while a reader waits: it hears -ECANCELED, and the close ends. */
    hc_open(&c, h.port);
    sb = (struct sb){0};
    hc_sends(&h.loop, &c, "POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    HS_UNTIL(&h, &c, sb.total == 3);
    CHECK_EQ(sb.ends, 0);
    hs_close(&h);
    CHECK_EQ(sb.ends, 1);
    CHECK_EQ(sb.end_status, -ECANCELED);
    hc_close(&c);

    hs_open(&h, NULL); /* bodies whole: no reader */
    hc_open(&c, h.port);
    h.defer = 1;
    hc_sends(&h.loop, &c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_wait_pending(&h, &c);
    CHECK_EQ(mux_http_exchange_read(h.pending, sb_body), -EINVAL);
    CHECK_EQ(mux_http_respond(h.pending, 204, NULL, 0, NULL, 0), 0);
    hc_close(&c);
    hs_close(&h);
}

/* More connections asking at once than the server's pool has read buffers (256): every
 * connection is answered (each read gives its buffer back at once; on io_uring the kernel
 * finds the ring short and the receives are armed again). The pool that stays dry, a ring
 * the kernel refused, is the fault sweep's (io_uring_register_buf_ring). */
TEST(http_server_more_clients_at_once_than_read_buffers_all_answered) {
    struct hs h;
    hs_open(&h, NULL);
    enum { N = 320 };
    static struct hclient c[N];
    for (int i = 0; i < N; i++)
        hc_open(&c[i], h.port);
    run_ms(&h.loop, 50); /* every connection accepted and reading */
    char req[64];
    for (int i = 0; i < N; i++) {
        int n = snprintf(req, sizeof req, "GET /%d HTTP/1.1\r\nHost: t\r\n\r\n", i);
        CHECK_EQ(send(c[i].fd, req, (size_t)n, MSG_NOSIGNAL), n);
    }
    for (int i = 0; i < N; i++) {
        static struct hanswer r;
        CHECK_EQ(hc_answer(&h.loop, &c[i], &r, 0), 0);
        char want[64];
        snprintf(want, sizeof want, "GET /%d 0:", i);
        CHECK_STR_EQ(r.body, want);
        hc_close(&c[i]);
    }
    CHECK_EQ(h.calls, N);
    hs_close(&h);
}

/* The idle timeout counts from the last answer: requests every 100 ms keep a connection with
 * a 250 ms idle timeout open well past 250 ms (the timer set for the first deadline finds a
 * later one and sleeps again), and once they stop it is closed after about 250 ms. */
TEST(http_server_idle_timeout_counts_from_the_last_answer) {
    mux_http_server_options_t o = {.idle_timeout_ns = 250 * MS};
    struct hs h;
    hs_open(&h, &o);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    uint64_t answered = 0;
    for (int i = 0; i < 8; i++) {
        get(&h, &c, "GET /k HTTP/1.1\r\nHost: t\r\n\r\n", &r);
        CHECK_EQ(r.status, 200);
        answered = mono_ns();
        run_ms(&h.loop, 100);
        hc_pump(&h.loop, &c);
        /* 800 ms in all, open throughout: each answer restarts the 250 ms (unless a loaded
         * machine stretched the pause itself past them, which says nothing). */
        if (mono_ns() - answered < 200 * MS)
            CHECK(!c.eof);
        else if (c.eof)
            break;
    }
    hc_wait_eof(&h.loop, &c);
    uint64_t after = (mono_ns() - answered) / MS;
    /* 250 ms from the server's last answer, which the client read a little after it. */
    CHECK_GE(after, 200);
    CHECK_LT(after, 2000);
    hc_close(&c);
    hs_close(&h);
}

/* A reader paused with NULL gets nothing more until it starts again; the bytes buffered
 * meanwhile come when it does, from the loop. */
TEST(http_server_streamed_body_paused_and_resumed) {
    mux_http_server_options_t o = {.stream_bodies = 1};
    struct hs h;
    hs_open_with(&h, &o, hs_stream);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "POST /later HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nab");
    HS_UNTIL(&h, &c, sb.x != NULL);
    CHECK_EQ(mux_http_exchange_read(sb.x, sb_body), 0);
    HS_UNTIL(&h, &c, sb.total == 2);
    CHECK_EQ(mux_http_exchange_read(sb.x, NULL), 0); /* paused */
    hc_sends(&h.loop, &c, "cdef");
    run_ms(&h.loop, 30);
    CHECK_EQ(sb.total, 2);
    CHECK_EQ(mux_http_exchange_read(sb.x, sb_body), 0);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    char want[120];
    snprintf(want, sizeof want, "n=6 pieces=2 sum=%u first=abcdef end=0", sum_of("abcdef", 6));
    CHECK_STR_EQ(r.body, want);
    hc_close(&c);
    hs_close(&h);
}

/* A last request (Connection: close) answered later, while the client goes on sending: what
 * it sends is not read, the answer goes with Connection: close, and the connection ends. */
TEST(http_server_bytes_after_the_last_request_are_dropped) {
    struct hs h;
    hs_open(&h, NULL);
    h.defer = 1;
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    hc_sends(&h.loop, &c, "GET /last HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    cl_wait_pending(&h, &c);
    hc_sends(&h.loop, &c, "GET /more HTTP/1.1\r\nHost: t\r\n\r\n");
    run_ms(&h.loop, 30);
    CHECK_EQ(mux_http_respond(h.pending, 200, NULL, 0, "last", 4), 0);
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_STR_EQ(r.body, "last");
    CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
    hc_wait_eof(&h.loop, &c);
    CHECK_EQ(h.calls, 1);
    hc_close(&c);
    hs_close(&h);
}

/* ---- hostile clients ---- */

static char big_answer[16384];

static void hs_big(mux_http_exchange_t *x)
{
    struct hs *h = mux_http_exchange_server(x)->data;
    h->calls++;
    CHECK_EQ(mux_http_respond(x, 200, NULL, 0, big_answer, sizeof big_answer), 0);
}

/* A client that pipelines many requests and reads nothing: the server stops taking requests
 * once its answers queued past max_output wait (plus what the kernel's buffers took), instead
 * of queueing an answer to every one in memory; once the client reads, every request is
 * answered, in order. */
TEST(http_server_pipelined_requests_wait_while_answers_are_not_read) {
    enum { N = 2000 };
    mux_http_server_options_t o = {.max_output = 64 * 1024, .max_requests = 2 * N};
    struct hs h;
    hs_open_with(&h, &o, hs_big);
    memset(big_answer, 'b', sizeof big_answer);
    static struct hclient c;
    hc_open(&c, h.port);
    static char reqs[N * 40];
    size_t n = 0;
    for (int i = 0; i < N; i++)
        n += (size_t)sprintf(reqs + n, "GET /%d HTTP/1.1\r\nHost: t\r\n\r\n", i % 10);
    /* Sent without reading: the server's socket buffers fill, then it must stop. */
    size_t sent = 0;
    uint64_t end = mono_ns() + 3000 * MS;
    while (sent < n && mono_ns() < end) {
        ssize_t w = send(c.fd, reqs + sent, n - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            sent += (size_t)w;
        CHECK_GE(mux_run(&h.loop, MUX_RUN_NOWAIT), 0);
    }
    /* It stops (a slow machine, Wine's first run, may take a few rounds to get there), and
     * stays so. */
    int calls = -1;
    for (int round = 0; round < 25 && h.calls != calls; round++) {
        calls = h.calls;
        run_ms(&h.loop, 200);
    }
    run_ms(&h.loop, 300);
    CHECK_EQ(h.calls, calls);
    /* What the kernel buffers (a loopback socket's send buffer grows to 4 MB at most, the
     * receive buffer to 6 MB) and max_output: well under the 2,000 answers. */
    CHECK_LT(calls, 800);
    CHECK_GT(calls, 4);
    /* Reading now: every answer comes, in order, 16 KB each. */
    uint64_t got = 0, want = 0;
    static char chunk[1 << 16];
    size_t head_len = 0;
    end = mono_ns() + 10000 * MS;
    while (h.calls < N || got < want || want == 0) {
        if (sent < n) {
            ssize_t w = send(c.fd, reqs + sent, n - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                sent += (size_t)w;
        }
        CHECK_GE(mux_run(&h.loop, MUX_RUN_NOWAIT), 0);
        ssize_t r = recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (r > 0) {
            if (head_len == 0) { /* the first answer's head says how long each one is */
                char *e = memmem(chunk, (size_t)r, "\r\n\r\n", 4);
                CHECK(e != NULL);
                head_len = (size_t)(e - chunk) + 4;
            }
            got += (uint64_t)r;
        }
        want = (uint64_t)N * (head_len + sizeof big_answer);
        CHECK_LT(mono_ns(), end);
        if (got >= want && h.calls == N)
            break;
    }
    CHECK_EQ(h.calls, N);
    CHECK_EQ(got, want); /* every answer's head is as long: the same Date, the same length */
    hc_close(&c);
    hs_close(&h);
}

/* ---- graceful shutdown ---- */

static int connect_refused(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    struct sockaddr_storage ss;
    socklen_t len = addr_v4(&ss, port);
    int r = connect(fd, (struct sockaddr *)&ss, len);
    int refused = r < 0 && errno == ECONNREFUSED;
    close(fd);
    return refused;
}

/* A drain stops listening and ends the connections that wait for a request at once; the
 * requests in flight finish, answered with Connection: close; then the server is closed. */
TEST(http_server_drain_lets_requests_in_flight_finish_and_closes_the_rest) {
    struct hs h;
    hs_open(&h, NULL);
    static struct hclient idle, fresh, held, half;
    static struct hanswer r;
    hc_open(&idle, h.port);
    get(&h, &idle, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    CHECK_EQ(r.status, 200);
    hc_open(&fresh, h.port);
    hc_open(&half, h.port); /* a request whose body is still to come */
    hc_sends(&h.loop, &half, "POST /half HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                        "Content-Length: 3\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &half, &r, 0), 0);
    CHECK_EQ(r.status, 100); /* its head was read */
    h.defer = 1;
    hc_open(&held, h.port);
    hc_sends(&h.loop, &held, "GET /held HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_wait_pending(&h, &held);
    CHECK_EQ(mux_http_server_drain(&h.srv, 5000 * MS, hs_srv_closed), 0);
    CHECK_EQ(mux_http_server_drain(&h.srv, 5000 * MS, hs_srv_closed), -EALREADY);
    CHECK_EQ(mux_http_server_drain(NULL, 0, NULL), -EINVAL);
    hc_wait_eof(&h.loop, &idle);
    hc_wait_eof(&h.loop, &fresh);
    CHECK(connect_refused(h.port)); /* not listening any more */
    /* The held exchange is answered late: with Connection: close, then the end. */
    run_ms(&h.loop, 30);
    CHECK_EQ(h.closed, 0);
    CHECK_EQ(mux_http_respond(h.pending, 200, NULL, 0, "late", 4), 0);
    h.pending = NULL;
    CHECK_EQ(hc_answer(&h.loop, &held, &r, 0), 0);
    CHECK_STR_EQ(r.body, "late");
    CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
    hc_wait_eof(&h.loop, &held);
    /* The body that was coming comes whole: answered, with Connection: close. */
    h.defer = 0;
    CHECK_EQ(h.closed, 0);
    hc_sends(&h.loop, &half, "abc");
    CHECK_EQ(hc_answer(&h.loop, &half, &r, 0), 0);
    CHECK_STR_EQ(r.body, "POST /half 3:abc");
    CHECK(ha_has(&r, "\r\nConnection: close\r\n"));
    hc_wait_eof(&h.loop, &half);
    uint64_t end = mono_ns() + 5000 * MS;
    while (!h.closed) {
        CHECK_GE(mux_run(&h.loop, MUX_RUN_ONCE), 0);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(h.calls, 3);
    hc_close(&idle);
    hc_close(&fresh);
    hc_close(&held);
    hc_close(&half);
    CHECK_EQ(mux_timer_stop(&h.loop, &h.tick), 0);
    loop_close(&h.loop);
}

/* A drain that runs out of time closes what is left, as mux_http_server_close does; and
 * mux_http_server_close during a drain ends it at once. */
TEST(http_server_drain_ends_at_its_timeout_or_at_a_close) {
    for (int forced = 0; forced < 2; forced++) {
        struct hs h;
        hs_open(&h, NULL);
        h.defer = 1;
        static struct hclient c;
        struct hcancel k = {0};
        hc_open(&c, h.port);
        hc_sends(&h.loop, &c, "GET /held HTTP/1.1\r\nHost: t\r\n\r\n");
        cl_wait_pending(&h, &c);
        k.x = h.pending;
        CHECK_EQ(mux_http_exchange_on_cancel(h.pending, hs_cancel_cb, &k), 0);
        /* The drain's timer counts from the loop's time, cached at its last iteration: taken
         * fresh here, after t0, so that the time the test measures is not longer than the
         * drain's (at load 15 the cached time was 11 ms older than t0). */
        uint64_t t0 = mono_ns();
        CHECK_EQ(mux_now_update(&h.loop), 0);
        CHECK_EQ(mux_http_server_drain(&h.srv, (forced ? 10000 : 100) * MS, NULL), 0);
        if (forced) {
            run_ms(&h.loop, 20);
            CHECK_EQ(k.calls, 0);
            CHECK_EQ(mux_http_server_close(&h.srv, hs_srv_closed), 0);
            CHECK_EQ(mux_http_server_close(&h.srv, hs_srv_closed), -EALREADY);
        }
        uint64_t end = mono_ns() + 5000 * MS;
        while (k.calls == 0) {
            hc_pump(&h.loop, &c);
            CHECK_LT(mono_ns(), end);
        }
        CHECK_EQ(k.reason, -ECANCELED);
        if (!forced)
            CHECK_GE(mono_ns() - t0, 100 * MS); /* not before the drain's time */
        hc_wait_eof(&h.loop, &c);
        hc_close(&c);
        CHECK_EQ(mux_timer_stop(&h.loop, &h.tick), 0);
        CHECK_EQ(mux_run(&h.loop, MUX_RUN_DEFAULT), 0); /* the close ends: nothing active */
        CHECK_EQ(h.closed, forced); /* the drain had no callback, the close one */
        loop_close(&h.loop);
    }
}

/* ---- the access log ---- */

struct logged {
    int n, status[8];
    uint64_t bytes[8];
    char target[8][32];
    int peer_ok[8];
    int64_t time_s;
};

static struct logged logged;

static void hs_log(mux_http_server_t *srv, const mux_http_log_t *e)
{
    (void)srv;
    int i = logged.n++;
    CHECK_LT(i, 8);
    logged.status[i] = e->status;
    logged.bytes[i] = e->body_bytes;
    snprintf(logged.target[i], sizeof logged.target[i], "%.*s", e->req ? (int)e->req->target.len : 1,
             e->req ? e->req->target.base : "-");
    const struct sockaddr_in *a = (const struct sockaddr_in *)e->peer;
    logged.peer_ok[i] = e->peer && e->peer_len == sizeof *a && a->sin_family == AF_INET &&
                        a->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
    logged.time_s = e->time_s;
}

/* Every answer is logged once, as it is queued: the server's own refusals too (with no
 * request when its head was not read), the body's length as answered, and the client. */
TEST(http_server_logs_every_answer_with_its_status_length_and_client) {
    memset(&logged, 0, sizeof logged);
    mux_http_server_options_t o = {.on_log = hs_log};
    struct hs h;
    hs_open(&h, &o);
    static struct hclient c;
    static struct hanswer r;
    hc_open(&c, h.port);
    get(&h, &c, "GET /one HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    hc_sends(&h.loop, &c, "HEAD /two HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 1), 0);
    hc_sends(&h.loop, &c, "GET /three HTTP/1.1\r\nBad Field: x\r\n\r\n");
    CHECK_EQ(hc_answer(&h.loop, &c, &r, 0), 0);
    CHECK_EQ(r.status, 400);
    hc_wait_eof(&h.loop, &c);
    hc_close(&c);
    CHECK_EQ(logged.n, 3);
    CHECK_EQ(logged.status[0], 200);
    CHECK_STR_EQ(logged.target[0], "/one");
    CHECK_EQ(logged.bytes[0], strlen("GET /one 0:"));
    CHECK_EQ(logged.status[1], 200);
    CHECK_STR_EQ(logged.target[1], "/two");
    CHECK_EQ(logged.bytes[1], 0); /* HEAD: no body sent */
    CHECK_EQ(logged.status[2], 400);
    CHECK_STR_EQ(logged.target[2], "-");
    CHECK_EQ(logged.bytes[2], strlen("400 Bad Request\n"));
    for (int i = 0; i < 3; i++)
        CHECK(logged.peer_ok[i]);
    CHECK_GT(logged.time_s, 1700000000); /* the wall clock's second, after 2023 */
    hs_close(&h);
}

/* ---- an answer that takes long to go out ---- */

static char *slow_body;
enum { SLOW_LEN = 4 << 20 };

static void hs_slow_body(mux_http_exchange_t *x)
{
    struct hs *h = mux_http_exchange_server(x)->data;
    h->calls++;
    CHECK_EQ(mux_http_respond(x, 200, NULL, 0, slow_body, SLOW_LEN), 0);
}

/* The idle timeout counts from the last answer's end, not from its queueing: a big answer
 * read slowly for longer than the idle timeout arrives whole. */
TEST(http_server_idle_timeout_does_not_cut_an_answer_still_going_out) {
    mux_http_server_options_t o = {.idle_timeout_ns = 100 * MS};
    struct hs h;
    hs_open_with(&h, &o, hs_slow_body);
    CHECK((slow_body = malloc(SLOW_LEN)) != NULL);
    for (size_t i = 0; i < SLOW_LEN; i++)
        slow_body[i] = (char)('a' + i % 23);
    static struct hclient c;
    int small = 16384;
    hc_open(&c, h.port);
    CHECK_EQ(setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    hc_sends(&h.loop, &c, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    static char chunk[32768];
    size_t got = 0, head = 0, want = 0;
    uint64_t t0 = mono_ns(), end = t0 + 15000 * MS;
    while (want == 0 || got < want) {
        run_ms(&h.loop, 2);
        ssize_t r = recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (r == 0)
            break; /* cut */
        if (r < 0) {
            CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
            continue;
        }
        if (head == 0) {
            char *e = memmem(chunk, (size_t)r, "\r\n\r\n", 4);
            CHECK(e != NULL);
            head = (size_t)(e - chunk) + 4;
            want = head + SLOW_LEN;
        }
        got += (size_t)r;
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(got, want);
    CHECK_GT(mono_ns() - t0, 200 * MS); /* it took longer than the idle timeout */
    hc_close(&c);
    hs_close(&h);
    free(slow_body);
}
