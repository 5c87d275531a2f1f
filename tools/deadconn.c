/* SPDX-License-Identifier: MIT */
/* deadconn: opens many idle ("dead") TCP connections to a server on loopback and holds
 * them, as Libenzi's tool of the same name did for his epoll measurements (docs/studies.md,
 * study 4): connections that a server must keep watching but that never send a byte.
 *
 *   deadconn --port N --count C [--seconds T] [--sources K] [--host 127.0.0.X]
 *
 * It connects C sockets (at most --inflight at a time, so that the server's accept queue
 * never overflows), prints "holding C connections ..." once every one is connected, keeps
 * them without sending until T seconds have passed or SIGINT/SIGTERM arrives, then closes
 * them all and prints a RESULT line. A connection the server closes meanwhile is counted as
 * lost. Each socket is bound to a source address 127.0.0.1 .. 127.0.0.K in turn before it
 * connects (IP_BIND_ADDRESS_NO_PORT, so the port is picked with the whole address pair):
 * one source address gives one ephemeral port range's worth of connections to a server,
 * about 28,000 here, so more sources lift that limit. Loopback only: any other address is
 * refused. The connections run on an iomux loop: an io watcher waits for the connect, then
 * a stream reads (into one buffer shared by all), which is how a close by the server is
 * seen. Exits 0 when every connection was made and held and every descriptor it opened was
 * closed again, 1 otherwise (FAIL: ...), 2 on bad usage.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <iomux.h>

#define MAX_SOURCES 254
#define MAX_COUNT 1000000
#define FD_SPARE 16 /* descriptors kept for stdio, the loop's own and /proc reads */

enum { C_FREE, C_CONNECTING, C_HELD, C_LOST, C_CLOSING };

struct conn {
    union {
        mux_io_t io;         /* while connecting: the socket becoming writable */
        mux_stream_t stream; /* once connected: reading, to notice the server's close */
    } u;
    int fd;
    int state;
};

static struct {
    unsigned port, count, sources, inflight;
    double seconds, connect_timeout;
    struct in_addr host;
} opt = {0, 0, 0, 256, 60, 10, {0}};

static mux_loop_t loop;
static mux_timer_t hold_timer, tick;
static mux_signal_t sigint, sigterm;
static struct conn *conns;
static unsigned next_conn, connecting, held, lost, failed, closing;
static unsigned long fail_errno[8]; /* the first failures' errnos, to say why */
static int holding, stopping;
static uint64_t t0, t_held, last_progress;
static char scratch[64]; /* what a dead connection might receive; shared by every stream */

static double secs_since(uint64_t t)
{
    return (double)(mux_now(&loop) - t) / 1e9;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return d ? n - 1 : -1; /* less the directory's own descriptor */
}

static void start_more(void);
static void finish(void);

static void on_closed(mux_stream_t *s)
{
    (void)s;
    if (--closing == 0 && stopping)
        finish();
}

static void on_read(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct conn *c = s->data;
    (void)buf;
    if (nread > 0)
        return; /* a server that talks first: the connection is still held */
    /* End of stream or an error: the server let the connection go. */
    c->state = C_LOST;
    held--;
    lost++;
    closing++;
    mux_stream_close(s, on_closed);
}

static void close_all(void);

static void failed_connect(struct conn *c, int err)
{
    if (failed < sizeof fail_errno / sizeof fail_errno[0])
        fail_errno[failed] = (unsigned long)err;
    failed++;
    c->state = C_LOST;
}

static void on_connected(mux_loop_t *l, mux_io_t *w, unsigned revents)
{
    struct conn *c = w->data;
    int err = 0;
    socklen_t len = sizeof err;
    (void)revents;
    mux_io_stop(l, w);
    connecting--;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err == 0) {
        /* The union's watcher is stopped: the same memory becomes the stream. */
        c->u.stream.data = c;
        err = -mux_stream_open(l, &c->u.stream, c->fd);
        if (err == 0 && mux_read_start(&c->u.stream, scratch, sizeof scratch, on_read) == 0) {
            c->state = C_HELD;
            held++;
            last_progress = mux_now(l);
            start_more();
            return;
        }
        if (err == 0) { /* open, but cannot read: close it as a stream */
            failed_connect(c, EIO);
            closing++;
            mux_stream_close(&c->u.stream, on_closed);
            start_more();
            return;
        }
    }
    close(c->fd);
    failed_connect(c, err);
    start_more();
}

