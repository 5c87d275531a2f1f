/* SPDX-License-Identifier: MIT */
/* The datagram study's load (bench/dgram_study.py): P peers, each a UDP socket of its own on
 * 127.0.0.1 connected to the echo server, each keeping a window of W datagrams of B bytes in
 * flight. One thread, one epoll instance, recvmmsg and sendmmsg per peer.
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
 * load is the limit. The last line is RESULT {json}.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
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

#define BATCH    32
#define MAX_SIZE 2048
#define LOSS_NS  (50ull * 1000000)

struct peer {
    int fd;
    uint32_t id;
    uint32_t seq;       /* the next to send */
    uint32_t in_flight; /* sent, not yet echoed */
    uint64_t heard;     /* when it last got an echo (or sent a fresh window) */
};

static unsigned size = 64, npeers = 1, window;
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

/* The bytes of datagram `seq` of peer `id`: a header, then a pattern of both. */
static void fill(char *p, uint32_t id, uint32_t seq)
{
    memcpy(p, &id, 4);
    memcpy(p + 4, &seq, 4);
    uint32_t x = id * 2654435761u ^ seq * 40503u;
    for (unsigned i = 8; i < size; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (char)(x >> 24);
    }
}

static int check(const char *p, unsigned len, uint32_t id)
{
    static char want[MAX_SIZE];
    uint32_t got_id, seq;
    if (len != size)
        return 0;
    memcpy(&got_id, p, 4);
    memcpy(&seq, p + 4, 4);
    if (got_id != id)
        return 0;
    fill(want, id, seq);
    return memcmp(p, want, size) == 0;
}

static void fail(const char *what)
{
    if (errors++ < 10)
        fprintf(stderr, "error: %s\n", what);
}

/* Sends datagrams until the peer's window is full again. */
static void refill(struct peer *pr)
{
    static char out[BATCH][MAX_SIZE];
    static struct iovec iov[BATCH];
    static struct mmsghdr m[BATCH];
    while (pr->in_flight < window) {
        unsigned n = window - pr->in_flight;
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
        int s = sendmmsg(pr->fd, m, n, 0);
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
    static char in[BATCH][MAX_SIZE];
    static struct iovec iov[BATCH];
    static struct mmsghdr m[BATCH];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = in[i];
            iov[i].iov_len = MAX_SIZE;
            memset(&m[i].msg_hdr, 0, sizeof m[i].msg_hdr);
            m[i].msg_hdr.msg_iov = &iov[i];
            m[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(pr->fd, m, BATCH, 0, NULL);
        if (n <= 0) {
            if (n < 0 && errno != EAGAIN && errno != ECONNREFUSED)
                fail(strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            if (!check(in[i], m[i].msg_len, pr->id))
                fail("an echo that is not the datagram sent");
            echoes++;
            if (pr->in_flight)
                pr->in_flight--;
        }
        pr->heard = t;
        if (n < BATCH)
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

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'},    {"size", required_argument, NULL, 's'},
        {"peers", required_argument, NULL, 'P'},   {"window", required_argument, NULL, 'w'},
        {"seconds", required_argument, NULL, 't'}, {"warmup", required_argument, NULL, 'W'},
        {"server-pid", required_argument, NULL, 'S'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    unsigned port = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case 'p': port = (unsigned)atoi(optarg); break;
        case 's': size = (unsigned)atoi(optarg); break;
        case 'P': npeers = (unsigned)atoi(optarg); break;
        case 'w': window = (unsigned)atoi(optarg); break;
        case 't': seconds = atof(optarg); break;
        case 'W': warmup = atof(optarg); break;
        case 'S': server_pid = atoi(optarg); break;
        case 'h':
            printf("usage: dgram-client --port N [--size B] [--peers P] [--window W] "
                   "[--seconds S] [--warmup S] [--server-pid PID]\n"
                   "UDP echo load on 127.0.0.1: P peers, W datagrams of B bytes in flight "
                   "each (default W: 64 / P, at least 1).\n");
            return 0;
        default:
            return 2;
        }
    }
    if (!port || size < 8 || size > MAX_SIZE || npeers < 1 || npeers > 10000) {
        fprintf(stderr, "dgram-client: bad arguments (--help)\n");
        return 2;
    }
    if (!window)
        window = npeers >= 64 ? 1 : 64 / npeers;
    peers = calloc(npeers, sizeof *peers);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct sockaddr_in srv = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    srv.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (unsigned i = 0; i < npeers; i++) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int sz = 4 << 20;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) != 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        if (fd < 0 || connect(fd, (struct sockaddr *)&srv, sizeof srv) != 0) {
            perror("dgram-client: socket");
            return 1;
        }
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
    double secs = (double)(t1 - t0) / 1e9;
    uint64_t n = echoes - e0;
    if (n == 0)
        fail("no echo in the timed window");
    printf("RESULT {\"dps\": %.1f, \"cpu_ns_per_dgram\": %.1f, \"server_cpu_pct\": %.1f, "
           "\"client_cpu_pct\": %.1f, \"echoes\": %llu, \"lost\": %llu, \"loss_pct\": %.3f, "
           "\"errors\": %llu, \"size\": %u, \"peers\": %u, \"window\": %u}\n",
           (double)n / secs, n && server_pid ? (double)(s1 - s0) / (double)n : 0.0,
           server_pid ? (double)(s1 - s0) / (double)(t1 - t0) * 100 : 0.0,
           (double)(c1 - c0) / (double)(t1 - t0) * 100, (unsigned long long)n,
           (unsigned long long)(lost - l0), n ? 100.0 * (double)(lost - l0) / (double)(n + lost - l0) : 0.0,
           (unsigned long long)errors, size, npeers, window);
    if (errors) {
        printf("FAIL: %llu errors\n", (unsigned long long)errors);
        return 1;
    }
    return 0;
}
