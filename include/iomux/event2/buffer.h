/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: the evbuffer calls of <event2/buffer.h> a socket server uses.
 * An evbuffer is a queue of chunks: adding a buffer to another moves its chunks without
 * copying, and a bufferevent reads into and writes from the chunks themselves. */
#ifndef IOMUX_EVENT2_BUFFER_H_INCLUDED_
#define IOMUX_EVENT2_BUFFER_H_INCLUDED_

#include <event2/visibility.h>
#include <event2/util.h>

#include <stdarg.h>
#ifndef _WIN32
#include <sys/uio.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;

/* A run of bytes inside an evbuffer, as evbuffer_peek and evbuffer_reserve_space give them. */
#ifdef _WIN32 /* as libevent's there: Windows has no struct iovec */
struct evbuffer_iovec {
    void *iov_base;
    size_t iov_len;
};
#else
#define evbuffer_iovec iovec
#endif

enum evbuffer_eol_style {
    EVBUFFER_EOL_ANY,         /* any run of \r and \n */
    EVBUFFER_EOL_CRLF,        /* \r\n or \n */
    EVBUFFER_EOL_CRLF_STRICT, /* \r\n */
    EVBUFFER_EOL_LF,          /* \n */
    EVBUFFER_EOL_NUL,         /* \0 */
};

EVENT2_EXPORT_SYMBOL struct evbuffer *evbuffer_new(void);
EVENT2_EXPORT_SYMBOL void evbuffer_free(struct evbuffer *buf);
/* Locking: a base and its buffers belong to one thread here, so these do nothing. */
EVENT2_EXPORT_SYMBOL int evbuffer_enable_locking(struct evbuffer *buf, void *lock);
EVENT2_EXPORT_SYMBOL void evbuffer_lock(struct evbuffer *buf);
EVENT2_EXPORT_SYMBOL void evbuffer_unlock(struct evbuffer *buf);
EVENT2_EXPORT_SYMBOL size_t evbuffer_get_length(const struct evbuffer *buf);
EVENT2_EXPORT_SYMBOL size_t evbuffer_get_contiguous_space(const struct evbuffer *buf);
/* Makes room for `datlen` more bytes in the last chunk. Returns 0, or -1. */
EVENT2_EXPORT_SYMBOL int evbuffer_expand(struct evbuffer *buf, size_t datlen);
EVENT2_EXPORT_SYMBOL int evbuffer_add(struct evbuffer *buf, const void *data, size_t datlen);
EVENT2_EXPORT_SYMBOL int evbuffer_prepend(struct evbuffer *buf, const void *data, size_t size);
EVENT2_EXPORT_SYMBOL int evbuffer_add_printf(struct evbuffer *buf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
EVENT2_EXPORT_SYMBOL int evbuffer_add_vprintf(struct evbuffer *buf, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Adds `datlen` bytes the caller keeps at `data`; `cleanupfn` (may be NULL) is called with
 * them and `cleanupfn_arg` once the buffers no longer hold any of them (drained, or freed).
 * The bytes are copied here, where libevent points at them, so the caller's memory is not
 * read after the call; nothing else differs. Returns 0, or -1 (`cleanupfn` not called). */
typedef void (*evbuffer_ref_cleanup_cb)(const void *data, size_t datalen, void *extra);
EVENT2_EXPORT_SYMBOL int evbuffer_add_reference(struct evbuffer *outbuf, const void *data,
                                                size_t datlen, evbuffer_ref_cleanup_cb cleanupfn,
                                                void *cleanupfn_arg);
/* Moves every byte of `inbuf` to the end of `outbuf`, chunks and all. Returns 0, or -1. */
EVENT2_EXPORT_SYMBOL int evbuffer_add_buffer(struct evbuffer *outbuf, struct evbuffer *inbuf);
/* Moves up to `datlen` bytes from the front of `src` to the end of `dst`. Returns the count. */
EVENT2_EXPORT_SYMBOL int evbuffer_remove_buffer(struct evbuffer *src, struct evbuffer *dst,
                                                size_t datlen);
/* Copies up to `datlen` bytes out and drains them. Returns the count, or -1. */
EVENT2_EXPORT_SYMBOL int evbuffer_remove(struct evbuffer *buf, void *data, size_t datlen);
EVENT2_EXPORT_SYMBOL ev_ssize_t evbuffer_copyout(struct evbuffer *buf, void *data_out,
                                                 size_t datlen);
EVENT2_EXPORT_SYMBOL int evbuffer_drain(struct evbuffer *buf, size_t len);
/* Makes the first `size` bytes (all for -1) contiguous and returns them; NULL when fewer. */
EVENT2_EXPORT_SYMBOL unsigned char *evbuffer_pullup(struct evbuffer *buf, ev_ssize_t size);
/* Takes one line off the front, without its end-of-line; malloc'd, for the caller to free. */
EVENT2_EXPORT_SYMBOL char *evbuffer_readln(struct evbuffer *buffer, size_t *n_read_out,
                                           enum evbuffer_eol_style eol_style);
/* Fills up to `n_vec` iovecs with the first `len` bytes (all for -1) without copying;
 * returns how many iovecs that takes. */
EVENT2_EXPORT_SYMBOL int evbuffer_peek(struct evbuffer *buffer, ev_ssize_t len, void *start_at,
                                       struct evbuffer_iovec *vec_out, int n_vec);
/* Space for `size` bytes at the end, filled by the caller, then committed. */
EVENT2_EXPORT_SYMBOL int evbuffer_reserve_space(struct evbuffer *buf, ev_ssize_t size,
                                                struct evbuffer_iovec *vec, int n_vec);
EVENT2_EXPORT_SYMBOL int evbuffer_commit_space(struct evbuffer *buf, struct evbuffer_iovec *vec,
                                               int n_vecs);
/* Reads from / writes to a socket or file. Return the count, or -1 with errno set. */
EVENT2_EXPORT_SYMBOL int evbuffer_read(struct evbuffer *buffer, evutil_socket_t fd, int howmuch);
EVENT2_EXPORT_SYMBOL int evbuffer_write(struct evbuffer *buffer, evutil_socket_t fd);
EVENT2_EXPORT_SYMBOL int evbuffer_write_atmost(struct evbuffer *buffer, evutil_socket_t fd,
                                               ev_ssize_t howmuch);
/* While frozen at the front (start != 0) nothing can be drained; at the end, nothing added. */
EVENT2_EXPORT_SYMBOL int evbuffer_freeze(struct evbuffer *buf, int at_front);
EVENT2_EXPORT_SYMBOL int evbuffer_unfreeze(struct evbuffer *buf, int at_front);

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_BUFFER_H_INCLUDED_ */
