/* SPDX-License-Identifier: MIT */
/* Clocks, and the fork generation that lets every loop notice a fork by itself. */
#include <pthread.h>
#include <time.h>

#include "internal.h"

int64_t mux__test_wall_offset;
unsigned mux__fork_gen;

uint64_t mux__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t mux__wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + mux__test_wall_offset;
}
