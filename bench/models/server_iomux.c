/* SPDX-License-Identifier: MIT */
/* The iomux echo server of the I/O-model study (bench/README.md): one small program for
 * every model that iomux offers, the backend chosen by IOMUX_BACKEND as in any iomux
 * program, and the way it is used by --mode:
 *
 *   level    an io watcher per connection (level-triggered readiness: select, poll, epoll):
 *            read once when readable, write the bytes back at once, and watch for
 *            writability only while a write is short
 *   edge     the same watcher registered once for both directions with MUX_EDGE (epoll's
 *            edge-triggered mode): on each event, write what is pending and read until
 *            the socket says EAGAIN, since an edge is not repeated
 *   streams  iomux streams (completion-shaped reads and writes): on io_uring these are
 *            the kernel's own receive and send operations, the completion-port model
 *
 * Every connection has a buffer of --buffer bytes, in every mode, so that memory per
 * connection compares the models and not the buffers. The listener is iomux's in every
 * mode. SIGINT or SIGTERM closes everything and exits 0. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <iomux.h>

#include "../echo/echo_common.h"

enum { LEVEL, EDGE, STREAMS };

struct conn {
    union {
        mux_io_t io;         /* level, edge */
        mux_stream_t stream; /* streams */
    } u;
    mux_write_t write;
    mux_buf_t out;
    int fd;
    struct conn *next, *prev; /* every open connection, to close them at the end */
    size_t len, done;         /* bytes in buf, and written back */
    alignas(64) char buf[];
};

static mux_loop_t loop;
static mux_listener_t listener;
static mux_signal_t sigint, sigterm;
static struct conn *conns;
static size_t bufsize = 16384;
static int mode = LEVEL;
static unsigned long refused;

static void unlink_conn(struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
}

static void on_stream_closed(mux_stream_t *s)
{
    free(s->data);
}

static void conn_close(struct conn *c)
{
    unlink_conn(c);
    if (mode == STREAMS) {
        mux_stream_close(&c->u.stream, on_stream_closed);
        return;
    }
    mux_io_stop(&loop, &c->u.io);
    close(c->fd);
    free(c);
}

/* level: read once, write back; a short write waits for writability, reading paused. */
static void on_level(mux_loop_t *l, mux_io_t *w, unsigned revents)
{
    struct conn *c = w->data;
    int writing = c->done < c->len; /* watching for writability, not readability */
    (void)revents;
    if (!writing) {
        ssize_t n = read(c->fd, c->buf, bufsize);
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                conn_close(c);
            return;
        }
        c->len = (size_t)n;
        c->done = 0;
    }
    int r = echo_flush(c->fd, c->buf, c->len, &c->done);
    if (r < 0)
        conn_close(c);
    else if (r == writing) /* written at last, or short now: the other direction */
        mux_io_modify(l, w, r ? MUX_READ : MUX_WRITE);
}

/* edge: an event is not repeated, so work until the kernel says EAGAIN. */
static void on_edge(mux_loop_t *l, mux_io_t *w, unsigned revents)
{
    struct conn *c = w->data;
    (void)l;
    (void)revents;
    for (;;) {
        int r = echo_flush(c->fd, c->buf, c->len, &c->done);
        if (r <= 0) { /* 0: the socket is full; the next write edge brings us back */
            if (r < 0)
                conn_close(c);
            return;
        }
        ssize_t n = read(c->fd, c->buf, bufsize);
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                conn_close(c);
            return;
        }
        c->len = (size_t)n;
        c->done = 0;
    }
}

static void on_read(mux_stream_t *s, ssize_t nread, char *buf);

static void on_written(mux_write_t *req, int status)
{
    struct conn *c = req->data;
    if (status == -ECANCELED)
        return; /* closing */
    if (status < 0 || mux_read_start(&c->u.stream, c->buf, bufsize, on_read) < 0)
        conn_close(c);
}

/* streams: read, stop reading while the echo is written, read again when it is. */
static void on_read(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct conn *c = s->data;
    if (nread <= 0) {
        conn_close(c);
        return;
    }
    mux_read_stop(s);
    c->out = mux_buf_init(buf, (size_t)nread);
    c->write.data = c;
    if (mux_write(s, &c->write, &c->out, 1, on_written) < 0)
        conn_close(c);
}

