/* SPDX-License-Identifier: MIT */
/* Writing a file's bytes to a stream (mux_write_file): after the write's own buffers, in
 * queue order with the plain writes around it, from any offset, more bytes than the socket
 * holds; a file that ends early (-ENODATA), descriptors that are not readable files, and the
 * arguments refused at the call. The sendfile path (Linux) and the pread path (the portable
 * build) both run these. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>

#include "stream_util.h"

#define FILE_LEN  (3u << 20)
#define FILE_OFF  12345u
#define FILE_SEND (2u << 20)

/* A temporary file holding bytes 0 .. len - 1 of the pattern; unlinked, open for reading. */
static int pattern_file(size_t len)
{
    char path[] = "/tmp/iomux-file-XXXXXX";
    int fd = mkstemp(path);
    CHECK_GE(fd, 0);
    CHECK_EQ(unlink(path), 0);
    char *buf = malloc(len ? len : 1);
    CHECK(buf != NULL);
    pattern_fill(buf, 0, len);
    for (size_t off = 0; off < len;) {
        ssize_t n = pwrite(fd, buf + off, len - off, (off_t)off);
        CHECK_GT(n, 0);
        off += (size_t)n;
    }
    free(buf);
    return fd;
}

struct fw {
    mux_stream_t w;
    mux_write_t req[3];
    mux_buf_t before, head[2], after;
    int status[3], order[3], calls;
    volatile int done, closed;
};

static void fw_write_cb(mux_write_t *req, int status)
{
    struct fw *f = req->data;
    int i = (int)(req - f->req);
    f->status[i] = status;
    f->order[i] = ++f->calls;
    if (f->calls == 3)
        f->done = 1;
}

static void fw_closed_cb(mux_stream_t *s)
{
    ((struct fw *)s->data)->closed = 1;
}

/* Reads from the blocking-free peer until `want` bytes came or the loop has run `ms`. */
static size_t drain_into(mux_loop_t *loop, int fd, char *got, size_t cap, size_t want,
                         volatile int *done, unsigned ms)
{
    size_t have = 0;
    uint64_t end = mono_ns() + ms * MS;
    while ((have < want || !*done) && mono_ns() < end) {
        CHECK_GE(mux_run(loop, MUX_RUN_NOWAIT), 0);
        ssize_t n = recv(fd, got + have, cap - have, MSG_DONTWAIT);
        if (n > 0)
            have += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            break;
        else if (n < 0)
            poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, 1);
    }
    return have;
}

/* A plain write, a write of two buffers and 2 MB of the file from an odd offset, and a plain
 * write again: on the wire in that order, byte for byte, each called back with 0, in order. */
TEST(stream_write_file_sends_its_buffers_then_the_file_in_queue_order) {
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    int file = pattern_file(FILE_LEN);
    struct fw *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    f->w.data = f;
    CHECK_EQ(mux_stream_open(&loop, &f->w, sv[0]), 0);
    static char before[] = "before;", h1[] = "HTTP/1.1 200 OK\r\n", h2[] = "\r\n", after[] = ";after";
    f->before = mux_buf_init(before, 7);
    f->head[0] = mux_buf_init(h1, sizeof h1 - 1);
    f->head[1] = mux_buf_init(h2, 2);
    f->after = mux_buf_init(after, 6);
    for (int i = 0; i < 3; i++)
        f->req[i].data = f;
    CHECK_EQ(mux_write(&f->w, &f->req[0], &f->before, 1, fw_write_cb), 0);
    CHECK_EQ(mux_write_file(&f->w, &f->req[1], f->head, 2, file, FILE_OFF, FILE_SEND, fw_write_cb),
             0);
    CHECK_EQ(mux_write(&f->w, &f->req[2], &f->after, 1, fw_write_cb), 0);
    size_t want = 7 + sizeof h1 - 1 + 2 + FILE_SEND + 6;
    CHECK_GE(mux_stream_write_queue_size(&f->w), 0);
    char *got = malloc(want + 1);
    CHECK(got != NULL);
    size_t have = drain_into(&loop, sv[1], got, want + 1, want, &f->done, 10000);
    CHECK_EQ(have, want);
    CHECK_EQ(f->done, 1);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(f->status[i], 0);
        CHECK_EQ(f->order[i], i + 1);
    }
    CHECK(memcmp(got, "before;HTTP/1.1 200 OK\r\n\r\n", 26) == 0);
    CHECK(pattern_ok(got + 26, FILE_OFF, FILE_SEND));
    CHECK(memcmp(got + 26 + FILE_SEND, ";after", 6) == 0);
    CHECK_EQ(mux_stream_write_queue_size(&f->w), 0);
    CHECK_EQ(mux_stream_close(&f->w, fw_closed_cb), 0);
    run_for(&loop, &f->closed, 2000, "the stream closed");
    loop_finish(&loop);
    close(sv[1]);
    close(file);
    free(got);
    free(f);
}

