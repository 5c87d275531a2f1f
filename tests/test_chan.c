/* SPDX-License-Identifier: MIT */
/* Channels: order, capacity and -EAGAIN, waiting for room, closing with messages queued
 * (nothing lost, no socket left open), bad input, the walk; and many sending threads, with
 * exact counts and each sender's order, under ThreadSanitizer (THREAD_TEST). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stream_util.h"

/* What a receiving callback saw. */
struct seen {
    int delivered, cancelled;
    uint64_t values[64];
    void *ptrs[64];
    int statuses[64];
    int n;
    mux_os_sock_t socks[64];
    int close_on; /* close the channel when this many messages came (0: never) */
    int free_on_close;
};

static void record_cb(mux_chan_t *c, mux_msg_t *m, int status)
{
    struct seen *s = c->data;
    if (s->n < 64) {
        s->values[s->n] = m->value;
        s->ptrs[s->n] = m->ptr;
        s->statuses[s->n] = status;
        s->socks[s->n] = m->sock;
        s->n++;
    }
    if (status == 0)
        s->delivered++;
    else
        s->cancelled++;
    if (status == 0 && s->close_on && s->delivered == s->close_on) {
        CHECK_EQ(mux_chan_close(c), 0);
        if (s->free_on_close)
            free(c); /* the channel may be freed once closed, from its own callback */
    }
}

static void chan_open(mux_loop_t *loop, mux_chan_t *c, uint32_t cap, struct seen *s)
{
    memset(s, 0, sizeof *s);
    c->data = s;
    CHECK_EQ(mux_chan_open(loop, c, cap, record_cb), 0);
    CHECK(c->data == s);
}

static int send_value(mux_chan_t *c, uint64_t v, void *ptr)
{
    mux_msg_t m = {.ptr = ptr, .value = v, .sock = MUX_OS_SOCK_INVALID};
    return mux_chan_send(c, &m);
}

/* 1 when the peer of `fd` has been closed (a read finds end of stream). */
static int peer_gone(int fd)
{
    char b;
    for (int i = 0; i < 200; i++) {
        ssize_t n = read(fd, &b, 1);
        if (n == 0)
            return 1;
        if (n < 0 && errno != EAGAIN)
            return 0;
        sleep_ms(5);
    }
    return 0;
}

TEST(chan_messages_arrive_in_send_order_with_their_words) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    struct seen s;
    chan_open(&loop, &c, 16, &s);
    static int anchor[10];
    for (int i = 0; i < 10; i++)
        CHECK_EQ(send_value(&c, 1000 + (uint64_t)i, &anchor[i]), 0);
    CHECK_EQ(s.n, 0); /* nothing runs inside a send */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.delivered, 10);
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(s.values[i], 1000 + i);
        CHECK(s.ptrs[i] == &anchor[i]);
        CHECK_EQ(s.statuses[i], 0);
        CHECK_EQ(s.socks[i], MUX_OS_SOCK_INVALID);
    }
    CHECK_EQ(mux_chan_close(&c), 0);
    CHECK_EQ(s.cancelled, 0);
    loop_finish(&loop);
}

/* A burst sent before the loop runs is taken in one iteration: one wake-up for all. */
TEST(chan_burst_is_taken_in_one_iteration) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    struct seen s;
    chan_open(&loop, &c, 64, &s);
    for (int i = 0; i < 50; i++)
        CHECK_EQ(send_value(&c, (uint64_t)i, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_ONCE), 1); /* does not block: the burst woke it */
    CHECK_EQ(s.delivered, 50);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.delivered, 50);
    CHECK_EQ(mux_chan_close(&c), 0);
    loop_finish(&loop);
}

TEST(chan_capacity_rounds_up_and_full_channel_refuses_with_eagain) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    struct seen s;
    chan_open(&loop, &c, 3, &s); /* room for 4 */
    for (int i = 0; i < 4; i++)
        CHECK_EQ(send_value(&c, (uint64_t)i, NULL), 0);
    CHECK_EQ(send_value(&c, 4, NULL), -EAGAIN);
    /* A socket refused with the message stays the caller's: still open. */
    int sv[2];
    make_socketpair(sv);
    mux_msg_t m = {.sock = sv[0]};
    CHECK_EQ(mux_chan_send(&c, &m), -EAGAIN);
    CHECK_EQ(fcntl(sv[0], F_GETFD) >= 0, 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.delivered, 4);
    CHECK_EQ(send_value(&c, 5, NULL), 0); /* room again */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(s.delivered, 5);
    CHECK_EQ(s.values[4], 5);
    CHECK_EQ(mux_chan_close(&c), 0);
    close(sv[0]);
    close(sv[1]);
    loop_finish(&loop);
}

