/* SPDX-License-Identifier: MIT */
/* libiomux-event, the libevent 2.1 emulation: what libevent's own regression cases
 * (tests/libevent) do not pin down -- misuse refused with a warning instead of a crash, the
 * ordering of priorities, a loopbreak from another thread, timeouts restarted without a heap
 * operation, memory of event_base_once events given back by event_base_free. */
#include <event2/event.h>
#include <event2/event_compat.h>
#include <event2/event_struct.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "event_fixture.h"
#include "harness.h"

/* A timeout added outside the loop counts from when it was added, not from the loop's last
 * turn: a program that worked a while between two runs of its loop (filling a socket, say)
 * had every such timeout fire at once. */
TEST(event_timeout_added_outside_the_loop_counts_from_now) {
    struct event_base *base = evt_base_open();
    int n = 0;
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1); /* a turn: the loop's time is now */
    sleep_ms(300);
    struct event *ev = evtimer_new(base, evt_count_cb, &n);
    struct timeval tv = {0, 100 * 1000};
    CHECK_EQ(evtimer_add(ev, &tv), 0);
    uint64_t t0 = mono_ns();
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(n, 1);
    CHECK_GE(mono_ns() - t0, 90 * MS); /* the clock's reading may come just before t0 */
    event_free(ev);
    evt_base_close(base);
}

TEST(event_add_of_a_never_assigned_event_is_refused_with_a_warning) {
    struct event_base *base = evt_base_open();
    struct event ev;
    memset(&ev, 0xa5, sizeof ev); /* stack garbage, as an unassigned event would hold */
    CHECK_EQ(event_add(&ev, NULL), -1);
    CHECK_EQ(evt_warnings, 1);
    CHECK(strstr(evt_last_warning, "never assigned") != NULL);
    CHECK_EQ(event_del(&ev), -1);
    CHECK_EQ(event_initialized(&ev), 0);
    CHECK_EQ(event_add(NULL, NULL), -1);
    evt_base_close(base);
}

TEST(event_assign_of_a_pending_event_is_refused_and_leaves_it_working) {
    struct event_base *base = evt_base_open();
    int sv[2], n = 0, m = 0;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event ev;
    CHECK_EQ(event_assign(&ev, base, sv[0], EV_READ, evt_count_cb, &n), 0);
    CHECK_EQ(event_add(&ev, NULL), 0);
    CHECK_EQ(event_assign(&ev, base, sv[0], EV_READ, evt_count_cb, &m), -1);
    CHECK(strstr(evt_last_warning, "pending") != NULL);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(m, 0);
    CHECK_EQ(event_pending(&ev, EV_READ, NULL), 0); /* not persistent: deleted before its call */
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

TEST(event_add_of_an_fd_beyond_the_descriptor_limit_fails_at_once) {
    struct event_base *base = evt_base_open();
    int n = 0;
    struct event *ev = event_new(base, 1 << 30, EV_READ, evt_count_cb, &n);
    CHECK(ev != NULL);
    CHECK_EQ(event_add(ev, NULL), -1);
    CHECK(strstr(evt_last_warning, "fd 1073741824") != NULL);
    CHECK_EQ(event_pending(ev, EV_READ, NULL), 0);
    struct event *sig = evsignal_new(base, 0, evt_count_cb, &n);
    CHECK(sig != NULL);
    CHECK_EQ(event_add(sig, NULL), -1);
    event_free(ev);
    event_free(sig);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1); /* nothing was added */
    evt_base_close(base);
}

static int order[8], norder;

static void order_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    order[norder++] = (int)(intptr_t)arg;
}

TEST(priorities_run_most_urgent_first_and_are_checked) {
    struct event_base *base = evt_base_open();
    CHECK_EQ(event_base_priority_init(base, 3), 0);
    CHECK_EQ(event_base_get_npriorities(base), 3);
    struct event ev[3];
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(event_assign(&ev[i], base, -1, 0, order_cb, (void *)(intptr_t)i), 0);
        CHECK_EQ(event_get_priority(&ev[i]), 1); /* the middle one by default */
        CHECK_EQ(event_priority_set(&ev[i], 2 - i), 0);
    }
    CHECK_EQ(event_priority_set(&ev[0], 3), -1); /* out of range */
    CHECK_EQ(event_priority_set(&ev[0], -1), -1);
    norder = 0;
    for (int i = 0; i < 3; i++)
        event_active(&ev[i], EV_TIMEOUT, 1);
    CHECK_EQ(event_base_priority_init(base, 5), -1); /* not while events are active */
    CHECK_EQ(event_priority_set(&ev[0], 0), -1);      /* nor on an active event */
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    CHECK_EQ(norder, 3);
    CHECK_EQ(order[0], 2);
    CHECK_EQ(order[1], 1);
    CHECK_EQ(order[2], 0);
    evt_base_close(base);
}

