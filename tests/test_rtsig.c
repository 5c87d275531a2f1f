/* SPDX-License-Identifier: MIT */
/* The rtsig backend's own cases (src/backend/rtsig.c): what the behavioural suite cannot
 * show from the outside. They name the backend themselves, so they are backend-independent
 * cases (core.<name>), skipped in a build without rtsig (the portable-POSIX one).
 *
 * - It is opt-in: never the default, and it opens when named.
 * - The signal queue's overflow (a child with a tiny RLIMIT_SIGPENDING): every event still
 *   reaches its watcher, through plain SIGIO and a poll of every armed fd; a wake-up with the
 *   queue full still wakes the loop.
 * - The signal it takes is a free one, given back at close, and the files it armed are
 *   handed back (no owner, no O_ASYNC), at close or at the first signal nobody wants.
 * - A burst of more signals than one read of the signalfd takes is taken whole in one wait.
 * - Two loops of one thread, a loop run from a second thread, a file shared with a forked
 *   child.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "harness.h"

static const mux_loop_options_t rtsig_opts = {.backend = "rtsig", .flags = MUX_LOOP_IGNORE_ENV};

static void skip_unless_rtsig(void)
{
    for (size_t i = 0; mux_backend_name(i); i++)
        if (strcmp(mux_backend_name(i), "rtsig") == 0)
            return;
    SKIP("the rtsig backend is not in this build (a portable-POSIX build, or not Linux)");
}

static void rt_open(mux_loop_t *loop)
{
    CHECK_EQ(mux_loop_init(loop, &rtsig_opts), 0);
    CHECK_STR_EQ(mux_loop_backend(loop), "rtsig");
}

/* ---- opt-in ---- */

/* rtsig carries the opt-in bit of the contract, the default loop is never it (with the
 * variable unset), and naming it, in the options or the environment, opens it. */
CORE_TEST(rtsig_opens_only_when_named) {
    skip_unless_rtsig();
    int listed = 0;
    for (size_t i = 0; mux__backends[i]; i++)
        if (strcmp(mux__backends[i]->name, "rtsig") == 0) {
            listed = 1;
            CHECK(mux__backends[i]->caps & MUX__CAP_NAMED_ONLY);
        }
    CHECK(listed);
    CHECK_EQ(unsetenv("IOMUX_BACKEND"), 0);
    mux_loop_t loop;
    CHECK_EQ(mux_loop_init(&loop, NULL), 0);
    CHECK(strcmp(mux_loop_backend(&loop), "rtsig") != 0);
    loop_close(&loop);
    CHECK_EQ(mux_backend_probe("rtsig"), 0);
    rt_open(&loop);
    loop_close(&loop);
    CHECK_EQ(setenv("IOMUX_BACKEND", "rtsig", 1), 0);
    CHECK_EQ(mux_loop_init(&loop, NULL), 0);
    CHECK_STR_EQ(mux_loop_backend(&loop), "rtsig");
    loop_close(&loop);
    CHECK_EQ(unsetenv("IOMUX_BACKEND"), 0);
}

/* Socketpairs whose read ends are watched, each callback counting its calls and bytes. */
enum { PAIRS_MAX = 300 };

struct pairs {
    int n, bad; /* bad: reports of anything but MUX_READ */
    int sv[PAIRS_MAX][2];
    int bytes[PAIRS_MAX], calls[PAIRS_MAX];
    mux_io_t w[PAIRS_MAX];
};

static void pairs_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct pairs *p = w->data;
    (void)loop;
    int i = (int)(w - p->w);
    p->bad += revents != MUX_READ;
    p->calls[i]++;
    p->bytes[i] += drain(p->sv[i][0]);
}

static void pairs_watch(mux_loop_t *loop, struct pairs *p, int n)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    for (int i = 0; i < n; i++) {
        make_socketpair(p->sv[i]);
        CHECK_EQ(mux_io_init(&p->w[i], pairs_cb, p->sv[i][0], MUX_READ), 0);
        p->w[i].data = p;
        CHECK_EQ(mux_io_start(loop, &p->w[i]), 0);
    }
}