/* Two slots, a thousand messages: the ring's laps keep order and lose nothing. */
TEST(chan_many_laps_of_a_small_ring_keep_order) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    struct seen s;
    chan_open(&loop, &c, 2, &s);
    uint64_t next = 0;
    for (int lap = 0; lap < 500; lap++) {
        CHECK_EQ(send_value(&c, next++, NULL), 0);
        CHECK_EQ(send_value(&c, next++, NULL), 0);
        CHECK_EQ(send_value(&c, 99, NULL), -EAGAIN);
        s.n = 0;
        CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
        CHECK_EQ(s.n, 2);
        CHECK_EQ(s.values[0], next - 2);
        CHECK_EQ(s.values[1], next - 1);
    }
    CHECK_EQ(s.delivered, 1000);
    CHECK_EQ(mux_chan_close(&c), 0);
    loop_finish(&loop);
}

/* Closing hands every queued message to the callback with -ECANCELED, after which the
 * sockets they carry are closed: nothing leaks. */
TEST(chan_close_cancels_queued_messages_and_closes_their_sockets) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    struct seen s;
    chan_open(&loop, &c, 8, &s);
    int a[2], b[2];
    make_socketpair(a);
    make_socketpair(b);
    int *heap = malloc(sizeof *heap); /* freed by the test after the -ECANCELED call */
    CHECK(heap != NULL);
    mux_msg_t m1 = {.ptr = heap, .value = 1, .sock = a[0]};
    mux_msg_t m2 = {.value = 2, .sock = MUX_OS_SOCK_INVALID};
    mux_msg_t m3 = {.value = 3, .sock = b[0]};
    CHECK_EQ(mux_chan_send(&c, &m1), 0);
    CHECK_EQ(mux_chan_send(&c, &m2), 0);
    CHECK_EQ(mux_chan_send(&c, &m3), 0);
    CHECK_EQ(mux_chan_close(&c), 0);
    CHECK_EQ(s.delivered, 0);
    CHECK_EQ(s.cancelled, 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(s.statuses[i], -ECANCELED);
        CHECK_EQ(s.values[i], (uint64_t)i + 1);
    }
    CHECK(s.ptrs[0] == heap);
    free(heap);
    CHECK_EQ(s.socks[0], a[0]); /* the callback saw them; closed after it returned */
    CHECK_EQ(peer_gone(a[1]), 1);
    CHECK_EQ(peer_gone(b[1]), 1);
    close(a[1]);
    close(b[1]);
    /* A closed channel refuses everything, and does not count any more. */
    CHECK_EQ(send_value(&c, 4, NULL), -EPIPE);
    CHECK_EQ(mux_chan_close(&c), -EINVAL);
    CHECK(mux_chan_loop(&c) == NULL);
    loop_finish(&loop);
}

static void ignore_cb(mux_chan_t *c, mux_msg_t *m, int status)
{
    (void)c;
    (void)m;
    (void)status;
}

TEST(chan_socket_the_callback_leaves_is_closed_after_it) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    CHECK_EQ(mux_chan_open(&loop, &c, 4, ignore_cb), 0);
    int sv[2];
    make_socketpair(sv);
    mux_msg_t m = {.sock = sv[0]};
    CHECK_EQ(mux_chan_send(&c, &m), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(peer_gone(sv[1]), 1);
    close(sv[1]);
    CHECK_EQ(mux_chan_close(&c), 0);
    loop_finish(&loop);
}

static void take_cb(mux_chan_t *c, mux_msg_t *m, int status)
{
    CHECK_EQ(status, 0);
    *(mux_os_sock_t *)c->data = m->sock;
    m->sock = MUX_OS_SOCK_INVALID; /* taken: the channel leaves it alone */
}

