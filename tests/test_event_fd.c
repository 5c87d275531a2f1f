/* SPDX-License-Identifier: MIT */
/* libiomux-event's bufferevents on descriptors that are no sockets (pipes, a pty), beyond
 * test_event_compat.c: read and write timeouts, timeouts changed while waiting, a write to a
 * pipe nobody reads, the read high watermark, a rate limit, writing switched off, output taken
 * back before it was written, a bufferevent freed from its own callback, a descriptor given
 * later, and two bufferevents racing for the same bytes. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "event_fixture.h"
#include "harness.h"

static int reads, writes, events;
static short last_what;
static int last_errno;

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)bev, (void)arg;
    reads++;
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
    last_errno = errno;
}

static struct bufferevent *fd_bev(struct event_base *base, int fd, int options)
{
    struct bufferevent *bev = bufferevent_socket_new(base, fd, options);
    CHECK(bev != NULL);
    bufferevent_setcb(bev, on_read, on_write, on_event, NULL);
    reads = writes = events = 0;
    last_what = 0;
    return bev;
}

/* One turn of the loop that waits for nothing new. */
static void turn(struct event_base *base)
{
    CHECK_GE(event_base_loop(base, EVLOOP_NONBLOCK), 0);
}

/* Writes to the non-blocking `fd` until the pipe is full; returns the bytes written. */
static size_t fill(int fd)
{
    static char junk[65536];
    size_t n = 0;
    for (;;) {
        ssize_t w = write(fd, junk, sizeof junk);
        if (w < 0) {
            CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
            return n;
        }
        n += (size_t)w;
    }
}

static size_t in_len(struct bufferevent *bev)
{
    return evbuffer_get_length(bufferevent_get_input(bev));
}

static size_t out_len(struct bufferevent *bev)
{
    return evbuffer_get_length(bufferevent_get_output(bev));
}

TEST(fd_bufferevent_read_timeout_disables_reading_and_reading_resumes_when_enabled) {
    struct event_base *base = evt_base_open();
    int p[2];
    make_pipe(p);
    struct bufferevent *bev = fd_bev(base, p[0], BEV_OPT_CLOSE_ON_FREE);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    turn(base);
    CHECK_EQ(events, 0); /* no timeout: it waits */
    struct timeval tv = {0, 30000};
    CHECK_EQ(bufferevent_set_timeouts(bev, &tv, NULL), 0); /* the wait gets it */
    evt_turn_until(base, &events, 1);
    CHECK_EQ(last_what, BEV_EVENT_READING | BEV_EVENT_TIMEOUT);
    CHECK_EQ(bufferevent_get_enabled(bev) & EV_READ, 0);
    CHECK_EQ(reads, 0);
    /* Reading on again: the bytes come, and the timeout is armed again with them. */
    CHECK_EQ(write(p[1], "late", 4), 4);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    evt_turn_until(base, &reads, 1);
    CHECK_EQ(strcmp(evt_buffer_text(bufferevent_get_input(bev)), "late"), 0);
    evt_turn_until(base, &events, 2);
    CHECK_EQ(last_what, BEV_EVENT_READING | BEV_EVENT_TIMEOUT);
    bufferevent_free(bev);
    close(p[1]);
    evt_base_close(base);
}

