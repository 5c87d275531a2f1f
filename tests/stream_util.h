/* SPDX-License-Identifier: MIT */
/* Helpers shared by the stream, buffer pool and listener cases (test_stream*.c,
 * test_bufpool.c, test_listener.c): loopback addresses, a byte pattern to check content by
 * stream offset, runs of the loop that cannot block forever, and a small echo server built
 * on the public stream API. Everything is static: each case file gets its own copy. */
#ifndef IOMUX_TEST_STREAM_UTIL_H
#define IOMUX_TEST_STREAM_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend/backend.h" /* the loop's capabilities */
#include "harness.h"

/* 1 when the kernel runs the streams' sends on `loop` (io_uring on 5.19 and later, unless
 * IOMUX_URING_STREAMS=poll), so a write is not tried at once but sent with the loop's next
 * wait; its pool receives and accepts then run in the kernel too. */
static inline int native_streams(const mux_loop_t *loop)
{
    return (mux__loop_of(loop)->caps & MUX__CAP(MUX__OP_SEND)) != 0;
}

/* The stream's socket, or mux_stream_socket's error. */
static inline int stream_fd(const mux_stream_t *s)
{
    mux_os_sock_t fd;
    int err = mux_stream_socket(s, &fd);
    return err < 0 ? err : (int)fd;
}

/* 1 when `buf` is the start of one of a pool's buffers (mem, size, count). */
static inline int in_pool(const char *buf, const char *mem, size_t size, size_t count)
{
    return buf != NULL && buf >= mem && buf < mem + size * count && (size_t)(buf - mem) % size == 0;
}

/* Writes all of `len` bytes to a non-blocking fd whose buffer has room for them. */
static inline void write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        CHECK_GT(n, 0);
        p += n;
        len -= (size_t)n;
    }
}

/* `len` zeroed bytes on a page boundary; free() them. */
static inline void *page_alloc(size_t len)
{
    void *p = NULL;
    CHECK_EQ(posix_memalign(&p, 4096, len), 0);
    memset(p, 0, len);
    return p;
}

/* ---- addresses ---- */

