/* SPDX-License-Identifier: MIT */
/* iomux-httpd: a static-file HTTP/1.1 server on iomux's HTTP module (docs/http.md).
 *
 *   iomux-httpd --root DIR [--port N] [--bind ADDR] [limits and timeouts]
 *               [--access-log FILE|-] [--drain-timeout S]
 *               [--autoindex] [--dotfiles] [--mime-types FILE] [--max-ranges N]
 *               [--threads N [--pin] [--steer cpu|bpf | --acceptor]]
 *
 * Serves GET and HEAD from DIR: conditional requests, byte ranges (several as
 * multipart/byteranges), index.html for directories (or a listing with --autoindex),
 * /.well-known/ but no other dot-file unless --dotfiles, media types from /etc/mime.types
 * (or --mime-types FILE) over a built-in table, nothing outside DIR. The backend comes from
 * IOMUX_BACKEND. SIGINT or SIGTERM (on Windows: Ctrl-C, Ctrl-Break, or the console closing)
 * shuts it down gracefully: it stops accepting, closes the connections that wait for a
 * request, lets the answers in flight finish for up to --drain-timeout seconds, and exits 0;
 * a second signal closes everything at once. Errors go to stderr with their time; with
 * --access-log, a line per answer in the Combined Log Format. At start the soft limit on
 * open files is raised to the hard one (as nginx's worker_rlimit_nofile lets you), and the
 * limit it got is said; each loop's file cache keeps at most its share of a quarter of it
 * open. Windows has no such limit: the caches keep handles as the HTTP module's default
 * says.
 *
 * A loop per core: --threads N runs N loops, a thread each (loop 0 on the main thread), each
 * with its own server, file cache and access-log buffer (none is shared between threads). By
 * default every loop listens on the port (SO_REUSEPORT), --steer gives each connection to the
 * loop on the CPU that received it, and --acceptor makes loop 0 accept for all and hand the
 * connections round robin through channels (always on Windows, which has no SO_REUSEPORT).
 * Loop 0 hears the signals and tells every loop through an async. At exit each loop prints
 * the requests it answered.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _WIN32
#define close_socket closesocket
#else
#include <sys/resource.h>
#define close_socket close
#endif

#include "cli.h"
#include "httpd_log.h"
#include "httpd_watch.h"
#include "iomux.h"
#include "iomux/http.h"

#define MAX_THREADS 1024
#define NS          1000000000ull

/* One loop and its server. */
struct httpd {
    mux_loop_t loop;
    mux_http_server_t srv;
    mux_http_static_t files;
    mux_listener_t l;  /* --acceptor: loop 0's, which feeds every loop's channel */
    mux_chan_t chan;   /* --acceptor: the connections loop 0 hands over */
    mux_async_t stop;  /* loop 0 tells every loop to drain or close its server */
    mux_timer_t flush; /* writes the access log's buffer out once a second */
    struct access_log alog;
    struct cli_stop sigs;         /* loop 0's */
    mux_async_t all_closed;       /* loop 0's: a loop's server has closed */
    pthread_t thread;
    int index, cpu, has_chan, listening, logging;
    unsigned long requests, handed; /* answered; --acceptor: connections handed to it */
};

/* What the command line says. */
struct options {
    const char *root, *bind_addr, *access_log;
    unsigned port;
    mux_http_server_options_t o;
    mux_listen_options_t lopts;
    int pin, watch_root;
    unsigned steer;
    mux_http_static_t files; /* each loop's static files start from these options */
};

static struct {
    int nthreads, acceptor;
    unsigned next; /* --acceptor: the next loop's turn (loop 0's thread only) */
    uint64_t drain_ns;
    atomic_int phase;  /* 0 serving; 1 draining (the first signal); 2 closing (a second) */
    atomic_int closed; /* loops whose server has closed */
    struct httpd *d;
} cfg = {.nthreads = 1, .drain_ns = 30 * NS};

/* ---- serving ---- */

static void on_request(mux_http_exchange_t *x)
{
    struct httpd *d = mux_http_exchange_server(x)->data;
    d->requests++;
    int rc = mux_http_serve_static(x, &d->files);
    if (rc == 0 || rc == -ECANCELED)
        return; /* answered, or its client is gone */
    /* The server could not answer (the exchange is still held): 500, never silence. */
    error_log("answering %.*s: %s", (int)mux_http_exchange_request(x)->target.len,
              mux_http_exchange_request(x)->target.base, mux_strerror(rc));
    static const char body[] = "500 Internal Server Error\n";
    mux_http_header_t type = {{"Content-Type", 12}, {"text/plain", 10}};
    mux_http_respond(x, 500, &type, 1, body, sizeof body - 1);
}

