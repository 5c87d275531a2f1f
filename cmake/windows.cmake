# SPDX-License-Identifier: MIT
# The Windows build (included by CMakeLists.txt when WIN32): its backends, IOCP first (the
# default) and select, the Windows platform files in place of the POSIX ones (the seam, the
# signal and child watchers, and the HTTP module's file system), and Winsock.
set(IOMUX_BACKENDS iocp select)
set(IOMUX_BACKEND_SOURCES src/backend/iocp.c src/backend/winselect.c)
set(IOMUX_PLATFORM_SOURCES src/platform/win.c src/platform/thread_win.c src/platform/dgram_win.c
  src/signal_win.c src/child_win.c src/process/spawn_win.c src/fs_event_win.c)
set(IOMUX_HTTP_SOURCES src/http/parser.c src/http/static.c src/http/mime.c src/http/server.c
  src/http/files.c src/http/listing.c src/http/fs_win.c)
# Windows 10's declarations (GetSystemTimePreciseAsFileTime, WSA_FLAG_NO_HANDLE_INHERIT).
set(IOMUX_FEATURE_MACROS _WIN32_WINNT=0x0A00 WIN32_LEAN_AND_MEAN)
set(IOMUX_PLATFORM_DEFS)
list(APPEND IOMUX_LINK_LIBS ws2_32 mswsock ntdll)
