/* Regressions of the io_uring native stream path (review findings fixed in c2ca5a2): a
 * forked child that closes streams before its first mux_run (it must not touch the parent's
 * SQ ring), a listener with a flooded backlog next to streams' writes (a refused accept
 * completion must not stall the CQ ring, hold the writes back for long, nor make the wait
 * spin on an overflowing CQ ring), one write of more than 2 GiB (a send's length is an int
 * in the kernel), and a pool attached to an io_uring loop while a reader on another loop
 * reads from its free list (-ENOBUFS, never a buffer the kernel may fill). Every case runs
 * on every backend and asserts the same outcome there, except where the native path must
 * differ through the public API (the pool shared with another loop). Each of them failed
 * on io_uring before c2ca5a2 and passed on the other backends. */
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "stream_util.h"

/* CPU time of the process (user and system), in nanoseconds. */
static uint64_t cpu_ns(void)
{
    struct rusage ru;
    CHECK_EQ(getrusage(RUSAGE_SELF, &ru), 0);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

static void *page_alloc(size_t len)
{
    void *p = NULL;
    CHECK_EQ(posix_memalign(&p, 4096, len), 0);
    memset(p, 0, len);
    return p;
}

/* ---- 1. a forked child closes every stream before its first mux_run ---------------- */

#define FK_N     300
#define FK_SIZE  256
#define FK_COUNT 512
#define FK_MSG   80

struct fk;

struct fks {
    mux_stream_t s;
    struct fk *f;
    int peer;
    char want[FK_MSG];
    size_t wantlen;
    char got[FK_SIZE];
    size_t ngot;
    int reads, close_calls;
};

struct fk {
    struct fks st[FK_N];
    mux_bufpool_t pool;
    uint32_t slots[FK_COUNT];
    char *mem;
    int in_child;
    int child_reads, child_closed, child_close_twice;
    int complete; /* streams with all their message */
    int closed;
};

static void fk_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct fks *x = s->data;
    struct fk *f = x->f;
    if (f->in_child) { /* the child closed everything before it ran: nothing may come */
        f->child_reads++;
        if (nread > 0 && in_pool(buf, f->mem, FK_SIZE, FK_COUNT))
            mux_bufpool_put(&f->pool, buf);
        return;
    }
    CHECK_GT(nread, 0);
    CHECK(in_pool(buf, f->mem, FK_SIZE, FK_COUNT));
    CHECK_LE(x->ngot + (size_t)nread, x->wantlen); /* nothing more than its message */
    memcpy(x->got + x->ngot, buf, (size_t)nread);
    x->ngot += (size_t)nread;
    x->reads++;
    CHECK_EQ(mux_bufpool_put(&f->pool, buf), 0);
    if (x->ngot == x->wantlen) {
        if (memcmp(x->got, x->want, x->wantlen) != 0)
            harness_fail(__FILE__, __LINE__, "each stream reads exactly its own message", x->got);
        f->complete++;
    }
}

static void fk_closed_cb(mux_stream_t *s)
{
    struct fks *x = s->data;
    struct fk *f = x->f;
    if (f->in_child) {
        if (x->close_calls++ == 0)
            f->child_closed++;
        else
            f->child_close_twice++;
        return;
    }
    x->close_calls++;
    CHECK_EQ(x->close_calls, 1);
    f->closed++;
}

/* What the child saw, as bits of its exit status (0: all well). */
enum {
    FKC_CLOSE_REFUSED = 1, /* mux_stream_close did not return 0 */
    FKC_RUN_ERROR = 2,     /* mux_run failed */
    FKC_TIMEOUT = 4,       /* the close callbacks did not all come within 5 s */
    FKC_READ = 8,          /* a read callback ran in the child */
    FKC_TWICE = 16,        /* a close callback ran twice */
    FKC_POOL = 32,         /* the pool is not whole after the closes */
    FKC_LOOP_CLOSE = 64,   /* the child's loop did not close clean */
};

