/* SPDX-License-Identifier: MIT */
/* rtsig: readiness through real-time signals (Linux; opt-in, never the default).
 *
 * Each watched socket or pipe is given a real-time signal (F_SETSIG), an owner (F_SETOWN_EX
 * with F_OWNER_TID: the loop's own thread) and O_ASYNC. From then on the kernel queues one
 * siginfo per event on the file, naming the fd (si_fd) and what happened (si_band, si_code
 * POLL_IN..POLL_HUP); the loop reads them off the queue through a signalfd, up to 64 per
 * read (a wait that blocks with nothing to poll takes the first with sigtimedwait). A wait
 * costs O(events), not O(watched fds): one of the five mechanisms Libenzi measured against
 * /dev/epoll (docs/studies.md, study 4), and still in today's kernel. What is odd about it,
 * and what this file does about it:
 * - Signals are edge-like and queued per event: a burst of writes queues a signal each, and
 *   a signal says that something happened, not that the fd is still ready. The API promises
 *   level triggering, so the backend keeps a check list: the fds a signal named, the fds
 *   newly armed or whose interest changed, and the fds it reported ready last time. Each wait
 *   polls that list once with ppoll (timeout 0), reports what is ready, keeps the level fds
 *   that were ready on the list, and drops the others: a not-ready fd waits for its next
 *   signal, which the kernel sends on every wake-up of the file. So readiness the caller did
 *   not consume is reported again, at the price of one poll of the reported fds per wait.
 *   A MUX_EDGE fd is polled once per signal and dropped: one report per event.
 * - Writability is the exception. A socket signals it only after something found it full
 *   (SOCKWQ_ASYNC_NOSPACE: a send that said EAGAIN, or TCP's own poll), and a Unix stream
 *   socket polls writable at a quarter of its buffer but signals only after a failed send.
 *   So an fd whose level writer waits stays on the check list until it is writable, and the
 *   wait blocks in ppoll on those fds and on a signalfd, readable while a signal is queued.
 *   (A MUX_EDGE writer writes until EAGAIN, which is what makes the kernel signal.)
 * - The queue is limited by RLIMIT_SIGPENDING, which counts every pending signal of the real
 *   user, in all of its processes. When it is full the kernel sends plain SIGIO instead: one
 *   pending bit, no si_fd. Taking SIGIO off the queue makes the loop poll every armed fd once
 *   (O(watched)), and every other rtsig loop of the thread does the same at its next wait (a
 *   per-thread count); nothing is lost, since the pass sees the present state of every fd.
 *   A wake-up that finds the queue full (tgkill says EAGAIN) sends SIGIO too.
 * - F_SETSIG, the owner and O_ASYNC belong to the open file description, not to the fd number:
 *   they survive dup, fork and exec, and a file has one owner. The backend never takes a file
 *   whose owner is another live task or another loop's signal (a forked child's copy of the
 *   parent's sockets, a second loop in the thread, a program's own O_ASYNC): such fds are
 *   watched by poll instead, as are files without signals (regular files, always ready;
 *   eventfd, timerfd, devices). A wait with polled fds blocks in ppoll with the signalfd.
 * - si_fd is the number through which O_ASYNC was switched on. A file armed under another
 *   number (a dup) would signal under that one, so arming switches O_ASYNC off and on again;
 *   a file watched under two numbers at once is reported under the last armed only.
 * - A closed-and-reused fd: signals queued for the old file name the new one's number, and a
 *   file kept open by a dup signals under its closed number. Every signal is checked by poll
 *   before anything is reported, and an fd nobody watches any more is disarmed (owner and
 *   O_ASYNC cleared) when its first unwanted signal comes: stale signals cost a lookup.
 * - Threads. The signal goes to the owning thread, where it must be blocked (an unblocked
 *   real-time signal kills the process, by default). A loop binds to the first thread that
 *   runs it (not the one that made it): it blocks its signal and SIGIO there, for good, and
 *   from another thread mux_run says -EEXIST, since the files and the queue are that
 *   thread's. SIGIO belongs to the backend in a loop's thread: a watcher of SIGIO there is
 *   not reliable.
 * - Which signal: each loop takes its own real-time signal, from SIGRTMAX down, one whose
 *   action is still the default (glibc keeps the two below SIGRTMIN for itself; a program or
 *   library that installs a handler for its own is passed by). The loop sets it to SIG_IGN
 *   while it lives: that claims it, drops a stray delivery to a thread that does not block
 *   it, and discards instances still pending from a loop that had it before (a blocked
 *   signal is queued all the same). Closing takes its leftovers off its thread's queue and
 *   restores the old action. About thirty loops fit in a process; the next open says
 *   -EAGAIN. Several loops in one thread each have their own signal, so none takes
 *   another's events; a file one of them armed is polled by the others.
 * - Fork: the child's pending signals are cleared and the files' owner is the parent. The
 *   child forgets what it had armed; its loop watches the shared files by poll (their owner
 *   lives) and arms the files it makes itself, so the parent keeps its signals.
 * - Wake-ups (async sends, signal watchers' handlers) tgkill the loop's own signal to its
 *   thread: no descriptor. One is in flight at most (a flag the wait clears), and si_code
 *   (SI_TKILL) tells it from the kernel's events (POLL_*).
 * - Timeouts are timespecs (sigtimedwait, ppoll): nanoseconds. EINTR is passed up.
 * - Signals are queued and dequeued one per event, however many name the same fd (the
 *   "signal per fd" patch that collapsed them never reached mainline); only the system calls
 *   are batched. epoll replaced all this. rtsig is here for comparisons, never chosen
 *   unless named (MUX__CAP_NAMED_ONLY).
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"

/* mux__fd.kmask */
#define MUX__RT_ARMED  0x1  /* the file signals this loop (kept while unwatched, until a signal) */
#define MUX__RT_POLLED 0x2  /* watched by poll: on the check list for good */
#define MUX__RT_QUEUED 0x4  /* on the check list */
#define MUX__RT_DRAIN  1024 /* signals taken per wait at most */
#define MUX__RT_BATCH  64   /* signals taken per read of the signalfd */

