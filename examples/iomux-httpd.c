/* SPDX-License-Identifier: MIT */
/* iomux-httpd: a static-file HTTP/1.1 server on iomux's HTTP module (docs/http.md).
 *
 *   iomux-httpd --root DIR [--port N] [--bind ADDR] [limits and timeouts]
 *               [--threads N [--pin] [--steer cpu|bpf | --acceptor]]
 *
 * Serves GET and HEAD from DIR: conditional requests, single byte ranges, index.html for
 * directories, nothing outside DIR. The backend comes from IOMUX_BACKEND. SIGINT or SIGTERM
 * closes the server and every connection, then it exits 0.
 *
 * A loop per core: --threads N runs N loops, a thread each (loop 0 on the main thread), each
 * with its own server and file cache (neither is shared between threads). By default every
 * loop listens on the port (SO_REUSEPORT), --steer gives each connection to the loop on the
 * CPU that received it, and --acceptor makes loop 0 accept for all and hand the connections
 * round robin through channels. Loop 0 hears the signals and tells every loop through an
 * async to close its server. At exit each loop prints the requests it answered.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "iomux.h"
#include "iomux/http.h"

#define MAX_THREADS 1024

/* One loop and its server. */
struct httpd {
    mux_loop_t loop;
    mux_http_server_t srv;
    mux_http_static_t files;
    mux_listener_t l; /* --acceptor: loop 0's, which feeds every loop's channel */
    mux_chan_t chan;  /* --acceptor: the connections loop 0 hands over */
    mux_async_t stop; /* loop 0 tells every loop to close its server */
    mux_signal_t sigint, sigterm; /* loop 0's */
    pthread_t thread;
    int index, cpu, has_chan, listening;
    unsigned long errors;
    unsigned long requests, handed; /* answered; --acceptor: connections handed to it */
};

static struct {
    int nthreads, acceptor;
    unsigned next; /* --acceptor: the next loop's turn (loop 0's thread only) */
    struct httpd *d;
} cfg = {.nthreads = 1};

static void on_request(mux_http_exchange_t *x)
{
    struct httpd *d = mux_http_exchange_server(x)->data;
    d->requests++;
    mux_http_serve_static(x, &d->files);
}

static void on_error(mux_http_server_t *srv, int err)
{
    struct httpd *d = srv->data;
    if (d->errors++ < 10) /* say it, without flooding the log */
        fprintf(stderr, "iomux-httpd: %s\n", mux_strerror(err));
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
    close(sock);
    on_error(&d->srv, -EAGAIN); /* every channel full */
}

static void on_stop(mux_loop_t *loop, mux_async_t *a)
{
    struct httpd *d = a->data;
    mux_async_stop(loop, a);
    if (d->listening)
        mux_listener_close(&d->l, NULL);
    d->listening = 0;
    if (d->has_chan)
        mux_chan_close(&d->chan);
    d->has_chan = 0;
    mux_http_server_close(&d->srv, NULL); /* once closed, nothing is active: mux_run returns */
}

static void on_signal(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    (void)signum;
    struct httpd *d = w->data;
    mux_signal_stop(loop, &d->sigint);
    mux_signal_stop(loop, &d->sigterm);
    for (int i = 0; i < cfg.nthreads; i++)
        mux_async_send(&cfg.d[i].stop); /* loop 0's own included */
}

static void *run_loop(void *arg)
{
    struct httpd *d = arg;
    if (d->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(d->cpu, &set);
        int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
        if (err != 0)
            fprintf(stderr, "iomux-httpd: loop %d: pin to CPU %d: %s\n", d->index, d->cpu,
                    strerror(err));
    }
    int rc = mux_run(&d->loop, MUX_RUN_DEFAULT);
    if (rc < 0)
        fprintf(stderr, "iomux-httpd: loop %d: run: %s\n", d->index, mux_strerror(rc));
    return (void *)(intptr_t)(rc < 0);
}

