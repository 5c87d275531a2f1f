/* SPDX-License-Identifier: MIT */
/* The runner and the helpers declared in harness.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define MAX_CASES        1024
#define WATCHDOG_SECONDS 20

static struct {
    const char *name;
    void (*fn)(void);
    int kind;
} cases[MAX_CASES];
static int ncases;
static const char *current = "?";

void harness_register(const char *name, void (*fn)(void), int kind)
{
    if (ncases == MAX_CASES) {
        fprintf(stderr, "harness: more than %d cases\n", MAX_CASES);
        abort();
    }
    cases[ncases].name = name;
    cases[ncases].fn = fn;
    cases[ncases].kind = kind;
    ncases++;
}

void harness_fail(const char *file, int line, const char *expr, const char *detail)
{
    fprintf(stderr, "%s:%d: %s: CHECK(%s) failed%s%s\n", file, line, current, expr,
            detail ? ": " : "", detail ? detail : "");
    fflush(NULL);
    _exit(1);
}

void harness_fail_cmp(const char *file, int line, const char *a, const char *op, const char *b,
                      long long va, long long vb)
{
    fprintf(stderr, "%s:%d: %s: CHECK(%s %s %s) failed: %lld %s %lld is false\n", file, line,
            current, a, op, b, va, op, vb);
    fflush(NULL);
    _exit(1);
}

void harness_fail_str(const char *file, int line, const char *a, const char *b, const char *va,
                      const char *vb)
{
    fprintf(stderr, "%s:%d: %s: CHECK_STR_EQ(%s, %s) failed: \"%s\" != \"%s\"\n", file, line,
            current, a, b, va ? va : "(null)", vb ? vb : "(null)");
    fflush(NULL);
    _exit(1);
}

void harness_skip(const char *reason)
{
    printf("SKIP %s: %s\n", current, reason);
    fflush(NULL);
    _exit(77);
}

static const char watchdog_msg[] = "watchdog: the case did not finish in time (hang?)\n";

#ifdef _WIN32
/* No SIGALRM: a thread watches the deadline (0: none). */
static volatile LONG64 watchdog_deadline_ms;

static DWORD WINAPI watchdog_thread(void *arg)
{
    (void)arg;
    for (;;) {
        Sleep(100);
        LONG64 d = InterlockedCompareExchange64(&watchdog_deadline_ms, 0, 0);
        if (d && (LONG64)GetTickCount64() > d) {
            fputs(watchdog_msg, stderr);
            fflush(NULL);
            _exit(1);
        }
    }
    return 0;
}

unsigned harness_watchdog(unsigned seconds)
{
    InterlockedExchange64(&watchdog_deadline_ms,
                          seconds ? (LONG64)GetTickCount64() + seconds * 1000LL : 0);
    return 0;
}

static void watchdog_install(void)
{
    WSADATA wd;
    WSAStartup(MAKEWORD(2, 2), &wd); /* cases make sockets before their loop */
    CloseHandle(CreateThread(NULL, 0, watchdog_thread, NULL, 0, NULL));
}
#else
static void on_alarm(int sig)
{
    (void)sig;
    if (write(2, watchdog_msg, sizeof watchdog_msg - 1) < 0) {
        /* nothing more to do */
    }
    _exit(1);
}

unsigned harness_watchdog(unsigned seconds)
{
    return alarm(seconds);
}

static void watchdog_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
}
#endif

static void list(void)
{
    static const char *kinds[] = {"test", "thread", "core"};
    for (int i = 0; i < ncases; i++)
        printf("%-6s %s\n", kinds[cases[i].kind], cases[i].name);
}

int main(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "--list") == 0) {
        if (argc != 2)
            fprintf(stderr, "usage: %s <case> | --list\n"
                            "  runs one case; exit 0 pass, 1 fail, 77 skip. For behavioural\n"
                            "  cases IOMUX_BACKEND=<backend> picks the backend.\n",
                    argv[0]);
        list();
        return argc == 2 ? 0 : 2;
    }
    for (int i = 0; i < ncases; i++) {
        if (strcmp(cases[i].name, argv[1]) != 0)
            continue;
        current = cases[i].name;
#ifdef _WIN32
        setvbuf(stdout, NULL, _IONBF, 0); /* no line buffering in Windows' C runtime */
#else
        setvbuf(stdout, NULL, _IOLBF, 0);
#endif
        watchdog_install();
        harness_watchdog(WATCHDOG_SECONDS);
        cases[i].fn();
        harness_watchdog(0);
        printf("PASS %s\n", current);
        return 0;
    }
    fprintf(stderr, "%s: no case named '%s' (try --list)\n", argv[0], argv[1]);
    return 2;
}

/* ---- helpers ---- */

void loop_open(mux_loop_t *loop)
{
    CHECK_EQ(mux_loop_init(loop, NULL), 0);
    const char *want = getenv("IOMUX_BACKEND");
    if (want && *want)
        CHECK_STR_EQ(mux_loop_backend(loop), want);
}

void loop_close(mux_loop_t *loop)
{
    CHECK_EQ(mux_loop_close(loop), 0);
}

int loop_is(const mux_loop_t *loop, const char *name)
{
    const char *b = mux_loop_backend(loop);
    return b && strcmp(b, name) == 0;
}

void run_until(mux_loop_t *loop, const volatile int *flag, unsigned ms)
{
    uint64_t end = mono_ns() + ms * MS;
    while (!*flag) {
        CHECK_GE(mux_run(loop, MUX_RUN_ONCE), 0);
        if (!*flag && mono_ns() > end)
            harness_fail(__FILE__, __LINE__, "run_until: the awaited event came in time",
                         "timed out");
    }
}

uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void make_socketpair(int sv[2])
{
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
}

void make_pipe(int p[2])
{
    CHECK_EQ(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
}

void write_byte(int fd)
{
    char c = 'x';
    CHECK_EQ(write(fd, &c, 1), 1);
}

int drain(int fd)
{
    char buf[4096];
    int total = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            total += (int)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        CHECK(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        return total;
    }
}

long raise_nofile_limit(void)
{
#ifdef _WIN32
    return 1L << 24; /* no such limit: sockets are kernel handles */
#endif
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    return rl.rlim_cur == RLIM_INFINITY ? 1L << 30 : (long)rl.rlim_cur;
}

uint64_t prng_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

#ifdef IOMUX_TEST_COVERAGE /* scripts/coverage */
void __gcov_dump(void);
#endif

#ifdef IOMUX_TEST_COVERAGE
static void dump_and_die(int sig)
{
    __gcov_dump();
    signal(sig, SIG_DFL);
    raise(sig);
}
#endif

void child_keep_coverage_on_abort(void)
{
#ifdef IOMUX_TEST_COVERAGE
    signal(SIGABRT, dump_and_die);
#endif
}

void child_exit(int code)
{
#ifdef IOMUX_TEST_COVERAGE
    __gcov_dump();
#endif
    _exit(code);
}
