/* SPDX-License-Identifier: MIT */
/* What the example programs share: the numbers and addresses of their command lines, the CPUs
 * their loops are pinned to, and the words they say when a loop cannot be had. A function that
 * refuses its input says why on stderr, under the program's name (cli_prog), and exits 2, the
 * status of a bad command line. */
#ifndef IOMUX_EXAMPLES_CLI_H
#define IOMUX_EXAMPLES_CLI_H

#include <stddef.h>

#include <iomux.h> /* struct sockaddr_storage, socklen_t (winsock2.h on Windows) */

/* The program's name in its messages ("echo-server"); set first thing in main. */
extern const char *cli_prog;

/* A decimal number in [lo, hi]: digits only, no sign, no other base. Or exits 2 naming the
 * flag ("bad port 'x'"). */
unsigned long long cli_number(const char *flag, const char *s, unsigned long long lo,
                              unsigned long long hi);
/* Seconds, a decimal fraction in [lo, hi], or exits 2. */
double cli_seconds(const char *flag, const char *s, double lo, double hi);
/* An IPv4 or IPv6 address in text and a port, as a socket address: its length, or exits 2. */
socklen_t cli_address(const char *addr, unsigned port, struct sockaddr_storage *ss);
/* A bound address as text, "ADDR:PORT" ("[ADDR]:PORT" for IPv6), into out[0 .. cap). */
void cli_address_text(const struct sockaddr_storage *ss, char *out, size_t cap);
/* The address's port. */
unsigned cli_port(const struct sockaddr_storage *ss);

/* --steer's value, "cpu" or "bpf": MUX_LISTEN_INCOMING_CPU or MUX_LISTEN_CPU_BPF; or exits 2. */
unsigned cli_steer(const char *s);
/* The CPUs this process may run on, in order, at most `max` of them: how many, 0 where they
 * cannot be read (systems other than Linux). */
int cli_cpus(int *cpus, int max);
/* Pins the calling thread to `cpu`: 0, or an errno (ENOTSUP where pinning is Linux's). */
int cli_pin(int cpu);

/* Says why mux_loop_init failed with `rc`, and which backends this build has when
 * IOMUX_BACKEND names one (the usual cause: a misspelt or unavailable backend). */
void cli_loop_error(int rc);

/* The signals a server stops on: SIGINT and SIGTERM on POSIX; on Windows the console's
 * Ctrl-C, Ctrl-Break and closing (SIGINT, SIGBREAK, SIGHUP), all it delivers to say "stop". */
#define CLI_STOP_SIGNALS_MAX 3
struct cli_stop {
    mux_signal_t w[CLI_STOP_SIGNALS_MAX];
    int n;
};
/* Starts a watcher of each on `loop`, calling `cb` with `data` in each watcher's `data`. 0, or
 * -1 said on stderr. */
int cli_stop_start(struct cli_stop *s, mux_loop_t *loop, mux_signal_cb cb, void *data);
/* Stops them all. */
void cli_stop_stop(struct cli_stop *s, mux_loop_t *loop);
/* The signal's name ("SIGINT"). */
const char *cli_signal_name(int signum);

/* Whether several loops can share a port (SO_REUSEPORT). Without it (Windows), --threads N
 * runs an acceptor: loop 0 accepts and hands the connections out through channels. */
int cli_has_reuseport(void);

#endif
