/* SPDX-License-Identifier: MIT */
/* Periodic watchers: absolute wall-clock times, intervals, and clock jumps (simulated with
 * the library's test-only wall-clock offset). */
#include <errno.h>
#include <stdio.h>

#include "harness.h"
#include "internal.h" /* mux__test_wall_offset */

#define SEC (1000 * (int64_t)MS)

struct pstate {
    int calls;
    int64_t at;         /* the firing time asked for */
    int64_t fired_wall; /* mux_wall_now in the callback */
    uint64_t fired_mono;
};

static void once_cb(mux_loop_t *loop, mux_periodic_t *p)
{
    struct pstate *s = p->data;
    s->calls++;
    s->fired_wall = mux_wall_now(loop);
    s->fired_mono = mono_ns();
    CHECK_EQ(mux_periodic_at(loop, p), -EINVAL); /* a one-shot is inactive in its callback */
    CHECK_GE(wall_ns() + mux__test_wall_offset, s->at);
    CHECK_GE(s->fired_wall, s->at);
}

TEST(periodic_fires_at_absolute_wall_time) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_periodic_t p;
    struct pstate s = {0, 0, 0, 0};
    CHECK_EQ(mux_periodic_init(&p, once_cb), 0);
    p.data = &s;
    s.at = mux_wall_now(&loop) + 50 * (int64_t)MS;
    CHECK_EQ(mux_periodic_start(&loop, &p, s.at, 0), 0);
    CHECK_EQ(mux_periodic_at(&loop, &p), s.at);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* fires once and stops */
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(mux_periodic_at(&loop, &p), -EINVAL);
    CHECK_LT(s.fired_wall - s.at, 1 * SEC);
    loop_close(&loop);
}