static _Noreturn void fk_child_side(mux_loop_t *loop, struct fk *f)
{
    alarm(10); /* the harness's alarm is not inherited; its handler exits 1 */
    f->in_child = 1;
    int code = 0;
    /* Before any mux_run of the child: the ring the loop still holds is the parent's. */
    for (int i = 0; i < FK_N; i++)
        if (mux_stream_close(&f->st[i].s, fk_closed_cb) != 0)
            code |= FKC_CLOSE_REFUSED;
    uint64_t end = mono_ns() + 5000 * MS;
    while (f->child_closed < FK_N) {
        if (mux_run(loop, MUX_RUN_NOWAIT) < 0) {
            code |= FKC_RUN_ERROR;
            break;
        }
        if (mono_ns() > end) {
            code |= FKC_TIMEOUT;
            break;
        }
    }
    if (f->child_reads)
        code |= FKC_READ;
    if (f->child_close_twice)
        code |= FKC_TWICE;
    if (mux_bufpool_available(&f->pool) != FK_COUNT)
        code |= FKC_POOL;
    if (!(code & (FKC_TIMEOUT | FKC_RUN_ERROR)) &&
        (mux_run(loop, MUX_RUN_NOWAIT) != 0 || mux_loop_close(loop) != 0))
        code |= FKC_LOOP_CLOSE;
    _exit(code);
}

