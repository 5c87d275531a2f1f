/* SPDX-License-Identifier: MIT */
/* libiomux-event's bufferevents, beyond test_event.c and libevent's own bufferevent/ group
 * (tests/libevent): every call on NULL, a socket given later (bufferevent_setfd), writing
 * switched off and on, flushes, watermarks, priorities, timeouts set before and after the
 * socket, a write timeout against a peer that does not read, a reset and a vanished peer, and
 * freeing with output still queued. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "event_fixture.h"
#include "harness.h"

CORE_TEST(bufferevent_calls_on_null_fail_or_answer_nothing) {
    char c;
    CHECK(bufferevent_socket_new(NULL, -1, 0) == NULL);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    CHECK_EQ(bufferevent_socket_connect(NULL, (struct sockaddr *)&sin, sizeof sin), -1);
    bufferevent_free(NULL);
    bufferevent_setcb(NULL, NULL, NULL, NULL, NULL);
    bufferevent_getcb(NULL, NULL, NULL, NULL, NULL);
    CHECK_EQ(bufferevent_setfd(NULL, 0), -1);
    CHECK_EQ(bufferevent_getfd(NULL), -1);
    CHECK(bufferevent_get_base(NULL) == NULL);
    CHECK(bufferevent_get_input(NULL) == NULL);
    CHECK(bufferevent_get_output(NULL) == NULL);
    CHECK_EQ(bufferevent_write(NULL, "x", 1), -1);
    CHECK_EQ(bufferevent_write_buffer(NULL, NULL), -1);
    CHECK_EQ(bufferevent_read(NULL, &c, 1), 0);
    CHECK_EQ(bufferevent_read_buffer(NULL, NULL), -1);
    CHECK_EQ(bufferevent_enable(NULL, EV_READ), -1);
    CHECK_EQ(bufferevent_disable(NULL, EV_READ), -1);
    CHECK_EQ(bufferevent_get_enabled(NULL), 0);
    CHECK_EQ(bufferevent_set_timeouts(NULL, NULL, NULL), -1);
    bufferevent_setwatermark(NULL, EV_READ, 1, 2);
    CHECK_EQ(bufferevent_getwatermark(NULL, EV_READ, NULL, NULL), -1);
    CHECK_EQ(bufferevent_flush(NULL, EV_WRITE, BEV_FLUSH), -1);
    CHECK_EQ(bufferevent_priority_set(NULL, 0), -1);
    CHECK_EQ(bufferevent_get_priority(NULL), -1);
    CHECK_EQ(bufferevent_set_max_single_read(NULL, 100), -1);
    CHECK_EQ(bufferevent_get_max_single_read(NULL), -1);
    bufferevent_lock(NULL);
    bufferevent_unlock(NULL);
    CHECK_EQ(bufferevent_socket_get_dns_error(NULL), 0);
}

/* ---- a socket given later ---- */

static int event_errno; /* errno when the last event callback ran */

static void record_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    *(short *)arg = what;
    event_errno = errno;
}

static int reads_done, writes_done;

static void count_read(struct bufferevent *bev, void *arg)
{
    (void)bev, (void)arg;
    reads_done++;
}

static void count_write(struct bufferevent *bev, void *arg)
{
    (void)bev, (void)arg;
    writes_done++;
}

