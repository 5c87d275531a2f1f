/* SPDX-License-Identifier: MIT */
/* References (mux_ref, mux_unref, mux_has_ref): an unreferenced watcher or handle still works
 * but does not keep mux_run(MUX_RUN_DEFAULT) running, nor count in mux_loop_active. Every kind
 * of watcher and handle, on every backend. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "stream_util.h"

static int fired;

static void count_timer(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop, (void)t;
    fired++;
}

/* Repeats until the other timers fired twice (2 s at most), then stops: a loaded machine
 * may run none of the 1 ms ticks within a fixed time. */
static void end_after_two(mux_loop_t *loop, mux_timer_t *t)
{
    uint64_t *deadline = t->data;
    if (fired >= 2 || mux_now(loop) >= *deadline) {
        fired++;
        CHECK_EQ(mux_timer_stop(loop, t), 0);
    }
}

/* A loop whose only watcher is unreferenced returns from mux_run at once, however far away
 * that watcher's event is; referenced again, it keeps the loop running. */
TEST(ref_unreferenced_timer_does_not_keep_the_loop_running) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    CHECK_EQ(mux_timer_init(&t, count_timer), 0);
    CHECK_EQ(mux_timer_start(&loop, &t, 3600ull * 1000000000, 0), 0); /* an hour from now */
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_has_ref(&loop, MUX_HANDLE_TIMER, &t), 1);
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_TIMER, &t), 0);
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_TIMER, &t), 0); /* twice: the same */
    CHECK_EQ(mux_has_ref(&loop, MUX_HANDLE_TIMER, &t), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* at once: the watchdog says otherwise */
    CHECK_EQ(mux_timer_is_active(&t), 1);         /* still active */
    CHECK_EQ(mux_loop_close(&loop), -EBUSY);      /* and so the loop cannot close */
    /* Referenced again: counted, and it keeps mux_run going until it fires. */
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    CHECK_EQ(mux_ref(&loop, MUX_HANDLE_TIMER, &t), 0);
    CHECK_EQ(mux_timer_start(&loop, &t, 5 * MS, 0), 0);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(fired, 1);
    loop_close(&loop);
}

/* An unreferenced watcher still fires while something referenced keeps the loop running,
 * and the setting outlives a stop and a start (init clears it). */
TEST(ref_unreferenced_watcher_still_fires_and_keeps_its_setting) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t tick, end;
    CHECK_EQ(mux_timer_init(&tick, count_timer), 0);
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_TIMER, &tick), 0); /* before its start */
    CHECK_EQ(mux_timer_start(&loop, &tick, 1 * MS, 1 * MS), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_timer_init(&end, end_after_two), 0);
    uint64_t deadline = mux_now(&loop) + 2000 * MS;
    end.data = &deadline;
    CHECK_EQ(mux_timer_start(&loop, &end, 30 * MS, 1 * MS), 0);
    CHECK_EQ(mux_loop_active(&loop), 1);
    fired = 0;
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* ends when `end` stops */
    CHECK_GE(fired, 3); /* the 1 ms ticks, and `end` */
    CHECK_EQ(mux_timer_is_active(&tick), 1);
    CHECK_EQ(mux_timer_stop(&loop, &tick), 0);
    CHECK_EQ(mux_timer_start(&loop, &tick, 1 * MS, 1 * MS), 0);
    CHECK_EQ(mux_has_ref(&loop, MUX_HANDLE_TIMER, &tick), 0); /* kept across stop and start */
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_timer_stop(&loop, &tick), 0);
    CHECK_EQ(mux_timer_init(&tick, count_timer), 0);
    CHECK_EQ(mux_has_ref(&loop, MUX_HANDLE_TIMER, &tick), 1); /* init clears it */
    loop_close(&loop);
}

