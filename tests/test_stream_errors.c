/* SPDX-License-Identifier: MIT */
/* Bad input to every public function of the stream layer: NULL pointers, negative or
 * closed fds, unknown flags, streams that are closing, closed, shut down or not connected.
 * Each call returns its documented error, calls no callback, and leaves nothing active. */
#include <fcntl.h>

#include "stream_util.h"

static int cb_calls;

static void any_close_cb(mux_stream_t *s)
{
    (void)s;
    cb_calls++;
}

static void any_write_cb(mux_write_t *req, int status)
{
    (void)req;
    (void)status;
    cb_calls++;
}

static void any_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    (void)s;
    (void)nread;
    (void)buf;
    cb_calls++;
}

static void any_connect_cb(mux_stream_t *s, int status)
{
    (void)s;
    (void)status;
    cb_calls++;
}

static void any_shutdown_cb(mux_stream_t *s, int status)
{
    (void)s;
    (void)status;
    cb_calls++;
}

static void any_accept_cb(mux_listener_t *l, mux_os_sock_t fd, int status)
{
    (void)l;
    (void)status;
    if (fd >= 0)
        close(fd);
    cb_calls++;
}

TEST(stream_bad_input_open_and_connect) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_stream_t s;
    memset(&s, 0, sizeof s);
    int sv[2];
    make_socketpair(sv);
    CHECK_EQ(mux_stream_open(NULL, &s, sv[0]), -EINVAL);
    CHECK_EQ(mux_stream_open(&loop, NULL, sv[0]), -EINVAL);
    CHECK_EQ(mux_stream_open(&loop, &s, -1), -EINVAL);
#ifdef _WIN32 /* a file is not a socket; a socket's handle, once closed, is no socket either */
    char path[] = "/tmp/iomux-notsock-XXXXXX";
    int notsock = mkstemp(path);
    CHECK_GE(notsock, 0);
    CHECK_EQ(mux_stream_open(&loop, &s, (mux_os_sock_t)_get_osfhandle(notsock)), -EINVAL);
    close(notsock);
    unlink(path);
    int closed_fd = socket(AF_INET, SOCK_STREAM, 0);
#else
    int p[2];
    make_pipe(p);
    CHECK_EQ(mux_stream_open(&loop, &s, p[0]), -EINVAL); /* not a socket */
    close(p[0]);
    close(p[1]);
    int closed_fd = dup(sv[1]);
#endif
    CHECK_GE(closed_fd, 0);
    close(closed_fd);
    CHECK_EQ(mux_stream_open(&loop, &s, closed_fd), -EBADF);

    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, closed_port(AF_INET));
    const struct sockaddr *sa = (struct sockaddr *)&a;
    CHECK_EQ(mux_stream_connect(NULL, &s, sa, alen, any_connect_cb), -EINVAL);
    CHECK_EQ(mux_stream_connect(&loop, NULL, sa, alen, any_connect_cb), -EINVAL);
    CHECK_EQ(mux_stream_connect(&loop, &s, NULL, alen, any_connect_cb), -EINVAL);
    CHECK_EQ(mux_stream_connect(&loop, &s, sa, alen, NULL), -EINVAL);
    CHECK_EQ(mux_stream_connect(&loop, &s, sa, 0, any_connect_cb), -EINVAL);
    struct sockaddr other = {.sa_family = AF_APPLETALK};
    CHECK_EQ(mux_stream_connect(&loop, &s, &other, sizeof other, any_connect_cb), -EAFNOSUPPORT);

    /* None of that opened a stream or will call anything. */
    CHECK(mux_stream_loop(&s) == NULL);
    CHECK_EQ(mux_loop_active(&loop), 0);
    run_ms(&loop, 10);
    CHECK_EQ(cb_calls, 0);

    /* A closed loop takes nothing. */
    loop_finish(&loop);
    CHECK_EQ(mux_stream_open(&loop, &s, sv[0]), -EINVAL);
    CHECK_EQ(mux_stream_connect(&loop, &s, sa, alen, any_connect_cb), -EINVAL);
    CHECK_EQ(cb_calls, 0);
    close(sv[0]);
    close(sv[1]);
}

