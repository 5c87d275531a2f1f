/* SPDX-License-Identifier: MIT */
/* Stand-in for the BSD <sys/queue.h> that libevent's regress.c includes, which Windows lacks
 * (libevent ships a copy of its own for Windows): deliberately empty. A case that needs its
 * lists is left out by tests/libevent/extract.py, with the compiler's message as the reason.
 * On the include path of the Windows build of the cases only. */
