/* SPDX-License-Identifier: MIT */
/* Writing to streams: queues of writes (a thousand at once, many buffers with empty ones
 * among them, more than 2 GiB in one buffer), a slow reader's back-pressure, and when the
 * write and close callbacks run: never inside the call, not lost behind a mux_read_stop,
 * and the loop does not close before a stream's close callback ran. Every case runs on
 * every backend; where io_uring's native sends (handed to the kernel with the loop's next
 * wait) can be told apart through the public API, the case asserts what each path must
 * do. And mux_try_write: a send at once or nothing, never past a queued write. */
#include <sys/mman.h>

#include "stream_util.h"

/* ---- a slow reader: back-pressure, then every byte in order ---- */

#define SLOW_FIRST (16u << 20)
#define SLOW_NEXT  (1u << 20)
#define SLOW_N     8 /* the first write and 7 of SLOW_NEXT */
#define SLOW_TOTAL ((uint64_t)SLOW_FIRST + (SLOW_N - 1) * (uint64_t)SLOW_NEXT)

struct slow {
    mux_stream_t cli, srv;
    mux_listener_t l;
    mux_timer_t start_reading;
    mux_write_t w[SLOW_N];
    mux_buf_t iov[SLOW_N];
    char *data; /* SLOW_TOTAL bytes of pattern, written in order */
    ssize_t qsize[SLOW_N];
    int order[SLOW_N], status[SLOW_N], calls[SLOW_N], ncalls;
    uint64_t received;
    int server_reading;
    volatile int connected, accepted, client_closed, server_closed, all_written;
    char srbuf[65536];
};

static void slow_client_closed(mux_stream_t *s)
{
    ((struct slow *)s->data)->client_closed = 1;
}

static void slow_server_closed(mux_stream_t *s)
{
    ((struct slow *)s->data)->server_closed = 1;
}

static void slow_write_cb(mux_write_t *req, int status)
{
    struct slow *w = req->data;
    int i = (int)(req - w->w);
    w->calls[i]++;
    w->status[i] = status;
    w->order[i] = ++w->ncalls;
    if (w->ncalls == SLOW_N)
        w->all_written = 1;
}

static void slow_server_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct slow *w = s->data;
    CHECK_GT(nread, 0);
    CHECK_LE(w->received + (uint64_t)nread, SLOW_TOTAL);
    if (!pattern_ok(buf, w->received, (size_t)nread))
        harness_fail(__FILE__, __LINE__, "the slow reader got the bytes in order", NULL);
    w->received += (uint64_t)nread;
    if (w->received == SLOW_TOTAL)
        CHECK_EQ(mux_stream_close(s, slow_server_closed), 0);
}

static void slow_accept_cb(mux_listener_t *l, mux_os_sock_t fd, int status)
{
    struct slow *w = l->data;
    CHECK_EQ(status, 0);
    w->srv.data = w;
    CHECK_EQ(mux_stream_open(mux_listener_loop(l), &w->srv, fd), 0);
    CHECK_EQ(mux_listener_close(l, NULL), 0);
    w->accepted = 1;
}

static void slow_connect_cb(mux_stream_t *s, int status)
{
    struct slow *w = s->data;
    CHECK_EQ(status, 0);
    uint64_t off = 0;
    for (int i = 0; i < SLOW_N; i++) {
        size_t n = i == 0 ? SLOW_FIRST : SLOW_NEXT;
        w->iov[i].base = w->data + off;
        w->iov[i].len = n;
        w->w[i].data = w;
        off += n;
        CHECK_EQ(mux_write(s, &w->w[i], &w->iov[i], 1, slow_write_cb), 0);
        w->qsize[i] = mux_stream_write_queue_size(s);
    }
    w->connected = 1;
}

