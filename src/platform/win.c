/* SPDX-License-Identifier: MIT */
/* The platform seam on Windows (Winsock 2).
 *
 * What differs from POSIX, and what this file does about it:
 * - Sockets are SOCKETs (kernel handles), not descriptors, and Winsock must be started once
 *   per process (WSAStartup, in mux__platform_init). The library keeps them in `int`s where
 *   the generic code speaks of descriptors: a handle's value fits 32 bits (Windows keeps them
 *   so for 32-bit processes that share them), and every such value is positive.
 * - Errors come from WSAGetLastError or GetLastError, in one number space of their own, and
 *   are mapped here, once, to the negative errno values the POSIX build returns (the
 *   mingw-w64 and MSVC runtimes define every POSIX code the library uses).
 * - Every socket the library makes is overlapped-capable (WSA_FLAG_OVERLAPPED: the iocp
 *   backend runs operations on it) and not inherited by child processes
 *   (WSA_FLAG_NO_HANDLE_INHERIT, the counterpart of close-on-exec); non-blocking mode is
 *   FIONBIO. There is no SIGPIPE to keep away.
 * - SO_REUSEADDR on Windows lets another socket take a port that is in use, which is not
 *   what it means on POSIX (rebinding a port whose old connections linger): Windows lets a
 *   listener rebind such a port without it, so it is not set. SO_REUSEPORT does not exist:
 *   -ENOTSUP.
 * - There is no socketpair: the select backend's wake-up descriptor is a connected pair of
 *   loopback TCP sockets, whose write end is written by mux_async_send.
 * - No fork, no signals but the C runtime's, no timerfd: fork watchers return -ENOTSUP, and
 *   the loop compares the clocks for wall-clock jumps.
 * - A file's bytes go to a socket through a positioned ReadFile into a buffer on the stack
 *   and a send: TransmitFile blocks unless overlapped, and the emulated operations it would
 *   serve run on non-blocking sockets.
 * - The clocks: QueryPerformanceCounter (monotonic), GetSystemTimePreciseAsFileTime (the
 *   wall clock, in 100 ns steps since 1601).
 */
#include <errno.h>
#include <io.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "platform/platform.h"
#include "platform/win.h"

#include <mstcpip.h> /* after winsock2.h and windows.h, which it leans on */

#define MUX__IOV_BATCH 64

_Static_assert(sizeof(mux_buf_t) == sizeof(WSABUF) &&
                   offsetof(mux_buf_t, len) == offsetof(WSABUF, len) &&
                   offsetof(mux_buf_t, base) == offsetof(WSABUF, buf),
               "mux_buf_t must be laid out as WSABUF");

/* ---- errors ---- */

