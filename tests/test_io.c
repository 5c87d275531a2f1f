/* SPDX-License-Identifier: MIT */
/* io watchers: readiness, several watchers per fd, changes from inside callbacks,
 * edge-triggered use, fds closed and re-used behind the loop's back, many fds. */
#include <errno.h>
#include <fcntl.h>
#ifdef __linux__
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* What an io callback saw. */
struct seen {
    int calls;
    unsigned revents, all; /* last revents, and the union of them all */
    int order;             /* global call order, 1-based */
};
static int call_order;

static void record(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct seen *s = w->data;
    (void)loop;
    s->calls++;
    s->revents = revents;
    s->all |= revents;
    s->order = ++call_order;
}

static void record_and_stop(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    record(loop, w, revents);
    CHECK_EQ(mux_io_stop(loop, w), 0);
    CHECK_EQ(mux_io_is_active(w), 0);
}

TEST(io_read_readiness) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, record, sv[0], MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_io_is_active(&w), 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 0); /* writable, but nothing to read */
    write_byte(sv[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_READ);
    CHECK_EQ(drain(sv[0]), 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 1); /* drained: not readable any more */
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

TEST(io_write_readiness) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, record, sv[0], MUX_WRITE), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_WRITE);
    /* Fill the socket: no longer writable. */
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    while (write(sv[0], buf, sizeof buf) > 0) {
    }
    CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
    s.calls = 0;
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 0);
    drain(sv[1]); /* the peer empties it: writable again */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_WRITE);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

