/* SPDX-License-Identifier: MIT */
/* A raw HTTP/1.1 client for the HTTP server's cases (test_http_server.c, test_http_static.c):
 * a non-blocking socket to a port on loopback, whose every wait runs the server's loop (it is
 * in the same thread) and takes what arrived, for 5 s at most. Everything is static: each
 * case file gets its own copy. */
#ifndef IOMUX_TEST_HTTP_CLIENT_H
#define IOMUX_TEST_HTTP_CLIENT_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "stream_util.h"

/* A client connection: what it received and did not take yet is in buf[0 .. len). */
struct hclient {
    int fd, eof;
    size_t len;
    char buf[1 << 20];
};

/* An answer, taken out of the client's buffer; head and body NUL-terminated. */
struct hanswer {
    int status;
    char head[32768];
    size_t body_len;
    char body[1 << 20];
};

static inline void hc_open(struct hclient *c, uint16_t port)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK_GE(c->fd, 0);
    c->eof = 0;
    c->len = 0;
    struct sockaddr_storage ss;
    socklen_t len = addr_v4(&ss, port);
    int r = connect(c->fd, (struct sockaddr *)&ss, len);
    CHECK(r == 0 || errno == EINPROGRESS);
}

static inline void hc_close(struct hclient *c)
{
    CHECK_EQ(close(c->fd), 0);
}

/* Runs the loop once and takes what arrived. */
static inline void hc_pump(mux_loop_t *loop, struct hclient *c)
{
    CHECK_GE(mux_run(loop, MUX_RUN_ONCE), 0);
    while (c->len < sizeof c->buf) {
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, MSG_DONTWAIT);
        if (n > 0) {
            c->len += (size_t)n;
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            c->eof = 1; /* closed, or reset */
        return;
    }
}

static inline void hc_send(mux_loop_t *loop, struct hclient *c, const char *p, size_t len)
{
    uint64_t end = mono_ns() + 5000 * MS;
    while (len) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        CHECK(n < 0 && (errno == EAGAIN || errno == ENOTCONN || errno == EWOULDBLOCK));
        hc_pump(loop, c);
        CHECK_LT(mono_ns(), end);
    }
}

static inline void hc_sends(mux_loop_t *loop, struct hclient *c, const char *s)
{
    hc_send(loop, c, s, strlen(s));
}

/* Waits for one whole answer (its head, and Content-Length bytes of body unless it answers
 * HEAD: `head`) and takes it out of the client's buffer. 0, or -1 when the connection ended
 * first. */
static inline int hc_answer(mux_loop_t *loop, struct hclient *c, struct hanswer *r, int head)
{
    uint64_t end = mono_ns() + 5000 * MS;
    for (;;) {
        char *e = memmem(c->buf, c->len, "\r\n\r\n", 4);
        if (e) {
            size_t hl = (size_t)(e - c->buf) + 4;
            CHECK_LT(hl, sizeof r->head);
            memcpy(r->head, c->buf, hl);
            r->head[hl] = 0;
            CHECK_EQ(sscanf(r->head, "HTTP/1.1 %d ", &r->status), 1);
            const char *cl = strstr(r->head, "\r\nContent-Length: ");
            size_t blen = cl ? strtoul(cl + 18, NULL, 10) : 0;
            if (head || r->status == 100 || r->status == 204 || r->status == 304)
                blen = 0;
            CHECK_LT(blen, sizeof r->body);
            if (c->len >= hl + blen) {
                memcpy(r->body, c->buf + hl, blen);
                r->body[blen] = 0;
                r->body_len = blen;
                memmove(c->buf, c->buf + hl + blen, c->len - hl - blen);
                c->len -= hl + blen;
                return 0;
            }
        }
        if (c->eof)
            return -1;
        hc_pump(loop, c);
        CHECK_LT(mono_ns(), end);
    }
}

/* Waits until the server closed the connection, with nothing more sent. */
static inline void hc_wait_eof(mux_loop_t *loop, struct hclient *c)
{
    uint64_t end = mono_ns() + 5000 * MS;
    while (!c->eof) {
        hc_pump(loop, c);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(c->len, 0);
}

/* 1 when the answer's head holds `text` (a whole field, say, "\r\nName: value\r\n"). */
static inline int ha_has(const struct hanswer *r, const char *text)
{
    return strstr(r->head, text) != NULL;
}

/* The value of the answer's field `name` (exact case), or NULL; valid until the next call. */
static inline const char *ha_field(const struct hanswer *r, const char *name)
{
    static char out[32768];
    char key[128];
    CHECK_LT(snprintf(key, sizeof key, "\r\n%s: ", name), (int)sizeof key);
    const char *p = strstr(r->head, key);
    if (!p)
        return NULL;
    p += strlen(key);
    size_t n = strcspn(p, "\r");
    CHECK_LT(n, sizeof out);
    memcpy(out, p, n);
    out[n] = 0;
    return out;
}

/* The descriptors this process has open (of the first 1024). */
static inline int open_fds(void)
{
#ifdef _WIN32 /* descriptors are files there, sockets are handles: count those */
    return win_open_sockets();
#endif
    int n = 0;
    char p[64];
    for (int fd = 0; fd < 1024; fd++) {
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        n += access(p, F_OK) == 0;
    }
    return n;
}

#endif
