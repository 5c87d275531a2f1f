/* SPDX-License-Identifier: MIT */
/* Buffer pools: a pool that runs dry (-ENOBUFS) and reading that resumes after a put,
 * mux_bufpool_put refusing what is not a buffer it handed out, one pool used by streams of
 * two loops, many pool reads started in one iteration, and three streams on a pool of two
 * buffers. Every case runs on every backend; where io_uring's native path (a pool's free
 * buffers become one loop's provided-buffer ring in the kernel) can be told apart through
 * the public API, the case asserts what each path must do. */
#include <sys/ioctl.h>
#include <sys/wait.h>

#include "stream_util.h"

/* ---- running dry, and giving buffers back ---- */

struct pooled {
    mux_stream_t s;
    mux_bufpool_t pool;
    char mem[2 * 4];
    uint32_t slots[2];
    char *held[8];
    int nheld, put_back, calls, enobufs, eof;
    char data[32];
    size_t ndata;
    volatile int stopped;
};

static void pooled_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct pooled *p = s->data;
    p->calls++;
    if (nread == -ENOBUFS) {
        CHECK(buf == NULL);
        p->enobufs++;
        p->stopped = 1;
        return;
    }
    if (nread == 0) {
        p->eof++;
        p->stopped = 1;
        return;
    }
    CHECK_GT(nread, 0);
    CHECK(buf >= p->mem && buf < p->mem + sizeof p->mem);
    CHECK_LE(p->ndata + (size_t)nread, sizeof p->data);
    memcpy(p->data + p->ndata, buf, (size_t)nread);
    p->ndata += (size_t)nread;
    if (p->put_back) {
        CHECK_EQ(mux_bufpool_put(&p->pool, buf), 0);
    } else {
        CHECK_LT(p->nheld, 8);
        p->held[p->nheld++] = buf;
    }
}

TEST(stream_pool_runs_dry_with_enobufs_and_reading_resumes_after_put) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct pooled p;
    memset(&p, 0, sizeof p);
    CHECK_EQ(mux_bufpool_init(&p.pool, p.mem, 4, 2, p.slots), 0);
    CHECK_EQ(mux_bufpool_available(&p.pool), 2);
    p.s.data = &p;
    CHECK_EQ(mux_stream_open(&loop, &p.s, sv[0]), 0);
    CHECK_EQ(mux_read_start_pool(&p.s, &p.pool, pooled_read_cb), 0);
    CHECK_EQ(write(sv[1], "0123456789ABCDEF", 16), 16);
    /* The callback keeps both buffers: the third read finds the pool empty. */
    run_for(&loop, &p.stopped, 2000, "the pool ran dry");
    CHECK_EQ(p.calls, 3);
    CHECK_EQ(p.enobufs, 1);
    CHECK_EQ(p.nheld, 2);
    CHECK_EQ(p.ndata, 8);
    CHECK(memcmp(p.data, "01234567", 8) == 0);
    CHECK(p.held[0] != p.held[1]);
    CHECK_EQ(mux_bufpool_available(&p.pool), 0);
    run_ms(&loop, 30);
    CHECK_EQ(p.calls, 3); /* reading has stopped */
    CHECK_EQ(mux_bufpool_put(&p.pool, p.held[0]), 0);
    CHECK_EQ(mux_bufpool_put(&p.pool, p.held[1]), 0);
    CHECK_EQ(mux_bufpool_available(&p.pool), 2);
    p.put_back = 1;
    p.stopped = 0;
    CHECK_EQ(mux_read_start_pool(&p.s, &p.pool, pooled_read_cb), 0);
    CHECK_EQ(shutdown(sv[1], SHUT_WR), 0);
    run_for(&loop, &p.stopped, 2000, "the rest and end of stream");
    CHECK_EQ(p.eof, 1);
    CHECK_EQ(p.enobufs, 1);
    CHECK_EQ(p.ndata, 16);
    CHECK(memcmp(p.data, "0123456789ABCDEF", 16) == 0);
    CHECK_EQ(mux_bufpool_available(&p.pool), 2); /* end of stream kept no buffer */
    CHECK_EQ(mux_stream_close(&p.s, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&loop);
    close(sv[1]);
}

struct poolonly {
    mux_stream_t s;
    mux_bufpool_t pool;
    char arena[16]; /* the pool's two 4-byte buffers are arena[4..12) */
    uint32_t slots[2];
    char *got;
    volatile int read;
};