TEST(stream_slow_reader_queue_grows_then_every_byte_arrives_in_order) {
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    struct slow *w = calloc(1, sizeof *w);
    CHECK(w != NULL);
    CHECK((w->data = malloc(SLOW_TOTAL)) != NULL);
    pattern_fill(w->data, 0, SLOW_TOTAL);
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    w->l.data = w;
    CHECK_EQ(mux_listen(&loop, &w->l, (struct sockaddr *)&a, alen, NULL, slow_accept_cb), 0);
    alen = sizeof a;
    CHECK_EQ(mux_listener_address(&w->l, (struct sockaddr *)&a, &alen), 0);
    w->cli.data = w;
    CHECK_EQ(mux_stream_connect(&loop, &w->cli, (struct sockaddr *)&a, alen, slow_connect_cb), 0);
    run_for(&loop, &w->connected, 3000, "connected");
    run_for(&loop, &w->accepted, 3000, "accepted");
    /* 16 MB cannot fit in the socket buffers of a peer that does not read. */
    CHECK_GT(w->qsize[0], 0);
    CHECK_LE(w->qsize[0], SLOW_FIRST);
    /* Later writes are queued behind it, untried: the queue grows by exactly their size. */
    for (int i = 1; i < SLOW_N; i++)
        CHECK_EQ(w->qsize[i], w->qsize[i - 1] + (ssize_t)SLOW_NEXT);
    run_ms(&loop, 150);
    CHECK_EQ(w->ncalls, 0); /* nothing can finish while the peer does not read */
    ssize_t q = mux_stream_write_queue_size(&w->cli);
    CHECK_GT(q, (ssize_t)((SLOW_N - 1) * (uint64_t)SLOW_NEXT));
    CHECK_LE(q, w->qsize[SLOW_N - 1]);
    CHECK_EQ(mux_read_start(&w->srv, w->srbuf, sizeof w->srbuf, slow_server_read_cb), 0);
    run_for(&loop, &w->server_closed, 8000, "the reader got every byte");
    run_for(&loop, &w->all_written, 2000, "every write was called back");
    CHECK_EQ(w->received, SLOW_TOTAL);
    for (int i = 0; i < SLOW_N; i++) {
        CHECK_EQ(w->calls[i], 1);
        CHECK_EQ(w->status[i], 0);
        CHECK_EQ(w->order[i], i + 1);
    }
    CHECK_EQ(mux_stream_write_queue_size(&w->cli), 0);
    CHECK_EQ(mux_stream_close(&w->cli, slow_client_closed), 0);
    run_for(&loop, &w->client_closed, 1000, "the client closed");
    loop_finish(&loop);
    free(w->data);
    free(w);
}

/* ---- many iovecs, empty ones among them ---- */

#define IOV_N 200

struct iovw {
    mux_stream_t s;
    mux_write_t w[2];
    mux_buf_t iov[IOV_N];
    char *data;
    size_t total;
    int calls[2], status[2], ncalls;
    volatile int done;
};

static void iovw_cb(mux_write_t *req, int status)
{
    struct iovw *v = req->data;
    int i = (int)(req - v->w);
    v->calls[i]++;
    v->status[i] = status;
    if (++v->ncalls == 2)
        v->done = 1;
}

