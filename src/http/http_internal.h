/* SPDX-License-Identifier: MIT */
/* Private to the HTTP module: what the static-file server is made of, as pure functions
 * (src/http/static.c), each tested on its own (tests/test_http_static.c). */
#ifndef IOMUX_HTTP_INTERNAL_H
#define IOMUX_HTTP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "iomux/http.h"

/* The file path a request target names, relative to the server's root: the target's path
 * (up to '?' or '#'), percent-decoded, without empty and "." segments, with ".." taking the
 * segment before it away. Writes it NUL-terminated to out[0 .. cap) ("" for the root) and
 * sets *dir when the target's path ended with '/' (the caller looks for index.html).
 * Returns 0, or what to answer:
 *   -EINVAL        400: not origin-form, a bad %-escape, an encoded NUL;
 *   -EACCES        403: ".." above the root, an encoded '/' (a name the file system would
 *                  read as two), or a segment that starts with '.' other than "." and ".."
 *                  (hidden files are not served);
 *   -ENAMETOOLONG  414: longer than `cap` - 1.
 * Symbolic links that lead out of the root are the caller's to refuse (openat2 with
 * RESOLVE_BENEATH, or a check of the real path). */
int mux__http_path(const char *target, size_t len, char *out, size_t cap, int *dir);

/* The media type for a file name, by its extension (case-insensitive), with a charset for
 * text; application/octet-stream for anything else. */
const char *mux__http_mime(const char *name);

/* A Range field for a resource of `size` bytes (RFC 9110, 14.2). Returns 1 with
 * [*first, *last] set for a single satisfiable byte range (answer 206); 0 when it is to be
 * ignored (not "bytes=", several ranges, bad syntax: answer 200 with the whole); -1 when it
 * is unsatisfiable (answer 416 with Content-Range: bytes *\/size). */
int mux__http_range(mux_http_str_t v, uint64_t size, uint64_t *first, uint64_t *last);

/* IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT", 29 bytes and a NUL) of a time in seconds
 * since the epoch. Returns the length. */
size_t mux__http_date(int64_t t, char out[32]);
/* Parses an HTTP date in any of the three forms RFC 9110 (5.6.7) says a recipient must
 * take: IMF-fixdate, RFC 850, asctime. Returns 0 with *t set, or -EINVAL. */
int mux__http_date_parse(mux_http_str_t s, int64_t *t);

/* A strong entity tag for a file of `size` bytes last changed at `mtime_ns`, with its
 * quotes. Returns the length. */
size_t mux__http_etag(uint64_t size, int64_t mtime_ns, char out[48]);
/* Whether an If-None-Match value matches `etag` (quoted): "*", or one of its entity tags
 * by the weak comparison (W/ ignored). 1 or 0; a malformed list matches nothing. */
int mux__http_etag_match(mux_http_str_t inm, const char *etag, size_t etag_len);

/* tchar (RFC 9110, 5.6.2): 1 for the bytes of a token (parser.c). */
extern const uint8_t mux__http_tchar[256];

/* mux_http_respond, or mux_http_respond_file when fd >= 0 (then `body` is NULL and `len` the
 * file's bytes from `off`), for fields the library made (server.c): not checked again. With
 * fd < 0 and a `done`, `body` is not copied but lent until `done` is called. */
int mux__http_respond_own(mux_http_exchange_t *x, int status, const mux_http_header_t *headers,
                          uint32_t nheaders, const void *body, size_t len, int fd, uint64_t off,
                          void (*done)(void *arg, int status), void *arg);

/* The loop an exchange's server runs on, or NULL (server.c). */
mux_loop_t *mux__http_exchange_loop(const mux_http_exchange_t *x);

/* `s` equals `lit`, which is lower case, without regard to case (server.c). */
int mux__http_same(mux_http_str_t s, const char *lit);

/* Reports a failure of the server's own while answering `x` (server.c): its on_error. */
void mux__http_exchange_error(const mux_http_exchange_t *x, int err);

#endif
