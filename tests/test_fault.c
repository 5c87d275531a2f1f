/* SPDX-License-Identifier: MIT */
/* Failure paths, each driven by an injected failure (tests/fault/README.md): one case per
 * defect the fault sweep found, asserting the exact behaviour after the fix. These cases run
 * in iomux-fault-tests, linked with the fault variant of the library. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "fault/fault.h"
#include "harness.h"
#include "iomux/http.h"

static int point(const char *name)
{
    int p = fault_lookup(name);
    CHECK_GE(p, 0);
    return p;
}

/* The portable-POSIX build (every Linux-only path off), whose calls differ. */
static int portable_build(void)
{
#ifdef IOMUX_TEST_PORTABLE
    return 1;
#else
    return 0;
#endif
}

/* The calls that make a wake-up descriptor: an eventfd, or a pipe (pipe2, or pipe in the
 * portable build). */
static int wake_fd_calls(void)
{
    return (int)(fault_calls(point("eventfd")) + fault_calls(point("pipe2")) +
                 fault_calls(point("pipe")));
}

static void fault_start(void)
{
    CHECK_EQ(fault_init(), 0);
    fault_reset();
}

static void count_signal(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    (void)loop;
    CHECK_EQ(signum, SIGUSR1);
    ++*(int *)w->data;
}

/* A loop with a started watcher for SIGUSR1 that counts into *n. */
static void signal_loop_open(mux_loop_t *loop, mux_signal_t *w, int *n)
{
    loop_open(loop);
    CHECK_EQ(mux_signal_init(w, count_signal, SIGUSR1), 0);
    w->data = n;
    CHECK_EQ(mux_signal_start(loop, w), 0);
}

/* The sweep found signals, asyncs and children lost for good when the backend refused to
 * watch the loop's own wake-up descriptor (epoll_ctl: ENOMEM): the loop stopped watching it
 * and said nothing. Now that mux_run returns the error, and the next one watches it again. */
TEST(wake_fd_the_backend_refused_is_reported_then_watched_again) {
    const char *be = getenv("IOMUX_BACKEND");
    /* kqueue: its change list, which grows at the first change (libkqueue's wake-up is the
     * descriptor, the fault build's only kqueue). */
    const char *call = be && strcmp(be, "epoll") == 0 ? "epoll_ctl"
                       : be && (strcmp(be, "poll") == 0 || strcmp(be, "kqueue") == 0) ? "realloc"
                                                                                     : NULL;
    if (!call)
        SKIP("only epoll (epoll_ctl), poll (its array) and kqueue (its change list) can refuse "
             "to watch a descriptor; select and io_uring take it without a call that fails, "
             "and rtsig polls its signalfd without registering it");
    fault_start();
    mux_loop_t loop;
    mux_signal_t w;
    int n = 0;
    signal_loop_open(&loop, &w, &n);
    /* The wake-up descriptor is handed to the backend at the first iteration. */
    fault_arm(point(call), fault_calls(point(call)) + 1, ENOMEM, FAULT_ONCE);
    CHECK_EQ(raise(SIGUSR1), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), -ENOMEM);
    CHECK_EQ(fault_fired(), 1);
    CHECK_EQ(n, 0);
    /* A blocking run: the signal is seen only through the descriptor watched again. */
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(n, 1);
    CHECK_EQ(raise(SIGUSR1), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(n, 2);
    CHECK_EQ(mux_signal_stop(&loop, &w), 0);
    loop_close(&loop);
}

/* And when it keeps refusing, every mux_run says so, and closing the loop still works. */
TEST(wake_fd_the_backend_keeps_refusing_fails_every_run_and_the_loop_closes) {
    const char *be = getenv("IOMUX_BACKEND");
    if (!be || strcmp(be, "epoll") != 0)
        SKIP("epoll only: its epoll_ctl is the call that refuses");
    fault_start();
    mux_loop_t loop;
    mux_signal_t w;
    int n = 0;
    signal_loop_open(&loop, &w, &n);
    fault_arm(point("epoll_ctl"), fault_calls(point("epoll_ctl")) + 1, ENOSPC, FAULT_STICKY);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), -ENOSPC);
    CHECK_EQ(fault_fired(), 3);
    fault_disarm();
    CHECK_EQ(mux_signal_stop(&loop, &w), 0);
    loop_close(&loop);
}

