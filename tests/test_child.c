/* SPDX-License-Identifier: MIT */
/* Child watchers: exit status, death by signal, any-pid watchers, children that exited
 * before the watcher started, children nobody watches (left alone), and an exit that the
 * backend's kernel reports (kqueue's EVFILT_PROC) reaped for its watchers. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h" /* mux__child_exited: what a backend that watches pids calls */

struct reaped {
    int calls;
    int pid[4], status[4];
    int active_in_cb;
};

static void child_cb(mux_loop_t *loop, mux_child_t *w, int pid, int wstatus)
{
    struct reaped *r = w->data;
    CHECK_LT(r->calls, 4);
    r->pid[r->calls] = pid;
    r->status[r->calls] = wstatus;
    r->active_in_cb = mux_loop_active(loop);
    r->calls++;
}

/* A child that exits with `code` at once (or waits to be killed when code < 0). */
static int spawn(int code)
{
#ifdef _WIN32 /* no fork: this program again (tests/windows/posix.h) */
    int child = win_spawn(code);
    CHECK_GT(child, 0);
    return child;
#endif
    int pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        if (code < 0)
            for (;;)
                pause();
        child_exit(code);
    }
    return pid;
}

TEST(child_exit_status_reported_and_watcher_inactive) {
    mux_loop_t loop;
    loop_open(&loop);
    struct reaped r;
    memset(&r, 0, sizeof r);
    mux_child_t w;
    int pid = spawn(42);
    CHECK_EQ(mux_child_init(&w, child_cb, pid), 0);
    w.data = &r;
    CHECK_EQ(mux_child_start(&loop, &w), 0);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* the watcher stopped itself */
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.pid[0], pid);
    CHECK(WIFEXITED(r.status[0]));
    CHECK_EQ(WEXITSTATUS(r.status[0]), 42);
    CHECK_EQ(r.active_in_cb, 0); /* stopped before its callback */
#ifndef _WIN32 /* a process has no parent to reap it there: its starter's handle is its own */
    CHECK_EQ(waitpid(pid, NULL, WNOHANG), -1); /* reaped by the loop */
    CHECK_EQ(errno, ECHILD);
#endif
    CHECK_EQ(mux_child_stop(&loop, &w), 0);
    loop_close(&loop);
}

TEST(child_killed_by_signal_reports_wifsignaled) {
    mux_loop_t loop;
    loop_open(&loop);
    struct reaped r;
    memset(&r, 0, sizeof r);
    mux_child_t w;
    int pid = spawn(-1);
    CHECK_EQ(mux_child_init(&w, child_cb, pid), 0);
    w.data = &r;
    CHECK_EQ(mux_child_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(r.calls, 0);
    CHECK_EQ(kill(pid, SIGKILL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.pid[0], pid);
    CHECK(WIFSIGNALED(r.status[0]));
    CHECK_EQ(WTERMSIG(r.status[0]), SIGKILL);
    loop_close(&loop);
}

static void any_cb(mux_loop_t *loop, mux_child_t *w, int pid, int wstatus)
{
    struct reaped *r = w->data;
    child_cb(loop, w, pid, wstatus);
    CHECK_EQ(r->active_in_cb, 1); /* an any-pid watcher stays active */
    if (r->calls == 2)
        CHECK_EQ(mux_child_stop(loop, w), 0);
}

TEST(child_any_pid_watcher_sees_two_children) {
#ifdef _WIN32
    SKIP("Windows has no such thing: no process reaps its children as a group "
         "(mux_child_start of pid 0 is -ENOTSUP)");
#endif
    mux_loop_t loop;
    loop_open(&loop);
    struct reaped r;
    memset(&r, 0, sizeof r);
    mux_child_t w;
    CHECK_EQ(mux_child_init(&w, any_cb, 0), 0);
    w.data = &r;
    CHECK_EQ(mux_child_start(&loop, &w), 0);
    int p1 = spawn(1), p2 = spawn(2);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(r.calls, 2);
    int i1 = r.pid[0] == p1 ? 0 : 1, i2 = 1 - i1;
    CHECK_EQ(r.pid[i1], p1);
    CHECK_EQ(r.pid[i2], p2);
    CHECK(WIFEXITED(r.status[i1]) && WIFEXITED(r.status[i2]));
    CHECK_EQ(WEXITSTATUS(r.status[i1]), 1);
    CHECK_EQ(WEXITSTATUS(r.status[i2]), 2);
    loop_close(&loop);
}

TEST(child_exited_before_watcher_started_is_reported) {
    mux_loop_t loop;
    loop_open(&loop);
    struct reaped r;
    memset(&r, 0, sizeof r);
    mux_child_t w;
    int pid = spawn(7);
    siginfo_t info;
    memset(&info, 0, sizeof info);
    /* Wait until it is a zombie, without reaping it; its SIGCHLD is long gone. */
    CHECK_EQ(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT), 0);
    CHECK_EQ(info.si_pid, pid);
    CHECK_EQ(mux_child_init(&w, child_cb, pid), 0);
    w.data = &r;
    CHECK_EQ(mux_child_start(&loop, &w), 0);
    CHECK_EQ(r.calls, 0); /* never from inside start */
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.pid[0], pid);
    CHECK(WIFEXITED(r.status[0]));
    CHECK_EQ(WEXITSTATUS(r.status[0]), 7);
    loop_close(&loop);
}

