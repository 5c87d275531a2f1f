/* SPDX-License-Identifier: MIT */
/* libiomux-event's evutil helpers, logging, allocation hooks and version, beyond what
 * libevent's own util/ group checks (tests/libevent): the inputs evutil_parse_sockaddr_port
 * refuses, the order evutil_sockaddr_cmp gives, the socket options the helpers set on real
 * sockets, where warnings go without a callback, and the fatal path. */
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/thread.h>
#include <event2/util.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "event_fixture.h"
#include "harness.h"

/* ---- evutil_parse_sockaddr_port ---- */

static int parse(const char *s, struct sockaddr_storage *ss, int *len)
{
    memset(ss, 0xee, sizeof *ss);
    *len = (int)sizeof *ss;
    return evutil_parse_sockaddr_port(s, (struct sockaddr *)ss, len);
}

CORE_TEST(evutil_parse_sockaddr_port_reads_v4_and_v6_with_and_without_port) {
    struct sockaddr_storage ss;
    int len;
    CHECK_EQ(parse("10.1.2.3:8080", &ss, &len), 0);
    CHECK_EQ(len, (int)sizeof(struct sockaddr_in));
    const struct sockaddr_in *v4 = (const void *)&ss;
    CHECK_EQ(v4->sin_family, AF_INET);
    CHECK_EQ(ntohs(v4->sin_port), 8080);
    CHECK_EQ(ntohl(v4->sin_addr.s_addr), 0x0a010203u);
    /* What lies past the address's own length is zeroed, up to the length given. */
    CHECK_EQ(((unsigned char *)&ss)[sizeof(struct sockaddr_in)], 0);
    CHECK_EQ(((unsigned char *)&ss)[sizeof ss - 1], 0);

    CHECK_EQ(parse("[fe80::1]:443", &ss, &len), 0);
    CHECK_EQ(len, (int)sizeof(struct sockaddr_in6));
    const struct sockaddr_in6 *v6 = (const void *)&ss;
    CHECK_EQ(v6->sin6_family, AF_INET6);
    CHECK_EQ(ntohs(v6->sin6_port), 443);
    CHECK_EQ(v6->sin6_addr.s6_addr[0], 0xfe);
    CHECK_EQ(v6->sin6_addr.s6_addr[15], 1);

    CHECK_EQ(parse("::ffff:1.2.3.4", &ss, &len), 0); /* a bare v6 address, port 0 */
    CHECK_EQ(ntohs(v6->sin6_port), 0);
    CHECK_EQ(parse("[::1]", &ss, &len), 0);
    CHECK_EQ(len, (int)sizeof(struct sockaddr_in6));
    CHECK_EQ(parse("127.0.0.1", &ss, &len), 0);
    CHECK_EQ(ntohs(v4->sin_port), 0);
    CHECK_EQ(parse("1.2.3.4:65535", &ss, &len), 0);
    CHECK_EQ(ntohs(v4->sin_port), 65535);
}

CORE_TEST(evutil_parse_sockaddr_port_refuses_malformed_input_and_short_room) {
    struct sockaddr_storage ss;
    int len;
    static const char *const bad[] = {
        "[::1",          /* no closing bracket */
        "[::1]80",       /* something other than a port after the bracket */
        "1.2.3.4:",      /* an empty port */
        "1.2.3.4:0",     /* port 0 written out */
        "1.2.3.4:65536", /* too big */
        "1.2.3.4:-1",    /* negative */
        "1.2.3.4:80x",   /* trailing junk */
        "localhost:80",  /* names are not resolved */
        "1.2.3:80",      /* not an address */
        "",              /* nothing */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (parse(bad[i], &ss, &len) != -1) {
            fprintf(stderr, "parsed: \"%s\"\n", bad[i]);
            CHECK(0);
        }
    }
    char longhost[200];
    memset(longhost, '1', sizeof longhost - 1);
    longhost[sizeof longhost - 1] = '\0';
    CHECK_EQ(parse(longhost, &ss, &len), -1); /* longer than any address */
    /* Room for a v4 address but not a v6 one. */
    struct sockaddr_in small;
    len = (int)sizeof small;
    CHECK_EQ(evutil_parse_sockaddr_port("[::1]:80", (struct sockaddr *)&small, &len), -1);
    CHECK_EQ(len, (int)sizeof small); /* untouched */
    CHECK_EQ(evutil_parse_sockaddr_port("1.2.3.4:80", (struct sockaddr *)&small, &len), 0);
    CHECK_EQ(evutil_parse_sockaddr_port(NULL, (struct sockaddr *)&ss, &len), -1);
    CHECK_EQ(evutil_parse_sockaddr_port("1.2.3.4", NULL, &len), -1);
    CHECK_EQ(evutil_parse_sockaddr_port("1.2.3.4", (struct sockaddr *)&ss, NULL), -1);
}

