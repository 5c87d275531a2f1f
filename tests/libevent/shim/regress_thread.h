/* SPDX-License-Identifier: MIT */
/* Stand-in for libevent's internal regress_thread.h: deliberately empty. A regression
 * case that needs what the real one declares is libevent's inside, and
 * tests/libevent/extract.py leaves it out with the compiler's message as the reason. */