TEST(chan_socket_taken_by_the_callback_stays_open) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    mux_os_sock_t got = MUX_OS_SOCK_INVALID;
    c.data = &got;
    CHECK_EQ(mux_chan_open(&loop, &c, 4, take_cb), 0);
    int sv[2];
    make_socketpair(sv);
    mux_msg_t m = {.sock = sv[0]};
    CHECK_EQ(mux_chan_send(&c, &m), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(got, sv[0]);
    CHECK_EQ(write(sv[0], "x", 1), 1); /* still open, still connected */
    char b;
    CHECK_EQ(read(sv[1], &b, 1), 1);
    close(sv[0]);
    close(sv[1]);
    CHECK_EQ(mux_chan_close(&c), 0);
    loop_finish(&loop);
}

/* The callback closes the channel and frees it; the messages after that one are cancelled
 * from inside the close, and the loop does not touch the freed channel. */
TEST(chan_callback_may_close_and_free_its_channel) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t *c = malloc(sizeof *c);
    CHECK(c != NULL);
    struct seen s;
    chan_open(&loop, c, 8, &s);
    s.close_on = 2;
    s.free_on_close = 1;
    for (int i = 0; i < 5; i++)
        CHECK_EQ(send_value(c, (uint64_t)i, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0); /* nothing left active */
    CHECK_EQ(s.delivered, 2);
    CHECK_EQ(s.cancelled, 3);
    CHECK_EQ(s.values[4], 4);
    loop_finish(&loop);
}

static void walk_close_cb(mux_loop_t *loop, int kind, void *handle, void *arg)
{
    (void)loop;
    CHECK_EQ(kind, MUX_HANDLE_CHAN); /* its async is a part, not a handle */
    CHECK_EQ(mux_chan_close(handle), 0);
    (*(int *)arg)++;
}

TEST(chan_keeps_its_loop_alive_and_the_walk_closes_it) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    struct seen s;
    chan_open(&loop, &c, 4, &s);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK(mux_chan_loop(&c) == &loop);
    CHECK_EQ(mux_loop_close(&loop), -EBUSY);
    CHECK_EQ(send_value(&c, 7, NULL), 0);
    int calls = 0;
    CHECK_EQ(mux_loop_walk(&loop, walk_close_cb, &calls), 1);
    CHECK_EQ(calls, 1);
    CHECK_EQ(s.cancelled, 1);
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&loop);
}

static void room_cb(mux_loop_t *loop, mux_async_t *a)
{
    (void)loop;
    (*(int *)a->data)++;
}