TEST(io_several_watchers_on_one_fd_each_get_their_events) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    write_byte(sv[1]); /* sv[0] is readable and writable */
    struct seen r = {0}, wr = {0}, rw = {0}, r2 = {0};
    mux_io_t wr_, ww_, wrw_, wr2_;
    CHECK_EQ(mux_io_init(&wr_, record, sv[0], MUX_READ), 0);
    wr_.data = &r;
    CHECK_EQ(mux_io_init(&ww_, record, sv[0], MUX_WRITE), 0);
    ww_.data = &wr;
    CHECK_EQ(mux_io_init(&wrw_, record, sv[0], MUX_READ | MUX_WRITE), 0);
    wrw_.data = &rw;
    CHECK_EQ(mux_io_init(&wr2_, record, sv[0], MUX_READ), 0);
    wr2_.data = &r2;
    CHECK_EQ(mux_io_start(&loop, &wr_), 0);
    CHECK_EQ(mux_io_start(&loop, &ww_), 0);
    CHECK_EQ(mux_io_start(&loop, &wrw_), 0);
    CHECK_EQ(mux_io_start(&loop, &wr2_), 0);
    CHECK_EQ(mux_loop_active(&loop), 4);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 4);
    /* One iteration: every watcher called once, with exactly its own events. */
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.revents, MUX_READ);
    CHECK_EQ(wr.calls, 1);
    CHECK_EQ(wr.revents, MUX_WRITE);
    CHECK_EQ(rw.calls, 1);
    CHECK_EQ(rw.revents, MUX_READ | MUX_WRITE);
    CHECK_EQ(r2.calls, 1);
    CHECK_EQ(r2.revents, MUX_READ);
    /* Stopping one leaves the others watching. */
    CHECK_EQ(mux_io_stop(&loop, &wrw_), 0);
    CHECK_EQ(mux_io_stop(&loop, &wr_), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(rw.calls, 1);
    CHECK_EQ(wr.calls, 2);
    CHECK_EQ(r2.calls, 2);
    CHECK_EQ(mux_io_stop(&loop, &ww_), 0);
    CHECK_EQ(mux_io_stop(&loop, &wr2_), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

TEST(io_stop_inside_own_callback) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    write_byte(sv[1]); /* never read: level-triggered readiness stays */
    struct seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, record_and_stop, sv[0], MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* ends: nothing active */
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(s.calls, 1);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* Two watchers with events pending in the same iteration; whichever runs first stops and
 * frees the other, which must then not be called (ASan catches a call through freed
 * memory). */
struct pair {
    mux_io_t *a, *b;
    int calls_a, calls_b;
};

static void stop_the_other(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct pair *p = w->data;
    CHECK_EQ(revents, MUX_READ);
    if (w == p->a) {
        p->calls_a++;
        if (p->b) {
            CHECK_EQ(mux_io_stop(loop, p->b), 0);
            free(p->b);
            p->b = NULL;
        }
    } else {
        CHECK(w == p->b);
        p->calls_b++;
        if (p->a) {
            CHECK_EQ(mux_io_stop(loop, p->a), 0);
            free(p->a);
            p->a = NULL;
        }
    }
}

static void stop_other_case(int same_fd)
{
    mux_loop_t loop;
    loop_open(&loop);
    int s1[2], s2[2];
    make_socketpair(s1);
    make_socketpair(s2);
    write_byte(s1[1]);
    write_byte(s2[1]);
    struct pair p = {malloc(sizeof(mux_io_t)), malloc(sizeof(mux_io_t)), 0, 0};
    CHECK(p.a && p.b);
    CHECK_EQ(mux_io_init(p.a, stop_the_other, s1[0], MUX_READ), 0);
    p.a->data = &p;
    CHECK_EQ(mux_io_init(p.b, stop_the_other, same_fd ? s1[0] : s2[0], MUX_READ), 0);
    p.b->data = &p;
    CHECK_EQ(mux_io_start(&loop, p.a), 0);
    CHECK_EQ(mux_io_start(&loop, p.b), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(p.calls_a + p.calls_b, 1);
    /* The survivor goes on being called (its fd is still readable). */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(p.calls_a + p.calls_b, 2);
    CHECK(p.calls_a == 0 || p.calls_b == 0);
    mux_io_t *left = p.a ? p.a : p.b;
    CHECK_EQ(mux_io_stop(&loop, left), 0);
    free(left);
    loop_close(&loop);
    close(s1[0]);
    close(s1[1]);
    close(s2[0]);
    close(s2[1]);
}

TEST(io_stop_other_pending_watcher_on_same_fd_inside_callback) {
    stop_other_case(1);
}

TEST(io_stop_other_pending_watcher_on_other_fd_inside_callback) {
    stop_other_case(0);
}

/* Restart inside the own callback: stop, point at another fd, start again. */
struct restart {
    int sv1[2], sv2[2];
    int calls_on_1, calls_on_2;
};

static void restart_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct restart *r = w->data;
    CHECK_EQ(revents, MUX_READ);
    int fd = mux_io_fd(w);
    CHECK_EQ(drain(fd), 1);
    CHECK_EQ(mux_io_stop(loop, w), 0);
    if (fd == r->sv1[0]) {
        r->calls_on_1++;
        CHECK_EQ(mux_io_set(w, r->sv2[0], MUX_READ), 0);
    } else {
        r->calls_on_2++;
        CHECK_EQ(mux_io_set(w, r->sv1[0], MUX_READ), 0);
    }
    CHECK_EQ(mux_io_start(loop, w), 0);
    CHECK_EQ(mux_io_is_active(w), 1);
}

TEST(io_restart_inside_own_callback) {
    mux_loop_t loop;
    loop_open(&loop);
    struct restart r = {{0}, {0}, 0, 0};
    make_socketpair(r.sv1);
    make_socketpair(r.sv2);
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, restart_cb, r.sv1[0], MUX_READ), 0);
    w.data = &r;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    write_byte(r.sv1[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(r.calls_on_1, 1);
    CHECK_EQ(mux_io_fd(&w), r.sv2[0]);
    /* Now on sv2: data on sv1 is not seen, data on sv2 is. */
    write_byte(r.sv1[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(r.calls_on_1, 1);
    CHECK_EQ(r.calls_on_2, 0);
    write_byte(r.sv2[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(r.calls_on_2, 1);
    /* Back on sv1, whose byte has been waiting. */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(r.calls_on_1, 2);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(r.sv1[0]);
    close(r.sv1[1]);
    close(r.sv2[0]);
    close(r.sv2[1]);
}

static void guard_tick(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    (void)t;
}

/* A stop and a start in one iteration apply nothing when the watcher wants again what the
 * kernel was told (io.c takes the fd off the change list); with other interest, or with
 * another watcher on the fd, the kernel hears of it. A miss shows as an event that never
 * comes (the guard timer wakes the loop; run_until fails). */
TEST(io_restart_in_one_iteration_with_other_interest_reaches_the_kernel) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_timer_t guard;
    CHECK_EQ(mux_timer_init(&guard, guard_tick), 0);
    CHECK_EQ(mux_timer_start(&loop, &guard, 10 * MS, 10 * MS), 0);
    struct seen s = {0}, s2 = {0};
    mux_io_t w, w2;
    CHECK_EQ(mux_io_init(&w, record, sv[0], MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2); /* w and the guard */
    CHECK_EQ(s.calls, 0);
    /* The same interest: still reported. */
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    write_byte(sv[1]);
    run_until(&loop, &s.calls, 2000);
    CHECK_EQ(s.revents, MUX_READ);
    CHECK_EQ(drain(sv[0]), 1);
    /* Other interest in the same iteration: writable is reported, which it would never be if
     * the kernel still had the old interest (the write-only watcher would wait forever). */
    s.calls = 0;
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_WRITE), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    run_until(&loop, &s.calls, 2000);
    CHECK_EQ(s.revents, MUX_WRITE);
    /* And back, edge-triggered: one report for one byte, then none while it stays unread
     * (where the backend has edges). */
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_READ | MUX_EDGE), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2); /* w and the guard */
    s.calls = 0;
    write_byte(sv[1]);
    run_until(&loop, &s.calls, 2000);
    CHECK_EQ(s.revents, MUX_READ);
    sleep_ms(15);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2); /* the guard's tick, no second report */
    if (loop_is(&loop, "poll") || loop_is(&loop, "select") || loop_is(&loop, "iocp"))
        CHECK_EQ(s.calls, 2); /* level-triggered: the superset MUX_EDGE allows */
    else
        CHECK_EQ(s.calls, 1);
    CHECK_EQ(drain(sv[0]), 1);
    /* A second watcher on the fd: the restart of the first is applied with both. */
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_READ), 0);
    CHECK_EQ(mux_io_init(&w2, record, sv[0], MUX_WRITE), 0);
    w2.data = &s2;
    CHECK_EQ(mux_io_start(&loop, &w2), 0);
    run_until(&loop, &s2.calls, 2000);
    CHECK_EQ(mux_io_stop(&loop, &w2), 0);
    s.calls = 0;
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_io_start(&loop, &w2), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    s2.calls = 0;
    write_byte(sv[1]);
    run_until(&loop, &s.calls, 2000);
    run_until(&loop, &s2.calls, 2000);
    CHECK_EQ(s.revents, MUX_READ);
    CHECK_EQ(s2.revents, MUX_WRITE);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_io_stop(&loop, &w2), 0);
    CHECK_EQ(mux_timer_stop(&loop, &guard), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

TEST(io_modify_changes_interest) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, record, sv[0], MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 0);
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_WRITE), 0); /* active watcher */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_WRITE);
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_READ), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 1); /* writable but no longer asked for */
    write_byte(sv[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s.calls, 2);
    CHECK_EQ(s.revents, MUX_READ);
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_READ | MUX_WRITE), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s.calls, 3);
    CHECK_EQ(s.revents, MUX_READ | MUX_WRITE);
    /* Modifying an inactive watcher changes what its next start watches. */
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_WRITE), 0);
    CHECK_EQ(mux_io_is_active(&w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(s.calls, 3);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s.calls, 4);
    CHECK_EQ(s.revents, MUX_WRITE);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* MUX_EDGE: a correct edge-triggered reader (reads until EAGAIN) gets exactly one call per
 * new write on epoll / io_uring / rtsig, and a superset elsewhere, with the same bytes either
 * way. */
struct edge {
    int fd, calls, bytes;
};

static void edge_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct edge *e = w->data;
    (void)loop;
    CHECK_EQ(revents, MUX_READ);
    e->calls++;
    e->bytes += drain(e->fd);
}

