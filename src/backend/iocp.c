/* SPDX-License-Identifier: MIT */
/* iocp: Windows I/O completion ports. A completion interface: the stream layer's operations
 * run natively as overlapped Winsock calls, and io watchers get readiness from the AFD driver's
 * poll request, both reported through one GetQueuedCompletionStatusEx.
 *
 * What is odd about it, and what this file does about it:
 * - A port reports completions, not readiness, and Winsock has no readiness call that a port
 *   can wait for (WSAEventSelect needs an event per socket and a wait on at most 64 of them;
 *   WSAPoll cannot be combined with a port). Under Winsock, every socket is a file of the AFD
 *   driver, which takes a poll request (IOCTL_AFD_POLL, the request select() and WSAPoll are
 *   made of) as an overlapped ioctl: it completes, through the port, once one of the asked
 *   events holds. That is how io watchers work here, as in libuv's uv_poll, mio and wepoll.
 *   The request is sent on a handle of our own to \Device\Afd (opened with NtCreateFile: it
 *   has no Win32 path), naming the socket's base handle (SIO_BASE_HANDLE: a layered service
 *   provider may hand programs a handle of its own). A request is one-shot, like an io_uring
 *   poll: it is sent again after its events were dispatched, just before the next wait, and
 *   completes at once if the socket is still ready, which gives level triggering. A change of
 *   events cancels the request in flight (CancelIoEx) and sends a new one once the
 *   cancellation has completed; a request's memory (its OVERLAPPED and the poll block) is kept
 *   until its completion comes, however the watchers changed meanwhile.
 * - The events: READ asks for RECEIVE, ACCEPT and DISCONNECT (end of stream); WRITE for SEND;
 *   both for ABORT (reset) and CONNECT_FAIL, which wake both directions as POLLERR does.
 *   LOCAL_CLOSE, asked for always, says the socket was closed behind the loop's back: its
 *   watchers get MUX_ERROR (-EBADF). A number that is not a socket is refused by
 *   SIO_BASE_HANDLE: -EBADF for its watchers. Only sockets can be watched.
 * - Operations. Every stream and listener socket is bound to the port when the stream or
 *   listener adopts it (`adopt`), once: a socket cannot leave a port, so a socket can serve
 *   one loop. An operation's OVERLAPPED is its private space; the port hands back its address,
 *   and the operation is found from it. Sends are WSASend of the buffer array as it is
 *   (mux_buf_t is a WSABUF; Winsock copies the array during the call, so the one built on the
 *   stack to keep a completion's count within an int is enough); the kernel holds the bytes'
 *   pages until the completion, which comes when everything was taken. Accepts are AcceptEx
 *   into a socket made beforehand, given the listener's context afterwards
 *   (SO_UPDATE_ACCEPT_CONTEXT) so that getsockname, shutdown and the rest work on it.
 *   Connects are ConnectEx, which wants the socket bound first (to the family's any address)
 *   and SO_UPDATE_CONNECT_CONTEXT after. A shutdown is one quick call (shutdown(SD_SEND))
 *   made in the submit, whose result is posted to the port as its completion.
 * - File sends have two ways, both correct under Wine, which says nothing of their speed.
 *   TransmitFile hands the file to the kernel, which reads it at the OVERLAPPED's offset and
 *   sends it with no copy through the program; but the client editions of Windows run two
 *   TransmitFile calls at a time in the whole system and queue the rest, which would make a
 *   server's downloads wait for each other. So it is the way where Windows is a server
 *   edition; elsewhere (Windows 10 and 11, and Wine, which says it is one) the emulation over
 *   the AFD polls (ready_ops.c) reads the file with a positioned ReadFile and sends what it
 *   read as the socket takes it. IOMUX_IOCP_FILES=transmitfile or =read chooses, for the
 *   tests that run the file cases both ways. A file that ends before the send's first byte
 *   completes it with 0 bytes: -ENODATA, as the emulation says it.
 * - Receives never lend a buffer to the kernel while a connection is idle: a receive is a
 *   zero-byte WSARecv, which completes when bytes (or the end of the stream) are there, and the
 *   bytes are then read with a non-blocking recv, as libuv does. For a caller's buffer that
 *   read happens in the next submit (the zero-byte completion says "readable, submit again":
 *   -EAGAIN with MUX__OPC_NONEMPTY), so that the bytes reach the read callback with nothing run
 *   in between (backend.h, "Buffers"); a submit whose owner expects data tries the recv first
 *   and completes inside the submit. For a pool, the zero-byte completion takes a buffer and
 *   reads into it right there (the pool is bound to the loop, with no kernel ring).
 * - Pipes. A stream on a child's standard handle is a named pipe's server end (spawn_win.c),
 *   opened overlapped and bound to the port as a socket is; its operations carry
 *   MUX__OPF_PIPE. A receive waits with a zero-byte ReadFile, which completes once bytes are
 *   there or the child's end has closed (ERROR_BROKEN_PIPE), and reads what is there with
 *   PeekNamedPipe and a ReadFile that cannot wait (platform/win.c, mux__pipe_read), whose
 *   OVERLAPPED's event has its low bit set so that the port gets no completion of it: in the
 *   next submit for a caller's buffer, in the completion for a pool's, as on a socket. A send
 *   is one overlapped WriteFile of the first buffer with bytes (WriteFileGather wants whole
 *   pages), completed once the pipe took it all. The child's end closed is the end of the
 *   stream for a receive and -EPIPE for a send (ERROR_NO_DATA, ERROR_BROKEN_PIPE). Cancels
 *   are CancelIoEx, as for sockets; the stream closes the handle (CloseHandle) itself, and an
 *   operation that completes after that reads nothing. There is no shutdown of a pipe's
 *   writing side: the stream closes the pipe instead (stream.c).
 * - Datagrams go the same ways. A batch send is an overlapped WSASendTo of its first
 *   datagram; the rest go from that completion with non-blocking calls, and one the socket
 *   does not take waits overlapped in its turn; the count sent completes it. A receive waits
 *   with a zero-byte WSARecvFrom with MSG_PEEK, which leaves the datagram where it is, and
 *   reads up to the batch with non-blocking WSARecvFrom calls: in the next submit for caller
 *   buffers, in the completion for a pool's (platform/dgram_win.c has the calls).
 * - A completion carries an NTSTATUS in the OVERLAPPED, not a Winsock error: it goes through
 *   RtlNtStatusToDosError to a Win32 code and then to the errno the POSIX build would give
 *   (platform/win.c). A cancelled operation ends with ERROR_OPERATION_ABORTED: -ECANCELED.
 *   A call that fails at once is completed through the port too (PostQueuedCompletionStatus
 *   with the errno), so that no completion comes from inside the submitting call.
 * - Closing: closesocket ends the socket's operations in flight, each with its completion,
 *   which the stream waits for before its close callback (stream.c). Closing the loop cancels
 *   the AFD requests still in flight and waits for their completions before freeing them.
 * - The wake-up is PostQueuedCompletionStatus of a packet with a key of its own: any thread.
 * - Timeouts: GetQueuedCompletionStatusEx takes milliseconds, and the system's timer ticks
 *   every 15.6 ms by default, so a 1 ms wait can take 16. Where Windows has them (10, 1803
 *   on), a high-resolution waitable timer ends the wait instead: it is set to the timeout in
 *   100 ns steps, and the wait is alertable, so that the timer's APC ends it. A wait that
 *   ends some other way cancels the timer; an APC that was queued anyway ends a later wait
 *   early, which then goes on for what is left of its own time (the clock decides). Other
 *   APCs queued to the loop's thread run inside the wait too. Without such a timer, timeouts
 *   are milliseconds rounded up. Either way the core fires no timer before its deadline;
 *   timeBeginPeriod is left to the program, since it costs every process power.
 * - No fork: `fork` is never called.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <winsock2.h>
#include <mswsock.h>
#include <windows.h>
#include <winternl.h>
#include <ws2tcpip.h>

#include "backend/backend.h"
#include "iomux/udp.h"
#include "platform/platform.h"
#include "platform/win.h"

#define MUX__ENTRIES 128
#ifndef CREATE_WAITABLE_TIMER_HIGH_RESOLUTION
#define CREATE_WAITABLE_TIMER_HIGH_RESOLUTION 0x2
#endif

/* Completion keys. */
enum { MUX__KEY_SOCK = 1, MUX__KEY_AFD, MUX__KEY_WAKE, MUX__KEY_LOCAL };