/* A file shorter than the length asked: its bytes go, then the write fails with -ENODATA,
 * and so does the write queued behind it; the stream still closes clean. A write of no
 * buffers and no file bytes is called back with 0. */
TEST(stream_write_file_that_ends_early_fails_with_enodata) {
    pattern_init();
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    int file = pattern_file(1000);
    struct fw *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    f->w.data = f;
    CHECK_EQ(mux_stream_open(&loop, &f->w, sv[0]), 0);
    static char h1[] = "head:";
    f->head[0] = mux_buf_init(h1, 5);
    f->after = mux_buf_init(h1, 5);
    for (int i = 0; i < 3; i++)
        f->req[i].data = f;
    CHECK_EQ(mux_write_file(&f->w, &f->req[0], NULL, 0, file, 0, 0, fw_write_cb), 0);
    CHECK_EQ(mux_write_file(&f->w, &f->req[1], f->head, 1, file, 100, 5000, fw_write_cb), 0);
    CHECK_EQ(mux_write(&f->w, &f->req[2], &f->after, 1, fw_write_cb), 0);
    char got[8192];
    size_t have = drain_into(&loop, sv[1], got, sizeof got, 5 + 900, &f->done, 5000);
    CHECK_EQ(f->done, 1);
    CHECK_EQ(f->status[0], 0);
    CHECK_EQ(f->status[1], -ENODATA);
    CHECK_EQ(f->status[2], -ENODATA);
    CHECK_EQ(have, 905u);
    CHECK(memcmp(got, "head:", 5) == 0);
    CHECK(pattern_ok(got + 5, 100, 900));
    CHECK_EQ(mux_stream_close(&f->w, fw_closed_cb), 0);
    run_for(&loop, &f->closed, 2000, "the stream closed");
    loop_finish(&loop);
    close(sv[1]);
    close(file);
    free(f);
}

struct fbad {
    mux_stream_t w;
    mux_write_t req;
    int status, calls;
    volatile int done, closed;
};

static void fbad_write_cb(mux_write_t *req, int status)
{
    struct fbad *b = req->data;
    b->status = status;
    b->calls++;
    b->done = 1;
}

static void fbad_closed_cb(mux_stream_t *s)
{
    ((struct fbad *)s->data)->closed = 1;
}

/* One file write of 10 bytes from `fd` on a fresh stream: its callback's status. */
static int file_write_status(int fd)
{
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct fbad b = {0};
    b.w.data = &b;
    b.req.data = &b;
    CHECK_EQ(mux_stream_open(&loop, &b.w, sv[0]), 0);
    CHECK_EQ(mux_write_file(&b.w, &b.req, NULL, 0, fd, 0, 10, fbad_write_cb), 0);
    run_for(&loop, &b.done, 3000, "the file write called back");
    CHECK_EQ(b.calls, 1);
    char c;
    CHECK_EQ(recv(sv[1], &c, 1, MSG_DONTWAIT), -1); /* nothing was sent */
    CHECK_EQ(mux_stream_close(&b.w, fbad_closed_cb), 0);
    run_for(&loop, &b.closed, 2000, "the stream closed");
    loop_finish(&loop);
    close(sv[1]);
    return b.status;
}

/* Refused at the call: a negative descriptor or offset, a range past INT64_MAX, no callback.
 * Refused in the callback: a descriptor that is not open, one open for writing only, a
 * directory. */