TEST(io_edge_triggered_reader_gets_one_call_per_write) {
    mux_loop_t loop;
    loop_open(&loop);
    int exact = loop_is(&loop, "epoll") || loop_is(&loop, "uring") || loop_is(&loop, "rtsig");
    int sv[2];
    make_socketpair(sv);
    struct edge e = {sv[0], 0, 0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, edge_cb, sv[0], MUX_READ | MUX_EDGE), 0);
    w.data = &e;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    char buf[100];
    memset(buf, 'e', sizeof buf);
    for (int round = 1; round <= 5; round++) {
        CHECK_EQ(write(sv[1], buf, sizeof buf), (ssize_t)sizeof buf);
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
        for (int i = 0; i < 3; i++) /* no new data: no new edge */
            CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
        CHECK_EQ(e.bytes, round * 100);
        if (exact)
            CHECK_EQ(e.calls, round);
        else
            CHECK_GE(e.calls, round);
    }
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* An fd closed behind the loop's back and re-opened under the same number, pointed at by a
 * newly initialised watcher: the new watcher fires. The old watcher, still active on the
 * number, may see the new file's readiness or MUX_ERROR (and then be stopped). */
TEST(io_fd_closed_and_reused_new_watcher_fires) {
    mux_loop_t loop;
    loop_open(&loop);
    int a[2], b[2];
    make_socketpair(a);
    struct seen s1 = {0}, s2 = {0};
    mux_io_t w1, w2;
    CHECK_EQ(mux_io_init(&w1, record, a[0], MUX_READ), 0);
    w1.data = &s1;
    CHECK_EQ(mux_io_start(&loop, &w1), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1); /* the kernel has it now */
    int num = a[0];
    close(a[0]);
    close(a[1]);
    make_socketpair(b);
    CHECK_EQ(b[0], num); /* lowest free number: re-used */
    CHECK_EQ(mux_io_init(&w2, record, b[0], MUX_READ), 0);
    w2.data = &s2;
    CHECK_EQ(mux_io_start(&loop, &w2), 0);
    write_byte(b[1]);
    for (int i = 0; i < 20 && s2.calls == 0; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(s2.calls, 1);
    CHECK_EQ(s2.revents, MUX_READ);
    CHECK_LE(s1.calls, 1);
    if (s1.calls == 1) {
        CHECK(s1.revents == MUX_READ || (s1.revents & MUX_ERROR));
        if (s1.revents & MUX_ERROR)
            CHECK_EQ(mux_io_is_active(&w1), 0);
    }
    CHECK_EQ(mux_io_stop(&loop, &w1), 0);
    CHECK_EQ(mux_io_stop(&loop, &w2), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* no spinning, nothing left */
    loop_close(&loop);
    close(b[0]);
    close(b[1]);
}

/* The same, with the one watcher stopped and pointed at the new fd with mux_io_set in the
 * same iteration: the loop must tell the kernel again although the wanted events on that
 * number did not change. */
TEST(io_fd_closed_and_reused_watcher_set_fires) {
    mux_loop_t loop;
    loop_open(&loop);
    int a[2], b[2];
    make_socketpair(a);
    struct seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, record, a[0], MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    int num = a[0];
    close(a[0]);
    close(a[1]);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    make_socketpair(b);
    CHECK_EQ(b[0], num);
    CHECK_EQ(mux_io_set(&w, b[0], MUX_READ), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    write_byte(b[1]);
    for (int i = 0; i < 20 && s.calls == 0; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_READ);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(b[0]);
    close(b[1]);
}

/* The watcher is stopped, the loop iterates while the fd is closed, then the number is
 * re-used and the watcher restarted on it. */
TEST(io_fd_closed_between_iterations_and_reused) {
    mux_loop_t loop;
    loop_open(&loop);
    int a[2], b[2];
    make_socketpair(a);
    struct seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, record, a[0], MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    int num = a[0];
    close(a[0]);
    close(a[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    make_socketpair(b);
    CHECK_EQ(b[0], num);
    CHECK_EQ(mux_io_init(&w, record, b[0], MUX_READ), 0);
    w.data = &s; /* init clears the watcher, data included */
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    write_byte(b[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_READ);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(b[0]);
    close(b[1]);
}

/* Inside one batch of events: the first callback stops the other ready watcher, closes its
 * fd and starts a new watcher on a new, idle socket that got the same number. The old
 * file's event, still in the batch, must reach neither watcher; the new one fires once its
 * own socket is written. (Watchers are called from inside the backend's wait; this is the
 * case that must not be.) */
struct swap {
    int a[2], b[2], c[2];
    mux_io_t wa, wb, wc;
    int calls_ab, calls_c, swapped;
    unsigned revents_c;
};

static void swap_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct swap *x = w->data;
    if (w == &x->wc) {
        x->calls_c++;
        x->revents_c = revents;
        CHECK_EQ(drain(x->c[0]), 1); /* only ever called for its own byte */
        return;
    }
    CHECK_EQ(revents, MUX_READ);
    CHECK_EQ(drain(mux_io_fd(w)), 1);
    x->calls_ab++;
    if (x->swapped++)
        return;
    mux_io_t *other = w == &x->wa ? &x->wb : &x->wa;
    int *pair = w == &x->wa ? x->b : x->a;
    int num = pair[0];
    CHECK_EQ(mux_io_stop(loop, other), 0);
    close(pair[0]);
    close(pair[1]);
    pair[0] = pair[1] = -1;
    make_socketpair(x->c);
    CHECK_EQ(x->c[0], num); /* lowest free number: the one just closed */
    CHECK_EQ(mux_io_init(&x->wc, swap_cb, x->c[0], MUX_READ), 0);
    x->wc.data = x;
    CHECK_EQ(mux_io_start(loop, &x->wc), 0);
}

/* The first of several ready watchers forks in its callback. */
static int fork_calls;
static pid_t fork_pid = -1;

static void fork_first_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)revents;
    fork_calls++;
    if (fork_pid < 0)
        fork_pid = fork();
    /* Stopped, not drained: parent and child share the sockets, and the bytes stay for
     * the child's own wait to report. */
    CHECK_EQ(mux_io_stop(loop, w), 0);
}

/* A callback that forks: in the child every watcher is called (io_uring from the child's
 * own next wait, having left the rest of a batch of the parent's ring's completions; a
 * readiness backend may report the rest of its batch, backend.h), and in the parent the
 * batch goes on. */
TEST(io_callback_that_forks_child_and_parent_both_call_every_watcher) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[3][2];
    mux_io_t w[3];
    fork_calls = 0;
    fork_pid = -1;
    for (int i = 0; i < 3; i++) {
        make_socketpair(sv[i]);
        CHECK_EQ(mux_io_init(&w[i], fork_first_cb, sv[i][0], MUX_READ), 0);
        CHECK_EQ(mux_io_start(&loop, &w[i]), 0);
    }
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 3);
    for (int i = 0; i < 3; i++)
        write_byte(sv[i][1]);
    CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_GE(fork_pid, 0);
    if (fork_pid == 0) {
        alarm(10);
        int in_batch = fork_calls, left = !loop_is(&loop, "uring") || in_batch == 1;
        for (int i = 0; i < 20 && fork_calls < 3; i++)
            if (mux_run(&loop, MUX_RUN_NOWAIT) < 0)
                child_exit(2);
        child_exit(left && fork_calls == 3 ? 0 : 10 + in_batch);
    }
    CHECK_EQ(fork_calls, 3); /* the parent's batch went on */
    int status;
    CHECK_EQ(waitpid(fork_pid, &status, 0), fork_pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    for (int i = 0; i < 3; i++) {
        close(sv[i][0]);
        close(sv[i][1]);
    }
    loop_close(&loop);
}

TEST(io_fd_closed_and_reused_inside_a_callback_old_event_not_delivered) {
    mux_loop_t loop;
    loop_open(&loop);
    struct swap x;
    memset(&x, 0, sizeof x);
    make_socketpair(x.a);
    make_socketpair(x.b);
    CHECK_EQ(mux_io_init(&x.wa, swap_cb, x.a[0], MUX_READ), 0);
    CHECK_EQ(mux_io_init(&x.wb, swap_cb, x.b[0], MUX_READ), 0);
    x.wa.data = x.wb.data = &x;
    CHECK_EQ(mux_io_start(&loop, &x.wa), 0);
    CHECK_EQ(mux_io_start(&loop, &x.wb), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2); /* the kernel has both now */
    write_byte(x.a[1]);
    write_byte(x.b[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2); /* the survivor and the new watcher */
    CHECK_EQ(x.swapped, 1);
    CHECK_EQ(x.calls_ab, 1);
    CHECK_EQ(x.calls_c, 0);
    for (int i = 0; i < 3; i++) /* nothing for the new socket until it is written */
        CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(x.calls_ab, 1);
    CHECK_EQ(x.calls_c, 0);
    write_byte(x.c[1]);
    for (int i = 0; i < 20 && x.calls_c == 0; i++)
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_EQ(x.calls_c, 1);
    CHECK_EQ(x.revents_c, MUX_READ);
    mux_io_t *left = mux_io_is_active(&x.wa) == 1 ? &x.wa : &x.wb;
    CHECK_EQ(mux_io_stop(&loop, left), 0);
    CHECK_EQ(mux_io_stop(&loop, &x.wc), 0);
    loop_close(&loop);
    for (int i = 0; i < 2; i++) {
        if (x.a[i] >= 0)
            close(x.a[i]);
        if (x.b[i] >= 0)
            close(x.b[i]);
        close(x.c[i]);
    }
}

/* A watcher left on an fd that is closed and not re-used: the loop must neither spin nor
 * crash. It may report MUX_ERROR (and stop the watcher) or simply never call it. */
TEST(io_watched_fd_closed_does_not_spin) {
    mux_loop_t loop;
    loop_open(&loop);
    int a[2];
    make_socketpair(a);
    struct seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, record, a[0], MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    close(a[0]);
    close(a[1]);
    for (int i = 0; i < 50; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_LE(s.calls, 1);
    if (s.calls == 1) {
        CHECK(s.revents & MUX_ERROR);
        CHECK_EQ(mux_io_is_active(&w), 0);
    }
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
}

static void ignore_io(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop;
    (void)w;
    (void)revents;
}

static void count_prepare(mux_loop_t *loop, mux_prepare_t *w)
{
    (void)loop;
    ++*(long *)w->data;
}

static void stop_loop(mux_loop_t *loop, mux_timer_t *t)
{
    (void)t;
    mux_loop_stop(loop);
}

/* Runs `loop` for about `ms` milliseconds and returns how many iterations it made. */
static long iterations_in(mux_loop_t *loop, unsigned ms)
{
    long n = 0;
    mux_prepare_t p;
    mux_timer_t t;
    CHECK_EQ(mux_prepare_init(&p, count_prepare), 0);
    p.data = &n;
    CHECK_EQ(mux_prepare_start(loop, &p), 0);
    CHECK_EQ(mux_timer_init(&t, stop_loop), 0);
    CHECK_EQ(mux_timer_start(loop, &t, ms * MS, 0), 0);
    CHECK_GE(mux_run(loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(mux_prepare_stop(loop, &p), 0);
    CHECK_EQ(mux_timer_stop(loop, &t), 0);
    return n;
}

/* A watcher stopped, then its fd closed while a dup keeps the file open, then the peer
 * writes: the backend must not report that fd on every iteration (epoll kept the lazily
 * dropped registration and could not remove it by the closed number). */
TEST(io_closed_fd_whose_file_lives_on_does_not_spin) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int keep = dup(sv[0]);
    CHECK_GE(keep, 0);
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, ignore_io, sv[0], MUX_READ), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    close(sv[0]);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    long n = iterations_in(&loop, 100);
    CHECK_LT(n, 20);
    loop_close(&loop);
    close(keep);
    close(sv[1]);
}

/* A write watcher stopped on a full pipe, then the reader closes: epoll reports only
 * EPOLLERR for the lazily kept registration, which must be dropped, not reported forever. */
TEST(io_error_on_an_unwatched_fd_does_not_spin) {
    mux_loop_t loop;
    loop_open(&loop);
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
    char buf[4096] = {0};
    while (write(p[1], buf, sizeof buf) > 0)
        ;
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, ignore_io, p[1], MUX_WRITE), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    close(p[0]);
    long n = iterations_in(&loop, 100);
    CHECK_LT(n, 20);
    loop_close(&loop);
    close(p[1]);
}

/* 10,000 watched fds; a few of them are written to and exactly those fire. */
TEST(io_ten_thousand_fds_only_written_ones_fire) {
#ifdef _WIN32
    harness_watchdog(110); /* Wine makes a loopback TCP pair in a few milliseconds */
#endif
    enum { PAIRS = 5000, N = 2 * PAIRS };
    mux_loop_t loop;
    loop_open(&loop);
    if (loop_is(&loop, "select")) {
        loop_close(&loop);
        SKIP("select watches fds below FD_SETSIZE (1024) only (on Windows, 1024 sockets)");
    }
    long lim = raise_nofile_limit();
    if (lim < N + 64) {
        char why[128];
        snprintf(why, sizeof why, "RLIMIT_NOFILE is %ld, need %d", lim, N + 64);
        loop_close(&loop);
        SKIP(why);
    }
    int *fds = calloc(N, sizeof *fds);
    mux_io_t *w = calloc(N, sizeof *w);
    struct seen *s = calloc(N, sizeof *s);
    CHECK(fds && w && s);
    for (int i = 0; i < PAIRS; i++)
        make_socketpair(&fds[2 * i]);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(mux_io_init(&w[i], record, fds[i], MUX_READ), 0);
        w[i].data = &s[i];
        CHECK_EQ(mux_io_start(&loop, &w[i]), 0);
    }
    CHECK_EQ(mux_loop_active(&loop), N);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), N);
    for (int i = 0; i < N; i++)
        CHECK_EQ(s[i].calls, 0);
    /* Writing to one end makes the other end readable. */
    static const int targets[] = {0, 1, 777, 2500, 4097, 6001, 9998, 9999};
    enum { T = sizeof targets / sizeof targets[0] };
    for (int k = 0; k < T; k++)
        write_byte(fds[targets[k] ^ 1]);
    int fired = 0;
    for (int round = 0; round < 10 && fired < T; round++) {
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), N);
        fired = 0;
        for (int i = 0; i < N; i++)
            fired += s[i].calls > 0;
    }
    CHECK_EQ(fired, T);
    for (int k = 0; k < T; k++) {
        CHECK_GE(s[targets[k]].calls, 1);
        CHECK_EQ(s[targets[k]].all, MUX_READ);
    }
    for (int i = 0; i < N; i++)
        CHECK_EQ(mux_io_stop(&loop, &w[i]), 0);
    loop_close(&loop);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    free(fds);
    free(w);
    free(s);
}

