/* SPDX-License-Identifier: MIT */
/* libiomux-event's connection listeners, beyond test_event.c and libevent's own listener/
 * group (tests/libevent): every call on NULL, the failures of listen, socket and bind, the
 * options new_bind sets (read back from the sockets), a listener without a callback, and
 * running out of descriptors: the error callback (or a warning), a pause of 100 ms instead
 * of a spin, and accepting again afterwards. */
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "event_fixture.h"
#include "harness.h"

static void never_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                     int len, void *arg)
{
    (void)lev, (void)fd, (void)sa, (void)len, (void)arg;
    CHECK(0);
}

CORE_TEST(listener_calls_on_null_fail_or_answer_nothing) {
    struct event_base *base = event_base_new();
    struct sockaddr_in sin = {.sin_family = AF_INET};
    CHECK(evconnlistener_new(NULL, never_cb, NULL, 0, 0, 3) == NULL);
    CHECK(evconnlistener_new(base, never_cb, NULL, 0, 0, -1) == NULL);
    CHECK(evconnlistener_new_bind(NULL, never_cb, NULL, 0, -1, (struct sockaddr *)&sin,
                                  sizeof sin) == NULL);
    CHECK(evconnlistener_new_bind(base, never_cb, NULL, 0, -1, NULL, sizeof sin) == NULL);
    CHECK(evconnlistener_new_bind(base, never_cb, NULL, 0, -1, (struct sockaddr *)&sin, 0) ==
          NULL);
    evconnlistener_free(NULL);
    CHECK_EQ(evconnlistener_enable(NULL), -1);
    CHECK_EQ(evconnlistener_disable(NULL), -1);
    CHECK(evconnlistener_get_base(NULL) == NULL);
    CHECK_EQ(evconnlistener_get_fd(NULL), -1);
    evconnlistener_set_cb(NULL, never_cb, NULL);
    evconnlistener_set_error_cb(NULL, NULL);
    event_base_free(base);
}

TEST(listener_failures_of_listen_socket_and_bind_are_warned_and_refused) {
    struct event_base *base = evt_base_open();
    int p[2];
    make_pipe(p);
    CHECK(evconnlistener_new(base, never_cb, NULL, 0, 5, p[0]) == NULL); /* not a socket */
    CHECK(strstr(evt_last_warning, "evconnlistener_new: listen: ") != NULL);
    CHECK_GE(fcntl(p[0], F_GETFD), 0); /* still the caller's */
    close(p[0]);
    close(p[1]);
    /* A descriptor no event can watch (beyond the limit): refused when enabled. */
    CHECK(evconnlistener_new(base, never_cb, NULL, 0, 0, 1 << 30) == NULL);
    CHECK(strstr(evt_last_warning, "event_add: ") != NULL);
    struct sockaddr bad = {.sa_family = 12345};
    CHECK(evconnlistener_new_bind(base, never_cb, NULL, 0, -1, &bad, sizeof bad) == NULL);
    CHECK(strstr(evt_last_warning, "evconnlistener_new_bind: socket: ") != NULL);
    /* A port already taken, without SO_REUSEADDR on either side. */
    int taken = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t len = sizeof sin;
    CHECK_EQ(bind(taken, (struct sockaddr *)&sin, sizeof sin), 0);
    CHECK_EQ(listen(taken, 1), 0);
    CHECK_EQ(getsockname(taken, (struct sockaddr *)&sin, &len), 0);
    int before = evt_warnings;
    CHECK(evconnlistener_new_bind(base, never_cb, NULL, 0, -1, (struct sockaddr *)&sin,
                                  sizeof sin) == NULL);
    CHECK_EQ(evt_warnings, before + 1);
    CHECK(strstr(evt_last_warning, "evconnlistener_new_bind: bind: ") != NULL);
    close(taken);
    evt_base_close(base);
}

struct accepted {
    int fd, calls;
    struct event_base *base;
};

static void take_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                    int len, void *arg)
{
    struct accepted *a = arg;
    (void)lev, (void)sa, (void)len;
    a->fd = fd;
    a->calls++;
    event_base_loopbreak(a->base);
}

