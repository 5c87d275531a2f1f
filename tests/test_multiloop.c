/* SPDX-License-Identifier: MIT */
/* A loop per core: CPU steering of a SO_REUSEPORT group (SO_INCOMING_CPU and the classic BPF
 * program), connections accepted on one loop and served on worker loops in other threads,
 * and a process of several loops that SIGTERM closes cleanly. Loopback only, ports from the
 * kernel. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "iomux/http.h"
#include "stream_util.h"

/* ---- steering ---- */

#ifdef _WIN32
#define NO_STEERING "Windows has no such thing: no SO_REUSEPORT group to steer (-ENOTSUP)"
#else
#define NO_STEERING "this build or system has no such CPU steering (-ENOTSUP)"
#endif

/* The first two CPUs this process may run on, or SKIP. */
static void two_cpus(int cpu[2])
{
    cpu_set_t set;
    CHECK_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    int n = 0;
    for (int i = 0; i < CPU_SETSIZE && n < 2; i++)
        if (CPU_ISSET(i, &set))
            cpu[n++] = i;
    if (n < 2)
        SKIP("steering needs two CPUs to run on, and this process has one");
}

static void pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    CHECK_EQ(sched_setaffinity(0, sizeof set, &set), 0);
}

/* Linux picks a reuseport group's listener by SO_INCOMING_CPU from 6.2 on (before, the option
 * only weighed in a score that the group's hash then overrode). */
static int kernel_at_least(int major, int minor)
{
    struct utsname u;
    int ma = 0, mi = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
        return 0;
    return ma > major || (ma == major && mi >= minor);
}

struct steered {
    mux_listener_t l;
    int accepted;
};

static void steered_accept_cb(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    struct steered *s = l->data;
    CHECK_EQ(status, 0);
    s->accepted++;
    close(sock);
}

/* Two loops (one thread) listen on one port, listener i steered to cpu[i]; connections made
 * from a thread pinned to each CPU in turn all reach that CPU's listener. */
static void steering_case(unsigned flag)
{
    int cpu[2];
    two_cpus(cpu);
    if (flag == MUX_LISTEN_CPU_BPF && (cpu[0] != 0 || cpu[1] != 1))
        SKIP("the BPF program maps CPU k to the k-th listener: needs CPUs 0 and 1");
    mux_loop_t loop[2];
    struct steered st[2];
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    for (int i = 0; i < 2; i++) {
        loop_open(&loop[i]);
        memset(&st[i], 0, sizeof st[i]);
        st[i].l.data = &st[i];
        mux_listen_options_t o = {.flags = flag, .cpu = cpu[i]};
        int r = mux_listen(&loop[i], &st[i].l, (struct sockaddr *)&a, alen, &o,
                           steered_accept_cb);
        if (r == -ENOTSUP)
            SKIP(NO_STEERING);
        CHECK_EQ(r, 0);
        if (flag == MUX_LISTEN_INCOMING_CPU && !kernel_at_least(6, 2))
            SKIP("SO_INCOMING_CPU selects a reuseport group's listener from Linux 6.2 on");
        if (i == 0) { /* the second joins the first's port */
            alen = sizeof a;
            CHECK_EQ(mux_listener_address(&st[0].l, (struct sockaddr *)&a, &alen), 0);
        }
    }
    cpu_set_t saved;
    CHECK_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
    enum { PER_CPU = 8 };
    for (int i = 0; i < 2; i++) {
        pin_self(cpu[i]);
        int fds[PER_CPU];
        for (int k = 0; k < PER_CPU; k++) {
            fds[k] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            CHECK_GE(fds[k], 0);
            CHECK_EQ(connect(fds[k], (struct sockaddr *)&a, alen), 0);
        }
        uint64_t end = mono_ns() + 5000 * MS;
        while (st[0].accepted + st[1].accepted < (i + 1) * PER_CPU && mono_ns() < end)
            for (int k = 0; k < 2; k++)
                CHECK_GE(mux_run(&loop[k], MUX_RUN_NOWAIT), 0);
        CHECK_EQ(st[i].accepted, PER_CPU);  /* every one to CPU i's listener */
        CHECK_EQ(st[1 - i].accepted, i == 0 ? 0 : PER_CPU);
        for (int k = 0; k < PER_CPU; k++)
            close(fds[k]);
    }
    CHECK_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(mux_listener_close(&st[i].l, NULL), 0);
        loop_finish(&loop[i]);
    }
}

