/* SPDX-License-Identifier: MIT */
/* Stand-in for <event2/bufferevent_compat.h>, which libiomux-event does not offer: the regression cases that
 * need it are left out, with the compiler's message as the reason. */
