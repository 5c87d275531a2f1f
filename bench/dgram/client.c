/* SPDX-License-Identifier: MIT */
/* The datagram study's load (bench/dgram_study.py): P peers, each a UDP socket of its own on
 * 127.0.0.1 connected to the echo server, each keeping a window of W datagrams of B bytes in
 * flight. One thread, one epoll instance; per peer, recvmmsg, and the window refilled with
 * one send cut into datagrams by UDP GSO (--send gso, the default) or with sendmmsg (--send
 * mmsg, the study's first way).
 *
 * The client must cost less per datagram than the servers it loads, or it sets the rate: on
 * a machine of two CPUs, one for the server and one for the client, its first form (a
 * byte-by-byte pattern generated for every datagram sent and every echo checked, and one
 * sendmmsg message per datagram) spent 6.9 us of CPU on each 1,200-byte datagram against the
 * floor server's 4.8, and every server echoed the same rate. The pattern from a table and the
 * GSO send bring it to 4.3 (bench/README.md, "The datagram study").
 *
 * Every datagram carries its peer, a sequence number and bytes that follow from both, and
 * every echo is checked: a datagram that comes back changed, short, long, or to the wrong
 * peer fails the run (FAIL ..., exit 1). UDP may drop datagrams (the server's socket buffer
 * full), which is no error: a peer that has heard nothing for 50 ms counts what it had in
 * flight as lost and sends a new window, and the report gives the loss.
 *
 * After an untimed warm-up, the timed window counts the echoes, and, with --server-pid,
 * reads the server's on-CPU time (/proc/PID/task/N/schedstat) at its start and end, so that
 * the CPU per datagram covers exactly the datagrams counted; and its own, to tell when the
 * load is the limit (client_cpu_pct, and client_cpu_ns_per_dgram). The last line is
 * RESULT {json}.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH     32    /* datagrams per sendmmsg (--send mmsg) */
#define RECV_MAX  256   /* the largest --recv-batch */
#define GSO_SEGS  64    /* segments per send at most (the kernel's UDP_MAX_SEGMENTS, 4.18 on) */
#define GSO_BYTES 65507 /* a UDP datagram's largest payload, which a GSO send may not pass */
#define MAX_SIZE  2048
#define LOSS_NS   (50ull * 1000000)

struct peer {
    int fd;
    uint32_t id;
    uint32_t seq;       /* the next to send */
    uint32_t in_flight; /* sent, not yet echoed */
    uint64_t heard;     /* when it last got an echo (or sent a fresh window) */
};

static unsigned size = 64, npeers = 1, window, recv_batch = BATCH;
static unsigned gso_batch; /* datagrams per GSO send; 0: --send mmsg */
static double seconds = 1, warmup = 0.3;
static int server_pid;
static struct peer *peers;
static uint64_t echoes, lost, errors;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The bytes of datagram `seq` of peer `id`: a header (the peer, the sequence number), then
 * bytes taken from one table of pseudo-random bytes at an offset that follows from both. The
 * copy and the compare are a memcpy and a memcmp: the study's first form, a byte-by-byte
 * generator in fill() and again in check(), took 36% of the client's CPU at 1,200 B (perf
 * record) and made the client the limit. An echo changed, short, long, from another peer or
 * with another sequence number still fails the check. */
#define PAT_LEN 4096
static unsigned char pattern[PAT_LEN + MAX_SIZE];

static void pattern_init(void)
{
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof pattern; i++) {
        x = x * 1103515245u + 12345u;
        pattern[i] = (unsigned char)(x >> 24);
    }
}

static const unsigned char *body(uint32_t id, uint32_t seq)
{
    uint32_t h = (id * 2654435761u ^ seq * 40503u) * 0x9e3779b1u;
    return pattern + (h >> 20) % PAT_LEN;
}

static void fill(char *p, uint32_t id, uint32_t seq)
{
    memcpy(p, &id, 4);
    memcpy(p + 4, &seq, 4);
    memcpy(p + 8, body(id, seq), size - 8);
}

/* Whether `p` is the echo of a datagram `pr` sent. */
static int check(const char *p, unsigned len, const struct peer *pr)
{
    uint32_t got_id, seq;
    if (len != size)
        return 0;
    memcpy(&got_id, p, 4);
    memcpy(&seq, p + 4, 4);
    return got_id == pr->id && seq < pr->seq && memcmp(p + 8, body(got_id, seq), size - 8) == 0;
}

static void fail(const char *what)
{
    if (errors++ < 10)
        fprintf(stderr, "error: %s\n", what);
}

/* Sends up to `n` datagrams with one sendmmsg, each its own message: the study's first way,
 * kept as --send mmsg. Returns how many left, or -1. */