static void pairs_close(mux_loop_t *loop, struct pairs *p)
{
    for (int i = 0; i < p->n; i++) {
        CHECK_EQ(mux_io_stop(loop, &p->w[i]), 0);
        close(p->sv[i][0]);
        close(p->sv[i][1]);
    }
}

/* ---- the queue's overflow ---- */

enum { OV_PAIRS = 64, OV_ROUNDS = 3 };

/* Whether `signo` is pending for this thread or the process (a blocked signal waits). */
static int signal_pending(int signo)
{
    sigset_t p;
    return sigpending(&p) == 0 && sigismember(&p, signo) == 1;
}

/* In a child whose RLIMIT_SIGPENDING is `limit`: 64 watched sockets, each written once per
 * round, many more signals than the queue holds. Exits 0 when the overflow happened every
 * round (SIGIO pending) and every socket's byte reached its watcher, once per round. */
static _Noreturn void overflow_child(rlim_t limit)
{
    alarm(10);
    struct rlimit rl;
    if (getrlimit(RLIMIT_SIGPENDING, &rl) != 0)
        child_exit(2);
    rl.rlim_cur = limit;
    if (setrlimit(RLIMIT_SIGPENDING, &rl) != 0)
        child_exit(3);
    static struct pairs o;
    mux_loop_t loop;
    if (mux_loop_init(&loop, &rtsig_opts) != 0)
        child_exit(4);
    pairs_watch(&loop, &o, OV_PAIRS);
    if (mux_run(&loop, MUX_RUN_NOWAIT) != OV_PAIRS) /* armed */
        child_exit(5);
    for (int round = 1; round <= OV_ROUNDS; round++) {
        for (int i = 0; i < OV_PAIRS; i++)
            write_byte(o.sv[i][1]);
        if (!signal_pending(SIGIO))
            child_exit(6); /* the queue did not overflow */
        int done = 0;
        for (int k = 0; k < 100 && !done; k++) {
            if (mux_run(&loop, MUX_RUN_ONCE) != OV_PAIRS)
                child_exit(7);
            done = 1;
            for (int i = 0; i < OV_PAIRS; i++)
                done &= o.bytes[i] == round;
        }
        for (int i = 0; i < OV_PAIRS; i++)
            if (o.bytes[i] != round || o.calls[i] != round)
                child_exit(10 + round); /* lost, or reported twice */
        if (o.bad)
            child_exit(20);
    }
    pairs_close(&loop, &o);
    child_exit(mux_loop_close(&loop) == 0 ? 0 : 8);
}

static void run_child(void (*fn)(rlim_t), rlim_t arg)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0)
        fn(arg);
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "child: %s %d\n", WIFEXITED(st) ? "exit" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
}

/* A queue of 8: the first events are queued, the rest overflow into SIGIO. */
CORE_TEST(rtsig_queue_overflow_loses_no_readiness) {
    skip_unless_rtsig();
    run_child(overflow_child, 8);
}

/* A queue of 0: every event overflows, so readiness comes through SIGIO alone. */
CORE_TEST(rtsig_queue_of_nothing_works_through_sigio_alone) {
    skip_unless_rtsig();
    run_child(overflow_child, 0);
}

static void count_async(mux_loop_t *loop, mux_async_t *a)
{
    (void)loop;
    ++*(int *)a->data;
}

struct later {
    mux_async_t *a;
    pid_t tid; /* the loop's thread */
};

/* Whether thread `tid` of this process sleeps (its state in /proc is S). */
static int thread_sleeps(pid_t tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *end = strrchr(buf, ')'); /* the name may hold anything; the state follows */
    return end && end[1] == ' ' && end[2] == 'S';
}

/* Sends once the loop's thread is blocked in its wait (5 s at most), so that the send wakes a
 * blocked loop, not one that is about to look at its flag. */
static void *send_later(void *arg)
{
    struct later *l = arg;
    uint64_t t0 = mono_ns();
    while (!thread_sleeps(l->tid) && mono_ns() - t0 < 5000 * MS)
        sleep_ms(1);
    CHECK_EQ(mux_async_send(l->a), 0);
    return NULL;
}

