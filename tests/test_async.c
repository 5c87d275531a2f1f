/* SPDX-License-Identifier: MIT */
/* async: wake-ups from other threads and from signal handlers, coalesced, never lost. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

enum { SENDS = 100000 };

struct flood {
    mux_async_t a;
    atomic_int value; /* the last i the thread stored before its send */
    int calls, last_seen, went_back;
};

static void *flood_thread(void *arg)
{
    struct flood *f = arg;
    for (int i = 1; i <= SENDS; i++) {
        atomic_store(&f->value, i);
        CHECK_EQ(mux_async_send(&f->a), 0);
    }
    return NULL;
}

static void flood_cb(mux_loop_t *loop, mux_async_t *a)
{
    struct flood *f = a->data;
    int v = atomic_load(&f->value);
    f->calls++;
    if (v < f->last_seen)
        f->went_back = 1;
    f->last_seen = v;
    if (v == SENDS)
        CHECK_EQ(mux_loop_stop(loop), 0);
}

/* The thread stores i, then sends; the loop stops when it has seen the last value. A lost
 * wake-up would leave the loop waiting (the watchdog then fails the case). */
THREAD_TEST(async_100k_sends_from_thread_coalesced_never_lost) {
    mux_loop_t loop;
    loop_open(&loop);
    struct flood f;
    memset(&f, 0, sizeof f);
    atomic_init(&f.value, 0);
    CHECK_EQ(mux_async_init(&f.a, flood_cb), 0);
    f.a.data = &f;
    CHECK_EQ(mux_async_start(&loop, &f.a), 0);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, flood_thread, &f), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 1);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(f.last_seen, SENDS);
    CHECK_GE(f.calls, 1);
    CHECK_LE(f.calls, SENDS);
    CHECK_EQ(f.went_back, 0);
    /* "After the last send returns, the callback runs at least once more": the last send
     * may have landed after the callback that saw SENDS, so at most one more call. */
    int before = f.calls;
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_LE(f.calls - before, 1);
    CHECK_EQ(mux_async_pending(&f.a), 0);
    CHECK_EQ(mux_async_stop(&loop, &f.a), 0);
    loop_close(&loop);
}

static void count_cb(mux_loop_t *loop, mux_async_t *a)
{
    (void)loop;
    CHECK_EQ(mux_async_pending(a), 0); /* consumed before the callback */
    (*(int *)a->data)++;
}

TEST(async_send_before_run_is_not_lost) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_async_t a;
    int n = 0;
    CHECK_EQ(mux_async_init(&a, count_cb), 0);
    a.data = &n;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_async_send(&a), 0);
    CHECK_EQ(mux_async_send(&a), 0);
    CHECK_EQ(n, 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1); /* does not block: a send is waiting */
    CHECK_EQ(n, 1);                            /* the two sends were coalesced */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(n, 1);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    loop_close(&loop);
}

TEST(async_pending_reports_waiting_send) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_async_t a, b;
    int na = 0, nb = 0;
    CHECK_EQ(mux_async_init(&a, count_cb), 0);
    a.data = &na;
    CHECK_EQ(mux_async_init(&b, count_cb), 0);
    b.data = &nb;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_async_start(&loop, &b), 0);
    CHECK_EQ(mux_async_pending(&a), 0);
    CHECK_EQ(mux_async_send(&a), 0);
    CHECK_EQ(mux_async_pending(&a), 1);
    CHECK_EQ(mux_async_pending(&b), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(mux_async_pending(&a), 0);
    CHECK_EQ(na, 1);
    CHECK_EQ(nb, 0); /* only the watcher that was sent to */
    /* A send to a watcher that is then stopped is dropped with it. */
    CHECK_EQ(mux_async_send(&b), 0);
    CHECK_EQ(mux_async_stop(&loop, &b), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(nb, 0);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    loop_close(&loop);
}

static void *late_sender(void *arg)
{
    sleep_ms(50);
    CHECK_EQ(mux_async_send(arg), 0);
    return NULL;
}

THREAD_TEST(async_send_from_thread_wakes_blocked_loop) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_async_t a;
    int n = 0;
    CHECK_EQ(mux_async_init(&a, count_cb), 0);
    a.data = &n;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    pthread_t th;
    uint64_t t0 = mono_ns(); /* before the thread exists: it may run (and sleep) at once */
    CHECK_EQ(pthread_create(&th, NULL, late_sender, &a), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1); /* blocks until the send */
    CHECK_EQ(n, 1);
    CHECK_GE(mono_ns() - t0, 40 * MS);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    loop_close(&loop);
}