TEST(listener_incoming_cpu_takes_the_connections_of_its_cpu) {
    steering_case(MUX_LISTEN_INCOMING_CPU);
}

TEST(listener_cpu_bpf_gives_cpu_k_to_the_kth_listener) {
    steering_case(MUX_LISTEN_CPU_BPF);
}

TEST(listener_steering_bad_input_returns_einval) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_listener_t l;
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    mux_listen_options_t both = {.flags = MUX_LISTEN_INCOMING_CPU | MUX_LISTEN_CPU_BPF};
    CHECK_EQ(mux_listen(&loop, &l, (struct sockaddr *)&a, alen, &both, steered_accept_cb),
             -EINVAL);
    mux_listen_options_t neg = {.flags = MUX_LISTEN_INCOMING_CPU, .cpu = -1};
    CHECK_EQ(mux_listen(&loop, &l, (struct sockaddr *)&a, alen, &neg, steered_accept_cb),
             -EINVAL);
    loop_finish(&loop);
}

TEST(listener_steering_on_a_unix_path_is_einval) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_listener_t l;
    char dir[64];
    tmpdir_make_unix(dir, sizeof dir);
    char path[128];
    snprintf(path, sizeof path, "%s/sock", dir);
    struct sockaddr_storage u;
    socklen_t ulen = addr_unix(&u, path);
    mux_listen_options_t bpf = {.flags = MUX_LISTEN_CPU_BPF};
    CHECK_EQ(mux_listen(&loop, &l, (struct sockaddr *)&u, ulen, &bpf, steered_accept_cb),
             -EINVAL); /* no steering for Unix sockets */
    tmpdir_remove(dir, NULL);
    loop_finish(&loop);
}

/* ---- one acceptor loop, worker loops in threads ---- */

enum { WORKERS = 2, CONNECTIONS = 60 };

/* The echo connections of one loop. */
struct conns {
    struct wconn *head;
    int served, closed; /* read by another thread after the join only */
};

struct wconn {
    mux_stream_t s;
    mux_write_t w;
    mux_buf_t out;
    struct conns *owner;
    struct wconn *next, *prev;
    char buf[256];
};

static void wconn_closed_cb(mux_stream_t *s)
{
    struct wconn *c = s->data;
    c->owner->closed++;
    free(c);
}

static void wconn_close(struct wconn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        c->owner->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    CHECK_EQ(mux_stream_close(&c->s, wconn_closed_cb), 0);
}

static void wconn_read_cb(mux_stream_t *s, ssize_t nread, char *buf);

/* A connection opened (by the caller, on `c->s`) starts echoing. */
static void wconn_add(struct conns *o, struct wconn *c)
{
    c->owner = o;
    c->next = o->head;
    if (c->next)
        c->next->prev = c;
    o->head = c;
    o->served++;
    CHECK_EQ(mux_read_start(&c->s, c->buf, sizeof c->buf, wconn_read_cb), 0);
}

static void conns_close(struct conns *o)
{
    while (o->head)
        wconn_close(o->head);
}

struct worker {
    mux_loop_t loop;
    mux_chan_t chan;
    mux_async_t stop;
    pthread_t th;
    struct conns conns;
};

static void wconn_written_cb(mux_write_t *req, int status)
{
    struct wconn *c = req->data;
    if (status == -ECANCELED)
        return;
    CHECK_EQ(status, 0);
    CHECK_EQ(mux_read_start(&c->s, c->buf, sizeof c->buf, wconn_read_cb), 0);
}

