/* SPDX-License-Identifier: MIT */
/* echo-server: sends back every byte it receives, on as many connections as arrive.
 *
 * The shape of Asio's echo server, which the echo study measures: read a buffer, write the
 * bytes back, read again once the write completed. A connection never holds more than one
 * buffer of data, so a client that does not read its echoes slows itself down, not the
 * server. The buffers come from one pool (--pool N buffers, shared by every connection;
 * on io_uring the kernel picks them as data arrives, so an idle connection holds none).
 * When the pool runs dry, a connection waits for the next buffer that comes back. With
 * --pool 0 every connection has a buffer of its own instead. A connection with no traffic
 * for --timeout seconds (10 by default), or whose echo cannot be written for that long (its
 * client does not read), is closed: a client that stops reading holds one buffer at most,
 * and only that long. SIGINT or SIGTERM closes everything and ends the program with status
 * 0. The backend comes from IOMUX_BACKEND, as in every iomux program. On Windows there are no
 * signals to watch (mux_signal_start says -ENOTSUP): the program runs until it is ended.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <iomux.h> /* on Windows: winsock2.h and ws2tcpip.h */

#ifdef _WIN32
#include <malloc.h>
#define aligned_alloc(align, n) _aligned_malloc(n, align)
#define aligned_free _aligned_free
#define close_socket closesocket
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>
#define aligned_free free
#define close_socket close
#endif

struct conn {
    mux_stream_t stream;
    mux_write_t write;
    mux_buf_t out;            /* the echo being written */
    struct conn *next, *prev; /* all open connections, to close them on exit */
    struct conn *next_dry;    /* waiting for a pool buffer */
    int dry;
    struct server *srv;
    char *held;             /* the pool buffer being echoed */
    alignas(64) char buf[]; /* --pool 0: the connection's own, aligned as the pool is */
};

struct server {
    mux_loop_t loop;
    mux_listener_t listener;
    mux_signal_t sigint, sigterm;
    struct conn *conns;
    struct conn *dry_head, *dry_tail; /* FIFO of connections waiting for a buffer */
    size_t bufsize;
    uint32_t nbufs; /* pool size; 0: a buffer per connection */
    mux_bufpool_t pool;
    mux_stream_timeouts_t timeouts;
    unsigned long accepted;
};

static void on_read(mux_stream_t *s, ssize_t nread, char *buf);

static int start_reading(struct server *srv, struct conn *c)
{
    if (srv->nbufs)
        return mux_read_start_pool(&c->stream, &srv->pool, on_read);
    return mux_read_start(&c->stream, c->buf, srv->bufsize, on_read);
}

static void on_closed(mux_stream_t *s)
{
    struct conn *c = s->data; /* the stream and its buffer are ours again only now */
    if (c->held)
        mux_bufpool_put(&c->srv->pool, c->held);
    aligned_free(c);
}

