/* SPDX-License-Identifier: MIT */
/* The io_uring backend's own cases: the run-time fallback when the kernel refuses
 * io_uring, and a ring far smaller than the number of watched fds. They name the backend
 * themselves, so they are backend-independent cases (core.<name>), skipped in a build
 * without the uring backend.
 *
 * The backend reads two test knobs when a loop opens: IOMUX_TEST_URING_REFUSE=<errno name>
 * makes it fail as a refusing kernel would (io_uring_disabled sysctl, seccomp), and
 * IOMUX_URING_ENTRIES=<n> gives it an SQ ring of n entries and a CQ ring of 2n.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static int uring_built(void)
{
    for (size_t i = 0; mux_backend_name(i); i++)
        if (strcmp(mux_backend_name(i), "uring") == 0)
            return 1;
    return 0;
}

static void skip_unless_uring_opens(void)
{
    if (!uring_built())
        SKIP("the uring backend is not in this build (liburing not found, or a portable-POSIX build)");
    int r = mux_backend_probe("uring");
    if (r != 0) {
        char why[160];
        snprintf(why, sizeof why, "this kernel refuses io_uring: %s", mux_strerror(r));
        SKIP(why);
    }
}

/* A refused io_uring: the default choice falls back to epoll without a word, and a loop
 * that names "uring" gets the kernel's error. */
static void check_refusal(const char *knob, int err)
{
    mux_loop_t loop;
    CHECK_EQ(setenv("IOMUX_TEST_URING_REFUSE", knob, 1), 0);
    CHECK_EQ(mux_loop_init(&loop, NULL), 0);
    CHECK_STR_EQ(mux_loop_backend(&loop), "epoll");
    CHECK_EQ(mux_loop_close(&loop), 0);
    mux_loop_options_t named = {"uring", 0};
    CHECK_EQ(mux_loop_init(&loop, &named), err);
    CHECK_EQ(mux_backend_probe("uring"), err);
    /* The same through the environment. */
    CHECK_EQ(setenv("IOMUX_BACKEND", "uring", 1), 0);
    CHECK_EQ(mux_loop_init(&loop, NULL), err);
    CHECK_EQ(unsetenv("IOMUX_BACKEND"), 0);
    CHECK_EQ(unsetenv("IOMUX_TEST_URING_REFUSE"), 0);
}

CORE_TEST(uring_refused_by_kernel_falls_back_to_epoll_and_named_uring_fails) {
    if (!uring_built())
        SKIP("the uring backend is not in this build (liburing not found, or a portable-POSIX build)");
    CHECK_EQ(unsetenv("IOMUX_BACKEND"), 0);
    check_refusal("EPERM", -EPERM);   /* io_uring_disabled, or seccomp's EPERM */
    check_refusal("ENOSYS", -ENOSYS); /* seccomp's ENOSYS, or a kernel without it */
    check_refusal("EACCES", -EACCES); /* a security module's refusal */
    check_refusal("95", -95);         /* any other errno, by number */
    check_refusal("nonsense", -EPERM); /* not a name or a number: EPERM */
}

/* Whether io_uring comes before epoll in the build's order (IOMUX_PREFER_URING). */
static int uring_first(void)
{
    for (size_t i = 0; mux_backend_name(i); i++) {
        if (strcmp(mux_backend_name(i), "uring") == 0)
            return 1;
        if (strcmp(mux_backend_name(i), "epoll") == 0)
            return 0;
    }
    return 0;
}

/* The running kernel's release, as at least major.minor. */
static int kernel_at_least(unsigned major, unsigned minor)
{
    struct utsname u;
    unsigned a = 0, b = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%u.%u", &a, &b) < 1)
        return 0;
    return a > major || (a == major && b >= minor);
}

