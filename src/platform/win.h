/* SPDX-License-Identifier: MIT */
/* What the Windows files (platform/win.c, the iocp and select backends, spawn_win.c) share
 * beyond the platform seam: the one mapping of Windows error codes to the negative errno values
 * the POSIX build returns, a connected loopback socket pair, and the named pipes of a child's
 * standard handles. Windows only. */
#ifndef IOMUX_PLATFORM_WIN_H
#define IOMUX_PLATFORM_WIN_H

#include <winsock2.h>
#include <windows.h>

#include "iomux.h" /* ssize_t, which MSVC lacks */

/* The negative errno for a Win32 error (GetLastError) or a Winsock one (WSAGetLastError):
 * both share one number space. -EIO for a code with no closer meaning. */
int mux__win_errno(DWORD err);
/* The same for the last Winsock error of this thread. */
int mux__wsa_errno(void);
/* A connected pair of TCP sockets over 127.0.0.1, both non-blocking and overlapped-capable
 * (Windows has no socketpair). 0 or -errno. */
int mux__win_sock_pair(SOCKET sv[2]);
/* A connected pair for a child's standard handle (spawn_win.c): `parent` as the pair above
 * (overlapped, non-blocking, not inherited), `child` a blocking socket without the
 * overlapped attribute, which a program can ReadFile and WriteFile as it does a pipe; not
 * inherited until the spawn says so. 0 or -errno. */
int mux__win_stdio_pair(SOCKET *parent, SOCKET *child);
/* The negative errno for a Win32 error of a pipe's (reads and writes on one, PeekNamedPipe): the
 * other end closed is -EPIPE (ERROR_BROKEN_PIPE, ERROR_NO_DATA, ERROR_PIPE_NOT_CONNECTED,
 * ERROR_HANDLE_EOF), the rest as mux__win_errno says. */
int mux__pipe_errno(DWORD err);
/* A connected pipe for a child's standard handle (spawn_win.c): a named pipe of a unique name,
 * in byte mode, of one instance, refusing remote clients. `parent` is its server end, duplex
 * and overlapped (the iocp backend runs a stream on it); `child` its client end, opened without
 * the overlapped attribute (a child's ReadFile and WriteFile block), to read from when
 * `child_reads` (stdin), else to write to, and not inherited until the spawn says so. 0 or
 * -errno. */
int mux__win_stdio_pipe(HANDLE *parent, HANDLE *child, int child_reads);
/* One read that does not wait from the overlapped pipe `pipe`: up to `len` bytes of those that
 * are there (PeekNamedPipe), read with an OVERLAPPED whose `event` (a manual-reset event of
 * the caller's thread) has its low bit set, so that no completion reaches the port the pipe is
 * bound to. The byte count, 0 at the end (the other end closed, nothing left), -EAGAIN when
 * nothing is there, or -errno. */
ssize_t mux__pipe_read(HANDLE pipe, char *buf, size_t len, HANDLE event);
/* A socket handle passed as the int the API takes (mux_io_init): its value fits 32 bits. */
#define MUX__SOCK(fd) ((SOCKET)(uintptr_t)(unsigned)(fd))

#endif