/* Starts connects until --inflight are under way or every connection has been tried. */
static void start_more(void)
{
    while (!stopping && connecting < opt.inflight && next_conn < opt.count) {
        struct conn *c = &conns[next_conn];
        unsigned i = next_conn++;
        struct sockaddr_in src = {.sin_family = AF_INET};
        struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
        src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + i % opt.sources);
        dst.sin_addr = opt.host;
        int one = 1;
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0) {
            failed_connect(c, errno);
            continue;
        }
        /* The port is chosen at connect, for the whole address pair: without this, bind
         * would reserve a port for the source address alone, and run out far sooner. */
        setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        if (bind(c->fd, (struct sockaddr *)&src, sizeof src) != 0 ||
            (connect(c->fd, (struct sockaddr *)&dst, sizeof dst) != 0 && errno != EINPROGRESS)) {
            int err = errno;
            close(c->fd);
            failed_connect(c, err);
            continue;
        }
        c->state = C_CONNECTING;
        mux_io_init(&c->u.io, on_connected, c->fd, MUX_WRITE);
        c->u.io.data = c;
        int r = mux_io_start(&loop, &c->u.io);
        if (r < 0) {
            close(c->fd);
            failed_connect(c, -r);
            continue;
        }
        connecting++;
    }
    if (!holding && !stopping && next_conn == opt.count && connecting == 0) {
        holding = 1;
        t_held = mux_now(&loop);
        printf("holding %u connections to %s:%u from %u source address%s (%u failed), "
               "%.2f s to connect\n",
               held, inet_ntoa(opt.host), opt.port, opt.sources, opt.sources == 1 ? "" : "es",
               failed, secs_since(t0));
        fflush(stdout);
        mux_timer_stop(&loop, &tick); /* it only watches the connects */
        if (held < opt.count) { /* some failed: the run has failed, no point holding the rest */
            close_all();
            return;
        }
        mux_timer_start(&loop, &hold_timer, (uint64_t)(opt.seconds * 1e9), 0);
    }
}

static void on_hold_over(mux_loop_t *l, mux_timer_t *t)
{
    (void)l;
    (void)t;
    close_all();
}

/* Gives up on connects that made no progress for --connect-timeout seconds. */
static void on_tick(mux_loop_t *l, mux_timer_t *t)
{
    (void)t;
    if (!holding && (double)(mux_now(l) - last_progress) / 1e9 > opt.connect_timeout) {
        fprintf(stderr, "deadconn: no connection completed for %.0f s; giving up\n",
                opt.connect_timeout);
        close_all();
    }
}

static void on_signal(mux_loop_t *l, mux_signal_t *w, int signum)
{
    (void)l;
    (void)w;
    (void)signum;
    close_all();
}

static void close_all(void)
{
    if (stopping)
        return;
    stopping = 1;
    mux_timer_stop(&loop, &hold_timer);
    mux_timer_stop(&loop, &tick);
    mux_signal_stop(&loop, &sigint);
    mux_signal_stop(&loop, &sigterm);
    for (unsigned i = 0; i < next_conn; i++) {
        struct conn *c = &conns[i];
        if (c->state == C_CONNECTING) {
            mux_io_stop(&loop, &c->u.io);
            close(c->fd);
            connecting--;
            c->state = C_LOST;
        } else if (c->state == C_HELD) {
            c->state = C_CLOSING;
            closing++;
            mux_stream_close(&c->u.stream, on_closed);
        }
    }
    if (closing == 0)
        finish();
}

static unsigned held_at_end, peak;