TEST(io_select_refuses_fd_at_or_above_fd_setsize) {
#ifdef _WIN32
    SKIP("Windows has no such thing: its select limits how many sockets it watches, not "
         "their values");
#endif
    mux_loop_t loop;
    loop_open(&loop);
    if (!loop_is(&loop, "select")) {
        loop_close(&loop);
        SKIP("only the select backend has an fd limit");
    }
    if (raise_nofile_limit() < FD_SETSIZE + 8) {
        loop_close(&loop);
        SKIP("RLIMIT_NOFILE too low to make an fd above FD_SETSIZE");
    }
    int sv[2];
    make_socketpair(sv);
    int high = dup2(sv[0], FD_SETSIZE + 5);
    int edge = dup2(sv[0], FD_SETSIZE - 1);
    CHECK_EQ(high, FD_SETSIZE + 5);
    CHECK_EQ(edge, FD_SETSIZE - 1);
    struct seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, record, high, MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), -EINVAL);
    CHECK_EQ(mux_io_is_active(&w), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_io_init(&w, record, FD_SETSIZE, MUX_READ), 0);
    CHECK_EQ(mux_io_start(&loop, &w), -EINVAL);
    /* The highest fd select can watch works. */
    CHECK_EQ(mux_io_init(&w, record, edge, MUX_READ), 0);
    w.data = &s; /* init clears the watcher, data included */
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    write_byte(sv[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_READ);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(high);
    close(edge);
    close(sv[0]);
    close(sv[1]);
}

