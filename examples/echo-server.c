/* SPDX-License-Identifier: MIT */
/* echo-server: sends back every byte it receives, on as many connections as arrive.
 *
 * The buffers come from one pool (--pool N buffers, shared by every connection; on io_uring
 * the kernel picks them as data arrives, so an idle connection holds none), and each echo is
 * sent from the buffer its bytes came in with mux_write_pool, which gives the buffer back to
 * the pool once it is sent: no request, no callback, and reading goes on (where the program
 * makes the sends, most go inside the call and the buffer is back at once; on io_uring the
 * send goes with the loop's next wait, as a hand-written io_uring server sends). When more
 * than one buffer's worth of a connection's echoes waits to be written (its client does not
 * read them), it stops reading until they are: its echoes hold two buffers at most (on
 * io_uring, a stopped reader also keeps what the kernel received for it before the stop took
 * effect: a few buffers), so a client that does not read its echoes slows itself down, not
 * the server. When the pool runs
 * dry, a connection waits for a buffer to come back (a check watcher, started only then, looks
 * after each iteration of the loop).
 *
 * With --pool 0 every connection has a buffer of its own instead, in the shape of Asio's echo
 * server: read a buffer, write the bytes back, read again once the write completed. Usually
 * the socket has room and the bytes go out at once with mux_try_write, as libuv's server sends
 * with uv_try_write; what it does not take (on io_uring and IOCP, all of it) goes through
 * mux_write, and reading stops until that write's callback (unless the write was done inside
 * mux_write: its callback comes before the next read, the stream's order, and reading goes
 * on). A connection with no traffic for --timeout seconds (10 by default), or whose echo
 * cannot be written for that long (its client does not read), is closed: a client that stops
 * reading holds its buffers only that long. SIGINT or SIGTERM closes everything and ends the program with status
 * 0 (on Windows: Ctrl-C, Ctrl-Break or the console closing). The backend comes from
 * IOMUX_BACKEND, as in every iomux program.
 *
 * A loop per core: --threads N runs N loops, each on a thread of its own (loop 0 on the main
 * thread), and --pin pins loop i to the i-th CPU the process may use. By default every loop
 * listens on the port itself (SO_REUSEPORT: the kernel spreads the connections by hash),
 * with --steer the kernel gives each connection to the loop on the CPU that received it, and
 * with --acceptor loop 0 alone accepts and hands the connections round robin to every loop
 * through channels (mux_chan_t), as every --threads run does on Windows, which has no
 * SO_REUSEPORT. Each loop has its own pool (--pool is shared out). Loop 0 hears the signals
 * and tells every loop, through an async, to close what it owns; each loop's mux_run then
 * returns, and at the end each prints its connections and bytes. Steering needs Linux;
 * pinning Linux's or Windows' CPU affinity calls.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <iomux.h> /* on Windows: winsock2.h and ws2tcpip.h */

#include "cli.h"

#ifdef _WIN32
#include <malloc.h>
#define aligned_alloc(align, n) _aligned_malloc(n, align)
#define aligned_free            _aligned_free
#define close_socket            closesocket
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>
#define aligned_free free
#define close_socket close
#endif
#define MAX_THREADS 1024

struct conn {
    mux_stream_t stream;
    mux_write_t write;
    mux_buf_t out;            /* the echo being written */
    struct conn *next, *prev; /* all open connections, to close them on exit */
    struct conn *next_dry;    /* waiting for a pool buffer */
    int dry;
    int paused; /* reading stopped until the echo's write callback */
    struct server *srv;
    alignas(64) char buf[]; /* --pool 0: the connection's own, aligned as the pool is */
};

/* One loop and what it owns. */
struct server {
    mux_loop_t loop;
    mux_listener_t listener;      /* every loop's, or loop 0's alone with --acceptor */
    mux_chan_t chan;              /* --acceptor: the connections loop 0 hands over */
    mux_async_t stop;             /* loop 0 tells every loop to close what it owns */
    struct cli_stop sigs;         /* loop 0's */
    pthread_t thread;
    int index, cpu; /* cpu: where it is pinned, or -1 */
    int listening, has_chan;
    struct conn *conns;
    struct conn *dry_head, *dry_tail; /* FIFO of connections waiting for a buffer */
    mux_check_t refill;               /* started while connections wait for a buffer */
    uint32_t nbufs;                   /* its pool's size; 0: a buffer per connection */
    mux_bufpool_t pool;
    char *pool_mem;
    uint32_t *pool_slots;
    unsigned long accepted; /* connections it served */
    uint64_t bytes;         /* bytes it echoed */
};