struct mux__rtsig {
    int signo, sigfd;   /* the loop's signal; a signalfd for it and SIGIO */
    pid_t tid, pid;     /* atomic: the thread that runs the loop (0: none yet), its process */
    int wake, rescan;   /* atomic: a wake-up was asked for; check every fd at the next wait */
    unsigned overflows; /* the thread's overflow count, as last seen */
    uint32_t nchk, chk_cap, npfd, pfd_cap;
    int *chk;           /* the check list */
    struct pollfd *pfd; /* what a wait polls, the signalfd first */
    sigset_t set;       /* signo and SIGIO */
    struct sigaction saved;
};

static uint64_t mux__rtsig_taken; /* atomic: the signals loops hold, bit signo - SIGRTMIN */
static const struct timespec mux__rtsig_zero = {0, 0};
static _Thread_local struct {
    pid_t tid;
    unsigned gen, overflows; /* overflows: SIGIOs taken by this thread's loops */
} mux__rtsig_me;

static pid_t mux__rtsig_self(void)
{
    if (mux__unlikely(!mux__rtsig_me.tid || mux__rtsig_me.gen != mux__fork_gen)) {
        mux__rtsig_me.tid = gettid(); /* cached: a child's thread has a new one */
        mux__rtsig_me.gen = mux__fork_gen;
    }
    return mux__rtsig_me.tid;
}

static int mux__rtsig_grow(void *pp, uint32_t *cap, uint32_t need, size_t size)
{
    uint32_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *p = c == *cap ? *(void **)pp : realloc(*(void **)pp, (size_t)c * size);
    if (!p)
        return -ENOMEM;
    *(void **)pp = p;
    *cap = c;
    return 0;
}