/* Only watched children are reaped: a child that no loop watches is left for its owner. */
TEST(child_unwatched_child_is_left_alone) {
    mux_loop_t loop;
    loop_open(&loop);
    struct reaped r;
    memset(&r, 0, sizeof r);
    mux_child_t w;
    int other = spawn(3);
    int pid = spawn(4);
    CHECK_EQ(mux_child_init(&w, child_cb, pid), 0);
    w.data = &r;
    CHECK_EQ(mux_child_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.pid[0], pid);
    CHECK_EQ(WEXITSTATUS(r.status[0]), 4);
    int st = 0;
    CHECK_EQ(waitpid(other, &st, 0), other);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 3);
    loop_close(&loop);
}

/* kqueue learns of one child's exit from the kernel (EVFILT_PROC, NOTE_EXIT): its watcher
 * installs no SIGCHLD handler, and works with SIGCHLD blocked. A watcher of any pid still
 * takes SIGCHLD's. */
TEST(child_watcher_of_one_pid_needs_no_sigchld_on_kqueue) {
#ifdef _WIN32
    SKIP("Windows has no kqueue, no SIGCHLD and no signal mask: a child's end is its handle's");
#else
    mux_loop_t loop;
    loop_open(&loop);
    if (!loop_is(&loop, "kqueue")) {
        loop_close(&loop);
        SKIP("only kqueue's kernel reports one child's exit: the others wait for SIGCHLD");
    }
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &chld, &old), 0);
    struct reaped r;
    memset(&r, 0, sizeof r);
    mux_child_t w;
    int pid = spawn(7);
    CHECK_EQ(mux_child_init(&w, child_cb, pid), 0);
    w.data = &r;
    CHECK_EQ(mux_child_start(&loop, &w), 0);
    struct sigaction sa;
    CHECK_EQ(sigaction(SIGCHLD, NULL, &sa), 0);
    CHECK(sa.sa_handler == SIG_DFL); /* not the library's */
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.pid[0], pid);
    CHECK(WIFEXITED(r.status[0]));
    CHECK_EQ(WEXITSTATUS(r.status[0]), 7);
    /* A watcher of any pid takes the library's SIGCHLD handler, and gives it back. */
    mux_child_t any;
    CHECK_EQ(mux_child_init(&any, child_cb, 0), 0);
    any.data = &r;
    CHECK_EQ(mux_child_start(&loop, &any), 0);
    CHECK_EQ(sigaction(SIGCHLD, NULL, &sa), 0);
    CHECK(sa.sa_handler != SIG_DFL);
    CHECK_EQ(mux_child_stop(&loop, &any), 0);
    CHECK_EQ(sigaction(SIGCHLD, NULL, &sa), 0);
    CHECK(sa.sa_handler == SIG_DFL);
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);
    loop_close(&loop);
#endif
}

static void count_iteration(mux_loop_t *loop, mux_prepare_t *p)
{
    (void)loop;
    ++*(long *)p->data;
}

static void end_run(mux_loop_t *loop, mux_timer_t *t)
{
    (void)t;
    mux_loop_stop(loop);
}

/* A watcher of a pid that is not this process's child (a grandchild, which its own parent
 * reaps): it is never called, and the loop does not spin meanwhile (libkqueue, asked to
 * watch such a pid, reported its exit on every wait and never delivered it). */