static void poolonly_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct poolonly *p = s->data;
    CHECK_EQ(nread, 4);
    CHECK(memcmp(buf, "wxyz", 4) == 0);
    p->got = buf;
    p->read = 1;
    CHECK_EQ(mux_read_stop(s), 0);
}

TEST(stream_bufpool_put_rejects_foreign_misaligned_and_double_freed_pointers) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct poolonly p;
    memset(&p, 0, sizeof p);
    char *mem = p.arena + 4;
    CHECK_EQ(mux_bufpool_init(&p.pool, mem, 4, 2, p.slots), 0);
    p.s.data = &p;
    CHECK_EQ(mux_stream_open(&loop, &p.s, sv[0]), 0);
    CHECK_EQ(mux_read_start_pool(&p.s, &p.pool, poolonly_read_cb), 0);
    CHECK_EQ(write(sv[1], "wxyz", 4), 4);
    run_for(&loop, &p.read, 2000, "a read from the pool");
    CHECK(p.got == mem || p.got == mem + 4);
    CHECK_EQ(mux_bufpool_available(&p.pool), 1);
    char *other = p.got == mem ? mem + 4 : mem; /* never handed out: free */
    char foreign[4];
    CHECK_EQ(mux_bufpool_put(&p.pool, foreign), -EINVAL);
    CHECK_EQ(mux_bufpool_put(&p.pool, p.arena), -EINVAL);   /* below the pool */
    CHECK_EQ(mux_bufpool_put(&p.pool, mem + 8), -EINVAL);   /* just past its end */
    CHECK_EQ(mux_bufpool_put(&p.pool, p.got + 1), -EINVAL); /* inside a buffer */
    CHECK_EQ(mux_bufpool_put(&p.pool, other), -EINVAL);     /* free already */
    CHECK_EQ(mux_bufpool_put(&p.pool, NULL), -EINVAL);
    CHECK_EQ(mux_bufpool_put(NULL, p.got), -EINVAL);
    CHECK_EQ(mux_bufpool_available(&p.pool), 1); /* none of that counted */
    CHECK_EQ(mux_bufpool_put(&p.pool, p.got), 0);
    CHECK_EQ(mux_bufpool_available(&p.pool), 2);
    CHECK_EQ(mux_bufpool_put(&p.pool, p.got), -EINVAL); /* double free */
    CHECK_EQ(mux_bufpool_available(&p.pool), 2);
    CHECK_EQ(mux_stream_close(&p.s, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&loop);
    close(sv[1]);
}

/* ---- one pool, two loops ---- */

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

/* Detached while a stream reads from it: -EBUSY; once that stream is closed: 0, and the
 * pool then serves another loop (as after the first loop's close), the first loop still
 * open; a second detach, and one of a pool that never served a loop, are 0 too. */
TEST(bufpool_detach_takes_it_back_from_the_loop_while_the_loop_stays_open) {
    mux_loop_t l1, l2;
    loop_open(&l1);
    loop_open(&l2);
    int native = native_streams(&l1);
    mux_bufpool_t pool;
    uint32_t slots[TWO_COUNT];
    char mem[TWO_SIZE * TWO_COUNT];
    memset(&pool, 0, sizeof pool);
    CHECK_EQ(mux_bufpool_detach(NULL), -EINVAL);
    CHECK_EQ(mux_bufpool_detach(&pool), -EINVAL); /* never initialised */
    CHECK_EQ(mux_bufpool_init(&pool, mem, TWO_SIZE, TWO_COUNT, slots), 0);
    CHECK_EQ(mux_bufpool_detach(&pool), 0);
    struct two a, b;
    two_open(&l1, &a, &pool, mem);
    two_open(&l2, &b, &pool, mem);
    CHECK_EQ(mux_read_start_pool(&a.s, &pool, two_read_cb), 0);
    two_expect(&l1, &a, "on loop 1", 1);
    CHECK_EQ(mux_bufpool_detach(&pool), native ? -EBUSY : 0);
    CHECK_EQ(mux_stream_close(&a.s, two_closed_cb), 0);
    run_for(&l1, &a.closed, 2000, "the stream of loop 1 closed");
    CHECK_EQ(mux_bufpool_detach(&pool), 0);
    CHECK_EQ(mux_bufpool_detach(&pool), 0);
    CHECK_EQ(mux_bufpool_available(&pool), TWO_COUNT);
    CHECK_EQ(mux_read_start_pool(&b.s, &pool, two_read_cb), 0); /* loop 2 may bind it now */
    two_expect(&l2, &b, "on loop 2 after the detach", 1);
    CHECK_EQ(mux_stream_close(&b.s, two_closed_cb), 0);
    run_for(&l2, &b.closed, 2000, "the stream of loop 2 closed");
    CHECK_EQ(mux_bufpool_detach(&pool), 0);
    loop_finish(&l1);
    loop_finish(&l2);
    CHECK_EQ(mux_bufpool_available(&pool), TWO_COUNT);
    close(a.peer);
    close(b.peer);
}