/* eventfds work like sockets; a watcher for READ|WRITE gets both. */
TEST(io_eventfd_readiness) {
#ifndef __linux__
    SKIP("eventfds are Linux's (on Windows: no such thing)");
#else
    mux_loop_t loop;
    loop_open(&loop);
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    CHECK_GE(efd, 0);
    struct seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, record, efd, MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 0);
    uint64_t one = 1;
    CHECK_EQ(write(efd, &one, sizeof one), 8);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_READ);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(efd);
#endif
}

/* Regular files cannot be polled (epoll refuses them); they are reported ready on every
 * iteration, as poll and select do. kqueue has a rule of its own, which BSD kernels and
 * libkqueue share: a regular file is always writable, and readable while its offset is before
 * its end. */
TEST(io_regular_file_is_always_ready) {
#ifdef _WIN32
    SKIP("Windows has no such thing: only sockets can be watched there, a file cannot "
         "(windows_io_watcher_on_a_file_gets_error)");
#endif
    mux_loop_t loop;
    loop_open(&loop);
    FILE *f = tmpfile();
    CHECK(f != NULL);
    int fd = fileno(f);
    int kq = loop_is(&loop, "kqueue");
    if (kq) {
        CHECK_EQ(write(fd, "0123456789", 10), 10);
        CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
    }
    struct seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, record, fd, MUX_READ | MUX_WRITE), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    for (int i = 1; i <= 3; i++) {
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
        CHECK_EQ(s.calls, i);
        CHECK_EQ(s.revents, MUX_READ | MUX_WRITE);
    }
    if (kq) { /* at the end: writable only */
        CHECK_EQ(lseek(fd, 0, SEEK_END), 10);
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
        CHECK_EQ(s.calls, 4);
        CHECK_EQ(s.revents, MUX_WRITE);
    }
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    fclose(f);
}

