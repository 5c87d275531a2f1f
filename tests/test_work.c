/* SPDX-License-Identifier: MIT */
/* The worker pool (mux_work_t): work off the loop's thread, completions on it, cancellation
 * before the start, the pool's size. Each case runs in a process of its own, so each sees a
 * pool that has not started yet. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "iomux/work.h"
#include "work/work.h"
#include "work_util.h"

/* ---- a gate: work that blocks until the case opens it ---- */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open, gate_waiting;

static void gate_work(mux_work_t *w)
{
    (void)w;
    pthread_mutex_lock(&gate_mu);
    gate_waiting++;
    pthread_cond_broadcast(&gate_cond);
    while (!gate_open)
        pthread_cond_wait(&gate_cond, &gate_mu);
    gate_waiting--;
    pthread_mutex_unlock(&gate_mu);
}

/* Waits until `n` gate works are blocked in it. */
static void gate_wait_for(int n)
{
    pthread_mutex_lock(&gate_mu);
    while (gate_waiting < n)
        pthread_cond_wait(&gate_cond, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
}

static void gate_release(void)
{
    pthread_mutex_lock(&gate_mu);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_mu);
}

/* ---- a request that records what happened to it ---- */

struct job {
    mux_work_t w;
    pthread_t loop_thread, ran_on;
    atomic_int ran;
    int done, status;
    int done_on_loop_thread;
};

static void job_work(mux_work_t *w)
{
    struct job *j = w->data;
    j->ran_on = pthread_self();
    atomic_fetch_add(&j->ran, 1);
}

static void job_done(mux_work_t *w, int status)
{
    struct job *j = w->data;
    j->done++;
    j->status = status;
    j->done_on_loop_thread = pthread_equal(pthread_self(), j->loop_thread);
}

static void job_queue(mux_loop_t *loop, struct job *j, mux_work_cb work)
{
    memset(j, 0, sizeof *j);
    j->loop_thread = pthread_self();
    CHECK_EQ(mux_work_queue(loop, &j->w, work, job_done), 0);
    j->w.data = j;
}

THREAD_TEST(work_runs_on_a_pool_thread_and_is_called_back_on_the_loop)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct job j;
    memset(&j, 0, sizeof j);
    j.loop_thread = pthread_self();
    j.w.data = &j;
    CHECK_EQ(mux_work_queue(&loop, &j.w, job_work, job_done), 0);
    CHECK_EQ(j.w.data, &j); /* kept */
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(j.done, 0); /* never from inside the queue */
    CHECK_EQ(mux_loop_close(&loop), -EBUSY);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(atomic_load(&j.ran), 1);
    CHECK(!pthread_equal(j.ran_on, j.loop_thread));
    CHECK_EQ(j.done, 1);
    CHECK_EQ(j.status, 0);
    CHECK_EQ(j.done_on_loop_thread, 1);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

enum { MANY = 2000 };

struct many {
    mux_work_t w[MANY];
    atomic_int ran[MANY];
    int done[MANY];
    int calls;
};

static void many_work(mux_work_t *w)
{
    struct many *m = w->data;
    atomic_fetch_add(&m->ran[w - m->w], 1);
}

static void many_done(mux_work_t *w, int status)
{
    struct many *m = w->data;
    CHECK_EQ(status, 0);
    m->done[w - m->w]++;
    m->calls++;
}

THREAD_TEST(work_2000_requests_each_run_and_called_back_exactly_once)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct many *m = calloc(1, sizeof *m);
    CHECK(m != NULL);
    for (int i = 0; i < MANY; i++) {
        m->w[i].data = m;
        CHECK_EQ(mux_work_queue(&loop, &m->w[i], many_work, many_done), 0);
    }
    CHECK_EQ(mux_loop_active(&loop), MANY);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(m->calls, MANY);
    for (int i = 0; i < MANY; i++) {
        CHECK_EQ(atomic_load(&m->ran[i]), 1);
        CHECK_EQ(m->done[i], 1);
    }
    unsigned started = 0;
    CHECK_EQ(mux_work_pool_threads(&started), MUX_WORK_POOL_DEFAULT);
    CHECK_GE(started, 1);
    CHECK_LE(started, MUX_WORK_POOL_DEFAULT);
    free(m);
    loop_close(&loop);
}

