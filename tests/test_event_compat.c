/* SPDX-License-Identifier: MIT */
/* libiomux-event as programs written for libevent 1.x and early 2.0 use it (tmux is one):
 * the all-in-one <event.h>, struct bufferevent's public fields, the EVBUFFER_* macros,
 * bufferevent_new and evbuffer_readline, <event2/event-config.h>'s platform macros; a NULL
 * base standing for event_init's; bufferevents on descriptors that are no sockets (a pipe, a
 * pty); pairs and rate limits; and the backend a program's environment chooses
 * (EVENT_NO<METHOD> in libevent's order, IOMUX_BACKEND). */
#include <event.h>
#include <event2/event-config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#ifndef _WIN32
#include <termios.h>
#endif
#include <unistd.h>

/* A program's `#ifdef EVENT__HAVE_...` takes the path it takes with libevent built here. */
#ifdef _WIN32 /* libevent's Windows build: Winsock's headers, select, no setrlimit */
#if !defined(EVENT__HAVE_WINSOCK2_H) || !defined(EVENT__HAVE_WS2TCPIP_H) ||    \
    !defined(EVENT__HAVE_STDINT_H) || !defined(EVENT__HAVE_FCNTL_H) ||         \
    !defined(EVENT__HAVE_SELECT) || defined(EVENT__HAVE_SYS_RESOURCE_H) ||    \
    defined(EVENT__HAVE_SETRLIMIT) || defined(EVENT__HAVE_SYS_SOCKET_H) ||    \
    defined(EVENT__HAVE_POLL) || defined(EVENT__HAVE_PTHREADS)
#error "<event2/event-config.h> says of Windows what libevent's Windows build does not"
#endif
#else
#ifndef EVENT__HAVE_SYS_RESOURCE_H
#error "EVENT__HAVE_SYS_RESOURCE_H is not defined: libevent's test-fdleak would not build"
#endif
#if !defined(EVENT__HAVE_UNISTD_H) || !defined(EVENT__HAVE_SYS_SOCKET_H) || \
    !defined(EVENT__HAVE_FCNTL_H) || !defined(EVENT__HAVE_SETRLIMIT) ||       \
    !defined(EVENT__HAVE_GETTIMEOFDAY) || !defined(EVENT__HAVE_POLL)
#error "<event2/event-config.h> lacks a platform macro libevent defines here"
#endif
#endif
#ifdef EVENT__HAVE_SYS_RESOURCE_H
#include <sys/resource.h>
#endif
_Static_assert(EVENT__SIZEOF_VOID_P == sizeof(void *), "EVENT__SIZEOF_VOID_P");
_Static_assert(EVENT__SIZEOF_SIZE_T == sizeof(size_t), "EVENT__SIZEOF_SIZE_T");
_Static_assert(EVENT__NUMERIC_VERSION == 0x02010c00, "EVENT__NUMERIC_VERSION");

#include "event_fixture.h"
#include "harness.h"

static int reads, writes, events;
static short last_what;
static char got[256];
static size_t got_len;

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)arg;
    reads++;
    /* As tmux reads its clients' and panes' input: through the public field and macros. */
    size_t n = EVBUFFER_LENGTH(bev->input);
    if (n > sizeof got - got_len)
        n = sizeof got - got_len;
    memcpy(got + got_len, EVBUFFER_DATA(bev->input), n);
    got_len += n;
    evbuffer_drain(bev->input, n);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    (void)bev, (void)arg;
    writes++;
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev, (void)arg;
    events++;
    last_what = what;
}

static void reset(void)
{
    reads = writes = events = 0;
    last_what = 0;
    got_len = 0;
}

/* Turns the loop until `*count` reaches `want` (at most 200 turns of at most 50 ms each). */
static void turn_until(struct event_base *base, int *count, int want)
{
    struct timeval tick = {0, 50000};
    for (int i = 0; i < 200 && *count < want; i++) {
        event_base_loopexit(base, &tick);
        event_base_dispatch(base);
    }
    CHECK_GE(*count, want);
}