int mux__win_errno(DWORD err)
{
    switch (err) {
    case 0:
        return 0;
    case WSAEINTR:
        return -EINTR;
    case WSAEBADF:
    case ERROR_INVALID_HANDLE: /* WSA_INVALID_HANDLE */
        return -EBADF;
    case WSAEACCES:
    case ERROR_ACCESS_DENIED:
        return -EACCES;
    case WSAEFAULT:
    case ERROR_NOACCESS:
        return -EFAULT;
    case WSAEINVAL:
    case ERROR_INVALID_PARAMETER:
        return -EINVAL;
    case WSAEMFILE:
    case ERROR_TOO_MANY_OPEN_FILES:
        return -EMFILE;
    case WSAEWOULDBLOCK:
    case ERROR_IO_INCOMPLETE: /* WSA_IO_INCOMPLETE */
        return -EAGAIN;
    case WSAEINPROGRESS:
    case ERROR_IO_PENDING: /* WSA_IO_PENDING */
        return -EINPROGRESS;
    case WSAEALREADY:
        return -EALREADY;
    case WSAENOTSOCK: /* what a closed socket's handle gives: POSIX says EBADF */
        return -EBADF;
    case WSAEMSGSIZE:
        return -EMSGSIZE;
    case WSAEOPNOTSUPP:
    case ERROR_NOT_SUPPORTED:
        return -ENOTSUP;
    case WSAEPFNOSUPPORT:
    case WSAEAFNOSUPPORT:
        return -EAFNOSUPPORT;
    case WSAEADDRINUSE:
    case ERROR_ADDRESS_ALREADY_ASSOCIATED:
        return -EADDRINUSE;
    case WSAEADDRNOTAVAIL:
        return -EADDRNOTAVAIL;
    case WSAENETDOWN:
        return -ENETDOWN;
    case WSAENETUNREACH:
    case ERROR_NETWORK_UNREACHABLE:
        return -ENETUNREACH;
    case WSAENETRESET:
        return -ENETRESET;
    case WSAECONNABORTED:
    case ERROR_CONNECTION_ABORTED:
    case ERROR_REQUEST_ABORTED:
        return -ECONNABORTED;
    case WSAECONNRESET:
    case ERROR_NETNAME_DELETED:
        return -ECONNRESET;
    case WSAENOBUFS:
    case ERROR_NO_SYSTEM_RESOURCES:
    case ERROR_INSUFFICIENT_BUFFER:
        return -ENOBUFS;
    case WSAEISCONN:
        return -EISCONN;
    case WSAENOTCONN:
    case ERROR_NOT_CONNECTED:
        return -ENOTCONN;
    case WSAESHUTDOWN:
    case WSAEDISCON:
    case ERROR_BROKEN_PIPE:
    case ERROR_NO_DATA:            /* a pipe whose other end closed, written */
    case ERROR_PIPE_NOT_CONNECTED: /* and one disconnected */
        return -EPIPE;
    case WSAETIMEDOUT:
    case ERROR_SEM_TIMEOUT:
        return -ETIMEDOUT;
    case WSAECONNREFUSED:
    case ERROR_CONNECTION_REFUSED:
    case ERROR_PORT_UNREACHABLE:
        return -ECONNREFUSED;
    case WSAEHOSTDOWN:
    case WSAEHOSTUNREACH:
    case ERROR_HOST_UNREACHABLE:
        return -EHOSTUNREACH;
    case WSA_OPERATION_ABORTED: /* ERROR_OPERATION_ABORTED */
        return -ECANCELED;
    case WSA_NOT_ENOUGH_MEMORY: /* ERROR_NOT_ENOUGH_MEMORY */
    case ERROR_OUTOFMEMORY:
        return -ENOMEM;
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME:
        return -ENOENT;
    case WSAEPROTONOSUPPORT:
    case WSAESOCKTNOSUPPORT:
    case WSAEPROTOTYPE:
        return -EPROTO;
    default:
        return -EIO;
    }
}

int mux__wsa_errno(void)
{
    return mux__win_errno((DWORD)WSAGetLastError());
}

int mux__pipe_errno(DWORD err)
{
    return err == ERROR_HANDLE_EOF ? -EPIPE : mux__win_errno(err);
}

/* ---- the process ---- */

static volatile LONG mux__wsa_ready;

int mux__platform_init(void (*atfork_child)(void))
{
    (void)atfork_child; /* no fork */
    if (InterlockedCompareExchange(&mux__wsa_ready, 0, 0))
        return 0;
    WSADATA wd;
    int r = WSAStartup(MAKEWORD(2, 2), &wd); /* counted: two threads racing here is harmless */
    if (r != 0)
        return mux__win_errno((DWORD)r);
    InterlockedExchange(&mux__wsa_ready, 1);
    return 0;
}

void *mux__aligned_alloc(size_t align, size_t size)
{
    return _aligned_malloc(size, align);
}

void mux__aligned_free(void *p)
{
    _aligned_free(p);
}

int mux__fork_supported(void)
{
    return -ENOTSUP;
}

