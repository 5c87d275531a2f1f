/* SPDX-License-Identifier: MIT */
/* What every echo server of the echo study shares, so that each server file holds only
 * its library's idiom: the command line (the same as examples/echo-server.c), the
 * listening socket for the libraries that take an fd, and the "listening on" line.
 * Written to compile as C and as C++ (the Asio server includes it too). */
#ifndef BENCH_ECHO_COMMON_H
#define BENCH_ECHO_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct echo_options {
    unsigned port;
    size_t bufsize;
};

/* Parses --port N (0 = a free port), --buffer BYTES, --help and --identify. `identity`
 * describes the library the calls reach, `ok` says whether that is the one the server is
 * named for. --identify prints it and exits (1 if not ok); a server whose identity is not
 * ok refuses to run, so a benchmark never measures the wrong library. */
static inline struct echo_options echo_parse(int argc, char **argv, const char *name,
                                      const char *idiom, const char *identity, int ok)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'}, {"buffer", required_argument, NULL, 's'},
        {"identify", no_argument, NULL, 'i'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct echo_options o = {55555, 16384};
    int opt;
    while ((opt = getopt_long(argc, argv, "p:s:ih", opts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 'p': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 0 || v > 65535) {
                fprintf(stderr, "%s: bad port '%s'\n", name, optarg);
                exit(2);
            }
            o.port = (unsigned)v;
            break;
        }
        case 's':
            o.bufsize = strtoul(optarg, &end, 10);
            if (*end || o.bufsize == 0 || o.bufsize > (64u << 20)) {
                fprintf(stderr, "%s: bad buffer size '%s'\n", name, optarg);
                exit(2);
            }
            break;
        case 'i':
            printf("%s\n", identity);
            exit(ok ? 0 : 1);
        case 'h':
            printf("usage: %s [--port N] [--buffer BYTES] [--identify]\n"
                   "An echo server of iomux's echo study (bench/README.md): %s.\n"
                   "  --port N        TCP port on 127.0.0.1 (default 55555; 0 picks a free one)\n"
                   "  --buffer BYTES  per-connection buffer (default 16384)\n"
                   "  --identify      print the library and backend the calls reach, and exit\n"
                   "Prints 'listening on 127.0.0.1:PORT (IDENTITY)' once ready; SIGINT or\n"
                   "SIGTERM closes everything and exits with status 0.\n",
                   name, idiom);
            exit(0);
        default:
            fprintf(stderr, "usage: %s [--port N] [--buffer BYTES] [--identify] [--help]\n",
                    name);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", name, argv[optind]);
        exit(2);
    }
    if (!ok) {
        fprintf(stderr, "%s: refusing to run: %s\n", name, identity);
        exit(1);
    }
    return o;
}

static inline struct sockaddr_in echo_addr(unsigned port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* A non-blocking listening socket on 127.0.0.1:port, or exits with a message. */
static inline int echo_listen_socket(const char *name, unsigned port)
{
    struct sockaddr_in a = echo_addr(port);
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, SOMAXCONN) != 0) {
        fprintf(stderr, "%s: listen on 127.0.0.1:%u: %s\n", name, port, strerror(errno));
        exit(1);
    }
    return fd;
}

/* Prints the line the benchmark runner waits for, with the port really bound. */
static inline void echo_listening(int fd, const char *identity)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    printf("listening on 127.0.0.1:%u (%s)\n", ntohs(a.sin_port), identity);
    fflush(stdout);
}

static inline void echo_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Writes buf[*done, len) to fd, advancing *done; 1 when all is written, 0 when the socket
 * is full, -1 on error. The write-first step of the hand-written servers. */
static inline int echo_flush(int fd, const char *buf, size_t len, size_t *done)
{
    while (*done < len) {
        ssize_t n = write(fd, buf + *done, len - *done);
        if (n < 0)
            return errno == EAGAIN ? 0 : -1;
        *done += (size_t)n;
    }
    return 1;
}

#endif
