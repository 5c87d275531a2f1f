/* SPDX-License-Identifier: MIT */
/* Signal watchers: delivery through the loop, several watchers and loops, coalescing, and
 * the process's previous disposition restored after the last stop. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

struct sigseen {
    int calls, signum;
};

static void sig_cb(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    struct sigseen *s = w->data;
    (void)loop;
    s->calls++;
    s->signum = signum;
}

/* Runs NOWAIT iterations until *a (and *b) are nonzero, a bounded number of times. */
static void run_until2(mux_loop_t *l1, mux_loop_t *l2, const int *a, const int *b)
{
    for (int i = 0; i < 200 && !(*a && *b); i++) {
        CHECK_GE(mux_run(l1, MUX_RUN_NOWAIT), 0);
        if (l2)
            CHECK_GE(mux_run(l2, MUX_RUN_NOWAIT), 0);
        sleep_ms(1);
    }
}

TEST(signal_raise_reaches_watcher) {
    mux_loop_t loop;
    loop_open(&loop);
    struct sigseen s = {0, 0};
    mux_signal_t w;
    CHECK_EQ(mux_signal_init(&w, sig_cb, SIGUSR1), 0);
    w.data = &s;
    CHECK_EQ(mux_signal_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 0);
    CHECK_EQ(raise(SIGUSR1), 0);
    CHECK_EQ(s.calls, 0); /* never from the signal handler itself */
    /* ONCE blocks until the signal is delivered through the loop. */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.signum, SIGUSR1);
    CHECK_EQ(mux_signal_stop(&loop, &w), 0);
    loop_close(&loop);
}

TEST(signal_two_watchers_in_one_loop_both_called) {
    mux_loop_t loop;
    loop_open(&loop);
    struct sigseen s1 = {0, 0}, s2 = {0, 0};
    mux_signal_t w1, w2;
    CHECK_EQ(mux_signal_init(&w1, sig_cb, SIGUSR1), 0);
    w1.data = &s1;
    CHECK_EQ(mux_signal_init(&w2, sig_cb, SIGUSR1), 0);
    w2.data = &s2;
    CHECK_EQ(mux_signal_start(&loop, &w1), 0);
    CHECK_EQ(mux_signal_start(&loop, &w2), 0);
    CHECK_EQ(raise(SIGUSR1), 0);
    run_until2(&loop, NULL, &s1.calls, &s2.calls);
    CHECK_EQ(s1.calls, 1);
    CHECK_EQ(s2.calls, 1);
    CHECK_EQ(s1.signum, SIGUSR1);
    CHECK_EQ(s2.signum, SIGUSR1);
    /* With one stopped, the other still gets the next one. */
    CHECK_EQ(mux_signal_stop(&loop, &w1), 0);
    CHECK_EQ(raise(SIGUSR1), 0);
    for (int i = 0; i < 3 && s2.calls < 2; i++)
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s1.calls, 1);
    CHECK_EQ(s2.calls, 2);
    CHECK_EQ(mux_signal_stop(&loop, &w2), 0);
    loop_close(&loop);
}

TEST(signal_reaches_watchers_in_two_loops) {
    mux_loop_t l1, l2;
    loop_open(&l1);
    loop_open(&l2);
    struct sigseen s1 = {0, 0}, s2 = {0, 0};
    mux_signal_t w1, w2;
    CHECK_EQ(mux_signal_init(&w1, sig_cb, SIGUSR2), 0);
    w1.data = &s1;
    CHECK_EQ(mux_signal_init(&w2, sig_cb, SIGUSR2), 0);
    w2.data = &s2;
    CHECK_EQ(mux_signal_start(&l1, &w1), 0);
    CHECK_EQ(mux_signal_start(&l2, &w2), 0);
    CHECK_EQ(raise(SIGUSR2), 0);
    run_until2(&l1, &l2, &s1.calls, &s2.calls);
    CHECK_EQ(s1.calls, 1);
    CHECK_EQ(s2.calls, 1);
    CHECK_EQ(s1.signum, SIGUSR2);
    CHECK_EQ(s2.signum, SIGUSR2);
    CHECK_EQ(mux_signal_stop(&l1, &w1), 0);
    CHECK_EQ(mux_signal_stop(&l2, &w2), 0);
    loop_close(&l1);
    loop_close(&l2);
}

TEST(signal_raised_three_times_is_coalesced) {
    mux_loop_t loop;
    loop_open(&loop);
    struct sigseen s = {0, 0};
    mux_signal_t w;
    CHECK_EQ(mux_signal_init(&w, sig_cb, SIGUSR1), 0);
    w.data = &s;
    CHECK_EQ(mux_signal_start(&loop, &w), 0);
    CHECK_EQ(raise(SIGUSR1), 0);
    CHECK_EQ(raise(SIGUSR1), 0);
    CHECK_EQ(raise(SIGUSR1), 0);
    run_until2(&loop, NULL, &s.calls, &s.calls);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_GE(s.calls, 1);
    CHECK_LE(s.calls, 3);
    CHECK_EQ(mux_signal_stop(&loop, &w), 0);
    loop_close(&loop);
}

static volatile sig_atomic_t old_handler_calls;

static void old_handler(int sig)
{
    (void)sig;
    old_handler_calls++;
}

static void check_old_handler_installed(void)
{
    struct sigaction cur;
    CHECK_EQ(sigaction(SIGUSR1, NULL, &cur), 0);
    CHECK(cur.sa_handler == old_handler);
    /* ...and it really gets the signal (not left blocked for a signalfd, say). */
    old_handler_calls = 0;
    CHECK_EQ(raise(SIGUSR1), 0);
    CHECK_EQ(old_handler_calls, 1);
}