THREAD_TEST(work_cancel_before_the_start_calls_back_with_ecanceled)
{
    CHECK_EQ(mux_work_pool_size(1), 0);
    mux_loop_t loop;
    loop_open(&loop);
    struct job blocker, target, after;
    job_queue(&loop, &blocker, gate_work);
    gate_wait_for(1); /* the pool's one thread is held */
    job_queue(&loop, &target, job_work);
    job_queue(&loop, &after, job_work);
    CHECK_EQ(mux_work_cancel(&target.w), 0);
    CHECK_EQ(target.done, 0);                     /* from the loop, not from inside the cancel */
    CHECK_EQ(mux_work_cancel(&target.w), -EBUSY); /* its callback is due */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);  /* the cancelled one is called back */
    CHECK_EQ(target.done, 1);
    CHECK_EQ(target.status, -ECANCELED);
    CHECK_EQ(target.done_on_loop_thread, 1);
    CHECK_EQ(mux_work_cancel(&target.w), -EINVAL); /* no longer pending */
    gate_release();
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(atomic_load(&target.ran), 0); /* never ran */
    CHECK_EQ(blocker.status, 0);
    CHECK_EQ(after.done, 1); /* the queue went on past the cancelled request */
    CHECK_EQ(after.status, 0);
    CHECK_EQ(atomic_load(&after.ran), 1);
    loop_close(&loop);
}

THREAD_TEST(work_cancel_of_a_running_request_is_ebusy_and_it_completes)
{
    CHECK_EQ(mux_work_pool_size(1), 0);
    mux_loop_t loop;
    loop_open(&loop);
    struct job blocker;
    job_queue(&loop, &blocker, gate_work);
    gate_wait_for(1);
    CHECK_EQ(mux_work_cancel(&blocker.w), -EBUSY);
    gate_release();
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(blocker.done, 1);
    CHECK_EQ(blocker.status, 0);
    loop_close(&loop);
}

THREAD_TEST(work_pool_size_from_the_environment_bounds_the_threads_at_work)
{
    CHECK_EQ(setenv("IOMUX_THREADPOOL_SIZE", "3", 1), 0);
    mux_loop_t loop;
    loop_open(&loop);
    long before = count_threads(); /* after the loop's own (libkqueue's, on kqueue) */
    CHECK_EQ(mux_work_pool_threads(NULL), 3);
    struct job j[8];
    for (int i = 0; i < 8; i++)
        job_queue(&loop, &j[i], gate_work);
    gate_wait_for(3); /* three at once, no more */
    sleep_ms(50);
    pthread_mutex_lock(&gate_mu);
    CHECK_EQ(gate_waiting, 3);
    pthread_mutex_unlock(&gate_mu);
    unsigned started = 0;
    mux_work_pool_threads(&started);
    CHECK_EQ(started, 3);
    CHECK_EQ(count_threads(), before + 3);
    CHECK_EQ(mux_work_pool_size(8), -EBUSY); /* fixed once started */
    gate_release();
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    for (int i = 0; i < 8; i++)
        CHECK_EQ(j[i].done, 1);
    CHECK_EQ(count_threads(), before + 3); /* the pool's, parked; no other */
    loop_close(&loop);
}

THREAD_TEST(work_pool_size_out_of_range_in_the_environment_takes_the_default)
{
    CHECK_EQ(setenv("IOMUX_THREADPOOL_SIZE", "5000", 1), 0);
    CHECK_EQ(mux_work_pool_threads(NULL), MUX_WORK_POOL_DEFAULT);
}

THREAD_TEST(work_pool_size_call_wins_over_the_environment)
{
    CHECK_EQ(setenv("IOMUX_THREADPOOL_SIZE", "7", 1), 0);
    CHECK_EQ(mux_work_pool_size(0), -EINVAL);
    CHECK_EQ(mux_work_pool_size(MUX_WORK_POOL_MAX + 1), -EINVAL);
    CHECK_EQ(mux_work_pool_size(2), 0);
    CHECK_EQ(mux_work_pool_threads(NULL), 2);
    CHECK_EQ(mux_work_pool_size(MUX_WORK_POOL_MAX), 0); /* not started yet: may change */
    CHECK_EQ(mux_work_pool_threads(NULL), MUX_WORK_POOL_MAX);
}

static int requeued;
static mux_loop_t *requeue_loop;

static void requeue_done(mux_work_t *w, int status)
{
    CHECK_EQ(status, 0);
    struct job *j = w->data;
    j->done++;
    if (j->done < 5) /* queued again from its own callback */
        CHECK_EQ(mux_work_queue(requeue_loop, w, job_work, requeue_done), 0);
    else
        requeued = 1;
}