TEST(stream_write_of_many_iovecs_with_empty_ones_arrives_intact) {
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct iovw *v = calloc(1, sizeof *v);
    CHECK(v != NULL);
    /* Lengths 0, 1, 2, ... up to ~40 KB with every seventh empty: more iovecs than one
     * sendmsg takes, and more bytes than the socket buffer, so partial writes split them. */
    size_t lens[IOV_N];
    for (int i = 0; i < IOV_N; i++) {
        lens[i] = i % 7 == 3 ? 0 : (size_t)(i * 211 % 40000);
        v->total += lens[i];
    }
    CHECK((v->data = malloc(v->total)) != NULL);
    pattern_fill(v->data, 0, v->total);
    size_t off = 0;
    for (int i = 0; i < IOV_N; i++) {
        v->iov[i].base = v->data + off;
        v->iov[i].len = lens[i];
        off += lens[i];
    }
    v->s.data = v;
    CHECK_EQ(mux_stream_open(&loop, &v->s, sv[0]), 0);
    v->w[0].data = v->w[1].data = v;
    CHECK_EQ(mux_write(&v->s, &v->w[0], v->iov, IOV_N, iovw_cb), 0);
    CHECK_EQ(mux_write(&v->s, &v->w[1], v->iov, 0, iovw_cb), 0); /* nothing to write */
    char *got = malloc(v->total);
    CHECK(got != NULL);
    size_t ngot = 0;
    uint64_t end = mono_ns() + 5000 * MS;
    while (ngot < v->total || !v->done) {
        ssize_t n = read(sv[1], got + ngot, v->total - ngot);
        if (n > 0)
            ngot += (size_t)n;
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(ngot, v->total);
    CHECK(pattern_ok(got, 0, ngot));
    CHECK_EQ(v->calls[0], 1);
    CHECK_EQ(v->calls[1], 1);
    CHECK_EQ(v->status[0], 0);
    CHECK_EQ(v->status[1], 0);
    CHECK_EQ(mux_stream_close(&v->s, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&loop);
    close(sv[1]);
    free(got);
    free(v->data);
    free(v);
}

/* ---- a thousand writes queued at once ---- */

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

/* ---- small writes queued behind a send leave together ---- */

#define GW_N 33 /* the first write, then 32 queued behind it */

struct gw {
    mux_stream_t w;
    mux_write_t req[GW_N];
    mux_buf_t iov[GW_N][2];
    char data[GW_N * 12];
    int order[GW_N], ncalls, closed;
    int iteration, last, rounds; /* the test's loop run; the last that called back; how many */
    volatile int done;
};

static void gw_write_cb(mux_write_t *req, int status)
{
    struct gw *g = req->data;
    CHECK_EQ(status, 0);
    if (g->iteration != g->last) {
        g->last = g->iteration;
        g->rounds++;
    }
    g->order[req - g->req] = ++g->ncalls;
    if (g->ncalls == GW_N)
        g->done = 1;
}

static void gw_closed_cb(mux_stream_t *s)
{
    ((struct gw *)s->data)->closed = 1;
}

/* Writes queued behind the send in flight go out in one send when it completes (stream.c,
 * MUX__GATHER_MAX buffers): the callbacks of 32 of them come in one or two loop runs, not
 * one run each (io_uring sends one send per wait; the readiness backends send each write
 * at once, the socket having room). Each write has two buffers, the second of them empty in
 * every third write; the bytes arrive in order and the callbacks run in queue order. */
TEST(stream_small_writes_queued_behind_a_send_leave_together) {
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct gw *g = calloc(1, sizeof *g);
    CHECK(g != NULL);
    pattern_fill(g->data, 0, sizeof g->data);
    g->w.data = g;
    CHECK_EQ(mux_stream_open(&loop, &g->w, sv[0]), 0);
    size_t off = 0;
    for (int i = 0; i < GW_N; i++) {
        size_t a = i % 3 == 2 ? 12 : 5;
        g->iov[i][0].base = g->data + off;
        g->iov[i][0].len = a;
        g->iov[i][1].base = g->data + off + a;
        g->iov[i][1].len = 12 - a;
        off += 12;
        g->req[i].data = g;
        CHECK_EQ(mux_write(&g->w, &g->req[i], g->iov[i], 2, gw_write_cb), 0);
    }
    mux_timer_t tick; /* a bound on every wait, should a completion never come */
    CHECK_EQ(mux_timer_init(&tick, ticker_cb), 0);
    CHECK_EQ(mux_timer_start(&loop, &tick, 5 * MS, 5 * MS), 0);
    while (!g->done && g->iteration < 400) {
        g->iteration++;
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    }
    CHECK_EQ(g->done, 1);
    CHECK_LE(g->rounds, 2);
    for (int i = 0; i < GW_N; i++)
        CHECK_EQ(g->order[i], i + 1);
    char got[sizeof g->data + 1];
    CHECK_EQ(read(sv[1], got, sizeof got), (ssize_t)sizeof g->data);
    CHECK(memcmp(got, g->data, sizeof g->data) == 0);
    CHECK_EQ(mux_timer_stop(&loop, &tick), 0);
    CHECK_EQ(mux_stream_close(&g->w, gw_closed_cb), 0);
    run_for(&loop, &g->closed, 2000, "the stream closed");
    loop_finish(&loop);
    close(sv[1]);
    free(g);
}

/* ---- one write of 2.5 GiB from one buffer ---- */

/* A send's length is an int in the kernel. On io_uring this failed before c2ca5a2; the
 * other backends passed. */

#define BIG_LEN  ((size_t)5 << 29) /* 2.5 GiB: above INT_MAX and MAX_RW_COUNT */
#define BIG_RBUF (1u << 20)

struct big {
    mux_stream_t w, r;
    mux_write_t req;
    mux_buf_t iov;
    char *rbuf, *zero;
    uint64_t got;
    int reads, nonzero, write_calls, write_status, close_calls;
    volatile int done, closed;
};

static void big_write_cb(mux_write_t *req, int status)
{
    struct big *b = req->data;
    b->write_calls++;
    b->write_status = status;
    if (b->got == BIG_LEN || status != 0)
        b->done = 1;
}

static void big_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct big *b = s->data;
    CHECK_GT(nread, 0); /* the writer never closes first */
    CHECK(buf == b->rbuf);
    CHECK_LE(nread, BIG_RBUF);
    CHECK_LE(b->got + (uint64_t)nread, BIG_LEN);
    if (memcmp(buf, b->zero, (size_t)nread) != 0)
        b->nonzero++; /* the mapping was never written: every byte is 0 */
    b->got += (uint64_t)nread;
    b->reads++;
    if (b->got == BIG_LEN && b->write_calls)
        b->done = 1;
}

static void big_closed_cb(mux_stream_t *s)
{
    struct big *b = s->data;
    if (++b->close_calls == 2)
        b->closed = 1;
}

TEST(write_of_more_than_2_gib_in_one_buffer) {
    harness_watchdog(100);
    /* Zero pages that are never written: the kernel maps its one zero page, no RAM. */
    char *mem = mmap(NULL, BIG_LEN, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        char why[128];
        snprintf(why, sizeof why, "cannot map 2.5 GiB of address space: %s", strerror(errno));
        SKIP(why);
    }
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    /* Bigger socket buffers mean fewer iterations; the kernel may clamp them. */
    int sz = 4 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    struct big *b = calloc(1, sizeof *b);
    CHECK(b != NULL);
    b->rbuf = malloc(BIG_RBUF);
    b->zero = calloc(1, BIG_RBUF);
    CHECK(b->rbuf && b->zero);
    b->w.data = b->r.data = b;
    CHECK_EQ(mux_stream_open(&loop, &b->w, sv[0]), 0);
    CHECK_EQ(mux_stream_open(&loop, &b->r, sv[1]), 0);
    CHECK_EQ(mux_read_start(&b->r, b->rbuf, BIG_RBUF, big_read_cb), 0);
    b->iov.base = mem;
    b->iov.len = BIG_LEN;
    b->req.data = b;
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_write(&b->w, &b->req, &b->iov, 1, big_write_cb), 0);
    CHECK_EQ(b->write_calls, 0);
    CHECK_GT(mux_stream_write_queue_size(&b->w), 0);
    run_for(&loop, &b->done, 80000, "the 2.5 GiB write called back and every byte read");
    fprintf(stderr, "2.5 GiB in %.2f s, %d reads\n", (double)(mono_ns() - t0) / 1e9, b->reads);
    CHECK_EQ(b->write_calls, 1);
    CHECK_EQ(b->write_status, 0);
    CHECK_EQ(b->got, BIG_LEN);
    CHECK_EQ(b->nonzero, 0);
    CHECK_EQ(mux_stream_write_queue_size(&b->w), 0);
    run_ms(&loop, 20);
    CHECK_EQ(b->write_calls, 1); /* exactly once */
    CHECK_EQ(b->got, BIG_LEN);   /* and not a byte more */
    CHECK_EQ(mux_stream_close(&b->w, big_closed_cb), 0);
    CHECK_EQ(mux_stream_close(&b->r, big_closed_cb), 0);
    run_for(&loop, &b->closed, 2000, "both streams closed");
    loop_finish(&loop);
    CHECK_EQ(munmap(mem, BIG_LEN), 0);
    free(b->rbuf);
    free(b->zero);
    free(b);
}