static void *break_later(void *arg)
{
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
    event_base_loopbreak(arg);
    return NULL;
}

THREAD_TEST(loopbreak_from_another_thread_wakes_a_base_with_nothing_added) {
    struct event_base *base = evt_base_open();
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, break_later, base), 0);
    CHECK_EQ(event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY), 0);
    CHECK_EQ(event_base_got_break(base), 1);
    CHECK_EQ(event_base_got_exit(base), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    evt_base_close(base);
}

TEST(persistent_timeout_counts_from_each_activation) {
    struct event_base *base = evt_base_open();
    int sv[2], n = 0;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event *ev = event_new(base, sv[0], EV_READ | EV_PERSIST, evt_count_cb, &n);
    struct timeval tv = {0, 150 * 1000};
    CHECK_EQ(event_add(ev, &tv), 0);
    char c;
    /* Readable at 0, 100 and 200 ms (each read drains it): the 150 ms timeout never ends. */
    for (int i = 0; i < 3; i++) {
        struct timespec ts = {0, 100 * 1000000L};
        if (i)
            nanosleep(&ts, NULL);
        CHECK_EQ(write(sv[1], "x", 1), 1);
        CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
        CHECK_EQ(read(sv[0], &c, 1), 1);
    }
    CHECK_EQ(n, 3);
    struct timeval left;
    CHECK_EQ(event_pending(ev, EV_TIMEOUT | EV_READ, &left), EV_TIMEOUT | EV_READ);
    struct timeval now;
    event_base_gettimeofday_cached(base, &now);
    long ms = (long)(left.tv_sec - now.tv_sec) * 1000 + (long)(left.tv_usec - now.tv_usec) / 1000;
    CHECK_GT(ms, 100); /* re-armed at the last read, not at the first */
    CHECK_LE(ms, 150);
    event_free(ev);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

TEST(event_base_free_gives_back_events_of_event_base_once_that_never_ran) {
    struct event_base *base = evt_base_open();
    int n = 0, sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct timeval hour = {3600, 0};
    CHECK_EQ(event_base_once(base, -1, EV_TIMEOUT, evt_count_cb, &n, &hour), 0);
    CHECK_EQ(event_base_once(base, sv[0], EV_READ, evt_count_cb, &n, NULL), 0);
    CHECK_EQ(event_base_once(base, -1, EV_TIMEOUT, evt_count_cb, &n, NULL), 0); /* active at once */
    CHECK_EQ(event_base_once(base, -1, EV_SIGNAL, evt_count_cb, &n, NULL), -1);
    CHECK_EQ(event_base_once(base, sv[0], EV_READ | EV_PERSIST, evt_count_cb, &n, NULL), -1);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 2);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE), 1);
    /* The sanitizer's leak check fails the case if the three are not freed. */
    evt_base_close(base);
    CHECK_EQ(n, 0);
    close(sv[0]);
    close(sv[1]);
}

static int count_fn(const struct event_base *b, const struct event *ev, void *arg)
{
    (void)b, (void)ev;
    ++*(int *)arg;
    return 0;
}

static int stop_at_3_fn(const struct event_base *b, const struct event *ev, void *arg)
{
    (void)b, (void)ev;
    return ++*(int *)arg == 3 ? 42 : 0;
}

TEST(foreach_visits_added_and_active_events_and_stops_on_nonzero) {
    struct event_base *base = evt_base_open();
    int n = 0, seen = 0;
    struct event *t1 = evtimer_new(base, evt_count_cb, &n);
    struct event *t2 = evtimer_new(base, evt_count_cb, &n);
    struct event *idle = evtimer_new(base, evt_count_cb, &n);
    struct event *act = evtimer_new(base, evt_count_cb, &n);
    struct timeval tv = {10, 0};
    CHECK_EQ(evtimer_add(t1, &tv), 0);
    CHECK_EQ(evtimer_add(t2, &tv), 0);
    event_active(act, EV_TIMEOUT, 1);
    CHECK_EQ(event_base_foreach_event(base, count_fn, &seen), 0);
    CHECK_EQ(seen, 3); /* t1, t2 and act; idle is neither added nor active */
    CHECK_EQ(evtimer_add(idle, &tv), 0);
    seen = 0;
    CHECK_EQ(event_base_foreach_event(base, stop_at_3_fn, &seen), 42);
    CHECK_EQ(seen, 3);
    event_free(t1), event_free(t2), event_free(idle), event_free(act);
    CHECK_EQ(n, 0);
    evt_base_close(base);
}

