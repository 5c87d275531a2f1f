/* SPDX-License-Identifier: MIT */
/* select: the oldest and most portable readiness interface.
 *
 * What is odd about it, and what this file does about it:
 * - An fd_set is a fixed bitmap of FD_SETSIZE (1024 on Linux) bits; FD_SET on a larger fd
 *   writes past it. Such fds are refused up front (fd_limit): mux_io_start returns -EINVAL.
 * - The sets are overwritten by the call, so they are copied each time, and the kernel and
 *   this file both scan every fd up to the highest watched one: O(highest fd).
 * - One closed fd in the sets fails the whole call with EBADF and says nothing about which;
 *   each watched fd is then checked with fcntl(F_GETFD), and the bad ones' watchers are
 *   stopped and told MUX_ERROR.
 * - pselect takes a timespec, so timeouts keep nanosecond precision.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>

#include "backend/backend.h"

/* mux_io_start checks fd_limit only when it grows the fd table (io.c): a leaf must not hold
 * fds on both sides of the limit. */
_Static_assert(FD_SETSIZE % MUX__FD_LEAF == 0, "FD_SETSIZE is not a whole number of leaves");

struct mux__select {
    fd_set rd, wr;
    int maxfd; /* highest fd in either set, or -1 */
};

static int mux__select_open(struct mux__loop *loop)
{
    struct mux__select *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    FD_ZERO(&st->rd);
    FD_ZERO(&st->wr);
    st->maxfd = -1;
    loop->bdata = st;
    return 0;
}

static void mux__select_close(struct mux__loop *loop)
{
    free(loop->bdata);
    loop->bdata = NULL;
}

static int mux__select_fork(struct mux__loop *loop)
{
    (void)loop; /* no kernel state */
    return 0;
}

static int mux__select_change(struct mux__loop *loop, int fd, unsigned want, int force)
{
    struct mux__select *st = loop->bdata;
    (void)force;
    if (want & MUX_READ)
        FD_SET(fd, &st->rd);
    else
        FD_CLR(fd, &st->rd);
    if (want & MUX_WRITE)
        FD_SET(fd, &st->wr);
    else
        FD_CLR(fd, &st->wr);
    if (want && fd > st->maxfd)
        st->maxfd = fd;
    while (st->maxfd >= 0 && !FD_ISSET(st->maxfd, &st->rd) && !FD_ISSET(st->maxfd, &st->wr))
        st->maxfd--;
    return 0;
}

/* EBADF: find the closed fds, stop their watchers and take them out of the sets. */
static void mux__select_ebadf(struct mux__loop *loop)
{
    struct mux__select *st = loop->bdata;
    for (int fd = 0; fd <= st->maxfd; fd++) {
        if (!FD_ISSET(fd, &st->rd) && !FD_ISSET(fd, &st->wr))
            continue;
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
            FD_CLR(fd, &st->rd);
            FD_CLR(fd, &st->wr);
            mux__fd_kill(loop, fd, -EBADF);
        }
    }
}

static int mux__select_wait(struct mux__loop *loop, int64_t timeout_ns)
{
    struct mux__select *st = loop->bdata;
    fd_set rd, wr;
    int nfds = st->maxfd + 1;
    memcpy(&rd, &st->rd, sizeof rd);
    memcpy(&wr, &st->wr, sizeof wr);
    struct timespec ts = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
    int n = pselect(nfds, &rd, &wr, NULL, timeout_ns < 0 ? NULL : &ts, NULL);
    if (n < 0) {
        if (errno == EBADF) {
            mux__select_ebadf(loop);
            return 0;
        }
        return -errno;
    }
    for (int fd = 0; fd < nfds && n > 0; fd++) {
        unsigned got = (FD_ISSET(fd, &rd) ? MUX_READ : 0) | (FD_ISSET(fd, &wr) ? MUX_WRITE : 0);
        if (got) {
            n -= (got & MUX_READ ? 1 : 0) + (got & MUX_WRITE ? 1 : 0);
            mux__fd_event(loop, fd, got);
        }
    }
    return 0;
}

const struct mux__backend mux__backend_select = {
    .name = "select",
    .caps = MUX__CAP_WAKE_FD,
    .fd_limit = FD_SETSIZE, /* a whole number of fd table leaves (below) */
    .open = mux__select_open,
    .close = mux__select_close,
    .fork = mux__select_fork,
    .change = mux__select_change,
    .wait = mux__select_wait,
    .wake = mux__wake_fd,
};