/* ---- when callbacks run ---- */

struct when {
    mux_stream_t s;
    mux_write_t w;
    mux_buf_t iov;
    char rbuf[16];
    int write_calls, write_status, close_calls;
    volatile int written, closed;
};

static void when_write_cb(mux_write_t *req, int status)
{
    struct when *x = req->data;
    x->write_calls++;
    x->write_status = status;
    x->written = 1;
}

static void when_closed_cb(mux_stream_t *s)
{
    struct when *x = s->data;
    x->close_calls++;
    x->closed = 1;
}

static void when_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    (void)s;
    (void)nread;
    (void)buf;
}

TEST(stream_write_and_close_callbacks_never_run_inside_the_call) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct when x;
    memset(&x, 0, sizeof x);
    x.s.data = &x;
    CHECK_EQ(mux_stream_open(&loop, &x.s, sv[0]), 0);
    x.iov.base = (char *)"abc";
    x.iov.len = 3;
    x.w.data = &x;
    CHECK_EQ(mux_write(&x.s, &x.w, &x.iov, 1, when_write_cb), 0);
    CHECK_EQ(x.write_calls, 0); /* written already (speculative), called back later */
    /* io_uring: the send goes to the kernel with the loop's next wait */
    CHECK_EQ(mux_stream_write_queue_size(&x.s), native_streams(&loop) ? 3 : 0);
    run_for(&loop, &x.written, 1000, "the write callback");
    CHECK_EQ(x.write_calls, 1);
    CHECK_EQ(x.write_status, 0);
    CHECK_EQ(mux_stream_close(&x.s, when_closed_cb), 0);
    CHECK_EQ(x.close_calls, 0);
    run_for(&loop, &x.closed, 1000, "the close callback");
    CHECK_EQ(x.close_calls, 1);
    loop_finish(&loop);
    char buf[8];
    CHECK_EQ(read(sv[1], buf, sizeof buf), 3);
    close(sv[1]);
}

/* A write that finished at once is waiting for delivery; stopping the reads before the loop
 * runs must not lose its callback (every queued write is called back exactly once). */
TEST(stream_finished_write_is_called_back_after_read_stop_outside_callbacks) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct when x;
    memset(&x, 0, sizeof x);
    x.s.data = &x;
    CHECK_EQ(mux_stream_open(&loop, &x.s, sv[0]), 0);
    CHECK_EQ(mux_read_start(&x.s, x.rbuf, sizeof x.rbuf, when_read_cb), 0);
    x.iov.base = (char *)"abc";
    x.iov.len = 3;
    x.w.data = &x;
    CHECK_EQ(mux_write(&x.s, &x.w, &x.iov, 1, when_write_cb), 0);
    CHECK_EQ(mux_read_stop(&x.s), 0);
    run_for(&loop, &x.written, 1000, "the write callback after mux_read_stop");
    CHECK_EQ(x.write_calls, 1);
    CHECK_EQ(x.write_status, 0);
    CHECK_EQ(mux_stream_close(&x.s, when_closed_cb), 0);
    run_for(&loop, &x.closed, 1000, "the close callback");
    loop_finish(&loop);
    close(sv[1]);
}

