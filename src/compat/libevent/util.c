/* SPDX-License-Identifier: MIT */
/* libiomux-event: evutil's socket and time helpers, logging, allocation and the version. */
#include "event_internal.h"

#include <event2/thread.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#ifndef _WIN32
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>
#endif

#include "sys.h"

/* ---- logging ---- */

static event_log_cb log_cb;
static event_fatal_cb fatal_cb;

static void vlog(int severity, const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    if (log_cb) {
        log_cb(severity, buf);
        return;
    }
    static const char *const names[] = {"debug", "msg", "warn", "err"};
    fprintf(stderr, "[%s] %s\n", names[severity & 3], buf);
}

void evx_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(EVENT_LOG_WARN, fmt, ap);
    va_end(ap);
}

void evx_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(EVENT_LOG_ERR, fmt, ap);
    va_end(ap);
    if (fatal_cb)
        fatal_cb(EINVAL);
    abort();
}

EVX_EXPORT void event_set_log_callback(event_log_cb cb)
{
    log_cb = cb;
}

EVX_EXPORT void event_set_fatal_callback(event_fatal_cb cb)
{
    fatal_cb = cb;
}

EVX_EXPORT void event_enable_debug_logging(ev_uint32_t which)
{
    /* libevent's debug messages tell what happens inside it; iomux has none to give. */
    (void)which;
}

EVX_EXPORT void event_enable_debug_mode(void)
{
    /* libevent's debug mode tracks every assigned event in a table to catch misuse. Here
     * every event carries that mark itself (ev_magic_), so the checks are always on. */
}

/* ---- allocation ---- */

static void *(*user_malloc)(size_t);
static void *(*user_realloc)(void *, size_t);
static void (*user_free)(void *);

EVX_EXPORT void event_set_mem_functions(void *(*malloc_fn)(size_t),
                                        void *(*realloc_fn)(void *, size_t),
                                        void (*free_fn)(void *))
{
    user_malloc = malloc_fn;
    user_realloc = realloc_fn;
    user_free = free_fn;
}

void *evx_malloc(size_t n)
{
    return user_malloc ? user_malloc(n) : malloc(n);
}

void *evx_calloc(size_t n, size_t size)
{
    if (!user_malloc)
        return calloc(n, size);
    if (size && n > (size_t)-1 / size)
        return NULL;
    void *p = user_malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void evx_free(void *p)
{
    if (!p)
        return;
    if (user_free)
        user_free(p);
    else
        free(p);
}

EVX_EXPORT void libevent_global_shutdown(void)
{
    evx_current_base = NULL;
    evx_chain_cache_clear();
}

/* ---- version and threads ---- */

EVX_EXPORT const char *event_get_version(void)
{
    return LIBEVENT_VERSION;
}

EVX_EXPORT ev_uint32_t event_get_version_number(void)
{
    return LIBEVENT_VERSION_NUMBER;
}

EVX_EXPORT int evthread_use_pthreads(void)
{
    return 0;
}

EVX_EXPORT void evthread_enable_lock_debugging(void)
{
}

EVX_EXPORT void evthread_enable_lock_debuging(void)
{
}

EVX_EXPORT int evthread_make_base_notifiable(struct event_base *base)
{
    return base ? 0 : -1;
}

/* ---- sockets ---- */

EVX_EXPORT int evutil_socketpair(int family, int type, int protocol, evutil_socket_t sv[2])
{
    return evx_sys_socketpair(family, type, protocol, sv);
}

EVX_EXPORT int evutil_make_socket_nonblocking(evutil_socket_t fd)
{
    if (evx_sys_nonblock(fd) < 0) {
        evx_warn("fcntl(%d, F_SETFL): %s", (int)fd, strerror(errno));
        return -1;
    }
    return 0;
}

EVX_EXPORT int evutil_make_socket_closeonexec(evutil_socket_t fd)
{
    if (evx_sys_cloexec(fd) < 0) {
        evx_warn("fcntl(%d, F_SETFD): %s", (int)fd, strerror(errno));
        return -1;
    }
    return 0;
}

static int set_int_opt(evutil_socket_t fd, int level, int name)
{
    return evx_sys_opt_on(fd, level, name);
}

EVX_EXPORT int evutil_make_listen_socket_reuseable(evutil_socket_t fd)
{
    return evx_sys_reuseaddr(fd);
}

EVX_EXPORT int evutil_make_listen_socket_reuseable_port(evutil_socket_t fd)
{
#ifdef SO_REUSEPORT
    return set_int_opt(fd, SOL_SOCKET, SO_REUSEPORT);
#else
    (void)fd;
    return 0;
#endif
}

EVX_EXPORT int evutil_make_listen_socket_ipv6only(evutil_socket_t fd)
{
    return set_int_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY);
}