/* ---- evutil_sockaddr_cmp ---- */

static struct sockaddr_in sin4(const char *a, int port)
{
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    CHECK_EQ(inet_pton(AF_INET, a, &s.sin_addr), 1);
    return s;
}

static struct sockaddr_in6 sin6(const char *a, int port)
{
    struct sockaddr_in6 s = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    CHECK_EQ(inet_pton(AF_INET6, a, &s.sin6_addr), 1);
    return s;
}

#define SA(x) ((const struct sockaddr *)&(x))

CORE_TEST(evutil_sockaddr_cmp_orders_by_family_then_address_then_port) {
    struct sockaddr_in a = sin4("10.0.0.1", 80), b = sin4("10.0.0.2", 80);
    struct sockaddr_in a2 = sin4("10.0.0.1", 81);
    struct sockaddr_in6 x = sin6("::1", 80), y = sin6("::2", 80), x2 = sin6("::1", 81);
    /* AF_INET sorts before AF_INET6, whatever the addresses. */
    CHECK_EQ(evutil_sockaddr_cmp(SA(a), SA(x), 1), -1);
    CHECK_EQ(evutil_sockaddr_cmp(SA(y), SA(b), 0), 1);
    /* Addresses as numbers, in host order. */
    CHECK_EQ(evutil_sockaddr_cmp(SA(a), SA(b), 0), -1);
    CHECK_EQ(evutil_sockaddr_cmp(SA(b), SA(a), 1), 1);
    CHECK_EQ(evutil_sockaddr_cmp(SA(x), SA(y), 0), -1);
    CHECK_EQ(evutil_sockaddr_cmp(SA(y), SA(x), 1), 1);
    /* The port counts only when asked, and only between equal addresses. */
    CHECK_EQ(evutil_sockaddr_cmp(SA(a), SA(a2), 0), 0);
    CHECK_EQ(evutil_sockaddr_cmp(SA(a), SA(a2), 1), -1);
    CHECK_EQ(evutil_sockaddr_cmp(SA(a2), SA(a), 1), 1);
    CHECK_EQ(evutil_sockaddr_cmp(SA(a), SA(a), 1), 0);
    CHECK_EQ(evutil_sockaddr_cmp(SA(x), SA(x2), 0), 0);
    CHECK_EQ(evutil_sockaddr_cmp(SA(x), SA(x2), 1), -1);
    CHECK_EQ(evutil_sockaddr_cmp(SA(x2), SA(x), 1), 1);
    CHECK_EQ(evutil_sockaddr_cmp(SA(x), SA(x), 1), 0);
    /* Another family: equal as far as this comparison knows. */
    struct sockaddr u1 = {.sa_family = AF_UNIX}, u2 = {.sa_family = AF_UNIX};
    CHECK_EQ(evutil_sockaddr_cmp(&u1, &u2, 1), 0);
}

/* ---- addresses ---- */

/* A numeric host's results name their protocol and socket type, which Windows' getaddrinfo
 * leaves 0 (found by libevent's util/getaddrinfo case under Wine). */
