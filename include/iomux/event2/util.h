/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: the portable types and socket helpers of <event2/util.h>.
 * Source-compatible with libevent 2.1; the functions live in libiomux-event. */
#ifndef IOMUX_EVENT2_UTIL_H_INCLUDED_
#define IOMUX_EVENT2_UTIL_H_INCLUDED_

#include <event2/visibility.h>

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
#include <sys/time.h> /* struct timezone */
#else
#include <sys/time.h>
#include <sys/socket.h>
#include <netdb.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t ev_uint64_t;
typedef int64_t ev_int64_t;
typedef uint32_t ev_uint32_t;
typedef int32_t ev_int32_t;
typedef uint16_t ev_uint16_t;
typedef int16_t ev_int16_t;
typedef uint8_t ev_uint8_t;
typedef int8_t ev_int8_t;
typedef uintptr_t ev_uintptr_t;
typedef intptr_t ev_intptr_t;
typedef ssize_t ev_ssize_t;
#ifdef _WIN32
typedef int64_t ev_off_t; /* as libevent has it there: Windows' off_t is 32 bits */
#else
typedef off_t ev_off_t;
#endif
typedef socklen_t ev_socklen_t;

#define EV_UINT64_MAX UINT64_MAX
#define EV_INT64_MAX INT64_MAX
#define EV_INT64_MIN INT64_MIN
#define EV_UINT32_MAX UINT32_MAX
#define EV_INT32_MAX INT32_MAX
#define EV_INT32_MIN INT32_MIN
#define EV_UINT16_MAX UINT16_MAX
#define EV_INT16_MAX INT16_MAX
#define EV_INT16_MIN INT16_MIN
#define EV_UINT8_MAX UINT8_MAX
#define EV_INT8_MAX INT8_MAX
#define EV_INT8_MIN INT8_MIN
#define EV_SIZE_MAX SIZE_MAX
#define EV_SSIZE_MAX ((ev_ssize_t)(SIZE_MAX >> 1))
#define EV_SSIZE_MIN ((-EV_SSIZE_MAX) - 1)

#define EV_SIZE_FMT "%zu"
#define EV_SSIZE_FMT "%zd"
#define EV_SIZE_ARG(x) (x)
#define EV_SSIZE_ARG(x) (x)
#define EV_I64_FMT "%lld"
#define EV_U64_FMT "%llu"
#define EV_I64_ARG(x) ((long long)(x))
#define EV_U64_ARG(x) ((unsigned long long)(x))

/* A socket: a file descriptor on POSIX systems, a SOCKET's value on Windows (as libevent's). */
#ifdef _WIN32
#define evutil_socket_t intptr_t
#else
typedef int evutil_socket_t;
#endif
#define EVUTIL_INVALID_SOCKET (-1)

#define evutil_offsetof(type, field) offsetof(type, field)

/* Like socketpair(2), AF_UNIX (AF_LOCAL) only; on Windows, as libevent there, a connected
 * pair of loopback TCP sockets (for AF_UNIX and AF_INET alike). Returns 0, or -1 with errno
 * set (and the socket error, EVUTIL_SOCKET_ERROR). */
EVENT2_EXPORT_SYMBOL
int evutil_socketpair(int d, int type, int protocol, evutil_socket_t sv[2]);
/* Sets O_NONBLOCK. Returns 0, or -1 with errno set. */
EVENT2_EXPORT_SYMBOL
int evutil_make_socket_nonblocking(evutil_socket_t sock);
/* Sets FD_CLOEXEC. Returns 0, or -1 with errno set. */
EVENT2_EXPORT_SYMBOL
int evutil_make_socket_closeonexec(evutil_socket_t sock);
/* SO_REUSEADDR (and SO_REUSEPORT for the _port variant). Returns 0, or -1. */
EVENT2_EXPORT_SYMBOL
int evutil_make_listen_socket_reuseable(evutil_socket_t sock);
EVENT2_EXPORT_SYMBOL
int evutil_make_listen_socket_reuseable_port(evutil_socket_t sock);
EVENT2_EXPORT_SYMBOL
int evutil_make_listen_socket_ipv6only(evutil_socket_t sock);
/* TCP_DEFER_ACCEPT where the system has it. Returns 0, or -1. */
EVENT2_EXPORT_SYMBOL
int evutil_make_tcp_listen_socket_deferred(evutil_socket_t sock);
/* close(2). Returns 0, or -1 with errno set. */
EVENT2_EXPORT_SYMBOL
int evutil_closesocket(evutil_socket_t sock);
#define EVUTIL_CLOSESOCKET(s) evutil_closesocket(s)

