/* SPDX-License-Identifier: MIT */
/* iomux HTTP/1.1: the request parser and the chunked-body decoder.
 *
 * Both allocate nothing and keep no pointer past the call: the request's strings point into
 * the caller's buffer, and the decoder works in place. They are strict about framing (RFC
 * 9112): a request they accept has exactly one reading of where its body ends, so a proxy
 * in front of the server and the server itself cannot disagree about where the next request
 * starts. Whatever is refused comes with the status to answer, and the connection must be
 * closed after that answer: its framing is lost.
 *
 * What is refused, and with which status:
 *   400  a request line or header line that is not well formed: a method or field name that
 *        is not a token, white space before a field's colon, a line folded onto the previous
 *        one (obs-fold), a control character (other than tab) in a value, a byte outside
 *        visible ASCII in the target, a bare CR; Content-Length and Transfer-Encoding
 *        together; Transfer-Encoding in HTTP/1.0, or whose last coding is not chunked, or
 *        with chunked twice; a Content-Length that is not digits, or several that differ; a
 *        missing Host in HTTP/1.1, or several Host fields.
 *   413  a Content-Length over the limit.
 *   414  a target longer than the limit.
 *   417  an Expect other than 100-continue (HTTP/1.1).
 *   431  a head (request line and fields) longer than the limit, or more fields.
 *   501  a transfer coding other than chunked.
 *   505  an HTTP version other than 1.x.
 * A lone LF ends a line as CRLF does, and up to 8 empty lines before the request line are
 * skipped (RFC 9112, 2.2); they count against the head's limit, and a 9th is refused (400).
 * HTTP/1.2 to 1.9 are read as 1.1.
 */
#ifndef IOMUX_HTTP_H
#define IOMUX_HTTP_H

#include <stddef.h>
#include <stdint.h>
#ifndef _WIN32
#include <sys/types.h>
#endif

#include "iomux.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes that live in the caller's buffer. */
typedef struct mux_http_str {
    const char *base;
    size_t len;
} mux_http_str_t;

typedef struct mux_http_header {
    mux_http_str_t name;  /* as sent (compare without case) */
    mux_http_str_t value; /* without the white space around it */
} mux_http_header_t;

/* Limits; a 0 takes the default. */
typedef struct mux_http_limits {
    size_t max_head;      /* request line and header fields: 64 KB */
    size_t max_target;    /* the request target: 8 KB */
    uint32_t max_headers; /* header fields: 100 */
    uint64_t max_body;    /* a Content-Length above this is 413: 1 MB */
} mux_http_limits_t;

#define MUX_HTTP_DEFAULT_MAX_HEAD    (64u * 1024)
#define MUX_HTTP_DEFAULT_MAX_TARGET  (8u * 1024)
#define MUX_HTTP_DEFAULT_MAX_HEADERS 100u
#define MUX_HTTP_DEFAULT_MAX_BODY    (1024u * 1024)

enum {
    MUX_HTTP_KEEP_ALIVE = 0x01,      /* HTTP/1.1 without Connection: close, or HTTP/1.0 with
                                        Connection: keep-alive */
    MUX_HTTP_CHUNKED = 0x02,         /* the body is chunked: decode it with mux_http_chunked_* */
    MUX_HTTP_EXPECT_CONTINUE = 0x04, /* Expect: 100-continue (HTTP/1.1) */
};

typedef struct mux_http_request {
    /* The caller's array for the header fields, and its length: set before parsing. */
    mux_http_header_t *headers;
    uint32_t headers_cap;
    /* Filled by a parse that returns the head's length. */
    uint32_t nheaders;
    mux_http_str_t method;   /* a token, as sent: methods are case-sensitive */
    mux_http_str_t target;   /* as sent: not decoded, not normalised */
    mux_http_str_t host;     /* the Host field's value (empty when HTTP/1.0 sent none) */
    int version;             /* 10 or 11 */
    unsigned flags;          /* MUX_HTTP_* */
    uint64_t content_length; /* the body's length when it is not chunked (0: no body) */
    /* Filled when a parse returns -EBADMSG: the status to answer with. */
    int status;
} mux_http_request_t;

/* Parses the request head at the start of buf[0 .. len).
 * Returns:
 *   - the head's length when it is complete (the body, or the next request, starts there);
 *   - -EAGAIN when it is not complete yet (read more, then call again with the whole buffer);
 *   - -EBADMSG when the request is refused, with req->status saying how to answer;
 *   - -EINVAL for NULL arguments or a negative length.
 * `prev_len` is the length this buffer had at the previous call for the same request (0 at
 * the first): only the new bytes are searched for the head's end, so a head that comes a
 * byte at a time costs linear time, not quadratic. Nothing of the head is checked until its
 * end has come, except at the first call and once the head is over its limit. */