THREAD_TEST(work_queued_again_from_its_own_callback)
{
    mux_loop_t loop;
    loop_open(&loop);
    requeue_loop = &loop;
    struct job j;
    memset(&j, 0, sizeof j);
    j.w.data = &j;
    CHECK_EQ(mux_work_queue(&loop, &j.w, job_work, requeue_done), 0);
    run_until(&loop, &requeued, 10000);
    CHECK_EQ(j.done, 5);
    CHECK_EQ(atomic_load(&j.ran), 5);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_close(&loop);
}

static void nop_work(mux_work_t *w)
{
    (void)w;
}

THREAD_TEST(work_bad_input_is_einval)
{
    mux_loop_t loop;
    loop_open(&loop);
    mux_work_t w;
    memset(&w, 0, sizeof w);
    CHECK_EQ(mux_work_queue(NULL, &w, nop_work, NULL), -EINVAL);
    CHECK_EQ(mux_work_queue(&loop, NULL, nop_work, NULL), -EINVAL);
    CHECK_EQ(mux_work_queue(&loop, &w, NULL, NULL), -EINVAL);
    CHECK_EQ(mux_work_cancel(NULL), -EINVAL);
    CHECK_EQ(mux_work_cancel(&w), -EINVAL); /* never queued */
    mux_loop_t closed;
    memset(&closed, 0, sizeof closed);
    CHECK_EQ(mux_work_queue(&closed, &w, nop_work, NULL), -EINVAL);
    /* no done callback: allowed */
    CHECK_EQ(mux_work_queue(&loop, &w, nop_work, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(mux_work_cancel(&w), -EINVAL); /* done */
    loop_close(&loop);
}

/* Several loops on several threads share the one pool; each gets its own completions. */
struct loop_thread {
    pthread_t th;
    struct many *m;
    int ok;
};

static void *loop_thread_main(void *arg)
{
    struct loop_thread *t = arg;
    mux_loop_t loop;
    loop_open(&loop);
    for (int i = 0; i < MANY; i++) {
        t->m->w[i].data = t->m;
        CHECK_EQ(mux_work_queue(&loop, &t->m->w[i], many_work, many_done), 0);
    }
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(t->m->calls, MANY);
    loop_close(&loop);
    t->ok = 1;
    return NULL;
}

THREAD_TEST(work_four_loops_on_four_threads_share_the_pool)
{
    struct loop_thread t[4];
    for (int i = 0; i < 4; i++) {
        t[i].m = calloc(1, sizeof *t[i].m);
        t[i].ok = 0;
        CHECK(t[i].m != NULL);
        CHECK_EQ(pthread_create(&t[i].th, NULL, loop_thread_main, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(pthread_join(t[i].th, NULL), 0);
        CHECK_EQ(t[i].ok, 1);
        for (int k = 0; k < MANY; k++)
            CHECK_EQ(t[i].m->done[k], 1);
        free(t[i].m);
    }
}

/* The resolver's way of cancelling: a request that runs is left to its thread, which frees
 * it; the loop forgets it at once and can close. */
struct owned {
    mux_work_t w; /* first: the request's address is the struct's */
    char payload[64];
};

static atomic_int reaped_count;

static void owned_reap(mux_work_t *w)
{
    atomic_fetch_add(&reaped_count, 1);
    free((struct owned *)w);
}

THREAD_TEST(work_abandoned_while_running_is_freed_by_its_thread)
{
    CHECK_EQ(mux_work_pool_size(1), 0);
    mux_loop_t loop;
    loop_open(&loop);
    struct owned *o = calloc(1, sizeof *o);
    CHECK(o != NULL);
    CHECK_EQ(mux_work_queue(&loop, &o->w, gate_work, NULL), 0);
    gate_wait_for(1);
    CHECK_EQ(mux__work_abandon(&o->w, owned_reap), 1);
    CHECK_EQ(mux_loop_active(&loop), 0); /* forgotten at once */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    loop_close(&loop); /* while its thread still runs it */
    CHECK_EQ(atomic_load(&reaped_count), 0);
    gate_release();
    for (int i = 0; i < 2000 && atomic_load(&reaped_count) == 0; i++)
        sleep_ms(1);
    CHECK_EQ(atomic_load(&reaped_count), 1);
}
