/* SPDX-License-Identifier: MIT */
/* The load client of the echo study (bench/README.md), after Asio's CK Echo Test client:
 * S sessions on one thread and one epoll instance, each writing a block and waiting for
 * its full echo before it writes the next, for a warm-up and then a timed window.
 *
 * Every byte that comes back is checked. A block is a slice of a fixed pseudo-random
 * table, at an offset that changes with every block and every session, so an echo that
 * is short, long, reordered or crossed with another connection's fails the comparison.
 * The run fails (exit 1, FAIL: ...) on any mismatch, early end of stream, reset or other
 * socket error, or a server that stops echoing for 5 s. Sessions that made no progress in
 * the window (a server that starves some) are counted and reported, not failed.
 *
 * With --server-pid, the client also reads the server's CPU time at the start and the end
 * of the timed window (/proc/PID/task/N/schedstat in nanoseconds, and /proc/PID/stat for
 * the user/system split), so that CPU per megabyte covers exactly the bytes counted.
 *
 * With --threads T (the scaling study's load for servers of several loops), T threads share
 * the sessions out (session i to thread i mod T), each with its own epoll instance; with
 * --cpus, thread i is pinned to the (i mod n)-th CPU of the list, and connects its own
 * sessions after pinning (so a server that steers by CPU sees them arrive on that CPU). The
 * client's own CPU use over the window is reported, to tell when the load is the limit.
 *
 * With --latency (one load thread), every echo completed in the window is timed, from the
 * moment its block was written to the moment its last byte was read back, and the median
 * and 99th percentile are reported: at one session with small blocks, the ping-pong round
 * trip.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TABLE_SPAN 65536 /* distinct block offsets in the pattern table */
#define STALL_NS (5 * 1000000000ull)
#define MAX_REPORTED 10 /* errors printed one by one; the rest are only counted */

struct session {
    int fd;
    uint32_t off;         /* this block's offset in the pattern table */
    uint32_t sent, got;   /* bytes of the block written, and echoed back and checked */
    uint32_t rng;         /* picks the next block's offset */
    uint64_t echoes;      /* complete echoes */
    uint64_t echoes_mark; /* echoes when the timed window began */
    int dead;             /* failed and closed */
    int want_out;         /* EPOLLOUT registered: the block did not fit the socket */
    uint64_t sent_at;     /* when this block's first byte was written (--latency) */
};

static struct {
    unsigned port;
    unsigned sessions;
    size_t block;
    double seconds, warmup;
    int server_pid;
    unsigned threads;
    int cpus[256], ncpus;
    int latency;
} opt = {55555, 1, 16384, 10, 1, 0, 1, {0}, 0, 0};

/* --latency (one load thread only, so no lock): one round trip per echo in the window. */
static uint32_t *rtt_ns;
static size_t nrtt, caprtt;
static int rtt_timing;

/* One load thread: its sessions are sess[id], sess[id + threads], ... */
struct loader {
    pthread_t th;
    unsigned id;
    int ep;
    unsigned char *scratch;
    uint64_t bytes, bytes_warm;
    int timing;
};

static unsigned char *table;
static struct session *sess;
static struct loader *loaders;
static pthread_barrier_t ready, go;
static uint64_t t_start, warm_end, end_ns; /* set by main between the two barriers */
/* Counted by every thread (atomically), read once they are joined. */
static unsigned long errors, mismatches, short_echoes, resets, stalls, idle_sessions;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void error_at(unsigned long *counter, const char *fmt, ...)
{
    __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
    if (__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED) > MAX_REPORTED)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("echo-client: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static void kill_session(struct session *s)
{
    close(s->fd);
    s->dead = 1;
}

static int session_ep(const struct session *s)
{
    return loaders[(size_t)(s - sess) % opt.threads].ep;
}

static void set_out(struct session *s, int on)
{
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = s};
    epoll_ctl(session_ep(s), EPOLL_CTL_MOD, s->fd, &ev);
    s->want_out = on;
}

/* Writes what is left of the block. */
static void send_rest(struct session *s)
{
    while (s->sent < opt.block) {
        ssize_t n = write(s->fd, table + s->off + s->sent, opt.block - s->sent);
        if (n < 0) {
            if (errno == EAGAIN) {
                if (!s->want_out)
                    set_out(s, 1);
                return;
            }
            error_at(&resets, "session %zu: write: %s", (size_t)(s - sess), strerror(errno));
            kill_session(s);
            return;
        }
        s->sent += (uint32_t)n;
    }
    if (s->want_out)
        set_out(s, 0);
}

