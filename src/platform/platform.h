/* SPDX-License-Identifier: MIT */
/* The platform seam: the only interfaces through which the generic files reach what differs
 * between operating systems. platform/posix.c implements them for Linux, the BSDs and macOS;
 * which system calls it uses is decided by the MUX_HAVE_* macros that CMake finds (a build
 * with IOMUX_PORTABLE_POSIX=ON defines none of them, so Linux runs the path macOS takes).
 * platform/win.c implements them on Windows with Winsock (descriptors there are SOCKETs,
 * whose values fit an int, as Windows promises for handles shared with 32-bit processes).
 * Every function returns 0 (or a descriptor) on success and a negative errno on failure.
 */
#ifndef IOMUX_PLATFORM_H
#define IOMUX_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include "iomux.h"

/* ---- the process ---- */

/* Once per process, before the first loop: the fork handler (pthread_atfork: `atfork_child`
 * runs in every child) on POSIX, Winsock's start-up on Windows. 0 or -errno; a failure is
 * tried again by the next loop's init. */
int mux__platform_init(void (*atfork_child)(void));
/* 0 where processes fork (fork watchers can fire), -ENOTSUP where they do not (Windows). */
int mux__fork_supported(void);
/* The monotonic clock, and the wall clock (nanoseconds since the Unix epoch, plus the tests'
 * simulated jump, mux__test_wall_offset). */
uint64_t mux__mono_ns(void);
int64_t mux__wall_ns(void);
extern int64_t mux__test_wall_offset; /* tests only: a simulated wall-clock jump; 0 */

/* ---- sockets ---- */

/* A new stream socket of `family`: non-blocking, close-on-exec, never raising SIGPIPE. */
int mux__sock_stream(int family);
/* How a listener of a SO_REUSEPORT group steers connections by CPU. */
enum {
    MUX__STEER_NONE,
    MUX__STEER_INCOMING_CPU, /* SO_INCOMING_CPU: this listener takes CPU `cpu`'s */
    MUX__STEER_CPU_BPF,      /* the group's listener k takes CPU k's (a classic BPF program) */
};
/* Memory aligned to `align` bytes, or NULL: posix_memalign, or Windows' _aligned_malloc,
 * whose blocks only _aligned_free takes (the timer heap's array, a channel's ring). */
void *mux__aligned_alloc(size_t align, size_t size);
void mux__aligned_free(void *p);
/* A listening socket bound to `addr` (SO_REUSEADDR for TCP; SO_REUSEPORT and IPV6_V6ONLY
 * when asked; `steer`, MUX__STEER_*, with `cpu`), set up as mux__sock_stream's are. The
 * socket, or -errno: -ENOTSUP for steering the system does not have. */
int mux__sock_listen(const struct sockaddr *addr, socklen_t len, int reuseport, int v6only,
                     int backlog, int steer, int cpu);
/* The address `sock` is bound to (getsockname). */
int mux__sock_name(mux_os_sock_t sock, struct sockaddr *addr, socklen_t *len);
/* Accepts one connection on `lsock`, set up as mux__sock_stream's sockets are. The socket,
 * or -errno (-EAGAIN when none is waiting). */
int mux__sock_accept(mux_os_sock_t lsock);
/* Makes an adopted socket behave as mux__sock_stream's do (non-blocking, no SIGPIPE).
 * Returns its address family (AF_INET, AF_INET6, AF_UNIX), -EINVAL when it is not a
 * socket, or another -errno (-EBADF). */
int mux__sock_adopt(mux_os_sock_t sock);
void mux__sock_close(mux_os_sock_t sock);
/* Closes the handle of a stream opened on a pipe (stream.h, mux__stream_open_pipe): Windows
 * gives a child's standard handles as named pipes, which are handles and no sockets; elsewhere
 * the stream layer opens sockets only, and this closes a descriptor. */
void mux__pipe_close(mux_os_sock_t pipe);
/* Starts a connect: 0 when it completed, -EINPROGRESS while it goes on, or -errno. */
int mux__sock_connect(mux_os_sock_t sock, const struct sockaddr *sa, socklen_t len);
/* The outcome of a connect that went on (SO_ERROR): 0 or -errno. */
int mux__sock_error(mux_os_sock_t sock);
/* One non-blocking receive: the byte count (0 at end of stream) or -errno. */
ssize_t mux__sock_recv(mux_os_sock_t sock, char *buf, size_t len);
/* One non-blocking send from `n` buffers (a system-sized batch of them at most): the byte
 * count or -errno. */
