/* SPDX-License-Identifier: MIT */
/* iomux-fault: runs representative cases on the fault variant of the library with each
 * injection point failing at each call index in turn (tests/fault/README.md).
 *
 * For every case it first runs the case clean and counts the calls at every point; then, for
 * each point and each call index (bounded by --max-index), it runs the case again in a child
 * process with that call failing, and checks:
 *
 *   - the child exits by itself (no crash, no sanitizer report) within --timeout-ms;
 *   - the case either ended the way it does without a failure, or it was told of the failure
 *     (a negative errno from a call or a callback's status) and stopped; what it may not do
 *     is wait forever for an event that will not come, or see wrong data;
 *   - after the case closed what it opened, the loop closes (mux_loop_close returns 0);
 *   - no descriptor is left open and (under AddressSanitizer) no memory leaked;
 *   - with EINTR injected, nothing is reported at all: EINTR is for the library to handle.
 *
 * The backend is IOMUX_BACKEND's, as in the behavioural suite.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#ifdef FAULT_HAVE_KQUEUE
#include <sys/event.h> /* libkqueue's */
#endif
#include "iomux.h"
#include "iomux/http.h"
#include "iomux/process.h"
#include "iomux/udp.h"
#include "iomux/work.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define HAVE_LSAN 1
#endif

/* In a build with --coverage (scripts/coverage defines IOMUX_TEST_COVERAGE), a child that
 * ends with _exit writes its counts first. */
#ifdef IOMUX_TEST_COVERAGE
void __gcov_dump(void);
#endif

static _Noreturn void child_exit(int code)
{
#ifdef IOMUX_TEST_COVERAGE
    __gcov_dump();
#endif
    _exit(code);
}

/* ---- what a run says about itself (in memory shared with the sweep) ---- */

enum verdict {
    V_NONE,     /* the child never got to say: it crashed or was killed */
    V_COMPLETE, /* the case ended as it does without a failure */
    V_REPORTED, /* a failure was reported to the case, which stopped */
    V_BAD,      /* a check failed: `why` says which */
};

struct result {
    int verdict;
    int err;       /* the first negative errno reported */
    int child_err; /* the one a case's forked child was told of */
    char why[256];
};

static struct result *res;

/* Memory a case hands back after the loop closed. */
static void *unmap_after_close;
static size_t unmap_len;

/* ---- the case's context ---- */

struct cx {
    mux_loop_t loop;
    int open;     /* the loop was initialised */
    int err;      /* the first error reported to the case */
    int bad;      /* a check failed */
    int complete; /* every event the case waits for happened, with the right data */
    char why[256];
};

/* What `err` holds when the report was a watcher's MUX_ERROR (which carries no errno). */
#define REPORTED_MUX_ERROR INT_MIN

static int note(struct cx *c, int r)
{
    if (r < 0 && !c->err)
        c->err = r;
    return r;
}

__attribute__((format(printf, 2, 3))) static void bad(struct cx *c, const char *fmt, ...)
{
    if (c->bad)
        return;
    c->bad = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void deadline_cb(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    *(int *)t->data = 1;
}

/* Runs the loop until *v >= want. Stops early when an error was reported and `on_err` says
 * so. A 2-second deadline (a timer of the loop; when that timer cannot start, the loop is
 * run without blocking) makes a wait that never ends a failed check. Returns 1 when *v got
 * there. */
static int spin(struct cx *c, const volatile int *v, int want, int on_err, const char *what)
{
    if (!c->open)
        return 0;
    int expired = 0;
    mux_timer_t t;
    mux_timer_init(&t, deadline_cb);
    t.data = &expired;
    int timed = mux_timer_start(&c->loop, &t, 2000ull * 1000000, 0) == 0;
    uint64_t end = mono_ms() + 2000;
    while (*v < want && !(on_err && (c->err || c->bad))) {
        if (expired || (!timed && mono_ms() > end)) {
            if (!(on_err && c->err))
                bad(c, "waited 2 s for %s (%d of %d)", what, *v, want);
            break;
        }
        int r = mux_run(&c->loop, timed ? MUX_RUN_ONCE : MUX_RUN_NOWAIT);
        if (r < 0) {
            note(c, r);
            if (on_err)
                break;
            if (!timed)
                usleep(1000);
        } else if (!timed) {
            usleep(200);
        }
    }
    if (timed)
        mux_timer_stop(&c->loop, &t);
    /* Done in the iteration the deadline ended: the wait slept through what was due. */
    if (expired && !(on_err && c->err))
        bad(c, "waited 2 s for %s (%d of %d), which came only with the deadline", what, *v, want);
    return *v >= want;
}

/* ---- case: loop ---- */

struct loop_case {
    int fired, idle, prepare, check;
};

static void lc_timer(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    ((struct loop_case *)t->data)->fired++;
}

static void lc_idle(mux_loop_t *loop, mux_idle_t *w)
{
    (void)loop;
    ((struct loop_case *)w->data)->idle++;
}

static void lc_prepare(mux_loop_t *loop, mux_prepare_t *w)
{
    (void)loop;
    ((struct loop_case *)w->data)->prepare++;
}

static void lc_check(mux_loop_t *loop, mux_check_t *w)
{
    (void)loop;
    ((struct loop_case *)w->data)->check++;
}

static void case_loop(struct cx *c)
{
    struct loop_case s = {0};
    mux_timer_t t;
    mux_idle_t idle;
    mux_prepare_t prep;
    mux_check_t chk;
    mux_timer_init(&t, lc_timer);
    mux_idle_init(&idle, lc_idle);
    mux_prepare_init(&prep, lc_prepare);
    mux_check_init(&chk, lc_check);
    t.data = idle.data = prep.data = chk.data = &s;

    if (note(c, mux_timer_start(&c->loop, &t, 1000000, 0)) < 0)
        return;
    spin(c, &s.fired, 1, 1, "a 1 ms timer");
    if (c->err || c->bad)
        goto out;
    if (note(c, mux_idle_start(&c->loop, &idle)) < 0 ||
        note(c, mux_prepare_start(&c->loop, &prep)) < 0 ||
        note(c, mux_check_start(&c->loop, &chk)) < 0)
        goto out;
    spin(c, &s.idle, 3, 1, "three idle calls");
    if (!c->err && !c->bad && (s.prepare < 3 || s.check < 3))
        bad(c, "prepare %d, check %d after 3 idle calls", s.prepare, s.check);
    if (!c->err && !c->bad)
        c->complete = 1;
out:
    mux_timer_stop(&c->loop, &t);
    mux_idle_stop(&c->loop, &idle);
    mux_prepare_stop(&c->loop, &prep);
    mux_check_stop(&c->loop, &chk);
}

/* ---- case: io ---- */

enum { IO_N = 3 };

struct io_case {
    struct cx *c;
    int fired, wfired;
    int sv[IO_N][2];
};

static void ic_read(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop;
    struct io_case *s = w->data;
    char b;
    if (revents & MUX_ERROR)
        note(s->c, REPORTED_MUX_ERROR);
    else if ((revents & MUX_READ) && read(mux_io_fd(w), &b, 1) == 1)
        s->fired++;
}

static void ic_write(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop;
    struct io_case *s = w->data;
    if (revents & MUX_ERROR)
        note(s->c, REPORTED_MUX_ERROR);
    else if (revents & MUX_WRITE)
        s->wfired++;
}

static void case_io(struct cx *c)
{
    struct io_case s = {.c = c};
    mux_io_t w[IO_N], wr;
    int n = 0;
    for (int i = 0; i < IO_N; i++)
        s.sv[i][0] = s.sv[i][1] = -1;
    for (int i = 0; i < IO_N; i++) {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, s.sv[i]) != 0) {
            bad(c, "socketpair: %s", strerror(errno));
            goto out;
        }
    }
    /* A descriptor far above the others, so that the loop's fd table grows. */
    int high = fcntl(s.sv[0][0], F_DUPFD_CLOEXEC, 700);
    if (high < 0) {
        bad(c, "F_DUPFD: %s", strerror(errno));
        goto out;
    }
    close(s.sv[0][0]);
    s.sv[0][0] = high;
    for (; n < IO_N; n++) {
        mux_io_init(&w[n], ic_read, s.sv[n][0], MUX_READ);
        w[n].data = &s;
        if (note(c, mux_io_start(&c->loop, &w[n])) < 0)
            goto out;
    }
    for (int i = 0; i < IO_N; i++)
        if (write(s.sv[i][1], "x", 1) != 1)
            bad(c, "write: %s", strerror(errno));
    spin(c, &s.fired, IO_N, 1, "three readable descriptors");
    if (c->err || c->bad)
        goto out;
    /* The same descriptor watched for writing by a second watcher, then the first modified. */
    mux_io_init(&wr, ic_write, s.sv[1][0], MUX_WRITE);
    wr.data = &s;
    if (note(c, mux_io_start(&c->loop, &wr)) < 0)
        goto out;
    spin(c, &s.wfired, 1, 1, "a writable descriptor");
    mux_io_stop(&c->loop, &wr);
    if (c->err || c->bad)
        goto out;
    if (note(c, mux_io_modify(&c->loop, &w[2], MUX_READ | MUX_WRITE)) < 0)
        goto out;
    if (write(s.sv[2][1], "y", 1) != 1)
        bad(c, "write: %s", strerror(errno));
    spin(c, &s.fired, IO_N + 1, 1, "a modified watcher");
    if (!c->err && !c->bad)
        c->complete = 1;
out:
    for (int i = 0; i < n; i++)
        mux_io_stop(&c->loop, &w[i]);
    for (int i = 0; i < IO_N; i++)
        for (int j = 0; j < 2; j++)
            if (s.sv[i][j] >= 0)
                close(s.sv[i][j]);
}

/* ---- case: timers ---- */

struct timer_case {
    int order[8], n, repeats, periodic;
    mux_timer_t rep;
};