TEST(chan_notify_room_sends_the_async_once_messages_are_taken) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    struct seen s;
    chan_open(&loop, &c, 2, &s);
    mux_async_t a;
    int rooms = 0;
    CHECK_EQ(mux_async_init(&a, room_cb), 0);
    a.data = &rooms;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(send_value(&c, 1, NULL), 0);
    CHECK_EQ(send_value(&c, 2, NULL), 0);
    CHECK_EQ(send_value(&c, 3, NULL), -EAGAIN);
    CHECK_EQ(mux_chan_notify_room(&c, &a), 0);
    CHECK_EQ(mux_chan_notify_room(&c, &a), 0); /* already waiting: not twice */
    CHECK_EQ(send_value(&c, 3, NULL), -EAGAIN); /* the retry the contract asks for */
    CHECK_EQ(mux_async_pending(&a), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2); /* takes both, sends the async */
    CHECK_EQ(s.delivered, 2);
    CHECK_EQ(mux_async_pending(&a), 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(rooms, 1);
    /* One-shot: taking more does not send it again. */
    CHECK_EQ(send_value(&c, 3, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(rooms, 1);
    /* Closing sends the asyncs still waiting; then sends and waits are refused. */
    CHECK_EQ(mux_chan_notify_room(&c, &a), 0);
    CHECK_EQ(mux_chan_close(&c), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(rooms, 2);
    CHECK_EQ(mux_chan_notify_room(&c, &a), -EPIPE);
    CHECK_EQ(mux_async_stop(&loop, &a), 0);
    loop_finish(&loop);
}

TEST(chan_cancel_room_withdraws_a_waiting_async) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    struct seen s;
    chan_open(&loop, &c, 1, &s);
    mux_async_t a, b;
    int rooms = 0;
    CHECK_EQ(mux_async_init(&a, room_cb), 0);
    CHECK_EQ(mux_async_init(&b, room_cb), 0);
    a.data = b.data = &rooms;
    CHECK_EQ(mux_async_start(&loop, &a), 0);
    CHECK_EQ(mux_async_start(&loop, &b), 0);
    CHECK_EQ(send_value(&c, 1, NULL), 0);
    CHECK_EQ(mux_chan_notify_room(&c, &a), 0);
    CHECK_EQ(mux_chan_notify_room(&c, &b), 0);
    CHECK_EQ(mux_chan_cancel_room(&c, &a), 0);
    CHECK_EQ(mux_async_stop(&loop, &a), 0); /* allowed now */
    CHECK_EQ(mux_chan_cancel_room(&c, &a), 0); /* not waiting: still 0 */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 2);
    CHECK_EQ(rooms, 1); /* b only */
    CHECK_EQ(mux_chan_close(&c), 0);
    CHECK_EQ(mux_chan_cancel_room(&c, &b), 0); /* closed: nothing to withdraw */
    CHECK_EQ(mux_chan_cancel_room(NULL, &b), -EINVAL);
    CHECK_EQ(mux_async_stop(&loop, &b), 0);
    loop_finish(&loop);
}

TEST(chan_notify_room_refuses_more_waiters_than_it_holds) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    struct seen s;
    chan_open(&loop, &c, 1, &s);
    static mux_async_t a[MUX_CHAN_ROOM_WAITERS + 1];
    int rooms = 0;
    for (int i = 0; i <= MUX_CHAN_ROOM_WAITERS; i++) {
        CHECK_EQ(mux_async_init(&a[i], room_cb), 0);
        a[i].data = &rooms;
        CHECK_EQ(mux_async_start(&loop, &a[i]), 0);
    }
    for (int i = 0; i < MUX_CHAN_ROOM_WAITERS; i++)
        CHECK_EQ(mux_chan_notify_room(&c, &a[i]), 0);
    CHECK_EQ(mux_chan_notify_room(&c, &a[MUX_CHAN_ROOM_WAITERS]), -EBUSY);
    CHECK_EQ(send_value(&c, 1, NULL), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), MUX_CHAN_ROOM_WAITERS + 2);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), MUX_CHAN_ROOM_WAITERS + 2);
    CHECK_EQ(rooms, MUX_CHAN_ROOM_WAITERS); /* every waiter, each once */
    CHECK_EQ(mux_chan_notify_room(&c, &a[MUX_CHAN_ROOM_WAITERS]), 0); /* slots free again */
    CHECK_EQ(mux_chan_close(&c), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), MUX_CHAN_ROOM_WAITERS + 1);
    CHECK_EQ(rooms, MUX_CHAN_ROOM_WAITERS + 1);
    for (int i = 0; i <= MUX_CHAN_ROOM_WAITERS; i++)
        CHECK_EQ(mux_async_stop(&loop, &a[i]), 0);
    loop_finish(&loop);
}

TEST(chan_bad_input_returns_einval) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_chan_t c;
    memset(&c, 0, sizeof c);
    mux_msg_t m = {.sock = MUX_OS_SOCK_INVALID};
    CHECK_EQ(mux_chan_open(NULL, &c, 4, ignore_cb), -EINVAL);
    CHECK_EQ(mux_chan_open(&loop, NULL, 4, ignore_cb), -EINVAL);
    CHECK_EQ(mux_chan_open(&loop, &c, 4, NULL), -EINVAL);
    CHECK_EQ(mux_chan_open(&loop, &c, 0, ignore_cb), -EINVAL);
    CHECK_EQ(mux_chan_open(&loop, &c, MUX_CHAN_MAX + 1, ignore_cb), -EINVAL);
    /* A channel never opened (zeroed) refuses everything. */
    CHECK_EQ(mux_chan_send(&c, &m), -EINVAL);
    CHECK_EQ(mux_chan_close(&c), -EINVAL);
    CHECK_EQ(mux_chan_stream_open(&c, NULL, &m), -EINVAL);
    CHECK(mux_chan_loop(&c) == NULL);
    CHECK_EQ(mux_chan_send(NULL, &m), -EINVAL);
    CHECK_EQ(mux_chan_close(NULL), -EINVAL);
    CHECK(mux_chan_loop(NULL) == NULL);
    CHECK_EQ(mux_chan_open(&loop, &c, 4, ignore_cb), 0);
    CHECK_EQ(mux_chan_send(&c, NULL), -EINVAL);
    CHECK_EQ(mux_chan_notify_room(&c, NULL), -EINVAL);
    mux_async_t never;
    memset(&never, 0, sizeof never);
    CHECK_EQ(mux_chan_notify_room(&c, &never), -EINVAL);
    CHECK_EQ(mux_chan_send_socket(&c, NULL, 3, NULL), -EINVAL);
    mux_stream_t st;
    CHECK_EQ(mux_chan_stream_open(&c, &st, &m), -EINVAL); /* no socket in it */
    CHECK_EQ(mux_chan_stream_open(&c, NULL, &m), -EINVAL);
    CHECK_EQ(mux_chan_close(&c), 0);
    CHECK_EQ(mux_chan_close(&c), -EINVAL);
    loop_finish(&loop);
}