ssize_t mux_http_parse_request(mux_http_request_t *req, const char *buf, size_t len,
                               size_t prev_len, const mux_http_limits_t *lim);

/* Decodes a chunked body (RFC 9112, 7.1), in place, across as many calls as the bytes take.
 * Chunk extensions are skipped; trailer fields are checked as header fields and skipped. */
typedef struct mux_http_chunked {
    uint64_t left;    /* private: bytes left of the current chunk */
    uint32_t state;   /* private */
    uint32_t line;    /* private: bytes of the current size or trailer line */
    uint32_t hexdig;  /* private: digits of the current size */
    uint32_t trailer; /* private: bytes of the trailer section */
} mux_http_chunked_t;

/* Zeroes the decoder for a new body. */
void mux_http_chunked_init(mux_http_chunked_t *d);
/* On entry buf[0 .. *len) holds the body's bytes received since the last call; on return
 * buf[0 .. *len) holds the data they carried, moved to the front. Returns:
 *   - -EAGAIN when the body goes on;
 *   - n >= 0 when it ended: the last n bytes of the input (at buf + input length - n) come
 *     after the body, and belong to the next request;
 *   - -EBADMSG when the chunked framing is broken (answer 400 and close);
 *   - -EINVAL for NULL arguments.
 * A size line (with its extensions) or a trailer field over 4 KB, a trailer section over
 * 16 KB, or a chunk size that overflows 63 bits is broken framing too. */
ssize_t mux_http_chunked_decode(mux_http_chunked_t *d, char *buf, size_t *len);

/* Finds the first field named `name` (compared without case). 0 with *value set, or
 * -ENOENT; -EINVAL for NULL arguments. */
int mux_http_header_get(const mux_http_request_t *req, const char *name, mux_http_str_t *value);

/* ---- the server -------------------------------------------------------------------------
 *
 * A server owns a listener and its connections on one loop. For every request it calls the
 * handler once the whole head and body have come (a body is read up to limits.max_body;
 * chunked bodies are decoded); the handler answers with mux_http_respond, then or later
 * (the connection reads nothing more until it has). Responses go out in the order of the
 * requests, pipelined ones included. The server answers by itself what it refuses (the
 * statuses above, 408 when a head does not come in time) and closes that connection; every
 * other connection goes on. Keep-alive follows the request (MUX_HTTP_KEEP_ALIVE) and
 * max_requests; Expect: 100-continue gets its interim response before the body is read;
 * HEAD gets the headers of the response without its body. */

typedef struct mux_http_server mux_http_server_t;
typedef struct mux_http_exchange mux_http_exchange_t;
typedef void (*mux_http_handler_cb)(mux_http_exchange_t *x);

/* What the server says of every answer, for an access log (the server's on_log): the
 * request, who sent it, and what it was answered. Valid during the call. */
typedef struct mux_http_log {
    /* The request, or NULL when it was refused before its head was read whole (a malformed
     * or oversized head, a 408): then only the status and the client are known. */
    const mux_http_request_t *req;
    const struct sockaddr *peer; /* the client's address; NULL when it could not be had */
    socklen_t peer_len;
    int status;           /* the status answered */
    uint64_t body_bytes;  /* the body's length as answered (0 for HEAD, 204, 304) */
    int64_t time_s;       /* the wall clock's second of the answer (the Date field's) */
} mux_http_log_t;