static void wconn_read_cb(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct wconn *c = s->data;
    if (nread <= 0) {
        wconn_close(c);
        return;
    }
    CHECK_EQ(mux_read_stop(s), 0);
    c->out = mux_buf_init(buf, (size_t)nread);
    c->w.data = c;
    CHECK_EQ(mux_write(s, &c->w, &c->out, 1, wconn_written_cb), 0);
}

static void worker_msg_cb(mux_chan_t *ch, mux_msg_t *m, int status)
{
    struct worker *wk = ch->data;
    if (status != 0)
        return; /* closing: the socket left in the message is closed for us */
    struct wconn *c = calloc(1, sizeof *c);
    CHECK(c != NULL);
    c->s.data = c;
    CHECK_EQ(mux_chan_stream_open(ch, &c->s, m), 0);
    CHECK(mux_stream_loop(&c->s) == &wk->loop);
    wconn_add(&wk->conns, c);
}

/* The main thread asks a worker to close everything: its loop then runs out of work. */
static void worker_stop_cb(mux_loop_t *loop, mux_async_t *a)
{
    struct worker *wk = a->data;
    CHECK_EQ(mux_async_stop(loop, a), 0);
    CHECK_EQ(mux_chan_close(&wk->chan), 0);
    conns_close(&wk->conns);
}

/* The loop is finished and closed on the thread that ran it: a loop on io_uring with
 * deferred task work belongs to the thread that first ran it (docs/backends.md). */
