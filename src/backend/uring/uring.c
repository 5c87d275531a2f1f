/* SPDX-License-Identifier: MIT */
/* uring: Linux io_uring, used as a readiness interface through poll requests (one-shot
 * for level-triggered watchers, multishot for edge-triggered ones), and as a completion
 * interface for the stream layer's operations (ops.c, which has their essay).
 *
 * What is odd about it, and what this file does about it:
 * - Two kinds of poll request. An IORING_OP_POLL_ADD polls the file when it is armed: if
 *   the file is ready then, the completion (CQE) is posted at once, inside the enter that
 *   submitted it, and the request never waits. Otherwise it sits on the file's wait queue
 *   until a wake-up that matches its mask; the kernel then re-polls the file, so the mask
 *   is the state of the file at that moment. A one-shot request ends with its first CQE.
 *   A multishot one (IORING_POLL_ADD_MULTI, Linux 5.13) stays armed and posts one CQE per
 *   matching wake-up, with IORING_CQE_F_MORE set, until the kernel ends it: cancelled
 *   (-ECANCELED: our own remove, or the task that armed it exited), failed (-EBADF: the fd
 *   number was closed before arming), a file that cannot be waited on (a regular file
 *   answers "ready" once), or a full CQ ring (below). A request that ended with events
 *   is re-armed like a one-shot one (next point); one that failed is handed back to the
 *   core as forced, and the next batch of changes adds it again (or the fd is killed).
 * - Level-triggered watchers (the default) get one-shot requests, re-armed after their
 *   events were dispatched: a one-shot poll tests readiness when it is armed, so a file
 *   left readable reports again, and that re-arm is the level re-poll epoll does for a
 *   level-triggered item. The re-arms are queued as SQEs just before the next wait and
 *   ride on its single io_uring_enter; an fd whose watchers stopped meanwhile is simply
 *   not re-armed (nothing to remove), and one closed meanwhile fails the re-arm with
 *   -EBADF (its watchers get MUX_ERROR). Only fds whose watchers have run are re-armed:
 *   one reaped in this wait would report the same events twice. Arming late is also what
 *   makes this cheap: the file's wait queue holds no request between the report and the
 *   re-arm, so whatever makes it ready meanwhile (the program's own writes, typically)
 *   wakes nobody, and the re-arm completes inline. A multishot request for the same
 *   watcher costs more per event (docs/studies.md has the Poller study's figures): each
 *   wake-up of an armed request queues task work and posts its CQE from it, and a
 *   level-triggered watcher still needs a re-poll after dispatch (an
 *   IORING_POLL_UPDATE_EVENTS of the live request, which finds, disarms and re-arms it).
 * - MUX_EDGE watchers (only when every watcher of the fd asks for it) get a multishot
 *   request as it is: it is edge-triggered, a file that stays readable and is not woken
 *   again posts nothing more, and it costs no SQE per event. IORING_POLL_ADD_LEVEL (6.0)
 *   is not used: it was found to give deferred edge-triggered notifications (io-uring
 *   list, "IORING_POLL_ADD_LEVEL doesn't provide level triggered poll", Sept. 2022). A
 *   change of mask updates the armed request (IORING_POLL_UPDATE_EVENTS keeps its kind);
 *   a change between edge and level replaces it. An update that cannot be applied
 *   (-EALREADY: the request is firing right now) makes the fd be re-armed from scratch.
 * - A poll request holds a reference to the file, not to the fd number. Closing the fd
 *   does not close the file while the request is armed (a peer sees the close only once
 *   the request is removed), and the request keeps reporting the old file. So interest is
 *   dropped eagerly -- want 0 queues an IORING_OP_POLL_REMOVE, which costs no system call
 *   as it rides on the next enter -- and a forced change (the number may name a new file)
 *   removes the old request and adds a new one. Every request carries the fd and a
 *   generation in its user data, bumped whenever a request is added or removed, so the
 *   CQEs of removed or replaced requests are recognised and dropped. A hang-up or error
 *   reported on a request whose fd number has since been closed is turned into MUX_ERROR
 *   (one fcntl the first time a request reports POLLHUP / POLLERR).
 * - The CQ overflow rule. The kernel must not drop a completion (IORING_FEAT_NODROP is
 *   required): when the CQ ring is full it keeps CQEs on an internal overflow list, sets
 *   IORING_SQ_CQ_OVERFLOW, and moves them to the ring as it empties, on an enter with
 *   GETEVENTS. A multishot poll that finds the CQ full ends itself (its CQE goes to the
 *   overflow list without F_MORE), so it must be re-armed like any ended request; a
 *   one-shot CQE is held back like any other. The wait therefore drains the ring, then
 *   flushes the overflow list with further enters until the flag clears. If the kernel
 *   could not even allocate an overflow entry it reports -EBADR on the next enter: a CQE
 *   was lost, so the ring is rebuilt and every fd re-armed (arming re-reports readiness).
 *   The CQ ring holds 4,096 CQEs, twice the SQ ring's 2,048 entries.
 * - SQ full: interest changes and re-arms are queued as SQEs and sent with the wait; when
 *   one iteration queues more than the SQ ring holds, the queued ones are submitted early
 *   (one io_uring_submit per ring-full), never dropped.
 * - The wait is one io_uring_enter that submits and waits: GETEVENTS with a timespec
 *   through IORING_ENTER_EXT_ARG (IORING_FEAT_EXT_ARG, 5.11; nanosecond precision, no
 *   timeout SQE), min_complete 0 for a poll. -ETIME is the timeout, not an error.
 * - Task work: a wake-up of a waiting poll (or of a receive or send waiting for its
 *   socket) runs its completion as task work of the thread that armed it (a re-arm that
 *   finds the file ready completes inline, without any). The ring uses
 *   IORING_SETUP_COOP_TASKRUN with IORING_SETUP_TASKRUN_FLAG: the work runs on the thread's
 *   next return from the kernel, whatever the call (no inter-processor interrupt), and the
 *   kernel flags in the SQ ring that some is pending, so a poll (MUX_RUN_NOWAIT, or events
 *   already in hand) enters only when that flag is up or something is to be submitted:
 *   one io_uring_enter per iteration at most. A loop made with MUX_LOOP_ONE_THREAD
 *   gets IORING_SETUP_DEFER_TASKRUN instead (with SINGLE_ISSUER); IOMUX_URING_TASKRUN=defer
 *   or =coop names the mode whatever the loop asked (any other value makes open fail with
 *   -EINVAL). Deferred work runs only inside an enter with GETEVENTS, in bounded passes
 *   (since 6.13 at most max(20, min_complete) items per pass). A waiting enter asks for one
 *   completion, so the completions of one iteration come in passes of about 20: a busy
 *   server's received buffers are sent while they are still in the cache, where cooperative
 *   work runs the receives of every ready connection before the loop sees the first (at
 *   1,000 and 10,000 sessions of 16 KB, 10-30% more server CPU per echo than the io_uring
 *   floor's, which defers; level with it deferred: bench/README.md). A poll enters with
 *   min_complete 0 and no timeout, and enters again while the kernel flags more work
 *   pending (IORING_SQ_TASKRUN), so that one poll runs the work of 100 ready fds. (It used
 *   to ask for as many completions as the CQ ring holds with a zero timeout, which runs
 *   them in one pass, but a wait that finds fewer sleeps until its expired timer fires:
 *   7x the one-shot floor's time per Poller round at one active fd.) Deferred work costs
 *   the edge-triggered watchers an enter per poll where cooperative work needs none (the
 *   Poller study's multishot cells, 1.13x the floor at one active fd against 1.02x), and it
 *   binds the ring to one thread, so cooperative work stays the default for a loop that did
 *   not say it has one. A deferred ring is created disabled (IORING_SETUP_R_DISABLED) and
 *   enabled by the first wait, so the thread that first runs the loop is the one; the core
 *   refuses a run from another thread of a MUX_LOOP_ONE_THREAD loop (-EEXIST) before the
 *   kernel would. A signal that interrupts a deferred wait leaves the work its handler made
 *   undone (an async send from a handler writes the wake-up eventfd), so an interrupted wait
 *   runs it before it returns. A kernel older than 5.19 (no TASKRUN_FLAG) enters for every
 *   poll; SUBMIT_ALL (one failing SQE does not hold back the rest of the batch) is asked for
 *   too; each flag only when the kernel accepts it.
 * - The loop's wake-up eventfd is an ordinary watched fd: its multishot poll completes
 *   when another thread or a signal handler writes it, which ends a blocked enter. No
 *   system call per iteration is spent on it.
 * - Fork: the ring (its fd and its shared mappings) is inherited by the child. The child
 *   only unmaps and closes its copies (io_uring_queue_exit without a registered ring fd
 *   does nothing else), which leaves the parent's requests armed and untouched, and makes
 *   a new ring; the core then re-applies every watched fd with force.
 * - The kernel may refuse io_uring altogether: kernel.io_uring_disabled, seccomp filters
 *   in containers (EPERM or ENOSYS), or a kernel older than the features used. open then
 *   fails, so the default backend choice falls back to epoll, and naming "uring" returns
 *   the kernel's error. Required: NODROP, EXT_ARG, FAST_POLL and RSRC_TAGS (5.13, the
 *   release that brought multishot poll and poll update), else -ENOSYS.
 * - The default. io_uring comes first in the build's order (IOMUX_PREFER_URING), and as the
 *   automatic choice (loop->choosing) it declines, with -ENOTSUP, on a kernel before 6.1 or
 *   where the native stream path is not whole (operations emulated, no multishot accept or
 *   receive): epoll is taken there. Named, it opens on any kernel it supports. The rule,
 *   and the measurements it rests on: docs/backends.md, "How the default is chosen".
 * - Operations: the kernel's own send, sendmsg, receive into a provided buffer and
 *   multishot accept, with 5.19 (probed through IORING_OP_SOCKET, which came with it); on an
 *   older kernel, or with IOMUX_URING_STREAMS=poll (to compare the two paths), open narrows
 *   the loop's capabilities and every operation is emulated over this file's polls. From 6.0
 *   (probed through IORING_OP_SEND_ZC) a stream reading into a pool keeps one multishot
 *   receive armed, across read stops too; IOMUX_URING_STREAMS=oneshot submits a receive per
 *   buffer instead.
 * - ThreadSanitizer cannot see the rings come and go: liburing maps and unmaps them with raw
 *   system calls, not libc's mmap and munmap, which the sanitizer intercepts to reset what it
 *   knows of the memory. The history of a closed loop's ring then outlives it, and a new ring
 *   that another thread maps at the same address has its first writes reported as racing
 *   with the dead ring's. The unmap does happen before the new mapping (the kernel hands the
 *   address out again only after it), so a sanitized build tells the sanitizer that, page by
 *   page: a release on every page of a ring before it is unmapped, an acquire on every page
 *   of a new ring (mux__uring_tsan_*; nothing at all in other builds).
 * - Tests: IOMUX_TEST_URING_REFUSE=EPERM (or ENOSYS, or a number) makes open, and the new
 *   ring of a fork's child, fail as a refusing kernel would; IOMUX_URING_ENTRIES=n (2 to
 *   4096, else open fails with -EINVAL) sizes the SQ ring to n entries and the CQ ring to 2n,
 *   to exercise the full-ring paths.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "backend/uring/uring.h"

#if defined(__SANITIZE_THREAD__)
#define MUX__URING_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MUX__URING_TSAN 1
#endif
#endif
#ifdef MUX__URING_TSAN
#include <sanitizer/tsan_interface.h>

/* Calls `fn` with the first byte of every page of [p, p + len). */
static void mux__uring_tsan_pages(void *p, size_t len, void (*fn)(void *))
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < len; off += page)
        fn((char *)p + off);
}