/* The AFD driver's poll request (its layout is the driver's, as select() sends it). */
#define MUX__IOCTL_AFD_POLL       0x00012024
#define MUX__AFD_RECEIVE          0x0001
#define MUX__AFD_RECEIVE_EXPEDITED 0x0002
#define MUX__AFD_SEND             0x0004
#define MUX__AFD_DISCONNECT       0x0008
#define MUX__AFD_ABORT            0x0010
#define MUX__AFD_LOCAL_CLOSE      0x0020
#define MUX__AFD_ACCEPT           0x0080
#define MUX__AFD_CONNECT_FAIL     0x0100

struct mux__afd_poll_info {
    LARGE_INTEGER timeout;
    ULONG nhandles;
    ULONG exclusive;
    struct {
        HANDLE handle;
        ULONG events;
        NTSTATUS status;
    } h[1];
};

/* One watched socket's poll request. Kept until its completion came, even after the fd left
 * (fd < 0): the kernel writes into it until then. */
struct mux__apoll {
    OVERLAPPED ov; /* first: the completion's address is the request's */
    struct mux__afd_poll_info info;
    int fd;           /* the watched number, or -1: detached, freed once idle */
    SOCKET base;      /* its base handle */
    uint8_t pending;  /* a request is in the kernel */
    uint8_t polled;   /* the MUX_READ / MUX_WRITE that request asks for */
    uint8_t dirty;    /* on the list of requests to send or cancel before the wait */
    uint8_t cancelled; /* CancelIoEx was called on the request in flight */
};

/* An accept's socket and the addresses AcceptEx writes, per accept in flight; recycled. */
struct mux__actx {
    struct mux__actx *next;
    SOCKET as;
    char addrs[2 * (sizeof(struct sockaddr_storage) + 16)];
};

/* An operation's private space: its OVERLAPPED, and an accept's context or a receive's
 * budget (the loop iteration its streak_ counts in). */
struct mux__iop {
    OVERLAPPED ov;
    union {
        struct mux__actx *actx;
        uint32_t iter;
    } u;
};
_Static_assert(sizeof(struct mux__iop) <= sizeof(((struct mux__op *)0)->priv_),
               "an OVERLAPPED and a pointer fit in an operation's private space");

struct mux__ipool {
    mux_bufpool_t *pool;
    uint32_t armed; /* receives in flight from it */
    struct mux__ipool *next;
};

struct mux__iocp {
    HANDLE port;
    HANDLE afd;
    struct mux__apoll **slots; /* by mux__fd.kslot - 1 */
    uint32_t nslots, slot_cap;
    uint32_t *free_ids, nfree; /* ids of slots given back, for reuse */
    struct mux__apoll **dirty;
    uint32_t ndirty, dirty_cap;
    uint32_t inflight_polls;
    struct mux__actx *actx_free;
    struct mux__ipool *pools;
    LPFN_ACCEPTEX acceptex;
    LPFN_CONNECTEX connectex;
    LPFN_TRANSMITFILE transmitfile;
    HANDLE timer; /* a high-resolution waitable timer, or NULL: millisecond waits */
    HANDLE pipe_event; /* for reads of pipes that complete in the call (made at the first) */
    OVERLAPPED_ENTRY entries[MUX__ENTRIES];
};

/* An operation's IOCP part, in its private space; and the operation of an OVERLAPPED. */
static struct mux__iop *mux__iop_of(struct mux__op *op)
{
    return (struct mux__iop *)(void *)op->priv_.word;
}

static struct mux__op *mux__op_of_ov(OVERLAPPED *ov)
{
    return (struct mux__op *)(void *)((char *)ov - offsetof(struct mux__op, priv_));
}

/* ---- life cycle ----------------------------------------------------------------------- */

static int mux__afd_open(struct mux__iocp *st)
{
    UNICODE_STRING name;
    OBJECT_ATTRIBUTES attr;
    IO_STATUS_BLOCK iosb;
    RtlInitUnicodeString(&name, L"\\Device\\Afd\\iomux");
    InitializeObjectAttributes(&attr, &name, 0, NULL, NULL);
    NTSTATUS s = NtCreateFile(&st->afd, SYNCHRONIZE, &attr, &iosb, NULL, 0,
                              FILE_SHARE_READ | FILE_SHARE_WRITE, FILE_OPEN, 0, NULL, 0);
    if (s != 0) {
        st->afd = NULL;
        return mux__win_errno(RtlNtStatusToDosError(s));
    }
    if (!CreateIoCompletionPort(st->afd, st->port, MUX__KEY_AFD, 0)) {
        int err = mux__win_errno(GetLastError());
        CloseHandle(st->afd);
        st->afd = NULL;
        return err;
    }
    return 0;
}

static void mux__iocp_free(struct mux__iocp *st)
{
    for (uint32_t i = 0; i < st->nslots; i++)
        if (st->slots[i] && !st->slots[i]->pending)
            free(st->slots[i]); /* a request the drain gave up on may still be written: kept */
    free(st->slots);
    free(st->free_ids);
    free(st->dirty);
    struct mux__actx *a;
    while ((a = st->actx_free) != NULL) {
        st->actx_free = a->next;
        free(a);
    }
    free(st);
}

/* ntdll's, which user-mode headers leave out: the version without GetVersionEx's manifest
 * games (the library links ntdll already, for the AFD device). */
NTSYSAPI NTSTATUS NTAPI RtlGetVersion(OSVERSIONINFOW *v);

/* Whether file sends go by TransmitFile (see the top): on a server edition of Windows, or
 * when IOMUX_IOCP_FILES says so. */
static int mux__iocp_transmits(void)
{
    const char *how = getenv("IOMUX_IOCP_FILES");
    if (how && strcmp(how, "transmitfile") == 0)
        return 1;
    if (how && strcmp(how, "read") == 0)
        return 0;
    OSVERSIONINFOEXW v;
    memset(&v, 0, sizeof v);
    v.dwOSVersionInfoSize = sizeof v;
    return RtlGetVersion((OSVERSIONINFOW *)&v) == 0 && v.wProductType != VER_NT_WORKSTATION;
}