TEST(active_by_fd_activates_only_the_matching_directions) {
    struct event_base *base = evt_base_open();
    int sv[2], r = 0, w = 0;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event *re = event_new(base, sv[0], EV_READ | EV_PERSIST, evt_count_cb, &r);
    struct event *we = event_new(base, sv[0], EV_WRITE | EV_PERSIST, evt_count_cb, &w);
    CHECK_EQ(event_add(re, NULL), 0);
    event_base_active_by_fd(base, sv[0], EV_READ);
    event_base_active_by_fd(base, sv[1], EV_READ);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(r, 1); /* nothing to read: only the activation called it */
    CHECK_EQ(w, 0); /* not added */
    event_free(re);
    event_free(we);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

static void del_self_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    event_free(arg);
}

TEST(a_callback_may_free_its_own_event) {
    struct event_base *base = evt_base_open();
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event *ev =
        event_new(base, sv[0], EV_READ | EV_PERSIST, del_self_cb, event_self_cbarg());
    CHECK(event_get_callback_arg(ev) == ev);
    CHECK_EQ(event_add(ev, NULL), 0);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    CHECK_EQ(event_base_dispatch(base), 1); /* ran, freed, then nothing was left */
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

TEST(edge_triggered_and_level_triggered_events_on_one_fd_are_refused) {
    struct event_base *base = evt_base_open();
    int sv[2], n = 0;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event *et = event_new(base, sv[0], EV_READ | EV_ET, evt_count_cb, &n);
    struct event *lt = event_new(base, sv[0], EV_WRITE, evt_count_cb, &n);
    CHECK_EQ(event_add(et, NULL), 0);
    CHECK_EQ(event_add(lt, NULL), -1);
    CHECK(strstr(evt_last_warning, "mix edge-triggered") != NULL);
    CHECK_EQ(event_del(et), 0);
    CHECK_EQ(event_add(lt, NULL), 0); /* alone on the fd now */
    event_free(et);
    event_free(lt);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

static int inner_result;
static struct event *seen_running;

static void reenter_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct event_base *base = arg;
    seen_running = event_base_get_running_event(base);
    inner_result = event_base_loop(base, EVLOOP_NONBLOCK);
}

TEST(reentrant_event_base_loop_is_refused_and_running_event_is_known) {
    struct event_base *base = evt_base_open();
    struct event ev;
    CHECK_EQ(event_assign(&ev, base, -1, 0, reenter_cb, base), 0);
    CHECK(event_base_get_running_event(base) == NULL);
    event_active(&ev, EV_TIMEOUT, 1);
    inner_result = 0;
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1); /* 1: nothing left afterwards */
    CHECK_EQ(inner_result, -1);
    CHECK(strstr(evt_last_warning, "reentrant") != NULL);
    CHECK(seen_running == &ev);
    CHECK(event_base_get_running_event(base) == NULL);
    evt_base_close(base);
}

/* ---- bufferevents, evbuffers and listeners ---- */

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include <netinet/in.h>