/* ---- a pool attached to an io_uring loop, read from another loop's reader ---- */

/* The reader on the other loop reads from the pool's free list: on the native path it gets
 * -ENOBUFS, never a buffer the kernel may fill; on the readiness path both loops take from
 * the free list. On io_uring this failed before c2ca5a2; the other backends passed. */

#define XP_SIZE  256
#define XP_COUNT 8

struct xp {
    mux_stream_t s;
    int peer;
    mux_bufpool_t *pool;
    char *pool_mem;
    char cbuf[XP_SIZE];
    char got[1024];
    size_t ngot;
    char *held; /* a pool buffer kept until the other loop has read */
    int reads, pool_reads, enobufs, errors, close_calls;
    volatile int called, closed;
};

static void xp_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct xp *x = s->data;
    x->called = 1;
    if (nread == -ENOBUFS) {
        CHECK(buf == NULL);
        x->enobufs++;
        return;
    }
    if (nread <= 0) {
        x->errors++;
        return;
    }
    CHECK_LE(x->ngot + (size_t)nread, sizeof x->got);
    memcpy(x->got + x->ngot, buf, (size_t)nread);
    x->ngot += (size_t)nread;
    x->reads++;
    if (buf != x->cbuf) {
        CHECK(in_pool(buf, x->pool_mem, XP_SIZE, XP_COUNT));
        CHECK(x->held == NULL);
        x->pool_reads++;
        x->held = buf; /* given back by the case, after the other loop read */
    }
}

static void xp_closed_cb(mux_stream_t *s)
{
    struct xp *x = s->data;
    x->close_calls++;
    x->closed = 1;
}

static void xp_open(mux_loop_t *loop, struct xp *x, mux_bufpool_t *pool, char *mem)
{
    int sv[2];
    make_socketpair(sv);
    memset(x, 0, sizeof *x);
    x->peer = sv[1];
    x->pool = pool;
    x->pool_mem = mem;
    x->s.data = x;
    CHECK_EQ(mux_stream_open(loop, &x->s, sv[0]), 0);
}

static void xp_give_back(struct xp *x)
{
    if (x->held)
        CHECK_EQ(mux_bufpool_put(x->pool, x->held), 0);
    x->held = NULL;
}