static inline socklen_t addr_v4(struct sockaddr_storage *ss, uint16_t port)
{
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    memset(ss, 0, sizeof *ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sizeof *a;
}

static inline socklen_t addr_v6(struct sockaddr_storage *ss, uint16_t port)
{
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    memset(ss, 0, sizeof *ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    a->sin6_addr = in6addr_loopback;
    return sizeof *a;
}

static inline socklen_t addr_unix(struct sockaddr_storage *ss, const char *path)
{
    struct sockaddr_un *a = (struct sockaddr_un *)ss;
    memset(ss, 0, sizeof *ss);
    a->sun_family = AF_UNIX;
    CHECK_LT(strlen(path), sizeof a->sun_path);
    strcpy(a->sun_path, path);
    return (socklen_t)sizeof *a;
}

static inline uint16_t addr_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

/* A loopback TCP port that nothing listens on: bound, read back, and closed again. */
static inline uint16_t closed_port(int family)
{
    struct sockaddr_storage ss;
    socklen_t len = family == AF_INET ? addr_v4(&ss, 0) : addr_v6(&ss, 0);
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    CHECK_EQ(bind(fd, (struct sockaddr *)&ss, len), 0);
    CHECK_EQ(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
    CHECK_EQ(close(fd), 0);
    return addr_port(&ss);
}

/* A connected loopback TCP pair made with plain system calls: out[0] is the accepted end. */
static inline void tcp_pair(int out[2])
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

/* 1 when this machine can bind ::1. */
static inline int have_ipv6_loopback(void)
{
    struct sockaddr_storage ss;
    socklen_t len = addr_v6(&ss, 0);
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int ok = bind(fd, (struct sockaddr *)&ss, len) == 0;
    close(fd);
    return ok;
}

/* A private directory for files; tmpdir_remove deletes it and `name` in it. */
static inline void tmpdir_make(char *dir, size_t size)
{
    CHECK_LT(snprintf(dir, size, "/tmp/iomux-stream-XXXXXX"), (int)size);
    CHECK(mkdtemp(dir) != NULL);
}

/* The same, for Unix socket paths. */
static inline void tmpdir_make_unix(char *dir, size_t size)
{
#ifdef _WIN32
    (void)dir, (void)size;
    SKIP("Wine does not implement AF_UNIX sockets (Windows 10 has them; Wine's socket() "
         "refuses the family with WSAEAFNOSUPPORT)");
#endif
    tmpdir_make(dir, size);
}

static inline void tmpdir_remove(const char *dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    CHECK_EQ(rmdir(dir), 0);
}

/* ---- content: byte i of a stream is pattern[i % PATTERN_PERIOD] ---- */

#define PATTERN_PERIOD 65521u /* prime: chunk sizes never line up with it */
#define PATTERN_SPAN   (1u << 20)
static inline unsigned char *pattern_table(void)
{
    static unsigned char tab[PATTERN_PERIOD + PATTERN_SPAN];
    return tab;
}

static inline void pattern_init(void)
{
    unsigned char *tab = pattern_table();
    uint64_t st = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < PATTERN_PERIOD; i++)
        tab[i] = (unsigned char)(prng_next(&st) >> 56);
    for (size_t i = PATTERN_PERIOD; i < PATTERN_PERIOD + PATTERN_SPAN; i++)
        tab[i] = tab[i - PATTERN_PERIOD];
}

static inline void pattern_fill(char *dst, uint64_t off, size_t len)
{
    while (len > 0) {
        size_t n = len < PATTERN_SPAN ? len : PATTERN_SPAN;
        memcpy(dst, pattern_table() + off % PATTERN_PERIOD, n);
        dst += n;
        off += n;
        len -= n;
    }
}

/* 1 when `src` holds bytes off .. off + len - 1 of the pattern. */
static inline int pattern_ok(const char *src, uint64_t off, size_t len)
{
    while (len > 0) {
        size_t n = len < PATTERN_SPAN ? len : PATTERN_SPAN;
        if (memcmp(src, pattern_table() + off % PATTERN_PERIOD, n) != 0)
            return 0;
        src += n;
        off += n;
        len -= n;
    }
    return 1;
}

/* ---- running the loop ---- */

static inline void ticker_cb(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    (void)t;
}

/* Runs MUX_RUN_ONCE until *count reaches `want`. A 5 ms ticker keeps every iteration short,
 * so a callback that never comes fails the case after `ms` naming `what`, never hangs it. */
static inline void run_until_count(mux_loop_t *loop, const volatile int *count, int want,
                                   unsigned ms, const char *what)
{
    mux_timer_t tick;
    CHECK_EQ(mux_timer_init(&tick, ticker_cb), 0);
    CHECK_EQ(mux_timer_start(loop, &tick, 5 * MS, 5 * MS), 0);
    uint64_t end = mono_ns() + ms * MS;
    while (*count < want) {
        CHECK_GE(mux_run(loop, MUX_RUN_ONCE), 0);
        if (*count < want && mono_ns() > end) {
            char detail[160];
            snprintf(detail, sizeof detail, "not within %u ms", ms);
            harness_fail(__FILE__, __LINE__, what, detail);
        }
    }
    CHECK_EQ(mux_timer_stop(loop, &tick), 0);
}

/* The same until *flag (a 0/1 flag, or a count) is set. */
static inline void run_for(mux_loop_t *loop, const volatile int *flag, unsigned ms,
                           const char *what)
{
    run_until_count(loop, flag, 1, ms, what);
}

/* Runs the loop for `ms` milliseconds of wall time. */
static inline void run_ms(mux_loop_t *loop, unsigned ms)
{
    mux_timer_t tick;
    CHECK_EQ(mux_timer_init(&tick, ticker_cb), 0);
    CHECK_EQ(mux_timer_start(loop, &tick, 5 * MS, 5 * MS), 0);
    uint64_t end = mono_ns() + ms * MS;
    while (mono_ns() < end)
        CHECK_GE(mux_run(loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(mux_timer_stop(loop, &tick), 0);
}

/* Every handle is closed: nothing is active and the loop closes clean. */
static inline void loop_finish(mux_loop_t *loop)
{
    CHECK_EQ(mux_run(loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(mux_loop_active(loop), 0);
    loop_close(loop);
}

/* ---- an echo server on the public API ----
 * Each peer reads into its own buffer, writes what it read back, and stops reading until
 * that write is done (so the buffer is never overwritten while the kernel may read it). It
 * closes on end of stream (after its echo is done) and on errors. */

#define PEER_BUF 65536

struct server;

struct peer {
    mux_stream_t s;
    mux_write_t w;
    mux_buf_t iov;
    struct server *srv;
    int writing, eof, closed;
    uint64_t echoed;
    char buf[PEER_BUF];
};

struct server {
    mux_listener_t l;
    struct sockaddr_storage addr; /* where clients connect */
    socklen_t addrlen;
    struct peer *peers;
    int cap;
    int accepted, peers_closed, accept_errors, last_error;
    uint64_t error_at[8]; /* the loop's time at each of the first 8 accept errors */
    int close_after_accepts; /* close the listener after this many accepts (0: never) */
    int listener_closing;
    volatile int listener_closed;
};

static inline void peer_closed_cb(mux_stream_t *s)
{
    struct peer *p = s->data;
    CHECK_EQ(p->closed, 0);
    p->closed = 1;
    p->srv->peers_closed++;
}

static inline void peer_read_cb(mux_stream_t *s, ssize_t nread, char *buf);

static inline void peer_write_cb(mux_write_t *req, int status)
{
    struct peer *p = req->data;
    CHECK_EQ(status, 0);
    p->writing = 0;
    p->echoed += p->iov.len;
    if (p->eof)
        CHECK_EQ(mux_stream_close(&p->s, peer_closed_cb), 0);
    else
        CHECK_EQ(mux_read_start(&p->s, p->buf, sizeof p->buf, peer_read_cb), 0);
}

static inline void peer_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct peer *p = s->data;
    CHECK(buf == NULL || buf == p->buf);
    if (nread > 0) {
        CHECK_EQ(p->writing, 0);
        CHECK_EQ(mux_read_stop(s), 0);
        p->iov.base = p->buf;
        p->iov.len = (size_t)nread;
        p->w.data = p;
        p->writing = 1;
        CHECK_EQ(mux_write(s, &p->w, &p->iov, 1, peer_write_cb), 0);
        return;
    }
    p->eof = 1;
    if (!p->writing)
        CHECK_EQ(mux_stream_close(s, peer_closed_cb), 0);
}

static inline void server_listener_closed_cb(mux_listener_t *l)
{
    struct server *srv = l->data;
    CHECK_EQ(srv->listener_closed, 0);
    srv->listener_closed = 1;
}

static inline void server_accept_cb(mux_listener_t *l, mux_os_sock_t fd, int status)
{
    struct server *srv = l->data;
    if (fd < 0) {
        CHECK_LT(status, 0);
        if (srv->accept_errors < 8)
            srv->error_at[srv->accept_errors] = mux_now(mux_listener_loop(l));
        srv->accept_errors++;
        srv->last_error = status;
        return;
    }
    CHECK_EQ(status, 0);
    CHECK_LT(srv->accepted, srv->cap);
    struct peer *p = &srv->peers[srv->accepted++];
    p->srv = srv;
    p->s.data = p;
    CHECK_EQ(mux_stream_open(mux_listener_loop(l), &p->s, fd), 0);
    CHECK_EQ(mux_read_start(&p->s, p->buf, sizeof p->buf, peer_read_cb), 0);
    if (srv->close_after_accepts && srv->accepted == srv->close_after_accepts) {
        srv->listener_closing = 1;
        CHECK_EQ(mux_listener_close(l, server_listener_closed_cb), 0);
    }
}

/* Starts an echo server for up to `cap` connections on `addr` (port 0 is replaced by the
 * bound port in srv->addr). */
static inline void server_start(mux_loop_t *loop, struct server *srv, int cap,
                                const struct sockaddr_storage *addr, socklen_t addrlen,
                                const mux_listen_options_t *opts)
{
    memset(srv, 0, sizeof *srv);
    srv->cap = cap;
    srv->peers = calloc((size_t)cap, sizeof *srv->peers);
    CHECK(srv->peers != NULL);
    srv->l.data = srv;
    CHECK_EQ(
        mux_listen(loop, &srv->l, (const struct sockaddr *)addr, addrlen, opts, server_accept_cb),
        0);
    srv->addrlen = sizeof srv->addr;
    CHECK_EQ(mux_listener_address(&srv->l, (struct sockaddr *)&srv->addr, &srv->addrlen), 0);
}

static inline void server_close(struct server *srv)
{
    if (!srv->listener_closing) {
        srv->listener_closing = 1;
        CHECK_EQ(mux_listener_close(&srv->l, server_listener_closed_cb), 0);
    }
}

static inline void server_free(struct server *srv)
{
    free(srv->peers);
    srv->peers = NULL;
}

/* ---- a small client: connects, writes one message, reads its echo, closes ---- */

struct client {
    mux_stream_t s;
    mux_write_t w;
    mux_buf_t iov;
    const char *msg;
    size_t msglen;
    char rbuf[4096];
    char got[4096];
    size_t ngot;
    int connect_calls, connect_status, write_calls, write_status, close_calls;
    volatile int closed;
};

static inline void client_closed_cb(mux_stream_t *s)
{
    struct client *c = s->data;
    c->close_calls++;
    c->closed = 1;
}

static inline void client_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct client *c = s->data;
    CHECK_GT(nread, 0); /* the server never closes first */
    CHECK(buf == c->rbuf);
    CHECK_LE(c->ngot + (size_t)nread, sizeof c->got);
    memcpy(c->got + c->ngot, buf, (size_t)nread);
    c->ngot += (size_t)nread;
    if (c->ngot == c->msglen)
        CHECK_EQ(mux_stream_close(s, client_closed_cb), 0);
}

static inline void client_write_cb(mux_write_t *req, int status)
{
    struct client *c = req->data;
    c->write_calls++;
    c->write_status = status;
}

static inline void client_connect_cb(mux_stream_t *s, int status)
{
    struct client *c = s->data;
    c->connect_calls++;
    c->connect_status = status;
    CHECK_EQ(status, 0);
    c->iov.base = (char *)c->msg;
    c->iov.len = c->msglen;
    c->w.data = c;
    CHECK_EQ(mux_write(s, &c->w, &c->iov, 1, client_write_cb), 0);
    CHECK_EQ(mux_read_start(s, c->rbuf, sizeof c->rbuf, client_read_cb), 0);
}

static inline void client_start(mux_loop_t *loop, struct client *c,
                                const struct sockaddr_storage *a, socklen_t len, const char *msg)
{
    memset(c, 0, sizeof *c);
    c->msg = msg;
    c->msglen = strlen(msg);
    c->s.data = c;
    CHECK_EQ(mux_stream_connect(loop, &c->s, (const struct sockaddr *)a, len, client_connect_cb),
             0);
}

static inline void client_check_echoed(const struct client *c)
{
    CHECK_EQ(c->connect_calls, 1);
    CHECK_EQ(c->connect_status, 0);
    CHECK_EQ(c->write_calls, 1);
    CHECK_EQ(c->write_status, 0);
    CHECK_EQ(c->ngot, c->msglen);
    CHECK(memcmp(c->got, c->msg, c->msglen) == 0);
    CHECK_EQ(c->close_calls, 1);
}

#endif