static const char *default_backend(void)
{
    static char name[16];
    mux_loop_t loop;
    CHECK_EQ(mux_loop_init(&loop, NULL), 0);
    snprintf(name, sizeof name, "%s", mux_loop_backend(&loop));
    CHECK_EQ(mux_loop_close(&loop), 0);
    return name;
}

/* uring opens when asked for, and the default is the first backend of the build's order
 * (io_uring before epoll with IOMUX_PREFER_URING, the default: see CMakeLists.txt), io_uring
 * only where its rule takes it (the next case). */
CORE_TEST(uring_opens_here_and_default_is_first_in_order) {
    CHECK_EQ(unsetenv("IOMUX_TEST_URING_REFUSE"), 0);
    CHECK_EQ(unsetenv("IOMUX_TEST_URING_KERNEL"), 0);
    CHECK_EQ(unsetenv("IOMUX_BACKEND"), 0);
    skip_unless_uring_opens();
    mux_loop_t loop;
    mux_loop_options_t named = {"uring", 0};
    CHECK_EQ(mux_loop_init(&loop, &named), 0);
    CHECK_STR_EQ(mux_loop_backend(&loop), "uring");
    CHECK_EQ(mux_loop_close(&loop), 0);
    const char *want = uring_first() && !kernel_at_least(6, 1) ? "epoll" : mux_backend_name(0);
    CHECK_STR_EQ(default_backend(), want);
}

/* The default rule (docs/backends.md, "How the default is chosen"): the automatic choice
 * takes io_uring from Linux 6.1 on, where the native stream path is whole (native operations,
 * multishot accept and receive: what the studies measured ahead of epoll); on an older
 * kernel, or with the operations emulated, it takes epoll. Named, io_uring opens whatever the
 * rule says. IOMUX_TEST_URING_KERNEL stands in for the kernel's release. */