static void on_error(mux_http_server_t *srv, int err)
{
    struct httpd *d = srv->data;
    error_log("loop %d: %s", d->index, mux_strerror(err));
}

static void on_log(mux_http_server_t *srv, const mux_http_log_t *e)
{
    access_log_add(&((struct httpd *)srv->data)->alog, e);
}

static void on_flush(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    access_log_flush(&((struct httpd *)t->data)->alog);
}

/* --acceptor: a connection loop 0 accepted. */
static void on_handed(mux_chan_t *ch, mux_msg_t *msg, int status)
{
    struct httpd *d = ch->data;
    if (status != 0)
        return; /* closing: the socket is closed for us */
    int rc = mux_http_server_adopt(&d->srv, ch, msg);
    if (rc == 0)
        d->handed++;
    else
        on_error(&d->srv, rc); /* the socket left in msg is closed when this returns */
}

/* --acceptor, loop 0: hands the connection round robin to every loop's channel (its own
 * included: one path for all); a full channel's turn goes to the next. */
static void on_accept(mux_listener_t *l, mux_os_sock_t sock, int status)
{
    struct httpd *d = l->data;
    if (status != 0) {
        on_error(&d->srv, status); /* the listener pauses and resumes by itself */
        return;
    }
    for (int tries = 0; tries < cfg.nthreads; tries++) {
        struct httpd *to = &cfg.d[cfg.next++ % (unsigned)cfg.nthreads];
        if (mux_chan_send_socket(&to->chan, l, sock, NULL) == 0)
            return;
    }
    close_socket(sock);
    on_error(&d->srv, -EAGAIN); /* every channel full */
}

/* ---- shutting down ---- */

static void on_server_closed(mux_http_server_t *srv)
{
    struct httpd *d = srv->data;
    mux_async_stop(&d->loop, &d->stop);
    if (d->logging) {
        mux_timer_stop(&d->loop, &d->flush);
        access_log_flush(&d->alog);
    }
    atomic_fetch_add(&cfg.closed, 1);
    mux_async_send(&cfg.d[0].all_closed);
}

/* Loop 0: once every loop's server has closed, nothing is left to hear, and its run ends. */
static void on_all_closed(mux_loop_t *loop, mux_async_t *a)
{
    struct httpd *d = a->data;
    if (atomic_load(&cfg.closed) < cfg.nthreads)
        return;
    cli_stop_stop(&d->sigs, loop);
    mux_async_stop(loop, a);
}

/* Every loop: the first signal drains its server, a second closes it at once. */
static void on_stop(mux_loop_t *loop, mux_async_t *a)
{
    (void)loop;
    struct httpd *d = a->data;
    if (d->listening)
        mux_listener_close(&d->l, NULL);
    d->listening = 0;
    if (d->has_chan)
        mux_chan_close(&d->chan);
    d->has_chan = 0;
    if (atomic_load(&cfg.phase) == 1 && cfg.drain_ns)
        mux_http_server_drain(&d->srv, cfg.drain_ns, on_server_closed);
    else /* during a drain: ends it now; once closed: -EINVAL, nothing to do */
        mux_http_server_close(&d->srv, on_server_closed);
}

static void on_signal(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    (void)loop;
    (void)w;
    int phase = atomic_load(&cfg.phase);
    if (phase >= 2)
        return;
    atomic_store(&cfg.phase, phase + 1);
    error_log("%s: %s", cli_signal_name(signum),
              phase == 0 && cfg.drain_ns ? "draining (a second signal closes at once)" : "closing");
    for (int i = 0; i < cfg.nthreads; i++)
        mux_async_send(&cfg.d[i].stop); /* loop 0's own included */
}

/* ---- setting up ---- */

static void *run_loop(void *arg)
{
    struct httpd *d = arg;
    if (d->cpu >= 0 && (errno = cli_pin(d->cpu)) != 0)
        error_log("loop %d: pin to CPU %d: %s", d->index, d->cpu, strerror(errno));
    int rc = mux_run(&d->loop, MUX_RUN_DEFAULT);
    if (rc < 0)
        error_log("loop %d: run: %s", d->index, mux_strerror(rc));
    return (void *)(intptr_t)(rc < 0);
}