/* ---- a write done inside mux_write is called back before the next read ---- */

/* An echo that keeps reading: every 4-byte read is written back at once, and reading stops
 * only while bytes of an echo are still queued (as examples/echo-server does). */
struct relay {
    mux_stream_t s;
    mux_write_t w[16];
    mux_buf_t iov[16];
    char rbuf[4];
    char out[16][4];
    int reads, written, done_at_once, uncalled_at_once, stopped;
    size_t got;
};

static void relay_read_cb(mux_stream_t *s, ssize_t nread, char *buf);

static void relay_write_cb(mux_write_t *req, int status)
{
    struct relay *r = req->data;
    int i = (int)(req - r->w);
    CHECK_EQ(status, 0);
    CHECK_EQ(i, r->written); /* in the order they were queued */
    r->written++;
    if (r->iov[i].len == 0) { /* marked done at once by relay_read_cb */
        r->uncalled_at_once--;
    }
    if (r->stopped && mux_stream_write_queue_size(&r->s) == 0) {
        r->stopped = 0;
        CHECK_EQ(mux_read_start(&r->s, r->rbuf, sizeof r->rbuf, relay_read_cb), 0);
    }
}

static void relay_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct relay *r = s->data;
    CHECK_GT(nread, 0);
    CHECK(buf == r->rbuf);
    /* The guarantee: no write that was done inside mux_write waits for its callback. */
    CHECK_EQ(r->uncalled_at_once, 0);
    int i = r->reads++;
    CHECK_LT(i, 16);
    memcpy(r->out[i], buf, (size_t)nread);
    r->iov[i] = mux_buf_init(r->out[i], (size_t)nread);
    r->w[i].data = r;
    r->got += (size_t)nread;
    CHECK_EQ(mux_write(s, &r->w[i], &r->iov[i], 1, relay_write_cb), 0);
    if (mux_stream_write_queue_size(s) == 0) {
        r->done_at_once++;
        r->uncalled_at_once++;
        r->iov[i].len = 0; /* the mark: its bytes are out, its request waits for delivery */
    } else {
        r->stopped = 1;
        CHECK_EQ(mux_read_stop(s), 0);
    }
}

TEST(stream_write_done_inside_mux_write_is_called_back_before_the_next_read) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct relay *r = calloc(1, sizeof *r);
    CHECK(r != NULL);
    r->s.data = r;
    CHECK_EQ(mux_stream_open(&loop, &r->s, sv[0]), 0);
    CHECK_EQ(mux_read_start(&r->s, r->rbuf, sizeof r->rbuf, relay_read_cb), 0);
    char sent[64], back[64];
    for (size_t k = 0; k < sizeof sent; k++)
        sent[k] = (char)('A' + k % 26);
    write_all(sv[1], sent, sizeof sent); /* 16 reads of a full buffer */
    run_until_count(&loop, &r->written, 16, 2000, "16 echoes written back");
    CHECK_EQ(r->reads, 16);
    CHECK_EQ(r->written, 16);
    CHECK_EQ(r->got, sizeof sent);
    CHECK_EQ(r->uncalled_at_once, 0);
    /* Where sends are emulated, the socket had room for every echo: each was done at once,
     * and reading never stopped. io_uring's go with the next wait: reading stopped for each. */
    CHECK_EQ(r->done_at_once, native_streams(&loop) ? 0 : 16);
    size_t have = 0;
    while (have < sizeof back) {
        ssize_t n = read(sv[1], back + have, sizeof back - have);
        CHECK_GT(n, 0);
        have += (size_t)n;
    }
    CHECK(memcmp(sent, back, sizeof sent) == 0);
    CHECK_EQ(mux_stream_close(&r->s, NULL), 0);
    loop_finish(&loop);
    close(sv[1]);
    free(r);
}

/* ---- mux_try_write: a send now, or nothing ---- */