static int mux__rtsig_open(struct mux__loop *loop)
{
    struct mux__rtsig *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    int err = -EAGAIN; /* every real-time signal is taken */
    struct sigaction cur, sa = {.sa_handler = SIG_IGN};
    for (int s = SIGRTMAX; s >= SIGRTMIN && !st->signo; s--) { /* Linux: 33 at most */
        uint64_t bit = 1ull << (s - SIGRTMIN);
        if (__atomic_fetch_or(&mux__rtsig_taken, bit, __ATOMIC_SEQ_CST) & bit)
            continue; /* another loop's */
        int r = sigaction(s, NULL, &cur);
        if (r == 0 && cur.sa_handler == SIG_DFL && sigaction(s, &sa, &st->saved) == 0)
            st->signo = s; /* free: claimed (and stale instances discarded) by SIG_IGN */
        else if (r != 0 || cur.sa_handler == SIG_DFL)
            err = -errno;
        if (!st->signo) /* the program's, a library's, or refused */
            __atomic_fetch_and(&mux__rtsig_taken, ~bit, __ATOMIC_SEQ_CST);
    }
    if (st->signo) {
        sigemptyset(&st->set);
        sigaddset(&st->set, st->signo);
        sigaddset(&st->set, SIGIO);
        st->sigfd = signalfd(-1, &st->set, SFD_NONBLOCK | SFD_CLOEXEC);
        err = st->sigfd < 0 ? -errno : 0;
        if (err == 0) {
            loop->bdata = st;
            return 0;
        }
        sigaction(st->signo, &st->saved, NULL);
        __atomic_fetch_and(&mux__rtsig_taken, ~(1ull << (st->signo - SIGRTMIN)), __ATOMIC_SEQ_CST);
    }
    free(st);
    return err;
}

/* Hands the file back (no owner, no O_ASYNC) if this loop's signal is still its. */
static void mux__rtsig_disarm(struct mux__rtsig *st, struct mux__fd *e, int fd)
{
    struct f_owner_ex o;
    e->kmask &= (uint8_t)~MUX__RT_ARMED;
    if (fcntl(fd, F_GETOWN_EX, &o) != 0 || o.type != F_OWNER_TID || o.pid != st->tid ||
        fcntl(fd, F_GETSIG) != st->signo)
        return;
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_ASYNC))
        (void)fcntl(fd, F_SETFL, fl & ~O_ASYNC); /* best effort: stale signals are ignored */
    o.pid = 0;
    (void)fcntl(fd, F_SETOWN_EX, &o);
}

/* Makes `fd` signal this loop: 1 when it does, 0 when it must be polled, or -errno. */
static int mux__rtsig_arm(struct mux__rtsig *st, int fd)
{
    struct f_owner_ex o;
    struct stat sb;
    if (fcntl(fd, F_GETOWN_EX, &o) != 0)
        return -errno;
    if (o.pid == st->tid && o.type == F_OWNER_TID) { /* this thread's: this loop's? */
        int sig = fcntl(fd, F_GETSIG);
        if (sig != st->signo)
            return sig < 0 ? -errno : 0; /* another loop of the thread has it */
    } else if (o.pid != 0 && (kill(o.type == F_OWNER_PGRP ? -o.pid : o.pid, 0) == 0 ||
                              errno == EPERM))
        return 0; /* a live task has it: a forked parent, another thread's loop, the program */
    if (fstat(fd, &sb) != 0)
        return -errno;
    if (!S_ISSOCK(sb.st_mode) && !S_ISFIFO(sb.st_mode))
        return 0; /* no signals from it (regular files, eventfd, timerfd, ...) */
    o = (struct f_owner_ex){.type = F_OWNER_TID, .pid = st->tid};
    int fl = -1;
    if (fcntl(fd, F_SETSIG, st->signo) == 0 && fcntl(fd, F_SETOWN_EX, &o) == 0 &&
        (fl = fcntl(fd, F_GETFL)) >= 0 && /* O_ASYNC on: off and on, so si_fd is this fd */
        (!(fl & O_ASYNC) || fcntl(fd, F_SETFL, fl & ~O_ASYNC) == 0) &&
        fcntl(fd, F_SETFL, fl | O_ASYNC) == 0)
        return 1;
    int err = -errno;
    o.pid = 0;
    (void)fcntl(fd, F_SETOWN_EX, &o); /* a half-armed file is nobody's */
    return err;
}

/* The loop's thread is the first that runs it; binding blocks the signals there. */
static int mux__rtsig_bind(struct mux__loop *loop)
{
    struct mux__rtsig *st = loop->bdata;
    pid_t me = mux__rtsig_self();
    if (mux__likely(st->tid == me))
        return 0;
    if (st->tid)
        return -EEXIST; /* its files signal the thread that first ran it */
    int err = pthread_sigmask(SIG_BLOCK, &st->set, NULL);
    if (err != 0)
        return -err;
    __atomic_store_n(&st->pid, getpid(), __ATOMIC_SEQ_CST);
    __atomic_store_n(&st->tid, me, __ATOMIC_SEQ_CST);
    st->overflows = mux__rtsig_me.overflows;
    return 0;
}