TEST(evbuffer_moves_copies_and_reads_lines_across_chunks) {
    struct evbuffer *a = evbuffer_new(), *b = evbuffer_new();
    char big[10000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    CHECK_EQ(evbuffer_add(a, big, sizeof big), 0); /* spans chunks */
    CHECK_EQ(evbuffer_add_printf(a, "\r\nline two\nrest"), 15);
    CHECK_EQ(evbuffer_get_length(a), sizeof big + 15);
    size_t n = 0;
    char *line = evbuffer_readln(a, &n, EVBUFFER_EOL_CRLF);
    CHECK(line != NULL);
    CHECK_EQ(n, sizeof big);
    CHECK_EQ(memcmp(line, big, sizeof big), 0);
    free(line);
    line = evbuffer_readln(a, &n, EVBUFFER_EOL_LF);
    CHECK_STR_EQ(line, "line two");
    free(line);
    CHECK(evbuffer_readln(a, &n, EVBUFFER_EOL_LF) == NULL); /* "rest" has no end yet */
    CHECK_EQ(evbuffer_add_buffer(b, a), 0);
    CHECK_EQ(evbuffer_get_length(a), 0);
    CHECK_EQ(evbuffer_get_length(b), 4);
    CHECK_EQ(evbuffer_prepend(b, "the ", 4), 0);
    CHECK_EQ(memcmp(evbuffer_pullup(b, -1), "the rest", 8), 0);
    char out[4];
    CHECK_EQ(evbuffer_remove(b, out, 4), 4);
    CHECK_EQ(memcmp(out, "the ", 4), 0);
    CHECK_EQ(evbuffer_freeze(b, 1), 0);
    CHECK_EQ(evbuffer_drain(b, 1), -1); /* frozen at the front */
    CHECK_EQ(evbuffer_unfreeze(b, 1), 0);
    CHECK_EQ(evbuffer_unfreeze(b, 1), -1);
    CHECK_EQ(evbuffer_drain(b, 100), 0);
    CHECK_EQ(evbuffer_get_length(b), 0);
    struct evbuffer_iovec v;
    CHECK_EQ(evbuffer_reserve_space(b, 100, &v, 1), 1);
    memcpy(v.iov_base, "xyz", 3);
    v.iov_len = 3;
    CHECK_EQ(evbuffer_commit_space(b, &v, 1), 0);
    CHECK_EQ(evbuffer_get_length(b), 3);
    v.iov_base = big; /* not the reserved space */
    CHECK_EQ(evbuffer_commit_space(b, &v, 1), -1);
    evbuffer_free(a);
    evbuffer_free(b);
}

struct echo_peer {
    size_t got, want;
    int events;
    unsigned char sum;
    struct event_base *base;
};

static void echo_read(struct bufferevent *bev, void *arg)
{
    (void)arg;
    evbuffer_add_buffer(bufferevent_get_output(bev), bufferevent_get_input(bev));
}

static void echo_event(struct bufferevent *bev, short what, void *arg)
{
    *(short *)arg = what;
    bufferevent_free(bev);
}

static void sink_read(struct bufferevent *bev, void *arg)
{
    struct echo_peer *p = arg;
    unsigned char buf[4096];
    size_t n;
    while ((n = bufferevent_read(bev, buf, sizeof buf)) > 0) {
        for (size_t i = 0; i < n; i++)
            if (buf[i] != (unsigned char)((p->got + i) * 7))
                p->sum = 1; /* a byte out of place */
        p->got += n;
    }
    if (p->got >= p->want)
        bufferevent_free(bev); /* closes the socket: the echo side sees EOF */
}

TEST(bufferevent_echo_moves_4_mib_intact_and_reports_eof) {
    struct event_base *base = evt_base_open();
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    short echo_what = 0;
    struct bufferevent *echo = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    struct bufferevent *client = bufferevent_socket_new(base, sv[1], BEV_OPT_CLOSE_ON_FREE);
    CHECK(echo && client);
    struct echo_peer p = {.want = 4u << 20};
    bufferevent_setcb(echo, echo_read, NULL, echo_event, &echo_what);
    bufferevent_setcb(client, sink_read, NULL, NULL, &p);
    CHECK_EQ(bufferevent_get_enabled(echo), EV_WRITE);
    CHECK_EQ(bufferevent_enable(echo, EV_READ), 0);
    CHECK_EQ(bufferevent_enable(client, EV_READ), 0);
    unsigned char *data = malloc(p.want);
    for (size_t i = 0; i < p.want; i++)
        data[i] = (unsigned char)(i * 7);
    CHECK_EQ(bufferevent_write(client, data, p.want), 0);
    free(data);
    CHECK_EQ(event_base_dispatch(base), 1); /* runs until both are freed */
    CHECK_EQ(p.got, p.want);
    CHECK_EQ(p.sum, 0);
    CHECK_EQ(echo_what, BEV_EVENT_READING | BEV_EVENT_EOF);
    evt_base_close(base);
}

struct accept_ctx {
    struct event_base *base;
    struct bufferevent *server;
    short client_what;
    char got[16];
};

static void on_conn(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int len,
                    void *arg)
{
    struct accept_ctx *c = arg;
    (void)sa, (void)len;
    CHECK_EQ(sa->sa_family, AF_INET);
    c->server = bufferevent_socket_new(evconnlistener_get_base(lev), fd, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_write(c->server, "hello", 5);
    evconnlistener_free(lev); /* from its own callback: freed once the callback returns */
}

static void client_read(struct bufferevent *bev, void *arg)
{
    struct accept_ctx *c = arg;
    size_t n = bufferevent_read(bev, c->got, sizeof c->got - 1);
    c->got[n] = '\0';
    bufferevent_free(bev);
    bufferevent_free(c->server);
}

static void client_event(struct bufferevent *bev, short what, void *arg)
{
    struct accept_ctx *c = arg;
    c->client_what = what;
    if (what & BEV_EVENT_CONNECTED)
        bufferevent_enable(bev, EV_READ);
}

TEST(listener_and_connecting_bufferevent_talk_over_tcp) {
    struct event_base *base = evt_base_open();
    struct accept_ctx c = {.base = base};
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    struct evconnlistener *lev = evconnlistener_new_bind(
        base, on_conn, &c, LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE, -1,
        (struct sockaddr *)&sin, sizeof sin);
    CHECK(lev != NULL);
    socklen_t len = sizeof sin;
    CHECK_EQ(getsockname(evconnlistener_get_fd(lev), (struct sockaddr *)&sin, &len), 0);
    struct bufferevent *client = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(client, client_read, NULL, client_event, &c);
    CHECK_EQ(bufferevent_socket_connect(client, (struct sockaddr *)&sin, sizeof sin), 0);
    CHECK_EQ(bufferevent_socket_connect(client, (struct sockaddr *)&sin, sizeof sin), -1);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(c.client_what, BEV_EVENT_CONNECTED);
    CHECK_STR_EQ(c.got, "hello");
    evt_base_close(base);
}

TEST(bufferevent_connect_refused_reports_an_error_event) {
    struct event_base *base = evt_base_open();
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t len = sizeof sin;
    CHECK_EQ(bind(s, (struct sockaddr *)&sin, sizeof sin), 0);
    CHECK_EQ(getsockname(s, (struct sockaddr *)&sin, &len), 0);
    close(s); /* a port nobody listens on */
    struct accept_ctx c = {.base = base};
    struct bufferevent *client = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(client, NULL, NULL, client_event, &c);
    CHECK_EQ(bufferevent_socket_connect(client, (struct sockaddr *)&sin, sizeof sin), 0);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(c.client_what, BEV_EVENT_ERROR);
    bufferevent_free(client);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    evt_base_close(base);
}

static void count_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    (*(int *)arg)++;
}

TEST(bufferevent_stops_reading_at_its_high_watermark_and_resumes_below_it) {
    struct event_base *base = evt_base_open();
    int sv[2], calls = 0;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], 0); /* sv[0] stays ours */
    bufferevent_setcb(bev, count_read, NULL, NULL, &calls);
    bufferevent_setwatermark(bev, EV_READ, 0, 100);
    bufferevent_enable(bev, EV_READ);
    char buf[1000];
    memset(buf, 'x', sizeof buf);
    CHECK_EQ(write(sv[1], buf, 60), 60);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(write(sv[1], buf, 60), 60);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(evbuffer_get_length(bufferevent_get_input(bev)), 120);
    CHECK_EQ(write(sv[1], buf, 60), 60);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1); /* suspended: nothing read, nothing busy */
    CHECK_EQ(evbuffer_get_length(bufferevent_get_input(bev)), 120);
    CHECK_EQ(calls, 2);
    CHECK_EQ(evbuffer_drain(bufferevent_get_input(bev), 120), 0); /* below the mark: resumes */
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(evbuffer_get_length(bufferevent_get_input(bev)), 60);
    CHECK_EQ(calls, 3);
    bufferevent_free(bev);
    CHECK_EQ(write(sv[0], "y", 1), 1); /* without BEV_OPT_CLOSE_ON_FREE the fd stays open */
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

