/* SPDX-License-Identifier: MIT */
/* The io_uring floor of the echo study: a completion-style echo server written by hand with
 * liburing, the way io_uring's own guides write one. A multishot accept; per connection one
 * multishot receive that takes its buffers from a provided-buffer ring (--buffer bytes each);
 * each buffer the kernel fills is sent back as it is, straight from that buffer, and given
 * back to the ring when its send completes. The ring is SINGLE_ISSUER | DEFER_TASKRUN, and
 * every iteration is one io_uring_enter through io_uring_submit_and_wait: it submits the
 * sends queued by the last iteration's completions and waits for the next ones.
 *
 * What a careful hand-written server also does, and this one does:
 * - One send in flight per connection: a block that arrives in two buffers is sent as two
 *   sends, the second submitted when the first completed, so that the bytes go out in order
 *   (two sends in flight on one socket may interleave when the first is short).
 * - A short send sends the rest from the same buffer.
 * - The buffer ring holds as many buffers as there are connections that may fill one, plus
 *   a few; the other free buffers wait on a stack, the most recently used on top, and top
 *   the ring up as connections arrive. A ring holding every buffer would cycle through all
 *   of them, each receive landing in the buffer used longest ago, cold in the cache (the
 *   iomux server's pool does the same: src/backend/uring/ops.c).
 * - A receive that found the ring empty (-ENOBUFS) is armed again once a buffer came back.
 *
 * It refuses to run (exit 1, with the reason) on a kernel without multishot receives
 * (Linux 6.0) or DEFER_TASKRUN (6.1): this is the floor as the issue of the echo study
 * describes it, not a fallback. */
#include "echo_common.h"

#include <liburing.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>

static const char *NAME = "echo-raw-uring";

#define NBUFS   16384u /* as many as the iomux server's pool (--pool 16384) */
#define SLACK   8u     /* buffers in the ring beyond one per connection */
#define QMAX    4u     /* filled buffers a connection may hold waiting for its send */
#define SQ_SIZE 4096u
#define CQ_SIZE 32768u

enum { UD_ACCEPT = 1, UD_RECV = 2, UD_SEND = 3, UD_SIGNAL = 4 };

struct conn {
    uint16_t q[QMAX];  /* filled buffers, in order; q[head] is being sent */
    uint32_t qlen[QMAX];
    uint32_t off;      /* bytes of q[head] sent */
    uint8_t head, n;   /* queue */
    uint8_t open, recv_armed, sending, closing;
};

static struct io_uring ring;
static struct io_uring_buf_ring *br;
static char *bufmem;
static size_t bufsize;
static unsigned inring, want_inring;
static uint16_t freestack[NBUFS];
static unsigned nfree;
static struct conn *conns;
static int nconns_max;
static int *dry; /* connections whose receive ended on an empty ring */
static int ndry;
static int lfd, sfd;
static uint64_t bytes;

static uint64_t ud(int kind, int fd)
{
    return (uint64_t)kind << 32 | (uint32_t)fd;
}

static struct io_uring_sqe *sqe_get(void)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    if (!sqe) { /* more queued than the SQ ring holds: submit early */
        io_uring_submit(&ring);
        sqe = io_uring_get_sqe(&ring);
    }
    return sqe;
}

static char *buf_addr(unsigned bid)
{
    return bufmem + (size_t)bid * bufsize;
}

/* Moves buffers from the stack into the ring until it holds what it should. */
static void ring_topup(void)
{
    int k = 0;
    while (inring < want_inring && nfree > 0) {
        unsigned bid = freestack[--nfree];
        io_uring_buf_ring_add(br, buf_addr(bid), (unsigned)bufsize, (unsigned short)bid,
                              io_uring_buf_ring_mask(NBUFS), k++);
        inring++;
    }
    if (k)
        io_uring_buf_ring_advance(br, k);
}

static void buf_put(unsigned bid)
{
    freestack[nfree++] = (uint16_t)bid;
    ring_topup();
}

static void arm_recv(int fd)
{
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_recv(sqe, fd, NULL, 0, 0);
    sqe->ioprio |= IORING_RECV_MULTISHOT;
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = 0;
    io_uring_sqe_set_data64(sqe, ud(UD_RECV, fd));
    conns[fd].recv_armed = 1;
}