/* With no room in the queue, a wake-up from another thread cannot queue the loop's signal:
 * it sends SIGIO, which wakes a loop blocked without a timeout. */
static _Noreturn void full_queue_wake_child(rlim_t unused)
{
    (void)unused;
    alarm(10);
    struct rlimit rl;
    if (getrlimit(RLIMIT_SIGPENDING, &rl) != 0)
        child_exit(2);
    rl.rlim_cur = 0;
    if (setrlimit(RLIMIT_SIGPENDING, &rl) != 0)
        child_exit(3);
    mux_loop_t loop;
    mux_async_t a;
    int n = 0;
    if (mux_loop_init(&loop, &rtsig_opts) != 0)
        child_exit(4);
    CHECK_EQ(mux_async_init(&a, count_async), 0);
    a.data = &n;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1); /* bound to this thread */
    for (int round = 1; round <= 3; round++) {
        pthread_t t;
        struct later l = {&a, (pid_t)syscall(SYS_gettid)};
        CHECK_EQ(pthread_create(&t, NULL, send_later, &l), 0);
        uint64_t t0 = mono_ns();
        while (n < round && mono_ns() - t0 < 5000 * MS)
            CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);
        if (n != round)
            child_exit(10 + round);
    }
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    child_exit(mux_loop_close(&loop) == 0 ? 0 : 5);
}

CORE_TEST(rtsig_wake_with_a_full_queue_still_wakes_the_loop) {
    skip_unless_rtsig();
    run_child(full_queue_wake_child, 0);
}

/* ---- the signal, and the files given back ---- */

static void nop_io(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop, (void)w, (void)revents;
}

struct got {
    int calls;
    unsigned revents;
};

static void got_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct got *g = w->data;
    (void)loop;
    g->calls++;
    g->revents |= revents;
}

static void nop_timer(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop, (void)t;
}

static void nop_sig(int signo)
{
    (void)signo;
}

/* Whether `fd` signals `signo` to this thread, with O_ASYNC on. */
static int armed_for_me(int fd, int signo)
{
    struct f_owner_ex o;
    CHECK_EQ(fcntl(fd, F_GETOWN_EX, &o), 0);
    int fl = fcntl(fd, F_GETFL);
    CHECK_GE(fl, 0);
    return o.type == F_OWNER_TID && o.pid == gettid() && fcntl(fd, F_GETSIG) == signo &&
           (fl & O_ASYNC);
}

static int handed_back(int fd)
{
    struct f_owner_ex o;
    CHECK_EQ(fcntl(fd, F_GETOWN_EX, &o), 0);
    return o.pid == 0 && !(fcntl(fd, F_GETFL) & O_ASYNC);
}

/* A program's own real-time signal (one with a handler) is passed by; two loops get two
 * signals; the files are armed for the loop's thread, and at close handed back with the
 * signal's old action restored. */
