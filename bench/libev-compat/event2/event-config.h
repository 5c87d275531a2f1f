/* SPDX-License-Identifier: MIT */
/* bench/libev-compat: the few <event2/event-config.h> macros that libevent's test/bench.c and
 * test/bench_cascade.c test, for building them against libev's libevent emulation (which has
 * no event2/ headers). Linux only, as the benchmark suite is. */
#ifndef BENCH_LIBEV_COMPAT_EVENT_CONFIG_H
#define BENCH_LIBEV_COMPAT_EVENT_CONFIG_H

#define EVENT__HAVE_SYS_TIME_H 1
#define EVENT__HAVE_UNISTD_H 1
#define EVENT__HAVE_SETRLIMIT 1

#endif
