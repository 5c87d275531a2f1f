/* SPDX-License-Identifier: MIT */
/* Name resolution on the worker pool (mux_getaddrinfo, mux_getnameinfo) and the connect by
 * host name (mux_dial). None of these asks the network: "localhost" comes from /etc/hosts,
 * addresses are numeric, unknown names are under ".invalid" (RFC 6761) or refused by
 * AI_NUMERICHOST, and the one lookup that blocks is made to block on a FIFO of the case's. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "iomux/work.h"
#include "stream_util.h"
#include "work_util.h"

struct lookup {
    mux_getaddrinfo_t req;
    int calls, status;
    struct addrinfo *res;
};

static void lookup_cb(mux_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct lookup *l = req->data;
    l->calls++;
    l->status = status;
    l->res = res;
}

static void lookup_start(mux_loop_t *loop, struct lookup *l, const char *node, const char *service,
                         int family, int flags)
{
    memset(l, 0, sizeof *l);
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags;
    l->req.data = l;
    CHECK_EQ(mux_getaddrinfo(loop, &l->req, lookup_cb, node, service, &hints), 0);
    CHECK_EQ(l->req.data, l);
    CHECK_EQ(l->calls, 0); /* never from inside the call */
}

static void lookup_wait(mux_loop_t *loop, struct lookup *l)
{
    while (l->calls == 0)
        CHECK_GE(mux_run(loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(l->calls, 1);
}

THREAD_TEST(getaddrinfo_localhost_answers_the_loopback_address)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct lookup l;
    lookup_start(&loop, &l, "localhost", "80", AF_INET, 0);
    CHECK_EQ(mux_loop_active(&loop), 1);
    lookup_wait(&loop, &l);
    CHECK_EQ(l.status, 0);
    CHECK(l.res != NULL);
    CHECK_EQ(l.res->ai_family, AF_INET);
    const struct sockaddr_in *a = (const struct sockaddr_in *)l.res->ai_addr;
    CHECK_EQ(ntohl(a->sin_addr.s_addr), INADDR_LOOPBACK);
    CHECK_EQ(ntohs(a->sin_port), 80);
    mux_freeaddrinfo(l.res);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

THREAD_TEST(getaddrinfo_numeric_ipv6_address_and_port)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct lookup l;
    lookup_start(&loop, &l, "::1", "443", AF_UNSPEC, AI_NUMERICHOST | AI_NUMERICSERV);
    lookup_wait(&loop, &l);
    CHECK_EQ(l.status, 0);
    CHECK_EQ(l.res->ai_family, AF_INET6);
    CHECK(l.res->ai_next == NULL);
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)l.res->ai_addr;
    CHECK(IN6_IS_ADDR_LOOPBACK(&a->sin6_addr));
    CHECK_EQ(ntohs(a->sin6_port), 443);
    mux_freeaddrinfo(l.res);
    loop_close(&loop);
}

THREAD_TEST(getaddrinfo_a_name_under_invalid_is_refused_without_the_pool)
{
    mux_loop_t loop;
    loop_open(&loop);
    const char *names[] = {"host.invalid", "INVALID", "a.b.Invalid.", "invalid."};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct lookup l;
        lookup_start(&loop, &l, names[i], NULL, AF_UNSPEC, 0);
        CHECK_EQ(mux_loop_active(&loop), 1);
        lookup_wait(&loop, &l);
        CHECK_EQ(l.status, MUX_EAI_NONAME);
        CHECK(l.res == NULL);
    }
    unsigned started = 99;
    mux_work_pool_threads(&started);
    CHECK_EQ(started, 0); /* no thread was asked */
    /* Names that only look alike go to the system. */
    struct lookup l;
    lookup_start(&loop, &l, "invalid.localhost.nosuchtld-x", NULL, AF_UNSPEC, AI_NUMERICHOST);
    lookup_wait(&loop, &l);
    CHECK_EQ(l.status, MUX_EAI_NONAME);
    mux_work_pool_threads(&started);
    CHECK_EQ(started, 1);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

THREAD_TEST(getaddrinfo_numerichost_refuses_a_name_with_eai_noname)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct lookup l;
    lookup_start(&loop, &l, "localhost", NULL, AF_UNSPEC, AI_NUMERICHOST);
    lookup_wait(&loop, &l);
    CHECK_EQ(l.status, MUX_EAI_NONAME);
    CHECK(l.res == NULL);
    CHECK(strstr(mux_strerror(l.status), "EAI_NONAME") != NULL);
    loop_close(&loop);
}

THREAD_TEST(getaddrinfo_bad_flags_and_family_are_reported)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct lookup l;
    lookup_start(&loop, &l, "127.0.0.1", NULL, AF_UNSPEC, 0x7fff0000);
    lookup_wait(&loop, &l);