static void mux__rtsig_queue(struct mux__rtsig *st, struct mux__fd *e, int fd)
{
    if (e->kmask & MUX__RT_QUEUED)
        return;
    if (mux__rtsig_grow(&st->chk, &st->chk_cap, st->nchk + 1, sizeof *st->chk) == 0) {
        e->kmask |= MUX__RT_QUEUED;
        st->chk[st->nchk++] = fd;
    } else
        st->rescan = 1; /* no room: every fd is checked instead */
}

static int mux__rtsig_change(struct mux__loop *loop, int fd, unsigned want, int force)
{
    struct mux__rtsig *st = loop->bdata;
    struct mux__fd *e = mux__fd_at(loop, fd);
    int r = st->tid ? 0 : mux__rtsig_bind(loop); /* arming names the loop's thread, any caller */
    if (r != 0)
        return r;
    if (force || !want) /* maybe a new file under the number: ask it again */
        e->kmask &= (uint8_t)~(MUX__RT_POLLED | (force ? MUX__RT_ARMED : 0));
    if (!want)
        return 0; /* an armed file stays armed until an unwanted signal comes */
    if (!(e->kmask & (MUX__RT_ARMED | MUX__RT_POLLED))) {
        if ((r = mux__rtsig_arm(st, fd)) < 0)
            return r;
        e->kmask |= r ? MUX__RT_ARMED : MUX__RT_POLLED;
    }
    mux__rtsig_queue(st, e, fd); /* its present state: no signal told of the past */
    return 0;
}

/* One signal taken off the queue: its number, si_code and si_fd. */
static void mux__rtsig_got(struct mux__loop *loop, int signo, int code, int fd)
{
    struct mux__rtsig *st = loop->bdata;
    struct mux__fd *e;
    if (signo == SIGIO) { /* the queue overflowed (or a wake-up found it full) */
        st->overflows = ++mux__rtsig_me.overflows;
        st->rescan = 1;
        loop->woken = 1;
    } else if (code < POLL_IN || code > POLL_HUP) { /* tgkill: a wake-up */
        __atomic_store_n(&st->wake, 0, __ATOMIC_SEQ_CST);
        loop->woken = 1;
    } else if ((e = mux__fd_find(loop, fd)) && (e->kmask & MUX__RT_ARMED)) {
        if (e->want & MUX__IO_EVENTS) /* else nobody watches it: given back */
            mux__rtsig_queue(st, e, fd);
        else
            mux__rtsig_disarm(st, e, fd);
    } /* else stale: a file this loop does not arm (any more) */
}

/* Takes what is queued, MUX__RT_BATCH signals per read of the signalfd (which dequeues as
 * sigtimedwait does, in the loop's thread: one system call for a batch, where sigtimedwait
 * takes one signal, and one more to hear that none is left). A short read means the queue
 * was empty. 1 when the budget ran out (more may be there), 0, or -errno. */
static int mux__rtsig_drain(struct mux__loop *loop)
{
    struct mux__rtsig *st = loop->bdata;
    struct signalfd_siginfo si[MUX__RT_BATCH];
    for (int taken = 0; taken < MUX__RT_DRAIN;) {
        ssize_t n = read(st->sigfd, si, sizeof si);
        if (n < 0)
            return errno == EAGAIN ? 0 : -errno;
        size_t k = (size_t)n / sizeof si[0];
        for (size_t i = 0; i < k; i++)
            mux__rtsig_got(loop, (int)si[i].ssi_signo, si[i].ssi_code, si[i].ssi_fd);
        if (k < MUX__RT_BATCH)
            return 0;
        taken += (int)k;
    }
    return 1;
}

static int mux__rtsig_add(struct mux__rtsig *st, int fd, unsigned want)
{
    if (mux__rtsig_grow(&st->pfd, &st->pfd_cap, st->npfd + 1, sizeof *st->pfd) != 0)
        return -ENOMEM;
    short ev = (short)((want & MUX_READ ? POLLIN : 0) | (want & MUX_WRITE ? POLLOUT : 0));
    st->pfd[st->npfd++] = (struct pollfd){.fd = fd, .events = ev};
    return 0;
}