static int mux__iocp_open(struct mux__loop *loop)
{
    struct mux__iocp *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    st->port = CreateIoCompletionPort(INVALID_HANDLE_VALUE, NULL, 0, 1);
    if (!st->port) {
        int err = mux__win_errno(GetLastError());
        free(st);
        return err;
    }
    int err = mux__afd_open(st);
    if (err != 0) {
        CloseHandle(st->port);
        free(st);
        return err;
    }
    /* NULL where the system has none: waits are then milliseconds. */
    st->timer = CreateWaitableTimerExW(NULL, NULL, CREATE_WAITABLE_TIMER_HIGH_RESOLUTION,
                                       TIMER_ALL_ACCESS);
    loop->bdata = st;
    if (!mux__iocp_transmits())
        loop->caps &= ~MUX__CAP(MUX__OP_SENDFILE);
    return 0;
}

/* Waits for the completions of the poll requests still in the kernel (cancelled), so that
 * their memory can go. Anything else the port still holds is dropped: nothing is in flight
 * on a closing loop but these. A cancelled request completes at once; after 10 s of
 * waiting, the ones still out are leaked, never freed under the kernel. */
static void mux__iocp_drain(struct mux__iocp *st)
{
    for (int rounds = 0; st->inflight_polls > 0 && rounds < 100; rounds++) {
        ULONG n = 0;
        if (!GetQueuedCompletionStatusEx(st->port, st->entries, MUX__ENTRIES, &n, 100, FALSE))
            continue;
        for (ULONG i = 0; i < n; i++)
            if (st->entries[i].lpCompletionKey == MUX__KEY_AFD) {
                struct mux__apoll *p = (struct mux__apoll *)(void *)st->entries[i].lpOverlapped;
                p->pending = 0;
                st->inflight_polls--;
                if (p->fd < 0 && !p->dirty)
                    free(p); /* detached, on no list: its completion was all that held it */
            }
    }
}

static void mux__iocp_close(struct mux__loop *loop)
{
    struct mux__iocp *st = loop->bdata;
    for (uint32_t i = 0; i < st->nslots; i++)
        if (st->slots[i] && st->slots[i]->pending)
            CancelIoEx(st->afd, &st->slots[i]->ov);
    for (uint32_t i = 0; i < st->ndirty; i++) /* detached ones wait here */
        if (st->dirty[i]->pending)
            CancelIoEx(st->afd, &st->dirty[i]->ov);
    mux__iocp_drain(st);
    for (uint32_t i = 0; i < st->ndirty; i++)
        if (st->dirty[i]->fd < 0 && !st->dirty[i]->pending)
            free(st->dirty[i]);
    CloseHandle(st->afd);
    CloseHandle(st->port);
    if (st->timer)
        CloseHandle(st->timer);
    if (st->pipe_event)
        CloseHandle(st->pipe_event);
    struct mux__ipool *ip;
    while ((ip = st->pools) != NULL) {
        st->pools = ip->next;
        mux__bufpool_unbind(ip->pool);
        free(ip);
    }
    mux__iocp_free(st);
    loop->bdata = NULL;
}

static int mux__iocp_fork(struct mux__loop *loop)
{
    (void)loop; /* Windows has no fork */
    return -ENOTSUP;
}

static int mux__iocp_wake(struct mux__loop *loop)
{
    struct mux__iocp *st = loop->bdata;
    return PostQueuedCompletionStatus(st->port, 0, MUX__KEY_WAKE, NULL)
               ? 0
               : mux__win_errno(GetLastError());
}

/* ---- readiness: AFD poll requests --------------------------------------------------- */

static int mux__apoll_mark(struct mux__iocp *st, struct mux__apoll *p)
{
    if (p->dirty)
        return 0;
    if (st->ndirty == st->dirty_cap) {
        uint32_t cap = st->dirty_cap ? st->dirty_cap * 2 : 64;
        void *d = realloc(st->dirty, cap * sizeof *st->dirty);
        if (!d)
            return -ENOMEM;
        st->dirty = d;
        st->dirty_cap = cap;
    }
    st->dirty[st->ndirty++] = p;
    p->dirty = 1;
    return 0;
}

/* Takes the slot of `e` off its fd: freed now if the kernel and the dirty list are done with
 * it, else by whichever of them finishes last. */
static void mux__apoll_detach(struct mux__iocp *st, struct mux__fd *e)
{
    uint32_t id = e->kslot - 1;
    struct mux__apoll *p = st->slots[id];
    st->slots[id] = NULL;
    st->free_ids[st->nfree++] = id;
    e->kslot = 0;
    p->fd = -1;
    if (p->pending && !p->cancelled) {
        p->cancelled = 1;
        CancelIoEx(st->afd, &p->ov);
    }
    if (!p->pending && !p->dirty)
        free(p);
}

static int mux__apoll_new(struct mux__iocp *st, struct mux__fd *e, int fd)
{
    SOCKET base = INVALID_SOCKET;
    DWORD got = 0;
    int type, tlen = sizeof type;
    if (getsockopt(MUX__SOCK(fd), SOL_SOCKET, SO_TYPE, (char *)&type, &tlen) != 0)
        return -EBADF; /* closed, or not a socket (Wine's SIO_BASE_HANDLE does not check) */
    if (WSAIoctl(MUX__SOCK(fd), SIO_BASE_HANDLE, NULL, 0, &base, sizeof base, &got, NULL, NULL) !=
            0 ||
        base == INVALID_SOCKET)
        return -EBADF; /* closed, or not a socket: nothing else can be polled */
    if (st->nfree == 0 && st->nslots == st->slot_cap) {
        uint32_t cap = st->slot_cap ? st->slot_cap * 2 : 64;
        void *s = realloc(st->slots, cap * sizeof *st->slots);
        if (!s)
            return -ENOMEM;
        st->slots = s;
        void *f = realloc(st->free_ids, cap * sizeof *st->free_ids);
        if (!f)
            return -ENOMEM;
        st->free_ids = f;
        st->slot_cap = cap;
    }
    struct mux__apoll *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->fd = fd;
    p->base = base;
    uint32_t id = st->nfree ? st->free_ids[--st->nfree] : st->nslots++;
    st->slots[id] = p;
    e->kslot = id + 1;
    return 0;
}

static int mux__iocp_change(struct mux__loop *loop, int fd, unsigned want, int force)
{
    struct mux__iocp *st = loop->bdata;
    struct mux__fd *e = mux__fd_at(loop, fd);
    want &= MUX__IO_EVENTS;
    if (e->kslot && (!want || force))
        mux__apoll_detach(st, e); /* a new file behind the number needs a new base handle */
    if (!want)
        return 0;
    if (!e->kslot) {
        int err = mux__apoll_new(st, e, fd);
        if (err != 0)
            return err;
    }
    return mux__apoll_mark(st, st->slots[e->kslot - 1]);
}