static void next_block(struct session *s)
{
    s->off = xorshift(&s->rng) % TABLE_SPAN;
    s->sent = s->got = 0;
    if (opt.latency)
        s->sent_at = now_ns();
    send_rest(s);
}

static void record_rtt(uint64_t ns)
{
    if (nrtt == caprtt) {
        caprtt = caprtt ? caprtt * 2 : 1 << 16;
        uint32_t *p = realloc(rtt_ns, caprtt * sizeof *p);
        if (!p) {
            opt.latency = 0; /* out of memory: the run goes on, without latencies */
            return;
        }
        rtt_ns = p;
    }
    rtt_ns[nrtt++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Reads and checks what has come back; returns the bytes checked. */
static size_t receive(struct session *s, unsigned char *scratch)
{
    size_t want = opt.block - s->got;
    ssize_t n = read(s->fd, scratch, want);
    if (n <= 0) {
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n == 0)
            error_at(&short_echoes, "session %zu: end of stream after %u of %zu bytes echoed",
                     (size_t)(s - sess), s->got, opt.block);
        else
            error_at(&resets, "session %zu: read: %s", (size_t)(s - sess), strerror(errno));
        kill_session(s);
        return 0;
    }
    if (s->got + (size_t)n > s->sent) {
        error_at(&mismatches, "session %zu: %zd bytes echoed that were never sent",
                 (size_t)(s - sess), s->got + (size_t)n - s->sent);
        kill_session(s);
        return 0;
    }
    const unsigned char *expect = table + s->off + s->got;
    if (memcmp(scratch, expect, (size_t)n) != 0) {
        size_t i = 0;
        while (scratch[i] == expect[i])
            i++;
        error_at(&mismatches, "session %zu: byte %zu of echo %llu is %#x, sent %#x",
                 (size_t)(s - sess), s->got + i, (unsigned long long)s->echoes + 1,
                 scratch[i], expect[i]);
        kill_session(s);
        return 0;
    }
    s->got += (uint32_t)n;
    if (s->got == opt.block) {
        s->echoes++;
        if (opt.latency && rtt_timing)
            record_rtt(now_ns() - s->sent_at);
        next_block(s);
    }
    return (size_t)n;
}

struct cpu {
    uint64_t ns;           /* on-CPU time of every thread, from schedstat */
    uint64_t utick, stick; /* user and system clock ticks, from stat */
    int ok;
};

static struct cpu server_cpu(int pid)
{
    struct cpu c = {0, 0, 0, 0};
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char p[320];
        snprintf(p, sizeof p, "/proc/%d/task/%s/schedstat", pid, e->d_name);
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
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    char buf[1024];
    if (f && fgets(buf, sizeof buf, f)) {
        char *p = strrchr(buf, ')'); /* the command name may hold spaces */
        unsigned long long ut, st;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                        &st) == 2) {
            c.utick = ut;
            c.stick = st;
            if (!c.ok) /* no schedstat: fall back to ticks */
                c.ns = (ut + st) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
            c.ok = 1;
        }
    }
    if (f)
        fclose(f);
    return c;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: echo-client --port N [--sessions S] [--block BYTES] [--seconds T]\n"
            "                   [--warmup W] [--server-pid PID] [--threads T] [--cpus LIST]\n"
            "                   [--latency]\n"
            "Opens S TCP sessions to 127.0.0.1:N; each writes a block of a known pseudo-random\n"
            "pattern, waits for its full echo, checks every byte and repeats. Reports the\n"
            "bytes echoed per second (MB/s, 1 MB = 10^6 bytes) over T seconds after W\n"
            "seconds of warm-up.\n"
            "  --port N          the echo server's port on 127.0.0.1 (default 55555)\n"
            "  --sessions S      concurrent sessions (default 1)\n"
            "  --block BYTES     block size (default 16384)\n"
            "  --seconds T       timed window (default 10)\n"
            "  --warmup W        untimed seconds before it (default 1)\n"
            "  --server-pid PID  also report that process's CPU time over the window\n"
            "  --threads T       load threads sharing the sessions out (default 1)\n"
            "  --cpus LIST       pin thread i to the (i mod n)-th CPU of LIST (0,1,...)\n"
            "  --latency         time every echo in the window: round-trip median and p99\n"
            "                    (one thread)\n"
            "Prints a summary and a 'RESULT {json}' line. Exits 1 with 'FAIL: ...' on any\n"
            "mismatch, short echo, reset or stall, 2 on bad usage.\n");
}