uint64_t mux__mono_ns(void)
{
    static LONGLONG freq; /* fixed at boot; a race stores the same value */
    LARGE_INTEGER c;
    if (!freq) {
        LARGE_INTEGER f;
        QueryPerformanceFrequency(&f);
        freq = f.QuadPart;
    }
    QueryPerformanceCounter(&c);
    uint64_t q = (uint64_t)c.QuadPart, fr = (uint64_t)freq;
    return q / fr * 1000000000u + q % fr * 1000000000u / fr;
}

int64_t mux__test_wall_offset;

int64_t mux__wall_ns(void)
{
    FILETIME ft;
    GetSystemTimePreciseAsFileTime(&ft);
    int64_t t = (int64_t)(((uint64_t)ft.dwHighDateTime << 32) | ft.dwLowDateTime);
    return (t - 116444736000000000LL) * 100 + mux__test_wall_offset;
}

/* ---- sockets ---- */

/* Non-blocking, not inherited. */
static int mux__sock_setup(SOCKET s)
{
    u_long on = 1;
    if (ioctlsocket(s, FIONBIO, &on) != 0)
        return mux__wsa_errno();
    SetHandleInformation((HANDLE)s, HANDLE_FLAG_INHERIT, 0);
    return 0;
}

int mux__sock_stream(int family)
{
    SOCKET s = WSASocketW(family, SOCK_STREAM, 0, NULL, 0,
                          WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
    if (s == INVALID_SOCKET)
        return mux__wsa_errno();
    int err = mux__sock_setup(s);
    if (err != 0) {
        closesocket(s);
        return err;
    }
    return (int)s;
}

int mux__sock_listen(const struct sockaddr *addr, socklen_t len, int reuseport, int v6only,
                     int backlog, int steer, int cpu)
{
    (void)cpu;
    if (reuseport || steer != MUX__STEER_NONE) /* no SO_REUSEPORT group to steer on Windows */
        return -ENOTSUP;
    int fd = mux__sock_stream(addr->sa_family);
    if (fd < 0)
        return fd;
    SOCKET s = MUX__SOCK(fd);
    int err = 0;
    if (addr->sa_family == AF_INET6) {
        DWORD v = v6only != 0; /* Windows' default is on: say what the caller asked */
        if (setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, (const char *)&v, sizeof v) != 0)
            err = mux__wsa_errno();
    }
    if (!err && bind(s, addr, len) != 0)
        err = mux__wsa_errno();
    if (!err && listen(s, backlog > 0 ? backlog : SOMAXCONN) != 0)
        err = mux__wsa_errno();
    if (err) {
        closesocket(s);
        return err;
    }
    return fd;
}

int mux__sock_name(mux_os_sock_t sock, struct sockaddr *addr, socklen_t *len)
{
    return getsockname(sock, addr, len) == 0 ? 0 : mux__wsa_errno();
}

int mux__sock_accept(mux_os_sock_t lsock)
{
    SOCKET s = accept(lsock, NULL, NULL);
    if (s == INVALID_SOCKET)
        return mux__wsa_errno();
    int err = mux__sock_setup(s);
    if (err != 0) {
        closesocket(s);
        return err;
    }
    return (int)s;
}

int mux__sock_adopt(mux_os_sock_t sock)
{
    WSAPROTOCOL_INFOW info;
    int len = sizeof info;
    if (getsockopt(sock, SOL_SOCKET, SO_PROTOCOL_INFOW, (char *)&info, &len) != 0) {
        /* Winsock says WSAENOTSOCK of a closed socket and of a handle that is no socket
         * alike: an open handle of something else is -EINVAL, as POSIX says ENOTSOCK. */
        DWORD flags;
        int err = mux__wsa_errno();
        return err == -EBADF && GetHandleInformation((HANDLE)sock, &flags) ? -EINVAL : err;
    }
    if (info.iSocketType != SOCK_STREAM)
        return -EINVAL;
    u_long on = 1;
    if (ioctlsocket(sock, FIONBIO, &on) != 0)
        return mux__wsa_errno();
    return info.iAddressFamily;
}