CORE_TEST(uring_default_rule_takes_it_from_6_1_with_its_native_stream_path) {
    CHECK_EQ(unsetenv("IOMUX_TEST_URING_REFUSE"), 0);
    CHECK_EQ(unsetenv("IOMUX_BACKEND"), 0);
    CHECK_EQ(unsetenv("IOMUX_URING_STREAMS"), 0);
    skip_unless_uring_opens();
    if (!uring_first())
        SKIP("io_uring comes after epoll in this build's order (IOMUX_PREFER_URING=OFF)");
    if (!kernel_at_least(6, 1))
        SKIP("this kernel is older than 6.1: the native stream path the rule asks for is not "
             "all here");
    static const struct {
        const char *release, *want;
    } cases[] = {{"5.19.17", "epoll"}, {"6.0.9", "epoll"},     {"6.1", "uring"},
                 {"6.1.0-13-amd64", "uring"}, {"6.18.44-fc", "uring"}, {"7.0", "uring"},
                 {"", "uring"} /* unset: the running kernel, 6.1 or later here */,
                 {"garbage", "epoll"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ(setenv("IOMUX_TEST_URING_KERNEL", cases[i].release, 1), 0);
        CHECK_STR_EQ(default_backend(), cases[i].want);
        mux_loop_t loop;
        mux_loop_options_t named = {"uring", 0};
        CHECK_EQ(mux_loop_init(&loop, &named), 0); /* named: whatever the rule says */
        CHECK_EQ(mux_loop_close(&loop), 0);
    }
    /* The operations emulated over polls: not the path measured ahead. */
    CHECK_EQ(setenv("IOMUX_TEST_URING_KERNEL", "6.18", 1), 0);
    CHECK_EQ(setenv("IOMUX_URING_STREAMS", "poll", 1), 0);
    CHECK_STR_EQ(default_backend(), "epoll");
    CHECK_EQ(setenv("IOMUX_URING_STREAMS", "oneshot", 1), 0);
    CHECK_STR_EQ(default_backend(), "epoll");
    CHECK_EQ(unsetenv("IOMUX_URING_STREAMS"), 0);
    CHECK_STR_EQ(default_backend(), "uring");
    CHECK_EQ(unsetenv("IOMUX_TEST_URING_KERNEL"), 0);
}

/* ---- a tiny ring under many ready fds ---- */

struct ring_fd {
    int fd, calls, bytes;
    unsigned all;
};

static void read_all(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct ring_fd *r = w->data;
    (void)loop;
    r->calls++;
    r->all |= revents;
    r->bytes += drain(r->fd);
}

static void count_only(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct ring_fd *r = w->data;
    (void)loop;
    r->calls++;
    r->all |= revents;
}

/* Opens a uring loop whose SQ ring has `entries` entries (CQ: twice that). */
static void open_small_ring(mux_loop_t *loop, const char *entries)
{
    CHECK_EQ(unsetenv("IOMUX_TEST_URING_REFUSE"), 0);
    skip_unless_uring_opens();
    CHECK_EQ(setenv("IOMUX_URING_ENTRIES", entries, 1), 0);
    mux_loop_options_t named = {"uring", MUX_LOOP_IGNORE_ENV};
    CHECK_EQ(mux_loop_init(loop, &named), 0);
    CHECK_EQ(unsetenv("IOMUX_URING_ENTRIES"), 0);
}

/* Runs until every watcher has been called at least `calls` times; returns iterations. */
static int run_until_all(mux_loop_t *loop, struct ring_fd *r, int n, int calls)
{
    for (int iter = 1; iter <= 1000; iter++) {
        CHECK_GE(mux_run(loop, MUX_RUN_ONCE), 0);
        int done = 0;
        for (int i = 0; i < n; i++)
            done += r[i].calls >= calls;
        if (done == n)
            return iter;
    }
    harness_fail(__FILE__, __LINE__, "every watcher called", "an event was lost");
}

/* 1,000 read watchers on an SQ ring of 4 entries and a CQ ring of 8: every interest change
 * must get through a full SQ, and every completion through a full CQ (whose multishot
 * polls the kernel then ends). All fds are made ready at once, twice; each watcher must
 * hear of it each time, with every byte. */
static void many_ready_fds_case(unsigned events)
{
    enum { PAIRS = 500, N = 2 * PAIRS };
    if (raise_nofile_limit() < N + 64)
        SKIP("RLIMIT_NOFILE too low for 1,000 socketpair ends");
    mux_loop_t loop;
    open_small_ring(&loop, "4");
    int *fds = calloc(N, sizeof *fds);
    mux_io_t *w = calloc(N, sizeof *w);
    struct ring_fd *r = calloc(N, sizeof *r);
    CHECK(fds && w && r);
    for (int i = 0; i < PAIRS; i++)
        make_socketpair(&fds[2 * i]);
    for (int i = 0; i < N; i++) {
        r[i].fd = fds[i];
        CHECK_EQ(mux_io_init(&w[i], read_all, fds[i], events), 0);
        w[i].data = &r[i]; /* after init, which clears it */
        CHECK_EQ(mux_io_start(&loop, &w[i]), 0);
    }
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), N);
    for (int i = 0; i < N; i++)
        CHECK_EQ(r[i].calls, 0);
    for (int round = 1; round <= 2; round++) {
        for (int i = 0; i < N; i++)
            write_byte(fds[i]); /* makes the other end readable */
        run_until_all(&loop, r, N, round);
        for (int i = 0; i < N; i++) {
            CHECK_EQ(r[i].bytes, round);
            CHECK_EQ(r[i].all, MUX_READ);
        }
        /* Everything was read: nothing more comes. */
        for (int i = 0; i < 3; i++)
            CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), N);
        for (int i = 0; i < N; i++)
            CHECK_EQ(r[i].calls, round);
    }
    for (int i = 0; i < N; i++)
        CHECK_EQ(mux_io_stop(&loop, &w[i]), 0);
    CHECK_EQ(mux_loop_close(&loop), 0);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    free(fds);
    free(w);
    free(r);
}

