/* SPDX-License-Identifier: MIT */
/* The platform seam's datagram sockets on POSIX systems (platform.h).
 *
 * What differs between them, and what this file does about it:
 * - recvmmsg and sendmmsg (Linux 2.6.33 and 3.0, FreeBSD 11, NetBSD 7) move a batch of
 *   datagrams per system call; elsewhere (macOS, the portable build) a loop of recvmsg and
 *   sendmsg does, until the batch is done or the socket says EAGAIN.
 * - A datagram longer than its buffer is cut, and recvmsg says so with MSG_TRUNC in the
 *   message's flags: it becomes MUX__DMSG_TRUNC, never a silent short datagram.
 * - UDP GSO (Linux 4.18: UDP_SEGMENT, a control message per send) hands the kernel one buffer
 *   that it cuts into datagrams of the given size, which costs one trip through the stack
 *   instead of one per datagram. UDP GRO (Linux 5.0: UDP_GRO, a socket option) coalesces
 *   datagrams of one flow arriving together into one receive, with a control message giving
 *   their size. Both are probed per socket: a kernel without them says ENOPROTOOPT.
 * - A connected datagram socket is dissolved by a connect to AF_UNSPEC (POSIX), which Linux
 *   and the BSDs answer with success (macOS: EAFNOSUPPORT, after doing it).
 */
#ifndef MUX_HAVE_SOCK_FLAGS /* CMake defines what it found, as 1 */
#define MUX_HAVE_SOCK_FLAGS 0
#endif
#ifndef MUX_HAVE_MMSG
#define MUX_HAVE_MMSG 0
#endif
#ifndef MUX_HAVE_UDP_GSO
#define MUX_HAVE_UDP_GSO 0
#endif

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#if MUX_HAVE_UDP_GSO
#include <netinet/udp.h>
#endif

#include "backend/backend.h"
#include "platform/platform.h"

#define MUX__DGRAM_BATCH 64 /* datagrams per system call at most */

int mux__sock_dgram(int family)
{
#if MUX_HAVE_SOCK_FLAGS
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    return fd < 0 ? -errno : fd;
#else
    int fd = socket(family, SOCK_DGRAM, 0);
    if (fd < 0)
        return -errno;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
#endif
}

int mux__sock_dgram_adopt(mux_os_sock_t sock)
{
    int type = 0;
    socklen_t tlen = sizeof type;
    if (getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0)
        return errno == ENOTSOCK ? -EINVAL : -errno;
    return type == SOCK_DGRAM ? mux__sock_adopt(sock) : -EINVAL;
}

int mux__sock_bind(mux_os_sock_t sock, const struct sockaddr *addr, socklen_t len)
{
    return bind(sock, addr, len) == 0 ? 0 : -errno;
}

int mux__sock_setopt(mux_os_sock_t sock, int level, int name, const void *v, socklen_t len)
{
    return setsockopt(sock, level, name, v, len) == 0 ? 0 : -errno;
}

int mux__sock_getopt(mux_os_sock_t sock, int level, int name, void *v, socklen_t *len)
{
    return getsockopt(sock, level, name, v, len) == 0 ? 0 : -errno;
}

int mux__sock_peer(mux_os_sock_t sock, struct sockaddr *addr, socklen_t *len)
{
    return getpeername(sock, addr, len) == 0 ? 0 : -errno;
}

int mux__sock_dgram_connect(mux_os_sock_t sock, const struct sockaddr *addr, socklen_t len)
{
    struct sockaddr none;
    if (!addr) {
        memset(&none, 0, sizeof none);
        none.sa_family = AF_UNSPEC;
        addr = &none;
        len = sizeof none;
    }
    if (connect(sock, addr, len) == 0)
        return 0;
    if (addr == &none && errno == EAFNOSUPPORT)
        return 0; /* macOS: dissolved all the same */
    return -errno;
}

int mux__sock_gso(mux_os_sock_t sock)
{
#if MUX_HAVE_UDP_GSO
    int size = 0;
    socklen_t len = sizeof size;
    return getsockopt(sock, SOL_UDP, UDP_SEGMENT, &size, &len) == 0;
#else
    (void)sock;
    return 0;
#endif
}

int mux__sock_gro(mux_os_sock_t sock, int on)
{
#if MUX_HAVE_UDP_GSO
    return setsockopt(sock, SOL_UDP, UDP_GRO, &on, sizeof on) == 0 ? 0 : -errno;
#else
    (void)sock;
    (void)on;
    return -ENOTSUP;
#endif
}

/* The message header of `m` for recvmsg: one buffer, the sender's address, and, with
 * `ctl`, room for the GRO segment size. */