void mux__sock_close(mux_os_sock_t sock)
{
    closesocket(sock);
}

void mux__pipe_close(mux_os_sock_t pipe)
{
    CloseHandle((HANDLE)pipe); /* its operations in flight end, each with its completion */
}

int mux__sock_connect(mux_os_sock_t sock, const struct sockaddr *sa, socklen_t len)
{
    if (connect(sock, sa, len) == 0)
        return 0;
    int err = mux__wsa_errno();
    return err == -EAGAIN ? -EINPROGRESS : err; /* WSAEWOULDBLOCK: it goes on */
}

int mux__sock_error(mux_os_sock_t sock)
{
    int err = 0, len = sizeof err;
    if (getsockopt(sock, SOL_SOCKET, SO_ERROR, (char *)&err, &len) != 0)
        return mux__wsa_errno();
    return mux__win_errno((DWORD)err);
}

ssize_t mux__sock_recv(mux_os_sock_t sock, char *buf, size_t len)
{
    int n = recv(sock, buf, len > INT_MAX ? INT_MAX : (int)len, 0);
    return n >= 0 ? n : mux__wsa_errno();
}

ssize_t mux__sock_send(mux_os_sock_t sock, const mux_buf_t *bufs, uint32_t n)
{
    DWORD sent = 0;
    if (WSASend(sock, (WSABUF *)(uintptr_t)bufs, n > MUX__IOV_BATCH ? MUX__IOV_BATCH : n, &sent, 0,
                NULL, NULL) != 0)
        return mux__wsa_errno();
    return (ssize_t)sent;
}

int mux__file_os(int fd)
{
    intptr_t h = _get_osfhandle(fd);
    return h == (intptr_t)INVALID_HANDLE_VALUE || h < 0 || h > INT_MAX ? 0 : (int)h;
}

ssize_t mux__sock_sendfile(mux_os_sock_t sock, int fd, uint64_t off, size_t len)
{
    if (off > (uint64_t)INT64_MAX - len)
        return -EINVAL;
    HANDLE h = (HANDLE)(intptr_t)fd;
    if (!h)
        return -EBADF; /* mux__file_os found no file */
    char buf[16384];
    if (len > sizeof buf)
        len = sizeof buf;
    OVERLAPPED at; /* a synchronous handle reads at the offset it names */
    memset(&at, 0, sizeof at);
    at.Offset = (DWORD)off;
    at.OffsetHigh = (DWORD)(off >> 32);
    DWORD got = 0;
    BOOL ok = ReadFile(h, buf, (DWORD)len, &got, &at);
    /* A file opened for overlapped I/O reads in the background, into this frame: wait. */
    if (!ok && GetLastError() == ERROR_IO_PENDING)
        ok = GetOverlappedResult(h, &at, &got, TRUE);
    if (!ok) {
        DWORD e = GetLastError();
        if (e == ERROR_ACCESS_DENIED)
            return -EBADF; /* not open for reading, as POSIX says it */
        if (e != ERROR_HANDLE_EOF)
            return mux__win_errno(e);
        got = 0;
    }
    if (got == 0)
        return -ENODATA;
    mux_buf_t b = mux_buf_init(buf, got);
    return mux__sock_send(sock, &b, 1);
}

int mux__sock_shutdown(mux_os_sock_t sock)
{
    return shutdown(sock, SD_SEND) == 0 ? 0 : mux__wsa_errno();
}

int mux__sock_nodelay(mux_os_sock_t sock, int on)
{
    DWORD v = on != 0;
    return setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, (const char *)&v, sizeof v) == 0
               ? 0
               : mux__wsa_errno();
}

