/* SPDX-License-Identifier: MIT */
/* Timers: delays, repeats, ordering, never early, scale, idle timeouts with again. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static void count_cb(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    (*(int *)t->data)++;
}

TEST(timer_fires_once_after_delay) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    int n = 0;
    CHECK_EQ(mux_timer_init(&t, count_cb), 0);
    t.data = &n;
    CHECK_EQ(mux_now_update(&loop), 0);
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_timer_start(&loop, &t, 20 * MS, 0), 0);
    CHECK_EQ(mux_timer_is_active(&t), 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(n, 1);
    CHECK_GE(mono_ns() - t0, 20 * MS);
    CHECK_EQ(mux_timer_is_active(&t), 0);
    loop_close(&loop);
}

TEST(timer_zero_delay_fires_on_next_iteration) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    int n = 0;
    CHECK_EQ(mux_timer_init(&t, count_cb), 0);
    t.data = &n;
    CHECK_EQ(mux_timer_start(&loop, &t, 0, 0), 0);
    CHECK_EQ(n, 0); /* never from inside start */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(n, 1);
    loop_close(&loop);
}

struct repeat {
    int n, stop_at;
    uint64_t start, after, repeat;
};

static void repeat_cb(mux_loop_t *loop, mux_timer_t *t)
{
    struct repeat *r = t->data;
    r->n++;
    /* The k-th expiry is not before start + after + (k-1) * repeat. */
    CHECK_GE(mux_now(loop), r->start + r->after + (uint64_t)(r->n - 1) * r->repeat);
    CHECK_EQ(mux_timer_is_active(t), 1);
    if (r->n == r->stop_at) {
        CHECK_EQ(mux_timer_stop(loop, t), 0);
        CHECK_EQ(mux_timer_is_active(t), 0);
    }
}

TEST(timer_repeat_fires_n_times) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    struct repeat r = {0, 5, 0, 2 * MS, 3 * MS};
    CHECK_EQ(mux_timer_init(&t, repeat_cb), 0);
    t.data = &r;
    CHECK_EQ(mux_now_update(&loop), 0);
    r.start = mux_now(&loop);
    CHECK_EQ(mux_timer_start(&loop, &t, r.after, r.repeat), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(r.n, 5);
    loop_close(&loop);
}

/* A repeating timer that stops itself on its first call is never called again, while
 * another timer keeps the loop running for many of its periods. */