TEST(a_bufferevent_without_a_socket_keeps_its_output_until_setfd_gives_one) {
    struct event_base *base = evt_base_open();
    int sv[2];
    make_socketpair(sv);
    struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);
    CHECK(bev != NULL);
    reads_done = writes_done = 0;
    bufferevent_setcb(bev, count_read, count_write, NULL, NULL);
    CHECK_EQ(bufferevent_getfd(bev), -1);
    CHECK_EQ(bufferevent_write(bev, "queued ", 7), 0);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0); /* no socket: nothing to do */
    CHECK_EQ(evbuffer_get_length(bufferevent_get_output(bev)), 7);
    struct timeval t = {5, 0};
    CHECK_EQ(bufferevent_set_timeouts(bev, &t, &t), 0); /* kept until there is a stream */
    CHECK_EQ(bufferevent_setfd(bev, -1), -1);
    CHECK_EQ(bufferevent_setfd(bev, sv[0]), 0);
    CHECK_EQ(bufferevent_getfd(bev), sv[0]);
    CHECK_EQ(bufferevent_setfd(bev, sv[0]), -1);
    CHECK(strstr(evt_last_warning, "has a socket already") != NULL);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    CHECK_EQ(bufferevent_socket_connect(bev, (struct sockaddr *)&sin, sizeof sin), -1);
    CHECK(strstr(evt_last_warning, "has a socket already") != NULL);
    /* An empty chunk in the middle of the output (a reservation not used) is passed by. */
    struct evbuffer_iovec v;
    CHECK_EQ(evbuffer_reserve_space(bufferevent_get_output(bev), 8192, &v, 1), 1);
    CHECK_EQ(evbuffer_commit_space(bufferevent_get_output(bev), &v, 0), 0);
    struct evbuffer *more = evbuffer_new();
    CHECK_EQ(evbuffer_add(more, "and more", 8), 0);
    CHECK_EQ(bufferevent_write_buffer(bev, more), 0);
    CHECK_EQ(evbuffer_get_length(more), 0);
    evbuffer_free(more);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0); /* until the write callback */
    CHECK_EQ(writes_done, 1);
    char got[32];
    CHECK_EQ(read(sv[1], got, sizeof got), 15);
    CHECK_EQ(memcmp(got, "queued and more", 15), 0);
    /* Reading into an evbuffer of the caller's. */
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    CHECK_EQ(bufferevent_get_enabled(bev), EV_READ | EV_WRITE);
    CHECK_EQ(write(sv[1], "reply", 5), 5);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0); /* until the read callback */
    CHECK_EQ(reads_done, 1);
    struct evbuffer *in = evbuffer_new();
    CHECK_EQ(bufferevent_read_buffer(bev, in), 0);
    CHECK_EQ(evbuffer_get_length(in), 5);
    evbuffer_free(in);
    bufferevent_free(bev);
    CHECK_GE(fcntl(sv[0], F_GETFD), 0); /* not BEV_OPT_CLOSE_ON_FREE: still ours */
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

TEST(a_bufferevent_on_a_bad_descriptor_is_refused_with_a_warning) {
    struct event_base *base = evt_base_open();
    CHECK(bufferevent_socket_new(base, 1 << 20, 0) == NULL);
    CHECK_EQ(evt_warnings, 1);
    CHECK(strstr(evt_last_warning, "bufferevent_socket_new: ") != NULL);
    CHECK(strstr(evt_last_warning, "(fd 1048576)") != NULL);
    struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);
    CHECK_EQ(bufferevent_setfd(bev, 1 << 20), -1);
    CHECK(strstr(evt_last_warning, "bufferevent_setfd: ") != NULL);
    /* A family no socket can be made for fails at once, with errno. */
    struct sockaddr bad = {.sa_family = 12345};
    errno = 0;
    CHECK_EQ(bufferevent_socket_connect(bev, &bad, sizeof bad), -1);
    CHECK_NE(errno, 0);
    CHECK_EQ(bufferevent_socket_connect(bev, NULL, 0), -1);
    bufferevent_free(bev); /* never had a stream: freed at once */
#ifdef _WIN32 /* a handle that is no socket (a disk file's) is refused, and stays the caller's:
               * bufferevents on pipes and ptys are POSIX's (bev_fd.c) */
    char tmp[] = "/tmp/iomux-bev-XXXXXX";
    int fd = mkstemp(tmp);
    CHECK_GE(fd, 0);
    evutil_socket_t h = (evutil_socket_t)_get_osfhandle(fd);
    CHECK(bufferevent_socket_new(base, h, 0) == NULL);
    CHECK(strstr(evt_last_warning, "(fd ") != NULL);
    CHECK(GetFileType((HANDLE)h) == FILE_TYPE_DISK); /* still open: the caller's */
    _close(fd);
    unlink(tmp);
