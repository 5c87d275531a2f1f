/* SPDX-License-Identifier: MIT */
/* Stand-in for libevent's internal util-internal.h, for its regression tests built by
 * tests/libevent/run-regress: the few helpers those tests use that are not library state
 * (character classes, printf formats, a weak random generator, a sleep, a connect), written
 * for iomux (regress_runner.c). */
#ifndef IOMUX_REGRESS_UTIL_INTERNAL_H
#define IOMUX_REGRESS_UTIL_INTERNAL_H

#include <event2/event-config.h>
#include <event2/util.h>

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/time.h>
#ifdef _WIN32
#include <winsock2.h>
#endif

#ifdef _WIN32 /* putenv, with which regress.c makes setenv and unsetenv of its own */
#define EVENT__HAVE_PUTENV 1
#else
#ifndef EVENT__HAVE_SETENV
#define EVENT__HAVE_SETENV 1
#endif
#ifndef EVENT__HAVE_UNSETENV
#define EVENT__HAVE_UNSETENV 1
#endif
#endif

#define EVUTIL_ASSERT(cond) assert(cond)
#define EVUTIL_FAILURE_CHECK(cond) (cond)
#define EVUTIL_UNLIKELY(p) (p)
#define EVUTIL_TOUPPER_(c) ((char)toupper((unsigned char)(c)))
#define EVUTIL_TOLOWER_(c) ((char)tolower((unsigned char)(c)))
#define EVUTIL_ISDIGIT_(c) (isdigit((unsigned char)(c)) != 0)
#define EVUTIL_ISSPACE_(c) (isspace((unsigned char)(c)) != 0)
#define EVUTIL_ISALPHA_(c) (isalpha((unsigned char)(c)) != 0)
#define EVUTIL_ISALNUM_(c) (isalnum((unsigned char)(c)) != 0)
#define EVUTIL_UPCAST(ptr, type, field) ((type *)(((char *)(ptr)) - offsetof(type, field)))
#ifdef _WIN32 /* Winsock's errors, as libevent's own util-internal.h has them there */
#define EVUTIL_ERR_RW_RETRIABLE(e) ((e) == WSAEWOULDBLOCK || (e) == WSAEINTR)
#define EVUTIL_ERR_CONNECT_RETRIABLE(e) \
    ((e) == WSAEWOULDBLOCK || (e) == WSAEINTR || (e) == WSAEINPROGRESS || (e) == WSAEINVAL)
#define EVUTIL_ERR_ACCEPT_RETRIABLE(e) EVUTIL_ERR_RW_RETRIABLE(e)
#define EVUTIL_ERR_CONNECT_REFUSED(e) ((e) == WSAECONNREFUSED)
#define EVUTIL_SHUT_RD SD_RECEIVE
#define EVUTIL_SHUT_WR SD_SEND
#define EVUTIL_SHUT_BOTH SD_BOTH
#else
#define EVUTIL_ERR_RW_RETRIABLE(e) ((e) == EINTR || (e) == EAGAIN)
#define EVUTIL_ERR_CONNECT_RETRIABLE(e) ((e) == EINTR || (e) == EINPROGRESS)
#define EVUTIL_ERR_ACCEPT_RETRIABLE(e) ((e) == EINTR || (e) == EAGAIN || (e) == ECONNABORTED)
#define EVUTIL_ERR_CONNECT_REFUSED(e) ((e) == ECONNREFUSED)
#define EVUTIL_SHUT_RD SHUT_RD
#define EVUTIL_SHUT_WR SHUT_WR
#define EVUTIL_SHUT_BOTH SHUT_RDWR
#endif

/* printf formats; libiomux-event's <event2/util.h> has some of them, libevent's none */
#ifndef EV_I64_FMT
#define EV_I64_FMT "%lld"
#endif
#ifndef EV_U64_FMT
#define EV_U64_FMT "%llu"
#endif
#ifndef EV_I64_ARG
#define EV_I64_ARG(x) ((long long)(x))
#endif
#ifndef EV_U64_ARG
#define EV_U64_ARG(x) ((unsigned long long)(x))
#endif
#ifndef EV_SOCK_FMT
#define EV_SOCK_FMT "%d"
#endif
#ifndef EV_SOCK_ARG
#define EV_SOCK_ARG(x) (x)
#endif
#ifndef EV_SIZE_FMT
#define EV_SIZE_FMT "%zu"
#endif
#ifndef EV_SSIZE_FMT
#define EV_SSIZE_FMT "%zd"
#endif
#ifndef EV_SIZE_ARG
#define EV_SIZE_ARG(x) (x)
#endif
#ifndef EV_SSIZE_ARG
#define EV_SSIZE_ARG(x) (x)
#endif

struct sockaddr;
/* Connects *fd (a new non-blocking TCP socket when *fd < 0): 1 connected, 0 in progress,
 * 2 refused, -1 another error (a socket it made is closed again and *fd set to -1). */
int evutil_socket_connect_(evutil_socket_t *fd, const struct sockaddr *sa, int socklen);

struct evutil_weakrand_state {
    ev_uint32_t seed;
};
ev_uint32_t evutil_weakrand_seed_(struct evutil_weakrand_state *state, ev_uint32_t seed);
ev_int32_t evutil_weakrand_(struct evutil_weakrand_state *state);
ev_int32_t evutil_weakrand_range_(struct evutil_weakrand_state *state, ev_int32_t top);
/* A non-blocking, close-on-exec pipe (tests/libevent/standins.c). 0, or -1. */
int evutil_make_internal_pipe_(evutil_socket_t fd[2]);
void evutil_usleep_(const struct timeval *tv);

#endif