static void usage(FILE *to)
{
    fprintf(to, "usage: iomux-httpd --root DIR [--port N] [--bind ADDR] [--max-head BYTES]\n"
                "                   [--max-target BYTES] [--max-headers N] [--max-body BYTES]\n"
                "                   [--header-timeout S] [--idle-timeout S] [--body-timeout S]\n"
                "                   [--write-timeout S] [--max-requests N] [--max-connections N]\n"
                "                   [--reuseport] [--threads N [--pin]\n"
                "                   [--steer cpu|bpf | --acceptor]]\n"
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
                "  --reuseport          SO_REUSEPORT, to run one server per CPU on one port\n"
                "  --threads N          N loops, a thread and a server each (default 1); each\n"
                "                       listens on the port (SO_REUSEPORT) unless --acceptor\n"
                "  --pin                pin loop i to the i-th CPU this process may run on\n"
                "  --steer cpu|bpf      (implies --pin) each connection to the loop on the CPU\n"
                "                       that received it: SO_INCOMING_CPU, or a BPF program\n"
                "  --acceptor           loop 0 alone accepts, and hands connections round robin\n"
                "                       to every loop through channels\n"
                "Prints 'listening on ADDR:PORT' once ready, and at exit per loop 'loop I\n"
                "(cpu C): R requests'. The backend comes from the\n"
                "IOMUX_BACKEND environment variable (epoll, poll, select, uring, or the opt-in\n"
                "rtsig), else the best available. SIGINT or SIGTERM stops it.\n");
}

