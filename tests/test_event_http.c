/* SPDX-License-Identifier: MIT */
/* libiomux-event's evhttp server, spoken to over real loopback sockets by a raw client in
 * the same thread (every wait turns the base): a GET answered, keep-alive and pipelining,
 * HTTP/1.0's close and keep-alive, a chunked reply in parts (and close-delimited for
 * HTTP/1.0), request bodies by length and chunked, refused requests (400, 413, 431, 501)
 * with the server serving the next connection, the general callback and the 404 without
 * one, and evhttp_free with connections open. Then the helpers without a server: header
 * lists, URIs, query strings, percent-encoding. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "event_fixture.h"
#include "harness.h"

/* ---- a raw client ---- */

struct cli {
    int fd, eof;
    size_t len;
    char buf[65536];
};

/* A reply taken out of the client's buffer: the head as sent, the body decoded. */
struct reply {
    int status;
    char head[4096];
    size_t body_len;
    char body[16384];
    char raw_body[16384]; /* the body's bytes as sent (chunk framing and all) */
};

static struct event_base *base;

static uint16_t bound_port(struct evhttp_bound_socket *b)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    CHECK(b != NULL);
    CHECK_EQ(getsockname(evhttp_bound_socket_get_fd(b), (struct sockaddr *)&sin, &len), 0);
    return ntohs(sin.sin_port);
}

/* A base on the case's backend, and a server on 127.0.0.1 on a port the system picks. */
static struct evhttp *server(uint16_t *port)
{
    base = evt_base_open();
    struct evhttp *http = evhttp_new(base);
    CHECK(http != NULL);
    *port = bound_port(evhttp_bind_socket_with_handle(http, "127.0.0.1", 0));
    return http;
}

static void server_close(struct evhttp *http)
{
    evhttp_free(http);
    evt_base_close(base);
}

static void cli_open(struct cli *c, uint16_t port)
{
    c->fd = (int)socket(AF_INET, SOCK_STREAM, 0);
    CHECK_GE(c->fd, 0);
    c->eof = 0;
    c->len = 0;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port),
                              .sin_addr.s_addr = htonl(0x7f000001)};
    CHECK_EQ(connect(c->fd, (struct sockaddr *)&sin, sizeof sin), 0);
    CHECK_EQ(evutil_make_socket_nonblocking(c->fd), 0);
}

static void cli_send(struct cli *c, const char *s)
{
    size_t n = strlen(s);
    CHECK_EQ(write(c->fd, s, n), (ssize_t)n);
}