static void parse(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'},    {"sessions", required_argument, NULL, 's'},
        {"block", required_argument, NULL, 'b'},   {"seconds", required_argument, NULL, 't'},
        {"warmup", required_argument, NULL, 'w'},  {"server-pid", required_argument, NULL, 'P'},
        {"threads", required_argument, NULL, 'T'}, {"cpus", required_argument, NULL, 'C'},
        {"latency", no_argument, NULL, 'l'},       {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "p:s:b:t:w:P:lh", opts, NULL)) != -1) {
        char *end = NULL;
        int bad = 0;
        switch (o) {
        case 'p':
            opt.port = (unsigned)strtoul(optarg, &end, 10);
            bad = opt.port == 0 || opt.port > 65535;
            break;
        case 's':
            opt.sessions = (unsigned)strtoul(optarg, &end, 10);
            bad = opt.sessions == 0 || opt.sessions > 1000000;
            break;
        case 'b':
            opt.block = strtoul(optarg, &end, 10);
            bad = opt.block == 0 || opt.block > (16u << 20);
            break;
        case 't':
            opt.seconds = strtod(optarg, &end);
            bad = !(opt.seconds > 0);
            break;
        case 'w':
            opt.warmup = strtod(optarg, &end);
            bad = !(opt.warmup >= 0);
            break;
        case 'P':
            opt.server_pid = (int)strtol(optarg, &end, 10);
            bad = opt.server_pid <= 0;
            break;
        case 'T':
            opt.threads = (unsigned)strtoul(optarg, &end, 10);
            bad = opt.threads == 0 || opt.threads > 1024;
            break;
        case 'C':
            for (char *p = optarg; !bad && *p;) {
                long c = strtol(p, &end, 10);
                bad = end == p || c < 0 || c >= CPU_SETSIZE || opt.ncpus == 256 ||
                      (*end && *end != ',');
                opt.cpus[opt.ncpus++] = (int)c;
                p = *end ? end + 1 : end;
            }
            end = NULL;
            break;
        case 'l':
            opt.latency = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
        if (bad || (end && *end)) {
            fprintf(stderr, "echo-client: bad value '%s'\n", optarg);
            exit(2);
        }
    }
    if (optind < argc) {
        usage(stderr);
        exit(2);
    }
    if (opt.latency && opt.threads > 1) {
        fprintf(stderr, "echo-client: --latency times one load thread only\n");
        exit(2);
    }
}

static void fail(const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    printf("FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "echo-client: FAIL: ");
    vfprintf(stderr, fmt, again);
    fputc('\n', stderr);
    va_end(again);
    va_end(ap);
    exit(1);
}

static void raise_nofile(void)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)opt.sessions + 16 + 2 * opt.threads)
        fail("%u sessions need more fds than RLIMIT_NOFILE allows (%llu)", opt.sessions,
             (unsigned long long)rl.rlim_cur);
}

/* A thread's sessions, connected from it. */
static void open_sessions(struct loader *l)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    for (unsigned i = l->id; i < opt.sessions; i += opt.threads) {
        struct session *s = &sess[i];
        /* Blocking connects, one after the other: the server accepts on its own CPU
         * meanwhile, and the backlog never holds more than a few per thread. */
        s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s->fd < 0 || connect(s->fd, (struct sockaddr *)&a, sizeof a) != 0)
            fail("session %u: connect to 127.0.0.1:%u: %s", i, opt.port, strerror(errno));
        setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
        if (epoll_ctl(l->ep, EPOLL_CTL_ADD, s->fd, &ev) != 0)
            fail("epoll_ctl: %s", strerror(errno));
        s->rng = 2463534242u ^ (i * 2654435761u);
        if (!s->rng)
            s->rng = 1;
    }
}

