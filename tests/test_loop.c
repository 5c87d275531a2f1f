/* SPDX-License-Identifier: MIT */
/* The loop: run modes, stopping, closing, re-entrancy, and one loop per thread. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static void count_timer(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    (*(int *)t->data)++;
}

static void count_io(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop;
    (void)revents;
    (*(int *)w->data)++;
}

TEST(loop_run_default_returns_0_without_watchers) {
    mux_loop_t loop;
    loop_open(&loop);
    CHECK_EQ(mux_loop_active(&loop), 0);
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 0); /* nothing active: does not block */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_LT(mono_ns() - t0, 500 * MS);
    loop_close(&loop);
}

TEST(loop_run_nowait_returns_at_once_with_active_count) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2], fired = 0;
    make_socketpair(sv);
    mux_io_t w;
    mux_timer_t t;
    CHECK_EQ(mux_io_init(&w, count_io, sv[0], MUX_READ), 0);
    w.data = &fired;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_timer_init(&t, count_timer), 0);
    t.data = &fired;
    CHECK_EQ(mux_timer_start(&loop, &t, 10000 * MS, 0), 0);
    CHECK_EQ(mux_loop_active(&loop), 2);
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_LT(mono_ns() - t0, 200 * MS);
    CHECK_EQ(fired, 0);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

TEST(loop_run_once_blocks_until_one_event) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2], io_fired = 0, timer_fired = 0;
    make_socketpair(sv);
    mux_io_t w; /* never ready: keeps the loop alive */
    CHECK_EQ(mux_io_init(&w, count_io, sv[0], MUX_READ), 0);
    w.data = &io_fired;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    mux_timer_t t;
    CHECK_EQ(mux_timer_init(&t, count_timer), 0);
    t.data = &timer_fired;
    CHECK_EQ(mux_now_update(&loop), 0);
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_timer_start(&loop, &t, 30 * MS, 0), 0);
    /* ONCE may return early without an event only if it iterated with nothing ready, which
     * the header does not allow: it blocks until at least one event. */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(timer_fired, 1);
    CHECK_GE(mono_ns() - t0, 30 * MS);
    CHECK_EQ(io_fired, 0);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

static void stop_loop_at_3(mux_loop_t *loop, mux_timer_t *t)
{
    int *n = t->data;
    if (++*n % 3 == 0)
        CHECK_EQ(mux_loop_stop(loop), 0);
}

TEST(loop_stop_from_callback_returns_from_run) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    int n = 0;
    CHECK_EQ(mux_timer_init(&t, stop_loop_at_3), 0);
    t.data = &n;
    CHECK_EQ(mux_timer_start(&loop, &t, 1 * MS, 1 * MS), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 1); /* the timer is still active */
    CHECK_EQ(n, 3);
    /* The stop applied to that run only: the next run goes on until the next stop. */
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 1);
    CHECK_EQ(n, 6);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    loop_close(&loop);
}

TEST(loop_close_is_ebusy_with_active_watcher) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    int n = 0;
    CHECK_EQ(mux_timer_init(&t, count_timer), 0);
    t.data = &n;
    CHECK_EQ(mux_timer_start(&loop, &t, 1 * MS, 0), 0);
    CHECK_EQ(mux_loop_close(&loop), -EBUSY);
    /* The loop was left untouched: it still runs the timer. */
    CHECK(mux_loop_backend(&loop) != NULL);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(mux_timer_start(&loop, &t, 1000 * MS, 0), 0);
    CHECK_EQ(mux_loop_close(&loop), -EBUSY);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    loop_close(&loop);
}