CORE_TEST(evutil_getaddrinfo_fills_in_the_protocol_and_the_socket_type) {
    struct evutil_addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    CHECK_EQ(evutil_getaddrinfo("1.2.3.4", "8080", &hints, &ai), 0);
    CHECK(ai != NULL);
    CHECK_EQ(ai->ai_socktype, SOCK_STREAM);
    CHECK_EQ(ai->ai_protocol, IPPROTO_TCP);
    evutil_freeaddrinfo(ai);
    hints.ai_socktype = SOCK_DGRAM;
    CHECK_EQ(evutil_getaddrinfo("127.0.0.1", "53", &hints, &ai), 0);
    CHECK_EQ(ai->ai_protocol, IPPROTO_UDP);
    evutil_freeaddrinfo(ai);
    /* Neither asked for: one result per socket type, TCP and UDP, as libevent gives. */
    hints.ai_socktype = 0;
    hints.ai_protocol = 0;
    CHECK_EQ(evutil_getaddrinfo("1.2.3.4", NULL, &hints, &ai), 0);
    int tcp = 0, udp = 0;
    for (struct evutil_addrinfo *a = ai; a; a = a->ai_next) {
        tcp += a->ai_socktype == SOCK_STREAM && a->ai_protocol == IPPROTO_TCP;
        udp += a->ai_socktype == SOCK_DGRAM && a->ai_protocol == IPPROTO_UDP;
    }
    CHECK_EQ(tcp, 1);
    CHECK_EQ(udp, 1);
    evutil_freeaddrinfo(ai);
    hints.ai_socktype = 0; /* and the socket type from the protocol */
    hints.ai_protocol = IPPROTO_UDP;
    CHECK_EQ(evutil_getaddrinfo("127.0.0.1", "53", &hints, &ai), 0);
    CHECK_EQ(ai->ai_socktype, SOCK_DGRAM);
    CHECK_EQ(ai->ai_protocol, IPPROTO_UDP);
    evutil_freeaddrinfo(ai);
}

/* ---- strings ---- */

CORE_TEST(evutil_snprintf_always_terminates_and_returns_the_full_length) {
    char buf[8];
    memset(buf, 'z', sizeof buf);
    CHECK_EQ(evutil_snprintf(buf, sizeof buf, "%s-%d", "abcdef", 42), 9);
    CHECK_STR_EQ(buf, "abcdef-");
    memset(buf, 'z', sizeof buf);
    CHECK_EQ(evutil_snprintf(buf, 0, "%d", 12345), 0); /* no room: nothing written */
    CHECK_EQ(buf[0], 'z');
    CHECK_EQ(evutil_snprintf(buf, 1, "%d", 12345), 5);
    CHECK_EQ(buf[0], '\0');
    CHECK_EQ(evutil_strtoll("-9223372036854775808", NULL, 10), INT64_MIN);
    char *end;
    CHECK_EQ(evutil_strtoll("0x1fz", &end, 16), 31);
    CHECK_STR_EQ(end, "z");
}

CORE_TEST(evutil_inet_ntop_and_pton_round_trip_both_families) {
    unsigned char a4[4], a6[16];
    char out[64];
    CHECK_EQ(evutil_inet_pton(AF_INET, "192.0.2.33", a4), 1);
    CHECK_EQ(a4[0], 192);
    CHECK_EQ(a4[3], 33);
    CHECK_STR_EQ(evutil_inet_ntop(AF_INET, a4, out, sizeof out), "192.0.2.33");
    CHECK_EQ(evutil_inet_pton(AF_INET6, "2001:db8::7", a6), 1);
    CHECK_STR_EQ(evutil_inet_ntop(AF_INET6, a6, out, sizeof out), "2001:db8::7");
    CHECK(evutil_inet_ntop(AF_INET6, a6, out, 4) == NULL); /* no room */
    CHECK_EQ(evutil_inet_pton(AF_INET, "300.1.1.1", a4), 0);
}

CORE_TEST(evutil_getaddrinfo_resolves_numeric_hosts_and_names_its_errors) {
    struct evutil_addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = EVUTIL_AI_NUMERICHOST | EVUTIL_AI_NUMERICSERV;
    CHECK_EQ(evutil_getaddrinfo("127.0.0.1", "8080", &hints, &res), 0);
    CHECK(res != NULL);
    CHECK_EQ(res->ai_family, AF_INET);
    const struct sockaddr_in *a = (const void *)res->ai_addr;
    CHECK_EQ(ntohs(a->sin_port), 8080);
    CHECK_EQ(ntohl(a->sin_addr.s_addr), 0x7f000001u);
    evutil_freeaddrinfo(res);
    int err = evutil_getaddrinfo("not an address", "80", &hints, &res);
    CHECK_EQ(err, EAI_NONAME);
    CHECK_STR_EQ(evutil_gai_strerror(err), gai_strerror(EAI_NONAME));
}