static void conn_close(struct server *srv, struct conn *c)
{
    if (c->dry) { /* off the waiting list */
        struct conn **pp = &srv->dry_head, *prev = NULL;
        while (*pp != c) {
            prev = *pp;
            pp = &(*pp)->next_dry;
        }
        *pp = c->next_dry;
        if (srv->dry_tail == c)
            srv->dry_tail = prev;
        c->dry = 0;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    mux_stream_close(&c->stream, on_closed);
}

static void on_written(mux_write_t *req, int status)
{
    struct conn *c = req->data;
    if (status == -ECANCELED)
        return; /* closing: the close callback frees it */
    struct server *srv = mux_stream_loop(&c->stream)->data;
    if (c->held) {
        mux_bufpool_put(&srv->pool, c->held);
        c->held = NULL;
        struct conn *d = srv->dry_head; /* a buffer is free: one waiting connection reads */
        if (d) {
            srv->dry_head = d->next_dry;
            if (!srv->dry_head)
                srv->dry_tail = NULL;
            d->dry = 0;
            if (start_reading(srv, d) < 0)
                conn_close(srv, d);
        }
    }
    if (status < 0 || start_reading(srv, c) < 0)
        conn_close(srv, c);
}

static void on_read(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct conn *c = s->data;
    struct server *srv = mux_stream_loop(s)->data;
    if (nread == -ENOBUFS) { /* the pool is dry: wait for a buffer to come back */
        c->dry = 1;
        c->next_dry = NULL;
        if (srv->dry_tail)
            srv->dry_tail->next_dry = c;
        else
            srv->dry_head = c;
        srv->dry_tail = c;
        return;
    }
    if (nread <= 0) { /* end of stream or an error: reading has stopped */
        conn_close(srv, c);
        return;
    }
    mux_read_stop(s); /* the buffer is busy until the echo is written */
    if (srv->nbufs)
        c->held = buf;
    c->out = mux_buf_init(buf, (size_t)nread);
    c->write.data = c;
    if (mux_write(s, &c->write, &c->out, 1, on_written) < 0)
        conn_close(srv, c);
}

static void on_accept(mux_listener_t *l, mux_os_sock_t fd, int status)
{
    struct server *srv = l->data;
    if (fd == MUX_OS_SOCK_INVALID) {
        fprintf(stderr, "echo-server: accept: %s\n", mux_strerror(status));
        return; /* EMFILE: the listener pauses and resumes by itself */
    }
    struct conn *c =
        aligned_alloc(64, (sizeof *c + (srv->nbufs ? 0 : srv->bufsize) + 63) / 64 * 64);
    if (!c || mux_stream_open(&srv->loop, &c->stream, fd) < 0) {
        fprintf(stderr, "echo-server: out of memory or bad socket\n");
        close_socket(fd);
        aligned_free(c);
        return;
    }
    c->stream.data = c;
    c->dry = 0;
    c->held = NULL;
    c->srv = srv;
    c->prev = NULL;
    c->next = srv->conns;
    if (c->next)
        c->next->prev = c;
    srv->conns = c;
    srv->accepted++;
    mux_stream_nodelay(&c->stream, 1);
    mux_stream_set_timeouts(&c->stream, &srv->timeouts); /* -ETIMEDOUT closes it below */
    if (start_reading(srv, c) < 0)
        conn_close(srv, c);
}

static void on_signal(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    struct server *srv = loop->data;
    (void)w;
    fprintf(stderr, "echo-server: signal %d, %lu connections served, closing\n", signum,
            srv->accepted);
    mux_signal_stop(loop, &srv->sigint);
    mux_signal_stop(loop, &srv->sigterm);
    mux_listener_close(&srv->listener, NULL);
    while (srv->conns)
        conn_close(srv, srv->conns);
    /* Nothing is active once the close callbacks ran: mux_run returns. */
}

static void usage(FILE *to)
{
    fprintf(to, "usage: echo-server [--port N] [--bind ADDR] [--buffer BYTES] [--pool N]\n"
                "                   [--timeout SECONDS] [--reuseport]\n"
                "  --port N        TCP port to listen on (default 55555; 0 picks a free one)\n"
                "  --bind ADDR     IPv4 or IPv6 address to bind (default 127.0.0.1)\n"
                "  --buffer BYTES  read buffer size (default 16384)\n"
                "  --pool N        buffers shared by all connections (default 4096, at most\n"
                "                  1048576); 0: a buffer of its own per connection\n"
                "  --timeout S     close a connection idle for S seconds, or whose echo cannot\n"
                "                  be written for S seconds (default 10; 0: never)\n"
                "  --reuseport     set SO_REUSEPORT, to run one server per CPU on one port\n"
                "Prints 'listening on ADDR:PORT' once ready. The backend comes from the\n"
                "IOMUX_BACKEND environment variable (epoll, poll, select, uring, or the opt-in\n"
                "rtsig), else the best available. SIGINT or SIGTERM stops it.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, 'b'},
        {"buffer", required_argument, NULL, 's'},
        {"reuseport", no_argument, NULL, 'r'},
        {"pool", required_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static struct server srv = {.bufsize = 16384, .nbufs = 4096};
    double timeout_s = 10;
    const char *bind_addr = "127.0.0.1";
    long port = 55555;
    mux_listen_options_t lopts = {0};
    int opt;
    while ((opt = getopt_long(argc, argv, "p:b:s:n:t:rh", opts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 'p':
            port = strtol(optarg, &end, 10);
            if (*end || port < 0 || port > 65535) {
                fprintf(stderr, "echo-server: bad port '%s'\n", optarg);
                return 2;
            }
            break;
        case 'b':
            bind_addr = optarg;
            break;
        case 's':
            srv.bufsize = strtoul(optarg, &end, 10);
            if (*end || srv.bufsize == 0 || srv.bufsize > (64u << 20)) {
                fprintf(stderr, "echo-server: bad buffer size '%s'\n", optarg);
                return 2;
            }
            break;
        case 'n': {
            unsigned long n = strtoul(optarg, &end, 10);
            if (*end || !*optarg || n > (1u << 20)) {
                fprintf(stderr, "echo-server: bad pool size '%s'\n", optarg);
                return 2;
            }
            srv.nbufs = (uint32_t)n;
            break;
        }
        case 't':
            timeout_s = strtod(optarg, &end);
            if (*end || !*optarg || !(timeout_s >= 0 && timeout_s <= 86400)) {
                fprintf(stderr, "echo-server: bad timeout '%s'\n", optarg);
                return 2;
            }
            break;
        case 'r':
            lopts.flags |= MUX_LISTEN_REUSEPORT;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }

#ifdef _WIN32
    WSADATA wsa; /* inet_pton comes before the loop, which starts Winsock itself */
    WSAStartup(MAKEWORD(2, 2), &wsa);
#endif
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    socklen_t len;
    if (inet_pton(AF_INET, bind_addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        len = sizeof *v4;
    } else if (inet_pton(AF_INET6, bind_addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        len = sizeof *v6;
    } else {
        fprintf(stderr, "echo-server: bad address '%s'\n", bind_addr);
        return 2;
    }

    if (srv.nbufs) {
        char *mem = aligned_alloc(4096, ((size_t)srv.nbufs * srv.bufsize + 4095) / 4096 * 4096);
        uint32_t *slots = malloc((size_t)srv.nbufs * sizeof *slots);
        if (!mem || !slots || mux_bufpool_init(&srv.pool, mem, srv.bufsize, srv.nbufs, slots) < 0) {
            fprintf(stderr, "echo-server: no memory for %u buffers of %zu bytes\n", srv.nbufs,
                    srv.bufsize);
            return 1;
        }
    }

    srv.timeouts.idle_ns = srv.timeouts.write_ns = (uint64_t)(timeout_s * 1e9);
    int rc = mux_loop_init(&srv.loop, NULL);
    if (rc < 0) {
        const char *env = getenv("IOMUX_BACKEND");
        fprintf(stderr, "echo-server: loop: %s\n", mux_strerror(rc));
        if (env && *env) { /* the usual cause: a misspelt or unavailable backend */
            fprintf(stderr, "echo-server: IOMUX_BACKEND=%s; this build has:", env);
            for (size_t i = 0; mux_backend_name(i); i++)
                fprintf(stderr, " %s", mux_backend_name(i));
            fprintf(stderr, "\n");
        }
        return 1;
    }
    srv.loop.data = &srv;
    srv.listener.data = &srv;
    rc = mux_listen(&srv.loop, &srv.listener, (struct sockaddr *)&ss, len, &lopts, on_accept);
    if (rc < 0) {
        fprintf(stderr, "echo-server: listen on %s:%ld: %s\n", bind_addr, port, mux_strerror(rc));
        return 1;
    }
    mux_signal_init(&srv.sigint, on_signal, SIGINT);
    mux_signal_init(&srv.sigterm, on_signal, SIGTERM);
    if (((rc = mux_signal_start(&srv.loop, &srv.sigint)) < 0 ||
         (rc = mux_signal_start(&srv.loop, &srv.sigterm)) < 0) &&
        rc != -ENOTSUP) { /* Windows: no signals, the program runs until it is ended */
        fprintf(stderr, "echo-server: signals: %s\n", mux_strerror(rc));
        return 1;
    }
    len = sizeof ss;
    mux_listener_address(&srv.listener, (struct sockaddr *)&ss, &len);
    printf("listening on %s:%u (backend %s)\n", bind_addr,
           ntohs(ss.ss_family == AF_INET ? v4->sin_port : v6->sin6_port),
           mux_loop_backend(&srv.loop));
    fflush(stdout);

    rc = mux_run(&srv.loop, MUX_RUN_DEFAULT);
    if (rc < 0) {
        fprintf(stderr, "echo-server: run: %s\n", mux_strerror(rc));
        return 1;
    }
    rc = mux_loop_close(&srv.loop);
    if (rc < 0) {
        fprintf(stderr, "echo-server: close: %s\n", mux_strerror(rc));
        return 1;
    }
    return 0;
}