TEST(timer_repeating_stop_inside_own_callback) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t, keep;
    struct repeat r = {0, 1, 0, 1 * MS, 1 * MS};
    int kept = 0;
    CHECK_EQ(mux_timer_init(&t, repeat_cb), 0);
    t.data = &r;
    CHECK_EQ(mux_timer_init(&keep, count_cb), 0);
    keep.data = &kept;
    r.start = mux_now(&loop);
    CHECK_EQ(mux_timer_start(&loop, &t, r.after, r.repeat), 0);
    CHECK_EQ(mux_timer_start(&loop, &keep, 30 * MS, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(r.n, 1);
    CHECK_EQ(kept, 1);
    loop_close(&loop);
}

static void restart_cb(mux_loop_t *loop, mux_timer_t *t)
{
    int *n = t->data;
    if (++*n < 5)
        CHECK_EQ(mux_timer_start(loop, t, 1 * MS, 0), 0); /* inactive again: may restart */
}

TEST(timer_restart_inside_own_callback) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    int n = 0;
    CHECK_EQ(mux_timer_init(&t, restart_cb), 0);
    t.data = &n;
    CHECK_EQ(mux_timer_start(&loop, &t, 1 * MS, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(n, 5);
    loop_close(&loop);
}

/* Records the order of firing: data points at the timer's index. */
static int fired_order[1000], nfired;

static void order_cb(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    fired_order[nfired++] = *(int *)t->data;
}

TEST(timer_equal_deadlines_fire_in_start_order) {
    enum { N = 100 };
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t[N];
    int idx[N];
    /* Started in a scrambled order of the array; the start order is what counts. */
    for (int k = 0; k < N; k++) {
        int i = (k * 37) % N;
        idx[i] = k;
        CHECK_EQ(mux_timer_init(&t[i], order_cb), 0);
        t[i].data = &idx[i];
        CHECK_EQ(mux_timer_start(&loop, &t[i], 2 * MS, 0), 0);
    }
    nfired = 0;
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(nfired, N);
    for (int k = 0; k < N; k++)
        CHECK_EQ(fired_order[k], k);
    loop_close(&loop);
}

TEST(timer_different_deadlines_fire_in_deadline_order) {
    enum { N = 200 };
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t[N];
    int rank[N];
    /* Deadlines 50 us apart, started in a scrambled order: many expire in the same
     * iteration, and they must still be called by deadline. */
    for (int k = 0; k < N; k++) {
        int r = (k * 73 + 11) % N;
        rank[k] = r;
        CHECK_EQ(mux_timer_init(&t[k], order_cb), 0);
        t[k].data = &rank[k];
        CHECK_EQ(mux_timer_start(&loop, &t[k], 1 * MS + (uint64_t)r * 50000u, 0), 0);
    }
    nfired = 0;
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(nfired, N);
    for (int k = 0; k < N; k++)
        CHECK_EQ(fired_order[k], k);
    loop_close(&loop);
}

struct early {
    uint64_t start, after;
    int fired;
};

static void early_cb(mux_loop_t *loop, mux_timer_t *t)
{
    struct early *e = t->data;
    CHECK_GE(mono_ns(), e->start + e->after);
    CHECK_GE(mux_now(loop), e->start + e->after);
    e->fired++;
}

TEST(timer_never_fires_early) {
    static const uint64_t afters[] = {1,      999,         1000,    50000,
                                      999999, 1000001,     2500000, 3 * MS + 7,
                                      5 * MS, 10 * MS + 1, 15 * MS, 16 * MS - 1};
    enum { N = sizeof afters / sizeof afters[0] };
    mux_loop_t loop;
    loop_open(&loop);
    for (int round = 0; round < 3; round++) {
        mux_timer_t t[N];
        struct early e[N];
        CHECK_EQ(mux_now_update(&loop), 0);
        for (int i = 0; i < N; i++) {
            e[i].start = mux_now(&loop);
            e[i].after = afters[i];
            e[i].fired = 0;
            CHECK_EQ(mux_timer_init(&t[i], early_cb), 0);
            t[i].data = &e[i];
            CHECK_EQ(mux_timer_start(&loop, &t[i], afters[i], 0), 0);
        }
        CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
        for (int i = 0; i < N; i++)
            CHECK_EQ(e[i].fired, 1);
    }
    loop_close(&loop);
}

TEST(timer_huge_delay_never_fires) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t1, t2;
    int n = 0;
    CHECK_EQ(mux_timer_init(&t1, count_cb), 0);
    t1.data = &n;
    CHECK_EQ(mux_timer_init(&t2, count_cb), 0);
    t2.data = &n;
    CHECK_EQ(mux_timer_start(&loop, &t1, UINT64_MAX, 0), 0);
    CHECK_EQ(mux_timer_start(&loop, &t2, UINT64_MAX - mux_now(&loop) + 1000, UINT64_MAX), 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(n, 0); /* a deadline past the end of time must not wrap around */
    CHECK_GT(mux_timer_remaining(&loop, &t1), 1000000 * (int64_t)MS);
    CHECK_GT(mux_timer_remaining(&loop, &t2), 1000000 * (int64_t)MS);
    CHECK_EQ(mux_timer_stop(&loop, &t1), 0);
    CHECK_EQ(mux_timer_stop(&loop, &t2), 0);
    loop_close(&loop);
}

/* 100,000 timers started and stopped in a seeded random order: the survivors fire in
 * (deadline, start order), the stopped ones never. */
struct many {
    uint64_t after, seq;
    char active;
};
static struct many *many;
static mux_timer_t *many_t;
static uint64_t last_after, last_seq;
static int many_fired;

static void many_cb(mux_loop_t *loop, mux_timer_t *t)
{
    struct many *m = &many[t - many_t];
    (void)loop;
    CHECK_EQ(m->active, 1); /* a stopped timer never fires */
    CHECK(m->after > last_after || (m->after == last_after && m->seq > last_seq));
    last_after = m->after;
    last_seq = m->seq;
    m->active = 0;
    many_fired++;
}

TEST(timer_100k_random_start_stop_survivors_fire_in_order) {
    enum { N = 100000 };
    harness_watchdog(170);
    mux_loop_t loop;
    loop_open(&loop);
    many = calloc(N, sizeof *many);
    many_t = calloc(N, sizeof *many_t);
    CHECK(many && many_t);
    uint64_t rng = 0x9E3779B97F4A7C15ull, seq = 0;
    for (int i = 0; i < N; i++)
        CHECK_EQ(mux_timer_init(&many_t[i], many_cb), 0);
    /* mux_now does not move while the loop does not run: after is the deadline. */
    for (int op = 0; op < 3 * N; op++) {
        uint32_t i = (uint32_t)(prng_next(&rng) % N);
        if (many[i].active) {
            CHECK_EQ(mux_timer_stop(&loop, &many_t[i]), 0);
            many[i].active = 0;
        } else {
            many[i].after = (prng_next(&rng) % 2000) * 10000; /* 0 .. 20 ms, many ties */
            many[i].seq = ++seq;
            many[i].active = 1;
            CHECK_EQ(mux_timer_start(&loop, &many_t[i], many[i].after, 0), 0);
        }
    }
    int alive = 0;
    for (int i = 0; i < N; i++)
        alive += many[i].active;
    CHECK_EQ(mux_loop_active(&loop), alive);
    printf("%d of %d timers alive\n", alive, N);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(many_fired, alive);
    loop_close(&loop);
    free(many);
    free(many_t);
}

/* One million active timers at once, all fire, in deadline order. */
static uint32_t million_fired, million_last_key;

static void million_cb(mux_loop_t *loop, mux_timer_t *t)
{
    uint32_t i = (uint32_t)(uintptr_t)t->data;
    uint32_t key = (i % 1000) * 1000000u + i / 1000; /* (deadline, start order) */
    (void)loop;
    if (million_fired > 0)
        CHECK_GT(key, million_last_key);
    million_last_key = key;
    million_fired++;
}

TEST(timer_one_million_active_all_fire) {
    enum { N = 1000000 };
    harness_watchdog(280);
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t *t = calloc(N, sizeof *t);
    CHECK(t != NULL);
    for (uint32_t i = 0; i < N; i++) {
        CHECK_EQ(mux_timer_init(&t[i], million_cb), 0);
        t[i].data = (void *)(uintptr_t)i;
        /* 1000 distinct deadlines 1 us apart, each shared by 1000 timers. */
        CHECK_EQ(mux_timer_start(&loop, &t[i], 1 * MS + (i % 1000) * 1000u, 0), 0);
    }
    CHECK_EQ(mux_loop_active(&loop), N);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(million_fired, N);
    loop_close(&loop);
    free(t);
}

/* mux_timer_again on an idle timeout: each again pushes the deadline; it fires only after
 * the last again + repeat. */
struct idle_timeout {
    mux_timer_t timeout, activity;
    int activity_calls, timeout_calls;
    uint64_t last_again;
};

static void activity_cb(mux_loop_t *loop, mux_timer_t *t)
{
    struct idle_timeout *it = t->data;
    CHECK_EQ(it->timeout_calls, 0);
    CHECK_EQ(mux_timer_again(loop, &it->timeout), 0);
    CHECK_EQ(mux_timer_is_active(&it->timeout), 1);
    it->last_again = mux_now(loop);
    if (++it->activity_calls == 10)
        CHECK_EQ(mux_timer_stop(loop, t), 0);
}

static void timeout_cb(mux_loop_t *loop, mux_timer_t *t)
{
    struct idle_timeout *it = t->data;
    CHECK_EQ(it->activity_calls, 10);
    CHECK_GE(mux_now(loop), it->last_again + 200 * MS);
    it->timeout_calls++;
    CHECK_EQ(mux_timer_stop(loop, t), 0);
}

TEST(timer_again_pushes_idle_timeout) {
    mux_loop_t loop;
    loop_open(&loop);
    struct idle_timeout it;
    memset(&it, 0, sizeof it);
    CHECK_EQ(mux_timer_init(&it.timeout, timeout_cb), 0);
    it.timeout.data = &it;
    CHECK_EQ(mux_timer_init(&it.activity, activity_cb), 0);
    it.activity.data = &it;
    CHECK_EQ(mux_timer_set_repeat(&it.timeout, 200 * MS), 0);
    CHECK_EQ(mux_timer_again(&loop, &it.timeout), 0); /* inactive: started */
    CHECK_EQ(mux_timer_is_active(&it.timeout), 1);
    it.last_again = mux_now(&loop);
    CHECK_EQ(mux_timer_start(&loop, &it.activity, 10 * MS, 10 * MS), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(it.activity_calls, 10);
    CHECK_EQ(it.timeout_calls, 1);
    loop_close(&loop);
}

TEST(timer_again_with_zero_repeat_stops) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    int n = 0;
    CHECK_EQ(mux_timer_init(&t, count_cb), 0);
    t.data = &n;
    CHECK_EQ(mux_timer_start(&loop, &t, 5 * MS, 0), 0);
    CHECK_EQ(mux_timer_again(&loop, &t), 0);
    CHECK_EQ(mux_timer_is_active(&t), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_timer_again(&loop, &t), 0); /* inactive with repeat 0: stays stopped */
    CHECK_EQ(mux_timer_is_active(&t), 0);
    /* A repeating timer whose repeat is set to 0 is stopped by again. */
    CHECK_EQ(mux_timer_start(&loop, &t, 5 * MS, 5 * MS), 0);
    CHECK_EQ(mux_timer_set_repeat(&t, 0), 0);
    CHECK_EQ(mux_timer_again(&loop, &t), 0);
    CHECK_EQ(mux_timer_is_active(&t), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    sleep_ms(10);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(n, 0);
    loop_close(&loop);
}

static void idle_never_early(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    CHECK(!"the idle timeout fired although it had just been pushed back");
    (void)t;
}

static mux_timer_t *pushed;

static void push_back(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    char c;
    (void)revents;
    CHECK_EQ(read(mux_io_fd(w), &c, 1), 1);
    CHECK_EQ(mux_timer_again(loop, pushed), 0);
}

/* An io event and the expiry of its idle timeout gathered in one iteration: the io
 * callback runs first and pushes the timeout back; the expiry already gathered must not
 * run the timer's callback any more. */
TEST(timer_again_voids_an_expiry_gathered_in_the_same_iteration) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    mux_io_t w;
    mux_timer_t idle;
    CHECK_EQ(mux_io_init(&w, push_back, sv[0], MUX_READ), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_timer_init(&idle, idle_never_early), 0);
    CHECK_EQ(mux_timer_set_repeat(&idle, 1000 * MS), 0);
    pushed = &idle;
    CHECK_EQ(mux_timer_start(&loop, &idle, 20 * MS, 1000 * MS), 0);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    usleep(40000); /* both are due when the loop next looks */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_GT(mux_timer_remaining(&loop, &idle), (int64_t)(900 * MS));
    CHECK_EQ(mux_timer_stop(&loop, &idle), 0);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

TEST(timer_remaining) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    int n = 0;
    CHECK_EQ(mux_timer_init(&t, count_cb), 0);
    t.data = &n;
    CHECK_EQ(mux_timer_remaining(&loop, &t), -EINVAL);
    CHECK_EQ(mux_timer_start(&loop, &t, 100 * MS, 0), 0);
    int64_t r = mux_timer_remaining(&loop, &t);
    CHECK_LE(r, 100 * (int64_t)MS);
    CHECK_GT(r, 90 * (int64_t)MS);
    sleep_ms(30);
    CHECK_EQ(mux_now_update(&loop), 0);
    r = mux_timer_remaining(&loop, &t);
    CHECK_LE(r, 70 * (int64_t)MS);
    CHECK_GT(r, 0);
    sleep_ms(80);
    CHECK_EQ(mux_now_update(&loop), 0);
    CHECK_EQ(mux_timer_remaining(&loop, &t), 0); /* overdue */
    /* again moves it to `repeat` from now. */
    CHECK_EQ(mux_timer_set_repeat(&t, 50 * MS), 0);
    CHECK_EQ(mux_timer_again(&loop, &t), 0);
    r = mux_timer_remaining(&loop, &t);
    CHECK_LE(r, 50 * (int64_t)MS);
    CHECK_GT(r, 40 * (int64_t)MS);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    CHECK_EQ(mux_timer_remaining(&loop, &t), -EINVAL);
    CHECK_EQ(n, 0);
    loop_close(&loop);
}

/* A repeating timer that falls behind skips the missed periods instead of firing in a
 * burst: after a 60 ms stall of a 5 ms timer, the next 25 ms see about 5 calls, not 17. */
struct behind {
    int calls, after_stall;
    uint64_t stall_end;
};

static void behind_cb(mux_loop_t *loop, mux_timer_t *t)
{
    struct behind *b = t->data;
    b->calls++;
    if (b->calls == 1) {
        sleep_ms(60);
        b->stall_end = mono_ns();
        return;
    }
    if (mono_ns() < b->stall_end + 25 * MS)
        b->after_stall++;
    else
        CHECK_EQ(mux_timer_stop(loop, t), 0);
}

TEST(timer_repeat_falling_behind_skips_missed_periods) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    struct behind b = {0, 0, 0};
    CHECK_EQ(mux_timer_init(&t, behind_cb), 0);
    t.data = &b;
    CHECK_EQ(mux_timer_start(&loop, &t, 5 * MS, 5 * MS), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    printf("%d calls in the 25 ms after the stall\n", b.after_stall);
    CHECK_GE(b.after_stall, 1);
    CHECK_LE(b.after_stall, 8);
    loop_close(&loop);
}

/* Two timers expire in the same iteration; the first stops and frees the second, which
 * must then not be called. */
struct two_timers {
    mux_timer_t *first, *second;
    int calls_first, calls_second;
};

static void first_cb(mux_loop_t *loop, mux_timer_t *t)
{
    struct two_timers *s = t->data;
    s->calls_first++;
    CHECK_EQ(mux_timer_stop(loop, s->second), 0);
    free(s->second);
    s->second = NULL;
}

static void second_cb(mux_loop_t *loop, mux_timer_t *t)
{
    struct two_timers *s = t->data;
    (void)loop;
    s->calls_second++;
}

TEST(timer_stop_other_expired_timer_inside_callback) {
    mux_loop_t loop;
    loop_open(&loop);
    struct two_timers s = {malloc(sizeof(mux_timer_t)), malloc(sizeof(mux_timer_t)), 0, 0};
    CHECK(s.first && s.second);
    CHECK_EQ(mux_timer_init(s.first, first_cb), 0);
    CHECK_EQ(mux_timer_init(s.second, second_cb), 0);
    s.first->data = s.second->data = &s;
    CHECK_EQ(mux_timer_start(&loop, s.first, 2 * MS, 0), 0);
    CHECK_EQ(mux_timer_start(&loop, s.second, 2 * MS, 0), 0); /* same deadline, later */
    sleep_ms(5);                                              /* both are due when the loop looks */
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(s.calls_first, 1);
    CHECK_EQ(s.calls_second, 0);
    free(s.first);
    loop_close(&loop);
}

/* mux_timer_again moves a deadline later without touching the heap; the timer keeps its
 * earlier place until that comes to the top. What must hold anyway: one MUX_RUN_ONCE waits
 * for the real deadline and fires the timer (the wait never ends at a deadline that moved),
 * never early; mux_timer_remaining gives the real deadline; and timers whose deadlines
 * became equal through mux_timer_again fire in the order they were restarted. */
TEST(timer_again_moved_deadline_waits_for_the_real_one) {
    mux_loop_t loop;
    loop_open(&loop);
    int calls = 0;
    mux_timer_t t;
    CHECK_EQ(mux_timer_init(&t, count_cb), 0);
    t.data = &calls;
    CHECK_EQ(mux_timer_start(&loop, &t, 20 * MS, 60 * MS), 0);
    for (int i = 0; i < 3; i++) { /* pushed back three times before it is due */
        sleep_ms(10);
        CHECK_EQ(mux_now_update(&loop), 0);
        CHECK_EQ(mux_timer_again(&loop, &t), 0);
        int64_t left = mux_timer_remaining(&loop, &t);
        CHECK_GT(left, 59 * (int64_t)MS);
        CHECK_LE(left, 60 * (int64_t)MS);
    }
    uint64_t due = mux_now(&loop) + 60 * MS;
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1); /* blocks until the real deadline: fires */
    CHECK_EQ(calls, 1);
    CHECK_GE(mono_ns(), due);
    CHECK_GE(mux_now(&loop), due);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    loop_close(&loop);
}

TEST(timer_again_equal_deadlines_fire_in_restart_order) {
    enum { N = 40 };
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t[N];
    int idx[N];
    for (int i = 0; i < N; i++) { /* started in array order, all due together */
        CHECK_EQ(mux_timer_init(&t[i], order_cb), 0);
        CHECK_EQ(mux_timer_start(&loop, &t[i], 5 * MS, 0), 0);
    }
    sleep_ms(2);
    CHECK_EQ(mux_now_update(&loop), 0);
    /* Restarted in a scrambled order, all in one go: equal deadlines again, and the
     * restart order is what counts now. Every third one is left alone (due first). */
    int k = 0;
    for (int j = 0; j < N; j++) {
        int i = (j * 17) % N;
        if (i % 3 == 0)
            continue;
        idx[i] = 1000 + k++;
        t[i].data = &idx[i];
        CHECK_EQ(mux_timer_set_repeat(&t[i], 30 * MS), 0);
        CHECK_EQ(mux_timer_again(&loop, &t[i]), 0);
    }
    int left = 0;
    for (int i = 0; i < N; i += 3) {
        idx[i] = left++;
        t[i].data = &idx[i];
    }
    nfired = 0;
    while (nfired < N)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    for (int r = 0; r < left; r++) /* the ones left alone, in start order */
        CHECK_EQ(fired_order[r], r);
    for (int r = 0; r < k; r++) /* then the restarted ones, in restart order */
        CHECK_EQ(fired_order[left + r], 1000 + r);
    for (int i = 0; i < N; i++) /* the restarted ones repeat */
        CHECK_EQ(mux_timer_stop(&loop, &t[i]), 0);
    loop_close(&loop);
}