#ifdef _WIN32 /* Winsock's own errors, as libevent has them there */
#define EVUTIL_SOCKET_ERROR() (WSAGetLastError())
#define EVUTIL_SET_SOCKET_ERROR(errcode) \
    do {                                 \
        WSASetLastError(errcode);        \
    } while (0)
#define evutil_socket_geterror(sock) (WSAGetLastError())
/* A static description of a Winsock error (WSAEWOULDBLOCK, ...). */
EVENT2_EXPORT_SYMBOL
const char *evutil_socket_error_to_string(int errcode);
#else
#define EVUTIL_SOCKET_ERROR() (errno)
#define EVUTIL_SET_SOCKET_ERROR(errcode) \
    do {                                 \
        errno = (errcode);               \
    } while (0)
#define evutil_socket_geterror(sock) (errno)
#define evutil_socket_error_to_string(errcode) (strerror(errcode))
#endif

#define evutil_timeradd(tvp, uvp, vvp)                         \
    do {                                                       \
        (vvp)->tv_sec = (tvp)->tv_sec + (uvp)->tv_sec;         \
        (vvp)->tv_usec = (tvp)->tv_usec + (uvp)->tv_usec;      \
        if ((vvp)->tv_usec >= 1000000) {                       \
            (vvp)->tv_sec++;                                   \
            (vvp)->tv_usec -= 1000000;                         \
        }                                                      \
    } while (0)
#define evutil_timersub(tvp, uvp, vvp)                         \
    do {                                                       \
        (vvp)->tv_sec = (tvp)->tv_sec - (uvp)->tv_sec;         \
        (vvp)->tv_usec = (tvp)->tv_usec - (uvp)->tv_usec;      \
        if ((vvp)->tv_usec < 0) {                              \
            (vvp)->tv_sec--;                                   \
            (vvp)->tv_usec += 1000000;                         \
        }                                                      \
    } while (0)
#define evutil_timerclear(tvp) ((tvp)->tv_sec = (tvp)->tv_usec = 0)
#define evutil_timerisset(tvp) ((tvp)->tv_sec || (tvp)->tv_usec)
#define evutil_timercmp(tvp, uvp, cmp)                                                    \
    (((tvp)->tv_sec == (uvp)->tv_sec) ? ((tvp)->tv_usec cmp(uvp)->tv_usec)                 \
                                      : ((tvp)->tv_sec cmp(uvp)->tv_sec))

/* gettimeofday(2). Returns 0, or -1. */
EVENT2_EXPORT_SYMBOL
int evutil_gettimeofday(struct timeval *tv, struct timezone *tz);

/* Monotonic timers, as libevent 2.1 has them. A timer configured without flags reads the
 * cheapest monotonic clock (CLOCK_MONOTONIC_COARSE where there is one: Linux, a tick's
 * resolution), with EV_MONOT_PRECISE the precise one (CLOCK_MONOTONIC: what libevent's
 * EVENT_PRECISE_TIMER gives a base, and what every base of libiomux-event has), with
 * EV_MONOT_FALLBACK gettimeofday kept from going back. */