static ULONG mux__afd_events(unsigned want)
{
    ULONG ev = MUX__AFD_ABORT | MUX__AFD_LOCAL_CLOSE | MUX__AFD_CONNECT_FAIL;
    if (want & MUX_READ)
        ev |= MUX__AFD_RECEIVE | MUX__AFD_ACCEPT | MUX__AFD_DISCONNECT;
    if (want & MUX_WRITE)
        ev |= MUX__AFD_SEND;
    return ev;
}

/* Sends the request for what the fd's watchers want; 0 or -errno. */
static int mux__apoll_send(struct mux__iocp *st, struct mux__apoll *p, unsigned want)
{
    memset(&p->ov, 0, sizeof p->ov);
    p->info.timeout.QuadPart = INT64_MAX;
    p->info.nhandles = 1;
    p->info.exclusive = FALSE;
    p->info.h[0].handle = (HANDLE)p->base;
    p->info.h[0].events = mux__afd_events(want);
    p->info.h[0].status = 0;
    if (!DeviceIoControl(st->afd, MUX__IOCTL_AFD_POLL, &p->info, sizeof p->info, &p->info,
                         sizeof p->info, NULL, &p->ov) &&
        GetLastError() != ERROR_IO_PENDING)
        return mux__win_errno(GetLastError());
    p->pending = 1;
    p->polled = (uint8_t)want;
    p->cancelled = 0;
    st->inflight_polls++;
    return 0;
}

/* Before the wait: every request whose watchers changed or ran is sent, or cancelled to be
 * sent again with other events. */
static void mux__apoll_flush(struct mux__loop *loop)
{
    struct mux__iocp *st = loop->bdata;
    uint32_t n = st->ndirty;
    st->ndirty = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct mux__apoll *p = st->dirty[i];
        p->dirty = 0;
        if (p->fd < 0) {
            if (!p->pending)
                free(p);
            continue;
        }
        unsigned want = mux__fd_at(loop, p->fd)->want & MUX__IO_EVENTS;
        if (p->pending) {
            if (p->polled != want && !p->cancelled) {
                p->cancelled = 1; /* sent again from its completion */
                CancelIoEx(st->afd, &p->ov);
            }
        } else if (want) {
            int err = mux__apoll_send(st, p, want);
            if (err != 0)
                mux__fd_kill(loop, p->fd, err);
        }
    }
}

/* A poll request's completion; 1 when it reached a watcher. */
static int mux__apoll_done(struct mux__loop *loop, struct mux__apoll *p)
{
    struct mux__iocp *st = loop->bdata;
    p->pending = 0;
    st->inflight_polls--;
    if (p->fd < 0) {
        if (!p->dirty)
            free(p);
        return 0;
    }
    int fd = p->fd;
    NTSTATUS s = (NTSTATUS)p->ov.Internal;
    ULONG ev = s == 0 && p->info.nhandles > 0 ? p->info.h[0].events : 0;
    int cancelled = p->cancelled;
    p->cancelled = 0;
    /* Sent again before the next wait: after the watchers ran (level triggering), or with the
     * events they want now (a cancel for a change). */
    if (mux__apoll_mark(st, p) != 0) {
        mux__fd_kill(loop, fd, -ENOMEM);
        return 1;
    }
    if (cancelled || s != 0) {
        if (s != 0 && (LONG)s != (LONG)0xC0000120L /* STATUS_CANCELLED */)
            mux__fd_kill(loop, fd, mux__win_errno(RtlNtStatusToDosError(s)));
        return s != 0 && (LONG)s != (LONG)0xC0000120L;
    }
    if (ev & MUX__AFD_LOCAL_CLOSE) {
        mux__fd_kill(loop, fd, -EBADF); /* its entry is changed: the slot goes then */
        return 1;
    }
    unsigned got = 0;
    if (ev & (MUX__AFD_RECEIVE | MUX__AFD_RECEIVE_EXPEDITED | MUX__AFD_ACCEPT |
              MUX__AFD_DISCONNECT))
        got |= MUX_READ;
    if (ev & MUX__AFD_SEND)
        got |= MUX_WRITE;
    if (ev & (MUX__AFD_ABORT | MUX__AFD_CONNECT_FAIL))
        got |= MUX__IO_EVENTS;
    if (got)
        mux__fd_event(loop, fd, got); /* may run a callback: nothing of `p` is read after */
    return got != 0;
}

/* ---- operations ----------------------------------------------------------------------- */

static int mux__iocp_adopt(struct mux__loop *loop, mux_os_sock_t sock)
{
    struct mux__iocp *st = loop->bdata;
    if (!CreateIoCompletionPort((HANDLE)sock, st->port, MUX__KEY_SOCK, 0))
        return mux__win_errno(GetLastError()); /* another loop's: -EINVAL */
    return 0;
}

/* Ends `op` from the next wait with `res`: a call that failed, or was done, at once. */
static void mux__iocp_post(struct mux__loop *loop, struct mux__op *op, int res)
{
    struct mux__iocp *st = loop->bdata;
    struct mux__iop *io = mux__iop_of(op);
    io->ov.Internal = (ULONG_PTR)(intptr_t)res;
    if (!PostQueuedCompletionStatus(st->port, 0, MUX__KEY_LOCAL, &io->ov))
        abort(); /* a port that takes no packet can complete nothing: nothing sane is left */
}

static int mux__iocp_pipe_wait(struct mux__op *op);

static int mux__iocp_zero_recv(struct mux__op *op)
{
    if (op->flags_ & MUX__OPF_PIPE)
        return mux__iocp_pipe_wait(op);
    WSABUF none = {0, NULL};
    DWORD flags = 0;
    if (WSARecv(op->sock_, &none, 1, NULL, &flags, &mux__iop_of(op)->ov, NULL) != 0 &&
        WSAGetLastError() != WSA_IO_PENDING)
        return mux__wsa_errno();
    return 0;
}

static int mux__iocp_pipe_write(struct mux__op *op);

static int mux__iocp_send(struct mux__op *op)
{
    if (op->flags_ & MUX__OPF_PIPE)
        return mux__iocp_pipe_write(op);
    WSABUF v[MUX__SENDV_MAX];
    const mux_buf_t *b = op->kind_ == MUX__OP_SEND ? &op->a_.buf : op->a_.bufs.v;
    uint32_t n = op->kind_ == MUX__OP_SEND ? 1 : op->a_.bufs.n, k = 0;
    size_t room = MUX__RES_MAX;
    for (uint32_t i = 0; i < n && k < MUX__SENDV_MAX && room > 0; i++) {
        if (b[i].len == 0)
            continue;
        v[k].buf = b[i].base;
        v[k].len = b[i].len < room ? b[i].len : (ULONG)room;
        room -= v[k++].len;
    }
    if (WSASend(op->sock_, v, k, NULL, 0, &mux__iop_of(op)->ov, NULL) != 0 &&
        WSAGetLastError() != WSA_IO_PENDING)
        return mux__wsa_errno();
    return 0;
}

/* A datagram receive's readiness: a zero-byte WSARecvFrom that only peeks, so that it
 * completes (with STATUS_BUFFER_OVERFLOW) once a datagram is there and leaves the datagram
 * where it is, as libuv does. When one is there already, the call says WSAEMSGSIZE at once;
 * that is a warning, not a failure, so its completion is queued to the port all the same and
 * nothing is posted for it. */
