/* SPDX-License-Identifier: MIT */
/* libiomux-event: evhttp's server side. A connection is a socket bufferevent of the
 * emulation's own; its input is parsed by iomux's HTTP/1.1 parser (mux_http_parse_request)
 * once the head is complete, the body (by Content-Length, or chunked and decoded with
 * mux_http_chunked_decode) is moved into the request's input buffer, and the request goes to
 * the program. As libevent, a connection handles one request at a time: reading stops while
 * the program answers, and resumes (with what a client pipelined meanwhile) once the reply
 * has been written, unless the request or the reply asked to close. */
#include "http_internal.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#ifndef _WIN32
#include <netinet/in.h>
#endif

#define EVX_HTTP_TIMEOUT 50 /* seconds: libevent's default for reading and writing */
#define EVX_HTTP_BACKLOG 128

static const struct {
    const char *name;
    enum evhttp_cmd_type type;
} evx_methods[] = {
    {"GET", EVHTTP_REQ_GET},     {"POST", EVHTTP_REQ_POST},       {"HEAD", EVHTTP_REQ_HEAD},
    {"PUT", EVHTTP_REQ_PUT},     {"DELETE", EVHTTP_REQ_DELETE},   {"OPTIONS", EVHTTP_REQ_OPTIONS},
    {"TRACE", EVHTTP_REQ_TRACE}, {"CONNECT", EVHTTP_REQ_CONNECT}, {"PATCH", EVHTTP_REQ_PATCH},
};

static void conn_read(struct evhttp_connection *c);

/* ---- the server ---- */

EVX_EXPORT struct evhttp *evhttp_new(struct event_base *base)
{
    if (!base)
        return NULL;
    struct evhttp *http = evx_calloc(1, sizeof *http);
    if (!http)
        return NULL;
    http->base = base;
    http->max_headers = -1;
    http->max_body = -1;
    http->timeout.tv_sec = -1;
    http->allowed =
        EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE;
    evhttp_set_default_content_type(http, "text/html; charset=ISO-8859-1");
    if (!http->content_type) {
        evx_free(http);
        return NULL;
    }
    return http;
}

EVX_EXPORT void evhttp_free(struct evhttp *http)
{
    if (!http)
        return;
    while (http->bound)
        evhttp_del_accept_socket(http, http->bound);
    while (http->conns)
        evx_http_conn_free(http->conns);
    for (struct evx_http_cb *cb = http->cbs, *next; cb; cb = next) {
        next = cb->next;
        evx_free(cb->path);
        evx_free(cb);
    }
    evx_free(http->content_type);
    evx_free(http);
}

EVX_EXPORT void evhttp_set_max_headers_size(struct evhttp *http, ev_ssize_t max_headers_size)
{
    if (http)
        http->max_headers = max_headers_size < 0 ? -1 : max_headers_size;
}

EVX_EXPORT void evhttp_set_max_body_size(struct evhttp *http, ev_ssize_t max_body_size)
{
    if (http)
        http->max_body = max_body_size < 0 ? -1 : max_body_size;
}

EVX_EXPORT void evhttp_set_default_content_type(struct evhttp *http, const char *content_type)
{
    if (!http)
        return;
    evx_free(http->content_type);
    http->content_type = content_type ? evx_strndup(content_type, strlen(content_type)) : NULL;
}

EVX_EXPORT void evhttp_set_allowed_methods(struct evhttp *http, ev_uint16_t methods)
{
    if (http)
        http->allowed = methods;
}

EVX_EXPORT void evhttp_set_timeout(struct evhttp *http, int timeout_in_secs)
{
    if (!http)
        return;
    http->timeout.tv_sec = timeout_in_secs < 0 ? -1 : timeout_in_secs;
    http->timeout.tv_usec = 0;
}

EVX_EXPORT void evhttp_set_timeout_tv(struct evhttp *http, const struct timeval *tv)
{
    if (!http)
        return;
    if (tv)
        http->timeout = *tv;
    else
        evhttp_set_timeout(http, -1);
}

