/* SPDX-License-Identifier: MIT */
/* MUX_RDHUP: the peer's hang-up, told to an io watcher without a read, on the backends whose
 * kernel reports it (epoll, io_uring, Linux's poll), and refused with -ENOTSUP on the others
 * (select, rtsig, kqueue, and poll where there is no POLLRDHUP). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

struct hup_seen {
    int calls;
    unsigned revents;
};

static void hup_record(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct hup_seen *s = w->data;
    (void)loop;
    s->calls++;
    s->revents = revents;
}

/* Whether the loop's backend must report the hang-up, by what docs/io.md says of each. */
static int rdhup_expected(const mux_loop_t *loop)
{
    if (loop_is(loop, "epoll") || loop_is(loop, "uring"))
        return 1;
#if defined(POLLRDHUP) && !defined(IOMUX_TEST_PORTABLE) /* as poll.c */
    if (loop_is(loop, "poll"))
        return 1;
#endif
    return 0;
}

/* Opens a loop on the case's backend; skips the case (with the reason) where the backend
 * does not offer MUX_RDHUP, as it must not. */
static void open_or_skip(mux_loop_t *loop)
{
    loop_open(loop);
    if (!(mux_io_events_supported(loop) & MUX_RDHUP)) {
        CHECK_EQ(rdhup_expected(loop), 0);
        loop_close(loop);
        SKIP("the backend cannot report the peer's hang-up: MUX_RDHUP is -ENOTSUP here "
             "(io_rdhup_is_offered_where_the_backend_has_it_and_refused_elsewhere)");
    }
}

/* The watcher's fd's peer: a byte written ahead of the hang-up, which nobody reads. */
static int peek_pending(int fd)
{
    char c;
    return (int)recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
}

TEST(io_rdhup_is_offered_where_the_backend_has_it_and_refused_elsewhere) {
    mux_loop_t loop;
    loop_open(&loop);
    CHECK_EQ(mux_io_events_supported(NULL), 0u);
    unsigned ev = mux_io_events_supported(&loop);
    CHECK_EQ(ev & ~(unsigned)MUX_RDHUP, (unsigned)(MUX_READ | MUX_WRITE | MUX_EDGE));
    CHECK_EQ((ev & MUX_RDHUP) != 0, rdhup_expected(&loop));

    int sv[2];
    make_socketpair(sv);
    struct hup_seen s = {0};
    mux_io_t w, r;
    CHECK_EQ(mux_io_init(&w, hup_record, sv[0], MUX_RDHUP), 0); /* an event on its own */
    CHECK_EQ(mux_io_init(&w, hup_record, sv[0], MUX_RDHUP | MUX_ERROR), -EINVAL);
    CHECK_EQ(mux_io_init(&w, hup_record, sv[0], MUX_EDGE), -EINVAL);
    CHECK_EQ(mux_io_init(&w, hup_record, sv[0], MUX_RDHUP | MUX_EDGE), 0);
    CHECK_EQ(mux_io_init(&r, hup_record, sv[0], MUX_READ), 0);
    r.data = &s;
    CHECK_EQ(mux_io_start(&loop, &r), 0);
    if (ev & MUX_RDHUP) {
        CHECK_EQ(mux_io_start(&loop, &w), 0);
        CHECK_EQ(mux_io_modify(&loop, &r, MUX_READ | MUX_RDHUP), 0);
        CHECK_EQ(mux_io_stop(&loop, &w), 0);
    } else {
        /* Refused, and nothing changed: the watcher is not started, the other keeps its
         * events and still works. */
        CHECK_EQ(mux_io_start(&loop, &w), -ENOTSUP);
        CHECK_EQ(mux_io_is_active(&w), 0);
        CHECK_EQ(mux_io_modify(&loop, &r, MUX_READ | MUX_RDHUP), -ENOTSUP);
        CHECK_EQ(mux_io_is_active(&r), 1);
        shutdown(sv[1], SHUT_WR);
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1);
        CHECK_EQ(s.calls, 1);
        CHECK_EQ(s.revents, MUX_READ); /* the end of the stream, as a read finds it */
    }
    CHECK_EQ(mux_io_stop(&loop, &r), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
}

/* The peer sends a byte and shuts its writing down: a watcher of MUX_RDHUP alone hears of
 * the hang-up with the byte still unread, and not of the byte before; level-triggered, it
 * hears of it again on every iteration until stopped. A MUX_READ watcher of the same fd sees
 * MUX_READ only, one of both sees both. */
