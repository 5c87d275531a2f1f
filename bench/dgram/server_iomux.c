/* SPDX-License-Identifier: MIT */
/* The datagram study's iomux server: a mux_udp_t receiving from a pool, each datagram sent
 * back to its sender from the pool buffer it came in, which goes back to the pool when its
 * send is called back (docs/udp.md). The backend is IOMUX_BACKEND's; the line the runner
 * reads names it. Sends queued from one batch of receive callbacks leave in one sendmmsg
 * (on io_uring the receive is a multishot recvmsg into the pool's buffer ring). */
#include <stdint.h>

#include "common.h"
#include "iomux.h"
#include "iomux/udp.h"

#define SLOTS 4096
#define BUFSZ 2048 /* a 1,200-byte datagram and the pool's headroom */

struct slot {
    mux_udp_send_t req;
    mux_buf_t out;
    char *buf;
    struct slot *next;
};

static mux_bufpool_t pool;
static struct slot slots[SLOTS], *free_slots;
static mux_udp_t udp;
static unsigned long dropped;

static void sent(mux_udp_send_t *req, int status)
{
    struct slot *s = (struct slot *)req; /* req first */
    (void)status;                        /* a datagram lost is UDP's: the client counts it */
    mux_bufpool_put(&pool, s->buf);
    s->next = free_slots;
    free_slots = s;
}

static void received(mux_udp_t *u, int status, const mux_dgram_t *d)
{
    if (status < 0) { /* -ENOBUFS: every buffer is in a send; start again */
        mux_udp_recv_start_pool(u, &pool, received);
        return;
    }
    struct slot *s = free_slots;
    if (!s) {
        dropped++;
        mux_bufpool_put(&pool, d->buf);
        return;
    }
    free_slots = s->next;
    s->buf = d->buf;
    s->out = mux_buf_init(d->base, d->len);
    if (mux_udp_send(u, &s->req, &s->out, 1, d->addr, d->addrlen, sent) != 0)
        sent(&s->req, -1);
}

static void closed(mux_udp_t *u)
{
    (void)u;
}

static void on_term(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    (void)signum;
    mux_signal_stop(loop, w);
    mux_udp_close(&udp, closed);
}

int main(int argc, char **argv)
{
    char identity[128];
    snprintf(identity, sizeof identity, "iomux %s (static)", mux_version_string());
    struct dgram_options o =
        dgram_parse(argc, argv, "dgram-iomux", "iomux mux_udp_t, a pool", identity, 1);
    mux_loop_t loop;
    int err = mux_loop_init(&loop, NULL);
    if (err != 0) {
        fprintf(stderr, "dgram-iomux: mux_loop_init: %s\n", mux_strerror(err));
        return 1;
    }
    static char mem[SLOTS][BUFSZ] __attribute__((aligned(4096)));
    static uint32_t fslots[SLOTS];
    mux_bufpool_init(&pool, mem, BUFSZ, SLOTS, fslots);
    for (int i = SLOTS - 1; i >= 0; i--) {
        slots[i].next = free_slots;
        free_slots = &slots[i];
    }
    int fd = dgram_socket(o.port, 1);
    if ((err = mux_udp_open(&loop, &udp, fd)) != 0 ||
        (err = mux_udp_recv_start_pool(&udp, &pool, received)) != 0) {
        fprintf(stderr, "dgram-iomux: %s\n", mux_strerror(err));
        return 1;
    }
    mux_signal_t term;
    mux_signal_init(&term, on_term, SIGTERM);
    mux_signal_start(&loop, &term);
    char what[64];
    snprintf(what, sizeof what, "iomux mux_udp_t, backend %s", mux_loop_backend(&loop));
    dgram_listening(fd, what);
    mux_run(&loop, MUX_RUN_DEFAULT);
    return mux_loop_close(&loop) == 0 ? 0 : 1;
}
