/* Streams on the paths that io_uring runs natively (sends handed to the kernel, receives
 * into a pool's provided-buffer ring) and the corners those paths add: a receive that the
 * kernel completed after mux_read_stop, stop/start churn in both read modes, a pool shared
 * by two loops, an empty pool, closing while the library keeps a pool buffer, a long queue
 * of writes, and a write timeout with a send in flight. Every case runs on every backend
 * and asserts the same outcome there; where the native path can be told apart through the
 * public API (a pool bound to one loop, a buffer kept after a stop), the case asserts what
 * each path must do. */
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

/* ---- two streams on one pool; the first delivered stops the other ----------------- */

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

/* ---- closing a stream while the library keeps a pool buffer for it ----------------- */

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

/* ---- stop/start churn while 4 MB stream in ----------------------------------------- */

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

/* ---- one pool, two loops ----------------------------------------------------------- */

#define TWO_SIZE  64
#define TWO_COUNT 4

struct two {
    mux_stream_t s;
    int peer;
    mux_bufpool_t *pool;
    char *pool_mem;
    char cbuf[TWO_SIZE];
    char got[256];
    size_t ngot;
    int reads, pool_reads, close_calls;
    volatile int read, closed;
};

static void two_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct two *t = s->data;
    CHECK_GT(nread, 0);
    CHECK_LE(t->ngot + (size_t)nread, sizeof t->got);
    memcpy(t->got + t->ngot, buf, (size_t)nread);
    t->ngot += (size_t)nread;
    t->reads++;
    if (buf != t->cbuf) {
        CHECK(in_pool(buf, t->pool_mem, TWO_SIZE, TWO_COUNT));
        t->pool_reads++;
        CHECK_EQ(mux_bufpool_put(t->pool, buf), 0);
    }
    t->read = 1;
}

static void two_closed_cb(mux_stream_t *s)
{
    struct two *t = s->data;
    t->close_calls++;
    t->closed = 1;
}

static void two_open(mux_loop_t *loop, struct two *t, mux_bufpool_t *pool, char *mem)
{
    int sv[2];
    make_socketpair(sv);
    memset(t, 0, sizeof *t);
    t->peer = sv[1];
    t->pool = pool;
    t->pool_mem = mem;
    t->s.data = t;
    CHECK_EQ(mux_stream_open(loop, &t->s, sv[0]), 0);
}