CORE_TEST(stream_bad_input_on_a_stream_never_opened) {
    mux_stream_t s;
    memset(&s, 0, sizeof s);
    mux_write_t w;
    mux_buf_t iov = {.base = (char *)"x", .len = 1};
    char buf[8];
    mux_bufpool_t pool;
    uint32_t slots[1];
    CHECK_EQ(mux_bufpool_init(&pool, buf, sizeof buf, 1, slots), 0);
    mux_stream_timeouts_t to = {.idle_ns = MS};
    for (int pass = 0; pass < 2; pass++) {
        mux_stream_t *p = pass == 0 ? &s : NULL;
        CHECK_EQ(mux_read_start(p, buf, sizeof buf, any_read_cb), -EINVAL);
        CHECK_EQ(mux_read_start_pool(p, &pool, any_read_cb), -EINVAL);
        CHECK_EQ(mux_read_stop(p), -EINVAL);
        CHECK_EQ(mux_write(p, &w, &iov, 1, any_write_cb), -EINVAL);
        CHECK_EQ(mux_try_write(p, &iov, 1), -EINVAL);
        CHECK_EQ(mux_stream_write_queue_size(p), -EINVAL);
        CHECK_EQ(mux_stream_shutdown(p, any_shutdown_cb), -EINVAL);
        CHECK_EQ(mux_stream_close(p, any_close_cb), -EINVAL);
        CHECK_EQ(mux_stream_nodelay(p, 1), -EINVAL);
        CHECK_EQ(mux_stream_keepalive(p, 1, 10), -EINVAL);
        CHECK_EQ(mux_stream_set_timeouts(p, &to), -EINVAL);
        CHECK_EQ(stream_fd(p), -EINVAL);
        CHECK(mux_stream_loop(p) == NULL);
    }
    CHECK_EQ(cb_calls, 0);
}

TEST(stream_bad_input_read_write_shutdown_close) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_stream_t s;
    CHECK_EQ(mux_stream_open(&loop, &s, sv[0]), 0);
    char buf[16];
    mux_bufpool_t pool, zero_pool;
    memset(&zero_pool, 0, sizeof zero_pool);
    char pmem[16];
    uint32_t slots[2];
    CHECK_EQ(mux_bufpool_init(&pool, pmem, 8, 2, slots), 0);

    CHECK_EQ(mux_read_start(&s, NULL, sizeof buf, any_read_cb), -EINVAL);
    CHECK_EQ(mux_read_start(&s, buf, 0, any_read_cb), -EINVAL);
    CHECK_EQ(mux_read_start(&s, buf, sizeof buf, NULL), -EINVAL);
    CHECK_EQ(mux_read_start_pool(&s, NULL, any_read_cb), -EINVAL);
    CHECK_EQ(mux_read_start_pool(&s, &zero_pool, any_read_cb), -EINVAL); /* never initialised */
    CHECK_EQ(mux_read_start_pool(&s, &pool, NULL), -EINVAL);
    CHECK_EQ(mux_read_start(&s, buf, sizeof buf, any_read_cb), 0);
    CHECK_EQ(mux_read_start(&s, buf, sizeof buf, any_read_cb), -EBUSY);
    CHECK_EQ(mux_read_start_pool(&s, &pool, any_read_cb), -EBUSY);
    CHECK_EQ(mux_read_stop(&s), 0);
    CHECK_EQ(mux_read_stop(&s), 0);

    mux_write_t w;
    mux_buf_t iov = {.base = (char *)"x", .len = 1};
    CHECK_EQ(mux_write(&s, NULL, &iov, 1, any_write_cb), -EINVAL);
    CHECK_EQ(mux_write(&s, &w, &iov, 1, NULL), -EINVAL);
    CHECK_EQ(mux_write(&s, &w, &iov, -1, any_write_cb), -EINVAL);