/* mux_io_modify inside a callback drops the direction of another watcher whose event was
 * already gathered in this iteration: that event is discarded. */
struct modify_other {
    mux_io_t a, b;
    mux_io_t *modified; /* the watcher whose READ was dropped */
    int calls_modifier, calls_modified;
};

static void modify_other_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct modify_other *m = w->data;
    if (w == m->modified) {
        CHECK_EQ(revents, MUX_WRITE);
        m->calls_modified++;
        return;
    }
    CHECK_EQ(revents, MUX_READ);
    m->calls_modifier++;
    if (!m->modified) {
        m->modified = w == &m->a ? &m->b : &m->a;
        CHECK_EQ(mux_io_modify(loop, m->modified, MUX_WRITE), 0);
    }
}

TEST(io_modify_discards_gathered_event_of_dropped_direction) {
    mux_loop_t loop;
    loop_open(&loop);
    int s1[2], s2[2];
    make_socketpair(s1);
    make_socketpair(s2);
    write_byte(s1[1]);
    write_byte(s2[1]);
    struct modify_other m;
    memset(&m, 0, sizeof m);
    CHECK_EQ(mux_io_init(&m.a, modify_other_cb, s1[0], MUX_READ), 0);
    CHECK_EQ(mux_io_init(&m.b, modify_other_cb, s2[0], MUX_READ), 0);
    m.a.data = m.b.data = &m;
    CHECK_EQ(mux_io_start(&loop, &m.a), 0);
    CHECK_EQ(mux_io_start(&loop, &m.b), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_EQ(m.calls_modifier, 1);
    CHECK_EQ(m.calls_modified, 0); /* its gathered READ was discarded */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_EQ(m.calls_modifier, 2);
    CHECK_EQ(m.calls_modified, 1); /* now for WRITE only */
    CHECK_EQ(mux_io_stop(&loop, &m.a), 0);
    CHECK_EQ(mux_io_stop(&loop, &m.b), 0);
    loop_close(&loop);
    close(s1[0]);
    close(s1[1]);
    close(s2[0]);
    close(s2[1]);
}

/* End of file and a closed peer count as readiness: MUX_READ for a reader (EOF), MUX_WRITE
 * for a writer (the error is pending). */
TEST(io_peer_closed_reports_read_and_write) {
    mux_loop_t loop;
    loop_open(&loop);
    int p[2];
    make_pipe(p);
    struct seen r = {0}, wr = {0};
    mux_io_t wa, wb;
    CHECK_EQ(mux_io_init(&wa, record, p[0], MUX_READ), 0);
    wa.data = &r;
    CHECK_EQ(mux_io_start(&loop, &wa), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(r.calls, 0);
    close(p[1]); /* writer gone: EOF */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.revents, MUX_READ);
    CHECK_EQ(mux_io_stop(&loop, &wa), 0);
    close(p[0]);

    make_pipe(p);
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    while (write(p[1], buf, sizeof buf) > 0) { /* full: not writable */
    }
    CHECK_EQ(mux_io_init(&wb, record, p[1], MUX_WRITE), 0);
    wb.data = &wr;
    CHECK_EQ(mux_io_start(&loop, &wb), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
#ifdef _WIN32
    /* The socket pair that stands in for a pipe there may make room again after it refused
     * (TCP moves bytes to the peer as the peer's window opens): only the reader's going is
     * checked. */
    wr.calls = 0;
#else
    CHECK_EQ(wr.calls, 0);
#endif
    close(p[0]); /* reader gone: a write would fail with EPIPE */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(wr.calls, 1);
    CHECK_EQ(wr.revents, MUX_WRITE);
    CHECK_EQ(mux_io_stop(&loop, &wb), 0);
    close(p[1]);
    loop_close(&loop);
}

/* A watcher started on an fd number that is not open: the kernel refuses it (EBADF), and the
 * watcher is stopped and called with MUX_ERROR; the loop then has nothing left to do. */
TEST(io_watcher_on_closed_fd_gets_error_and_is_stopped) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    int dead = sv[0];
    close(sv[0]);
    struct seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, record, dead, MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* ends: the watcher was stopped */
    CHECK_EQ(s.calls, 1);
    CHECK(s.revents & MUX_ERROR);
    CHECK_EQ(s.revents & ~(unsigned)(MUX_ERROR | MUX_READ), 0);
    CHECK_EQ(mux_io_is_active(&w), 0);
    loop_close(&loop);
    close(sv[1]);
}

/* Starting an idle watcher from an io callback: the next iteration does not block. */
static void start_idle_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)revents;
    drain(mux_io_fd(w));
    CHECK_EQ(mux_idle_start(loop, w->data), 0);
}

static void idle_once(mux_loop_t *loop, mux_idle_t *i)
{
    (*(int *)i->data)++;
    CHECK_EQ(mux_idle_stop(loop, i), 0);
}

