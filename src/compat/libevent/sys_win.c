/* SPDX-License-Identifier: MIT */
/* The system's side of libiomux-event on Windows (sys.h), with Winsock as libevent has it
 * there: sockets are SOCKETs (evutil_socket_t is intptr_t), the errors are Winsock's
 * (WSAGetLastError, which EVUTIL_SOCKET_ERROR reads) and errno gets their POSIX codes for the
 * emulation's own checks, evutil_socketpair is a pair of loopback TCP sockets (Windows has no
 * socketpair), a second socket for a connection is WSADuplicateSocket's, non-blocking mode
 * is FIONBIO and close-on-exec is a handle that is not inherited. There is no SIGPIPE. */
#include "sys.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include <winsock2.h>
#include <windows.h>
#include <bcrypt.h>

#define EVX_SOCK(fd) ((SOCKET)(fd))

/* errno for the last Winsock error (which stays set); -1 to return. */
static int evx_wsa_fail(void)
{
    switch (WSAGetLastError()) {
    case WSAEWOULDBLOCK:
        errno = EAGAIN;
        break;
    case WSAEINTR:
        errno = EINTR;
        break;
    case WSAECONNRESET:
        errno = ECONNRESET;
        break;
    case WSAECONNABORTED:
        errno = ECONNABORTED;
        break;
    case WSAENOTSOCK:
        errno = EBADF;
        break;
    case WSAEMFILE:
        errno = EMFILE;
        break;
    case WSAENOBUFS:
        errno = ENOBUFS;
        break;
    case WSAESHUTDOWN:
        errno = EPIPE;
        break;
    case WSAENOTCONN:
        errno = ENOTCONN;
        break;
    case WSAEINVAL:
        errno = EINVAL;
        break;
    case WSAEAFNOSUPPORT:
        errno = EAFNOSUPPORT;
        break;
    default:
        errno = EIO;
    }
    return -1;
}

ev_ssize_t evx_sys_read(evutil_socket_t fd, void *buf, size_t len)
{
    int n = recv(EVX_SOCK(fd), buf, len > INT_MAX ? INT_MAX : (int)len, 0);
    return n >= 0 ? n : evx_wsa_fail();
}

ev_ssize_t evx_sys_writev(evutil_socket_t fd, const struct evbuffer_iovec *v, int n)
{
    WSABUF b[64];
    DWORD k = 0, sent = 0;
    for (int i = 0; i < n && k < 64; i++) {
        if (v[i].iov_len > ULONG_MAX)
            break;
        b[k].buf = v[i].iov_base;
        b[k++].len = (ULONG)v[i].iov_len;
    }
    if (WSASend(EVX_SOCK(fd), b, k, &sent, 0, NULL, NULL) != 0)
        return evx_wsa_fail();
    return (ev_ssize_t)sent;
}

int evx_sys_peer_closed(evutil_socket_t fd)
{
    /* Winsock has no MSG_DONTWAIT, and a socket's blocking mode cannot be read back: readable
     * with nothing to read is the end of the stream. */
    u_long avail = 0;
    if (ioctlsocket(EVX_SOCK(fd), FIONREAD, &avail) != 0 || avail > 0)
        return 0;
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(EVX_SOCK(fd), &rd);
    struct timeval now = {0, 0};
    if (select(0, &rd, NULL, NULL, &now) != 1)
        return 0;
    char c;
    return recv(EVX_SOCK(fd), &c, 1, MSG_PEEK) == 0;
}

evutil_socket_t evx_sys_stream_socket(int family)
{
    SOCKET s = WSASocketW(family, SOCK_STREAM, 0, NULL, 0, WSA_FLAG_OVERLAPPED);
    return s == INVALID_SOCKET ? evx_wsa_fail() : (evutil_socket_t)s;
}

int evx_sys_bind(evutil_socket_t fd, const struct sockaddr *sa, socklen_t len)
{
    return bind(EVX_SOCK(fd), sa, len) == 0 ? 0 : evx_wsa_fail();
}

int evx_sys_listen(evutil_socket_t fd, int backlog)
{
    return listen(EVX_SOCK(fd), backlog) == 0 ? 0 : evx_wsa_fail();
}

int evx_sys_reuseaddr(evutil_socket_t fd)
{
    (void)fd;
    return 0;
}

evutil_socket_t evx_sys_accept(evutil_socket_t fd, struct sockaddr *sa, socklen_t *len,
                               int nonblock, int cloexec)
{
    SOCKET s = accept(EVX_SOCK(fd), sa, len);
    if (s == INVALID_SOCKET)
        return evx_wsa_fail();
    if (nonblock)
        evx_sys_nonblock((evutil_socket_t)s);
    if (cloexec)
        evx_sys_cloexec((evutil_socket_t)s);
    return (evutil_socket_t)s;
}

int evx_sys_mono_coarse_ok(void)
{
    return 1;
}

/* As libevent on Windows: the tick count (GetTickCount64, milliseconds) unless asked to be
 * precise, the performance counter when asked. */
uint64_t evx_sys_mono_ns(int coarse)
{
    if (coarse)
        return GetTickCount64() * 1000000u;
    LARGE_INTEGER now, freq;
    QueryPerformanceCounter(&now);
    QueryPerformanceFrequency(&freq);
    return (uint64_t)(now.QuadPart / freq.QuadPart) * 1000000000u +
           (uint64_t)(now.QuadPart % freq.QuadPart) * 1000000000u / (uint64_t)freq.QuadPart;
}

uint64_t evx_sys_mono_ms(void)
{
    LARGE_INTEGER now, freq;
    QueryPerformanceCounter(&now);
    QueryPerformanceFrequency(&freq);
    return (uint64_t)(now.QuadPart / freq.QuadPart) * 1000u +
           (uint64_t)(now.QuadPart % freq.QuadPart) * 1000u / (uint64_t)freq.QuadPart;
}

