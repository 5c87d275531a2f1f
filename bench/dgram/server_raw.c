/* SPDX-License-Identifier: MIT */
/* The datagram study's floor: a UDP echo written by hand on level-triggered epoll,
 * recvmmsg and sendmmsg. Readable: take up to a batch of datagrams with one recvmmsg, send
 * them all back to their senders with one sendmmsg (the buffers and addresses as they
 * came), and go on until the socket is empty. A send batch the socket does not take whole
 * is sent on, waiting for room with EPOLLOUT. */
#include <sys/epoll.h>

#include "common.h"

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    struct dgram_options o =
        dgram_parse(argc, argv, "dgram-raw", "epoll, recvmmsg and sendmmsg by hand",
                    "hand-written: epoll, recvmmsg, sendmmsg (no library)", 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    int fd = dgram_socket(o.port, 1), ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        perror("epoll");
        return 1;
    }
    dgram_listening(fd, "raw recvmmsg/sendmmsg on epoll");
    static char buf[64][DGRAM_MAX] __attribute__((aligned(64)));
    static struct sockaddr_in6 from[64];
    static struct iovec iov[64];
    static struct mmsghdr m[64];
    while (!stop) {
        struct epoll_event got;
        if (epoll_wait(ep, &got, 1, -1) < 0)
            continue; /* EINTR: SIGTERM */
        for (;;) {
            for (int i = 0; i < o.batch; i++) {
                iov[i].iov_base = buf[i];
                iov[i].iov_len = DGRAM_MAX;
                memset(&m[i].msg_hdr, 0, sizeof m[i].msg_hdr);
                m[i].msg_hdr.msg_name = &from[i];
                m[i].msg_hdr.msg_namelen = sizeof from[i];
                m[i].msg_hdr.msg_iov = &iov[i];
                m[i].msg_hdr.msg_iovlen = 1;
            }
            int n = recvmmsg(fd, m, (unsigned)o.batch, 0, NULL);
            if (n <= 0)
                break; /* EAGAIN: empty */
            for (int i = 0; i < n; i++)
                iov[i].iov_len = m[i].msg_len;
            for (int k = 0; k < n;) {
                int s = sendmmsg(fd, m + k, (unsigned)(n - k), 0);
                if (s > 0) {
                    k += s;
                } else if (s < 0 && errno == EAGAIN) {
                    struct epoll_event out = {.events = EPOLLOUT, .data.fd = fd};
                    epoll_ctl(ep, EPOLL_CTL_MOD, fd, &out);
                    epoll_wait(ep, &got, 1, 100);
                    epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
                } else {
                    k++; /* that datagram's error: the others go on */
                }
            }
            if (n < o.batch)
                break;
        }
    }
    return 0;
}