static int sockopt(int fd, int level, int name)
{
    int v = 0; /* Wine writes a boolean option's one byte only */
    socklen_t len = sizeof v;
    CHECK_EQ(getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

TEST(listener_options_are_set_on_the_listening_and_the_accepted_sockets) {
    struct event_base *base = evt_base_open();
    struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    struct accepted a = {-1, 0, base};
    unsigned flags = LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT | LEV_OPT_DEFERRED_ACCEPT |
                     LEV_OPT_BIND_IPV6ONLY | LEV_OPT_CLOSE_ON_EXEC |
                     LEV_OPT_LEAVE_SOCKETS_BLOCKING | LEV_OPT_DISABLED;
    struct evconnlistener *lev =
        evconnlistener_new_bind(base, take_cb, &a, flags, 8, (struct sockaddr *)&sin6, sizeof sin6);
    if (!lev)
        SKIP("no IPv6 loopback here");
    int lfd = evconnlistener_get_fd(lev);
    CHECK(evconnlistener_get_base(lev) == base);
#ifdef _WIN32
    /* As libevent on Windows: SO_REUSEADDR there lets another socket take the port, so it
     * stays off; there is no SO_REUSEPORT and no deferred accept to set. */
    CHECK_EQ(sockopt(lfd, SOL_SOCKET, SO_REUSEADDR), 0);
#else
    CHECK_EQ(sockopt(lfd, SOL_SOCKET, SO_REUSEADDR), 1);
    CHECK_EQ(sockopt(lfd, SOL_SOCKET, SO_REUSEPORT), 1);
    CHECK_GT(sockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT), 0);
#endif
    CHECK_EQ(sockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY), 1);
    CHECK_NE(fcntl(lfd, F_GETFD) & FD_CLOEXEC, 0);
    socklen_t len = sizeof sin6;
    CHECK_EQ(getsockname(lfd, (struct sockaddr *)&sin6, &len), 0);
    int c = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK_EQ(connect(c, (struct sockaddr *)&sin6, sizeof sin6), 0);
    CHECK_EQ(write(c, "x", 1), 1); /* a deferred accept waits for data */
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1); /* disabled: nothing added */
    CHECK_EQ(a.calls, 0);
    CHECK_EQ(evconnlistener_enable(lev), 0);
    CHECK_EQ(event_base_dispatch(base), 0);
    CHECK_EQ(a.calls, 1);
#ifndef _WIN32 /* Windows cannot tell whether a socket blocks */
    CHECK_EQ(fcntl(a.fd, F_GETFL) & O_NONBLOCK, 0); /* left blocking */
#endif
    CHECK_NE(fcntl(a.fd, F_GETFD) & FD_CLOEXEC, 0);
    char got;
    CHECK_EQ(read(a.fd, &got, 1), 1);
    CHECK_EQ(got, 'x');
    CHECK_EQ(evconnlistener_disable(lev), 0);
    evconnlistener_free(lev);
    CHECK_EQ(fcntl(lfd, F_GETFD), -1); /* new_bind's socket is closed with it */
    close(a.fd);
    close(c);
    evt_base_close(base);
}

/* A listener on loopback, and its address. */
static struct evconnlistener *listen_here(struct event_base *base, evconnlistener_cb cb,
                                          void *arg, struct sockaddr_in *sin)
{
    *sin = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    struct evconnlistener *lev = evconnlistener_new_bind(
        base, cb, arg, LEV_OPT_CLOSE_ON_FREE, -1, (struct sockaddr *)sin, sizeof *sin);
    CHECK(lev != NULL);
    socklen_t len = sizeof *sin;
    CHECK_EQ(getsockname(evconnlistener_get_fd(lev), (struct sockaddr *)sin, &len), 0);
    return lev;
}

static int connect_to(const struct sockaddr_in *sin)
{
    int c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_GE(c, 0);
    CHECK_EQ(connect(c, (const struct sockaddr *)sin, sizeof *sin), 0);
    return c;
}