TEST(loop_calls_on_closed_loop_are_einval) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    mux_io_t w;
    int n = 0, sv[2];
    make_socketpair(sv);
    CHECK_EQ(mux_timer_init(&t, count_timer), 0);
    t.data = &n;
    CHECK_EQ(mux_io_init(&w, count_io, sv[0], MUX_READ), 0);
    w.data = &n;
    loop_close(&loop);

    CHECK_EQ(mux_timer_start(&loop, &t, 1 * MS, 0), -EINVAL);
    CHECK_EQ(mux_timer_is_active(&t), 0);
    CHECK_EQ(mux_timer_stop(&loop, &t), -EINVAL);
    CHECK_EQ(mux_timer_again(&loop, &t), -EINVAL);
    CHECK_EQ(mux_io_start(&loop, &w), -EINVAL);
    CHECK_EQ(mux_io_is_active(&w), 0);
    CHECK_EQ(mux_io_stop(&loop, &w), -EINVAL);
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_WRITE), -EINVAL);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), -EINVAL);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), -EINVAL);
    CHECK_EQ(mux_loop_stop(&loop), -EINVAL);
    CHECK_EQ(mux_loop_active(&loop), -EINVAL);
    CHECK(mux_loop_backend(&loop) == NULL);
    CHECK_EQ(mux_loop_fork(&loop), -EINVAL);
    CHECK_EQ(mux_now(&loop), 0);
    CHECK_EQ(mux_now_update(&loop), -EINVAL);
    CHECK_EQ(mux_wall_now(&loop), 0);
    CHECK_EQ(mux_loop_close(&loop), -EINVAL);
    CHECK_EQ(n, 0);

    /* Initialised again, it works again. */
    loop_open(&loop);
    CHECK_EQ(mux_timer_start(&loop, &t, 1 * MS, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(n, 1);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

static void run_inside_callback(mux_loop_t *loop, mux_timer_t *t)
{
    CHECK_EQ(mux_run(loop, MUX_RUN_DEFAULT), -EBUSY);
    CHECK_EQ(mux_run(loop, MUX_RUN_NOWAIT), -EBUSY);
    CHECK_EQ(mux_run(loop, MUX_RUN_ONCE), -EBUSY);
    (*(int *)t->data)++;
}

TEST(loop_run_inside_callback_is_ebusy) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    int n = 0;
    CHECK_EQ(mux_timer_init(&t, run_inside_callback), 0);
    t.data = &n;
    CHECK_EQ(mux_timer_start(&loop, &t, 0, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(n, 1);
    loop_close(&loop);
}

static void close_inside_callback(mux_loop_t *loop, mux_timer_t *t)
{
    CHECK_EQ(mux_timer_is_active(t), 0);
    CHECK_EQ(mux_loop_active(loop), 0);
    CHECK_EQ(mux_loop_close(loop), -EINVAL);
    (*(int *)t->data)++;
}

TEST(loop_close_inside_run_is_einval) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    int n = 0;
    CHECK_EQ(mux_timer_init(&t, close_inside_callback), 0);
    t.data = &n;
    CHECK_EQ(mux_timer_start(&loop, &t, 0, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(n, 1);
    loop_close(&loop);
}

/* Callbacks of watchers that are started but never meant to run. */
static void noop_periodic(mux_loop_t *l, mux_periodic_t *w)
{
    (void)l;
    (void)w;
    CHECK(0);
}
static void noop_idle(mux_loop_t *l, mux_idle_t *w)
{
    (void)l;
    (void)w;
    CHECK(0);
}
static void noop_prepare(mux_loop_t *l, mux_prepare_t *w)
{
    (void)l;
    (void)w;
    CHECK(0);
}
static void noop_check(mux_loop_t *l, mux_check_t *w)
{
    (void)l;
    (void)w;
    CHECK(0);
}
static void noop_fork(mux_loop_t *l, mux_fork_t *w)
{
    (void)l;
    (void)w;
    CHECK(0);
}
static void noop_async(mux_loop_t *l, mux_async_t *w)
{
    (void)l;
    (void)w;
    CHECK(0);
}

TEST(loop_active_counts_every_watcher_type) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_io_t w;
    mux_timer_t t;
    mux_periodic_t p;
    mux_idle_t i;
    mux_prepare_t pr;
    mux_check_t c;
    mux_fork_t f;
    mux_async_t a;
    CHECK_EQ(mux_io_init(&w, count_io, sv[0], MUX_READ), 0);
    CHECK_EQ(mux_timer_init(&t, count_timer), 0);
    CHECK_EQ(mux_periodic_init(&p, noop_periodic), 0);
    CHECK_EQ(mux_idle_init(&i, noop_idle), 0);
    CHECK_EQ(mux_prepare_init(&pr, noop_prepare), 0);
    CHECK_EQ(mux_check_init(&c, noop_check), 0);
    CHECK_EQ(mux_fork_init(&f, noop_fork), 0);
    CHECK_EQ(mux_async_init(&a, noop_async), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_timer_start(&loop, &t, 10000 * MS, 0), 0);
    CHECK_EQ(mux_periodic_start(&loop, &p, mux_wall_now(&loop) + 3600 * 1000 * (int64_t)MS, 0), 0);
    CHECK_EQ(mux_idle_start(&loop, &i), 0);
    CHECK_EQ(mux_prepare_start(&loop, &pr), 0);
    CHECK_EQ(mux_check_start(&loop, &c), 0);
#ifdef _WIN32
    int forks = 0;
    CHECK_EQ(mux_fork_start(&loop, &f), -ENOTSUP); /* Windows has no fork */
#else
    int forks = 1;
    CHECK_EQ(mux_fork_start(&loop, &f), 0);
#endif
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_loop_active(&loop), 7 + forks);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    CHECK_EQ(mux_periodic_stop(&loop, &p), 0);
    CHECK_EQ(mux_idle_stop(&loop, &i), 0);
    CHECK_EQ(mux_prepare_stop(&loop, &pr), 0);
    CHECK_EQ(mux_check_stop(&loop, &c), 0);
    CHECK_EQ(mux_fork_stop(&loop, &f), 0);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    /* Stopping twice does not count twice. */
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

TEST(loop_now_is_cached_and_update_refreshes_it) {
    mux_loop_t loop;
    loop_open(&loop);
    uint64_t a = mux_now(&loop);
    CHECK_GT(a, 0);
    sleep_ms(20);
    CHECK_EQ(mux_now(&loop), a); /* cached: unchanged without an iteration */
    CHECK_EQ(mux_now_update(&loop), 0);
    uint64_t b = mux_now(&loop);
    CHECK_GE(b - a, 20 * MS);
    CHECK_LE(b, mono_ns());
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_GE(mux_now(&loop), b);
    int64_t w0 = wall_ns(), w = mux_wall_now(&loop), w1 = wall_ns();
    CHECK_GE(w, w0 - 50 * (int64_t)MS); /* may be cached per iteration, not by much */
    CHECK_LE(w, w1);
    loop_close(&loop);
}

/* One loop per thread: four threads each run their own loop with timers and an io ping-pong,
 * at the same time, without sharing anything. */
struct per_thread {
    int sv[2], reads, fires;
};

static void pt_read(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct per_thread *pt = w->data;
    CHECK_EQ(revents, MUX_READ);
    pt->reads += drain(pt->sv[0]);
    if (pt->reads >= 100)
        CHECK_EQ(mux_io_stop(loop, w), 0);
    else
        write_byte(pt->sv[1]);
}

static void pt_timer(mux_loop_t *loop, mux_timer_t *t)
{
    struct per_thread *pt = t->data;
    if (++pt->fires == 10)
        CHECK_EQ(mux_timer_stop(loop, t), 0);
}

static void *per_thread_main(void *arg)
{
    struct per_thread *pt = arg;
    mux_loop_t loop;
    loop_open(&loop);
    mux_io_t w;
    mux_timer_t t;
    make_socketpair(pt->sv);
    CHECK_EQ(mux_io_init(&w, pt_read, pt->sv[0], MUX_READ), 0);
    w.data = pt;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_timer_init(&t, pt_timer), 0);
    t.data = pt;
    CHECK_EQ(mux_timer_start(&loop, &t, 1 * MS, 1 * MS), 0);
    write_byte(pt->sv[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_close(&loop);
    close(pt->sv[0]);
    close(pt->sv[1]);
    return NULL;
}

THREAD_TEST(loop_one_per_thread_runs_independently) {
    enum { N = 4 };
    pthread_t th[N];
    struct per_thread pt[N];
    memset(pt, 0, sizeof pt);
    for (int i = 0; i < N; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, per_thread_main, &pt[i]), 0);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(pthread_join(th[i], NULL), 0);
        CHECK_EQ(pt[i].reads, 100);
        CHECK_EQ(pt[i].fires, 10);
    }
    /* The main thread's own loop, for the backend check and a clean close. */
    mux_loop_t loop;
    loop_open(&loop);
    loop_close(&loop);
}

TEST(loop_stop_before_run_makes_one_nonblocking_iteration) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2], n = 0;
    make_socketpair(sv);
    mux_io_t w; /* never ready */
    CHECK_EQ(mux_io_init(&w, count_io, sv[0], MUX_READ), 0);
    w.data = &n;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_loop_stop(&loop), 0);
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 1);
    CHECK_LT(mono_ns() - t0, 200 * MS);
    /* The stop was used up by that run. */
    write_byte(sv[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(n, 1);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* A stop before mux_run still gets one non-blocking iteration: a timer due now fires. */
TEST(loop_stop_before_run_still_runs_what_is_due) {
    mux_loop_t loop;
    loop_open(&loop);
    int fired = 0;
    mux_timer_t t;
    CHECK_EQ(mux_timer_init(&t, count_timer), 0);
    t.data = &fired;
    CHECK_EQ(mux_timer_start(&loop, &t, 0, 0), 0);
    CHECK_EQ(mux_loop_stop(&loop), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(fired, 1);
    loop_close(&loop);
}

/* Signal and async watchers keep MUX_RUN_DEFAULT running like any other watcher: the run
 * goes on after the timer that raises the signal is done, until the watchers stop. */
static mux_async_t *keep_async;

static void keep_sig(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    (void)signum;
    CHECK_EQ(mux_signal_stop(loop, w), 0);
    CHECK_EQ(mux_async_send(keep_async), 0);
}

static void keep_async_cb(mux_loop_t *loop, mux_async_t *a)
{
    CHECK_EQ(mux_async_stop(loop, a), 0);
}

static void keep_timer(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    (void)t;
    CHECK_EQ(raise(SIGUSR2), 0);
}

TEST(loop_signal_and_async_watchers_keep_default_run_going) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_signal_t s;
    mux_async_t a;
    mux_timer_t t;
    CHECK_EQ(mux_signal_init(&s, keep_sig, SIGUSR2), 0);
    CHECK_EQ(mux_async_init(&a, keep_async_cb), 0);
    CHECK_EQ(mux_timer_init(&t, keep_timer), 0);
    keep_async = &a;
    CHECK_EQ(mux_signal_start(&loop, &s), 0);
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_timer_start(&loop, &t, 10 * MS, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

/* A loop made on one thread and run on another (the common "init in main, run in a worker"
 * shape): io_uring binds its ring to one thread, the one that first runs the loop, not the
 * one that created it. The io watcher and the timer must both fire on the worker, and the
 * loop must close from the main thread afterwards. */
struct handoff {
    mux_loop_t loop;
    mux_io_t io;
    mux_timer_t timer;
    int p[2];
    int io_calls, timer_calls, rc;
};

static void handoff_io_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct handoff *h = w->data;
    char c;
    CHECK(revents & MUX_READ);
    CHECK_EQ(read(h->p[0], &c, 1), 1);
    h->io_calls++;
    mux_io_stop(loop, w);
}

static void handoff_timer_cb(mux_loop_t *loop, mux_timer_t *t)
{
    struct handoff *h = t->data;
    (void)loop;
    h->timer_calls++;
}

static void *handoff_thread(void *arg)
{
    struct handoff *h = arg;
    h->rc = mux_run(&h->loop, MUX_RUN_DEFAULT);
    return NULL;
}

THREAD_TEST(loop_created_on_one_thread_runs_on_another) {
    struct handoff h;
    memset(&h, 0, sizeof h);
    loop_open(&h.loop);
    make_pipe(h.p);
    CHECK_EQ(mux_io_init(&h.io, handoff_io_cb, h.p[0], MUX_READ), 0);
    h.io.data = &h;
    CHECK_EQ(mux_io_start(&h.loop, &h.io), 0);
    CHECK_EQ(mux_timer_init(&h.timer, handoff_timer_cb), 0);
    h.timer.data = &h;
    CHECK_EQ(mux_timer_start(&h.loop, &h.timer, 5 * MS, 0), 0);
    CHECK_EQ(write(h.p[1], "x", 1), 1);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, handoff_thread, &h), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(h.rc, 0); /* ran out of work: both fired */
    CHECK_EQ(h.io_calls, 1);
    CHECK_EQ(h.timer_calls, 1);
    loop_close(&h.loop);
    close(h.p[0]);
    close(h.p[1]);
}

/* MUX_LOOP_ONE_THREAD: the first thread that runs the loop owns it, on every backend. */
struct one_thread {
    mux_loop_t loop;
    int rc;
};

static void *one_thread_other(void *arg)
{
    struct one_thread *o = arg;
    o->rc = mux_run(&o->loop, MUX_RUN_NOWAIT);
    return NULL;
}

static int one_thread_run_elsewhere(struct one_thread *o)
{
    pthread_t t;
    o->rc = 1;
    CHECK_EQ(pthread_create(&t, NULL, one_thread_other, o), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    return o->rc;
}

THREAD_TEST(loop_one_thread_is_run_only_by_the_first_thread_that_runs_it) {
    struct one_thread o;
    memset(&o, 0, sizeof o);
    mux_loop_options_t opts = {NULL, MUX_LOOP_ONE_THREAD};
    CHECK_EQ(mux_loop_init(&o.loop, &opts), 0);
    const char *want = getenv("IOMUX_BACKEND");
    if (want && *want)
        CHECK_STR_EQ(mux_loop_backend(&o.loop), want);
    struct handoff h; /* its io watcher counts the byte and stops */
    memset(&h, 0, sizeof h);
    make_pipe(h.p);
    CHECK_EQ(mux_io_init(&h.io, handoff_io_cb, h.p[0], MUX_READ), 0);
    h.io.data = &h;
    CHECK_EQ(mux_io_start(&o.loop, &h.io), 0);
    /* Made here, first run here: this thread owns it, and another may not run it, before
     * or after an event is due; the refusal leaves the loop as it was. */
    CHECK_EQ(mux_run(&o.loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(one_thread_run_elsewhere(&o), -EEXIST);
    CHECK_EQ(write(h.p[1], "x", 1), 1);
    CHECK_EQ(one_thread_run_elsewhere(&o), -EEXIST);
    CHECK_EQ(h.io_calls, 0);
    CHECK_EQ(mux_run(&o.loop, MUX_RUN_ONCE), 0); /* the byte, and the watcher stopped */
    CHECK_EQ(h.io_calls, 1);
    CHECK_EQ(mux_loop_close(&o.loop), 0);
    close(h.p[0]);
    close(h.p[1]);

    /* Made here, first run by another thread: that thread owns it, and this one is refused. */
    memset(&o, 0, sizeof o);
    CHECK_EQ(mux_loop_init(&o.loop, &opts), 0);
    CHECK_EQ(one_thread_run_elsewhere(&o), 0);
    CHECK_EQ(mux_run(&o.loop, MUX_RUN_NOWAIT), -EEXIST);
    CHECK_EQ(mux_loop_close(&o.loop), 0);
}

/* ---- mux_loop_walk ---- */

struct walked {
    int calls[MUX_HANDLE_LISTENER + 1];
    int closed_streams, closed_listeners;
};

static void walk_io_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop, (void)w, (void)revents;
}
static void walk_timer_cb(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop, (void)t;
}
static void walk_periodic_cb(mux_loop_t *loop, mux_periodic_t *p)
{
    (void)loop, (void)p;
}
static void walk_signal_cb(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    (void)loop, (void)w, (void)signum;
}
static void walk_child_cb(mux_loop_t *loop, mux_child_t *w, int pid, int status)
{
    (void)loop, (void)w, (void)pid, (void)status;
}
static void walk_idle_cb(mux_loop_t *loop, mux_idle_t *w)
{
    (void)loop, (void)w;
}
static void walk_prepare_cb(mux_loop_t *loop, mux_prepare_t *w)
{
    (void)loop, (void)w;
}
static void walk_check_cb(mux_loop_t *loop, mux_check_t *w)
{
    (void)loop, (void)w;
}
static void walk_fork_cb(mux_loop_t *loop, mux_fork_t *w)
{
    (void)loop, (void)w;
}
static void walk_async_cb(mux_loop_t *loop, mux_async_t *w)
{
    (void)loop, (void)w;
}
static void walk_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    (void)s, (void)nread, (void)buf;
}
static void walk_accept_cb(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    (void)l, (void)status;
    close(sock);
}
static void walk_stream_closed(mux_stream_t *s)
{
    ((struct walked *)s->data)->closed_streams++;
}
static void walk_listener_closed(mux_listener_t *l)
{
    ((struct walked *)l->data)->closed_listeners++;
}

/* The shutdown walk: stop or close whatever it is given. */
static void walk_close_all(mux_loop_t *loop, int kind, void *h, void *arg)
{
    struct walked *wk = arg;
    CHECK_GE(kind, MUX_HANDLE_IO);
    CHECK_LE(kind, MUX_HANDLE_LISTENER);
    wk->calls[kind]++;
    switch (kind) {
    case MUX_HANDLE_IO: CHECK_EQ(mux_io_stop(loop, h), 0); break;
    case MUX_HANDLE_TIMER: CHECK_EQ(mux_timer_stop(loop, h), 0); break;
    case MUX_HANDLE_PERIODIC: CHECK_EQ(mux_periodic_stop(loop, h), 0); break;
    case MUX_HANDLE_SIGNAL: CHECK_EQ(mux_signal_stop(loop, h), 0); break;
    case MUX_HANDLE_CHILD: CHECK_EQ(mux_child_stop(loop, h), 0); break;
    case MUX_HANDLE_IDLE: CHECK_EQ(mux_idle_stop(loop, h), 0); break;
    case MUX_HANDLE_PREPARE: CHECK_EQ(mux_prepare_stop(loop, h), 0); break;
    case MUX_HANDLE_CHECK: CHECK_EQ(mux_check_stop(loop, h), 0); break;
    case MUX_HANDLE_FORK: CHECK_EQ(mux_fork_stop(loop, h), 0); break;
    case MUX_HANDLE_ASYNC: CHECK_EQ(mux_async_stop(loop, h), 0); break;
    case MUX_HANDLE_STREAM: CHECK_EQ(mux_stream_close(h, walk_stream_closed), 0); break;
    default: CHECK_EQ(mux_listener_close(h, walk_listener_closed), 0); break;
    }
}

/* One watcher of every kind, two open streams (reading, with timeouts: their own watchers
 * are active but are not handles), one stream already closing and a listener: the walk
 * reports each handle once, the closing stream not at all, and closing everything it
 * reports leaves the loop with nothing to do. */
TEST(loop_walk_reports_every_handle_once_and_closing_them_all_ends_run) {
    mux_loop_t loop;
    loop_open(&loop);
    struct walked wk;
    memset(&wk, 0, sizeof wk);
    int p[2];
    make_pipe(p);
    mux_io_t io;
    mux_timer_t t;
    mux_periodic_t per;
    mux_signal_t sig;
    mux_child_t child;
    mux_idle_t idle;
    mux_prepare_t prep;
    mux_check_t chk;
    mux_fork_t fk;
    mux_async_t as;
    CHECK_EQ(mux_io_init(&io, walk_io_cb, p[0], MUX_READ), 0);
    CHECK_EQ(mux_io_start(&loop, &io), 0);
    CHECK_EQ(mux_timer_init(&t, walk_timer_cb), 0);
    CHECK_EQ(mux_timer_start(&loop, &t, 3600 * 1000 * MS, 0), 0);
    CHECK_EQ(mux_periodic_init(&per, walk_periodic_cb), 0);
    CHECK_EQ(mux_periodic_start(&loop, &per, 0, 3600ull * 1000 * MS), 0);
    CHECK_EQ(mux_signal_init(&sig, walk_signal_cb, SIGUSR2), 0);
    CHECK_EQ(mux_signal_start(&loop, &sig), 0);
#ifdef _WIN32 /* no watcher for any child there: this process's own end instead */
    CHECK_EQ(mux_child_init(&child, walk_child_cb, getpid()), 0);
#else
    CHECK_EQ(mux_child_init(&child, walk_child_cb, 0), 0);
#endif
    CHECK_EQ(mux_child_start(&loop, &child), 0);
    CHECK_EQ(mux_idle_init(&idle, walk_idle_cb), 0);
    CHECK_EQ(mux_idle_start(&loop, &idle), 0);
    CHECK_EQ(mux_prepare_init(&prep, walk_prepare_cb), 0);
    CHECK_EQ(mux_prepare_start(&loop, &prep), 0);
    CHECK_EQ(mux_check_init(&chk, walk_check_cb), 0);
    CHECK_EQ(mux_check_start(&loop, &chk), 0);
    CHECK_EQ(mux_fork_init(&fk, walk_fork_cb), 0);
#ifdef _WIN32 /* no fork there: the one kind of watcher that cannot start */
    CHECK_EQ(mux_fork_start(&loop, &fk), -ENOTSUP);
    const int forks = 0;
#else
    CHECK_EQ(mux_fork_start(&loop, &fk), 0);
    const int forks = 1;
#endif
    CHECK_EQ(mux_async_init(&as, walk_async_cb), 0);
    CHECK_EQ(mux_async_start(&loop, &as), 0);

    int sv[2], sv2[2];
    make_socketpair(sv);
    make_socketpair(sv2);
    mux_stream_t s[3];
    char buf[2][64];
    mux_stream_timeouts_t to = {.idle_ns = 3600 * 1000 * MS};
    for (int i = 0; i < 2; i++) {
        s[i].data = &wk;
        CHECK_EQ(mux_stream_open(&loop, &s[i], sv[i]), 0);
        CHECK_EQ(mux_read_start(&s[i], buf[i], sizeof buf[i], walk_read_cb), 0);
        CHECK_EQ(mux_stream_set_timeouts(&s[i], &to), 0);
    }
    s[2].data = &wk;
    CHECK_EQ(mux_stream_open(&loop, &s[2], sv2[0]), 0);
    mux_listener_t l;
    l.data = &wk;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_EQ(mux_listen(&loop, &l, (struct sockaddr *)&a, sizeof a, NULL, walk_accept_cb), 0);
    CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0); /* the streams' receives are armed */
    CHECK_EQ(mux_stream_close(&s[2], walk_stream_closed), 0); /* closing: not a handle */

    CHECK_EQ(mux_loop_walk(&loop, walk_close_all, &wk), 12 + forks);
    for (int k = MUX_HANDLE_IO; k <= MUX_HANDLE_ASYNC; k++)
        CHECK_EQ(wk.calls[k], k == MUX_HANDLE_FORK ? forks : 1);
    CHECK_EQ(wk.calls[MUX_HANDLE_STREAM], 2);
    CHECK_EQ(wk.calls[MUX_HANDLE_LISTENER], 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* nothing left: the close callbacks ran */
    CHECK_EQ(wk.closed_streams, 3);
    CHECK_EQ(wk.closed_listeners, 1);
    CHECK_EQ(mux_loop_walk(&loop, walk_close_all, &wk), 0);
    CHECK_EQ(mux_loop_walk(&loop, NULL, &wk), -EINVAL);
    CHECK_EQ(mux_loop_walk(NULL, walk_close_all, &wk), -EINVAL);
    loop_close(&loop);
    CHECK_EQ(mux_loop_walk(&loop, walk_close_all, &wk), -EINVAL); /* a closed loop */
    close(p[0]);
    close(p[1]);
    close(sv2[1]);
}
