/* Listeners: port 0 and the bound address, a thousand concurrent connections, running out
 * of descriptors (EMFILE) and recovering, SO_REUSEPORT, close callbacks, and the loop that
 * will not close while a listener is open. Loopback and private Unix paths only. */
#include <fcntl.h>
#include <sys/resource.h>

#include "stream_util.h"

TEST(stream_listener_port_zero_reports_the_bound_address) {
    mux_loop_t loop;
    loop_open(&loop);
    struct server srv;
    struct sockaddr_storage a;
    server_start(&loop, &srv, 1, &a, addr_v4(&a, 0), NULL);
    CHECK_EQ(srv.addrlen, sizeof(struct sockaddr_in));
    CHECK_EQ(srv.addr.ss_family, AF_INET);
    CHECK_NE(addr_port(&srv.addr), 0);
    CHECK_EQ(ntohl(((struct sockaddr_in *)&srv.addr)->sin_addr.s_addr), INADDR_LOOPBACK);
    CHECK(mux_listener_loop(&srv.l) == &loop);
    /* The port is really bound: a plain connect reaches it and is accepted. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    CHECK_EQ(connect(fd, (struct sockaddr *)&srv.addr, srv.addrlen), 0);
    volatile int *accepted = (volatile int *)&srv.accepted;
    run_for(&loop, accepted, 2000, "the plain connect was accepted");
    CHECK_EQ(srv.accepted, 1);
    close(fd); /* the peer sees end of stream and closes */
    while (srv.peers_closed < 1)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    server_close(&srv);
    run_for(&loop, &srv.listener_closed, 1000, "the listener closed");
    loop_finish(&loop);
    server_free(&srv);
}

/* ---- a thousand concurrent connections ---- */

#define MANY 1000

TEST(stream_listener_thousand_concurrent_connections_each_echo) {
    mux_loop_t loop;
    loop_open(&loop);
    if (loop_is(&loop, "select")) {
        loop_close(&loop);
        SKIP("select: FD_SETSIZE is 1024 and 1000 connections need over 2000 descriptors");
    }
    long limit = raise_nofile_limit();
    if (limit < 2 * MANY + 64) {
        loop_close(&loop);
        SKIP("RLIMIT_NOFILE hard limit below 2064: cannot open 1000 connections");
    }
    struct server srv;
    struct sockaddr_storage a;
    server_start(&loop, &srv, MANY, &a, addr_v4(&a, 0), NULL);
    struct client *c = calloc(MANY, sizeof *c);
    char(*msg)[32] = calloc(MANY, sizeof *msg);
    CHECK(c != NULL && msg != NULL);
    for (int i = 0; i < MANY; i++) {
        snprintf(msg[i], sizeof msg[i], "connection %04d says hello", i);
        client_start(&loop, &c[i], &srv.addr, srv.addrlen, msg[i]);
    }
    uint64_t end = mono_ns() + 8000 * MS;
    int closed = 0;
    while (closed < MANY || srv.peers_closed < MANY) {
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
        closed = 0;
        for (int i = 0; i < MANY; i++)
            closed += c[i].closed;
        if (mono_ns() > end) {
            fprintf(stderr, "clients done %d, accepted %d, server closed %d\n", closed,
                    srv.accepted, srv.peers_closed);
            harness_fail(__FILE__, __LINE__, "1000 echoes within 8 s", NULL);
        }
    }
    for (int i = 0; i < MANY; i++)
        client_check_echoed(&c[i]);
    CHECK_EQ(srv.accepted, MANY);
    CHECK_EQ(srv.accept_errors, 0);
    server_close(&srv);
    run_for(&loop, &srv.listener_closed, 1000, "the listener closed");
    loop_finish(&loop);
    free(c);
    free(msg);
    server_free(&srv);
}

/* ---- EMFILE ---- */

#define EM_CLIENTS 8
#define EM_FREE 3 /* descriptors left for accepted connections */

struct emfile {
    struct server srv;
    int cfd[EM_CLIENTS];
    mux_io_t cio[EM_CLIENTS];
    char msg[EM_CLIENTS][16];
    char got[EM_CLIENTS][16];
    size_t ngot[EM_CLIENTS];
    int echoed, release; /* release: a client that got its echo shuts down its side */
    mux_prepare_t prep;
    int iterations;
};