#else
    /* A descriptor that is no socket (a pipe) is taken, as libevent takes it, and stays the
     * caller's without BEV_OPT_CLOSE_ON_FREE. */
    int p[2];
    make_pipe(p);
    bev = bufferevent_socket_new(base, p[0], 0);
    CHECK(bev != NULL);
    CHECK_EQ(bufferevent_getfd(bev), p[0]);
    bufferevent_free(bev);
    CHECK_GE(fcntl(p[0], F_GETFD), 0);
    close(p[0]);
    close(p[1]);
#endif
    evt_base_close(base);
}

/* ---- writing ---- */

TEST(bufferevent_writing_disabled_holds_the_output_until_enabled) {
    struct event_base *base = evt_base_open();
    int sv[2];
    make_socketpair(sv);
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    writes_done = 0;
    bufferevent_setcb(bev, NULL, count_write, NULL, NULL);
    bufferevent_data_cb r, w;
    bufferevent_event_cb e;
    void *arg = &r;
    bufferevent_getcb(bev, &r, &w, &e, &arg);
    CHECK(r == NULL);
    CHECK(w == count_write);
    CHECK(e == NULL);
    CHECK(arg == NULL);
    bufferevent_getcb(bev, NULL, NULL, NULL, NULL);
    CHECK_EQ(bufferevent_disable(bev, EV_WRITE), 0);
    CHECK_EQ(bufferevent_write(bev, "held", 4), 0);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    char got[8];
    CHECK_EQ(read(sv[1], got, sizeof got), -1); /* nothing sent */
    CHECK_EQ(errno, EAGAIN);
    CHECK_EQ(bufferevent_enable(bev, EV_WRITE), 0);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(read(sv[1], got, sizeof got), 4);
    CHECK_EQ(writes_done, 1);
    bufferevent_free(bev);
    close(sv[1]);
    evt_base_close(base);
}

TEST(bufferevent_flush_sends_queued_output_before_the_loop_does) {
    struct event_base *base = evt_base_open();
    int sv[2];
    make_socketpair(sv);
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    CHECK_EQ(bufferevent_flush(bev, EV_WRITE, BEV_FLUSH), 0); /* nothing queued */
    CHECK_EQ(bufferevent_write(bev, "now", 3), 0);
    CHECK_EQ(bufferevent_flush(bev, EV_READ, BEV_FLUSH), 0); /* reading has nothing to flush */
    CHECK_EQ(bufferevent_flush(bev, EV_WRITE, BEV_FLUSH), 1);
    char got[8];
    /* The readiness backends send at once: the bytes are there before any loop ran.
     * io_uring's send goes with the loop's next enter. */
    int at_once = strcmp(event_base_get_method(base), "uring") != 0;
    if (at_once)
        CHECK_EQ(read(sv[1], got, sizeof got), 3);
    CHECK_NE(event_base_dispatch(base), -1); /* until the write is done */
    if (!at_once)
        CHECK_EQ(read(sv[1], got, sizeof got), 3);
    CHECK_EQ(evbuffer_get_length(bufferevent_get_output(bev)), 0);
    bufferevent_free(bev);
    close(sv[1]);
    evt_base_close(base);
}

