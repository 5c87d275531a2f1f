/* SPDX-License-Identifier: MIT */
/* The echo server on libuv (uv_tcp_t streams; epoll is its only Linux backend). Reads go
 * into the connection's own buffer, which alloc_cb hands out; a read is written back with
 * uv_try_write, and only when that is short does the connection stop reading and queue
 * the rest with uv_write, reading again from the write callback.
 *
 * With --threads N (the scaling study), N loops run, a thread each, each listening on the
 * port with a socket of its own (SO_REUSEPORT, made here and given to uv_tcp_open: this
 * libuv has no UV_TCP_REUSEPORT). Loop 0 hears the signals and wakes each loop with a
 * uv_async_t, whose callback closes every handle of that loop. */
#include "echo_common.h"

#include <stdalign.h>
#include <dlfcn.h>
#include <uv.h>

struct conn {
    uv_tcp_t tcp; /* first: a handle pointer is a connection pointer */
    uv_write_t req;
    struct shard *sh;
    alignas(64) char buf[]; /* aligned: the kernel copies into misaligned buffers much slower */
};

/* One loop and what it counts. */
struct shard {
    uv_loop_t loop;
    uv_tcp_t server;
    uv_async_t stop;
    uv_thread_t th;
    int index, cpu;
    unsigned long accepted;
    uint64_t bytes;
};

static const char *NAME = "echo-libuv";
static size_t bufsize;
static struct shard *shards;
static int nshards;
static uv_signal_t sigint_h, sigterm_h;

static void on_closed(uv_handle_t *h)
{
    if (h->data == h)
        free(h); /* a connection carries itself in data (its handle comes first); the
                  * loop's own handles carry their shard, or nothing */
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
    c->sh->bytes += (uint64_t)nread; /* echoed, or queued to be */
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
    struct shard *sh = srv->data;
    if (status < 0) {
        fprintf(stderr, "echo-libuv: accept: %s\n", uv_strerror(status));
        return;
    }
    struct conn *c = echo_conn_alloc(sizeof *c, bufsize);
    if (!c)
        return; /* the next connection callback retries */
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    c->sh = sh;
    if (uv_accept(srv, (uv_stream_t *)&c->tcp) < 0) {
        uv_close((uv_handle_t *)&c->tcp, on_closed);
        return;
    }
    sh->accepted++;
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

/* Every handle of this loop: uv_run then returns. */
static void on_stop(uv_async_t *a)
{
    uv_walk(a->loop, close_any, NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
    (void)h;
    (void)signum;
    for (int i = 0; i < nshards; i++)
        uv_async_send(&shards[i].stop); /* loop 0's own included: it closes the signals */
}

static void run(void *arg)
{
    struct shard *sh = arg;
    if (sh->cpu >= 0)
        echo_pin(NAME, sh->cpu);
    uv_run(&sh->loop, UV_RUN_DEFAULT);
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
    struct echo_options o =
        echo_parse_mt(argc, argv, NAME, "libuv uv_read_start + uv_try_write/uv_write, a loop "
                                        "per thread with --threads", identity, ok,
                      ECHO_MAX_THREADS);
    bufsize = o.bufsize;
    nshards = o.threads;
    shards = calloc((size_t)nshards, sizeof *shards);
    if (!shards)
        return 1;
    unsigned port = o.port;
    int r, fd0 = -1;
    for (int i = 0; i < nshards; i++) {
        struct shard *sh = &shards[i];
        sh->index = i;
        sh->cpu = o.pin ? echo_cpu(i) : -1;
        uv_loop_init(&sh->loop);
        int fd = echo_listen_socket_on(NAME, port, nshards > 1);
        port = echo_port(fd); /* the others join the port the first one got */
        if (i == 0)
            fd0 = fd;
        uv_tcp_init(&sh->loop, &sh->server);
        sh->server.data = sh;
        if ((r = uv_tcp_open(&sh->server, fd)) < 0 ||
            (r = uv_listen((uv_stream_t *)&sh->server, SOMAXCONN, on_connection)) < 0) {
            fprintf(stderr, "echo-libuv: listen on 127.0.0.1:%u: %s\n", port, uv_strerror(r));
            return 1;
        }
        uv_async_init(&sh->loop, &sh->stop, on_stop);
        sh->stop.data = sh;
    }
    uv_signal_init(&shards[0].loop, &sigint_h);
    uv_signal_init(&shards[0].loop, &sigterm_h);
    uv_signal_start(&sigint_h, on_signal, SIGINT);
    uv_signal_start(&sigterm_h, on_signal, SIGTERM);
    for (int i = 1; i < nshards; i++)
        if (uv_thread_create(&shards[i].th, run, &shards[i]) != 0) {
            fprintf(stderr, "echo-libuv: thread\n");
            return 1;
        }
    echo_listening(fd0, identity);
    run(&shards[0]);
    int failed = 0;
    for (int i = 1; i < nshards; i++)
        uv_thread_join(&shards[i].th);
    for (int i = 0; i < nshards; i++) {
        struct shard *sh = &shards[i];
        if (nshards > 1 || o.pin)
            echo_loop_line(NAME, "loop", i, sh->cpu, sh->accepted, sh->bytes);
        failed |= uv_loop_close(&sh->loop) != 0;
    }
    free(shards);
    return failed;
}