static void usage(FILE *to)
{
    fprintf(to, "usage: iomux-httpd --root DIR [--port N] [--bind ADDR] [--max-head BYTES]\n"
                "                   [--max-target BYTES] [--max-headers N] [--max-body BYTES]\n"
                "                   [--header-timeout S] [--idle-timeout S] [--body-timeout S]\n"
                "                   [--write-timeout S] [--max-requests N] [--max-connections N]\n"
                "                   [--access-log FILE|-] [--drain-timeout S] [--reuseport]\n"
                "                   [--autoindex] [--dotfiles] [--mime-types FILE]\n"
                "                   [--max-ranges N] [--watch-root]\n"
                "                   [--threads N [--pin] [--steer cpu|bpf | --acceptor]]\n"
                "  --root DIR           the directory to serve (required)\n"
                "  --port N             TCP port (default 8080; 0 picks a free one)\n"
                "  --bind ADDR          IPv4 or IPv6 address (default 127.0.0.1)\n"
                "  --max-head BYTES     request line and fields (default 65536; more: 431)\n"
                "  --max-target BYTES   request target (default 8192; more: 414)\n"
                "  --max-headers N      header fields (default 100; more: 431)\n"
                "  --max-body BYTES     request body (default 1048576; more: 413)\n"
                "  --header-timeout S   the head, from its first byte (default 10; then 408)\n"
                "  --idle-timeout S     between requests (default 60)\n"
                "  --body-timeout S     a body with no byte (default 10)\n"
                "  --write-timeout S    a response with no byte leaving (default 30)\n"
                "  --max-requests N     per connection (default 1000)\n"
                "  --max-connections N  at once (default 10000)\n"
                "  --access-log FILE|-  a line per answer, Combined Log Format ('-': stdout)\n"
                "  --drain-timeout S    on SIGINT or SIGTERM (Windows: Ctrl-C, Ctrl-Break, the\n"
                "                       console closing), how long answers in flight may\n"
                "                       take to finish (default 30; 0: close at once)\n"
                "  --reuseport          SO_REUSEPORT, to run one server per CPU on one port\n"
                "  --autoindex          list a directory that has no index.html\n"
                "  --dotfiles           serve names that start with '.' (/.well-known/ always)\n"
                "  --mime-types FILE    media types by extension (default /etc/mime.types, over\n"
                "                       a built-in table)\n"
                "  --max-ranges N       byte ranges in one request (default 16, at most 256;\n"
                "                       more: the whole file)\n"
                "  --watch-root         watch the root's directories and drop a file from the\n"
                "                       open-file cache as soon as it changes (else it is\n"
                "                       checked at most once a second)\n"
                "  --threads N          N loops, a thread and a server each (default 1); each\n"
                "                       listens on the port (SO_REUSEPORT) unless --acceptor\n"
                "                       (always on Windows)\n"
                "  --pin                pin loop i to the i-th CPU this process may run on\n"
                "  --steer cpu|bpf      (implies --pin) each connection to the loop on the CPU\n"
                "                       that received it: SO_INCOMING_CPU, or a BPF program\n"
                "  --acceptor           loop 0 alone accepts, and hands connections round robin\n"
                "                       to every loop through channels\n"
                "  --version            the program's and the library's version\n"
                "Prints 'listening on ADDR:PORT' once ready, and at exit per loop 'loop I\n"
                "(cpu C): R requests'. The backend comes from the\n"
                "IOMUX_BACKEND environment variable (epoll, poll, select, uring, or the opt-in\n"
                "rtsig; iocp or select on Windows), else the best available.\n");
}

