/* SPDX-License-Identifier: MIT */
/* What the Windows files (platform/win.c, the iocp and select backends) share beyond the
 * platform seam: the one mapping of Windows error codes to the negative errno values the POSIX
 * build returns, and a connected loopback socket pair. Windows only. */
#ifndef IOMUX_PLATFORM_WIN_H
#define IOMUX_PLATFORM_WIN_H

#include <winsock2.h>
#include <windows.h>

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
/* A socket handle passed as the int the API takes (mux_io_init): its value fits 32 bits. */
#define MUX__SOCK(fd) ((SOCKET)(uintptr_t)(unsigned)(fd))

#endif
