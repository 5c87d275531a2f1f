/* SPDX-License-Identifier: MIT */
/* Stream timeouts: idle, read and write timeouts that fail the read and the queued writes
 * with -ETIMEDOUT, on time and also when nobody closes the stream; a write timeout with a
 * send in flight (on io_uring, in the kernel); and a shutdown queued behind writes that
 * time out. */
#include "stream_util.h"

/* ---- timeouts ---- */

struct tmo {
    mux_stream_t s;
    mux_write_t w;
    mux_buf_t iov;
    mux_timer_t feeder;
    int peer, feeds;
    char *big;
    char rbuf[64];
    int reads, read_err_calls, read_err, write_calls, write_status, close_on_read_error;
    int shutdown_calls, shutdown_status, tried, tried_sent, tried_eagain;
    uint64_t t0, t_read_err, t_write, last_read_now, last_try_now;
    volatile int read_failed, write_done, shut, closed;
};

static void tmo_closed_cb(mux_stream_t *s)
{
    ((struct tmo *)s->data)->closed = 1;
}

static void tmo_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct tmo *t = s->data;
    (void)buf;
    if (nread > 0) {
        t->reads++;
        t->last_read_now = mux_now(mux_stream_loop(s));
        return;
    }
    t->read_err_calls++;
    t->read_err = (int)nread;
    t->t_read_err = mono_ns();
    t->read_failed = 1;
    if (t->close_on_read_error)
        CHECK_EQ(mux_stream_close(s, tmo_closed_cb), 0);
}

static void tmo_write_cb(mux_write_t *req, int status)
{
    struct tmo *t = req->data;
    t->write_calls++;
    t->write_status = status;
    t->t_write = mono_ns();
    t->write_done = 1;
}

static void tmo_open(mux_loop_t *loop, struct tmo *t, const mux_stream_timeouts_t *to)
{
    memset(t, 0, sizeof *t);
    int sv[2];
    make_socketpair(sv);
    t->peer = sv[1];
    t->s.data = t;
    CHECK_EQ(mux_stream_open(loop, &t->s, sv[0]), 0);
    CHECK_EQ(mux_now_update(loop), 0);
    CHECK_EQ(mux_stream_set_timeouts(&t->s, to), 0);
    t->t0 = mux_now(loop);
}

/* Queues a write that cannot finish: 8 MB into a socket pair whose peer does not read. */
static void tmo_write_stuck(struct tmo *t)
{
    CHECK((t->big = malloc(8u << 20)) != NULL);
    memset(t->big, 't', 8u << 20);
    t->iov.base = t->big;
    t->iov.len = 8u << 20;
    t->w.data = t;
    CHECK_EQ(mux_write(&t->s, &t->w, &t->iov, 1, tmo_write_cb), 0);
}

static void tmo_done(mux_loop_t *loop, struct tmo *t)
{
    if (!t->closed) {
        CHECK_EQ(mux_stream_close(&t->s, tmo_closed_cb), 0);
        run_for(loop, &t->closed, 1000, "closed");
    }
    loop_finish(loop);
    close(t->peer);
    free(t->big);
}

/* Never early; late by at most `slack_ms`: a second, for a loaded machine and sanitizers
 * (a fresh clone's run at load 14 fired a 100 ms timeout at 518 ms); under Wine, whose every
 * wake-up goes through its server, three times that. */
static void check_on_time(uint64_t from, uint64_t at, uint64_t want_ms, uint64_t slack_ms)
{
#ifdef _WIN32
    slack_ms *= 3;
#endif
    CHECK_GE(at - from, want_ms * MS);
    CHECK_LE(at - from, (want_ms + slack_ms) * MS);
}

