/* Regressions found by review: each case pins one defect that was fixed, named for the
 * behaviour that now holds. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"


static void count_timer(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    ++*(int *)t->data;
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

static void ignore_io(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop;
    (void)w;
    (void)revents;
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
        mux_async_send(&a); /* a later send wakes it too */
        mux_run(&loop, MUX_RUN_DEFAULT);
        _exit(first == 1 && prompt && calls == 2 ? 0 : 10 + calls + 5 * !prompt);
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