static void finish(void)
{
    held_at_end = held;
    held = 0;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: deadconn --port N --count C [--seconds T] [--sources K] [--host ADDR]\n"
            "                [--inflight M] [--connect-timeout S]\n"
            "       deadconn --backends\n"
            "Opens C idle TCP connections to ADDR:N on loopback, holds them without sending\n"
            "for T seconds or until SIGINT/SIGTERM, then closes them. Prints 'holding C\n"
            "connections ...' once all are connected, and a 'RESULT {json}' line at the end.\n"
            "  --port N             the server's port (required)\n"
            "  --count C            connections to hold (required; at most what RLIMIT_NOFILE\n"
            "                       allows less %d)\n"
            "  --seconds T          how long to hold them (default 60, at most 86400)\n"
            "  --sources K          bind to 127.0.0.1 .. 127.0.0.K in turn (default: enough\n"
            "                       that each uses at most a quarter of the port range)\n"
            "  --host ADDR          the server's address, in 127.0.0.0/8 (default 127.0.0.1)\n"
            "  --inflight M         connects under way at once (default 256)\n"
            "  --connect-timeout S  give up when no connect completes for S s (default 10)\n"
            "  --backends           list this build's iomux backends and whether each opens\n"
            "Exits 0 when all C were held and every descriptor was closed again, 1 (FAIL: ...)\n"
            "otherwise, 2 on bad usage. The loop's backend comes from IOMUX_BACKEND.\n",
            FD_SPARE);
}

static double number(const char *flag, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= lo && v <= hi)) {
        fprintf(stderr, "deadconn: bad --%s '%s' (a number from %g to %g)\n", flag, s, lo, hi);
        exit(2);
    }
    return v;
}

/* A count: decimal digits only (no 0x50, 1e2 or 1.7). */
static unsigned whole(const char *flag, const char *s, unsigned lo, unsigned hi)
{
    char *end = (char *)s; /* stays at s when no digit leads: refused */
    errno = 0;
    unsigned long v = s[0] >= '0' && s[0] <= '9' ? strtoul(s, &end, 10) : 0;
    if (end == s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "deadconn: bad --%s '%s' (a whole number from %u to %u)\n", flag, s,
                lo, hi);
        exit(2);
    }
    return (unsigned)v;
}

static void list_backends(void)
{
    for (size_t i = 0; mux_backend_name(i); i++) {
        int r = mux_backend_probe(mux_backend_name(i));
        printf("%s %s\n", mux_backend_name(i), r == 0 ? "ok" : mux_strerror(r));
    }
    exit(0);
}