int evx_sys_is_socket(evutil_socket_t fd)
{
    int type, len = sizeof type;
    if (getsockopt((SOCKET)fd, SOL_SOCKET, SO_TYPE, (char *)&type, &len) == 0)
        return 1;
    /* Winsock says WSAENOTSOCK of a closed socket and of a handle that is no socket alike:
     * an open handle of something else (a file, a pipe) is -EINVAL, as POSIX says ENOTSOCK.
     * libevent reads and writes such handles on POSIX only; Windows' pipes cannot be
     * watched by the backends (only sockets can). */
    DWORD flags;
    if (WSAGetLastError() == WSAENOTSOCK && GetHandleInformation((HANDLE)fd, &flags))
        return -EINVAL;
    return -EBADF;
}

evutil_socket_t evx_sys_dup(evutil_socket_t fd)
{
    WSAPROTOCOL_INFOW info;
    if (WSADuplicateSocketW(EVX_SOCK(fd), GetCurrentProcessId(), &info) != 0)
        return evx_wsa_fail();
    SOCKET s = WSASocketW(FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, &info, 0,
                          WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
    return s == INVALID_SOCKET ? evx_wsa_fail() : (evutil_socket_t)s;
}

int evx_sys_close(evutil_socket_t fd)
{
    return closesocket(EVX_SOCK(fd)) == 0 ? 0 : evx_wsa_fail();
}

int evx_sys_nonblock(evutil_socket_t fd)
{
    u_long on = 1;
    return ioctlsocket(EVX_SOCK(fd), FIONBIO, &on) == 0 ? 0 : evx_wsa_fail();
}

int evx_sys_cloexec(evutil_socket_t fd)
{
    if (SetHandleInformation((HANDLE)EVX_SOCK(fd), HANDLE_FLAG_INHERIT, 0))
        return 0;
    errno = EBADF;
    return -1;
}

/* A listening socket on 127.0.0.1's any port, and the address it got. */
static SOCKET evx_pair_listener(struct sockaddr_in *a)
{
    int alen = sizeof *a;
    SOCKET l = WSASocketW(AF_INET, SOCK_STREAM, 0, NULL, 0, WSA_FLAG_NO_HANDLE_INHERIT);
    if (l == INVALID_SOCKET)
        return l;
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(l, (struct sockaddr *)a, sizeof *a) != 0 ||
        getsockname(l, (struct sockaddr *)a, &alen) != 0 || listen(l, 1) != 0) {
        int e = WSAGetLastError();
        closesocket(l);
        WSASetLastError(e);
        return INVALID_SOCKET;
    }
    return l;
}

int evx_sys_socketpair(int family, int type, int protocol, evutil_socket_t sv[2])
{
    (void)protocol;
    if ((family != AF_UNIX && family != AF_INET) || type != SOCK_STREAM) {
        WSASetLastError(WSAEAFNOSUPPORT);
        return evx_wsa_fail();
    }
    struct sockaddr_in a, mine, peer;
    SOCKET l = evx_pair_listener(&a), c = INVALID_SOCKET, s = INVALID_SOCKET;
    int mlen = sizeof mine, plen = sizeof peer, err = l == INVALID_SOCKET;
    if (!err) {
        c = WSASocketW(AF_INET, SOCK_STREAM, 0, NULL, 0,
                       WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
        err = c == INVALID_SOCKET || connect(c, (struct sockaddr *)&a, sizeof a) != 0 ||
              getsockname(c, (struct sockaddr *)&mine, &mlen) != 0;
    }
    /* Only the connection from our own socket: another program could race for the port. */
    while (!err) {
        s = accept(l, (struct sockaddr *)&peer, &plen);
        if (s == INVALID_SOCKET)
            err = 1;
        else if (peer.sin_port == mine.sin_port && peer.sin_addr.s_addr == mine.sin_addr.s_addr)
            break;
        else
            closesocket(s);
    }
    int e = WSAGetLastError();
    if (l != INVALID_SOCKET)
        closesocket(l);
    if (err) {
        if (c != INVALID_SOCKET)
            closesocket(c);
        WSASetLastError(e);
        return evx_wsa_fail();
    }
    sv[0] = (evutil_socket_t)c;
    sv[1] = (evutil_socket_t)s;
    return 0;
}

int evx_sys_opt_on(evutil_socket_t fd, int level, int name)
{
    DWORD one = 1;
    return setsockopt(EVX_SOCK(fd), level, name, (const char *)&one, sizeof one) == 0
               ? 0
               : evx_wsa_fail();
}

long evx_sys_fd_limit(void)
{
    /* No descriptor limit, but a process holds 2^24 handles at most, each a multiple of 4:
     * no socket's value reaches 2^26. */
    return 1l << 26;
}

int evx_sys_gettimeofday(struct timeval *tv)
{
    FILETIME ft;
    GetSystemTimePreciseAsFileTime(&ft);
    uint64_t t = ((uint64_t)ft.dwHighDateTime << 32 | ft.dwLowDateTime) / 10 -
                 11644473600000000ull; /* µs since 1601 to µs since 1970 */
    tv->tv_sec = (long)(t / 1000000);
    tv->tv_usec = (long)(t % 1000000);
    return 0;
}

int evx_sys_random(void *buf, size_t n)
{
    for (char *p = buf; n;) {
        ULONG k = n > ULONG_MAX ? ULONG_MAX : (ULONG)n;
        if (BCryptGenRandom(NULL, (PUCHAR)p, k, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0)
            return -1;
        p += k, n -= k;
    }
    return 0;
}