TEST(libevent_1x_programs_use_the_public_bufferevent_fields_and_macros) {
    struct event_base *base = event_init();
    CHECK(base != NULL);
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int arg = 7;
    struct bufferevent *bev = bufferevent_new(sv[0], on_read, on_write, on_event, &arg);
    CHECK(bev != NULL);
    /* The fields are the bufferevent's own state. */
    CHECK(bev->ev_base == base);
    CHECK(bev->input == bufferevent_get_input(bev));
    CHECK(bev->output == bufferevent_get_output(bev));
    CHECK(EVBUFFER_INPUT(bev) == bev->input);
    CHECK(EVBUFFER_OUTPUT(bev) == bev->output);
    CHECK(bev->readcb == on_read);
    CHECK(bev->writecb == on_write);
    CHECK(bev->errorcb == on_event);
    CHECK(bev->cbarg == &arg);
    CHECK_EQ(bev->enabled, EV_WRITE);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    CHECK_EQ(bev->enabled, EV_READ | EV_WRITE);
    bufferevent_setwatermark(bev, EV_READ, 0, 4096);
    CHECK_EQ(bev->wm_read.high, 4096);
    bufferevent_settimeout(bev, 30, 0);
    CHECK_EQ(bev->timeout_read.tv_sec, 30);
    CHECK_EQ(bev->timeout_write.tv_sec, 0);
    reset();
    CHECK_EQ(write(sv[1], "hello", 5), 5);
    turn_until(base, &reads, 1);
    CHECK_EQ(got_len, 5);
    CHECK_EQ(memcmp(got, "hello", 5), 0);
    /* EVBUFFER_OUTPUT, as tmux writes to its clients. */
    CHECK_EQ(evbuffer_add(EVBUFFER_OUTPUT(bev), "back", 4), 0);
    turn_until(base, &writes, 1);
    char buf[16];
    CHECK_EQ(read(sv[1], buf, sizeof buf), 4);
    CHECK_EQ(memcmp(buf, "back", 4), 0);
    /* The end of the peer is an event with libevent 1.x's names. */
    close(sv[1]);
    turn_until(base, &events, 1);
    CHECK_EQ(last_what, EVBUFFER_READ | EVBUFFER_EOF);
    bufferevent_free(bev);
    close(sv[0]);
    event_base_free(base);
}

static size_t cb_old, cb_new;
static int cb_calls;

static void on_length(struct evbuffer *buf, size_t old_len, size_t new_len, void *arg)
{
    (void)buf, (void)arg;
    cb_calls++;
    cb_old = old_len;
    cb_new = new_len;
}

CORE_TEST(evbuffer_1x_calls_read_lines_find_bytes_and_report_lengths) {
    struct evbuffer *b = evbuffer_new();
    CHECK_EQ(evbuffer_setcb(b, on_length, NULL), 0);
    CHECK_EQ(evbuffer_add(b, "one\r\ntwo\n\nthree", 15), 0);
    CHECK_EQ(cb_calls, 1);
    CHECK_EQ(cb_old, 0);
    CHECK_EQ(cb_new, 15);
    char *line = evbuffer_readline(b);
    CHECK_STR_EQ(line, "one");
    free(line);
    CHECK_EQ(cb_calls, 2);
    CHECK_EQ(cb_old, 15);
    CHECK_EQ(cb_new, 10);
    line = evbuffer_readline(b); /* any run of \r and \n ends a line */
    CHECK_STR_EQ(line, "two");
    free(line);
    CHECK_EQ(EVBUFFER_LENGTH(b), 5);
    CHECK(evbuffer_readline(b) == NULL); /* "three" is no whole line yet */
    unsigned char *at = evbuffer_find(b, (const unsigned char *)"ree", 3);
    CHECK(at != NULL);
    CHECK(at == EVBUFFER_DATA(b) + 2);
    CHECK(evbuffer_find(b, (const unsigned char *)"xyz", 3) == NULL);
    CHECK_EQ(evbuffer_setcb(b, NULL, NULL), 0);
    CHECK_EQ(evbuffer_drain(b, 5), 0);
    CHECK_EQ(cb_calls, 3);
    CHECK_EQ(evbuffer_setcb(NULL, NULL, NULL), -1);
    evbuffer_free(b);
}