/* Writes `msg` to the peer and runs `loop` until exactly it arrived. */
static void two_expect(mux_loop_t *loop, struct two *t, const char *msg, int pool_read)
{
    size_t len = strlen(msg);
    int pool_reads = t->pool_reads;
    t->ngot = 0;
    t->read = 0;
    write_all(t->peer, msg, len);
    uint64_t end = mono_ns() + 2000 * MS;
    while (t->ngot < len) {
        run_for(loop, &t->read, 2000, "the message arrived");
        t->read = 0;
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(t->ngot, len);
    CHECK(memcmp(t->got, msg, len) == 0);
    if (pool_read)
        CHECK_GT(t->pool_reads, pool_reads);
    else
        CHECK_EQ(t->pool_reads, pool_reads);
}

TEST(stream_native_pool_bound_to_first_uring_loop_else_serves_both) {
    mux_loop_t l1, l2;
    loop_open(&l1);
    loop_open(&l2);
    CHECK_EQ(native_streams(&l1), native_streams(&l2));
    int native = native_streams(&l1);
    mux_bufpool_t pool;
    uint32_t slots[TWO_COUNT];
    char mem[TWO_SIZE * TWO_COUNT];
    memset(&pool, 0, sizeof pool);
    CHECK_EQ(mux_bufpool_init(&pool, mem, TWO_SIZE, TWO_COUNT, slots), 0);
    struct two a, b;
    two_open(&l1, &a, &pool, mem);
    two_open(&l2, &b, &pool, mem);
    CHECK_EQ(mux_read_start_pool(&a.s, &pool, two_read_cb), 0);
    two_expect(&l1, &a, "first, on loop 1", 1);
    CHECK_EQ(mux_bufpool_available(&pool), TWO_COUNT);
    int r = mux_read_start_pool(&b.s, &pool, two_read_cb);
    if (native) {
        /* The pool's buffers are in loop 1's kernel ring: loop 2 cannot take from it. */
        CHECK_EQ(r, -EINVAL);
        CHECK_EQ(mux_bufpool_available(&pool), TWO_COUNT);
        /* The refusal changed nothing: the stream is not reading, and reads otherwise. */
        CHECK_EQ(mux_read_start(&b.s, b.cbuf, sizeof b.cbuf, two_read_cb), 0);
        two_expect(&l2, &b, "second, loop 2, own buffer", 0);
        two_expect(&l1, &a, "loop 1 still reads from the pool", 1);
    } else {
        /* Readiness: the pool is only memory; both loops take from it. */
        CHECK_EQ(r, 0);
        two_expect(&l2, &b, "second, on loop 2, from the pool", 1);
        two_expect(&l1, &a, "loop 1 still reads from the pool", 1);
        two_expect(&l2, &b, "loop 2 again", 1);
    }
    CHECK_EQ(mux_read_stop(&b.s), 0);
    CHECK_EQ(mux_bufpool_available(&pool), TWO_COUNT);
    /* Once loop 1 is closed, the pool is free for loop 2 on every backend. */
    CHECK_EQ(mux_stream_close(&a.s, two_closed_cb), 0);
    run_for(&l1, &a.closed, 2000, "the stream of loop 1 closed");
    CHECK_EQ(a.close_calls, 1);
    CHECK_EQ(mux_bufpool_available(&pool), TWO_COUNT);
    loop_finish(&l1);
    CHECK_EQ(mux_bufpool_available(&pool), TWO_COUNT);
    CHECK_EQ(mux_read_start_pool(&b.s, &pool, two_read_cb), 0);
    two_expect(&l2, &b, "third, loop 2 from the pool after loop 1 closed", 1);
    CHECK_EQ(mux_bufpool_available(&pool), TWO_COUNT);
    CHECK_EQ(mux_stream_close(&b.s, two_closed_cb), 0);
    run_for(&l2, &b.closed, 2000, "the stream of loop 2 closed");
    CHECK_EQ(b.close_calls, 1);
    CHECK_EQ(mux_bufpool_available(&pool), TWO_COUNT);
    loop_finish(&l2);
    CHECK_EQ(mux_bufpool_available(&pool), TWO_COUNT);
    close(a.peer);
    close(b.peer);
}

/* ---- a pool of two buffers, three streams ------------------------------------------ */

#define EX_SIZE 64
#define EX_MSG  40 /* below EX_SIZE: one short read takes each message */

struct ex;

struct exs {
    mux_stream_t s;
    struct ex *e;
    int peer;
    int reading;
    int calls, enobufs, close_calls;
    char got[EX_MSG];
    size_t ngot;
    char *held;
};

struct ex {
    struct exs st[3];
    mux_bufpool_t pool;
    uint32_t slots[2];
    char mem[2 * EX_SIZE];
    int calls;
    volatile int called, closed;
};

static void ex_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct exs *me = s->data;
    struct ex *e = me->e;
    CHECK_EQ(me->reading, 1);
    me->calls++;
    e->calls++;
    e->called = 1;
    if (nread == -ENOBUFS) {
        CHECK(buf == NULL);
        me->enobufs++;
        me->reading = 0; /* reading has stopped */
        return;
    }
    CHECK_GT(nread, 0);
    CHECK(in_pool(buf, e->mem, EX_SIZE, 2));
    CHECK(me->held == NULL);
    CHECK_LE(me->ngot + (size_t)nread, EX_MSG);
    memcpy(me->got + me->ngot, buf, (size_t)nread);
    me->ngot += (size_t)nread;
    me->held = buf; /* kept: the pool runs dry */
}

static void ex_closed_cb(mux_stream_t *s)
{
    struct exs *me = s->data;
    me->close_calls++;
    me->e->closed++;
}

static void ex_wait_calls(mux_loop_t *loop, struct ex *e, int calls, const char *what)
{
    uint64_t end = mono_ns() + 3000 * MS;
    while (e->calls < calls) {
        e->called = 0;
        run_for(loop, &e->called, 3000, what);
        CHECK_LT(mono_ns(), end);
    }
    run_ms(loop, 30); /* and nothing more */
    CHECK_EQ(e->calls, calls);
}

