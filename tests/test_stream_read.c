/* SPDX-License-Identifier: MIT */
/* Reading from streams: the budget of reads per iteration, mux_read_stop and mux_read_start
 * inside the read callback and from another stream's callback, a receive that completed
 * before the stop (kept for the next start, given back when the stream closes), and
 * stop/start churn in both read modes, between the caller's buffer and a pool. Every case
 * runs on every backend and asserts the same outcome there; where io_uring's native path
 * (receives into a pool's provided-buffer ring) can be told apart through the public API (a
 * buffer kept after a stop), the case asserts what each path must do. */
#include "stream_util.h"

static void nop_timer_cb(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    (void)t;
}

static void nop_idle_cb(mux_loop_t *loop, mux_idle_t *w)
{
    (void)loop;
    (void)w;
}

/* ---- one fast sender does not starve the others ---- */

struct budget {
    mux_stream_t s[2];
    char buf[2][1024];
    int calls[2];
    size_t bytes[2];
};

static void budget_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct budget *b = s->data;
    int i = s == &b->s[0] ? 0 : 1;
    CHECK_GT(nread, 0);
    CHECK(buf == b->buf[i]);
    b->calls[i]++;
    b->bytes[i] += (size_t)nread;
}

/* 64 KB wait for stream 0 and one byte for stream 1 when the loop wakes up: in that
 * iteration stream 0 is read 16 times (a full 1 KB buffer each, then the budget is spent)
 * and stream 1 gets its byte; the rest of stream 0's bytes come in later iterations. Reads
 * into a caller buffer take the library's non-blocking path on every backend, io_uring's
 * included, so the count is exact everywhere. */
TEST(stream_reads_16_times_per_iteration_then_lets_other_streams_in) {
    mux_loop_t loop;
    loop_open(&loop);
    struct budget *b = calloc(1, sizeof *b);
    CHECK(b != NULL);
    int peer[2];
    for (int i = 0; i < 2; i++) {
        int sv[2];
        make_socketpair(sv);
        int big = 256 * 1024;
        CHECK_EQ(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big), 0);
        peer[i] = sv[1];
        b->s[i].data = b;
        CHECK_EQ(mux_stream_open(&loop, &b->s[i], sv[0]), 0);
        CHECK_EQ(mux_read_start(&b->s[i], b->buf[i], sizeof b->buf[i], budget_read_cb), 0);
    }
    CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0); /* the receives wait for readiness now */
    CHECK_EQ(b->calls[0] + b->calls[1], 0);
    static char data[64 * 1024];
    write_all(peer[0], data, sizeof data);
    write_all(peer[1], "x", 1);
    CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(b->calls[0], 16);
    CHECK_EQ(b->bytes[0], 16 * 1024);
    CHECK_EQ(b->calls[1], 1);
    for (int n = 0; n < 1000 && b->bytes[0] < sizeof data; n++)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(b->bytes[0], sizeof data);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(mux_stream_close(&b->s[i], NULL), 0);
        close(peer[i]);
    }
    loop_finish(&loop);
    free(b);
}

/* ---- one buffer shared by many readers ---- */

/* iomux.h promises that a caller's read buffer is written only by a receive whose callback
 * follows at once, so streams of one loop may share one buffer (libiomux-event's
 * bufferevents do). Eight streams read into the same 1,000 bytes while their peers all
 * send at once; each must see its own bytes, in order, and every callback its data at the
 * start of the shared buffer. */
struct shared_reader {
    mux_stream_t s;
    unsigned char tag;
    int restarts; /* stops and starts again at every read, as an echo server does */
    size_t got;
    int bad;
    int *done;
};

static char shared_buf[1000];

static void shared_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct shared_reader *r = s->data;
    CHECK_GT(nread, 0);
    CHECK(buf == shared_buf);
    for (ssize_t i = 0; i < nread; i++)
        if ((unsigned char)buf[i] != (unsigned char)(r->tag + (r->got + (size_t)i) % 253))
            r->bad++;
    r->got += (size_t)nread;
    if (r->restarts) {
        CHECK_EQ(mux_read_stop(s), 0);
        CHECK_EQ(mux_read_start(s, shared_buf, sizeof shared_buf, shared_read_cb), 0);
    }
    if (r->got == 50000)
        ++*r->done;
}

