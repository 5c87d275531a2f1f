/* SPDX-License-Identifier: MIT */
/* The example programs' shared command-line pieces (cli.h). */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#ifndef _WIN32
#include <arpa/inet.h>
#include <netinet/in.h>
#endif
#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif
#ifdef _WIN32
#include <windows.h>
#endif

const char *cli_prog = "iomux";

static _Noreturn void cli_bad(const char *flag, const char *s)
{
    fprintf(stderr, "%s: bad %s '%s'\n", cli_prog, flag, s);
    exit(2);
}

unsigned long long cli_number(const char *flag, const char *s, unsigned long long lo,
                              unsigned long long hi)
{
    if (s[0] < '0' || s[0] > '9') /* strtoull would take a sign or white space */
        cli_bad(flag, s);
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || v < lo || v > hi)
        cli_bad(flag, s);
    return v;
}

double cli_seconds(const char *flag, const char *s, double lo, double hi)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) /* NaN fails the comparison too */
        cli_bad(flag, s);
    return v;
}

socklen_t cli_address(const char *addr, unsigned port, struct sockaddr_storage *ss)
{
#ifdef _WIN32
    WSADATA wsa; /* inet_pton comes before the first loop, which starts Winsock itself */
    WSAStartup(MAKEWORD(2, 2), &wsa);
#endif
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        return sizeof *v4;
    }
    if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        return sizeof *v6;
    }
    cli_bad("address", addr);
}

unsigned cli_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

void cli_address_text(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int v6 = ss->ss_family == AF_INET6;
    const void *a = v6 ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
                       : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;
    inet_ntop(ss->ss_family, a, host, sizeof host);
    snprintf(out, cap, v6 ? "[%s]:%u" : "%s:%u", host, cli_port(ss));
}

unsigned cli_steer(const char *s)
{
    if (strcmp(s, "cpu") == 0)
        return MUX_LISTEN_INCOMING_CPU;
    if (strcmp(s, "bpf") == 0)
        return MUX_LISTEN_CPU_BPF;
    cli_bad("steering (cpu or bpf)", s);
}

int cli_cpus(int *cpus, int max)
{
    int n = 0;
#ifdef __linux__
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int i = 0; i < CPU_SETSIZE && n < max; i++)
            if (CPU_ISSET(i, &allowed))
                cpus[n++] = i;
#elif defined(_WIN32) /* the process's CPUs in its processor group (64 at most) */
    DWORD_PTR proc, sys;
    if (GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys))
        for (int i = 0; i < (int)(8 * sizeof proc) && n < max; i++)
            if (proc >> i & 1)
                cpus[n++] = i;
#else
    (void)cpus;
    (void)max;
#endif
    return n;
}

int cli_pin(int cpu)
{
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
#elif defined(_WIN32)
    if (cpu >= (int)(8 * sizeof(DWORD_PTR)))
        return EINVAL;
    return SetThreadAffinityMask(GetCurrentThread(), (DWORD_PTR)1 << cpu) ? 0 : EINVAL;
#else
    (void)cpu;
    return ENOTSUP;
#endif
}

void cli_loop_error(int rc)
{
    const char *env = getenv("IOMUX_BACKEND");
    fprintf(stderr, "%s: loop: %s\n", cli_prog, mux_strerror(rc));
    if (env && *env) {
        fprintf(stderr, "%s: IOMUX_BACKEND=%s; this build has:", cli_prog, env);
        for (size_t i = 0; mux_backend_name(i); i++)
            fprintf(stderr, " %s", mux_backend_name(i));
        fprintf(stderr, "\n");
    }
}

#ifdef _WIN32
static const int cli_stop_signals[] = {SIGINT, SIGBREAK, SIGHUP};
#else
static const int cli_stop_signals[] = {SIGINT, SIGTERM};
#endif

int cli_stop_start(struct cli_stop *s, mux_loop_t *loop, mux_signal_cb cb, void *data)
{
    s->n = 0;
    for (size_t i = 0; i < sizeof cli_stop_signals / sizeof cli_stop_signals[0]; i++) {
        mux_signal_t *w = &s->w[s->n];
        int rc = mux_signal_init(w, cb, cli_stop_signals[i]);
        w->data = data;
        if (rc == 0)
            rc = mux_signal_start(loop, w);
        if (rc < 0) {
            fprintf(stderr, "%s: watching %s: %s\n", cli_prog,
                    cli_signal_name(cli_stop_signals[i]), mux_strerror(rc));
            cli_stop_stop(s, loop);
            return -1;
        }
        s->n++;
    }
    return 0;
}

void cli_stop_stop(struct cli_stop *s, mux_loop_t *loop)
{
    for (int i = 0; i < s->n; i++)
        mux_signal_stop(loop, &s->w[i]);
}

const char *cli_signal_name(int signum)
{
    switch (signum) {
    case SIGINT:
        return "SIGINT";
#ifdef _WIN32
    case SIGBREAK:
        return "SIGBREAK";
#else
    case SIGTERM:
        return "SIGTERM";
#endif
    case SIGHUP:
        return "SIGHUP";
    default:
        return "a signal";
    }
}

int cli_has_reuseport(void)
{
#ifdef _WIN32
    return 0;
#else
    return 1;
#endif
}