int mux__sock_keepalive(mux_os_sock_t sock, int on, unsigned idle_s)
{
    struct tcp_keepalive ka = {.onoff = on != 0,
                               .keepalivetime = on ? idle_s * 1000u : 0,
                               .keepaliveinterval = 1000};
    DWORD got = 0;
    if (on && idle_s > UINT32_MAX / 1000u)
        ka.keepalivetime = UINT32_MAX;
    if (WSAIoctl(sock, SIO_KEEPALIVE_VALS, &ka, sizeof ka, NULL, 0, &got, NULL, NULL) != 0)
        return mux__wsa_errno();
    DWORD v = on != 0; /* SO_KEEPALIVE reads back what was set */
    return setsockopt(sock, SOL_SOCKET, SO_KEEPALIVE, (const char *)&v, sizeof v) == 0
               ? 0
               : mux__wsa_errno();
}

/* A loopback TCP connection: sv[0] the connecting socket (made with `flags0`), sv[1] the one
 * accepted from a listener made with `lflags` (whose attributes it takes). Neither is set up
 * further. 0 or -errno, with nothing left open. */
static int mux__loopback_pair(SOCKET sv[2], DWORD flags0, DWORD lflags)
{
    struct sockaddr_in a;
    int alen = sizeof a, err = 0;
    sv[0] = sv[1] = INVALID_SOCKET;
    SOCKET l = WSASocketW(AF_INET, SOCK_STREAM, 0, NULL, 0, lflags);
    if (l == INVALID_SOCKET)
        return mux__wsa_errno();
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &alen) != 0 || listen(l, 1) != 0)
        err = mux__wsa_errno();
    if (!err) {
        sv[0] = WSASocketW(AF_INET, SOCK_STREAM, 0, NULL, 0, flags0);
        if (sv[0] == INVALID_SOCKET || connect(sv[0], (struct sockaddr *)&a, sizeof a) != 0)
            err = mux__wsa_errno();
    }
    if (!err) {
        /* Only a connection from our own socket may be taken: another local program could
         * race for the port. */
        struct sockaddr_in mine, peer;
        int mlen = sizeof mine, plen = sizeof peer;
        if (getsockname(sv[0], (struct sockaddr *)&mine, &mlen) != 0)
            err = mux__wsa_errno();
        while (!err) {
            SOCKET s = accept(l, (struct sockaddr *)&peer, &plen);
            if (s == INVALID_SOCKET) {
                err = mux__wsa_errno();
            } else if (peer.sin_port == mine.sin_port &&
                       peer.sin_addr.s_addr == mine.sin_addr.s_addr) {
                sv[1] = s;
                break;
            } else {
                closesocket(s);
            }
        }
    }
    closesocket(l);
    for (int i = 0; i < 2 && !err; i++) {
        DWORD on = 1; /* a wake-up byte, or a child's line, should not wait for Nagle */
        setsockopt(sv[i], IPPROTO_TCP, TCP_NODELAY, (const char *)&on, sizeof on);
    }
    if (err)
        for (int i = 0; i < 2; i++)
            if (sv[i] != INVALID_SOCKET)
                closesocket(sv[i]);
    return err;
}

int mux__win_sock_pair(SOCKET sv[2])
{
    int err = mux__loopback_pair(sv, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT,
                                 WSA_FLAG_NO_HANDLE_INHERIT);
    for (int i = 0; i < 2 && !err; i++)
        err = mux__sock_setup(sv[i]);
    if (err && sv[1] != INVALID_SOCKET) { /* the setup failed: both are open */
        closesocket(sv[0]);
        closesocket(sv[1]);
    }
    return err;
}