TEST(stream_readers_may_share_one_buffer) {
    enum { N = 8, LEN = 50000 };
    mux_loop_t loop;
    loop_open(&loop);
    struct shared_reader r[N];
    int peer[N], done = 0;
    static char data[LEN];
    for (int i = 0; i < N; i++) {
        int sv[2];
        make_socketpair(sv);
        int big = 256 * 1024;
        CHECK_EQ(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big), 0);
        peer[i] = sv[1];
        r[i] = (struct shared_reader){.tag = (unsigned char)(i * 29), .restarts = i & 1,
                                      .done = &done};
        r[i].s.data = &r[i];
        CHECK_EQ(mux_stream_open(&loop, &r[i].s, sv[0]), 0);
        CHECK_EQ(mux_read_start(&r[i].s, shared_buf, sizeof shared_buf, shared_read_cb), 0);
    }
    CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    for (int i = 0; i < N; i++) {
        for (size_t k = 0; k < LEN; k++)
            data[k] = (char)(r[i].tag + k % 253);
        write_all(peer[i], data, LEN);
    }
    run_until_count(&loop, &done, N, 10000, "every reader's 50,000 bytes");
    for (int i = 0; i < N; i++) {
        CHECK_EQ(r[i].got, (size_t)LEN);
        CHECK_EQ(r[i].bad, 0);
        CHECK_EQ(mux_stream_close(&r[i].s, NULL), 0);
        close(peer[i]);
    }
    loop_finish(&loop);
}

/* ---- read stop and start ---- */

struct rss {
    mux_stream_t s;
    char buf1[16], buf2[16];
    int calls;
    char seen[3][8];
    char *where[3];
    volatile int got;
};

static void rss_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct rss *r = s->data;
    CHECK_EQ(nread, 4);
    CHECK_LT(r->calls, 3);
    memcpy(r->seen[r->calls], buf, 4);
    r->where[r->calls] = buf;
    r->calls++;
    r->got = 1;
    if (r->calls == 1) {
        /* Restarting from inside the callback is allowed and switches buffers. */
        CHECK_EQ(mux_read_stop(s), 0);
        CHECK_EQ(mux_read_start(s, r->buf2, sizeof r->buf2, rss_read_cb), 0);
        CHECK_EQ(mux_read_start(s, r->buf2, sizeof r->buf2, rss_read_cb), -EBUSY);
    } else if (r->calls == 2) {
        CHECK_EQ(mux_read_stop(s), 0);
        CHECK_EQ(mux_read_stop(s), 0); /* stopping twice is fine */
    }
}

TEST(stream_read_stop_and_start_inside_the_read_callback) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct rss r;
    memset(&r, 0, sizeof r);
    r.s.data = &r;
    CHECK_EQ(mux_stream_open(&loop, &r.s, sv[0]), 0);
    CHECK_EQ(mux_read_start(&r.s, r.buf1, sizeof r.buf1, rss_read_cb), 0);
    CHECK_EQ(write(sv[1], "aaaa", 4), 4);
    run_for(&loop, &r.got, 2000, "first read");
    r.got = 0;
    CHECK_EQ(write(sv[1], "bbbb", 4), 4);
    run_for(&loop, &r.got, 2000, "second read, into the new buffer");
    r.got = 0;
    CHECK_EQ(write(sv[1], "cccc", 4), 4);
    run_ms(&loop, 50);
    CHECK_EQ(r.calls, 2); /* stopped: the pending bytes wait */
    CHECK_EQ(mux_read_start(&r.s, r.buf1, sizeof r.buf1, rss_read_cb), 0);
    run_for(&loop, &r.got, 2000, "third read after the restart");
    CHECK_EQ(r.calls, 3);
    CHECK(memcmp(r.seen[0], "aaaa", 4) == 0);
    CHECK(memcmp(r.seen[1], "bbbb", 4) == 0);
    CHECK(memcmp(r.seen[2], "cccc", 4) == 0);
    CHECK(r.where[0] == r.buf1);
    CHECK(r.where[1] == r.buf2);
    CHECK(r.where[2] == r.buf1);
    CHECK_EQ(mux_stream_close(&r.s, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&loop);
    close(sv[1]);
}