/* ---- a connection accepted on one loop, served on another (one thread here) ---- */

struct handoff {
    mux_chan_t chan;
    mux_stream_t s;
    char buf[64];
    mux_write_t w;
    mux_buf_t out;
    int opened, closed, got;
};

static void handoff_closed_cb(mux_stream_t *s)
{
    ((struct handoff *)s->data)->closed = 1;
}

static void handoff_written_cb(mux_write_t *req, int status)
{
    struct handoff *h = req->data;
    CHECK_EQ(status, 0);
    CHECK_EQ(mux_stream_close(&h->s, handoff_closed_cb), 0);
}

static void handoff_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct handoff *h = s->data;
    CHECK_EQ(nread, 5);
    CHECK_EQ(mux_read_stop(s), 0);
    h->got = 1;
    h->out = mux_buf_init(buf, (size_t)nread);
    h->w.data = h;
    CHECK_EQ(mux_write(s, &h->w, &h->out, 1, handoff_written_cb), 0);
}

static void handoff_msg_cb(mux_chan_t *c, mux_msg_t *m, int status)
{
    struct handoff *h = c->data;
    CHECK_EQ(status, 0);
    CHECK(m->ptr == h);
    h->s.data = h;
    CHECK_EQ(mux_chan_stream_open(c, &h->s, m), 0);
    CHECK_EQ(m->sock, MUX_OS_SOCK_INVALID); /* the stream has it now */
    CHECK(mux_stream_loop(&h->s) == mux_chan_loop(c));
    h->opened = 1;
    CHECK_EQ(mux_read_start(&h->s, h->buf, sizeof h->buf, handoff_read_cb), 0);
}

static void handoff_accept_cb(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    struct handoff *h = l->data;
    CHECK_EQ(status, 0);
    CHECK_EQ(mux_chan_send_socket(&h->chan, l, sock, h), 0);
}