int mux__win_stdio_pair(SOCKET *parent, SOCKET *child)
{
    SOCKET sv[2];
    int err = mux__loopback_pair(sv, WSA_FLAG_NO_HANDLE_INHERIT,
                                 WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
    if (!err && (err = mux__sock_setup(sv[1])) != 0) {
        closesocket(sv[0]);
        closesocket(sv[1]);
    }
    if (!err) {
        *child = sv[0];
        *parent = sv[1];
    }
    return err;
}

/* ---- a child's standard handle: a named pipe ---- */

/* Names are unique in the machine: the process id and a count. A name that another program
 * took first (FILE_FLAG_FIRST_PIPE_INSTANCE refuses it) or whose one instance it connected to
 * before us (our open is refused) is given up for the next count. */
static volatile LONG mux__pipe_count;

/* A new pipe's server end, of the next free name (in `name`). */
static HANDLE mux__pipe_server(wchar_t name[64], DWORD *err)
{
    HANDLE h = INVALID_HANDLE_VALUE;
    for (int tries = 0; tries < 16 && h == INVALID_HANDLE_VALUE; tries++) {
        _snwprintf(name, 64, L"\\\\.\\pipe\\iomux-%lu-%ld", (unsigned long)GetCurrentProcessId(),
                   (long)InterlockedIncrement(&mux__pipe_count));
        name[63] = L'\0';
        /* 64 KB each way, as libuv's; not inherited (no security attributes). */
        h = CreateNamedPipeW(name,
                             PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED |
                                 FILE_FLAG_FIRST_PIPE_INSTANCE,
                             PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT |
                                 PIPE_REJECT_REMOTE_CLIENTS,
                             1, 65536, 65536, 0, NULL);
        *err = h == INVALID_HANDLE_VALUE ? GetLastError() : 0;
        if (*err != 0 && *err != ERROR_ACCESS_DENIED && *err != ERROR_PIPE_BUSY)
            break;
    }
    return h;
}

int mux__win_stdio_pipe(HANDLE *parent, HANDLE *child, int child_reads)
{
    /* The child's rights are libuv's: what its slot is for, and the attributes the other way,
     * which SetNamedPipeHandleState and the C runtime's checks of the handle need. */
    DWORD access = child_reads ? GENERIC_READ | FILE_WRITE_ATTRIBUTES
                               : GENERIC_WRITE | FILE_READ_ATTRIBUTES;
    for (int tries = 0; tries < 16; tries++) {
        wchar_t name[64];
        DWORD e;
        HANDLE s = mux__pipe_server(name, &e);
        if (s == INVALID_HANDLE_VALUE)
            return mux__win_errno(e);
        HANDLE c = CreateFileW(name, access, 0, NULL, OPEN_EXISTING, 0, NULL);
        if (c != INVALID_HANDLE_VALUE) {
            *parent = s;
            *child = c;
            return 0;
        }
        e = GetLastError();
        CloseHandle(s);
        if (e != ERROR_PIPE_BUSY) /* busy: someone else connected first */
            return mux__win_errno(e);
    }
    return -EAGAIN;
}

ssize_t mux__pipe_read(HANDLE pipe, char *buf, size_t len, HANDLE event)
{
    DWORD avail = 0, got = 0;
    if (!PeekNamedPipe(pipe, NULL, 0, NULL, &avail, NULL)) {
        int err = mux__pipe_errno(GetLastError());
        return err == -EPIPE ? 0 : err; /* closed, and nothing left: the end */
    }
    if (avail == 0)
        return -EAGAIN;
    if (len > avail)
        len = avail;
    if (len > INT_MAX)
        len = INT_MAX;
    /* The bytes are there, so the read completes in the call; an OVERLAPPED all the same, as
     * the handle is overlapped, and with the event's low bit set, so that the port the handle
     * is bound to gets no completion for it. */
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    ov.hEvent = (HANDLE)((uintptr_t)event | 1);
    BOOL ok = ReadFile(pipe, buf, (DWORD)len, &got, &ov);
    if (!ok && GetLastError() == ERROR_IO_PENDING)
        ok = GetOverlappedResult(pipe, &ov, &got, TRUE);
    if (!ok) {
        int err = mux__pipe_errno(GetLastError());
        return err == -EPIPE ? 0 : err;
    }
    return (ssize_t)got;
}

/* ---- the wake-up descriptor: a loopback pair ---- */

int mux__wakefd_open(int *rfd, int *wfd)
{
    SOCKET sv[2];
    int err = mux__win_sock_pair(sv);
    if (err != 0)
        return err;
    *rfd = (int)sv[0];
    *wfd = (int)sv[1];
    return 0;
}

/* A wake-up byte is sent once per wake-up (the loop drains before it takes the next), so
 * the pair is never near full. Wine's non-blocking send says WSAEWOULDBLOCK now and then all
 * the same (seen under load with other threads sending and the loop receiving): taken as
 * "full, a wake-up is waiting", that lost the wake-up and the loop slept on, so the byte is
 * sent again once the socket says it is writable (at most 1 s, for a pair truly full). */
int mux__wakefd_signal(int wfd)
{
    char one = 1;
    SOCKET s = MUX__SOCK(wfd);
    for (int tries = 0;; tries++) {
        if (send(s, &one, 1, 0) == 1)
            return 0;
        int err = mux__wsa_errno();
        if (err != -EAGAIN || tries == 100)
            return err == -EAGAIN ? 0 : err; /* full: a wake-up is waiting already */
        fd_set w;
        FD_ZERO(&w);
        FD_SET(s, &w);
        struct timeval tv = {0, 10000};
        (void)select(0, NULL, &w, NULL, &tv);
    }
}

void mux__wakefd_drain(int rfd)
{
    char buf[256];
    while (recv(MUX__SOCK(rfd), buf, sizeof buf, 0) == (int)sizeof buf)
        ;
}

void mux__wakefd_close(int rfd, int wfd)
{
    if (wfd >= 0 && wfd != rfd)
        closesocket(MUX__SOCK(wfd));
    closesocket(MUX__SOCK(rfd));
}

/* ---- wall-clock changes: no notification; the loop compares the clocks ---- */

int mux__clocknote_open(void)
{
    return -ENOTSUP;
}

void mux__clocknote_rearm(int fd)
{
    (void)fd;
}

void mux__clocknote_close(int fd)
{
    (void)fd;
}

/* ---- files ---- */

/* Windows keeps no inode, owner or change time as POSIX does: the file index and the volume's
 * serial number stand for the inode and the device, and the last write for both times. */
int mux__path_stat(const char *path, mux_fs_stat_t *out)
{
    HANDLE h = CreateFileA(path, FILE_READ_ATTRIBUTES,
                           FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                           OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, NULL);
    if (h == INVALID_HANDLE_VALUE)
        return mux__win_errno(GetLastError());
    BY_HANDLE_FILE_INFORMATION fi;
    BOOL ok = GetFileInformationByHandle(h, &fi);
    DWORD err = GetLastError();
    CloseHandle(h);
    if (!ok)
        return mux__win_errno(err);
    /* 100 ns units since 1601 to ns since 1970 */
    uint64_t t = ((uint64_t)fi.ftLastWriteTime.dwHighDateTime << 32) | fi.ftLastWriteTime.dwLowDateTime;
    int64_t ns = (int64_t)(t - 116444736000000000ull) * 100;
    *out = (mux_fs_stat_t){
        .size = ((uint64_t)fi.nFileSizeHigh << 32) | fi.nFileSizeLow,
        .ino = ((uint64_t)fi.nFileIndexHigh << 32) | fi.nFileIndexLow,
        .dev = fi.dwVolumeSerialNumber,
        .mtime_ns = ns,
        .ctime_ns = ns,
        .mode = (fi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) ? 0040755u
                : (fi.dwFileAttributes & FILE_ATTRIBUTE_READONLY) ? 0100444u : 0100644u,
        .nlink = fi.nNumberOfLinks,
    };
    return 0;
}
