/* SPDX-License-Identifier: MIT */
/* The system's side of libiomux-event: the few socket and clock calls the emulation makes
 * itself, on top of iomux's public API (sys_posix.c, sys_win.c). Each answers as its POSIX
 * call does: a count, a socket or 0, or -1 with errno set. On Windows errno gets the POSIX
 * code of the Winsock error, which also stays where EVUTIL_SOCKET_ERROR finds it, as a
 * libevent program there expects. */
#ifndef IOMUX_EVENT_SYS_H
#define IOMUX_EVENT_SYS_H

#include <stdint.h>

#include <event2/buffer.h>
#include <event2/util.h>

/* read(2) of a socket (on POSIX of any descriptor). */
ev_ssize_t evx_sys_read(evutil_socket_t fd, void *buf, size_t len);
/* A gathering send that raises no SIGPIPE (on POSIX writev for what is not a socket). */
ev_ssize_t evx_sys_writev(evutil_socket_t fd, const struct evbuffer_iovec *v, int n);
/* 1 when the peer has shut its side down: a non-blocking peek reads nothing. */
int evx_sys_peer_closed(evutil_socket_t fd);
/* socket(2) of a stream socket, bind(2) and listen(2). */
evutil_socket_t evx_sys_stream_socket(int family);
int evx_sys_bind(evutil_socket_t fd, const struct sockaddr *sa, socklen_t len);
int evx_sys_listen(evutil_socket_t fd, int backlog);
/* SO_REUSEADDR where it means what POSIX says (rebinding a port whose old connections
 * linger); on Windows, where it lets a socket take a port in use, nothing (as libevent). */
int evx_sys_reuseaddr(evutil_socket_t fd);
/* accept(2), the new socket non-blocking and close-on-exec as asked. */
evutil_socket_t evx_sys_accept(evutil_socket_t fd, struct sockaddr *sa, socklen_t *len,
                               int nonblock, int cloexec);
/* A second socket for the same connection, close-on-exec (F_DUPFD_CLOEXEC). */
evutil_socket_t evx_sys_dup(evutil_socket_t fd);
/* 1 for a socket, 0 for another descriptor a bufferevent can read and write (POSIX's pipes,
 * ptys, FIFOs), or -errno: a closed descriptor, or on Windows a handle that is no socket
 * (-EINVAL; its pipes and files take no bufferevent there). */
int evx_sys_is_socket(evutil_socket_t fd);
int evx_sys_close(evutil_socket_t fd);
int evx_sys_nonblock(evutil_socket_t fd);
int evx_sys_cloexec(evutil_socket_t fd);
int evx_sys_socketpair(int family, int type, int protocol, evutil_socket_t sv[2]);
/* setsockopt of an int option to 1. */
int evx_sys_opt_on(evutil_socket_t fd, int level, int name);
/* The hard limit on descriptors: no socket number reaches it (INT_MAX for none). */
long evx_sys_fd_limit(void);
int evx_sys_gettimeofday(struct timeval *tv);
/* Milliseconds on the monotonic clock (the rate limits' ticks). */
uint64_t evx_sys_mono_ms(void);
/* Whether the system has a coarse monotonic clock, cheaper to read than the precise one
 * (Linux's CLOCK_MONOTONIC_COARSE; Windows' tick count, which libevent takes there). */
int evx_sys_mono_coarse_ok(void);
/* Nanoseconds on the monotonic clock, the coarse one when asked and there is one; 0 when
 * the clock cannot be read. */
uint64_t evx_sys_mono_ns(int coarse);
/* `n` bytes of the system's random generator. 0 or -1. */
int evx_sys_random(void *buf, size_t n);

#endif