TEST(io_callback_starting_idle_makes_next_iteration_nonblocking) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2], n = 0;
    make_socketpair(sv);
    mux_io_t w;
    mux_idle_t i;
    CHECK_EQ(mux_idle_init(&i, idle_once), 0);
    i.data = &n;
    CHECK_EQ(mux_io_init(&w, start_idle_cb, sv[0], MUX_READ), 0);
    w.data = &i;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    write_byte(sv[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    uint64_t t0 = mono_ns();
    for (int k = 0; k < 3 && n == 0; k++)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(n, 1);
    CHECK_LT(mono_ns() - t0, 200 * MS);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* One edge-triggered and one level-triggered watcher on the same fd: the level-triggered
 * one keeps being called while data is left unread; the edge one at least once. */
TEST(io_edge_and_level_watchers_on_one_fd) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct seen e = {0}, l = {0};
    mux_io_t we, wl;
    CHECK_EQ(mux_io_init(&we, record, sv[0], MUX_READ | MUX_EDGE), 0);
    CHECK_EQ(mux_io_init(&wl, record, sv[0], MUX_READ), 0);
    we.data = &e;
    wl.data = &l;
    CHECK_EQ(mux_io_start(&loop, &we), 0);
    CHECK_EQ(mux_io_start(&loop, &wl), 0);
    write_byte(sv[1]); /* never read */
    for (int i = 1; i <= 3; i++) {
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
        CHECK_EQ(l.calls, i);
        CHECK_EQ(l.revents, MUX_READ);
    }
    CHECK_GE(e.calls, 1);
    CHECK_EQ(e.all, MUX_READ);
    CHECK_EQ(mux_io_stop(&loop, &we), 0);
    CHECK_EQ(mux_io_stop(&loop, &wl), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* statm's first two fields, in bytes: the address space and what is resident. */
static void statm(uint64_t *size, uint64_t *resident)
{
    FILE *f = fopen("/proc/self/statm", "r");
    CHECK(f != NULL);
    unsigned long long s = 0, r = 0;
    CHECK_EQ(fscanf(f, "%llu %llu", &s, &r), 2);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    *size = s * (uint64_t)page;
    *resident = r * (uint64_t)page;
}

static void huge_fd_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop;
    *(unsigned *)w->data |= revents;
}

/* A watcher on fd 2^24, a number never opened: the fd table's memory follows the fds in use,
 * not the number (a table with an entry per number below it took 268 MB), the backend reports
 * the fd as invalid, and a forked child's first run does no work per number either (it used
 * to walk, and so map, the whole table). select cannot watch it and says so at once. */
TEST(io_watcher_on_a_huge_unopened_fd_costs_little_memory_even_after_fork) {
    enum { HUGE_FD = 1 << 24 };
    const uint64_t slack = 32u << 20;
    mux_loop_t loop;
    loop_open(&loop);
    mux_io_t w;
    unsigned got = 0;
    CHECK_EQ(mux_io_init(&w, huge_fd_cb, HUGE_FD, MUX_READ), 0);
    w.data = &got;
    uint64_t size0, res0, size1, res1;
    statm(&size0, &res0);
    int r = mux_io_start(&loop, &w);
    statm(&size1, &res1);
    CHECK_LT((int64_t)(size1 - size0), (int64_t)slack); /* signed: memory may shrink too */
#ifdef _WIN32
    /* Windows' select limits how many sockets, not their values; and there is no fork: the
     * loop itself finds that the number names no socket, at little cost. (Under Wine,
     * /proc/self/statm is the Linux process's that runs the program, on drive Z:.) */
    CHECK_EQ(r, 0);
    for (int i = 0; i < 3 && !got; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    statm(&size1, &res1);
    CHECK_LT((int64_t)(res1 - res0), (int64_t)slack);
    CHECK(got & MUX_ERROR);
    CHECK_EQ(mux_io_is_active(&w), 0);
    loop_close(&loop);
    return;
#endif
    if (loop_is(&loop, "select")) {
        CHECK_EQ(r, -EINVAL); /* past FD_SETSIZE */
        loop_close(&loop);
        return;
    }
    CHECK_EQ(r, 0);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        alarm(10);
        uint64_t s0, r0, s1, r1;
        statm(&s0, &r0);
        for (int i = 0; i < 3 && !got; i++)
            if (mux_run(&loop, MUX_RUN_NOWAIT) < 0)
                child_exit(2);
        statm(&s1, &r1);
        int small = (int64_t)(r1 - r0) < (int64_t)slack && (int64_t)(s1 - s0) < (int64_t)slack;
        child_exit(small && (got & MUX_ERROR) ? 0 : 1);
    }
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    for (int i = 0; i < 3 && !got; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK(got & MUX_ERROR); /* the watcher was stopped: nothing is active */
    CHECK_EQ(mux_io_is_active(&w), 0);
    loop_close(&loop);
}

/* ---- an fd closed behind the loop's back ---- */

struct behind {
    int calls;
    unsigned revents;
};

static void behind_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct behind *b = w->data;
    (void)loop;
    b->calls++;
    b->revents |= revents;
}

/* 1 when the peer of a socketpair end sees it closed (end of stream), 0 when not yet. */
static int peer_sees_close(int peer)
{
    char c;
    ssize_t n = recv(peer, &c, 1, MSG_DONTWAIT);
    CHECK(n == 0 || (n < 0 && errno == EAGAIN));
    return n == 0;
}

/* What each backend does when a watched fd is closed without stopping its watcher first (a
 * program bug: docs/io.md has the same table). poll and select: the watcher is stopped and
 * called with MUX_ERROR on the next iteration; iocp the same, as soon as the poll request in
 * flight ends with the socket's close (AFD's LOCAL_CLOSE). epoll: the kernel drops a closed file from
 * the set without a word, so nothing is reported until the loop next tells the kernel about
 * that fd (a change of interest): then MUX_ERROR. rtsig the same: the close ends the file's
 * signals, and a change of interest polls the fd, which finds it closed. kqueue the same: a close
 * removes the fd's registrations (libkqueue's epoll set drops the closed file), and a change
 * of interest is refused with EBADF. io_uring: the armed poll request holds the
 * file open, so the peer does not even see the close, and nothing is reported, until the
 * watcher is stopped. */
TEST(io_fd_closed_behind_the_loops_back_what_each_backend_reports) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct behind b = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, behind_cb, sv[0], MUX_READ), 0);
    w.data = &b;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1); /* registered with the kernel */
    CHECK_EQ(close(sv[0]), 0);
    for (int i = 0; i < 3; i++)
        mux_run(&loop, MUX_RUN_NOWAIT);
    if (loop_is(&loop, "poll") || loop_is(&loop, "select") || loop_is(&loop, "iocp")) {
        /* iocp: the AFD poll request ends with LOCAL_CLOSE */
        CHECK_EQ(b.calls, 1);
        CHECK_EQ(b.revents, MUX_ERROR | MUX_READ);
        CHECK_EQ(mux_io_is_active(&w), 0);
        CHECK(peer_sees_close(sv[1]));
    } else if (loop_is(&loop, "epoll") || loop_is(&loop, "rtsig") || loop_is(&loop, "kqueue")) {
        CHECK_EQ(b.calls, 0);
        CHECK_EQ(mux_io_is_active(&w), 1);
        CHECK(peer_sees_close(sv[1]));
        CHECK_EQ(mux_io_modify(&loop, &w, MUX_READ | MUX_WRITE), 0); /* tells the kernel */
        mux_run(&loop, MUX_RUN_NOWAIT);
        CHECK_EQ(b.calls, 1);
        CHECK_EQ(b.revents & MUX_ERROR, MUX_ERROR);
        CHECK_EQ(mux_io_is_active(&w), 0);
    } else {
        CHECK(loop_is(&loop, "uring"));
        CHECK_EQ(b.calls, 0);
        CHECK_EQ(mux_io_is_active(&w), 1);
        CHECK(!peer_sees_close(sv[1])); /* the poll request still holds the file */
        CHECK_EQ(mux_io_stop(&loop, &w), 0);
        mux_run(&loop, MUX_RUN_NOWAIT); /* the removal rides on this iteration's enter */
        CHECK(peer_sees_close(sv[1]));
        CHECK_EQ(b.calls, 0);
    }
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[1]);
}