TEST(stream_idle_timeout_fails_the_read_with_etimedout_on_time) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.idle_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    t.close_on_read_error = 1;
    CHECK_EQ(mux_read_start(&t.s, t.rbuf, sizeof t.rbuf, tmo_read_cb), 0);
    run_for(&loop, &t.closed, 3000, "the idle timeout fired");
    CHECK_EQ(t.read_err_calls, 1);
    CHECK_EQ(t.read_err, -ETIMEDOUT);
    CHECK_EQ(t.reads, 0);
    check_on_time(t.t0, t.t_read_err, 100, 1000);
    tmo_done(&loop, &t);
}

static void tmo_feed_cb(mux_loop_t *loop, mux_timer_t *tm)
{
    struct tmo *t = tm->data;
    write_byte(t->peer);
    if (++t->feeds == 10)
        CHECK_EQ(mux_timer_stop(loop, tm), 0);
}

/* The stream's timer moved later (a longer idle timeout): the heap may still hold its
 * earlier place, and a read deadline that begins after that must be judged by the timer's
 * real deadline (5 s here), not by the earlier place (100 ms). Once this fired at 5 s. */
TEST(stream_read_timeout_after_a_longer_idle_timeout_fires_on_time) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.idle_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    mux_stream_timeouts_t longer = {.idle_ns = 5000 * MS, .read_ns = 300 * MS};
    CHECK_EQ(mux_stream_set_timeouts(&t.s, &longer), 0);
    t.close_on_read_error = 1;
    CHECK_EQ(mux_read_start(&t.s, t.rbuf, sizeof t.rbuf, tmo_read_cb), 0);
    run_for(&loop, &t.closed, 3000, "the read timeout fired");
    CHECK_EQ(t.read_err_calls, 1);
    CHECK_EQ(t.read_err, -ETIMEDOUT);
    check_on_time(t.t0, t.t_read_err, 300, 1000);
    tmo_done(&loop, &t);
}

TEST(stream_read_timeout_restarts_with_every_read) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
#ifdef _WIN32 /* Wine: a loaded machine stalls its server's wake-ups for longer */
    const uint64_t rt = 1000;
#else
    const uint64_t rt = 300;
#endif
    mux_stream_timeouts_t to = {.read_ns = rt * MS};
    tmo_open(&loop, &t, &to);
    t.close_on_read_error = 1;
    CHECK_EQ(mux_read_start(&t.s, t.rbuf, sizeof t.rbuf, tmo_read_cb), 0);
    /* A byte every 40 ms for 400 ms: longer than the timeout in total, never `rt` ms of
     * silence (a stall of the machine has rt - 40 ms of margin). */
    CHECK_EQ(mux_timer_init(&t.feeder, tmo_feed_cb), 0);
    t.feeder.data = &t;
    CHECK_EQ(mux_timer_start(&loop, &t.feeder, 40 * MS, 40 * MS), 0);
    run_for(&loop, &t.closed, 3000, "the read timeout fired after the last byte");
    CHECK_EQ(t.reads, 10);
    CHECK_EQ(t.read_err_calls, 1);
    CHECK_EQ(t.read_err, -ETIMEDOUT);
    check_on_time(t.last_read_now, t.t_read_err, rt, 1000);
    tmo_done(&loop, &t);
}

/* A byte sent with mux_try_write every 40 ms, 10 times, while nothing arrives. */
static void tmo_try_cb(mux_loop_t *loop, mux_timer_t *tm)
{
    struct tmo *t = tm->data;
    if (t->read_failed || ++t->tried == 10)
        CHECK_EQ(mux_timer_stop(loop, tm), 0);
    if (t->read_failed)
        return;
    ssize_t w = mux_try_write(&t->s, &t->iov, 1);
    if (w == 1) {
        t->tried_sent++;
        t->last_try_now = mux_now(loop);
    } else {
        CHECK_EQ(w, -EAGAIN);
        t->tried_eagain++;
    }
}

/* Bytes that mux_try_write sent are traffic: the idle timeout starts again from the last
 * one. Where the kernel makes the sends (io_uring, IOCP), it sends nothing, so the timeout
 * fires 300 ms after the start. */