static int send_mmsg(struct peer *pr, unsigned n)
{
    static char out[BATCH][MAX_SIZE];
    static struct iovec iov[BATCH];
    static struct mmsghdr m[BATCH];
    if (n > BATCH)
        n = BATCH;
    for (unsigned i = 0; i < n; i++) {
        fill(out[i], pr->id, pr->seq + i);
        iov[i].iov_base = out[i];
        iov[i].iov_len = size;
        memset(&m[i].msg_hdr, 0, sizeof m[i].msg_hdr);
        m[i].msg_hdr.msg_iov = &iov[i];
        m[i].msg_hdr.msg_iovlen = 1;
    }
    return sendmmsg(pr->fd, m, n, 0);
}

/* Sends up to `n` datagrams with one send of their bytes end to end: the socket's UDP_SEGMENT
 * (the datagram size, set once) makes the kernel cut it into datagrams of `size` bytes, each
 * of which the server receives as a datagram of its own (the loopback segments it before the
 * server's socket, which does not ask for UDP_GRO). One pass through the IP stack for the
 * whole batch instead of one per datagram. All or nothing: returns `n` or -1. */
static int send_gso(struct peer *pr, unsigned n)
{
    static char out[GSO_BYTES] __attribute__((aligned(64)));
    if (n > gso_batch)
        n = gso_batch;
    for (unsigned i = 0; i < n; i++)
        fill(out + (size_t)i * size, pr->id, pr->seq + i);
    return send(pr->fd, out, (size_t)n * size, 0) < 0 ? -1 : (int)n;
}

/* Sends datagrams until the peer's window is full again. */
static void refill(struct peer *pr)
{
    while (pr->in_flight < window) {
        unsigned n = window - pr->in_flight;
        int s = gso_batch ? send_gso(pr, n) : send_mmsg(pr, n);
        if (s <= 0) {
            if (s < 0 && errno != EAGAIN && errno != ECONNREFUSED)
                fail(strerror(errno));
            return; /* full: the echoes make room */
        }
        pr->seq += (uint32_t)s;
        pr->in_flight += (uint32_t)s;
    }
}

static void drain(struct peer *pr, uint64_t t)
{
    static char in[RECV_MAX][MAX_SIZE];
    static struct iovec iov[RECV_MAX];
    static struct mmsghdr m[RECV_MAX];
    for (;;) {
        for (unsigned i = 0; i < recv_batch; i++) {
            iov[i].iov_base = in[i];
            iov[i].iov_len = MAX_SIZE;
            memset(&m[i].msg_hdr, 0, sizeof m[i].msg_hdr);
            m[i].msg_hdr.msg_iov = &iov[i];
            m[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(pr->fd, m, recv_batch, 0, NULL);
        if (n <= 0) {
            if (n < 0 && errno != EAGAIN && errno != ECONNREFUSED)
                fail(strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            if (!check(in[i], m[i].msg_len, pr))
                fail("an echo that is not the datagram sent");
            echoes++;
            if (pr->in_flight)
                pr->in_flight--;
        }
        pr->heard = t;
        if ((unsigned)n < recv_batch)
            break;
    }
    refill(pr);
}

/* On-CPU nanoseconds of every thread of `pid`. */
static uint64_t cpu_ns(int pid)
{
    char path[64];
    uint64_t total = 0;
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char p[320];
        snprintf(p, sizeof p, "/proc/%d/task/%s/schedstat", pid, e->d_name);
        FILE *f = fopen(p, "r");
        unsigned long long ns;
        if (f && fscanf(f, "%llu", &ns) == 1)
            total += ns;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return total;
}

static void run_for(int ep, double secs)
{
    struct epoll_event ev[256];
    uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
    for (uint64_t t = now_ns(); t < end; t = now_ns()) {
        int n = epoll_wait(ep, ev, 256, 10);
        t = now_ns();
        for (int i = 0; i < n; i++)
            drain(&peers[ev[i].data.u32], t);
        for (unsigned i = 0; i < npeers; i++) { /* windows lost on the way */
            struct peer *pr = &peers[i];
            if (pr->in_flight && t - pr->heard > LOSS_NS) {
                lost += pr->in_flight;
                pr->in_flight = 0;
                pr->heard = t;
                refill(pr);
            }
        }
    }
}

static const char *send_mode = "gso";

static void parse(int argc, char **argv, unsigned *port)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'},    {"size", required_argument, NULL, 's'},
        {"peers", required_argument, NULL, 'P'},   {"window", required_argument, NULL, 'w'},
        {"seconds", required_argument, NULL, 't'}, {"warmup", required_argument, NULL, 'W'},
        {"server-pid", required_argument, NULL, 'S'}, {"send", required_argument, NULL, 'm'},
        {"recv-batch", required_argument, NULL, 'r'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case 'p': *port = (unsigned)atoi(optarg); break;
        case 's': size = (unsigned)atoi(optarg); break;
        case 'P': npeers = (unsigned)atoi(optarg); break;
        case 'w': window = (unsigned)atoi(optarg); break;
        case 't': seconds = atof(optarg); break;
        case 'W': warmup = atof(optarg); break;
        case 'S': server_pid = atoi(optarg); break;
        case 'm': send_mode = optarg; break;
        case 'r': recv_batch = (unsigned)atoi(optarg); break;
        case 'h':
            printf("usage: dgram-client --port N [--size B] [--peers P] [--window W] "
                   "[--seconds S] [--warmup S] [--server-pid PID] [--send gso|mmsg] "
                   "[--recv-batch N]\n"
                   "UDP echo load on 127.0.0.1: P peers, W datagrams of B bytes in flight "
                   "each (default W: 64 / P, at least 1). --send gso (the default): a peer's "
                   "datagrams leave in one send cut by UDP_SEGMENT (mmsg where the kernel "
                   "refuses it); mmsg: one sendmmsg of up to %d messages. --recv-batch: "
                   "datagrams per recvmmsg (1 .. %d, default %d).\n",
                   BATCH, RECV_MAX, BATCH);
            exit(0);
        default:
            exit(2);
        }
    }
    int mode_ok = !strcmp(send_mode, "gso") || !strcmp(send_mode, "mmsg");
    if (!*port || size < 8 || size > MAX_SIZE || npeers < 1 || npeers > 10000 || !mode_ok ||
        recv_batch < 1 || recv_batch > RECV_MAX) {
        fprintf(stderr, "dgram-client: bad arguments (--help)\n");
        exit(2);
    }
    if (!window)
        window = npeers >= 64 ? 1 : 64 / npeers;
}

/* A peer's socket, connected to the server. With --send gso, UDP_SEGMENT is set to the
 * datagram size; a kernel that refuses it (before 4.18) turns the run to mmsg, which the
 * result says. */
static int peer_socket(const struct sockaddr_in *srv)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int sz = 4 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    if (fd < 0 || connect(fd, (const struct sockaddr *)srv, sizeof *srv) != 0) {
        perror("dgram-client: socket");
        exit(1);
    }
    int seg = (int)size;
    if (gso_batch && setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof seg) != 0) {
        fprintf(stderr, "dgram-client: UDP_SEGMENT refused (%s): --send mmsg\n",
                strerror(errno));
        gso_batch = 0;
        send_mode = "mmsg";
    }
    return fd;
}