static void mux__dgram_rhdr(struct msghdr *h, struct iovec *iov, struct mux__dmsg *m, char *ctl,
                            size_t ctllen)
{
    iov->iov_base = m->buf;
    iov->iov_len = m->cap;
    memset(h, 0, sizeof *h);
    h->msg_name = m->addr;
    h->msg_namelen = m->addrlen;
    h->msg_iov = iov;
    h->msg_iovlen = 1;
    h->msg_control = ctl;
    h->msg_controllen = ctl ? ctllen : 0;
}

/* What recvmsg said of `m`: its length, whether it was cut, the GRO segment size. */
static void mux__dgram_rdone(struct mux__dmsg *m, const struct msghdr *h, size_t got)
{
    m->len = (uint32_t)(got < m->cap ? got : m->cap);
    m->flags = (uint16_t)(h->msg_flags & MSG_TRUNC ? MUX__DMSG_TRUNC : 0);
    m->addrlen = h->msg_namelen;
    m->gso = 0;
#if MUX_HAVE_UDP_GSO
    if (h->msg_controllen)
        for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR((struct msghdr *)h, c))
            if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                int seg;
                memcpy(&seg, CMSG_DATA(c), sizeof seg);
                m->gso = (uint16_t)seg;
            }
#endif
}

#define MUX__RCTL CMSG_SPACE(sizeof(int))

int mux__sock_recvmmsg(mux_os_sock_t sock, struct mux__dmsg *m, unsigned n, int gro)
{
    if (n > MUX__DGRAM_BATCH)
        n = MUX__DGRAM_BATCH;
    union {
        struct cmsghdr align;
        char b[MUX__DGRAM_BATCH][MUX__RCTL];
    } ctl;
#if MUX_HAVE_MMSG
    struct mmsghdr h[MUX__DGRAM_BATCH];
    struct iovec iov[MUX__DGRAM_BATCH];
    for (unsigned i = 0; i < n; i++)
        mux__dgram_rhdr(&h[i].msg_hdr, &iov[i], &m[i], gro ? ctl.b[i] : NULL, MUX__RCTL);
    int r;
    while ((r = recvmmsg(sock, h, n, 0, NULL)) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    for (int i = 0; i < r; i++)
        mux__dgram_rdone(&m[i], &h[i].msg_hdr, h[i].msg_len);
    return r;
#else
    unsigned k = 0;
    while (k < n) {
        struct msghdr h;
        struct iovec iov;
        mux__dgram_rhdr(&h, &iov, &m[k], gro ? ctl.b[k] : NULL, MUX__RCTL);
        ssize_t r = recvmsg(sock, &h, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (k > 0) /* the error comes again with the next receive, unless it was EAGAIN */
                break;
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
        mux__dgram_rdone(&m[k++], &h, (size_t)r);
    }
    return (int)k;
#endif
}

#define MUX__SCTL CMSG_SPACE(sizeof(uint16_t))

/* The message header of `m` for sendmsg, with its GSO control message in `ctl`. */
static void mux__dgram_shdr(struct msghdr *h, const struct mux__dmsg *m, char *ctl)
{
    memset(h, 0, sizeof *h);
    h->msg_name = m->addr;
    h->msg_namelen = m->addr ? m->addrlen : 0;
    h->msg_iov = (struct iovec *)(uintptr_t)m->bufs; /* laid out alike (posix.c) */
    h->msg_iovlen = m->nbufs;
#if MUX_HAVE_UDP_GSO
    if (m->gso) {
        h->msg_control = ctl;
        h->msg_controllen = MUX__SCTL;
        struct cmsghdr *c = CMSG_FIRSTHDR(h);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t seg = m->gso;
        memcpy(CMSG_DATA(c), &seg, sizeof seg);
    }
#else
    (void)ctl;
#endif
}

int mux__sock_sendmmsg(mux_os_sock_t sock, const struct mux__dmsg *m, unsigned n)
{
    if (n > MUX__DGRAM_BATCH)
        n = MUX__DGRAM_BATCH;
    union {
        struct cmsghdr align;
        char b[MUX__DGRAM_BATCH][MUX__SCTL];
    } ctl;
#if MUX_HAVE_MMSG
    struct mmsghdr h[MUX__DGRAM_BATCH];
    for (unsigned i = 0; i < n; i++)
        mux__dgram_shdr(&h[i].msg_hdr, &m[i], ctl.b[i]);
    int r;
    while ((r = sendmmsg(sock, h, n, 0)) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    return r;
#else
    unsigned k = 0;
    while (k < n) {
        struct msghdr h;
        mux__dgram_shdr(&h, &m[k], ctl.b[k]);
        if (sendmsg(sock, &h, 0) < 0) {
            if (errno == EINTR)
                continue;
            if (k > 0)
                break;
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
        k++;
    }
    return (int)k;
#endif
}