/* Every page of the ring's mappings: the SQ ring, the CQ ring (unless the kernel gave one
 * mapping for both) and the SQEs. */
static void mux__uring_tsan_each(struct io_uring *ring, void (*fn)(void *))
{
    mux__uring_tsan_pages(ring->sq.ring_ptr, ring->sq.ring_sz, fn);
    if (ring->cq.ring_ptr != ring->sq.ring_ptr)
        mux__uring_tsan_pages(ring->cq.ring_ptr, ring->cq.ring_sz, fn);
    mux__uring_tsan_pages(ring->sq.sqes, ring->sq.ring_entries * sizeof *ring->sq.sqes, fn);
}

/* A new ring: whatever was mapped at its pages before, and unmapped, happened before it. */
static void mux__uring_tsan_mapped(struct io_uring *ring)
{
    mux__uring_tsan_each(ring, __tsan_acquire);
}

/* A ring about to be unmapped: everything done with it happens before a later mapping of
 * its pages. */
static void mux__uring_tsan_unmapping(struct io_uring *ring)
{
    mux__uring_tsan_each(ring, __tsan_release);
}
#else
static inline void mux__uring_tsan_mapped(struct io_uring *ring)
{
    (void)ring;
}

static inline void mux__uring_tsan_unmapping(struct io_uring *ring)
{
    (void)ring;
}
#endif