/* Turns the base for 10 ms, then takes what arrived. */
static void cli_pump(struct cli *c)
{
    struct timeval step = {0, 10000};
    CHECK_EQ(event_base_loopexit(base, &step), 0);
    CHECK_GE(event_base_dispatch(base), 0);
    while (!c->eof && c->len < sizeof c->buf) {
        ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
        if (n > 0) {
            c->len += (size_t)n;
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            c->eof = 1; /* a reset ends the connection as a close does */
        break;
    }
}

static const char *find_field(const char *head, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n"))
        if (evutil_ascii_strncasecmp(p + 2, name, n) == 0 && p[2 + n] == ':')
            return p + 2 + n + 2;
    return NULL;
}

/* The length of a complete reply at the start of the buffer (its body decoded into r), or
 * 0 while it is not complete. */
static size_t reply_len(struct cli *c, struct reply *r, int head_only)
{
    char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t hlen = (size_t)(end - c->buf) + 4;
    CHECK_LT(hlen, sizeof r->head);
    memcpy(r->head, c->buf, hlen);
    r->head[hlen] = '\0';
    CHECK_EQ(sscanf(r->head, "HTTP/1.%*d %d", &r->status), 1);
    const char *te = find_field(r->head, "Transfer-Encoding");
    const char *cl = find_field(r->head, "Content-Length");
    size_t at = hlen;
    r->body_len = 0;
    if (head_only) {
        at = hlen;
    } else if (te && strncmp(te, "chunked", 7) == 0) {
        for (;;) {
            char *eol = memmem(c->buf + at, c->len - at, "\r\n", 2);
            if (!eol)
                return 0;
            size_t size = strtoul(c->buf + at, NULL, 16);
            size_t data = (size_t)(eol - c->buf) + 2;
            if (c->len < data + size + 2)
                return 0;
            CHECK_LT(r->body_len + size, sizeof r->body);
            memcpy(r->body + r->body_len, c->buf + data, size);
            r->body_len += size;
            at = data + size + 2;
            if (size == 0)
                break;
        }
    } else if (cl) {
        size_t n = strtoul(cl, NULL, 10);
        if (c->len < hlen + n)
            return 0;
        CHECK_LT(n, sizeof r->body);
        memcpy(r->body, c->buf + hlen, n);
        r->body_len = n;
        at = hlen + n;
    } else { /* delimited by the close */
        if (!c->eof)
            return 0;
        at = c->len;
        CHECK_LT(at - hlen, sizeof r->body);
        memcpy(r->body, c->buf + hlen, at - hlen);
        r->body_len = at - hlen;
    }
    CHECK_LT(at - hlen, sizeof r->raw_body);
    memcpy(r->raw_body, c->buf + hlen, at - hlen);
    r->raw_body[at - hlen] = '\0';
    r->body[r->body_len] = '\0';
    return at;
}

/* Waits for the next complete reply (5 s at most) and takes it out of the buffer. */
static void cli_reply_as(struct cli *c, struct reply *r, int head_only)
{
    size_t n = 0;
    for (int i = 0; i < 500 && !(n = reply_len(c, r, head_only)); i++) {
        CHECK(!c->eof || c->len > 0);
        cli_pump(c);
    }
    CHECK_GT(n, 0);
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

static void cli_reply(struct cli *c, struct reply *r)
{
    cli_reply_as(c, r, 0);
}

/* Whether the server closed the connection within 5 s. */
static int cli_closed(struct cli *c)
{
    for (int i = 0; i < 500 && !c->eof; i++)
        cli_pump(c);
    return c->eof;
}

/* Turns the base a few times: the connection stays open if nothing closes it now. */
static int cli_still_open(struct cli *c)
{
    for (int i = 0; i < 5 && !c->eof; i++)
        cli_pump(c);
    return !c->eof;
}

static void cli_close(struct cli *c)
{
    close(c->fd);
}

static struct reply rep; /* large: not on the stack */
static struct cli cl, cl2;

/* Sends `request` on a connection of its own: the server must answer `status` and close. */
static void refused(uint16_t port, const char *request, int status)
{
    cli_open(&cl, port);
    cli_send(&cl, request);
    CHECK(cli_closed(&cl));
    cli_reply(&cl, &rep);
    CHECK_EQ(rep.status, status);
    cli_close(&cl);
}

/* ---- callbacks ---- */

struct seen {
    int calls;
    enum evhttp_cmd_type cmd;
    char uri[256], host[64], body[256], field[64], peer[64];
    ev_uint16_t peer_port;
    struct evhttp_request *held;
};

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "(null)");
}

static void note(struct evhttp_request *req, struct seen *s)
{
    s->calls++;
    s->cmd = evhttp_request_get_command(req);
    copy(s->uri, sizeof s->uri, evhttp_request_get_uri(req));
    copy(s->host, sizeof s->host, evhttp_request_get_host(req));
    copy(s->field, sizeof s->field,
         evhttp_find_header(evhttp_request_get_input_headers(req), "X-Test"));
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    CHECK_LT(n, sizeof s->body);
    evbuffer_remove(in, s->body, n);
    s->body[n] = '\0';
    char *addr = NULL;
    evhttp_connection_get_peer(evhttp_request_get_connection(req), &addr, &s->peer_port);
    copy(s->peer, sizeof s->peer, addr);
}

static void hello_cb(struct evhttp_request *req, void *arg)
{
    note(req, arg);
    CHECK_EQ(evhttp_add_header(evhttp_request_get_output_headers(req), "X-Reply", "yes"), 0);
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "hello %d", ((struct seen *)arg)->calls);
    evhttp_send_reply(req, HTTP_OK, "Fine", b);
    CHECK_EQ(evbuffer_get_length(b), 0); /* moved out, still the caller's */
    evbuffer_free(b);
}

