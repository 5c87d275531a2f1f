/* SPDX-License-Identifier: MIT */
/* The echo server as libevent's own samples write it: an evconnlistener, a socket
 * bufferevent per connection, and a read callback that moves the input to the output
 * (evbuffer_add_buffer). Built twice from this one file: against libevent 2.1 (echo-libevent-bev)
 * and, unchanged, against iomux's emulation libiomux-event (echo-iomux-event-bev, compiled
 * with ECHO_IOMUX_EVENT for the identity check only). --buffer sets the most a single read
 * takes (bufferevent_set_max_single_read). */
#include "echo_common.h"

#include <dlfcn.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <signal.h>

struct conn {
    struct bufferevent *bev;
    struct conn *next, *prev; /* all open connections, to free them on exit */
};

static struct conn *conns;
static struct event_base *base;
static struct evconnlistener *listener;
static struct event *sigint_ev, *sigterm_ev;
static size_t bufsize;

static void conn_free(struct conn *c)
{
    bufferevent_free(c->bev);
    ECHO_LIST_UNLINK(conns, c);
    free(c);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)arg;
    evbuffer_add_buffer(bufferevent_get_output(bev), bufferevent_get_input(bev));
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_free(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
    (void)l, (void)sa, (void)len, (void)arg;
    struct conn *c = calloc(1, sizeof *c);
    echo_nodelay(fd);
    c->bev = c ? bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE) : NULL;
    if (!c || !c->bev) {
        free(c);
        close(fd);
        return;
    }
    ECHO_LIST_PUSH(conns, c);
    bufferevent_set_max_single_read(c->bev, bufsize);
    bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig, (void)what, (void)arg;
    event_free(sigint_ev);
    event_free(sigterm_ev);
    evconnlistener_free(listener);
    while (conns)
        conn_free(conns);
}

static int identify(char *buf, size_t len)
{
#ifdef ECHO_IOMUX_EVENT
    /* libiomux-event names iomux's backends ("epoll", "uring"), libevent its own. */
    snprintf(buf, len, "libiomux-event (libevent %s API on iomux), bufferevents", event_get_version());
    return 1;
#else
    Dl_info a = {0};
    dladdr((void *)(uintptr_t)bufferevent_socket_new, &a);
    const char *w = a.dli_fname ? a.dli_fname : "?";
    int ok = strstr(w, "libevent") && strncmp(event_get_version(), "2.1", 3) == 0;
    snprintf(buf, len, "libevent %s, epoll, bufferevents, %s%s", event_get_version(), w,
             ok ? "" : ": bufferevent_socket_new is not libevent 2.1's");
    return ok;
#endif
}

int main(int argc, char **argv)
{
    char identity[512];
    int ok = identify(identity, sizeof identity);
    struct echo_options o = echo_parse(argc, argv, "echo-bufferevent",
                                       "libevent bufferevents (evbuffer_add_buffer)", identity, ok);
    bufsize = o.bufsize;
    signal(SIGPIPE, SIG_IGN); /* libevent's writes raise it when a client goes mid-echo */
    /* epoll, unless ECHO_METHOD names another (libiomux-event: "uring"). */
    const char *want = getenv("ECHO_METHOD") ? getenv("ECHO_METHOD") : "epoll";
    struct event_config *cfg = event_config_new();
    for (const char **m = event_get_supported_methods(); *m; m++)
        if (strcmp(*m, want) != 0)
            event_config_avoid_method(cfg, *m);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!base || strcmp(event_base_get_method(base), want) != 0) {
        fprintf(stderr, "echo-bufferevent: no %s event base\n", want);
        return 1;
    }
    snprintf(identity + strlen(identity), sizeof identity - strlen(identity), ", backend %s",
             event_base_get_method(base));
    int lfd = echo_listen_socket("echo-bufferevent", o.port);
    listener = evconnlistener_new(base, on_accept, NULL, LEV_OPT_CLOSE_ON_FREE, 0, lfd);
    sigint_ev = evsignal_new(base, SIGINT, on_signal, NULL);
    sigterm_ev = evsignal_new(base, SIGTERM, on_signal, NULL);
    if (!listener || !sigint_ev || !sigterm_ev || event_add(sigint_ev, NULL) != 0 ||
        event_add(sigterm_ev, NULL) != 0) {
        fprintf(stderr, "echo-bufferevent: cannot set up the listener and signals\n");
        return 1;
    }
    echo_listening(lfd, identity);
    event_base_dispatch(base); /* returns once the signal handler freed everything */
    event_base_free(base);
    libevent_global_shutdown();
    return 0;
}