#ifndef _WIN32 /* a WSABUF's length is 32 bits there: no two of them add up past SIZE_MAX */
    /* 1 + SIZE_MAX wraps to 0 */
    mux_buf_t wrap[2] = {{.base = (char *)"x", .len = 1}, {.base = (char *)"y", .len = SIZE_MAX}};
    CHECK_EQ(mux_write(&s, &w, wrap, 2, any_write_cb), -EINVAL);
    CHECK_EQ(mux_try_write(&s, wrap, 2), -EINVAL);
#endif
    CHECK_EQ(mux_write(&s, &w, NULL, 1, any_write_cb), -EINVAL);
    CHECK_EQ(mux_try_write(NULL, &iov, 1), -EINVAL);
    CHECK_EQ(mux_try_write(&s, NULL, 1), -EINVAL);
    CHECK_EQ(mux_try_write(&s, NULL, 0), 0); /* nothing asked, nothing sent */
    CHECK_EQ(mux_stream_write_queue_size(&s), 0);

#ifdef _WIN32 /* the pair is TCP there (Wine has no AF_UNIX) */
    CHECK_EQ(mux_stream_keepalive(&s, 1, 10), 0);
#else
    CHECK_EQ(mux_stream_keepalive(&s, 1, 10), -ENOTSUP); /* Unix: before any other check */
#endif
    CHECK_EQ(mux_stream_set_timeouts(&s, NULL), 0);      /* NULL: none, not an error */
    CHECK_EQ(stream_fd(&s), sv[0]);
    CHECK_EQ(mux_stream_socket(&s, NULL), -EINVAL);

    CHECK_EQ(mux_stream_shutdown(&s, NULL), -EINVAL);
    CHECK_EQ(mux_stream_shutdown(&s, any_shutdown_cb), 0);
    CHECK_EQ(mux_stream_shutdown(&s, any_shutdown_cb), -EBUSY);
    CHECK_EQ(mux_write(&s, &w, &iov, 1, any_write_cb), -EPIPE);
    CHECK_EQ(mux_try_write(&s, &iov, 1), -EPIPE);
    run_ms(&loop, 10);
    CHECK_EQ(cb_calls, 1); /* the shutdown callback, nothing else */

    CHECK_EQ(mux_stream_close(&s, any_close_cb), 0);
    CHECK_EQ(mux_stream_close(&s, any_close_cb), -EALREADY);
    /* Closing: nothing more is accepted. */
    CHECK_EQ(mux_write(&s, &w, &iov, 1, any_write_cb), -EINVAL);
    CHECK_EQ(mux_try_write(&s, &iov, 1), -EINVAL);
    CHECK_EQ(mux_read_start(&s, buf, sizeof buf, any_read_cb), -EINVAL);
    CHECK_EQ(mux_read_start_pool(&s, &pool, any_read_cb), -EINVAL);
    CHECK_EQ(mux_read_stop(&s), -EINVAL);
    CHECK_EQ(mux_stream_shutdown(&s, any_shutdown_cb), -EINVAL);
    CHECK_EQ(mux_stream_nodelay(&s, 1), -EINVAL);
    CHECK_EQ(mux_stream_set_timeouts(&s, NULL), -EINVAL);
    CHECK_EQ(stream_fd(&s), -EINVAL);
    CHECK_EQ(cb_calls, 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(cb_calls, 2); /* the close callback, once */
    /* Closed: the same, and closing again is no longer "already closing". */
    CHECK_EQ(mux_stream_close(&s, any_close_cb), -EINVAL);
    CHECK_EQ(mux_write(&s, &w, &iov, 1, any_write_cb), -EINVAL);
    CHECK_EQ(mux_try_write(&s, &iov, 1), -EINVAL);
    CHECK_EQ(mux_stream_write_queue_size(&s), -EINVAL);
    CHECK(mux_stream_loop(&s) == NULL);
    run_ms(&loop, 10);
    CHECK_EQ(cb_calls, 2);
    loop_finish(&loop);
    close(sv[1]);
}