/* The command line into `op`; returns -1 to go on, or the status to exit with. */
static int parse_args(int argc, char **argv, struct options *op)
{
    enum {
        O_ROOT = 1,
        O_PORT,
        O_BIND,
        O_HEAD,
        O_TARGET,
        O_HEADERS,
        O_BODY,
        O_HTO,
        O_ITO,
        O_BTO,
        O_WTO,
        O_REQS,
        O_CONNS,
        O_LOG,
        O_DRAIN,
        O_REUSE,
        O_THREADS,
        O_PIN,
        O_STEER,
        O_ACCEPTOR,
        O_AUTOINDEX,
        O_DOTFILES,
        O_MIME,
        O_RANGES,
        O_WATCH,
        O_VERSION,
        O_HELP
    };
    static const struct option opts[] = {
        {"root", required_argument, NULL, O_ROOT},
        {"port", required_argument, NULL, O_PORT},
        {"bind", required_argument, NULL, O_BIND},
        {"max-head", required_argument, NULL, O_HEAD},
        {"max-target", required_argument, NULL, O_TARGET},
        {"max-headers", required_argument, NULL, O_HEADERS},
        {"max-body", required_argument, NULL, O_BODY},
        {"header-timeout", required_argument, NULL, O_HTO},
        {"idle-timeout", required_argument, NULL, O_ITO},
        {"body-timeout", required_argument, NULL, O_BTO},
        {"write-timeout", required_argument, NULL, O_WTO},
        {"max-requests", required_argument, NULL, O_REQS},
        {"max-connections", required_argument, NULL, O_CONNS},
        {"access-log", required_argument, NULL, O_LOG},
        {"drain-timeout", required_argument, NULL, O_DRAIN},
        {"reuseport", no_argument, NULL, O_REUSE},
        {"threads", required_argument, NULL, O_THREADS},
        {"pin", no_argument, NULL, O_PIN},
        {"steer", required_argument, NULL, O_STEER},
        {"acceptor", no_argument, NULL, O_ACCEPTOR},
        {"autoindex", no_argument, NULL, O_AUTOINDEX},
        {"dotfiles", no_argument, NULL, O_DOTFILES},
        {"mime-types", required_argument, NULL, O_MIME},
        {"max-ranges", required_argument, NULL, O_RANGES},
        {"watch-root", no_argument, NULL, O_WATCH},
        {"version", no_argument, NULL, O_VERSION},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    mux_http_server_options_t *o = &op->o;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_ROOT:
            op->root = optarg;
            break;
        case O_PORT:
            op->port = (unsigned)cli_number("port", optarg, 0, 65535);
            break;
        case O_BIND:
            op->bind_addr = optarg;
            break;
        case O_HEAD:
            o->limits.max_head = cli_number("max-head", optarg, 256, 1u << 24);
            break;
        case O_TARGET:
            o->limits.max_target = cli_number("max-target", optarg, 16, 1u << 24);
            break;
        case O_HEADERS:
            o->limits.max_headers = (uint32_t)cli_number("max-headers", optarg, 1, 10000);
            break;
        case O_BODY:
            o->limits.max_body = cli_number("max-body", optarg, 1, 1ull << 40);
            break;
        case O_HTO:
            o->header_timeout_ns = cli_number("header-timeout", optarg, 1, 86400) * NS;
            break;
        case O_ITO:
            o->idle_timeout_ns = cli_number("idle-timeout", optarg, 1, 86400) * NS;
            break;
        case O_BTO:
            o->body_timeout_ns = cli_number("body-timeout", optarg, 1, 86400) * NS;
            break;
        case O_WTO:
            o->write_timeout_ns = cli_number("write-timeout", optarg, 1, 86400) * NS;
            break;
        case O_REQS:
            o->max_requests = (uint32_t)cli_number("max-requests", optarg, 1, 1u << 30);
            break;
        case O_CONNS:
            o->max_connections = (uint32_t)cli_number("max-connections", optarg, 1, 1u << 24);
            break;
        case O_LOG:
            op->access_log = optarg;
            break;
        case O_DRAIN:
            cfg.drain_ns = (uint64_t)(cli_seconds("drain-timeout", optarg, 0, 86400) * 1e9);
            break;
        case O_REUSE:
            op->lopts.flags |= MUX_LISTEN_REUSEPORT;
            break;
        case O_THREADS:
            cfg.nthreads = (int)cli_number("threads", optarg, 1, MAX_THREADS);
            break;
        case O_PIN:
            op->pin = 1;
            break;
        case O_STEER:
            op->steer = cli_steer(optarg), op->pin = 1;
            break;
        case O_ACCEPTOR:
            cfg.acceptor = 1;
            break;
        case O_AUTOINDEX:
            op->files.flags |= MUX_HTTP_STATIC_AUTOINDEX;
            break;
        case O_DOTFILES:
            op->files.flags |= MUX_HTTP_STATIC_DOTFILES;
            break;
        case O_MIME:
            op->files.mime_types = optarg;
            break;
        case O_WATCH:
            op->watch_root = 1;
            break;
        case O_RANGES:
            op->files.max_ranges =
                (uint32_t)cli_number("max-ranges", optarg, 1, MUX_HTTP_STATIC_RANGES_MAX);
            break;
        case O_VERSION:
            printf("iomux-httpd (iomux %s)\n", mux_version_string());
            return 0;
        case 'h':
        case O_HELP:
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc || !op->root) {
        if (!op->root)
            fprintf(stderr, "iomux-httpd: --root is required\n");
        usage(stderr);
        return 2;
    }
    if (op->steer && cfg.acceptor) {
        fprintf(stderr, "iomux-httpd: --steer and --acceptor exclude each other\n");
        return 2;
    }
    if (op->files.mime_types && access(op->files.mime_types, R_OK) != 0) {
        fprintf(stderr, "iomux-httpd: --mime-types %s: %s\n", op->files.mime_types,
                strerror(errno));
        return 2;
    }
    return -1;
}