TEST(stream_try_write_sends_at_once_with_nothing_queued_or_says_eagain_where_the_kernel_sends) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_stream_t s;
    CHECK_EQ(mux_stream_open(&loop, &s, sv[0]), 0);
    mux_buf_t two[3] = {mux_buf_init((char *)"ab", 2), mux_buf_init(NULL, 0),
                        mux_buf_init((char *)"cde", 3)};
    ssize_t w = mux_try_write(&s, two, 3);
    CHECK_EQ(mux_stream_write_queue_size(&s), 0); /* nothing queued, whatever happened */
    char buf[16];
    if (native_streams(&loop)) {
        CHECK_EQ(w, -EAGAIN); /* io_uring, IOCP: the kernel's queue makes the sends */
        CHECK_EQ(drain(sv[1]), 0);
    } else {
        CHECK_EQ(w, 5); /* gathered into one send */
        CHECK_EQ(read(sv[1], buf, sizeof buf), 5);
        CHECK(memcmp(buf, "abcde", 5) == 0);
    }
    run_ms(&loop, 10); /* no callback of any kind comes later: there is no request */
    CHECK_EQ(drain(sv[1]), 0);
    CHECK_EQ(mux_stream_close(&s, NULL), 0);
    loop_finish(&loop);
    close(sv[1]);
}

#define TRY_BIG (16u << 20) /* more than a socket pair holds */

struct tryw {
    mux_stream_t s;
    mux_write_t w;
    mux_buf_t iov;
    char *data;
    int write_calls, write_status;
    volatile int written;
};

static void tryw_write_cb(mux_write_t *req, int status)
{
    struct tryw *x = req->data;
    x->write_calls++;
    x->write_status = status;
    x->written = 1;
}

/* A stream on one end of a socket pair, and TRY_BIG bytes of the pattern to send. */
static struct tryw *tryw_open(mux_loop_t *loop, int sv[2])
{
    pattern_init();
    make_socketpair(sv);
    struct tryw *x = calloc(1, sizeof *x);
    CHECK(x != NULL);
    CHECK((x->data = page_alloc(TRY_BIG)) != NULL);
    pattern_fill(x->data, 0, TRY_BIG);
    CHECK_EQ(mux_stream_open(loop, &x->s, sv[0]), 0);
    x->w.data = x;
    return x;
}

static void tryw_close(mux_loop_t *loop, struct tryw *x, int peer)
{
    CHECK_EQ(mux_stream_close(&x->s, NULL), 0);
    loop_finish(loop);
    close(peer);
    free(x->data);
    free(x);
}

/* Reads what the peer has now, checking that it is the pattern from offset *got on. */
static void tryw_read_now(int peer, uint64_t *got, uint64_t want)
{
    static char chunk[65536];
    for (;;) {
        ssize_t n = read(peer, chunk, sizeof chunk);
        if (n <= 0) {
            CHECK(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
            return;
        }
        CHECK_LE(*got + (uint64_t)n, want);
        if (!pattern_ok(chunk, *got, (size_t)n))
            harness_fail(__FILE__, __LINE__, "the peer got the bytes in order", NULL);
        *got += (uint64_t)n;
    }
}

/* Reads the peer while the loop runs, until `want` bytes came (from *got on) and the write
 * was called back; nothing may follow them. */
static void tryw_receive(mux_loop_t *loop, struct tryw *x, int peer, uint64_t got,
                         uint64_t want)
{
    for (long i = 0; (got < want || !x->written) && i < 2000000; i++) {
        CHECK_GE(mux_run(loop, MUX_RUN_NOWAIT), 0);
        tryw_read_now(peer, &got, want);
    }
    CHECK_EQ(got, want);
    CHECK_EQ(x->write_calls, 1);
    CHECK_EQ(x->write_status, 0);
    CHECK_EQ(drain(peer), 0);
}

/* A queued write goes first: mux_try_write sends nothing past it, so the bytes stay in the
 * order they were given. */
TEST(stream_try_write_says_eagain_while_a_write_is_queued_and_the_order_holds) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    struct tryw *x = tryw_open(&loop, sv);
    x->iov = mux_buf_init(x->data, TRY_BIG);
    CHECK_EQ(mux_write(&x->s, &x->w, &x->iov, 1, tryw_write_cb), 0);
    CHECK_GT(mux_stream_write_queue_size(&x->s), 0);
    /* The peer empties the socket, the loop not yet told: the socket has room, but the
     * queued write's bytes come first. */
    uint64_t got = 0;
    tryw_read_now(sv[1], &got, TRY_BIG);
    mux_buf_t one = mux_buf_init((char *)"X", 1);
    CHECK_EQ(mux_try_write(&x->s, &one, 1), -EAGAIN);
    tryw_receive(&loop, x, sv[1], got, TRY_BIG); /* the rest of the write, and no X */
    /* The queue is empty again: where the program sends, the byte goes now. */
    CHECK_EQ(mux_try_write(&x->s, &one, 1), native_streams(&loop) ? -EAGAIN : 1);
    CHECK_EQ(drain(sv[1]), native_streams(&loop) ? 0 : 1);
    tryw_close(&loop, x, sv[1]);
}

/* The echo server's idiom: what the socket takes goes at once, and the rest is queued with
 * mux_write. A full socket takes part of a big buffer, then nothing (-EAGAIN). */
