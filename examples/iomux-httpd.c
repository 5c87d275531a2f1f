/* SPDX-License-Identifier: MIT */
/* iomux-httpd: a static-file HTTP/1.1 server on iomux's HTTP module (docs/http.md).
 *
 *   iomux-httpd --root DIR [--port N] [--bind ADDR] [limits and timeouts]
 *
 * Serves GET and HEAD from DIR: conditional requests, single byte ranges, index.html for
 * directories, nothing outside DIR. The backend comes from IOMUX_BACKEND. SIGINT or SIGTERM
 * closes the server and every connection, then it exits 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iomux.h"
#include "iomux/http.h"

struct httpd {
    mux_loop_t loop;
    mux_http_server_t srv;
    mux_http_static_t files;
    mux_signal_t sigint, sigterm;
    unsigned long errors;
};

static void on_request(mux_http_exchange_t *x)
{
    struct httpd *d = mux_http_exchange_server(x)->data;
    mux_http_serve_static(x, &d->files);
}

static void on_error(mux_http_server_t *srv, int err)
{
    struct httpd *d = srv->data;
    if (d->errors++ < 10) /* say it, without flooding the log */
        fprintf(stderr, "iomux-httpd: %s\n", mux_strerror(err));
}

static void on_signal(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    (void)signum;
    struct httpd *d = w->data;
    mux_signal_stop(loop, &d->sigint);
    mux_signal_stop(loop, &d->sigterm);
    mux_http_server_close(&d->srv, NULL); /* once closed, nothing is active: mux_run returns */
}

static void usage(FILE *to)
{
    fprintf(to, "usage: iomux-httpd --root DIR [--port N] [--bind ADDR] [--max-head BYTES]\n"
                "                   [--max-target BYTES] [--max-headers N] [--max-body BYTES]\n"
                "                   [--header-timeout S] [--idle-timeout S] [--body-timeout S]\n"
                "                   [--write-timeout S] [--max-requests N] [--max-connections N]\n"
                "                   [--reuseport]\n"
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
                "Prints 'listening on ADDR:PORT' once ready. The backend comes from the\n"
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
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    static struct httpd d;
    mux_http_server_options_t o = {.on_error = on_error};
    mux_listen_options_t lopts = {0};
    const char *root = NULL, *bind_addr = "127.0.0.1";
    unsigned long long port = 8080;
    const unsigned long long s = 1000000000ull;
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

    int rc = mux_http_static_init(&d.files, root);
    if (rc < 0) {
        fprintf(stderr, "iomux-httpd: root %s: %s\n", root, mux_strerror(rc));
        return 1;
    }
    if ((rc = mux_loop_init(&d.loop, NULL)) < 0) {
        fprintf(stderr, "iomux-httpd: loop: %s\n", mux_strerror(rc));
        return 1;
    }
    if ((rc = mux_http_server_init(&d.srv, &d.loop, &o, on_request)) < 0) {
        fprintf(stderr, "iomux-httpd: server: %s\n", mux_strerror(rc));
        return 1;
    }
    d.srv.data = &d;
    rc = mux_http_server_listen(&d.srv, (struct sockaddr *)&ss, len, &lopts);
    if (rc < 0) {
        fprintf(stderr, "iomux-httpd: listen on %s:%llu: %s\n", bind_addr, port, mux_strerror(rc));
        return 1;
    }
    mux_signal_init(&d.sigint, on_signal, SIGINT);
    mux_signal_init(&d.sigterm, on_signal, SIGTERM);
    d.sigint.data = d.sigterm.data = &d;
    if ((rc = mux_signal_start(&d.loop, &d.sigint)) < 0 ||
        (rc = mux_signal_start(&d.loop, &d.sigterm)) < 0) {
        fprintf(stderr, "iomux-httpd: signals: %s\n", mux_strerror(rc));
        return 1;
    }
    len = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t bound = 0;
    if (mux_http_server_address(&d.srv, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) {
            inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
            bound = ntohs(v4->sin_port);
        } else {
            inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
            bound = ntohs(v6->sin6_port);
        }
    }
    printf("listening on %s:%u (%s), serving %s\n", host, bound, mux_loop_backend(&d.loop), root);
    fflush(stdout);
    rc = mux_run(&d.loop, MUX_RUN_DEFAULT);
    if (rc < 0) {
        fprintf(stderr, "iomux-httpd: run: %s\n", mux_strerror(rc));
        return 1;
    }
    mux_http_static_close(&d.files);
    rc = mux_loop_close(&d.loop);
    return rc == 0 ? 0 : 1;
}