static void em_prepare_cb(mux_loop_t *loop, mux_prepare_t *w)
{
    struct emfile *e = w->data;
    (void)loop;
    e->iterations++;
}

static void em_client_cb(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct emfile *e = w->data;
    int i = (int)(w - e->cio);
    size_t want = strlen(e->msg[i]);
    CHECK(revents & MUX_READ);
    ssize_t n = read(e->cfd[i], e->got[i] + e->ngot[i], want - e->ngot[i]);
    CHECK_GT(n, 0);
    e->ngot[i] += (size_t)n;
    if (e->ngot[i] < want)
        return;
    CHECK(memcmp(e->got[i], e->msg[i], want) == 0);
    e->echoed++;
    CHECK_EQ(mux_io_stop(loop, w), 0);
    if (e->release)
        CHECK_EQ(shutdown(e->cfd[i], SHUT_WR), 0);
}

/* The lowest fd number such that exactly `n` free numbers lie below it. */
static int fd_limit_leaving(int n)
{
    for (int fd = 0;; fd++) {
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF && --n == 0)
            return fd + 1;
    }
}

TEST(stream_listener_emfile_is_reported_once_then_the_backlog_is_served) {
    mux_loop_t loop;
    loop_open(&loop);
    struct emfile *e = calloc(1, sizeof *e);
    CHECK(e != NULL);
    struct sockaddr_storage a;
    server_start(&loop, &e->srv, EM_CLIENTS, &a, addr_v4(&a, 0), NULL);
    CHECK_EQ(mux_prepare_init(&e->prep, em_prepare_cb), 0);
    e->prep.data = e;
    CHECK_EQ(mux_prepare_start(&loop, &e->prep), 0);
    /* Every client connects and sends before the limit is lowered; the kernel completes the
     * handshakes, so they wait in the listener's backlog. */
    for (int i = 0; i < EM_CLIENTS; i++) {
        snprintf(e->msg[i], sizeof e->msg[i], "client %d", i);
        e->cfd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_GE(e->cfd[i], 0);
        CHECK_EQ(connect(e->cfd[i], (struct sockaddr *)&e->srv.addr, e->srv.addrlen), 0);
        CHECK_EQ(write(e->cfd[i], e->msg[i], strlen(e->msg[i])), (ssize_t)strlen(e->msg[i]));
        CHECK_EQ(fcntl(e->cfd[i], F_SETFL, O_NONBLOCK), 0);
        CHECK_EQ(mux_io_init(&e->cio[i], em_client_cb, e->cfd[i], MUX_READ), 0);
        e->cio[i].data = e;
        CHECK_EQ(mux_io_start(&loop, &e->cio[i]), 0);
    }
    struct rlimit old, low;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)fd_limit_leaving(EM_FREE);
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);

    /* Phase 1: EM_FREE connections fit; the next accept fails with EMFILE. */
    volatile int *errs = (volatile int *)&e->srv.accept_errors;
    run_for(&loop, errs, 3000, "the accept callback reported running out of descriptors");
    CHECK_EQ(e->srv.last_error, -EMFILE);
    CHECK_EQ(e->srv.accepted, EM_FREE);
    int it0 = e->iterations;
    run_ms(&loop, 50);
    /* Paused, not spinning: one report, and only the 5 ms ticker's iterations. */
    CHECK_EQ(e->srv.accept_errors, 1);
    CHECK_LE(e->iterations - it0, 30);
    CHECK_EQ(e->srv.accepted, EM_FREE);
    CHECK_EQ(e->echoed, EM_FREE); /* the accepted ones were served meanwhile */
    /* Nothing freed: it retries by itself about every 100 ms, once each time. */
    it0 = e->iterations;
    run_ms(&loop, 300);
    CHECK_GE(e->srv.accept_errors, 2);
    CHECK_LE(e->srv.accept_errors, 5);
    CHECK_LE(e->iterations - it0, 120);
    CHECK_EQ(e->srv.accepted, EM_FREE);

    /* Phase 2: clients that got their echo hang up, the server closes those streams, and
     * every descriptor freed lets one more connection of the backlog in. */
    e->release = 1;
    for (int i = 0; i < EM_CLIENTS; i++)
        if (e->ngot[i] == strlen(e->msg[i]))
            CHECK_EQ(shutdown(e->cfd[i], SHUT_WR), 0);
    uint64_t end = mono_ns() + 5000 * MS;
    it0 = e->iterations;
    while (e->echoed < EM_CLIENTS || e->srv.peers_closed < EM_CLIENTS) {
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
        if (mono_ns() > end) {
            fprintf(stderr, "echoed %d, accepted %d, closed %d, accept errors %d\n", e->echoed,
                    e->srv.accepted, e->srv.peers_closed, e->srv.accept_errors);
            harness_fail(__FILE__, __LINE__, "the backlog was served", NULL);
        }
    }
    CHECK_EQ(e->srv.accepted, EM_CLIENTS);
    CHECK_LE(e->iterations - it0, 500);
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
    CHECK_EQ(mux_prepare_stop(&loop, &e->prep), 0);
    for (int i = 0; i < EM_CLIENTS; i++)
        close(e->cfd[i]);
    server_close(&e->srv);
    run_for(&loop, &e->srv.listener_closed, 1000, "the listener closed");
    loop_finish(&loop);
    server_free(&e->srv);
    free(e);
}

