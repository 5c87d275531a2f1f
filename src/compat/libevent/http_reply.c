/* SPDX-License-Identifier: MIT */
/* libiomux-event: evhttp's replies. The head is written as libevent writes it: the status
 * line with the request's version, Date for HTTP/1.1, Connection: keep-alive echoed to an
 * HTTP/1.0 client that asked for it, Content-Length when the connection stays open, the
 * server's default Content-Type, and Connection: close when the request asked to close.
 * The reply goes out through the connection's bufferevent; the request is freed once the
 * last byte has been written (http.c, evx_http_send_done). */
#include "http_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- status ---- */

const char *evx_http_phrase(int code)
{
    static const struct {
        int code;
        const char *phrase;
    } table[] = {
        {100, "Continue"},
        {101, "Switching Protocols"},
        {200, "OK"},
        {201, "Created"},
        {202, "Accepted"},
        {203, "Non-Authoritative Information"},
        {204, "No Content"},
        {205, "Reset Content"},
        {206, "Partial Content"},
        {300, "Multiple Choices"},
        {301, "Moved Permanently"},
        {302, "Found"},
        {303, "See Other"},
        {304, "Not Modified"},
        {305, "Use Proxy"},
        {307, "Temporary Redirect"},
        {308, "Permanent Redirect"},
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {402, "Payment Required"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {406, "Not Acceptable"},
        {407, "Proxy Authentication Required"},
        {408, "Request Time-out"},
        {409, "Conflict"},
        {410, "Gone"},
        {411, "Length Required"},
        {412, "Precondition Failed"},
        {413, "Request Entity Too Large"},
        {414, "Request-URI Too Large"},
        {415, "Unsupported Media Type"},
        {416, "Requested range not satisfiable"},
        {417, "Expectation Failed"},
        {431, "Request Header Fields Too Large"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Time-out"},
        {505, "HTTP Version not supported"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].code == code)
            return table[i].phrase;
    return "Unknown Status Code";
}

void evx_http_response_code(struct evhttp_request *req, int code, const char *reason)
{
    req->response_code = code;
    if (!reason)
        reason = evx_http_phrase(code);
    evx_free(req->response_code_line);
    req->response_code_line = evx_strndup(reason, strlen(reason));
}

/* ---- the head ---- */

/* `v` in `base` (10 or 16) into out, NUL-terminated: by hand, as Windows' C runtime may not
 * know printf's %z. Returns the length. */
static size_t put_size(char out[24], size_t v, unsigned base)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

static int field_is(const struct evkeyvalq *h, const char *name, const char *value)
{
    const char *v = evhttp_find_header(h, name);
    return v && evutil_ascii_strcasecmp(v, value) == 0;
}

int evx_http_wants_close(struct evhttp_request *req)
{
    if (req->type == EVHTTP_REQ_CONNECT)
        return 0;
    return field_is(&req->input_headers, "Connection", "close") ||
           field_is(&req->output_headers, "Connection", "close");
}

int evx_http_is_old_style(struct evhttp_request *req)
{
    return (req->major < 1 || (req->major == 1 && req->minor == 0)) &&
           !field_is(&req->input_headers, "Connection", "keep-alive");
}

/* Whether the reply carries a body (RFC 9110: not 1xx, 204, 304, nor to HEAD or CONNECT). */
static int needs_body(const struct evhttp_request *req)
{
    int code = req->response_code;
    return code != 204 && code != 304 && (code < 100 || code >= 200) &&
           req->type != EVHTTP_REQ_CONNECT && req->type != EVHTTP_REQ_HEAD;
}

/* The time now as an IMF-fixdate (RFC 9110, 5.6.7), in names of the C locale whatever the
 * program's. */
static void http_date(char out[40])
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = time(NULL);
    struct tm tm;
#ifdef _WIN32
    gmtime_s(&tm, &t);
#else
    gmtime_r(&t, &tm);
#endif
    snprintf(out, 40, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7], tm.tm_mday,
             months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void evx_http_make_head(struct evhttp_request *req, struct evbuffer *out)
{
    struct evkeyvalq *h = &req->output_headers;
    int keepalive = field_is(&req->input_headers, "Connection", "keep-alive");
    evbuffer_add_printf(out, "HTTP/%d.%d %d %s\r\n", req->major, req->minor, req->response_code,
                        req->response_code_line ? req->response_code_line : "");
    if (req->major == 1) {
        if (req->minor >= 1 && !evhttp_find_header(h, "Date")) {
            char date[40];
            http_date(date);
            evhttp_add_header(h, "Date", date);
        }
        if (req->minor == 0 && keepalive && !req->to_close)
            evhttp_add_header(h, "Connection", "keep-alive");
        /* A connection that stays open needs the body's end; a chunked reply has its own. */
        if ((req->minor >= 1 || keepalive) && needs_body(req) && !req->chunked && !req->to_close &&
            !evhttp_find_header(h, "Transfer-Encoding") &&
            !evhttp_find_header(h, "Content-Length")) {
            char len[24];
            put_size(len, evbuffer_get_length(req->output_buffer), 10);
            evhttp_add_header(h, "Content-Length", len);
        }
    }
    if (needs_body(req) && !evhttp_find_header(h, "Content-Type") && req->evcon->http->content_type)
        evhttp_add_header(h, "Content-Type", req->evcon->http->content_type);
    if (field_is(&req->input_headers, "Connection", "close")) {
        evhttp_remove_header(h, "Connection");
        evhttp_add_header(h, "Connection", "close");
        evhttp_remove_header(h, "Proxy-Connection");
    }
    for (struct evkeyval *kv = h->tqh_first; kv; kv = kv->next.tqe_next)
        evbuffer_add_printf(out, "%s: %s\r\n", kv->key, kv->value);
    evbuffer_add(out, "\r\n", 2);
}

/* ---- sending ---- */

/* The program is done with a request whose connection has gone: both are freed. */
static int gone(struct evhttp_request *req)
{
    struct evhttp_connection *c = req->evcon;
    if (!c->dead)
        return 0;
    evx_http_conn_free(c); /* frees req, the connection's current request */
    return 1;
}

/* A request this server holds and has not answered in full. */
static int answerable(const struct evhttp_request *req)
{
    return req && req->evcon && req->evcon->req == req && req->evcon->state == EVX_HANDLING &&
           !req->userdone;
}

static void send_whole(struct evhttp_request *req, struct evbuffer *databuf)
{
    struct evhttp_connection *c = req->evcon;
    req->userdone = 1;
    if (gone(req))
        return;
    if (databuf)
        evbuffer_add_buffer(req->output_buffer, databuf);
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evx_http_make_head(req, out);
    /* A reply to HEAD says how long the body would be and sends none. */
    if (req->type != EVHTTP_REQ_HEAD)
        evbuffer_add_buffer(out, req->output_buffer);
    c->state = EVX_WRITING;
    evx_http_conn_write(c, evx_http_send_done, NULL);
}

EVX_EXPORT void evhttp_send_reply(struct evhttp_request *req, int code, const char *reason,
                                  struct evbuffer *databuf)
{
    if (!answerable(req) || req->started)
        return;
    evx_http_response_code(req, code, reason);
    send_whole(req, databuf);
}

void evx_http_send_page(struct evhttp_request *req, struct evbuffer *page)
{
    /* As libevent's pages: HTTP/1.1 whatever the request said, the program's fields replaced,
     * and the connection closed after it. */
    if (req->major == 0 || req->minor == 0) {
        req->major = 1;
        req->minor = 1;
    }
    evhttp_clear_headers(&req->output_headers);
    evhttp_add_header(&req->output_headers, "Content-Type", "text/html");
    evhttp_add_header(&req->output_headers, "Connection", "close");
    send_whole(req, page);
}

EVX_EXPORT void evhttp_send_error(struct evhttp_request *req, int error, const char *reason)
{
    if (!answerable(req) || req->started)
        return;
    if (!reason)
        reason = evx_http_phrase(error);
    struct evbuffer *page = evbuffer_new();
    if (!page) {
        req->userdone = 1;
        req->evcon->dead = 1;
        gone(req);
        return;
    }
    evx_http_response_code(req, error, reason);
    evbuffer_add_printf(page,
                        "<HTML><HEAD>\n<TITLE>%d %s</TITLE>\n</HEAD><BODY>\n<H1>%s</H1>\n"
                        "</BODY></HTML>\n",
                        error, reason, reason);
    evx_http_send_page(req, page);
    evbuffer_free(page);
}

EVX_EXPORT void evhttp_send_reply_start(struct evhttp_request *req, int code, const char *reason)
{
    if (!answerable(req) || req->started)
        return;
    evx_http_response_code(req, code, reason);
    req->started = 1;
    if (req->evcon->dead)
        return;
    struct evkeyvalq *h = &req->output_headers;
    if (!evhttp_find_header(h, "Content-Length") && needs_body(req)) {
        if (req->major == 1 && req->minor >= 1) {
            evhttp_add_header(h, "Transfer-Encoding", "chunked");
            req->chunked = 1;
        } else {
            /* HTTP/1.0 has no chunks: the body ends where the connection does (where
             * libevent would announce a Content-Length of 0 to a keep-alive client). */
            evhttp_remove_header(h, "Connection");
            evhttp_add_header(h, "Connection", "close");
            req->to_close = 1;
        }
    }
    struct evbuffer *out = bufferevent_get_output(req->evcon->bev);
    evx_http_make_head(req, out);
    evbuffer_add_buffer(out, req->output_buffer);
    evx_http_conn_write(req->evcon, NULL, NULL);
}

EVX_EXPORT void evhttp_send_reply_chunk_with_cb(struct evhttp_request *req,
                                                struct evbuffer *databuf,
                                                void (*cb)(struct evhttp_connection *, void *),
                                                void *arg)
{
    if (!answerable(req) || !req->started || !databuf || req->evcon->dead)
        return;
    size_t n = evbuffer_get_length(databuf);
    if (n == 0 || !needs_body(req))
        return;
    struct evbuffer *out = bufferevent_get_output(req->evcon->bev);
    if (req->chunked) {
        char size[26];
        size_t k = put_size(size, n, 16);
        memcpy(size + k, "\r\n", 2);
        evbuffer_add(out, size, k + 2);
    }
    evbuffer_add_buffer(out, databuf);
    if (req->chunked)
        evbuffer_add(out, "\r\n", 2);
    evx_http_conn_write(req->evcon, cb, arg);
}

EVX_EXPORT void evhttp_send_reply_chunk(struct evhttp_request *req, struct evbuffer *databuf)
{
    evhttp_send_reply_chunk_with_cb(req, databuf, NULL, NULL);
}

EVX_EXPORT void evhttp_send_reply_end(struct evhttp_request *req)
{
    if (!answerable(req) || !req->started)
        return;
    struct evhttp_connection *c = req->evcon;
    req->userdone = 1;
    if (gone(req))
        return;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    if (req->chunked)
        evbuffer_add(out, "0\r\n\r\n", 5);
    c->state = EVX_WRITING;
    if (evbuffer_get_length(out) == 0)
        evx_http_send_done(c, NULL);
    else
        evx_http_conn_write(c, evx_http_send_done, NULL);
}