CORE_TEST(rtsig_takes_a_free_signal_and_gives_everything_back) {
    skip_unless_rtsig();
    struct sigaction mine = {.sa_handler = nop_sig}, old, now;
    CHECK_EQ(sigaction(SIGRTMAX, &mine, &old), 0);
    mux_loop_t l1, l2;
    rt_open(&l1);
    rt_open(&l2);
    int a[2], b[2];
    make_socketpair(a);
    make_socketpair(b);
    mux_io_t w1, w2;
    CHECK_EQ(mux_io_init(&w1, nop_io, a[0], MUX_READ), 0);
    CHECK_EQ(mux_io_init(&w2, nop_io, b[0], MUX_READ), 0);
    CHECK_EQ(mux_io_start(&l1, &w1), 0);
    CHECK_EQ(mux_io_start(&l2, &w2), 0);
    CHECK_EQ(mux_run(&l1, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(mux_run(&l2, MUX_RUN_NOWAIT), 1);
    int s1 = fcntl(a[0], F_GETSIG), s2 = fcntl(b[0], F_GETSIG);
    CHECK_GE(s1, SIGRTMIN);
    CHECK_LT(s1, SIGRTMAX); /* not the program's */
    CHECK_GE(s2, SIGRTMIN);
    CHECK_LT(s2, SIGRTMAX);
    CHECK_NE(s1, s2);
    CHECK(armed_for_me(a[0], s1));
    CHECK(armed_for_me(b[0], s2));
    CHECK_EQ(sigaction(s1, NULL, &now), 0);
    CHECK(now.sa_handler == SIG_IGN); /* claimed */
    CHECK_EQ(sigaction(s2, NULL, &now), 0);
    CHECK(now.sa_handler == SIG_IGN);
    CHECK_EQ(mux_io_stop(&l1, &w1), 0);
    CHECK_EQ(mux_io_stop(&l2, &w2), 0);
    loop_close(&l1);
    loop_close(&l2);
    CHECK(handed_back(a[0]));
    CHECK(handed_back(b[0]));
    CHECK_EQ(sigaction(s1, NULL, &now), 0);
    CHECK(now.sa_handler == SIG_DFL);
    CHECK_EQ(sigaction(s2, NULL, &now), 0);
    CHECK(now.sa_handler == SIG_DFL); /* both loops' signals given back */
    CHECK_EQ(sigaction(SIGRTMAX, NULL, &now), 0);
    CHECK(now.sa_handler == nop_sig); /* untouched */
    CHECK_EQ(sigaction(SIGRTMAX, &old, NULL), 0);
    for (int i = 0; i < 2; i++) {
        close(a[i]);
        close(b[i]);
    }
}

/* A stopped watcher leaves its file armed (a restart costs nothing); the first signal that
 * nobody wants hands the file back, and nothing is reported. */
CORE_TEST(rtsig_unwanted_signal_hands_the_file_back) {
    skip_unless_rtsig();
    mux_loop_t loop;
    rt_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct got g = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, got_cb, sv[0], MUX_READ), 0);
    w.data = &g;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    mux_timer_t t; /* keeps the loop active */
    CHECK_EQ(mux_timer_init(&t, nop_timer), 0);
    CHECK_EQ(mux_timer_start(&loop, &t, 10000 * MS, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    int signo = fcntl(sv[0], F_GETSIG);
    CHECK(armed_for_me(sv[0], signo));
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK(armed_for_me(sv[0], signo)); /* lazily kept */
    write_byte(sv[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK(handed_back(sv[0]));
    CHECK_EQ(g.calls, 0);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* More signals queued than one read of the signalfd takes (64), in two bursts: one
 * non-blocking run reports every socket once, each with its byte, and leaves none of the
 * loop's signals pending; a second burst on half of them goes the same way. */
CORE_TEST(rtsig_one_wait_takes_a_burst_of_signals_larger_than_a_read) {
    skip_unless_rtsig();
    static struct pairs b;
    mux_loop_t loop;
    rt_open(&loop);
    pairs_watch(&loop, &b, PAIRS_MAX);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), PAIRS_MAX); /* armed; nothing ready */
    int signo = fcntl(b.sv[0][0], F_GETSIG);
    CHECK(armed_for_me(b.sv[0][0], signo));
    CHECK(armed_for_me(b.sv[PAIRS_MAX - 1][0], signo));
    for (int i = 0; i < PAIRS_MAX; i++)
        write_byte(b.sv[i][1]);
    CHECK(signal_pending(signo)); /* blocked in this thread: queued for the loop */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), PAIRS_MAX);
    for (int i = 0; i < PAIRS_MAX; i++) {
        CHECK_EQ(b.calls[i], 1);
        CHECK_EQ(b.bytes[i], 1);
    }
    CHECK(!signal_pending(signo));
    CHECK(!signal_pending(SIGIO)); /* the queue never overflowed */
    for (int i = 0; i < PAIRS_MAX; i += 2)
        write_byte(b.sv[i][1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), PAIRS_MAX);
    for (int i = 0; i < PAIRS_MAX; i++) {
        CHECK_EQ(b.calls[i], i % 2 ? 1 : 2);
        CHECK_EQ(b.bytes[i], i % 2 ? 1 : 2);
    }
    CHECK(!signal_pending(signo));
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), PAIRS_MAX); /* nothing new */
    for (int i = 0; i < PAIRS_MAX; i++)
        CHECK_EQ(b.calls[i], i % 2 ? 1 : 2);
    CHECK_EQ(b.bad, 0);
    pairs_close(&loop, &b);
    loop_close(&loop);
}

