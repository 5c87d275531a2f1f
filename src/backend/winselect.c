/* SPDX-License-Identifier: MIT */
/* select on Windows (Winsock's select), the portable floor there, as select.c is on POSIX.
 *
 * What is odd about it, and what this file does about it:
 * - An fd_set is not a bitmap but a counted array of SOCKETs, FD_SETSIZE long (64 unless the
 *   program says otherwise before winsock2.h: 1024 here). The limit is on how many sockets
 *   are watched, not on their values, so fd_limit is INT_MAX and a change that would overflow
 *   a set is refused with -ENOSPC (the watchers get MUX_ERROR). FD_ISSET is a linear search:
 *   a wait costs O(watched^2) in the worst case; this backend is a reference, not for servers.
 * - The first argument (nfds) is ignored, and a call with no socket at all fails
 *   (WSAEINVAL) rather than sleeping: an empty wait is a Sleep.
 * - A non-blocking connect that fails is reported in the exception set, not the write set:
 *   every socket watched for writing is in the exception set too, and an exception wakes
 *   both directions (as POLLERR does).
 * - One closed socket in the sets fails the whole call (WSAENOTSOCK) and says nothing about
 *   which; each watched socket is then checked with getsockopt(SO_TYPE), and the bad ones'
 *   watchers are stopped and told MUX_ERROR.
 * - Only sockets can be watched: Windows' select knows nothing else.
 * - The timeout is a timeval: microseconds, rounded up so that timers never fire early.
 */
#define FD_SETSIZE 1024 /* before winsock2.h, which every header below brings in */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "platform/win.h"

struct mux__wselect {
    fd_set rd, wr;
    fd_set got_rd, got_wr, got_ex; /* the last wait's, kept here: 8 KB each */
};

static int mux__wselect_open(struct mux__loop *loop)
{
    struct mux__wselect *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    loop->bdata = st;
    return 0;
}

static void mux__wselect_close(struct mux__loop *loop)
{
    free(loop->bdata);
    loop->bdata = NULL;
}

static int mux__wselect_fork(struct mux__loop *loop)
{
    (void)loop;
    return -ENOTSUP;
}

/* Adds or removes `s` in `set`; -ENOSPC when the set is full. */
static int mux__wselect_put(fd_set *set, SOCKET s, int on)
{
    if (!on) {
        FD_CLR(s, set);
        return 0;
    }
    if (FD_ISSET(s, set))
        return 0;
    if (set->fd_count == FD_SETSIZE)
        return -ENOSPC;
    set->fd_array[set->fd_count++] = s;
    return 0;
}

static int mux__wselect_change(struct mux__loop *loop, int fd, unsigned want, int force)
{
    struct mux__wselect *st = loop->bdata;
    SOCKET s = MUX__SOCK(fd);
    (void)force; /* the sets are passed whole on every call */
    int err = mux__wselect_put(&st->rd, s, (want & MUX_READ) != 0);
    if (err == 0)
        err = mux__wselect_put(&st->wr, s, (want & MUX_WRITE) != 0);
    if (err != 0) {
        FD_CLR(s, &st->rd);
        FD_CLR(s, &st->wr);
    }
    return err;
}

static int mux__wselect_valid(SOCKET s)
{
    int type, len = sizeof type;
    return getsockopt(s, SOL_SOCKET, SO_TYPE, (char *)&type, &len) == 0 ||
           WSAGetLastError() != WSAENOTSOCK;
}

/* WSAENOTSOCK: find the closed sockets, stop their watchers and take them out of the sets. */
static void mux__wselect_bad(struct mux__loop *loop)
{
    struct mux__wselect *st = loop->bdata;
    fd_set *sets[2] = {&st->rd, &st->wr};
    for (int k = 0; k < 2; k++)
        for (u_int i = 0; i < sets[k]->fd_count;) {
            SOCKET s = sets[k]->fd_array[i];
            if (mux__wselect_valid(s)) {
                i++;
                continue;
            }
            FD_CLR(s, &st->rd);
            FD_CLR(s, &st->wr);
            mux__fd_kill(loop, (int)s, -EBADF);
        }
}

/* Copies the part of a counted fd_set in use (a whole one is about 8 KB). */
static void mux__fdset_copy(fd_set *to, const fd_set *from)
{
    memcpy(to, from, offsetof(fd_set, fd_array) + from->fd_count * sizeof from->fd_array[0]);
}

static int mux__wselect_wait(struct mux__loop *loop, int64_t timeout_ns)
{
    struct mux__wselect *st = loop->bdata;
    if (st->rd.fd_count == 0 && st->wr.fd_count == 0) {
        if (timeout_ns != 0) {
            int64_t ms = timeout_ns < 0 ? INFINITE : (timeout_ns + 999999) / 1000000;
            Sleep(ms >= INFINITE ? INFINITE - 1 : (DWORD)ms); /* nothing could wake it anyway */
        }
        return 0;
    }
    mux__fdset_copy(&st->got_rd, &st->rd);
    mux__fdset_copy(&st->got_wr, &st->wr);
    mux__fdset_copy(&st->got_ex, &st->wr);
    struct timeval tv, *tvp = NULL;
    if (timeout_ns >= 0) {
        int64_t us = (timeout_ns + 999) / 1000;
        tv.tv_sec = us / 1000000 > LONG_MAX ? LONG_MAX : (long)(us / 1000000);
        tv.tv_usec = (long)(us % 1000000);
        tvp = &tv;
    }
    int n = select(0, &st->got_rd, &st->got_wr, &st->got_ex, tvp);
    if (n == SOCKET_ERROR) {
        int err = mux__wsa_errno();
        if (err == -ENOTSOCK || err == -EBADF) {
            mux__wselect_bad(loop);
            return 0;
        }
        return err == -EINTR ? 0 : err;
    }
    /* One report per socket, both directions together: the write and exception sets are
     * folded into the read set's report where a socket is in several. */
    for (u_int i = 0; i < st->got_rd.fd_count; i++) {
        SOCKET s = st->got_rd.fd_array[i];
        unsigned got = MUX_READ;
        if (FD_ISSET(s, &st->got_wr))
            got |= MUX_WRITE;
        if (FD_ISSET(s, &st->got_ex))
            got |= MUX__IO_EVENTS;
        mux__fd_event(loop, (int)s, got);
    }
    fd_set *rest[2] = {&st->got_wr, &st->got_ex};
    for (int k = 0; k < 2; k++)
        for (u_int i = 0; i < rest[k]->fd_count; i++) {
            SOCKET s = rest[k]->fd_array[i];
            if (FD_ISSET(s, &st->got_rd) || (k == 1 && FD_ISSET(s, &st->got_wr)))
                continue; /* reported above */
            mux__fd_event(loop, (int)s, k == 0 ? MUX_WRITE : MUX__IO_EVENTS);
        }
    return 0;
}

const struct mux__backend mux__backend_select = {
    .name = "select",
    .caps = MUX__CAP_WAKE_FD,
    .fd_limit = INT_MAX, /* a limit on the count (FD_SETSIZE), not on values */
    .open = mux__wselect_open,
    .close = mux__wselect_close,
    .fork = mux__wselect_fork,
    .change = mux__wselect_change,
    .wait = mux__wselect_wait,
    .wake = mux__wake_fd,
};