EVX_EXPORT int evutil_make_tcp_listen_socket_deferred(evutil_socket_t fd)
{
#ifdef TCP_DEFER_ACCEPT
    return set_int_opt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT);
#else
    (void)fd;
    return 0;
#endif
}

EVX_EXPORT int evutil_closesocket(evutil_socket_t fd)
{
    return evx_sys_close(fd);
}

EVX_EXPORT int evutil_gettimeofday(struct timeval *tv, struct timezone *tz)
{
    (void)tz;
    return evx_sys_gettimeofday(tv);
}

/* ---- monotonic timers ---- */

struct evutil_monotonic_timer {
    int fallback;         /* gettimeofday, kept from going back */
    int coarse;           /* otherwise: the coarse monotonic clock, or the precise one */
    struct timeval last;  /* fallback: the last time handed out */
    struct timeval shift; /* fallback: what the wall clock went back by, added */
};

EVX_EXPORT struct evutil_monotonic_timer *evutil_monotonic_timer_new(void)
{
    return evx_calloc(1, sizeof(struct evutil_monotonic_timer));
}

EVX_EXPORT void evutil_monotonic_timer_free(struct evutil_monotonic_timer *timer)
{
    evx_free(timer);
}

/* As libevent on Linux and Windows: the coarse clock unless asked to be precise, for its
 * price (a coarse read takes no hardware clock). */
EVX_EXPORT int evutil_configure_monotonic_time(struct evutil_monotonic_timer *timer, int flags)
{
    if (!timer || (flags & ~(EV_MONOT_PRECISE | EV_MONOT_FALLBACK)))
        return -1;
    memset(timer, 0, sizeof *timer);
    timer->fallback = (flags & EV_MONOT_FALLBACK) != 0;
    timer->coarse = !(flags & EV_MONOT_PRECISE) && evx_sys_mono_coarse_ok();
    return 0;
}

EVX_EXPORT int evutil_gettime_monotonic(struct evutil_monotonic_timer *timer, struct timeval *tp)
{
    if (!timer || !tp)
        return -1;
    if (!timer->fallback) {
        uint64_t ns = evx_sys_mono_ns(timer->coarse);
        if (!ns)
            return -1;
        tp->tv_sec = (time_t)(ns / 1000000000u);
        tp->tv_usec = (long)(ns % 1000000000u / 1000u);
        return 0;
    }
    struct timeval now;
    if (gettimeofday(&now, NULL) != 0)
        return -1;
    evutil_timeradd(&now, &timer->shift, &now);
    if (evutil_timercmp(&now, &timer->last, <)) { /* the wall clock was set back */
        struct timeval back;
        evutil_timersub(&timer->last, &now, &back);
        evutil_timeradd(&timer->shift, &back, &timer->shift);
        now = timer->last;
    }
    timer->last = now;
    *tp = now;
    return 0;
}

EVX_EXPORT ev_int64_t evutil_strtoll(const char *s, char **endptr, int base)
{
    return strtoll(s, endptr, base);
}

EVX_EXPORT int evutil_vsnprintf(char *buf, size_t buflen, const char *format, va_list ap)
{
    if (!buflen)
        return 0;
    int r = vsnprintf(buf, buflen, format, ap);
    buf[buflen - 1] = '\0';
    return r;
}

EVX_EXPORT int evutil_snprintf(char *buf, size_t buflen, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int r = evutil_vsnprintf(buf, buflen, format, ap);
    va_end(ap);
    return r;
}

EVX_EXPORT const char *evutil_inet_ntop(int af, const void *src, char *dst, size_t len)
{
    return inet_ntop(af, src, dst, (socklen_t)len);
}

EVX_EXPORT int evutil_inet_pton(int af, const char *src, void *dst)
{
    return inet_pton(af, src, dst);
}