/* ---- threads and processes ---- */

/* Two loops of one thread: each hears only its own sockets; a socket both watch is armed
 * for the first and polled by the second, and both report it. */
CORE_TEST(rtsig_two_loops_in_one_thread_each_hear_their_own) {
    skip_unless_rtsig();
    mux_loop_t l1, l2;
    rt_open(&l1);
    rt_open(&l2);
    int a[2], b[2], c[2];
    make_socketpair(a);
    make_socketpair(b);
    make_socketpair(c);
    struct got ga = {0}, gb = {0}, gc1 = {0}, gc2 = {0};
    mux_io_t wa, wb, wc1, wc2;
    CHECK_EQ(mux_io_init(&wa, got_cb, a[0], MUX_READ), 0);
    CHECK_EQ(mux_io_init(&wb, got_cb, b[0], MUX_READ), 0);
    CHECK_EQ(mux_io_init(&wc1, got_cb, c[0], MUX_READ), 0);
    CHECK_EQ(mux_io_init(&wc2, got_cb, c[0], MUX_READ), 0);
    wa.data = &ga, wb.data = &gb, wc1.data = &gc1, wc2.data = &gc2;
    CHECK_EQ(mux_io_start(&l1, &wa), 0);
    CHECK_EQ(mux_io_start(&l1, &wc1), 0);
    CHECK_EQ(mux_io_start(&l2, &wb), 0);
    CHECK_EQ(mux_io_start(&l2, &wc2), 0);
    CHECK_EQ(mux_run(&l1, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(mux_run(&l2, MUX_RUN_NOWAIT), 2);
    write_byte(b[1]); /* l2's: l1 blocks on, and hears nothing of it */
    CHECK_EQ(mux_run(&l1, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(ga.calls + gb.calls, 0);
    CHECK_EQ(mux_run(&l2, MUX_RUN_ONCE), 2);
    CHECK_EQ(gb.calls, 1);
    CHECK_EQ(drain(b[0]), 1);
    write_byte(a[1]);
    CHECK_EQ(mux_run(&l2, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(ga.calls, 0);
    CHECK_EQ(mux_run(&l1, MUX_RUN_ONCE), 2);
    CHECK_EQ(ga.calls, 1);
    CHECK_EQ(drain(a[0]), 1);
    write_byte(c[1]);
    for (int i = 0; i < 100 && !(gc1.calls && gc2.calls); i++) {
        CHECK_GE(mux_run(&l1, MUX_RUN_NOWAIT), 0);
        CHECK_GE(mux_run(&l2, MUX_RUN_NOWAIT), 0);
    }
    CHECK_EQ(gc1.revents, MUX_READ);
    CHECK_EQ(gc2.revents, MUX_READ);
    CHECK_EQ(gb.calls, 1);
    CHECK_EQ(mux_io_stop(&l1, &wa), 0);
    CHECK_EQ(mux_io_stop(&l1, &wc1), 0);
    CHECK_EQ(mux_io_stop(&l2, &wb), 0);
    CHECK_EQ(mux_io_stop(&l2, &wc2), 0);
    loop_close(&l1);
    loop_close(&l2);
    for (int i = 0; i < 2; i++) {
        close(a[i]);
        close(b[i]);
        close(c[i]);
    }
}

static void *run_elsewhere(void *loop)
{
    return (void *)(intptr_t)mux_run(loop, MUX_RUN_NOWAIT);
}

/* A loop belongs to the first thread that runs it: its files signal that thread. A run
 * from another thread is refused, and the watcher it applied still signals the first. */
CORE_TEST(rtsig_loop_run_from_a_second_thread_is_refused) {
    skip_unless_rtsig();
    mux_loop_t loop;
    rt_open(&loop);
    mux_async_t a;
    int n = 0;
    CHECK_EQ(mux_async_init(&a, count_async), 0);
    a.data = &n;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    int sv[2];
    make_socketpair(sv);
    struct got g = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, got_cb, sv[0], MUX_READ), 0);
    w.data = &g;
    CHECK_EQ(mux_io_start(&loop, &w), 0); /* applied by the refused run */
    pthread_t t;
    void *r;
    CHECK_EQ(pthread_create(&t, NULL, run_elsewhere, &loop), 0);
    CHECK_EQ(pthread_join(t, &r), 0);
    CHECK_EQ((intptr_t)r, -EEXIST);
    CHECK_EQ(mux_io_is_active(&w), 1);
    CHECK(armed_for_me(sv[0], fcntl(sv[0], F_GETSIG)));
    CHECK_EQ(mux_async_send(&a), 0); /* and the first thread still runs it */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_EQ(n, 1);
    write_byte(sv[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_EQ(g.calls, 1);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* A forked child watching the parent's socket polls it rather than take it: the file still
 * signals the parent's thread after the child's loop ran, and the parent hears of it. */
CORE_TEST(rtsig_forked_child_leaves_the_parents_files_to_the_parent) {
    skip_unless_rtsig();
    mux_loop_t loop;
    rt_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct got g = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, got_cb, sv[0], MUX_READ), 0);
    w.data = &g;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    int signo = fcntl(sv[0], F_GETSIG);
    CHECK(armed_for_me(sv[0], signo));
    fflush(NULL);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        alarm(10);
        write_byte(sv[1]);
        for (int i = 0; i < 100 && !g.calls; i++)
            if (mux_run(&loop, MUX_RUN_ONCE) < 0)
                child_exit(2);
        child_exit(g.calls >= 1 && drain(sv[0]) == 1 ? 0 : 3);
    }
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
    CHECK(armed_for_me(sv[0], signo)); /* still the parent's */
    write_byte(sv[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(g.calls, 1);
    CHECK_EQ(g.revents, MUX_READ);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* ---- writability ---- */

static void stop_on_timer(mux_loop_t *loop, mux_timer_t *t)
{
    *(int *)t->data = 1;
    mux_loop_stop(loop);
}

/* A Unix stream socket polls unwritable past a quarter of its buffer, long before a send
 * would fail, and only a failed send makes the kernel signal writability. A writer waiting
 * on such a socket is polled, so it hears of the room the peer's reads make. */
CORE_TEST(rtsig_writer_on_a_socket_full_without_a_failed_send_is_told_of_room) {
    skip_unless_rtsig();
    mux_loop_t loop;
    rt_open(&loop);
    int sv[2];
    make_socketpair(sv);
    char chunk[1024] = {0};
    struct pollfd p = {.fd = sv[0], .events = POLLOUT};
    int sent = 0;
    while (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT)) {
        CHECK_EQ(write(sv[0], chunk, sizeof chunk), (ssize_t)sizeof chunk); /* never EAGAIN */
        sent++;
    }
    CHECK_GT(sent, 0);
    struct got g = {0};
    mux_io_t w;
    mux_timer_t guard;
    CHECK_EQ(mux_io_init(&w, got_cb, sv[0], MUX_WRITE), 0);
    w.data = &g;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    int guard_fired = 0;
    CHECK_EQ(mux_timer_init(&guard, stop_on_timer), 0);
    guard.data = &guard_fired;
    CHECK_EQ(mux_timer_start(&loop, &guard, 10000 * MS, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(g.calls, 0);
    CHECK_EQ(drain(sv[1]), sent * (int)sizeof chunk);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_EQ(g.calls, 1);
    CHECK_EQ(g.revents, MUX_WRITE);
    CHECK_EQ(guard_fired, 0); /* told of the room, not ended by the guard */
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_timer_stop(&loop, &guard), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}