EVX_EXPORT int evhttp_set_cb(struct evhttp *http, const char *path,
                             void (*cb)(struct evhttp_request *, void *), void *cb_arg)
{
    if (!http || !path || !cb)
        return -2;
    for (struct evx_http_cb *c = http->cbs; c; c = c->next)
        if (strcmp(c->path, path) == 0)
            return -1;
    struct evx_http_cb *c = evx_calloc(1, sizeof *c);
    if (!c || !(c->path = evx_strndup(path, strlen(path)))) {
        evx_free(c);
        return -2;
    }
    c->cb = cb;
    c->arg = cb_arg;
    /* Appended, so that the first set of two that could match is found first. */
    struct evx_http_cb **at = &http->cbs;
    while (*at)
        at = &(*at)->next;
    *at = c;
    return 0;
}

EVX_EXPORT int evhttp_del_cb(struct evhttp *http, const char *path)
{
    if (!http || !path)
        return -1;
    for (struct evx_http_cb **at = &http->cbs; *at; at = &(*at)->next) {
        if (strcmp((*at)->path, path) == 0) {
            struct evx_http_cb *c = *at;
            *at = c->next;
            evx_free(c->path);
            evx_free(c);
            return 0;
        }
    }
    return -1;
}

EVX_EXPORT void evhttp_set_gencb(struct evhttp *http, void (*cb)(struct evhttp_request *, void *),
                                 void *arg)
{
    if (!http)
        return;
    http->gencb = cb;
    http->gencbarg = arg;
}

/* ---- bound sockets ---- */

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg);

EVX_EXPORT struct evhttp_bound_socket *evhttp_bind_listener(struct evhttp *http,
                                                            struct evconnlistener *listener)
{
    if (!http || !listener)
        return NULL;
    struct evhttp_bound_socket *b = evx_calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->listener = listener;
    evconnlistener_set_cb(listener, on_accept, http);
    b->next = http->bound;
    http->bound = b;
    return b;
}

/* What libevent's listeners for evhttp are: the socket the server's to close. */
#define EVX_HTTP_LEV_FLAGS (LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC)

EVX_EXPORT struct evhttp_bound_socket *evhttp_accept_socket_with_handle(struct evhttp *http,
                                                                        evutil_socket_t fd)
{
    if (!http || fd < 0)
        return NULL;
    /* Backlog 0: the program has called listen. */
    struct evconnlistener *lev =
        evconnlistener_new(http->base, NULL, NULL, EVX_HTTP_LEV_FLAGS, 0, fd);
    if (!lev)
        return NULL;
    struct evhttp_bound_socket *b = evhttp_bind_listener(http, lev);
    if (!b)
        evconnlistener_free(lev); /* out of memory: the socket closed, as libevent's */
    return b;
}

EVX_EXPORT int evhttp_accept_socket(struct evhttp *http, evutil_socket_t fd)
{
    return evhttp_accept_socket_with_handle(http, fd) ? 0 : -1;
}

EVX_EXPORT struct evhttp_bound_socket *
evhttp_bind_socket_with_handle(struct evhttp *http, const char *address, ev_uint16_t port)
{
    if (!http)
        return NULL;
    struct evutil_addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = EVUTIL_AI_PASSIVE;
    char service[8];
    evutil_snprintf(service, sizeof service, "%u", (unsigned)port);
    int err = evutil_getaddrinfo(address, service, &hints, &ai);
    if (err != 0 || !ai) {
        evx_warn("evhttp_bind_socket: getaddrinfo: %s", evutil_gai_strerror(err));
        return NULL;
    }
    struct evconnlistener *lev =
        evconnlistener_new_bind(http->base, NULL, NULL, EVX_HTTP_LEV_FLAGS, EVX_HTTP_BACKLOG,
                                ai->ai_addr, (int)ai->ai_addrlen);
    evutil_freeaddrinfo(ai);
    if (!lev)
        return NULL;
    struct evhttp_bound_socket *b = evhttp_bind_listener(http, lev);
    if (!b)
        evconnlistener_free(lev);
    return b;
}

EVX_EXPORT int evhttp_bind_socket(struct evhttp *http, const char *address, ev_uint16_t port)
{
    return evhttp_bind_socket_with_handle(http, address, port) ? 0 : -1;
}

EVX_EXPORT struct evconnlistener *evhttp_bound_socket_get_listener(struct evhttp_bound_socket *b)
{
    return b ? b->listener : NULL;
}