static void *worker_thread(void *arg)
{
    struct worker *wk = arg;
    CHECK_EQ(mux_run(&wk->loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&wk->loop);
    return NULL;
}

/* Opened on the main thread before the worker's thread starts: pthread_create publishes it. */
static void worker_start(struct worker *wk)
{
    memset(wk, 0, sizeof *wk);
    loop_open(&wk->loop);
    wk->chan.data = wk;
    CHECK_EQ(mux_chan_open(&wk->loop, &wk->chan, 16, worker_msg_cb), 0);
    CHECK_EQ(mux_async_init(&wk->stop, worker_stop_cb), 0);
    wk->stop.data = wk;
    CHECK_EQ(mux_async_start(&wk->loop, &wk->stop), 0);
    CHECK_EQ(pthread_create(&wk->th, NULL, worker_thread, wk), 0);
}

struct acceptor {
    mux_listener_t l;
    struct worker *wk;
    unsigned next;
    int handed, refused;
};

static void acceptor_cb(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    struct acceptor *ac = l->data;
    CHECK_EQ(status, 0);
    /* Round robin; a full worker's turn goes to the next (the channels hold 16 here, so
     * this test never finds every one full). */
    for (unsigned tries = 0; tries < WORKERS; tries++) {
        struct worker *wk = &ac->wk[ac->next++ % WORKERS];
        int r = mux_chan_send_socket(&wk->chan, l, sock, NULL);
        if (r == 0) {
            ac->handed++;
            return;
        }
        CHECK_EQ(r, -EAGAIN);
    }
    ac->refused++;
    close(sock);
}

struct client_job {
    struct sockaddr_storage a;
    socklen_t alen;
    atomic_int done, ok;
};

/* One blocking connection after the other: write a line, read its echo, close. */
static void *client_thread(void *arg)
{
    struct client_job *j = arg;
    for (int i = 0; i < CONNECTIONS; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_GE(fd, 0);
        CHECK_EQ(connect(fd, (struct sockaddr *)&j->a, j->alen), 0);
        char msg[32], back[32];
        int len = snprintf(msg, sizeof msg, "connection %d", i);
        CHECK_EQ(write(fd, msg, (size_t)len), len);
        int got = 0;
        while (got < len) {
            ssize_t n = read(fd, back + got, sizeof back - (size_t)got);
            CHECK_GT(n, 0);
            got += (int)n;
        }
        CHECK_EQ(got, len);
        CHECK(memcmp(msg, back, (size_t)len) == 0);
        close(fd);
        atomic_fetch_add(&j->ok, 1);
    }
    atomic_store(&j->done, 1);
    return NULL;
}

THREAD_TEST(multiloop_acceptor_hands_connections_to_worker_loops) {
    mux_loop_t main_loop;
    loop_open(&main_loop);
    static struct worker wk[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        worker_start(&wk[i]);
    struct acceptor ac = {.wk = wk};
    ac.l.data = &ac;
    static struct client_job job;
    memset(&job, 0, sizeof job);
    job.alen = addr_v4(&job.a, 0);
    CHECK_EQ(mux_listen(&main_loop, &ac.l, (struct sockaddr *)&job.a, job.alen, NULL,
                        acceptor_cb),
             0);
    job.alen = sizeof job.a;
    CHECK_EQ(mux_listener_address(&ac.l, (struct sockaddr *)&job.a, &job.alen), 0);
    atomic_init(&job.done, 0);
    atomic_init(&job.ok, 0);
    pthread_t cl;
    CHECK_EQ(pthread_create(&cl, NULL, client_thread, &job), 0);
    mux_timer_t tick; /* the last accept is not the end: wake up to look at the client */
    CHECK_EQ(mux_timer_init(&tick, ticker_cb), 0);
    CHECK_EQ(mux_timer_start(&main_loop, &tick, 5 * MS, 5 * MS), 0);
    uint64_t end = mono_ns() + 30000 * MS;
    while (!atomic_load(&job.done) && mono_ns() < end)
        CHECK_GE(mux_run(&main_loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(mux_timer_stop(&main_loop, &tick), 0);
    CHECK_EQ(pthread_join(cl, NULL), 0);
    CHECK_EQ(atomic_load(&job.ok), CONNECTIONS);
    CHECK_EQ(ac.handed, CONNECTIONS);
    CHECK_EQ(ac.refused, 0);
    CHECK_EQ(mux_listener_close(&ac.l, NULL), 0);
    for (int i = 0; i < WORKERS; i++)
        CHECK_EQ(mux_async_send(&wk[i].stop), 0); /* the workers' threads are still running */
    for (int i = 0; i < WORKERS; i++) {
        CHECK_EQ(pthread_join(wk[i].th, NULL), 0);
        CHECK_EQ(wk[i].conns.served, CONNECTIONS / WORKERS); /* round robin, none full */
        CHECK_EQ(wk[i].conns.closed, wk[i].conns.served);
    }
    loop_finish(&main_loop);
}

/* ---- SIGTERM to a process of several loops ---- */

enum { LOOPS = 3, HELD = 9 };

struct shard {
    mux_loop_t loop;
    mux_listener_t l;
    mux_async_t stop;
    pthread_t th;
    struct conns conns;
};

static struct shard shards[LOOPS];

static void shard_accept_cb(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    struct shard *sh = l->data;
    CHECK_EQ(status, 0);
    struct wconn *c = calloc(1, sizeof *c);
    CHECK(c != NULL);
    c->s.data = c;
    CHECK_EQ(mux_stream_accept(l, &c->s, sock), 0);
    wconn_add(&sh->conns, c);
}

/* Each loop closes what it owns when told; its mux_run then returns. */
static void shard_stop_cb(mux_loop_t *loop, mux_async_t *a)
{
    struct shard *sh = a->data;
    CHECK_EQ(mux_async_stop(loop, a), 0);
    CHECK_EQ(mux_listener_close(&sh->l, NULL), 0);
    conns_close(&sh->conns);
}

/* Loop 0 hears SIGTERM and tells every loop, itself included. */
static void shard_sigterm_cb(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    CHECK_EQ(signum, SIGTERM);
    CHECK_EQ(mux_signal_stop(loop, w), 0);
    for (int i = 0; i < LOOPS; i++)
        CHECK_EQ(mux_async_send(&shards[i].stop), 0);
}

static void *shard_thread(void *arg)
{
    struct shard *sh = arg;
    CHECK_EQ(mux_run(&sh->loop, MUX_RUN_DEFAULT), 0);
    loop_finish(&sh->loop); /* on its own thread, as worker_thread does */
    return NULL;
}

/* The child: LOOPS loops, one per thread (loop 0 on the main one), each listening on the
 * same port with SO_REUSEPORT. It writes the port to `out`, and after SIGTERM the number of
 * connections served and closed, then exits 0 if every loop closed clean. */
static void shard_process(int out)
{
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    mux_listen_options_t o = {.flags = MUX_LISTEN_REUSEPORT};
    for (int i = 0; i < LOOPS; i++) {
        struct shard *sh = &shards[i];
        loop_open(&sh->loop);
        sh->l.data = sh;
        CHECK_EQ(mux_listen(&sh->loop, &sh->l, (struct sockaddr *)&a, alen, &o, shard_accept_cb),
                 0);
        if (i == 0) {
            alen = sizeof a;
            CHECK_EQ(mux_listener_address(&sh->l, (struct sockaddr *)&a, &alen), 0);
        }
        CHECK_EQ(mux_async_init(&sh->stop, shard_stop_cb), 0);
        sh->stop.data = sh;
        CHECK_EQ(mux_async_start(&sh->loop, &sh->stop), 0);
    }
    mux_signal_t sigterm;
    CHECK_EQ(mux_signal_init(&sigterm, shard_sigterm_cb, SIGTERM), 0);
    CHECK_EQ(mux_signal_start(&shards[0].loop, &sigterm), 0);
    for (int i = 1; i < LOOPS; i++)
        CHECK_EQ(pthread_create(&shards[i].th, NULL, shard_thread, &shards[i]), 0);
    uint16_t port = addr_port(&a);
    CHECK_EQ(write(out, &port, sizeof port), (ssize_t)sizeof port);
    CHECK_EQ(mux_run(&shards[0].loop, MUX_RUN_DEFAULT), 0);
    int served = shards[0].conns.served, closed = shards[0].conns.closed;
    for (int i = 1; i < LOOPS; i++) {
        CHECK_EQ(pthread_join(shards[i].th, NULL), 0);
        served += shards[i].conns.served;
        closed += shards[i].conns.closed;
    }
    loop_finish(&shards[0].loop);
    int counts[2] = {served, closed};
    CHECK_EQ(write(out, counts, sizeof counts), (ssize_t)sizeof counts);
    child_exit(0);
}

THREAD_TEST(multiloop_sigterm_closes_every_loop_and_exits_zero) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        close(p[0]);
        shard_process(p[1]);
    }
    close(p[1]);
    uint16_t port = 0;
    CHECK_EQ(read(p[0], &port, sizeof port), (ssize_t)sizeof port);
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, port);
    int fds[HELD];
    for (int i = 0; i < HELD; i++) { /* held open, each echoed once: served by some loop */
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_GE(fds[i], 0);
        CHECK_EQ(connect(fds[i], (struct sockaddr *)&a, alen), 0);
        char c = 'a' + (char)i, back = 0;
        CHECK_EQ(write(fds[i], &c, 1), 1);
        CHECK_EQ(read(fds[i], &back, 1), 1);
        CHECK_EQ(back, c);
    }
    CHECK_EQ(kill(pid, SIGTERM), 0);
    int counts[2] = {-1, -1};
    CHECK_EQ(read(p[0], counts, sizeof counts), (ssize_t)sizeof counts);
    CHECK_EQ(counts[0], HELD);
    CHECK_EQ(counts[1], HELD); /* every connection closed by its loop */
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
    for (int i = 0; i < HELD; i++) { /* the server's side closed: end of stream */
        char b;
        CHECK_EQ(read(fds[i], &b, 1), 0);
        close(fds[i]);
    }
    close(p[0]);
}

/* ---- an HTTP server fed by another loop's listener ---- */

struct adopter {
    mux_http_server_t srv;
    mux_chan_t chan, other; /* other: a channel of another loop */
    int adopted, refused, answered;
};

static void adopter_request_cb(mux_http_exchange_t *x)
{
    struct adopter *ad = mux_http_exchange_server(x)->data;
    ad->answered++;
    CHECK_EQ(mux_http_respond(x, 200, NULL, 0, "adopted\n", 8), 0);
}

static void adopter_msg_cb(mux_chan_t *ch, mux_msg_t *m, int status)
{
    struct adopter *ad = ch->data;
    CHECK_EQ(status, 0);
    /* A channel of another loop is refused, and the socket stays in the message. */
    CHECK_EQ(mux_http_server_adopt(&ad->srv, &ad->other, m), -EINVAL);
    CHECK_NE(m->sock, MUX_OS_SOCK_INVALID);
    CHECK_EQ(mux_http_server_adopt(&ad->srv, ch, m), 0);
    CHECK_EQ(m->sock, MUX_OS_SOCK_INVALID);
    ad->adopted++;
}

static void adopter_accept_cb(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    struct adopter *ad = l->data;
    CHECK_EQ(status, 0);
    CHECK_EQ(mux_chan_send_socket(&ad->chan, l, sock, NULL), 0);
}

TEST(http_server_adopts_a_connection_another_loop_accepted) {
    mux_loop_t acceptor, worker;
    loop_open(&acceptor);
    loop_open(&worker);
    struct adopter ad;
    memset(&ad, 0, sizeof ad);
    CHECK_EQ(mux_http_server_init(&ad.srv, &worker, NULL, adopter_request_cb), 0);
    ad.srv.data = &ad;
    ad.chan.data = ad.other.data = &ad;
    CHECK_EQ(mux_chan_open(&worker, &ad.chan, 4, adopter_msg_cb), 0);
    CHECK_EQ(mux_chan_open(&acceptor, &ad.other, 4, adopter_msg_cb), 0);
    mux_listener_t l;
    l.data = &ad;
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    CHECK_EQ(mux_listen(&acceptor, &l, (struct sockaddr *)&a, alen, NULL, adopter_accept_cb), 0);
    alen = sizeof a;
    CHECK_EQ(mux_listener_address(&l, (struct sockaddr *)&a, &alen), 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    CHECK_EQ(connect(fd, (struct sockaddr *)&a, alen), 0);
    const char req[] = "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    CHECK_EQ(write(fd, req, sizeof req - 1), (ssize_t)(sizeof req - 1));
    CHECK_EQ(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
    char got[1024];
    size_t n = 0;
    uint64_t end = mono_ns() + 5000 * MS;
    for (;;) {
        CHECK_GE(mux_run(&acceptor, MUX_RUN_NOWAIT), 0);
        CHECK_GE(mux_run(&worker, MUX_RUN_NOWAIT), 0);
        ssize_t r = read(fd, got + n, sizeof got - 1 - n);
        if (r == 0)
            break; /* Connection: close: the answer is whole */
        if (r > 0)
            n += (size_t)r;
        CHECK_LT(mono_ns(), end);
    }
    got[n] = 0;
    CHECK(strncmp(got, "HTTP/1.1 200", 12) == 0);
    CHECK(strstr(got, "\r\n\r\nadopted\n") != NULL);
    CHECK_EQ(ad.adopted, 1);
    CHECK_EQ(ad.answered, 1);
    close(fd);
    CHECK_EQ(mux_listener_close(&l, NULL), 0);
    CHECK_EQ(mux_chan_close(&ad.chan), 0);
    CHECK_EQ(mux_chan_close(&ad.other), 0);
    CHECK_EQ(mux_http_server_close(&ad.srv, NULL), 0);
    loop_finish(&acceptor);
    loop_finish(&worker);
}
