/* SPDX-License-Identifier: MIT */
/* Streams (stream.c), to the rest of the stream layer: what channels (chan.c) use to open a
 * stream on a socket handed over from another loop. */
#ifndef IOMUX_STREAM_STREAM_H
#define IOMUX_STREAM_STREAM_H

#include "internal.h"

/* Opens a stream on a socket known to be set up as the library's own are (accepted by a
 * listener). 0 or -errno. */
int mux__stream_open_set_up(struct mux__loop *loop, mux_stream_t *s, mux_os_sock_t sock,
                            int is_unix);

/* Moves the connected stream `from`, idle (its connect callback has run, and nothing was
 * asked of it since: no read, write, shutdown or timeout), to `to` on the same loop: `to`
 * opens with `from`'s socket, and `from` is done at once, its socket left open, with no close
 * callback (the dialer's winning attempt). 0, -EBUSY (`from` is not so), -ENOMEM. */
int mux__stream_move(mux_stream_t *from, mux_stream_t *to);

/* Leaves the open stream `s` out of mux_loop_walk: it is a part of a service's own (a dial's
 * attempt), which the caller never saw and must not close. */
void mux__stream_hide(mux_stream_t *s);

#endif