TEST(fd_bufferevent_timeouts_set_while_waiting_apply_to_the_wait) {
    struct event_base *base = evt_base_open();
    int p[2];
    make_pipe(p);
    size_t full = fill(p[1]);
    CHECK_GT(full, 0);
    struct bufferevent *rd = fd_bev(base, p[0], 0);
    struct bufferevent *wr = bufferevent_socket_new(base, p[1], 0);
    CHECK(wr != NULL);
    bufferevent_setcb(wr, NULL, NULL, on_event, NULL);
    CHECK_EQ(bufferevent_write(wr, "stuck", 5), 0); /* the pipe is full: it waits */
    CHECK_EQ(bufferevent_enable(rd, EV_READ), 0);
    CHECK_EQ(bufferevent_disable(rd, EV_READ), 0); /* nothing to wait for */
    turn(base);
    CHECK_EQ(out_len(wr), 5);
    CHECK_EQ(events, 0);
    /* A write timeout given while the write waits ends the write. */
    struct timeval tv = {0, 30000};
    CHECK_EQ(bufferevent_set_timeouts(wr, NULL, &tv), 0);
    evt_turn_until(base, &events, 1);
    CHECK_EQ(last_what, BEV_EVENT_WRITING | BEV_EVENT_TIMEOUT);
    CHECK_EQ(bufferevent_get_enabled(wr) & EV_WRITE, 0);
    CHECK_EQ(out_len(wr), 5);
    /* No timeout any more: writing waits as long as it must, and ends when room comes. */
    CHECK_EQ(bufferevent_set_timeouts(wr, NULL, NULL), 0);
    CHECK_EQ(bufferevent_enable(wr, EV_WRITE), 0);
    bufferevent_setcb(wr, NULL, on_write, on_event, NULL);
    CHECK_EQ(bufferevent_set_timeouts(wr, NULL, NULL), 0); /* pending: added again */
    CHECK_EQ(bufferevent_set_max_single_read(rd, 65536), 0);
    CHECK_EQ(bufferevent_enable(rd, EV_READ), 0);
    while (in_len(rd) < full + 5)
        evt_turn_until(base, &reads, reads + 1);
    CHECK_EQ(in_len(rd), full + 5);
    CHECK_EQ(writes, 1);
    CHECK_EQ(events, 1);
    bufferevent_free(rd);
    bufferevent_free(wr);
    close(p[0]);
    close(p[1]);
    evt_base_close(base);
}

TEST(fd_bufferevent_writing_to_a_pipe_nobody_reads_is_a_writing_error_epipe) {
    CHECK(signal(SIGPIPE, SIG_IGN) != SIG_ERR); /* as a program writing to pipes does */
    struct event_base *base = evt_base_open();
    int p[2];
    make_pipe(p);
    close(p[0]);
    struct bufferevent *bev = fd_bev(base, p[1], BEV_OPT_CLOSE_ON_FREE);
    CHECK_EQ(bufferevent_write(bev, "to nobody", 9), 0);
    evt_turn_until(base, &events, 1);
    CHECK_EQ(last_what, BEV_EVENT_WRITING | BEV_EVENT_ERROR);
    CHECK_EQ(last_errno, EPIPE);
    CHECK_EQ(bufferevent_get_enabled(bev) & EV_WRITE, 0);
    CHECK_EQ(writes, 0);
    bufferevent_free(bev);
    CHECK_EQ(fcntl(p[1], F_GETFD), -1);
    evt_base_close(base);
}