TEST(a_null_base_is_the_one_event_init_made) {
    struct event_base *base = event_init();
    CHECK(base != NULL);
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct bufferevent *bev = bufferevent_socket_new(NULL, sv[0], BEV_OPT_CLOSE_ON_FREE);
    CHECK(bev != NULL);
    CHECK(bufferevent_get_base(bev) == base);
    bufferevent_free(bev);
    close(sv[1]);
    event_base_free(base);
}

/* ---- descriptors that are no sockets ---- */

TEST(bufferevents_read_and_write_pipes) {
#ifdef _WIN32
    SKIP("Windows has no such thing: a pipe a loop can watch (only sockets can be; a handle "
         "that is no socket is refused, test_event_bufferevent.c)");
#endif
    struct event_base *base = evt_base_open();
    int in[2], out[2];
    CHECK_EQ(pipe(in), 0);
    CHECK_EQ(pipe(out), 0);
    struct bufferevent *rd = bufferevent_socket_new(base, in[0], BEV_OPT_CLOSE_ON_FREE);
    struct bufferevent *wr = bufferevent_socket_new(base, out[1], BEV_OPT_CLOSE_ON_FREE);
    CHECK(rd != NULL);
    CHECK(wr != NULL);
    bufferevent_setcb(rd, on_read, NULL, on_event, NULL);
    bufferevent_setcb(wr, NULL, on_write, on_event, NULL);
    CHECK_EQ(bufferevent_enable(rd, EV_READ), 0);
    reset();
    CHECK_EQ(write(in[1], "through a pipe", 14), 14);
    turn_until(base, &reads, 1);
    CHECK_EQ(got_len, 14);
    CHECK_EQ(memcmp(got, "through a pipe", 14), 0);
    CHECK_EQ(bufferevent_write(wr, "and out", 7), 0);
    turn_until(base, &writes, 1);
    char buf[16];
    CHECK_EQ(read(out[0], buf, sizeof buf), 7);
    CHECK_EQ(memcmp(buf, "and out", 7), 0);
    close(in[1]); /* the writer went: the reader's end of file */
    turn_until(base, &events, 1);
    CHECK_EQ(last_what, BEV_EVENT_READING | BEV_EVENT_EOF);
    CHECK_EQ(bufferevent_get_enabled(rd) & EV_READ, 0);
    bufferevent_free(rd);
    bufferevent_free(wr);
    CHECK_EQ(fcntl(in[0], F_GETFD), -1); /* BEV_OPT_CLOSE_ON_FREE closed them */
    CHECK_EQ(fcntl(out[1], F_GETFD), -1);
    close(out[0]);
    evt_base_close(base);
}

TEST(a_bufferevent_on_a_pty_master_talks_to_its_slave) {
#ifdef _WIN32
    SKIP("Windows has no such thing: a pty (a pseudo console's ends are pipes, which a loop "
         "cannot watch)");
#else
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0)
        SKIP("posix_openpt failed: no pty here");
    CHECK_EQ(grantpt(master), 0);
    CHECK_EQ(unlockpt(master), 0);
    int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    CHECK_GE(slave, 0);
    struct termios tio;
    CHECK_EQ(tcgetattr(slave, &tio), 0);
    cfmakeraw(&tio); /* no echo, no line discipline: bytes as written */
    CHECK_EQ(tcsetattr(slave, TCSANOW, &tio), 0);
    struct event_base *base = evt_base_open();
    struct bufferevent *bev = bufferevent_socket_new(base, master, 0);
    CHECK(bev != NULL);
    bufferevent_setcb(bev, on_read, on_write, on_event, NULL);
    CHECK_EQ(bufferevent_enable(bev, EV_READ | EV_WRITE), 0);
    reset();
    CHECK_EQ(bufferevent_write(bev, "to the pane", 11), 0);
    turn_until(base, &writes, 1);
    char buf[32];
    size_t n = 0;
    while (n < 11) {
        ssize_t r = read(slave, buf + n, sizeof buf - n);
        CHECK_GT(r, 0);
        n += (size_t)r;
    }
    CHECK_EQ(memcmp(buf, "to the pane", 11), 0);
    CHECK_EQ(write(slave, "pane output", 11), 11);
    turn_until(base, &reads, 1);
    while (got_len < 11)
        turn_until(base, &reads, reads + 1);
    CHECK_EQ(memcmp(got, "pane output", 11), 0);
    /* The slave's last close: the master reads EIO (Linux) or an end of file. */
    close(slave);
    turn_until(base, &events, 1);
    CHECK(last_what == (BEV_EVENT_READING | BEV_EVENT_ERROR) ||
          last_what == (BEV_EVENT_READING | BEV_EVENT_EOF));
    bufferevent_free(bev);
    CHECK_GE(fcntl(master, F_GETFD), 0); /* no BEV_OPT_CLOSE_ON_FREE: still ours */
    close(master);
    evt_base_close(base);
