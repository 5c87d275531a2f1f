/* SPDX-License-Identifier: MIT */
/* The echo server on libevent 2.1 with plain events (event2 API, epoll backend), not
 * bufferevents, whose extra copies cost them half the throughput. A persistent read event
 * per connection; a read is written back at once, and only a short write swaps the read
 * event for a write event until the rest is out. */
#include "echo_common.h"

#include <stdalign.h>
#include <dlfcn.h>
#include <event2/event.h>
#include <signal.h>

struct conn {
    int fd;
    struct event *rev, *wev;
    size_t len, done;
    struct conn *next, *prev; /* all open connections, to close them on exit */
    alignas(64) char buf[];   /* aligned: the kernel copies into misaligned buffers much slower */
};

static struct conn *conns;
static size_t bufsize;
static struct event_base *base;

static void conn_close(struct conn *c)
{
    event_free(c->rev); /* event_free deletes a pending event first */
    event_free(c->wev);
    ECHO_LIST_UNLINK(conns, c);
    close(c->fd);
    free(c);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd, (void)what;
    int r = echo_flush(c->fd, c->buf, c->len, &c->done);
    if (r < 0) {
        conn_close(c);
    } else if (r > 0) {
        event_del(c->wev);
        event_add(c->rev, NULL);
    }
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)what;
    int r = echo_read_flush(fd, c->buf, bufsize, &c->len, &c->done);
    if (r < 0) {
        conn_close(c);
    } else if (r == 0) {
        event_del(c->rev);
        event_add(c->wev, NULL);
    }
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    (void)what, (void)arg;
    int fd;
    while ((fd = echo_accept("echo-libevent", lfd)) >= 0) {
        struct conn *c = echo_conn_alloc(sizeof *c, bufsize);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->len = c->done = 0;
        c->rev = event_new(base, fd, EV_READ | EV_PERSIST, on_readable, c);
        c->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, on_writable, c);
        ECHO_LIST_PUSH(conns, c);
        if (!c->rev || !c->wev || event_add(c->rev, NULL) != 0)
            conn_close(c);
    }
}

static struct event *listener, *sigint_ev, *sigterm_ev;

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig, (void)what, (void)arg;
    event_free(sigint_ev);
    event_free(sigterm_ev);
    close(event_get_fd(listener));
    event_free(listener);
    while (conns)
        conn_close(conns);
}

/* Debian's libev exports libevent's old names too: make sure ours are libevent's. */
static int identify(char *buf, size_t len)
{
    Dl_info a = {0}, b = {0};
    dladdr((void *)(uintptr_t)event_base_loop, &a);
    dladdr((void *)(uintptr_t)event_add, &b);
    const char *wa = a.dli_fname ? a.dli_fname : "?", *wb = b.dli_fname ? b.dli_fname : "?";
    int ok = strstr(wa, "libevent") && strstr(wb, "libevent") &&
             strncmp(event_get_version(), "2.1", 3) == 0;
    snprintf(buf, len, "libevent %s, epoll, %s%s", event_get_version(), wa,
             ok ? "" : ": event_add or event_base_loop is not libevent 2.1's");
    return ok;
}

int main(int argc, char **argv)
{
    char identity[512];
    int ok = identify(identity, sizeof identity);
    struct echo_options o = echo_parse(argc, argv, "echo-libevent",
                                       "libevent plain events (no bufferevents)", identity, ok);
    bufsize = o.bufsize;
    struct event_config *cfg = event_config_new();
    event_config_avoid_method(cfg, "select");
    event_config_avoid_method(cfg, "poll");
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!base || strcmp(event_base_get_method(base), "epoll") != 0) {
        fprintf(stderr, "echo-libevent: no epoll event base\n");
        return 1;
    }
    int lfd = echo_listen_socket("echo-libevent", o.port);
    listener = event_new(base, lfd, EV_READ | EV_PERSIST, on_accept, NULL);
    sigint_ev = evsignal_new(base, SIGINT, on_signal, NULL);
    sigterm_ev = evsignal_new(base, SIGTERM, on_signal, NULL);
    if (!listener || !sigint_ev || !sigterm_ev || event_add(listener, NULL) != 0 ||
        event_add(sigint_ev, NULL) != 0 || event_add(sigterm_ev, NULL) != 0) {
        fprintf(stderr, "echo-libevent: cannot add events\n");
        return 1;
    }
    echo_listening(lfd, identity);
    event_base_dispatch(base); /* returns once the signal handler freed every event */
    event_base_free(base);
    libevent_global_shutdown();
    return 0;
}