ssize_t mux__sock_send(mux_os_sock_t sock, const mux_buf_t *bufs, uint32_t n);
/* The system's own file for descriptor `fd` (mux_write_file's): the descriptor on POSIX; on
 * Windows, the HANDLE of the C runtime's descriptor, its value as an int (handles fit 32
 * bits), or 0 for a descriptor that has none (sending from it fails with -EBADF). The stream
 * layer's file sends speak these. */
int mux__file_os(int fd);
/* One non-blocking send of up to `len` bytes of the file `fd` (mux__file_os's) from offset
 * `off`: the byte count or -errno; -ENODATA when the file ends before `off` + 1. */
ssize_t mux__sock_sendfile(mux_os_sock_t sock, int fd, uint64_t off, size_t len);
int mux__sock_shutdown(mux_os_sock_t sock);
/* TCP_NODELAY on or off. */
int mux__sock_nodelay(mux_os_sock_t sock, int on);
/* TCP keep-alive on or off, with `idle_s` seconds before the first probe. */
int mux__sock_keepalive(mux_os_sock_t sock, int on, unsigned idle_s);

/* ---- datagram sockets (src/udp/; platform/dgram_posix.c, dgram_win.c) ---- */

struct mux__dmsg; /* backend/backend.h */

/* A new datagram socket of `family`, non-blocking and close-on-exec (on Windows, with the
 * resets that ICMP port-unreachable messages cause switched off, as on POSIX). */
int mux__sock_dgram(int family);
/* Makes an adopted datagram socket behave as mux__sock_dgram's do. Returns its address
 * family, -EINVAL when it is not a datagram socket, or another -errno. */
int mux__sock_dgram_adopt(mux_os_sock_t sock);
int mux__sock_bind(mux_os_sock_t sock, const struct sockaddr *addr, socklen_t len);
/* setsockopt and getsockopt: 0 or -errno. */
int mux__sock_setopt(mux_os_sock_t sock, int level, int name, const void *v, socklen_t len);
int mux__sock_getopt(mux_os_sock_t sock, int level, int name, void *v, socklen_t *len);
int mux__sock_peer(mux_os_sock_t sock, struct sockaddr *addr, socklen_t *len);
/* Connects a datagram socket to `addr`, or, with NULL, dissolves its connection. */
int mux__sock_dgram_connect(mux_os_sock_t sock, const struct sockaddr *addr, socklen_t len);
/* Receives up to `n` datagrams into the messages (recvmmsg where the system has it): how
 * many, or -errno (-EAGAIN: none is waiting). `gro`: the socket coalesces (UDP_GRO), and
 * each message's `gso` says into datagrams of what size. */
int mux__sock_recvmmsg(mux_os_sock_t sock, struct mux__dmsg *m, unsigned n, int gro);
/* Sends the `n` datagrams of the messages in order (sendmmsg): how many went, or the
 * first's -errno (-EAGAIN: the socket's buffer is full). A message with `gso` is cut into
 * datagrams by the kernel (UDP_SEGMENT): only where mux__sock_gso said so. */
int mux__sock_sendmmsg(mux_os_sock_t sock, const struct mux__dmsg *m, unsigned n);
/* 1 when the kernel cuts a send into datagrams itself (UDP GSO) on `sock`, else 0; and
 * whether it coalesces received ones (UDP GRO), which `on` switches. 0 or -errno. */
int mux__sock_gso(mux_os_sock_t sock);
int mux__sock_gro(mux_os_sock_t sock, int on);

/* ---- the loop's wake-up descriptor ---- */

/* An eventfd (both ends the same descriptor) or a non-blocking pipe. */
int mux__wakefd_open(int *rfd, int *wfd);
/* Makes `wfd` readable; async-signal-safe. A full pipe counts as done. */
int mux__wakefd_signal(int wfd);
/* Reads everything written so far. */
void mux__wakefd_drain(int rfd);
/* Closes both ends (one descriptor when they are the same). */
void mux__wakefd_close(int rfd, int wfd);

/* ---- wall-clock changes ---- */

/* A descriptor that becomes readable when someone sets the wall clock (a timerfd with
 * TFD_TIMER_CANCEL_ON_SET), or -ENOTSUP where there is none: the loop then compares the two
 * clocks on each iteration instead. */
int mux__clocknote_open(void);
/* After it was readable: arms it again for the next change. */
void mux__clocknote_rearm(int fd);
void mux__clocknote_close(int fd);

/* ---- files ---- */

/* The status of `path`, symbolic links followed (stat): 0, or -errno (-ENOENT, ...). */
int mux__path_stat(const char *path, mux_fs_stat_t *st);

#endif
