/* SPDX-License-Identifier: MIT */
/* Stand-in for libevent's internal evbuffer-internal.h: only evbuffer_validate_, which
 * libevent's regress_buffer.c defines itself over the chains' fields and which
 * regress_runner.c replaces with a check of what the public API shows. A case that needs
 * the chains themselves is left out by tests/libevent/extract.py with the compiler's message
 * as the reason. */
struct evbuffer;
/* 1 when the buffer is consistent as far as the public API shows, else 0 (with a message). */
int evbuffer_validate_(struct evbuffer *buf);
