/* SPDX-License-Identifier: MIT */
/* Stand-ins for the libevent-internal helpers that libevent's tests call and the shim's
 * util-internal.h declares: shared by the regression runner (which includes this file) and
 * libevent's test programs (tests/libevent/run-programs links it). */
#include <time.h>
#ifdef _WIN32 /* libevent's Windows build: sockets stand in for pipes, as its own helper has it */
#include <process.h>
#include <winsock2.h>
#else
#include <fcntl.h>
#include <unistd.h>
#endif

#include "util-internal.h"

ev_uint32_t evutil_weakrand_seed_(struct evutil_weakrand_state *st, ev_uint32_t seed)
{
    if (!seed)
        seed = (ev_uint32_t)time(NULL) ^ (ev_uint32_t)getpid();
    return st->seed = seed;
}

ev_int32_t evutil_weakrand_(struct evutil_weakrand_state *st)
{
    st->seed = st->seed * 1103515245u + 12345u; /* an LCG: weak on purpose, as the name says */
    return (ev_int32_t)(st->seed & 0x7fffffff);
}

ev_int32_t evutil_weakrand_range_(struct evutil_weakrand_state *st, ev_int32_t top)
{
    return top > 0 ? evutil_weakrand_(st) % top : 0;
}

int evutil_make_internal_pipe_(evutil_socket_t fd[2])
{
#ifdef _WIN32
    /* Windows' pipes cannot be watched: a loopback socket pair, as libevent makes there. */
    if (evutil_socketpair(AF_INET, SOCK_STREAM, 0, fd) < 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        evutil_make_socket_nonblocking(fd[i]);
        evutil_make_socket_closeonexec(fd[i]);
    }
    return 0;
#else
    int p[2];
    if (pipe(p) < 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(p[i], F_SETFL, fcntl(p[i], F_GETFL) | O_NONBLOCK);
        fcntl(p[i], F_SETFD, FD_CLOEXEC);
        fd[i] = p[i];
    }
    return 0;
#endif
}