/* ---- SO_REUSEPORT ---- */

TEST(stream_listener_reuseport_lets_two_listeners_share_a_port) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_listen_options_t opts = {.flags = MUX_LISTEN_REUSEPORT};
    struct server s1, s2;
    struct sockaddr_storage a;
    server_start(&loop, &s1, 32, &a, addr_v4(&a, 0), &opts);
    server_start(&loop, &s2, 32, &s1.addr, s1.addrlen, &opts);
    CHECK_EQ(addr_port(&s2.addr), addr_port(&s1.addr));
    enum { N = 32 };
    struct client c[N];
    char msg[N][24];
    for (int i = 0; i < N; i++) {
        snprintf(msg[i], sizeof msg[i], "reuseport %d", i);
        client_start(&loop, &c[i], &s1.addr, s1.addrlen, msg[i]);
    }
    uint64_t end = mono_ns() + 5000 * MS;
    for (int i = 0; i < N; i++) {
        while (!c[i].closed) {
            CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
            CHECK_LT(mono_ns(), end);
        }
        client_check_echoed(&c[i]);
    }
    while (s1.peers_closed + s2.peers_closed < N)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(s1.accepted + s2.accepted, N);
    server_close(&s1);
    server_close(&s2);
    run_for(&loop, &s1.listener_closed, 1000, "the first listener closed");
    run_for(&loop, &s2.listener_closed, 1000, "the second listener closed");
    loop_finish(&loop);
    server_free(&s1);
    server_free(&s2);
}

static void never_accept_cb(mux_listener_t *l, int fd, int status)
{
    (void)l;
    (void)fd;
    (void)status;
    harness_fail(__FILE__, __LINE__, "no connection was expected", NULL);
}

TEST(stream_listener_second_bind_without_reuseport_is_eaddrinuse) {
    mux_loop_t loop;
    loop_open(&loop);
    struct server s1;
    struct sockaddr_storage a;
    server_start(&loop, &s1, 1, &a, addr_v4(&a, 0), NULL);
    mux_listener_t l2;
    memset(&l2, 0, sizeof l2);
    int active = mux_loop_active(&loop);
    CHECK_GT(active, 0);
    CHECK_EQ(mux_listen(&loop, &l2, (struct sockaddr *)&s1.addr, s1.addrlen, NULL,
                        never_accept_cb),
             -EADDRINUSE);
    CHECK(mux_listener_loop(&l2) == NULL); /* not open */
    CHECK_EQ(mux_listener_close(&l2, NULL), -EINVAL);
    CHECK_EQ(mux_loop_active(&loop), active); /* the failed listen left nothing behind */
    server_close(&s1);
    run_for(&loop, &s1.listener_closed, 1000, "the listener closed");
    loop_finish(&loop);
    server_free(&s1);
}

