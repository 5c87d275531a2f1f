/* SPDX-License-Identifier: MIT */
/* The datagram study's libuv server, as libuv's documentation has a UDP server do it: a
 * uv_udp_t receiving with recvmmsg (UV_UDP_RECVMMSG, libuv 1.37 on: the allocation callback's
 * buffer is cut into a datagram per 64 KB), each datagram sent back at once with
 * uv_udp_try_send (a sendmsg per datagram; libuv before 1.50 has no batch send), and queued
 * with uv_udp_send, a copy and a request, only when the socket is full. */
#include <dlfcn.h>
#include <uv.h>

#include "common.h"

#if UV_VERSION_MAJOR == 1 && UV_VERSION_MINOR < 37
#error "libuv 1.37 or later: UV_UDP_RECVMMSG"
#endif

#define CHUNK (64 * 1024) /* libuv's datagram slot in a recvmmsg buffer */

static uv_udp_t udp;
static char recv_buf[DGRAM_BATCH * CHUNK];

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)h;
    (void)hint;
    *buf = uv_buf_init(recv_buf, sizeof recv_buf); /* the one buffer, reused */
}

struct queued {
    uv_udp_send_t req;
    char data[DGRAM_MAX];
};

static void on_queued(uv_udp_send_t *req, int status)
{
    (void)status;
    free(req);
}

static void on_recv(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *addr,
                    unsigned flags)
{
    if (n <= 0 || !addr || (flags & UV_UDP_MMSG_FREE))
        return; /* nothing more, or the end of a recvmmsg buffer (static here) */
    uv_buf_t out = uv_buf_init(buf->base, (unsigned)n);
    int r = uv_udp_try_send(h, &out, 1, addr);
    if (r == UV_EAGAIN) {
        struct queued *q = malloc(sizeof *q);
        if (!q || (size_t)n > sizeof q->data) {
            free(q);
            return;
        }
        memcpy(q->data, buf->base, (size_t)n);
        out = uv_buf_init(q->data, (unsigned)n);
        if (uv_udp_send(&q->req, h, &out, 1, addr, on_queued) != 0)
            free(q);
    }
}

static void on_term(uv_signal_t *s, int signum)
{
    (void)signum;
    uv_close((uv_handle_t *)s, NULL);
    uv_close((uv_handle_t *)&udp, NULL);
}

int main(int argc, char **argv)
{
    Dl_info info;
    char identity[512];
    int ok = dladdr((void *)uv_udp_init_ex, &info) && info.dli_fname &&
             strstr(info.dli_fname, "libuv");
    snprintf(identity, sizeof identity, "libuv %s (%s)", uv_version_string(),
             ok ? info.dli_fname : "not found");
    struct dgram_options o = dgram_parse(
        argc, argv, "dgram-libuv", "libuv uv_udp_t, recvmmsg, uv_udp_try_send", identity, ok);
    uv_loop_t *loop = uv_default_loop();
    int fd = dgram_socket(o.port, 1);
    if (uv_udp_init_ex(loop, &udp, AF_UNSPEC | UV_UDP_RECVMMSG) != 0 || uv_udp_open(&udp, fd) != 0 ||
        uv_udp_recv_start(&udp, on_alloc, on_recv) != 0) {
        fprintf(stderr, "dgram-libuv: cannot set up the socket\n");
        return 1;
    }
    uv_signal_t term;
    uv_signal_init(loop, &term);
    uv_signal_start(&term, on_term, SIGTERM);
    dgram_listening(fd, "libuv uv_udp_t, recvmmsg");
    uv_run(loop, UV_RUN_DEFAULT);
    return uv_loop_close(loop) == 0 ? 0 : 1;
}