int main(int argc, char **argv)
{
    unsigned port = 0;
    parse(argc, argv, &port);
    if (!strcmp(send_mode, "gso")) {
        gso_batch = GSO_BYTES / size < GSO_SEGS ? GSO_BYTES / size : GSO_SEGS;
    }
    pattern_init();
    peers = calloc(npeers, sizeof *peers);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct sockaddr_in srv = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    srv.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (unsigned i = 0; i < npeers; i++) {
        int fd = peer_socket(&srv);
        peers[i] = (struct peer){fd, i, 0, 0, now_ns()};
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    for (unsigned i = 0; i < npeers; i++)
        refill(&peers[i]);
    run_for(ep, warmup);
    uint64_t e0 = echoes, l0 = lost, t0 = now_ns();
    uint64_t s0 = server_pid ? cpu_ns(server_pid) : 0, c0 = cpu_ns(getpid());
    run_for(ep, seconds);
    uint64_t t1 = now_ns(), s1 = server_pid ? cpu_ns(server_pid) : 0, c1 = cpu_ns(getpid());
    uint64_t n = echoes - e0, nl = lost - l0;
    if (n == 0)
        fail("no echo in the timed window");
    double wall = (double)(t1 - t0), dn = n ? (double)n : 1;
    printf("RESULT {\"dps\": %.1f, \"cpu_ns_per_dgram\": %.1f, \"server_cpu_pct\": %.1f, "
           "\"client_cpu_pct\": %.1f, \"client_cpu_ns_per_dgram\": %.1f, \"echoes\": %llu, "
           "\"lost\": %llu, \"loss_pct\": %.3f, \"errors\": %llu, \"size\": %u, \"peers\": %u, "
           "\"window\": %u, \"send\": \"%s\", \"recv_batch\": %u}\n",
           (double)n / wall * 1e9, server_pid ? (double)(s1 - s0) / dn : 0.0,
           server_pid ? (double)(s1 - s0) / wall * 100 : 0.0, (double)(c1 - c0) / wall * 100,
           (double)(c1 - c0) / dn, (unsigned long long)n, (unsigned long long)nl,
           100.0 * (double)nl / (double)(n + nl ? n + nl : 1), (unsigned long long)errors, size,
           npeers, window, send_mode, recv_batch);
    if (errors) {
        printf("FAIL: %llu errors\n", (unsigned long long)errors);
        return 1;
    }
    return 0;
}
