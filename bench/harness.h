/* SPDX-License-Identifier: MIT */
/* The benchmark harness: what every driver implements and what every study calls.
 *
 * A driver adapts one event library (or one hand-written system-call loop) to the same
 * five operations: open a loop for n slots, start and stop the read watcher of a slot,
 * run one non-blocking dispatch, close the loop. Its read callback calls bench_readable()
 * and nothing else of substance, so that every driver does the same work per event and
 * the difference between two drivers is the cost of the library alone.
 *
 * A driver registers itself from its own file (bench_register in a constructor), so
 * adding a library to the suite is adding one file under drivers/ and one line to
 * CMakeLists.txt that builds it into an executable of its own.
 */
#ifndef BENCH_HARNESS_H
#define BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

/* The kind of descriptor each slot watches. */
enum bench_transport {
    BENCH_SOCKETPAIR, /* AF_UNIX stream socketpair: watch one end, write to the other */
    BENCH_EVENTFD,    /* one semaphore eventfd per slot: half the fds of a socketpair */
};

/* What a driver is asked to watch. Owned by the harness; valid until close. */
struct bench_setup {
    size_t n;                   /* number of slots */
    const int *fd;              /* fd[i]: the descriptor to watch for reading in slot i */
    int timeouts;               /* 1: every slot also has an idle timer */
    const uint64_t *timeout_ns; /* timeout_ns[i]: slot i's idle timeout (10 to 11 s) */
};

struct bench_driver {
    const char *name;    /* unique in the suite: "raw-epoll", "iomux-poll", "libev" */
    const char *variant; /* passed to the driver's functions: a backend name, or NULL */
    int max_fd;          /* the driver cannot watch fds >= max_fd (select), or 0 */
    /* 1: edge-triggered watchers, which report a slot once per write. Only study 1 runs
     * such a driver: its callback empties the slot every round, where study 2 may leave a
     * second token behind that no edge would ever report. */
    int edge;
    /* Returns NULL when the driver can run on this machine, else a static reason. */
    const char *(*unavailable)(const char *variant);
    /* Writes "<library> <version> (<where the calls go>)" into buf and returns 0 when the
     * calls reach the library the driver claims; -1 with the reason in buf otherwise. */
    int (*identify)(const char *variant, char *buf, size_t len);
    /* Creates the loop for s->n slots, no watcher started. 0 or a negative errno. */
    int (*open)(const char *variant, const struct bench_setup *s);
    /* Starts the read watcher of slot i, and its idle timer when s->timeouts is set. */
    int (*start)(size_t i);
    /* Stops the read watcher (and timer) of slot i. */
    int (*stop)(size_t i);
    /* Runs one non-blocking pass: gathers what is ready now and runs its callbacks.
     * Returns 0 or a negative errno. */
    int (*dispatch)(void);
    /* Frees the loop; every slot has been stopped. 0 or a negative errno. */
    int (*close)(void);
};

/* Adds a driver to this executable's registry (call from a constructor). */
void bench_register(const struct bench_driver *d);
/* Returns the registered driver called `name`, or NULL. */
const struct bench_driver *bench_find(const char *name);
/* Returns the i-th registered driver, or NULL past the end. */
const struct bench_driver *bench_driver_at(size_t i);

/* The counters every callback feeds; the studies reset and check them. */
struct bench_counters {
    uint64_t callbacks;   /* read callbacks run */
    uint64_t tokens;      /* tokens (bytes, eventfd units) read by them */
    uint64_t spurious;    /* callbacks that found nothing to read: a driver bug here */
    uint64_t timer_fires; /* idle timers that fired: never expected within a run */
    uint64_t errors;      /* failed reads or writes */
    uint64_t writes_left; /* chain study: tokens still to pass on */
};
extern struct bench_counters bench_count;

/* A driver's read callback for slot i calls this: reads one token from the slot, and
 * while writes are left passes one token on to slot i + 1 (the chain study). */
void bench_readable(size_t i);
/* A driver's timer callback for slot i calls this. */
void bench_timer_fired(size_t i);

/* The transport: n slots of descriptors, created by the harness. */
struct bench_fds {
    enum bench_transport transport;
    size_t n;
    int *rfd; /* watched end */
    int *wfd; /* written end (== rfd for eventfd) */
};
extern struct bench_fds bench_fds;

/* Creates n slots; returns 0 or a negative errno, with the count reached in *made. */
int bench_fds_open(enum bench_transport t, size_t n, size_t *made);
void bench_fds_close(void);
/* Writes one token into slot i. */
void bench_put(size_t i);
/* Returns the largest fd among the watched ends. */
int bench_fds_max(void);

/* Runs dispatches until `expect` tokens have been read in all (a dispatch may hand back
 * a capped batch of events, so events are counted, not dispatches); fails the run when
 * no token arrives for seconds, which means the driver missed an event. Returns the
 * number of dispatches it took. */
uint64_t bench_drain(const struct bench_driver *d, uint64_t expect);
/* Fails the run unless exactly `expect` callbacks each read one token, with no spurious
 * callback, no failed read or write, no timer fired and no write left. */
void bench_check(const struct bench_driver *d, const char *where, uint64_t expect);

/* Raises RLIMIT_NOFILE's soft limit to the hard limit; fills before/after/hard. */
void bench_raise_nofile(long *before, long *after, long *hard);

/* Monotonic clock in nanoseconds. */
uint64_t bench_now_ns(void);

/* Prints a failure to stderr and exits with status 1. */
_Noreturn void bench_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Options shared by the studies (from the command line). */
struct bench_opts {
    const struct bench_driver *driver;
    enum bench_transport transport;
    size_t n;
    size_t active[8];
    size_t nactive;
    int timeouts[2];
    size_t ntimeouts;
    unsigned rounds;     /* poller: rounds per batch */
    unsigned batches;    /* poller: timed batches */
    unsigned warmup;     /* poller: untimed rounds first; chain: untimed iterations */
    unsigned iterations; /* chain: timed iterations */
    uint64_t writes;     /* chain: tokens passed on per iteration */
    unsigned seed;
};

int bench_study_poller(const struct bench_opts *o);
int bench_study_chain(const struct bench_opts *o);

/* Prints `"key":[v0,v1,...]` into the current result line. */
void bench_print_array(const char *key, const double *v, size_t n);
/* Prints the fields every result line starts with: study, driver, transport, n. */
void bench_print_head(const char *study, const struct bench_opts *o);

#endif
