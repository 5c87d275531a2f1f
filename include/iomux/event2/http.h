/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: the server side of evhttp (<event2/http.h>), with
 * libevent's signatures and behaviour, and the URI helpers programs that run an evhttp
 * server call. The client side (evhttp_connection_base_new, evhttp_make_request) is not
 * offered. Requests are parsed by iomux's HTTP/1.1 parser (<iomux/http.h>), so a request it
 * refuses gets its status (400 for a malformed one) and the connection is closed after it.
 * docs/libevent.md lists where the behaviour differs from libevent's. */
#ifndef IOMUX_EVENT2_HTTP_H_INCLUDED_
#define IOMUX_EVENT2_HTTP_H_INCLUDED_

#include <event2/util.h>
#include <event2/visibility.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;
struct event_base;
struct bufferevent;
struct evconnlistener;
struct evhttp;
struct evhttp_request;
struct evhttp_connection;
struct evhttp_bound_socket;
struct evhttp_uri;
struct evkeyvalq;

/* Status codes libevent names. */
#define HTTP_OK                200
#define HTTP_NOCONTENT         204
#define HTTP_MOVEPERM          301
#define HTTP_MOVETEMP          302
#define HTTP_NOTMODIFIED       304
#define HTTP_BADREQUEST        400
#define HTTP_NOTFOUND          404
#define HTTP_BADMETHOD         405
#define HTTP_ENTITYTOOLARGE    413
#define HTTP_EXPECTATIONFAILED 417
#define HTTP_INTERNAL          500
#define HTTP_NOTIMPLEMENTED    501
#define HTTP_SERVUNAVAIL       503

/* A request's method, as one bit each (evhttp_set_allowed_methods takes a mask of them). */
enum evhttp_cmd_type {
    EVHTTP_REQ_GET = 1 << 0,
    EVHTTP_REQ_POST = 1 << 1,
    EVHTTP_REQ_HEAD = 1 << 2,
    EVHTTP_REQ_PUT = 1 << 3,
    EVHTTP_REQ_DELETE = 1 << 4,
    EVHTTP_REQ_OPTIONS = 1 << 5,
    EVHTTP_REQ_TRACE = 1 << 6,
    EVHTTP_REQ_CONNECT = 1 << 7,
    EVHTTP_REQ_PATCH = 1 << 8
};

enum evhttp_request_kind { EVHTTP_REQUEST, EVHTTP_RESPONSE };

/* ---- the server ---- */

/* A server on `base`, with no socket bound yet. NULL for a NULL base or out of memory. */
EVENT2_EXPORT_SYMBOL struct evhttp *evhttp_new(struct event_base *base);
/* Frees the server: its bound sockets closed, its connections closed, the requests they
 * hold freed (a request the program still holds is freed too, as with libevent). */
EVENT2_EXPORT_SYMBOL void evhttp_free(struct evhttp *http);
/* Binds `address` (a numeric address or a name) and `port`, and listens. 0, or -1. */
EVENT2_EXPORT_SYMBOL int evhttp_bind_socket(struct evhttp *http, const char *address,
                                            ev_uint16_t port);
/* The same, returning the bound socket (the server's: freed with it), or NULL. */
EVENT2_EXPORT_SYMBOL struct evhttp_bound_socket *
evhttp_bind_socket_with_handle(struct evhttp *http, const char *address, ev_uint16_t port);
/* Serves a socket the program made, bound and listening: the server takes it (closes it
 * when freed). 0, or -1. */
EVENT2_EXPORT_SYMBOL int evhttp_accept_socket(struct evhttp *http, evutil_socket_t fd);
EVENT2_EXPORT_SYMBOL struct evhttp_bound_socket *
evhttp_accept_socket_with_handle(struct evhttp *http, evutil_socket_t fd);
/* Serves the connections a listener made by the program accepts (the server frees it). */
EVENT2_EXPORT_SYMBOL struct evhttp_bound_socket *
evhttp_bind_listener(struct evhttp *http, struct evconnlistener *listener);
EVENT2_EXPORT_SYMBOL struct evconnlistener *
evhttp_bound_socket_get_listener(struct evhttp_bound_socket *bound);
EVENT2_EXPORT_SYMBOL evutil_socket_t
evhttp_bound_socket_get_fd(struct evhttp_bound_socket *bound_socket);
/* Stops serving a bound socket and closes it. */
EVENT2_EXPORT_SYMBOL void evhttp_del_accept_socket(struct evhttp *http,
                                                   struct evhttp_bound_socket *bound_socket);
typedef void evhttp_bound_socket_foreach_fn(struct evhttp_bound_socket *, void *);
EVENT2_EXPORT_SYMBOL void evhttp_foreach_bound_socket(struct evhttp *http,
                                                      evhttp_bound_socket_foreach_fn *function,
                                                      void *argument);

/* Limits: the request line and header fields together, and the body; a negative size is
 * no limit (the default for both, as libevent). Over them the request is refused. */
EVENT2_EXPORT_SYMBOL void evhttp_set_max_headers_size(struct evhttp *http,
                                                      ev_ssize_t max_headers_size);