static void rdhup_case(int by_close)
{
    mux_loop_t loop;
    open_or_skip(&loop);
    int sv[2];
    make_socketpair(sv);
    struct hup_seen hup = {0}, rd = {0}, both = {0};
    mux_io_t wh, wr, wb;
    CHECK_EQ(mux_io_init(&wh, hup_record, sv[0], MUX_RDHUP), 0);
    CHECK_EQ(mux_io_init(&wr, hup_record, sv[0], MUX_READ), 0);
    CHECK_EQ(mux_io_init(&wb, hup_record, sv[0], MUX_READ | MUX_RDHUP), 0);
    wh.data = &hup;
    wr.data = &rd;
    wb.data = &both;
    CHECK_EQ(mux_io_start(&loop, &wh), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    write_byte(sv[1]);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(hup.calls, 0); /* data is no hang-up */
    CHECK_EQ(mux_io_start(&loop, &wr), 0);
    CHECK_EQ(mux_io_start(&loop, &wb), 0);
    if (by_close) {
        close(sv[1]);
        sv[1] = -1;
    } else {
        CHECK_EQ(shutdown(sv[1], SHUT_WR), 0);
    }
    run_until(&loop, &hup.calls, 10000);
    CHECK_EQ(hup.revents, MUX_RDHUP);
    CHECK_EQ(rd.calls, 1);
    CHECK_EQ(rd.revents, MUX_READ);
    CHECK_EQ(both.calls, 1);
    CHECK_EQ(both.revents, MUX_READ | MUX_RDHUP);
    CHECK_EQ(peek_pending(sv[0]), 1); /* the byte is still there */
    CHECK_EQ(mux_io_stop(&loop, &wr), 0);
    CHECK_EQ(mux_io_stop(&loop, &wb), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(hup.calls, 2); /* level-triggered: again */
    CHECK_EQ(hup.revents, MUX_RDHUP);
    CHECK_EQ(mux_io_stop(&loop, &wh), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(hup.calls, 2);
    loop_close(&loop);
    close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
}

TEST(io_rdhup_tells_the_peer_shutdown_behind_unread_data) {
    rdhup_case(0);
}

TEST(io_rdhup_tells_the_peer_close_behind_unread_data) {
    rdhup_case(1);
}

/* A pipe's writer closing is its reader's hang-up; a MUX_RDHUP watcher of a live pipe with
 * data in it is not called. Turned on and off with mux_io_modify. */
TEST(io_rdhup_tells_a_pipe_writer_close_and_follows_modify) {
    mux_loop_t loop;
    open_or_skip(&loop);
    int p[2];
    make_pipe(p);
    write_byte(p[1]);
    struct hup_seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, hup_record, p[0], MUX_READ), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_READ);
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_RDHUP), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 1); /* readable, not hung up */
    s.calls = 0;
    close(p[1]);
    run_until(&loop, &s.calls, 10000);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_RDHUP);
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_WRITE), 0); /* a read end is never writable */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 3); /* a hang-up wakes both directions (POLLHUP), as docs/io.md says */
    CHECK_EQ(s.revents, MUX_WRITE);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    close(p[0]);
}

static void timer_fired_cb(mux_loop_t *loop, mux_timer_t *t)
{
    int *fired = t->data;
    (void)loop;
    (*fired)++;
}

/* A regular file never hangs up, and poll() reports no POLLRDHUP for it: a watcher that asks
 * for MUX_RDHUP alone is never called, and the wait blocks for what else is due. epoll refuses
 * the file and reports it ready each iteration, a readiness that is no hang-up (it spun with
 * a wait of 0); io_uring refuses to poll it for POLLRDHUP alone, once (it killed the fd). */
TEST(io_rdhup_alone_on_a_regular_file_is_never_called_and_the_loop_waits) {
    mux_loop_t loop;
    open_or_skip(&loop);
    FILE *f = tmpfile();
    CHECK(f != NULL);
    struct hup_seen s = {0};
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, hup_record, fileno(f), MUX_RDHUP), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1); /* io_uring: the kernel's refusal to wait */
    CHECK_EQ(s.calls, 0);
    int fired = 0;
    mux_timer_t t;
    CHECK_EQ(mux_timer_init(&t, timer_fired_cb), 0);
    t.data = &fired;
    for (int i = 1; i <= 3; i++) {
        CHECK_EQ(mux_timer_start(&loop, &t, 10 * 1000000ull, 0), 0);
        CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1); /* one iteration: it waits for the timer */
        CHECK_EQ(fired, i);
        CHECK_EQ(s.calls, 0);
    }
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_READ | MUX_RDHUP), 0); /* readable, as ever */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_READ);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    fclose(f);
}