/* A load thread: connects its sessions, then echoes until the window ends. */
static void *load(void *arg)
{
    struct loader *l = arg;
    if (opt.ncpus) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(opt.cpus[l->id % (unsigned)opt.ncpus], &set);
        int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
        if (err != 0)
            fail("pin thread %u to CPU %d: %s", l->id, opt.cpus[l->id % (unsigned)opt.ncpus],
                 strerror(err));
    }
    if ((l->ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
        fail("epoll_create1: %s", strerror(errno));
    open_sessions(l);
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go); /* main has set the window */
    for (unsigned i = l->id; i < opt.sessions; i += opt.threads)
        next_block(&sess[i]);
    uint64_t last_progress = t_start;
    enum { MAXEV = 1024 };
    struct epoll_event events[MAXEV];
    for (;;) {
        uint64_t now = now_ns();
        if (!l->timing && now >= warm_end) {
            l->timing = 1;
            rtt_timing = opt.latency; /* one thread with --latency */
            l->bytes_warm = l->bytes;
            for (unsigned i = l->id; i < opt.sessions; i += opt.threads)
                sess[i].echoes_mark = sess[i].echoes;
        }
        if (now >= end_ns)
            break;
        if (now - last_progress > STALL_NS) {
            error_at(&stalls, "no byte echoed on any session of thread %u for %.0f s", l->id,
                     STALL_NS / 1e9);
            break;
        }
        uint64_t next = l->timing ? end_ns : warm_end;
        int timeout = (int)((next - now) / 1000000 + 1);
        int n = epoll_wait(l->ep, events, MAXEV, timeout > 1000 ? 1000 : timeout);
        if (n < 0 && errno != EINTR)
            fail("epoll_wait: %s", strerror(errno));
        for (int i = 0; i < n; i++) {
            struct session *s = events[i].data.ptr;
            if (s->dead)
                continue;
            if (events[i].events & EPOLLOUT)
                send_rest(s);
            if (!s->dead && (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
                size_t got = receive(s, l->scratch);
                if (got) {
                    l->bytes += got;
                    last_progress = now;
                }
            }
        }
    }
    return NULL;
}

static void sleep_until(uint64_t t)
{
    for (uint64_t now = now_ns(); now < t; now = now_ns()) {
        uint64_t left = t - now;
        struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        nanosleep(&ts, NULL);
    }
}

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    if (opt.threads > opt.sessions)
        opt.threads = opt.sessions; /* a thread without sessions would only wait */
    signal(SIGPIPE, SIG_IGN);
    table = malloc(TABLE_SPAN + opt.block);
    sess = calloc(opt.sessions, sizeof *sess);
    loaders = calloc(opt.threads, sizeof *loaders);
    if (!table || !sess || !loaders)
        fail("out of memory");
    uint32_t seed = 0x9e3779b9u;
    for (size_t i = 0; i < TABLE_SPAN + opt.block; i++)
        table[i] = (unsigned char)(xorshift(&seed) >> 24);
    raise_nofile();
    pthread_barrier_init(&ready, NULL, opt.threads + 1);
    pthread_barrier_init(&go, NULL, opt.threads + 1);

    uint64_t t_open = now_ns();
    for (unsigned i = 0; i < opt.threads; i++) {
        loaders[i].id = i;
        if (!(loaders[i].scratch = malloc(opt.block)))
            fail("out of memory");
        if (pthread_create(&loaders[i].th, NULL, load, &loaders[i]) != 0)
            fail("pthread_create: %s", strerror(errno));
    }
    pthread_barrier_wait(&ready); /* every session connected */
    t_start = now_ns();
    warm_end = t_start + (uint64_t)(opt.warmup * 1e9);
    end_ns = warm_end + (uint64_t)(opt.seconds * 1e9);
    pthread_barrier_wait(&go);
    struct cpu cpu0 = {0, 0, 0, 0}, cpu1 = cpu0;
    sleep_until(warm_end);
    uint64_t win_start = now_ns();
    if (opt.server_pid)
        cpu0 = server_cpu(opt.server_pid);
    double ccpu0 = process_cpu_s();
    sleep_until(end_ns);
    uint64_t win_end = now_ns();
    if (opt.server_pid)
        cpu1 = server_cpu(opt.server_pid);
    double client_cpu = process_cpu_s() - ccpu0;
    uint64_t bytes = 0, bytes_warm = 0;
    int timing = 1;
    for (unsigned i = 0; i < opt.threads; i++) {
        pthread_join(loaders[i].th, NULL);
        bytes += loaders[i].bytes;
        bytes_warm += loaders[i].bytes_warm;
        timing &= loaders[i].timing;
        close(loaders[i].ep);
        free(loaders[i].scratch);
    }
    if (stalls) /* a thread stopped early: the window is not the whole one for it */
        win_end = now_ns();

    uint64_t min_echoes = UINT64_MAX, max_echoes = 0, total_echoes = 0;
    uint64_t all_echoes = 0;
    unsigned dead = 0;
    for (unsigned i = 0; i < opt.sessions; i++) {
        struct session *s = &sess[i];
        all_echoes += s->echoes;
        uint64_t e = s->echoes - s->echoes_mark;
        min_echoes = e < min_echoes ? e : min_echoes;
        max_echoes = e > max_echoes ? e : max_echoes;
        total_echoes += e;
        dead += s->dead;
    }
    /* A session that completed nothing in the window was starved, unless the window was
     * too short for every session to come round (then it must have done something at
     * all). Starvation is a finding about the server's fairness, reported in RESULT and
     * in the report's fairness table, not an error: no byte was lost or corrupted. */
    double mean = (double)total_echoes / opt.sessions;
    for (unsigned i = 0; i < opt.sessions && timing && !stalls; i++) {
        struct session *s = &sess[i];
        if (!s->dead && (mean >= 4 ? s->echoes == s->echoes_mark : s->echoes == 0) &&
            idle_sessions++ < MAX_REPORTED)
            fprintf(stderr, "echo-client: note: session %u was starved (%llu echoes in all, "
                    "%.1f on average in the window)\n", i, (unsigned long long)s->echoes,
                    mean);
    }
    for (unsigned i = 0; i < opt.sessions; i++)
        if (!sess[i].dead)
            close(sess[i].fd);
    free(sess);
    free(loaders);
    free(table);

    double secs = (double)(win_end - win_start) / 1e9;
    double window_bytes = (double)(bytes - bytes_warm);
    double mbps = timing && secs > 0 ? window_bytes / 1e6 / secs : 0;
    printf("echo-client: %u sessions, %zu-byte blocks, %u thread%s, %.2f s window after "
           "%.2f s warm-up (connecting took %.3f s): %.1f MB/s, %llu echoes, %lu errors\n",
           opt.sessions, opt.block, opt.threads, opt.threads > 1 ? "s" : "", secs, opt.warmup,
           (t_start - t_open) / 1e9, mbps, (unsigned long long)total_echoes, errors);
    printf("RESULT {\"sessions\":%u,\"block\":%zu,\"seconds\":%.4f,\"bytes\":%.0f,"
           "\"mbps\":%.3f,\"echoes\":%llu,\"echoes_total\":%llu,\"min_session_echoes\":%llu,"
           "\"max_session_echoes\":%llu,\"connect_s\":%.4f,\"client_cpu_s\":%.4f,"
           "\"client_threads\":%u,\"client_cpu_pct\":%.1f,"
           "\"errors\":%lu,\"mismatches\":%lu,\"short_echoes\":%lu,\"resets\":%lu,"
           "\"stalls\":%lu,\"idle_sessions\":%lu",
           opt.sessions, opt.block, secs, window_bytes, mbps, (unsigned long long)total_echoes,
           (unsigned long long)all_echoes, (unsigned long long)(timing ? min_echoes : 0),
           (unsigned long long)max_echoes, (t_start - t_open) / 1e9, client_cpu, opt.threads,
           secs > 0 ? client_cpu / secs * 100 : 0, errors, mismatches, short_echoes, resets,
           stalls, idle_sessions);
    printf(",\"eps\":%.1f", timing && secs > 0 ? (double)total_echoes / secs : 0.0);
    if (opt.latency && nrtt) {
        qsort(rtt_ns, nrtt, sizeof *rtt_ns, cmp_u32);
        printf(",\"rtt_us_p50\":%.2f,\"rtt_us_p99\":%.2f,\"rtt_samples\":%zu",
               rtt_ns[nrtt / 2] / 1e3, rtt_ns[nrtt * 99 / 100] / 1e3, nrtt);
    }
    free(rtt_ns);
    if (opt.server_pid && cpu0.ok && cpu1.ok && window_bytes > 0) {
        double cpu_s = (double)(cpu1.ns - cpu0.ns) / 1e9;
        double tick = 1.0 / (double)sysconf(_SC_CLK_TCK);
        printf(",\"server_cpu_s\":%.4f,\"server_user_s\":%.3f,\"server_sys_s\":%.3f,"
               "\"cpu_ms_per_mb\":%.4f,\"server_cpu_pct\":%.1f",
               cpu_s, (double)(cpu1.utick - cpu0.utick) * tick,
               (double)(cpu1.stick - cpu0.stick) * tick, cpu_s * 1e3 / (window_bytes / 1e6),
               cpu_s / secs * 100);
        if (total_echoes)
            printf(",\"cpu_us_per_echo\":%.4f", cpu_s * 1e6 / (double)total_echoes);
    }
    printf("}\n");
    if (errors)
        fail("%lu errors: %lu mismatches, %lu short echoes, %lu resets or socket errors, "
             "%lu stalls (%u of %u sessions closed on an error)",
             errors, mismatches, short_echoes, resets, stalls, dead, opt.sessions);
    if (!timing || window_bytes <= 0)
        fail("nothing was echoed in the timed window");
    return 0;
}