TEST(stream_try_write_on_a_filling_socket_is_short_then_eagain_and_mux_write_sends_the_rest) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    struct tryw *x = tryw_open(&loop, sv);
    mux_buf_t all = mux_buf_init(x->data, TRY_BIG);
    ssize_t n = mux_try_write(&x->s, &all, 1);
    if (native_streams(&loop)) {
        CHECK_EQ(n, -EAGAIN);
        n = 0;
    } else {
        CHECK_GT(n, 0);
        CHECK_LT(n, (ssize_t)TRY_BIG);
        /* Full now, or soon: a TCP pair (Windows) may still move bytes on to the peer. */
        ssize_t more = 1;
        for (int i = 0; i < 1000 && more > 0; i++) {
            mux_buf_t rest = mux_buf_init(x->data + n, TRY_BIG - (size_t)n);
            more = mux_try_write(&x->s, &rest, 1);
            if (more > 0)
                n += more;
        }
        CHECK_EQ(more, -EAGAIN);
        CHECK_LT(n, (ssize_t)TRY_BIG);
    }
    CHECK_EQ(mux_stream_write_queue_size(&x->s), 0);
    x->iov = mux_buf_init(x->data + n, TRY_BIG - (size_t)n);
    CHECK_EQ(mux_write(&x->s, &x->w, &x->iov, 1, tryw_write_cb), 0);
    tryw_receive(&loop, x, sv[1], 0, TRY_BIG);
    tryw_close(&loop, x, sv[1]);
}

/* A peer that is gone: the send's error, with no SIGPIPE (the process would die of it). */
TEST(stream_try_write_to_a_closed_peer_returns_the_send_error) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_stream_t s;
    CHECK_EQ(mux_stream_open(&loop, &s, sv[0]), 0);
    close(sv[1]);
    mux_buf_t one = mux_buf_init((char *)"X", 1);
    ssize_t w = mux_try_write(&s, &one, 1);
    /* A Unix socket pair fails the first send; a TCP pair (Windows) may take one more, until
     * the peer's reset is back. */
    for (int i = 0; i < 100 && w == 1 && !native_streams(&loop); i++) {
        run_ms(&loop, 5);
        w = mux_try_write(&s, &one, 1);
    }
    if (native_streams(&loop))
        CHECK_EQ(w, -EAGAIN);
    else
        CHECK(w == -EPIPE || w == -ECONNRESET || w == -ECONNABORTED);
    CHECK_EQ(mux_stream_close(&s, NULL), 0);
    loop_finish(&loop);
}

TEST(stream_loop_close_is_ebusy_until_the_stream_close_callback_ran) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct when x;
    memset(&x, 0, sizeof x);
    x.s.data = &x;
    CHECK_EQ(mux_stream_open(&loop, &x.s, sv[0]), 0);
    CHECK_EQ(mux_loop_close(&loop), -EBUSY); /* an idle open stream counts */
    CHECK_EQ(mux_stream_close(&x.s, when_closed_cb), 0);
    CHECK_EQ(mux_loop_close(&loop), -EBUSY); /* closing, its callback has not run */
    run_for(&loop, &x.closed, 1000, "the close callback");
    CHECK_EQ(x.close_calls, 1);
    loop_finish(&loop);
    close(sv[1]);
}

/* ---- what a write's byte count can be ---- */

static int huge_calls, huge_status;

static void huge_write_cb(mux_write_t *req, int status)
{
    (void)req;
    huge_calls++;
    huge_status = status;
}

/* The queue's size is an ssize_t, so no write may take it past SSIZE_MAX: one write whose
 * buffers add up past it is refused as writev refuses it (-EINVAL), and one that would take the
 * queue past it with -EOVERFLOW. Nothing of the refused writes is queued or called back. The
 * queued lengths are never sent: the loop does not run before the close cancels them. */
#define SSZ_MAX (SIZE_MAX >> 1) /* ssize_t's largest */

