/* SPDX-License-Identifier: MIT */
/* An evhttp server on libiomux-event for evhttp_h11.py: listens on 127.0.0.1 on a port the
 * system picks, prints it and the base's method on a line, and serves until its standard
 * input ends.
 *   /whole    200, "hello, world\n" in one reply
 *   /chunked  200 in three parts (evhttp_send_reply_start / _chunk / _end)
 *   /empty    204
 *   /echo     200, the request's body sent back, with its length in X-Body-Length
 *   /error    evhttp_send_error(418): an error page, the connection closed after it
 *   anything else: evhttp's own 404 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void whole(struct evhttp_request *req, void *arg)
{
    (void)arg;
    evbuffer_add(evhttp_request_get_output_buffer(req), "hello, world\n", 13);
    evhttp_send_reply(req, HTTP_OK, "OK", NULL);
}

static void chunked(struct evhttp_request *req, void *arg)
{
    (void)arg;
    struct evbuffer *b = evbuffer_new();
    evhttp_send_reply_start(req, HTTP_OK, NULL);
    for (int i = 0; i < 3; i++) {
        evbuffer_add_printf(b, "part %d\n", i);
        evhttp_send_reply_chunk(req, b);
    }
    evhttp_send_reply_end(req);
    evbuffer_free(b);
}

static void empty(struct evhttp_request *req, void *arg)
{
    (void)arg;
    evhttp_send_reply(req, HTTP_NOCONTENT, NULL, NULL);
}

static void echo(struct evhttp_request *req, void *arg)
{
    (void)arg;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    char len[24];
    snprintf(len, sizeof len, "%zu", evbuffer_get_length(in));
    evhttp_add_header(evhttp_request_get_output_headers(req), "X-Body-Length", len);
    evhttp_send_reply(req, HTTP_OK, NULL, in);
}

static void error(struct evhttp_request *req, void *arg)
{
    (void)arg;
    evhttp_send_error(req, 418, NULL);
}

static void stdin_done(evutil_socket_t fd, short what, void *arg)
{
    char buf[64];
    (void)what;
    if (read(fd, buf, sizeof buf) <= 0)
        event_base_loopbreak(arg);
}

int main(void)
{
    struct event_base *base = event_base_new();
    struct evhttp *http = base ? evhttp_new(base) : NULL;
    struct evhttp_bound_socket *b = http ? evhttp_bind_socket_with_handle(http, "127.0.0.1", 0)
                                         : NULL;
    if (!b) {
        fprintf(stderr, "evhttp-probe: no server\n");
        return 1;
    }
    evhttp_set_cb(http, "/whole", whole, NULL);
    evhttp_set_cb(http, "/chunked", chunked, NULL);
    evhttp_set_cb(http, "/empty", empty, NULL);
    evhttp_set_cb(http, "/echo", echo, NULL);
    evhttp_set_cb(http, "/error", error, NULL);
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    getsockname(evhttp_bound_socket_get_fd(b), (struct sockaddr *)&sin, &len);
    printf("%u %s\n", (unsigned)ntohs(sin.sin_port), event_base_get_method(base));
    fflush(stdout);
    struct event *in = event_new(base, 0, EV_READ | EV_PERSIST, stdin_done, base);
    event_add(in, NULL);
    event_base_dispatch(base);
    event_free(in);
    evhttp_free(http);
    event_base_free(base);
    return 0;
}
