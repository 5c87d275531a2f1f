/* SPDX-License-Identifier: MIT */
/* Fault injection for the test build (tests/fault/README.md).
 *
 * The fault variant of the library (libiomux_fault.a, made from the test build's static
 * library by renaming its references: `malloc` becomes `mux_fault_malloc`, and so on for
 * every point below) calls these wrappers instead of the C library. Each wrapper counts its
 * calls and, when armed for it, makes one call (or every call from one on) fail the way
 * the real function fails: -1 and errno, NULL, MAP_FAILED, or a negative errno for
 * liburing. Nothing here is in the release library.
 *
 * The counters live in memory shared across fork, so a case that forks counts the calls
 * of its child too (such a case waits for the child before it goes on, so the order of
 * calls stays fixed).
 */
#ifndef IOMUX_TEST_FAULT_H
#define IOMUX_TEST_FAULT_H

enum fault_mode {
    FAULT_ONCE,   /* the Nth call fails, the rest succeed */
    FAULT_STICKY, /* every call from the Nth on fails */
};

/* Maps the shared counters; before it, no call fails and none is counted. Returns 0 or
 * -errno. */
int fault_init(void);
/* The number of injection points, and the name and default errno of point i. */
int fault_npoints(void);
const char *fault_name(int i);
int fault_default_errno(int i);
/* Whether point i may fail with EINTR in reality (a sweep may inject EINTR there). */
int fault_eintr_possible(int i);
/* -1 when no point has that name. */
int fault_lookup(const char *name);

/* Zeroes every counter and disarms. */
void fault_reset(void);
/* Arms point `i` to fail its `nth` call (1-based) with `err`. */
void fault_arm(int i, unsigned long nth, int err, enum fault_mode mode);
void fault_disarm(void);
/* Calls counted at point i since the last reset; failures injected since the last arm. */
unsigned long fault_calls(int i);
unsigned long fault_fired(void);

#endif
