/* SPDX-License-Identifier: MIT */
/* The headers libevent's regression files include, for the preprocessed definitions
 * tests/libevent/extract.py takes out of them. */
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/time.h>
#ifdef _WIN32 /* what libevent's own regress.c includes there */
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <io.h>
#else
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <netdb.h>
#endif
#include <limits.h>
#include <signal.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <assert.h>
#include <ctype.h>
#include <pthread.h>

#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/event_compat.h>
#include <event2/util.h>
#include <event2/thread.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include "event-internal.h"
#include "evbuffer-internal.h"
#include "regress_testutils.h"

/* glibc spells these members as macros; the preprocessed definitions have them spelled out. */
#undef sa_handler
#undef sa_sigaction