#ifdef _WIN32
    /* The flags go to the system as they are, and Wine's getaddrinfo ignores the ones it does
     * not know where glibc says EAI_BADFLAGS: it answers. */
    CHECK_EQ(l.status, 0);
    mux_freeaddrinfo(l.res);
#else
    CHECK_EQ(l.status, MUX_EAI_BADFLAGS);
#endif
    lookup_start(&loop, &l, "127.0.0.1", NULL, 12345, 0);
    lookup_wait(&loop, &l);
    CHECK_EQ(l.status, MUX_EAI_FAMILY);
    loop_close(&loop);
}

THREAD_TEST(getaddrinfo_unknown_service_and_socket_type_are_reported)
{
#ifdef _WIN32
    SKIP("Wine's getaddrinfo answers an unknown service or socket type with Winsock's own "
         "errors, not the EAI_SERVICE and EAI_SOCKTYPE of POSIX");
#else
    mux_loop_t loop;
    loop_open(&loop);
    struct lookup l;
    /* A service name that no services file holds: the system asks no server for it. */
    lookup_start(&loop, &l, "127.0.0.1", "iomux-no-such-service", AF_INET, 0);
    lookup_wait(&loop, &l);
    CHECK_EQ(l.status, MUX_EAI_SERVICE);
    CHECK(l.res == NULL);
    memset(&l, 0, sizeof l);
    l.req.data = &l;
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = 12345;
    CHECK_EQ(mux_getaddrinfo(&loop, &l.req, lookup_cb, "127.0.0.1", "80", &hints), 0);
    lookup_wait(&loop, &l);
    CHECK_EQ(l.status, MUX_EAI_SOCKTYPE);
    CHECK(l.res == NULL);
    loop_close(&loop);
#endif
}

/* A name under ".invalid" is answered from the loop without the pool; cancelled before that
 * answer runs, it is called back with -ECANCELED instead. A name that only ends like it goes
 * to the system (AI_NUMERICHOST: refused there without asking a server). */
THREAD_TEST(getaddrinfo_a_refused_name_cancelled_before_its_callback_calls_back_ecanceled)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct lookup l;
    lookup_start(&loop, &l, "host.invalid", "80", AF_INET, 0);
    CHECK_EQ(mux_getaddrinfo_cancel(&l.req), 0);
    CHECK_EQ(mux_getaddrinfo_cancel(&l.req), 0); /* still pending: again is fine */
    CHECK_EQ(l.calls, 0);
    lookup_wait(&loop, &l);
    CHECK_EQ(l.status, -ECANCELED);
    CHECK(l.res == NULL);
    CHECK_EQ(mux_getaddrinfo_cancel(&l.req), -EINVAL); /* called back */
    CHECK_EQ(mux_loop_active(&loop), 0);
    const char *alike[] = {"host.invalie", "host.xinvalid", "nvalid"};
    for (size_t i = 0; i < sizeof alike / sizeof *alike; i++) {
        lookup_start(&loop, &l, alike[i], NULL, AF_UNSPEC, AI_NUMERICHOST);
        lookup_wait(&loop, &l);
        CHECK_EQ(l.status, MUX_EAI_NONAME);
    }
    unsigned started = 0;
    mux_work_pool_threads(&started);
    CHECK_GE(started, 1); /* the look-alikes went to the pool */
    loop_close(&loop);
}