/* Fills pfd: the signalfd, the check list (or, after an overflow, every fd). 0 or -ENOMEM. */
static int mux__rtsig_gather(struct mux__loop *loop)
{
    struct mux__rtsig *st = loop->bdata;
    int all = st->rescan;
    st->npfd = 0;
    int err = mux__rtsig_add(st, st->sigfd, MUX_READ);
    for (uint32_t i = 0; i < st->nchk; i++) {
        struct mux__fd *e = mux__fd_at(loop, st->chk[i]);
        e->kmask &= (uint8_t)~MUX__RT_QUEUED;
        if (!all && !err && (e->kmask & (MUX__RT_ARMED | MUX__RT_POLLED)) &&
            (e->want & MUX__IO_EVENTS))
            err = mux__rtsig_add(st, st->chk[i], e->want);
    }
    st->nchk = 0;
    for (uint32_t i = 0; all && i < loop->nleaves; i++)
        for (uint32_t k = 0; loop->fdl[i] && !err && k < MUX__FD_LEAF; k++) {
            struct mux__fd *e = &loop->fdl[i][k];
            if ((e->kmask & (MUX__RT_ARMED | MUX__RT_POLLED)) && (e->want & MUX__IO_EVENTS))
                err = mux__rtsig_add(st, (int)(i << MUX__FD_LEAF_BITS | k), e->want);
        }
    st->rescan = err != 0; /* what was on the list is looked at in a pass over all */
    return err;
}

/* Polls what to check and reports what is ready: the number reported, or -errno. Leaves in
 * pfd what a wait that blocks must poll: the signalfd, the polled fds, waiting writers. */
static int mux__rtsig_check(struct mux__loop *loop)
{
    struct mux__rtsig *st = loop->bdata;
    int err = mux__rtsig_gather(loop);
    int r = err ? err : st->npfd > 1 ? ppoll(st->pfd + 1, st->npfd - 1, &mux__rtsig_zero, NULL) : 0;
    if (r < 0) {
        st->rescan = 1; /* the list is gone: look at everything next time */
        return err ? err : -errno;
    }
    int reported = 0;
    uint32_t keep = 1;
    for (uint32_t i = 1; i < st->npfd; i++) {
        short rev = st->pfd[i].revents;
        int fd = st->pfd[i].fd;
        struct mux__fd *e = mux__fd_at(loop, fd);
        /* Again next time: a polled fd; a level fd while ready, or while a writer waits. */
        int again = (e->kmask & MUX__RT_POLLED) ||
                    (!(e->want & MUX_EDGE) && (rev || (e->want & MUX_WRITE)));
        if (again)
            mux__rtsig_queue(st, e, fd);
        if (!rev) {
            if (again)
                st->pfd[keep++] = st->pfd[i];
            continue;
        }
        reported++;
        if (rev & POLLNVAL) {
            e->kmask &= (uint8_t)~(MUX__RT_ARMED | MUX__RT_POLLED);
            mux__fd_kill(loop, fd, -EBADF);
            continue;
        }
        unsigned got = (rev & (POLLIN | POLLPRI) ? MUX_READ : 0) | (rev & POLLOUT ? MUX_WRITE : 0);
        mux__fd_report(loop, e, got | (rev & (POLLERR | POLLHUP) ? MUX__IO_EVENTS : 0));
    }
    st->npfd = keep;
    return reported;
}

/* Waits for a signal; with fds to poll, for them and the signalfd. 1 when something came
 * (the signal taken is handled), 0 at the timeout, or -errno. */
static int mux__rtsig_block(struct mux__loop *loop, int64_t timeout_ns)
{
    struct mux__rtsig *st = loop->bdata;
    struct timespec ts = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
    if (st->npfd > 1) {
        int r = ppoll(st->pfd, st->npfd, timeout_ns < 0 ? NULL : &ts, NULL);
        return r < 0 ? -errno : r > 0;
    }
    siginfo_t si;
    if (sigtimedwait(&st->set, &si, timeout_ns < 0 ? NULL : &ts) < 0)
        return errno == EAGAIN ? 0 : -errno;
    mux__rtsig_got(loop, si.si_signo, si.si_code, si.si_fd);
    return 1;
}