TEST(a_bufferevent_freed_with_queued_output_goes_without_writing_it) {
    struct event_base *base = evt_base_open();
    int sv[2];
    make_socketpair(sv);
#ifdef _WIN32 /* iocp binds a socket to one stream's port once: a's is a pair of its own */
    int other[2];
    make_socketpair(other);
    struct bufferevent *a = bufferevent_socket_new(base, other[0], 0);
#else
    struct bufferevent *a = bufferevent_socket_new(base, sv[0], 0);
#endif
    struct bufferevent *b = bufferevent_socket_new(base, sv[0], 0);
    CHECK_EQ(bufferevent_write(a, "a", 1), 0);
    CHECK_EQ(bufferevent_write(b, "b", 1), 0); /* both queued; b first in the base's list */
    bufferevent_free(a);                        /* unqueued from behind b */
    CHECK_NE(event_base_dispatch(base), -1);
    char got[4];
    CHECK_EQ(read(sv[1], got, sizeof got), 1);
    CHECK_EQ(got[0], 'b');
#ifdef _WIN32
    CHECK_EQ(recv(other[1], got, sizeof got, MSG_DONTWAIT), -1); /* a's byte never went */
    CHECK_EQ(errno, EAGAIN);
    close(other[0]);
    close(other[1]);
#endif
    bufferevent_free(b);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

TEST(bufferevent_watermarks_and_priorities_read_back_as_set) {
    struct event_base *base = evt_base_open();
    CHECK_EQ(event_base_priority_init(base, 3), 0);
    struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);
    size_t lo = 1, hi = 1;
    bufferevent_setwatermark(bev, EV_WRITE, 10, 20);
    bufferevent_setwatermark(bev, EV_READ, 30, 40);
    CHECK_EQ(bufferevent_getwatermark(bev, EV_WRITE, &lo, &hi), 0);
    CHECK_EQ(lo, 10);
    CHECK_EQ(hi, 20);
    CHECK_EQ(bufferevent_getwatermark(bev, EV_READ, &lo, &hi), 0);
    CHECK_EQ(lo, 30);
    CHECK_EQ(hi, 40);
    CHECK_EQ(bufferevent_getwatermark(bev, EV_READ, NULL, NULL), 0);
    CHECK_EQ(bufferevent_getwatermark(bev, EV_READ | EV_WRITE, &lo, &hi), -1); /* one at a time */
    CHECK_EQ(bufferevent_priority_set(bev, 2), 0);
    CHECK_EQ(bufferevent_priority_set(bev, 3), -1);
    CHECK_EQ(bufferevent_priority_set(bev, -1), -1);
    CHECK_EQ(bufferevent_get_priority(bev), 2); /* what was set, as libevent answers */
    CHECK_EQ(bufferevent_set_max_single_read(bev, (1u << 30) + 1), -1);
    CHECK_EQ(bufferevent_set_max_single_read(bev, 0), 0); /* the default again */
    CHECK_EQ(bufferevent_get_max_single_read(bev), 16384);
    bufferevent_lock(bev);
    bufferevent_unlock(bev);
    bufferevent_free(bev);
    evt_base_close(base);
}

TEST(bufferevent_max_single_read_changed_while_reading_takes_effect_at_once) {
    struct event_base *base = evt_base_open();
    int sv[2];
    make_socketpair(sv);
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    reads_done = 0;
    bufferevent_setcb(bev, count_read, NULL, NULL, NULL);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    CHECK_EQ(bufferevent_set_max_single_read(bev, 3), 0);
    CHECK_EQ(write(sv[1], "abcdefgh", 8), 8);
    struct evbuffer *in = bufferevent_get_input(bev);
    for (int i = 0; i < 100 && evbuffer_get_length(in) < 8; i++)
        CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(evbuffer_get_length(in), 8);
    CHECK_GE(reads_done, 3); /* reads of at most 3 bytes each */
    CHECK_EQ(evbuffer_peek(in, -1, NULL, NULL, 0), 1); /* copied onto one chunk */
    bufferevent_free(bev);
    close(sv[1]);
    evt_base_close(base);
}

/* ---- timeouts and failures ---- */