/* The soft limit on open files raised to the hard one: every file the cache keeps open and
 * every connection takes one. Says what it got. Windows has no such limit. */
static void raise_nofile(void)
{
#ifdef _WIN32
    error_log("open files: no limit (Windows handles)");
#else
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t was = rl.rlim_cur;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            rl.rlim_cur = was;
    }
    if (rl.rlim_cur != was)
        error_log("open files: %llu (raised from %llu)", (unsigned long long)rl.rlim_cur,
                  (unsigned long long)was);
    else
        error_log("open files: %llu", (unsigned long long)rl.rlim_cur);
#endif
}

/* Loop i: its loop, file cache, server, and listener or channel. 0, or -1 said. */
static int open_httpd(struct httpd *d, struct options *op, struct sockaddr_storage *ss,
                      socklen_t len, int log_fd)
{
    int rc;
    d->files = op->files;
    if ((rc = mux_http_static_init(&d->files, op->root)) < 0) {
        fprintf(stderr, "iomux-httpd: root %s: %s\n", op->root, mux_strerror(rc));
        return -1;
    }
    /* Each loop is run by one thread, its own: io_uring may defer its completion work to
     * the loop's waits (docs/backends.md). */
    mux_loop_options_t loop_opts = {.flags = MUX_LOOP_ONE_THREAD};
    if ((rc = mux_loop_init(&d->loop, &loop_opts)) < 0) {
        cli_loop_error(rc);
        return -1;
    }
    if (op->watch_root && !httpd_watch_start(&d->loop, &d->files, op->root))
        return -1;
    if (log_fd >= 0) {
        if (access_log_init(&d->alog, log_fd) < 0)
            return fprintf(stderr, "iomux-httpd: out of memory\n"), -1;
        mux_timer_init(&d->flush, on_flush);
        d->flush.data = d;
        mux_timer_start(&d->loop, &d->flush, NS, NS);
        d->logging = 1;
    }
    if ((rc = mux_http_server_init(&d->srv, &d->loop, &op->o, on_request)) < 0) {
        fprintf(stderr, "iomux-httpd: server: %s\n", mux_strerror(rc));
        return -1;
    }
    d->srv.data = d;
    mux_async_init(&d->stop, on_stop);
    d->stop.data = d;
    if ((rc = mux_async_start(&d->loop, &d->stop)) < 0) {
        fprintf(stderr, "iomux-httpd: async: %s\n", mux_strerror(rc));
        return -1;
    }
    mux_listen_options_t lo = op->lopts;
    lo.flags |= op->steer;
    lo.cpu = d->cpu;
    if (cfg.acceptor) {
        d->chan.data = d;
        if ((rc = mux_chan_open(&d->loop, &d->chan, 1024, on_handed)) < 0) {
            fprintf(stderr, "iomux-httpd: channel: %s\n", mux_strerror(rc));
            return -1;
        }
        d->has_chan = 1;
        if (d->index == 0) {
            d->l.data = d;
            rc = mux_listen(&d->loop, &d->l, (struct sockaddr *)ss, len, &lo, on_accept);
            d->listening = rc == 0;
        }
    } else { /* bound in loop order: the BPF steering gives CPU k to the k-th listener */
        rc = mux_http_server_listen(&d->srv, (struct sockaddr *)ss, len, &lo);
    }
    if (rc < 0) {
        fprintf(stderr, "iomux-httpd: listen on %s:%u: %s\n", op->bind_addr, cli_port(ss),
                mux_strerror(rc));
        return -1;
    }
    if (d->index == 0) { /* the others bind the port the first one got */
        socklen_t blen = sizeof *ss;
        if (cfg.acceptor)
            mux_listener_address(&d->l, (struct sockaddr *)ss, &blen);
        else
            mux_http_server_address(&d->srv, (struct sockaddr *)ss, &blen);
    }
    return 0;
}