/* ---- two streams on one pool; the first delivered stops the other ---- */

#define PAIR_SIZE   1024
#define PAIR_COUNT  8
#define PAIR_ROUNDS 200

struct pair;

struct pside {
    mux_stream_t s;
    struct pair *p;
    int idx, peer;
    int reading;
    uint64_t base;      /* this stream's bytes are pattern bytes base, base + 1, ... */
    uint64_t sent, got; /* bytes written by the peer, bytes delivered */
    int stopped_iters;  /* loop iterations since it was stopped */
    int close_calls, avail_at_close;
};

struct pair {
    struct pside side[2];
    mux_bufpool_t pool;
    uint32_t slots[PAIR_COUNT];
    char mem[PAIR_SIZE * PAIR_COUNT];
    int round_first; /* the side delivered first in this round, or -1 */
    int stops;       /* stops of the other side from a read callback */
    int kept;        /* stopped with a buffer held by the library (a completed receive) */
    volatile int closed;
};

static void pair_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct pside *me = s->data;
    struct pair *p = me->p;
    CHECK_EQ(me->reading, 1); /* never after mux_read_stop returned */
    CHECK_GT(nread, 0);
    CHECK(in_pool(buf, p->mem, PAIR_SIZE, PAIR_COUNT));
    CHECK_LE(nread, PAIR_SIZE);
    CHECK_LE(me->got + (uint64_t)nread, me->sent); /* nothing twice */
    if (!pattern_ok(buf, me->base + me->got, (size_t)nread))
        harness_fail(__FILE__, __LINE__, "bytes arrive in order and intact", NULL);
    me->got += (uint64_t)nread;
    CHECK_EQ(mux_bufpool_put(&p->pool, buf), 0);
    if (p->round_first < 0) {
        p->round_first = me->idx;
        struct pside *other = &p->side[1 - me->idx];
        if (other->reading) { /* its bytes of this round are not delivered yet */
            CHECK_EQ(mux_read_stop(&other->s), 0);
            other->reading = 0;
            other->stopped_iters = 0;
            p->stops++;
        }
    }
}

static void pair_close_cb(mux_stream_t *s)
{
    struct pside *me = s->data;
    me->close_calls++;
    me->avail_at_close = mux_bufpool_available(&me->p->pool);
    if (me->p->side[0].close_calls + me->p->side[1].close_calls == 2)
        me->p->closed = 1;
}

static void pair_open(mux_loop_t *loop, struct pair *p, int side)
{
    int sv[2];
    make_socketpair(sv);
    struct pside *ps = &p->side[side];
    uint64_t sent = ps->sent, got = ps->got, base = ps->base;
    memset(ps, 0, sizeof *ps);
    ps->sent = sent;
    ps->got = got;
    ps->base = base;
    ps->p = p;
    ps->idx = side;
    ps->peer = sv[1];
    ps->s.data = ps;
    CHECK_EQ(mux_stream_open(loop, &ps->s, sv[0]), 0);
    CHECK_EQ(mux_read_start_pool(&ps->s, &p->pool, pair_read_cb), 0);
    ps->reading = 1;
}

static void pair_send(struct pside *ps, size_t len)
{
    char buf[3 * PAIR_SIZE];
    CHECK_LE(len, sizeof buf);
    pattern_fill(buf, ps->base + ps->sent, len);
    write_all(ps->peer, buf, len);
    ps->sent += len;
}

/* The pool's free count while `stopped` waits and the test holds no buffer: every buffer,
 * or on the native path one less when a receive completed before the stop (kept for the
 * next start). Returns 1 for a kept buffer. */
static int pair_check_kept(mux_loop_t *loop, struct pair *p)
{
    int avail = mux_bufpool_available(&p->pool);
    if (native_streams(loop)) {
        CHECK(avail == PAIR_COUNT || avail == PAIR_COUNT - 1);
        return avail == PAIR_COUNT - 1;
    }
    CHECK_EQ(avail, PAIR_COUNT); /* readiness: the bytes wait in the socket */
    return 0;
}