TEST(a_write_timeout_ends_a_write_the_peer_never_takes) {
    /* The timeout counts from the loop's time, read when the base opened (as libev's do):
     * at a load of 16 the lines before the dispatch took 20 ms, so the start is taken here. */
    uint64_t t0 = mono_ns();
    struct event_base *base = evt_base_open();
    int sv[2];
    make_socketpair(sv);
    int small = 4096;
    CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    short what = 0;
    bufferevent_setcb(bev, NULL, NULL, record_event, &what);
    struct timeval wt = {0, 100 * 1000};
    CHECK_EQ(bufferevent_set_timeouts(bev, NULL, &wt), 0); /* on the open stream */
    static char big[1 << 20];
    CHECK_EQ(bufferevent_write(bev, big, sizeof big), 0);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(what, BEV_EVENT_WRITING | BEV_EVENT_TIMEOUT);
    CHECK_GE(mono_ns() - t0, 90 * MS);
    CHECK_EQ(event_errno, ETIMEDOUT);
    bufferevent_free(bev);
    close(sv[1]);
    evt_base_close(base);
}

TEST(a_connect_with_timeouts_set_before_times_out_reading) {
    struct event_base *base = evt_base_open();
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t len = sizeof sin;
    CHECK_EQ(bind(ls, (struct sockaddr *)&sin, sizeof sin), 0);
    CHECK_EQ(listen(ls, 4), 0);
    CHECK_EQ(getsockname(ls, (struct sockaddr *)&sin, &len), 0);
    struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);
    struct timeval rt = {0, 100 * 1000};
    CHECK_EQ(bufferevent_set_timeouts(bev, &rt, NULL), 0);
    short what = 0;
    bufferevent_setcb(bev, NULL, NULL, record_event, &what);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    CHECK_EQ(bufferevent_socket_connect(bev, (struct sockaddr *)&sin, sizeof sin), 0);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(what, BEV_EVENT_CONNECTED);
    CHECK_NE(bufferevent_getfd(bev), -1);
    CHECK_EQ(event_base_dispatch(base), 1); /* the listener never writes */
    CHECK_EQ(what, BEV_EVENT_READING | BEV_EVENT_TIMEOUT);
    CHECK_EQ(bufferevent_get_enabled(bev) & EV_READ, 0);
    bufferevent_free(bev);
    close(ls);
    evt_base_close(base);
}

/* A TCP connection through loopback: *client connected to *server. */
static void tcp_pair(int *client, int *server)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t len = sizeof sin;
    CHECK_EQ(bind(ls, (struct sockaddr *)&sin, sizeof sin), 0);
    CHECK_EQ(listen(ls, 1), 0);
    CHECK_EQ(getsockname(ls, (struct sockaddr *)&sin, &len), 0);
    *client = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(connect(*client, (struct sockaddr *)&sin, sizeof sin), 0);
    *server = accept(ls, NULL, NULL);
    CHECK_GE(*server, 0);
    close(ls);
}

