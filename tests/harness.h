/* SPDX-License-Identifier: MIT */
/* A very small test harness: one executable holds every case; `iomux-tests <case>` runs one
 * case in its own process and exits 0 (pass), 1 (fail) or 77 (skip).
 *
 * Three ways to declare a case, each at the start of a line (tests/CMakeLists.txt finds them
 * with a regular expression, so keep the form `KIND(name) {` on one line):
 *
 *   TEST(name)         behavioural: registered once per backend as `<backend>.<name>`, run
 *                      with IOMUX_BACKEND=<backend> in the environment.
 *   THREAD_TEST(name)  behavioural and uses threads: as TEST, and labelled `thread` so that
 *                      the ThreadSanitizer build (`make test-tsan`) runs it.
 *   CORE_TEST(name)    independent of the backend (struct sizes, version, heap, errors,
 *                      backend registry): registered once as `core.<name>`.
 *
 * A failing CHECK prints file:line, the expression and both values, and exits 1, from
 * wherever it is (a callback included). A watchdog (alarm) fails a case that hangs.
 */
#ifndef IOMUX_TEST_HARNESS_H
#define IOMUX_TEST_HARNESS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iomux.h"

enum { HARNESS_BACKEND, HARNESS_THREAD, HARNESS_CORE };

void harness_register(const char *name, void (*fn)(void), int kind);
_Noreturn void harness_fail(const char *file, int line, const char *expr, const char *detail);
_Noreturn void harness_fail_cmp(const char *file, int line, const char *a, const char *op,
                                const char *b, long long va, long long vb);
_Noreturn void harness_fail_str(const char *file, int line, const char *a, const char *b,
                                const char *va, const char *vb);
_Noreturn void harness_skip(const char *reason);
unsigned harness_watchdog(unsigned seconds); /* re-arms the per-case alarm (0: off) */
/* Ends a forked child with _exit(code), after writing its coverage counts in a build with
 * --coverage (which _exit alone would drop). */
_Noreturn void child_exit(int code);
/* In a forked child that is to end by abort(): its coverage counts are written first, in a
 * build with --coverage (nothing otherwise). */
void child_keep_coverage_on_abort(void);

#define HARNESS_CASE_(name, kind)                                                          \
    static void test_##name(void);                                                         \
    __attribute__((constructor)) static void register_##name(void)                         \
    {                                                                                      \
        harness_register(#name, test_##name, kind);                                        \
    }                                                                                      \
    static void test_##name(void)

#define TEST(name) HARNESS_CASE_(name, HARNESS_BACKEND)
#define THREAD_TEST(name) HARNESS_CASE_(name, HARNESS_THREAD)
#define CORE_TEST(name) HARNESS_CASE_(name, HARNESS_CORE)

#define CHECK(e)                                                                           \
    do {                                                                                   \
        if (!(e))                                                                          \
            harness_fail(__FILE__, __LINE__, #e, NULL);                                    \
    } while (0)

/* Compares two integers (or enums) as long long; prints both values when it fails. */
#define CHECK_CMP(a, op, b)                                                                \
    do {                                                                                   \
        long long chk_a_ = (long long)(a), chk_b_ = (long long)(b);                        \
        if (!(chk_a_ op chk_b_))                                                           \
            harness_fail_cmp(__FILE__, __LINE__, #a, #op, #b, chk_a_, chk_b_);             \
    } while (0)
#define CHECK_EQ(a, b) CHECK_CMP(a, ==, b)
#define CHECK_NE(a, b) CHECK_CMP(a, !=, b)
#define CHECK_GE(a, b) CHECK_CMP(a, >=, b)
#define CHECK_LE(a, b) CHECK_CMP(a, <=, b)
#define CHECK_GT(a, b) CHECK_CMP(a, >, b)
#define CHECK_LT(a, b) CHECK_CMP(a, <, b)

#define CHECK_STR_EQ(a, b)                                                                 \
    do {                                                                                   \
        const char *chk_a_ = (a), *chk_b_ = (b);                                           \
        if (chk_a_ == NULL || chk_b_ == NULL || strcmp(chk_a_, chk_b_) != 0)               \
            harness_fail_str(__FILE__, __LINE__, #a, #b, chk_a_, chk_b_);                  \
    } while (0)

#define SKIP(reason) harness_skip(reason)

/* ---- helpers shared by the cases ---- */

#define MS 1000000ull /* nanoseconds in a millisecond */

/* mux_loop_init with no options; checks that the loop got IOMUX_BACKEND when it is set. */
void loop_open(mux_loop_t *loop);
/* Closes the loop and checks that it closes clean (0: nothing left active). */
void loop_close(mux_loop_t *loop);
/* 1 when the loop's backend is `name`. */
int loop_is(const mux_loop_t *loop, const char *name);
/* Runs MUX_RUN_ONCE until *flag becomes nonzero; fails after `ms` milliseconds. */
void run_until(mux_loop_t *loop, const volatile int *flag, unsigned ms);

uint64_t mono_ns(void);  /* CLOCK_MONOTONIC */
int64_t wall_ns(void);   /* CLOCK_REALTIME */
void sleep_ms(unsigned ms);
void make_socketpair(int sv[2]); /* AF_UNIX stream, both ends non-blocking */
void make_pipe(int p[2]);        /* both ends non-blocking */
void write_byte(int fd);
int drain(int fd); /* reads until EAGAIN, returns the number of bytes read */
/* Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit. */
long raise_nofile_limit(void);
/* Small deterministic PRNG (xorshift64*). */
uint64_t prng_next(uint64_t *state);

#endif