static void io_cb(mux_loop_t *l, mux_io_t *w, unsigned ev)
{
    (void)l, (void)w, (void)ev;
}
static void periodic_cb(mux_loop_t *l, mux_periodic_t *w)
{
    (void)l, (void)w;
}
static void idle_cb(mux_loop_t *l, mux_idle_t *w)
{
    (void)l, (void)w;
}
static void prepare_cb(mux_loop_t *l, mux_prepare_t *w)
{
    (void)l, (void)w;
}
static void check_cb(mux_loop_t *l, mux_check_t *w)
{
    (void)l, (void)w;
}
static void async_cb(mux_loop_t *l, mux_async_t *w)
{
    (void)l, (void)w;
}
static void fork_cb(mux_loop_t *l, mux_fork_t *w)
{
    (void)l, (void)w;
}
static void signal_cb(mux_loop_t *l, mux_signal_t *w, int signum)
{
    (void)l, (void)w, (void)signum;
}
static void child_cb(mux_loop_t *l, mux_child_t *w, int pid, int status)
{
    (void)l, (void)w, (void)pid, (void)status;
}

/* Unreferences `h` of `kind`, which is active: the loop's count drops to 0 and mux_run
 * returns at once; referenced again, it is counted again. */
static void unref_one(mux_loop_t *loop, int kind, void *h)
{
    CHECK_EQ(mux_loop_active(loop), 1);
    CHECK_EQ(mux_unref(loop, kind, h), 0);
    CHECK_EQ(mux_loop_active(loop), 0);
    CHECK_EQ(mux_run(loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(mux_ref(loop, kind, h), 0);
    CHECK_EQ(mux_loop_active(loop), 1);
    CHECK_EQ(mux_unref(loop, kind, h), 0);
    CHECK_EQ(mux_loop_active(loop), 0);
}

/* Every kind of watcher. */
TEST(ref_every_kind_of_watcher_can_be_unreferenced) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_io_t io;
    CHECK_EQ(mux_io_init(&io, io_cb, sv[0], MUX_READ), 0);
    CHECK_EQ(mux_io_start(&loop, &io), 0);
    unref_one(&loop, MUX_HANDLE_IO, &io);
    CHECK_EQ(write(sv[1], "x", 1), 1); /* readable: it is called, and mux_run still returns */
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(mux_io_stop(&loop, &io), 0);
    mux_periodic_t p;
    CHECK_EQ(mux_periodic_init(&p, periodic_cb), 0);
    CHECK_EQ(mux_periodic_start(&loop, &p, 0, 3600ull * 1000000000), 0);
    unref_one(&loop, MUX_HANDLE_PERIODIC, &p);
    CHECK_EQ(mux_periodic_stop(&loop, &p), 0);
    mux_idle_t idle;
    CHECK_EQ(mux_idle_init(&idle, idle_cb), 0);
    CHECK_EQ(mux_idle_start(&loop, &idle), 0);
    unref_one(&loop, MUX_HANDLE_IDLE, &idle);
    CHECK_EQ(mux_idle_stop(&loop, &idle), 0);
    mux_prepare_t prep;
    CHECK_EQ(mux_prepare_init(&prep, prepare_cb), 0);
    CHECK_EQ(mux_prepare_start(&loop, &prep), 0);
    unref_one(&loop, MUX_HANDLE_PREPARE, &prep);
    CHECK_EQ(mux_prepare_stop(&loop, &prep), 0);
    mux_check_t chk;
    CHECK_EQ(mux_check_init(&chk, check_cb), 0);
    CHECK_EQ(mux_check_start(&loop, &chk), 0);
    unref_one(&loop, MUX_HANDLE_CHECK, &chk);
    CHECK_EQ(mux_check_stop(&loop, &chk), 0);
    mux_async_t as;
    CHECK_EQ(mux_async_init(&as, async_cb), 0);
    CHECK_EQ(mux_async_start(&loop, &as), 0);
    unref_one(&loop, MUX_HANDLE_ASYNC, &as);
    CHECK_EQ(mux_async_stop(&loop, &as), 0);
    mux_fork_t fk;
    CHECK_EQ(mux_fork_init(&fk, fork_cb), 0);
#ifdef _WIN32 /* no fork there; no watcher for any child either: this process's own end */
    CHECK_EQ(mux_fork_start(&loop, &fk), -ENOTSUP);
    const int child = getpid();
#else
    CHECK_EQ(mux_fork_start(&loop, &fk), 0);
    unref_one(&loop, MUX_HANDLE_FORK, &fk);
    CHECK_EQ(mux_fork_stop(&loop, &fk), 0);
    const int child = 0;
#endif
    mux_signal_t sig;
    CHECK_EQ(mux_signal_init(&sig, signal_cb, SIGUSR2), 0);
    CHECK_EQ(mux_signal_start(&loop, &sig), 0);
    unref_one(&loop, MUX_HANDLE_SIGNAL, &sig);
    CHECK_EQ(mux_signal_stop(&loop, &sig), 0);
    mux_child_t ch;
    CHECK_EQ(mux_child_init(&ch, child_cb, child), 0);
    CHECK_EQ(mux_child_start(&loop, &ch), 0);
    unref_one(&loop, MUX_HANDLE_CHILD, &ch);
    CHECK_EQ(mux_child_stop(&loop, &ch), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    close(sv[0]);
    close(sv[1]);
    loop_close(&loop);
}

static int closed;
static void stream_closed(mux_stream_t *s)
{
    (void)s;
    closed++;
}
static void listener_closed(mux_listener_t *l)
{
    (void)l;
    closed++;
}
static void accept_cb(mux_listener_t *l, mux_os_sock_t fd, int status)
{
    (void)l, (void)fd, (void)status;
}
static void chan_cb(mux_chan_t *c, mux_msg_t *m, int status)
{
    (void)c, (void)m, (void)status;
}

/* Streams, listeners and channels: unreferenced while open, not after; an unreferenced one
 * closed leaves the count right for the next one. */
TEST(ref_streams_listeners_and_channels_can_be_unreferenced) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_stream_t s;
    memset(&s, 0, sizeof s);
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_STREAM, &s), -EINVAL); /* not open */
    CHECK_EQ(mux_stream_open(&loop, &s, sv[0]), 0);
    unref_one(&loop, MUX_HANDLE_STREAM, &s);
    closed = 0;
    CHECK_EQ(mux_stream_close(&s, stream_closed), 0);
    CHECK_EQ(mux_loop_active(&loop), 0); /* closing, unreferenced */
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_STREAM, &s), 0); /* until its close ends */
    while (closed == 0)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_STREAM, &s), -EINVAL); /* closed */
    CHECK_EQ(mux_has_ref(&loop, MUX_HANDLE_STREAM, &s), -EINVAL);
    /* The count is right after that close: a new, referenced stream counts one. */
    CHECK_EQ(mux_stream_open(&loop, &s, sv[1]), 0);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_stream_close(&s, stream_closed), 0);
    while (closed == 1)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);

    mux_listener_t l;
    struct sockaddr_storage ss;
    socklen_t len = addr_v4(&ss, 0);
    CHECK_EQ(mux_listen(&loop, &l, (struct sockaddr *)&ss, len, NULL, accept_cb), 0);
    unref_one(&loop, MUX_HANDLE_LISTENER, &l);
    CHECK_EQ(mux_listener_close(&l, listener_closed), 0);
    while (closed == 2)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);

    mux_chan_t c;
    CHECK_EQ(mux_chan_open(&loop, &c, 4, chan_cb), 0);
    unref_one(&loop, MUX_HANDLE_CHAN, &c);
    CHECK_EQ(mux_chan_close(&c), 0);
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_CHAN, &c), -EINVAL);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

/* Bad input: -EINVAL, never a crash, and nothing counted. */
TEST(ref_refuses_bad_arguments) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_timer_t t;
    CHECK_EQ(mux_timer_init(&t, count_timer), 0);
    CHECK_EQ(mux_unref(NULL, MUX_HANDLE_TIMER, &t), -EINVAL);
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_TIMER, NULL), -EINVAL);
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_IO, &t), -EINVAL); /* not what it is */
    CHECK_EQ(mux_unref(&loop, 0, &t), -EINVAL);
    CHECK_EQ(mux_unref(&loop, 999, &t), -EINVAL);
    CHECK_EQ(mux_ref(&loop, -1, &t), -EINVAL);
    CHECK_EQ(mux_has_ref(&loop, MUX_HANDLE_SIGNAL, &t), -EINVAL);
    mux_idle_t zero;
    memset(&zero, 0, sizeof zero); /* never initialised */
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_IDLE, &zero), -EINVAL);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}