TEST(a_reset_from_the_peer_is_a_reading_error_with_its_errno) {
    struct event_base *base = evt_base_open();
    int c, s;
    tcp_pair(&c, &s);
    struct bufferevent *bev = bufferevent_socket_new(base, c, BEV_OPT_CLOSE_ON_FREE);
    short what = 0;
    bufferevent_setcb(bev, NULL, NULL, record_event, &what);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    struct linger lg = {1, 0}; /* close with a reset */
    CHECK_EQ(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    close(s);
    CHECK_EQ(event_base_dispatch(base), 1);
#ifdef _WIN32
    if (win_is_wine() && what == (BEV_EVENT_READING | BEV_EVENT_EOF))
        SKIP("Wine does not implement it: the peer of a socket closed with SO_LINGER {1, 0} "
             "reads the end of the stream there, not a reset (Windows sends the reset)");
#endif
    CHECK_EQ(what, BEV_EVENT_READING | BEV_EVENT_ERROR);
    CHECK_EQ(event_errno, ECONNRESET);
    /* The stream has failed: a write fails too, as a writing error. */
    what = 0;
    CHECK_EQ(bufferevent_write(bev, "x", 1), 0);
    CHECK_NE(event_base_dispatch(base), -1);
    CHECK_EQ(what, BEV_EVENT_WRITING | BEV_EVENT_ERROR);
    bufferevent_free(bev);
    evt_base_close(base);
}

TEST(writing_to_a_vanished_peer_is_a_writing_error) {
    struct event_base *base = evt_base_open();
    int sv[2];
    make_socketpair(sv);
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    short what = 0;
    bufferevent_setcb(bev, NULL, NULL, record_event, &what);
    close(sv[1]);
#ifdef _WIN32 /* a TCP pair there: the first send goes out, the peer's reset fails a later one */
    for (int i = 0; i < 50 && !what; i++) {
        CHECK_EQ(bufferevent_write(bev, "lost", 4), 0);
        CHECK_NE(event_base_dispatch(base), -1);
        if (!what)
            sleep_ms(20);
    }
    CHECK_EQ(what, BEV_EVENT_WRITING | BEV_EVENT_ERROR);
    CHECK(event_errno == ECONNRESET || event_errno == ECONNABORTED || event_errno == EPIPE);
#else
    CHECK_EQ(bufferevent_write(bev, "lost", 4), 0);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(what, BEV_EVENT_WRITING | BEV_EVENT_ERROR);
    CHECK_EQ(event_errno, EPIPE);
#endif
    bufferevent_free(bev);
    evt_base_close(base);
}

/* ---- triggers, another base, the single write's maximum ---- */

TEST(bufferevent_trigger_runs_callbacks_by_the_watermarks_unless_told_to_ignore_them) {
    struct event_base *base = evt_base_open();
    struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);
    CHECK(bev != NULL);
    short what = 0;
    reads_done = writes_done = 0;
    bufferevent_setcb(bev, count_read, count_write, record_event, &what);
    bufferevent_trigger(bev, EV_READ | EV_WRITE, 0); /* 0 >= 0 and 0 <= 0: both, now */
    CHECK_EQ(reads_done, 1);
    CHECK_EQ(writes_done, 1);
    bufferevent_setwatermark(bev, EV_READ, 5, 0);
    CHECK_EQ(bufferevent_write(bev, "abc", 3), 0); /* no socket: it stays */
    bufferevent_trigger(bev, EV_READ | EV_WRITE, 0);
    CHECK_EQ(reads_done, 1); /* 0 under the low mark of 5 */
    CHECK_EQ(writes_done, 1); /* 3 over the low mark of 0 */
    bufferevent_trigger(bev, EV_READ | EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS);
    CHECK_EQ(reads_done, 2);
    CHECK_EQ(writes_done, 2);
    /* Deferred: from the loop, and the priority cannot change while they are owed. */
    bufferevent_trigger(bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
    bufferevent_trigger_event(bev, BEV_EVENT_EOF, BEV_TRIG_DEFER_CALLBACKS);
    CHECK_EQ(reads_done, 2);
    CHECK_EQ(what, 0);
    CHECK_EQ(bufferevent_priority_set(bev, 0), -1);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1); /* nothing else to wait for */
    CHECK_EQ(reads_done, 3);
    CHECK_EQ(what, BEV_EVENT_EOF);
    CHECK_EQ(bufferevent_priority_set(bev, 0), 0);
    bufferevent_trigger_event(bev, BEV_EVENT_ERROR, 0);
    CHECK_EQ(what, BEV_EVENT_ERROR);
    /* Without callbacks, triggers do nothing. */
    bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
    bufferevent_trigger(bev, EV_READ | EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS);
    bufferevent_trigger_event(bev, BEV_EVENT_EOF, 0);
    CHECK_EQ(reads_done, 3);
    CHECK_EQ(writes_done, 2);
    CHECK_EQ(what, BEV_EVENT_ERROR);
    bufferevent_trigger(NULL, EV_READ, 0);
    bufferevent_trigger_event(NULL, BEV_EVENT_EOF, 0);
    CHECK(bufferevent_get_underlying(bev) == NULL);
    /* The single write's maximum. */
    CHECK_EQ(bufferevent_set_max_single_write(NULL, 10), -1);
    CHECK_EQ(bufferevent_get_max_single_write(NULL), -1);
    CHECK_EQ(bufferevent_set_max_single_write(bev, (1u << 30) + 1), -1);
    CHECK_EQ(bufferevent_set_max_single_write(bev, 100), 0);
    CHECK_EQ(bufferevent_get_max_single_write(bev), 100);
    CHECK_EQ(bufferevent_set_max_single_write(bev, 0), 0); /* the default again */
    CHECK_EQ(bufferevent_get_max_single_write(bev), 16384);
    bufferevent_free(bev);
    evt_base_close(base);
}