typedef struct mux_http_server_options {
    mux_http_limits_t limits;
    uint64_t header_timeout_ns; /* the whole head, from its first byte: 10 s (then 408) */
    uint64_t idle_timeout_ns;   /* between requests on a kept-alive connection: 60 s */
    uint64_t body_timeout_ns;   /* a body with no byte for this long while it is read (a
                                   streamed one: while a reader is set): 10 s (closed) */
    uint64_t write_timeout_ns;  /* a response with no byte leaving for this long: 30 s */
    uint64_t handler_timeout_ns; /* the handler's time to answer, from its call (or from the
                                    last piece of a streamed body given to its reader): 60 s;
                                    then the exchange is cancelled (-ETIMEDOUT) and the
                                    client answered 503, with Connection: close */
    size_t max_output;          /* the memory of a connection's answers not yet written:
                                   while more than this many bytes are held, its next
                                   pipelined request waits, and reading with it
                                   (back-pressure): 256 KB */
    uint32_t max_requests;      /* per connection, then Connection: close: 1000 */
    uint32_t max_connections;   /* more are closed at once: 10000 */
    /* Called (may be NULL) when the server fails on its own and goes on: a connection it
     * cannot accept (-EMFILE, -ENFILE, -ENOMEM: the listener pauses and tries again) or
     * that it loses to a failure of its own (-ENOMEM, a socket the backend cannot watch).
     * What a client does (resets, stalls) is not reported. */
    void (*on_error)(mux_http_server_t *srv, int err);
    /* 0: the handler is called once the whole body has come (up to limits.max_body), and
     * finds it with mux_http_exchange_body. 1: it is called once the head has come, and
     * reads the body with mux_http_exchange_read, as it arrives, if it wants it. */
    int stream_bodies;
    /* Called (may be NULL) once per answer as it is queued, the server's refusals included:
     * an access log's line. The client's address is read once per connection for it. */
    void (*on_log)(mux_http_server_t *srv, const mux_http_log_t *entry);
} mux_http_server_options_t;

struct mux_http_server {
    void *data;                  /* free for the caller */
    struct mux__http_srv *impl_; /* private */
};

/* Sets up `srv` on `loop`, with `opts` (NULL: every default) and `cb`. Returns 0, -EINVAL,
 * -ENOMEM. */
int mux_http_server_init(mux_http_server_t *srv, mux_loop_t *loop,
                         const mux_http_server_options_t *opts, mux_http_handler_cb cb);
/* Listens on `addr` (mux_listen's options). Once per server. Returns mux_listen's result,
 * or -EBUSY when it already listens. */
int mux_http_server_listen(mux_http_server_t *srv, const struct sockaddr *addr, socklen_t addrlen,
                           const mux_listen_options_t *lopts);
/* Serves the connection that a channel's message carries (mux_chan_send_socket from another
 * loop's listener), from that channel's callback, on the server's loop: the way a server
 * with no listener of its own is fed by an acceptor loop. The socket is opened with
 * mux_chan_stream_open. Returns 0 (the server owns it now), or leaves it in `msg` (the
 * channel closes it when the callback returns) and returns -EINVAL (a channel of another
 * loop, no socket), -ECANCELED (the server is closing), -EBUSY (max_connections open),
 * -ENOMEM, or mux_chan_stream_open's error. */
int mux_http_server_adopt(mux_http_server_t *srv, mux_chan_t *ch, mux_msg_t *msg);
/* The address it listens on (to learn the port after binding port 0). */
int mux_http_server_address(const mux_http_server_t *srv, struct sockaddr *addr, socklen_t *len);
/* Stops listening and closes every connection. Exchanges a handler holds are dropped: each
 * one's cancel callback (mux_http_exchange_on_cancel) hears -ECANCELED, and an exchange
 * without one can still be answered, to -ECANCELED, until `cb`. `cb` (may be NULL) runs once
 * every connection is closed, without waiting for the handlers; then the server's memory,
 * every exchange included, is the caller's: no exchange may be used after it. During a drain
 * (mux_http_server_drain) it ends the drain at once, and its `cb`, if not NULL, replaces the
 * drain's. Returns 0, -EINVAL, -EALREADY. */
int mux_http_server_close(mux_http_server_t *srv, void (*cb)(mux_http_server_t *srv));
/* Graceful shutdown: stops listening and closes the connections that wait for a request,
 * while requests in flight (a head or body being read, a handler's exchange, an answer being
 * sent) finish, each answered with Connection: close; then the server closes as
 * mux_http_server_close does, at the latest `timeout_ns` from now, when whatever is left is
 * closed. `cb` (may be NULL) runs once everything is closed. Returns 0, -EINVAL, -EALREADY
 * (already draining or closing), or mux_timer_start's error. */
int mux_http_server_drain(mux_http_server_t *srv, uint64_t timeout_ns,
                          void (*cb)(mux_http_server_t *srv));

/* The request of an exchange, and its body (decoded if it was chunked). Valid until the
 * exchange is answered. */
const mux_http_request_t *mux_http_exchange_request(const mux_http_exchange_t *x);
mux_http_str_t mux_http_exchange_body(const mux_http_exchange_t *x);
mux_http_server_t *mux_http_exchange_server(const mux_http_exchange_t *x);

/* Why an exchange was dropped unanswered: -ECONNRESET (the client closed or reset the
 * connection: a client that ends its sending while its handler holds the exchange is taken
 * as gone, as nginx takes it), -ETIMEDOUT (handler_timeout_ns passed: the client got a 503),
 * -ECANCELED (the server closes, or the connection failed). */