/* Unmaps the ring and closes its fd. */
static void mux__uring_exit(struct mux__uring *st)
{
    mux__uring_tsan_unmapping(&st->ring);
    io_uring_queue_exit(&st->ring);
}

#ifndef IORING_SETUP_SUBMIT_ALL
#define IORING_SETUP_SUBMIT_ALL (1U << 7)
#endif
#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_TASKRUN_FLAG
#define IORING_SETUP_TASKRUN_FLAG (1U << 9)
#endif
#ifndef IORING_SQ_TASKRUN
#define IORING_SQ_TASKRUN (1U << 2)
#endif
#ifndef IORING_FEAT_CQE_SKIP
#define IORING_FEAT_CQE_SKIP (1U << 11)
#endif
#ifndef IOSQE_CQE_SKIP_SUCCESS
#define IOSQE_CQE_SKIP_SUCCESS (1U << 6)
#endif

#define MUX__URING_FEATURES                                                                        \
    (IORING_FEAT_NODROP | IORING_FEAT_EXT_ARG | IORING_FEAT_FAST_POLL | IORING_FEAT_RSRC_TAGS)
/* An SQ ring of 2,048 entries: a busy server's iteration reaps a receive per connection and
 * writes a send for each straight into the ring, and the sends past a full ring wait on the
 * queue, which the wait prepares at a cost of its own (at 1,000 echo sessions of 128 bytes,
 * 874 instructions per echo with 256 entries, 844 with 1,024, 827 with 2,048: as at 100
 * sessions). The CQ ring keeps the 4,096 CQEs it had with 256 entries. */
#define MUX__URING_DEFAULT_ENTRIES 2048u
#define MUX__URING_DEFAULT_CQ      4096u

#define MUX__GEN_MASK 0x3fffffffu /* the generation's bits in the user data (uring.h) */

/* kmask: the events of the armed request (0: none armed; MUX_EDGE: it is multishot), plus
 * these bits. */
#define MUX__K_EVENTS   (MUX_READ | MUX_WRITE | MUX_RDHUP | MUX_EDGE)
#define MUX__K_VERIFIED 0x20 /* the fd number was checked after a hang-up */
#define MUX__K_REARM    0x40 /* on the re-arm list */

/* Binds a ring created disabled to the calling thread, the loop's: every submission path
 * runs inside mux_run, and calls this first. 0 or -errno. */
static int mux__uring_enable(struct mux__uring *st)
{
    if (mux__likely(!st->disabled))
        return 0;
    /* liburing 2.3 declares io_uring_enable_rings but does not export it */
    if (syscall(__NR_io_uring_register, st->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) !=
        0)
        return -errno;
    st->disabled = 0;
    return 0;
}

static uint64_t mux__ud(unsigned kind, int fd, uint32_t gen)
{
    return (uint64_t)kind << 62 | (uint64_t)(gen & MUX__GEN_MASK) << 32 | (uint32_t)fd;
}

/* IOMUX_TEST_URING_REFUSE: pretend the kernel refused io_uring with this error. */
static int mux__uring_test_refusal(void)
{
    const char *v = getenv("IOMUX_TEST_URING_REFUSE");
    if (!v || !*v)
        return 0;
    if (strcmp(v, "EPERM") == 0)
        return -EPERM;
    if (strcmp(v, "ENOSYS") == 0)
        return -ENOSYS;
    if (strcmp(v, "EACCES") == 0)
        return -EACCES;
    int n = atoi(v);
    return n > 0 && n < 4096 ? -n : -EPERM;
}

static int mux__uring_setup(struct mux__uring *st)
{
    int refused = mux__uring_test_refusal(); /* on open, and in a fork's child */
    if (refused != 0)
        return refused;
    static const unsigned tries[] = {
        IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED |
            IORING_SETUP_SUBMIT_ALL | IORING_SETUP_TASKRUN_FLAG,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SUBMIT_ALL,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL, IORING_SETUP_SUBMIT_ALL, 0};
    /* Deferred task work for a loop run by one thread (MUX_LOOP_ONE_THREAD), cooperative
     * otherwise; IOMUX_URING_TASKRUN names either, whatever the loop asked for. */
    const char *tw = getenv("IOMUX_URING_TASKRUN");
    size_t first = st->one_thread ? 0 : 1;
    if (tw && *tw) {
        int defer = strcmp(tw, "defer") == 0;
        if (!defer && strcmp(tw, "coop") != 0)
            return -EINVAL;
        first = defer ? 0 : 1;
    }
    unsigned entries = MUX__URING_DEFAULT_ENTRIES, cq = MUX__URING_DEFAULT_CQ;
    const char *v = getenv("IOMUX_URING_ENTRIES");
    if (v && *v) {
        /* A change may take two SQEs (remove, then add): fewer would fail every one. */
        char *end;
        long n = strtol(v, &end, 10);
        if (*end || n < 2 || n > 4096)
            return -EINVAL;
        entries = (unsigned)n;
        cq = 0; /* the kernel's default: twice the SQ ring */
    }
    int err = -ENOSYS;
    for (size_t i = first; i < sizeof tries / sizeof tries[0]; i++) {
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        p.flags = tries[i] | (cq ? IORING_SETUP_CQSIZE : 0);
        p.cq_entries = cq;
        err = io_uring_queue_init_params(entries, &st->ring, &p);
        if (err == -EINVAL && tries[i] != 0)
            continue; /* an older kernel: try with fewer flags */
        if (err != 0)
            return err;
        mux__uring_tsan_mapped(&st->ring);
        if ((p.features & MUX__URING_FEATURES) != MUX__URING_FEATURES) {
            mux__uring_exit(st);
            return -ENOSYS;
        }
        st->skip = p.features & IORING_FEAT_CQE_SKIP ? IOSQE_CQE_SKIP_SUCCESS : 0;
        st->sq_head = 0; /* a new ring's */
        st->disabled = st->deferred = (tries[i] & IORING_SETUP_DEFER_TASKRUN) != 0;
        st->taskrun_flag = (tries[i] & IORING_SETUP_TASKRUN_FLAG) != 0;
        st->submit_all = (tries[i] & IORING_SETUP_SUBMIT_ALL) != 0;
        st->ring_ok = 1;
        return 0;
    }
    return err;
}

