/* SPDX-License-Identifier: MIT */
/* bench/libev-compat: libevent 2.x's <evutil.h> (<event2/util.h>) as far as libevent's
 * test/bench.c and test/bench_cascade.c use it, for building them against libev's libevent
 * 1.4 emulation, which has none of it. Each is the POSIX call libevent's own makes on Linux. */
#ifndef BENCH_LIBEV_COMPAT_EVUTIL_H
#define BENCH_LIBEV_COMPAT_EVUTIL_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

typedef int evutil_socket_t;
typedef ssize_t ev_ssize_t;
typedef intptr_t ev_intptr_t;
#define EV_SSIZE_FMT "%zd"

#define evutil_socketpair(d, t, p, sv) socketpair((d), (t), (p), (sv))
#define evutil_closesocket(s) close(s)
#define evutil_gettimeofday(tv, tz) gettimeofday((tv), (tz))
#define evutil_timersub(a, b, res) timersub((a), (b), (res))
#define evutil_timeradd(a, b, res) timeradd((a), (b), (res))
#define evutil_timerclear(tv) timerclear(tv)
#define evutil_timerisset(tv) timerisset(tv)

#endif