THREAD_TEST(getaddrinfo_bad_input_is_einval)
{
    mux_loop_t loop;
    loop_open(&loop);
    mux_getaddrinfo_t req;
    memset(&req, 0, sizeof req);
    CHECK_EQ(mux_getaddrinfo(NULL, &req, lookup_cb, "localhost", NULL, NULL), -EINVAL);
    CHECK_EQ(mux_getaddrinfo(&loop, NULL, lookup_cb, "localhost", NULL, NULL), -EINVAL);
    CHECK_EQ(mux_getaddrinfo(&loop, &req, NULL, "localhost", NULL, NULL), -EINVAL);
    CHECK_EQ(mux_getaddrinfo(&loop, &req, lookup_cb, NULL, NULL, NULL), -EINVAL);
    char *longname = malloc(2000);
    CHECK(longname != NULL);
    memset(longname, 'a', 1999);
    longname[1999] = '\0';
    CHECK_EQ(mux_getaddrinfo(&loop, &req, lookup_cb, longname, NULL, NULL), -EINVAL);
    free(longname);
    CHECK_EQ(mux_getaddrinfo_cancel(NULL), -EINVAL);
    CHECK_EQ(mux_getaddrinfo_cancel(&req), -EINVAL); /* never started */
    mux_freeaddrinfo(NULL);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

/* ---- cancellation ---- */

static int fifo_gate_open;

static void fifo_gate_work(mux_work_t *w)
{
    (void)w;
    while (!__atomic_load_n(&fifo_gate_open, __ATOMIC_SEQ_CST))
        usleep(1000);
}

THREAD_TEST(getaddrinfo_cancelled_while_queued_never_runs_and_calls_back_ecanceled)
{
    CHECK_EQ(mux_work_pool_size(1), 0);
    mux_loop_t loop;
    loop_open(&loop);
    mux_work_t blocker;
    memset(&blocker, 0, sizeof blocker);
    CHECK_EQ(mux_work_queue(&loop, &blocker, fifo_gate_work, NULL), 0);
    struct lookup l;
    lookup_start(&loop, &l, "localhost", "80", AF_INET, 0);
    CHECK_EQ(mux_getaddrinfo_cancel(&l.req), 0);
    CHECK_EQ(l.calls, 0);                        /* from the loop */
    CHECK_EQ(mux_getaddrinfo_cancel(&l.req), 0); /* still pending: again is fine */
    lookup_wait(&loop, &l);
    CHECK_EQ(l.status, -ECANCELED);
    CHECK(l.res == NULL);
    CHECK_EQ(mux_getaddrinfo_cancel(&l.req), -EINVAL); /* called back */
    __atomic_store_n(&fifo_gate_open, 1, __ATOMIC_SEQ_CST);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_close(&loop);
}

/* A lookup that blocks inside the system's resolver: glibc reads the host aliases file that
 * HOSTALIASES names for a name without a dot that /etc/hosts lacks, and opening a FIFO
 * blocks until a writer comes. */
THREAD_TEST(getaddrinfo_cancelled_while_it_runs_is_called_back_at_once_and_abandoned)
{
#ifdef _WIN32
    SKIP("a lookup held inside the resolver needs glibc's HOSTALIASES and a FIFO, which "
         "Windows has neither of");
#else
    char dir[] = "/tmp/iomux-resolve-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/aliases", dir);
    CHECK_EQ(mkfifo(path, 0600), 0);
    CHECK_EQ(setenv("HOSTALIASES", path, 1), 0);
    CHECK_EQ(setenv("RES_OPTIONS", "timeout:1 attempts:1", 1), 0);
    CHECK_EQ(mux_work_pool_size(1), 0);
    mux_loop_t loop;
    loop_open(&loop);
    struct lookup l;
    lookup_start(&loop, &l, "iomuxblocks", NULL, AF_INET, 0);
    /* A reader in the FIFO's open: the lookup runs, inside the resolver. */
    int fd = -1;
    for (int i = 0; i < 3000 && fd < 0; i++) {
        if (l.calls) {
            unlink(path);
            rmdir(dir);
            SKIP("the system's resolver did not read HOSTALIASES (not glibc's, or hosts not "
                 "looked up through it)");
        }
        mux_run(&loop, MUX_RUN_NOWAIT);
        fd = open(path, O_RDONLY | O_NONBLOCK); /* a reader of ours does not count... */
        if (fd >= 0) {
            close(fd);
            fd = open(path, O_WRONLY | O_NONBLOCK); /* ...a writer opens only with one of its */
        }
        if (fd < 0)
            sleep_ms(1);
    }
    CHECK_GE(fd, 0);
    close(fd); /* it reads an empty file and opens the FIFO again, and blocks */
    CHECK_EQ(mux_getaddrinfo_cancel(&l.req), 0);
    CHECK_EQ(mux_loop_active(&loop), 1); /* the callback still to come */
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(l.calls, 1);
    CHECK_EQ(l.status, -ECANCELED);
    CHECK(l.res == NULL);
    loop_close(&loop); /* the lookup still runs on its thread */
    /* Let it finish: whatever it answers, its thread frees it (LeakSanitizer checks). */
    CHECK_EQ(unsetenv("HOSTALIASES"), 0);
    for (int i = 0; i < 2000; i++) {
        int w = open(path, O_WRONLY | O_NONBLOCK);
        if (w >= 0)
            close(w);
        sleep_ms(1);
    }
    unlink(path);
    rmdir(dir);
#endif
}

enum { STORM = 300 };