TEST(stream_listener_unix_path_with_a_socket_file_is_eaddrinuse) {
    mux_loop_t loop;
    loop_open(&loop);
    char dir[64], path[128];
    tmpdir_make(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/sock", dir);
    struct sockaddr_storage a;
    socklen_t alen = addr_unix(&a, path);
    struct server s1;
    server_start(&loop, &s1, 1, &a, alen, NULL);
    CHECK_EQ(s1.addr.ss_family, AF_UNIX);
    CHECK_STR_EQ(((struct sockaddr_un *)&s1.addr)->sun_path, path);
    mux_listener_t l2;
    memset(&l2, 0, sizeof l2);
    CHECK_EQ(mux_listen(&loop, &l2, (struct sockaddr *)&a, alen, NULL, never_accept_cb),
             -EADDRINUSE);
    server_close(&s1);
    run_for(&loop, &s1.listener_closed, 1000, "the listener closed");
    /* A stale socket file is not removed either. */
    struct stat st;
    if (stat(path, &st) == 0)
        CHECK_EQ(mux_listen(&loop, &l2, (struct sockaddr *)&a, alen, NULL, never_accept_cb),
                 -EADDRINUSE);
    loop_finish(&loop);
    tmpdir_remove(dir, "sock");
    server_free(&s1);
}

/* ---- close ---- */

struct lclose {
    mux_listener_t l;
    int calls;
    volatile int closed;
};

static void lclose_cb(mux_listener_t *l)
{
    struct lclose *c = l->data;
    c->calls++;
    c->closed = 1;
    CHECK(mux_listener_loop(l) == NULL); /* the caller's again */
}

TEST(stream_listener_close_callback_runs_once_from_the_loop_and_frees_the_port) {
    mux_loop_t loop;
    loop_open(&loop);
    struct lclose c;
    memset(&c, 0, sizeof c);
    c.l.data = &c;
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    CHECK_EQ(mux_listen(&loop, &c.l, (struct sockaddr *)&a, alen, NULL, never_accept_cb), 0);
    alen = sizeof a;
    CHECK_EQ(mux_listener_address(&c.l, (struct sockaddr *)&a, &alen), 0);
    CHECK_EQ(mux_listener_close(&c.l, lclose_cb), 0);
    CHECK_EQ(c.calls, 0); /* not from inside the call */
    CHECK_EQ(mux_listener_close(&c.l, lclose_cb), -EALREADY);
    CHECK_EQ(mux_listener_address(&c.l, (struct sockaddr *)&a, &alen), -EINVAL);
    run_for(&loop, &c.closed, 1000, "the close callback");
    CHECK_EQ(c.calls, 1);
    CHECK_EQ(mux_listener_close(&c.l, lclose_cb), -EINVAL);
    run_ms(&loop, 10);
    CHECK_EQ(c.calls, 1);
    /* The socket is closed: nobody listens on the port any more. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    CHECK_EQ(connect(fd, (struct sockaddr *)&a, alen), -1);
    CHECK_EQ(errno, ECONNREFUSED);
    close(fd);
    loop_finish(&loop);
}

TEST(stream_listener_loop_close_is_ebusy_until_the_listener_close_callback_ran) {
    mux_loop_t loop;
    loop_open(&loop);
    struct lclose c;
    memset(&c, 0, sizeof c);
    c.l.data = &c;
    struct sockaddr_storage a;
    socklen_t alen = addr_v4(&a, 0);
    CHECK_EQ(mux_listen(&loop, &c.l, (struct sockaddr *)&a, alen, NULL, never_accept_cb), 0);
    CHECK_GT(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_loop_close(&loop), -EBUSY);
    CHECK_EQ(mux_listener_close(&c.l, lclose_cb), 0);
    CHECK_EQ(mux_loop_close(&loop), -EBUSY);
    run_for(&loop, &c.closed, 1000, "the close callback");
    loop_finish(&loop);
}

TEST(stream_listener_with_batch_one_still_accepts_every_connection) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_listen_options_t opts = {.backlog = 16, .batch = 1};
    struct server srv;
    struct sockaddr_storage a;
    server_start(&loop, &srv, 8, &a, addr_v4(&a, 0), &opts);
    struct client c[8];
    char msg[8][16];
    for (int i = 0; i < 8; i++) {
        snprintf(msg[i], sizeof msg[i], "batch %d", i);
        client_start(&loop, &c[i], &srv.addr, srv.addrlen, msg[i]);
    }
    uint64_t end = mono_ns() + 3000 * MS;
    for (int i = 0; i < 8; i++) {
        while (!c[i].closed) {
            CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
            CHECK_LT(mono_ns(), end);
        }
        client_check_echoed(&c[i]);
    }
    while (srv.peers_closed < 8)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(srv.accepted, 8);
    server_close(&srv);
    run_for(&loop, &srv.listener_closed, 1000, "the listener closed");
    loop_finish(&loop);
    server_free(&srv);
}
