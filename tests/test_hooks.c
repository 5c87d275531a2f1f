/* SPDX-License-Identifier: MIT */
/* idle, prepare, check and fork watchers. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h" /* the loop's wake-up descriptor */

static void idle_count(mux_loop_t *loop, mux_idle_t *w)
{
    int *n = w->data;
    if (++*n == 100)
        CHECK_EQ(mux_idle_stop(loop, w), 0);
}

static void io_never(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop;
    (void)w;
    (void)revents;
    CHECK(!"called");
}

TEST(idle_runs_without_blocking_while_active) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2], n = 0;
    make_socketpair(sv);
    mux_io_t w; /* never ready: without the idle watcher, ONCE would block forever */
    CHECK_EQ(mux_io_init(&w, io_never, sv[0], MUX_READ), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    mux_idle_t i;
    CHECK_EQ(mux_idle_init(&i, idle_count), 0);
    i.data = &n;
    CHECK_EQ(mux_idle_start(&loop, &i), 0);
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_EQ(n, 1);
    while (n < 100)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_LT(mono_ns() - t0, 1000 * MS);
    CHECK_EQ(n, 100);
    CHECK_EQ(mux_loop_active(&loop), 1); /* the idle watcher stopped itself */
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* Idle is only called in iterations where nothing else was pending. */
struct idle_vs_io {
    int idle_calls, io_calls;
    int idle_this_iter, io_this_iter, both;
};

static void iv_idle(mux_loop_t *loop, mux_idle_t *w)
{
    struct idle_vs_io *s = w->data;
    (void)loop;
    s->idle_calls++;
    s->idle_this_iter = 1;
}

static void iv_io(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct idle_vs_io *s = w->data;
    (void)loop;
    (void)revents;
    s->io_calls++;
    s->io_this_iter = 1;
}

static void iv_check(mux_loop_t *loop, mux_check_t *w)
{
    struct idle_vs_io *s = w->data;
    (void)loop;
    if (s->idle_this_iter && s->io_this_iter)
        s->both++;
    s->idle_this_iter = s->io_this_iter = 0;
}

TEST(idle_not_called_while_other_events_pending) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    write_byte(sv[1]); /* stays readable: io has an event every iteration */
    struct idle_vs_io s;
    memset(&s, 0, sizeof s);
    mux_io_t w;
    mux_idle_t i;
    mux_check_t c;
    CHECK_EQ(mux_io_init(&w, iv_io, sv[0], MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_idle_init(&i, iv_idle), 0);
    i.data = &s;
    CHECK_EQ(mux_check_init(&c, iv_check), 0);
    c.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_idle_start(&loop, &i), 0);
    CHECK_EQ(mux_check_start(&loop, &c), 0);
    for (int k = 0; k < 5; k++)
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 3);
    CHECK_EQ(s.io_calls, 5);
    CHECK_EQ(s.idle_calls, 0);
    CHECK_EQ(drain(sv[0]), 1); /* nothing pending any more: idle runs */
    for (int k = 0; k < 5; k++)
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 3);
    CHECK_EQ(s.io_calls, 5);
    CHECK_EQ(s.idle_calls, 5);
    CHECK_EQ(s.both, 0);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_idle_stop(&loop, &i), 0);
    CHECK_EQ(mux_check_stop(&loop, &c), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* prepare before the wait, check after it: prepare < io < check in one iteration. */
static char trace[64];
static int ntrace;

static void tr_prepare(mux_loop_t *loop, mux_prepare_t *w)
{
    (void)loop;
    (void)w;
    trace[ntrace++] = 'P';
}

static void tr_check(mux_loop_t *loop, mux_check_t *w)
{
    (void)loop;
    (void)w;
    trace[ntrace++] = 'C';
}

static void tr_io(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop;
    (void)revents;
    trace[ntrace++] = 'I';
    drain(mux_io_fd(w));
}

static void tr_timer(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    (void)t;
    trace[ntrace++] = 'T';
}

TEST(prepare_and_check_surround_the_wait) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_prepare_t p;
    mux_check_t c;
    mux_io_t w;
    mux_timer_t t;
    CHECK_EQ(mux_prepare_init(&p, tr_prepare), 0);
    CHECK_EQ(mux_check_init(&c, tr_check), 0);
    CHECK_EQ(mux_io_init(&w, tr_io, sv[0], MUX_READ), 0);
    CHECK_EQ(mux_timer_init(&t, tr_timer), 0);
    CHECK_EQ(mux_prepare_start(&loop, &p), 0);
    CHECK_EQ(mux_check_start(&loop, &c), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    write_byte(sv[1]);
    ntrace = 0;
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 3);
    trace[ntrace] = 0;
    CHECK_STR_EQ(trace, "PIC");
    /* The next iteration waits for the timer: P, then the wait, then T, then C. */
    CHECK_EQ(mux_timer_start(&loop, &t, 5 * MS, 0), 0);
    ntrace = 0;
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 3);
    trace[ntrace] = 0;
    CHECK_STR_EQ(trace, "PTC");
    CHECK_EQ(mux_prepare_stop(&loop, &p), 0);
    CHECK_EQ(mux_check_stop(&loop, &c), 0);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* A prepare callback that writes to a stream: where the write goes out at once (the readiness
 * backends send before they wait), its callback runs before the wait, and MUX_RUN_ONCE must
 * not then block for another event (mux_run's rule for callbacks that were already due);
 * on io_uring the write completes in the wait. Either way the run returns with it done. */
struct prep_write {
    mux_stream_t s;
    mux_write_t req;
    mux_buf_t buf;
    int written, status;
};

static void pw_written(mux_write_t *req, int status)
{
    struct prep_write *pw = req->data;
    pw->written++;
    pw->status = status;
}

static void pw_prepare(mux_loop_t *loop, mux_prepare_t *p)
{
    struct prep_write *pw = p->data;
    CHECK_EQ(mux_prepare_stop(loop, p), 0);
    pw->buf = mux_buf_init("prep", 4);
    pw->req.data = pw;
    CHECK_EQ(mux_write(&pw->s, &pw->req, &pw->buf, 1, pw_written), 0);
}

TEST(a_write_from_a_prepare_callback_ends_a_run_once_without_another_event) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct prep_write pw = {.written = 0};
    CHECK_EQ(mux_stream_open(&loop, &pw.s, sv[0]), 0);
    mux_prepare_t p;
    CHECK_EQ(mux_prepare_init(&p, pw_prepare), 0);
    p.data = &pw;
    CHECK_EQ(mux_prepare_start(&loop, &p), 0);
    harness_watchdog(5);
    for (int i = 0; i < 10 && !pw.written; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(pw.written, 1);
    CHECK_EQ(pw.status, 0);
    char got[8];
    CHECK_EQ(read(sv[1], got, sizeof got), 4);
    CHECK_EQ(memcmp(got, "prep", 4), 0);
    CHECK_EQ(mux_stream_close(&pw.s, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_close(&loop);
    close(sv[1]);
}

/* fork: the child's loop notices the fork by itself (pthread_atfork), calls its fork
 * watcher once, and still works; the parent's loop is unaffected. The child reports what
 * it saw through its exit code, which the parent collects with a child watcher. */
enum {
    CHILD_FORK_CB = 1,      /* the fork watcher ran once in the child */
    CHILD_IO = 2,           /* the child's io on its own pipe fired */
    CHILD_NO_PARENT_IO = 4, /* the parent's watcher was not called in the child */
    CHILD_TIMER = 8,        /* a timer started in the child fired */
    CHILD_ALL = 15,
};

struct forked {
    int fork_calls, io_parent, io_child, timer_calls, child_status, child_calls;
    int pa[2], pb[2];
};

static void fk_fork(mux_loop_t *loop, mux_fork_t *w)
{
    struct forked *f = w->data;
    (void)loop;
    f->fork_calls++;
}

static void fk_io_parent(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct forked *f = w->data;
    (void)loop;
    CHECK_EQ(revents, MUX_READ);
    f->io_parent++;
    drain(f->pa[0]);
}

static void fk_io_child(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct forked *f = w->data;
    (void)loop;
    CHECK_EQ(revents, MUX_READ);
    f->io_child++;
    drain(f->pb[0]);
}

static void fk_timer(mux_loop_t *loop, mux_timer_t *t)
{
    struct forked *f = t->data;
    (void)loop;
    f->timer_calls++;
}

static void fk_child(mux_loop_t *loop, mux_child_t *w, int pid, int wstatus)
{
    struct forked *f = w->data;
    (void)loop;
    (void)pid;
    f->child_calls++;
    f->child_status = wstatus;
}

static _Noreturn void fork_child_side(mux_loop_t *loop, struct forked *f, mux_io_t *wa,
                                      mux_timer_t *t)
{
    alarm(10);
    /* The parent's pipe is the parent's business here. */
    CHECK_EQ(mux_io_stop(loop, wa), 0);
    write_byte(f->pb[1]);
    CHECK_EQ(mux_timer_start(loop, t, 1 * MS, 0), 0);
    for (int i = 0; i < 200 && (f->io_child == 0 || f->timer_calls == 0); i++)
        if (mux_run(loop, MUX_RUN_ONCE) < 0)
            break;
    int code = 0;
    code |= f->fork_calls == 1 ? CHILD_FORK_CB : 0;
    code |= f->io_child >= 1 ? CHILD_IO : 0;
    code |= f->io_parent == 0 ? CHILD_NO_PARENT_IO : 0;
    code |= f->timer_calls == 1 ? CHILD_TIMER : 0;
    child_exit(code);
}

TEST(fork_watcher_runs_in_child_and_both_loops_work) {
#ifdef _WIN32
    SKIP("Windows has no such thing: no fork");
#endif
    mux_loop_t loop;
    loop_open(&loop);
    struct forked f;
    memset(&f, 0, sizeof f);
    make_pipe(f.pa);
    make_pipe(f.pb);
    mux_fork_t fw;
    mux_io_t wa, wb;
    mux_timer_t t;
    mux_child_t cw;
    CHECK_EQ(mux_fork_init(&fw, fk_fork), 0);
    fw.data = &f;
    CHECK_EQ(mux_io_init(&wa, fk_io_parent, f.pa[0], MUX_READ), 0);
    wa.data = &f;
    CHECK_EQ(mux_io_init(&wb, fk_io_child, f.pb[0], MUX_READ), 0);
    wb.data = &f;
    CHECK_EQ(mux_timer_init(&t, fk_timer), 0);
    t.data = &f;
    CHECK_EQ(mux_fork_start(&loop, &fw), 0);
    CHECK_EQ(mux_io_start(&loop, &wa), 0);
    CHECK_EQ(mux_io_start(&loop, &wb), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 3); /* both pipes are in the kernel's set */
    CHECK_EQ(f.fork_calls, 0);

    int pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0)
        fork_child_side(&loop, &f, &wa, &t);

    /* Parent: the child's pipe is the child's business here. */
    CHECK_EQ(mux_io_stop(&loop, &wb), 0);
    CHECK_EQ(mux_child_init(&cw, fk_child, pid), 0);
    cw.data = &f;
    CHECK_EQ(mux_child_start(&loop, &cw), 0);
    CHECK_EQ(mux_timer_start(&loop, &t, 20 * MS, 0), 0);
    write_byte(f.pa[1]);
    for (int i = 0; i < 500 && (f.child_calls == 0 || f.io_parent == 0 || f.timer_calls == 0);
         i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(f.child_calls, 1);
    CHECK(WIFEXITED(f.child_status));
    CHECK_EQ(WEXITSTATUS(f.child_status), CHILD_ALL);
    CHECK_EQ(f.io_parent, 1);
    CHECK_EQ(f.io_child, 0);
    CHECK_EQ(f.timer_calls, 1);
    CHECK_EQ(f.fork_calls, 0); /* never in the parent */
    /* The parent's loop still works after the child's loop re-created its own state. */
    write_byte(f.pa[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_EQ(f.io_parent, 2);
    CHECK_EQ(mux_io_stop(&loop, &wa), 0);
    CHECK_EQ(mux_fork_stop(&loop, &fw), 0);
    loop_close(&loop);
    for (int i = 0; i < 2; i++) {
        close(f.pa[i]);
        close(f.pb[i]);
    }
}

/* mux_loop_fork called explicitly in the child (as after a raw clone) also works, and the
 * fork watcher still runs exactly once. */
TEST(fork_explicit_loop_fork_in_child) {
#ifdef _WIN32
    SKIP("Windows has no such thing: no fork");
#endif
    mux_loop_t loop;
    loop_open(&loop);
    struct forked f;
    memset(&f, 0, sizeof f);
    make_pipe(f.pb);
    mux_fork_t fw;
    mux_io_t wb;
    mux_child_t cw;
    CHECK_EQ(mux_fork_init(&fw, fk_fork), 0);
    fw.data = &f;
    CHECK_EQ(mux_io_init(&wb, fk_io_child, f.pb[0], MUX_READ), 0);
    wb.data = &f;
    CHECK_EQ(mux_fork_start(&loop, &fw), 0);
    CHECK_EQ(mux_io_start(&loop, &wb), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    int pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        alarm(10);
        int code = 0;
        if (mux_loop_fork(&loop) != 0)
            child_exit(100);
        write_byte(f.pb[1]);
        for (int i = 0; i < 100 && f.io_child == 0; i++)
            if (mux_run(&loop, MUX_RUN_ONCE) < 0)
                break;
        code |= f.fork_calls == 1 ? CHILD_FORK_CB : 0;
        code |= f.io_child >= 1 ? CHILD_IO : 0;
        child_exit(code);
    }
    CHECK_EQ(mux_io_stop(&loop, &wb), 0);
    CHECK_EQ(mux_child_init(&cw, fk_child, pid), 0);
    cw.data = &f;
    CHECK_EQ(mux_child_start(&loop, &cw), 0);
    for (int i = 0; i < 500 && f.child_calls == 0; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 1); /* the fork watcher stays active */
    CHECK_EQ(f.child_calls, 1);
    CHECK(WIFEXITED(f.child_status));
    CHECK_EQ(WEXITSTATUS(f.child_status), CHILD_FORK_CB | CHILD_IO);
    CHECK_EQ(f.fork_calls, 0);
    CHECK_EQ(mux_fork_stop(&loop, &fw), 0);
    loop_close(&loop);
    close(f.pb[0]);
    close(f.pb[1]);
}

/* ---- a child whose loop cannot be re-created ---- */

struct broken {
    int io_calls, sig_calls;
};

static void broken_io(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct broken *b = w->data;
    (void)loop;
    (void)revents;
    drain(mux_io_fd(w));
    b->io_calls++;
}

static void broken_sig(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    struct broken *b = w->data;
    (void)loop;
    (void)signum;
    b->sig_calls++;
}

enum {
    BROKEN_ERROR = 1,   /* two runs both returned -EMFILE, nothing crashed */
    BROKEN_NO_WRITE = 2, /* a signal meanwhile wrote nothing into a socket of the child's */
    BROKEN_IO = 4,      /* once descriptors were there again, the loop worked */
    BROKEN_SIG = 8,     /* and the signal from the broken time was delivered */
    BROKEN_REUSED = 16, /* the child's socket has the old wake-up descriptor's number (if any) */
};

/* Runs in the child: no descriptor can be created, so re-creating the loop's kernel state
 * fails (epoll's set, io_uring's ring, or the wake-up eventfd): every mux_run says so. The
 * wake-up descriptor the loop had is gone by then, and its number goes to a socket of the
 * child's: a signal the loop watches must not write into it. With descriptors back, the loop
 * re-creates its state on the next run and delivers what it missed. */
static _Noreturn void broken_child(mux_loop_t *loop, struct broken *b, int wfd)
{
    alarm(10);
    int code = 0, old_wake = mux__loop_of(loop)->wake_wfd;
    for (int fd = 0; fd < 3; fd++) /* 0-2 taken, so that no new fd fits under a limit of 3 */
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
            child_exit(100);
    struct rlimit old, tight;
    if (getrlimit(RLIMIT_NOFILE, &old) != 0)
        child_exit(101);
    tight = old;
    tight.rlim_cur = 3;
    if (setrlimit(RLIMIT_NOFILE, &tight) != 0)
        child_exit(102);
    int r1 = mux_run(loop, MUX_RUN_NOWAIT), r2 = mux_run(loop, MUX_RUN_NOWAIT);
    code |= r1 == -EMFILE && r2 == -EMFILE ? BROKEN_ERROR : 0;
    if (setrlimit(RLIMIT_NOFILE, &old) != 0)
        child_exit(103);
    /* Numbers below the old wake-up descriptor's that the child freed too (a kqueue is not
     * inherited) are taken first, so that the socket gets that number. */
    int fill[16], nfill = 0;
    while (nfill < 16 && (fill[nfill] = open("/dev/null", O_RDONLY)) >= 0 && fill[nfill] < old_wake)
        nfill++;
    if (nfill < 16 && fill[nfill] >= 0)
        close(fill[nfill]);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
        child_exit(104);
    code |= old_wake >= 0 && (sv[0] == old_wake || sv[1] == old_wake) ? BROKEN_REUSED : 0;
    raise(SIGUSR1);
    char c;
    if (recv(sv[0], &c, 1, 0) < 0 && errno == EAGAIN && recv(sv[1], &c, 1, 0) < 0 &&
        errno == EAGAIN)
        code |= BROKEN_NO_WRITE;
    write_byte(wfd);
    for (int i = 0; i < 100 && (b->io_calls == 0 || b->sig_calls == 0); i++)
        if (mux_run(loop, MUX_RUN_ONCE) < 0)
            break;
    code |= b->io_calls >= 1 ? BROKEN_IO : 0;
    code |= b->sig_calls >= 1 ? BROKEN_SIG : 0;
    child_exit(code);
}

TEST(fork_child_that_cannot_recreate_the_loop_gets_the_error_and_retries) {
    mux_loop_t loop;
    loop_open(&loop);
    if (loop_is(&loop, "rtsig")) {
        loop_close(&loop);
        SKIP("rtsig wakes its loop with a signal and makes no descriptor in a child: a "
             "descriptor limit cannot make its re-creation fail");
    }
    struct broken b = {0};
    int p[2];
    make_pipe(p);
    mux_io_t w;
    mux_signal_t sw;
    CHECK_EQ(mux_io_init(&w, broken_io, p[0], MUX_READ), 0);
    w.data = &b;
    CHECK_EQ(mux_signal_init(&sw, broken_sig, SIGUSR1), 0);
    sw.data = &b;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_signal_start(&loop, &sw), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0)
        broken_child(&loop, &b, p[1]);
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    /* A loop woken through its kernel queue (kqueue's EVFILT_USER) has no wake-up
     * descriptor whose number could be reused. */
    int reused = mux__loop_of(&loop)->wake_wfd >= 0 ? BROKEN_REUSED : 0;
    CHECK_EQ(WEXITSTATUS(status), BROKEN_ERROR | BROKEN_NO_WRITE | BROKEN_IO | BROKEN_SIG | reused);
    /* The parent's loop was never touched by the child's attempts. */
    write_byte(p[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 2);
    CHECK_EQ(b.io_calls, 1);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_signal_stop(&loop, &sw), 0);
    loop_close(&loop);
    close(p[0]);
    close(p[1]);
}

/* An idle watcher that changes an io watcher at every call (which on io_uring makes CQEs that
 * report no event: a removed poll's, an update's) is still called at every iteration: those
 * CQEs are no event. */
struct idle_toggle {
    mux_io_t *io;
    int calls;
};

static void idle_toggle_cb(mux_loop_t *loop, mux_idle_t *w)
{
    struct idle_toggle *t = w->data;
    t->calls++;
    if (t->calls % 2)
        CHECK_EQ(mux_io_stop(loop, t->io), 0);
    else
        CHECK_EQ(mux_io_start(loop, t->io), 0);
}

TEST(idle_called_every_iteration_while_it_changes_an_io_watcher) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_io_t w; /* never ready */
    CHECK_EQ(mux_io_init(&w, io_never, sv[0], MUX_READ), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    struct idle_toggle t = {.io = &w};
    mux_idle_t i;
    CHECK_EQ(mux_idle_init(&i, idle_toggle_cb), 0);
    i.data = &t;
    CHECK_EQ(mux_idle_start(&loop, &i), 0);
    for (int k = 1; k <= 50; k++) {
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        CHECK_EQ(t.calls, k);
    }
    CHECK_EQ(mux_idle_stop(&loop, &i), 0);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}
