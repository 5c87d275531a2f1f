/* SPDX-License-Identifier: MIT */
/* iomux datagram sockets: mux_udp_t (docs/udp.md).
 *
 * A datagram socket is completion-shaped, as a stream is: receiving calls back once per
 * datagram, into the caller's buffers or a pool's, with the sender's address; a send is
 * queued and called back once, when its datagram went (or failed, or the socket was closed
 * first). Underneath, each backend's fastest path: recvmmsg and sendmmsg on the readiness
 * backends (a batch of datagrams per system call), a multishot recvmsg into a buffer ring on
 * io_uring, the system's one-datagram calls elsewhere; UDP GSO and GRO where the kernel has
 * them. The streams' rules hold: every struct is the caller's, reads and sends allocate
 * nothing (the socket's batch arrays are allocated by its first receive and its first send),
 * callbacks never run from inside the call that caused them, and closing is asynchronous:
 * mux_udp_close(u, cb), the memory is the caller's again from `cb` on.
 *
 * IPv4 and IPv6. A datagram longer than its buffer is delivered cut, with MUX_UDP_TRUNC:
 * never silently short.
 */
#ifndef IOMUX_UDP_H
#define IOMUX_UDP_H

#include "iomux.h"
#ifndef _WIN32
#include <netinet/in.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mux_udp mux_udp_t;
typedef struct mux_udp_send mux_udp_send_t;

/* An IPv4 or IPv6 address, as datagrams carry them. */
typedef union mux_udp_addr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
} mux_udp_addr_t;

/* mux_dgram_t.flags */
enum {
    MUX_UDP_TRUNC = 0x1, /* the datagram was longer than its buffer: `len` bytes of it are here */
};

/* A datagram received. Valid during the callback; `base` is the caller's buffer, or, from a
 * pool, lies in the pool buffer `buf`, which is the caller's until mux_bufpool_put(pool, buf). */
typedef struct mux_dgram {
    char *base;                  /* its bytes */
    size_t len;                  /* how many */
    const struct sockaddr *addr; /* the sender */
    socklen_t addrlen;
    unsigned flags; /* MUX_UDP_TRUNC */
    char *buf;      /* from a pool: the buffer to give back; else NULL */
} mux_dgram_t;

/* `status` 0: `d` is a datagram. Else a negative errno (-ECONNREFUSED on a connected socket
 * whose peer is not there, -ENOBUFS when the pool is empty, ...): receiving has stopped, and
 * `d` is NULL. */
typedef void (*mux_udp_recv_cb)(mux_udp_t *u, int status, const mux_dgram_t *d);
/* `status`: 0 when the datagram went, a negative errno (-EMSGSIZE, -ENETUNREACH, ...), or
 * -ECANCELED when the socket was closed first. */
typedef void (*mux_udp_send_cb)(mux_udp_send_t *req, int status);
typedef void (*mux_udp_close_cb)(mux_udp_t *u);

/* Flags of mux_udp_bind. */
enum {
    MUX_UDP_REUSEADDR = 0x1, /* SO_REUSEADDR: several sockets (of one user) on one address */
    MUX_UDP_REUSEPORT = 0x2, /* SO_REUSEPORT: the kernel shares the port's datagrams out */
    MUX_UDP_V6ONLY = 0x4,    /* IPV6_V6ONLY on an IPv6 address */
    MUX_UDP_GRO = 0x8,       /* coalesced receives (UDP GRO) where the kernel has them; the
                                datagrams still come one per callback (docs/udp.md) */
};

#define MUX_UDP_BATCH      32 /* datagrams taken per receive at most */
#define MUX_UDP_SEND_BATCH 64 /* queued datagrams sent per system call at most */
#define MUX_UDP_POOL_HEADROOM                                                                      \
    44                     /* bytes of a pool buffer before the datagram (io_uring's               \
                              header there): a buffer holds size - 44 bytes of one */
#define MUX_UDP_GSO_MAX 64 /* datagrams one mux_udp_send_gso makes at most */

struct mux__udp_rx;
struct mux__udp_tx;

/* A send request: the caller's, passed to mux_udp_send, the caller's again in its callback. */
struct mux_udp_send {
    void *data;
    /* private */
    mux_udp_send_cb cb_;
    mux_udp_send_t *next_;
    const mux_buf_t *bufs_;
    uint32_t nbufs_;
    uint16_t gso_; /* segment size, or 0 */
    uint16_t nseg_;
    int status_;
    socklen_t addrlen_; /* 0: the connected peer */
    mux_udp_addr_t addr_;
    mux_buf_t gbuf_; /* mux_udp_send_gso's buffer */
};

struct mux_udp {
    void *data;
    /* private */
    struct mux__loop *loop_;
    mux_os_sock_t sock_;
    unsigned flags_;
    mux_udp_recv_cb recv_cb_;
    mux_udp_close_cb close_cb_;
    struct mux__udp_rx *rx_;
    struct mux__udp_tx *tx_;
    mux_udp_send_t *wq_head_, *wq_tail_;     /* queued, in order */
    mux_udp_send_t *done_head_, *done_tail_; /* finished, callbacks not yet run */
    size_t wq_bytes_;
    uint32_t wq_count_;
    int rres_, wres_; /* the last receive's and send's results, not yet taken in */
    struct mux__task task_;
    struct mux__op rop_, wop_;
    struct mux__link link_; /* the loop's open sockets, for mux_loop_walk */
};

/* Opens a datagram socket bound to `addr` (IPv4 or IPv6; port 0: any) on `loop`, `u`'s data
 * kept. Returns 0, -EINVAL (bad arguments, unknown flags, a socket the backend cannot
 * watch), -EAFNOSUPPORT, -ENOMEM, or the socket calls' error (-EADDRINUSE, -EACCES, ...). */