TEST(periodic_time_in_the_past_fires_at_once) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_periodic_t p;
    struct pstate s = {0, 0, 0, 0};
    CHECK_EQ(mux_periodic_init(&p, once_cb), 0);
    p.data = &s;
    s.at = mux_wall_now(&loop) - 10 * SEC;
    CHECK_EQ(mux_periodic_start(&loop, &p, s.at, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(s.calls, 1);
    /* Offset 0: the epoch itself, long past. */
    s.at = 0;
    CHECK_EQ(mux_periodic_start(&loop, &p, 0, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(s.calls, 2);
    loop_close(&loop);
}

struct interval {
    int calls;
    int64_t offset, interval, expect; /* expect: the boundary due next */
};

static void interval_cb(mux_loop_t *loop, mux_periodic_t *p)
{
    struct interval *s = p->data;
    CHECK_GE(mux_wall_now(loop), s->expect);
    CHECK_GE(wall_ns() + mux__test_wall_offset, s->expect);
    /* Still active; the next firing is the next boundary after now. */
    int64_t next = mux_periodic_at(loop, p);
    CHECK_GT(next, s->expect);
    CHECK_EQ((next - s->offset) % s->interval, 0);
    CHECK_GT(next, mux_wall_now(loop));
    CHECK_LE(next, mux_wall_now(loop) + s->interval);
    s->expect = next;
    if (++s->calls == 4)
        CHECK_EQ(mux_periodic_stop(loop, p), 0);
}

TEST(periodic_interval_fires_on_multiples_of_interval) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_periodic_t p;
    struct interval s = {0, 7 * (int64_t)MS, 20 * (int64_t)MS, 0};
    CHECK_EQ(mux_periodic_init(&p, interval_cb), 0);
    p.data = &s;
    int64_t now = mux_wall_now(&loop);
    CHECK_EQ(mux_periodic_start(&loop, &p, s.offset, (uint64_t)s.interval), 0);
    s.expect = mux_periodic_at(&loop, &p);
    CHECK_EQ((s.expect - s.offset) % s.interval, 0);
    CHECK_GT(s.expect, now - 1 * (int64_t)MS);
    CHECK_LE(s.expect, mux_wall_now(&loop) + s.interval);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(s.calls, 4);
    loop_close(&loop);
}

TEST(periodic_at_returns_next_firing_time) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_periodic_t p;
    struct pstate s = {0, 0, 0, 0};
    CHECK_EQ(mux_periodic_init(&p, once_cb), 0);
    p.data = &s;
    CHECK_EQ(mux_periodic_at(&loop, &p), -EINVAL);
    int64_t at = mux_wall_now(&loop) + 3600 * SEC;
    CHECK_EQ(mux_periodic_start(&loop, &p, at, 0), 0);
    CHECK_EQ(mux_periodic_at(&loop, &p), at);
    CHECK_EQ(mux_periodic_stop(&loop, &p), 0);
    /* Every full hour (offset 0, interval 1 h): the next full hour after now. */
    int64_t now = mux_wall_now(&loop);
    CHECK_EQ(mux_periodic_start(&loop, &p, 0, 3600 * (uint64_t)SEC), 0);
    int64_t next = mux_periodic_at(&loop, &p);
    CHECK_EQ(next % (3600 * SEC), 0);
    CHECK_GT(next, now - 1 * SEC);
    CHECK_LE(next, now + 3600 * SEC + 1 * SEC);
    CHECK_EQ(mux_periodic_stop(&loop, &p), 0);
    /* An offset larger than the interval means the same phase. */
    CHECK_EQ(mux_periodic_start(&loop, &p, 5 * SEC + 250 * (int64_t)MS, 1 * SEC), 0);
    next = mux_periodic_at(&loop, &p);
    CHECK_EQ(next % SEC, 250 * (int64_t)MS);
    CHECK_LE(next - mux_wall_now(&loop), 1 * SEC);
    CHECK_EQ(mux_periodic_stop(&loop, &p), 0);
    CHECK_EQ(s.calls, 0);
    loop_close(&loop);
}

/* A timer that keeps the loop iterating (a real clock jump also wakes the loop through the
 * kernel; the simulated one is noticed on the loop's next iteration). */
static void heartbeat_cb(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    (void)t;
}

static void stop_cb(mux_loop_t *loop, mux_periodic_t *p)
{
    struct pstate *s = p->data;
    s->calls++;
    s->fired_mono = mono_ns();
    s->fired_wall = mux_wall_now(loop);
    CHECK_EQ(mux_periodic_stop(loop, p), 0);
    CHECK_EQ(mux_loop_stop(loop), 0);
}

TEST(periodic_interval_survives_clock_jump_back) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_periodic_t p;
    mux_timer_t hb;
    struct pstate s = {0, 0, 0, 0};
    CHECK_EQ(mux_periodic_init(&p, stop_cb), 0);
    p.data = &s;
    CHECK_EQ(mux_timer_init(&hb, heartbeat_cb), 0);
    CHECK_EQ(mux_timer_start(&loop, &hb, 50 * MS, 50 * MS), 0);
    CHECK_EQ(mux_periodic_start(&loop, &p, 500 * (int64_t)MS, 1 * SEC), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    mux__test_wall_offset = -3600 * SEC; /* the clock is set back an hour */
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 1); /* until stop_cb, heartbeat still on */
    mux__test_wall_offset = 0;
    CHECK_EQ(s.calls, 1);
    printf("fired %.3f s after the jump\n", (double)(s.fired_mono - t0) / 1e9);
    CHECK_LT(s.fired_mono - t0, 2500 * MS);          /* about one interval, not an hour */
    CHECK_GE(s.fired_wall % SEC, 500 * (int64_t)MS); /* on the phase of the shifted clock */
    CHECK_EQ(mux_timer_stop(&loop, &hb), 0);
    loop_close(&loop);
}

TEST(periodic_one_shot_fires_after_clock_jump_forward) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_periodic_t p;
    mux_timer_t hb;
    struct pstate s = {0, 0, 0, 0};
    CHECK_EQ(mux_periodic_init(&p, stop_cb), 0);
    p.data = &s;
    CHECK_EQ(mux_timer_init(&hb, heartbeat_cb), 0);
    CHECK_EQ(mux_timer_start(&loop, &hb, 50 * MS, 50 * MS), 0);
    int64_t at = mux_wall_now(&loop) + 3600 * SEC;
    CHECK_EQ(mux_periodic_start(&loop, &p, at, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(s.calls, 0);
    mux__test_wall_offset = 3600 * SEC; /* the clock is set forward an hour */
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 1);
    mux__test_wall_offset = 0;
    CHECK_EQ(s.calls, 1);
    printf("fired %.3f s after the jump\n", (double)(s.fired_mono - t0) / 1e9);
    CHECK_LT(s.fired_mono - t0, 1000 * MS);
    CHECK_GE(s.fired_wall, at);
    CHECK_EQ(mux_timer_stop(&loop, &hb), 0);
    loop_close(&loop);
}

