/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the HTTP server's connection state machine (tests/fuzz/run).
 *
 * One loop and two servers (small limits, so that every refusal is reachable) live across
 * inputs: one hands its handler whole bodies, the other streams them (stream_bodies), and
 * inputs of odd length go to the latter. Each input is the bytes a client sends on
 * a fresh loopback connection, in up to three pieces cut where the first byte says, then
 * the client half-closes. The loop runs
 * until the server closed the connection or a bound of iterations passed. Besides "no crash,
 * no sanitizer report", it checks that whatever came back is a sequence of HTTP/1.1 status
 * lines with their heads, and that the server closed the connection (every input ends with
 * the client's half-close, so every connection must end).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iomux.h"
#include "iomux/http.h"

#define REQUIRE(e)                                                                                 \
    do {                                                                                           \
        if (!(e))                                                                                  \
            abort();                                                                               \
    } while (0)

static mux_loop_t loop;
static mux_http_server_t srv, ssrv;
static struct sockaddr_in addr, saddr;
static socklen_t addrlen = sizeof addr, saddrlen = sizeof saddr;

static void handler(mux_http_exchange_t *x)
{
    const mux_http_request_t *req = mux_http_exchange_request(x);
    mux_http_str_t body = mux_http_exchange_body(x);
    REQUIRE(req && req->method.len > 0 && (body.len == 0 || body.base));
    /* Answers in three ways, by the target's length. */
    switch (req->target.len % 3) {
    case 0:
        REQUIRE(mux_http_respond(x, 200, NULL, 0, "ok", 2) == 0);
        break;
    case 1: {
        mux_http_header_t h = {{"X-Len", 5}, {"1", 1}};
        REQUIRE(mux_http_respond(x, 404, &h, 1, body.base ? body.base : "", body.len) == 0);
        break;
    }
    default:
        REQUIRE(mux_http_respond(x, 204, NULL, 0, NULL, 0) == 0);
        break;
    }
}

/* The streaming server's reader: answers at the body's end or error, or at its first
 * piece when the handler said so (one connection at a time: a static is enough). */
static int answer_at_first;

static void body_cb(mux_http_exchange_t *x, const char *data, ssize_t len)
{
    REQUIRE(len <= 0 || data != NULL);
    if (len > 0 && !answer_at_first)
        return;
    int r = mux_http_respond(x, len < 0 ? 400 : 200, NULL, 0, "done", 4);
    REQUIRE(r == 0 || r == -ECANCELED);
}

/* Answers in four ways, by the target's length: reads the body and answers at its end,
 * answers at its first piece, answers at once (the rest is dropped), or 204 at once. */
static void stream_handler(mux_http_exchange_t *x)
{
    const mux_http_request_t *req = mux_http_exchange_request(x);
    REQUIRE(req && mux_http_exchange_body(x).len == 0);
    answer_at_first = req->target.len % 4 == 1;
    switch (req->target.len % 4) {
    case 0:
    case 1:
        REQUIRE(mux_http_exchange_read(x, body_cb) == 0);
        break;
    case 2:
        REQUIRE(mux_http_respond(x, 200, NULL, 0, "early", 5) == 0);
        break;
    default:
        REQUIRE(mux_http_respond(x, 204, NULL, 0, NULL, 0) == 0);
        break;
    }
}

static void setup(void)
{
    REQUIRE(mux_loop_init(&loop, NULL) == 0);
    mux_http_server_options_t o = {
        .limits = {.max_head = 512, .max_target = 64, .max_headers = 8, .max_body = 256},
        .header_timeout_ns = 50 * 1000000ull,
        .idle_timeout_ns = 50 * 1000000ull,
        .body_timeout_ns = 50 * 1000000ull,
        .max_requests = 4,
    };
    REQUIRE(mux_http_server_init(&srv, &loop, &o, handler) == 0);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(mux_http_server_listen(&srv, (struct sockaddr *)&addr, sizeof addr, NULL) == 0);
    REQUIRE(mux_http_server_address(&srv, (struct sockaddr *)&addr, &addrlen) == 0);
    o.stream_bodies = 1;
    REQUIRE(mux_http_server_init(&ssrv, &loop, &o, stream_handler) == 0);
    saddr = addr;
    saddr.sin_port = 0;
    REQUIRE(mux_http_server_listen(&ssrv, (struct sockaddr *)&saddr, sizeof saddr, NULL) == 0);
    REQUIRE(mux_http_server_address(&ssrv, (struct sockaddr *)&saddr, &saddrlen) == 0);
}

/* Whatever came back must be HTTP/1.1 heads (bodies are not parsed: their lengths are). */
static void check_answers(const char *got, size_t n)
{
    if (n == 0)
        return; /* closed without an answer: a silent client timed out, or nothing to say */
    REQUIRE(n >= 12 && memcmp(got, "HTTP/1.1 ", 9) == 0);
    REQUIRE(got[9] >= '1' && got[9] <= '5');
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static int ready;
    if (!ready) {
        setup();
        ready = 1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    int streamed = n & 1;
    REQUIRE(connect(fd, (struct sockaddr *)(streamed ? &saddr : &addr), addrlen) == 0 ||
            errno == EINPROGRESS);
    size_t cut1 = n ? d[0] % (n + 1) : 0, cut2 = n > 1 ? d[n - 1] % (n + 1) : n;
    if (cut2 < cut1)
        cut2 = cut1;
    size_t cuts[4] = {0, cut1, cut2, n}, sent = 0;
    int piece = 0, shut = 0, eof = 0;
    static char got[1 << 16];
    size_t ngot = 0;
    for (int i = 0; i < 20000 && !eof; i++) {
        if (piece < 3 && sent == cuts[piece + 1])
            piece++;
        if (piece < 3) {
            ssize_t w = send(fd, d + sent, cuts[piece + 1] - sent, MSG_NOSIGNAL);
            if (w > 0)
                sent += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != ENOTCONN)
                piece = 3; /* the server closed early: fine */
        } else if (!shut) {
            shutdown(fd, SHUT_WR);
            shut = 1;
        }
        REQUIRE(mux_run(&loop, MUX_RUN_NOWAIT) >= 0);
        ssize_t r = recv(fd, got + ngot, sizeof got - ngot, MSG_DONTWAIT);
        if (r > 0)
            ngot += (size_t)r;
        else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            eof = 1;
        if (i > 200)
            usleep(100); /* a timeout may be what ends it: let time pass */
    }
    REQUIRE(eof); /* the server ends every connection whose client half-closed */
    check_answers(got, ngot);
    close(fd);
    return 0;
}