TEST(stream_native_pool_exhausted_third_stream_enobufs_then_resumes_intact) {
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    struct ex *e = calloc(1, sizeof *e);
    CHECK(e != NULL);
    CHECK_EQ(mux_bufpool_init(&e->pool, e->mem, EX_SIZE, 2, e->slots), 0);
    for (int i = 0; i < 3; i++) {
        struct exs *x = &e->st[i];
        int sv[2];
        make_socketpair(sv);
        x->e = e;
        x->peer = sv[1];
        x->s.data = x;
        CHECK_EQ(mux_stream_open(&loop, &x->s, sv[0]), 0);
        char msg[EX_MSG];
        pattern_fill(msg, (uint64_t)i * 1000, EX_MSG);
        write_all(x->peer, msg, EX_MSG);
    }
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(mux_read_start_pool(&e->st[i].s, &e->pool, ex_read_cb), 0);
        e->st[i].reading = 1;
    }
    ex_wait_calls(&loop, e, 3, "three read callbacks");
    /* Two streams got their message in a buffer each; the third found the pool empty. */
    int starved = -1, fed = 0;
    for (int i = 0; i < 3; i++) {
        struct exs *x = &e->st[i];
        CHECK_EQ(x->calls, 1);
        if (x->enobufs) {
            CHECK_EQ(starved, -1);
            starved = i;
            CHECK_EQ(x->ngot, 0);
            CHECK(x->held == NULL);
        } else {
            fed++;
            CHECK_EQ(x->ngot, EX_MSG);
            CHECK(pattern_ok(x->got, (uint64_t)i * 1000, EX_MSG));
            CHECK(x->held != NULL);
        }
    }
    CHECK_EQ(fed, 2);
    CHECK_GE(starved, 0);
    struct exs *k = &e->st[starved];
    struct exs *a = &e->st[(starved + 1) % 3];
    CHECK(a->held != e->st[(starved + 2) % 3].held);
    CHECK_EQ(mux_bufpool_available(&e->pool), 0);
    /* Started again with the pool still empty: -ENOBUFS again (reading had stopped). */
    CHECK_EQ(mux_read_start_pool(&k->s, &e->pool, ex_read_cb), 0);
    k->reading = 1;
    ex_wait_calls(&loop, e, 4, "-ENOBUFS again");
    CHECK_EQ(k->calls, 2);
    CHECK_EQ(k->enobufs, 2);
    CHECK_EQ(k->reading, 0);
    CHECK_EQ(mux_bufpool_available(&e->pool), 0);
    /* One buffer back: the starved stream's message arrives intact. */
    CHECK_EQ(mux_bufpool_put(&e->pool, a->held), 0);
    a->held = NULL;
    CHECK_EQ(mux_bufpool_available(&e->pool), 1);
    CHECK_EQ(mux_read_start_pool(&k->s, &e->pool, ex_read_cb), 0);
    k->reading = 1;
    ex_wait_calls(&loop, e, 5, "the starved stream's message");
    CHECK_EQ(k->calls, 3);
    CHECK_EQ(k->enobufs, 2);
    CHECK_EQ(k->ngot, EX_MSG);
    CHECK(pattern_ok(k->got, (uint64_t)starved * 1000, EX_MSG));
    CHECK(k->held != NULL);
    CHECK_EQ(mux_bufpool_available(&e->pool), 0);
    for (int i = 0; i < 3; i++) {
        struct exs *x = &e->st[i];
        if (x->held)
            CHECK_EQ(mux_bufpool_put(&e->pool, x->held), 0);
        x->held = NULL;
    }
    CHECK_EQ(mux_bufpool_available(&e->pool), 2);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(mux_stream_close(&e->st[i].s, ex_closed_cb), 0);
    uint64_t end = mono_ns() + 2000 * MS;
    while (e->closed < 3) {
        run_ms(&loop, 5);
        CHECK_LT(mono_ns(), end);
    }
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(e->st[i].close_calls, 1);
        close(e->st[i].peer);
    }
    CHECK_EQ(e->calls, 5);
    CHECK_EQ(mux_bufpool_available(&e->pool), 2);
    loop_finish(&loop);
    free(e);
}

/* ---- a thousand writes queued at once ---------------------------------------------- */

#define MW_N      1000
#define MW_BIG_AT 500
#define MW_BIG    (1u << 20)

struct mw {
    mux_stream_t w, r;
    mux_write_t req[MW_N];
    mux_buf_t iov[MW_N][3];
    int iovcnt[MW_N];
    size_t after[MW_N]; /* bytes of the writes queued after this one */
    char *data;
    size_t total;
    uint64_t got;
    int next_cb, close_calls;
    char rbuf[65536];
    volatile int done, closed;
};

static void mw_write_cb(mux_write_t *req, int status)
{
    struct mw *m = req->data;
    int i = (int)(req - m->req);
    CHECK_EQ(status, 0);
    CHECK_EQ(i, m->next_cb); /* in queue order, each once */
    m->next_cb++;
    ssize_t q = mux_stream_write_queue_size(&m->w);
    CHECK_GE(q, 0);
    CHECK_LE((size_t)q, m->after[i]); /* this one's bytes have all left */
    if (m->next_cb == MW_N && m->got == m->total)
        m->done = 1;
}