TEST(stream_write_file_refuses_what_is_not_a_readable_range) {
    mux_loop_t loop;
    loop_open(&loop);
    int sv[2];
    make_socketpair(sv);
    struct fbad b = {0};
    b.w.data = &b;
    CHECK_EQ(mux_stream_open(&loop, &b.w, sv[0]), 0);
    CHECK_EQ(mux_write_file(&b.w, &b.req, NULL, 0, -1, 0, 1, fbad_write_cb), -EINVAL);
    CHECK_EQ(mux_write_file(&b.w, &b.req, NULL, 0, 0, -1, 1, fbad_write_cb), -EINVAL);
    CHECK_EQ(mux_write_file(&b.w, &b.req, NULL, 0, 0, INT64_MAX, 1, fbad_write_cb), -EINVAL);
    CHECK_EQ(mux_write_file(&b.w, &b.req, NULL, 0, 0, 1, (uint64_t)INT64_MAX, fbad_write_cb),
             -EINVAL);
    CHECK_EQ(mux_write_file(&b.w, &b.req, NULL, 0, 0, 0, 1, NULL), -EINVAL);
    CHECK_EQ(mux_write_file(NULL, &b.req, NULL, 0, 0, 0, 1, fbad_write_cb), -EINVAL);
    CHECK_EQ(b.calls, 0);
    CHECK_EQ(mux_stream_close(&b.w, fbad_closed_cb), 0);
    run_for(&loop, &b.closed, 2000, "the stream closed");
    loop_finish(&loop);
    close(sv[1]);

    int closed_fd = 65000; /* high enough that the loop and the sockets do not take it */
    CHECK_EQ(fcntl(closed_fd, F_GETFD), -1);
    CHECK_EQ(file_write_status(closed_fd), -EBADF);
    char path[] = "/tmp/iomux-file-XXXXXX";
    int wfd = mkstemp(path);
    CHECK_GE(wfd, 0);
    CHECK_EQ(write(wfd, "0123456789", 10), 10);
#ifdef _WIN32 /* a file of its own: mkstemp's is deleted on close, and shared with no one */
    char wpath[] = "/tmp/iomux-wonly-XXXXXX";
    CHECK(_mktemp(wpath) != NULL);
    int wonly = _open(wpath, _O_CREAT | _O_EXCL | _O_WRONLY | _O_TEMPORARY, 0600);
#else
    int wonly = open(path, O_WRONLY | O_CLOEXEC);
#endif
    CHECK_GE(wonly, 0);
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(file_write_status(wonly), -EBADF);
    close(wonly);
    close(wfd);
#ifndef _WIN32 /* a directory cannot be opened as a descriptor there */
    int dir = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK_GE(dir, 0);
    CHECK_EQ(file_write_status(dir), -EISDIR);
    close(dir);
#endif
}

/* The peer has gone: the file write fails with -EPIPE, and no SIGPIPE reaches the process
 * (sendfile has no MSG_NOSIGNAL; SIGPIPE's default action would end the test). Repeated,
 * with SIGPIPE blocked beforehand, which stays so. */
TEST(stream_write_file_to_a_peer_that_has_gone_is_epipe_not_sigpipe) {
#ifdef _WIN32
    SKIP("Windows has no such thing: no SIGPIPE");
#else
    pattern_init();
    CHECK(signal(SIGPIPE, SIG_DFL) != SIG_ERR);
    int file = pattern_file(FILE_LEN);
    for (int round = 0; round < 2; round++) {
        sigset_t pipe_set, old;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        CHECK_EQ(pthread_sigmask(round ? SIG_BLOCK : SIG_UNBLOCK, &pipe_set, &old), 0);
        mux_loop_t loop;
        loop_open(&loop);
        int sv[2];
        make_socketpair(sv);
        CHECK_EQ(close(sv[1]), 0);
        struct fbad b = {0};
        b.w.data = &b;
        b.req.data = &b;
        CHECK_EQ(mux_stream_open(&loop, &b.w, sv[0]), 0);
        CHECK_EQ(mux_write_file(&b.w, &b.req, NULL, 0, file, 0, FILE_LEN, fbad_write_cb), 0);
        run_for(&loop, &b.done, 3000, "the file write called back");
        CHECK_EQ(b.status, -EPIPE);
        CHECK_EQ(mux_stream_close(&b.w, fbad_closed_cb), 0);
        run_for(&loop, &b.closed, 2000, "the stream closed");
        loop_finish(&loop);
        sigset_t now, pending;
        CHECK_EQ(pthread_sigmask(SIG_SETMASK, NULL, &now), 0);
        CHECK_EQ(sigismember(&now, SIGPIPE), round); /* the mask is as it was */
        CHECK_EQ(sigpending(&pending), 0);
        CHECK_EQ(sigismember(&pending, SIGPIPE), 0);
        CHECK_EQ(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);
    }
    close(file);
#endif
}