TEST(fd_bufferevent_high_watermark_stops_reading_until_the_input_is_drained) {
    struct event_base *base = evt_base_open();
    int p[2];
    make_pipe(p);
    struct bufferevent *bev = fd_bev(base, p[0], BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setwatermark(bev, EV_READ, 0, 8);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    CHECK_EQ(write(p[1], "0123456789abcdef", 16), 16);
    evt_turn_until(base, &reads, 1);
    CHECK_EQ(in_len(bev), 8);
    /* Full: the descriptor is watched no more, though 8 bytes wait in the pipe. */
    turn(base);
    turn(base);
    CHECK_EQ(reads, 1);
    CHECK_EQ(in_len(bev), 8);
    char buf[16];
    CHECK_EQ(bufferevent_read(bev, buf, 5), 5);
    CHECK_EQ(memcmp(buf, "01234", 5), 0);
    evt_turn_until(base, &reads, 2);
    CHECK_EQ(in_len(bev), 8);
    CHECK_EQ(bufferevent_read(bev, buf, sizeof buf), 8);
    CHECK_EQ(memcmp(buf, "56789abc", 8), 0);
    evt_turn_until(base, &reads, 3);
    CHECK_EQ(bufferevent_read(bev, buf, sizeof buf), 3);
    CHECK_EQ(memcmp(buf, "def", 3), 0);
    bufferevent_free(bev);
    close(p[1]);
    evt_base_close(base);
}

TEST(fd_bufferevent_rate_limit_holds_reading_and_writing_until_tokens_are_given) {
    struct event_base *base = evt_base_open();
    struct timeval hour = {3600, 0};
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(4, 4, 3, 3, &hour);
    CHECK(cfg != NULL);
    int in[2], out[2];
    make_pipe(in);
    make_pipe(out);
    struct bufferevent *rd = fd_bev(base, in[0], BEV_OPT_CLOSE_ON_FREE);
    struct bufferevent *wr = bufferevent_socket_new(base, out[1], BEV_OPT_CLOSE_ON_FREE);
    CHECK(wr != NULL);
    bufferevent_setcb(wr, NULL, on_write, NULL, NULL);
    CHECK_EQ(bufferevent_set_rate_limit(rd, cfg), 0);
    CHECK_EQ(bufferevent_set_rate_limit(wr, cfg), 0);
    CHECK_EQ(bufferevent_enable(rd, EV_READ), 0);
    CHECK_EQ(write(in[1], "abcdefgh", 8), 8);
    evt_turn_until(base, &reads, 1);
    CHECK_EQ(in_len(rd), 4); /* the bucket's 4 */
    turn(base);
    CHECK_EQ(in_len(rd), 4);
    CHECK_EQ(bufferevent_decrement_read_limit(rd, -2), 0);
    evt_turn_until(base, &reads, 2);
    CHECK_EQ(strcmp(evt_buffer_text(bufferevent_get_input(rd)), "abcdef"), 0);
    CHECK_EQ(bufferevent_write(wr, "uvwxyz", 6), 0);
    char buf[8];
    for (int i = 0; i < 100 && out_len(wr) > 3; i++)
        turn(base);
    CHECK_EQ(out_len(wr), 3);
    CHECK_EQ(read(out[0], buf, sizeof buf), 3);
    CHECK_EQ(memcmp(buf, "uvw", 3), 0);
    turn(base);
    CHECK_EQ(out_len(wr), 3); /* the bucket is empty */
    CHECK_EQ(writes, 0);
    CHECK_EQ(bufferevent_set_rate_limit(wr, NULL), 0);
    evt_turn_until(base, &writes, 1);
    CHECK_EQ(out_len(wr), 0);
    CHECK_EQ(read(out[0], buf, sizeof buf), 3);
    CHECK_EQ(memcmp(buf, "xyz", 3), 0);
    bufferevent_free(rd);
    bufferevent_free(wr);
    ev_token_bucket_cfg_free(cfg);
    close(in[1]);
    close(out[0]);
    evt_base_close(base);
}

TEST(fd_bufferevent_output_taken_back_or_writing_disabled_writes_nothing) {
    struct event_base *base = evt_base_open();
    int p[2];
    make_pipe(p);
    struct bufferevent *bev = fd_bev(base, p[1], BEV_OPT_CLOSE_ON_FREE);
    CHECK_EQ(bufferevent_write(bev, "never", 5), 0);
    CHECK_EQ(evbuffer_drain(bufferevent_get_output(bev), 5), 0); /* before the loop wrote it */
    turn(base);
    turn(base);
    CHECK_EQ(writes, 0);
    CHECK_EQ(bufferevent_write(bev, "held", 4), 0);
    CHECK_EQ(bufferevent_disable(bev, EV_WRITE), 0);
    turn(base);
    CHECK_EQ(out_len(bev), 4);
    CHECK_EQ(bufferevent_flush(bev, EV_WRITE, BEV_FLUSH), 0); /* the events write, not flush */
    CHECK_EQ(out_len(bev), 4);
    CHECK_EQ(bufferevent_enable(bev, EV_WRITE), 0);
    evt_turn_until(base, &writes, 1);
    char buf[8];
    CHECK_EQ(read(p[0], buf, sizeof buf), 4);
    CHECK_EQ(memcmp(buf, "held", 4), 0);
    bufferevent_free(bev);
    close(p[0]);
    evt_base_close(base);
}

static void free_on_read(struct bufferevent *bev, void *arg)
{
    (void)arg;
    reads++;
    bufferevent_free(bev);
}

TEST(fd_bufferevent_freed_from_its_read_callback_goes_at_once) {
    CHECK(signal(SIGPIPE, SIG_IGN) != SIG_ERR);
    struct event_base *base = evt_base_open();
    int p[2];
    make_pipe(p);
    struct bufferevent *bev = fd_bev(base, p[0], BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(bev, free_on_read, NULL, on_event, NULL);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), 0);
    CHECK_EQ(write(p[1], "last words", 10), 10);
    evt_turn_until(base, &reads, 1);
    CHECK_EQ(fcntl(p[0], F_GETFD), -1); /* closed with it */
    CHECK_EQ(write(p[1], "more", 4), -1); /* nobody reads the pipe now */
    CHECK_EQ(errno, EPIPE);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1); /* nothing left to wait for */
    CHECK_EQ(reads, 1);
    CHECK_EQ(events, 0);
    close(p[1]);
    evt_base_close(base);
}