TEST(stream_idle_timeout_restarts_with_every_try_write_that_sent) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.idle_ns = 300 * MS};
    tmo_open(&loop, &t, &to);
    t.close_on_read_error = 1;
    t.iov = mux_buf_init((char *)"x", 1);
    CHECK_EQ(mux_read_start(&t.s, t.rbuf, sizeof t.rbuf, tmo_read_cb), 0);
    CHECK_EQ(mux_timer_init(&t.feeder, tmo_try_cb), 0);
    t.feeder.data = &t;
    CHECK_EQ(mux_timer_start(&loop, &t.feeder, 40 * MS, 40 * MS), 0);
    run_for(&loop, &t.closed, 3000, "the idle timeout fired");
    CHECK_EQ(mux_timer_stop(&loop, &t.feeder), 0); /* if the timeout came first */
    CHECK_EQ(t.read_err_calls, 1);
    CHECK_EQ(t.read_err, -ETIMEDOUT);
    CHECK_EQ(t.reads, 0);
    if (native_streams(&loop)) {
        CHECK_EQ(t.tried_sent, 0);
        CHECK_GT(t.tried_eagain, 0);
        check_on_time(t.t0, t.t_read_err, 300, 1000);
    } else {
        char got[64];
        CHECK_EQ(t.tried_sent, 10);
        CHECK_EQ(read(t.peer, got, sizeof got), 10); /* then the end: the stream closed */
        check_on_time(t.last_try_now, t.t_read_err, 300, 1000);
    }
    tmo_done(&loop, &t);
}

TEST(stream_write_timeout_fails_a_stuck_write_with_etimedout) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.write_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    tmo_write_stuck(&t);
    run_for(&loop, &t.write_done, 3000, "the write timeout fired");
    CHECK_EQ(t.write_calls, 1);
    CHECK_EQ(t.write_status, -ETIMEDOUT);
    check_on_time(t.t0, t.t_write, 100, 1000);
    CHECK_EQ(mux_stream_write_queue_size(&t.s), 0);
    tmo_done(&loop, &t);
}

/* The contract: when a timeout expires, the read callback gets -ETIMEDOUT and queued
 * writes fail with -ETIMEDOUT. Both must be delivered, also when nobody closes the stream. */
TEST(stream_write_timeout_while_reading_calls_back_both_read_and_write) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.write_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    CHECK_EQ(mux_read_start(&t.s, t.rbuf, sizeof t.rbuf, tmo_read_cb), 0);
    tmo_write_stuck(&t);
    run_for(&loop, &t.read_failed, 3000, "the read callback got the timeout");
    CHECK_EQ(t.read_err, -ETIMEDOUT);
    run_for(&loop, &t.write_done, 1000, "the write callback got the timeout");
    CHECK_EQ(t.write_calls, 1);
    CHECK_EQ(t.write_status, -ETIMEDOUT);
    check_on_time(t.t0, t.t_write, 100, 1000);
    tmo_done(&loop, &t);
}

TEST(stream_write_timeout_is_not_delayed_by_a_longer_idle_timeout) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.idle_ns = 3000 * MS, .write_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    tmo_write_stuck(&t);
    run_for(&loop, &t.write_done, 2000, "the 100 ms write timeout fired (idle is 3 s)");
    CHECK_EQ(t.write_status, -ETIMEDOUT);
    check_on_time(t.t0, t.t_write, 100, 1000);
    tmo_done(&loop, &t);
}

/* ---- shutdown behind writes that fail ---- */

static void tmo_shutdown_cb(mux_stream_t *s, int status)
{
    struct tmo *t = s->data;
    t->shutdown_calls++;
    t->shutdown_status = status;
    t->shut = 1;
}

/* A shutdown waits for the queued writes; when they fail (here by the write timeout) the
 * shutdown callback must still run, once, without the stream being closed first. */
