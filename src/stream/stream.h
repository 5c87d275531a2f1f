/* SPDX-License-Identifier: MIT */
/* The stream layer's files, to each other. The calls go one way: channels (chan.c) use
 * streams and listeners, streams (stream.c) use listeners, and listeners (listener.c) use
 * neither; all three use the operation layer (op.h) and register their handles with the loop
 * (struct mux__handles, internal.h).
 */
#ifndef IOMUX_STREAM_STREAM_H
#define IOMUX_STREAM_STREAM_H

#include "internal.h"

/* listener.c */
/* Whether `l` (may be NULL) is open and not closing. */
int mux__listener_valid(const mux_listener_t *l);
/* Whether `l` listens on a Unix-domain path. */
int mux__listener_is_unix(const mux_listener_t *l);
/* A descriptor is free again (a stream of `loop` closed): the loop's listeners that ran out of
 * descriptors accept again. */
void mux__listeners_resume(struct mux__loop *loop);

/* stream.c */
/* Opens a stream on a socket known to be set up as the library's own are (accepted by a
 * listener). 0 or -errno. */
int mux__stream_open_set_up(struct mux__loop *loop, mux_stream_t *s, mux_os_sock_t sock,
                            int is_unix);

#endif