TEST(bufferevent_read_timeout_reports_timeout_and_disables_reading) {
    struct event_base *base = evt_base_open();
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct accept_ctx c = {.base = base};
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(bev, NULL, NULL, client_event, &c);
    struct timeval tv = {0, 50 * 1000};
    CHECK_EQ(bufferevent_set_timeouts(bev, &tv, NULL), 0);
    bufferevent_enable(bev, EV_READ);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(c.client_what, BEV_EVENT_READING | BEV_EVENT_TIMEOUT);
    CHECK_EQ(bufferevent_get_enabled(bev) & EV_READ, 0);
    bufferevent_free(bev);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    close(sv[1]);
    evt_base_close(base);
}

/* Every bufferevent of a base reads into one shared buffer and copies out at once: many
 * connections delivering at the same time must each get their own bytes, in order. */
struct many_sink {
    size_t got;
    int bad;
    unsigned char tag;
    int *left;
};

static void many_sink_read(struct bufferevent *bev, void *arg)
{
    struct many_sink *k = arg;
    unsigned char buf[3000];
    size_t n;
    while ((n = bufferevent_read(bev, buf, sizeof buf)) > 0) {
        for (size_t i = 0; i < n; i++)
            if (buf[i] != (unsigned char)(k->tag + (k->got + i) % 251))
                k->bad = 1;
        k->got += n;
    }
    if (k->got == 200000 && --*k->left == 0)
        event_base_loopbreak(bufferevent_get_base(bev));
}