struct widen {
    mux_io_t a, w;
    int a_calls, w_calls;
    unsigned w_revents;
};

static void widen_a_cb(mux_loop_t *loop, mux_io_t *io, unsigned revents)
{
    struct widen *x = io->data;
    (void)revents;
    if (x->a_calls++ == 0)
        CHECK_EQ(mux_io_modify(loop, &x->w, MUX_READ | MUX_RDHUP), 0);
}

static void widen_w_cb(mux_loop_t *loop, mux_io_t *io, unsigned revents)
{
    struct widen *x = io->data;
    (void)loop;
    x->w_calls++;
    x->w_revents = revents;
}

/* The same watcher, turned to MUX_READ | MUX_RDHUP by another watcher's callback in the
 * iteration that first armed it (on io_uring the other's answer is reaped first, then the
 * kernel's refusal of this one's request): it is then told the file is readable, and is
 * not killed. */
TEST(io_rdhup_alone_on_a_regular_file_then_read_from_another_callback_is_readable) {
    mux_loop_t loop;
    open_or_skip(&loop);
    int sv[2];
    make_socketpair(sv);
    write_byte(sv[1]); /* sv[0] readable at once */
    FILE *f = tmpfile();
    CHECK(f != NULL);
    struct widen x = {0};
    CHECK_EQ(mux_io_init(&x.a, widen_a_cb, sv[0], MUX_READ), 0);
    CHECK_EQ(mux_io_init(&x.w, widen_w_cb, fileno(f), MUX_RDHUP), 0);
    x.a.data = x.w.data = &x;
    CHECK_EQ(mux_io_start(&loop, &x.w), 0);
    CHECK_EQ(mux_io_start(&loop, &x.a), 0);
    for (int i = 0; i < 3 && x.w_calls == 0; i++)
        CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_GE(x.a_calls, 1);
    CHECK_GE(x.w_calls, 1);
    CHECK_EQ(x.w_revents, MUX_READ);
    CHECK_EQ(mux_io_stop(&loop, &x.a), 0);
    CHECK_EQ(mux_io_stop(&loop, &x.w), 0);
    loop_close(&loop);
    close(sv[0]);
    close(sv[1]);
    fclose(f);
}

/* After the kernel refused MUX_RDHUP alone on a regular file (io_uring), the watcher stopped
 * and started again for MUX_READ (no request is armed: the fd's next change must add one, not
 * update the refused one), and a second watcher of MUX_READ started beside one of MUX_RDHUP
 * alone: each is told the file is readable, and none is killed. */
TEST(io_rdhup_alone_on_a_regular_file_then_restarted_or_joined_for_read_is_readable) {
    mux_loop_t loop;
    open_or_skip(&loop);
    FILE *f = tmpfile();
    CHECK(f != NULL);
    struct hup_seen s = {0}, r = {0};
    mux_io_t w, rd;
    CHECK_EQ(mux_io_init(&w, hup_record, fileno(f), MUX_RDHUP), 0);
    w.data = &s;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    for (int i = 0; i < 3; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(s.calls, 0);
    CHECK_EQ(mux_io_is_active(&w), 1);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_READ), 0); /* the same fd: nothing forces a new request */
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.revents, MUX_READ);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    /* Back to MUX_RDHUP alone, refused again; then another watcher wants MUX_READ. */
    CHECK_EQ(mux_io_modify(&loop, &w, MUX_RDHUP), 0);
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    for (int i = 0; i < 3; i++)
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(mux_io_init(&rd, hup_record, fileno(f), MUX_READ), 0);
    rd.data = &r;
    CHECK_EQ(mux_io_start(&loop, &rd), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2); /* two active watchers */
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.revents, MUX_READ);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(mux_io_is_active(&w), 1);
    CHECK_EQ(mux_io_stop(&loop, &rd), 0);
    CHECK_EQ(mux_io_stop(&loop, &w), 0);
    loop_close(&loop);
    fclose(f);
}