/* After a jump forward, an interval periodic fires once and continues on the new clock's
 * boundaries, rather than firing once per missed interval. It stops the loop at its third
 * call, so the case waits for calls, not for a span of time a loaded machine may not give. */
struct jumped {
    int calls;
    uint64_t mono[3];
    int64_t next[3];
};

static void jumped_cb(mux_loop_t *loop, mux_periodic_t *p)
{
    struct jumped *j = p->data;
    j->mono[j->calls++] = mono_ns();
    int64_t next = mux_periodic_at(loop, p);
    CHECK_GT(next, mux_wall_now(loop));
    CHECK_LE(next, mux_wall_now(loop) + 100 * (int64_t)MS);
    j->next[j->calls - 1] = next;
    if (j->calls == 3)
        CHECK_EQ(mux_loop_stop(loop), 0);
}

static void end_cb(mux_loop_t *loop, mux_timer_t *t)
{
    (void)t;
    CHECK_EQ(mux_loop_stop(loop), 0);
}

TEST(periodic_interval_after_clock_jump_forward_does_not_burst) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_periodic_t p;
    mux_timer_t hb, end;
    struct jumped j = {0, {0}, {0}};
    CHECK_EQ(mux_periodic_init(&p, jumped_cb), 0);
    p.data = &j;
    CHECK_EQ(mux_timer_init(&hb, heartbeat_cb), 0);
    CHECK_EQ(mux_timer_init(&end, end_cb), 0);
    CHECK_EQ(mux_periodic_start(&loop, &p, 0, 100 * MS), 0);
    CHECK_EQ(mux_timer_start(&loop, &hb, 10 * MS, 10 * MS), 0);
    mux__test_wall_offset = 3600 * SEC; /* 36,000 intervals missed */
    CHECK_EQ(mux_timer_start(&loop, &end, 30 * SEC, 0), 0); /* a bound, not the measure */
    CHECK_GE(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    mux__test_wall_offset = 0;
    printf("3 calls in %.3f s\n", (double)(j.mono[2] - j.mono[0]) / 1e9);
    CHECK_EQ(j.calls, 3);
    /* Each call's next time is in the future (checked in the callback: a burst would be
     * due at once) and on the new clock's boundaries: whole intervals apart (more than one
     * where a loaded machine called late and the periodic skipped). */
    for (int i = 1; i < 3; i++) {
        CHECK_GT(j.next[i], j.next[i - 1]);
        CHECK_EQ((j.next[i] - j.next[i - 1]) % (int64_t)(100 * MS), 0);
    }
    CHECK_EQ(mux_periodic_stop(&loop, &p), 0);
    CHECK_EQ(mux_timer_stop(&loop, &hb), 0);
    CHECK_EQ(mux_timer_stop(&loop, &end), 0);
    loop_close(&loop);
}

static void never(mux_loop_t *loop, mux_periodic_t *p)
{
    (void)loop;
    (void)p;
    CHECK(!"a periodic with a huge interval fired");
}

/* offset + k * interval overflowed int64_t: the periodic became due at time 0 forever and
 * mux_run never returned. */
TEST(periodic_huge_interval_neither_hangs_nor_fires) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_periodic_t p;
    CHECK_EQ(mux_periodic_init(&p, never), 0);
    CHECK_EQ(mux_periodic_start(&loop, &p, 1000000000, INT64_MAX), 0);
    CHECK_GT(mux_periodic_at(&loop, &p), mux_wall_now(&loop));
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(mux_periodic_stop(&loop, &p), 0);
    loop_close(&loop);
}