/* ---- sockets ---- */

static int sockopt(int fd, int level, int name)
{
    int v = 0; /* Wine writes a boolean option's one byte only */
    socklen_t len = sizeof v;
    CHECK_EQ(getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

CORE_TEST(evutil_socket_helpers_set_the_options_they_name) {
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        SKIP("no IPv6 sockets here");
#ifdef _WIN32 /* Windows cannot tell whether a socket blocks: an accept says it */
    struct sockaddr_in6 any = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    CHECK_EQ(evutil_make_listen_socket_ipv6only(fd), 0); /* Windows takes it before bind only */
    CHECK_EQ(bind(fd, (struct sockaddr *)&any, sizeof any), 0);
    CHECK_EQ(listen(fd, 1), 0);
    CHECK_EQ(evutil_make_socket_nonblocking(fd), 0);
    CHECK_EQ(accept(fd, NULL, NULL), INVALID_SOCKET); /* nobody there: it would block */
    CHECK_EQ(WSAGetLastError(), WSAEWOULDBLOCK);
    CHECK_EQ(evutil_make_socket_nonblocking(fd), 0);
#else
    CHECK_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    CHECK_EQ(evutil_make_socket_nonblocking(fd), 0);
    CHECK_NE(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    CHECK_EQ(evutil_make_socket_nonblocking(fd), 0); /* already: nothing to change */
#endif
    CHECK_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    CHECK_EQ(evutil_make_socket_closeonexec(fd), 0);
    CHECK_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    CHECK_EQ(evutil_make_socket_closeonexec(fd), 0);
    CHECK_EQ(evutil_make_listen_socket_reuseable(fd), 0);
#ifdef _WIN32
    /* As libevent on Windows: SO_REUSEADDR there lets another socket take the port, so it
     * stays off; there is no SO_REUSEPORT and no deferred accept (the calls do nothing). */
    CHECK_EQ(sockopt(fd, SOL_SOCKET, SO_REUSEADDR), 0);
    CHECK_EQ(evutil_make_listen_socket_reuseable_port(fd), 0);
    CHECK_EQ(evutil_make_tcp_listen_socket_deferred(fd), 0);
    CHECK_EQ(sockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY), 1);
#else
    CHECK_EQ(sockopt(fd, SOL_SOCKET, SO_REUSEADDR), 1);
    CHECK_EQ(evutil_make_listen_socket_reuseable_port(fd), 0);
    CHECK_EQ(sockopt(fd, SOL_SOCKET, SO_REUSEPORT), 1);
    CHECK_EQ(evutil_make_listen_socket_ipv6only(fd), 0);
    CHECK_EQ(sockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY), 1);
    CHECK_EQ(evutil_make_tcp_listen_socket_deferred(fd), 0);
    CHECK_GT(sockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT), 0);
#endif
    CHECK_EQ(evutil_closesocket(fd), 0);
    CHECK_EQ(fcntl(fd, F_GETFD), -1); /* closed */
}

CORE_TEST(evutil_socket_helpers_on_a_closed_fd_fail_with_a_warning) {
    evutil_socket_t sv[2];
    CHECK_EQ(evutil_socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[0]);
    close(sv[1]);
    evt_log_capture();
    CHECK_EQ(evutil_make_socket_nonblocking(sv[0]), -1);
    CHECK_EQ(evt_warnings, 1);
    CHECK(strstr(evt_last_warning, "F_SETFL") != NULL);
    CHECK_EQ(evutil_make_socket_closeonexec(sv[0]), -1);
    CHECK_EQ(evt_warnings, 2);
    CHECK(strstr(evt_last_warning, "F_SETFD") != NULL);
    CHECK_EQ(evutil_closesocket(sv[0]), -1);
    evt_log_release();
}

/* ---- logging ---- */

/* Runs fn with stderr sent into a pipe; returns what it wrote (static buffer). */
#ifdef _WIN32
/* On Windows the C runtime's descriptor 2 is pointed at a temporary file meanwhile (its pipes
 * cannot stand in: the cases' pipes are socket pairs there). */