THREAD_TEST(getaddrinfo_300_lookups_cancelled_at_every_stage_each_call_back_once)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct lookup *l = calloc(STORM, sizeof *l);
    CHECK(l != NULL);
    int ok = 0, cancelled = 0;
    for (int i = 0; i < STORM; i++) {
        lookup_start(&loop, &l[i], "localhost", "80", AF_INET, 0);
        if (i % 3 == 0) /* at once: most still queued */
            CHECK_EQ(mux_getaddrinfo_cancel(&l[i].req), 0);
        if (i % 7 == 0)
            mux_run(&loop, MUX_RUN_NOWAIT);
        if (i % 5 == 0 && i >= 5 && l[i - 5].calls == 0) /* a while later: running, or done */
            CHECK_EQ(mux_getaddrinfo_cancel(&l[i - 5].req), 0);
    }
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    for (int i = 0; i < STORM; i++) {
        CHECK_EQ(l[i].calls, 1);
        if (l[i].status == 0) {
            CHECK(l[i].res != NULL);
            mux_freeaddrinfo(l[i].res);
            ok++;
        } else {
            CHECK_EQ(l[i].status, -ECANCELED);
            CHECK(l[i].res == NULL);
            cancelled++;
        }
        if (i % 3 == 0)
            CHECK_EQ(l[i].status, -ECANCELED);
    }
    CHECK_GE(cancelled, STORM / 3);
    CHECK_GT(ok, 0);
    free(l);
    loop_close(&loop);
}

/* ---- getnameinfo ---- */

struct names {
    mux_getnameinfo_t req;
    int calls, status;
    char host[256], serv[64];
};

static void names_cb(mux_getnameinfo_t *req, int status, const char *host, const char *serv)
{
    struct names *n = req->data;
    n->calls++;
    n->status = status;
    if (status == 0) {
        snprintf(n->host, sizeof n->host, "%s", host);
        snprintf(n->serv, sizeof n->serv, "%s", serv);
    } else {
        CHECK(host == NULL && serv == NULL);
    }
}

THREAD_TEST(getnameinfo_names_the_loopback_address_numerically_and_by_name)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct sockaddr_storage ss;
    socklen_t len = addr_v4(&ss, 8080);
    struct names n;
    memset(&n, 0, sizeof n);
    n.req.data = &n;
    CHECK_EQ(mux_getnameinfo(&loop, &n.req, names_cb, (struct sockaddr *)&ss, len,
                             NI_NUMERICHOST | NI_NUMERICSERV),
             0);
    CHECK_EQ(n.calls, 0);
    while (!n.calls)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(n.status, 0);
    CHECK_STR_EQ(n.host, "127.0.0.1");
    CHECK_STR_EQ(n.serv, "8080");
    /* By name: /etc/hosts says 127.0.0.1 is localhost. */
    memset(&n, 0, sizeof n);
    n.req.data = &n;
    CHECK_EQ(mux_getnameinfo(&loop, &n.req, names_cb, (struct sockaddr *)&ss, len,
                             NI_NUMERICSERV | NI_NAMEREQD),
             0);
    while (!n.calls)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(n.status, 0);
    CHECK_STR_EQ(n.host, "localhost");
    loop_close(&loop);
}

THREAD_TEST(getnameinfo_bad_input_and_an_unknown_family)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct sockaddr_storage ss;
    socklen_t len = addr_v4(&ss, 80);
    struct names n;
    memset(&n, 0, sizeof n);
    n.req.data = &n;
    CHECK_EQ(mux_getnameinfo(NULL, &n.req, names_cb, (struct sockaddr *)&ss, len, 0), -EINVAL);
    CHECK_EQ(mux_getnameinfo(&loop, NULL, names_cb, (struct sockaddr *)&ss, len, 0), -EINVAL);
    CHECK_EQ(mux_getnameinfo(&loop, &n.req, NULL, (struct sockaddr *)&ss, len, 0), -EINVAL);
    CHECK_EQ(mux_getnameinfo(&loop, &n.req, names_cb, NULL, len, 0), -EINVAL);
    CHECK_EQ(mux_getnameinfo(&loop, &n.req, names_cb, (struct sockaddr *)&ss, 1, 0), -EINVAL);
    CHECK_EQ(mux_getnameinfo(&loop, &n.req, names_cb, (struct sockaddr *)&ss,
                             sizeof(struct sockaddr_storage) + 1, 0),
             -EINVAL);
    CHECK_EQ(mux_getnameinfo_cancel(&n.req), -EINVAL);
    CHECK_EQ(mux_getnameinfo_cancel(NULL), -EINVAL);
    ss.ss_family = 12345; /* the system's answer: EAI_FAMILY */
    CHECK_EQ(mux_getnameinfo(&loop, &n.req, names_cb, (struct sockaddr *)&ss, len, 0), 0);
    while (!n.calls)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(n.status, MUX_EAI_FAMILY);
    loop_close(&loop);
}