static void on_accept(mux_listener_t *l, mux_os_sock_t fd, int status)
{
    (void)l;
    if (fd < 0) {
        if (!refused++)
            fprintf(stderr, "model-iomux: accept: %s\n", mux_strerror(status));
        return; /* EMFILE: the listener pauses and resumes by itself */
    }
    struct conn *c = aligned_alloc(64, (sizeof *c + bufsize + 63) / 64 * 64);
    int r = c ? 0 : -ENOMEM;
    if (c) {
        c->fd = fd;
        c->len = c->done = 0;
        if (mode == STREAMS) {
            c->u.stream.data = c;
            if ((r = mux_stream_accept(&listener, &c->u.stream, fd)) == 0) {
                mux_stream_nodelay(&c->u.stream, 1);
                r = mux_read_start(&c->u.stream, c->buf, bufsize, on_read);
                if (r < 0) { /* open: the stream owns the socket now */
                    mux_stream_close(&c->u.stream, on_stream_closed);
                    return;
                }
            }
        } else {
            echo_nodelay(fd);
            unsigned ev = mode == EDGE ? MUX_READ | MUX_WRITE | MUX_EDGE : MUX_READ;
            mux_io_init(&c->u.io, mode == EDGE ? on_edge : on_level, fd, ev);
            c->u.io.data = c;
            r = mux_io_start(&loop, &c->u.io); /* select: -EINVAL past FD_SETSIZE */
        }
    }
    if (r < 0) {
        if (!refused++)
            fprintf(stderr, "model-iomux: cannot watch a connection: %s\n", mux_strerror(r));
        close(fd);
        free(c);
        return;
    }
    c->prev = NULL;
    c->next = conns;
    if (conns)
        conns->prev = c;
    conns = c;
}

static void on_signal(mux_loop_t *l, mux_signal_t *w, int signum)
{
    (void)l;
    (void)w;
    (void)signum;
    mux_signal_stop(&loop, &sigint);
    mux_signal_stop(&loop, &sigterm);
    mux_listener_close(&listener, NULL);
    while (conns)
        conn_close(conns);
}

static void usage(FILE *to)
{
    fprintf(to, "usage: model-iomux [--port N] [--buffer BYTES] [--mode level|edge|streams]\n"
                "An echo server of iomux's I/O-model study (bench/README.md).\n"
                "  --port N        TCP port on 127.0.0.1 (default 55555; 0 picks a free one)\n"
                "  --buffer BYTES  per-connection buffer (default 16384)\n"
                "  --mode M        level: io watchers; edge: io watchers with MUX_EDGE;\n"
                "                  streams: iomux streams (native operations on io_uring)\n"
                "The backend comes from IOMUX_BACKEND. Prints 'listening on 127.0.0.1:PORT\n"
                "(backend B, mode M)' once ready; SIGINT or SIGTERM stops it.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'}, {"buffer", required_argument, NULL, 's'},
        {"mode", required_argument, NULL, 'm'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *modes[] = {"level", "edge", "streams"};
    long port = 55555;
    int o;
    while ((o = getopt_long(argc, argv, "p:s:m:h", opts, NULL)) != -1) {
        char *end;
        switch (o) {
        case 'p':
            port = strtol(optarg, &end, 10);
            if (*end || port < 0 || port > 65535)
                goto bad;
            break;
        case 's':
            bufsize = strtoul(optarg, &end, 10);
            if (*end || bufsize == 0 || bufsize > (64u << 20))
                goto bad;
            break;
        case 'm':
            for (mode = 0; mode < 3 && strcmp(optarg, modes[mode]) != 0; mode++)
                ;
            if (mode == 3)
                goto bad;
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
    struct sockaddr_in a = echo_addr((unsigned)port);
    int r = mux_loop_init(&loop, NULL);
    if (r < 0) {
        fprintf(stderr, "model-iomux: loop: %s\n", mux_strerror(r));
        return 1;
    }
    if ((r = mux_listen(&loop, &listener, (struct sockaddr *)&a, sizeof a, NULL, on_accept)) <
        0) {
        fprintf(stderr, "model-iomux: listen: %s\n", mux_strerror(r));
        return 1;
    }
    mux_signal_init(&sigint, on_signal, SIGINT);
    mux_signal_init(&sigterm, on_signal, SIGTERM);
    mux_signal_start(&loop, &sigint);
    mux_signal_start(&loop, &sigterm);
    socklen_t len = sizeof a;
    mux_listener_address(&listener, (struct sockaddr *)&a, &len);
    printf("listening on 127.0.0.1:%u (backend %s, mode %s)\n", ntohs(a.sin_port),
           mux_loop_backend(&loop), modes[mode]);
    fflush(stdout);
    if ((r = mux_run(&loop, MUX_RUN_DEFAULT)) < 0) {
        fprintf(stderr, "model-iomux: run: %s\n", mux_strerror(r));
        return 1;
    }
    return mux_loop_close(&loop) == 0 ? 0 : 1;
bad:
    fprintf(stderr, "model-iomux: bad value '%s'\n", optarg);
    return 2;
}
