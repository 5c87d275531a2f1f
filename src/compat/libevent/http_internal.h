/* SPDX-License-Identifier: MIT */
/* Private to libiomux-event: evhttp's server, connections and requests (http.c reads and
 * dispatches, http_reply.c writes, http_uri.c parses URIs and owns the key/value lists). */
#ifndef IOMUX_EVENT_HTTP_INTERNAL_H
#define IOMUX_EVENT_HTTP_INTERNAL_H

#include "event_internal.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include <iomux/http.h>

/* The header fields one request may have (more: 431). */
#define EVX_HTTP_MAX_FIELDS 256

struct evx_http_cb {
    struct evx_http_cb *next;
    char *path;
    void (*cb)(struct evhttp_request *, void *);
    void *arg;
};

struct evhttp_bound_socket {
    struct evhttp_bound_socket *next;
    struct evconnlistener *listener;
};

struct evhttp {
    struct event_base *base;
    struct evhttp_bound_socket *bound;
    struct evx_http_cb *cbs;
    void (*gencb)(struct evhttp_request *, void *);
    void *gencbarg;
    struct evhttp_connection *conns;  /* every open connection */
    ev_ssize_t max_headers, max_body; /* negative: no limit */
    struct timeval timeout;           /* tv_sec -1: libevent's default, 50 s */
    ev_uint16_t allowed;
    char *content_type; /* the default Content-Type, or NULL */
};

/* Where a connection is. */
enum evx_conn_state {
    EVX_READING_HEAD, /* waiting for (the rest of) a request head */
    EVX_READING_BODY, /* the head parsed, its body coming */
    EVX_HANDLING,     /* the program has the request and has not answered in full */
    EVX_WRITING,      /* the reply is complete and being written */
};

struct evhttp_connection {
    struct evhttp *http;
    struct evhttp_connection *next, *prev;
    struct bufferevent *bev;
    struct evhttp_request *req; /* the request being read or answered, or NULL */
    enum evx_conn_state state;
    int dead;           /* the peer has gone: freed once the program is done with req */
    size_t parsed_len;  /* the input's length at the last try to parse the head */
    uint64_t body_left; /* bytes of a Content-Length body still to come */
    int chunked;        /* the body is chunked */
    mux_http_chunked_t dechunk;
    /* Runs once the output has been written: the end of a reply, or a part's callback. */
    void (*on_written)(struct evhttp_connection *, void *);
    void *on_written_arg;
    struct sockaddr_storage peer;
    char address[64];
    ev_uint16_t port;
};

struct evhttp_request {
    struct evhttp_connection *evcon;
    struct evkeyvalq input_headers, output_headers;
    struct evbuffer *input_buffer, *output_buffer;
    char *uri;
    struct evhttp_uri *uri_elems; /* parsed on first use */
    char *host_cache;
    enum evhttp_cmd_type type;
    char major, minor;
    int response_code;
    char *response_code_line;
    unsigned userdone : 1; /* the reply is complete */
    unsigned chunked : 1;  /* the reply is being sent in chunks */
    unsigned started : 1;  /* its head has been written */
    unsigned to_close : 1; /* the reply's body ends with the connection (HTTP/1.0 in parts) */
};

/* http.c */
/* A new request for `evcon` (NULL out of memory); freed with evx_http_request_free. */
struct evhttp_request *evx_http_request_new(struct evhttp_connection *evcon);
void evx_http_request_free(struct evhttp_request *req);
/* The reply's bytes are in the output: write them, then call `done` (NULL: nothing). */
void evx_http_conn_write(struct evhttp_connection *evcon,
                         void (*done)(struct evhttp_connection *, void *), void *arg);
/* The reply to the current request has been written: the next request is read, or the
 * connection closed, as the request and reply asked. */
void evx_http_send_done(struct evhttp_connection *evcon, void *arg);
/* Closes and frees the connection and its request. */
void evx_http_conn_free(struct evhttp_connection *evcon);

/* http_reply.c */
/* The reason phrase of a status ("Unknown Status Code" for one it does not know). */
const char *evx_http_phrase(int code);
/* Sets the reply's status and phrase (NULL: the standard one). */
void evx_http_response_code(struct evhttp_request *req, int code, const char *reason);
/* Sends `page` as libevent sends its error pages: HTTP/1.1, Content-Type: text/html,
 * Connection: close, the program's own fields dropped. */
void evx_http_send_page(struct evhttp_request *req, struct evbuffer *page);
/* Writes the reply's status line, fields and empty line to `out`, adding Date,
 * Content-Length, Content-Type and Connection as libevent does. */
void evx_http_make_head(struct evhttp_request *req, struct evbuffer *out);
/* Whether the request or the reply asked to close the connection (Connection: close). */
int evx_http_wants_close(struct evhttp_request *req);
/* HTTP/1.0 without Connection: keep-alive. */
int evx_http_is_old_style(struct evhttp_request *req);

/* http_uri.c */
/* A copy of s[0 .. n) with a NUL, from evx_malloc, or NULL. */
char *evx_strndup(const char *s, size_t n);
/* Decodes %XX escapes of s[0 .. n) into out (room for n + 1), '+' as a space when
 * `plus`; returns the length. */
size_t evx_uri_decode_into(const char *s, size_t n, char *out, int plus);

#endif
