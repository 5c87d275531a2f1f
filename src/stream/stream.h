/* SPDX-License-Identifier: MIT */
/* Streams (stream.c), to the rest of the stream layer: what channels (chan.c) use to open a
 * stream on a socket handed over from another loop; to the HTTP module, a file send from the
 * system's own file; and to child processes, a stream on a pipe. */
#ifndef IOMUX_STREAM_STREAM_H
#define IOMUX_STREAM_STREAM_H

#include "internal.h"

/* Opens a stream on a socket known to be set up as the library's own are (accepted by a
 * listener). 0 or -errno. */
int mux__stream_open_set_up(struct mux__loop *loop, mux_stream_t *s, mux_os_sock_t sock,
                            int is_unix);
/* Whether streams of `loop` can be opened on pipes: its backend runs their operations
 * (MUX__CAP_PIPE, backend.h "Pipes"; IOCP). */
int mux__stream_pipes(const struct mux__loop *loop);
/* Opens `s` on the pipe `pipe` (a Windows named pipe's handle, bound to no port yet), connected:
 * reads, writes, the shutdown (which closes the pipe: stream.c, mux__stream_pipe_shut) and the
 * close run on it as on a socket; the calls of a socket's (options, the socket itself, a file's
 * send) say -ENOTSUP or -ENOTSOCK. 0, -ENOTSUP where the backend runs no pipes, or -errno. */
int mux__stream_open_pipe(struct mux__loop *loop, mux_stream_t *s, mux_os_sock_t pipe);
/* mux_write_file for a file that is the system's own already (platform.h, mux__file_os: a
 * descriptor on POSIX, a handle's value on Windows), as the HTTP module's file cache keeps
 * them. */
int mux__write_os_file(mux_stream_t *s, mux_write_t *req, const mux_buf_t *bufs, unsigned nbufs,
                       int file, int64_t off, uint64_t len, mux_write_cb cb);

/* Moves the connected stream `from`, idle (its connect callback has run, and nothing was
 * asked of it since: no read, write, shutdown or timeout), to `to` on the same loop: `to`
 * opens with `from`'s socket, and `from` is done at once, its socket left open, with no close
 * callback (the dialer's winning attempt). 0, -EBUSY (`from` is not so), -ENOMEM. */
int mux__stream_move(mux_stream_t *from, mux_stream_t *to);

/* Leaves the open stream `s` out of mux_loop_walk: it is a part of a service's own (a dial's
 * attempt), which the caller never saw and must not close. */
void mux__stream_hide(mux_stream_t *s);

#endif