struct evutil_monotonic_timer;
#define EV_MONOT_PRECISE  1
#define EV_MONOT_FALLBACK 2
/* A timer to configure, or NULL. */
EVENT2_EXPORT_SYMBOL
struct evutil_monotonic_timer *evutil_monotonic_timer_new(void);
EVENT2_EXPORT_SYMBOL
void evutil_monotonic_timer_free(struct evutil_monotonic_timer *timer);
/* Returns 0, or -1 (NULL timer, unknown flags). */
EVENT2_EXPORT_SYMBOL
int evutil_configure_monotonic_time(struct evutil_monotonic_timer *timer, int flags);
/* The timer's time, which never goes back. Returns 0, or -1 (NULL arguments). */
EVENT2_EXPORT_SYMBOL
int evutil_gettime_monotonic(struct evutil_monotonic_timer *timer, struct timeval *tp);

EVENT2_EXPORT_SYMBOL
ev_int64_t evutil_strtoll(const char *s, char **endptr, int base);
EVENT2_EXPORT_SYMBOL
int evutil_snprintf(char *buf, size_t buflen, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
EVENT2_EXPORT_SYMBOL
int evutil_vsnprintf(char *buf, size_t buflen, const char *format, va_list ap)
    __attribute__((format(printf, 3, 0)));

EVENT2_EXPORT_SYMBOL
const char *evutil_inet_ntop(int af, const void *src, char *dst, size_t len);
EVENT2_EXPORT_SYMBOL
int evutil_inet_pton(int af, const char *src, void *dst);
/* Parses "1.2.3.4", "1.2.3.4:80", "[::1]", "[::1]:80" (and "::1"). Returns 0, or -1. */
EVENT2_EXPORT_SYMBOL
int evutil_parse_sockaddr_port(const char *str, struct sockaddr *out, int *outlen);
/* Orders addresses by family, address, then (if include_port) port. */
EVENT2_EXPORT_SYMBOL
int evutil_sockaddr_cmp(const struct sockaddr *sa1, const struct sockaddr *sa2, int include_port);
/* ASCII-only, locale-independent case-insensitive comparisons. */
EVENT2_EXPORT_SYMBOL
int evutil_ascii_strcasecmp(const char *str1, const char *str2);
EVENT2_EXPORT_SYMBOL
int evutil_ascii_strncasecmp(const char *str1, const char *str2, size_t n);

/* getaddrinfo(3) under libevent's names. */
#define evutil_addrinfo addrinfo
#define EVUTIL_AI_PASSIVE AI_PASSIVE
#define EVUTIL_AI_CANONNAME AI_CANONNAME
#define EVUTIL_AI_NUMERICHOST AI_NUMERICHOST
#define EVUTIL_AI_NUMERICSERV AI_NUMERICSERV
#define EVUTIL_AI_V4MAPPED AI_V4MAPPED
#define EVUTIL_AI_ALL AI_ALL
#define EVUTIL_AI_ADDRCONFIG AI_ADDRCONFIG
#define EVUTIL_EAI_FAIL EAI_FAIL
#define EVUTIL_EAI_NONAME EAI_NONAME
EVENT2_EXPORT_SYMBOL
int evutil_getaddrinfo(const char *nodename, const char *servname,
                       const struct evutil_addrinfo *hints_in, struct evutil_addrinfo **res);
EVENT2_EXPORT_SYMBOL
void evutil_freeaddrinfo(struct evutil_addrinfo *ai);
EVENT2_EXPORT_SYMBOL
const char *evutil_gai_strerror(int err);

/* Random bytes from the system's generator (getrandom / arc4random / /dev/urandom). */
EVENT2_EXPORT_SYMBOL
void evutil_secure_rng_get_bytes(void *buf, size_t n);
EVENT2_EXPORT_SYMBOL
int evutil_secure_rng_init(void);
EVENT2_EXPORT_SYMBOL
void evutil_secure_rng_add_bytes(const char *dat, size_t datlen);

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_UTIL_H_INCLUDED_ */