/* Writes `msg` to the peer and runs `loop` until it arrived, exactly. */
static void xp_expect(mux_loop_t *loop, struct xp *x, const char *msg)
{
    size_t len = strlen(msg);
    x->ngot = 0;
    write_all(x->peer, msg, len);
    int enobufs = x->enobufs;
    uint64_t end = mono_ns() + 2000 * MS;
    while (x->ngot < len) {
        x->called = 0;
        run_for(loop, &x->called, 2000, msg);
        CHECK_EQ(x->enobufs, enobufs);
        CHECK_EQ(x->errors, 0);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(x->ngot, len);
    CHECK(memcmp(x->got, msg, len) == 0);
}

TEST(pool_of_io_uring_loop_gives_enobufs_not_buffers_to_other_loop_reader) {
    mux_loop_t la, lb;
    loop_open(&la); /* the backend under test */
    /* Loop B reads on the readiness path (poll), from the pool's free list. */
#ifdef _WIN32
    mux_loop_options_t ob = {.backend = "select", .flags = MUX_LOOP_IGNORE_ENV}; /* no poll */
#else
    mux_loop_options_t ob = {.backend = "poll", .flags = MUX_LOOP_IGNORE_ENV};
#endif
    CHECK_EQ(mux_loop_init(&lb, &ob), 0);
    CHECK_EQ(native_streams(&lb), 0);
    int native = native_streams(&la);
    mux_bufpool_t pool;
    uint32_t slots[XP_COUNT];
    char *mem = page_alloc((size_t)XP_SIZE * XP_COUNT);
    memset(&pool, 0, sizeof pool);
    CHECK_EQ(mux_bufpool_init(&pool, mem, XP_SIZE, XP_COUNT, slots), 0);
    struct xp *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    CHECK(a && b);
    xp_open(&la, a, &pool, mem);
    xp_open(&lb, b, &pool, mem);
    /* B reads from the pool first: nothing had attached it, so B takes the free list. */
    CHECK_EQ(mux_read_start_pool(&b->s, &pool, xp_read_cb), 0);
    CHECK_GE(mux_run(&lb, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(b->called, 0);
    /* Then A uses it: on io_uring its free buffers become A's kernel ring. */
    CHECK_EQ(mux_read_start_pool(&a->s, &pool, xp_read_cb), 0);
    CHECK_GE(mux_run(&la, MUX_RUN_NOWAIT), 0); /* the receive (or poll) is armed */
    CHECK_EQ(mux_bufpool_available(&pool), XP_COUNT);
    static const char mb[] = "for loop B, which read from the free list before A attached it";
    static const char ma[] = "for loop A: every byte exact, in its own buffer";
    write_all(b->peer, mb, strlen(mb));
    run_for(&lb, &b->called, 2000, "loop B's read callback");
    if (native) {
        /* The free buffers are A's kernel's: B gets none, and its reading stopped. */
        CHECK_EQ(b->enobufs, 1);
        CHECK_EQ(b->reads, 0);
        CHECK(b->held == NULL);
        CHECK_EQ(mux_bufpool_available(&pool), XP_COUNT);
        CHECK_EQ(mux_read_start_pool(&b->s, &pool, xp_read_cb), -EINVAL);
    } else {
        CHECK_EQ(b->enobufs, 0);
        CHECK_EQ(b->ngot, strlen(mb));
        CHECK(memcmp(b->got, mb, strlen(mb)) == 0);
        CHECK_EQ(b->pool_reads, 1);
        CHECK(b->held != NULL); /* kept while A reads */
        CHECK_EQ(mux_bufpool_available(&pool), XP_COUNT - 1);
    }
    /* A's bytes arrive exact, and not in the buffer B holds (if it holds one). */
    xp_expect(&la, a, ma);
    CHECK_EQ(a->pool_reads, 1);
    CHECK(a->held != NULL);
    CHECK(a->held != b->held);
    if (b->held)
        CHECK(memcmp(b->held, mb, strlen(mb)) == 0); /* B's buffer was not written over */
    xp_give_back(a);
    xp_give_back(b);
    CHECK_EQ(mux_bufpool_available(&pool), XP_COUNT);
    /* Both go on reading: B into its own buffer on io_uring (the pool is A's), else from
     * the pool; B's message waited in the socket. */
    if (native) {
        CHECK_EQ(b->ngot, 0);
        CHECK_EQ(mux_read_start(&b->s, b->cbuf, sizeof b->cbuf, xp_read_cb), 0);
        b->called = 0;
        while (b->ngot < strlen(mb)) {
            b->called = 0;
            run_for(&lb, &b->called, 2000, "B's first message, into its own buffer");
        }
        CHECK_EQ(b->ngot, strlen(mb));
        CHECK(memcmp(b->got, mb, strlen(mb)) == 0);
        CHECK_EQ(b->pool_reads, 0);
    }
    xp_expect(&lb, b, "loop B, second message");
    xp_give_back(b);
    xp_expect(&la, a, "loop A, second message");
    xp_give_back(a);
    CHECK_EQ(a->pool_reads, 2);
    CHECK_EQ(b->pool_reads, native ? 0 : 2);
    CHECK_EQ(mux_bufpool_available(&pool), XP_COUNT);
    CHECK_EQ(a->enobufs + a->errors + b->errors, 0);
    CHECK_EQ(b->enobufs, native ? 1 : 0);
    /* Once A is closed, the pool is B's on every backend. */
    CHECK_EQ(mux_stream_close(&a->s, xp_closed_cb), 0);
    run_for(&la, &a->closed, 2000, "A's stream closed");
    loop_finish(&la);
    CHECK_EQ(mux_bufpool_available(&pool), XP_COUNT);
    CHECK_EQ(mux_read_stop(&b->s), 0);
    CHECK_EQ(mux_read_start_pool(&b->s, &pool, xp_read_cb), 0);
    xp_expect(&lb, b, "loop B from the pool after loop A closed");
    CHECK(b->held != NULL);
    xp_give_back(b);
    CHECK_EQ(mux_bufpool_available(&pool), XP_COUNT);
    CHECK_EQ(mux_stream_close(&b->s, xp_closed_cb), 0);
    run_for(&lb, &b->closed, 2000, "B's stream closed");
    CHECK_EQ(a->close_calls, 1);
    CHECK_EQ(b->close_calls, 1);
    loop_finish(&lb);
    close(a->peer);
    close(b->peer);
    free(a);
    free(b);
    free(mem);
}

/* ---- a pool of two buffers, three streams ---- */

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

/* ---- many receives armed in one iteration, more than the SQ ring holds ---- */

/* Every stream starts reading from one pool in the same iteration, with data already
 * waiting. On io_uring the receives are submitted with the next wait, and a full SQ ring is
 * submitted early, in the middle of that batch: each receive must find a buffer in the
 * kernel's ring when it gets there. It used to get -ENOBUFS once the ring's slack was used
 * up, while the pool still had hundreds of free buffers. Run with the default ring and
 * with a 4-entry one (IOMUX_URING_ENTRIES, read by the io_uring backend only). */
#define MR_N 400

struct mr {
    mux_stream_t s[MR_N];
    int peer[MR_N];
    char got[MR_N][16];
    int ngot[MR_N], calls[MR_N], errors;
    mux_bufpool_t pool;
};

static struct mr *mr_current;

static void mr_read_cb(mux_stream_t *s, ssize_t n, char *buf)
{
    struct mr *m = mr_current;
    int i = (int)(s - m->s);
    m->calls[i]++;
    if (n <= 0) {
        fprintf(stderr, "stream %d: read callback got %zd\n", i, n);
        m->errors++;
        return;
    }
    CHECK_LE(m->ngot[i] + n, (ssize_t)sizeof m->got[i]);
    memcpy(m->got[i] + m->ngot[i], buf, (size_t)n);
    m->ngot[i] += (int)n;
    CHECK_EQ(mux_bufpool_put(&m->pool, buf), 0);
    if (m->ngot[i] == 8)
        CHECK_EQ(mux_read_stop(s), 0);
}

static void mr_run(const char *entries)
{
    if (entries)
        CHECK_EQ(setenv("IOMUX_URING_ENTRIES", entries, 1), 0);
    struct mr *m = calloc(1, sizeof *m);
    CHECK(m != NULL);
    mr_current = m;
    mux_loop_t loop;
    loop_open(&loop);
    if (entries)
        CHECK_EQ(unsetenv("IOMUX_URING_ENTRIES"), 0);
    size_t count = 1024, size = 4096;
    char *mem = aligned_alloc(4096, count * size);
    uint32_t *slots = calloc(count, sizeof *slots);
    CHECK(mem != NULL && slots != NULL);
    CHECK_EQ(mux_bufpool_init(&m->pool, mem, size, (uint32_t)count, slots), 0);
    for (int i = 0; i < MR_N; i++) {
        int sv[2];
        make_socketpair(sv);
        m->peer[i] = sv[1];
        char msg[9];
        snprintf(msg, sizeof msg, "m%07d", i);
        CHECK_EQ(write(sv[1], msg, 8), 8);
        CHECK_EQ(mux_stream_open(&loop, &m->s[i], sv[0]), 0);
        CHECK_EQ(mux_read_start_pool(&m->s[i], &m->pool, mr_read_cb), 0);
    }
    mux_timer_t tick; /* a lost receive fails the bound below rather than blocking */
    CHECK_EQ(mux_timer_init(&tick, ticker_cb), 0);
    CHECK_EQ(mux_timer_start(&loop, &tick, 5 * MS, 5 * MS), 0);
    uint64_t end = mono_ns() + 5000 * MS;
    for (;;) {
        int all = 1;
        for (int i = 0; i < MR_N && all; i++)
            all = m->ngot[i] == 8;
        if (all || m->errors || mono_ns() > end)
            break;
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    }
    CHECK_EQ(mux_timer_stop(&loop, &tick), 0);
    CHECK_EQ(m->errors, 0);
    for (int i = 0; i < MR_N; i++) {
        char msg[9];
        snprintf(msg, sizeof msg, "m%07d", i);
        CHECK_EQ(m->ngot[i], 8);
        CHECK(memcmp(m->got[i], msg, 8) == 0);
    }
    CHECK_EQ(mux_bufpool_available(&m->pool), (int)count);
    for (int i = 0; i < MR_N; i++)
        CHECK_EQ(mux_stream_close(&m->s[i], NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    for (int i = 0; i < MR_N; i++)
        close(m->peer[i]);
    loop_close(&loop);
    CHECK_EQ(mux_bufpool_available(&m->pool), (int)count);
    free(slots);
    free(mem);
    free(m);
}

TEST(many_pool_reads_started_in_one_iteration_all_get_buffers) {
    mr_run(NULL);
    mr_run("4");
}

/* ---- a pool reader that stops while the peer keeps sending; a burst; close ---- */

#define SR_COUNT 32
#define SR_SIZE  64
#define SR_TOTAL (48 * 1024)

struct sr {
    mux_stream_t s;
    mux_bufpool_t pool;
    char mem[SR_COUNT * SR_SIZE];
    uint32_t slots[SR_COUNT];
    char *src;
    uint64_t got;
    int calls, errors, stop_after, closed;
    volatile int done;
};

static void sr_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct sr *r = s->data;
    r->calls++;
    if (nread <= 0) {
        r->errors++; /* neither an error (-ENOBUFS) nor the end is expected */
        r->done = 1;
        return;
    }
    CHECK_LE(r->got + (uint64_t)nread, SR_TOTAL);
    if (memcmp(buf, r->src + r->got, (size_t)nread) != 0)
        harness_fail(__FILE__, __LINE__, "the pool reader got the bytes in order", NULL);
    r->got += (uint64_t)nread;
    CHECK_EQ(mux_bufpool_put(&r->pool, buf), 0);
    if (r->stop_after && r->calls == r->stop_after)
        CHECK_EQ(mux_read_stop(s), 0);
    if (r->got == SR_TOTAL)
        r->done = 1;
}

static void sr_closed_cb(mux_stream_t *s)
{
    ((struct sr *)s->data)->closed = 1;
}

/* Opens `loop`, a socketpair `sv`, and a stream on sv[0] with its pool. */
static struct sr *sr_open(mux_loop_t *loop, int sv[2])
{
    loop_open(loop);
    make_socketpair(sv);
    struct sr *r = calloc(1, sizeof *r);
    CHECK(r != NULL);
    CHECK((r->src = malloc(SR_TOTAL)) != NULL);
    pattern_init();
    pattern_fill(r->src, 0, SR_TOTAL);
    CHECK_EQ(mux_bufpool_init(&r->pool, r->mem, SR_SIZE, SR_COUNT, r->slots), 0);
    r->s.data = r;
    CHECK_EQ(mux_stream_open(loop, &r->s, sv[0]), 0);
    return r;
}

/* Closes the stream: the pool is whole after its close callback. Frees `r`. */
static void sr_close(mux_loop_t *loop, struct sr *r, int peer)
{
    CHECK_EQ(mux_stream_close(&r->s, sr_closed_cb), 0);
    run_for(loop, &r->closed, 2000, "the stream closed");
    CHECK_EQ(mux_bufpool_available(&r->pool), SR_COUNT);
    loop_finish(loop);
    close(peer);
    free(r->src);
    free(r);
}

/* A reader that stops takes a few buffers' worth from the socket at most, however much the
 * peer sends meanwhile: the kernel's socket buffer keeps the rest (on io_uring the multishot
 * receive kept armed across the stop is ended by its second buffer, having taken at most
 * what the kernel's ring held: a buffer per receive in flight and 8 more). Started again
 * it gets every byte in order, and the pool is whole at the end. */
TEST(stream_pool_reader_stopped_while_peer_sends_leaves_the_rest_in_the_socket) {
    mux_loop_t loop;
    int sv[2];
    struct sr *r = sr_open(&loop, sv);
    r->stop_after = 1;
    CHECK_EQ(mux_read_start_pool(&r->s, &r->pool, sr_read_cb), 0);
    write_all(sv[1], r->src, 100);
    run_ms(&loop, 30);
    CHECK_EQ(r->calls, 1); /* stopped in its first callback */
    uint64_t sent = 100;
    for (int i = 0; i < 20; i++) { /* the peer goes on: more than the pool holds */
        write_all(sv[1], r->src + sent, 1000);
        sent += 1000;
        run_ms(&loop, 2);
    }
    run_ms(&loop, 20);
    CHECK_EQ(r->calls, 1);
    int inq = 0; /* what the reader left in the socket */
    CHECK_EQ(ioctl(sv[0], FIONREAD, &inq), 0);
    CHECK_GE(inq, (int)(sent - 100 - 10 * SR_SIZE));
    r->stop_after = 0;
    CHECK_EQ(mux_read_start_pool(&r->s, &r->pool, sr_read_cb), 0);
    write_all(sv[1], r->src + sent, SR_TOTAL - sent);
    run_for(&loop, &r->done, 5000, "every byte after the restart");
    CHECK_EQ(r->errors, 0);
    CHECK_EQ(r->got, SR_TOTAL);
    CHECK_EQ(mux_bufpool_available(&r->pool), SR_COUNT);
    sr_close(&loop, r, sv[1]);
}

/* An echo server's pattern: stop in the read callback, start again later. On io_uring the
 * multishot receive stays armed across it (no cancel, no new receive per message); every
 * message arrives whole, in order, on every backend. */
TEST(stream_pool_reader_stopping_per_message_keeps_its_receive_armed) {
    mux_loop_t loop;
    int sv[2];
    struct sr *r = sr_open(&loop, sv);
    CHECK_EQ(mux_read_start_pool(&r->s, &r->pool, sr_read_cb), 0);
    uint64_t sent = 0;
    for (int i = 1; i <= 50; i++) {
        r->stop_after = i;
        write_all(sv[1], r->src + sent, 40);
        sent += 40;
        run_until_count(&loop, (volatile int *)&r->calls, i, 2000, "the read callback");
        CHECK_EQ(r->got, sent);
        if (native_streams(&loop) && (mux__loop_of(&loop)->caps & MUX__CAP_RECV_MULTI))
            CHECK((r->s.rop_.flags_ & (MUX__OPF_FLIGHT | MUX__OPF_MULTI)) ==
                  (MUX__OPF_FLIGHT | MUX__OPF_MULTI));
        CHECK_EQ(mux_read_start_pool(&r->s, &r->pool, sr_read_cb), 0);
    }
    CHECK_EQ(r->calls, 50);
    CHECK_EQ(r->errors, 0);
    sr_close(&loop, r, sv[1]);
}

/* A burst larger than the kernel's ring holds (io_uring keeps a few buffers more than
 * there are receives in it): the multishot receive runs the ring dry, a single receive
 * follows, and the reader, giving every buffer back, never sees -ENOBUFS. */
TEST(stream_pool_burst_larger_than_the_ring_arrives_whole_without_enobufs) {
    mux_loop_t loop;
    int sv[2];
    struct sr *r = sr_open(&loop, sv);
    int sz = 1 << 20;
    CHECK_EQ(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz), 0);
    write_all(sv[1], r->src, SR_TOTAL);
    CHECK_EQ(mux_read_start_pool(&r->s, &r->pool, sr_read_cb), 0);
    run_for(&loop, &r->done, 5000, "the whole burst");
    CHECK_EQ(r->errors, 0);
    CHECK_EQ(r->got, SR_TOTAL);
    CHECK_GE(r->calls, SR_TOTAL / SR_SIZE);
    sr_close(&loop, r, sv[1]);
}

/* Closed while stopped with completions parked: every buffer comes back to the pool and the
 * close callback runs. */
TEST(stream_pool_reader_closed_while_stopped_gives_every_buffer_back) {
    mux_loop_t loop;
    int sv[2];
    struct sr *r = sr_open(&loop, sv);
    r->stop_after = 1;
    CHECK_EQ(mux_read_start_pool(&r->s, &r->pool, sr_read_cb), 0);
    write_all(sv[1], r->src, 10);
    run_until_count(&loop, (volatile int *)&r->calls, 1, 2000, "the read callback");
    for (int i = 0; i < 4; i++) { /* several buffers' worth, each its own receive */
        write_all(sv[1], r->src + 10 + i * SR_SIZE, SR_SIZE);
        run_ms(&loop, 3);
    }
    CHECK_EQ(r->calls, 1);
    sr_close(&loop, r, sv[1]);
}

/* A count past INT32_MAX (mux_bufpool_available returns an int) and a count * size past
 * SIZE_MAX are refused before anything is written; the edges pass. */
TEST(bufpool_init_refuses_counts_past_int_max_and_sizes_that_overflow) {
    mux_bufpool_t pool;
    char mem[64];
    uint32_t slots[2];
    CHECK_EQ(mux_bufpool_init(&pool, mem, 32, (uint32_t)INT32_MAX + 1, slots), -EINVAL);
    CHECK_EQ(mux_bufpool_init(&pool, mem, SIZE_MAX / 2 + 1, 2, slots), -EINVAL);
    CHECK_EQ(mux_bufpool_init(&pool, mem, 0, 2, slots), -EINVAL);
    CHECK_EQ(mux_bufpool_init(&pool, mem, 32, 0, slots), -EINVAL);
    CHECK_EQ(mux_bufpool_init(&pool, mem, 32, 2, slots), 0);
    CHECK_EQ(mux_bufpool_available(&pool), 2);
}

/* ---- a fork while a stopped reader holds a completion ---- */

struct fk {
    mux_stream_t s;
    mux_bufpool_t pool;
    char mem[16 * 64];
    uint32_t slots[16];
    int got, closed;
};

static void fk_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct fk *f = s->data;
    if (nread > 0) {
        f->got++;
        mux_bufpool_put(&f->pool, buf);
    }
    mux_read_stop(s);
}

static void fk_closed_cb(mux_stream_t *s)
{
    ((struct fk *)s->data)->closed = 1;
}

/* The reader stopped and holds a message that came meanwhile; a fork's child makes its own
 * kernel state, in which the receive in flight ends (-ECANCELED) while that message is still
 * held. The child delivers the held message, then, once the parent has closed its copy of
 * the stream (whose receive would otherwise compete for the socket), a new one, and closes.
 * (On io_uring the end once came past a refusal and the receive stayed "in flight" for
 * ever: the close never completed.) */
TEST(stream_pool_reader_holding_a_message_across_fork_reads_and_closes_in_the_child) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct fk *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    CHECK_EQ(mux_bufpool_init(&f->pool, f->mem, 64, 16, f->slots), 0);
    f->s.data = f;
    CHECK_EQ(mux_stream_open(&loop, &f->s, sv[0]), 0);
    CHECK_EQ(mux_read_start_pool(&f->s, &f->pool, fk_read_cb), 0);
    char x[64];
    memset(x, 'x', sizeof x);
    write_all(sv[1], x, 64);
    volatile int *got = &f->got;
    run_for(&loop, got, 2000, "the first message");
    write_all(sv[1], x, 64); /* arrives while stopped */
    run_ms(&loop, 20);
    CHECK_EQ(f->got, 1);
    int go[2];
    make_pipe(go);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        /* Each step has its own 10 s: a loaded machine (the parent's close, the scheduler)
         * once took the 3 s that the first two steps shared. */
        alarm(45);
        int code = 0;
        uint64_t end = mono_ns() + 10000 * MS;
        CHECK_EQ(mux_read_start_pool(&f->s, &f->pool, fk_read_cb), 0);
        while (f->got < 2 && mono_ns() < end)
            CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        code |= f->got == 2 ? 1 : 0;
        char c;
        end = mono_ns() + 10000 * MS;
        while (read(go[0], &c, 1) != 1 && mono_ns() < end) /* the parent's copy is closed */
            sleep_ms(1);
        CHECK_EQ(mux_read_start_pool(&f->s, &f->pool, fk_read_cb), 0);
        write_all(sv[1], x, 64);
        end = mono_ns() + 10000 * MS;
        while (f->got < 3 && mono_ns() < end)
            CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        code |= f->got == 3 ? 2 : 0;
        CHECK_EQ(mux_stream_close(&f->s, fk_closed_cb), 0);
        end = mono_ns() + 10000 * MS;
        while (!f->closed && mono_ns() < end)
            CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        code |= f->closed ? 4 : 0;
        child_exit(10 + code); /* 10 and up: a failed CHECK here exits with 1 */
    }
    CHECK_EQ(mux_stream_close(&f->s, fk_closed_cb), 0);
    run_for(&loop, &f->closed, 2000, "the parent's stream closed");
    write_byte(go[1]);
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 10 + 7);
    loop_finish(&loop);
    close(go[0]);
    close(go[1]);
    close(sv[1]);
    free(f);
}