static mux_async_t *handler_async;

static void send_from_handler(int sig)
{
    (void)sig;
    int saved = errno;
    mux_async_send(handler_async);
    errno = saved;
}

#ifdef _WIN32
/* Windows has no POSIX timer: a thread raises the signal (a console event, whose handler runs
 * on a thread of its own) in 50 ms. */
static DWORD WINAPI raise_later(void *arg)
{
    (void)arg;
    Sleep(50);
    raise(SIGUSR1);
    return 0;
}
#endif

TEST(async_send_from_signal_handler_wakes_loop) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_async_t a;
    int n = 0;
    CHECK_EQ(mux_async_init(&a, count_cb), 0);
    a.data = &n;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    handler_async = &a;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = send_from_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    CHECK_EQ(sigaction(SIGUSR1, &sa, &old), 0);
#ifdef _WIN32
    HANDLE th = CreateThread(NULL, 0, raise_later, NULL, 0, NULL);
    CHECK(th != NULL);
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(WaitForSingleObject(th, 5000), WAIT_OBJECT_0);
    CloseHandle(th);
#else
    /* A POSIX timer raises SIGUSR1 in 50 ms, while the loop is blocked. */
    timer_t tid;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGUSR1;
    CHECK_EQ(timer_create(CLOCK_MONOTONIC, &sev, &tid), 0);
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_nsec = 50 * 1000000L;
    uint64_t t0 = mono_ns(); /* before the timer is set: a loaded machine may pause between */
    CHECK_EQ(timer_settime(tid, 0, &its, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(timer_delete(tid), 0);
#endif
    CHECK_EQ(n, 1);
    CHECK_GE(mono_ns() - t0, 40 * MS);
    CHECK_EQ(sigaction(SIGUSR1, &old, NULL), 0);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    loop_close(&loop);
}

static void stop_self_cb(mux_loop_t *loop, mux_async_t *a)
{
    CHECK_EQ(mux_async_stop(loop, a), 0);
    CHECK_EQ(mux_async_send(a), -EINVAL); /* stopped: nothing to wake */
    (*(int *)a->data)++;
}

TEST(async_stop_inside_own_callback) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_async_t a;
    int n = 0;
    CHECK_EQ(mux_async_init(&a, stop_self_cb), 0);
    a.data = &n;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_async_send(&a), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(n, 1);
    loop_close(&loop);
}

static void count_async(mux_loop_t *loop, mux_async_t *w)
{
    ++*(int *)w->data;
    mux_loop_stop(loop);
}

static void give_up(mux_loop_t *loop, mux_timer_t *t)
{
    (void)t;
    mux_loop_stop(loop);
}

/* A send the parent had not consumed when it forked: the child's loop must still see it,
 * and later sends in the child must wake it. */
TEST(async_sent_before_fork_reaches_the_child) {
    mux_loop_t loop;
    loop_open(&loop);
    int calls = 0;
    mux_async_t a;
    CHECK_EQ(mux_async_init(&a, count_async), 0);
    a.data = &calls;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_async_send(&a), 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        mux_timer_t t;
        mux_timer_init(&t, give_up);
        mux_timer_start(&loop, &t, 1000 * MS, 0);
        uint64_t t0 = mono_ns();
        mux_run(&loop, MUX_RUN_DEFAULT);
        int first = calls, prompt = mono_ns() - t0 < 500 * MS; /* not the 1 s safety timer */
        mux_async_send(&a);                                    /* a later send wakes it too */
        mux_run(&loop, MUX_RUN_DEFAULT);
        child_exit(first == 1 && prompt && calls == 2 ? 0 : 10 + calls + 5 * !prompt);
    }
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1); /* the parent's own send is still there */
    CHECK_EQ(calls, 1);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    loop_close(&loop);
}

/* The header's way of stopping an async watcher that other threads send to: the senders
 * send only while a flag of the caller's is set, under the caller's lock, and the loop's
 * thread clears the flag under that lock before it stops the watcher (and closes the loop)
 * while the senders go on running. Under ThreadSanitizer this shows the pattern race-free. */