EVX_EXPORT int evutil_parse_sockaddr_port(const char *str, struct sockaddr *out, int *outlen)
{
    char host[128];
    const char *port = NULL, *end;
    if (!str || !out || !outlen)
        return -1;
    if (*str == '[') { /* [v6] or [v6]:port */
        if (!(end = strchr(str, ']')))
            return -1;
        if (end[1] == ':')
            port = end + 2;
        else if (end[1])
            return -1;
        str++;
    } else if ((end = strchr(str, ':')) && !strchr(end + 1, ':')) { /* v4:port */
        port = end + 1;
    } else { /* v4, or a bare v6 address */
        end = str + strlen(str);
    }
    if ((size_t)(end - str) >= sizeof host)
        return -1;
    memcpy(host, str, (size_t)(end - str));
    host[end - str] = '\0';
    long p = 0;
    if (port) { /* a port that is written must be one a peer can have: 1 to 65535 */
        char *stop;
        p = strtol(port, &stop, 10);
        if (!*port || *stop || p < 1 || p > 65535)
            return -1;
    }
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)p)};
    struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
    const void *sa;
    int len;
    if (inet_pton(AF_INET, host, &v4.sin_addr) == 1)
        sa = &v4, len = sizeof v4;
    else if (inet_pton(AF_INET6, host, &v6.sin6_addr) == 1)
        sa = &v6, len = sizeof v6;
    else
        return -1;
    if (*outlen < len)
        return -1;
    memset(out, 0, (size_t)*outlen);
    memcpy(out, sa, (size_t)len);
    *outlen = len;
    return 0;
}

EVX_EXPORT int evutil_sockaddr_cmp(const struct sockaddr *a, const struct sockaddr *b,
                                   int include_port)
{
    if (a->sa_family != b->sa_family)
        return a->sa_family < b->sa_family ? -1 : 1;
    int r = 0;
    if (a->sa_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        uint32_t ax = ntohl(x->sin_addr.s_addr), ay = ntohl(y->sin_addr.s_addr);
        r = ax < ay ? -1 : ax > ay;
        if (!r && include_port)
            r = ntohs(x->sin_port) < ntohs(y->sin_port) ? -1
                                                        : ntohs(x->sin_port) > ntohs(y->sin_port);
    } else if (a->sa_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        r = memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr);
        r = r < 0 ? -1 : r > 0;
        if (!r && include_port)
            r = ntohs(x->sin6_port) < ntohs(y->sin6_port)
                    ? -1
                    : ntohs(x->sin6_port) > ntohs(y->sin6_port);
    }
    return r;
}

static int ascii_lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

EVX_EXPORT int evutil_ascii_strncasecmp(const char *s1, const char *s2, size_t n)
{
    for (; n; n--, s1++, s2++) {
        int c1 = ascii_lower((unsigned char)*s1), c2 = ascii_lower((unsigned char)*s2);
        if (c1 != c2)
            return c1 < c2 ? -1 : 1;
        if (!c1)
            return 0;
    }
    return 0;
}

EVX_EXPORT int evutil_ascii_strcasecmp(const char *s1, const char *s2)
{
    return evutil_ascii_strncasecmp(s1, s2, (size_t)-1);
}

/* Fills in a result's protocol from its socket type, and its socket type from its protocol,
 * where the system left them 0, as libevent's getaddrinfo does. */
static void evx_ai_infer(struct evutil_addrinfo *ai)
{
    for (; ai; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        if (ai->ai_socktype == 0)
            ai->ai_socktype = ai->ai_protocol == IPPROTO_TCP   ? SOCK_STREAM
                              : ai->ai_protocol == IPPROTO_UDP ? SOCK_DGRAM
                                                               : 0;
        if (ai->ai_protocol == 0)
            ai->ai_protocol = ai->ai_socktype == SOCK_STREAM  ? IPPROTO_TCP
                              : ai->ai_socktype == SOCK_DGRAM ? IPPROTO_UDP
                                                              : 0;
    }
}

#ifdef _WIN32
/* Windows' getaddrinfo gives a numeric host with neither socket type nor protocol asked for
 * as one result of no socket type, where libevent (and Linux) give one per socket type: TCP
 * and UDP. Then the system is asked once for each, and the results are copied into one list
 * of this library's own (each node one allocation: the node, its address, its name), which
 * evutil_freeaddrinfo frees; a node of the system's is never in it. */
#define EVX_AI_OURS 0x40000000 /* in ai_flags: a node of the copied list */

static struct evutil_addrinfo *evx_ai_copy(const struct evutil_addrinfo *ai,
                                           struct evutil_addrinfo ***tail)
{
    for (; ai; ai = ai->ai_next) {
        size_t name = ai->ai_canonname ? strlen(ai->ai_canonname) + 1 : 0;
        struct evutil_addrinfo *c = malloc(sizeof *c + ai->ai_addrlen + name);
        if (!c)
            return NULL;
        *c = *ai;
        c->ai_flags |= EVX_AI_OURS;
        c->ai_addr = (struct sockaddr *)(c + 1);
        memcpy(c->ai_addr, ai->ai_addr, ai->ai_addrlen);
        c->ai_canonname = name ? (char *)c->ai_addr + ai->ai_addrlen : NULL;
        if (name)
            memcpy(c->ai_canonname, ai->ai_canonname, name);
        c->ai_next = NULL;
        **tail = c;
        *tail = &c->ai_next;
    }
    return (struct evutil_addrinfo *)1; /* not NULL: done */
}

