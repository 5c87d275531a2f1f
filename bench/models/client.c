/* SPDX-License-Identifier: MIT */
/* The load client of the I/O-model study (bench/README.md), after the Winsock comparison
 * (docs/studies.md, study 5): it ramps the connections to an echo server up in steps (100
 * to what the fd limit allows), and at each step every connection echoes a small message
 * at a fixed rate, as the book's clients did with their bit rate limited.
 *
 * A step: connect up to the step's count (non-blocking, at most 256 connects under way,
 * from source addresses 127.0.0.1 .. 127.0.0.K in turn so that ports never run short); send
 * each new connection a first message and wait for its echo: a connection is held once its
 * first echo is back. Then a warm-up and a timed window, during which each held connection
 * sends a message every 1/rate seconds (their phases spread evenly over the period) if its
 * previous echo is back, and counts it as late otherwise. Every echoed byte is checked
 * against the message it answers. Reported per step, on a 'STEP {json}' line: connections
 * held, echoes per second against those offered, round-trip times, and with --server-pid
 * the server's CPU time over the window (schedstat of all its threads), its resident memory
 * (VmRSS) and its thread count at the end of the window.
 *
 * A model breaks at the first step where it does not hold every connection (refused,
 * closed by the server, or no first echo within --connect-timeout) or answers fewer than
 * 90% of the messages offered; the client then stops ramping. Breaking is a finding, not
 * an error: the exit status is 1 only for a byte that does not match (FAIL: ...), 2 for bad
 * usage. Loopback only.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_STEPS 32
#define INFLIGHT 256
#define SLOTS 100 /* send phases per period */
#define KEEP_RATE 0.9

enum { C_NONE, C_CONNECTING, C_OPEN, C_DEAD };

struct conn {
    int fd, state;
    uint32_t seq;    /* the message in flight, or the last one answered */
    uint32_t got;    /* bytes of its echo checked */
    int waiting;     /* its echo is not complete */
    int held;        /* its first echo came back */
    uint64_t sent_at;
};

static struct {
    unsigned port, steps[MAX_STEPS], nsteps, message, sources;
    double rate, seconds, warmup, connect_timeout;
    int server_pid;
    int keep_going; /* a step answered too slowly does not stop the ramp */
} opt = {0, {0}, 0, 64, 4, 2, 2, 0.5, 5, 0, 0};

static struct conn *conns;
static unsigned nconns, connecting, held, dead, refused, mismatches;
static int ep;
static uint64_t echoes, late, sent;
static uint32_t *rtt;
static size_t nrtt, caprtt;
static int timing;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned char pattern(unsigned i, uint32_t seq, unsigned k)
{
    return (unsigned char)(i * 7u + seq * 13u + k * 3u + (k >> 3));
}

static void kill_conn(struct conn *c)
{
    if (c->state == C_CONNECTING)
        connecting--;
    if (c->held)
        held--;
    close(c->fd);
    c->state = C_DEAD;
    c->held = 0;
    dead++;
}

static int send_message(struct conn *c)
{
    unsigned char msg[4096];
    unsigned i = (unsigned)(c - conns);
    c->seq++;
    for (unsigned k = 0; k < opt.message; k++)
        msg[k] = pattern(i, c->seq, k);
    ssize_t n = write(c->fd, msg, opt.message);
    if (n != (ssize_t)opt.message) { /* a small message never fits partly: the peer is gone */
        kill_conn(c);
        return -1;
    }
    c->got = 0;
    c->waiting = 1;
    c->sent_at = now_ns();
    sent += timing;
    return 0;
}