TEST(chan_accepted_socket_is_served_by_the_receiving_loop) {
    mux_loop_t acceptor, worker;
    loop_open(&acceptor);
    loop_open(&worker);
    struct handoff h;
    memset(&h, 0, sizeof h);
    h.chan.data = &h;
    CHECK_EQ(mux_chan_open(&worker, &h.chan, 4, handoff_msg_cb), 0);
    mux_listener_t l;
    l.data = &h;
    struct sockaddr_storage a;
    CHECK_EQ(mux_listen(&acceptor, &l, (struct sockaddr *)&a, addr_v4(&a, 0), NULL,
                        handoff_accept_cb),
             0);
    socklen_t alen = sizeof a;
    CHECK_EQ(mux_listener_address(&l, (struct sockaddr *)&a, &alen), 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    CHECK_EQ(connect(fd, (struct sockaddr *)&a, alen), 0);
    CHECK_EQ(write(fd, "hello", 5), 5);
    uint64_t end = mono_ns() + 5000 * MS;
    while (!h.closed && mono_ns() < end) {
        CHECK_GE(mux_run(&acceptor, MUX_RUN_NOWAIT), 0);
        CHECK_GE(mux_run(&worker, MUX_RUN_NOWAIT), 0);
    }
    CHECK_EQ(h.opened, 1);
    CHECK_EQ(h.got, 1);
    CHECK_EQ(h.closed, 1);
    char back[8];
    CHECK_EQ(read(fd, back, sizeof back), 5);
    CHECK(memcmp(back, "hello", 5) == 0);
    close(fd);
    CHECK_EQ(mux_listener_close(&l, NULL), 0);
    CHECK_EQ(mux_chan_close(&h.chan), 0);
    loop_finish(&acceptor);
    loop_finish(&worker);
}

/* ---- many sending threads ---- */

enum { PRODUCERS = 4, PER_PRODUCER = 20000 };

struct fanin {
    mux_chan_t chan;
    uint64_t next[PRODUCERS]; /* the sequence number expected next from each */
    int total, out_of_order;
    atomic_int go;
};

static void fanin_cb(mux_chan_t *c, mux_msg_t *m, int status)
{
    struct fanin *f = c->data;
    CHECK_EQ(status, 0);
    unsigned p = (unsigned)(m->value >> 32);
    uint64_t seq = m->value & 0xffffffffu;
    CHECK_LT(p, PRODUCERS);
    if (seq != f->next[p])
        f->out_of_order++;
    f->next[p] = seq + 1;
    CHECK(m->ptr == &f->next[p]);
    if (++f->total == PRODUCERS * PER_PRODUCER)
        CHECK_EQ(mux_chan_close(c), 0); /* mux_run then returns: nothing else is active */
}

struct producer {
    struct fanin *f;
    unsigned id;
    unsigned long full; /* -EAGAIN answers met */
};

static void *producer_thread(void *arg)
{
    struct producer *p = arg;
    while (!atomic_load(&p->f->go))
        sched_yield();
    for (uint64_t i = 0; i < PER_PRODUCER; i++) {
        mux_msg_t m = {.ptr = &p->f->next[p->id], .value = ((uint64_t)p->id << 32) | i,
                       .sock = MUX_OS_SOCK_INVALID};
        int r;
        while ((r = mux_chan_send(&p->f->chan, &m)) == -EAGAIN) {
            p->full++;
            sched_yield();
        }
        CHECK_EQ(r, 0);
    }
    return NULL;
}

/* Four threads send 20,000 messages each through 64 slots: every message arrives once,
 * each thread's in the order it sent them. */
THREAD_TEST(chan_many_senders_exact_counts_and_each_senders_order) {
    mux_loop_t loop;
    loop_open(&loop);
    static struct fanin f;
    memset(&f, 0, sizeof f);
    atomic_init(&f.go, 0);
    f.chan.data = &f;
    CHECK_EQ(mux_chan_open(&loop, &f.chan, 64, fanin_cb), 0);
    pthread_t th[PRODUCERS];
    struct producer p[PRODUCERS];
    for (unsigned i = 0; i < PRODUCERS; i++) {
        p[i] = (struct producer){&f, i, 0};
        CHECK_EQ(pthread_create(&th[i], NULL, producer_thread, &p[i]), 0);
    }
    atomic_store(&f.go, 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    for (unsigned i = 0; i < PRODUCERS; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0);
    CHECK_EQ(f.total, PRODUCERS * PER_PRODUCER);
    CHECK_EQ(f.out_of_order, 0);
    for (unsigned i = 0; i < PRODUCERS; i++)
        CHECK_EQ(f.next[i], PER_PRODUCER);
    loop_finish(&loop);
}

/* Senders that are loops themselves: on -EAGAIN each asks for room with an async of its own
 * loop and runs that loop until the async comes, never spinning on the channel. */
struct loop_producer {
    struct fanin *f;
    unsigned id;
    mux_loop_t loop;
    mux_async_t room;
    uint64_t sent;
    unsigned long waits;
};

static void lp_send_more(struct loop_producer *p)
{
    while (p->sent < PER_PRODUCER) {
        mux_msg_t m = {.ptr = &p->f->next[p->id], .value = ((uint64_t)p->id << 32) | p->sent,
                       .sock = MUX_OS_SOCK_INVALID};
        int r = mux_chan_send(&p->f->chan, &m);
        if (r == -EAGAIN) {
            CHECK_EQ(mux_chan_notify_room(&p->f->chan, &p->room), 0);
            r = mux_chan_send(&p->f->chan, &m); /* room may have come meanwhile */
            if (r == -EAGAIN) {
                p->waits++;
                return; /* the room async calls back */
            }
        }
        CHECK_EQ(r, 0);
        p->sent++;
    }
    /* Done. A wait asked for before a retry that found room may still be registered:
     * withdrawn, the async may be stopped, and the loop ends. */
    CHECK_EQ(mux_chan_cancel_room(&p->f->chan, &p->room), 0);
    CHECK_EQ(mux_async_stop(&p->loop, &p->room), 0);
}

static void lp_room_cb(mux_loop_t *loop, mux_async_t *a)
{
    (void)loop;
    lp_send_more(a->data);
}

static void *loop_producer_thread(void *arg)
{
    struct loop_producer *p = arg;
    loop_open(&p->loop);
    CHECK_EQ(mux_async_init(&p->room, lp_room_cb), 0);
    p->room.data = p;
    CHECK_EQ(mux_async_start(&p->loop, &p->room), 0);
    while (!atomic_load(&p->f->go))
        sched_yield();
    lp_send_more(p);
    CHECK_EQ(mux_run(&p->loop, MUX_RUN_DEFAULT), 0);
    loop_close(&p->loop);
    return NULL;
}

THREAD_TEST(chan_sender_loops_wait_for_room_with_their_own_async) {
#ifdef _WIN32
    harness_watchdog(110); /* Wine's select wakes a loop in about a millisecond: 60 s or so */
#endif
    mux_loop_t loop;
    loop_open(&loop);
    static struct fanin f;
    memset(&f, 0, sizeof f);
    atomic_init(&f.go, 0);
    f.chan.data = &f;
    CHECK_EQ(mux_chan_open(&loop, &f.chan, 8, fanin_cb), 0);
    pthread_t th[PRODUCERS];
    static struct loop_producer p[PRODUCERS];
    for (unsigned i = 0; i < PRODUCERS; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].f = &f;
        p[i].id = i;
        CHECK_EQ(pthread_create(&th[i], NULL, loop_producer_thread, &p[i]), 0);
    }
    atomic_store(&f.go, 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    /* The channel closed when the last message came: a sender waiting for room then was
     * sent its async by the close, and found everything sent. */
    for (unsigned i = 0; i < PRODUCERS; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0);
    CHECK_EQ(f.total, PRODUCERS * PER_PRODUCER);
    CHECK_EQ(f.out_of_order, 0);
    for (unsigned i = 0; i < PRODUCERS; i++)
        CHECK_EQ(p[i].sent, PER_PRODUCER);
    loop_finish(&loop);
}

/* ---- closing while threads send: every message sent is delivered or cancelled ---- */

struct closing {
    mux_chan_t chan;
    atomic_int go;
    atomic_long sent;   /* messages whose send returned 0 */
    long delivered, cancelled;
    int close_after;
};

static void closing_cb(mux_chan_t *c, mux_msg_t *m, int status)
{
    struct closing *k = c->data;
    CHECK(m->ptr != NULL);
    CHECK_EQ(*(uint64_t *)m->ptr, m->value);
    free(m->ptr); /* the message owned it: a lost message would leak it */
    if (status == 0) {
        if (++k->delivered == k->close_after)
            CHECK_EQ(mux_chan_close(c), 0);
    } else {
        CHECK_EQ(status, -ECANCELED);
        k->cancelled++;
    }
}

static void *closing_sender(void *arg)
{
    struct closing *k = arg;
    while (!atomic_load(&k->go))
        sched_yield();
    for (uint64_t i = 1;; i++) {
        uint64_t *box = malloc(sizeof *box);
        CHECK(box != NULL);
        *box = i;
        mux_msg_t m = {.ptr = box, .value = i, .sock = MUX_OS_SOCK_INVALID};
        int r = mux_chan_send(&k->chan, &m);
        if (r == 0) {
            atomic_fetch_add(&k->sent, 1);
            continue;
        }
        free(box); /* not sent: still ours */
        if (r == -EPIPE)
            return NULL;
        CHECK_EQ(r, -EAGAIN);
        sched_yield();
    }
}

THREAD_TEST(chan_close_while_threads_send_loses_no_message) {
#ifdef _WIN32
    harness_watchdog(110); /* Wine's select wakes a loop in about a millisecond */
#endif
    mux_loop_t loop;
    loop_open(&loop);
    static struct closing k;
    memset(&k, 0, sizeof k);
    atomic_init(&k.go, 0);
    atomic_init(&k.sent, 0);
    k.close_after = 5000;
    k.chan.data = &k;
    CHECK_EQ(mux_chan_open(&loop, &k.chan, 32, closing_cb), 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, closing_sender, &k), 0);
    atomic_store(&k.go, 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0); /* each ended on -EPIPE */
    CHECK_EQ(k.delivered, k.close_after);
    CHECK_EQ(k.delivered + k.cancelled, atomic_load(&k.sent));
    loop_finish(&loop);
}