static const char *stderr_of(void (*fn)(void))
{
    static char out[1024];
    FILE *tmp = tmpfile();
    CHECK(tmp != NULL);
    fflush(stderr);
    int saved = _dup(2);
    CHECK_GE(saved, 0);
    CHECK_EQ(_dup2(_fileno(tmp), 2), 0);
    fn();
    fflush(stderr);
    CHECK_EQ(_dup2(saved, 2), 0);
    _close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, sizeof out - 1, tmp);
    fclose(tmp);
    out[n] = '\0';
    return out;
}
#else
static const char *stderr_of(void (*fn)(void))
{
    static char out[1024];
    int p[2];
    CHECK_EQ(pipe(p), 0);
    fflush(stderr);
    int saved = dup(2);
    CHECK_GE(saved, 0);
    CHECK_EQ(dup2(p[1], 2), 2);
    fn();
    fflush(stderr);
    CHECK_EQ(dup2(saved, 2), 2);
    close(saved);
    close(p[1]);
    ssize_t n = read(p[0], out, sizeof out - 1);
    close(p[0]);
    out[n > 0 ? n : 0] = '\0';
    return out;
}
#endif

static const char bad_fd_warning[] = "[warn] fcntl(536870912, F_SETFL): Bad file descriptor\n";

static void warn_on_a_closed_fd(void)
{
    evutil_make_socket_nonblocking(1 << 29);
}

CORE_TEST(warnings_go_to_stderr_without_a_log_callback_and_debug_logging_is_accepted) {
    event_set_log_callback(NULL);
    CHECK_STR_EQ(stderr_of(warn_on_a_closed_fd), bad_fd_warning);
    /* libevent's debug messages are about its own insides: iomux has none to give. */
    event_enable_debug_logging(EVENT_DBG_ALL);
    CHECK_STR_EQ(stderr_of(warn_on_a_closed_fd), bad_fd_warning);
    event_enable_debug_logging(EVENT_DBG_NONE);
    event_enable_debug_mode(); /* the checks it turns on in libevent are always on here */
}

void event_base_assert_ok_(struct event_base *base); /* libevent's internal check, offered */

static int report_fd = -1;

static void report_log(int severity, const char *msg)
{
    dprintf(report_fd, "log %d %s\n", severity, msg);
}

static void report_fatal(int err)
{
    dprintf(report_fd, "fatal %d\n", err);
}

enum breakage { BREAK_ADDED, BREAK_ACTIVE, BREAK_TAIL, BREAK_COUNT };

/* In a child: a base whose lists are made to disagree with each other in one way, then the
 * check. The child ends by the fatal path: SIGABRT. */
static void broken_base_child(enum breakage how, int with_fatal_cb)
{
    event_set_log_callback(report_log);
    if (with_fatal_cb)
        event_set_fatal_callback(report_fatal);
    struct event_base *base = event_base_new();
    CHECK(base != NULL);
    int n = 0;
    struct event ev, ev2;
    CHECK_EQ(event_assign(&ev, base, -1, 0, evt_count_cb, &n), 0);
    CHECK_EQ(event_assign(&ev2, base, -1, 0, evt_count_cb, &n), 0);
    struct timeval tv = {60, 0};
    switch (how) {
    case BREAK_ADDED: /* an added event that says it is not */
        CHECK_EQ(event_add(&ev, &tv), 0);
        ev.ev_flags &= (unsigned short)~EVLIST_TIMEOUT;
        break;
    case BREAK_ACTIVE: /* an active event on another priority's queue */
        CHECK_EQ(event_base_priority_init(base, 2), 0);
        CHECK_EQ(event_priority_set(&ev, 0), 0);
        event_active(&ev, EV_TIMEOUT, 1);
        ev.ev_pri = 1;
        break;
    case BREAK_TAIL: /* the queue's tail is not its last event */
        event_active(&ev, EV_TIMEOUT, 1);
        event_active(&ev2, EV_TIMEOUT, 1);
        ev.ev_active_next_ = NULL;
        break;
    case BREAK_COUNT: /* an event no list holds, counted as added */
        CHECK_EQ(event_add(&ev, &tv), 0);
        CHECK_EQ(event_add(&ev2, &tv), 0);
        ev.ev_prev_->ev_next_ = NULL; /* ev2, added last, is first and now the only one */
        break;
    }
    event_base_assert_ok_(base);
    child_exit(0); /* not reached when the check works */
}