int mux_udp_bind(mux_loop_t *loop, mux_udp_t *u, const struct sockaddr *addr, socklen_t addrlen,
                 unsigned flags);
/* Adopts `sock`, an IPv4 or IPv6 datagram socket, bound or not (made non-blocking). On
 * success the handle owns it. Returns 0, -EINVAL (not such a socket), -EBADF, -ENOMEM. */
int mux_udp_open(mux_loop_t *loop, mux_udp_t *u, mux_os_sock_t sock);
/* Connects the socket to `addr` (sends without an address go there, and only its datagrams
 * are received), or, with NULL, dissolves the connection. Returns 0, -EINVAL, or connect's
 * error. */
int mux_udp_connect(mux_udp_t *u, const struct sockaddr *addr, socklen_t addrlen);

/* Starts receiving: each datagram comes to `cb` in one of the `nbufs` buffers of `bufs`
 * (1 .. MUX_UDP_BATCH; the array is copied), which is the caller's again once `cb` returns;
 * up to `nbufs` datagrams are taken per system call. Returns 0, -EINVAL, -EBUSY when already
 * receiving. */
int mux_udp_recv_start(mux_udp_t *u, const mux_buf_t *bufs, unsigned nbufs, mux_udp_recv_cb cb);
/* As mux_udp_recv_start, each datagram in a buffer of `pool` (after MUX_UDP_POOL_HEADROOM
 * bytes), the caller's until given back. Also -EINVAL for a pool serving another loop's
 * kernel, or whose buffers hold no byte past the headroom; -ENOMEM. */
int mux_udp_recv_start_pool(mux_udp_t *u, mux_bufpool_t *pool, mux_udp_recv_cb cb);
/* Stops receiving; no receive callback runs after it returns. Returns 0 or -EINVAL. */
int mux_udp_recv_stop(mux_udp_t *u);

/* Queues a datagram made of the `nbufs` buffers of `bufs` (1 .. 64, their lengths adding up
 * to at most 65,535 bytes) to `addr` (NULL on a connected socket; copied). The array and the
 * buffers must stay untouched until `cb`. Datagrams queued in one loop iteration go out
 * together (one sendmmsg), in order. Returns 0, -EINVAL, -EAFNOSUPPORT (an address of
 * another family), -EDESTADDRREQ (no address, not connected), -EISCONN (an address on a
 * connected socket), -ENOMEM. */
int mux_udp_send(mux_udp_t *u, mux_udp_send_t *req, const mux_buf_t *bufs, unsigned nbufs,
                 const struct sockaddr *addr, socklen_t addrlen, mux_udp_send_cb cb);
/* Queues the `len` bytes at `base` as datagrams of `segment` bytes each (the last may be
 * shorter), at most MUX_UDP_GSO_MAX of them, to `addr`: one send of the whole buffer that the
 * kernel cuts (UDP GSO) where it can, else one datagram per segment. `cb` is called once,
 * when all went, or with the first error. Returns what mux_udp_send returns. */
int mux_udp_send_gso(mux_udp_t *u, mux_udp_send_t *req, const char *base, size_t len,
                     size_t segment, const struct sockaddr *addr, socklen_t addrlen,
                     mux_udp_send_cb cb);
/* Sends a datagram now or not at all: no request, no callback. Returns its length, -EAGAIN
 * (the socket's buffer is full, or sends are queued ahead), or what mux_udp_send and the
 * system's send return. */
ssize_t mux_udp_try_send(mux_udp_t *u, const mux_buf_t *bufs, unsigned nbufs,
                         const struct sockaddr *addr, socklen_t addrlen);
/* Returns the datagrams queued and not yet sent, or -EINVAL. */
int mux_udp_send_queue_count(const mux_udp_t *u);

/* Closes the socket: receiving stops, queued sends are called back with -ECANCELED, the
 * socket is closed, then `cb` (may be NULL). Returns 0, -EINVAL, -EALREADY. */
int mux_udp_close(mux_udp_t *u, mux_udp_close_cb cb);

/* The bound address (getsockname) and the connected peer (getpeername: -ENOTCONN). Return 0
 * or a negative errno. */
int mux_udp_address(const mux_udp_t *u, struct sockaddr *addr, socklen_t *len);
int mux_udp_peer(const mux_udp_t *u, struct sockaddr *addr, socklen_t *len);
/* Options. Each returns 0, -EINVAL, or setsockopt's error. */
int mux_udp_set_broadcast(mux_udp_t *u, int on); /* SO_BROADCAST */
int mux_udp_set_ttl(mux_udp_t *u, int ttl);      /* unicast hops, 1 .. 255 */
int mux_udp_set_multicast_ttl(mux_udp_t *u, int ttl);
int mux_udp_set_multicast_loop(mux_udp_t *u, int on);
/* The interface multicast datagrams leave by: the one with address `iface` (IPv4), or index
 * `iface->sin6_scope_id` (IPv6); NULL: the system's choice. */
int mux_udp_set_multicast_interface(mux_udp_t *u, const struct sockaddr *iface);
/* Joins (join != 0) or leaves multicast group `group`, on the interface with address
 * `iface` (IPv4; NULL: the system's choice) or index `iface->sin6_scope_id` (IPv6). */
int mux_udp_membership(mux_udp_t *u, const struct sockaddr *group, const struct sockaddr *iface,
                       int join);
/* The socket's handle. Returns 0, or -EINVAL for a socket that is not open. */
int mux_udp_socket(const mux_udp_t *u, mux_os_sock_t *sock);
/* Returns the loop of an open or closing socket, or NULL. */
mux_loop_t *mux_udp_loop(const mux_udp_t *u);

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_UDP_H */