TEST(stream_native_read_stop_from_other_callback_keeps_received_bytes) {
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    struct pair *p = calloc(1, sizeof *p);
    CHECK(p != NULL);
    CHECK_EQ(mux_bufpool_init(&p->pool, p->mem, PAIR_SIZE, PAIR_COUNT, p->slots), 0);
    p->side[1].base = 12345; /* the two streams carry different bytes */
    pair_open(&loop, p, 0);
    pair_open(&loop, p, 1);
    mux_timer_t tick;
    CHECK_EQ(mux_timer_init(&tick, nop_timer_cb), 0);
    CHECK_EQ(mux_timer_start(&loop, &tick, 1 * MS, 1 * MS), 0);
    CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0); /* the receives are armed before the data */
    uint64_t st = 42;
    for (int r = 0; r < PAIR_ROUNDS; r++) {
        p->round_first = -1;
        /* Up to three pool buffers each: sometimes one receive, sometimes several, and
         * every fourth round whole buffers (the read after a full one finds nothing). */
        for (int i = 0; i < 2; i++) {
            size_t len = 1 + (size_t)(prng_next(&st) % (3 * PAIR_SIZE));
            if (r % 4 == i)
                len = PAIR_SIZE * (1 + (size_t)(r / 4 % 3));
            pair_send(&p->side[i], len);
        }
        uint64_t end = mono_ns() + 5000 * MS;
        while (p->side[0].got < p->side[0].sent || p->side[1].got < p->side[1].sent) {
            CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
            for (int i = 0; i < 2; i++) {
                struct pside *ps = &p->side[i];
                if (ps->reading)
                    continue;
                /* Stopped: one more iteration without a callback, then start it again. */
                if (ps->stopped_iters++ == 0) {
                    p->kept += pair_check_kept(&loop, p);
                    continue;
                }
                CHECK_EQ(mux_read_start_pool(&ps->s, &p->pool, pair_read_cb), 0);
                ps->reading = 1;
            }
            if (mono_ns() > end)
                harness_fail(__FILE__, __LINE__, "a round's bytes arrive", "not within 5 s");
        }
        CHECK_GE(p->round_first, 0);
    }
    fprintf(stderr, "rounds %d, stops %d, stopped with a completed receive kept: %d\n", PAIR_ROUNDS,
            p->stops, p->kept);
    /* Every round stopped exactly one stream before its bytes were delivered. */
    CHECK_EQ(p->stops, PAIR_ROUNDS);
    if (native_streams(&loop))
        CHECK_GT(p->kept, 0); /* the path this case is about was taken */
    else
        CHECK_EQ(p->kept, 0);
    CHECK_EQ(mux_bufpool_available(&p->pool), PAIR_COUNT);
    CHECK_EQ(mux_timer_stop(&loop, &tick), 0);
    CHECK_EQ(mux_stream_close(&p->side[0].s, pair_close_cb), 0);
    CHECK_EQ(mux_stream_close(&p->side[1].s, pair_close_cb), 0);
    run_for(&loop, &p->closed, 2000, "both streams closed");
    CHECK_EQ(p->side[0].close_calls, 1);
    CHECK_EQ(p->side[1].close_calls, 1);
    CHECK_EQ(mux_bufpool_available(&p->pool), PAIR_COUNT);
    loop_finish(&loop);
    close(p->side[0].peer);
    close(p->side[1].peer);
    free(p);
}

/* ---- closing a stream while the library keeps a pool buffer for it ---- */

#define KEEP_ROUNDS 30