static void receive(struct conn *c)
{
    unsigned char buf[4096];
    unsigned i = (unsigned)(c - conns);
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n <= 0) {
        if (n < 0 && errno == EAGAIN)
            return;
        kill_conn(c); /* closed or reset by the server */
        return;
    }
    for (ssize_t k = 0; k < n; k++) {
        if (!c->waiting || c->got >= opt.message || buf[k] != pattern(i, c->seq, c->got)) {
            if (mismatches++ < 10)
                fprintf(stderr, "model-client: connection %u: byte %u of message %u wrong\n", i,
                        c->got, c->seq);
            kill_conn(c);
            return;
        }
        c->got++;
    }
    if (c->got == opt.message) {
        c->waiting = 0;
        if (!c->held) {
            c->held = 1;
            held++;
        }
        if (timing) {
            echoes++;
            if (nrtt == caprtt) {
                caprtt = caprtt ? caprtt * 2 : 65536;
                rtt = realloc(rtt, caprtt * sizeof *rtt);
                if (!rtt) {
                    fprintf(stderr, "model-client: out of memory\n");
                    exit(1);
                }
            }
            uint64_t d = now_ns() - c->sent_at;
            rtt[nrtt++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
        }
    }
}

static void start_connect(unsigned i)
{
    struct conn *c = &conns[i];
    struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
    src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + i % opt.sources);
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    dst.sin_port = htons((uint16_t)opt.port);
    int one = 1;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    c->state = C_CONNECTING;
    connecting++;
    if (c->fd < 0) {
        c->fd = -1;
        connecting--;
        c->state = C_DEAD;
        dead++;
        refused++;
        return;
    }
    setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = i};
    if (bind(c->fd, (struct sockaddr *)&src, sizeof src) != 0 ||
        (connect(c->fd, (struct sockaddr *)&dst, sizeof dst) != 0 && errno != EINPROGRESS) ||
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        refused++;
        kill_conn(c);
    }
}

static void on_event(struct epoll_event *e)
{
    struct conn *c = &conns[e->data.u32];
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        connecting--;
        c->state = C_OPEN;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = e->data.u32};
        if (err || epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
            refused++;
            connecting++; /* kill_conn counts it out again */
            c->state = C_CONNECTING;
            kill_conn(c);
            return;
        }
        send_message(c);
        return;
    }
    if (c->state == C_OPEN)
        receive(c);
}

static void poll_events(int timeout_ms)
{
    struct epoll_event events[1024];
    int n = epoll_wait(ep, events, 1024, timeout_ms);
    for (int k = 0; k < n; k++)
        on_event(&events[k]);
}

/* Connects up to `want` and waits for every first echo; stops when nothing progresses for
 * --connect-timeout seconds. */
static void ramp(unsigned want)
{
    uint64_t last = now_ns();
    unsigned progress = held + dead;
    while (held + dead < want || connecting) {
        while (nconns < want && connecting < INFLIGHT)
            start_connect(nconns++);
        poll_events(10);
        unsigned p = held + dead;
        uint64_t now = now_ns();
        if (p != progress) {
            progress = p;
            last = now;
        } else if ((double)(now - last) / 1e9 > opt.connect_timeout) {
            break;
        }
        int waiting_first = 0;
        for (unsigned i = 0; i < nconns && !waiting_first; i++)
            waiting_first = conns[i].state == C_OPEN && !conns[i].held;
        if (nconns == want && !connecting && !waiting_first)
            break;
    }
}

struct cpu {
    uint64_t ns;
    int ok;
};

static struct cpu server_cpu(void)
{
    struct cpu c = {0, 0};
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", opt.server_pid);
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char p[320];
        snprintf(p, sizeof p, "/proc/%d/task/%s/schedstat", opt.server_pid, e->d_name);
        FILE *f = fopen(p, "r");
        unsigned long long ns;
        if (f && fscanf(f, "%llu", &ns) == 1) {
            c.ns += ns;
            c.ok = 1;
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return c;
}

/* VmRSS in kB and Threads of /proc/PID/status. */
static void server_status(long *rss_kb, long *threads)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", opt.server_pid);
    FILE *f = fopen(path, "r");
    *rss_kb = *threads = -1;
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "VmRSS: %ld", rss_kb);
        sscanf(line, "Threads: %ld", threads);
    }
    if (f)
        fclose(f);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Sends on schedule for `secs`: slot s of SLOTS fires at s/SLOTS of each period, and sends
 * to the connections i with i % SLOTS == s. */