/* What every loop shares, set before the threads start and never written after. */
static struct {
    size_t bufsize;
    mux_stream_timeouts_t timeouts;
    int nthreads, acceptor;
    unsigned next; /* --acceptor: the next loop's turn (loop 0's thread only) */
    struct server *srv;
} cfg = {.bufsize = 16384, .nthreads = 1};

static void on_read(mux_stream_t *s, ssize_t nread, char *buf);
static void on_read_pooled(mux_stream_t *s, ssize_t nread, char *buf);

static int start_reading(struct server *srv, struct conn *c)
{
    if (srv->nbufs)
        return mux_read_start_pool(&c->stream, &srv->pool, on_read_pooled);
    return mux_read_start(&c->stream, c->buf, cfg.bufsize, on_read);
}

static void on_closed(mux_stream_t *s)
{
    struct conn *c = s->data; /* the stream and its buffer are ours again only now */
    aligned_free(c);
}

static void conn_close(struct server *srv, struct conn *c)
{
    if (c->dry) { /* off the waiting list */
        struct conn **pp = &srv->dry_head, *prev = NULL;
        while (*pp != c) {
            prev = *pp;
            pp = &(*pp)->next_dry;
        }
        *pp = c->next_dry;
        if (srv->dry_tail == c)
            srv->dry_tail = prev;
        c->dry = 0;
        if (!srv->dry_head)
            mux_check_stop(&srv->loop, &srv->refill); /* it would keep the loop running */
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    mux_stream_close(&c->stream, on_closed);
}

/* After an iteration of the loop in which connections waited for a pool buffer: as many of
 * them as there are free buffers read again, in the order they ran dry (the library gives the
 * buffers of sent echoes back by itself, so this looks rather than being told). */
static void on_refill(mux_loop_t *loop, mux_check_t *w)
{
    struct server *srv = w->data;
    (void)loop;
    int avail = mux_bufpool_available(&srv->pool);
    struct conn *d;
    while (avail-- > 0 && (d = srv->dry_head) != NULL) {
        srv->dry_head = d->next_dry;
        if (!srv->dry_head)
            srv->dry_tail = NULL;
        d->dry = 0;
        if (start_reading(srv, d) < 0)
            conn_close(srv, d);
    }
    if (!srv->dry_head)
        mux_check_stop(&srv->loop, &srv->refill);
}

/* The echoes queued before the empty write that marks them are written: reading goes on. */
static void on_drained(mux_write_t *req, int status)
{
    struct conn *c = req->data;
    if (status == -ECANCELED)
        return; /* closing: the close callback frees it */
    c->paused = 0;
    if (status < 0 || start_reading(c->srv, c) < 0)
        conn_close(c->srv, c);
}

/* More than a buffer's worth of a connection's echoes not yet written: its client is not
 * reading them. No more is read until they are, which the callback of an empty write queued
 * after them says (writes end in order). */
static void pause_reading(struct server *srv, struct conn *c)
{
    mux_read_stop(&c->stream);
    c->paused = 1;
    c->write.data = c;
    if (mux_write(&c->stream, &c->write, NULL, 0, on_drained) < 0)
        conn_close(srv, c);
}

static void on_written(mux_write_t *req, int status)
{
    struct conn *c = req->data;
    if (status == -ECANCELED)
        return; /* closing: the close callback frees it */
    struct server *srv = c->srv;
    if (status == 0)
        srv->bytes += c->out.len;
    if (status < 0) {
        conn_close(srv, c);
    } else if (c->paused) {
        c->paused = 0;
        if (start_reading(srv, c) < 0)
            conn_close(srv, c);
    }
}

/* A read from the pool: the bytes are echoed from the buffer they came in (mux_write_pool,
 * which gives it back once sent). The rest (the pool dry, the end, an error) is on_read's. */
static void on_read_pooled(mux_stream_t *s, ssize_t nread, char *buf)
{
    if (nread <= 0) {
        on_read(s, nread, buf);
        return;
    }
    struct conn *c = s->data;
    struct server *srv = c->srv;
    if (mux_write_pool(s, buf, (size_t)nread) < 0) {
        mux_bufpool_put(&srv->pool, buf); /* refused: still ours */
        conn_close(srv, c);
        return;
    }
    srv->bytes += (uint64_t)nread;
    if (mux_stream_write_queue_size(s) > (ssize_t)cfg.bufsize)
        pause_reading(srv, c);
}

static void on_read(mux_stream_t *s, ssize_t nread, char *buf)
{
    struct conn *c = s->data;
    struct server *srv = c->srv;
    if (nread == -ENOBUFS) { /* the pool is dry: wait for a buffer to come back */
        c->dry = 1;
        c->next_dry = NULL;
        if (srv->dry_tail)
            srv->dry_tail->next_dry = c;
        else
            srv->dry_head = c;
        srv->dry_tail = c;
        mux_check_start(&srv->loop, &srv->refill); /* -EBUSY when started already */
        return;
    }
    if (nread <= 0) { /* end of stream or an error (a send's too): reading has stopped */
        conn_close(srv, c);
        return;
    }
    /* Most echoes fit the socket at once: sent here, with no request and no callback, as
     * libuv's server does with uv_try_write. (On io_uring and IOCP it says -EAGAIN: the
     * kernel's queue makes the sends.) */
    mux_buf_t out = mux_buf_init(buf, (size_t)nread);
    ssize_t sent = mux_try_write(s, &out, 1);
    if (sent == nread) {
        srv->bytes += (uint64_t)sent;
        return;
    }
    if (sent < 0 && sent != -EAGAIN) {
        conn_close(srv, c);
        return;
    }
    if (sent < 0)
        sent = 0;
    srv->bytes += (uint64_t)sent;
    /* The rest (all of it, on io_uring) is queued. */
    c->out = mux_buf_init(buf + sent, (size_t)(nread - sent));
    c->write.data = c;
    if (mux_write(s, &c->write, &c->out, 1, on_written) < 0) {
        conn_close(srv, c);
        return;
    }
    /* Bytes left to write: the buffer is busy until they are, and no more is read meanwhile.
     * Else the write is done, and its callback comes before the next read (the stream's
     * order): reading goes on, with no stop and start per message. */
    if (mux_stream_write_queue_size(s) > 0) {
        mux_read_stop(s);
        c->paused = 1;
    }
}

static struct conn *conn_new(struct server *srv)
{
    return aligned_alloc(64, (sizeof(struct conn) + (srv->nbufs ? 0 : cfg.bufsize) + 63) / 64 * 64);
}

/* A connection whose stream was opened on srv's loop starts echoing. */
static void conn_serve(struct server *srv, struct conn *c)
{
    c->stream.data = c;
    c->dry = 0;
    c->paused = 0;
    c->srv = srv;
    c->prev = NULL;
    c->next = srv->conns;
    if (c->next)
        c->next->prev = c;
    srv->conns = c;
    srv->accepted++;
    mux_stream_nodelay(&c->stream, 1);
    mux_stream_set_timeouts(&c->stream, &cfg.timeouts); /* -ETIMEDOUT closes it below */
    if (start_reading(srv, c) < 0)
        conn_close(srv, c);
}

static void on_accept(mux_listener_t *l, mux_os_sock_t fd, int status)
{
    struct server *srv = l->data;
    if (fd == MUX_OS_SOCK_INVALID) {
        fprintf(stderr, "echo-server: accept: %s\n", mux_strerror(status));
        return; /* EMFILE: the listener pauses and resumes by itself */
    }
    if (cfg.acceptor) { /* round robin; a full loop's turn goes to the next */
        for (int tries = 0; tries < cfg.nthreads; tries++) {
            struct server *to = &cfg.srv[cfg.next++ % (unsigned)cfg.nthreads];
            if (to == srv)
                break; /* this loop's own turn: served here, below */
            if (mux_chan_send_socket(&to->chan, l, fd, NULL) == 0)
                return;
        }
    }
    struct conn *c = conn_new(srv);
    if (!c || mux_stream_accept(l, &c->stream, fd) < 0) {
        fprintf(stderr, "echo-server: out of memory or bad socket\n");
        close_socket(fd);
        aligned_free(c);
        return;
    }
    conn_serve(srv, c);
}

/* --acceptor: a connection loop 0 accepted, to serve here. */
static void on_handed(mux_chan_t *ch, mux_msg_t *msg, int status)
{
    struct server *srv = ch->data;
    if (status != 0)
        return; /* closing: its socket is closed for us */
    struct conn *c = conn_new(srv);
    if (!c || mux_chan_stream_open(ch, &c->stream, msg) < 0) {
        fprintf(stderr, "echo-server: out of memory or bad socket\n");
        aligned_free(c);
        return; /* the socket left in msg is closed when this returns */
    }
    conn_serve(srv, c);
}

/* From loop 0: close everything this loop owns; its mux_run then returns. */
static void on_stop(mux_loop_t *loop, mux_async_t *a)
{
    struct server *srv = a->data;
    mux_async_stop(loop, a);
    if (srv->listening)
        mux_listener_close(&srv->listener, NULL);
    srv->listening = 0;
    if (srv->has_chan)
        mux_chan_close(&srv->chan);
    srv->has_chan = 0;
    while (srv->conns)
        conn_close(srv, srv->conns);
}

static void on_signal(mux_loop_t *loop, mux_signal_t *w, int signum)
{
    struct server *srv = loop->data;
    (void)w;
    /* The other loops' counts are theirs until their threads end: told at exit. */
    fprintf(stderr, "echo-server: %s, closing %d loop%s\n", cli_signal_name(signum),
            cfg.nthreads, cfg.nthreads > 1 ? "s" : "");
    cli_stop_stop(&srv->sigs, loop);
    for (int i = 0; i < cfg.nthreads; i++)
        mux_async_send(&cfg.srv[i].stop); /* loop 0's own included */
}

static void *run_loop(void *arg)
{
    struct server *srv = arg;
    int err = srv->cpu >= 0 ? cli_pin(srv->cpu) : 0;
    if (err != 0)
        fprintf(stderr, "echo-server: loop %d: pin to CPU %d: %s\n", srv->index, srv->cpu,
                strerror(err));
    int rc = mux_run(&srv->loop, MUX_RUN_DEFAULT);
    if (rc < 0)
        fprintf(stderr, "echo-server: loop %d: run: %s\n", srv->index, mux_strerror(rc));
    return (void *)(intptr_t)(rc < 0);
}

static void usage(FILE *to)
{
    fprintf(to, "usage: echo-server [--port N] [--bind ADDR] [--buffer BYTES] [--pool N]\n"
                "                   [--timeout SECONDS] [--reuseport] [--threads N [--pin]\n"
                "                   [--steer cpu|bpf | --acceptor]]\n"
                "  --port N        TCP port to listen on (default 55555; 0 picks a free one)\n"
                "  --bind ADDR     IPv4 or IPv6 address to bind (default 127.0.0.1)\n"
                "  --buffer BYTES  read buffer size (default 16384)\n"
                "  --pool N        buffers shared by all connections (default 4096, at most\n"
                "                  1048576), shared out among the loops; 0: a buffer of its\n"
                "                  own per connection\n"
                "  --timeout S     close a connection idle for S seconds, or whose echo cannot\n"
                "                  be written for S seconds (default 10; 0: never)\n"
                "  --reuseport     set SO_REUSEPORT, to run one server per CPU on one port\n"
                "  --threads N     N loops, a thread each (default 1); each listens on the\n"
                "                  port (SO_REUSEPORT) unless --acceptor (always on Windows)\n"
                "  --pin           pin loop i to the i-th CPU this process may run on\n"
                "  --steer cpu     (implies --pin) give each connection to the loop on the CPU\n"
                "                  that received it: SO_INCOMING_CPU (Linux 6.2 on)\n"
                "  --steer bpf     the same with a classic BPF program on the port's group\n"
                "                  (needs the process to run on CPUs 0 .. N-1)\n"
                "  --acceptor      loop 0 alone accepts, and hands connections round robin to\n"
                "                  every loop (itself included) through channels\n"
                "Prints 'listening on ADDR:PORT' once ready, and per loop at exit 'loop I (cpu\n"
                "C): N connections, B bytes echoed'. The backend comes from the IOMUX_BACKEND\n"
                "environment variable (epoll, poll, select, uring, or the opt-in rtsig; iocp or\n"
                "select on Windows), else the best available. SIGINT or SIGTERM stops it (on\n"
                "Windows Ctrl-C, Ctrl-Break, or its console closing).\n");
}

static int open_loop(struct server *srv)
{
    /* Each loop is run by one thread, its own, from start to end: saying so lets io_uring
     * defer its completion work to the loop's waits (docs/backends.md). */
    mux_loop_options_t lo = {.flags = MUX_LOOP_ONE_THREAD};
    int rc = mux_loop_init(&srv->loop, &lo);
    if (rc < 0) {
        cli_loop_error(rc);
        return -1;
    }
    srv->loop.data = srv;
    if (srv->nbufs) {
        srv->pool_mem =
            aligned_alloc(4096, ((size_t)srv->nbufs * cfg.bufsize + 4095) / 4096 * 4096);
        srv->pool_slots = malloc((size_t)srv->nbufs * sizeof *srv->pool_slots);
        if (!srv->pool_mem || !srv->pool_slots ||
            mux_bufpool_init(&srv->pool, srv->pool_mem, cfg.bufsize, srv->nbufs, srv->pool_slots) <
                0) {
            fprintf(stderr, "echo-server: no memory for %u buffers of %zu bytes\n", srv->nbufs,
                    cfg.bufsize);
            return -1;
        }
    }
    mux_check_init(&srv->refill, on_refill);
    srv->refill.data = srv;
    mux_async_init(&srv->stop, on_stop);
    srv->stop.data = srv;
    if ((rc = mux_async_start(&srv->loop, &srv->stop)) < 0) {
        fprintf(stderr, "echo-server: async: %s\n", mux_strerror(rc));
        return -1;
    }
    return 0;
}

/* What the command line says, besides what every loop shares (cfg). */
struct options {
    const char *bind_addr;
    unsigned port;
    unsigned long nbufs;
    double timeout_s;
    int pin;
    unsigned steer;
    mux_listen_options_t lopts;
};

/* The command line into `op` and cfg; returns -1 to go on, or the status to exit with. */
static int parse_args(int argc, char **argv, struct options *op)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'},    {"bind", required_argument, NULL, 'b'},
        {"buffer", required_argument, NULL, 's'},  {"reuseport", no_argument, NULL, 'r'},
        {"pool", required_argument, NULL, 'n'},    {"timeout", required_argument, NULL, 't'},
        {"threads", required_argument, NULL, 'T'}, {"pin", no_argument, NULL, 'P'},
        {"steer", required_argument, NULL, 'S'},   {"acceptor", no_argument, NULL, 'A'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "p:b:s:n:t:rh", opts, NULL)) != -1) {
        switch (opt) {
        case 'p':
            op->port = (unsigned)cli_number("port", optarg, 0, 65535);
            break;
        case 'b':
            op->bind_addr = optarg;
            break;
        case 's':
            cfg.bufsize = cli_number("buffer size", optarg, 1, 64u << 20);
            break;
        case 'n':
            op->nbufs = cli_number("pool size", optarg, 0, 1u << 20);
            break;
        case 't':
            op->timeout_s = cli_seconds("timeout", optarg, 0, 86400);
            break;
        case 'r':
            op->lopts.flags |= MUX_LISTEN_REUSEPORT;
            break;
        case 'T':
            cfg.nthreads = (int)cli_number("thread count", optarg, 1, MAX_THREADS);
            break;
        case 'P':
            op->pin = 1;
            break;
        case 'S':
            op->steer = cli_steer(optarg);
            op->pin = 1;
            break;
        case 'A':
            cfg.acceptor = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if (op->steer && cfg.acceptor) {
        fprintf(stderr, "echo-server: --steer and --acceptor exclude each other\n");
        return 2;
    }
    return -1;
}

/* Loop i: its loop and pool, and its listener or channel. 0, or -1 said. */
static int open_server(struct server *srv, const struct options *op, struct sockaddr_storage *ss,
                       socklen_t len)
{
    int rc;
    unsigned long n = (unsigned long)cfg.nthreads;
    srv->nbufs = (uint32_t)((op->nbufs + n - 1) / n);
    if (open_loop(srv) < 0)
        return -1;
    if (cfg.acceptor && srv->index > 0) {
        srv->chan.data = srv;
        if ((rc = mux_chan_open(&srv->loop, &srv->chan, 1024, on_handed)) < 0) {
            fprintf(stderr, "echo-server: channel: %s\n", mux_strerror(rc));
            return -1;
        }
        srv->has_chan = 1;
        return 0;
    }
    /* Bound in loop order: the BPF steering gives CPU k to the k-th listener. */
    mux_listen_options_t lo = op->lopts;
    lo.flags |= op->steer;
    lo.cpu = srv->cpu;
    srv->listener.data = srv;
    rc = mux_listen(&srv->loop, &srv->listener, (struct sockaddr *)ss, len, &lo, on_accept);
    if (rc < 0) {
        fprintf(stderr, "echo-server: listen on %s:%u: %s\n", op->bind_addr, op->port,
                mux_strerror(rc));
        return -1;
    }
    srv->listening = 1;
    if (srv->index == 0) { /* the others bind the port the first one got */
        socklen_t blen = sizeof *ss;
        mux_listener_address(&srv->listener, (struct sockaddr *)ss, &blen);
    }
    return 0;
}

/* Loop 0 hears the signals that stop a server (cli.h). */
static int watch_signals(struct server *first)
{
    return cli_stop_start(&first->sigs, &first->loop, on_signal, first);
}

/* Waits for the loops, says what each served, and closes them: the exit status. */
static int finish(void)
{
    int failed = run_loop(&cfg.srv[0]) != NULL;
    for (int i = 1; i < cfg.nthreads; i++) {
        void *res;
        pthread_join(cfg.srv[i].thread, &res);
        failed |= res != NULL;
    }
    for (int i = 0; i < cfg.nthreads; i++) {
        struct server *srv = &cfg.srv[i];
        char where[32] = "";
        if (srv->cpu >= 0)
            snprintf(where, sizeof where, " (cpu %d)", srv->cpu);
        fprintf(stderr, "echo-server: loop %d%s: %lu connections, %llu bytes echoed\n", i, where,
                srv->accepted, (unsigned long long)srv->bytes);
        int rc = mux_loop_close(&srv->loop);
        if (rc < 0) {
            fprintf(stderr, "echo-server: loop %d: close: %s\n", i, mux_strerror(rc));
            failed = 1;
        }
        aligned_free(srv->pool_mem);
        free(srv->pool_slots);
    }
    return failed;
}

int main(int argc, char **argv)
{
    cli_prog = "echo-server";
    struct options op = {.bind_addr = "127.0.0.1", .port = 55555, .nbufs = 4096, .timeout_s = 10};
    int rc = parse_args(argc, argv, &op);
    if (rc >= 0)
        return rc;
    struct sockaddr_storage ss;
    socklen_t len = cli_address(op.bind_addr, op.port, &ss);
    int cpus[MAX_THREADS], ncpus = cli_cpus(cpus, MAX_THREADS);
    if (op.pin && ncpus == 0) {
        fprintf(stderr, "echo-server: cannot read the CPUs this process may use\n");
        return 1;
    }
    cfg.timeouts.idle_ns = cfg.timeouts.write_ns = (uint64_t)(op.timeout_s * 1e9);
    if (!(cfg.srv = calloc((size_t)cfg.nthreads, sizeof *cfg.srv))) {
        fprintf(stderr, "echo-server: out of memory\n");
        return 1;
    }
    if (cfg.nthreads > 1 && !cfg.acceptor && !cli_has_reuseport())
        cfg.acceptor = 1; /* no SO_REUSEPORT (Windows): loop 0 hands connections out */
    if (cfg.nthreads > 1 && !cfg.acceptor)
        op.lopts.flags |= MUX_LISTEN_REUSEPORT;
    for (int i = 0; i < cfg.nthreads; i++) {
        cfg.srv[i].index = i;
        cfg.srv[i].cpu = op.pin ? cpus[i % ncpus] : -1;
        if (open_server(&cfg.srv[i], &op, &ss, len) < 0)
            return 1;
    }
    if (watch_signals(&cfg.srv[0]) < 0)
        return 1;
    for (int i = 1; i < cfg.nthreads; i++)
        if ((rc = pthread_create(&cfg.srv[i].thread, NULL, run_loop, &cfg.srv[i])) != 0) {
            fprintf(stderr, "echo-server: thread: %s\n", strerror(rc));
            return 1;
        }
    char where[80];
    cli_address_text(&ss, where, sizeof where);
    printf("listening on %s (backend %s)\n", where, mux_loop_backend(&cfg.srv[0].loop));
    fflush(stdout);
    rc = finish();
    free(cfg.srv);
    return rc;
}