typedef void (*mux_http_cancel_cb)(mux_http_exchange_t *x, void *arg, int reason);
/* Asks to be told, once, if `x` is dropped before it is answered; a handler that keeps an
 * exchange past its call sets it so as to let go of it. `cb` runs from the loop; once it
 * returns the exchange is gone (`x` may not be used in it or after it, except to compare).
 * NULL stops the telling; without it, a dropped exchange stays until it is answered (to
 * -ECANCELED) or the server closes. Returns 0, or -EINVAL (no exchange held). */
int mux_http_exchange_on_cancel(mux_http_exchange_t *x, mux_http_cancel_cb cb, void *arg);

/* With stream_bodies: the body's bytes as they arrive (`len` > 0, at `data`, valid during
 * the call; chunked bodies decoded), then `len` 0 once at its end; or a negative errno
 * instead, once: -ECONNRESET (the client ended or reset the connection before the end),
 * -ETIMEDOUT (no byte for body_timeout_ns), -EBADMSG (broken chunked framing), -EMSGSIZE (a
 * chunked body over limits.max_body), -ECANCELED (the connection was closed: the server's
 * close, a failed write; answering then returns -ECANCELED too). After an error the
 * connection ends once the answer is out (a reset one at once). The callback may answer the
 * exchange; from then on it is not called again. */
typedef void (*mux_http_body_cb)(mux_http_exchange_t *x, const char *data, ssize_t len);
/* Starts delivering the body to `cb` (NULL pauses: reading stops once 4 KB are buffered), from the loop, never from inside this call; sends 100 Continue first when the
 * client asked for it. A body the handler does not read to its end before answering is read
 * and dropped after the answer, so the next request on the connection is found (a client
 * still waiting for its 100 Continue gets the answer with Connection: close instead).
 * Returns 0, -EINVAL (no exchange, or the server does not stream bodies), -ECANCELED (the
 * connection closed), -EALREADY (the end was delivered), the body's error if one was, or
 * -ENOMEM. */
int mux_http_exchange_read(mux_http_exchange_t *x, mux_http_body_cb cb);

/* Answers `x` with `status` (100 .. 599, not 1xx), the caller's fields (Date,
 * Content-Length and Connection are the server's; a field named so is -EINVAL), and `len`
 * bytes of `body` (copied). After it returns the exchange is gone. Returns 0, -EINVAL,
 * -ECANCELED when the connection was closed meanwhile (the exchange is gone too), -ENOMEM. */
int mux_http_respond(mux_http_exchange_t *x, int status, const mux_http_header_t *headers,
                     uint32_t nheaders, const void *body, size_t len);
/* As mux_http_respond, with the body gathered from the `nbufs` buffers of `bufs` (copied:
 * the caller's again when it returns). */
int mux_http_respond_v(mux_http_exchange_t *x, int status, const mux_http_header_t *headers,
                       uint32_t nheaders, const mux_buf_t *bufs, unsigned nbufs);
/* As mux_http_respond, with `len` bytes of the file `fd` from `off` as the body, sent from
 * the kernel's page cache where it can (mux_write_file), not copied. The file is read until
 * `done` (may be NULL) is called, with 0 once its bytes are sent, or a negative errno when
 * the connection failed or closed first (-ENODATA: the file was shorter than `len`); until
 * then it must stay open and unchanged. `done` comes from the loop, never from inside this
 * call, and only when this returns 0 (also for HEAD, 304 and 204, which send no body). A
 * file that fails mid-body leaves the response short: the connection is closed. Returns what
 * mux_http_respond returns, and -EINVAL for a negative `fd` or `off`. */
int mux_http_respond_file(mux_http_exchange_t *x, int status, const mux_http_header_t *headers,
                          uint32_t nheaders, int fd, int64_t off, uint64_t len,
                          void (*done)(void *arg, int status), void *arg);

/* ---- static files ------------------------------------------------------------------- */

/* A directory served as files. It keeps the files it served open, with their metadata,
 * and checks at most once a second per file that the name still leads to the same file
 * and that the file did not change (nginx's open_file_cache); a file that did is opened
 * again. Files up to 64 KB (while those kept stay under 16 MB in all) are read once into
 * the cache with the metadata, their descriptor closed, and sent from memory: up to
 * MUX_HTTP_STATIC_INLINE bytes copied after the head into one send, above that lent to it
 * without a copy (gathered with the head in the same send). A file changed in place within
 * the second between two checks is served as it was, as its ETag and length already are. Larger bodies go from the page cache to
 * the socket (mux_http_respond_file), from a descriptor the cache keeps: at most
 * `max_open` of them, the least recently used closed first, and one closed too whenever an
 * open fails for want of descriptors (EMFILE, ENFILE), before trying again. The cache holds
 * up to 16384 files. One loop's, not to be shared between threads; closing it while
 * responses are in flight is allowed (the files they send stay open until they are
 * sent). */
