/* SPDX-License-Identifier: MIT */
/* The platform seam's datagram sockets on Windows (platform.h), with Winsock.
 *
 * What differs from POSIX, and what this file does about it:
 * - There is no recvmmsg or sendmmsg: a batch is a loop of non-blocking WSARecvFrom and
 *   WSASendTo calls until the batch is done or the socket says WSAEWOULDBLOCK.
 * - A datagram longer than its buffer fails the receive with WSAEMSGSIZE, the buffer filled
 *   with its first bytes: that is a datagram cut (MUX__DMSG_TRUNC), as MSG_TRUNC says on POSIX.
 * - An ICMP port-unreachable message makes the next receive on an unconnected socket fail
 *   with WSAECONNRESET, which POSIX reports on connected sockets only: switched off with
 *   SIO_UDP_CONNRESET at creation and adoption, as libuv does. So a connected socket is not
 *   told -ECONNREFUSED here (docs/udp.md, "Windows").
 * - A connected datagram socket is dissolved by a connect to the family's any address and
 *   port 0.
 * - No GSO or GRO here: sends of a GSO request go one datagram per segment (udp.c).
 */
#include <errno.h>
#include <string.h>

#include <winsock2.h>
#include <mswsock.h>
#include <ws2tcpip.h>

#include "backend/backend.h"
#include "platform/platform.h"
#include "platform/win.h"

#ifndef SIO_UDP_CONNRESET
#define SIO_UDP_CONNRESET _WSAIOW(IOC_VENDOR, 12)
#endif

/* Non-blocking, and no ICMP resets on an unconnected socket (above): 0 or -errno. */
static int mux__dgram_setup(SOCKET s)
{
    u_long on = 1;
    BOOL off = FALSE;
    DWORD got = 0;
    if (ioctlsocket(s, FIONBIO, &on) != 0 ||
        WSAIoctl(s, SIO_UDP_CONNRESET, &off, sizeof off, NULL, 0, &got, NULL, NULL) != 0)
        return mux__wsa_errno();
    return 0;
}

int mux__sock_dgram(int family)
{
    SOCKET s = WSASocketW(family, SOCK_DGRAM, IPPROTO_UDP, NULL, 0,
                          WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
    if (s == INVALID_SOCKET)
        return mux__wsa_errno();
    int err = mux__dgram_setup(s);
    if (err != 0) {
        closesocket(s);
        return err;
    }
    return (int)s;
}

/* The stream layer's mux__sock_adopt takes stream sockets only on Windows: a datagram
 * socket's own, with the setup of the ones this file creates. */
int mux__sock_dgram_adopt(mux_os_sock_t sock)
{
    WSAPROTOCOL_INFOW info;
    int len = sizeof info;
    if (getsockopt(sock, SOL_SOCKET, SO_PROTOCOL_INFOW, (char *)&info, &len) != 0) {
        int err = mux__wsa_errno();
        return err == -ENOTSOCK ? -EINVAL : err;
    }
    if (info.iSocketType != SOCK_DGRAM)
        return -EINVAL;
    int err = mux__dgram_setup(sock);
    return err != 0 ? err : info.iAddressFamily;
}

int mux__sock_bind(mux_os_sock_t sock, const struct sockaddr *addr, socklen_t len)
{
    return bind(sock, addr, len) == 0 ? 0 : mux__wsa_errno();
}

int mux__sock_setopt(mux_os_sock_t sock, int level, int name, const void *v, socklen_t len)
{
    return setsockopt(sock, level, name, (const char *)v, len) == 0 ? 0 : mux__wsa_errno();
}

int mux__sock_getopt(mux_os_sock_t sock, int level, int name, void *v, socklen_t *len)
{
    return getsockopt(sock, level, name, (char *)v, len) == 0 ? 0 : mux__wsa_errno();
}

int mux__sock_peer(mux_os_sock_t sock, struct sockaddr *addr, socklen_t *len)
{
    return getpeername(sock, addr, len) == 0 ? 0 : mux__wsa_errno();
}

int mux__sock_dgram_connect(mux_os_sock_t sock, const struct sockaddr *addr, socklen_t len)
{
    struct sockaddr_storage any;
    if (!addr) {
        int slen = sizeof any;
        if (getsockname(sock, (struct sockaddr *)&any, &slen) != 0)
            return mux__wsa_errno();
        int family = any.ss_family;
        memset(&any, 0, sizeof any);
        any.ss_family = (ADDRESS_FAMILY)family;
        addr = (const struct sockaddr *)&any;
        len = family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    }
    return connect(sock, addr, len) == 0 ? 0 : mux__wsa_errno();
}

int mux__sock_gso(mux_os_sock_t sock)
{
    (void)sock;
    return 0;
}

int mux__sock_gro(mux_os_sock_t sock, int on)
{
    (void)sock;
    (void)on;
    return -ENOTSUP;
}

int mux__sock_recvmmsg(mux_os_sock_t sock, struct mux__dmsg *m, unsigned n, int gro)
{
    (void)gro;
    unsigned k = 0;
    while (k < n) {
        struct mux__dmsg *d = &m[k];
        WSABUF b = {d->cap, d->buf};
        DWORD got = 0, flags = 0;
        INT alen = (INT)d->addrlen;
        int trunc = 0;
        if (WSARecvFrom(sock, &b, 1, &got, &flags, d->addr, &alen, NULL, NULL) != 0) {
            int e = WSAGetLastError();
            if (e == WSAEMSGSIZE) {
                trunc = 1; /* the buffer holds its first bytes */
                got = d->cap;
            } else if (k > 0) {
                break; /* the error comes again with the next receive, unless it was EAGAIN */
            } else {
                return mux__win_errno((DWORD)e);
            }
        }
        d->len = got;
        d->flags = trunc ? MUX__DMSG_TRUNC : 0;
        d->addrlen = (uint32_t)alen;
        d->gso = 0;
        k++;
    }
    return (int)k;
}

int mux__sock_sendmmsg(mux_os_sock_t sock, const struct mux__dmsg *m, unsigned n)
{
    unsigned k = 0;
    while (k < n) {
        const struct mux__dmsg *d = &m[k];
        DWORD sent = 0;
        if (WSASendTo(sock, (WSABUF *)(uintptr_t)d->bufs, d->nbufs, &sent, 0, d->addr,
                      d->addr ? (int)d->addrlen : 0, NULL, NULL) != 0) {
            if (k > 0)
                break;
            return mux__wsa_errno();
        }
        k++;
    }
    return (int)k;
}
