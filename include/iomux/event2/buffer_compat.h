/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: <event2/buffer_compat.h>, libevent 1.x's evbuffer names that
 * libevent 2.1 keeps for old programs (tmux uses them throughout). */
#ifndef IOMUX_EVENT2_BUFFER_COMPAT_H_INCLUDED_
#define IOMUX_EVENT2_BUFFER_COMPAT_H_INCLUDED_

#include <event2/visibility.h>
#include <event2/util.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;

/* Takes one line off the front, ended by any run of \r and \n (EVBUFFER_EOL_ANY); malloc'd,
 * for the caller to free; NULL when no whole line is there. */
EVENT2_EXPORT_SYMBOL char *evbuffer_readline(struct evbuffer *buffer);

/* Called after every change of the buffer's length with the length before and after. */
typedef void (*evbuffer_cb)(struct evbuffer *buffer, size_t old_len, size_t new_len, void *arg);
/* Replaces the buffer's callback (NULL: none). Returns 0, or -1 for a NULL buffer. */
EVENT2_EXPORT_SYMBOL int evbuffer_setcb(struct evbuffer *buffer, evbuffer_cb cb, void *cbarg);

/* The first occurrence of `what` (`len` bytes), made contiguous with what comes before it:
 * a pointer into the buffer, or NULL when it is not there. */
EVENT2_EXPORT_SYMBOL unsigned char *evbuffer_find(struct evbuffer *buffer,
                                                  const unsigned char *what, size_t len);

#define EVBUFFER_LENGTH(x) evbuffer_get_length(x)
#define EVBUFFER_DATA(x) evbuffer_pullup((x), -1)

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_BUFFER_COMPAT_H_INCLUDED_ */