/* The default rule (docs/backends.md, "How the default is chosen"): the automatic choice
 * takes io_uring only on a kernel from MUX__URING_DEFAULT_FROM on, with the native stream
 * path whole (the operations, multishot accept and multishot receive): the path the studies
 * measured ahead of epoll. Elsewhere it declines (-ENOTSUP), and the next backend of the order,
 * epoll, is taken; named, io_uring opens on any kernel it supports. IOMUX_TEST_URING_KERNEL
 * stands in for the kernel's release, for the tests. */
#define MUX__URING_DEFAULT_FROM_MAJOR 6
#define MUX__URING_DEFAULT_FROM_MINOR 1

static int mux__uring_kernel_measured(void)
{
    const char *rel = getenv("IOMUX_TEST_URING_KERNEL");
    struct utsname u;
    if (!rel || !*rel) {
        if (uname(&u) != 0)
            return 0;
        rel = u.release;
    }
    char *end;
    unsigned long major = strtoul(rel, &end, 10), minor = 0;
    if (end == rel)
        return 0;
    if (*end == '.')
        minor = strtoul(end + 1, NULL, 10);
    return major > MUX__URING_DEFAULT_FROM_MAJOR ||
           (major == MUX__URING_DEFAULT_FROM_MAJOR && minor >= MUX__URING_DEFAULT_FROM_MINOR);
}

static void mux__uring_close(struct mux__loop *loop);

static int mux__uring_default_path(const struct mux__loop *loop)
{
    unsigned whole = MUX__CAP(MUX__OP_RECV_POOL) | MUX__CAP(MUX__OP_SEND) |
                     MUX__CAP(MUX__OP_ACCEPT) | MUX__CAP_ACCEPT_MULTI | MUX__CAP_RECV_MULTI;
    return (loop->caps & whole) == whole;
}

static int mux__uring_open(struct mux__loop *loop)
{
    if (loop->choosing && !mux__uring_kernel_measured())
        return -ENOTSUP; /* the automatic choice takes epoll on this kernel */
    struct mux__uring *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    st->one_thread = loop->one_thread;
    int err = mux__uring_setup(st);
    if (err != 0) {
        free(st);
        return err;
    }
    err = mux__uring_ops_open(st);
    if (err != 0) {
        mux__uring_ops_close(st);
        mux__uring_exit(st);
        free(st);
        return err;
    }
    /* The operations want 5.19 (multishot accept, buffer rings); the socket opcode came with
     * that release. Older kernels, or IOMUX_URING_STREAMS=poll: every operation emulated. */
    struct io_uring_probe *probe = io_uring_get_probe_ring(&st->ring);
    const char *ns = getenv("IOMUX_URING_STREAMS");
    if (!probe || !io_uring_opcode_supported(probe, IORING_OP_SOCKET) ||
        (ns && strcmp(ns, "poll") == 0))
        loop->caps &= ~(MUX__CAP_OPS | MUX__CAP_ACCEPT_MULTI | MUX__CAP_RECV_MULTI);
    /* Multishot receives came with 6.0, as did the zero-copy send opcode, which says so. */
    if (!probe || !io_uring_opcode_supported(probe, IORING_OP_SEND_ZC) ||
        (ns && strcmp(ns, "oneshot") == 0))
        loop->caps &= ~(unsigned)(MUX__CAP_RECV_MULTI | MUX__CAP(MUX__OP_DGRAM_RECV));
    if (probe)
        io_uring_free_probe(probe);
    loop->bdata = st; /* the fd table starts zeroed: no fd has a request yet */
    if (loop->choosing && !mux__uring_default_path(loop)) {
        mux__uring_close(loop); /* operations emulated: not the path measured ahead */
        return -ENOTSUP;
    }
    return 0;
}

static void mux__uring_close(struct mux__loop *loop)
{
    struct mux__uring *st = loop->bdata;
    mux__uring_ops_close(st);
    if (st->ring_ok)
        mux__uring_exit(st);
    free(st->rearm);
    free(st);
    loop->bdata = NULL;
}

static unsigned mux__uring_reap(struct mux__loop *loop);

/* A new, empty ring. The caller makes the core re-apply every watched fd.
 * `lost` == 0, in a child after fork: the old ring is the parent's, so nothing of it is
 * cancelled, unregistered or waited for (the child only unmaps and closes its copies).
 * `lost` != 0, the kernel lost CQEs: what the old ring still holds is taken first.
 * The operations in flight end either way (ops.c). */
static int mux__uring_renew(struct mux__loop *loop, int lost)
{
    struct mux__uring *st = loop->bdata;
    if (lost && st->ring_ok)
        mux__uring_reap(loop);
    mux__uring_ops_drop_ring(loop, lost);
    if (st->ring_ok)
        mux__uring_exit(st);
    st->ring_ok = 0;
    st->nrearm = st->ndone = 0;
    mux__fd_forget_kernel(loop);
    int err = mux__uring_setup(st);
    mux__uring_ops_new_ring(loop, lost);
    return err;
}

static int mux__uring_fork(struct mux__loop *loop)
{
    return mux__uring_renew(loop, 0);
}

static unsigned mux__uring_cq_overflow(const struct mux__uring *st)
{
    return IO_URING_READ_ONCE(*st->ring.sq.kflags) & IORING_SQ_CQ_OVERFLOW;
}

/* Enters with GETEVENTS and no wait: runs pending task work and moves overflowed CQEs
 * into the ring. */
static int mux__uring_get_events(struct mux__uring *st)
{
    int r = io_uring_enter(st->ring.ring_fd, 0, 0, IORING_ENTER_GETEVENTS, NULL);
    return r < 0 ? r : 0;
}

static void mux__uring_rearm_add(struct mux__loop *loop, int fd)
{
    struct mux__uring *st = loop->bdata;
    if (mux__fd_at(loop, fd)->kmask & MUX__K_REARM)
        return;
    if (mux__unlikely(st->nrearm == st->rearm_cap)) {
        uint32_t cap = st->rearm_cap ? st->rearm_cap * 2 : 64;
        int *p = realloc(st->rearm, (size_t)cap * sizeof *p);
        if (!p) {
            mux__fd_touch(loop, fd, 1); /* the core's change list re-arms it as well */
            return;
        }
        st->rearm = p;
        st->rearm_cap = cap;
    }
    st->rearm[st->nrearm++] = fd;
    mux__fd_at(loop, fd)->kmask |= MUX__K_REARM;
}