/* From here on, every epoll_ctl of this process fails with EACCES (a seccomp filter). */
static void forbid_epoll_ctl(void)
{
#ifndef __linux__
    SKIP("seccomp filters are Linux's");
#else
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_epoll_ctl, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    CHECK_EQ(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    CHECK_EQ(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
#endif
}

static void restart_and_count(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    CHECK_EQ(revents, MUX_READ); /* never MUX_ERROR: no epoll_ctl was refused */
    CHECK_EQ(drain(mux_io_fd(w)), 1);
    (*(int *)w->data)++;
    CHECK_EQ(mux_io_stop(loop, w), 0); /* the re-arm of libevent-style code */
    CHECK_EQ(mux_io_start(loop, w), 0);
}

/* Restarting a watcher (a stop and a start of the same fd in one iteration, inside its
 * callback or between iterations) tells the kernel nothing: on epoll, no epoll_ctl at all,
 * which a seccomp filter that refuses every epoll_ctl proves (a refused one would stop the
 * watcher with MUX_ERROR). */
CORE_TEST(io_restart_makes_no_epoll_ctl) {
    if (mux_backend_probe("epoll") != 0)
        SKIP("the epoll backend is not in this build (a portable-POSIX or Windows build)");
    mux_loop_t loop;
    mux_loop_options_t opts = {.backend = "epoll", .flags = MUX_LOOP_IGNORE_ENV};
    CHECK_EQ(mux_loop_init(&loop, &opts), 0);
    enum { N = 8 };
    int sv[N][2], calls[N] = {0}, expect[N] = {0};
    mux_io_t w[N];
    for (int i = 0; i < N; i++) {
        make_socketpair(sv[i]);
        CHECK_EQ(mux_io_init(&w[i], restart_and_count, sv[i][0], MUX_READ), 0);
        w[i].data = &calls[i];
        CHECK_EQ(mux_io_start(&loop, &w[i]), 0);
    }
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), N); /* every fd registered */
    forbid_epoll_ctl();
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < N; i++) { /* between iterations, twice for good measure */
            CHECK_EQ(mux_io_stop(&loop, &w[i]), 0);
            CHECK_EQ(mux_io_start(&loop, &w[i]), 0);
            CHECK_EQ(mux_io_stop(&loop, &w[i]), 0);
            CHECK_EQ(mux_io_start(&loop, &w[i]), 0);
        }
        write_byte(sv[round % N][1]);
        write_byte(sv[(round + 3) % N][1]);
        expect[round % N]++;
        expect[(round + 3) % N]++;
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), N);
    }
    int total = 0;
    for (int i = 0; i < N; i++) {
        CHECK_EQ(calls[i], expect[i]);
        CHECK_EQ(mux_io_is_active(&w[i]), 1);
        total += calls[i];
    }
    CHECK_EQ(total, 200);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(mux_io_stop(&loop, &w[i]), 0);
        close(sv[i][0]);
        close(sv[i][1]);
    }
    CHECK_EQ(mux_loop_close(&loop), 0);
}

/* Every callback of one iteration sees the same cached time, however long the ones before
 * it took (io callbacks run from inside the wait: the first one marks the time stale once). */
struct nows {
    uint64_t seen[2];
    int n;
};

static void note_now(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct nows *x = w->data;
    (void)revents;
    CHECK_EQ(drain(mux_io_fd(w)), 1);
    x->seen[x->n++] = mux_now(loop);
    uint64_t t0 = mono_ns();
    while (mono_ns() - t0 < 3 * MS) /* a slow callback */
        ;
}

/* Writes a byte to the fd after 5 ms: the loop is blocked in its wait by then. */
static void *write_later(void *arg)
{
    sleep_ms(5);
    write_byte(*(const int *)arg);
    return NULL;
}

TEST(io_callbacks_of_one_iteration_see_the_same_now) {
    mux_loop_t loop;
    loop_open(&loop);
    int a[2], b[2];
    make_socketpair(a);
    make_socketpair(b);
    struct nows x = {{0, 0}, 0};
    mux_io_t wa, wb;
    CHECK_EQ(mux_io_init(&wa, note_now, a[0], MUX_READ), 0);
    CHECK_EQ(mux_io_init(&wb, note_now, b[0], MUX_READ), 0);
    wa.data = wb.data = &x;
    CHECK_EQ(mux_io_start(&loop, &wa), 0);
    CHECK_EQ(mux_io_start(&loop, &wb), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    uint64_t before = mono_ns();
    write_byte(a[1]);
    write_byte(b[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_EQ(x.n, 2);
    CHECK_EQ(x.seen[0], x.seen[1]);
    CHECK_GE(x.seen[0], before); /* not an earlier iteration's time */
    CHECK_EQ(mux_now(&loop), x.seen[0]);
    /* A wait that blocks: the time is read after it ended, not before it began. */
    x.n = 0;
    before = mono_ns();
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, write_later, &a[1]), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2); /* blocks until the write */
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(x.n, 1);
    CHECK_GE(x.seen[0], before + 5 * MS);
    CHECK_EQ(mux_io_stop(&loop, &wa), 0);
    CHECK_EQ(mux_io_stop(&loop, &wb), 0);
    loop_close(&loop);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}
