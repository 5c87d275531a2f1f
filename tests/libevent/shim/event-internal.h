/* SPDX-License-Identifier: MIT */
/* Stand-in for libevent's internal event-internal.h: deliberately empty. A regression
 * case that needs what the real one declares is libevent's inside, and
 * tests/libevent/extract.py leaves it out with the compiler's message as the reason. */

struct event_base;
/* libevent's consistency check of a base's lists and counters, which libiomux-event offers
 * too (it aborts with a message when they disagree). */
void event_base_assert_ok_(struct event_base *base);
