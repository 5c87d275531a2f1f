/* SPDX-License-Identifier: MIT */
/* The echo server on libuv (uv_tcp_t streams; epoll is its only Linux backend). Reads go
 * into the connection's own buffer, which alloc_cb hands out; a read is written back with
 * uv_try_write, and only when that is short does the connection stop reading and queue
 * the rest with uv_write, reading again from the write callback. */
#include "echo_common.h"

#include <stdalign.h>
#include <dlfcn.h>
#include <uv.h>

struct conn {
    uv_tcp_t tcp; /* first: a handle pointer is a connection pointer */
    uv_write_t req;
    alignas(64) char buf[]; /* aligned: the kernel copies into misaligned buffers much slower */
};

static size_t bufsize;
static uv_tcp_t server;
static uv_signal_t sigint_h, sigterm_h;

static void on_closed(uv_handle_t *h)
{
    if (h->data)
        free(h->data); /* connections carry themselves in data; the server's own handles
                        * have none */
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = h->data;
    (void)suggested;
    *buf = uv_buf_init(c->buf, (unsigned)bufsize);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void on_written(uv_write_t *req, int status)
{
    struct conn *c = req->data;
    if (status == UV_ECANCELED)
        return; /* closing */
    if (status < 0 || uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
        uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    if (nread <= 0) {
        if (nread < 0) /* UV_EOF or an error; 0 is EAGAIN */
            uv_close((uv_handle_t *)s, on_closed);
        return;
    }
    uv_buf_t out = uv_buf_init(buf->base, (unsigned)nread);
    int n = uv_try_write(s, &out, 1);
    if (n == nread)
        return;
    if (n < 0 && n != UV_EAGAIN) {
        uv_close((uv_handle_t *)s, on_closed);
        return;
    }
    if (n > 0) {
        out.base += n;
        out.len -= (size_t)n;
    }
    uv_read_stop(s); /* the buffer is busy until the rest is written */
    c->req.data = c;
    if (uv_write(&c->req, s, &out, 1, on_written) < 0)
        uv_close((uv_handle_t *)s, on_closed);
}

static void on_connection(uv_stream_t *srv, int status)
{
    if (status < 0) {
        fprintf(stderr, "echo-libuv: accept: %s\n", uv_strerror(status));
        return;
    }
    struct conn *c = aligned_alloc(64, (sizeof *c + bufsize + 63) / 64 * 64);
    if (!c)
        return; /* the next connection callback retries */
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(srv, (uv_stream_t *)&c->tcp) < 0) {
        uv_close((uv_handle_t *)&c->tcp, on_closed);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
        uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, on_closed);
}

static void on_signal(uv_signal_t *h, int signum)
{
    (void)signum;
    uv_walk(h->loop, close_any, NULL); /* every handle: uv_run then returns */
}

static int identify(char *buf, size_t len)
{
    Dl_info info = {0};
    dladdr((void *)(uintptr_t)uv_run, &info);
    const char *where = info.dli_fname ? info.dli_fname : "?";
    int ok = strstr(where, "libuv") && uv_version() >> 16 == UV_VERSION_MAJOR;
    snprintf(buf, len, "libuv %s, epoll, %s%s", uv_version_string(), where,
             ok ? "" : ": not libuv, or not the version of its header");
    return ok;
}

int main(int argc, char **argv)
{
    char identity[512];
    int ok = identify(identity, sizeof identity);
    struct echo_options o = echo_parse(argc, argv, "echo-libuv",
                                       "libuv uv_read_start + uv_try_write/uv_write", identity, ok);
    bufsize = o.bufsize;
    uv_loop_t *loop = uv_default_loop();
    struct sockaddr_in addr = echo_addr(o.port);
    int r;
    uv_tcp_init(loop, &server);
    if ((r = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0)) < 0 ||
        (r = uv_listen((uv_stream_t *)&server, SOMAXCONN, on_connection)) < 0) {
        fprintf(stderr, "echo-libuv: listen on 127.0.0.1:%u: %s\n", o.port, uv_strerror(r));
        return 1;
    }
    uv_signal_init(loop, &sigint_h);
    uv_signal_init(loop, &sigterm_h);
    uv_signal_start(&sigint_h, on_signal, SIGINT);
    uv_signal_start(&sigterm_h, on_signal, SIGTERM);
    uv_os_fd_t fd;
    uv_fileno((uv_handle_t *)&server, &fd);
    echo_listening(fd, identity);
    uv_run(loop, UV_RUN_DEFAULT);
    return uv_loop_close(loop) == 0 ? 0 : 1;
}