EVX_EXPORT evutil_socket_t evhttp_bound_socket_get_fd(struct evhttp_bound_socket *b)
{
    return b ? evconnlistener_get_fd(b->listener) : -1;
}

EVX_EXPORT void evhttp_del_accept_socket(struct evhttp *http, struct evhttp_bound_socket *b)
{
    if (!http || !b)
        return;
    for (struct evhttp_bound_socket **at = &http->bound; *at; at = &(*at)->next) {
        if (*at == b) {
            *at = b->next;
            evconnlistener_free(b->listener);
            evx_free(b);
            return;
        }
    }
}

EVX_EXPORT void evhttp_foreach_bound_socket(struct evhttp *http,
                                            evhttp_bound_socket_foreach_fn *function,
                                            void *argument)
{
    if (!http || !function)
        return;
    for (struct evhttp_bound_socket *b = http->bound; b; b = b->next)
        function(b, argument);
}

/* ---- connections ---- */

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    conn_read(arg);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct evhttp_connection *c = arg;
    if (evbuffer_get_length(bufferevent_get_output(bev)) || !c->on_written)
        return;
    void (*done)(struct evhttp_connection *, void *) = c->on_written;
    c->on_written = NULL;
    done(c, c->on_written_arg);
}

/* The peer closed, an error, or a timeout. A connection waiting for a request, or writing a
 * reply, is closed; one whose request the program holds waits for the program to finish
 * it (the request stays valid until then, where libevent's would be freed). */
static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct evhttp_connection *c = arg;
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
        return;
    if (c->state == EVX_HANDLING) {
        c->dead = 1;
        bufferevent_disable(bev, EV_READ | EV_WRITE);
        return;
    }
    evx_http_conn_free(c);
}

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
    struct evhttp *http = arg;
    (void)lev;
    struct evhttp_connection *c = evx_calloc(1, sizeof *c);
    struct bufferevent *bev = bufferevent_socket_new(http->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c || !bev) {
        evx_warn("evhttp: out of memory for a connection: closed");
        if (bev)
            bufferevent_free(bev);
        else
            evutil_closesocket(fd);
        evx_free(c);
        return;
    }
    c->http = http;
    c->bev = bev;
    if (len > 0 && (size_t)len <= sizeof c->peer)
        memcpy(&c->peer, sa, (size_t)len);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        evutil_inet_ntop(AF_INET, &sin->sin_addr, c->address, sizeof c->address);
        c->port = ntohs(sin->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
        evutil_inet_ntop(AF_INET6, &sin6->sin6_addr, c->address, sizeof c->address);
        c->port = ntohs(sin6->sin6_port);
    }
    if (!(c->req = evx_http_request_new(c))) {
        bufferevent_free(bev);
        evx_free(c);
        return;
    }
    c->next = http->conns;
    if (http->conns)
        http->conns->prev = c;
    http->conns = c;
    struct timeval tv = http->timeout;
    if (tv.tv_sec < 0)
        tv = (struct timeval){.tv_sec = EVX_HTTP_TIMEOUT};
    bufferevent_set_timeouts(bev, &tv, &tv);
    bufferevent_setcb(bev, on_read, on_write, on_event, c);
    bufferevent_enable(bev, EV_READ);
}

void evx_http_conn_free(struct evhttp_connection *c)
{
    struct evhttp *http = c->http;
    if (c->prev)
        c->prev->next = c->next;
    else
        http->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->req)
        evx_http_request_free(c->req);
    bufferevent_free(c->bev);
    evx_free(c);
}

void evx_http_conn_write(struct evhttp_connection *c,
                         void (*done)(struct evhttp_connection *, void *), void *arg)
{
    c->on_written = done;
    c->on_written_arg = arg;
    bufferevent_enable(c->bev, EV_WRITE);
}

void evx_http_send_done(struct evhttp_connection *c, void *arg)
{
    (void)arg;
    struct evhttp_request *req = c->req;
    int close = c->dead || evx_http_is_old_style(req) || evx_http_wants_close(req);
    evx_http_request_free(req);
    c->req = NULL;
    if (close || !(c->req = evx_http_request_new(c))) {
        evx_http_conn_free(c);
        return;
    }
    c->state = EVX_READING_HEAD;
    c->parsed_len = 0;
    bufferevent_enable(c->bev, EV_READ);
    /* What the client pipelined behind the request answered. */
    if (evbuffer_get_length(bufferevent_get_input(c->bev)))
        conn_read(c);
}