/* Poll bits to MUX_* and back, by shifts: they run once per event. */
_Static_assert(POLLIN == 1 && POLLOUT == 4 && POLLRDHUP == 0x2000 && MUX_READ == 1 &&
                   MUX_WRITE == 2,
               "the shifts below");

static unsigned mux__uring_revents(int res)
{
    unsigned r = (unsigned)res;
    unsigned got = ((r | r >> 13) & MUX_READ) | (r >> 1 & MUX_WRITE); /* POLLIN|RDHUP, POLLOUT */
    if (r & (POLLRDHUP | POLLHUP)) /* the peer's hang-up, asked for (MUX_RDHUP) or not */
        got |= MUX_RDHUP;
    return r & (POLLERR | POLLHUP) ? got | MUX__IO_EVENTS : got;
}

static inline __attribute__((always_inline)) void mux__uring_fill_add(struct mux__uring *st,
                                                                      struct io_uring_sqe *sqe,
                                                                      struct mux__fd *e, int fd,
                                                                      unsigned want);

/* A poll CQE of the rarer kinds, out of line (the reap's loop keeps its registers): an
 * update's, a failed request's, or one that says POLLERR or POLLHUP on an fd not yet
 * verified. Returns 1 when the CQE is handled, 0 when it goes on as a plain event. */
static __attribute__((noinline)) int mux__uring_complete_odd(struct mux__loop *loop,
                                                             struct mux__fd *e, int fd,
                                                             unsigned kind, int res, unsigned ended)
{
    if (kind == MUX__UD_UPDATE) {
        /* -ENOENT: the request has ended, and its last CQE re-arms it. Otherwise the
         * update may be lost (-EALREADY: the request was firing): start afresh. */
        if (res < 0 && res != -ENOENT)
            mux__fd_touch(loop, fd, 1);
        return 1;
    }
    if (res < 0) {
        e->kmask &= MUX__K_REARM; /* a failed request has ended */
        if (res == -EINVAL && !(e->want & MUX__IO_EVENTS))
            return 1; /* a file that cannot be waited on (a regular file) asked for MUX_RDHUP
                         alone: it never hangs up, as poll(2) says of it, so nothing is armed
                         until the watchers want more (their change arms it) */
        mux__fd_touch(loop, fd, 1); /* re-armed by the next batch of changes */
        if (res != -ECANCELED && res != -EINTR && res != -EAGAIN && res != -ENOMEM)
            mux__fd_kill(loop, fd, res); /* -EBADF and friends */
        return 1;
    }
    /* The request holds the file: make sure the number still names an open fd. */
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
        if (ended)
            e->kmask &= MUX__K_REARM;
        mux__fd_kill(loop, fd, -EBADF);
        return 1;
    }
    e->kmask |= MUX__K_VERIFIED;
    return 0;
}

/* One CQE. Never submits: what it needs from the kernel goes through the core's change
 * list (mux__fd_touch with force re-arms) or the re-arm list. */
static inline __attribute__((always_inline)) void
mux__uring_complete(struct mux__loop *loop, uint64_t ud, int res, unsigned flags, int post)
{
    unsigned kind = (unsigned)(ud >> 62);
    int fd = (int)(uint32_t)ud;
    if (kind == MUX__UD_REMOVE)
        return;
    struct mux__fd *e = mux__fd_at(loop, fd); /* armed, so in the table, which never shrinks */
    if ((uint32_t)(ud >> 32 & MUX__GEN_MASK) != (e->kgen & MUX__GEN_MASK) ||
        !(e->kmask & MUX__IO_WATCH))
        return; /* a removed or replaced request */
    unsigned ended = !(flags & IORING_CQE_F_MORE);
    if (mux__unlikely(kind == MUX__UD_UPDATE || res < 0 ||
                      ((res & (POLLERR | POLLHUP)) && !(e->kmask & MUX__K_VERIFIED))) &&
        mux__uring_complete_odd(loop, e, fd, kind, res, ended))
        return;
    if (ended) {
        /* A one-shot request, or a multishot one the kernel ended (a full CQ ring, a
         * file that cannot be waited on): armed again by the next enter, after the watchers
         * have run, if they still want events. Queued now when nothing is submitted before
         * then (after this wait's enter); if the watchers change their mind meanwhile, the
         * next batch of changes updates or removes the request behind it. Otherwise the fd
         * waits on the re-arm list. */
        e->kmask &= MUX__K_REARM;
        struct mux__uring *st = loop->bdata;
        struct io_uring_sqe *sqe;
        if (mux__likely(post && !(e->kmask & MUX__K_REARM) && (e->want & MUX__IO_WATCH) &&
                        (sqe = mux__uring_sqe(st)) != NULL))
            mux__uring_fill_add(st, sqe, e, fd, e->want);
        else
            mux__uring_rearm_add(loop, fd);
    }
    /* Watchers are called from here only after the wait's enter: the reaps that make room
     * in the SQ ring before it run inside the batch of changes, where they only queue. */
    if (mux__likely(post))
        mux__fd_report(loop, e, mux__uring_revents(res));
    else if (!(e->changed & MUX__FD_FORCE))
        mux__fd_queue(loop, e, mux__uring_revents(res));
}

/* Handles every CQE in the ring; returns how many there were. An operation's CQE that its
 * owner cannot take now is copied out and kept for the next iteration, and so is every
 * later CQE of that operation (its owner sees them in order); the rest go on, and the ring
 * never stalls. */