EVENT2_EXPORT_SYMBOL void evhttp_set_max_body_size(struct evhttp *http, ev_ssize_t max_body_size);
/* The Content-Type of a reply that set none ("text/html; charset=ISO-8859-1" by default;
 * NULL: none added). The string is copied. */
EVENT2_EXPORT_SYMBOL void evhttp_set_default_content_type(struct evhttp *http,
                                                          const char *content_type);
/* The methods passed to the callbacks (a mask of enum evhttp_cmd_type; GET, POST, HEAD, PUT
 * and DELETE by default); the others are answered 501. */
EVENT2_EXPORT_SYMBOL void evhttp_set_allowed_methods(struct evhttp *http, ev_uint16_t methods);
/* The callback for requests whose decoded path is exactly `path` (the query is not part of
 * it). 0; -1 when that path has one already; -2 out of memory or for bad arguments. */
EVENT2_EXPORT_SYMBOL int evhttp_set_cb(struct evhttp *http, const char *path,
                                       void (*cb)(struct evhttp_request *, void *), void *cb_arg);
/* Removes the path's callback. 0, or -1 when it had none. */
EVENT2_EXPORT_SYMBOL int evhttp_del_cb(struct evhttp *http, const char *path);
/* The callback for requests no path matched (NULL: they are answered 404). */
EVENT2_EXPORT_SYMBOL void evhttp_set_gencb(struct evhttp *http,
                                           void (*cb)(struct evhttp_request *, void *), void *arg);
/* How long a connection may wait for a request or for its reply to be sent (50 s by
 * default; -1 seconds, or NULL, restores that). Applies to connections accepted after. */
EVENT2_EXPORT_SYMBOL void evhttp_set_timeout(struct evhttp *http, int timeout_in_secs);
EVENT2_EXPORT_SYMBOL void evhttp_set_timeout_tv(struct evhttp *http, const struct timeval *tv);

/* ---- replies ---- */

/* Answers with an HTML page naming the status (`reason` NULL: the standard phrase), and
 * closes the connection after it. */
EVENT2_EXPORT_SYMBOL void evhttp_send_error(struct evhttp_request *req, int error,
                                            const char *reason);
/* Answers with the output headers and the output buffer, then `databuf`'s bytes (moved out
 * of it; the caller still owns it; may be NULL). The request is freed once the reply has
 * been written. */
EVENT2_EXPORT_SYMBOL void evhttp_send_reply(struct evhttp_request *req, int code,
                                            const char *reason, struct evbuffer *databuf);
/* A reply sent in parts: chunked for HTTP/1.1 (unless the program set a Content-Length),
 * delimited by the connection's close for HTTP/1.0. */
EVENT2_EXPORT_SYMBOL void evhttp_send_reply_start(struct evhttp_request *req, int code,
                                                  const char *reason);
/* Sends `databuf`'s bytes (moved out of it) as the next part. */
EVENT2_EXPORT_SYMBOL void evhttp_send_reply_chunk(struct evhttp_request *req,
                                                  struct evbuffer *databuf);
/* The same; `cb` runs once the part has been written. */
EVENT2_EXPORT_SYMBOL void
evhttp_send_reply_chunk_with_cb(struct evhttp_request *req, struct evbuffer *databuf,
                                void (*cb)(struct evhttp_connection *, void *), void *arg);
/* Ends the reply; the request is freed once it has been written. */
EVENT2_EXPORT_SYMBOL void evhttp_send_reply_end(struct evhttp_request *req);

/* ---- requests ---- */

/* The target as sent (not decoded). The request's. */
EVENT2_EXPORT_SYMBOL const char *evhttp_request_get_uri(const struct evhttp_request *req);
/* The target parsed (evhttp_uri_parse's view of it), or NULL when it does not parse. */
EVENT2_EXPORT_SYMBOL const struct evhttp_uri *
evhttp_request_get_evhttp_uri(const struct evhttp_request *req);
EVENT2_EXPORT_SYMBOL enum evhttp_cmd_type
evhttp_request_get_command(const struct evhttp_request *req);
/* The reply's status (0 before one is chosen) and its reason phrase (NULL before). */
EVENT2_EXPORT_SYMBOL int evhttp_request_get_response_code(const struct evhttp_request *req);
EVENT2_EXPORT_SYMBOL const char *
evhttp_request_get_response_code_line(const struct evhttp_request *req);
/* The request's header fields, the reply's, the request's body and the reply's body to
 * be: the request's own, valid until the reply has been sent. */
EVENT2_EXPORT_SYMBOL struct evkeyvalq *evhttp_request_get_input_headers(struct evhttp_request *req);
EVENT2_EXPORT_SYMBOL struct evkeyvalq *
evhttp_request_get_output_headers(struct evhttp_request *req);
EVENT2_EXPORT_SYMBOL struct evbuffer *evhttp_request_get_input_buffer(struct evhttp_request *req);
EVENT2_EXPORT_SYMBOL struct evbuffer *evhttp_request_get_output_buffer(struct evhttp_request *req);
/* The host an absolute target names, else the Host field's without its port; NULL when
 * neither is there. */