/* ---- reading a request ---- */

/* A request the server refuses: libevent's answer (an error page, the connection closed
 * after it), the request never shown to the program's callbacks. */
static void conn_refuse(struct evhttp_connection *c, int status)
{
    struct evhttp_request *req = c->req;
    c->state = EVX_HANDLING;
    bufferevent_disable(c->bev, EV_READ);
    req->type = 0;
    req->major = 1;
    req->minor = 1;
    evhttp_send_error(req, status, NULL);
}

static mux_http_limits_t conn_limits(const struct evhttp *http)
{
    /* libevent has no limit of its own on the target or the fields' number; the head's
     * bytes bound both. Unlimited is the most a size_t can say without overflowing. */
    size_t head = http->max_headers < 0 ? SIZE_MAX / 2 : (size_t)http->max_headers;
    mux_http_limits_t lim = {
        .max_head = head ? head : 1,
        .max_target = head ? head : 1,
        .max_headers = EVX_HTTP_MAX_FIELDS,
        .max_body = http->max_body < 0 ? UINT64_MAX : (uint64_t)http->max_body,
    };
    return lim;
}

/* The request's fields from the parse. 0, or -1 out of memory. */
static int request_fill(struct evhttp_request *req, const mux_http_request_t *pr)
{
    req->type = 0;
    for (size_t i = 0; i < sizeof evx_methods / sizeof evx_methods[0]; i++) {
        size_t n = strlen(evx_methods[i].name);
        if (pr->method.len == n && memcmp(pr->method.base, evx_methods[i].name, n) == 0)
            req->type = evx_methods[i].type;
    }
    req->major = 1;
    req->minor = pr->version == 10 ? 0 : 1;
    if (!(req->uri = evx_strndup(pr->target.base, pr->target.len)))
        return -1;
    for (uint32_t i = 0; i < pr->nheaders; i++) {
        char *k = evx_strndup(pr->headers[i].name.base, pr->headers[i].name.len);
        char *v = evx_strndup(pr->headers[i].value.base, pr->headers[i].value.len);
        int rc = k && v ? evhttp_add_header(&req->input_headers, k, v) : -1;
        evx_free(k);
        evx_free(v);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Parses the head once it is complete. 1 when it was (the body is next), 0 when more is
 * needed or the request was refused. */
static int read_head(struct evhttp_connection *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t len = evbuffer_get_length(in);
    if (len == 0)
        return 0;
    const char *p = (const char *)evbuffer_pullup(in, -1);
    /* On the stack: the fields are copied into the request before this returns. */
    mux_http_header_t fields[EVX_HTTP_MAX_FIELDS];
    mux_http_request_t pr = {.headers = fields, .headers_cap = EVX_HTTP_MAX_FIELDS};
    mux_http_limits_t lim = conn_limits(c->http);
    ssize_t n = p ? mux_http_parse_request(&pr, p, len, c->parsed_len, &lim) : -ENOMEM;
    if (n == -EAGAIN) {
        c->parsed_len = len;
        return 0;
    }
    if (n < 0) {
        conn_refuse(c, n == -EBADMSG ? pr.status : HTTP_INTERNAL);
        return 0;
    }
    c->parsed_len = 0;
    if (request_fill(c->req, &pr) < 0) {
        conn_refuse(c, HTTP_INTERNAL);
        return 0;
    }
    if (c->req->type == 0) { /* a method libevent does not know: 400, as there */
        conn_refuse(c, HTTP_BADREQUEST);
        return 0;
    }
    evbuffer_drain(in, (size_t)n);
    c->chunked = (pr.flags & MUX_HTTP_CHUNKED) != 0;
    c->body_left = c->chunked ? 0 : pr.content_length;
    if (c->chunked)
        mux_http_chunked_init(&c->dechunk);
    if ((pr.flags & MUX_HTTP_EXPECT_CONTINUE) && (c->chunked || c->body_left) &&
        evbuffer_get_length(in) == 0)
        bufferevent_write(c->bev, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    c->state = EVX_READING_BODY;
    return 1;
}

/* Gives the request to the program's callback for its path, the general callback, or
 * answers 404 (or 501 for a method the server does not allow). */
static void dispatch(struct evhttp_connection *c)
{
    struct evhttp_request *req = c->req;
    struct evhttp *http = c->http;
    c->state = EVX_HANDLING;
    bufferevent_disable(c->bev, EV_READ);
    if (!(http->allowed & req->type)) {
        evhttp_send_error(req, HTTP_NOTIMPLEMENTED, NULL);
        return;
    }
    /* The path decoded, without query or fragment: what evhttp_set_cb's paths are. */
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    if (path) {
        size_t n = strlen(path);
        char *decoded = evx_malloc(n + 1);
        if (!decoded) {
            evhttp_send_error(req, HTTP_INTERNAL, NULL);
            return;
        }
        evx_uri_decode_into(path, n, decoded, 0);
        struct evx_http_cb *cb = http->cbs;
        while (cb && strcmp(cb->path, decoded) != 0)
            cb = cb->next;
        evx_free(decoded);
        if (cb) {
            cb->cb(req, cb->arg);
            return;
        }
    }
    if (http->gencb) {
        http->gencb(req, http->gencbarg);
        return;
    }
    char *escaped = evhttp_htmlescape(req->uri);
    struct evbuffer *page = evbuffer_new();
    if (!escaped || !page) {
        evx_free(escaped);
        if (page)
            evbuffer_free(page);
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    evbuffer_add_printf(page,
                        "<html><head><title>404 Not Found</title></head><body>"
                        "<h1>Not Found</h1><p>The requested URL %s was not found on this "
                        "server.</p></body></html>\n",
                        escaped);
    evx_free(escaped);
    evx_http_response_code(req, HTTP_NOTFOUND, "Not Found");
    evx_http_send_page(req, page);
    evbuffer_free(page);
}

/* Moves the body into the request's input buffer; dispatches once it is all there. */
static void read_body(struct evhttp_connection *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    struct evhttp_request *req = c->req;
    size_t len = evbuffer_get_length(in);
    if (c->chunked) {
        if (len == 0)
            return;
        char *p = (char *)evbuffer_pullup(in, -1);
        size_t data = len;
        ssize_t rest = p ? mux_http_chunked_decode(&c->dechunk, p, &data) : -ENOMEM;
        if (rest == -EBADMSG || rest == -ENOMEM) {
            conn_refuse(c, rest == -EBADMSG ? HTTP_BADREQUEST : HTTP_INTERNAL);
            return;
        }
        evbuffer_add(req->input_buffer, p, data);
        evbuffer_drain(in, rest >= 0 ? len - (size_t)rest : len);
        if (c->http->max_body >= 0 &&
            evbuffer_get_length(req->input_buffer) > (size_t)c->http->max_body) {
            conn_refuse(c, HTTP_ENTITYTOOLARGE);
            return;
        }
        if (rest == -EAGAIN)
            return;
    } else if (c->body_left) {
        size_t n = len < c->body_left ? len : (size_t)c->body_left;
        evbuffer_remove_buffer(in, req->input_buffer, n);
        c->body_left -= n;
        if (c->body_left)
            return;
    }
    dispatch(c);
}

static void conn_read(struct evhttp_connection *c)
{
    if (c->state == EVX_READING_HEAD && !read_head(c))
        return;
    if (c->state == EVX_READING_BODY)
        read_body(c);
}

/* ---- requests ---- */

struct evhttp_request *evx_http_request_new(struct evhttp_connection *evcon)
{
    struct evhttp_request *req = evx_calloc(1, sizeof *req);
    if (!req)
        return NULL;
    req->evcon = evcon;
    req->input_headers.tqh_last = &req->input_headers.tqh_first;
    req->output_headers.tqh_last = &req->output_headers.tqh_first;
    req->input_buffer = evbuffer_new();
    req->output_buffer = evbuffer_new();
    if (!req->input_buffer || !req->output_buffer) {
        evx_http_request_free(req);
        return NULL;
    }
    return req;
}

void evx_http_request_free(struct evhttp_request *req)
{
    evhttp_clear_headers(&req->input_headers);
    evhttp_clear_headers(&req->output_headers);
    if (req->input_buffer)
        evbuffer_free(req->input_buffer);
    if (req->output_buffer)
        evbuffer_free(req->output_buffer);
    if (req->uri_elems)
        evhttp_uri_free(req->uri_elems);
    evx_free(req->uri);
    evx_free(req->host_cache);
    evx_free(req->response_code_line);
    evx_free(req);
}

EVX_EXPORT const char *evhttp_request_get_uri(const struct evhttp_request *req)
{
    return req ? req->uri : NULL;
}

EVX_EXPORT const struct evhttp_uri *evhttp_request_get_evhttp_uri(const struct evhttp_request *req)
{
    if (!req || !req->uri)
        return NULL;
    struct evhttp_request *r = (struct evhttp_request *)req; /* the parse is cached */
    if (!r->uri_elems)
        r->uri_elems = evhttp_uri_parse_with_flags(r->uri, EVHTTP_URI_NONCONFORMANT);
    return r->uri_elems;
}

EVX_EXPORT enum evhttp_cmd_type evhttp_request_get_command(const struct evhttp_request *req)
{
    return req ? req->type : 0;
}

EVX_EXPORT int evhttp_request_get_response_code(const struct evhttp_request *req)
{
    return req ? req->response_code : 0;
}

EVX_EXPORT const char *evhttp_request_get_response_code_line(const struct evhttp_request *req)
{
    return req ? req->response_code_line : NULL;
}

EVX_EXPORT struct evkeyvalq *evhttp_request_get_input_headers(struct evhttp_request *req)
{
    return req ? &req->input_headers : NULL;
}

EVX_EXPORT struct evkeyvalq *evhttp_request_get_output_headers(struct evhttp_request *req)
{
    return req ? &req->output_headers : NULL;
}

EVX_EXPORT struct evbuffer *evhttp_request_get_input_buffer(struct evhttp_request *req)
{
    return req ? req->input_buffer : NULL;
}

EVX_EXPORT struct evbuffer *evhttp_request_get_output_buffer(struct evhttp_request *req)
{
    return req ? req->output_buffer : NULL;
}

EVX_EXPORT const char *evhttp_request_get_host(struct evhttp_request *req)
{
    if (!req)
        return NULL;
    if (req->host_cache)
        return req->host_cache;
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *host = u ? evhttp_uri_get_host(u) : NULL;
    if (host)
        return host;
    const char *field = evhttp_find_header(&req->input_headers, "Host");
    if (!field)
        return NULL;
    /* Without its port: the digits after the last ':', where no ']' follows it. */
    size_t n = strlen(field);
    const char *colon = strrchr(field, ':');
    if (colon && !strchr(colon, ']')) {
        const char *d = colon + 1;
        while (*d >= '0' && *d <= '9')
            d++;
        if (*d == '\0')
            n = (size_t)(colon - field);
    }
    req->host_cache = evx_strndup(field, n);
    return req->host_cache;
}

EVX_EXPORT struct evhttp_connection *evhttp_request_get_connection(struct evhttp_request *req)
{
    return req && req->evcon && !req->evcon->dead ? req->evcon : NULL;
}

EVX_EXPORT void evhttp_connection_get_peer(struct evhttp_connection *evcon, char **address,
                                           ev_uint16_t *port)
{
    if (address)
        *address = evcon ? evcon->address : NULL;
    if (port)
        *port = evcon ? evcon->port : 0;
}

EVX_EXPORT const struct sockaddr *evhttp_connection_get_addr(struct evhttp_connection *evcon)
{
    return evcon ? (const struct sockaddr *)&evcon->peer : NULL;
}

EVX_EXPORT struct event_base *evhttp_connection_get_base(struct evhttp_connection *evcon)
{
    return evcon ? evcon->http->base : NULL;
}

EVX_EXPORT struct bufferevent *evhttp_connection_get_bufferevent(struct evhttp_connection *evcon)
{
    return evcon ? evcon->bev : NULL;
}

EVX_EXPORT struct evhttp *evhttp_connection_get_server(struct evhttp_connection *evcon)
{
    return evcon ? evcon->http : NULL;
}