TEST(stream_native_close_while_library_holds_pool_buffer_returns_it) {
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    struct pair *p = calloc(1, sizeof *p);
    CHECK(p != NULL);
    CHECK_EQ(mux_bufpool_init(&p->pool, p->mem, PAIR_SIZE, PAIR_COUNT, p->slots), 0);
    int kept = 0;
    uint64_t st = 7;
    for (int r = 0; r < KEEP_ROUNDS; r++) {
        p->side[0].sent = p->side[0].got = p->side[1].sent = p->side[1].got = 0;
        p->side[1].base = 777;
        pair_open(&loop, p, 0);
        pair_open(&loop, p, 1);
        p->closed = 0;
        p->round_first = -1;
        p->stops = 0;
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0); /* the receives are armed */
        for (int i = 0; i < 2; i++)                  /* every third round a whole buffer */
            pair_send(&p->side[i],
                      r % 3 == 0 ? PAIR_SIZE : 1 + (size_t)(prng_next(&st) % PAIR_SIZE));
        uint64_t end = mono_ns() + 3000 * MS;
        while (p->round_first < 0) {
            CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
            CHECK_LT(mono_ns(), end);
        }
        CHECK_EQ(p->stops, 1);
        struct pside *stopped = &p->side[1 - p->round_first];
        struct pside *first = &p->side[p->round_first];
        CHECK_EQ(stopped->reading, 0);
        CHECK_EQ(stopped->got, 0);
        kept += pair_check_kept(&loop, p);
        /* Closed from outside any callback while its bytes (on io_uring: the receive
         * that completed, in a pool buffer) were never delivered. */
        CHECK_EQ(mux_stream_close(&stopped->s, pair_close_cb), 0);
        /* The other stream gets the rest of its bytes (those beyond one receive). */
        while (first->got < first->sent || stopped->close_calls == 0) {
            CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
            CHECK_LT(mono_ns(), end);
        }
        CHECK_EQ(stopped->close_calls, 1);
        CHECK_EQ(stopped->avail_at_close, PAIR_COUNT); /* the kept buffer went back */
        CHECK_EQ(stopped->got, 0);
        CHECK_EQ(mux_bufpool_available(&p->pool), PAIR_COUNT);
        CHECK_EQ(mux_stream_close(&first->s, pair_close_cb), 0);
        run_for(&loop, &p->closed, 2000, "the other stream closed");
        CHECK_EQ(first->close_calls, 1);
        CHECK_EQ(first->avail_at_close, PAIR_COUNT);
        CHECK_EQ(mux_bufpool_available(&p->pool), PAIR_COUNT);
        close(p->side[0].peer);
        close(p->side[1].peer);
    }
    fprintf(stderr, "closed with a completed receive kept: %d of %d\n", kept, KEEP_ROUNDS);
    if (native_streams(&loop))
        CHECK_GT(kept, 0);
    else
        CHECK_EQ(kept, 0);
    loop_finish(&loop);
    free(p);
}

/* ---- stop/start churn while 4 MB stream in ---- */

#define CHURN_TOTAL (4u << 20)
#define CHURN_CHUNK (64u << 10)
#define CHURN_SIZE  4096
#define CHURN_COUNT 8
#define CHURN_CBUF  3001 /* not a multiple of anything: kept receives get copied in pieces */

enum { M_STOPPED, M_POOL, M_CALLER };

struct churn {
    mux_stream_t r, w; /* the reader, and the writer at the other end */
    mux_write_t wr[2];
    mux_buf_t iov[2];
    char *wbuf[2];
    uint64_t queued, written, got;
    int shut_calls, w_close_calls, r_close_calls;
    mux_bufpool_t pool;
    uint32_t slots[CHURN_COUNT];
    char *mem;
    char cbuf[CHURN_CBUF];
    int mixed; /* restart into the caller's buffer too */
    int mode;
    int eof;
    char *held[2];
    int nheld;
    uint64_t prng;
    int stops, starts_pool, starts_caller, pool_reads, caller_reads, checks;
    int avail_at_close;
    volatile int done, r_closed;
    mux_check_t check;
    mux_idle_t idle;
};

static void churn_w_closed_cb(mux_stream_t *s)
{
    struct churn *c = s->data;
    c->w_close_calls++;
    if (c->eof)
        c->done = 1;
}

static void churn_shut_cb(mux_stream_t *s, int status)
{
    struct churn *c = s->data;
    CHECK_EQ(status, 0);
    c->shut_calls++;
    CHECK_EQ(mux_stream_close(s, churn_w_closed_cb), 0);
}

static void churn_write_cb(mux_write_t *req, int status);

