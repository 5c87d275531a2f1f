/* SPDX-License-Identifier: MIT */
/* Misuse of every public function returns exactly what the header documents and never
 * crashes: NULL pointers, negative fds, unknown bits, double starts, stops of watchers that
 * were never started (0) or never initialised (-EINVAL), and a zeroed loop. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static void io_cb(mux_loop_t *l, mux_io_t *w, unsigned ev) { (void)l; (void)w; (void)ev; }
static void timer_cb(mux_loop_t *l, mux_timer_t *w) { (void)l; (void)w; }
static void periodic_cb(mux_loop_t *l, mux_periodic_t *w) { (void)l; (void)w; }
static void signal_cb(mux_loop_t *l, mux_signal_t *w, int s) { (void)l; (void)w; (void)s; }
static void child_cb(mux_loop_t *l, mux_child_t *w, int p, int s)
{
    (void)l; (void)w; (void)p; (void)s;
}
static void idle_cb(mux_loop_t *l, mux_idle_t *w) { (void)l; (void)w; }
static void prepare_cb(mux_loop_t *l, mux_prepare_t *w) { (void)l; (void)w; }
static void check_cb(mux_loop_t *l, mux_check_t *w) { (void)l; (void)w; }
static void fork_cb(mux_loop_t *l, mux_fork_t *w) { (void)l; (void)w; }
static void async_cb(mux_loop_t *l, mux_async_t *w) { (void)l; (void)w; }

TEST(badinput_loop_functions) {
    mux_loop_t loop;
    CHECK_EQ(mux_loop_init(NULL, NULL), -EINVAL);
    mux_loop_options_t bad_flags = {NULL, 0x80000000u};
    CHECK_EQ(mux_loop_init(&loop, &bad_flags), -EINVAL);
    CHECK_EQ(mux_loop_close(NULL), -EINVAL);
    CHECK_EQ(mux_run(NULL, MUX_RUN_DEFAULT), -EINVAL);
    CHECK_EQ(mux_loop_stop(NULL), -EINVAL);
    CHECK_EQ(mux_loop_active(NULL), -EINVAL);
    CHECK(mux_loop_backend(NULL) == NULL);
    CHECK_EQ(mux_loop_fork(NULL), -EINVAL);
    CHECK_EQ(mux_now(NULL), 0);
    CHECK_EQ(mux_now_update(NULL), -EINVAL);
    CHECK_EQ(mux_wall_now(NULL), 0);
    CHECK_EQ(mux_backend_probe(NULL), -EINVAL);
    CHECK(mux_backend_name(1000) == NULL);

    loop_open(&loop);
    CHECK_EQ(mux_run(&loop, 3), -EINVAL);
    CHECK_EQ(mux_run(&loop, -1), -EINVAL);
    CHECK_EQ(mux_run(&loop, 0x100), -EINVAL);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

TEST(badinput_zeroed_loop) {
    mux_loop_t zl;
    memset(&zl, 0, sizeof zl);
    mux_timer_t t;
    mux_io_t w;
    mux_periodic_t p;
    mux_signal_t s;
    mux_child_t c;
    mux_idle_t i;
    mux_prepare_t pr;
    mux_check_t ck;
    mux_fork_t f;
    mux_async_t a;
    int sv[2];
    make_socketpair(sv);
    CHECK_EQ(mux_timer_init(&t, timer_cb), 0);
    CHECK_EQ(mux_io_init(&w, io_cb, sv[0], MUX_READ), 0);
    CHECK_EQ(mux_periodic_init(&p, periodic_cb), 0);
    CHECK_EQ(mux_signal_init(&s, signal_cb, SIGUSR1), 0);
    CHECK_EQ(mux_child_init(&c, child_cb, 0), 0);
    CHECK_EQ(mux_idle_init(&i, idle_cb), 0);
    CHECK_EQ(mux_prepare_init(&pr, prepare_cb), 0);
    CHECK_EQ(mux_check_init(&ck, check_cb), 0);
    CHECK_EQ(mux_fork_init(&f, fork_cb), 0);
    CHECK_EQ(mux_async_init(&a, async_cb), 0);

    CHECK_EQ(mux_loop_close(&zl), -EINVAL);
    CHECK_EQ(mux_run(&zl, MUX_RUN_NOWAIT), -EINVAL);
    CHECK_EQ(mux_loop_stop(&zl), -EINVAL);
    CHECK_EQ(mux_loop_active(&zl), -EINVAL);
    CHECK(mux_loop_backend(&zl) == NULL);
    CHECK_EQ(mux_loop_fork(&zl), -EINVAL);
    CHECK_EQ(mux_now(&zl), 0);
    CHECK_EQ(mux_now_update(&zl), -EINVAL);
    CHECK_EQ(mux_wall_now(&zl), 0);

    CHECK_EQ(mux_io_start(&zl, &w), -EINVAL);
    CHECK_EQ(mux_io_modify(&zl, &w, MUX_WRITE), -EINVAL);
    CHECK_EQ(mux_io_stop(&zl, &w), -EINVAL);
    CHECK_EQ(mux_timer_start(&zl, &t, 1, 0), -EINVAL);
    CHECK_EQ(mux_timer_stop(&zl, &t), -EINVAL);
    CHECK_EQ(mux_timer_again(&zl, &t), -EINVAL);
    CHECK_EQ(mux_timer_remaining(&zl, &t), -EINVAL);
    CHECK_EQ(mux_periodic_start(&zl, &p, 0, 0), -EINVAL);
    CHECK_EQ(mux_periodic_stop(&zl, &p), -EINVAL);
    CHECK_EQ(mux_periodic_at(&zl, &p), -EINVAL);
    CHECK_EQ(mux_signal_start(&zl, &s), -EINVAL);
    CHECK_EQ(mux_signal_stop(&zl, &s), -EINVAL);
    CHECK_EQ(mux_child_start(&zl, &c), -EINVAL);
    CHECK_EQ(mux_child_stop(&zl, &c), -EINVAL);
    CHECK_EQ(mux_idle_start(&zl, &i), -EINVAL);
    CHECK_EQ(mux_idle_stop(&zl, &i), -EINVAL);
    CHECK_EQ(mux_prepare_start(&zl, &pr), -EINVAL);
    CHECK_EQ(mux_prepare_stop(&zl, &pr), -EINVAL);
    CHECK_EQ(mux_check_start(&zl, &ck), -EINVAL);
    CHECK_EQ(mux_check_stop(&zl, &ck), -EINVAL);
    CHECK_EQ(mux_fork_start(&zl, &f), -EINVAL);
    CHECK_EQ(mux_fork_stop(&zl, &f), -EINVAL);
    CHECK_EQ(mux_async_start(&zl, &a), -EINVAL);
    CHECK_EQ(mux_async_stop(&zl, &a), -EINVAL);
    CHECK_EQ(mux_async_send(&a), -EINVAL); /* not started */
    CHECK_EQ(mux_io_is_active(&w), 0);
    CHECK_EQ(mux_timer_is_active(&t), 0);

    /* A real loop for the backend check and the clean close. */
    mux_loop_t loop;
    loop_open(&loop);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