static void parse(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'},     {"count", required_argument, NULL, 'c'},
        {"seconds", required_argument, NULL, 't'},  {"sources", required_argument, NULL, 's'},
        {"host", required_argument, NULL, 'H'},     {"inflight", required_argument, NULL, 'm'},
        {"connect-timeout", required_argument, NULL, 'T'},
        {"backends", no_argument, NULL, 'b'},       {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *host = "127.0.0.1";
    int o;
    while ((o = getopt_long(argc, argv, "p:c:t:s:H:m:T:bh", opts, NULL)) != -1) {
        switch (o) {
        case 'p':
            opt.port = whole("port", optarg, 1, 65535);
            break;
        case 'c':
            opt.count = whole("count", optarg, 1, MAX_COUNT);
            break;
        case 't':
            opt.seconds = number("seconds", optarg, 0, 86400);
            break;
        case 's':
            opt.sources = whole("sources", optarg, 1, MAX_SOURCES);
            break;
        case 'H':
            host = optarg;
            break;
        case 'm':
            opt.inflight = whole("inflight", optarg, 1, 65536);
            break;
        case 'T':
            opt.connect_timeout = number("connect-timeout", optarg, 0.1, 3600);
            break;
        case 'b':
            list_backends();
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (optind < argc || !opt.port || !opt.count) {
        fprintf(stderr, "deadconn: --port and --count are required\n");
        usage(stderr);
        exit(2);
    }
    if (inet_pton(AF_INET, host, &opt.host) != 1) {
        fprintf(stderr, "deadconn: --host '%s' is not a dotted IPv4 address (127.0.0.X)\n", host);
        exit(2);
    }
    if ((ntohl(opt.host.s_addr) >> 24) != 127) { /* loopback only, by design */
        fprintf(stderr, "deadconn: --host '%s' is not an address in 127.0.0.0/8\n", host);
        exit(2);
    }
}

/* Source addresses so that each takes at most a quarter of the ephemeral port range: the
 * rest stays for the load tool (which connects from 127.0.0.1 too) and for connections
 * still in TIME_WAIT. */
static unsigned default_sources(void)
{
    unsigned lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%u %u", &lo, &hi) != 2 || hi < lo)
            lo = 32768, hi = 60999;
        fclose(f);
    }
    unsigned per = (hi - lo + 1) / 4;
    unsigned k = (opt.count + per - 1) / per;
    return k < 1 ? 1 : k > MAX_SOURCES ? MAX_SOURCES : k;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    exit(1);
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    if (!opt.sources)
        opt.sources = default_sources();
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    if ((rlim_t)opt.count + FD_SPARE > rl.rlim_cur)
        fail("%u connections need more descriptors than RLIMIT_NOFILE allows (%llu, less %d)",
             opt.count, (unsigned long long)rl.rlim_cur, FD_SPARE);
    signal(SIGPIPE, SIG_IGN);
    /* Counted after a first loop: a backend's library may keep descriptors for the whole
     * process from then on (libkqueue keeps two). */
    if (mux_loop_init(&loop, NULL) == 0)
        mux_loop_close(&loop);
    int fds_before = count_fds();
    if (!(conns = calloc(opt.count, sizeof *conns)))
        fail("no memory for %u connections", opt.count);
    int r = mux_loop_init(&loop, NULL);
    if (r < 0)
        fail("loop: %s", mux_strerror(r));
    mux_timer_init(&hold_timer, on_hold_over);
    mux_timer_init(&tick, on_tick);
    mux_signal_init(&sigint, on_signal, SIGINT);
    mux_signal_init(&sigterm, on_signal, SIGTERM);
    if ((r = mux_signal_start(&loop, &sigint)) < 0 || (r = mux_signal_start(&loop, &sigterm)) < 0)
        fail("signals: %s", mux_strerror(r));
    t0 = last_progress = mux_now(&loop);
    mux_timer_start(&loop, &tick, 100000000, 100000000);
    start_more();
    unsigned max_held = 0;
    while (mux_loop_active(&loop) > 0) {
        if ((r = mux_run(&loop, MUX_RUN_ONCE)) < 0)
            fail("run: %s", mux_strerror(r));
        if (held > max_held)
            max_held = held;
    }
    peak = max_held;
    double held_s = holding ? secs_since(t_held) : 0;
    const char *backend = mux_loop_backend(&loop);
    char bname[16];
    snprintf(bname, sizeof bname, "%s", backend ? backend : "?");
    if ((r = mux_loop_close(&loop)) < 0)
        fail("loop close: %s", mux_strerror(r));
    free(conns);
    int fds_after = count_fds();
    printf("RESULT {\"count\":%u,\"held\":%u,\"peak\":%u,\"held_at_end\":%u,\"lost\":%u,"
           "\"failed\":%u,\"sources\":%u,\"held_seconds\":%.3f,\"fds_before\":%d,"
           "\"fds_after\":%d,\"backend\":\"%s\"}\n",
           opt.count, holding ? peak : 0, peak, held_at_end, lost, failed, opt.sources, held_s,
           fds_before, fds_after, bname);
    fflush(stdout);
    if (failed)
        fail("%u of %u connections failed (first: %s)", failed, opt.count,
             strerror((int)fail_errno[0]));
    if (!holding)
        fail("stopped before every connection was made (%u held)", peak);
    if (lost)
        fail("the server closed %u of the %u connections while they were held", lost,
             opt.count);
    if (fds_after != fds_before)
        fail("%d descriptors open at the end, %d at the start: leaked", fds_after, fds_before);
    return 0;
}
