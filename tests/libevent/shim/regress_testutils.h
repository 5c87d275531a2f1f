/* SPDX-License-Identifier: MIT */
/* Stand-in for libevent's regress_testutils.h: of its helpers, only the one that asks a
 * listener for its address (regress_runner.c), not the DNS test server. A case that needs
 * the rest is left out by tests/libevent/extract.py with the compiler's message as the
 * reason. */
#include <event2/listener.h>
#include <event2/util.h>

struct sockaddr;
/* The listener's local address (getsockname): 0, or -1. */
int regress_get_listener_addr(struct evconnlistener *lev, struct sockaddr *sa,
                              ev_socklen_t *socklen);
