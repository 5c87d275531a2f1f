/* SPDX-License-Identifier: MIT */
/* poll: the portable O(total fds) interface.
 *
 * What is odd about it, and what this file does about it:
 * - The kernel keeps no state: the whole set is passed on every call and scanned twice
 *   (by the kernel, then by us), which is why its cost grows with the number of watched
 *   fds rather than the number of active ones (Kegel's Poller_bench, docs/studies.md, study 1).
 *   The array is kept dense: an fd's slot index lives in the fd table (kslot = index + 1)
 *   and removal moves the last slot into the hole.
 * - A closed fd is reported with POLLNVAL instead of failing the call; its watchers are
 *   stopped and told MUX_ERROR.
 * - POLLHUP and POLLERR are reported whatever was asked; they wake both directions. Where
 *   there is POLLRDHUP (Linux), the peer's hang-up (MUX_RDHUP) is POLLRDHUP or POLLHUP.
 *   Elsewhere poll cannot tell a hang-up behind unread data: no MUX_RDHUP.
 * - Regular files are always ready, which is what select and poll promise for them.
 * - ppoll (Linux, FreeBSD) takes a timespec, so timeouts keep nanosecond precision. Where
 *   there is only poll (macOS), timeouts are milliseconds, rounded up so that timers never
 *   fire early.
 */
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <time.h>

#include "backend/backend.h"

struct mux__poll {
    struct pollfd *pfd;
    uint32_t n, cap;
};

static int mux__poll_open(struct mux__loop *loop)
{
    struct mux__poll *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    loop->bdata = st; /* the fd table starts zeroed: every kslot says "no slot" */
    return 0;
}

static void mux__poll_close(struct mux__loop *loop)
{
    struct mux__poll *st = loop->bdata;
    free(st->pfd);
    free(st);
    loop->bdata = NULL;
}

static int mux__poll_fork(struct mux__loop *loop)
{
    (void)loop; /* no kernel state */
    return 0;
}

static int mux__poll_change(struct mux__loop *loop, int fd, unsigned want, int force)
{
    struct mux__poll *st = loop->bdata;
    struct mux__fd *e = mux__fd_at(loop, fd);
    (void)force; /* the set is passed whole on every call: nothing cached to distrust */
    if (!want) {
        if (e->kslot) {
            uint32_t i = e->kslot - 1;
            st->pfd[i] = st->pfd[--st->n];
            mux__fd_at(loop, st->pfd[i].fd)->kslot = i + 1;
            e->kslot = 0;
        }
        return 0;
    }
    short events = (short)((want & MUX_READ ? POLLIN : 0) | (want & MUX_WRITE ? POLLOUT : 0));
#ifdef POLLRDHUP
    if (want & MUX_RDHUP)
        events |= POLLRDHUP;
#endif
    if (e->kslot) {
        st->pfd[e->kslot - 1].events = events;
        return 0;
    }
    if (st->n == st->cap) {
        uint32_t cap = st->cap ? st->cap * 2 : 64;
        struct pollfd *p = realloc(st->pfd, (size_t)cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        st->pfd = p;
        st->cap = cap;
    }
    st->pfd[st->n] = (struct pollfd){.fd = fd, .events = events};
    e->kslot = ++st->n;
    return 0;
}

static int mux__poll_wait(struct mux__loop *loop, int64_t timeout_ns)
{
    struct mux__poll *st = loop->bdata;
#if MUX_HAVE_PPOLL
    struct timespec ts = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
    int n = ppoll(st->pfd, st->n, timeout_ns < 0 ? NULL : &ts, NULL);
#else
    int ms = -1;
    if (timeout_ns >= 0) {
        int64_t m = timeout_ns / 1000000 + (timeout_ns % 1000000 != 0); /* up: never early */
        ms = m > INT_MAX ? INT_MAX : (int)m;
    }
    int n = poll(st->pfd, (nfds_t)st->n, ms);
#endif
    if (n < 0)
        return -errno;
    /* Watchers called from here change interest through the change list: the array stays as
     * it is until the next wait. */
    for (uint32_t i = 0; i < st->n && n > 0; i++) {
        short r = st->pfd[i].revents;
        if (!r)
            continue;
        n--;
        if (r & POLLNVAL) {
            mux__fd_kill(loop, st->pfd[i].fd, -EBADF);
            continue;
        }
        unsigned got = (r & (POLLIN | POLLPRI) ? MUX_READ : 0) | (r & POLLOUT ? MUX_WRITE : 0);
        if (r & (POLLERR | POLLHUP))
            got |= MUX__IO_EVENTS;
#ifdef POLLRDHUP
        if (r & (POLLRDHUP | POLLHUP))
            got |= MUX_RDHUP;
#endif
        mux__fd_event(loop, st->pfd[i].fd, got);
    }
    return 0;
}

#ifdef POLLRDHUP
#define MUX__POLL_CAPS (MUX__CAP_WAKE_FD | MUX__CAP_RDHUP)
#else
#define MUX__POLL_CAPS MUX__CAP_WAKE_FD
#endif

const struct mux__backend mux__backend_poll = {
    .name = "poll",
    .caps = MUX__POLL_CAPS,
    .fd_limit = INT_MAX,
    .open = mux__poll_open,
    .close = mux__poll_close,
    .fork = mux__poll_fork,
    .change = mux__poll_change,
    .wait = mux__poll_wait,
    .wake = mux__wake_fd,
};