static void count_child(mux_loop_t *loop, mux_child_t *w, int pid, int wstatus)
{
    (void)loop;
    int *seen = w->data;
    seen[0]++;
    seen[1] = pid;
    seen[2] = wstatus;
}

/* The sweep found a child's exit lost when waitpid was interrupted (EINTR): the loop did
 * not ask again, and no second SIGCHLD comes. */
TEST(child_reap_interrupted_by_a_signal_asks_again) {
    fault_start();
    mux_loop_t loop;
    loop_open(&loop);
    int pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0)
        child_exit(7);
    int seen[3] = {0};
    mux_child_t w;
    CHECK_EQ(mux_child_init(&w, count_child, pid), 0);
    w.data = seen;
    fault_arm(point("waitpid"), 1, EINTR, FAULT_ONCE);
    CHECK_EQ(mux_child_start(&loop, &w), 0);
    while (seen[0] == 0)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(fault_fired(), 1);
    CHECK_EQ(seen[0], 1);
    CHECK_EQ(seen[1], pid);
    CHECK(WIFEXITED(seen[2]) && WEXITSTATUS(seen[2]) == 7);
    CHECK_EQ(mux_child_stop(&loop, &w), 0);
    loop_close(&loop);
}

static void count_async(mux_loop_t *loop, mux_async_t *w)
{
    (void)loop;
    ++*(int *)w->data;
}

/* The sweep found an async wake-up lost when the write to the wake-up descriptor was
 * interrupted (EINTR): the send was dropped and the loop slept on. */
TEST(async_send_interrupted_by_a_signal_writes_again) {
    fault_start();
    mux_loop_t loop;
    loop_open(&loop);
    int n = 0;
    mux_async_t a;
    CHECK_EQ(mux_async_init(&a, count_async), 0);
    a.data = &n;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    unsigned long writes = fault_calls(point("write"));
    fault_arm(point("write"), writes + 1, EINTR, FAULT_ONCE);
    CHECK_EQ(mux_async_send(&a), 0);
    if (fault_calls(point("write")) == writes)
        SKIP("this backend wakes the loop without writing a descriptor");
    CHECK_EQ(fault_fired(), 1);
    CHECK_EQ(fault_calls(point("write")), writes + 2);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
    CHECK_EQ(n, 1);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    loop_close(&loop);
}

/* The sweep found the fork handler's registration unchecked: when pthread_atfork refused
 * (ENOMEM), loops never noticed a fork and shared their kernel state with the child. Now
 * that loop's init fails, and the next init registers it. */
TEST(loop_init_fails_while_the_fork_handler_cannot_be_registered) {
    fault_start();
    fault_arm(point("pthread_atfork"), 1, ENOMEM, FAULT_ONCE);
    mux_loop_t loop;
    CHECK_EQ(mux_loop_init(&loop, NULL), -ENOMEM);
    CHECK_EQ(fault_fired(), 1);
    loop_open(&loop);
    CHECK_EQ(fault_calls(point("pthread_atfork")), 2);
    loop_close(&loop);
    loop_open(&loop);
    CHECK_EQ(fault_calls(point("pthread_atfork")), 2); /* registered once */
    /* And a fork is noticed: the child's loop runs on kernel state of its own. */
    int n = 0;
    mux_async_t a;
    CHECK_EQ(mux_async_init(&a, count_async), 0);
    a.data = &n;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    int before = wake_fd_calls();
    unsigned long signalled = fault_calls(point("tgkill"));
    int pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        int ok = mux_async_send(&a) == 0;
        /* rtsig has no wake-up descriptor: a send to a loop whose fork is not yet renewed
         * only raises its flag; a signal now would go to the parent's thread. */
        ok = ok && (!loop_is(&loop, "rtsig") || fault_calls(point("tgkill")) == signalled);
        ok = ok && mux_run(&loop, MUX_RUN_ONCE) == 1 && n == 1;
        /* The child's run re-created the wake-up descriptor (rtsig: none to re-create). */
        ok = ok && (loop_is(&loop, "rtsig") ||
                    wake_fd_calls() > before);
        child_exit(ok ? 0 : 1);
    }
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    loop_close(&loop);
}

static void errno_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    (void)buf;
    int *got = s->data;
    got[0]++;
    got[1] = (int)nread;
}

