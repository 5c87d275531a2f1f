/* SPDX-License-Identifier: MIT */
/* What the kqueue backend does on top when its kqueue is libkqueue: kqueue(2) and kevent(2)
 * in a library over epoll, which is how the backend is built and tested on Linux. Compiled
 * only against libkqueue's <sys/event.h>; a BSD or macOS build has none of this (kqueue.h).
 *
 * Where libkqueue differs from a kernel's kqueue, found by the test suite (docs/backends.md
 * has the table), and what the backend does about it, here or in kqueue.c:
 * - its kevent takes mutexes, so it is not async-signal-safe: the core's wake-up descriptor
 *   wakes the loop by default (kqueue.c's open);
 * - it loses the EV_ERROR entries of a call whose wait then finds nothing, waits after a
 *   refusal where a kernel returns at once, and takes at most 512 entries a call: the changes
 *   go in calls of their own (mux__kq_apply_emulated);
 * - a close does not remove a registration, and an EV_ADD of one that exists fails: the
 *   library's own closes delete first (mux__kq_delete_now), and a registration that may be an
 *   old file's is deleted and added again (kqueue.c's change);
 * - a file closed while a dup lives on stays in its epoll set, and then every wait returns
 *   early with nothing: the queue is made again (mux__kq_returned_early);
 * - it fills EV_EOF's fflags with SO_ERROR, which takes the error from the socket: the
 *   socket's watchers are told it (mux__kq_took_error);
 * - deleting one filter of an fd re-arms the other's edge: kqueue.c never narrows an EV_CLEAR
 *   registration;
 * - a closed kqueue is freed later, by a thread of its own (mux__kq_closed).
 */
#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "backend/kqueue/kqueue.h"
#include "platform/platform.h"

/* Exported by libkqueue but not declared in its header: frees the kqueues closed so far, which
 * its thread would free later. Weak: an older libkqueue lacks it. */
void libkqueue_drain_pending_close(void) __attribute__((weak));

#define MUX__KQ_MAX 512 /* libkqueue's entries per call */

/* The changes alone, each with EV_RECEIPT and exactly as many entries as changes, so that no
 * wait follows and each comes back. The batch is the refusals, if any, as a kernel's would
 * be (the wait then does not happen); else 0. */
int mux__kq_apply_emulated(struct mux__kqueue *st, int nchg)
{
    int refused = 0;
    for (int off = 0; off < nchg; off += MUX__KQ_MAX) {
        int m = nchg - off < MUX__KQ_MAX ? nchg - off : MUX__KQ_MAX;
        for (int i = 0; i < m; i++)
            st->chg[off + i].flags |= EV_RECEIPT;
        struct kevent *out = st->ev + refused;
        int n = kevent(st->kq, st->chg + off, m, out, m, NULL);
        if (n < 0)
            return n;
        for (int i = 0; i < n; i++)
            if (out[i].data != 0)
                st->ev[refused++] = out[i];
    }
    return refused;
}

/* Deletes `fd`'s registrations for `dirs` at once, before the library closes it. EV_RECEIPT:
 * an entry per change fills the event list, so no event is taken. */
void mux__kq_delete_now(struct mux__kqueue *st, int fd, unsigned dirs)
{
    struct kevent kev[2], out[2];
    int n = 0;
    if (dirs & MUX_READ)
        EV_SET(&kev[n++], fd, EVFILT_READ, EV_DELETE | EV_RECEIPT, 0, 0, NULL);
    if (dirs & MUX_WRITE)
        EV_SET(&kev[n++], fd, EVFILT_WRITE, EV_DELETE | EV_RECEIPT, 0, 0, NULL);
    if (n)
        (void)kevent(st->kq, kev, n, out, n, NULL); /* an error: it was gone */
}

/* Whether EV_EOF's fflags is an error libkqueue took from a socket (its EIO for a pipe or a
 * file took nothing). */
int mux__kq_took_error(int fd, const struct kevent *k)
{
    int type;
    socklen_t len = sizeof type;
    return (k->flags & EV_EOF) && k->fflags &&
           getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0;
}

/* Whether a wait that returned `n` events asks for a new queue: it returned early with
 * nothing, the sign of a closed file epoll still reports and libkqueue drops. Not twice in a
 * row: a new queue has no such file, and the early return is then another of libkqueue's (it
 * drops a regular file's report at the file's end once, and then its registration). The
 * core read the clock just before a wait with a timeout. */
int mux__kq_returned_early(struct mux__loop *loop, struct mux__kqueue *st, int n,
                           int64_t timeout_ns)
{
    int early = n == 0 && timeout_ns != 0 &&
                (timeout_ns < 0 || mux__mono_ns() - loop->now + 1000000 < (uint64_t)timeout_ns);
    int again = early && !st->renewed;
    st->renewed = 0;
    return again;
}

/* After the loop's kqueue was closed: its descriptors go with the loop. */
void mux__kq_closed(void)
{
    if (libkqueue_drain_pending_close)
        libkqueue_drain_pending_close();
}
