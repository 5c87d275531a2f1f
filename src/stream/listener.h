/* SPDX-License-Identifier: MIT */
/* Listeners (listener.c), to the rest of the stream layer. The calls within the layer go one
 * way: channels (chan.c) use streams and listeners, streams (stream.c) use listeners, and
 * listeners use neither; all of them run on the operation layer (op.h) and register their
 * handles with the loop (struct mux__handles, internal.h).
 */
#ifndef IOMUX_STREAM_LISTENER_H
#define IOMUX_STREAM_LISTENER_H

#include "internal.h"

/* Whether `l` (may be NULL) is open and not closing. */
int mux__listener_valid(const mux_listener_t *l);
/* Whether `l` listens on a Unix-domain path. */
int mux__listener_is_unix(const mux_listener_t *l);
/* A descriptor is free again (a stream of `loop` closed): the loop's listeners that ran out of
 * descriptors accept again. */
void mux__listeners_resume(struct mux__loop *loop);

#endif