static int evx_ai_each_type(const char *node, const char *serv,
                            const struct evutil_addrinfo *hints, struct evutil_addrinfo **res)
{
    static const int types[2][2] = {{SOCK_STREAM, IPPROTO_TCP}, {SOCK_DGRAM, IPPROTO_UDP}};
    struct evutil_addrinfo *out = NULL, **tail = &out;
    int err = 0;
    for (int i = 0; i < 2 && err == 0; i++) {
        struct evutil_addrinfo h = *hints, *one = NULL;
        h.ai_socktype = types[i][0];
        h.ai_protocol = types[i][1];
        err = getaddrinfo(node, serv, &h, &one);
        if (err == 0) {
            evx_ai_infer(one);
            if (!evx_ai_copy(one, &tail))
                err = EAI_MEMORY;
            freeaddrinfo(one);
        }
    }
    if (err != 0) {
        evutil_freeaddrinfo(out);
        out = NULL;
    }
    *res = out;
    return err;
}
#endif

/* The system's getaddrinfo, with the protocols and socket types libevent's gives. */
EVX_EXPORT int evutil_getaddrinfo(const char *node, const char *serv,
                                  const struct evutil_addrinfo *hints, struct evutil_addrinfo **res)
{
#ifdef _WIN32
    struct evutil_addrinfo none;
    memset(&none, 0, sizeof none);
    const struct evutil_addrinfo *want = hints ? hints : &none;
    if (node && want->ai_socktype == 0 && want->ai_protocol == 0) {
        struct evutil_addrinfo h = *want, *probe = NULL;
        h.ai_flags |= AI_NUMERICHOST;
        if (getaddrinfo(node, serv, &h, &probe) == 0) { /* a numeric host */
            freeaddrinfo(probe);
            return evx_ai_each_type(node, serv, want, res);
        }
    }
#endif
    int err = getaddrinfo(node, serv, hints, res);
    if (err == 0)
        evx_ai_infer(*res);
    return err;
}

EVX_EXPORT void evutil_freeaddrinfo(struct evutil_addrinfo *ai)
{
#ifdef _WIN32
    if (ai && (ai->ai_flags & EVX_AI_OURS)) {
        while (ai) {
            struct evutil_addrinfo *next = ai->ai_next;
            free(ai);
            ai = next;
        }
        return;
    }
#endif
    freeaddrinfo(ai);
}

EVX_EXPORT const char *evutil_gai_strerror(int err)
{
    return gai_strerror(err);
}

#ifdef _WIN32
EVX_EXPORT const char *evutil_socket_error_to_string(int errcode)
{
    /* Winsock's codes, by name: the system's own text would be in the machine's language and
     * need freeing. */
    switch (errcode) {
    case 0:
        return "no error";
    case WSAEWOULDBLOCK:
        return "WSAEWOULDBLOCK: the operation would block";
    case WSAEINTR:
        return "WSAEINTR: interrupted";
    case WSAECONNRESET:
        return "WSAECONNRESET: connection reset by peer";
    case WSAECONNABORTED:
        return "WSAECONNABORTED: connection aborted";
    case WSAECONNREFUSED:
        return "WSAECONNREFUSED: connection refused";
    case WSAENOTCONN:
        return "WSAENOTCONN: not connected";
    case WSAENOTSOCK:
        return "WSAENOTSOCK: not a socket";
    case WSAETIMEDOUT:
        return "WSAETIMEDOUT: timed out";
    case WSAEADDRINUSE:
        return "WSAEADDRINUSE: address in use";
    case WSAEINVAL:
        return "WSAEINVAL: invalid argument";
    case WSAEMFILE:
        return "WSAEMFILE: too many open sockets";
    case WSAENOBUFS:
        return "WSAENOBUFS: no buffer space";
    case WSAEAFNOSUPPORT:
        return "WSAEAFNOSUPPORT: address family not supported";
    default:
        return "a Winsock error";
    }
}
#endif

EVX_EXPORT void evutil_secure_rng_get_bytes(void *buf, size_t n)
{
    if (evx_sys_random(buf, n) < 0)
        evx_fatal("the system's random generator: %s", strerror(errno));
}

EVX_EXPORT int evutil_secure_rng_init(void)
{
    return 0;
}

EVX_EXPORT void evutil_secure_rng_add_bytes(const char *dat, size_t datlen)
{
    (void)dat, (void)datlen;
}
