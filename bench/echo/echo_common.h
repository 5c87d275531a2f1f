/* SPDX-License-Identifier: MIT */
/* What every echo server of the echo study shares, so that each server file holds only
 * its library's idiom: the command line (the same as examples/echo-server.c), the
 * listening socket for the libraries that take an fd, and the "listening on" line; for the
 * servers of the scaling study, --threads N and --pin (as examples/echo-server.c has them),
 * the SO_REUSEPORT socket, pinning, and the per-loop line printed at exit.
 * Written to compile as C and as C++ (the Asio server includes it too). */
#ifndef BENCH_ECHO_COMMON_H
#define BENCH_ECHO_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ECHO_MAX_THREADS 1024

struct echo_options {
    unsigned port;
    size_t bufsize;
    int threads; /* loops (or threads) to run: 1 unless the server takes --threads */
    int pin;     /* --pin: thread i on the i-th CPU the process may use */
};

/* Parses --port N (0 = a free port), --buffer BYTES, --help and --identify, and, for a
 * server that runs up to `max_threads` threads (> 1), --threads N and --pin. `identity`
 * describes the library the calls reach, `ok` says whether that is the one the server is
 * named for. --identify prints it and exits (1 if not ok); a server whose identity is not
 * ok refuses to run, so a benchmark never measures the wrong library. */
static inline struct echo_options echo_parse_mt(int argc, char **argv, const char *name,
                                                const char *idiom, const char *identity, int ok,
                                                int max_threads)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'}, {"buffer", required_argument, NULL, 's'},
        {"identify", no_argument, NULL, 'i'},   {"help", no_argument, NULL, 'h'},
        {"threads", required_argument, NULL, 'T'}, {"pin", no_argument, NULL, 'P'},
        {NULL, 0, NULL, 0},
    };
    struct echo_options o = {55555, 16384, 1, 0};
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
        case 'T': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > max_threads) {
                fprintf(stderr, "%s: bad thread count '%s' (1 .. %d)\n", name, optarg,
                        max_threads);
                exit(2);
            }
            o.threads = (int)v;
            break;
        }
        case 'P':
            o.pin = 1;
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
                   "%s"
                   "Prints 'listening on 127.0.0.1:PORT (IDENTITY)' once ready; SIGINT or\n"
                   "SIGTERM closes everything and exits with status 0%s.\n",
                   name, idiom,
                   max_threads > 1 ? "  --threads N     N threads (default 1)\n"
                                     "  --pin           thread i on the i-th CPU allowed\n"
                                   : "",
                   max_threads > 1 ? ", after a line per thread:\n'loop I: N connections, B "
                                     "bytes echoed'"
                                   : "");
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

/* The single-threaded servers: no --threads. */
static inline struct echo_options echo_parse(int argc, char **argv, const char *name,
                                             const char *idiom, const char *identity, int ok)
{
    return echo_parse_mt(argc, argv, name, idiom, identity, ok, 1);
}

/* The i-th CPU (mod their number) this process may run on, or -1. */
static inline int echo_cpu(int i)
{
    cpu_set_t set;
    int n = 0, cpus[CPU_SETSIZE];
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    return n ? cpus[i % n] : -1;
}

/* Pins the calling thread to `cpu` (>= 0); a failure is said, not fatal. */
static inline void echo_pin(const char *name, int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (err != 0)
        fprintf(stderr, "%s: pin to CPU %d: %s\n", name, cpu, strerror(err));
}

/* The line the scaling study reads for its fairness table, as examples/echo-server prints it. */
static inline void echo_loop_line(const char *name, const char *what, int i, int cpu,
                                  unsigned long conns, uint64_t bytes)
{
    if (cpu >= 0)
        fprintf(stderr, "%s: %s %d (cpu %d): %lu connections, %llu bytes echoed\n", name, what,
                i, cpu, conns, (unsigned long long)bytes);
    else
        fprintf(stderr, "%s: %s %d: %lu connections, %llu bytes echoed\n", name, what, i, conns,
                (unsigned long long)bytes);
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

/* A non-blocking listening socket on 127.0.0.1:port, with SO_REUSEPORT when `reuseport`
 * (one per thread on one port), or exits with a message. */
static inline int echo_listen_socket_on(const char *name, unsigned port, int reuseport)
{
    struct sockaddr_in a = echo_addr(port);
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, SOMAXCONN) != 0) {
        fprintf(stderr, "%s: listen on 127.0.0.1:%u: %s\n", name, port, strerror(errno));
        exit(1);
    }
    return fd;
}

static inline int echo_listen_socket(const char *name, unsigned port)
{
    return echo_listen_socket_on(name, port, 0);
}

/* The port a socket is bound to. */
static inline unsigned echo_port(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    return ntohs(a.sin_port);
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

/* The next connection waiting on the non-blocking listening socket `lfd`, non-blocking,
 * close-on-exec and with TCP_NODELAY, or -1 once none is left; an error other than "none
 * left" (or a connection aborted before it was taken) is printed. The accept loop of the
 * servers that take an fd. */
static inline int echo_accept(const char *name, int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno != EAGAIN && errno != ECONNABORTED)
            fprintf(stderr, "%s: accept: %s\n", name, strerror(errno));
        return -1;
    }
    echo_nodelay(fd);
    return fd;
}

/* A connection of `size` bytes whose last member is its read buffer of `bufsize` bytes,
 * on a 64-byte boundary (the kernel copies into misaligned buffers much slower); NULL when
 * memory is short. Freed with free(). */
static inline void *echo_conn_alloc(size_t size, size_t bufsize)
{
    return aligned_alloc(64, (size + bufsize + 63) / 64 * 64);
}

/* The list of open connections a server keeps, to close them all on exit: `c` is a pointer
 * to any struct with `next` and `prev` pointers to its own type, `head` the list's first. */
#define ECHO_LIST_PUSH(head, c)                                                            \
    do {                                                                                   \
        (c)->prev = NULL;                                                                  \
        (c)->next = (head);                                                                \
        if (head)                                                                          \
            (head)->prev = (c);                                                            \
        (head) = (c);                                                                      \
    } while (0)
#define ECHO_LIST_UNLINK(head, c)                                                          \
    do {                                                                                   \
        if ((c)->prev)                                                                     \
            (c)->prev->next = (c)->next;                                                   \
        else                                                                               \
            (head) = (c)->next;                                                            \
        if ((c)->next)                                                                     \
            (c)->next->prev = (c)->prev;                                                   \
    } while (0)

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

/* The hand-written servers' step on a readable connection: one read of up to `bufsize` bytes
 * into `buf`, written back at once. `*len` and `*done` describe the block (0 and 0 when the
 * read found nothing). Returns as echo_flush: 1 when nothing is left to write, 0 when the
 * socket filled with the rest still to write, -1 on an error or at the end of the stream. */
static inline int echo_read_flush(int fd, char *buf, size_t bufsize, size_t *len, size_t *done)
{
    ssize_t n = read(fd, buf, bufsize);
    *len = *done = 0;
    if (n <= 0)
        return n < 0 && errno == EAGAIN ? 1 : -1;
    *len = (size_t)n;
    return echo_flush(fd, buf, *len, done);
}

#endif