static void tc_timer(mux_loop_t *loop, mux_timer_t *t)
{
    mux_timer_stop(loop, t); /* t[1] repeats */
    struct timer_case *s = *(struct timer_case **)t->data;
    if (s->n < 8)
        s->order[s->n] = (int)(intptr_t)((void **)t->data)[1];
    s->n++;
}

static void tc_repeat(mux_loop_t *loop, mux_timer_t *t)
{
    struct timer_case *s = t->data;
    if (++s->repeats == 3)
        mux_timer_stop(loop, t);
}

static void tc_periodic(mux_loop_t *loop, mux_periodic_t *p)
{
    (void)loop;
    ((struct timer_case *)p->data)->periodic++;
}

static void case_timers(struct cx *c)
{
    struct timer_case s = {0};
    mux_timer_t t[3];
    void *tag[3][2];
    mux_periodic_t p;
    mux_timer_init(&s.rep, tc_repeat);
    s.rep.data = &s;
    mux_periodic_init(&p, tc_periodic);
    p.data = &s;
    for (int i = 0; i < 3; i++) {
        tag[i][0] = &s;
        tag[i][1] = (void *)(intptr_t)i;
        mux_timer_init(&t[i], tc_timer);
        t[i].data = tag[i];
    }
    /* Started in reverse, at 9, 6 and 3 ms. */
    for (int i = 2; i >= 0; i--)
        if (note(c, mux_timer_start(&c->loop, &t[i], (uint64_t)(i + 1) * 3000000, 0)) < 0)
            goto out;
    /* t[1] restarted as an idle timeout of 12 ms: now fires after t[2]. */
    mux_timer_set_repeat(&t[1], 12000000);
    if (note(c, mux_timer_again(&c->loop, &t[1])) < 0)
        goto out;
    if (note(c, mux_timer_start(&c->loop, &s.rep, 1000000, 1000000)) < 0)
        goto out;
    if (note(c, mux_periodic_start(&c->loop, &p, mux_wall_now(&c->loop) + 2000000, 0)) < 0)
        goto out;
    spin(c, &s.n, 3, 1, "three timers");
    spin(c, &s.repeats, 3, 1, "three repeats");
    spin(c, &s.periodic, 1, 1, "a periodic timer");
    if (c->err || c->bad)
        goto out;
    if (s.n != 3 || s.order[0] != 0 || s.order[1] != 2 || s.order[2] != 1)
        bad(c, "timers fired %d times, in order %d %d %d", s.n, s.order[0], s.order[1], s.order[2]);
    else
        c->complete = 1;
out:
    for (int i = 0; i < 3; i++)
        mux_timer_stop(&c->loop, &t[i]);
    mux_timer_stop(&c->loop, &s.rep);
    mux_periodic_stop(&c->loop, &p);
}

/* ---- case: signal, child, async ---- */

struct sig_case {
    int sig, child, status, async;
    mux_async_t a;
};

static void sc_signal(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    (void)loop;
    if (signum == SIGUSR1)
        ((struct sig_case *)w->data)->sig++;
}

static void sc_child(mux_loop_t *loop, mux_child_t *w, int pid, int wstatus)
{
    (void)loop;
    (void)pid;
    struct sig_case *s = w->data;
    s->child++;
    s->status = wstatus;
}

static void sc_async(mux_loop_t *loop, mux_async_t *w)
{
    (void)loop;
    ((struct sig_case *)w->data)->async++;
}

static void *sc_thread(void *arg)
{
    return (void *)(intptr_t)mux_async_send(arg);
}