TEST(fd_bufferevent_made_without_a_descriptor_takes_a_pipe_later_with_its_priority) {
    struct event_base *base = evt_base_open();
    CHECK_EQ(event_base_priority_init(base, 4), 0);
    struct bufferevent *bev = fd_bev(base, -1, BEV_OPT_CLOSE_ON_FREE);
    CHECK_EQ(bufferevent_priority_set(bev, 3), 0);
    CHECK_EQ(bufferevent_write(bev, "queued", 6), 0);
    int p[2];
    make_pipe(p);
    CHECK_EQ(bufferevent_setfd(bev, p[1]), 0); /* a pipe: the descriptor kind now */
    CHECK_EQ(bufferevent_getfd(bev), p[1]);
    CHECK_EQ(bufferevent_get_priority(bev), 3);
    evt_turn_until(base, &writes, 1);
    char buf[8];
    CHECK_EQ(read(p[0], buf, sizeof buf), 6);
    CHECK_EQ(memcmp(buf, "queued", 6), 0);
    /* Another descriptor in place of the first; a socket it cannot take. */
    int q[2];
    make_pipe(q);
    CHECK_EQ(bufferevent_setfd(bev, q[1]), 0);
    CHECK_EQ(bufferevent_getfd(bev), q[1]);
    int sv[2];
    make_socketpair(sv);
    CHECK_EQ(bufferevent_setfd(bev, sv[0]), -1);
    CHECK(strstr(evt_last_warning, "cannot take a socket") != NULL);
    CHECK_EQ(bufferevent_write(bev, "second", 6), 0);
    evt_turn_until(base, &writes, 2);
    CHECK_EQ(read(q[0], buf, sizeof buf), 6);
    CHECK_EQ(memcmp(buf, "second", 6), 0);
    bufferevent_free(bev);
    CHECK_EQ(fcntl(q[1], F_GETFD), -1);
    CHECK_GE(fcntl(p[1], F_GETFD), 0); /* given up for q[1]: the program's again */
    close(p[0]);
    close(p[1]);
    close(q[0]);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

/* Two bufferevents on one pipe (two descriptors of it): both are told of the same byte, one
 * reads it and the other finds nothing, which is no error. */
TEST(fd_bufferevents_racing_for_one_byte_take_it_once_without_an_error) {
    struct event_base *base = evt_base_open();
    int p[2];
    make_pipe(p);
    int d = dup(p[0]);
    CHECK_GE(d, 0);
    struct bufferevent *a = fd_bev(base, p[0], BEV_OPT_CLOSE_ON_FREE);
    struct bufferevent *b = bufferevent_socket_new(base, d, BEV_OPT_CLOSE_ON_FREE);
    CHECK(b != NULL);
    bufferevent_setcb(b, on_read, NULL, on_event, NULL);
    CHECK_EQ(bufferevent_enable(a, EV_READ), 0);
    CHECK_EQ(bufferevent_enable(b, EV_READ), 0);
    for (int i = 0; i < 20; i++) {
        CHECK_EQ(write(p[1], "x", 1), 1);
        evt_turn_until(base, &reads, i + 1);
        CHECK_EQ(in_len(a) + in_len(b), (size_t)i + 1);
    }
    turn(base);
    CHECK_EQ(reads, 20);
    CHECK_EQ(events, 0);
    bufferevent_free(a);
    bufferevent_free(b);
    close(p[1]);
    evt_base_close(base);
}
