/* SPDX-License-Identifier: MIT */
/* The floor of the echo study: level-triggered epoll written by hand. A readable
 * connection is read once into its buffer and the bytes are written back at once; only a
 * short write makes the connection wait for EPOLLOUT (and not for EPOLLIN until the rest
 * is written), so the common case costs epoll_wait, read and write and nothing else.
 *
 * With --threads N (the scaling study's floor), N such loops run, a thread each, each with
 * its own epoll instance and its own listening socket on the port (SO_REUSEPORT): nothing is
 * shared between threads. Thread 0 also reads the signals (a signalfd) and tells the others
 * to end through an eventfd each. */
#include "echo_common.h"

#include <stdalign.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>

static const char *NAME = "echo-raw-epoll";

struct conn {
    int fd;
    struct conn *next, *prev; /* all open connections, to free them on exit */
    size_t len, done;         /* bytes in buf, bytes of them written back */
    alignas(64) char buf[];   /* aligned: the kernel copies into misaligned buffers much slower */
};

/* One thread's loop. */
struct shard {
    int ep, lfd, stopfd, sfd; /* sfd: thread 0's signalfd, else -1 */
    int index, cpu;
    size_t bufsize;
    struct conn *conns;
    unsigned long accepted;
    uint64_t bytes;
    pthread_t th;
};

static struct shard *shards;
static int nshards;

static void conn_close(struct shard *sh, struct conn *c)
{
    ECHO_LIST_UNLINK(sh->conns, c);
    close(c->fd); /* also leaves the epoll set */
    free(c);
}

static void set_interest(struct shard *sh, struct conn *c, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(sh->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void on_event(struct shard *sh, struct conn *c)
{
    if (c->done < c->len) { /* waiting for EPOLLOUT */
        int r = echo_flush(c->fd, c->buf, c->len, &c->done);
        if (r < 0) {
            conn_close(sh, c);
        } else if (r > 0) {
            sh->bytes += c->len;
            set_interest(sh, c, EPOLLIN);
        }
        return;
    }
    int r = echo_read_flush(c->fd, c->buf, sh->bufsize, &c->len, &c->done);
    if (r < 0)
        conn_close(sh, c);
    else if (r == 0)
        set_interest(sh, c, EPOLLOUT);
    else
        sh->bytes += c->len;
}

static void on_accept(struct shard *sh)
{
    int fd;
    while ((fd = echo_accept("echo-raw-epoll", sh->lfd)) >= 0) {
        struct conn *c = echo_conn_alloc(sizeof *c, sh->bufsize);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->len = c->done = 0;
        ECHO_LIST_PUSH(sh->conns, c);
        sh->accepted++;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(sh->ep, EPOLL_CTL_ADD, fd, &ev) != 0)
            conn_close(sh, c);
    }
}

/* The listener, the stop eventfd and the signalfd are told apart by their data pointers:
 * these addresses are never connections. */
static char listen_tag, stop_tag, signal_tag;

static void *run(void *arg)
{
    struct shard *sh = arg;
    if (sh->cpu >= 0)
        echo_pin(NAME, sh->cpu);
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(sh->ep, events, 256, -1);
        if (n < 0 && errno != EINTR) {
            perror("echo-raw-epoll: epoll_wait");
            exit(1);
        }
        for (int i = 0; i < n; i++) {
            void *p = events[i].data.ptr;
            if (p == &listen_tag) {
                on_accept(sh);
            } else if (p == &signal_tag) { /* SIGINT or SIGTERM: every thread ends */
                for (int k = 0; k < nshards; k++) {
                    uint64_t one = 1;
                    if (write(shards[k].stopfd, &one, sizeof one) != sizeof one)
                        perror("echo-raw-epoll: eventfd");
                }
            } else if (p == &stop_tag) {
                goto out;
            } else {
                on_event(sh, p);
            }
        }
    }
out:
    while (sh->conns)
        conn_close(sh, sh->conns);
    return NULL;
}

static void watch(struct shard *sh, int fd, void *tag)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};
    if (fd < 0 || epoll_ctl(sh->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        perror("echo-raw-epoll: epoll");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    const char *identity = "hand-written level-triggered epoll";
    struct echo_options o =
        echo_parse_mt(argc, argv, NAME, "level-triggered epoll written by hand, a thread per "
                                        "loop with --threads", identity, 1, ECHO_MAX_THREADS);
    sigset_t sigs; /* blocked before any thread starts: every thread inherits the mask */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    nshards = o.threads;
    shards = calloc((size_t)nshards, sizeof *shards);
    if (!shards)
        return 1;
    unsigned port = o.port;
    for (int i = 0; i < nshards; i++) {
        struct shard *sh = &shards[i];
        sh->index = i;
        sh->cpu = o.pin ? echo_cpu(i) : -1;
        sh->bufsize = o.bufsize;
        sh->sfd = -1;
        sh->lfd = echo_listen_socket_on(NAME, port, nshards > 1);
        port = echo_port(sh->lfd); /* the others join the port the first one got */
        sh->ep = epoll_create1(EPOLL_CLOEXEC);
        sh->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (sh->ep < 0) {
            perror("echo-raw-epoll: epoll_create1");
            return 1;
        }
        watch(sh, sh->lfd, &listen_tag);
        watch(sh, sh->stopfd, &stop_tag);
    }
    shards[0].sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    watch(&shards[0], shards[0].sfd, &signal_tag);
    for (int i = 1; i < nshards; i++)
        if (pthread_create(&shards[i].th, NULL, run, &shards[i]) != 0) {
            perror("echo-raw-epoll: thread");
            return 1;
        }
    echo_listening(shards[0].lfd, identity);
    run(&shards[0]);
    for (int i = 1; i < nshards; i++)
        pthread_join(shards[i].th, NULL);
    for (int i = 0; i < nshards; i++) {
        struct shard *sh = &shards[i];
        if (nshards > 1 || o.pin)
            echo_loop_line(NAME, "loop", i, sh->cpu, sh->accepted, sh->bytes);
        close(sh->lfd);
        close(sh->stopfd);
        close(sh->ep);
    }
    close(shards[0].sfd);
    free(shards);
    return 0;
}