/* A decimal in [lo, hi], or exits 2 naming the flag. */
static unsigned long long number(const char *flag, const char *s, unsigned long long lo,
                                 unsigned long long hi)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi || s[0] == '-') {
        fprintf(stderr, "iomux-httpd: bad %s '%s'\n", flag, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
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
        O_REUSE,
        O_THREADS,
        O_PIN,
        O_STEER,
        O_ACCEPTOR,
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
        {"reuseport", no_argument, NULL, O_REUSE},
        {"threads", required_argument, NULL, O_THREADS},
        {"pin", no_argument, NULL, O_PIN},
        {"steer", required_argument, NULL, O_STEER},
        {"acceptor", no_argument, NULL, O_ACCEPTOR},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    mux_http_server_options_t o = {.on_error = on_error};
    mux_listen_options_t lopts = {0};
    const char *root = NULL, *bind_addr = "127.0.0.1";
    unsigned long long port = 8080;
    const unsigned long long s = 1000000000ull;
    int pin = 0;
    unsigned steer = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_ROOT:
            root = optarg;
            break;
        case O_PORT:
            port = number("port", optarg, 0, 65535);
            break;
        case O_BIND:
            bind_addr = optarg;
            break;
        case O_HEAD:
            o.limits.max_head = number("max-head", optarg, 256, 1u << 24);
            break;
        case O_TARGET:
            o.limits.max_target = number("max-target", optarg, 16, 1u << 24);
            break;
        case O_HEADERS:
            o.limits.max_headers = (uint32_t)number("max-headers", optarg, 1, 10000);
            break;
        case O_BODY:
            o.limits.max_body = number("max-body", optarg, 1, 1ull << 40);
            break;
        case O_HTO:
            o.header_timeout_ns = number("header-timeout", optarg, 1, 86400) * s;
            break;
        case O_ITO:
            o.idle_timeout_ns = number("idle-timeout", optarg, 1, 86400) * s;
            break;
        case O_BTO:
            o.body_timeout_ns = number("body-timeout", optarg, 1, 86400) * s;
            break;
        case O_WTO:
            o.write_timeout_ns = number("write-timeout", optarg, 1, 86400) * s;
            break;
        case O_REQS:
            o.max_requests = (uint32_t)number("max-requests", optarg, 1, 1u << 30);
            break;
        case O_CONNS:
            o.max_connections = (uint32_t)number("max-connections", optarg, 1, 1u << 24);
            break;
        case O_REUSE:
            lopts.flags |= MUX_LISTEN_REUSEPORT;
            break;
        case O_THREADS:
            cfg.nthreads = (int)number("threads", optarg, 1, MAX_THREADS);
            break;
        case O_PIN:
            pin = 1;
            break;
        case O_STEER:
            if (strcmp(optarg, "cpu") == 0) {
                steer = MUX_LISTEN_INCOMING_CPU;
            } else if (strcmp(optarg, "bpf") == 0) {
                steer = MUX_LISTEN_CPU_BPF;
            } else {
                fprintf(stderr, "iomux-httpd: bad steering '%s' (cpu or bpf)\n", optarg);
                return 2;
            }
            pin = 1;
            break;
        case O_ACCEPTOR:
            cfg.acceptor = 1;
            break;
        case 'h':
        case O_HELP:
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc || !root) {
        if (!root)
            fprintf(stderr, "iomux-httpd: --root is required\n");
        usage(stderr);
        return 2;
    }
    if (steer && cfg.acceptor) {
        fprintf(stderr, "iomux-httpd: --steer and --acceptor exclude each other\n");
        return 2;
    }

    struct sockaddr_storage ss = {0};
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    socklen_t len;
    if (inet_pton(AF_INET, bind_addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        len = sizeof *v4;
    } else if (inet_pton(AF_INET6, bind_addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        len = sizeof *v6;
    } else {
        fprintf(stderr, "iomux-httpd: bad address '%s'\n", bind_addr);
        return 2;
    }

    int cpus[CPU_SETSIZE], ncpus = 0; /* loop i is pinned to the i-th CPU allowed */
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &allowed))
                cpus[ncpus++] = i;
    if (pin && ncpus == 0) {
        fprintf(stderr, "iomux-httpd: cannot read the CPUs this process may use\n");
        return 1;
    }
    cfg.d = calloc((size_t)cfg.nthreads, sizeof *cfg.d);
    if (!cfg.d) {
        fprintf(stderr, "iomux-httpd: out of memory\n");
        return 1;
    }
    if (cfg.nthreads > 1 && !cfg.acceptor)
        lopts.flags |= MUX_LISTEN_REUSEPORT;
    int rc;
    for (int i = 0; i < cfg.nthreads; i++) {
        struct httpd *d = &cfg.d[i];
        d->index = i;
        d->cpu = pin ? cpus[i % ncpus] : -1;
        if ((rc = mux_http_static_init(&d->files, root)) < 0) {
            fprintf(stderr, "iomux-httpd: root %s: %s\n", root, mux_strerror(rc));
            return 1;
        }
        if ((rc = mux_loop_init(&d->loop, NULL)) < 0) {
            fprintf(stderr, "iomux-httpd: loop: %s\n", mux_strerror(rc));
            return 1;
        }
        if ((rc = mux_http_server_init(&d->srv, &d->loop, &o, on_request)) < 0) {
            fprintf(stderr, "iomux-httpd: server: %s\n", mux_strerror(rc));
            return 1;
        }
        d->srv.data = d;
        mux_async_init(&d->stop, on_stop);
        d->stop.data = d;
        if ((rc = mux_async_start(&d->loop, &d->stop)) < 0) {
            fprintf(stderr, "iomux-httpd: async: %s\n", mux_strerror(rc));
            return 1;
        }
        mux_listen_options_t lo = lopts;
        lo.flags |= steer;
        lo.cpu = d->cpu;
        if (cfg.acceptor) {
            d->chan.data = d;
            if ((rc = mux_chan_open(&d->loop, &d->chan, 1024, on_handed)) < 0) {
                fprintf(stderr, "iomux-httpd: channel: %s\n", mux_strerror(rc));
                return 1;
            }
            d->has_chan = 1;
            if (i == 0) {
                d->l.data = d;
                rc = mux_listen(&d->loop, &d->l, (struct sockaddr *)&ss, len, &lo, on_accept);
                d->listening = rc == 0;
            }
        } else { /* bound in loop order: the BPF steering gives CPU k to the k-th listener */
            rc = mux_http_server_listen(&d->srv, (struct sockaddr *)&ss, len, &lo);
        }
        if (rc < 0) {
            fprintf(stderr, "iomux-httpd: listen on %s:%llu: %s\n", bind_addr, port,
                    mux_strerror(rc));
            return 1;
        }
        if (i == 0) { /* the others bind the port the first one got */
            socklen_t blen = sizeof ss;
            if (cfg.acceptor)
                mux_listener_address(&d->l, (struct sockaddr *)&ss, &blen);
            else
                mux_http_server_address(&d->srv, (struct sockaddr *)&ss, &blen);
        }
    }
    struct httpd *first = &cfg.d[0];
    mux_signal_init(&first->sigint, on_signal, SIGINT);
    mux_signal_init(&first->sigterm, on_signal, SIGTERM);
    first->sigint.data = first->sigterm.data = first;
    if ((rc = mux_signal_start(&first->loop, &first->sigint)) < 0 ||
        (rc = mux_signal_start(&first->loop, &first->sigterm)) < 0) {
        fprintf(stderr, "iomux-httpd: signals: %s\n", mux_strerror(rc));
        return 1;
    }
    for (int i = 1; i < cfg.nthreads; i++)
        if ((rc = pthread_create(&cfg.d[i].thread, NULL, run_loop, &cfg.d[i])) != 0) {
            fprintf(stderr, "iomux-httpd: thread: %s\n", strerror(rc));
            return 1;
        }
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t bound = 0;
    if (ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
        bound = ntohs(v4->sin_port);
    } else {
        inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
        bound = ntohs(v6->sin6_port);
    }
    printf("listening on %s:%u (%s), serving %s\n", host, bound, mux_loop_backend(&first->loop),
           root);
    fflush(stdout);

    int failed = run_loop(first) != NULL;
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
        if (mux_loop_close(&d->loop) != 0)
            failed = 1;
    }
    free(cfg.d);
    return failed;
}