TEST(stream_write_queue_size_never_passes_ssize_max) {
#ifdef _WIN32
    SKIP("Windows has no such thing: a buffer (WSABUF) holds at most ULONG_MAX bytes, so a "
         "write past SSIZE_MAX takes 2^31 buffers, more than a test can lay out");
#endif
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    struct tryw *x = tryw_open(&loop, sv);
    x->iov = mux_buf_init(x->data, TRY_BIG); /* more than the pair holds: the queue stays */
    CHECK_EQ(mux_write(&x->s, &x->w, &x->iov, 1, tryw_write_cb), 0);
    ssize_t q = mux_stream_write_queue_size(&x->s);
    CHECK_GT(q, 0);
    CHECK_LE(q, (ssize_t)TRY_BIG);
    /* One write past SSIZE_MAX on its own, in one buffer or in two. */
    mux_write_t w1, w2, w3;
    mux_buf_t past[2] = {mux_buf_init(x->data, SSZ_MAX), mux_buf_init(x->data, 1)};
    CHECK_EQ(mux_write(&x->s, &w1, past, 2, huge_write_cb), -EINVAL);
    mux_buf_t one_past = mux_buf_init(x->data, SSZ_MAX + 1);
    CHECK_EQ(mux_write(&x->s, &w1, &one_past, 1, huge_write_cb), -EINVAL);
    CHECK_EQ(mux_try_write(&x->s, past, 2), -EINVAL);
    CHECK_EQ(mux_stream_write_queue_size(&x->s), q);
    /* Up to SSIZE_MAX exactly, the queue takes it, and counts it. */
    mux_buf_t fill = mux_buf_init(x->data, SSZ_MAX - (size_t)q);
    CHECK_EQ(mux_write(&x->s, &w2, &fill, 1, huge_write_cb), 0);
    CHECK_EQ(mux_stream_write_queue_size(&x->s), (ssize_t)SSZ_MAX);
    /* One byte more is one the queue cannot count; an empty write still goes. */
    mux_buf_t one = mux_buf_init(x->data, 1);
    CHECK_EQ(mux_write(&x->s, &w3, &one, 1, huge_write_cb), -EOVERFLOW);
    CHECK_EQ(mux_stream_write_queue_size(&x->s), (ssize_t)SSZ_MAX);
    CHECK_EQ(mux_write(&x->s, &w3, &one, 0, huge_write_cb), 0);
    CHECK_STR_EQ(mux_strerror(-EOVERFLOW),
                 "EOVERFLOW: value too large (a count past what its type holds)");
    /* The close cancels the queued writes, the huge one and the empty one included. */
    CHECK_EQ(mux_stream_close(&x->s, NULL), 0);
    loop_finish(&loop);
    CHECK_EQ(x->write_calls, 1);
    CHECK(x->write_status == -ECANCELED || x->write_status == 0);
    CHECK_EQ(huge_calls, 2);
    CHECK_EQ(huge_status, -ECANCELED);
    close(sv[1]);
    free(x->data);
    free(x);
}

/* Empty buffers before the bytes are passed by, however many: 79 empty ones and one byte send
 * that byte where the program sends (they are not -EAGAIN, which says the socket is full),
 * and the stream is not taken for full: a mux_write after it goes out at once. */
TEST(stream_try_write_passes_by_empty_buffers_past_the_gather_limit) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_stream_t s;
    CHECK_EQ(mux_stream_open(&loop, &s, sv[0]), 0);
    mux_buf_t bufs[80];
    for (int i = 0; i < 80; i++)
        bufs[i] = mux_buf_init(NULL, 0);
    bufs[79] = mux_buf_init((char *)"Z", 1);
    ssize_t w = mux_try_write(&s, bufs, 80);
    char got[8];
    if (native_streams(&loop)) {
        CHECK_EQ(w, -EAGAIN);
    } else {
        CHECK_EQ(w, 1);
        CHECK_EQ(read(sv[1], got, sizeof got), 1);
        CHECK_EQ(got[0], 'Z');
        /* Bytes among many empty ones, past the first 64 buffers: the first 64 that hold
         * bytes go in one send. */
        static char many[200];
        for (int i = 0; i < 200; i++)
            many[i] = (char)('a' + i % 26);
        mux_buf_t sparse[400];
        for (int i = 0; i < 400; i++)
            sparse[i] = i % 2 ? mux_buf_init(many + i / 2, 1) : mux_buf_init(NULL, 0);
        CHECK_EQ(mux_try_write(&s, sparse, 400), 64);
        char back[200];
        CHECK_EQ(read(sv[1], back, sizeof back), 64);
        CHECK(memcmp(back, many, 64) == 0);
    }
    /* The stream did not note itself full: the write goes within the call, where the program
     * sends (its callback then comes from the loop without a wait for writability). */
    mux_write_t req;
    huge_calls = 0;
    CHECK_EQ(mux_write(&s, &req, &bufs[79], 1, huge_write_cb), 0);
    if (!native_streams(&loop)) {
        CHECK_EQ(mux_stream_write_queue_size(&s), 0);
        CHECK_EQ(read(sv[1], got, sizeof got), 1);
    }
    for (int i = 0; i < 1000 && huge_calls == 0; i++)
        run_ms(&loop, 1);
    CHECK_EQ(huge_calls, 1);
    CHECK_EQ(huge_status, 0);
    if (native_streams(&loop))
        CHECK_EQ(read(sv[1], got, sizeof got), 1);
    CHECK_EQ(got[0], 'Z');
    CHECK_EQ(mux_stream_close(&s, NULL), 0);
    loop_finish(&loop);
    close(sv[1]);
}
