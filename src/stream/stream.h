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

#endif