static int mux__rtsig_wait(struct mux__loop *loop, int64_t timeout_ns)
{
    struct mux__rtsig *st = loop->bdata;
    int err = mux__rtsig_bind(loop);
    if (err != 0)
        return err;
    if (__atomic_exchange_n(&st->wake, 0, __ATOMIC_SEQ_CST))
        loop->woken = 1;
    if (st->overflows != mux__rtsig_me.overflows) { /* another loop of the thread took SIGIO */
        st->overflows = mux__rtsig_me.overflows;
        st->rescan = 1;
    }
    /* Ready now, or else after one blocking wait (a stale signal: a spurious wake-up). */
    for (int blocked = 0;; blocked = 1) {
        int more = mux__rtsig_drain(loop);
        int n = more < 0 ? more : mux__rtsig_check(loop);
        if (n != 0 || more || loop->woken || timeout_ns == 0 || blocked)
            return n < 0 ? n : 0;
        if ((err = mux__rtsig_block(loop, timeout_ns)) <= 0)
            return err;
    }
}

/* Any thread, or a signal handler: one signal per wait at most. */
static int mux__rtsig_wake(struct mux__loop *loop)
{
    struct mux__rtsig *st = loop->bdata;
    if (__atomic_exchange_n(&st->wake, 1, __ATOMIC_SEQ_CST))
        return 0; /* one is on its way */
    pid_t tid = __atomic_load_n(&st->tid, __ATOMIC_SEQ_CST); /* stored after pid */
    if (!tid || mux__forked_since(loop))
        return 0; /* not run yet, or a child's loop before it renews: the flag is seen then */
    pid_t pid = __atomic_load_n(&st->pid, __ATOMIC_SEQ_CST);
    if (syscall(SYS_tgkill, pid, tid, st->signo) == 0)
        return 0;
    if (errno == EAGAIN && syscall(SYS_tgkill, pid, tid, SIGIO) == 0)
        return 0; /* the queue is full: its overflow signal wakes the wait as well */
    return errno == ESRCH ? 0 : -errno; /* the thread is gone: its next runner sees the flag */
}

static int mux__rtsig_fork(struct mux__loop *loop)
{
    struct mux__rtsig *st = loop->bdata;
    mux__fd_forget_kernel(loop); /* the parent's files; the core re-applies each watched fd */
    st->nchk = st->rescan = 0;
    __atomic_store_n(&st->tid, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&st->wake, 0, __ATOMIC_SEQ_CST);
    return 0;
}

static void mux__rtsig_close(struct mux__loop *loop)
{
    struct mux__rtsig *st = loop->bdata;
    if (st->tid && !mux__forked_since(loop)) {
        for (uint32_t i = 0; i < loop->nleaves; i++)
            for (uint32_t k = 0; loop->fdl[i] && k < MUX__FD_LEAF; k++)
                if (loop->fdl[i][k].kmask & MUX__RT_ARMED)
                    mux__rtsig_disarm(st, &loop->fdl[i][k], (int)(i << MUX__FD_LEAF_BITS | k));
        sigset_t own; /* its leftovers, in its thread; SIGIO may be another loop's */
        sigemptyset(&own);
        sigaddset(&own, st->signo);
        while (st->tid == mux__rtsig_self() && sigtimedwait(&own, NULL, &mux__rtsig_zero) > 0) {
        }
    }
    sigaction(st->signo, &st->saved, NULL);
    __atomic_fetch_and(&mux__rtsig_taken, ~(1ull << (st->signo - SIGRTMIN)), __ATOMIC_SEQ_CST);
    close(st->sigfd);
    free(st->chk);
    free(st->pfd);
    free(st);
    loop->bdata = NULL;
}

const struct mux__backend mux__backend_rtsig = {
    .name = "rtsig",
    .caps = MUX__CAP_NAMED_ONLY,
    .fd_limit = INT_MAX,
    .open = mux__rtsig_open,
    .close = mux__rtsig_close,
    .fork = mux__rtsig_fork,
    .change = mux__rtsig_change,
    .wait = mux__rtsig_wait,
    .wake = mux__rtsig_wake,
};