TEST(signal_previous_disposition_restored_after_last_stop) {
    struct sigaction sa, saved;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = old_handler;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGUSR1, &sa, &saved), 0);
    check_old_handler_installed();

    mux_loop_t l1, l2;
    loop_open(&l1);
    loop_open(&l2);
    struct sigseen s1 = {0, 0}, s2 = {0, 0};
    mux_signal_t w1, w2;
    CHECK_EQ(mux_signal_init(&w1, sig_cb, SIGUSR1), 0);
    w1.data = &s1;
    CHECK_EQ(mux_signal_init(&w2, sig_cb, SIGUSR1), 0);
    w2.data = &s2;
    CHECK_EQ(mux_signal_start(&l1, &w1), 0);
    CHECK_EQ(mux_signal_start(&l2, &w2), 0);
    CHECK_EQ(mux_run(&l1, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(mux_signal_stop(&l1, &w1), 0);
    /* One watcher left in the process: the signal is still the library's. */
    old_handler_calls = 0;
    CHECK_EQ(raise(SIGUSR1), 0);
    run_until2(&l2, NULL, &s2.calls, &s2.calls);
    CHECK_EQ(s2.calls, 1);
    CHECK_EQ(old_handler_calls, 0);
    CHECK_EQ(mux_signal_stop(&l2, &w2), 0);
    check_old_handler_installed();
    CHECK_EQ(s1.calls, 0);
    CHECK_EQ(s2.calls, 1);

    /* And again after a second start / stop cycle. */
    CHECK_EQ(mux_signal_start(&l1, &w1), 0);
    CHECK_EQ(mux_signal_stop(&l1, &w1), 0);
    check_old_handler_installed();
    loop_close(&l1);
    loop_close(&l2);
    CHECK_EQ(sigaction(SIGUSR1, &saved, NULL), 0);
}

TEST(signal_stop_inside_callback_and_restart) {
    mux_loop_t loop;
    loop_open(&loop);
    struct sigseen s = {0, 0};
    mux_signal_t w;
    CHECK_EQ(mux_signal_init(&w, sig_cb, SIGUSR1), 0);
    w.data = &s;
    for (int round = 1; round <= 3; round++) {
        CHECK_EQ(mux_signal_start(&loop, &w), 0);
        CHECK_EQ(raise(SIGUSR1), 0);
        run_until2(&loop, NULL, &s.calls, &s.calls);
        CHECK_EQ(s.calls, 1);
        CHECK_EQ(mux_signal_stop(&loop, &w), 0);
        s.calls = 0;
    }
    loop_close(&loop);
}

/* Loops in two threads, each with a watcher of SIGUSR2: one signal to the process reaches
 * both, whichever thread the kernel delivers it to. */
struct sigthread {
    struct sigseen s;
    atomic_int ready;
};

static void sigthread_cb(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    sig_cb(loop, w, signum);
    CHECK_EQ(mux_signal_stop(loop, w), 0);
}

static void *sigthread_main(void *arg)
{
    struct sigthread *t = arg;
    mux_loop_t loop;
    mux_signal_t w;
    loop_open(&loop);
    CHECK_EQ(mux_signal_init(&w, sigthread_cb, SIGUSR2), 0);
    w.data = &t->s;
    CHECK_EQ(mux_signal_start(&loop, &w), 0);
    atomic_store(&t->ready, 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* until the watcher stops itself */
    loop_close(&loop);
    return NULL;
}

THREAD_TEST(signal_reaches_loops_in_two_threads) {
    struct sigthread t[2];
    pthread_t th[2];
    memset(t, 0, sizeof t);
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, sigthread_main, &t[i]), 0);
    while (!atomic_load(&t[0].ready) || !atomic_load(&t[1].ready))
        sleep_ms(1);
    CHECK_EQ(kill(getpid(), SIGUSR2), 0);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(pthread_join(th[i], NULL), 0);
        CHECK_EQ(t[i].s.calls, 1);
        CHECK_EQ(t[i].s.signum, SIGUSR2);
    }
    mux_loop_t loop; /* the main thread's own, for the clean-close rule */
    loop_open(&loop);
    loop_close(&loop);
}

/* A signal caught while the watcher was active but not yet dispatched: once stop returns,
 * the callback does not run for it. */
TEST(signal_stopped_watcher_not_called_for_caught_signal) {
    struct sigaction sa, saved;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = old_handler;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGUSR1, &sa, &saved), 0);
    mux_loop_t loop;
    loop_open(&loop);
    struct sigseen s = {0, 0}, s2 = {0, 0};
    mux_signal_t w, keep;
    CHECK_EQ(mux_signal_init(&w, sig_cb, SIGUSR1), 0);
    CHECK_EQ(mux_signal_init(&keep, sig_cb, SIGUSR2), 0);
    w.data = &s;
    keep.data = &s2;
    CHECK_EQ(mux_signal_start(&loop, &w), 0);
    CHECK_EQ(mux_signal_start(&loop, &keep), 0);
    CHECK_EQ(raise(SIGUSR1), 0);
    CHECK_EQ(mux_signal_stop(&loop, &w), 0);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 0);
    CHECK_EQ(mux_signal_stop(&loop, &keep), 0);
    loop_close(&loop);
    CHECK_EQ(sigaction(SIGUSR1, &saved, NULL), 0);
}