static void mw_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct mw *m = s->data;
    CHECK_GT(nread, 0);
    CHECK(buf == m->rbuf);
    CHECK_LE(m->got + (uint64_t)nread, m->total);
    if (!pattern_ok(buf, m->got, (size_t)nread))
        harness_fail(__FILE__, __LINE__, "bytes arrive in order and intact", NULL);
    m->got += (uint64_t)nread;
    if (m->next_cb == MW_N && m->got == m->total)
        m->done = 1;
}

static void mw_closed_cb(mux_stream_t *s)
{
    struct mw *m = s->data;
    if (++m->close_calls == 2)
        m->closed = 1;
}

TEST(stream_native_thousand_queued_writes_called_back_in_order_bytes_exact) {
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct mw *m = calloc(1, sizeof *m);
    CHECK(m != NULL);
    /* Layouts: one buffer; three; three with an empty middle; none at all; an empty
     * buffer each side of one; only empty buffers. One write carries 1 MB. */
    size_t lens[MW_N][3];
    uint64_t st = 5;
    for (int i = 0; i < MW_N; i++) {
        size_t a = 1 + (size_t)(prng_next(&st) % 97), b = 1 + (size_t)(prng_next(&st) % 97),
               c = 1 + (size_t)(prng_next(&st) % 97);
        switch (i % 6) {
        case 0:
            lens[i][0] = a;
            m->iovcnt[i] = 1;
            break;
        case 1:
            lens[i][0] = a;
            lens[i][1] = b;
            lens[i][2] = c;
            m->iovcnt[i] = 3;
            break;
        case 2:
            lens[i][0] = a;
            lens[i][1] = 0;
            lens[i][2] = c;
            m->iovcnt[i] = 3;
            break;
        case 3:
            m->iovcnt[i] = 0;
            break;
        case 4:
            lens[i][0] = 0;
            lens[i][1] = b;
            lens[i][2] = 0;
            m->iovcnt[i] = 3;
            break;
        default:
            lens[i][0] = 0;
            lens[i][1] = 0;
            m->iovcnt[i] = 2;
            break;
        }
        if (i == MW_BIG_AT) {
            lens[i][0] = 7;
            lens[i][1] = MW_BIG;
            lens[i][2] = 0;
            m->iovcnt[i] = 3;
        }
        for (int j = 0; j < m->iovcnt[i]; j++)
            m->total += lens[i][j];
    }
    CHECK((m->data = malloc(m->total)) != NULL);
    pattern_fill(m->data, 0, m->total);
    size_t off = 0;
    for (int i = 0; i < MW_N; i++) {
        for (int j = 0; j < m->iovcnt[i]; j++) {
            m->iov[i][j].base = m->data + off;
            m->iov[i][j].len = lens[i][j];
            off += lens[i][j];
        }
        m->after[i] = m->total - off;
    }
    CHECK_EQ(off, m->total);
    m->w.data = m->r.data = m;
    CHECK_EQ(mux_stream_open(&loop, &m->w, sv[0]), 0);
    CHECK_EQ(mux_stream_open(&loop, &m->r, sv[1]), 0);
    for (int i = 0; i < MW_N; i++) {
        m->req[i].data = m;
        CHECK_EQ(mux_write(&m->w, &m->req[i], m->iov[i], m->iovcnt[i], mw_write_cb), 0);
    }
    CHECK_EQ(m->next_cb, 0); /* never from inside mux_write */
    ssize_t q = mux_stream_write_queue_size(&m->w);
    if (native_streams(&loop)) {
        CHECK_EQ(q, (ssize_t)m->total); /* the first send leaves with the next wait */
    } else {
        CHECK_GT(q, 0);                 /* 1 MB does not fit in the socket */
        CHECK_LT(q, (ssize_t)m->total); /* the first writes were tried at once */
    }
    CHECK_EQ(mux_read_start(&m->r, m->rbuf, sizeof m->rbuf, mw_read_cb), 0);
    run_for(&loop, &m->done, 10000, "every write called back and every byte read");
    CHECK_EQ(m->next_cb, MW_N);
    CHECK_EQ(m->got, m->total);
    CHECK_EQ(mux_stream_write_queue_size(&m->w), 0);
    run_ms(&loop, 20);
    CHECK_EQ(m->next_cb, MW_N); /* nothing twice */
    CHECK_EQ(m->got, m->total);
    CHECK_EQ(mux_stream_close(&m->w, mw_closed_cb), 0);
    CHECK_EQ(mux_stream_close(&m->r, mw_closed_cb), 0);
    run_for(&loop, &m->closed, 2000, "both streams closed");
    CHECK_EQ(m->close_calls, 2);
    CHECK_EQ(m->next_cb, MW_N);
    loop_finish(&loop);
    free(m->data);
    free(m);
}

/* ---- a write timeout while a send waits on a peer that never reads ----------------- */

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