TEST(badinput_io) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_io_t w, z;
    memset(&z, 0, sizeof z); /* never initialised */

    CHECK_EQ(mux_io_init(NULL, io_cb, sv[0], MUX_READ), -EINVAL);
    CHECK_EQ(mux_io_init(&w, NULL, sv[0], MUX_READ), -EINVAL);
    CHECK_EQ(mux_io_init(&w, io_cb, -1, MUX_READ), -EINVAL);
    CHECK_EQ(mux_io_init(&w, io_cb, sv[0], 0x100), -EINVAL);
    CHECK_EQ(mux_io_init(&w, io_cb, sv[0], MUX_READ | 0x40), -EINVAL);
    CHECK_EQ(mux_io_init(&w, io_cb, sv[0], MUX_READ | MUX_ERROR), -EINVAL); /* revents only */
    CHECK_EQ(mux_io_init(&w, io_cb, sv[0], 0), -EINVAL);        /* no direction */
    CHECK_EQ(mux_io_init(&w, io_cb, sv[0], MUX_EDGE), -EINVAL); /* no direction */
    CHECK_EQ(mux_io_init(&w, io_cb, sv[0], MUX_READ), 0);

    CHECK_EQ(mux_io_start(NULL, &w), -EINVAL);
    CHECK_EQ(mux_io_start(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_io_start(&loop, &z), -EINVAL);
    CHECK_EQ(mux_io_stop(NULL, &w), -EINVAL);
    CHECK_EQ(mux_io_stop(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_io_stop(&loop, &z), -EINVAL);
    CHECK_EQ(mux_io_stop(&loop, &w), 0); /* initialised, never started */
    CHECK_EQ(mux_io_is_active(NULL), -EINVAL);
    CHECK_EQ(mux_io_is_active(&z), -EINVAL);
    CHECK_EQ(mux_io_fd(NULL), -EINVAL);
    CHECK_EQ(mux_io_fd(&z), -EINVAL);
    CHECK_EQ(mux_io_fd(&w), sv[0]);
    CHECK_EQ(mux_io_set(NULL, sv[1], MUX_READ), -EINVAL);
    CHECK_EQ(mux_io_set(&z, sv[1], MUX_READ), -EINVAL);
    CHECK_EQ(mux_io_set(&w, -5, MUX_READ), -EINVAL);
    CHECK_EQ(mux_io_set(&w, sv[1], 0x100), -EINVAL);
    CHECK_EQ(mux_io_set(&w, sv[1], 0), -EINVAL);
    CHECK_EQ(mux_io_set(&w, sv[1], MUX_EDGE), -EINVAL);
    CHECK_EQ(mux_io_modify(NULL, &w, MUX_WRITE), -EINVAL);
    CHECK_EQ(mux_io_modify(&loop, NULL, MUX_WRITE), -EINVAL);
    CHECK_EQ(mux_io_modify(&loop, &z, MUX_WRITE), -EINVAL);
    CHECK_EQ(mux_io_modify(&loop, &w, 0x100), -EINVAL);
    CHECK_EQ(mux_io_modify(&loop, &w, 0), -EINVAL);
    CHECK_EQ(mux_io_fd(&w), sv[0]); /* the failed calls changed nothing */

    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_io_start(&loop, &w), -EBUSY);
    CHECK_EQ(mux_io_set(&w, sv[1], MUX_READ), -EBUSY);
    CHECK_EQ(mux_io_modify(&loop, &w, 0x100), -EINVAL);
    CHECK_EQ(mux_io_is_active(&w), 1);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_io_is_active(&w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

TEST(badinput_timer) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t, z;
    memset(&z, 0, sizeof z);
    CHECK_EQ(mux_timer_init(NULL, timer_cb), -EINVAL);
    CHECK_EQ(mux_timer_init(&t, NULL), -EINVAL);
    CHECK_EQ(mux_timer_init(&t, timer_cb), 0);
    CHECK_EQ(mux_timer_start(NULL, &t, 1, 0), -EINVAL);
    CHECK_EQ(mux_timer_start(&loop, NULL, 1, 0), -EINVAL);
    CHECK_EQ(mux_timer_start(&loop, &z, 1, 0), -EINVAL);
    CHECK_EQ(mux_timer_stop(NULL, &t), -EINVAL);
    CHECK_EQ(mux_timer_stop(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_timer_stop(&loop, &z), -EINVAL);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    CHECK_EQ(mux_timer_again(NULL, &t), -EINVAL);
    CHECK_EQ(mux_timer_again(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_timer_again(&loop, &z), -EINVAL);
    CHECK_EQ(mux_timer_set_repeat(NULL, 1), -EINVAL);
    CHECK_EQ(mux_timer_set_repeat(&z, 1), -EINVAL);
    CHECK_EQ(mux_timer_remaining(NULL, &t), -EINVAL);
    CHECK_EQ(mux_timer_remaining(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_timer_remaining(&loop, &z), -EINVAL);
    CHECK_EQ(mux_timer_remaining(&loop, &t), -EINVAL); /* inactive */
    CHECK_EQ(mux_timer_is_active(NULL), -EINVAL);
    CHECK_EQ(mux_timer_is_active(&z), -EINVAL);
    CHECK_EQ(mux_timer_is_active(&t), 0);

    CHECK_EQ(mux_timer_start(&loop, &t, 1000 * MS, 0), 0);
    CHECK_EQ(mux_timer_start(&loop, &t, 1000 * MS, 0), -EBUSY);
    CHECK_EQ(mux_timer_is_active(&t), 1);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

TEST(badinput_periodic) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_periodic_t p, z;
    memset(&z, 0, sizeof z);
    int64_t later = mux_wall_now(&loop) + 3600 * 1000 * (int64_t)MS;
    CHECK_EQ(mux_periodic_init(NULL, periodic_cb), -EINVAL);
    CHECK_EQ(mux_periodic_init(&p, NULL), -EINVAL);
    CHECK_EQ(mux_periodic_init(&p, periodic_cb), 0);
    CHECK_EQ(mux_periodic_start(NULL, &p, later, 0), -EINVAL);
    CHECK_EQ(mux_periodic_start(&loop, NULL, later, 0), -EINVAL);
    CHECK_EQ(mux_periodic_start(&loop, &z, later, 0), -EINVAL);
    CHECK_EQ(mux_periodic_start(&loop, &p, -1, 0), -EINVAL);
    CHECK_EQ(mux_periodic_start(&loop, &p, -1, 1000 * MS), -EINVAL);
    CHECK_EQ(mux_periodic_stop(NULL, &p), -EINVAL);
    CHECK_EQ(mux_periodic_stop(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_periodic_stop(&loop, &z), -EINVAL);
    CHECK_EQ(mux_periodic_stop(&loop, &p), 0);
    CHECK_EQ(mux_periodic_at(NULL, &p), -EINVAL);
    CHECK_EQ(mux_periodic_at(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_periodic_at(&loop, &z), -EINVAL);
    CHECK_EQ(mux_periodic_at(&loop, &p), -EINVAL); /* inactive */
    CHECK_EQ(mux_loop_active(&loop), 0);

    CHECK_EQ(mux_periodic_start(&loop, &p, later, 0), 0);
    CHECK_EQ(mux_periodic_start(&loop, &p, later, 0), -EBUSY);
    CHECK_EQ(mux_periodic_at(&loop, &p), later);
    CHECK_EQ(mux_periodic_stop(&loop, &p), 0);
    CHECK_EQ(mux_periodic_stop(&loop, &p), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

TEST(badinput_signal) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_signal_t s, z;
    memset(&z, 0, sizeof z);
    CHECK_EQ(mux_signal_init(NULL, signal_cb, SIGUSR1), -EINVAL);
    CHECK_EQ(mux_signal_init(&s, NULL, SIGUSR1), -EINVAL);
    CHECK_EQ(mux_signal_init(&s, signal_cb, 0), -EINVAL);
    CHECK_EQ(mux_signal_init(&s, signal_cb, -1), -EINVAL);
#ifdef _WIN32 /* no SIGKILL or SIGSTOP there: numbers up to 63 initialise (docs/signal.md) */
    CHECK_EQ(mux_signal_init(&s, signal_cb, 64), -EINVAL);
#else
    CHECK_EQ(mux_signal_init(&s, signal_cb, SIGKILL), -EINVAL);
    CHECK_EQ(mux_signal_init(&s, signal_cb, SIGSTOP), -EINVAL);
    CHECK_EQ(mux_signal_init(&s, signal_cb, NSIG), -EINVAL);
#endif
    CHECK_EQ(mux_signal_init(&s, signal_cb, 1000), -EINVAL);
    CHECK_EQ(mux_signal_init(&s, signal_cb, SIGUSR1), 0);
    CHECK_EQ(mux_signal_start(NULL, &s), -EINVAL);
    CHECK_EQ(mux_signal_start(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_signal_start(&loop, &z), -EINVAL);
    CHECK_EQ(mux_signal_stop(NULL, &s), -EINVAL);
    CHECK_EQ(mux_signal_stop(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_signal_stop(&loop, &z), -EINVAL);
    CHECK_EQ(mux_signal_stop(&loop, &s), 0);
    CHECK_EQ(mux_signal_start(&loop, &s), 0);
    CHECK_EQ(mux_signal_start(&loop, &s), -EBUSY);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_signal_stop(&loop, &s), 0);
    CHECK_EQ(mux_signal_stop(&loop, &s), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

TEST(badinput_child) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_child_t c, z;
    memset(&z, 0, sizeof z);
    CHECK_EQ(mux_child_init(NULL, child_cb, 0), -EINVAL);
    CHECK_EQ(mux_child_init(&c, NULL, 0), -EINVAL);
    CHECK_EQ(mux_child_init(&c, child_cb, -1), -EINVAL);
    CHECK_EQ(mux_child_init(&c, child_cb, -12345), -EINVAL);
    CHECK_EQ(mux_child_init(&c, child_cb, 0), 0);
    CHECK_EQ(mux_child_start(NULL, &c), -EINVAL);
    CHECK_EQ(mux_child_start(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_child_start(&loop, &z), -EINVAL);
    CHECK_EQ(mux_child_stop(NULL, &c), -EINVAL);
    CHECK_EQ(mux_child_stop(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_child_stop(&loop, &z), -EINVAL);
    CHECK_EQ(mux_child_stop(&loop, &c), 0);
#ifdef _WIN32 /* no watcher for any child there: this process's own end is watched instead */
    CHECK_EQ(mux_child_start(&loop, &c), -ENOTSUP);
    CHECK_EQ(mux_child_init(&c, child_cb, getpid()), 0);
#endif
    CHECK_EQ(mux_child_start(&loop, &c), 0);
    CHECK_EQ(mux_child_start(&loop, &c), -EBUSY);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_child_stop(&loop, &c), 0);
    CHECK_EQ(mux_child_stop(&loop, &c), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

/* idle, prepare, check and fork share one shape: one macro spells the checks out for each. */
#define HOOK_CHECKS(T, cb)                                                                 \
    do {                                                                                   \
        mux_##T##_t h, hz;                                                                 \
        memset(&hz, 0, sizeof hz);                                                         \
        CHECK_EQ(mux_##T##_init(NULL, cb), -EINVAL);                                       \
        CHECK_EQ(mux_##T##_init(&h, NULL), -EINVAL);                                       \
        CHECK_EQ(mux_##T##_init(&h, cb), 0);                                               \
        CHECK_EQ(mux_##T##_start(NULL, &h), -EINVAL);                                      \
        CHECK_EQ(mux_##T##_start(&loop, NULL), -EINVAL);                                   \
        CHECK_EQ(mux_##T##_start(&loop, &hz), -EINVAL);                                    \
        CHECK_EQ(mux_##T##_stop(NULL, &h), -EINVAL);                                       \
        CHECK_EQ(mux_##T##_stop(&loop, NULL), -EINVAL);                                    \
        CHECK_EQ(mux_##T##_stop(&loop, &hz), -EINVAL);                                     \
        CHECK_EQ(mux_##T##_stop(&loop, &h), 0);                                            \
        CHECK_EQ(mux_##T##_start(&loop, &h), 0);                                           \
        CHECK_EQ(mux_##T##_start(&loop, &h), -EBUSY);                                      \
        CHECK_EQ(mux_loop_active(&loop), 1);                                               \
        CHECK_EQ(mux_##T##_stop(&loop, &h), 0);                                            \
        CHECK_EQ(mux_##T##_stop(&loop, &h), 0);                                            \
        CHECK_EQ(mux_loop_active(&loop), 0);                                               \
    } while (0)

TEST(badinput_idle_prepare_check_fork) {
    mux_loop_t loop;
    loop_open(&loop);
    HOOK_CHECKS(idle, idle_cb);
    HOOK_CHECKS(prepare, prepare_cb);
    HOOK_CHECKS(check, check_cb);
#ifdef _WIN32
    mux_fork_t fw; /* Windows has no fork: the watcher cannot start */
    CHECK_EQ(mux_fork_init(&fw, fork_cb), 0);
    CHECK_EQ(mux_fork_start(&loop, &fw), -ENOTSUP);
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_fork_stop(&loop, &fw), 0);
#else
    HOOK_CHECKS(fork, fork_cb);
#endif
    loop_close(&loop);
}

TEST(badinput_async) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_async_t a, z;
    memset(&z, 0, sizeof z);
    CHECK_EQ(mux_async_init(NULL, async_cb), -EINVAL);
    CHECK_EQ(mux_async_init(&a, NULL), -EINVAL);
    CHECK_EQ(mux_async_init(&a, async_cb), 0);
    CHECK_EQ(mux_async_send(NULL), -EINVAL);
    CHECK_EQ(mux_async_send(&z), -EINVAL);
    CHECK_EQ(mux_async_send(&a), -EINVAL); /* initialised, not started */
    CHECK_EQ(mux_async_pending(NULL), -EINVAL);
    CHECK_EQ(mux_async_pending(&z), -EINVAL);
    CHECK_EQ(mux_async_start(NULL, &a), -EINVAL);
    CHECK_EQ(mux_async_start(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_async_start(&loop, &z), -EINVAL);
    CHECK_EQ(mux_async_stop(NULL, &a), -EINVAL);
    CHECK_EQ(mux_async_stop(&loop, NULL), -EINVAL);
    CHECK_EQ(mux_async_stop(&loop, &z), -EINVAL);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_async_start(&loop, &a), -EBUSY);
    CHECK_EQ(mux_async_pending(&a), 0);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    CHECK_EQ(mux_async_send(&a), -EINVAL); /* stopped */
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}