static void case_signal(struct cx *c)
{
    struct sig_case s = {0};
    mux_signal_t sw;
    mux_child_t cw;
    int sig_on = 0, child_on = 0, async_on = 0, pid = -1;
    mux_signal_init(&sw, sc_signal, SIGUSR1);
    sw.data = &s;
    mux_async_init(&s.a, sc_async);
    s.a.data = &s;
    if (note(c, mux_signal_start(&c->loop, &sw)) < 0)
        goto out;
    sig_on = 1;
    raise(SIGUSR1);
    spin(c, &s.sig, 1, 1, "SIGUSR1");
    if (c->err || c->bad)
        goto out;
    pid = fork();
    if (pid < 0) {
        bad(c, "fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0)
        _exit(3);
    mux_child_init(&cw, sc_child, pid);
    cw.data = &s;
    if (note(c, mux_child_start(&c->loop, &cw)) < 0)
        goto out;
    child_on = 1;
    spin(c, &s.child, 1, 1, "the child's exit");
    if (c->err || c->bad)
        goto out;
    if (!WIFEXITED(s.status) || WEXITSTATUS(s.status) != 3) {
        bad(c, "child status %#x", (unsigned)s.status);
        goto out;
    }
    pid = -1; /* reaped by the loop */
    if (note(c, mux_async_start(&c->loop, &s.a)) < 0)
        goto out;
    async_on = 1;
    pthread_t th;
    void *ret;
    if (pthread_create(&th, NULL, sc_thread, &s.a) != 0) {
        bad(c, "pthread_create failed");
        goto out;
    }
    pthread_join(th, &ret);
    if (note(c, (int)(intptr_t)ret) < 0)
        goto out;
    spin(c, &s.async, 1, 1, "an async wake-up");
    if (!c->err && !c->bad)
        c->complete = 1;
out:
    if (sig_on)
        mux_signal_stop(&c->loop, &sw);
    if (child_on)
        mux_child_stop(&c->loop, &cw);
    if (async_on)
        mux_async_stop(&c->loop, &s.a);
    if (pid > 0) /* the loop did not reap it */
        waitpid(pid, NULL, 0);
}

/* ---- cases: stream echo, with a caller buffer or a pool ---- */

enum { MSG_BYTES = 3000, POOL_BUFS = 8, POOL_SIZE = 4096 };

struct echo_side {
    mux_stream_t s;
    int open, closed;
    char buf[MSG_BYTES];
    mux_write_t req[16];
    char out[16][MSG_BYTES];
    mux_buf_t ob[16];
    int nreq;
};

struct echo_case {
    struct cx *c;
    mux_listener_t l;
    int lopen, lclosed, accepted, connected, eof_srv, eof_cli, shut;
    struct echo_side srv, cli;
    char sent[MSG_BYTES], got[MSG_BYTES];
    int ngot, writes_done;
    mux_bufpool_t pool;
    int use_pool;
    uint32_t slots[POOL_BUFS];
    char *pmem;
};

static void ec_close(mux_stream_t *s)
{
    ((struct echo_side *)s->data)->closed = 1;
}

static void ec_listener_closed(mux_listener_t *l)
{
    ((struct echo_case *)l->data)->lclosed = 1;
}

static struct echo_case *ec_of(mux_stream_t *s)
{
    return *(struct echo_case **)mux_stream_loop(s)->data;
}

static void ec_written(mux_write_t *req, int status)
{
    struct echo_case *e = req->data;
    note(e->c, status);
    e->writes_done++;
}

static void ec_shutdown(mux_stream_t *s, int status)
{
    struct echo_case *e = ec_of(s);
    note(e->c, status);
    e->shut++;
}

/* The server echoes what it reads, one write per read; at end of stream it shuts down too. */
static void ec_srv_read(mux_stream_t *s, ssize_t n, char *buf)
{
    struct echo_case *e = ec_of(s);
    struct echo_side *d = &e->srv;
    if (n < 0) {
        note(e->c, (int)n);
        return;
    }
    if (n == 0) {
        e->eof_srv = 1;
        note(e->c, mux_stream_shutdown(s, ec_shutdown));
        return;
    }
    if (d->nreq == 16 || (size_t)n > sizeof d->out[0]) {
        bad(e->c, "server read %zd bytes in read %d", n, d->nreq + 1);
    } else {
        memcpy(d->out[d->nreq], buf, (size_t)n);
        d->ob[d->nreq] = (mux_buf_t){.base = d->out[d->nreq], .len = (size_t)n};
        d->req[d->nreq].data = e;
        note(e->c, mux_write(s, &d->req[d->nreq], &d->ob[d->nreq], 1, ec_written));
        d->nreq++;
    }
    if (e->use_pool && mux_bufpool_put(&e->pool, buf) != 0)
        bad(e->c, "mux_bufpool_put refused a buffer the read gave");
}

static void ec_cli_read(mux_stream_t *s, ssize_t n, char *buf)
{
    struct echo_case *e = ec_of(s);
    if (n < 0) {
        note(e->c, (int)n);
        return;
    }
    if (n == 0) {
        e->eof_cli = 1;
        return;
    }
    if (e->ngot + n > MSG_BYTES) {
        bad(e->c, "client got %zd bytes more than were sent", e->ngot + n - MSG_BYTES);
        return;
    }
    memcpy(e->got + e->ngot, buf, (size_t)n);
    e->ngot += (int)n;
}

static void ec_accept(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    struct echo_case *e = l->data;
    if (note(e->c, status) < 0)
        return;
    if (e->accepted++) {
        bad(e->c, "a second connection");
        close(sock);
        return;
    }
    e->srv.s.data = &e->srv;
    if (note(e->c, mux_stream_open(mux_listener_loop(l), &e->srv.s, sock)) < 0) {
        close(sock);
        return;
    }
    e->srv.open = 1;
    mux_stream_timeouts_t to = {.idle_ns = 5000ull * 1000000};
    if (note(e->c, mux_stream_set_timeouts(&e->srv.s, &to)) < 0)
        return;
    if (e->use_pool)
        note(e->c, mux_read_start_pool(&e->srv.s, &e->pool, ec_srv_read));
    else
        note(e->c, mux_read_start(&e->srv.s, e->srv.buf, sizeof e->srv.buf, ec_srv_read));
}

static void ec_connected(mux_stream_t *s, int status)
{
    struct echo_case *e = ec_of(s);
    if (note(e->c, status) < 0)
        return;
    e->connected = 1;
}

static void echo_run(struct cx *c, int use_pool)
{
    static struct echo_case e; /* large; one per process */
    memset(&e, 0, sizeof e);
    e.c = c;
    e.use_pool = use_pool;
    struct echo_case *ep = &e;
    c->loop.data = &ep;
    for (int i = 0; i < MSG_BYTES; i++)
        e.sent[i] = (char)('a' + i * 7 % 26);
    if (use_pool) {
        e.pmem = mmap(NULL, POOL_BUFS * POOL_SIZE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (e.pmem == MAP_FAILED) {
            e.pmem = NULL;
            bad(c, "mmap: %s", strerror(errno));
            return;
        }
        if (note(c, mux_bufpool_init(&e.pool, e.pmem, POOL_SIZE, POOL_BUFS, e.slots)) < 0)
            goto out;
    }

    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t slen = sizeof sin;
    e.l.data = &e;
    if (note(c, mux_listen(&c->loop, &e.l, (struct sockaddr *)&sin, sizeof sin, NULL, ec_accept)) <
        0)
        goto out;
    e.lopen = 1;
    if (note(c, mux_listener_address(&e.l, (struct sockaddr *)&sin, &slen)) < 0)
        goto out;
    e.cli.s.data = &e.cli;
    if (note(c, mux_stream_connect(&c->loop, &e.cli.s, (struct sockaddr *)&sin, slen,
                                   ec_connected)) < 0)
        goto out;
    e.cli.open = 1;
    spin(c, &e.connected, 1, 1, "the connect");
    if (c->err || c->bad)
        goto out;
    if (note(c, mux_stream_nodelay(&e.cli.s, 1)) < 0 ||
        note(c, mux_stream_keepalive(&e.cli.s, 1, 60)) < 0)
        goto out;
    if (note(c, mux_read_start(&e.cli.s, e.cli.buf, sizeof e.cli.buf, ec_cli_read)) < 0)
        goto out;
    /* Three writes queued at once (gathered into one send where the layer does that). */
    static const int cut[4] = {0, 5, 1000, MSG_BYTES};
    for (int i = 0; i < 3; i++) {
        e.cli.ob[i] = (mux_buf_t){.base = e.sent + cut[i], .len = (size_t)(cut[i + 1] - cut[i])};
        e.cli.req[i].data = &e;
        if (note(c, mux_write(&e.cli.s, &e.cli.req[i], &e.cli.ob[i], 1, ec_written)) < 0)
            goto out;
        e.cli.nreq++;
    }
    spin(c, &e.ngot, MSG_BYTES, 1, "the echo");
    if (c->err || c->bad)
        goto out;
    if (memcmp(e.got, e.sent, MSG_BYTES) != 0) {
        bad(c, "the echo differs from what was sent");
        goto out;
    }
    if (note(c, mux_stream_shutdown(&e.cli.s, ec_shutdown)) < 0)
        goto out;
    spin(c, &e.eof_cli, 1, 1, "the end of the echo stream");
    spin(c, &e.shut, 2, 1, "both shutdowns");
    if (!c->err && !c->bad) {
        if (!e.eof_srv)
            bad(c, "the server never saw the end of the stream");
        else if (e.writes_done != e.cli.nreq + e.srv.nreq)
            bad(c, "%d write callbacks for %d writes", e.writes_done, e.cli.nreq + e.srv.nreq);
        else
            c->complete = 1;
    }
out:;
    /* Close whatever is open and wait for every close callback, failures or not. */
    int want = 0;
    struct echo_side *sides[2] = {&e.cli, &e.srv};
    for (int i = 0; i < 2; i++)
        if (sides[i]->open) {
            int r = mux_stream_close(&sides[i]->s, ec_close);
            if (r < 0)
                bad(c, "mux_stream_close: %d", r);
            else
                want++;
        }
    if (e.lopen) {
        int r = mux_listener_close(&e.l, ec_listener_closed);
        if (r < 0)
            bad(c, "mux_listener_close: %d", r);
        else
            want++;
    }
    for (uint64_t end = mono_ms() + 2000; c->open;) {
        int closed = e.cli.closed + e.srv.closed + e.lclosed;
        if (closed >= want)
            break;
        if (mono_ms() > end) {
            bad(c, "%d of %d close callbacks after 2 s", closed, want);
            break;
        }
        int r = mux_run(&c->loop, MUX_RUN_NOWAIT);
        if (r < 0)
            note(c, r);
        usleep(r < 0 ? 1000 : 100);
    }
    /* The pool's memory stays the kernel's until the loop closes (mux_bufpool_init). */
    if (e.pmem) {
        unmap_after_close = e.pmem;
        unmap_len = POOL_BUFS * POOL_SIZE;
    }
}

static void case_stream(struct cx *c)
{
    echo_run(c, 0);
}

static void case_stream_pool(struct cx *c)
{
    echo_run(c, 1);
}

/* ---- case: bulk, over adopted sockets ---- */

enum { BULK = 1 << 20, BULK_CHUNK = 64 * 1024 };

struct bulk_case {
    struct cx *c;
    mux_stream_t a, b;
    int aopen, bopen, closed, written, walked, stopped_once, got;
    uint32_t sum_sent, sum_got;
    char *out;
    char in[16384];
    mux_write_t req[BULK / BULK_CHUNK];
    mux_buf_t bufs[BULK / BULK_CHUNK];
};

static void bc_written(mux_write_t *req, int status)
{
    struct bulk_case *b = req->data;
    note(b->c, status);
    b->written++;
}

static void bc_read(mux_stream_t *s, ssize_t n, char *buf)
{
    struct bulk_case *b = s->data;
    if (n <= 0) {
        note(b->c, n < 0 ? (int)n : -EPIPE); /* no end of stream is sent here */
        return;
    }
    for (ssize_t i = 0; i < n; i++)
        b->sum_got = b->sum_got * 31 + (unsigned char)buf[i];
    b->got += (int)n;
    /* Once, half-way: stop reading and start again from the next iteration's idle. */
    if (getenv("NOSTOP") == NULL && !b->stopped_once && b->got > BULK / 2) {
        b->stopped_once = 1;
        note(b->c, mux_read_stop(s));
        note(b->c, mux_read_start(s, b->in, sizeof b->in, bc_read));
    }
}

static void bc_walk(mux_loop_t *loop, int kind, void *handle, void *arg)
{
    (void)loop, (void)kind, (void)handle;
    ++*(int *)arg;
}

static void bc_close(mux_stream_t *s)
{
    ((struct bulk_case *)s->data)->closed++;
}

static void case_bulk(struct cx *c)
{
    static struct bulk_case b;
    memset(&b, 0, sizeof b);
    b.c = c;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        bad(c, "socketpair: %s", strerror(errno));
        return;
    }
    b.out = malloc(BULK);
    if (!b.out) {
        bad(c, "out of memory");
        goto out;
    }
    for (int i = 0; i < BULK; i++) {
        b.out[i] = (char)(i * 131 >> 3);
        b.sum_sent = b.sum_sent * 31 + (unsigned char)b.out[i];
    }
    b.a.data = b.b.data = &b;
    if (note(c, mux_stream_open(&c->loop, &b.a, sv[0])) < 0)
        goto out;
    b.aopen = 1;
    sv[0] = -1;
    if (note(c, mux_stream_open(&c->loop, &b.b, sv[1])) < 0)
        goto out;
    b.bopen = 1;
    sv[1] = -1;
    if (note(c, mux_read_start(&b.b, b.in, sizeof b.in, bc_read)) < 0)
        goto out;
    /* Sixteen writes of 64 KB, more than the socket buffer: most wait for writability. */
    for (int i = 0; i < BULK / BULK_CHUNK; i++) {
        b.bufs[i] = (mux_buf_t){.base = b.out + i * BULK_CHUNK, .len = BULK_CHUNK};
        b.req[i].data = &b;
        if (note(c, mux_write(&b.a, &b.req[i], &b.bufs[i], 1, bc_written)) < 0)
            goto out;
    }
    ssize_t q = mux_stream_write_queue_size(&b.a);
    if (q < 0 || q > BULK)
        bad(c, "write queue size %zd", q);
    if (note(c, mux_loop_walk(&c->loop, bc_walk, &b.walked)) < 0)
        goto out;
    if (b.walked != 2)
        bad(c, "the walk saw %d handles, not 2", b.walked);
    spin(c, &b.written, BULK / BULK_CHUNK, 1, "sixteen 64 KB writes");
    spin(c, &b.got, BULK, 1, "1 MB");
    if (c->err || c->bad)
        goto out;
    if (b.got != BULK || b.sum_got != b.sum_sent)
        bad(c, "got %d bytes of %d, checksum %s", b.got, BULK,
            b.sum_got == b.sum_sent ? "equal" : "differs");
    else
        c->complete = 1;
out:
    if (b.aopen && mux_stream_close(&b.a, bc_close) == 0)
        b.aopen = 2;
    if (b.bopen && mux_stream_close(&b.b, bc_close) == 0)
        b.bopen = 2;
    spin(c, &b.closed, (b.aopen == 2) + (b.bopen == 2), 0, "the close callbacks");
    for (int i = 0; i < 2; i++)
        if (sv[i] >= 0)
            close(sv[i]);
    free(b.out);
}

/* ---- case: an IPv6 listener, and a read timeout ---- */

struct v6_case {
    struct cx *c;
    mux_listener_t l;
    mux_stream_t srv, cli;
    int lopen, sopen, copen, connected, timedout, closed;
    char buf[64];
};

static void v6_closed(mux_stream_t *s)
{
    ((struct v6_case *)s->data)->closed++;
}

static void v6_lclosed(mux_listener_t *l)
{
    ((struct v6_case *)l->data)->closed++;
}

static void v6_read(mux_stream_t *s, ssize_t n, char *buf)
{
    (void)buf;
    struct v6_case *v = s->data;
    if (n == -ETIMEDOUT)
        v->timedout++;
    else
        note(v->c, n < 0 ? (int)n : -EPROTO); /* the client sends nothing */
}

static void v6_accept(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    struct v6_case *v = l->data;
    if (note(v->c, status) < 0)
        return;
    v->srv.data = v;
    if (v->sopen || note(v->c, mux_stream_open(mux_listener_loop(l), &v->srv, sock)) < 0) {
        close(sock);
        return;
    }
    v->sopen = 1;
    mux_stream_timeouts_t to = {.read_ns = 30 * 1000000ull};
    if (note(v->c, mux_stream_set_timeouts(&v->srv, &to)) == 0)
        note(v->c, mux_read_start(&v->srv, v->buf, sizeof v->buf, v6_read));
}

static void v6_connected(mux_stream_t *s, int status)
{
    struct v6_case *v = s->data;
    if (note(v->c, status) == 0)
        v->connected = 1;
}

static void case_v6(struct cx *c)
{
    static struct v6_case v;
    memset(&v, 0, sizeof v);
    v.c = c;
    struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    socklen_t slen = sizeof sin6;
    mux_listen_options_t lo = {
        .backlog = 16, .flags = MUX_LISTEN_REUSEPORT | MUX_LISTEN_V6ONLY, .batch = 4};
    v.l.data = &v;
    if (note(c, mux_listen(&c->loop, &v.l, (struct sockaddr *)&sin6, sizeof sin6, &lo, v6_accept)) <
        0)
        goto out;
    v.lopen = 1;
    if (note(c, mux_listener_address(&v.l, (struct sockaddr *)&sin6, &slen)) < 0)
        goto out;
    v.cli.data = &v;
    if (note(c, mux_stream_connect(&c->loop, &v.cli, (struct sockaddr *)&sin6, slen,
                                   v6_connected)) < 0)
        goto out;
    v.copen = 1;
    spin(c, &v.connected, 1, 1, "the IPv6 connect");
    spin(c, &v.timedout, 1, 1, "the server's read timeout");
    if (!c->err && !c->bad)
        c->complete = 1;
out:;
    int want = 0;
    if (v.copen)
        want += mux_stream_close(&v.cli, v6_closed) == 0;
    if (v.sopen)
        want += mux_stream_close(&v.srv, v6_closed) == 0;
    if (v.lopen)
        want += mux_listener_close(&v.l, v6_lclosed) == 0;
    spin(c, &v.closed, want, 0, "the close callbacks");
}

/* ---- case: the worker pool, the resolver and a dial by name ---- */

struct work_case {
    struct cx *c;
    mux_work_t w;
    mux_getaddrinfo_t gai;
    mux_getnameinfo_t gni;
    mux_dial_t d;
    mux_stream_t s;
    mux_listener_t l;
    int worked, done, looked, named, dialled, accepted, lclosed, sclosed;
    int lopen, sopen;
};

static void wc_work(mux_work_t *w)
{
    ((struct work_case *)w->data)->worked = 1;
}

static void wc_done(mux_work_t *w, int status)
{
    struct work_case *wc = w->data;
    if (note(wc->c, status) == 0 && !wc->worked)
        bad(wc->c, "the work was called back without having run");
    wc->done = 1;
}

static void wc_looked(mux_getaddrinfo_t *req, int status, struct addrinfo *ai)
{
    struct work_case *wc = req->data;
    if (note(wc->c, status) == 0 &&
        (!ai || ai->ai_family != AF_INET ||
         ((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr != htonl(INADDR_LOOPBACK)))
        bad(wc->c, "localhost did not resolve to 127.0.0.1");
    mux_freeaddrinfo(ai);
    wc->looked = 1;
}

static void wc_named(mux_getnameinfo_t *req, int status, const char *host, const char *serv)
{
    struct work_case *wc = req->data;
    if (note(wc->c, status) == 0 && (strcmp(host, "127.0.0.1") != 0 || strcmp(serv, "80") != 0))
        bad(wc->c, "127.0.0.1:80 named %s:%s", host, serv);
    wc->named = 1;
}

static void wc_dialled(mux_dial_t *d, int status)
{
    struct work_case *wc = d->data;
    if (note(wc->c, status) == 0)
        wc->sopen = 1;
    wc->dialled = 1;
}

static void wc_accept(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    struct work_case *wc = l->data;
    if (note(wc->c, status) == 0) {
        close(sock);
        wc->accepted = 1;
    }
}

static void wc_lclosed(mux_listener_t *l)
{
    ((struct work_case *)l->data)->lclosed = 1;
}

static void wc_sclosed(mux_stream_t *s)
{
    ((struct work_case *)s->data)->sclosed = 1;
}

static void wc_nop(mux_work_t *w)
{
    (void)w;
}

static void wc_barrier(mux_work_t *w, int status)
{
    (void)status;
    *(int *)w->data = 1;
}

static void case_work(struct cx *c)
{
    static struct work_case wc;
    memset(&wc, 0, sizeof wc);
    wc.c = c;
    char port[16];
    socklen_t slen;
    /* One pool thread: the order of the calls is the same in every run. */
    if (note(c, mux_work_pool_size(1)) < 0)
        return;
    wc.w.data = &wc;
    if (note(c, mux_work_queue(&c->loop, &wc.w, wc_work, wc_done)) < 0 ||
        !spin(c, &wc.done, 1, 1, "the work's callback") || c->err)
        goto out;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    wc.gai.data = &wc;
    if (note(c, mux_getaddrinfo(&c->loop, &wc.gai, wc_looked, "localhost", "80", &hints)) < 0 ||
        !spin(c, &wc.looked, 1, 1, "the lookup of localhost") || c->err)
        goto out;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(80)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    wc.gni.data = &wc;
    if (note(c, mux_getnameinfo(&c->loop, &wc.gni, wc_named, (struct sockaddr *)&sin, sizeof sin,
                                NI_NUMERICHOST | NI_NUMERICSERV)) < 0 ||
        !spin(c, &wc.named, 1, 1, "the names of 127.0.0.1:80") || c->err)
        goto out;
    sin.sin_port = 0;
    slen = sizeof sin;
    wc.l.data = &wc;
    if (note(c, mux_listen(&c->loop, &wc.l, (struct sockaddr *)&sin, sizeof sin, NULL,
                           wc_accept)) < 0)
        goto out;
    wc.lopen = 1;
    if (note(c, mux_listener_address(&wc.l, (struct sockaddr *)&sin, &slen)) < 0)
        goto out;
    snprintf(port, sizeof port, "%u", ntohs(sin.sin_port));
    wc.d.data = &wc;
    wc.s.data = &wc;
    mux_dial_options_t o = {.family = AF_INET};
    if (note(c, mux_dial(&c->loop, &wc.d, &wc.s, "localhost", port, &o, wc_dialled)) < 0 ||
        !spin(c, &wc.dialled, 1, 1, "the dial") || c->err)
        goto out;
    spin(c, &wc.accepted, 1, 1, "the dialled connection");
    if (!c->err && !c->bad)
        c->complete = 1;
out:;
    /* Whatever is still pending after a failure is cancelled, and called back. */
    mux_work_cancel(&wc.w);
    mux_getaddrinfo_cancel(&wc.gai);
    mux_getnameinfo_cancel(&wc.gni);
    mux_dial_cancel(&wc.d);
    int want = 0;
    if (wc.lopen)
        want += mux_listener_close(&wc.l, wc_lclosed) == 0;
    uint64_t end = mono_ms() + 2000;
    int sclose = 0;
    /* The dial's losing attempts close an iteration after its callback. */
    while (mux_loop_active(&c->loop) > 0 && mono_ms() < end) {
        if (wc.sopen && !sclose) /* a dial that succeeded after the cancel */
            want += sclose = mux_stream_close(&wc.s, wc_sclosed) == 0;
        mux_run(&c->loop, MUX_RUN_ONCE);
    }
    if (wc.sclosed + wc.lclosed < want)
        bad(c, "waited 2 s for the close callbacks (%d of %d)", wc.sclosed + wc.lclosed, want);
    /* A lookup cancelled while it ran goes on in the pool's one thread, its file open: a
     * request queued after it runs once it is over, before the descriptors are counted. */
    mux_work_t barrier;
    int barrier_done = 0;
    barrier.data = &barrier_done;
    if (mux_work_queue(&c->loop, &barrier, wc_nop, wc_barrier) == 0)
        while (!barrier_done && mono_ms() < end + 2000)
            mux_run(&c->loop, MUX_RUN_ONCE);
}

/* ---- case: datagram sockets ---- */

/* A client sends five datagrams and one GSO send of three to a server that echoes them from a
 * pool; the client reads the eight answers into its own buffers. */
struct udp_case {
    struct cx *c;
    mux_udp_t srv, cli;
    int sopen, copen, closed, answers, echoed;
    mux_bufpool_t pool;
    uint32_t slots[16];
    char mem[16][512];
    mux_udp_send_t echo[16], req[6];
    mux_buf_t ebuf[16], out[6];
    char data[6][64], rbuf[4][512];
    mux_udp_addr_t srv_addr;
    socklen_t srv_len;
};

static void uc_echo_sent(mux_udp_send_t *req, int status)
{
    struct udp_case *uc = ((mux_udp_t *)req->data)->data;
    note(uc->c, status);
    mux_bufpool_put(&uc->pool, uc->ebuf[req - uc->echo].base - MUX_UDP_POOL_HEADROOM);
}

static void uc_srv_rx(mux_udp_t *u, int status, const mux_dgram_t *d)
{
    struct udp_case *uc = u->data;
    if (note(uc->c, status) < 0)
        return;
    int i = uc->echoed++ % 16;
    uc->ebuf[i] = mux_buf_init(d->base, d->len);
    uc->echo[i].data = u;
    if (note(uc->c, mux_udp_send(u, &uc->echo[i], &uc->ebuf[i], 1, d->addr, d->addrlen,
                                 uc_echo_sent)) < 0)
        mux_bufpool_put(&uc->pool, d->buf);
}

static void uc_cli_rx(mux_udp_t *u, int status, const mux_dgram_t *d)
{
    struct udp_case *uc = u->data;
    if (note(uc->c, status) < 0)
        return;
    if (d->len != 16 || d->base[0] != 'q')
        bad(uc->c, "answer %d: %zu bytes, '%c'", uc->answers, d->len, d->base[0]);
    uc->answers++;
}

static void uc_sent(mux_udp_send_t *req, int status)
{
    note(((struct udp_case *)req->data)->c, status);
}

static void uc_closed(mux_udp_t *u)
{
    ((struct udp_case *)u->data)->closed++;
}

static void case_udp(struct cx *c)
{
    static struct udp_case uc;
    memset(&uc, 0, sizeof uc);
    uc.c = c;
    mux_bufpool_init(&uc.pool, uc.mem, sizeof uc.mem[0], 16, uc.slots);
    struct sockaddr_in lo = {.sin_family = AF_INET};
    lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    uc.srv.data = uc.cli.data = &uc;
    if (note(c, mux_udp_bind(&c->loop, &uc.srv, (struct sockaddr *)&lo, sizeof lo, 0)) < 0)
        goto out;
    uc.sopen = 1;
    if (note(c, mux_udp_bind(&c->loop, &uc.cli, (struct sockaddr *)&lo, sizeof lo, 0)) < 0)
        goto out;
    uc.copen = 1;
    uc.srv_len = sizeof uc.srv_addr;
    mux_buf_t rb[4];
    for (int i = 0; i < 4; i++)
        rb[i] = mux_buf_init(uc.rbuf[i], sizeof uc.rbuf[i]);
    if (note(c, mux_udp_address(&uc.srv, &uc.srv_addr.sa, &uc.srv_len)) < 0 ||
        note(c, mux_udp_recv_start_pool(&uc.srv, &uc.pool, uc_srv_rx)) < 0 ||
        note(c, mux_udp_recv_start(&uc.cli, rb, 4, uc_cli_rx)) < 0)
        goto out;
    for (int i = 0; i < 6; i++) {
        memset(uc.data[i], 'q', sizeof uc.data[i]);
        uc.req[i].data = &uc;
        int r = i < 5 ? (uc.out[i] = mux_buf_init(uc.data[i], 16),
                         mux_udp_send(&uc.cli, &uc.req[i], &uc.out[i], 1, &uc.srv_addr.sa,
                                      uc.srv_len, uc_sent))
                      : mux_udp_send_gso(&uc.cli, &uc.req[i], uc.data[i], 48, 16, &uc.srv_addr.sa,
                                         uc.srv_len, uc_sent);
        if (note(c, r) < 0)
            goto out;
    }
    if (spin(c, &uc.answers, 8, 1, "the eight answers") && !c->err && !c->bad)
        c->complete = 1;
out:;
    int want = 0;
    if (uc.copen)
        want += mux_udp_close(&uc.cli, uc_closed) == 0;
    if (uc.sopen)
        want += mux_udp_close(&uc.srv, uc_closed) == 0;
    spin(c, &uc.closed, want, 0, "the close callbacks");
    if (mux_bufpool_available(&uc.pool) != 16)
        bad(c, "%d pool buffers of 16 came back", mux_bufpool_available(&uc.pool));
}

/* ---- case: child processes ---- */

struct spawn_case {
    struct cx *c;
    mux_process_t p[2];
    mux_stream_t out;
    int running[2], exited[2], status[2], signal[2];
    int out_open, out_eof, out_closed;
    char buf[64], got[64];
    size_t len;
};

static void spc_exit(mux_process_t *p, int exit_status, int term_signal)
{
    struct spawn_case *sc = p->data;
    int i = (int)(p - sc->p);
    sc->running[i] = 0;
    sc->exited[i] = 1;
    sc->status[i] = exit_status;
    sc->signal[i] = term_signal;
    note(sc->c, exit_status < 0 ? exit_status : 0); /* the handle could not learn the status */
}

static void spc_closed(mux_stream_t *s)
{
    ((struct spawn_case *)s->data)->out_closed = 1;
}

static void spc_read(mux_stream_t *s, ssize_t n, char *buf)
{
    struct spawn_case *sc = s->data;
    if (n > 0 && sc->len + (size_t)n < sizeof sc->got) {
        memcpy(sc->got + sc->len, buf, (size_t)n);
        sc->len += (size_t)n;
        return;
    }
    if (note(sc->c, (int)n) == 0)
        sc->out_eof = 1;
    mux_read_stop(s);
}

static void case_spawn(struct cx *c)
{
    static struct spawn_case sc;
    memset(&sc, 0, sizeof sc);
    sc.c = c;
    static char *sh[] = {"/bin/sh", "-c", "echo spawned; exit 5", NULL};
    static char *sleeper[] = {"sleep", "30", NULL};
    mux_spawn_options_t o = {.file = sh[0], .argv = sh};
    o.stdio[1].kind = MUX_STDIO_STREAM;
    o.stdio[1].stream = &sc.out;
    sc.out.data = &sc;
    sc.p[0].data = sc.p[1].data = &sc;
    if (note(c, mux_spawn(&c->loop, &sc.p[0], &o, spc_exit)) < 0)
        goto out;
    sc.running[0] = sc.out_open = 1;
    if (note(c, mux_read_start(&sc.out, sc.buf, sizeof sc.buf, spc_read)) < 0)
        goto out;
    if (!spin(c, &sc.out_eof, 1, 1, "the child's output") ||
        !spin(c, &sc.exited[0], 1, 1, "the child's exit") || c->err)
        goto out;
    if (sc.status[0] != 5 || sc.signal[0] != 0 || sc.len != 8 || memcmp(sc.got, "spawned\n", 8)) {
        bad(c, "the child said %.*s and exited %d (signal %d)", (int)sc.len, sc.got, sc.status[0],
            sc.signal[0]);
        goto out;
    }
    mux_spawn_options_t so = {.file = sleeper[0], .argv = sleeper};
    if (note(c, mux_spawn(&c->loop, &sc.p[1], &so, spc_exit)) < 0)
        goto out;
    sc.running[1] = 1;
    if (note(c, mux_process_kill(&sc.p[1], SIGTERM)) < 0 ||
        !spin(c, &sc.exited[1], 1, 1, "the killed child's exit") || c->err)
        goto out;
    if (sc.signal[1] != SIGTERM)
        bad(c, "the killed child ended with signal %d, status %d", sc.signal[1], sc.status[1]);
    else
        c->complete = 1;
out:
    /* What runs still is killed, and its exit awaited; a loop that cannot wait any more (its
     * kernel refuses every wait) gives up on it, and it is reaped here. */
    int pids[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        if (sc.running[i]) {
            pids[i] = mux_process_pid(&sc.p[i]);
            kill(pids[i], SIGKILL);
        }
    if (sc.out_open)
        mux_stream_close(&sc.out, spc_closed);
    uint64_t end = mono_ms() + 2000;
    while (mux_loop_active(&c->loop) > 0 && mono_ms() < end)
        if (mux_run(&c->loop, MUX_RUN_ONCE) < 0 && c->err)
            break;
    for (int i = 0; i < 2; i++)
        if (sc.running[i] && mux_process_detach(&sc.p[i]) == 0)
            waitpid(pids[i], NULL, 0);
    end = mono_ms() + 2000;
    while (sc.out_open && !sc.out_closed && mono_ms() < end)
        mux_run(&c->loop, MUX_RUN_ONCE);
}

/* ---- case: the HTTP server ---- */

/* The server answers a GET and a chunked POST on one kept-alive connection, from a raw
 * client socket of the case's own. A failure in the server reaches this client as the end
 * of the connection before both answers, or as a 5xx: that is how a server tells. */
struct http_case {
    struct cx *c;
    mux_http_server_t srv;
    int closed, calls;
};

static void hc_handler(mux_http_exchange_t *x)
{
    struct http_case *hc = mux_http_exchange_server(x)->data;
    hc->calls++;
    mux_http_str_t body = mux_http_exchange_body(x);
    char out[64];
    int n = snprintf(out, sizeof out, "%zu", body.len);
    int r = mux_http_respond(x, 200, NULL, 0, out, (size_t)n);
    if (r != 0 && r != -ECANCELED)
        note(hc->c, r);
}

/* The server's own failures come here: the case is told of them with their errno. */
static void hc_error(mux_http_server_t *srv, int err)
{
    note(((struct http_case *)srv->data)->c, err);
}

static void hc_closed(mux_http_server_t *srv)
{
    ((struct http_case *)srv->data)->closed = 1;
}

/* Sends `req` to a server answering with `handler`, and waits until `done` says the
 * answers are all there. */
static void http_run(struct cx *c, mux_http_handler_cb handler, const char *req,
                     int (*done)(const char *got), int calls)
{
    static struct http_case hc;
    memset(&hc, 0, sizeof hc);
    hc.c = c;
    int fd = -1, inited = 0;
    mux_http_server_options_t o = {.on_error = hc_error};
    hc.srv.data = &hc;
    if (note(c, mux_http_server_init(&hc.srv, &c->loop, &o, handler)) < 0)
        return;
    inited = 1;
    hc.srv.data = &hc;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t slen = sizeof sin;
    if (note(c, mux_http_server_listen(&hc.srv, (struct sockaddr *)&sin, sizeof sin, NULL)) < 0 ||
        note(c, mux_http_server_address(&hc.srv, (struct sockaddr *)&sin, &slen)) < 0)
        goto out;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || (connect(fd, (struct sockaddr *)&sin, slen) != 0 && errno != EINPROGRESS)) {
        bad(c, "client socket: %s", strerror(errno));
        goto out;
    }
    size_t sent = 0, reqlen = strlen(req);
    char got[4096]; /* every answer of a case, the static case's listing page included */
    size_t ngot = 0;
    int eof = 0;
    uint64_t end = mono_ms() + 2000;
    /* Both answers: two "200 OK" heads, bodies "0" and "5". */
    while (!c->err && !c->bad) {
        if (sent < reqlen) {
            ssize_t n = send(fd, req + sent, reqlen - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
        }
        ssize_t n = recv(fd, got + ngot, sizeof got - 1 - ngot, MSG_DONTWAIT);
        if (n > 0)
            ngot += (size_t)n;
        else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            eof = 1;
        got[ngot] = 0;
        if (done(got))
            break;
        if (strstr(got, "HTTP/1.1 5")) {
            note(c, -EPROTO); /* told: a 5xx */
            break;
        }
        if (eof) {
            note(c, -ECONNRESET); /* told: the connection ended */
            break;
        }
        if (mono_ms() > end) {
            bad(c, "waited 2 s for two answers (%zu bytes came)", ngot);
            break;
        }
        int r = mux_run(&c->loop, MUX_RUN_NOWAIT);
        if (r < 0)
            note(c, r);
        usleep(200);
    }
    if (!c->err && !c->bad) {
        if (hc.calls != calls || strncmp(got, "HTTP/1.1 200 OK\r\n", 17) != 0)
            bad(c, "%d handler calls; answers: %.60s", hc.calls, got);
        else
            c->complete = 1;
    }
out:
    if (fd >= 0)
        close(fd);
    if (inited) {
        int r = mux_http_server_close(&hc.srv, hc_closed);
        if (r != 0)
            bad(c, "mux_http_server_close: %d", r);
        else
            spin(c, &hc.closed, 1, 0, "the server's close");
    }
}

static int http_done(const char *got)
{
    const char *second = strstr(got, "\r\n\r\n0");
    return second && strstr(second, "\r\n\r\n5");
}

static void case_http(struct cx *c)
{
    http_run(c, hc_handler,
             "GET /a HTTP/1.1\r\nHost: t\r\n\r\n"
             "POST /b HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5\r\nhello\r\n0\r\n\r\n",
             http_done, 2);
}

/* ---- case: static files ---- */

static mux_http_static_t sc_files;

static void sc_handler(mux_http_exchange_t *x)
{
    struct http_case *hc = mux_http_exchange_server(x)->data;
    hc->calls++;
    int r = mux_http_serve_static(x, &sc_files);
    if (r != 0 && r != -ECANCELED)
        note(hc->c, r);
}

/* Five answers: the index, a range of a small file (sent from the cache's copy), a 304,
 * the end of a file too big to be kept (sent from its descriptor), and the listing of a
 * directory without an index (MUX_HTTP_STATIC_AUTOINDEX). */
static int sc_done(const char *got)
{
    const char *a = strstr(got, "<p>index</p>");
    const char *b = a ? strstr(a, "HTTP/1.1 206 ") : NULL;
    const char *d = b ? strstr(b, "\r\n\r\nbcd") : NULL;
    const char *e = d ? strstr(d, "HTTP/1.1 304 ") : NULL;
    const char *f = e ? strstr(e, "HTTP/1.1 206 ") : NULL;
    const char *g = f ? strstr(f, "\r\n\r\n0123456789") : NULL;
    const char *h = g ? strstr(g, "HTTP/1.1 200 ") : NULL;
    return h && strstr(h, "listed.txt</a>");
}

static void case_static(struct cx *c)
{
    char dir[] = "/tmp/iomux-fault-XXXXXX", path[64];
    if (!mkdtemp(dir)) {
        bad(c, "mkdtemp: %s", strerror(errno));
        return;
    }
    static const char *names[] = {"index.html", "f.txt", "big.bin"};
    static char big[64 * 1024 + 11]; /* above what the cache keeps in memory: sendfile */
    memset(big, 'x', sizeof big - 11);
    memcpy(big + sizeof big - 11, "0123456789", 11);
    const char *texts[] = {"<p>index</p>\n", "abcdefgh\n", big};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        if (!f || fputs(texts[i], f) < 0 || fclose(f) != 0)
            bad(c, "writing %s", path);
    }
    snprintf(path, sizeof path, "%s/sub", dir); /* a directory without an index: listed */
    if (mkdir(path, 0700) != 0)
        bad(c, "mkdir %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/sub/listed.txt", dir);
    FILE *lf = fopen(path, "w");
    if (!lf || fclose(lf) != 0)
        bad(c, "writing %s", path);
    memset(&sc_files, 0, sizeof sc_files);
    sc_files.flags = MUX_HTTP_STATIC_AUTOINDEX;
    if (!c->bad && note(c, mux_http_static_init(&sc_files, dir)) == 0) {
        http_run(c, sc_handler,
                 "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
                 "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=1-3\r\n\r\n"
                 "GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: Fri, 01 Jan 2100 "
                 "00:00:00 GMT\r\n\r\n"
                 "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=-10\r\n\r\n"
                 "GET /sub/ HTTP/1.1\r\nHost: t\r\n\r\n",
                 sc_done, 5);
        mux_http_static_close(&sc_files);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/sub/listed.txt", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/sub", dir);
    rmdir(path);
    rmdir(dir);
}

/* ---- case: file-system watchers and cleanup ---- */

struct fs_case {
    struct cx *c;
    int heard, polled, cleaned;
};

static void fs_heard(mux_loop_t *loop, mux_fs_event_t *w, const char *name, unsigned events,
                     int status)
{
    (void)loop;
    struct fs_case *s = w->data;
    if (status < 0)
        note(s->c, status); /* watching ended: the watcher is stopped */
    else if (events & MUX_FS_OVERFLOW)
        note(s->c, -ENOBUFS); /* events lost: told, as a failure the case stops on */
    else if (name && strcmp(name, "new") == 0 && (events & MUX_FS_CREATE))
        s->heard++;
}

static void fs_polled(mux_loop_t *loop, mux_fs_poll_t *w, int status, const mux_fs_stat_t *prev,
                      const mux_fs_stat_t *curr)
{
    (void)loop, (void)prev;
    struct fs_case *s = w->data;
    if (status < 0 && status != -ENOENT) /* missing before it is written: expected */
        note(s->c, status);
    else if (curr->size == 3)
        s->polled++;
}

static void fs_cleanup(mux_loop_t *loop, mux_cleanup_t *w)
{
    (void)loop;
    ((struct fs_case *)w->data)->cleaned++;
}

static void case_fs(struct cx *c)
{
    char dir[] = "/tmp/iomux-fault-XXXXXX", path[64];
    if (!mkdtemp(dir)) {
        bad(c, "mkdtemp: %s", strerror(errno));
        return;
    }
    snprintf(path, sizeof path, "%s/new", dir);
    static struct fs_case s; /* the cleanup watcher runs when the sweep closes the loop */
    static mux_cleanup_t cl;
    s = (struct fs_case){.c = c};
    mux_fs_event_t fe;
    mux_fs_poll_t fp;
    int fe_on = 0, fp_on = 0;
    if (note(c, mux_fs_event_init(&fe, fs_heard, dir)) < 0)
        goto out;
    fe.data = &s;
    if (note(c, mux_fs_poll_init(&fp, fs_polled, path, 2000000)) < 0)
        goto out_fe;
    fp.data = &s;
    mux_cleanup_init(&cl, fs_cleanup);
    cl.data = &s;
    mux_cleanup_start(&c->loop, &cl);
    int r = mux_fs_event_start(&c->loop, &fe);
    if (r != -ENOTSUP && note(c, r) < 0)
        goto out_fp;
    fe_on = r == 0;
    if (note(c, mux_fs_poll_start(&c->loop, &fp)) < 0)
        goto out_fp;
    fp_on = 1;
    FILE *f = fopen(path, "w");
    if (!f || fputs("abc", f) < 0 || fclose(f) != 0) {
        bad(c, "writing %s", path);
        goto out_fp;
    }
    if (fe_on)
        spin(c, &s.heard, 1, 1, "the new file heard");
    spin(c, &s.polled, 1, 1, "the new file polled");
    if (!c->err && !c->bad)
        c->complete = 1;
out_fp:
    if (fe_on)
        mux_fs_event_stop(&c->loop, &fe);
    if (fp_on)
        mux_fs_poll_stop(&c->loop, &fp);
    mux_fs_poll_free(&fp);
out_fe:
    mux_fs_event_free(&fe);
out:
    unlink(path);
    rmdir(dir);
}

/* ---- case: fork ---- */

struct fork_case {
    struct cx *c;
    int fired;
};

static void fc_read(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    (void)loop;
    struct fork_case *s = w->data;
    char b;
    if (revents & MUX_ERROR)
        note(s->c, REPORTED_MUX_ERROR);
    else if ((revents & MUX_READ) && read(mux_io_fd(w), &b, 1) == 1)
        s->fired++;
}

/* libkqueue keeps descriptors of its own from its first kqueue on, and runs a thread while
 * one is open: a kqueue made with the real call, and kept, so that neither is counted as the
 * case's, and no leak check meets the thread as it ends. On every backend where libkqueue is
 * linked: the fs_event watchers have a kqueue of their own whatever the loop's backend. (The
 * leak check of a forked child still says that the parent's thread "was not suspended": it
 * is not there.) */
static void keep_library_state(void)
{
#ifdef FAULT_HAVE_KQUEUE
    (void)kqueue();
#endif
}

static void case_fork(struct cx *c)
{
    struct fork_case s = {.c = c};
    int sv[2];
    mux_io_t w;
    int on = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        bad(c, "socketpair: %s", strerror(errno));
        return;
    }
    mux_io_init(&w, fc_read, sv[0], MUX_READ);
    w.data = &s;
    if (note(c, mux_io_start(&c->loop, &w)) < 0)
        goto out;
    on = 1;
    /* One iteration before the fork, so that the kernel state exists. */
    note(c, mux_run(&c->loop, MUX_RUN_NOWAIT));
    if (c->err)
        goto out;
    int pid = fork();
    if (pid < 0) {
        bad(c, "fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        /* The child: re-creates the loop's kernel state, sees its own byte, closes. Its
         * exit status: 0 complete, 1 reported, 2 a check failed, 3 the loop did not close,
         * 4 memory leaked. */
        int code = 0;
        if (note(c, mux_loop_fork(&c->loop)) == 0) {
            if (write(sv[1], "c", 1) != 1)
                bad(c, "write: %s", strerror(errno));
            spin(c, &s.fired, 1, 1, "the child's byte");
        }
        mux_io_stop(&c->loop, &w);
        if (mux_loop_close(&c->loop) != 0)
            code = 3;
        else if (c->bad)
            code = 2;
        else if (c->err)
            code = 1;
        res->child_err = c->err;
#ifdef HAVE_LSAN
        if (!code && __lsan_do_recoverable_leak_check())
            code = 4;
#endif
        child_exit(code);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) > 1) {
        bad(c, "the forked child ended with status %#x", (unsigned)st);
        goto out;
    }
    if (WEXITSTATUS(st) == 1) {
        note(c, res->child_err); /* the child was told of a failure */
        goto out;
    }
    /* The parent's loop goes on as before. */
    if (write(sv[1], "p", 1) != 1)
        bad(c, "write: %s", strerror(errno));
    spin(c, &s.fired, 1, 1, "the parent's byte");
    if (!c->err && !c->bad)
        c->complete = 1;
out:
    if (on)
        mux_io_stop(&c->loop, &w);
    close(sv[0]);
    close(sv[1]);
}

/* ---- the cases ---- */

static const struct {
    const char *name;
    void (*fn)(struct cx *c);
} cases[] = {
    {"loop", case_loop},     {"io", case_io},         {"timers", case_timers},
    {"signal", case_signal}, {"stream", case_stream}, {"stream_pool", case_stream_pool},
    {"fork", case_fork},     {"bulk", case_bulk},     {"v6", case_v6},
    {"http", case_http},     {"static", case_static}, {"fs", case_fs},
    {"work", case_work},     {"spawn", case_spawn},   {"udp", case_udp},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

static int have_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = bind(fd, (struct sockaddr *)&sin6, sizeof sin6) == 0;
    close(fd);
    return ok;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

static void usr1_ignored(int sig)
{
    (void)sig;
}

/* Runs case `k` in this process and writes the result. */
static void run_case(int k)
{
    struct sigaction sa = {.sa_handler = usr1_ignored};
    sigaction(SIGUSR1, &sa, NULL); /* a SIGUSR1 the loop did not take must not kill */
    keep_library_state();
    int fds = count_fds();
    struct cx c = {0};
    int r = note(&c, mux_loop_init(&c.loop, NULL));
    if (r == 0) {
        c.open = 1;
        cases[k].fn(&c);
        int cr = mux_loop_close(&c.loop);
        if (cr != 0)
            bad(&c, "mux_loop_close returned %d", cr);
    }
    if (unmap_after_close)
        munmap(unmap_after_close, unmap_len);
    int now = count_fds();
    if (!c.bad && now != fds)
        bad(&c, "%d descriptors open after the case, %d before", now, fds);
#ifdef HAVE_LSAN
    if (!c.bad && __lsan_do_recoverable_leak_check())
        bad(&c, "memory leaked (the report is above)");
#endif
    res->err = c.err;
    if (c.bad) {
        res->verdict = V_BAD;
        memcpy(res->why, c.why, sizeof res->why);
    } else if (c.complete) {
        res->verdict = V_COMPLETE;
    } else if (c.err) {
        res->verdict = V_REPORTED;
    } else {
        res->verdict = V_BAD;
        snprintf(res->why, sizeof res->why, "neither complete nor told of an error");
    }
}

/* ---- the sweep ---- */

struct opts {
    const char *only_case, *only_point;
    unsigned long max_index;
    unsigned timeout_ms;
    int verbose;
    int modes; /* bit per mode below */
    int only_errno;
};

enum { M_ONCE = 1, M_STICKY = 2, M_EINTR = 4, M_ALT = 8 };

/* Other errors the kernel gives at some points, each injected once (mode "alt"), for the
 * paths that tell them apart: epoll's EPERM (a file it cannot watch) and its ENOENT and
 * EEXIST (a descriptor closed and reused behind its back), a kernel without epoll_pwait2
 * (ENOSYS) or without io_uring's newer flags (EINVAL: set up with fewer), io_uring's lost
 * completions (EBADR) and full completion ring (EBUSY), an aborted connection. */
static const struct {
    const char *point;
    int err;
} alts[] = {
    {"epoll_ctl", EPERM},
    {"epoll_ctl", ENOENT},
    {"epoll_ctl", EEXIST},
    {"epoll_ctl", EBADF},
    {"epoll_pwait2", ENOSYS},
    {"epoll_pwait2", EBADF},
    {"io_uring_queue_init_params", EINVAL},
    {"io_uring_queue_init_params", EPERM},
    {"io_uring_enter2", EBADR},
    {"io_uring_enter2", EBUSY},
    {"io_uring_enter2", EINTR},
    {"io_uring_enter", EBADR},
    {"io_uring_submit", EBUSY},
    {"accept4", ECONNABORTED},
    {"accept4", ENFILE},
    {"connect", ECONNREFUSED},
    {"recv", ETIMEDOUT},
    {"send", EPIPE},
    {"sendmsg", EPIPE},
    {"socket", EAFNOSUPPORT},
    {"timerfd_settime", ECANCELED},
    {"openat2", ENOSYS}, /* a kernel before 5.6: the real-path check instead */
};
enum { NALTS = sizeof alts / sizeof alts[0] };

struct tally {
    unsigned long runs, fired, complete, reported, failures;
    unsigned long as_injected, as_mux_error; /* of the reported: how they were told */
};

/* Forks, runs the case in the child, waits (killing it at the timeout). Returns the
 * result; `how` gets a description of an abnormal end. */
static struct result run_child(int k, unsigned timeout_ms, char *how, size_t howlen)
{
    memset(res, 0, sizeof *res);
    how[0] = 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(how, howlen, "fork: %s", strerror(errno));
        return *res;
    }
    if (pid == 0) {
        run_case(k);
        fflush(NULL);
        child_exit(0);
    }
    int st = 0;
    uint64_t end = mono_ms() + timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            snprintf(how, howlen, "waitpid: %s", strerror(errno));
            return *res;
        }
        if (mono_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            snprintf(how, howlen, "hung: killed after %u ms", timeout_ms);
            res->verdict = V_NONE;
            return *res;
        }
        usleep(500);
    }
    if (WIFSIGNALED(st))
        snprintf(how, howlen, "killed by signal %d", WTERMSIG(st));
    else if (WEXITSTATUS(st) != 0)
        snprintf(how, howlen, "exited with %d (a sanitizer report is above)", WEXITSTATUS(st));
    else if (res->verdict == V_NONE)
        snprintf(how, howlen, "exited without a result");
    return *res;
}

/* Whether a lasting failure is possible at point p. The library's one io_uring_register
 * call enables a ring created disabled (IORING_REGISTER_ENABLE_RINGS), which the kernel
 * refuses only for a ring that is not disabled: a single refusal is tested, a lasting one
 * cannot happen. */
static int lasting(int p)
{
    return strcmp(fault_name(p), "io_uring_register") != 0;
}

/* Whether a run that injected `err` at point p and was told `got` was told right: the
 * injected errno itself, except where the library documents another answer. */
static int told_right(int k, int p, int err, int got)
{
    const char *n = fault_name(p);
    /* The HTTP server reports no error of a client's or the network's making (a reset, a
     * stall, a broken pipe): its client sees the connection end. */
    if ((cases[k].fn == case_http || cases[k].fn == case_static) && got == -ECONNRESET &&
        (err == ETIMEDOUT || err == EPIPE || err == ECONNABORTED))
        return 1;
    if (got == -err)
        return 1;
    /* A caller's io watcher learns of a descriptor the backend refused as MUX_ERROR. */
    if (got == REPORTED_MUX_ERROR)
        return 1;
    /* epoll's ADD that says EEXIST is tried again as a MOD, and a MOD that says ENOENT as an
     * ADD: with the first answer made up here, the real second one stands. */
    if (strcmp(n, "epoll_ctl") == 0 &&
        ((err == EEXIST && got == -ENOENT) || (err == ENOENT && got == -EEXIST)))
        return 1;
    /* io_uring lost completions (EBADR): operations in flight end with -EIO
     * (src/backend/uring/ops.c). */
    if (err == EBADR && got == -EIO)
        return 1;
    /* A buffer ring the kernel would not register: receives from its pool get -ENOBUFS
     * while it is tried again at every wait (src/backend/uring/ops.c). */
    if (strcmp(n, "io_uring_register_buf_ring") == 0 && got == -ENOBUFS)
        return 1;
    return 0;
}

static const char *mode_name(int m)
{
    return m == M_ONCE ? "once" : m == M_STICKY ? "sticky" : m == M_EINTR ? "eintr" : "alt";
}

/* One armed run; returns 1 when it failed (and says why). */
static int armed_run(const struct opts *o, int k, int p, unsigned long idx, int mode, int err,
                     struct tally *t)
{
    fault_reset();
    fault_arm(p, idx, err, mode == M_STICKY ? FAULT_STICKY : FAULT_ONCE);
    char how[128];
    struct result r = run_child(k, o->timeout_ms, how, sizeof how);
    unsigned long fired = fault_fired();
    fault_disarm();
    t->runs++;
    if (fired)
        t->fired++;
    char why[320] = "";
    if (how[0])
        snprintf(why, sizeof why, "%s", how);
    else if (r.verdict == V_BAD)
        snprintf(why, sizeof why, "%s", r.why);
    else if (!fired && r.verdict != V_COMPLETE)
        snprintf(why, sizeof why, "nothing was injected, yet it was told of error %d", r.err);
    else if (mode == M_EINTR && r.verdict != V_COMPLETE)
        snprintf(why, sizeof why, "EINTR reached the caller as error %d", r.err);
    else if (r.verdict == V_REPORTED && !told_right(k, p, err, r.err))
        snprintf(why, sizeof why, "told of error %d (%s), not of the injected %d", r.err,
                 r.err == REPORTED_MUX_ERROR ? "MUX_ERROR" : strerror(-r.err), -err);
    if (!why[0]) {
        if (r.verdict == V_COMPLETE) {
            t->complete++;
        } else {
            t->reported++;
            if (r.err == -err)
                t->as_injected++;
            else if (r.err == REPORTED_MUX_ERROR)
                t->as_mux_error++;
        }
        if (o->verbose)
            printf("  ok   %-12s %-28s #%-3lu %-6s %-4d %s (%d)\n", cases[k].name, fault_name(p),
                   idx, mode_name(mode), err, r.verdict == V_COMPLETE ? "complete" : "reported",
                   r.err);
        return 0;
    }
    t->failures++;
    const char *be = getenv("IOMUX_BACKEND"), *ns = getenv("IOMUX_URING_STREAMS"),
               *tw = getenv("IOMUX_URING_TASKRUN"), *en = getenv("IOMUX_URING_ENTRIES");
    char envs[160];
    snprintf(envs, sizeof envs, "IOMUX_BACKEND=%s%s%s%s%s%s%s", be ? be : "",
             ns ? " IOMUX_URING_STREAMS=" : "", ns ? ns : "", tw ? " IOMUX_URING_TASKRUN=" : "",
             tw ? tw : "", en ? " IOMUX_URING_ENTRIES=" : "", en ? en : "");
    char alt[32] = "";
    if (mode == M_ALT)
        snprintf(alt, sizeof alt, " --errno %d", err);
    printf("FAIL %s: case %s, %s call #%lu failing (%s, %s): %s\n"
           "     again: %s iomux-fault --case %s --point %s --index %lu --mode %s%s\n",
           be ? be : "default", cases[k].name, fault_name(p), idx, mode_name(mode), strerror(err),
           why, envs, cases[k].name, fault_name(p), idx, mode_name(mode), alt);
    return 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: iomux-fault [options]\n"
               "Runs each case with each injection point failing at each call index in turn,\n"
               "on the backend IOMUX_BACKEND names (tests/fault/README.md).\n"
               "  --list              the cases and the injection points\n"
               "  --case NAME         only this case\n"
               "  --point NAME        only this injection point\n"
               "  --index N           only call index N (with --case and --point: one run)\n"
               "  --max-index N       call indices 1..N of each point, and its last (default 40)\n"
               "  --mode M            once, sticky, eintr or alt; repeatable (default: all)\n"
               "  --errno N           with --mode alt: only this errno value\n"
               "  --timeout-ms MS     a run that takes longer has hung (default 10000)\n"
               "  -v                  a line per run\n");
}