EVENT2_EXPORT_SYMBOL const char *evhttp_request_get_host(struct evhttp_request *req);
/* The connection the request came on (NULL once it is gone). */
EVENT2_EXPORT_SYMBOL struct evhttp_connection *
evhttp_request_get_connection(struct evhttp_request *req);
/* The peer's numeric address (the connection's string) and port. */
EVENT2_EXPORT_SYMBOL void evhttp_connection_get_peer(struct evhttp_connection *evcon,
                                                     char **address, ev_uint16_t *port);
EVENT2_EXPORT_SYMBOL const struct sockaddr *
evhttp_connection_get_addr(struct evhttp_connection *evcon);
EVENT2_EXPORT_SYMBOL struct event_base *evhttp_connection_get_base(struct evhttp_connection *evcon);
EVENT2_EXPORT_SYMBOL struct bufferevent *
evhttp_connection_get_bufferevent(struct evhttp_connection *evcon);
EVENT2_EXPORT_SYMBOL struct evhttp *evhttp_connection_get_server(struct evhttp_connection *evcon);

/* ---- header fields ---- */

/* The value of the first field named `key` (without regard to case), or NULL. */
EVENT2_EXPORT_SYMBOL const char *evhttp_find_header(const struct evkeyvalq *headers,
                                                    const char *key);
/* Removes the first field named `key`. 0, or -1 when there was none. */
EVENT2_EXPORT_SYMBOL int evhttp_remove_header(struct evkeyvalq *headers, const char *key);
/* Appends a field (both strings copied). -1 for a name or value that would break the
 * message (a CR or LF in the name, a line break in the value not followed by white space)
 * or out of memory; 0 otherwise. */
EVENT2_EXPORT_SYMBOL int evhttp_add_header(struct evkeyvalq *headers, const char *key,
                                           const char *value);
/* Removes and frees every field. */
EVENT2_EXPORT_SYMBOL void evhttp_clear_headers(struct evkeyvalq *headers);

/* ---- URIs ---- */

/* Percent-encodes every byte but RFC 3986's unreserved ones. malloc'd (the caller frees
 * it), or NULL. evhttp_uriencode takes a length (-1: up to the NUL) and may write a space
 * as '+'. */
EVENT2_EXPORT_SYMBOL char *evhttp_encode_uri(const char *str);
EVENT2_EXPORT_SYMBOL char *evhttp_uriencode(const char *str, ev_ssize_t size, int space_to_plus);
/* Decodes %XX escapes; evhttp_decode_uri reads '+' as a space after the first '?' only,
 * evhttp_uridecode everywhere when `decode_plus`. malloc'd, or NULL; *size_out (if not
 * NULL) gets the length. */
EVENT2_EXPORT_SYMBOL char *evhttp_decode_uri(const char *uri);
EVENT2_EXPORT_SYMBOL char *evhttp_uridecode(const char *uri, int decode_plus, size_t *size_out);
/* Parses the query of `uri` (after its '?') / the query string `uri` itself into decoded
 * key and value pairs appended to `headers`. 0, or -1 for a pair without '=' (the pairs
 * added are removed then). */
EVENT2_EXPORT_SYMBOL int evhttp_parse_query(const char *uri, struct evkeyvalq *headers);
EVENT2_EXPORT_SYMBOL int evhttp_parse_query_str(const char *uri, struct evkeyvalq *headers);
/* Escapes < > " ' & for HTML. malloc'd, or NULL. */
EVENT2_EXPORT_SYMBOL char *evhttp_htmlescape(const char *html);

/* A URI split into its parts (RFC 3986): a parse of `source_uri`, or NULL when it does not
 * parse. Free it with evhttp_uri_free. The getters return the part, or NULL (-1 for the
 * port) when the URI has none. */
EVENT2_EXPORT_SYMBOL struct evhttp_uri *evhttp_uri_parse(const char *source_uri);
#define EVHTTP_URI_NONCONFORMANT 0x01
EVENT2_EXPORT_SYMBOL struct evhttp_uri *evhttp_uri_parse_with_flags(const char *source_uri,
                                                                    unsigned flags);
EVENT2_EXPORT_SYMBOL void evhttp_uri_free(struct evhttp_uri *uri);
EVENT2_EXPORT_SYMBOL const char *evhttp_uri_get_scheme(const struct evhttp_uri *uri);
EVENT2_EXPORT_SYMBOL const char *evhttp_uri_get_userinfo(const struct evhttp_uri *uri);
EVENT2_EXPORT_SYMBOL const char *evhttp_uri_get_host(const struct evhttp_uri *uri);
EVENT2_EXPORT_SYMBOL int evhttp_uri_get_port(const struct evhttp_uri *uri);
EVENT2_EXPORT_SYMBOL const char *evhttp_uri_get_path(const struct evhttp_uri *uri);
EVENT2_EXPORT_SYMBOL const char *evhttp_uri_get_query(const struct evhttp_uri *uri);
EVENT2_EXPORT_SYMBOL const char *evhttp_uri_get_fragment(const struct evhttp_uri *uri);

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_HTTP_H_INCLUDED_ */