/* The sweep found a stream told -EBADF when epoll refused to watch its socket with ENOMEM:
 * the core's MUX_ERROR carried no errno. The library's own watchers now get it. rtsig can
 * refuse too: the fcntl calls that give the socket its signal. */
TEST(stream_told_the_errno_when_the_backend_cannot_watch_its_socket) {
    const char *be = getenv("IOMUX_BACKEND");
    const char *call = be && strcmp(be, "epoll") == 0   ? "epoll_ctl"
                       : be && strcmp(be, "rtsig") == 0 ? "fcntl"
                                                        : NULL;
    if (!call)
        SKIP("epoll and rtsig only: epoll_ctl, or rtsig's fcntl, is the call that refuses; "
             "the other backends cannot refuse a descriptor they were given");
    fault_start();
    mux_loop_t loop;
    loop_open(&loop);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0); /* the loop's own registrations */
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    mux_stream_t s;
    int got[2] = {0, 0};
    s.data = got;
    CHECK_EQ(mux_stream_open(&loop, &s, sv[0]), 0);
    char buf[16];
    CHECK_EQ(mux_read_start(&s, buf, sizeof buf, errno_read_cb), 0);
    fault_arm(point(call), fault_calls(point(call)) + 1, ENOSPC, FAULT_ONCE);
    for (int i = 0; i < 10 && got[0] == 0; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(fault_fired(), 1);
    CHECK_EQ(got[0], 1);
    CHECK_EQ(got[1], -ENOSPC);
    int closed = 0;
    s.data = &closed;
    CHECK_EQ(mux_stream_close(&s, NULL), 0);
    CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    loop_close(&loop);
    close(sv[1]);
}

static int http_errors[4], http_nerrors;

static void http_on_error(mux_http_server_t *srv, int err)
{
    (void)srv;
    if (http_nerrors < 4)
        http_errors[http_nerrors] = err;
    http_nerrors++;
}

static void http_hello(mux_http_exchange_t *x)
{
    CHECK_EQ(mux_http_respond(x, 200, NULL, 0, "hi", 2), 0);
}

/* A connection the HTTP server cannot accept (EMFILE) is reported through on_error, and the
 * client waiting in the backlog is served once the listener tries again. */
TEST(http_server_reports_a_refused_accept_and_serves_the_client_after) {
    if (!getenv("IOMUX_URING_STREAMS") && getenv("IOMUX_BACKEND") &&
        strncmp(getenv("IOMUX_BACKEND"), "uring", 5) == 0)
        SKIP("io_uring accepts in the kernel (a multishot accept), not with accept4");
    fault_start();
    mux_loop_t loop;
    loop_open(&loop);
    mux_http_server_t srv;
    mux_http_server_options_t o = {.on_error = http_on_error};
    CHECK_EQ(mux_http_server_init(&srv, &loop, &o, http_hello), 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sin;
    CHECK_EQ(mux_http_server_listen(&srv, (struct sockaddr *)&sin, sizeof sin, NULL), 0);
    CHECK_EQ(mux_http_server_address(&srv, (struct sockaddr *)&sin, &len), 0);
    /* The portable build accepts with accept and fcntl (no accept4). */
    const char *acc = portable_build() ? "accept" : "accept4";
    fault_arm(point(acc), fault_calls(point(acc)) + 1, EMFILE, FAULT_ONCE);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    CHECK_EQ(connect(fd, (struct sockaddr *)&sin, len), 0);
    static const char req[] = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    CHECK_EQ(send(fd, req, sizeof req - 1, 0), (ssize_t)(sizeof req - 1));
    char buf[512];
    size_t got = 0;
    uint64_t end = mono_ns() + 5000 * MS;
    while (!memmem(buf, got, "\r\n\r\nhi", 6)) {
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        ssize_t n = recv(fd, buf + got, sizeof buf - got, MSG_DONTWAIT);
        if (n > 0)
            got += (size_t)n;
        CHECK_LT(mono_ns(), end);
        usleep(500);
    }
    CHECK_EQ(fault_fired(), 1);
    CHECK_EQ(http_nerrors, 1);
    CHECK_EQ(http_errors[0], -EMFILE);
    CHECK(strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0);
    close(fd);
    CHECK_EQ(mux_http_server_close(&srv, NULL), 0);
    for (int i = 0; i < 100; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    loop_close(&loop);
}