static void run_for(double secs)
{
    uint64_t start = now_ns(), end = start + (uint64_t)(secs * 1e9);
    uint64_t period = (uint64_t)(1e9 / opt.rate), tick = period / SLOTS;
    uint64_t next = start;
    unsigned slot = 0;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= end)
            break;
        while (now >= next) {
            for (unsigned i = slot; i < nconns; i += SLOTS) {
                struct conn *c = &conns[i];
                if (c->state != C_OPEN || !c->held)
                    continue;
                if (c->waiting)
                    late += timing;
                else
                    send_message(c);
            }
            slot = (slot + 1) % SLOTS;
            next += tick;
        }
        uint64_t wait = (next < end ? next : end) - now;
        poll_events((int)((wait + 999999) / 1000000)); /* never 0: no spinning to the tick */
    }
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: model-client --port N [--steps 100,1000,...] [--rate R] [--message BYTES]\n"
            "                    [--seconds T] [--warmup W] [--server-pid PID] [--sources K]\n"
            "                    [--connect-timeout S] [--keep-going]\n"
            "Ramps connections to the echo server on 127.0.0.1:N through the steps; at each,\n"
            "every connection echoes a message every 1/R s. Prints a 'STEP {json}' line per\n"
            "step and stops at the first step the server does not hold or keep up with.\n"
            "  --steps LIST        connection counts, ascending (default 100,1000)\n"
            "  --rate R            messages per second per connection (default 2)\n"
            "  --message BYTES     message size, 1 .. 4096 (default 64)\n"
            "  --seconds T         timed window per step (default 2)\n"
            "  --warmup W          untimed seconds before it (default 0.5)\n"
            "  --server-pid PID    report that process's CPU, memory and threads\n"
            "  --sources K         source addresses 127.0.0.1 .. 127.0.0.K (default 4)\n"
            "  --connect-timeout S a step's connects and first echoes give up after S s\n"
            "                      without progress (default 5)\n"
            "  --keep-going        ramp on past a step answered too slowly (the smoke run:\n"
            "                      it checks the echoes, not the speed of a busy machine)\n");
}

static double num(const char *s, double lo, double hi)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "model-client: bad value '%s'\n", s);
        exit(2);
    }
    return v;
}