#define MUX_HTTP_STATIC_INLINE 1024u

enum {
    MUX_HTTP_STATIC_DOTFILES = 0x01,  /* serve names that start with '.' (/.well-known/ is
                                         always served) */
    MUX_HTTP_STATIC_AUTOINDEX = 0x02, /* list a directory that has no index file */
};

#define MUX_HTTP_STATIC_RANGES     16u  /* max_ranges' default */
#define MUX_HTTP_STATIC_RANGES_MAX 256u /* and its ceiling */

typedef struct mux_http_static {
    /* Options, read by mux_http_static_init (0 or NULL: the default). */
    const char *index;      /* the file for a directory: "index.html" */
    const char *mime_types; /* a mime.types file whose types win over the built-in table;
                               NULL: /etc/mime.types when it can be read, else the table
                               alone; "": the table alone */
    unsigned flags;         /* MUX_HTTP_STATIC_* */
    uint32_t max_open;      /* descriptors the cache keeps: a quarter of the soft
                               RLIMIT_NOFILE at init (the rest is for connections; give each
                               of several statics in one process its share) */
    uint32_t max_ranges;    /* ranges one request may list, MUX_HTTP_STATIC_RANGES (at most
                               MUX_HTTP_STATIC_RANGES_MAX); more: the whole file, 200 */
    /* private */
    int root_fd_;
    char *root_real_;
    struct mux__fcache *cache_;
} mux_http_static_t;

/* Opens `root` (a directory) for serving, and loads the media types. Returns 0, -errno of
 * open, -errno of reading `mime_types` when it was named (-EFBIG over 4 MB), -ENOMEM,
 * -EINVAL. */
int mux_http_static_init(mux_http_static_t *st, const char *root);
void mux_http_static_close(mux_http_static_t *st);
/* Drops what the cache holds of `path` (relative to the root, without a leading '/'), and of
 * everything below it when it is a directory; NULL: everything. For a program told that files
 * changed (mux_fs_event_t on the root: iomux-httpd --watch-root), so that the next request
 * opens them again instead of trusting the cache for up to a second. Responses in flight keep
 * what they send. Returns the entries dropped, or -EINVAL. */
int mux_http_static_forget(mux_http_static_t *st, const char *path);

/* Answers `x` with a file below the root, as a static-file server does:
 *   - GET and HEAD; any other method 405 with Allow: GET, HEAD;
 *   - the target's path resolved below the root: 400 (malformed), 403 (above the root, an
 *     encoded '/', a name that starts with '.' unless MUX_HTTP_STATIC_DOTFILES, outside
 *     /.well-known/), 414; never through a symbolic link that leads out of the root (404);
 *   - a directory: its index file; a directory named without the final '/': 301 to its
 *     resolved path with the '/' and the query as sent; with MUX_HTTP_STATIC_AUTOINDEX, a
 *     directory without an index file gets an HTML listing (sorted, directories marked
 *     with '/', dot-files left out unless allowed), else 404;
 *   - ETag and Last-Modified; 304 for If-None-Match (which wins over If-Modified-Since);
 *   - byte ranges (If-Range honoured): one range 206 with Content-Range; several 206 as
 *     multipart/byteranges, those that overlap or touch merged, in the order asked; none
 *     satisfiable 416 with Content-Range: bytes * /len; more than max_ranges listed, or a
 *     Range field not well formed, the whole file (200), as nginx's max_ranges does: a
 *     client that asked gets a full answer it can use, and a request of many ranges costs
 *     no more than one for the whole. A multipart body over 1 MB from a file not kept in
 *     memory is answered whole too (its parts are read into memory to be sent);
 *   - Content-Type by the file's extension; 404 for a file that does not exist, 403 for one
 *     that cannot be read, 503 with Retry-After when no descriptor is left for it even
 *     after the cache gave back its own, 500 for another failure of the server's own
 *     (ENOMEM, EIO); both of those go to on_error too. Every error answer has a text/plain
 *     body.
 * Returns what mux_http_respond returns. */
int mux_http_serve_static(mux_http_exchange_t *x, mux_http_static_t *st);

#ifdef __cplusplus
}
#endif

#endif
