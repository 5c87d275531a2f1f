/* SPDX-License-Identifier: MIT */
/* The echo server on iomux's readiness watchers (mux_io_t, epoll backend), written in the
 * idiom of the libev server (server_libev.c) so that the two compare watcher layer with
 * watcher layer: a read is written back at once, and only a short write turns the
 * connection's one watcher from reading to writing (mux_io_modify) until the rest is out.
 * The study's iomux server proper is examples/echo-server, on the stream layer (completion
 * callbacks, a shared buffer pool, idle timeouts); this one has none of that, as libev's has
 * none. */
#include "echo_common.h"
#include <iomux.h>
#include <signal.h>
#include <stdalign.h>

struct conn {
    mux_io_t io;
    size_t len, done;
    struct conn *next, *prev; /* all open connections, to close them on exit */
    alignas(64) char buf[];   /* aligned: the kernel copies into misaligned buffers much slower */
};

static struct conn *conns;
static size_t bufsize;
static mux_io_t listener;
static mux_signal_t sigint_w, sigterm_w;

static void conn_close(mux_loop_t *loop, struct conn *c)
{
    mux_io_stop(loop, &c->io);
    ECHO_LIST_UNLINK(conns, c);
    close(mux_io_fd(&c->io));
    free(c);
}

static void on_io(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)revents; /* the watcher's one direction says what the connection waits for */
    struct conn *c = w->data;
    int fd = mux_io_fd(w);
    int r;
    if (c->done < c->len) { /* writing: the rest of a short write */
        r = echo_flush(fd, c->buf, c->len, &c->done);
        if (r > 0 && mux_io_modify(loop, w, MUX_READ) != 0)
            r = -1;
    } else {
        r = echo_read_flush(fd, c->buf, bufsize, &c->len, &c->done);
        if (r == 0 && mux_io_modify(loop, w, MUX_WRITE) != 0)
            r = -1;
    }
    if (r < 0)
        conn_close(loop, c);
}

static void on_accept(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)revents;
    int fd;
    while ((fd = echo_accept("echo-iomux-io", mux_io_fd(w))) >= 0) {
        struct conn *c = echo_conn_alloc(sizeof *c, bufsize);
        if (!c) {
            close(fd);
            continue;
        }
        c->len = c->done = 0;
        if (mux_io_init(&c->io, on_io, fd, MUX_READ) != 0 || mux_io_start(loop, &c->io) != 0) {
            fprintf(stderr, "echo-iomux-io: cannot watch fd %d\n", fd);
            close(fd);
            free(c);
            continue;
        }
        c->io.data = c;
        ECHO_LIST_PUSH(conns, c);
    }
}

static void on_signal(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    (void)w, (void)signum;
    mux_signal_stop(loop, &sigint_w);
    mux_signal_stop(loop, &sigterm_w);
    mux_io_stop(loop, &listener);
    close(mux_io_fd(&listener));
    while (conns)
        conn_close(loop, conns);
}

int main(int argc, char **argv)
{
    mux_loop_t loop;
    mux_loop_options_t lo = {.backend = "epoll"};
    int err = mux_loop_init(&loop, &lo);
    char identity[256];
    snprintf(identity, sizeof identity, "iomux %s, mux_io_t watchers, backend %s",
             mux_version_string(), err == 0 ? mux_loop_backend(&loop) : strerror(-err));
    struct echo_options o =
        echo_parse(argc, argv, "echo-iomux-io", "iomux mux_io_t watchers, write attempted first",
                   identity, err == 0);
    bufsize = o.bufsize;
    int lfd = echo_listen_socket("echo-iomux-io", o.port);
    if (mux_io_init(&listener, on_accept, lfd, MUX_READ) != 0 ||
        mux_io_start(&loop, &listener) != 0 || mux_signal_init(&sigint_w, on_signal, SIGINT) != 0 ||
        mux_signal_init(&sigterm_w, on_signal, SIGTERM) != 0 ||
        mux_signal_start(&loop, &sigint_w) != 0 || mux_signal_start(&loop, &sigterm_w) != 0) {
        fprintf(stderr, "echo-iomux-io: cannot watch the listener or the signals\n");
        return 1;
    }
    echo_listening(lfd, identity);
    int rc = mux_run(&loop, MUX_RUN_DEFAULT); /* returns once on_signal stopped every watcher */
    if (rc < 0) {
        fprintf(stderr, "echo-iomux-io: mux_run: %s\n", strerror(-rc));
        return 1;
    }
    return mux_loop_close(&loop) == 0 ? 0 : 1;
}