static void churn_queue(struct churn *c, int slot)
{
    size_t n =
        CHURN_TOTAL - c->queued < CHURN_CHUNK ? (size_t)(CHURN_TOTAL - c->queued) : CHURN_CHUNK;
    pattern_fill(c->wbuf[slot], c->queued, n);
    c->iov[slot].base = c->wbuf[slot];
    c->iov[slot].len = n;
    c->wr[slot].data = c;
    c->queued += n;
    CHECK_EQ(mux_write(&c->w, &c->wr[slot], &c->iov[slot], 1, churn_write_cb), 0);
}

static void churn_write_cb(mux_write_t *req, int status)
{
    struct churn *c = req->data;
    int slot = (int)(req - c->wr);
    CHECK_EQ(status, 0);
    c->written += c->iov[slot].len;
    if (c->queued < CHURN_TOTAL)
        churn_queue(c, slot);
    else if (c->written == CHURN_TOTAL)
        CHECK_EQ(mux_stream_shutdown(&c->w, churn_shut_cb), 0);
}

static void churn_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct churn *c = s->data;
    CHECK_NE(c->mode, M_STOPPED); /* never after mux_read_stop returned */
    if (nread == 0) {
        CHECK_EQ(c->got, CHURN_TOTAL);
        CHECK(buf == NULL);
        c->eof++;
        c->mode = M_STOPPED; /* reading has stopped */
        if (c->w_close_calls)
            c->done = 1;
        return;
    }
    CHECK_GT(nread, 0);
    if (c->mode == M_POOL) {
        CHECK(in_pool(buf, c->mem, CHURN_SIZE, CHURN_COUNT));
        CHECK_LE(nread, CHURN_SIZE);
        c->pool_reads++;
    } else {
        CHECK(buf == c->cbuf);
        CHECK_LE(nread, CHURN_CBUF);
        c->caller_reads++;
    }
    CHECK_LE(c->got + (uint64_t)nread, CHURN_TOTAL);
    if (!pattern_ok(buf, c->got, (size_t)nread))
        harness_fail(__FILE__, __LINE__, "bytes arrive in order and intact", NULL);
    c->got += (uint64_t)nread;
    if (c->mode == M_POOL) {
        /* Keep up to two buffers for a while: the check watcher gives them back. */
        if (c->nheld < 2 && (prng_next(&c->prng) & 1))
            c->held[c->nheld++] = buf;
        else
            CHECK_EQ(mux_bufpool_put(&c->pool, buf), 0);
    }
}

/* After each iteration's callbacks: give held buffers back, then maybe stop or restart. */
static void churn_check_cb(mux_loop_t *loop, mux_check_t *w)
{
    struct churn *c = w->data;
    (void)loop;
    c->checks++;
    while (c->nheld > 0)
        CHECK_EQ(mux_bufpool_put(&c->pool, c->held[--c->nheld]), 0);
    if (c->eof)
        return;
    uint64_t x = prng_next(&c->prng) >> 16;
    if (c->mode != M_STOPPED) {
        if (x % 2 != 0)
            return;
        if (x & 8) /* already reading */
            CHECK_EQ(mux_read_start_pool(&c->r, &c->pool, churn_read_cb), -EBUSY);
        if (x & 16)
            CHECK_EQ(mux_read_start(&c->r, c->cbuf, sizeof c->cbuf, churn_read_cb), -EBUSY);
        CHECK_EQ(mux_read_stop(&c->r), 0);
        if (x & 32)
            CHECK_EQ(mux_read_stop(&c->r), 0); /* stopping twice is fine */
        c->mode = M_STOPPED;
        c->stops++;
        return;
    }
    if (x % 4 == 0)
        return;
    if (c->mixed && (x & 4)) {
        CHECK_EQ(mux_read_start(&c->r, c->cbuf, sizeof c->cbuf, churn_read_cb), 0);
        c->mode = M_CALLER;
        c->starts_caller++;
    } else {
        CHECK_EQ(mux_read_start_pool(&c->r, &c->pool, churn_read_cb), 0);
        c->mode = M_POOL;
        c->starts_pool++;
    }
}

static void churn_r_closed_cb(mux_stream_t *s)
{
    struct churn *c = s->data;
    c->r_close_calls++;
    c->avail_at_close = mux_bufpool_available(&c->pool);
    c->r_closed = 1;
}