static void arm_accept(void)
{
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, ud(UD_ACCEPT, lfd));
}

static void send_head(int fd)
{
    struct conn *c = &conns[fd];
    unsigned bid = c->q[c->head];
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_send(sqe, fd, buf_addr(bid) + c->off, c->qlen[c->head] - c->off,
                       MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, ud(UD_SEND, fd));
    c->sending = 1;
}

/* Closes a connection once nothing of it is in flight any more. */
static void conn_maybe_close(int fd)
{
    struct conn *c = &conns[fd];
    if (!c->closing || c->recv_armed || c->sending || !c->open)
        return;
    while (c->n) {
        buf_put(c->q[c->head]);
        c->head = (uint8_t)((c->head + 1) % QMAX);
        c->n--;
    }
    c->open = 0;
    want_inring -= 1;
    close(fd);
}

static void conn_fail(int fd)
{
    struct conn *c = &conns[fd];
    if (c->closing)
        return;
    c->closing = 1;
    if (c->recv_armed) { /* ends the multishot receive: its last CQE comes without MORE */
        struct io_uring_sqe *sqe = sqe_get();
        io_uring_prep_cancel64(sqe, ud(UD_RECV, fd), 0);
        io_uring_sqe_set_data64(sqe, 0);
    }
    conn_maybe_close(fd);
}

static void on_accept(int res, unsigned flags)
{
    if (!(flags & IORING_CQE_F_MORE))
        arm_accept();
    if (res < 0) {
        if (res != -ECONNABORTED && res != -EAGAIN)
            fprintf(stderr, "%s: accept: %s\n", NAME, strerror(-res));
        return;
    }
    if (res >= nconns_max) {
        close(res);
        return;
    }
    echo_nodelay(res);
    memset(&conns[res], 0, sizeof conns[res]);
    conns[res].open = 1;
    want_inring = want_inring + 1 > NBUFS ? NBUFS : want_inring + 1;
    ring_topup();
    arm_recv(res);
}

static void on_recv(int fd, int res, unsigned flags)
{
    struct conn *c = &conns[fd];
    int more = (flags & IORING_CQE_F_MORE) != 0;
    if (!more)
        c->recv_armed = 0;
    if (flags & IORING_CQE_F_BUFFER) {
        unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;
        inring--;
        if (res > 0 && !c->closing && c->n < QMAX) {
            unsigned tail = (c->head + c->n) % QMAX;
            c->q[tail] = (uint16_t)bid;
            c->qlen[tail] = (uint32_t)res;
            c->n++;
            if (!c->sending) {
                c->off = 0;
                send_head(fd);
            }
        } else {
            buf_put(bid);
            if (res > 0 && !c->closing)
                conn_fail(fd); /* more than QMAX blocks unechoed: not the echo client */
        }
        ring_topup();
    }
    if (res > 0) {
        if (!more && !c->closing)
            arm_recv(fd);
    } else if (res == -ENOBUFS && !c->closing) {
        dry[ndry++] = fd; /* armed again once a buffer came back */
    } else {
        conn_fail(fd); /* the end of the stream, an error, or its cancel */
    }
    conn_maybe_close(fd);
}

static void on_send(int fd, int res)
{
    struct conn *c = &conns[fd];
    c->sending = 0;
    if (res < 0) {
        conn_fail(fd);
        conn_maybe_close(fd);
        return;
    }
    c->off += (uint32_t)res;
    bytes += (uint64_t)res;
    if (c->off < c->qlen[c->head] && !c->closing) {
        send_head(fd); /* short: the rest from the same buffer */
        return;
    }
    buf_put(c->q[c->head]);
    c->head = (uint8_t)((c->head + 1) % QMAX);
    c->n--;
    c->off = 0;
    if (c->n && !c->closing)
        send_head(fd);
    conn_maybe_close(fd);
}