struct guarded {
    pthread_mutex_t m;
    int open, stop_senders;
    mux_async_t w;
    int calls;
    long sends;
};

static void guarded_cb(mux_loop_t *loop, mux_async_t *w)
{
    struct guarded *g = w->data;
    (void)loop;
    g->calls++;
}

static void *guarded_sender(void *arg)
{
    struct guarded *g = arg;
    for (;;) {
        pthread_mutex_lock(&g->m);
        int stop = g->stop_senders;
        if (g->open) {
            CHECK_EQ(mux_async_send(&g->w), 0);
            g->sends++;
        }
        pthread_mutex_unlock(&g->m);
        if (stop)
            return NULL;
    }
}

THREAD_TEST(async_stop_while_threads_send_behind_a_flag_under_a_lock) {
    mux_loop_t loop;
    loop_open(&loop);
    struct guarded g;
    memset(&g, 0, sizeof g);
    CHECK_EQ(pthread_mutex_init(&g.m, NULL), 0);
    CHECK_EQ(mux_async_init(&g.w, guarded_cb), 0);
    g.w.data = &g;
    CHECK_EQ(mux_async_start(&loop, &g.w), 0);
    g.open = 1;
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, guarded_sender, &g), 0);
    for (int i = 0; i < 1000 && g.calls < 20; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_GE(g.calls, 20);
    pthread_mutex_lock(&g.m);
    g.open = 0; /* no send starts after this */
    pthread_mutex_unlock(&g.m);
    CHECK_EQ(mux_async_stop(&loop, &g.w), 0);
    loop_close(&loop); /* the senders are still running */
    pthread_mutex_lock(&g.m);
    g.stop_senders = 1;
    pthread_mutex_unlock(&g.m);
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0);
    CHECK_GT(g.sends, 0);
    pthread_mutex_destroy(&g.m);
}

/* A send may overlap the stop (iomux.h): the stop waits for sends already inside
 * mux_async_send, later sends get -EINVAL, and the loop may close at once, its backend's
 * memory freed, while the senders go on calling send on the (still valid) watcher. Under
 * the sanitizers a send that touched the closed loop's memory is a report; 50 rounds with
 * two senders that never stop between the sends make the overlap likely. */
struct racing {
    mux_async_t w;
    atomic_int calls, einval;
};

static void racing_cb(mux_loop_t *loop, mux_async_t *w)
{
    (void)loop;
    struct racing *r = w->data;
    atomic_fetch_add(&r->calls, 1);
}

static void *racing_sender(void *arg)
{
    struct racing *r = arg;
    for (;;) { /* until a send says the watcher was stopped */
        int rc = mux_async_send(&r->w);
        if (rc == -EINVAL) {
            atomic_fetch_add(&r->einval, 1);
            break; /* stopped: the loop may be gone */
        }
        CHECK_EQ(rc, 0);
    }
    return NULL;
}

THREAD_TEST(async_stop_overlapping_sends_lets_the_loop_close_at_once) {
    for (int round = 0; round < 50; round++) {
        mux_loop_t *loop = malloc(sizeof *loop);
        CHECK(loop != NULL);
        loop_open(loop);
        struct racing r;
        memset(&r, 0, sizeof r);
        CHECK_EQ(mux_async_init(&r.w, racing_cb), 0);
        r.w.data = &r;
        CHECK_EQ(mux_async_start(loop, &r.w), 0);
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
            CHECK_EQ(pthread_create(&th[i], NULL, racing_sender, &r), 0);
        while (atomic_load(&r.calls) == 0)
            CHECK_GE(mux_run(loop, MUX_RUN_ONCE), 0);
        CHECK_EQ(mux_async_stop(loop, &r.w), 0); /* the senders are still sending */
        CHECK_EQ(mux_async_send(&r.w), -EINVAL);
        loop_close(loop);
        free(loop); /* while they may still be inside a send that saw the stop */
        for (int i = 0; i < 2; i++)
            CHECK_EQ(pthread_join(th[i], NULL), 0);
        CHECK_EQ(atomic_load(&r.einval), 2); /* each sender saw the stop, none crashed */
    }
}