static void churn_run(int mixed)
{
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    /* A small send buffer: a few KB move per iteration, so the churn has many to act in. */
    int sndbuf = 8192;
    CHECK_EQ(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf), 0);
#ifdef _WIN32 /* the pair is TCP there: the receiving end buffers too (smaller windows stall
                * on delayed acknowledgements) */
    int rcvbuf = 32768;
    CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
#endif
    struct churn *c = calloc(1, sizeof *c);
    CHECK(c != NULL);
    c->mixed = mixed;
    c->prng = mixed ? 99 : 98;
    CHECK((c->mem = malloc((size_t)CHURN_SIZE * CHURN_COUNT)) != NULL);
    CHECK_EQ(mux_bufpool_init(&c->pool, c->mem, CHURN_SIZE, CHURN_COUNT, c->slots), 0);
    for (int i = 0; i < 2; i++)
        CHECK((c->wbuf[i] = malloc(CHURN_CHUNK)) != NULL);
    c->r.data = c->w.data = c;
    CHECK_EQ(mux_stream_open(&loop, &c->r, sv[0]), 0);
    CHECK_EQ(mux_stream_open(&loop, &c->w, sv[1]), 0);
    CHECK_EQ(mux_read_start_pool(&c->r, &c->pool, churn_read_cb), 0);
    c->mode = M_POOL;
    churn_queue(c, 0);
    churn_queue(c, 1);
    CHECK_EQ(mux_check_init(&c->check, churn_check_cb), 0);
    c->check.data = c;
    CHECK_EQ(mux_check_start(&loop, &c->check), 0);
    /* The idle watcher keeps every wait short: a stopped reader restarts promptly. */
    CHECK_EQ(mux_idle_init(&c->idle, nop_idle_cb), 0);
    CHECK_EQ(mux_idle_start(&loop, &c->idle), 0);
    run_for(&loop, &c->done, 15000, "4 MB read through the churn, end of stream seen");
    fprintf(stderr,
            "iterations %d, stops %d, starts: pool %d caller %d, reads: pool %d caller %d\n",
            c->checks, c->stops, c->starts_pool, c->starts_caller, c->pool_reads, c->caller_reads);
    CHECK_EQ(c->got, CHURN_TOTAL);
    CHECK_EQ(c->eof, 1);
    CHECK_EQ(c->shut_calls, 1);
    CHECK_EQ(c->w_close_calls, 1);
    CHECK_GE(c->stops, 50);
    CHECK_GT(c->pool_reads, 0);
    if (mixed) {
        CHECK_GE(c->starts_caller, 10);
        CHECK_GE(c->starts_pool, 10);
        CHECK_GT(c->caller_reads, 0);
    } else {
        CHECK_EQ(c->starts_caller, 0);
        CHECK_EQ(c->caller_reads, 0);
    }
    CHECK_EQ(mux_check_stop(&loop, &c->check), 0);
    CHECK_EQ(mux_idle_stop(&loop, &c->idle), 0);
    while (c->nheld > 0)
        CHECK_EQ(mux_bufpool_put(&c->pool, c->held[--c->nheld]), 0);
    /* Everything read and every buffer given back: the pool is whole. */
    CHECK_EQ(mux_bufpool_available(&c->pool), CHURN_COUNT);
    CHECK_EQ(mux_stream_close(&c->r, churn_r_closed_cb), 0);
    run_for(&loop, &c->r_closed, 2000, "the reader closed");
    CHECK_EQ(c->r_close_calls, 1);
    CHECK_EQ(c->avail_at_close, CHURN_COUNT);
    CHECK_EQ(mux_bufpool_available(&c->pool), CHURN_COUNT);
    loop_finish(&loop);
    for (int i = 0; i < 2; i++)
        free(c->wbuf[i]);
    free(c->mem);
    free(c);
}

TEST(stream_native_pool_stop_start_churn_bytes_and_pool_accounting_exact) {
    churn_run(0);
}

TEST(stream_native_churn_between_caller_buffer_and_pool_bytes_in_order) {
    churn_run(1);
}
