/* SPDX-License-Identifier: MIT */
/* The floor of the echo study: level-triggered epoll written by hand. A readable
 * connection is read once into its buffer and the bytes are written back at once; only a
 * short write makes the connection wait for EPOLLOUT (and not for EPOLLIN until the rest
 * is written), so the common case costs epoll_wait, read and write and nothing else. */
#include "echo_common.h"

#include <stdalign.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>

struct conn {
    int fd;
    struct conn *next, *prev; /* all open connections, to free them on exit */
    size_t len, done;         /* bytes in buf, bytes of them written back */
    alignas(64) char buf[];   /* aligned: the kernel copies into misaligned buffers much slower */
};

static int ep;
static struct conn *conns;

static void conn_close(struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    close(c->fd); /* also leaves the epoll set */
    free(c);
}

static void set_interest(struct conn *c, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void on_event(struct conn *c, uint32_t events, size_t bufsize)
{
    if (c->done < c->len) { /* waiting for EPOLLOUT */
        int r = echo_flush(c->fd, c->buf, c->len, &c->done);
        if (r < 0)
            conn_close(c);
        else if (r > 0)
            set_interest(c, EPOLLIN);
        return;
    }
    (void)events;
    ssize_t n = read(c->fd, c->buf, bufsize);
    if (n <= 0) {
        if (n == 0 || errno != EAGAIN)
            conn_close(c);
        return;
    }
    c->len = (size_t)n;
    c->done = 0;
    int r = echo_flush(c->fd, c->buf, c->len, &c->done);
    if (r < 0)
        conn_close(c);
    else if (r == 0)
        set_interest(c, EPOLLOUT);
}

static void on_accept(int lfd, size_t bufsize)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != ECONNABORTED)
                perror("echo-raw-epoll: accept");
            return;
        }
        struct conn *c = aligned_alloc(64, (sizeof *c + bufsize + 63) / 64 * 64);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->len = c->done = 0;
        c->prev = NULL;
        c->next = conns;
        if (conns)
            conns->prev = c;
        conns = c;
        echo_nodelay(fd);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
            conn_close(c);
    }
}

int main(int argc, char **argv)
{
    const char *identity = "hand-written level-triggered epoll";
    struct echo_options o = echo_parse(argc, argv, "echo-raw-epoll",
                                       "level-triggered epoll written by hand", identity, 1);
    int lfd = echo_listen_socket("echo-raw-epoll", o.port);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    ep = epoll_create1(EPOLL_CLOEXEC);
    /* The listener and the signalfd are told apart by their data pointers: these two
     * addresses are never connections. */
    static char listen_tag, signal_tag;
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &listen_tag};
    struct epoll_event sev = {.events = EPOLLIN, .data.ptr = &signal_tag};
    if (sfd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) != 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &sev) != 0) {
        perror("echo-raw-epoll: epoll");
        return 1;
    }
    echo_listening(lfd, identity);

    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        if (n < 0 && errno != EINTR) {
            perror("echo-raw-epoll: epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            void *p = events[i].data.ptr;
            if (p == &listen_tag)
                on_accept(lfd, o.bufsize);
            else if (p == &signal_tag)
                goto out; /* SIGINT or SIGTERM */
            else
                on_event(p, events[i].events, o.bufsize);
        }
    }
out:
    while (conns)
        conn_close(conns);
    close(lfd);
    close(sfd);
    close(ep);
    return 0;
}