static void check_fatal(enum breakage how, int with_fatal_cb, const char *what)
{
    int p[2];
    CHECK_EQ(pipe(p), 0);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        close(p[0]);
        report_fd = p[1];
        child_keep_coverage_on_abort();
        broken_base_child(how, with_fatal_cb);
    }
    close(p[1]);
    char out[1024];
    size_t got = 0;
    ssize_t n;
    while ((n = read(p[0], out + got, sizeof out - 1 - got)) > 0)
        got += (size_t)n;
    out[got] = '\0';
    close(p[0]);
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFSIGNALED(status));
    CHECK_EQ(WTERMSIG(status), SIGABRT);
    char want[160];
    snprintf(want, sizeof want, "log %d event_base_assert_ok_: %s", EVENT_LOG_ERR, what);
    if (!strstr(out, want)) {
        fprintf(stderr, "child said:\n%s\nwanted: %s\n", out, want);
        CHECK(0);
    }
    if (with_fatal_cb) {
        snprintf(want, sizeof want, "fatal %d\n", EINVAL);
        CHECK(strstr(out, want) != NULL);
    } else {
        CHECK(strstr(out, "fatal") == NULL);
    }
}

CORE_TEST(event_base_assert_ok_logs_and_aborts_through_the_fatal_callback) {
    check_fatal(BREAK_ADDED, 1, "the added list is broken at ");
    check_fatal(BREAK_ACTIVE, 1, "active queue 0 is broken at ");
    check_fatal(BREAK_TAIL, 0, "active queue 0 has the wrong tail");
    check_fatal(BREAK_COUNT, 0, "1 added and 0 active counted, 2 and 0 recorded");
}

/* ---- allocation ---- */

static long n_malloc, n_realloc, n_free;

static void *count_malloc(size_t n)
{
    n_malloc++;
    return malloc(n);
}

static void *count_realloc(void *p, size_t n)
{
    n_realloc++;
    return realloc(p, n);
}

static void count_free(void *p)
{
    n_free++;
    free(p);
}

CORE_TEST(event_set_mem_functions_routes_every_allocation_and_free) {
    event_set_mem_functions(count_malloc, count_realloc, count_free);
    struct event_base *base = event_base_new();
    CHECK(base != NULL);
    CHECK_EQ(event_base_priority_init(base, 4), 0); /* a zeroed array: the calloc path */
    int n = 0;
    struct event *ev = event_new(base, -1, 0, evt_count_cb, &n);
    CHECK(ev != NULL);
    event_active(ev, EV_TIMEOUT, 1);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1); /* ran it; nothing left */
    CHECK_EQ(n, 1);
    event_free(ev);
    event_base_free(base);
    CHECK_GE(n_malloc, 3); /* the base, the queues, the event */
    CHECK_EQ(n_free, n_malloc);
    event_set_mem_functions(NULL, NULL, NULL);
    long before = n_malloc;
    base = event_base_new();
    event_base_free(base);
    CHECK_EQ(n_malloc, before); /* back to the C library's */
}

/* ---- version, threads, randomness ---- */

CORE_TEST(version_threads_and_secure_rng_answer_as_libevent_2_1_does) {
    CHECK_STR_EQ(event_get_version(), "2.1.12-stable");
    CHECK_EQ(event_get_version_number(), 0x02010c00);
    CHECK_EQ(evthread_use_pthreads(), 0);
    CHECK_EQ(evthread_make_base_notifiable(NULL), -1);
    struct event_base *base = event_base_new();
    CHECK_EQ(evthread_make_base_notifiable(base), 0);
    event_base_free(base);
    CHECK_EQ(evutil_secure_rng_init(), 0);
    evutil_secure_rng_add_bytes("seed", 4); /* the kernel's generator needs no seed */
    /* More than one getentropy call's worth (256 bytes), twice: the two differ. */
    unsigned char a[1000], b[1000];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    evutil_secure_rng_get_bytes(a, sizeof a);
    evutil_secure_rng_get_bytes(b, sizeof b);
    CHECK(memcmp(a, b, sizeof a) != 0);
    int zero_tail = 1; /* the last call's bytes were written too */
    for (size_t i = 900; i < sizeof a; i++)
        zero_tail &= a[i] == 0;
    CHECK_EQ(zero_tail, 0);
}