static int mux__iocp_zero_recvfrom(struct mux__op *op)
{
    WSABUF none = {0, NULL};
    DWORD flags = MSG_PEEK;
    if (WSARecvFrom(op->sock_, &none, 1, NULL, &flags, NULL, NULL, &mux__iop_of(op)->ov, NULL) !=
        0) {
        int e = WSAGetLastError();
        if (e != WSA_IO_PENDING && e != WSAEMSGSIZE)
            return mux__win_errno((DWORD)e);
    }
    return 0;
}

/* Up to a_.dgram->n datagrams with non-blocking calls, into the caller's buffers or into
 * buffers of the pool taken for them. Returns the count, -EAGAIN, or -errno; *more says
 * that every message was filled (more may be waiting). */
static int mux__iocp_dgram_read(struct mux__op *op, unsigned *more)
{
    struct mux__dbatch *b = op->a_.dgram;
    uint32_t idx[MUX_UDP_BATCH];
    unsigned n = b->n;
    if (b->pool) {
        size_t size = mux__bufpool_size(b->pool);
        for (n = 0; n < b->n && n < MUX_UDP_BATCH; n++) {
            if ((idx[n] = mux__bufpool_lend(b->pool)) == MUX__POOL_NONE)
                break;
            b->m[n].pbuf = mux__bufpool_addr(b->pool, idx[n]);
            b->m[n].buf = b->m[n].pbuf + b->headroom;
            b->m[n].cap = (uint32_t)(size - b->headroom);
        }
        if (n == 0)
            return -ENOBUFS;
    }
    int r = mux__sock_recvmmsg(op->sock_, b->m, n, 0);
    if (b->pool) {
        for (unsigned i = n; i-- > (r > 0 ? (unsigned)r : 0);)
            mux__bufpool_unlend(b->pool, idx[i]); /* first in line again, in their order */
        for (int i = 0; i < r; i++)
            mux__bufpool_taken(b->pool, idx[i]);
    }
    *more = r > 0 && (unsigned)r == n ? MUX__OPC_FILLED : 0;
    return r;
}

/* One overlapped WSASendTo of the datagram m[k] of a batch send (k in the private space). */
static int mux__iocp_dgram_send(struct mux__op *op)
{
    struct mux__iop *io = mux__iop_of(op);
    const struct mux__dmsg *d = &op->a_.dgram->m[io->u.iter];
    memset(&io->ov, 0, sizeof io->ov);
    if (WSASendTo(op->sock_, (WSABUF *)(uintptr_t)d->bufs, d->nbufs, NULL, 0, d->addr,
                  d->addr ? (int)d->addrlen : 0, &io->ov, NULL) != 0 &&
        WSAGetLastError() != WSA_IO_PENDING)
        return mux__wsa_errno();
    return 0;
}

/* A datagram of a batch send went (res >= 0) or failed. The rest go with non-blocking calls
 * while the socket takes them, and the next one the socket refuses waits in the kernel
 * (overlapped). Returns 1 while the batch goes on; 0 with *res set to how many went, or to
 * the first datagram's error. */
static int mux__iocp_dgram_sent(struct mux__loop *loop, struct mux__op *op, int *res)
{
    struct mux__iop *io = mux__iop_of(op);
    struct mux__dbatch *b = op->a_.dgram;
    uint32_t k = io->u.iter;
    if (*res < 0) {
        *res = k > 0 ? (int)k : *res; /* a later datagram's error comes again with the next */
        return 0;
    }
    k++;
    if (k < b->n) {
        int r = mux__sock_sendmmsg(op->sock_, b->m + k, b->n - k);
        if (r > 0)
            k += (uint32_t)r;
        if (k < b->n && (r >= 0 || r == -EAGAIN)) { /* full: the next one waits in the kernel */
            io->u.iter = k;
            int err = mux__iocp_dgram_send(op);
            if (err != 0)
                mux__iocp_post(loop, op, err);
            return 1;
        }
    }
    *res = (int)k;
    return 0;
}

static int mux__iocp_ext(SOCKET s, GUID guid, void *fn, size_t size)
{
    DWORD got = 0;
    if (WSAIoctl(s, SIO_GET_EXTENSION_FUNCTION_POINTER, &guid, sizeof guid, fn, (DWORD)size, &got,
                 NULL, NULL) != 0)
        return mux__wsa_errno();
    return 0;
}

