/* SPDX-License-Identifier: MIT */
/* The echo server on libev 4 (native API, epoll backend). Each connection has a read and
 * a write watcher: a read is written back at once, and only a short write swaps the read
 * watcher for the write watcher until the rest is out, as libev's documentation
 * suggests ("try the write first, watch for writability only when it fails"). */
#include "echo_common.h"

#include <stdalign.h>
#include <dlfcn.h>
#include <ev.h>
#include <signal.h>

struct conn {
    ev_io rio, wio;
    size_t len, done;
    struct conn *next, *prev; /* all open connections, to close them on exit */
    alignas(64) char buf[];   /* aligned: the kernel copies into misaligned buffers much slower */
};

static struct conn *conns;
static size_t bufsize;

static void conn_close(struct ev_loop *loop, struct conn *c)
{
    ev_io_stop(loop, &c->rio);
    ev_io_stop(loop, &c->wio);
    ECHO_LIST_UNLINK(conns, c);
    close(c->rio.fd);
    free(c);
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = w->data;
    (void)revents;
    int r = echo_flush(c->rio.fd, c->buf, c->len, &c->done);
    if (r < 0) {
        conn_close(loop, c);
    } else if (r > 0) {
        ev_io_stop(loop, &c->wio);
        ev_io_start(loop, &c->rio);
    }
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = w->data;
    (void)revents;
    int r = echo_read_flush(w->fd, c->buf, bufsize, &c->len, &c->done);
    if (r < 0) {
        conn_close(loop, c);
    } else if (r == 0) {
        ev_io_stop(loop, &c->rio);
        ev_io_start(loop, &c->wio);
    }
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    int fd;
    while ((fd = echo_accept("echo-libev", w->fd)) >= 0) {
        struct conn *c = echo_conn_alloc(sizeof *c, bufsize);
        if (!c) {
            close(fd);
            continue;
        }
        c->len = c->done = 0;
        ev_io_init(&c->rio, on_readable, fd, EV_READ);
        ev_io_init(&c->wio, on_writable, fd, EV_WRITE);
        c->rio.data = c->wio.data = c;
        ECHO_LIST_PUSH(conns, c);
        ev_io_start(loop, &c->rio);
    }
}

static ev_io listener;
static ev_signal sigint_w, sigterm_w;

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)w, (void)revents;
    ev_signal_stop(loop, &sigint_w);
    ev_signal_stop(loop, &sigterm_w);
    ev_io_stop(loop, &listener);
    close(listener.fd);
    while (conns)
        conn_close(loop, conns);
}

/* Debian's libev also exports libevent's old names: make sure ev_run is libev's. */
static int identify(char *buf, size_t len)
{
    Dl_info info = {0};
    dladdr((void *)(uintptr_t)ev_run, &info);
    const char *where = info.dli_fname ? info.dli_fname : "?";
    const char *base = strrchr(where, '/') ? strrchr(where, '/') + 1 : where;
    int ok = ev_version_major() == EV_VERSION_MAJOR && strncmp(base, "libev.", 6) == 0 &&
             (ev_supported_backends() & EVBACKEND_EPOLL);
    snprintf(buf, len, "libev %d.%d, epoll, %s%s", ev_version_major(), ev_version_minor(), where,
             ok ? "" : ": not libev with epoll, or not the version of its header");
    return ok;
}

int main(int argc, char **argv)
{
    char identity[512];
    int ok = identify(identity, sizeof identity);
    struct echo_options o = echo_parse(argc, argv, "echo-libev",
                                       "libev ev_io watchers, write attempted first", identity, ok);
    bufsize = o.bufsize;
    struct ev_loop *loop = ev_default_loop(EVBACKEND_EPOLL | EVFLAG_NOENV);
    if (!loop || ev_backend(loop) != EVBACKEND_EPOLL) {
        fprintf(stderr, "echo-libev: no epoll loop\n");
        return 1;
    }
    int lfd = echo_listen_socket("echo-libev", o.port);
    ev_io_init(&listener, on_accept, lfd, EV_READ);
    ev_io_start(loop, &listener);
    ev_signal_init(&sigint_w, on_signal, SIGINT);
    ev_signal_init(&sigterm_w, on_signal, SIGTERM);
    ev_signal_start(loop, &sigint_w);
    ev_signal_start(loop, &sigterm_w);
    echo_listening(lfd, identity);
    ev_run(loop, 0); /* returns once the signal handler stopped every watcher */
    ev_loop_destroy(loop);
    return 0;
}