CORE_TEST(uring_tiny_ring_many_ready_fds_level_no_event_lost) {
    many_ready_fds_case(MUX_READ);
}

CORE_TEST(uring_tiny_ring_many_ready_fds_edge_no_event_lost) {
    many_ready_fds_case(MUX_READ | MUX_EDGE);
}

/* IOMUX_URING_ENTRIES outside 2 .. 4096, or not a number, is refused when the loop opens: a
 * ring of one entry could not take a change (a remove and an add) and failed every one. */
CORE_TEST(uring_entries_outside_2_to_4096_are_refused_at_init) {
    CHECK_EQ(unsetenv("IOMUX_TEST_URING_REFUSE"), 0);
    skip_unless_uring_opens();
    static const char *const bad[] = {"1", "0", "-3", "4097", "abc", "8x"};
    mux_loop_options_t named = {"uring", MUX_LOOP_IGNORE_ENV};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mux_loop_t loop;
        CHECK_EQ(setenv("IOMUX_URING_ENTRIES", bad[i], 1), 0);
        CHECK_EQ(mux_loop_init(&loop, &named), -EINVAL);
    }
    CHECK_EQ(unsetenv("IOMUX_URING_ENTRIES"), 0);
    /* The smallest accepted ring takes registrations (a readable socket is reported). */
    mux_loop_t loop;
    open_small_ring(&loop, "2");
    int sv[2];
    make_socketpair(sv);
    struct ring_fd r = {.fd = sv[0]};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, read_all, sv[0], MUX_READ), 0);
    w.data = &r;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    write_byte(sv[1]);
    run_until_all(&loop, &r, 1, 1);
    CHECK_EQ(r.all, MUX_READ);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_loop_close(&loop), 0);
    close(sv[0]);
    close(sv[1]);
}

/* Level-triggered readiness survives a full CQ: 300 fds left readable (never read) and
 * always writable, watched for both, keep being reported on every iteration. */
CORE_TEST(uring_tiny_ring_level_readiness_is_reported_every_iteration) {
    enum { PAIRS = 150, N = 2 * PAIRS, ITER = 5 };
    if (raise_nofile_limit() < N + 64)
        SKIP("RLIMIT_NOFILE too low");
    mux_loop_t loop;
    open_small_ring(&loop, "2");
    int fds[N];
    mux_io_t w[N];
    struct ring_fd r[N];
    memset(r, 0, sizeof r);
    for (int i = 0; i < PAIRS; i++)
        make_socketpair(&fds[2 * i]);
    for (int i = 0; i < N; i++) {
        write_byte(fds[i ^ 1]);
        r[i].fd = fds[i];
        CHECK_EQ(mux_io_init(&w[i], count_only, fds[i], MUX_READ | MUX_WRITE), 0);
        w[i].data = &r[i];
        CHECK_EQ(mux_io_start(&loop, &w[i]), 0);
    }
    /* A CQ of 4 cannot hold 300 completions: one iteration still reports them all. */
    for (int iter = 1; iter <= ITER; iter++) {
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), N);
        for (int i = 0; i < N; i++) {
            CHECK_EQ(r[i].calls, iter);
            CHECK_EQ(r[i].all, MUX_READ | MUX_WRITE);
        }
    }
    for (int i = 0; i < N; i++)
        CHECK_EQ(mux_io_stop(&loop, &w[i]), 0);
    CHECK_EQ(mux_loop_close(&loop), 0);
    for (int i = 0; i < N; i++)
        close(fds[i]);
}

/* A child that sandboxes itself after fork (seccomp denying io_uring_setup: simulated with
 * IOMUX_TEST_URING_REFUSE) gets -EPERM from every mux_run, never a crash; once the ring can
 * be made again, the loop works. */