int main(int argc, char **argv)
{
    struct opts o = {.max_index = 40, .timeout_ms = 10000};
    unsigned long only_index = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--list") == 0) {
            printf("cases:");
            for (int k = 0; k < NCASES; k++)
                printf(" %s", cases[k].name);
            printf("\npoints:");
            for (int p = 0; p < fault_npoints(); p++)
                printf(" %s", fault_name(p));
            printf("\n");
            return 0;
        } else if (strcmp(a, "-v") == 0) {
            o.verbose = 1;
        } else if (v && strcmp(a, "--case") == 0) {
            o.only_case = v, i++;
        } else if (v && strcmp(a, "--point") == 0) {
            o.only_point = v, i++;
        } else if (v && strcmp(a, "--index") == 0) {
            only_index = strtoul(v, NULL, 10), i++;
        } else if (v && strcmp(a, "--errno") == 0) {
            o.only_errno = atoi(v), i++;
        } else if (v && strcmp(a, "--max-index") == 0) {
            o.max_index = strtoul(v, NULL, 10), i++;
        } else if (v && strcmp(a, "--timeout-ms") == 0) {
            o.timeout_ms = (unsigned)strtoul(v, NULL, 10), i++;
        } else if (v && strcmp(a, "--mode") == 0) {
            int m = strcmp(v, "once") == 0     ? M_ONCE
                    : strcmp(v, "sticky") == 0 ? M_STICKY
                    : strcmp(v, "eintr") == 0  ? M_EINTR
                    : strcmp(v, "alt") == 0    ? M_ALT
                                               : 0;
            if (!m) {
                fprintf(stderr, "iomux-fault: unknown mode %s\n", v);
                return 2;
            }
            o.modes |= m;
            i++;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!o.modes)
        o.modes = M_ONCE | M_STICKY | M_EINTR | M_ALT;
    int only_p = -1;
    if (o.only_point && (only_p = fault_lookup(o.only_point)) < 0) {
        fprintf(stderr, "iomux-fault: no injection point %s (--list)\n", o.only_point);
        return 2;
    }
    if (o.max_index == 0 || o.timeout_ms == 0) {
        fprintf(stderr, "iomux-fault: --max-index and --timeout-ms must be positive\n");
        return 2;
    }
    int r = fault_init();
    res = mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (r < 0 || res == MAP_FAILED) {
        fprintf(stderr, "iomux-fault: cannot map shared memory\n");
        return 1;
    }
    /* The backend must open here at all, or every run would only test a refused init. In
     * a child: a loop's first init in a process does work once (pthread_once), and every
     * run should count it. */
    char *bname = mmap(NULL, 64, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (bname == MAP_FAILED) {
        fprintf(stderr, "iomux-fault: cannot map shared memory\n");
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        mux_loop_t probe;
        if ((r = mux_loop_init(&probe, NULL)) < 0) {
            snprintf(bname, 64, "%s", mux_strerror(r));
            child_exit(1);
        }
        snprintf(bname, 64, "%s", mux_loop_backend(&probe));
        child_exit(mux_loop_close(&probe) == 0 ? 0 : 2);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) == 2) {
        fprintf(stderr, "iomux-fault: the probe for the backend failed\n");
        return 1;
    }
    if (WEXITSTATUS(st) == 1) {
        const char *be = getenv("IOMUX_BACKEND");
        printf("SKIP: backend %s does not open here (%s)\n", be ? be : "default", bname);
        return 77;
    }

    struct tally t = {0};
    int ncases = 0;
    uint64_t t0 = mono_ms();
    for (int k = 0; k < NCASES; k++) {
        if (o.only_case && strcmp(o.only_case, cases[k].name) != 0)
            continue;
        if (cases[k].fn == case_v6 && !have_ipv6_loopback()) {
            printf("case v6 left out: no IPv6 loopback (::1) here\n");
            continue;
        }
        ncases++;
        /* The clean run: must complete with nothing reported; it counts the calls. */
        fault_reset();
        char how[128];
        struct result cr = run_child(k, o.timeout_ms, how, sizeof how);
        if (how[0] || cr.verdict != V_COMPLETE) {
            printf("FAIL %s: case %s without any failure injected: %s\n", bname, cases[k].name,
                   how[0]                ? how
                   : cr.verdict == V_BAD ? cr.why
                                         : "an error was reported");
            t.failures++;
            continue;
        }
        unsigned long calls[128];
        int np = fault_npoints();
        for (int p = 0; p < np && p < 128; p++)
            calls[p] = fault_calls(p);
        if (o.verbose) {
            printf("case %s on %s, calls:", cases[k].name, bname);
            for (int p = 0; p < np; p++)
                if (calls[p])
                    printf(" %s %lu", fault_name(p), calls[p]);
            printf("\n");
        }
        for (int p = 0; p < np; p++) {
            if (only_p >= 0 && p != only_p)
                continue;
            unsigned long n = calls[p];
            for (unsigned long idx = 1; idx <= n; idx++) {
                if (only_index ? idx != only_index : idx > o.max_index && idx != n)
                    continue;
                for (int m = M_ONCE; m <= M_EINTR; m <<= 1) {
                    int def = fault_default_errno(p);
                    if (!(o.modes & m) || (m == M_EINTR && !fault_eintr_possible(p)))
                        continue;
                    /* EINTR is the default errno of some points: once covers it. EINTR
                     * and EAGAIN are transient by nature: no sticky runs for them. */
                    if ((m == M_EINTR && def == EINTR) ||
                        (m == M_STICKY && (def == EINTR || def == EAGAIN || !lasting(p))))
                        continue;
                    armed_run(&o, k, p, idx, m, m == M_EINTR ? EINTR : def, &t);
                }
                if (o.modes & M_ALT)
                    for (int a = 0; a < NALTS; a++)
                        if (fault_lookup(alts[a].point) == p &&
                            (!o.only_errno || o.only_errno == alts[a].err))
                            armed_run(&o, k, p, idx, M_ALT, alts[a].err, &t);
            }
        }
    }
    const char *ns = getenv("IOMUX_URING_STREAMS"), *tw = getenv("IOMUX_URING_TASKRUN"),
               *en = getenv("IOMUX_URING_ENTRIES");
    const char *sep = " (";
    const char *vars[3][2] = {{"streams", ns}, {"taskrun", tw}, {"entries", en}};
    for (int i = 0; i < 3; i++)
        if (vars[i][1]) {
            snprintf(bname + strlen(bname), 64 - strlen(bname), "%s%s=%s", sep, vars[i][0],
                     vars[i][1]);
            sep = ", ";
        }
    if (sep[0] == ',')
        snprintf(bname + strlen(bname), 64 - strlen(bname), ")");
    printf("fault sweep on %s: %lu runs over %d cases (%lu with the failure injected: %lu "
           "reported it, %lu completed anyway), %lu failures, %.1f s\n"
           "  reported as the injected errno %lu, as MUX_ERROR %lu, "
           "as another documented error %lu\n",
           bname, t.runs, ncases, t.fired, t.reported, t.complete, t.failures,
           (double)(mono_ms() - t0) / 1000, t.as_injected, t.as_mux_error,
           t.reported - t.as_injected - t.as_mux_error);
    return t.failures ? 1 : 0;
}