static unsigned mux__uring_reap(struct mux__loop *loop)
{
    struct mux__uring *st = loop->bdata;
    struct io_uring_cq *cq = &st->ring.cq;
    /* The tail once: CQEs posted meanwhile (the kernel runs task work when a callback makes
     * a system call) are the next reap's, which the next wait makes at once. */
    unsigned head = *cq->khead, tail = io_uring_smp_load_acquire(cq->ktail), n = 0;
    int post = st->post_enter; /* watchers may be called: after the wait's enter */
    if (post && head != tail)
        loop->now_stale = 1; /* the callbacks below read the clock again: once per reap */
    for (; head != tail; head++) {
        const struct io_uring_cqe *cqe = &cq->cqes[head & cq->ring_mask]; /* no CQE32 */
        if (mux__likely(cqe->user_data >> 62 != MUX__UD_OP)) {
            mux__uring_complete(loop, cqe->user_data, cqe->res, cqe->flags, post);
            if (mux__forked_since(loop))
                return n + 1; /* a callback forked: in the child, the ring is the parent's */
            n++;
            continue;
        }
        /* An operation's owner is called at once (after the wait's enter): the wait is over,
         * as mux__fd_report marks it for a watcher's event, and no idle watcher runs this
         * iteration. A poll CQE that reports nothing (a removed request's, an update's) does
         * not mark it: it is no event. */
        if (post)
            loop->dispatched = 1;
        if (mux__uring_ops_cqe(loop, cqe, (unsigned)post) != 0)
            break; /* no memory to keep a refused one: it stays in the ring */
        if (mux__forked_since(loop))
            return n + 1; /* its owner's callback (MUX__OPC_NOW) forked, as above */
        n++;
    }
    io_uring_cq_advance(&st->ring, n);
    /* The batch's buffers, taken by receives and given back by sends, into the rings at once
     * (one store of each ring's tail): before any further enter, as the overflow's. */
    if (n != 0)
        mux__uring_ops_topup(st);
    return n;
}

/* Makes room for `need` SQEs, submitting what is queued when the SQ ring is full (which
 * reaps, so operations may complete meanwhile). 0, or -errno when the kernel takes nothing. */
static int mux__uring_reserve(struct mux__loop *loop, unsigned need)
{
    struct mux__uring *st = loop->bdata;
    for (int tries = 0; io_uring_sq_space_left(&st->ring) < need; tries++) {
        if (tries > 1000)
            return -EAGAIN; /* the kernel takes nothing: give up on this change */
        int r = io_uring_submit(&st->ring);
        if (r > 0 || r == -EINTR)
            continue;
        if (r < 0 && r != -EBUSY && r != -EAGAIN)
            return r;
        /* An old kernel refuses to submit while CQEs overflow: make room in the CQ. */
        mux__uring_reap(loop);
        mux__uring_get_events(st);
        mux__uring_reap(loop);
    }
    return 0;
}

/* An SQE with every other field zero, or NULL when the SQ ring is full (reserve first). One
 * compound-literal store rather than a memset call: it runs once per event. */
static struct io_uring_sqe *mux__uring_prep(struct mux__uring *st, int op, int fd, uint64_t ud)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
    if (mux__unlikely(!sqe))
        return NULL;
    *sqe = (struct io_uring_sqe){.opcode = (uint8_t)op, .fd = fd, .user_data = ud};
    return sqe;
}

static uint32_t mux__uring_mask(unsigned want)
{
    uint32_t m = (want & MUX_READ) | (want & MUX_WRITE) << 1; /* POLLIN, POLLOUT */
    if (want & MUX_RDHUP)
        m |= POLLRDHUP;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    m = m << 16 | m >> 16; /* poll32_events is stored half-word swapped */
#endif
    return m;
}

/* The three poll SQEs. Each needs room in the SQ ring, made by mux__uring_reserve before;
 * without it, -EAGAIN and nothing changed. */

/* IORING_OP_POLL_REMOVE with update flags: a new mask, or a re-poll with the same one. */
static int mux__uring_prep_update(struct mux__uring *st, int fd, uint32_t gen, unsigned want)
{
    struct io_uring_sqe *sqe =
        mux__uring_prep(st, IORING_OP_POLL_REMOVE, -1, mux__ud(MUX__UD_UPDATE, fd, gen));
    if (!sqe)
        return -EAGAIN;
    sqe->addr = mux__ud(MUX__UD_POLL, fd, gen);
    sqe->len = IORING_POLL_UPDATE_EVENTS;
    sqe->poll32_events = mux__uring_mask(want);
    sqe->flags = (uint8_t)st->skip;
    return 0;
}

/* A new request for `want` in `sqe`, the SQ ring's last: one-shot for level-triggered
 * watchers, multishot for edge. */
static inline __attribute__((always_inline)) void mux__uring_fill_add(struct mux__uring *st,
                                                                      struct io_uring_sqe *sqe,
                                                                      struct mux__fd *e, int fd,
                                                                      unsigned want)
{
    e->kgen++;
    *sqe = (struct io_uring_sqe){.opcode = IORING_OP_POLL_ADD,
                                 .fd = fd,
                                 .poll32_events = mux__uring_mask(want),
                                 .len = want & MUX_EDGE ? IORING_POLL_ADD_MULTI : 0,
                                 .user_data = mux__ud(MUX__UD_POLL, fd, e->kgen)};
    e->kslot = st->ring.sq.sqe_tail - 1;
    e->kmask = (uint8_t)((e->kmask & MUX__K_REARM) | want);
}

static int mux__uring_prep_add(struct mux__uring *st, struct mux__fd *e, int fd, unsigned want)
{
    struct io_uring_sqe *sqe = mux__uring_sqe(st);
    if (!sqe)
        return -EAGAIN;
    mux__uring_fill_add(st, sqe, e, fd, want);
    return 0;
}

/* Removes the armed request; its last CQE, whenever it comes, is stale. */
static int mux__uring_prep_remove(struct mux__uring *st, struct mux__fd *e, int fd)
{
    struct io_uring_sqe *sqe =
        mux__uring_prep(st, IORING_OP_POLL_REMOVE, -1, mux__ud(MUX__UD_REMOVE, fd, e->kgen));
    if (!sqe)
        return -EAGAIN;
    sqe->addr = mux__ud(MUX__UD_POLL, fd, e->kgen);
    sqe->flags = (uint8_t)st->skip;
    e->kgen++;
    e->kmask &= MUX__K_REARM;
    return 0;
}

/* The request of `e` when it is a poll add still in the SQ ring, not yet seen by the kernel
 * (queued by a CQE's re-arm in this iteration, typically), or NULL. */