#endif
}

/* ---- pairs and rate limits ---- */

static int pair_reads[2];

static void pair_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    pair_reads[(int)(intptr_t)arg]++;
}

TEST(a_bufferevent_pair_moves_bytes_both_ways_with_deferred_callbacks) {
    struct event_base *base = evt_base_open();
    struct bufferevent *pair[2];
    CHECK_EQ(bufferevent_pair_new(base, 0, pair), 0);
    CHECK(bufferevent_pair_get_partner(pair[0]) == pair[1]);
    CHECK(bufferevent_pair_get_partner(pair[1]) == pair[0]);
    CHECK_EQ(bufferevent_getfd(pair[0]), -1);
    pair_reads[0] = pair_reads[1] = 0;
    for (int i = 0; i < 2; i++) {
        bufferevent_setcb(pair[i], pair_read, NULL, NULL, (void *)(intptr_t)i);
        CHECK_EQ(bufferevent_enable(pair[i], EV_READ), 0);
    }
    CHECK_EQ(bufferevent_write(pair[0], "ping", 4), 0);
    CHECK_EQ(evbuffer_get_length(bufferevent_get_input(pair[1])), 4); /* moved at once */
    CHECK_EQ(pair_reads[1], 0);                                       /* told later */
    /* 1, as libevent: the callback ran, then nothing was left to wait for. */
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    CHECK_EQ(pair_reads[1], 1);
    CHECK_EQ(bufferevent_write(pair[1], "pong!", 5), 0);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    CHECK_EQ(pair_reads[0], 1);
    CHECK_EQ(evbuffer_get_length(bufferevent_get_input(pair[0])), 5);
    /* Reading disabled at one end holds the bytes in the writer's output. */
    CHECK_EQ(bufferevent_disable(pair[1], EV_READ), 0);
    CHECK_EQ(bufferevent_write(pair[0], "held", 4), 0);
    CHECK_EQ(evbuffer_get_length(bufferevent_get_output(pair[0])), 4);
    CHECK_EQ(bufferevent_enable(pair[1], EV_READ), 0);
    CHECK_EQ(evbuffer_get_length(bufferevent_get_input(pair[1])), 8);
    bufferevent_free(pair[1]);
    CHECK(bufferevent_pair_get_partner(pair[0]) == NULL);
    CHECK_EQ(bufferevent_write(pair[0], "to nobody", 9), 0); /* kept in the output */
    CHECK_EQ(evbuffer_get_length(bufferevent_get_output(pair[0])), 9);
    bufferevent_free(pair[0]);
    evt_base_close(base);
}

