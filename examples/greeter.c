/* SPDX-License-Identifier: MIT */
/* greeter: sends each connection one line, then waits for the peer to hang up.
 *
 *     ./greeter 7000      listens on 127.0.0.1:7000 (no port, or 0: a free one, printed)
 *
 * A client reads "hello from iomux" and then end of stream: the write side is shut down
 * behind the line. What the client sends is dropped; when it closes its side, so does the
 * server. SIGINT or SIGTERM closes the listener and every stream, and then mux_run returns
 * (on Windows, Ctrl-C or Ctrl-Break: SIGINT or SIGBREAK).
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <iomux.h> /* on Windows: winsock2.h, where sockets close with closesocket */

#ifdef _WIN32
#define close_socket closesocket
#define SIGTERM_OR_BREAK SIGBREAK
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>
#define close_socket close
#define SIGTERM_OR_BREAK SIGTERM
#endif

struct conn {
    mux_stream_t stream;
    mux_write_t write;
    mux_buf_t out;              /* the greeting, as an array of one buffer */
    char in[256];               /* what the client sends, read and dropped */
    struct conn *next, **pprev; /* the open connections, to close them on a signal */
};

struct server {
    mux_loop_t loop;
    mux_listener_t listener;
    mux_signal_t sig[2];
    struct conn *conns;
};

static char greeting[] = "hello from iomux\n";

static void on_closed(mux_stream_t *s)
{
    struct conn *c = s->data; /* only now is the stream's memory ours again */
    *c->pprev = c->next;
    if (c->next)
        c->next->pprev = c->pprev;
    free(c);
}

static void on_read(mux_stream_t *s, ssize_t nread, char *buf)
{
    (void)buf;
    if (nread <= 0) /* 0: the client closed its side; < 0: an error. Reading has stopped. */
        mux_stream_close(s, on_closed);
}

static void on_written(mux_write_t *req, int status)
{
    (void)req;    /* the greeting is static: nothing to free */
    (void)status; /* a failure (a reset) ends the read as well, and that closes the stream */
}

static void on_shutdown(mux_stream_t *s, int status)
{
    (void)s;
    (void)status; /* the same: nothing to do */
}

static void on_accept(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    struct server *srv = l->data;
    if (status < 0) /* -EMFILE: the listener pauses, and resumes by itself */
        return;
    struct conn *c = malloc(sizeof *c);
    if (!c || mux_stream_open(&srv->loop, &c->stream, sock) < 0) {
        close_socket(sock); /* still ours: no stream took it */
        free(c);
        return;
    }
    c->stream.data = c;
    c->next = srv->conns;
    c->pprev = &srv->conns;
    if (c->next)
        c->next->pprev = &c->next;
    srv->conns = c;
    c->out = mux_buf_init(greeting, sizeof greeting - 1);
    /* The shutdown waits for the write queued before it; reading goes on meanwhile. */
    if (mux_write(&c->stream, &c->write, &c->out, 1, on_written) < 0 ||
        mux_stream_shutdown(&c->stream, on_shutdown) < 0 ||
        mux_read_start(&c->stream, c->in, sizeof c->in, on_read) < 0)
        mux_stream_close(&c->stream, on_closed);
}

static void on_signal(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    struct server *srv = loop->data;
    (void)w;
    fprintf(stderr, "greeter: signal %d, closing\n", signum);
    mux_signal_stop(loop, &srv->sig[0]);
    mux_signal_stop(loop, &srv->sig[1]);
    mux_listener_close(&srv->listener, NULL);
    /* Close callbacks never run inside mux_stream_close, so the list holds still; a stream
     * that is closing already answers -EALREADY. */
    for (struct conn *c = srv->conns; c; c = c->next)
        mux_stream_close(&c->stream, on_closed);
}

int main(int argc, char **argv)
{
    static struct server srv;
    const char *arg = argc > 1 ? argv[1] : "0";
    char *end;
    long port = strtol(arg, &end, 10);
    if (argc > 2 || end == arg || *end || port < 0 || port > 65535) {
        fprintf(stderr, "usage: greeter [PORT]\n");
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    int rc = mux_loop_init(&srv.loop, NULL); /* IOMUX_BACKEND picks a backend, else the best */
    if (rc == 0) {
        srv.loop.data = &srv;
        srv.listener.data = &srv; /* mux_listen keeps `data`, so it may be set first */
        mux_signal_init(&srv.sig[0], on_signal, SIGINT);
        mux_signal_init(&srv.sig[1], on_signal, SIGTERM_OR_BREAK);
        if ((rc = mux_listen(&srv.loop, &srv.listener, (struct sockaddr *)&addr, len, NULL,
                             on_accept)) == 0 &&
            (rc = mux_signal_start(&srv.loop, &srv.sig[0])) == 0)
            rc = mux_signal_start(&srv.loop, &srv.sig[1]);
    }
    if (rc == 0) { /* with port 0 the kernel picked one: ask which */
        mux_listener_address(&srv.listener, (struct sockaddr *)&addr, &len);
        printf("listening on 127.0.0.1:%u (backend %s)\n", ntohs(addr.sin_port),
               mux_loop_backend(&srv.loop));
        fflush(stdout);
        rc = mux_run(&srv.loop, MUX_RUN_DEFAULT); /* 0 once everything is closed */
    }
    if (rc == 0)
        rc = mux_loop_close(&srv.loop);
    if (rc < 0)
        fprintf(stderr, "greeter: %s\n", mux_strerror(rc));
    return rc < 0;
}