TEST(child_watcher_of_a_grandchild_is_never_called_and_the_loop_does_not_spin) {
#ifdef _WIN32
    SKIP("Windows has no fork and no reaping: any process the program may open can be watched");
#else
    int p[2];
    CHECK_EQ(pipe(p), 0);
    int child = fork();
    CHECK_GE(child, 0);
    if (child == 0) {
        int grandchild = fork();
        if (grandchild == 0) {
            sleep_ms(50); /* exits once the watcher is there */
            child_exit(0);
        }
        if (write(p[1], &grandchild, sizeof grandchild) != sizeof grandchild)
            child_exit(1);
        waitpid(grandchild, NULL, 0);
        for (;;)
            pause();
    }
    int grandchild;
    CHECK_EQ(read(p[0], &grandchild, sizeof grandchild), (ssize_t)sizeof grandchild);
    mux_loop_t loop;
    loop_open(&loop);
    struct reaped r;
    memset(&r, 0, sizeof r);
    mux_child_t w;
    CHECK_EQ(mux_child_init(&w, child_cb, grandchild), 0);
    w.data = &r;
    CHECK_EQ(mux_child_start(&loop, &w), 0);
    long n = 0;
    mux_prepare_t prep;
    mux_timer_t end;
    CHECK_EQ(mux_prepare_init(&prep, count_iteration), 0);
    prep.data = &n;
    CHECK_EQ(mux_prepare_start(&loop, &prep), 0);
    CHECK_EQ(mux_timer_init(&end, end_run), 0);
    CHECK_EQ(mux_timer_start(&loop, &end, 200 * MS, 0), 0);
    CHECK_GE(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(r.calls, 0);
    CHECK_LT(n, 20);
    CHECK_EQ(mux_child_stop(&loop, &w), 0);
    CHECK_EQ(mux_prepare_stop(&loop, &prep), 0);
    loop_close(&loop);
    CHECK_EQ(kill(child, SIGKILL), 0);
    CHECK_EQ(waitpid(child, NULL, 0), child);
    close(p[0]);
    close(p[1]);
#endif
}

#ifndef _WIN32
/* Waits until `pid` has exited, without reaping it. */
static void wait_exited(int pid)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) < 0)
        CHECK_EQ(errno, EINTR);
    CHECK_EQ(info.si_pid, pid);
}

/* What the wait of a backend that watches pids does with a pid's exit (kqueue's NOTE_EXIT),
 * called here on every backend: each watcher of that pid is called back with its status,
 * once reaped; a pid no watcher has, or one reaped by someone else, changes nothing. */
#endif

TEST(child_exit_reported_by_the_backend_reaps_it_for_every_watcher_of_the_pid) {
#ifdef _WIN32
    SKIP("a kernel that reports a pid's exit to the wait is kqueue's: Windows watches a "
         "child's process handle, and has no waitpid to reap with");
#else
    mux_loop_t loop;
    loop_open(&loop);
    struct mux__loop *l = mux__loop_of(&loop);
    struct reaped r, other;
    memset(&r, 0, sizeof r);
    memset(&other, 0, sizeof other);
    int p1 = spawn(3), p2 = spawn(4);
    mux_child_t w1a, w1b, w2;
    CHECK_EQ(mux_child_init(&w1a, child_cb, p1), 0);
    CHECK_EQ(mux_child_init(&w1b, child_cb, p1), 0);
    CHECK_EQ(mux_child_init(&w2, child_cb, p2), 0);
    w1a.data = w1b.data = &r;
    w2.data = &other;
    CHECK_EQ(mux_child_start(&loop, &w1a), 0);
    CHECK_EQ(mux_child_start(&loop, &w2), 0); /* between the two watchers of p1 */
    CHECK_EQ(mux_child_start(&loop, &w1b), 0);
    wait_exited(p1);
    wait_exited(p2);
    int status;
    CHECK_EQ(waitpid(p2, &status, 0), p2); /* p2 reaped by someone else */
    CHECK_EQ(l->nchildren, 3);
    mux__child_exited(l, p2);
    CHECK_EQ(l->nchildren, 3); /* w2 still waits */
    mux__child_exited(l, getpid()); /* no watcher has it */
    CHECK_EQ(l->nchildren, 3);
    mux__child_exited(l, p1);
    CHECK_EQ(l->nchildren, 1); /* both of p1's went */
    CHECK_EQ(waitpid(p1, &status, WNOHANG), -1); /* reaped */
    CHECK_EQ(errno, ECHILD);
    CHECK_EQ(r.calls, 0); /* called back from the loop */
    CHECK_EQ(mux_child_stop(&loop, &w2), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(r.calls, 2);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(r.pid[i], p1);
        CHECK(WIFEXITED(r.status[i]));
        CHECK_EQ(WEXITSTATUS(r.status[i]), 3);
    }
    CHECK_EQ(other.calls, 0);
    loop_close(&loop);
#endif
}