TEST(bufferevent_base_set_moves_only_a_bufferevent_nothing_waits_for) {
    struct event_base *base = evt_base_open();
    struct event_base *other = evt_base_open();
    struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);
    CHECK(bev != NULL);
    CHECK_EQ(bufferevent_base_set(NULL, bev), -1);
    CHECK_EQ(bufferevent_base_set(other, NULL), -1);
    CHECK_EQ(bufferevent_base_set(base, bev), 0); /* where it is */
    CHECK_EQ(bufferevent_base_set(other, bev), 0);
    CHECK(bufferevent_get_base(bev) == other);
    /* Its socket is watched by the new base. */
    int sv[2];
    make_socketpair(sv);
    CHECK_EQ(bufferevent_setfd(bev, sv[0]), 0);
    writes_done = 0;
    bufferevent_setcb(bev, NULL, count_write, NULL, NULL);
    CHECK_EQ(bufferevent_write(bev, "moved", 5), 0);
    CHECK_EQ(event_base_loop(other, EVLOOP_ONCE), 0);
    CHECK_EQ(writes_done, 1);
    char buf[8];
    CHECK_EQ(read(sv[1], buf, sizeof buf), 5);
    evt_warnings = 0;
    CHECK_EQ(bufferevent_base_set(base, bev), -1); /* a stream is open on it */
    CHECK_EQ(evt_warnings, 1);
    CHECK(strstr(evt_last_warning, "in use on its base") != NULL);
    bufferevent_free(bev);
    /* Neither a descriptor watched, nor a limit, nor callbacks owed may move. */
    int p[2];
    make_pipe(p);
    struct bufferevent *rd = bufferevent_socket_new(base, p[0], 0);
    CHECK_EQ(bufferevent_enable(rd, EV_READ), 0);
    CHECK_EQ(bufferevent_base_set(other, rd), -1);
    struct bufferevent *wr = bufferevent_socket_new(base, p[1], 0);
    CHECK_EQ(bufferevent_write(wr, "w", 1), 0);
    CHECK_EQ(bufferevent_base_set(other, wr), -1);
    struct bufferevent *pair[2];
    CHECK_EQ(bufferevent_pair_new(base, 0, pair), 0);
    bufferevent_setcb(pair[1], count_read, NULL, NULL, NULL);
    CHECK_EQ(bufferevent_enable(pair[1], EV_READ), 0);
    CHECK_EQ(bufferevent_write(pair[0], "owed", 4), 0);
    CHECK_EQ(bufferevent_base_set(other, pair[1]), -1);
    struct timeval hour = {3600, 0};
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(10, 10, 10, 10, &hour);
    CHECK_EQ(bufferevent_set_rate_limit(pair[0], cfg), 0);
    CHECK_EQ(bufferevent_base_set(other, pair[0]), -1);
    CHECK_EQ(bufferevent_set_rate_limit(pair[0], NULL), 0);
    CHECK_EQ(bufferevent_base_set(other, pair[0]), 0);
    bufferevent_free(rd);
    bufferevent_free(wr);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    ev_token_bucket_cfg_free(cfg);
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(other);
    evt_base_close(base);
}