static void parse(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'},    {"steps", required_argument, NULL, 'S'},
        {"rate", required_argument, NULL, 'r'},    {"message", required_argument, NULL, 'm'},
        {"seconds", required_argument, NULL, 't'}, {"warmup", required_argument, NULL, 'w'},
        {"server-pid", required_argument, NULL, 'P'},
        {"sources", required_argument, NULL, 'k'},
        {"connect-timeout", required_argument, NULL, 'T'},
        {"keep-going", no_argument, NULL, 'K'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    int o;
    opt.steps[0] = 100;
    opt.steps[1] = 1000;
    opt.nsteps = 2;
    while ((o = getopt_long(argc, argv, "p:S:r:m:t:w:P:k:T:Kh", opts, NULL)) != -1) {
        switch (o) {
        case 'p':
            opt.port = (unsigned)num(optarg, 1, 65535);
            break;
        case 'S': {
            opt.nsteps = 0;
            for (char *tok = strtok(optarg, ","); tok; tok = strtok(NULL, ",")) {
                if (opt.nsteps == MAX_STEPS) {
                    fprintf(stderr, "model-client: at most %d steps\n", MAX_STEPS);
                    exit(2);
                }
                opt.steps[opt.nsteps] = (unsigned)num(tok, 1, 1000000);
                if (opt.nsteps && opt.steps[opt.nsteps] <= opt.steps[opt.nsteps - 1])
                    num(tok, 0, 0); /* not ascending */
                opt.nsteps++;
            }
            break;
        }
        case 'r':
            opt.rate = num(optarg, 0.01, 10000);
            break;
        case 'm':
            opt.message = (unsigned)num(optarg, 1, 4096);
            break;
        case 't':
            opt.seconds = num(optarg, 0.01, 3600);
            break;
        case 'w':
            opt.warmup = num(optarg, 0, 3600);
            break;
        case 'P':
            opt.server_pid = (int)num(optarg, 1, 1 << 30);
            break;
        case 'k':
            opt.sources = (unsigned)num(optarg, 1, 254);
            break;
        case 'T':
            opt.connect_timeout = num(optarg, 0.1, 3600);
            break;
        case 'K':
            opt.keep_going = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (optind < argc || !opt.port || !opt.nsteps) {
        usage(stderr);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    unsigned top = opt.steps[opt.nsteps - 1];
    if ((rlim_t)top + 16 > rl.rlim_cur) {
        fprintf(stderr, "model-client: %u connections need more fds than RLIMIT_NOFILE (%llu)\n",
                top, (unsigned long long)rl.rlim_cur);
        return 2;
    }
    conns = calloc(top, sizeof *conns);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (!conns || ep < 0) {
        fprintf(stderr, "model-client: out of memory or epoll\n");
        return 1;
    }
    for (unsigned s = 0; s < opt.nsteps; s++) {
        unsigned want = opt.steps[s];
        uint64_t t0 = now_ns();
        ramp(want);
        double connect_s = (double)(now_ns() - t0) / 1e9;
        unsigned held_before = held;
        run_for(opt.warmup);
        struct cpu c0 = opt.server_pid ? server_cpu() : (struct cpu){0, 0};
        echoes = late = sent = 0;
        nrtt = 0;
        timing = 1;
        uint64_t w0 = now_ns();
        run_for(opt.seconds);
        double secs = (double)(now_ns() - w0) / 1e9;
        timing = 0;
        struct cpu c1 = opt.server_pid ? server_cpu() : (struct cpu){0, 0};
        long rss_kb = -1, threads = -1;
        if (opt.server_pid)
            server_status(&rss_kb, &threads);
        double offered = held_before * opt.rate * secs;
        double eps = echoes / secs;
        qsort(rtt, nrtt, sizeof *rtt, cmp_u32);
        double p50 = nrtt ? rtt[nrtt / 2] / 1e3 : 0, p99 = nrtt ? rtt[nrtt * 99 / 100] / 1e3 : 0;
        const char *broke = NULL;
        char why[160] = "";
        if (held < want) {
            snprintf(why, sizeof why, "holds %u of %u connections (%u refused or failed, %u "
                     "closed or unanswered)", held, want, refused,
                     want - held > refused ? want - held - refused : 0);
            broke = why;
        } else if (echoes < KEEP_RATE * offered) {
            snprintf(why, sizeof why, "answers %.0f%% of the messages offered", 100.0 * echoes /
                     (offered > 0 ? offered : 1));
            broke = why;
        }
        printf("STEP {\"connections\":%u,\"held\":%u,\"connect_s\":%.3f,\"seconds\":%.3f,"
               "\"offered_eps\":%.1f,\"eps\":%.1f,\"sent\":%llu,\"late\":%llu,"
               "\"rtt_us_p50\":%.1f,\"rtt_us_p99\":%.1f,\"mismatches\":%u",
               want, held, connect_s, secs, offered / secs, eps, (unsigned long long)sent,
               (unsigned long long)late, p50, p99, mismatches);
        if (opt.server_pid && c0.ok && c1.ok)
            printf(",\"server_cpu_pct\":%.2f,\"server_cpu_us_per_echo\":%.3f",
                   (double)(c1.ns - c0.ns) / 1e9 / secs * 100,
                   echoes ? (double)(c1.ns - c0.ns) / 1e3 / (double)echoes : 0.0);
        if (opt.server_pid && rss_kb >= 0)
            printf(",\"server_rss_kb\":%ld,\"server_threads\":%ld,\"rss_kb_per_conn\":%.2f",
                   rss_kb, threads, held ? (double)rss_kb / held : 0.0);
        if (broke)
            printf(",\"broke\":\"%s\"", broke);
        printf("}\n");
        fflush(stdout);
        if ((broke && (held < want || !opt.keep_going)) || mismatches)
            break;
    }
    for (unsigned i = 0; i < nconns; i++)
        if (conns[i].state != C_DEAD && conns[i].fd >= 0)
            close(conns[i].fd);
    close(ep);
    free(conns);
    free(rtt);
    if (mismatches) {
        printf("FAIL: %u echoed bytes did not match what was sent\n", mismatches);
        return 1;
    }
    return 0;
}