TEST(fork_child_closes_streams_before_running_parent_keeps_serving) {
    if (raise_nofile_limit() < 2 * FK_N + 64)
        SKIP("RLIMIT_NOFILE too low for 300 socketpairs");
    mux_loop_t loop;
    loop_open(&loop);
    struct fk *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    f->mem = page_alloc((size_t)FK_SIZE * FK_COUNT);
    CHECK_EQ(mux_bufpool_init(&f->pool, f->mem, FK_SIZE, FK_COUNT, f->slots), 0);
    uint64_t st = 0x5eed;
    for (int i = 0; i < FK_N; i++) {
        struct fks *x = &f->st[i];
        int sv[2];
        make_socketpair(sv);
        x->f = f;
        x->peer = sv[1];
        x->s.data = x;
        /* A distinct message of a distinct length (20 to 75 bytes). */
        int n = snprintf(x->want, sizeof x->want, "stream %03d: ", i);
        CHECK_GT(n, 0);
        for (size_t j = (size_t)n; j < sizeof x->want; j++)
            x->want[j] = (char)('a' + prng_next(&st) % 26);
        x->wantlen = 20 + (size_t)(i * 7 % 56);
        CHECK_LE(x->wantlen, sizeof x->want);
        CHECK_EQ(mux_stream_open(&loop, &x->s, sv[0]), 0);
        CHECK_EQ(mux_read_start_pool(&x->s, &f->pool, fk_read_cb), 0);
    }
    /* One iteration: the receives (or polls) are in the kernel before the fork. */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), FK_N);
    CHECK_EQ(f->complete, 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0)
        fk_child_side(&loop, f);
    int status = 0;
    pid_t w;
    do
        w = waitpid(pid, &status, 0);
    while (w < 0 && errno == EINTR);
    CHECK_EQ(w, pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr,
                "child: %s %d (bits: 1 close refused, 2 run error, 4 timeout, 8 read, "
                "16 closed twice, 32 pool, 64 loop close)\n",
                WIFEXITED(status) ? "exit" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    /* The parent's streams still read, each exactly its own message. */
    for (int i = 0; i < FK_N; i++)
        write_all(f->st[i].peer, f->st[i].want, f->st[i].wantlen);
    mux_timer_t tick;
    CHECK_EQ(mux_timer_init(&tick, ticker_cb), 0);
    CHECK_EQ(mux_timer_start(&loop, &tick, 5 * MS, 5 * MS), 0);
    uint64_t end = mono_ns() + 5000 * MS;
    while (f->complete < FK_N) {
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
        if (f->complete < FK_N && mono_ns() > end) {
            int stuck = 0;
            for (int i = 0; i < FK_N; i++)
                stuck += f->st[i].ngot < f->st[i].wantlen;
            fprintf(stderr, "%d of %d streams never got their message\n", stuck, FK_N);
            harness_fail(__FILE__, __LINE__, "every stream of the parent reads its message",
                         "not within 5 s");
        }
    }
    run_ms(&loop, 20); /* and nothing more */
    CHECK_EQ(mux_timer_stop(&loop, &tick), 0);
    CHECK_EQ(f->complete, FK_N);
    for (int i = 0; i < FK_N; i++) {
        CHECK_EQ(f->st[i].ngot, f->st[i].wantlen);
        CHECK_GE(f->st[i].reads, 1);
    }
    CHECK_EQ(mux_bufpool_available(&f->pool), FK_COUNT);
    for (int i = 0; i < FK_N; i++)
        CHECK_EQ(mux_stream_close(&f->st[i].s, fk_closed_cb), 0);
    end = mono_ns() + 2000 * MS;
    while (f->closed < FK_N) {
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(mux_bufpool_available(&f->pool), FK_COUNT);
    loop_finish(&loop);
    for (int i = 0; i < FK_N; i++)
        close(f->st[i].peer);
    free(f->mem);
    free(f);
}

/* ---- 2. a listener's flooded backlog next to streams' writes ------------------------ */

#define FL_N     600   /* connections waiting in the backlog */
#define FL_PAIRS 32    /* streams with a write queued */
#define FL_BYTES 65536 /* fits in a socketpair's buffer: one send */
/* The writes complete in the first iteration or two on every backend: on io_uring the
 * accept completions that the listener has no room for are kept back, and only those (its
 * own later ones with them), not the other operations' completions. Keeping the kernel's
 * order across all operations made them wait for the whole backlog (iteration 38 of 55,
 * or 600 with a listener batch of 1). */
#define FL_ITERS 3

struct flood;

struct flw {
    mux_stream_t s;
    mux_write_t w;
    mux_buf_t iov;
    struct flood *fl;
    int peer;
    int calls, status, iter, close_calls;
};

struct flood {
    mux_listener_t l;
    uint16_t port_of[FL_N];   /* the local port of each client */
    unsigned char seen[FL_N]; /* per client: accepted how many times */
    int accepted, accept_errors, unknown;
    struct flw st[FL_PAIRS];
    char *wbuf;
    int iter, writes_done, last_write_iter, accepted_at_last_write, closed;
    volatile int listener_closed;
};

static void fl_accept_cb(mux_listener_t *l, int fd, int status)
{
    struct flood *fl = l->data;
    if (fd < 0) {
        fl->accept_errors++;
        fprintf(stderr, "accept error %d\n", status);
        return;
    }
    CHECK_EQ(status, 0);
    struct sockaddr_storage peer;
    socklen_t len = sizeof peer;
    CHECK_EQ(getpeername(fd, (struct sockaddr *)&peer, &len), 0);
    uint16_t port = addr_port(&peer);
    int found = -1;
    for (int i = 0; i < FL_N && found < 0; i++)
        if (fl->port_of[i] == port)
            found = i;
    if (found < 0)
        fl->unknown++;
    else
        fl->seen[found]++;
    fl->accepted++;
    CHECK_EQ(close(fd), 0);
}

static void fl_write_cb(mux_write_t *req, int status)
{
    struct flw *x = req->data;
    struct flood *fl = x->fl;
    x->calls++;
    x->status = status;
    x->iter = fl->iter;
    fl->writes_done++;
    fl->last_write_iter = fl->iter;
    fl->accepted_at_last_write = fl->accepted;
}

static void fl_closed_cb(mux_stream_t *s)
{
    struct flw *x = s->data;
    x->close_calls++;
    x->fl->closed++;
}

static void fl_listener_closed_cb(mux_listener_t *l)
{
    struct flood *fl = l->data;
    fl->listener_closed = 1;
}

/* `entries`: the io_uring SQ ring size (its CQ ring is twice that), or NULL for the
 * default (a CQ ring larger than the backlog). */
static void flood_run(const char *entries)
{
    uint64_t t0 = mono_ns();
    mux_loop_t loop;
    if (entries)
        CHECK_EQ(setenv("IOMUX_URING_ENTRIES", entries, 1), 0);
    loop_open(&loop);
    CHECK_EQ(unsetenv("IOMUX_URING_ENTRIES"), 0);
    struct flood *fl = calloc(1, sizeof *fl);
    CHECK(fl != NULL);
    CHECK((fl->wbuf = malloc((size_t)FL_BYTES * FL_PAIRS)) != NULL);
    pattern_init();
    pattern_fill(fl->wbuf, 0, (size_t)FL_BYTES * FL_PAIRS);
    /* The streams first, so that their fds are low (select watches fds below FD_SETSIZE). */
    for (int i = 0; i < FL_PAIRS; i++) {
        struct flw *x = &fl->st[i];
        int sv[2];
        make_socketpair(sv);
        x->fl = fl;
        x->peer = sv[1];
        x->iter = -1;
        x->s.data = x;
        CHECK_EQ(mux_stream_open(&loop, &x->s, sv[0]), 0);
    }
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    mux_listen_options_t opts = {.backlog = 2 * FL_N};
    fl->l.data = fl;
    CHECK_EQ(mux_listen(&loop, &fl->l, (struct sockaddr *)&a, alen, &opts, fl_accept_cb), 0);
    alen = sizeof a;
    CHECK_EQ(mux_listener_address(&fl->l, (struct sockaddr *)&a, &alen), 0);
    /* The backlog fills before the loop ever runs: blocking connects, completed by the
     * kernel without an accept. */
    int *cfd = calloc(FL_N, sizeof *cfd);
    CHECK(cfd != NULL);
    for (int i = 0; i < FL_N; i++) {
        cfd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_GE(cfd[i], 0);
        CHECK_EQ(connect(cfd[i], (struct sockaddr *)&a, alen), 0);
        struct sockaddr_storage me;
        socklen_t mlen = sizeof me;
        CHECK_EQ(getsockname(cfd[i], (struct sockaddr *)&me, &mlen), 0);
        fl->port_of[i] = addr_port(&me);
    }
    /* Then a write on each stream, queued behind the listener's accept. */
    for (int i = 0; i < FL_PAIRS; i++) {
        struct flw *x = &fl->st[i];
        x->iov.base = fl->wbuf + (size_t)i * FL_BYTES;
        x->iov.len = FL_BYTES;
        x->w.data = x;
        CHECK_EQ(mux_write(&x->s, &x->w, &x->iov, 1, fl_write_cb), 0);
    }
    CHECK_EQ(fl->writes_done, 0); /* never from inside mux_write */
    mux_timer_t tick;
    CHECK_EQ(mux_timer_init(&tick, ticker_cb), 0);
    CHECK_EQ(mux_timer_start(&loop, &tick, 5 * MS, 5 * MS), 0);
    uint64_t t1 = mono_ns(), end = t1 + 4000 * MS, longest = 0, cpu1 = cpu_ns();
    while (fl->writes_done < FL_PAIRS || fl->accepted < FL_N) {
        fl->iter++;
        uint64_t t = mono_ns();
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
        t = mono_ns() - t;
        longest = t > longest ? t : longest;
        if (fl->writes_done < FL_PAIRS && fl->iter >= FL_ITERS) {
            fprintf(stderr, "after %d iterations: %d of %d writes called back, %d accepted\n",
                    fl->iter, fl->writes_done, FL_PAIRS, fl->accepted);
            harness_fail(__FILE__, __LINE__, "every write called back within 3 iterations",
                         "not so");
        }
        if (mono_ns() > end) {
            fprintf(stderr, "after %d iterations: accepted %d, writes called back %d\n", fl->iter,
                    fl->accepted, fl->writes_done);
            harness_fail(__FILE__, __LINE__, "every connection accepted and every write done",
                         "not within 4 s");
        }
    }
    uint64_t cpu = cpu_ns() - cpu1;
    fprintf(stderr,
            "ring %s: last write called back in iteration %d (%d of %d connections accepted "
            "by then); all accepted after %d iterations, %.1f ms, %.1f ms of CPU; longest "
            "iteration %.1f ms\n",
            entries ? entries : "default", fl->last_write_iter, fl->accepted_at_last_write, FL_N,
            fl->iter, (double)(mono_ns() - t1) / 1e6, (double)cpu / 1e6, (double)longest / 1e6);
    /* The wait never spun: 600 accepts and 32 sends cost a few ms of CPU, not the ~0.4 s
     * per iteration of a million enters that a full CQ ring with a refused completion at
     * its head cost (CPU time, so that a loaded machine does not make it flaky). */
    CHECK_LT(cpu, 200 * MS);
    for (int i = 0; i < FL_PAIRS; i++) {
        struct flw *x = &fl->st[i];
        CHECK_EQ(x->calls, 1);
        CHECK_EQ(x->status, 0);
        CHECK_GE(x->iter, 1);
        CHECK_LT(x->iter, FL_ITERS);
        /* The bytes really left, intact. */
        char rbuf[FL_BYTES];
        size_t got = 0;
        while (got < FL_BYTES) {
            ssize_t n = read(x->peer, rbuf + got, FL_BYTES - got);
            if (n < 0 && errno == EINTR)
                continue;
            CHECK_GT(n, 0); /* the write is done: every byte is in the socket */
            got += (size_t)n;
        }
        CHECK(pattern_ok(rbuf, (uint64_t)i * FL_BYTES, FL_BYTES));
        CHECK_EQ(drain(x->peer), 0);
    }
    /* Nothing more comes: every connection exactly once, every write once. */
    run_ms(&loop, 30);
    CHECK_EQ(mux_timer_stop(&loop, &tick), 0);
    CHECK_EQ(fl->accepted, FL_N);
    CHECK_EQ(fl->unknown, 0);
    CHECK_EQ(fl->accept_errors, 0);
    for (int i = 0; i < FL_N; i++)
        CHECK_EQ(fl->seen[i], 1);
    CHECK_EQ(fl->writes_done, FL_PAIRS);
    for (int i = 0; i < FL_PAIRS; i++)
        CHECK_EQ(mux_stream_close(&fl->st[i].s, fl_closed_cb), 0);
    CHECK_EQ(mux_listener_close(&fl->l, fl_listener_closed_cb), 0);
    run_for(&loop, &fl->listener_closed, 2000, "the listener closed");
    end = mono_ns() + 2000 * MS;
    while (fl->closed < FL_PAIRS) {
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        CHECK_LT(mono_ns(), end);
    }
    for (int i = 0; i < FL_PAIRS; i++)
        CHECK_EQ(fl->st[i].close_calls, 1);
    loop_finish(&loop);
    uint64_t elapsed = mono_ns() - t0;
    fprintf(stderr, "ring %s: whole run %.1f ms\n", entries ? entries : "default",
            (double)elapsed / 1e6);
    CHECK_LT(elapsed, 5000 * MS);
    for (int i = 0; i < FL_N; i++)
        close(cfd[i]);
    for (int i = 0; i < FL_PAIRS; i++)
        close(fl->st[i].peer);
    free(cfd);
    free(fl->wbuf);
    free(fl);
}

TEST(listener_backlog_flood_does_not_delay_other_completions) {
    long limit = raise_nofile_limit();
    if (limit < FL_N + 2 * FL_PAIRS + 200) {
        char why[128];
        snprintf(why, sizeof why, "RLIMIT_NOFILE is %ld: %d client sockets need over %d", limit,
                 FL_N, FL_N + 2 * FL_PAIRS + 200);
        SKIP(why);
    }
    /* On io_uring: first a CQ ring that holds the whole backlog, then one that does not
     * (SQ 16, CQ 32): the accept's and the sends' completions overflow while the listener
     * refuses the ones beyond its batch. Other backends run the same twice. */
    flood_run(NULL);
    flood_run("16");
}

/* ---- 3. one write of 2.5 GiB from one buffer --------------------------------------- */

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

/* ---- 4. a pool attached to an io_uring loop, read from another loop's reader -------- */

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
    mux_loop_options_t ob = {.backend = "poll", .flags = MUX_LOOP_IGNORE_ENV};
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

/* ---- 5. many receives armed in one iteration, more than the SQ ring holds ------------- */

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
    uint64_t end = mono_ns() + 5000 * MS;
    for (;;) {
        int all = 1;
        for (int i = 0; i < MR_N && all; i++)
            all = m->ngot[i] == 8;
        if (all || m->errors || mono_ns() > end)
            break;
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    }
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

/* ---- 6. fork inside an accept callback -------------------------------------------------- */

/* Three connections wait; the accept callback forks on the first one. Every connection must
 * be served by exactly one process. On io_uring the multishot accept has already taken all
 * three into the listener's batch: the child must not serve the parent's two as well (it
 * used to, so five were served). On readiness backends the child's accept loop may take
 * some from the shared socket itself, which is fine: each still goes to one process. */
static int fa_parent, fa_child, fa_in_child;

static void fa_accept_cb(mux_listener_t *l, int fd, int status)
{
    (void)l;
    CHECK_GE(fd, 0);
    CHECK_EQ(status, 0);
    close(fd);
    if (fa_in_child) {
        fa_child++;
        return;
    }
    fa_parent++;
    if (fa_parent == 1) {
        pid_t pid = fork();
        CHECK_GE(pid, 0);
        if (pid == 0)
            fa_in_child = 1;
        else
            *(pid_t *)l->data = pid;
    }
}

TEST(fork_in_accept_callback_serves_each_connection_once) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_listener_t l;
    memset(&l, 0, sizeof l);
    pid_t child = 0;
    l.data = &child;
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    CHECK_EQ(mux_listen(&loop, &l, (struct sockaddr *)&a, alen, NULL, fa_accept_cb), 0);
    socklen_t len = sizeof a;
    CHECK_EQ(mux_listener_address(&l, (struct sockaddr *)&a, &len), 0);
    int c[3];
    for (int i = 0; i < 3; i++) {
        c[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_GE(c[i], 0);
        CHECK_EQ(connect(c[i], (struct sockaddr *)&a, len), 0); /* done by the backlog */
    }
    uint64_t end = mono_ns() + 3000 * MS;
    int status = -1;
    while (mono_ns() < end) {
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        if (fa_in_child) /* one iteration in the child is enough: report and go */
            _exit(fa_child);
        if (child > 0 && status < 0 && waitpid(child, &status, WNOHANG) == child)
            CHECK(WIFEXITED(status));
        if (status >= 0 && fa_parent + WEXITSTATUS(status) >= 3)
            break;
        sleep_ms(1);
    }
    CHECK_GT(child, 0);
    CHECK_GE(status, 0);
    fprintf(stderr, "parent served %d, child %d\n", fa_parent, WEXITSTATUS(status));
    CHECK_EQ(fa_parent + WEXITSTATUS(status), 3);
    CHECK_EQ(mux_listener_close(&l, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_close(&loop);
    for (int i = 0; i < 3; i++)
        close(c[i]);
}