static struct io_uring_sqe *mux__uring_queued_add(struct mux__uring *st, struct mux__fd *e, int fd)
{
    const struct io_uring_sq *sq = &st->ring.sq;
    if (!(e->kmask & MUX__K_EVENTS) || e->kslot - sq->sqe_head >= sq->sqe_tail - sq->sqe_head)
        return NULL;
    struct io_uring_sqe *sqe = &sq->sqes[e->kslot & sq->ring_mask];
    return sqe->opcode == IORING_OP_POLL_ADD && sqe->user_data == mux__ud(MUX__UD_POLL, fd, e->kgen)
               ? sqe
               : NULL;
}

static int mux__uring_change(struct mux__loop *loop, int fd, unsigned want, int force)
{
    struct mux__uring *st = loop->bdata;
    struct mux__fd *e = mux__fd_at(loop, fd);
    /* A request the kernel has not seen yet is rewritten in place: a watcher that stops, or
     * changes its events, after its event was reported costs no SQE (the poll add is
     * resolved by fd number when submitted, so a forced change needs nothing more). */
    struct io_uring_sqe *q = mux__uring_queued_add(st, e, fd);
    if (q) {
        if (!want) {
            *q = (struct io_uring_sqe){.opcode = IORING_OP_NOP,
                                       .flags = (uint8_t)st->skip,
                                       .user_data = (uint64_t)MUX__UD_REMOVE << 62};
            e->kgen++;
            e->kmask &= MUX__K_REARM;
            return 0;
        }
        q->poll32_events = mux__uring_mask(want);
        q->len = want & MUX_EDGE ? IORING_POLL_ADD_MULTI : 0;
        e->kmask = (uint8_t)((e->kmask & ~MUX__K_EVENTS) | want);
        return 0;
    }
    int err = mux__uring_enable(st);
    if (err == 0)
        err = mux__uring_reserve(loop, 2);
    if (err != 0)
        return err;
    unsigned have = e->kmask & MUX__K_EVENTS;
    /* A request cannot change its kind: edge <-> level replaces it. */
    if (have && (force || !want || ((have ^ want) & MUX_EDGE))) {
        err = mux__uring_prep_remove(st, e, fd);
        have = 0;
    }
    if (err != 0 || !want)
        return err;
    if (!have)
        return mux__uring_prep_add(st, e, fd, want);
    if ((have ^ want) & MUX__IO_WATCH)
        err = mux__uring_prep_update(st, fd, e->kgen, want);
    if (err == 0)
        e->kmask = (uint8_t)((e->kmask & ~MUX__K_EVENTS) | want);
    return err;
}

/* Submits the queued operations (ops.c keeps the queue); at the start of every wait.
 * Returns how many ended without reaching the kernel (their owners were told), or -EAGAIN
 * when the kernel takes nothing (the rest stay queued). */
static int mux__uring_flush_ops(struct mux__loop *loop)
{
    struct mux__uring *st = loop->bdata;
    unsigned ended = 0;
    struct mux__op *op;
    if (mux__likely(st->queue.qnext == &st->queue && !st->pools_pending))
        return 0;
    mux__uring_ops_register(st);
    while ((op = mux__uring_ops_head(st, &ended)) != NULL) {
        if (io_uring_sq_space_left(&st->ring) == 0) {
            if (mux__uring_reserve(loop, 1) != 0)
                return -EAGAIN;
            continue; /* the early submit reaped: the head may have changed */
        }
        mux__uring_ops_prep(st, io_uring_get_sqe(&st->ring), op);
    }
    return (int)ended;
}

/* Re-arms the fds whose request completed in an earlier wait, if they still want events
 * and nothing armed them meanwhile. Only those whose watchers have run since: re-arming
 * the others would report the events they are about to handle a second time. */
static int mux__uring_rearms(struct mux__loop *loop)
{
    struct mux__uring *st = loop->bdata;
    uint32_t i = 0, old = st->ndone;
    unsigned space = io_uring_sq_space_left(&st->ring);
    int err = 0;
    for (; i < old; i++) {
        int fd = st->rearm[i];
        struct mux__fd *e = mux__fd_at(loop, fd);
        if ((e->kmask & MUX__K_EVENTS) || !(e->want & MUX__IO_WATCH)) {
            e->kmask &= (uint8_t)~MUX__K_REARM;
            continue;
        }
        if (mux__unlikely(space == 0)) {
            err = mux__uring_reserve(loop, 1);
            if (err != 0)
                break; /* the rest stay on the list */
            space = io_uring_sq_space_left(&st->ring);
        }
        space--;
        e->kmask &= (uint8_t)~MUX__K_REARM;
        err = mux__uring_prep_add(st, e, fd, e->want);
        if (err != 0) {
            e->kmask |= MUX__K_REARM;
            break; /* the rest stay on the list */
        }
    }
    if (i == st->nrearm) {
        st->nrearm = 0;
    } else if (i > 0) {
        memmove(st->rearm, st->rearm + i, (st->nrearm - i) * sizeof *st->rearm);
        st->nrearm -= i;
    }
    st->ndone = 0;
    return err;
}

/* Makes the SQEs queued since the last enter visible to the kernel (liburing's own flush,
 * which it does not export; the fields are its public ring state). Returns how many the
 * kernel has not consumed. */
static unsigned mux__uring_flush_sq(struct mux__uring *st)
{
    struct io_uring_sq *sq = &st->ring.sq;
    unsigned tail = sq->sqe_tail;
    if (sq->sqe_head != tail) {
        sq->sqe_head = tail;
        io_uring_smp_store_release(sq->ktail, tail);
    }
    return tail - IO_URING_READ_ONCE(*sq->khead);
}

/* Submits everything queued and waits, in one io_uring_enter; none at all for a poll with
 * nothing to submit and no kernel work pending. */
static int mux__uring_enter(struct mux__uring *st, int64_t timeout_ns)
{
    unsigned submit = mux__uring_flush_sq(st), flags = 0, min = 0;
    struct __kernel_timespec ts;
    struct io_uring_getevents_arg arg;
    void *argp = NULL;
    size_t argsz = 0;
    if (timeout_ns != 0) {
        flags = IORING_ENTER_GETEVENTS;
        min = 1;
        if (timeout_ns > 0) {
            ts = (struct __kernel_timespec){.tv_sec = timeout_ns / 1000000000,
                                            .tv_nsec = timeout_ns % 1000000000};
            arg = (struct io_uring_getevents_arg){.ts = (uint64_t)(uintptr_t)&ts};
            argp = &arg;
            argsz = sizeof arg;
            flags |= IORING_ENTER_EXT_ARG;
        }
    } else if (st->deferred) {
        flags = IORING_ENTER_GETEVENTS; /* deferred work runs only in an enter that asks */
    } else if (!st->taskrun_flag ||
               (IO_URING_READ_ONCE(*st->ring.sq.kflags) &
                (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW))) {
        flags = IORING_ENTER_GETEVENTS; /* task work to run, or CQEs to flush: a poll */
    }
    if (submit == 0 && flags == 0)
        return 0;
    return io_uring_enter2((unsigned)st->ring.ring_fd, submit, min, flags, argp, argsz);
}