static uint16_t client_port(int fd)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    CHECK_EQ(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    return ntohs(sin.sin_port);
}

/* ---- the server ---- */

TEST(evhttp_get_is_answered_by_its_paths_callback) {
    uint16_t port;
    struct evhttp *http = server(&port);
    struct seen s = {0};
    CHECK_EQ(evhttp_set_cb(http, "/hello", hello_cb, &s), 0);
    CHECK_EQ(evhttp_set_cb(http, "/hello", hello_cb, &s), -1); /* taken */
    cli_open(&cl, port);
    cli_send(&cl, "GET /hello?x=1 HTTP/1.1\r\nHost: example.com:8080\r\nX-Test: value\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.cmd, EVHTTP_REQ_GET);
    CHECK_STR_EQ(s.uri, "/hello?x=1");
    CHECK_STR_EQ(s.host, "example.com");
    CHECK_STR_EQ(s.field, "value");
    CHECK_STR_EQ(s.peer, "127.0.0.1");
    CHECK_EQ(s.peer_port, client_port(cl.fd));
    CHECK(strncmp(rep.head, "HTTP/1.1 200 Fine\r\n", 19) == 0);
    CHECK_STR_EQ(rep.body, "hello 1");
    CHECK(strncmp(find_field(rep.head, "Content-Length"), "7\r\n", 3) == 0);
    CHECK(strncmp(find_field(rep.head, "Content-Type"), "text/html; charset=ISO-8859-1\r\n",
                  31) == 0);
    CHECK(strncmp(find_field(rep.head, "X-Reply"), "yes\r\n", 5) == 0);
    CHECK(find_field(rep.head, "Date") != NULL);
    CHECK(find_field(rep.head, "Connection") == NULL);
    /* The path is matched decoded, without the query. */
    cli_send(&cl, "GET /hel%6co HTTP/1.1\r\nHost: h\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK_EQ(rep.status, 200);
    CHECK_EQ(s.calls, 2);
    CHECK(cli_still_open(&cl));
    cli_close(&cl);
    server_close(http);
}

TEST(evhttp_keeps_an_http11_connection_for_sequential_and_pipelined_requests) {
    uint16_t port;
    struct evhttp *http = server(&port);
    struct seen s = {0};
    CHECK_EQ(evhttp_set_cb(http, "/a", hello_cb, &s), 0);
    cli_open(&cl, port);
    cli_send(&cl, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK_STR_EQ(rep.body, "hello 1");
    cli_send(&cl, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK_STR_EQ(rep.body, "hello 2");
    /* Three at once: answered one after the other, in order. */
    cli_send(&cl, "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\n"
                  "GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK_STR_EQ(rep.body, "hello 3");
    cli_reply(&cl, &rep);
    CHECK_STR_EQ(rep.body, "hello 4");
    cli_reply(&cl, &rep);
    CHECK_STR_EQ(rep.body, "hello 5");
    CHECK(strncmp(find_field(rep.head, "Connection"), "close\r\n", 7) == 0);
    CHECK(cli_closed(&cl)); /* as the last asked */
    CHECK_EQ(s.calls, 5);
    cli_close(&cl);
    server_close(http);
}

TEST(evhttp_closes_after_an_http10_reply_unless_asked_to_keep_alive) {
    uint16_t port;
    struct evhttp *http = server(&port);
    struct seen s = {0};
    CHECK_EQ(evhttp_set_cb(http, "/a", hello_cb, &s), 0);
    cli_open(&cl, port);
    cli_send(&cl, "GET /a HTTP/1.0\r\n\r\n");
    CHECK(cli_closed(&cl));
    cli_reply(&cl, &rep);
    CHECK(strncmp(rep.head, "HTTP/1.0 200 Fine\r\n", 19) == 0);
    CHECK(find_field(rep.head, "Content-Length") == NULL); /* as libevent: the close ends it */
    CHECK(find_field(rep.head, "Date") == NULL);
    CHECK_STR_EQ(rep.body, "hello 1");
    cli_close(&cl);
    /* Connection: keep-alive keeps it, said back, with the body's length. */
    cli_open(&cl, port);
    cli_send(&cl, "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK(strncmp(find_field(rep.head, "Connection"), "keep-alive\r\n", 12) == 0);
    CHECK(strncmp(find_field(rep.head, "Content-Length"), "7\r\n", 3) == 0);
    CHECK(cli_still_open(&cl));
    cli_send(&cl, "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK_STR_EQ(rep.body, "hello 3");
    cli_send(&cl, "GET /a HTTP/1.0\r\n\r\n");
    CHECK(cli_closed(&cl));
    CHECK_EQ(s.calls, 4);
    cli_close(&cl);
    server_close(http);
}

/* A reply in parts: the head and "abc" now, "defgh" and the end from timers later. */
static void part_later(evutil_socket_t fd, short what, void *arg)
{
    struct evhttp_request *req = arg;
    (void)fd, (void)what;
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, "defgh", 5);
    evhttp_send_reply_chunk(req, b);
    CHECK_EQ(evbuffer_get_length(b), 0);
    evbuffer_free(b);
    evhttp_send_reply_end(req);
}

static void chunked_cb(struct evhttp_request *req, void *arg)
{
    note(req, arg);
    evhttp_send_reply_start(req, HTTP_OK, NULL);
    CHECK_EQ(evhttp_request_get_response_code(req), 200);
    CHECK_STR_EQ(evhttp_request_get_response_code_line(req), "OK");
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, "abc", 3);
    evhttp_send_reply_chunk(req, b);
    evbuffer_free(b);
    struct timeval tv = {0, 20000};
    CHECK_EQ(event_base_once(base, -1, EV_TIMEOUT, part_later, req, &tv), 0);
}

TEST(evhttp_reply_in_parts_is_chunked_for_http11_and_ends_with_the_close_for_http10) {
    uint16_t port;
    struct evhttp *http = server(&port);
    struct seen s = {0};
    CHECK_EQ(evhttp_set_cb(http, "/c", chunked_cb, &s), 0);
    CHECK_EQ(evhttp_set_cb(http, "/a", hello_cb, &s), 0);
    cli_open(&cl, port);
    cli_send(&cl, "GET /c HTTP/1.1\r\nHost: h\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK(strncmp(rep.head, "HTTP/1.1 200 OK\r\n", 17) == 0);
    CHECK(strncmp(find_field(rep.head, "Transfer-Encoding"), "chunked\r\n", 9) == 0);
    CHECK(find_field(rep.head, "Content-Length") == NULL);
    CHECK_STR_EQ(rep.raw_body, "3\r\nabc\r\n5\r\ndefgh\r\n0\r\n\r\n");
    CHECK_STR_EQ(rep.body, "abcdefgh");
    /* The connection goes on after the last chunk. */
    cli_send(&cl, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK_STR_EQ(rep.body, "hello 2");
    cli_close(&cl);
    cli_open(&cl, port);
    cli_send(&cl, "GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    CHECK(cli_closed(&cl));
    cli_reply(&cl, &rep);
    CHECK(find_field(rep.head, "Transfer-Encoding") == NULL);
    CHECK(strncmp(find_field(rep.head, "Connection"), "close\r\n", 7) == 0);
    CHECK_STR_EQ(rep.body, "abcdefgh");
    CHECK_EQ(s.calls, 3);
    cli_close(&cl);
    server_close(http);
}

TEST(evhttp_request_body_is_in_the_input_buffer_by_length_or_chunked) {
    uint16_t port;
    struct evhttp *http = server(&port);
    struct seen s = {0};
    CHECK_EQ(evhttp_set_cb(http, "/post", hello_cb, &s), 0);
    cli_open(&cl, port);
    /* The head first, the body in two later writes. */
    cli_send(&cl, "POST /post HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n");
    for (int i = 0; i < 3; i++)
        cli_pump(&cl);
    CHECK_EQ(s.calls, 0);
    cli_send(&cl, "name=");
    cli_pump(&cl);
    CHECK_EQ(s.calls, 0);
    cli_send(&cl, "value");
    cli_reply(&cl, &rep);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.cmd, EVHTTP_REQ_POST);
    CHECK_STR_EQ(s.body, "name=value");
    cli_send(&cl, "PUT /post HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "4\r\nwiki\r\n5\r\npedia\r\n0\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK_EQ(s.calls, 2);
    CHECK_EQ(s.cmd, EVHTTP_REQ_PUT);
    CHECK_STR_EQ(s.body, "wikipedia");
    /* Expect: 100-continue is answered before the body is sent. */
    cli_send(&cl, "POST /post HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n"
                  "Expect: 100-continue\r\n\r\n");
    cli_reply_as(&cl, &rep, 1);
    CHECK_EQ(rep.status, 100);
    cli_send(&cl, "ok");
    cli_reply(&cl, &rep);
    CHECK_EQ(rep.status, 200);
    CHECK_STR_EQ(s.body, "ok");
    cli_close(&cl);
    server_close(http);
}

TEST(evhttp_malformed_request_gets_400_and_the_server_serves_the_next_connection) {
    uint16_t port;
    struct evhttp *http = server(&port);
    struct seen s = {0};
    CHECK_EQ(evhttp_set_cb(http, "/a", hello_cb, &s), 0);
    cli_open(&cl, port);
    cli_open(&cl2, port); /* open while the other is refused */
    cli_send(&cl, "GET /a HTTP/1.1\r\nHost: h\r\nBad Field: x\r\n\r\n");
    CHECK(cli_closed(&cl));
    cli_reply(&cl, &rep);
    CHECK(strncmp(rep.head, "HTTP/1.1 400 Bad Request\r\n", 26) == 0);
    CHECK(strncmp(find_field(rep.head, "Connection"), "close\r\n", 7) == 0);
    CHECK(strstr(rep.body, "<TITLE>400 Bad Request</TITLE>") != NULL);
    CHECK_EQ(s.calls, 0);
    cli_close(&cl);
    cli_send(&cl2, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
    cli_reply(&cl2, &rep);
    CHECK_EQ(rep.status, 200);
    CHECK_EQ(s.calls, 1);
    cli_close(&cl2);
    /* Garbage, a method libevent does not know, and one not allowed. */
    const struct {
        const char *req;
        int status;
    } bad[] = {
        {"\x01\x02garbage\r\n\r\n", 400},
        {"BREW /a HTTP/1.1\r\nHost: h\r\n\r\n", 400},
        {"OPTIONS /a HTTP/1.1\r\nHost: h\r\n\r\n", 501},
        {"GET /a HTTP/2.0\r\nHost: h\r\n\r\n", 505},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused(port, bad[i].req, bad[i].status);
    CHECK_EQ(s.calls, 1);
    server_close(http);
}

TEST(evhttp_heads_and_bodies_over_the_limits_are_refused) {
    uint16_t port;
    struct evhttp *http = server(&port);
    struct seen s = {0};
    CHECK_EQ(evhttp_set_cb(http, "/a", hello_cb, &s), 0);
    evhttp_set_max_headers_size(http, 200);
    evhttp_set_max_body_size(http, 8);
    char big[512];
    snprintf(big, sizeof big, "GET /a HTTP/1.1\r\nHost: h\r\nX-Big: %0300d\r\n\r\n", 0);
    refused(port, big, 431);
    refused(port, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 9\r\n\r\n123456789", 413);
    refused(port,
            "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5\r\n12345\r\n5\r\n67890\r\n0\r\n\r\n",
            413);
    /* At the limits: served. */
    cli_open(&cl, port);
    cli_send(&cl, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 8\r\n\r\n12345678");
    cli_reply(&cl, &rep);
    CHECK_EQ(rep.status, 200);
    CHECK_STR_EQ(s.body, "12345678");
    cli_close(&cl);
    server_close(http);
}

static void gen_cb(struct evhttp_request *req, void *arg)
{
    note(req, arg);
    evhttp_send_error(req, HTTP_BADMETHOD, "Not Here");
}

TEST(evhttp_unmatched_paths_go_to_the_general_callback_or_get_404) {
    uint16_t port;
    struct evhttp *http = server(&port);
    struct seen s = {0}, g = {0};
    CHECK_EQ(evhttp_set_cb(http, "/a", hello_cb, &s), 0);
    cli_open(&cl, port);
    cli_send(&cl, "GET /b<x> HTTP/1.1\r\nHost: h\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK_EQ(rep.status, 404);
    CHECK(strstr(rep.body, "/b&lt;x&gt;") != NULL); /* escaped */
    CHECK(cli_closed(&cl)); /* a page of evhttp's own closes, as libevent's */
    cli_close(&cl);
    evhttp_set_gencb(http, gen_cb, &g);
    cli_open(&cl, port);
    cli_send(&cl, "GET /b HTTP/1.1\r\nHost: h\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK(strncmp(rep.head, "HTTP/1.1 405 Not Here\r\n", 23) == 0);
    CHECK_EQ(g.calls, 1);
    CHECK_STR_EQ(g.uri, "/b");
    CHECK(cli_closed(&cl));
    cli_close(&cl);
    /* A deleted path is unmatched too. */
    CHECK_EQ(evhttp_del_cb(http, "/a"), 0);
    CHECK_EQ(evhttp_del_cb(http, "/a"), -1);
    cli_open(&cl, port);
    cli_send(&cl, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK_EQ(g.calls, 2);
    CHECK_EQ(s.calls, 0);
    cli_close(&cl);
    server_close(http);
}

static void hold_cb(struct evhttp_request *req, void *arg)
{
    struct seen *s = arg;
    s->calls++;
    s->held = req; /* answered never: evhttp_free frees it */
}

TEST(evhttp_free_closes_open_connections_and_frees_their_requests) {
    uint16_t port;
    struct evhttp *http = server(&port);
    struct seen s = {0};
    CHECK_EQ(evhttp_set_cb(http, "/hold", hold_cb, &s), 0);
    cli_open(&cl, port);  /* idle */
    cli_open(&cl2, port); /* its request held by the program */
    cli_send(&cl, "GET /hold HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nab");
    cli_send(&cl2, "GET /hold HTTP/1.1\r\nHost: h\r\n\r\n");
    for (int i = 0; i < 500 && s.calls < 1; i++)
        cli_pump(&cl2);
    CHECK_EQ(s.calls, 1);
    CHECK(s.held != NULL);
    evhttp_free(http);
    CHECK(cli_closed(&cl));
    CHECK(cli_closed(&cl2));
    CHECK_EQ(cl2.len, 0);
    cli_close(&cl);
    cli_close(&cl2);
    /* The base has nothing of the server's left. */
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
    evt_base_close(base);
}

TEST(evhttp_serves_a_socket_the_program_made) {
    base = evt_base_open();
    struct evhttp *http = evhttp_new(base);
    evutil_socket_t fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    CHECK_EQ(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    CHECK_EQ(listen(fd, 8), 0);
    CHECK_EQ(evutil_make_socket_nonblocking(fd), 0); /* as evconnlistener_new asks */
    struct evhttp_bound_socket *b = evhttp_accept_socket_with_handle(http, fd);
    CHECK(b != NULL);
    CHECK_EQ(evhttp_bound_socket_get_fd(b), fd);
    struct seen s = {0};
    CHECK_EQ(evhttp_set_cb(http, "/a", hello_cb, &s), 0);
    cli_open(&cl, bound_port(b));
    cli_send(&cl, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
    cli_reply(&cl, &rep);
    CHECK_EQ(rep.status, 200);
    cli_close(&cl);
    evhttp_free(http); /* closes fd, as libevent */
    evt_base_close(base);
}

/* ---- the helpers ---- */

CORE_TEST(evhttp_header_lists_add_find_remove_and_refuse_line_breaks) {
    struct evkeyvalq h = {NULL, &h.tqh_first};
    CHECK_EQ(evhttp_add_header(&h, "Content-Type", "text/plain"), 0);
    CHECK_EQ(evhttp_add_header(&h, "X-A", "1"), 0);
    CHECK_EQ(evhttp_add_header(&h, "x-a", "2"), 0);
    CHECK_EQ(evhttp_add_header(&h, "X-Fold", "a\r\n b"), 0); /* a continuation */
    CHECK_EQ(evhttp_add_header(&h, "X-Bad", "a\r\nInjected: yes"), -1);
    CHECK_EQ(evhttp_add_header(&h, "X-Bad\n", "a"), -1);
    CHECK_EQ(evhttp_add_header(&h, "X-Bad", "a\n"), -1);
    CHECK_STR_EQ(evhttp_find_header(&h, "content-type"), "text/plain");
    CHECK_STR_EQ(evhttp_find_header(&h, "X-A"), "1");
    CHECK(evhttp_find_header(&h, "X-Bad") == NULL);
    CHECK_EQ(evhttp_remove_header(&h, "X-A"), 0);
    CHECK_STR_EQ(evhttp_find_header(&h, "X-A"), "2");
    CHECK_EQ(evhttp_remove_header(&h, "X-None"), -1);
    int n = 0;
    for (struct evkeyval *kv = h.tqh_first; kv; kv = kv->next.tqe_next)
        n++;
    CHECK_EQ(n, 3);
    evhttp_clear_headers(&h);
    CHECK(h.tqh_first == NULL);
    CHECK_EQ(evhttp_add_header(&h, "After", "clear"), 0);
    CHECK(h.tqh_first != NULL && h.tqh_first->next.tqe_next == NULL);
    evhttp_clear_headers(&h);
    CHECK(evhttp_find_header(NULL, "x") == NULL);
    CHECK_EQ(evhttp_add_header(NULL, "x", "y"), -1);
}

CORE_TEST(evhttp_uri_parse_splits_a_uri_into_its_parts) {
    struct evhttp_uri *u = evhttp_uri_parse("http://user@www.example.com:8080/a/b?q=1&r#frag");
    CHECK(u != NULL);
    CHECK_STR_EQ(evhttp_uri_get_scheme(u), "http");
    CHECK_STR_EQ(evhttp_uri_get_userinfo(u), "user");
    CHECK_STR_EQ(evhttp_uri_get_host(u), "www.example.com");
    CHECK_EQ(evhttp_uri_get_port(u), 8080);
    CHECK_STR_EQ(evhttp_uri_get_path(u), "/a/b");
    CHECK_STR_EQ(evhttp_uri_get_query(u), "q=1&r");
    CHECK_STR_EQ(evhttp_uri_get_fragment(u), "frag");
    evhttp_uri_free(u);
    u = evhttp_uri_parse("/only/path");
    CHECK(u != NULL);
    CHECK(evhttp_uri_get_scheme(u) == NULL);
    CHECK(evhttp_uri_get_host(u) == NULL);
    CHECK_EQ(evhttp_uri_get_port(u), -1);
    CHECK_STR_EQ(evhttp_uri_get_path(u), "/only/path");
    CHECK(evhttp_uri_get_query(u) == NULL);
    evhttp_uri_free(u);
    u = evhttp_uri_parse("http://[::1]:80/");
    CHECK(u != NULL);
    CHECK_STR_EQ(evhttp_uri_get_host(u), "::1");
    CHECK_EQ(evhttp_uri_get_port(u), 80);
    evhttp_uri_free(u);
    CHECK(evhttp_uri_parse("http://h:99999/") == NULL);
    CHECK(evhttp_uri_parse("http://h:8x/") == NULL);
    CHECK(evhttp_uri_parse("/a b") == NULL);
    CHECK(evhttp_uri_parse(NULL) == NULL);
    u = evhttp_uri_parse_with_flags("/a\"b", EVHTTP_URI_NONCONFORMANT);
    CHECK(u != NULL);
    evhttp_uri_free(u);
    evhttp_uri_free(NULL);
}

CORE_TEST(evhttp_query_strings_parse_into_decoded_pairs) {
    struct evkeyvalq q;
    CHECK_EQ(evhttp_parse_query_str("q=test&s=some+thing%21&e=", &q), 0);
    CHECK_STR_EQ(evhttp_find_header(&q, "q"), "test");
    CHECK_STR_EQ(evhttp_find_header(&q, "s"), "some thing!");
    CHECK_STR_EQ(evhttp_find_header(&q, "e"), "");
    evhttp_clear_headers(&q);
    CHECK_EQ(evhttp_parse_query("http://h/p?a=1&b=%41", &q), 0);
    CHECK_STR_EQ(evhttp_find_header(&q, "a"), "1");
    CHECK_STR_EQ(evhttp_find_header(&q, "b"), "A");
    evhttp_clear_headers(&q);
    CHECK_EQ(evhttp_parse_query("/p", &q), 0);
    CHECK(q.tqh_first == NULL);
    CHECK_EQ(evhttp_parse_query_str("a=1&novalue", &q), -1);
    CHECK(q.tqh_first == NULL); /* the list is cleared, as libevent's */
    CHECK_EQ(evhttp_parse_query_str("=1", &q), -1);
}

CORE_TEST(evhttp_percent_encoding_and_html_escaping) {
    char *s = evhttp_encode_uri("a b/c~d.e_f-g\xff");
    CHECK_STR_EQ(s, "a%20b%2Fc~d.e_f-g%FF");
    free(s);
    s = evhttp_uriencode("a b\0c", 5, 1);
    CHECK_STR_EQ(s, "a+b%00c");
    free(s);
    s = evhttp_decode_uri("/a+b%20c?d+e%zz");
    CHECK_STR_EQ(s, "/a+b c?d e%zz"); /* '+' is a space after the '?' only */
    free(s);
    size_t n = 0;
    s = evhttp_uridecode("a+b%00c%4", 1, &n);
    CHECK_EQ(n, 7);
    CHECK(memcmp(s, "a b\0c%4", 8) == 0); /* an incomplete escape stays as sent */
    free(s);
    s = evhttp_uridecode("a+b", 0, NULL);
    CHECK_STR_EQ(s, "a+b");
    free(s);
    s = evhttp_htmlescape("<a href=\"x\">'&'</a>");
    CHECK_STR_EQ(s, "&lt;a href=&quot;x&quot;&gt;&#039;&amp;&#039;&lt;/a&gt;");
    free(s);
    CHECK(evhttp_encode_uri(NULL) == NULL);
    CHECK(evhttp_htmlescape(NULL) == NULL);
}

CORE_TEST(evhttp_calls_on_null_fail_or_answer_nothing) {
    CHECK(evhttp_new(NULL) == NULL);
    evhttp_free(NULL);
    CHECK_EQ(evhttp_bind_socket(NULL, "127.0.0.1", 0), -1);
    CHECK_EQ(evhttp_accept_socket(NULL, 3), -1);
    CHECK_EQ(evhttp_bound_socket_get_fd(NULL), -1);
    CHECK_EQ(evhttp_set_cb(NULL, "/", NULL, NULL), -2);
    CHECK_EQ(evhttp_del_cb(NULL, "/"), -1);
    evhttp_set_gencb(NULL, NULL, NULL);
    evhttp_set_timeout(NULL, 1);
    evhttp_set_max_body_size(NULL, 1);
    CHECK(evhttp_request_get_uri(NULL) == NULL);
    CHECK(evhttp_request_get_input_headers(NULL) == NULL);
    CHECK(evhttp_request_get_connection(NULL) == NULL);
    evhttp_send_reply(NULL, 200, "OK", NULL);
    evhttp_send_error(NULL, 500, NULL);
    evhttp_send_reply_start(NULL, 200, NULL);
    evhttp_send_reply_chunk(NULL, NULL);
    evhttp_send_reply_end(NULL);
    char *addr = (char *)"x";
    ev_uint16_t port = 1;
    evhttp_connection_get_peer(NULL, &addr, &port);
    CHECK(addr == NULL);
    CHECK_EQ(port, 0);
}