THREAD_TEST(getnameinfo_cancelled_while_queued_calls_back_ecanceled)
{
    CHECK_EQ(mux_work_pool_size(1), 0);
    mux_loop_t loop;
    loop_open(&loop);
    mux_work_t blocker;
    memset(&blocker, 0, sizeof blocker);
    CHECK_EQ(mux_work_queue(&loop, &blocker, fifo_gate_work, NULL), 0);
    struct sockaddr_storage ss;
    socklen_t len = addr_v4(&ss, 80);
    struct names n;
    memset(&n, 0, sizeof n);
    n.req.data = &n;
    CHECK_EQ(mux_getnameinfo(&loop, &n.req, names_cb, (struct sockaddr *)&ss, len, 0), 0);
    CHECK_EQ(mux_getnameinfo_cancel(&n.req), 0);
    while (!n.calls)
        CHECK_GE(mux_run(&loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(n.status, -ECANCELED);
    __atomic_store_n(&fifo_gate_open, 1, __ATOMIC_SEQ_CST);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_close(&loop);
}

/* ---- nothing left behind ---- */

enum { LOOKUPS = 10000, IN_FLIGHT = 64 };

struct flood {
    struct lookup l[IN_FLIGHT];
    int started, answered, wrong;
    mux_loop_t *loop;
};

static void flood_cb(mux_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct flood *f = req->data;
    f->answered++;
    if (status != 0 || !res || res->ai_family != AF_INET ||
        ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr != htonl(INADDR_LOOPBACK))
        f->wrong++;
    mux_freeaddrinfo(res);
    if (f->started < LOOKUPS) { /* the next one, from the callback */
        struct addrinfo hints;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        CHECK_EQ(mux_getaddrinfo(f->loop, req, flood_cb, "localhost", "80", &hints), 0);
        f->started++;
    }
}

THREAD_TEST(getaddrinfo_10000_lookups_of_localhost_leave_no_descriptor_or_thread_behind)
{
    harness_watchdog(240);
    mux_loop_t first; /* libkqueue keeps descriptors and a thread from its first kqueue on */
    loop_open(&first);
    loop_close(&first);
    long fds = count_fds(), threads = count_threads();
    mux_loop_t loop;
    loop_open(&loop);
    long loop_fds = count_fds() - fds; /* the loop's own (backend, wake-up) */
    long loop_threads = count_threads() - threads; /* libkqueue's, on kqueue */
    struct flood *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    f->loop = &loop;
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    for (int i = 0; i < IN_FLIGHT; i++) {
        f->l[i].req.data = f;
        CHECK_EQ(mux_getaddrinfo(&loop, &f->l[i].req, flood_cb, "localhost", "80", &hints), 0);
        f->started++;
    }
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(f->answered, LOOKUPS);
    CHECK_EQ(f->wrong, 0);
    unsigned started = 0, size = mux_work_pool_threads(&started);
    CHECK_LE(started, size);
    printf("10000 lookups: %ld descriptors and %ld threads before, %ld and %ld after "
           "(the loop's %ld, the pool's %u)\n",
           fds, threads, count_fds(), count_threads(), loop_fds, started);
    CHECK_EQ(count_fds(), fds + loop_fds);
    CHECK_EQ(count_threads(), threads + loop_threads + (long)started);
    loop_close(&loop);
    CHECK_EQ(count_fds(), fds);
    free(f);
}

/* ---- dialing ---- */

struct dial {
    mux_dial_t d;
    mux_stream_t s;
    int calls, status;
    uint64_t at;
};

static void dial_cb(mux_dial_t *d, int status)
{
    struct dial *x = d->data;
    x->calls++;
    x->status = status;
    x->at = mono_ns();
}

static void dial_wait(mux_loop_t *loop, struct dial *x)
{
    while (x->calls == 0)
        CHECK_GE(mux_run(loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(x->calls, 1);
}

/* A listening socket on loopback of `family` (port 0: any), blocking; its port in *port. */
static int listen_on(int family, uint16_t *port, int backlog)
{
    struct sockaddr_storage ss;
    socklen_t len = family == AF_INET ? addr_v4(&ss, *port) : addr_v6(&ss, *port);
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    int on = 1;
    CHECK_EQ(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on), 0);
    if (family == AF_INET6)
        CHECK_EQ(setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on), 0);
    CHECK_EQ(bind(fd, (struct sockaddr *)&ss, len), 0);
    CHECK_EQ(listen(fd, backlog), 0);
    len = sizeof ss;
    CHECK_EQ(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
    *port = addr_port(&ss);
    return fd;
}

static void stream_closed(mux_stream_t *s)
{
    *(int *)s->data = 1;
}

static void wrote_cb(mux_write_t *req, int status)
{
    CHECK_EQ(status, 0);
    *(int *)req->data = 1;
}

/* The stream dialled is usable: a byte written reaches the peer the listener accepts. */
static void check_connected_to(mux_loop_t *loop, struct dial *x, int lfd, int family)
{
    int afd = accept(lfd, NULL, NULL);
    CHECK_GE(afd, 0);
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    CHECK_EQ(getsockname(stream_fd(&x->s), (struct sockaddr *)&peer, &plen), 0);
    CHECK_EQ(peer.ss_family, family);
    mux_write_t wr;
    int wrote = 0;
    wr.data = &wrote;
    mux_buf_t b = mux_buf_init("x", 1);
    CHECK_EQ(mux_write(&x->s, &wr, &b, 1, wrote_cb), 0);
    while (!wrote)
        CHECK_GE(mux_run(loop, MUX_RUN_ONCE), 0);
    CHECK_EQ(wrote, 1);
    char c = 0;
    CHECK_EQ(recv(afd, &c, 1, 0), 1);
    CHECK_EQ(c, 'x');
    close(afd);
    int closed = 0;
    x->s.data = &closed;
    CHECK_EQ(mux_stream_close(&x->s, stream_closed), 0);
    while (!closed)
        CHECK_GE(mux_run(loop, MUX_RUN_ONCE), 0);
}

static void walk_none(mux_loop_t *loop, int kind, void *handle, void *arg)
{
    (void)loop, (void)kind, (void)handle, (void)arg;
    CHECK(!"a dial's parts are walked");
}

THREAD_TEST(dial_localhost_by_name_opens_a_connected_stream)
{
    uint16_t port = 0;
    int lfd = listen_on(AF_INET, &port, 8);
    char service[16];
    snprintf(service, sizeof service, "%u", port);
    mux_loop_t loop;
    loop_open(&loop);
    struct dial x;
    memset(&x, 0, sizeof x);
    x.d.data = &x;
    x.s.data = &x; /* kept */
    CHECK_EQ(mux_dial(&loop, &x.d, &x.s, "localhost", service, NULL, dial_cb), 0);
    CHECK_GE(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_loop_walk(&loop, walk_none, NULL), 0); /* no handle of the caller's yet */
    dial_wait(&loop, &x);
    CHECK_EQ(x.status, 0);
    CHECK_EQ(x.s.data, &x);
    CHECK_EQ(mux_dial_cancel(&x.d), -EINVAL); /* called back */
    check_connected_to(&loop, &x, lfd, AF_INET);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    close(lfd);
    loop_close(&loop);
}

THREAD_TEST(dial_to_a_port_nobody_listens_on_fails_with_econnrefused)
{
    char service[16];
    snprintf(service, sizeof service, "%u", closed_port(AF_INET));
    mux_loop_t loop;
    loop_open(&loop);
    struct dial x;
    memset(&x, 0, sizeof x);
    x.d.data = &x;
    mux_dial_options_t o = {AF_INET, 0, 0};
    CHECK_EQ(mux_dial(&loop, &x.d, &x.s, "127.0.0.1", service, &o, dial_cb), 0);
    dial_wait(&loop, &x);
    CHECK_EQ(x.status, -ECONNREFUSED);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* the attempt's close */
    loop_close(&loop);
}

THREAD_TEST(dial_an_unknown_name_fails_with_eai_noname)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct dial x;
    memset(&x, 0, sizeof x);
    x.d.data = &x;
    CHECK_EQ(mux_dial(&loop, &x.d, &x.s, "no-such-host.invalid", "80", NULL, dial_cb), 0);
    dial_wait(&loop, &x);
    CHECK_EQ(x.status, MUX_EAI_NONAME);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_close(&loop);
}

/* An address list of our own: `n` entries of `ss`. */
static struct addrinfo *ai_list(struct sockaddr_storage *ss, socklen_t *len, int n)
{
    struct addrinfo *ai = calloc((size_t)n, sizeof *ai);
    CHECK(ai != NULL);
    for (int i = 0; i < n; i++) {
        ai[i].ai_family = ss[i].ss_family;
        ai[i].ai_socktype = SOCK_STREAM;
        ai[i].ai_addr = (struct sockaddr *)&ss[i];
        ai[i].ai_addrlen = len[i];
        ai[i].ai_next = i + 1 < n ? &ai[i + 1] : NULL;
    }
    return ai;
}

/* A loopback IPv6 port whose connects hang: a listener whose backlog is full, so that the
 * kernel drops the next SYNs. `fill` receives the sockets that fill it. */
static int hanging_v6_port(uint16_t *port, int fill[4])
{
    int lfd = listen_on(AF_INET6, port, 0);
    struct sockaddr_storage ss;
    socklen_t len = addr_v6(&ss, *port);
    for (int i = 0; i < 4; i++) {
        fill[i] = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        CHECK_GE(fill[i], 0);
        connect(fill[i], (struct sockaddr *)&ss, len);
    }
    sleep_ms(100); /* the handshakes that can complete have */
    return lfd;
}

THREAD_TEST(dial_happy_eyeballs_starts_the_other_family_after_the_delay_and_it_wins)
{
    if (!have_ipv6_loopback())
        SKIP("no IPv6 loopback here");
    uint16_t v6port = 0, v4port = 0;
    int fill[4];
    int hang = hanging_v6_port(&v6port, fill);
    int lfd = listen_on(AF_INET, &v4port, 8);
    /* IPv6 first, twice, then IPv4: RFC 8305 alternates, so IPv4 is the second attempt. */
    struct sockaddr_storage ss[3];
    socklen_t len[3] = {addr_v6(&ss[0], v6port), addr_v6(&ss[1], v6port), addr_v4(&ss[2], v4port)};
    struct addrinfo *ai = ai_list(ss, len, 3);
    mux_loop_t loop;
    loop_open(&loop);
    struct dial x;
    memset(&x, 0, sizeof x);
    x.d.data = &x;
    /* Third, it would start after two delays: anything short of that says second, however
     * slow the machine (a timer never fires early). */
    mux_dial_options_t o = {AF_UNSPEC, 400 * MS, 0};
    CHECK_EQ(mux_now_update(&loop), 0); /* the delay counts from the loop's time */
    uint64_t t0 = mux_now(&loop);
    CHECK_EQ(mux_dial_addrinfo(&loop, &x.d, &x.s, ai, &o, dial_cb), 0);
    free(ai); /* read during the call only */
    dial_wait(&loop, &x);
    CHECK_EQ(x.status, 0);
    uint64_t took = x.at - t0;
    printf("connected after %.1f ms (attempt delay 400 ms)\n", (double)took / 1e6);
    CHECK_GE(took, 400 * MS); /* IPv4 waited for the delay */
    CHECK_LT(took, 800 * MS); /* and came second, not third */
    check_connected_to(&loop, &x, lfd, AF_INET);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* the hanging attempt is closed */
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(hang);
    close(lfd);
}

THREAD_TEST(dial_happy_eyeballs_moves_on_at_once_when_an_attempt_fails)
{
    if (!have_ipv6_loopback())
        SKIP("no IPv6 loopback here");
    uint16_t v4port = 0;
    int lfd = listen_on(AF_INET, &v4port, 8);
    struct sockaddr_storage ss[2];
    socklen_t len[2] = {addr_v6(&ss[0], closed_port(AF_INET6)), addr_v4(&ss[1], v4port)};
    struct addrinfo *ai = ai_list(ss, len, 2);
    mux_loop_t loop;
    loop_open(&loop);
    struct dial x;
    memset(&x, 0, sizeof x);
    x.d.data = &x;
    mux_dial_options_t o = {AF_UNSPEC, 2000 * MS, 0};
    uint64_t t0 = mono_ns();
    CHECK_EQ(mux_dial_addrinfo(&loop, &x.d, &x.s, ai, &o, dial_cb), 0);
    free(ai);
    dial_wait(&loop, &x);
    CHECK_EQ(x.status, 0);
    CHECK_LT(x.at - t0, 1000 * MS); /* not after the 2 s delay */
    check_connected_to(&loop, &x, lfd, AF_INET);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_close(&loop);
    close(lfd);
}

THREAD_TEST(dial_family_option_keeps_to_that_family)
{
    uint16_t v4port = 0;
    int lfd = listen_on(AF_INET, &v4port, 8);
    struct sockaddr_storage ss[2];
    socklen_t len[2] = {addr_v6(&ss[0], v4port), addr_v4(&ss[1], v4port)};
    struct addrinfo *ai = ai_list(ss, len, 2);
    mux_loop_t loop;
    loop_open(&loop);
    struct dial x;
    memset(&x, 0, sizeof x);
    x.d.data = &x;
    mux_dial_options_t o = {AF_INET, 0, 0};
    CHECK_EQ(mux_dial_addrinfo(&loop, &x.d, &x.s, ai, &o, dial_cb), 0);
    dial_wait(&loop, &x);
    CHECK_EQ(x.status, 0);
    check_connected_to(&loop, &x, lfd, AF_INET);
    mux_dial_options_t only6 = {AF_INET6, 0, 0};
    struct addrinfo *v4only = ai_list(&ss[1], &len[1], 1);
    CHECK_EQ(mux_dial_addrinfo(&loop, &x.d, &x.s, v4only, &only6, dial_cb), -EINVAL);
    free(v4only);
    free(ai);
    loop_close(&loop);
    close(lfd);
}

THREAD_TEST(dial_timeout_ends_a_dial_whose_attempts_hang)
{
    if (!have_ipv6_loopback())
        SKIP("no IPv6 loopback here");
    uint16_t v6port = 0;
    int fill[4];
    int hang = hanging_v6_port(&v6port, fill);
    struct sockaddr_storage ss;
    socklen_t len = addr_v6(&ss, v6port);
    struct addrinfo *ai = ai_list(&ss, &len, 1);
    mux_loop_t loop;
    loop_open(&loop);
    struct dial x;
    memset(&x, 0, sizeof x);
    x.d.data = &x;
    mux_dial_options_t o = {AF_UNSPEC, 0, 150 * MS};
    CHECK_EQ(mux_now_update(&loop), 0);
    uint64_t t0 = mux_now(&loop);
    CHECK_EQ(mux_dial_addrinfo(&loop, &x.d, &x.s, ai, &o, dial_cb), 0);
    free(ai);
    dial_wait(&loop, &x);
    CHECK_EQ(x.status, -ETIMEDOUT);
    CHECK_GE(x.at - t0, 150 * MS);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    loop_close(&loop);
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(hang);
}

THREAD_TEST(dial_cancelled_during_the_lookup_or_the_attempts_calls_back_ecanceled)
{
    uint16_t v6port = 0;
    int fill[4] = {-1, -1, -1, -1};
    int hang = have_ipv6_loopback() ? hanging_v6_port(&v6port, fill) : -1;
    mux_loop_t loop;
    loop_open(&loop);
    struct dial x;
    memset(&x, 0, sizeof x);
    x.d.data = &x;
    CHECK_EQ(mux_dial(&loop, &x.d, &x.s, "localhost", "80", NULL, dial_cb), 0);
    CHECK_EQ(mux_dial_cancel(&x.d), 0);
    CHECK_EQ(x.calls, 0);
    dial_wait(&loop, &x);
    CHECK_EQ(x.status, -ECANCELED);
    CHECK_EQ(mux_dial_cancel(&x.d), -EINVAL);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    if (hang >= 0) { /* cancelled while an attempt hangs */
        struct sockaddr_storage ss;
        socklen_t len = addr_v6(&ss, v6port);
        struct addrinfo *ai = ai_list(&ss, &len, 1);
        memset(&x, 0, sizeof x);
        x.d.data = &x;
        CHECK_EQ(mux_dial_addrinfo(&loop, &x.d, &x.s, ai, NULL, dial_cb), 0);
        free(ai);
        for (int i = 0; i < 5; i++)
            mux_run(&loop, MUX_RUN_NOWAIT);
        CHECK_EQ(x.calls, 0);
        CHECK_EQ(mux_dial_cancel(&x.d), 0);
        dial_wait(&loop, &x);
        CHECK_EQ(x.status, -ECANCELED);
        CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
        for (int i = 0; i < 4; i++)
            close(fill[i]);
        close(hang);
    }
    loop_close(&loop);
}

THREAD_TEST(dial_bad_input_is_einval)
{
    mux_loop_t loop;
    loop_open(&loop);
    struct dial x;
    memset(&x, 0, sizeof x);
    CHECK_EQ(mux_dial(NULL, &x.d, &x.s, "localhost", "80", NULL, dial_cb), -EINVAL);
    CHECK_EQ(mux_dial(&loop, NULL, &x.s, "localhost", "80", NULL, dial_cb), -EINVAL);
    CHECK_EQ(mux_dial(&loop, &x.d, NULL, "localhost", "80", NULL, dial_cb), -EINVAL);
    CHECK_EQ(mux_dial(&loop, &x.d, &x.s, NULL, "80", NULL, dial_cb), -EINVAL);
    CHECK_EQ(mux_dial(&loop, &x.d, &x.s, "localhost", NULL, NULL, dial_cb), -EINVAL);
    CHECK_EQ(mux_dial(&loop, &x.d, &x.s, "localhost", "80", NULL, NULL), -EINVAL);
    mux_dial_options_t bad_family = {AF_UNIX, 0, 0}, short_delay = {0, 1000, 0};
    CHECK_EQ(mux_dial(&loop, &x.d, &x.s, "localhost", "80", &bad_family, dial_cb), -EINVAL);
    CHECK_EQ(mux_dial(&loop, &x.d, &x.s, "localhost", "80", &short_delay, dial_cb), -EINVAL);
    CHECK_EQ(mux_dial_addrinfo(&loop, &x.d, &x.s, NULL, NULL, dial_cb), -EINVAL);
    CHECK_EQ(mux_dial_cancel(NULL), -EINVAL);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}