static int mux__uring_wait_once(struct mux__loop *loop, int64_t timeout_ns)
{
    struct mux__uring *st = loop->bdata;
    int eerr = mux__uring_enable(st);
    if (eerr != 0)
        return eerr;
    /* Queued operations and re-arms first; then one enter submits them and, unless CQEs are
     * already waiting (kept ones, or with COOP_TASKRUN those whose task work ran on any
     * return from the kernel), waits; then every CQE is taken. Nothing is submitted after
     * that until the watchers have run, which lets the CQE of an ended poll queue its re-arm
     * at once (mux__uring_complete): the kernel sees it with the next enter. */
    int ended = mux__uring_flush_ops(loop);
    if (ended < 0)
        return ended;
    if (st->nrearm != 0) {
        int err = mux__uring_rearms(loop);
        if (err != 0)
            return err;
    }
    /* Kept CQEs are offered again unless all are parked and no owner unparked them: a
     * stopped reader's would be refused at every wait. */
    int offer = st->ndefer && (st->defer_retry || loop->ops_unpark);
    if (ended || offer || io_uring_cq_ready(&st->ring) || mux__uring_cq_overflow(st))
        timeout_ns = 0;
    loop->ops_unpark = 0;
    /* Buffers given back since the last reap (from the pending queue, or by the caller). */
    mux__uring_ops_topup(st);
    int r = mux__uring_enter(st, timeout_ns);
    st->post_enter = MUX__OPC_NOW;
    unsigned got = 0;
    if (mux__unlikely(offer)) {
        got += mux__uring_ops_redeliver(loop);
        if (mux__forked_since(loop))
            return 0; /* an owner's callback forked (MUX__OPC_NOW): the ring is the parent's */
    }
    got += mux__uring_reap(loop);
    if (mux__forked_since(loop))
        return 0; /* the next iteration makes the child its own ring */
    /* A deferred poll ran one pass of the kernel's work: while it flags more, run the next,
     * so that a non-blocking run sees what was ready before it (bounded: new work may keep
     * coming). */
    for (int i = 0; st->deferred && timeout_ns == 0 && i < 256 &&
                    (IO_URING_READ_ONCE(*st->ring.sq.kflags) & IORING_SQ_TASKRUN);
         i++) {
        mux__uring_get_events(st);
        got += mux__uring_reap(loop);
        if (mux__forked_since(loop))
            return 0;
    }
    /* Deferred task work runs only in a waiting enter. A wait that ended with nothing and
     * not by its timeout was cut short by a signal, whose handler may have made work (an
     * async send writes the wake-up eventfd): run it now, or it waits for the next wait.
     * (An enter that submitted returns the count even when it timed out: the clock says.) */
    if (got == 0 && ended == 0 && st->deferred && timeout_ns != 0 && r != -ETIME &&
        (timeout_ns < 0 || mux__mono_ns() < mux__now(loop) + (uint64_t)timeout_ns)) {
        mux__uring_get_events(st);
        mux__uring_reap(loop);
        if (mux__forked_since(loop))
            return 0;
    }
    /* Without SUBMIT_ALL a failing SQE stops the batch: send the rest of what the enter was
     * given (not the re-arms queued since, whose watchers have not run). */
    for (int i = 0; !st->submit_all && i < 64 && r >= 0; i++) {
        unsigned left = *st->ring.sq.ktail - IO_URING_READ_ONCE(*st->ring.sq.khead);
        if (left == 0)
            break;
        r = io_uring_enter2((unsigned)st->ring.ring_fd, left, 0, 0, NULL, 0);
        mux__uring_reap(loop);
        if (mux__forked_since(loop))
            return 0;
    }
    /* CQ overflow: the kernel holds CQEs back until the ring has room. */
    for (int i = 0; mux__uring_cq_overflow(st) && i < 1 << 20; i++) {
        int g = mux__uring_get_events(st);
        unsigned n = mux__uring_reap(loop);
        if (mux__forked_since(loop))
            return 0;
        if (n == 0 && g != 0 && g != -EINTR && g != -EAGAIN) {
            r = g;
            break;
        }
    }
    if (r >= 0 || r == -ETIME || r == -EAGAIN || r == -EBUSY)
        return 0;
    if (r == -EBADR) {
        /* The kernel lost CQEs: some request may have ended unseen. Start again. */
        st->post_enter = 0; /* what the old ring still holds is queued, not called */
        int err = mux__uring_renew(loop, 1);
        if (err != 0)
            return err;
        mux__fd_refresh_all(loop);
        return 0;
    }
    return r; /* -EINTR included, which the core ignores */
}

static int mux__uring_wait(struct mux__loop *loop, int64_t timeout_ns)
{
    struct mux__uring *st = loop->bdata;
    int err = mux__uring_wait_once(loop, timeout_ns);
    st->post_enter = 0;
    st->ndone = st->nrearm; /* the core runs their watchers before it waits again */
    return err;
}

const struct mux__backend mux__backend_uring = {
    .name = "uring",
    .caps = MUX__CAP(MUX__OP_RECV_POOL) | MUX__CAP(MUX__OP_SEND) | MUX__CAP(MUX__OP_SENDV) |
            MUX__CAP(MUX__OP_ACCEPT) | MUX__CAP_ACCEPT_MULTI | MUX__CAP_RECV_MULTI |
            MUX__CAP(MUX__OP_DGRAM_RECV) | MUX__CAP_WAKE_FD | MUX__CAP_RDHUP,
    .fd_limit = INT_MAX,
    .open = mux__uring_open,
    .close = mux__uring_close,
    .fork = mux__uring_fork,
    .change = mux__uring_change,
    .wait = mux__uring_wait,
    .wake = mux__wake_fd,
    .submit = mux__uring_submit,
    .cancel = mux__uring_cancel,
    .pool_attach = mux__uring_pool_attach,
    .pool_detach = mux__uring_pool_detach,
};