TEST(stream_shutdown_callback_runs_when_the_writes_before_it_time_out) {
    mux_loop_t loop;
    loop_open(&loop);
    struct tmo t;
    mux_stream_timeouts_t to = {.write_ns = 100 * MS};
    tmo_open(&loop, &t, &to);
    tmo_write_stuck(&t);
    CHECK_EQ(mux_stream_shutdown(&t.s, tmo_shutdown_cb), 0);
    run_for(&loop, &t.write_done, 3000, "the write timeout fired");
    CHECK_EQ(t.write_status, -ETIMEDOUT);
    run_for(&loop, &t.shut, 1000, "the shutdown callback ran after the failed write");
    CHECK_EQ(t.shutdown_calls, 1);
    tmo_done(&loop, &t);
}

/* ---- a write timeout while a send waits on a peer that never reads ---- */

#define WTO_BIG (8u << 20)

struct wto {
    mux_stream_t s;
    mux_write_t w[2];
    mux_buf_t iov[2];
    char *big;
    char small[10];
    int calls[2], status[2], order[2], ncalls, close_calls;
    uint64_t at[2];
    volatile int both, closed;
};

static void wto_write_cb(mux_write_t *req, int status)
{
    struct wto *t = req->data;
    int i = (int)(req - t->w);
    t->calls[i]++;
    t->status[i] = status;
    t->at[i] = mono_ns();
    t->order[t->ncalls < 2 ? t->ncalls : 1] = i;
    if (++t->ncalls == 2)
        t->both = 1;
}

static void wto_closed_cb(mux_stream_t *s)
{
    struct wto *t = s->data;
    t->close_calls++;
    t->closed = 1;
}

TEST(stream_native_write_timeout_with_send_in_flight_then_close) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct wto *t = calloc(1, sizeof *t);
    CHECK(t != NULL);
    CHECK((t->big = malloc(WTO_BIG)) != NULL);
    memset(t->big, 'x', WTO_BIG);
    memset(t->small, 'y', sizeof t->small);
    t->s.data = t;
    CHECK_EQ(mux_stream_open(&loop, &t->s, sv[0]), 0);
    /* Deadlines count from the loop's clock: read it now, not when the loop was made. */
    CHECK_EQ(mux_now_update(&loop), 0);
    uint64_t t0 = mux_now(&loop);
    mux_stream_timeouts_t to = {.write_ns = 100 * MS};
    CHECK_EQ(mux_stream_set_timeouts(&t->s, &to), 0);
    t->iov[0].base = t->big;
    t->iov[0].len = WTO_BIG;
    t->iov[1].base = t->small;
    t->iov[1].len = sizeof t->small;
    t->w[0].data = t->w[1].data = t;
    CHECK_EQ(mux_write(&t->s, &t->w[0], &t->iov[0], 1, wto_write_cb), 0);
    CHECK_EQ(mux_write(&t->s, &t->w[1], &t->iov[1], 1, wto_write_cb), 0);
    run_for(&loop, &t->both, 3000, "both writes called back");
    CHECK_EQ(t->calls[0], 1);
    CHECK_EQ(t->calls[1], 1);
    CHECK_EQ(t->status[0], -ETIMEDOUT);
    CHECK_EQ(t->status[1], -ETIMEDOUT);
    CHECK_EQ(t->order[0], 0);
    CHECK_EQ(t->order[1], 1);
    /* Never early (bytes moved only at the start), and not much late. */
    CHECK_GE(t->at[0] - t0, 100 * MS);
    CHECK_LE(t->at[0] - t0, 1000 * MS);
    CHECK_EQ(mux_stream_write_queue_size(&t->s), 0);
    run_ms(&loop, 50);
    CHECK_EQ(t->ncalls, 2); /* exactly once each */
    CHECK_EQ(mux_stream_close(&t->s, wto_closed_cb), 0);
    run_for(&loop, &t->closed, 2000, "the stream closed");
    CHECK_EQ(t->close_calls, 1);
    CHECK_EQ(t->ncalls, 2);
    loop_finish(&loop);
    close(sv[1]);
    free(t->big);
    free(t);
}