/* Loop 0 hears the signals that stop a server (cli.h), and learns when every loop's server
 * has closed. */
static int watch_signals(struct httpd *first)
{
    int rc;
    if (cli_stop_start(&first->sigs, &first->loop, on_signal, first) < 0)
        return -1;
    mux_async_init(&first->all_closed, on_all_closed);
    first->all_closed.data = first;
    if ((rc = mux_async_start(&first->loop, &first->all_closed)) < 0) {
        fprintf(stderr, "iomux-httpd: async: %s\n", mux_strerror(rc));
        return -1;
    }
    return 0;
}

/* Waits for the loops, says what each answered, and closes them: the exit status. */
static int finish(void)
{
    int failed = run_loop(&cfg.d[0]) != NULL;
    for (int i = 1; i < cfg.nthreads; i++) {
        void *res;
        pthread_join(cfg.d[i].thread, &res);
        failed |= res != NULL;
    }
    for (int i = 0; i < cfg.nthreads; i++) {
        struct httpd *d = &cfg.d[i];
        char where[32] = "";
        if (d->cpu >= 0)
            snprintf(where, sizeof where, " (cpu %d)", d->cpu);
        fprintf(stderr, "iomux-httpd: loop %d%s: %lu requests", i, where, d->requests);
        if (cfg.acceptor)
            fprintf(stderr, ", %lu connections handed to it", d->handed);
        fprintf(stderr, "\n");
        mux_http_static_close(&d->files);
        if (d->logging)
            access_log_free(&d->alog);
        if (mux_loop_close(&d->loop) != 0)
            failed = 1;
    }
    error_log_flush();
    return failed;
}

int main(int argc, char **argv)
{
    cli_prog = "iomux-httpd";
    struct options op = {.bind_addr = "127.0.0.1", .port = 8080, .o.on_error = on_error};
    int rc = parse_args(argc, argv, &op);
    if (rc >= 0)
        return rc;
    struct sockaddr_storage ss;
    socklen_t len = cli_address(op.bind_addr, op.port, &ss);
    int cpus[MAX_THREADS], ncpus = cli_cpus(cpus, MAX_THREADS);
    if (op.pin && ncpus == 0) {
        fprintf(stderr, "iomux-httpd: cannot read the CPUs this process may use\n");
        return 1;
    }
    raise_nofile();
#ifndef _WIN32
    struct rlimit rl; /* the file caches share a quarter of what it got */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        op.files.max_open = (uint32_t)(rl.rlim_cur / 4 / (rlim_t)cfg.nthreads) + 1;
#endif
    int log_fd = -1;
    if (op.access_log) {
        if ((log_fd = access_log_open(op.access_log)) < 0)
            return 1;
        op.o.on_log = on_log;
    }
    if (!(cfg.d = calloc((size_t)cfg.nthreads, sizeof *cfg.d)))
        return fprintf(stderr, "iomux-httpd: out of memory\n"), 1;
    if (cfg.nthreads > 1 && !cfg.acceptor && !cli_has_reuseport())
        cfg.acceptor = 1; /* no SO_REUSEPORT (Windows): loop 0 hands connections out */
    if (cfg.nthreads > 1 && !cfg.acceptor)
        op.lopts.flags |= MUX_LISTEN_REUSEPORT;
    for (int i = 0; i < cfg.nthreads; i++) {
        cfg.d[i].index = i;
        cfg.d[i].cpu = op.pin ? cpus[i % ncpus] : -1;
        if (open_httpd(&cfg.d[i], &op, &ss, len, log_fd) < 0)
            return 1;
    }
    if (watch_signals(&cfg.d[0]) < 0)
        return 1;
    for (int i = 1; i < cfg.nthreads; i++)
        if ((rc = pthread_create(&cfg.d[i].thread, NULL, run_loop, &cfg.d[i])) != 0)
            return fprintf(stderr, "iomux-httpd: thread: %s\n", strerror(rc)), 1;
    char where[80];
    cli_address_text(&ss, where, sizeof where);
    printf("listening on %s (%s), serving %s\n", where, mux_loop_backend(&cfg.d[0].loop), op.root);
    fflush(stdout);
    rc = finish();
    if (log_fd > STDOUT_FILENO)
        close(log_fd);
    free(cfg.d);
    return rc;
}