static int mux__iocp_accept(struct mux__iocp *st, struct mux__op *op)
{
    struct mux__iop *io = mux__iop_of(op);
    if (!st->acceptex) {
        GUID g = WSAID_ACCEPTEX;
        int err = mux__iocp_ext(op->sock_, g, &st->acceptex, sizeof st->acceptex);
        if (err != 0)
            return err;
    }
    struct sockaddr_storage ss;
    int slen = sizeof ss;
    if (getsockname(op->sock_, (struct sockaddr *)&ss, &slen) != 0)
        return mux__wsa_errno();
    struct mux__actx *a = st->actx_free;
    if (a)
        st->actx_free = a->next;
    else if (!(a = malloc(sizeof *a)))
        return -ENOMEM;
    a->as = WSASocketW(ss.ss_family, SOCK_STREAM, 0, NULL, 0,
                       WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
    int err = a->as == INVALID_SOCKET ? mux__wsa_errno() : 0;
    DWORD alen = sizeof(struct sockaddr_storage) + 16;
    if (!err && !st->acceptex(op->sock_, a->as, a->addrs, 0, alen, alen, NULL, &io->ov) &&
        WSAGetLastError() != ERROR_IO_PENDING)
        err = mux__wsa_errno();
    if (err != 0) {
        if (a->as != INVALID_SOCKET)
            closesocket(a->as);
        a->next = st->actx_free;
        st->actx_free = a;
        return err;
    }
    io->u.actx = a;
    return 0;
}

static int mux__iocp_connect(struct mux__iocp *st, struct mux__op *op)
{
    const struct sockaddr *sa = op->a_.addr.sa;
    if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
        return -EAFNOSUPPORT; /* ConnectEx serves TCP only */
    if (!st->connectex) {
        GUID g = WSAID_CONNECTEX;
        int err = mux__iocp_ext(op->sock_, g, &st->connectex, sizeof st->connectex);
        if (err != 0)
            return err;
    }
    struct sockaddr_storage any;
    memset(&any, 0, sizeof any);
    any.ss_family = sa->sa_family;
    if (bind(op->sock_, (struct sockaddr *)&any,
             sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) !=
        0)
        return mux__wsa_errno();
    /* The address is copied during the call: the caller's may go at once. */
    if (!st->connectex(op->sock_, sa, (int)op->a_.addr.len, NULL, 0, NULL, &mux__iop_of(op)->ov) &&
        WSAGetLastError() != ERROR_IO_PENDING)
        return mux__wsa_errno();
    return 0;
}

/* A file's bytes, by TransmitFile, from the offset in the OVERLAPPED. */
static int mux__iocp_transmit(struct mux__iocp *st, struct mux__op *op)
{
    HANDLE file = (HANDLE)(intptr_t)op->a_.file.fd;
    if (!file)
        return -EBADF; /* mux__file_os found no file: TransmitFile would send none, and say so */
    if (!st->transmitfile) {
        GUID g = WSAID_TRANSMITFILE;
        int err = mux__iocp_ext(op->sock_, g, &st->transmitfile, sizeof st->transmitfile);
        if (err != 0)
            return err;
    }
    OVERLAPPED *ov = &mux__iop_of(op)->ov;
    ov->Offset = (DWORD)op->a_.file.off;
    ov->OffsetHigh = (DWORD)(op->a_.file.off >> 32);
    DWORD len = op->a_.file.len < MUX__RES_MAX ? op->a_.file.len : MUX__RES_MAX;
    if (!st->transmitfile(op->sock_, file, len, 0, ov, NULL, 0) &&
        WSAGetLastError() != ERROR_IO_PENDING)
        return mux__wsa_errno();
    return 0;
}

/* Whether a receive tries to read inside its submit: its owner expects bytes, and the budget
 * of such completions in this loop iteration is not spent. A sender faster than the loop would
 * keep a reader completing inside its submits forever: past the budget, it waits for the port
 * as the emulation waits for readiness (ready_ops.c). `iter`: the budget's stamp, as the
 * operation's private space had it before the submit cleared it. */
static inline int mux__iocp_read_now(struct mux__loop *loop, struct mux__op *op, uint32_t iter)
{
    if (iter != loop->iter)
        op->streak_ = 0;
    mux__iop_of(op)->u.iter = loop->iter;
    if ((op->flags_ & MUX__OPF_POLL_FIRST) || op->streak_ >= MUX__READ_BUDGET)
        return 0;
    op->streak_++;
    return 1;
}

/* ---- pipes (MUX__OPF_PIPE) ---------------------------------------------------------- */

/* The event a pipe's read that completes in the call is made with (mux__pipe_read), made at the
 * loop's first: NULL when it cannot be. */
static HANDLE mux__iocp_pipe_event(struct mux__iocp *st)
{
    if (!st->pipe_event)
        st->pipe_event = CreateEventW(NULL, TRUE, FALSE, NULL);
    return st->pipe_event;
}

/* One read that does not wait, from the operation's socket or pipe: bytes, 0 at the end,
 * -EAGAIN, or -errno. */
static inline ssize_t mux__iocp_recv(struct mux__iocp *st, struct mux__op *op, char *buf,
                                     size_t len)
{
    if (!(op->flags_ & MUX__OPF_PIPE))
        return mux__sock_recv(op->sock_, buf, len);
    HANDLE ev = mux__iocp_pipe_event(st);
    return ev ? mux__pipe_read((HANDLE)op->sock_, buf, len, ev) : mux__win_errno(GetLastError());
}

/* A pipe's readiness: a zero-byte overlapped ReadFile, which completes once bytes are there or
 * the other end has closed (ERROR_BROKEN_PIPE), lending the kernel no buffer meanwhile: what
 * the zero-byte WSARecv is for a socket, and what libuv waits on a pipe with. */
static int mux__iocp_pipe_wait(struct mux__op *op)
{
    static char none;
    OVERLAPPED *ov = &mux__iop_of(op)->ov;
    memset(ov, 0, sizeof *ov);
    if (!ReadFile((HANDLE)op->sock_, &none, 0, NULL, ov) && GetLastError() != ERROR_IO_PENDING)
        return mux__pipe_errno(GetLastError());
    return 0; /* done in the call or not, the completion comes through the port */
}

/* A send on a pipe: one overlapped WriteFile of the first buffer that has bytes (WriteFile
 * takes one; WriteFileGather wants whole pages), which completes once the pipe took all of
 * it. The stream sends the rest after it, as after a short send. 0 or -errno. */
static int mux__iocp_pipe_write(struct mux__op *op)
{
    const mux_buf_t *b = op->kind_ == MUX__OP_SEND ? &op->a_.buf : op->a_.bufs.v;
    uint32_t n = op->kind_ == MUX__OP_SEND ? 1 : op->a_.bufs.n, i = 0;
    while (i + 1 < n && b[i].len == 0)
        i++; /* none with bytes: the last, empty, a write of nothing that completes at once */
    DWORD len = b[i].len < MUX__RES_MAX ? (DWORD)b[i].len : (DWORD)MUX__RES_MAX;
    if (!WriteFile((HANDLE)op->sock_, b[i].base, len, NULL, &mux__iop_of(op)->ov) &&
        GetLastError() != ERROR_IO_PENDING)
        return mux__pipe_errno(GetLastError());
    return 0;
}

/* A pipe operation's result, before its kind's handling in mux__iocp_op_done. A receive whose
 * pipe's other end closed (-EPIPE) is readable: the read that follows finds the end of the
 * stream after the bytes still there. One that completes after its owner closed the handle
 * (sock_ invalid) reads nothing: -ECANCELED. */
static int mux__iocp_pipe_done(struct mux__op *op, int res)
{
    if (op->kind_ != MUX__OP_RECV && op->kind_ != MUX__OP_RECV_POOL)
        return res;
    if (op->sock_ == MUX_OS_SOCK_INVALID)
        return res >= 0 || res == -EPIPE ? -ECANCELED : res;
    return res == -EPIPE ? 0 : res;
}

static void mux__iocp_submit(struct mux__loop *loop, struct mux__op *op)
{
    struct mux__iocp *st = loop->bdata;
    struct mux__iop *io = mux__iop_of(op);
    uint32_t iter = io->u.iter; /* a receive's: the budget's stamp */
    memset(io, 0, sizeof *io);
    int err = 0;
    if (mux__unlikely(op->flags_ & MUX__OPF_PIPE) && op->kind_ > MUX__OP_SENDV) {
        mux__iocp_post(loop, op, -ENOTSUP); /* a pipe runs receives and sends only */
        return;
    }
    switch (op->kind_) {
    case MUX__OP_RECV:
        if (mux__iocp_read_now(loop, op, iter)) {
            /* The owner expects bytes: read them now, the one completion inside a submit. */
            size_t len = op->a_.buf.len < MUX__RES_MAX ? op->a_.buf.len : MUX__RES_MAX;
            ssize_t n = mux__iocp_recv(st, op, op->a_.buf.base, len);
            if (n != -EAGAIN) {
                unsigned more = n > 0 && (size_t)n == len ? MUX__OPC_FILLED : 0;
                mux__op_complete(op, (int)n, NULL, more);
                return;
            }
        }
        err = mux__iocp_zero_recv(op);
        break;
    case MUX__OP_RECV_POOL:
        /* Counted whatever the receive does: its completion, or its failure posted below,
         * comes back through mux__iocp_op_done, which uncounts it. */
        ((struct mux__ipool *)mux__bufpool_kring(op->a_.pool))->armed++;
        err = mux__iocp_zero_recv(op);
        break;
    case MUX__OP_SEND:
    case MUX__OP_SENDV:
        err = mux__iocp_send(op);
        break;
    case MUX__OP_ACCEPT:
        err = mux__iocp_accept(st, op);
        break;
    case MUX__OP_CONNECT:
        err = mux__iocp_connect(st, op);
        break;
    case MUX__OP_SENDFILE:
        err = mux__iocp_transmit(st, op);
        break;
    case MUX__OP_DGRAM_RECV:
        /* As a stream's receive (above), with the pool's buffers taken only once datagrams
         * are there. Counted in the pool like a pool receive (MUX__OP_RECV_POOL). */
        if (op->a_.dgram->pool)
            ((struct mux__ipool *)mux__bufpool_kring(op->a_.dgram->pool))->armed++;
        if (mux__iocp_read_now(loop, op, iter)) {
            unsigned more = 0;
            int r = mux__iocp_dgram_read(op, &more);
            if (r != -EAGAIN) {
                if (op->a_.dgram->pool)
                    ((struct mux__ipool *)mux__bufpool_kring(op->a_.dgram->pool))->armed--;
                mux__op_complete(op, r, NULL, more);
                return;
            }
        }
        err = mux__iocp_zero_recvfrom(op);
        break;
    case MUX__OP_DGRAM_SEND:
        /* The first datagram overlapped; the rest follow from its completion. */
        if (op->a_.dgram->n == 0) {
            mux__iocp_post(loop, op, 0);
            return;
        }
        err = mux__iocp_dgram_send(op);
        break;
    case MUX__OP_SHUTDOWN: /* one quick call; its completion comes through the port */
        mux__iocp_post(loop, op, mux__sock_shutdown(op->sock_));
        return;
    default:
        err = -EINVAL;
    }
    if (err != 0)
        mux__iocp_post(loop, op, err);
}

static void mux__iocp_cancel(struct mux__loop *loop, struct mux__op *op)
{
    (void)loop;
    /* Not found: it completed, or failed at once; its completion is on its way. */
    CancelIoEx((HANDLE)op->sock_, &mux__iop_of(op)->ov);
}

static int mux__iocp_pool_attach(struct mux__loop *loop, mux_bufpool_t *pool)
{
    struct mux__iocp *st = loop->bdata;
    struct mux__ipool *ip = calloc(1, sizeof *ip);
    if (!ip)
        return -ENOMEM;
    ip->pool = pool;
    ip->next = st->pools;
    st->pools = ip;
    /* Bound, so that no other loop's reader takes its buffers (they get -ENOBUFS, as from a
     * pool in io_uring's ring), but with no kernel ring: this loop's receives take a buffer
     * only once bytes are there. */
    mux__bufpool_bind(pool, loop, ip, NULL);
    return 0;
}

static int mux__iocp_pool_detach(struct mux__loop *loop, mux_bufpool_t *pool)
{
    struct mux__iocp *st = loop->bdata;
    struct mux__ipool **pp = &st->pools, *ip;
    while ((ip = *pp) != NULL && ip->pool != pool)
        pp = &ip->next;
    if (!ip)
        return 0;
    if (ip->armed)
        return -EBUSY;
    *pp = ip->next;
    free(ip);
    mux__bufpool_unbind(pool);
    return 0;
}

/* A zero-byte receive for a pool completed: a buffer, and the bytes into it. Returns 1 when
 * the operation goes on (no bytes after all: another zero-byte receive is in flight). */
static int mux__iocp_pool_read(struct mux__iocp *st, struct mux__op *op, int *res, char **buf)
{
    uint32_t i = mux__bufpool_lend(op->a_.pool);
    if (i == MUX__POOL_NONE) {
        *res = -ENOBUFS;
        return 0;
    }
    size_t len = mux__bufpool_size(op->a_.pool);
    ssize_t n = mux__iocp_recv(st, op, mux__bufpool_addr(op->a_.pool, i),
                               len < MUX__RES_MAX ? len : MUX__RES_MAX);
    if (n > 0) {
        *res = (int)n;
        *buf = mux__bufpool_taken(op->a_.pool, i);
        return 0;
    }
    mux__bufpool_unlend(op->a_.pool, i); /* first in line again: nothing was read into it */
    if (n == -EAGAIN) { /* woken with nothing to read: wait again */
        int err = mux__iocp_zero_recv(op);
        if (err == 0)
            return 1;
        n = err;
    }
    *res = (int)n;
    return 0;
}

/* Why a file send sent nothing: one byte is read where it began. The end of the file is
 * -ENODATA; a file that cannot be read gives the read's error (-EBADF for one not open for
 * reading, as POSIX says it; Wine's TransmitFile sends nothing from one and says no more). */
static int mux__iocp_sent_nothing(struct mux__op *op)
{
    char c;
    DWORD got = 0;
    OVERLAPPED at;
    memset(&at, 0, sizeof at);
    at.Offset = (DWORD)op->a_.file.off;
    at.OffsetHigh = (DWORD)(op->a_.file.off >> 32);
    HANDLE h = (HANDLE)(intptr_t)op->a_.file.fd;
    if (ReadFile(h, &c, 1, &got, &at))
        return got == 0 ? -ENODATA : -EIO;
    DWORD e = GetLastError();
    if (e == ERROR_HANDLE_EOF)
        return -ENODATA;
    return e == ERROR_ACCESS_DENIED ? -EBADF : mux__win_errno(e);
}

/* An operation's completion: `res` is the byte count or a negative errno. */
static void mux__iocp_op_done(struct mux__loop *loop, struct mux__op *op, int res)
{
    struct mux__iocp *st = loop->bdata;
    struct mux__iop *io = mux__iop_of(op);
    char *buf = NULL;
    unsigned flags = 0;
    if (mux__unlikely(op->flags_ & MUX__OPF_PIPE))
        res = mux__iocp_pipe_done(op, res);
    switch (op->kind_) {
    case MUX__OP_RECV:
        if (res >= 0) { /* readable, or at the end of the stream: the next submit reads */
            res = -EAGAIN;
            flags = MUX__OPC_NONEMPTY;
        }
        break;
    case MUX__OP_RECV_POOL: {
        if (res >= 0 && mux__iocp_pool_read(st, op, &res, &buf))
            return; /* nothing to read after all: waiting again */
        ((struct mux__ipool *)mux__bufpool_kring(op->a_.pool))->armed--;
        if (buf && (size_t)res == mux__bufpool_size(op->a_.pool))
            flags = MUX__OPC_FILLED;
        break;
    }
    case MUX__OP_ACCEPT: {
        struct mux__actx *a = io->u.actx;
        io->u.actx = NULL;
        if (res >= 0) {
            SOCKET ls = op->sock_;
            u_long on = 1;
            if (setsockopt(a->as, SOL_SOCKET, SO_UPDATE_ACCEPT_CONTEXT, (const char *)&ls,
                           sizeof ls) != 0 ||
                ioctlsocket(a->as, FIONBIO, &on) != 0)
                res = mux__wsa_errno();
            else
                res = (int)a->as;
        }
        if (res < 0 && a) {
            closesocket(a->as);
            if (res == -ECONNRESET)
                res = -ECONNABORTED; /* the peer gave up while in the backlog */
        }
        if (a) {
            a->next = st->actx_free;
            st->actx_free = a;
        }
        break;
    }
    case MUX__OP_CONNECT:
        if (res >= 0 && setsockopt(op->sock_, SOL_SOCKET, SO_UPDATE_CONNECT_CONTEXT, NULL, 0) != 0)
            res = mux__wsa_errno();
        else if (res > 0)
            res = 0;
        break;
    case MUX__OP_DGRAM_RECV:
        if (res >= 0 || res == -EMSGSIZE) { /* a datagram is there (the peek said so) */
            if (!op->a_.dgram->pool) { /* the next submit reads (backend.h, "Buffers") */
                res = -EAGAIN;
                flags = MUX__OPC_NONEMPTY;
                break;
            }
            res = mux__iocp_dgram_read(op, &flags);
            if (res == -EAGAIN) { /* taken by someone else meanwhile: wait again */
                int err = mux__iocp_zero_recvfrom(op);
                if (err == 0)
                    return;
                res = err;
            }
        }
        if (op->a_.dgram->pool)
            ((struct mux__ipool *)mux__bufpool_kring(op->a_.dgram->pool))->armed--;
        break;
    case MUX__OP_DGRAM_SEND:
        if (op->a_.dgram->n > 0 && mux__iocp_dgram_sent(loop, op, &res))
            return; /* the next datagram is in the kernel */
        break;
    case MUX__OP_SENDFILE:
        if (res == 0 && op->a_.file.len > 0)
            res = mux__iocp_sent_nothing(op);
        else if (res == -EACCES)
            res = -EBADF; /* a file not open for reading, as POSIX says it */
        break;
    default:
        break;
    }
    mux__op_complete(op, res, buf, flags);
}

/* ---- the wait ------------------------------------------------------------------------ */

static int mux__iocp_status(const struct mux__op *op, const OVERLAPPED *ov, DWORD bytes)
{
    NTSTATUS s = (NTSTATUS)ov->Internal;
    if (s == (NTSTATUS)0x80000005L) /* STATUS_BUFFER_OVERFLOW: a datagram longer than room */
        return -EMSGSIZE;
    if ((LONG)s >= 0) /* success, or a warning with a count */
        return bytes > MUX__RES_MAX ? (int)MUX__RES_MAX : (int)bytes;
    DWORD e = RtlNtStatusToDosError(s);
    return op->flags_ & MUX__OPF_PIPE ? mux__pipe_errno(e) : mux__win_errno(e);
}

static VOID CALLBACK mux__iocp_timer_apc(LPVOID arg, DWORD low, DWORD high)
{
    (void)arg, (void)low, (void)high; /* it only ends the alertable wait */
}

/* One GetQueuedCompletionStatusEx and its completions, for `timeout_ns` (-1: no limit).
 * Returns how many reached an owner (a watcher's report, an operation's completion, a
 * wake-up), or -errno; *timed_out is set when the port had nothing in time. */
static int mux__iocp_wait_once(struct mux__loop *loop, int64_t timeout_ns, uint64_t deadline,
                               int *timed_out)
{
    struct mux__iocp *st = loop->bdata;
    if (st->ndirty)
        mux__apoll_flush(loop);
    DWORD ms = INFINITE;
    BOOL alertable = FALSE;
    if (timeout_ns > 0 && st->timer) {
        LARGE_INTEGER due; /* relative, in 100 ns steps, rounded up */
        due.QuadPart = -(timeout_ns / 100 + (timeout_ns % 100 != 0));
        alertable = SetWaitableTimer(st->timer, &due, 0, mux__iocp_timer_apc, NULL, FALSE);
    }
    if (timeout_ns >= 0 && !alertable) {
        int64_t m = timeout_ns / 1000000 + (timeout_ns % 1000000 != 0); /* up: never early */
        ms = m >= INFINITE ? INFINITE - 1 : (DWORD)m;
    }
    ULONG n = 0;
    BOOL got = GetQueuedCompletionStatusEx(st->port, st->entries, MUX__ENTRIES, &n, ms, alertable);
    DWORD e = got ? 0 : GetLastError();
    if (alertable && e != WAIT_IO_COMPLETION)
        CancelWaitableTimer(st->timer);
    if (!got) {
        if (e == WAIT_IO_COMPLETION) { /* the timer's APC, or an earlier one's: the clock says */
            *timed_out = mux__mono_ns() >= deadline;
            return 0;
        }
        *timed_out = 1;
        return e == WAIT_TIMEOUT ? 0 : mux__win_errno(e);
    }
    int delivered = 0;
    for (ULONG i = 0; i < n; i++) {
        OVERLAPPED_ENTRY *en = &st->entries[i];
        switch (en->lpCompletionKey) {
        case MUX__KEY_WAKE:
            loop->woken = 1;
            delivered++;
            break;
        case MUX__KEY_AFD:
            delivered += mux__apoll_done(loop, (struct mux__apoll *)(void *)en->lpOverlapped);
            break;
        case MUX__KEY_LOCAL:
            mux__iocp_op_done(loop, mux__op_of_ov(en->lpOverlapped),
                              (int)(intptr_t)en->lpOverlapped->Internal);
            delivered++;
            break;
        case MUX__KEY_SOCK: {
            if (!en->lpOverlapped)
                break; /* I/O of the program's own on a handle of ours, without an OVERLAPPED */
            struct mux__op *op = mux__op_of_ov(en->lpOverlapped);
            DWORD bytes = en->dwNumberOfBytesTransferred;
            mux__iocp_op_done(loop, op, mux__iocp_status(op, en->lpOverlapped, bytes));
            delivered++;
            break;
        }
        default:
            break;
        }
    }
    return delivered;
}

static int mux__iocp_wait(struct mux__loop *loop, int64_t timeout_ns)
{
    uint64_t deadline = 0;
    if (timeout_ns > 0) /* a timeout comes from the timers, computed from a clock read just now */
        deadline = mux__now(loop) + (uint64_t)timeout_ns;
    for (;;) {
        int timed_out = 0, r = mux__iocp_wait_once(loop, timeout_ns, deadline, &timed_out);
        /* Only poll requests that a change of events cancelled came back: they are sent again
         * and the wait goes on, for what is left of its time. */
        if (r != 0 || timed_out || timeout_ns == 0)
            return r < 0 ? r : 0;
        if (timeout_ns > 0) {
            uint64_t now = mux__mono_ns();
            if (now >= deadline)
                return 0;
            timeout_ns = (int64_t)(deadline - now);
        }
    }
}

const struct mux__backend mux__backend_iocp = {
    .name = "iocp",
    .caps = MUX__CAP(MUX__OP_RECV) | MUX__CAP(MUX__OP_RECV_POOL) | MUX__CAP(MUX__OP_SEND) |
            MUX__CAP(MUX__OP_SENDV) | MUX__CAP(MUX__OP_ACCEPT) | MUX__CAP(MUX__OP_CONNECT) |
            MUX__CAP(MUX__OP_SHUTDOWN) | MUX__CAP(MUX__OP_SENDFILE) |
            MUX__CAP(MUX__OP_DGRAM_SEND) | MUX__CAP(MUX__OP_DGRAM_RECV) | MUX__CAP_DGRAM_BUF |
            MUX__CAP_PIPE,
    .fd_limit = INT_MAX,
    .open = mux__iocp_open,
    .close = mux__iocp_close,
    .fork = mux__iocp_fork,
    .change = mux__iocp_change,
    .adopt = mux__iocp_adopt,
    .wait = mux__iocp_wait,
    .wake = mux__iocp_wake,
    .submit = mux__iocp_submit,
    .cancel = mux__iocp_cancel,
    .pool_attach = mux__iocp_pool_attach,
    .pool_detach = mux__iocp_pool_detach,
};