static void setup_ring(void)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
    p.cq_entries = CQ_SIZE;
    int err = io_uring_queue_init_params(SQ_SIZE, &ring, &p);
    if (err < 0) {
        fprintf(stderr, "%s: io_uring_queue_init_params (SINGLE_ISSUER|DEFER_TASKRUN): %s\n",
                NAME, strerror(-err));
        exit(1);
    }
    struct io_uring_probe *probe = io_uring_get_probe_ring(&ring);
    /* Multishot receives came with 6.0, as did the zero-copy send opcode, which says so. */
    if (!probe || !io_uring_opcode_supported(probe, IORING_OP_SEND_ZC)) {
        fprintf(stderr, "%s: this kernel has no multishot receive (Linux 6.0)\n", NAME);
        exit(1);
    }
    io_uring_free_probe(probe);
    size_t rbytes = NBUFS * sizeof(struct io_uring_buf);
    br = mmap(NULL, rbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bufmem = mmap(NULL, (size_t)NBUFS * bufsize, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (br == MAP_FAILED || bufmem == MAP_FAILED) {
        perror("echo-raw-uring: mmap");
        exit(1);
    }
    io_uring_buf_ring_init(br);
    struct io_uring_buf_reg reg = {.ring_addr = (uint64_t)(uintptr_t)br, .ring_entries = NBUFS,
                                   .bgid = 0};
    err = io_uring_register_buf_ring(&ring, &reg, 0);
    if (err < 0) {
        fprintf(stderr, "%s: io_uring_register_buf_ring: %s\n", NAME, strerror(-err));
        exit(1);
    }
    for (unsigned i = 0; i < NBUFS; i++)
        freestack[nfree++] = (uint16_t)(NBUFS - 1 - i); /* buffer 0 on top */
    want_inring = SLACK;
    ring_topup();
}

int main(int argc, char **argv)
{
    const char *identity = "hand-written io_uring (liburing), multishot receive into a "
                           "provided-buffer ring, SINGLE_ISSUER|DEFER_TASKRUN";
    struct echo_options o =
        echo_parse(argc, argv, NAME, "io_uring written by hand: multishot accept and receive "
                   "into a provided-buffer ring, sends from the filled buffer", identity, 1);
    bufsize = (o.bufsize + 63) / 64 * 64; /* every buffer on a 64-byte boundary */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    nconns_max = rl.rlim_cur > 1u << 20 ? 1 << 20 : (int)rl.rlim_cur;
    conns = calloc((size_t)nconns_max, sizeof *conns);
    dry = calloc((size_t)nconns_max, sizeof *dry);
    if (!conns || !dry)
        return 1;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    lfd = echo_listen_socket(NAME, o.port);
    setup_ring();
    arm_accept();
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_poll_add(sqe, sfd, POLLIN);
    io_uring_sqe_set_data64(sqe, ud(UD_SIGNAL, sfd));
    echo_listening(lfd, identity);
    for (int stop = 0; !stop;) {
        int r = io_uring_submit_and_wait(&ring, 1);
        if (r < 0 && r != -EINTR && r != -ETIME && r != -EBUSY) {
            fprintf(stderr, "%s: io_uring_submit_and_wait: %s\n", NAME, strerror(-r));
            return 1;
        }
        struct io_uring_cqe *cqe;
        unsigned head, n = 0;
        io_uring_for_each_cqe(&ring, head, cqe)
        {
            n++;
            uint64_t d = cqe->user_data;
            int fd = (int)(uint32_t)d;
            switch ((int)(d >> 32)) {
            case UD_RECV:
                on_recv(fd, cqe->res, cqe->flags);
                break;
            case UD_SEND:
                on_send(fd, cqe->res);
                break;
            case UD_ACCEPT:
                on_accept(cqe->res, cqe->flags);
                break;
            case UD_SIGNAL:
                stop = 1;
                break;
            default: /* a cancel's own completion */
                break;
            }
        }
        io_uring_cq_advance(&ring, n);
        while (ndry > 0 && inring > 0) { /* buffers came back: the dry receivers again */
            int fd = dry[--ndry];
            if (conns[fd].open && !conns[fd].closing && !conns[fd].recv_armed)
                arm_recv(fd);
        }
    }
    for (int fd = 0; fd < nconns_max; fd++)
        if (conns[fd].open)
            close(fd);
    io_uring_queue_exit(&ring);
    close(lfd);
    close(sfd);
    return 0;
}
