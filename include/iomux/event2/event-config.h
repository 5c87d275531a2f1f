/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: the platform macros of <event2/event-config.h> that
 * programs test, for the systems libiomux-event builds on. */
#ifndef IOMUX_EVENT2_EVENT_CONFIG_H_INCLUDED_
#define IOMUX_EVENT2_EVENT_CONFIG_H_INCLUDED_

#ifdef _WIN32
#define EVENT__HAVE_SYS_TYPES_H 1
#define EVENT__HAVE_STDINT_H 1
#define EVENT__HAVE_STDARG_H 1
#define EVENT__HAVE_FCNTL_H 1
#define EVENT__HAVE_WINSOCK2_H 1
#define EVENT__HAVE_WS2TCPIP_H 1
#define EVENT__NUMERIC_VERSION 0x02010c00
#define EVENT__VERSION "2.1.12-stable"
#else
#define EVENT__HAVE_SYS_TIME_H 1
#define EVENT__HAVE_SYS_TYPES_H 1
#define EVENT__HAVE_SYS_SOCKET_H 1
#define EVENT__HAVE_UNISTD_H 1
#define EVENT__HAVE_FCNTL_H 1
#define EVENT__HAVE_NETINET_IN_H 1
#define EVENT__HAVE_STDINT_H 1
#define EVENT__HAVE_STDARG_H 1
#define EVENT__HAVE_SETRLIMIT 1
#define EVENT__HAVE_GETTIMEOFDAY 1
#define EVENT__HAVE_PTHREADS 1
#define EVENT__NUMERIC_VERSION 0x02010c00
#define EVENT__VERSION "2.1.12-stable"
#endif

#endif /* IOMUX_EVENT2_EVENT_CONFIG_H_INCLUDED_ */