TEST(a_rate_limit_lets_through_one_ticks_rate_per_tick) {
    struct event_base *base = evt_base_open();
    struct timeval tick = {0, 50000};
    CHECK(ev_token_bucket_cfg_new(200, 100, 100, 100, &tick) == NULL); /* rate over burst */
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(100, 100, 100000, 100000, &tick);
    CHECK(cfg != NULL);
    struct bufferevent *pair[2];
    CHECK_EQ(bufferevent_pair_new(base, 0, pair), 0);
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], cfg), 0);
    CHECK(bufferevent_get_token_bucket_cfg(pair[1]) == cfg);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 100);
    CHECK_EQ(bufferevent_get_read_limit(pair[0]), EV_SSIZE_MAX); /* no limit of its own */
    CHECK_EQ(bufferevent_enable(pair[1], EV_READ), 0);
    struct timeval t0, t1;
    evutil_gettimeofday(&t0, NULL);
    char data[1000];
    memset(data, 'r', sizeof data);
    CHECK_EQ(bufferevent_write(pair[0], data, sizeof data), 0);
    struct evbuffer *in = bufferevent_get_input(pair[1]);
    CHECK_EQ(evbuffer_get_length(in), 100); /* the first tick's */
    CHECK_LE(bufferevent_get_read_limit(pair[1]), 0);
    for (int i = 0; i < 400 && evbuffer_get_length(in) < sizeof data; i++) {
        struct timeval step = {0, 20000};
        event_base_loopexit(base, &step);
        event_base_dispatch(base);
        CHECK_LE(evbuffer_get_length(in), sizeof data);
    }
    evutil_gettimeofday(&t1, NULL);
    CHECK_EQ(evbuffer_get_length(in), sizeof data);
    /* Nine more ticks' worth: at least eight tick boundaries passed (a lower bound only: a
     * busy machine may make it later, never earlier). */
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_usec - t0.tv_usec) / 1000;
    CHECK_GE(ms, 8 * 50);
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], NULL), 0);
    CHECK(bufferevent_get_token_bucket_cfg(pair[1]) == NULL);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    ev_token_bucket_cfg_free(cfg);
    evt_base_close(base);
}

/* ---- the backend a program's environment chooses ---- */

static int supported(const char *name)
{
    for (const char **m = event_get_supported_methods(); *m; m++)
        if (strcmp(*m, name) == 0)
            return 1;
    return 0;
}

static void expect_method(const char *want)
{
    struct event_base *base = event_base_new();
    CHECK(base != NULL);
    CHECK_STR_EQ(event_base_get_method(base), want);
    event_base_free(base);
}

CORE_TEST(event_no_variables_fall_back_in_libevents_order_and_iomux_backend_chooses) {
#ifdef _WIN32
    SKIP("Windows has no such thing: epoll and poll, between which EVENT_NOEPOLL and "
         "EVENT_NOPOLL choose (select is Windows' only method of libevent's)");
#endif
    if (!supported("poll") || !supported("select") || !supported("epoll"))
        SKIP("epoll, poll and select are not all here");
    const char *was = getenv("IOMUX_BACKEND");
    char saved[64] = "";
    if (was)
        snprintf(saved, sizeof saved, "%s", was);
    unsetenv("IOMUX_BACKEND");
    /* As tmux runs on Linux: libevent would take poll, not a method it does not have. */
    CHECK_EQ(setenv("EVENT_NOEPOLL", "1", 1), 0);
    expect_method("poll");
    CHECK_EQ(setenv("EVENT_NOPOLL", "1", 1), 0);
    expect_method("select");
    unsetenv("EVENT_NOPOLL");
    /* IOMUX_BACKEND names the backend outright. */
    CHECK_EQ(setenv("IOMUX_BACKEND", "select", 1), 0);
    expect_method("select");
    unsetenv("EVENT_NOEPOLL");
    CHECK_EQ(setenv("IOMUX_BACKEND", "epoll", 1), 0);
    expect_method("epoll");
    /* ... unless the program's configuration avoids it. */
    struct event_config *cfg = event_config_new();
    CHECK_EQ(event_config_avoid_method(cfg, "epoll"), 0);
    struct event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    CHECK(base != NULL);
    CHECK(strcmp(event_base_get_method(base), "epoll") != 0);
    event_base_free(base);
    if (saved[0])
        setenv("IOMUX_BACKEND", saved, 1);
    else
        unsetenv("IOMUX_BACKEND");
}