TEST(a_listener_without_a_callback_closes_what_it_accepts) {
    struct event_base *base = evt_base_open();
    struct sockaddr_in sin;
    struct evconnlistener *lev = listen_here(base, NULL, NULL, &sin);
    int c = connect_to(&sin);
    char got;
    for (int i = 0; i < 100; i++) { /* until the listener has taken and closed it */
        CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
        struct timeval tv = {0, 10000};
        CHECK_EQ(setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
        if (recv(c, &got, 1, 0) == 0)
            break;
        CHECK_EQ(errno, EAGAIN);
        CHECK_LT(i, 99);
    }
    close(c);
    /* A callback set later takes the next one, with its argument. */
    struct accepted a = {-1, 0, base};
    evconnlistener_set_cb(lev, take_cb, &a);
    c = connect_to(&sin);
    CHECK_EQ(event_base_dispatch(base), 0);
    CHECK_EQ(a.calls, 1);
    close(a.fd);
    close(c);
    evconnlistener_free(lev);
    evt_base_close(base);
}

/* ---- out of descriptors ---- */

struct starving {
    struct event_base *base;
    struct evconnlistener *lev;
    struct rlimit old;
    int errors, err, accepted, fd;
    uint64_t error_at, accept_at;
    int disable_in_errorcb;
};

static void starving_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                            int len, void *arg)
{
    struct starving *s = arg;
    (void)lev, (void)sa, (void)len;
    s->accepted++;
    s->fd = fd;
    s->accept_at = mono_ns();
    event_base_loopbreak(s->base);
}

static void starving_error(struct evconnlistener *lev, void *arg)
{
    struct starving *s = arg;
    s->errors++;
    s->err = EVUTIL_SOCKET_ERROR();
    s->error_at = mono_ns();
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &s->old), 0); /* descriptors are back */
    CHECK_EQ(evconnlistener_enable(lev), 0);        /* paused: it resumes by itself */
}

/* Makes the next descriptor the process opens fail with EMFILE. */
static void starve(struct starving *s)
{
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &s->old), 0);
    int lowest = open("/dev/null", O_RDONLY); /* the lowest free number: none below is free */
    CHECK_GE(lowest, 0);
    close(lowest);
    struct rlimit low = {(rlim_t)lowest, s->old.rlim_max};
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
}

TEST(a_listener_out_of_descriptors_tells_the_error_callback_and_pauses_100_ms) {
    struct event_base *base = evt_base_open();
    struct starving s = {.base = base, .fd = -1};
    struct sockaddr_in sin;
    s.lev = listen_here(base, starving_accept, &s, &sin);
    evconnlistener_set_error_cb(s.lev, starving_error);
    int c = connect_to(&sin);
    starve(&s);
    CHECK_EQ(event_base_dispatch(base), 0);
    CHECK_EQ(s.errors, 1); /* once: no spin on the ready socket */
    CHECK_EQ(s.err, EMFILE);
    CHECK_EQ(s.accepted, 1);
    CHECK_GE(s.accept_at - s.error_at, 90 * MS);
    close(s.fd);
    close(c);
    evconnlistener_free(s.lev);
    evt_base_close(base);
}

TEST(a_listener_out_of_descriptors_without_an_error_callback_warns_and_can_be_disabled) {
    struct event_base *base = evt_base_open();
    struct starving s = {.base = base, .fd = -1};
    struct sockaddr_in sin;
    s.lev = listen_here(base, starving_accept, &s, &sin);
    int c = connect_to(&sin);
    starve(&s);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &s.old), 0);
    CHECK_EQ(evt_warnings, 1);
    CHECK_STR_EQ(evt_last_warning, "evconnlistener: accept: Too many open files");
    /* Disabled during the pause: the pause ends without re-enabling it. */
    CHECK_EQ(evconnlistener_disable(s.lev), 0);
    struct event *wait = evtimer_new(base, evt_count_cb, &(int){0});
    struct timeval ms150 = {0, 150 * 1000};
    CHECK_EQ(evtimer_add(wait, &ms150), 0);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(s.accepted, 0);
    CHECK_EQ(evconnlistener_enable(s.lev), 0);
    CHECK_EQ(event_base_dispatch(base), 0);
    CHECK_EQ(s.accepted, 1);
    event_free(wait);
    close(s.fd);
    close(c);
    evconnlistener_free(s.lev);
    evt_base_close(base);
}