/* A connect that failed leaves an open stream that is not connected. */
static void notconn_connect_cb(mux_stream_t *s, int status)
{
    char buf[8];
    mux_write_t w;
    mux_buf_t iov = {.base = (char *)"x", .len = 1};
    CHECK_EQ(status, -ENOENT);
    CHECK_EQ(mux_read_start(s, buf, sizeof buf, any_read_cb), -ENOTCONN);
    CHECK_EQ(mux_write(s, &w, &iov, 1, any_write_cb), -ENOTCONN);
    CHECK_EQ(mux_try_write(s, &iov, 1), -ENOTCONN);
    CHECK_EQ(mux_stream_shutdown(s, any_shutdown_cb), -ENOTCONN);
    CHECK_EQ(mux_stream_close(s, any_close_cb), 0);
}

TEST(stream_bad_input_not_connected_is_enotconn) {
    mux_loop_t loop;
    loop_open(&loop);
    char dir[64], path[128];
    tmpdir_make_unix(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/none", dir);
    struct sockaddr_storage a;
    socklen_t alen = addr_unix(&a, path);
    mux_stream_t s;
    CHECK_EQ(mux_stream_connect(&loop, &s, (struct sockaddr *)&a, alen, notconn_connect_cb), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(cb_calls, 1); /* the close callback only */
    loop_finish(&loop);
    tmpdir_remove(dir, "none");
}

/* The stream's socket closed behind its back (a program bug): a write fails with -EBADF,
 * whether it is tried at once or handed to the kernel, and the stream still closes clean. */
static int ebadf_status = 1;

static void ebadf_write_cb(mux_write_t *req, int status)
{
    (void)req;
    ebadf_status = status;
}

TEST(stream_write_after_its_socket_was_closed_behind_its_back_fails_with_ebadf) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    mux_stream_t s;
    CHECK_EQ(mux_stream_open(&loop, &s, sv[0]), 0);
    CHECK_EQ(close(sv[0]), 0); /* nothing reuses the number before the stream closes */
    mux_write_t w;
    mux_buf_t b = {.base = (char *)"x", .len = 1};
    CHECK_EQ(mux_write(&s, &w, &b, 1, ebadf_write_cb), 0);
    CHECK_EQ(ebadf_status, 1); /* never inside the call */
    for (int i = 0; i < 100 && ebadf_status == 1; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(ebadf_status, -EBADF);
    CHECK_EQ(mux_stream_close(&s, any_close_cb), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(cb_calls, 1); /* the close callback */
    loop_finish(&loop);
    close(sv[1]);
}

TEST(stream_bad_input_listen_and_listener) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_listener_t l;
    memset(&l, 0, sizeof l);
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    const struct sockaddr *sa = (struct sockaddr *)&a;
    mux_listen_options_t bad_flags = {.flags = 0x10}; /* the first bit no flag has */
    mux_listen_options_t high_flag = {.flags = 0x80000000u};
    mux_listen_options_t bad_backlog = {.backlog = -1};
    CHECK_EQ(mux_listen(NULL, &l, sa, alen, NULL, any_accept_cb), -EINVAL);
    CHECK_EQ(mux_listen(&loop, NULL, sa, alen, NULL, any_accept_cb), -EINVAL);
    CHECK_EQ(mux_listen(&loop, &l, NULL, alen, NULL, any_accept_cb), -EINVAL);
    CHECK_EQ(mux_listen(&loop, &l, sa, alen, NULL, NULL), -EINVAL);
    CHECK_EQ(mux_listen(&loop, &l, sa, 0, NULL, any_accept_cb), -EINVAL);
    CHECK_EQ(mux_listen(&loop, &l, sa, alen, &bad_flags, any_accept_cb), -EINVAL);
    CHECK_EQ(mux_listen(&loop, &l, sa, alen, &high_flag, any_accept_cb), -EINVAL);
    CHECK_EQ(mux_listen(&loop, &l, sa, alen, &bad_backlog, any_accept_cb), -EINVAL);
    struct sockaddr other = {.sa_family = AF_APPLETALK};
    CHECK_EQ(mux_listen(&loop, &l, &other, sizeof other, NULL, any_accept_cb), -EAFNOSUPPORT);
    CHECK_EQ(mux_loop_active(&loop), 0);

    /* A listener that was never opened. */
    socklen_t len = sizeof a;
    CHECK_EQ(mux_listener_address(&l, (struct sockaddr *)&a, &len), -EINVAL);
    CHECK_EQ(mux_listener_close(&l, NULL), -EINVAL);
    CHECK(mux_listener_loop(&l) == NULL);
    CHECK_EQ(mux_listener_address(NULL, (struct sockaddr *)&a, &len), -EINVAL);
    CHECK_EQ(mux_listener_close(NULL, NULL), -EINVAL);
    CHECK(mux_listener_loop(NULL) == NULL);

    /* An open one: NULL outputs. */
    CHECK_EQ(mux_listen(&loop, &l, sa, alen, NULL, any_accept_cb), 0);
    CHECK_EQ(mux_listener_address(&l, NULL, &len), -EINVAL);
    CHECK_EQ(mux_listener_address(&l, (struct sockaddr *)&a, NULL), -EINVAL);
    CHECK_EQ(mux_listener_close(&l, NULL), 0);
    CHECK_EQ(mux_listener_close(&l, NULL), -EALREADY);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(mux_listener_close(&l, NULL), -EINVAL);
    CHECK_EQ(cb_calls, 0);

    loop_finish(&loop);
    alen = addr_v4(&a, 0);
    CHECK_EQ(mux_listen(&loop, &l, sa, alen, NULL, any_accept_cb), -EINVAL); /* closed loop */
}

CORE_TEST(stream_bad_input_bufpool) {
    mux_bufpool_t pool;
    char mem[16];
    uint32_t slots[4];
    CHECK_EQ(mux_bufpool_init(NULL, mem, 4, 4, slots), -EINVAL);
    CHECK_EQ(mux_bufpool_init(&pool, NULL, 4, 4, slots), -EINVAL);
    CHECK_EQ(mux_bufpool_init(&pool, mem, 0, 4, slots), -EINVAL);
    CHECK_EQ(mux_bufpool_init(&pool, mem, 4, 0, slots), -EINVAL);
    CHECK_EQ(mux_bufpool_init(&pool, mem, 4, 4, NULL), -EINVAL);
    mux_bufpool_t zero;
    memset(&zero, 0, sizeof zero);
    CHECK_EQ(mux_bufpool_available(&zero), -EINVAL);
    CHECK_EQ(mux_bufpool_available(NULL), -EINVAL);
    CHECK_EQ(mux_bufpool_put(&zero, mem), -EINVAL);
    CHECK_EQ(mux_bufpool_put(NULL, mem), -EINVAL);
    pool.data = &pool;
    CHECK_EQ(mux_bufpool_init(&pool, mem, 4, 4, slots), 0);
    CHECK(pool.data == &pool); /* kept */
    CHECK_EQ(mux_bufpool_available(&pool), 4);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(mux_bufpool_put(&pool, mem + 4 * i), -EINVAL); /* all free already */
    CHECK_EQ(mux_bufpool_available(&pool), 4);
}

/* select cannot watch an fd at or above FD_SETSIZE: a stream is refused up front rather
 * than accepted and left without events. */
TEST(stream_open_refuses_fd_select_cannot_watch) {
#ifdef _WIN32
    SKIP("Windows has no such thing: its select limits how many sockets it watches, not "
         "their values");
#endif
    const char *b = getenv("IOMUX_BACKEND");
    if (!b || strcmp(b, "select") != 0)
        SKIP("only select has an fd limit");
    raise_nofile_limit();
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int high = fcntl(sv[0], F_DUPFD, FD_SETSIZE + 10);
    if (high < 0)
        SKIP("cannot get an fd above FD_SETSIZE under this RLIMIT_NOFILE");
    mux_loop_t loop;
    loop_open(&loop);
    mux_stream_t s;
    CHECK_EQ(mux_stream_open(&loop, &s, high), -EINVAL);
    CHECK_EQ(mux_loop_active(&loop), 0);
    close(high);
    close(sv[0]);
    close(sv[1]);
    loop_close(&loop);
}
