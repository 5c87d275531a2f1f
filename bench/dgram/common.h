/* SPDX-License-Identifier: MIT */
/* What every server of the datagram study shares (bench/dgram_study.py), so that each server
 * file holds only its library's idiom: the command line, the socket for the servers that
 * take one, SIGTERM, and the "listening on" line the runner reads. C and C++ (the Asio
 * server includes it too).
 *
 * Every server echoes each datagram to its sender, on 127.0.0.1, one thread. */
#ifndef BENCH_DGRAM_COMMON_H
#define BENCH_DGRAM_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DGRAM_MAX 2048   /* the largest datagram a server takes (the study sends 1,200 B) */
#define DGRAM_BATCH 32   /* datagrams per batch call, as iomux's receive (MUX_UDP_BATCH) */
#define DGRAM_RCVBUF (4 << 20) /* every server asks for the same socket buffers */

struct dgram_options {
    unsigned port;
    int batch;
};

/* Parses --port N (0: a free port), --batch N (the floor's batch, 1 .. 64), --identify and
 * --help. `identity` says which library the calls reach, `ok` whether that is the one the
 * server is named for: --identify prints it (exit 1 if not ok), and a server whose identity
 * is not ok refuses to run. */
static inline struct dgram_options dgram_parse(int argc, char **argv, const char *name,
                                               const char *idiom, const char *identity, int ok)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'}, {"batch", required_argument, NULL, 'b'},
        {"identify", no_argument, NULL, 'i'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct dgram_options o = {55556, DGRAM_BATCH};
    int opt;
    while ((opt = getopt_long(argc, argv, "p:b:ih", opts, NULL)) != -1) {
        char *end;
        long v;
        switch (opt) {
        case 'p':
            v = strtol(optarg, &end, 10);
            if (*end || v < 0 || v > 65535) {
                fprintf(stderr, "%s: bad port '%s'\n", name, optarg);
                exit(2);
            }
            o.port = (unsigned)v;
            break;
        case 'b':
            v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 64) {
                fprintf(stderr, "%s: bad batch '%s' (1 .. 64)\n", name, optarg);
                exit(2);
            }
            o.batch = (int)v;
            break;
        case 'i':
            printf("%s\n", identity);
            exit(ok ? 0 : 1);
        case 'h':
            printf("usage: %s [--port N] [--batch N] [--identify]\n"
                   "UDP echo server on 127.0.0.1 (%s): every datagram goes back to its "
                   "sender. Exits 0 on SIGTERM.\n",
                   name, idiom);
            exit(0);
        default:
            exit(2);
        }
    }
    if (!ok) {
        fprintf(stderr, "%s: calls do not reach the library named: %s\n", name, identity);
        exit(1);
    }
    return o;
}

/* A UDP socket bound to 127.0.0.1:port, non-blocking when asked, with the study's buffers. */
static inline int dgram_socket(unsigned port, int nonblock)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) {
        perror("socket");
        exit(1);
    }
    /* Past net.core.rmem_max where the process may (root: the FORCE options), so that a
     * window of datagrams in flight fits whatever the sysctl says. */
    int sz = DGRAM_RCVBUF;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("bind");
        exit(1);
    }
    return fd;
}

/* Prints the line the runner waits for, with the port `fd` is bound to. */
static inline void dgram_listening(int fd, const char *what)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("getsockname");
        exit(1);
    }
    printf("listening on 127.0.0.1:%u (%s)\n", ntohs(a.sin_port), what);
    fflush(stdout);
}

#endif