CORE_TEST(uring_fork_child_refused_a_new_ring_gets_eperm_each_run_then_recovers) {
    CHECK_EQ(unsetenv("IOMUX_TEST_URING_REFUSE"), 0);
    skip_unless_uring_opens();
    mux_loop_t loop;
    mux_loop_options_t named = {"uring", MUX_LOOP_IGNORE_ENV};
    CHECK_EQ(mux_loop_init(&loop, &named), 0);
    int sv[2];
    make_socketpair(sv);
    struct ring_fd r = {.fd = sv[0]};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, read_all, sv[0], MUX_READ), 0);
    w.data = &r;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        alarm(10);
        setenv("IOMUX_TEST_URING_REFUSE", "EPERM", 1);
        int code = 0;
        for (int i = 0; i < 3; i++)
            code |= mux_run(&loop, MUX_RUN_NOWAIT) == -EPERM ? 0 : 1;
        unsetenv("IOMUX_TEST_URING_REFUSE");
        write_byte(sv[1]);
        for (int i = 0; i < 100 && r.calls == 0; i++)
            if (mux_run(&loop, MUX_RUN_ONCE) < 0)
                break;
        code |= r.calls == 1 ? 0 : 2;
        child_exit(code);
    }
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status)); /* a SIGSEGV would show here */
    CHECK_EQ(WEXITSTATUS(status), 0);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_loop_close(&loop), 0);
    close(sv[0]);
    close(sv[1]);
}

static void count_and_drain(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop;
    CHECK_EQ(revents, MUX_READ);
    CHECK_EQ(drain(mux_io_fd(w)), 1);
    (*(int *)w->data)++;
}

/* IOMUX_URING_TASKRUN: unset or "coop" (the default) and "defer" open, anything else is
 * refused at init. 100 fds made ready before a non-blocking run are all reported by that one
 * run: with cooperative task work the kernel ran their completion work when the writes
 * returned; deferred task work runs inside the enter in bounded passes (since Linux 6.13),
 * and the run's poll enters again while the kernel flags more (with a single pass it took
 * several runs). */
CORE_TEST(uring_taskrun_modes_and_one_run_for_a_hundred_ready_fds) {
    CHECK_EQ(unsetenv("IOMUX_TEST_URING_REFUSE"), 0);
    skip_unless_uring_opens();
    mux_loop_options_t named = {"uring", MUX_LOOP_IGNORE_ENV};
    mux_loop_t loop;
    static const char *const bad[] = {"DEFER", "cooperative", "1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(setenv("IOMUX_URING_TASKRUN", bad[i], 1), 0);
        CHECK_EQ(mux_loop_init(&loop, &named), -EINVAL);
    }
    static const char *const modes[] = {"", "coop", "defer"};
    enum { N = 100 };
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        CHECK_EQ(setenv("IOMUX_URING_TASKRUN", modes[m], 1), 0);
        CHECK_EQ(mux_loop_init(&loop, &named), 0);
        int sv[N][2], calls = 0;
        mux_io_t w[N];
        for (int i = 0; i < N; i++) {
            make_socketpair(sv[i]);
            CHECK_EQ(mux_io_init(&w[i], count_and_drain, sv[i][0], MUX_READ), 0);
            w[i].data = &calls;
            CHECK_EQ(mux_io_start(&loop, &w[i]), 0);
        }
        CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), N); /* every poll armed, nothing ready */
        CHECK_EQ(calls, 0);
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < N; i++)
                write_byte(sv[i][1]);
            int runs = 0, before = calls;
            while (calls < before + N && runs < 1000) {
                CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), N);
                runs++;
            }
            CHECK_EQ(calls, before + N);
            CHECK_EQ(runs, 1);
        }
        for (int i = 0; i < N; i++) {
            CHECK_EQ(mux_io_stop(&loop, &w[i]), 0);
            close(sv[i][0]);
            close(sv[i][1]);
        }
        CHECK_EQ(mux_loop_close(&loop), 0);
    }
    CHECK_EQ(unsetenv("IOMUX_URING_TASKRUN"), 0);
}