/* ---- a connect that never completes ---- */

/* Fills the accept queue of a listening socket that never accepts, until a connect to it
 * hangs (the kernel drops the SYN of a full queue and retries it only after a second).
 * Returns the listening socket; its address is in *a; the hanging sockets are in held[]. */
static int full_backlog_listener(struct sockaddr_storage *a, socklen_t *alen, int *held,
                                 int *nheld, int max)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_GE(l, 0);
    *alen = addr_v4(a, 0);
    CHECK_EQ(bind(l, (struct sockaddr *)a, *alen), 0);
    CHECK_EQ(listen(l, 0), 0);
    socklen_t len = sizeof *a;
    CHECK_EQ(getsockname(l, (struct sockaddr *)a, &len), 0);
    for (*nheld = 0; *nheld < max;) {
        int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        CHECK_GE(c, 0);
        int r = connect(c, (struct sockaddr *)a, *alen);
        CHECK(r == 0 || errno == EINPROGRESS);
        held[(*nheld)++] = c;
        struct pollfd p = {.fd = c, .events = POLLOUT};
        if (r != 0 && poll(&p, 1, 200) == 0)
            return l; /* still connecting after 200 ms: the queue is full */
    }
    SKIP("the listener's accept queue never filled (SYNs were not dropped)");
}

struct ctmo {
    mux_stream_t s;
    int calls, status;
    uint64_t t0, t;
    volatile int done, closed;
};

static void ctmo_connect_cb(mux_stream_t *s, int status)
{
    struct ctmo *c = s->data;
    c->calls++;
    c->status = status;
    c->t = mono_ns();
    c->done = 1;
}

static void ctmo_closed_cb(mux_stream_t *s)
{
    ((struct ctmo *)s->data)->closed = 1;
}

/* A connect to a peer whose accept queue is full never completes by itself: with a write
 * timeout, or an idle timeout, it ends with -ETIMEDOUT on time (a connect counts as
 * writing). */
TEST(stream_connect_that_never_completes_ends_with_etimedout_by_write_or_idle_timeout) {
    mux_loop_t loop;
    loop_open(&loop);
    struct sockaddr_storage a;
    socklen_t alen;
    int held[64], nheld;
    int l = full_backlog_listener(&a, &alen, held, &nheld, 64);
    static const mux_stream_timeouts_t by[2] = {{.write_ns = 150 * MS}, {.idle_ns = 150 * MS}};
    struct ctmo c[2];
    memset(c, 0, sizeof c);
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_now_update(&loop), 0); /* timeouts count from the loop's time: the fill took a while */
    for (int i = 0; i < 2; i++) {
        c[i].s.data = &c[i];
        c[i].t0 = t0;
        CHECK_EQ(mux_stream_connect(&loop, &c[i].s, (struct sockaddr *)&a, alen, ctmo_connect_cb),
                 0);
        CHECK_EQ(mux_stream_set_timeouts(&c[i].s, &by[i]), 0);
    }
    run_for(&loop, &c[0].done, 3000, "the first connect ended");
    run_for(&loop, &c[1].done, 3000, "the second connect ended");
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(c[i].calls, 1);
        CHECK_EQ(c[i].status, -ETIMEDOUT);
        CHECK_GE(c[i].t - c[i].t0, 150 * MS); /* never early */
        CHECK_LT(c[i].t - c[i].t0, 900 * MS); /* and long before the SYN's retry */
        CHECK_EQ(mux_stream_close(&c[i].s, ctmo_closed_cb), 0);
    }
    run_for(&loop, &c[0].closed, 2000, "the first stream closed");
    run_for(&loop, &c[1].closed, 2000, "the second stream closed");
    loop_finish(&loop);
    for (int i = 0; i < nheld; i++)
        close(held[i]);
    close(l);
}