TEST(bufferevents_reading_at_once_each_get_their_own_bytes) {
    enum { N = 40, LEN = 200000 };
    struct event_base *base = evt_base_open();
    int sv[N][2], left = N;
    struct bufferevent *echo[N], *sink[N];
    struct many_sink k[N];
    unsigned char *data = malloc(LEN);
    for (int c = 0; c < N; c++) {
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[c]), 0);
        echo[c] = bufferevent_socket_new(base, sv[c][0], BEV_OPT_CLOSE_ON_FREE);
        sink[c] = bufferevent_socket_new(base, sv[c][1], BEV_OPT_CLOSE_ON_FREE);
        CHECK(echo[c] && sink[c]);
        k[c] = (struct many_sink){.tag = (unsigned char)(c * 37), .left = &left};
        bufferevent_setcb(echo[c], echo_read, NULL, NULL, NULL);
        bufferevent_setcb(sink[c], many_sink_read, NULL, NULL, &k[c]);
        bufferevent_enable(echo[c], EV_READ);
        bufferevent_enable(sink[c], EV_READ);
        for (size_t i = 0; i < LEN; i++)
            data[i] = (unsigned char)(k[c].tag + i % 251);
        CHECK_EQ(bufferevent_write(sink[c], data, LEN), 0); /* echoed back to the sink */
    }
    free(data);
    CHECK_EQ(event_base_dispatch(base), 0);
    CHECK(event_base_got_break(base));
    for (int c = 0; c < N; c++) {
        CHECK_EQ(k[c].got, (size_t)LEN);
        CHECK_EQ(k[c].bad, 0);
        bufferevent_free(echo[c]);
        bufferevent_free(sink[c]);
    }
    evt_base_close(base);
}

/* A bufferevent set to read more than 16 KB at a time reads into chunks of its own: one
 * read callback sees all of a 100,000-byte burst. */
struct big_reader {
    size_t most, got, want;
};

static void big_read(struct bufferevent *bev, void *arg)
{
    struct big_reader *r = arg;
    size_t n = evbuffer_get_length(bufferevent_get_input(bev));
    if (n > r->most)
        r->most = n;
    r->got += n;
    evbuffer_drain(bufferevent_get_input(bev), n);
    if (r->got == r->want)
        event_base_loopbreak(bufferevent_get_base(bev));
}

/* Writes `len` bytes into `fd` at once, then runs the base until they have been read;
 * returns the most one read callback saw. */
static size_t burst_through(struct event_base *base, int fd, struct big_reader *r, size_t len)
{
    static char burst[100000];
    memset(burst, 'b', sizeof burst);
    *r = (struct big_reader){.want = len};
    CHECK_EQ(write(fd, burst, len), (ssize_t)len);
    CHECK_EQ(event_base_dispatch(base), 0);
    CHECK_EQ(r->got, len);
    return r->most;
}

TEST(bufferevent_max_single_read_sets_how_much_one_read_takes) {
    struct event_base *base = evt_base_open();
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int sz = 1 << 20;
    CHECK_EQ(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz), 0);
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    struct big_reader r;
    bufferevent_setcb(bev, big_read, NULL, NULL, &r);
    CHECK_EQ(bufferevent_get_max_single_read(bev), 16384);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    CHECK_EQ(burst_through(base, sv[1], &r, 100000), 16384); /* the default: 16 KB a read */
    CHECK_EQ(bufferevent_set_max_single_read(bev, 200000), 0); /* while reading */
    CHECK_EQ(bufferevent_get_max_single_read(bev), 200000);
    CHECK_EQ(burst_through(base, sv[1], &r, 100000), 100000);
    CHECK_EQ(bufferevent_set_max_single_read(bev, 0), 0); /* back to the default */
    CHECK_EQ(burst_through(base, sv[1], &r, 20000), 16384);
    bufferevent_free(bev);
    close(sv[1]);
    evt_base_close(base);
}
