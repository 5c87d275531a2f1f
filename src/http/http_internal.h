/* SPDX-License-Identifier: MIT */
/* Private to the HTTP module: what the static-file server is made of, as pure functions
 * (src/http/static.c, mime.c), each tested on its own (tests/test_http_static.c), and the
 * directory listing (listing.c). */
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
 *                  (hidden files are not served), unless `flags` has
 *                  MUX_HTTP_STATIC_DOTFILES or the segment is ".well-known" right below the
 *                  root (RFC 8615: ACME challenges live there);
 *   -ENAMETOOLONG  414: longer than `cap` - 1.
 * Symbolic links that lead out of the root are the caller's to refuse (openat2 with
 * RESOLVE_BENEATH, or a check of the real path). */
int mux__http_path(const char *target, size_t len, char *out, size_t cap, int *dir, unsigned flags);

/* Whether Windows would read the path `rel` (as mux__http_path made it) as named, as IIS and
 * nginx for Windows check it: 0, or -ENOENT (404) for a segment with a byte Windows reads
 * otherwise or refuses in names (a control byte, a backslash, : * ? " < > |: a separator, a
 * drive, a stream such as "::$DATA"), one that ends with a dot or a space (Windows drops them:
 * "index.html." is index.html), or a device name (CON, PRN, AUX, NUL, COM0-9, LPT0-9, their
 * superscript forms, CONIN$, CONOUT$, CLOCK$, with any extension). Short (8.3) names are
 * the file system's to find (fs_win.c). Pure, so that Linux tests it too. */
int mux__http_win_name(const char *rel);

/* Media types by file extension (mime.c): the built-in table, and the tables loaded from a
 * mime.types file over it. */
struct mux__mime;
/* A table of the built-in types with those of `path` (mime.types' format: a type, then its
 * extensions, '#' comments) over them, a later line winning over an earlier one. A text/
 * type without parameters gets "; charset=utf-8". Lines that are not well formed are
 * skipped. 0 with *out set (free it with mux__mime_free), or -errno of reading the file,
 * -EFBIG (over 4 MB), -ENOMEM. */
int mux__mime_load(struct mux__mime **out, const char *path);
void mux__mime_free(struct mux__mime *m);
/* The media type for a file name by its last extension (case-insensitive; a name that
 * starts with its only '.' has none), and its length in *len (may be NULL):
 * application/octet-stream when it has none or the table does not know it. `m` NULL: the
 * built-in table alone. */
const char *mux__mime_find(const struct mux__mime *m, const char *name, size_t *len);
/* The built-in table, as `ext` and `type` pairs sorted by `ext` (a test checks the order
 * that its binary search needs). */
extern const struct mux__mime_builtin {
    const char *ext, *type;
} mux__mime_builtins[];
extern const size_t mux__mime_nbuiltins;

/* A byte range, and its place in the request (1 for the first listed). */
typedef struct mux__range {
    uint64_t first, last;
    unsigned order;
} mux__range_t;
/* A Range field for a resource of `size` bytes (RFC 9110, 14.1.2 and 14.2). Returns:
 *   n > 0  the satisfiable ranges in out[0 .. n) (answer 206), with those that overlap or
 *          touch merged, in the order of the first of each in the request;
 *   0      the field is to be ignored (not "bytes=", bad syntax, a range whose last byte
 *          comes before its first, more than `cap` ranges listed): answer 200 with the whole;
 *   -1     no range is satisfiable (answer 416 with Content-Range: bytes *\/size). */
int mux__http_ranges(mux_http_str_t v, uint64_t size, mux__range_t *out, unsigned cap);

/* IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT", 29 bytes and a NUL) of a time in seconds
 * since the epoch. Returns the length: 29, or 0 for a time outside the years 0 to 9999,
 * which the form cannot carry (a file system may hold such a time). */
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

/* Percent-encodes s[0 .. n) for a URL path: every byte but RFC 3986's unreserved ones
 * (letters, digits, "-._~") and, when `slash`, '/'. Writes what fits to out[0 .. cap) and
 * returns the whole length (call with cap 0 to learn it). */
size_t mux__http_pct(const char *s, size_t n, char *out, size_t cap, int slash);
/* Escapes s[0 .. n) for HTML text and quoted attributes: & < > " ' and the control bytes as
 * character references. Writes what fits to out[0 .. cap); returns the whole length. */
size_t mux__http_html(const char *s, size_t n, char *out, size_t cap);

/* The HTML page listing the directory `fd` (taken: closed before it returns), whose path
 * below the root is `path` ("" for the root, else without a final '/'): its entries sorted
 * by name (bytewise), directories marked with a final '/', names escaped for HTML and their
 * links for URLs, and names that start with '.' left out unless `flags` has
 * MUX_HTTP_STATIC_DOTFILES. 0 with *page (free it) and *len set, or -errno (-ENOMEM). */
int mux__http_listing(int fd, const char *path, unsigned flags, char **page, size_t *len);

/* tchar (RFC 9110, 5.6.2): 1 for the bytes of a token (parser.c). */
extern const uint8_t mux__http_tchar[256];

/* mux_http_respond, or mux_http_respond_file when fd >= 0 (then `body` is NULL and `len` the
 * file's bytes from `off`), for fields the library made (server.c): not checked again. With
 * fd < 0 and a `done`, `body` is not copied but lent until `done` is called. */
int mux__http_respond_own(mux_http_exchange_t *x, int status, const mux_http_header_t *headers,
                          uint32_t nheaders, const void *body, size_t len, int fd, uint64_t off,
                          void (*done)(void *arg, int status), void *arg);

/* The same for a body in memory, with fields made beforehand: `fields` holds `flen` bytes of
 * complete lines, each ending with CRLF (server.c). */
int mux__http_respond_raw(mux_http_exchange_t *x, int status, const char *fields,
                          size_t flen, const void *body, size_t len,
                          void (*done)(void *arg, int status), void *arg);

/* The loop an exchange's server runs on, or NULL (server.c). */
mux_loop_t *mux__http_exchange_loop(const mux_http_exchange_t *x);

/* `s` equals `lit`, which is lower case, without regard to case (server.c). */
int mux__http_same(mux_http_str_t s, const char *lit);

/* Reports a failure of the server's own while answering `x` (server.c): its on_error. */
void mux__http_exchange_error(const mux_http_exchange_t *x, int err);

#endif
