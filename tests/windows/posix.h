/* SPDX-License-Identifier: MIT */
/* The few POSIX calls the test cases make, on Windows, for the cross-built suite that runs
 * under Wine (tests/windows/tests.cmake force-includes this header into every test source,
 * and include/ beside it stands in for the POSIX headers it replaces).
 *
 * Sockets are the only descriptors the library watches there, so the cases' socketpairs are
 * connected pairs of loopback TCP sockets (Windows has no socketpair), and read, write and
 * close on a socket go to recv, send and closesocket, with errno set from the Winsock error.
 * What has no counterpart makes the case skip with the reason (harness_skip): pipes, fork,
 * descriptor limits, dup, mmap. Test code only: the library itself speaks Winsock. */
#ifndef IOMUX_TEST_WIN_POSIX_H
#define IOMUX_TEST_WIN_POSIX_H

#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <afunix.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <direct.h>
#include <io.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

_Noreturn void harness_skip(const char *reason);

#define SOCK_NONBLOCK 0x4000
#define SOCK_CLOEXEC 0x8000
#define MSG_NOSIGNAL 0
#define MSG_DONTWAIT 0x40000000
#define SHUT_RD SD_RECEIVE
#define SHUT_WR SD_SEND
#define SHUT_RDWR SD_BOTH
#define O_NONBLOCK 0x4000
#define O_CLOEXEC 0
#define F_GETFL 3
#define F_SETFL 4
#define F_GETFD 1
#define F_SETFD 2
#define FD_CLOEXEC 1
/* Windows delivers no user signals: the cases' SIGUSR1 and SIGUSR2 are console events there,
 * Ctrl-Break and Ctrl-C, which signal watchers take as SIGBREAK and SIGINT (win_raise). */
#define SIGUSR1 SIGBREAK
#define SIGUSR2 SIGINT
#define SIGPIPE 13
#define SIGCHLD 17
#define SIGKILL 9
#define SIGALRM 14
#define SIGHUP 1
#define SIGQUIT 3
#define SIGSTOP 19
#define RLIMIT_NOFILE 7
#define RLIM_INFINITY (~0ull)
#define WNOHANG 1
#define WIFEXITED(s) 1
#define WEXITSTATUS(s) (s)
#define WIFSIGNALED(s) 0
#define WTERMSIG(s) 0
#define PROT_READ 1
#define MAP_PRIVATE 2
#define MAP_ANONYMOUS 0x20
#define MAP_NORESERVE 0x4000
#define MAP_FAILED ((void *)-1)
#define _SC_PAGESIZE 30
#define IOV_MAX 1024

typedef unsigned long long rlim_t;
typedef ADDRESS_FAMILY sa_family_t;
struct rlimit {
    rlim_t rlim_cur, rlim_max;
};
struct iovec {
    void *iov_base;
    size_t iov_len;
};
typedef int sigset_t_test;

static inline int win_sock_errno(void)
{
    switch (WSAGetLastError()) {
    case WSAEWOULDBLOCK:
        return EAGAIN;
    case WSAECONNRESET:
        return ECONNRESET;
    case WSAENOTSOCK:
        return EBADF;
    case WSAEINTR:
        return EINTR;
    case WSAECONNREFUSED:
        return ECONNREFUSED;
    case WSAENOTCONN:
        return ENOTCONN;
    case WSAESHUTDOWN:
        return EPIPE;
    case WSAEINVAL:
        return EINVAL;
    default:
        return EIO;
    }
}

static inline int win_is_socket(int fd)
{
    int type, len = sizeof type;
    return getsockopt((SOCKET)(unsigned)fd, SOL_SOCKET, SO_TYPE, (char *)&type, &len) == 0;
}

static inline ssize_t win_read(int fd, void *buf, size_t len)
{
    if (!win_is_socket(fd))
        return _read(fd, buf, (unsigned)len);
    int n = recv((SOCKET)(unsigned)fd, buf, (int)len, 0);
    if (n < 0)
        errno = win_sock_errno();
    return n;
}

static inline ssize_t win_write(int fd, const void *buf, size_t len)
{
    if (!win_is_socket(fd))
        return _write(fd, buf, (unsigned)len);
    int n = send((SOCKET)(unsigned)fd, buf, (int)len, 0);
    if (n < 0)
        errno = win_sock_errno();
    return n;
}

/* recv, with MSG_DONTWAIT (which makes the socket non-blocking for good) and errno. */
static inline ssize_t win_recv(SOCKET s, void *buf, size_t len, int flags)
{
    if (flags & MSG_DONTWAIT) {
        u_long on = 1;
        ioctlsocket(s, FIONBIO, &on);
    }
    int n = recv(s, buf, (int)len, flags & ~MSG_DONTWAIT);
    if (n < 0)
        errno = win_sock_errno();
    return n;
}

static inline int win_close(int fd)
{
    if (closesocket((SOCKET)(unsigned)fd) == 0)
        return 0;
    if (WSAGetLastError() == WSAENOTSOCK)
        return _close(fd);
    errno = win_sock_errno();
    return -1;
}

/* fcntl on a socket: F_GETFD says FD_CLOEXEC where the handle is not inherited (what
 * close-on-exec is on Windows); F_GETFL cannot say whether a socket is non-blocking (Windows
 * has no query for FIONBIO), so it is 0; F_SETFL sets FIONBIO. */
static inline int win_fcntl(int fd, int cmd, ...)
{
    if (cmd == F_GETFD) {
        DWORD f;
        if (!win_is_socket(fd) || !GetHandleInformation((HANDLE)(uintptr_t)(unsigned)fd, &f)) {
            errno = EBADF;
            return -1;
        }
        return f & HANDLE_FLAG_INHERIT ? 0 : FD_CLOEXEC;
    }
    if (cmd == F_GETFL || cmd == F_SETFD)
        return win_is_socket(fd) ? 0 : -1;
    va_list ap;
    va_start(ap, cmd);
    int fl = va_arg(ap, int);
    va_end(ap);
    u_long on = (fl & O_NONBLOCK) != 0;
    return ioctlsocket((SOCKET)(unsigned)fd, FIONBIO, &on) == 0 ? 0 : -1;
}

/* socket(), taking SOCK_NONBLOCK and SOCK_CLOEXEC in `type` as Linux does. */
static inline int win_socket(int domain, int type, int proto)
{
    SOCKET s = socket(domain, type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC), proto);
    if (s == INVALID_SOCKET) {
        errno = win_sock_errno();
        return -1;
    }
    if (type & SOCK_NONBLOCK) {
        u_long on = 1;
        ioctlsocket(s, FIONBIO, &on);
    }
    return (int)s;
}

/* connect(), with errno as POSIX sets it (EINPROGRESS while a non-blocking one goes on). */
static inline int win_connect(SOCKET s, const struct sockaddr *a, int len)
{
    if (connect(s, a, len) == 0)
        return 0;
    errno = WSAGetLastError() == WSAEWOULDBLOCK ? EINPROGRESS : win_sock_errno();
    return -1;
}

/* A connected pair of loopback TCP sockets, buffering about what a Linux socketpair does
 * (cases fill them). */
static inline int win_socketpair_locked(int domain, int type, int proto, int sv[2])
{
    (void)domain, (void)proto;
    /* One listener for the process's pairs (the cases that make thousands go faster), used
     * under the lock below: cases make pairs from several threads. */
    static SOCKET l = INVALID_SOCKET;
    static struct sockaddr_in addr;
    SOCKET a = INVALID_SOCKET, c = INVALID_SOCKET;
    if (l == INVALID_SOCKET) {
        int alen = sizeof addr;
        memset(&addr, 0, sizeof addr);
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        l = socket(AF_INET, SOCK_STREAM, 0);
        if (l == INVALID_SOCKET || bind(l, (struct sockaddr *)&addr, sizeof addr) != 0 ||
            getsockname(l, (struct sockaddr *)&addr, &alen) != 0 || listen(l, 16) != 0)
            goto fail;
    }
    c = socket(AF_INET, SOCK_STREAM, 0);
    if (c == INVALID_SOCKET || connect(c, (struct sockaddr *)&addr, sizeof addr) != 0)
        goto fail;
    a = accept(l, NULL, NULL);
    if (a == INVALID_SOCKET)
        goto fail;
    DWORD on = 1, buf = 128 * 1024;
    SOCKET ends[2] = {a, c};
    for (int i = 0; i < 2; i++) {
        setsockopt(ends[i], IPPROTO_TCP, TCP_NODELAY, (const char *)&on, sizeof on);
        setsockopt(ends[i], SOL_SOCKET, SO_SNDBUF, (const char *)&buf, sizeof buf);
        setsockopt(ends[i], SOL_SOCKET, SO_RCVBUF, (const char *)&buf, sizeof buf);
    }
    if (type & SOCK_NONBLOCK) {
        u_long nb = 1;
        ioctlsocket(a, FIONBIO, &nb);
        ioctlsocket(c, FIONBIO, &nb);
    }
    sv[0] = (int)c;
    sv[1] = (int)a;
    return 0;
fail:
    errno = win_sock_errno();
    if (c != INVALID_SOCKET)
        closesocket(c);
    return -1;
}

static inline int win_socketpair(int domain, int type, int proto, int sv[2])
{
    static SRWLOCK lock = SRWLOCK_INIT;
    AcquireSRWLockExclusive(&lock);
    int r = win_socketpair_locked(domain, type, proto, sv);
    ReleaseSRWLockExclusive(&lock);
    return r;
}

/* mkstemp: the file is made in the template's folder (made if missing), binary, and open
 * with every sharing mode, so that it can be unlinked while open, as on POSIX (the C
 * runtime's own _open does not share deletion). */
static inline int win_mkstemp(char *tmpl)
{
    _mkdir("/tmp");
    if (!_mktemp(tmpl))
        return -1;
    HANDLE h = CreateFileA(tmpl, GENERIC_READ | GENERIC_WRITE,
                           FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                           CREATE_NEW, FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE)
        return -1;
    int fd = _open_osfhandle((intptr_t)h, _O_RDWR | _O_BINARY);
    if (fd < 0)
        CloseHandle(h);
    return fd;
}

/* unlink: a file that another open does not share deletion with cannot be removed on
 * Windows; it stays (win_mkstemp's can be). */
static inline int win_unlink(const char *path)
{
    if (_unlink(path) == 0 || errno == EACCES)
        return 0;
    return -1;
}

static inline ssize_t win_pwrite(int fd, const void *buf, size_t len, long long off)
{
    if (_lseeki64(fd, off, SEEK_SET) < 0)
        return -1;
    return _write(fd, buf, (unsigned)len);
}

/* pipe: Windows' pipes cannot be watched (only sockets can), so a connected pair of sockets
 * stands in: p[0] the end read from, p[1] the end written to, non-blocking when asked. */
static inline int win_pipe(int p[2], int flags)
{
    return win_socketpair(AF_INET, SOCK_STREAM | (flags & O_NONBLOCK ? SOCK_NONBLOCK : 0), 0, p);
}

static inline int win_fork(void)
{
    harness_skip("Windows has no such thing: no fork");
}

static inline int win_rlimit(int what, struct rlimit *r)
{
    (void)what, (void)r;
    harness_skip("Windows has no such thing: no descriptor limit to lower or raise "
                 "(RLIMIT_NOFILE; handles are limited by memory alone)");
}

/* dup of a socket: a second handle for the same socket (WSADuplicateSocket), as a second
 * descriptor is one; a file's with the C runtime's _dup. */
static inline int win_dup(int fd)
{
    if (!win_is_socket(fd))
        return _dup(fd);
    WSAPROTOCOL_INFOW info;
    if (WSADuplicateSocketW((SOCKET)(unsigned)fd, GetCurrentProcessId(), &info) != 0) {
        errno = win_sock_errno();
        return -1;
    }
    SOCKET s = WSASocketW(FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, &info, 0,
                          WSA_FLAG_OVERLAPPED);
    if (s == INVALID_SOCKET) {
        errno = win_sock_errno();
        return -1;
    }
    return (int)s;
}

/* dup2: a handle's value cannot be chosen on Windows. */
static inline int win_dup2(int fd, int to)
{
    (void)fd, (void)to;
    harness_skip("Windows has no such thing: a handle's value cannot be chosen (dup2)");
}

/* mmap of anonymous zero pages, read-only, as the cases map them: VirtualAlloc's, which
 * Windows gives as zero pages too; munmap gives them back. */
static inline void *win_mmap(void *a, size_t len, int prot, int flags, int fd, long off)
{
    (void)a, (void)prot, (void)off;
    if (!(flags & MAP_ANONYMOUS) || fd != -1)
        harness_skip("Windows has no such thing: no mmap of a file descriptor");
    void *p = VirtualAlloc(NULL, len, MEM_RESERVE | MEM_COMMIT, PAGE_READONLY);
    if (!p) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return p;
}

static inline int win_munmap(void *p, size_t len)
{
    (void)len;
    return VirtualFree(p, 0, MEM_RELEASE) ? 0 : -1;
}

static inline int win_posix_memalign(void **p, size_t align, size_t len)
{
    (void)align; /* freed with free(): only malloc's own alignment can be had */
    *p = malloc(len);
    return *p ? 0 : ENOMEM;
}

/* ---- signals: the console's events ----
 *
 * A console event is raised as Windows raises one: kernelbase's CtrlRoutine, which the system
 * runs in a process on a thread of its own for each event, runs the chain of handlers
 * (SetConsoleCtrlHandler's, the last installed first, then the default, which ends the
 * process). The call waits for that thread, as raise() returns after the handler ran; except
 * for a close event, whose handler the library keeps (the process ends when it returns). */
static inline int win_console_event(DWORD type)
{
    FARPROC ctrl = GetProcAddress(GetModuleHandleA("kernelbase.dll"), "CtrlRoutine");
    if (!ctrl)
        ctrl = GetProcAddress(GetModuleHandleA("kernel32.dll"), "CtrlRoutine");
    if (!ctrl)
        harness_skip("no CtrlRoutine in kernelbase.dll or kernel32.dll to raise a console event");
    HANDLE t = CreateThread(NULL, 0, (LPTHREAD_START_ROUTINE)(void (*)(void))ctrl,
                            (void *)(ULONG_PTR)type, 0, NULL);
    if (!t)
        return -1;
    if (type != CTRL_CLOSE_EVENT)
        WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
    return 0;
}

static inline int win_raise(int sig)
{
    switch (sig) {
    case SIGINT:
        return win_console_event(CTRL_C_EVENT);
    case SIGBREAK:
        return win_console_event(CTRL_BREAK_EVENT);
    case SIGHUP:
        return win_console_event(CTRL_CLOSE_EVENT);
    default:
        return raise(sig);
    }
}

static inline int win_kill(int pid, int sig)
{
    if (pid == getpid())
        return win_raise(sig);
    harness_skip("Windows has no such thing: a signal to another process (a process ends with "
                 "an exit code, never by a signal; tests/windows/test_windows.c has the cases "
                 "for processes there)");
}

/* sigaction for the console's signals: a handler of the case's own in the chain of console
 * handlers (installed there once, before any of the library's, as a process's disposition
 * was there before any watcher), called for the events it was given. */
#ifndef _POSIX
typedef _sigset_t sigset_t;
#endif
#define SA_RESTART 0x10000000 /* nothing to restart: a console handler interrupts no call */
struct sigaction {
    void (*sa_handler)(int);
    sigset_t sa_mask;
    int sa_flags;
};
static void (*win_sig_handlers[NSIG])(int);

static inline BOOL WINAPI win_sig_chain(DWORD type)
{
    int sig = type == CTRL_C_EVENT ? SIGINT : type == CTRL_BREAK_EVENT ? SIGBREAK : SIGHUP;
    void (*h)(int) = win_sig_handlers[sig];
    if (!h || h == SIG_DFL)
        return FALSE;
    if (h != SIG_IGN)
        h(sig);
    return TRUE;
}

static inline int win_sigset(sigset_t *s, sigset_t v)
{
    *s = v;
    return 0;
}

static inline int win_sigaction(int sig, const struct sigaction *sa, struct sigaction *old)
{
    static int chained;
    if (sig != SIGINT && sig != SIGBREAK && sig != SIGHUP)
        harness_skip("Windows has no such thing: no signal but the console's events (SIGINT, "
                     "SIGBREAK, SIGHUP, SIGWINCH), and no POSIX timer to raise one");
    if (!chained && !SetConsoleCtrlHandler(win_sig_chain, TRUE))
        return -1;
    chained = 1;
    if (old) {
        memset(old, 0, sizeof *old);
        old->sa_handler = win_sig_handlers[sig] ? win_sig_handlers[sig] : SIG_DFL;
    }
    if (sa)
        win_sig_handlers[sig] = sa->sa_handler;
    return 0;
}

/* Whether this runs under Wine (its ntdll exports wine_get_version). */
static inline int win_is_wine(void)
{
    HMODULE ntdll = GetModuleHandleA("ntdll.dll");
    return ntdll && GetProcAddress(ntdll, "wine_get_version") != NULL;
}

/* memmem, which Windows' C runtime lacks. */
static inline void *win_memmem(const void *h, size_t hl, const void *n, size_t nl)
{
    const char *p = h, *end = p + hl;
    if (nl == 0)
        return (void *)p;
    for (; (size_t)(end - p) >= nl; p++)
        if (memcmp(p, n, nl) == 0)
            return (void *)p;
    return NULL;
}

/* dprintf, which Windows' C runtime lacks: to a C runtime descriptor. */
static inline int win_dprintf(int fd, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 1)
        n = (int)sizeof buf - 1;
    return n < 0 ? n : (int)win_write(fd, buf, (size_t)n);
}
#define dprintf win_dprintf

static inline struct tm *win_gmtime_r(const time_t *t, struct tm *tm)
{
    return gmtime_s(tm, t) == 0 ? tm : NULL;
}

/* A directory made from a template, as mkdtemp makes it. */
static inline char *win_mkdtemp(char *tmpl)
{
    _mkdir("/tmp");
    if (!_mktemp(tmpl) || _mkdir(tmpl) != 0)
        return NULL;
    return tmpl;
}

/* rename, replacing the target as POSIX does (the C runtime's refuses an existing one). */
static inline int win_rename(const char *from, const char *to)
{
    if (MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING))
        return 0;
    errno = EACCES;
    return -1;
}

/* A symbolic link, where the system makes one. Wine's CreateSymbolicLinkW (Wine 8) says it
 * succeeded and makes nothing: the case skips then, saying so. */
static inline int win_symlink(const char *target, const char *link)
{
    WCHAR t[MAX_PATH], l[MAX_PATH];
    if (!MultiByteToWideChar(CP_UTF8, 0, target, -1, t, MAX_PATH) ||
        !MultiByteToWideChar(CP_UTF8, 0, link, -1, l, MAX_PATH))
        return -1;
    for (WCHAR *c = t; *c; c++)
        if (*c == L'/')
            *c = L'\\';
    DWORD at = GetFileAttributesW(t);
    DWORD flags = at != INVALID_FILE_ATTRIBUTES && (at & FILE_ATTRIBUTE_DIRECTORY)
                      ? SYMBOLIC_LINK_FLAG_DIRECTORY
                      : 0;
    if (!CreateSymbolicLinkW(l, t, flags | 0x2 /* ALLOW_UNPRIVILEGED_CREATE */))
        return -1;
    if (GetFileAttributesW(l) == INVALID_FILE_ATTRIBUTES)
        harness_skip("Wine does not implement symbolic links: its CreateSymbolicLinkW returns "
                     "success and makes none");
    return 0;
}

static inline int win_ftruncate(int fd, long long len)
{
    return _chsize_s(fd, len) == 0 ? 0 : -1;
}

/* remove, for the directories nftw hands over too. */
static inline int win_remove(const char *path)
{
    DWORD at = GetFileAttributesA(path);
    if (at != INVALID_FILE_ATTRIBUTES && (at & FILE_ATTRIBUTE_READONLY)) /* chmod(path, 0)'s */
        SetFileAttributesA(path, at & ~(DWORD)FILE_ATTRIBUTE_READONLY);
    if (at != INVALID_FILE_ATTRIBUTES && (at & FILE_ATTRIBUTE_DIRECTORY))
        return _rmdir(path);
    return remove(path);
}

/* The sockets this process has open, where http_client.h's open_fds counts descriptors
 * (/proc/self/fd): handle values up to 16384 that are sockets. Windows keeps handles' values
 * low and reuses them, as it does descriptors. */
static inline int win_open_sockets(void)
{
    int n = 0;
    for (unsigned h = 4; h < 16384; h += 4) {
        int type, len = sizeof type;
        n += getsockopt((SOCKET)h, SOL_SOCKET, SO_TYPE, (char *)&type, &len) == 0;
    }
    return n;
}

/* signal(): Windows has no SIGPIPE, so there is no action of it to reset (the C runtime
 * refuses the number). */
static inline __p_sig_fn_t win_signal(int sig, __p_sig_fn_t fn)
{
    return sig == SIGPIPE ? SIG_DFL : signal(sig, fn);
}
#define signal(s, f) win_signal(s, f)

/* CPU affinity, as Linux's sched_*affinity: the process's CPUs (up to 64, one group), and
 * the calling thread pinned. */
#define CPU_SETSIZE 64
typedef struct {
    unsigned long long bits;
} cpu_set_t;
#define CPU_ZERO(s)     ((s)->bits = 0)
#define CPU_SET(i, s)   ((s)->bits |= 1ull << (i))
#define CPU_ISSET(i, s) (((s)->bits >> (i)) & 1)
static inline int sched_getaffinity(int pid, size_t size, cpu_set_t *set)
{
    DWORD_PTR proc, sys;
    (void)pid, (void)size;
    if (!GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys))
        return -1;
    set->bits = proc;
    return 0;
}
static inline int sched_setaffinity(int pid, size_t size, const cpu_set_t *set)
{
    (void)pid, (void)size;
    return SetThreadAffinityMask(GetCurrentThread(), (DWORD_PTR)set->bits) ? 0 : -1;
}

/* uname: the system's name and version, as far as the cases read them. */
struct utsname {
    char sysname[65], release[65];
};
static inline int uname(struct utsname *u)
{
    snprintf(u->sysname, sizeof u->sysname, "Windows");
    snprintf(u->release, sizeof u->release, "10.0");
    return 0;
}

/* ---- child processes: this program again, ending with a code ----
 *
 * Windows has no fork: a case's child is this program started again with IOMUX_TEST_CHILD in
 * its environment, the code to exit with at once, or "wait" to wait until it is ended; a
 * constructor reads it before the harness's main. The starter keeps the process's handle,
 * as a zombie keeps a POSIX child's status, until waitpid or waitid takes it. */
#define P_PID   1
#define WEXITED 4
#define WNOWAIT 0x01000000
typedef struct {
    int si_pid, si_status;
} siginfo_t;
typedef int id_t;

__attribute__((constructor)) static void win_child_main(void)
{
    char v[32];
    DWORD n = GetEnvironmentVariableA("IOMUX_TEST_CHILD", v, sizeof v);
    if (n == 0 || n >= sizeof v)
        return;
    if (strcmp(v, "wait") == 0)
        for (;;)
            Sleep(INFINITE);
    ExitProcess((UINT)atoi(v));
}

/* A child of mux_spawn's (tests/test_process.c): this program again, with the arguments
 * WIN_CHILD_ARG and a command, for what the POSIX cases ask of true, sh, cat and sleep:
 *   exit N       exits with N
 *   sleep        waits until it is ended
 *   out-err      "to-out\n" on its standard output, "to-err\n" on its standard error, exits 3
 *   one-two      "one\n" on its standard output, "two\n" on its standard error
 *   cat          copies its standard input to its standard output until the input ends
 *   stdout-open  exits 1 when it has a standard output handle, 0 when it has none
 *   stdio-kind   what its standard input and output are, "pipe", "socket" or "other": "K K\n"
 *   close-early  closes its standard input and output, then waits until it is ended
 *   env-cwd      "$IOMUX_SPAWN_TEST <its working directory> ${HOME:-nohome}\n"
 *   argv A..     each argument as "[A]", then "\n" (what the C runtime split its line into)
 *   env          the name of each variable of its environment block, in its order, a line each
 *   group        starts a "sleep" child that inherits its handles, then waits to be ended
 * Its standard handles are written with WriteFile and read with ReadFile, as any program
 * does, whatever they are (a socket of the library's, a pipe, a file). */
#define WIN_CHILD_ARG "--iomux-test-child"

/* The C runtime's split of the command line in UTF-16 (msvcrt's, as its __argv is). */
_CRTIMP int __cdecl __wgetmainargs(int *argc, wchar_t ***argv, wchar_t ***env, int glob,
                                   int *startinfo);

static inline void win_child_put(DWORD which, const char *s)
{
    DWORD n;
    WriteFile(GetStdHandle(which), s, (DWORD)strlen(s), &n, NULL);
}

/* What a child's standard handle `which` is: "pipe" for a named pipe's handle (an anonymous
 * pipe is one too), "socket" for a socket's, else "other". GetFileType calls both a pipe, and
 * Winsock cannot be asked (Wine's refuses a socket the process inherited: WSAENOTSOCK), so a
 * "pipe" that GetNamedPipeInfo does not take is a socket. */
static inline const char *win_child_kind(DWORD which)
{
    HANDLE h = GetStdHandle(which);
    DWORD flags;
    if (GetFileType(h) != FILE_TYPE_PIPE)
        return "other";
    return GetNamedPipeInfo(h, &flags, NULL, NULL, NULL) ? "pipe" : "socket";
}

static inline int win_child_run(int argc, char **argv)
{
    const char *cmd = argv[0];
    if (strcmp(cmd, "exit") == 0 && argc == 2)
        return atoi(argv[1]);
    if (strcmp(cmd, "sleep") == 0)
        for (;;)
            Sleep(INFINITE);
    if (strcmp(cmd, "out-err") == 0 || strcmp(cmd, "one-two") == 0) {
        int oe = cmd[0] == 'o' && cmd[1] == 'u';
        win_child_put(STD_OUTPUT_HANDLE, oe ? "to-out\n" : "one\n");
        win_child_put(STD_ERROR_HANDLE, oe ? "to-err\n" : "two\n");
        return oe ? 3 : 0;
    }
    if (strcmp(cmd, "cat") == 0) {
        char buf[512];
        DWORD n, w;
        while (ReadFile(GetStdHandle(STD_INPUT_HANDLE), buf, sizeof buf, &n, NULL) && n > 0)
            if (!WriteFile(GetStdHandle(STD_OUTPUT_HANDLE), buf, n, &w, NULL) || w != n)
                return 2;
        return 0;
    }
    if (strcmp(cmd, "stdout-open") == 0) {
        HANDLE h = GetStdHandle(STD_OUTPUT_HANDLE);
        return h != NULL && h != INVALID_HANDLE_VALUE;
    }
    if (strcmp(cmd, "stdio-kind") == 0) {
        char line[64];
        snprintf(line, sizeof line, "%s %s\n", win_child_kind(STD_INPUT_HANDLE),
                 win_child_kind(STD_OUTPUT_HANDLE));
        win_child_put(STD_OUTPUT_HANDLE, line);
        return 0;
    }
    if (strcmp(cmd, "close-early") == 0) { /* its input and output closed, it waits to be ended */
        CloseHandle(GetStdHandle(STD_INPUT_HANDLE));
        CloseHandle(GetStdHandle(STD_OUTPUT_HANDLE));
        for (;;)
            Sleep(INFINITE);
    }
    if (strcmp(cmd, "env-cwd") == 0) {
        char v[64], cwd[MAX_PATH], home[MAX_PATH], line[512];
        DWORD n = GetEnvironmentVariableA("IOMUX_SPAWN_TEST", v, sizeof v);
        if (n == 0 || n >= sizeof v)
            snprintf(v, sizeof v, "unset");
        n = GetEnvironmentVariableA("HOME", home, sizeof home);
        if (n == 0 || n >= sizeof home)
            snprintf(home, sizeof home, "nohome");
        if (!GetCurrentDirectoryA(sizeof cwd, cwd))
            return 2;
        snprintf(line, sizeof line, "%s %s %s\n", v, cwd, home);
        win_child_put(STD_OUTPUT_HANDLE, line);
        return 0;
    }
    if (strcmp(cmd, "argv") == 0) { /* in UTF-8, from the C runtime's wide split */
        int wargc;
        wchar_t **wargv, **wenv;
        int start = 0;
        if (__wgetmainargs(&wargc, &wargv, &wenv, 0, &start) != 0 || wargc != argc + 2)
            return 2;
        for (int i = 3; i < wargc; i++) {
            char a[256];
            if (!WideCharToMultiByte(CP_UTF8, 0, wargv[i], -1, a, sizeof a, NULL, NULL))
                return 2;
            win_child_put(STD_OUTPUT_HANDLE, "[");
            win_child_put(STD_OUTPUT_HANDLE, a);
            win_child_put(STD_OUTPUT_HANDLE, "]");
        }
        win_child_put(STD_OUTPUT_HANDLE, "\n");
        return 0;
    }
    if (strcmp(cmd, "env") == 0) { /* each variable's name, in the block's order */
        wchar_t *block = GetEnvironmentStringsW();
        for (wchar_t *v = block; v && *v; v += wcslen(v) + 1) {
            char a[512];
            if (!WideCharToMultiByte(CP_UTF8, 0, v, -1, a, sizeof a, NULL, NULL))
                return 2;
            char *eq = strchr(a + 1, '='); /* "=C:=C:\\" names start with '=' */
            if (eq)
                *eq = '\0';
            win_child_put(STD_OUTPUT_HANDLE, a);
            win_child_put(STD_OUTPUT_HANDLE, "\n");
        }
        FreeEnvironmentStringsW(block);
        return 0;
    }
    if (strcmp(cmd, "group") == 0) {
        char exe[MAX_PATH], line[MAX_PATH + 64];
        GetModuleFileNameA(NULL, exe, sizeof exe);
        snprintf(line, sizeof line, "\"%s\" " WIN_CHILD_ARG " sleep", exe);
        STARTUPINFOA si;
        PROCESS_INFORMATION pi;
        memset(&si, 0, sizeof si);
        si.cb = sizeof si;
        si.dwFlags = STARTF_USESTDHANDLES;
        si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
        si.hStdOutput = GetStdHandle(STD_OUTPUT_HANDLE);
        si.hStdError = GetStdHandle(STD_ERROR_HANDLE);
        if (!CreateProcessA(exe, line, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi))
            return 2;
        for (;;)
            Sleep(INFINITE);
    }
    return 125;
}

__attribute__((constructor)) static void win_child_command(void)
{
    if (__argc >= 3 && strcmp(__argv[1], WIN_CHILD_ARG) == 0)
        ExitProcess((UINT)win_child_run(__argc - 2, __argv + 2));
}

/* The children started and not yet waited for: id and handle. */
static struct {
    int pid;
    HANDLE h;
} win_children[64];

/* Starts a child that exits with `code` (or waits to be ended, for a negative one); its id. */
static inline int win_spawn(int code)
{
    static SRWLOCK lock = SRWLOCK_INIT; /* the environment is the process's */
    char exe[MAX_PATH], v[16];
    DWORD n = GetModuleFileNameA(NULL, exe, sizeof exe);
    if (n == 0 || n >= sizeof exe)
        return -1;
    snprintf(v, sizeof v, code < 0 ? "wait" : "%d", code);
    STARTUPINFOA si;
    PROCESS_INFORMATION pi;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    BOOL ok = FALSE;
    /* Wine loses a start now and then under load: the new process dies in its loader and
     * CreateProcess says ERROR_INTERNAL_ERROR (tests/test_process.c, spawn_once). Started
     * again then, at most 3 times, saying so. */
    for (int i = 0; i < 4 && !ok; i++) {
        AcquireSRWLockExclusive(&lock);
        SetEnvironmentVariableA("IOMUX_TEST_CHILD", v);
        ok = CreateProcessA(exe, NULL, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi);
        DWORD err = ok ? 0 : GetLastError();
        SetEnvironmentVariableA("IOMUX_TEST_CHILD", NULL);
        ReleaseSRWLockExclusive(&lock);
        if (!ok && (err != ERROR_INTERNAL_ERROR || i == 3)) {
            fprintf(stderr, "win_spawn: CreateProcess: error %lu\n", (unsigned long)err);
            return -1;
        }
        if (!ok)
            fprintf(stderr, "win_spawn: Wine lost a start (ERROR_INTERNAL_ERROR): again\n");
    }
    CloseHandle(pi.hThread);
    for (size_t i = 0; i < sizeof win_children / sizeof win_children[0]; i++)
        if (!win_children[i].h) {
            win_children[i].pid = (int)pi.dwProcessId;
            win_children[i].h = pi.hProcess;
            return (int)pi.dwProcessId;
        }
    CloseHandle(pi.hProcess);
    return (int)pi.dwProcessId;
}

/* pause: a child's wait to be ended (nothing but its end comes on Windows). */
static inline int win_pause(void)
{
    Sleep(INFINITE);
    return -1;
}

/* The handle of a child win_spawn started and nobody waited for, or NULL. */
static inline HANDLE win_child_handle(int pid)
{
    for (size_t i = 0; i < sizeof win_children / sizeof win_children[0]; i++)
        if (win_children[i].h && win_children[i].pid == pid)
            return win_children[i].h;
    return NULL;
}

/* waitpid for a child win_spawn started: its exit code as the status (WEXITSTATUS is the
 * status itself there), its handle let go; -1 with ECHILD for another. */
static inline int win_waitpid(int pid, int *status, int opts)
{
    for (size_t i = 0; i < sizeof win_children / sizeof win_children[0]; i++) {
        if (!win_children[i].h || win_children[i].pid != pid)
            continue;
        if (WaitForSingleObject(win_children[i].h, opts & WNOHANG ? 0 : INFINITE) != WAIT_OBJECT_0)
            return 0;
        DWORD code = 0;
        GetExitCodeProcess(win_children[i].h, &code);
        if (status)
            *status = (int)code;
        CloseHandle(win_children[i].h);
        win_children[i].h = NULL;
        return pid;
    }
    errno = ECHILD;
    return -1;
}

/* waitid(P_PID, pid, info, WEXITED | WNOWAIT): waits for the child's end and leaves it to be
 * waited for again. */
static inline int win_waitid(int pid, siginfo_t *info)
{
    for (size_t i = 0; i < sizeof win_children / sizeof win_children[0]; i++)
        if (win_children[i].h && win_children[i].pid == pid &&
            WaitForSingleObject(win_children[i].h, INFINITE) == WAIT_OBJECT_0) {
            DWORD code = 0;
            GetExitCodeProcess(win_children[i].h, &code);
            info->si_pid = pid;
            info->si_status = (int)code;
            return 0;
        }
    errno = ECHILD;
    return -1;
}

/* The C runtime opens files as text by default (LF written as CRLF): the cases write bytes. */
__attribute__((constructor)) static void win_binary_files(void)
{
    _fmode = _O_BINARY;
}

#define socketpair win_socketpair
#define mkstemp win_mkstemp
#define unlink win_unlink
#define pwrite win_pwrite
#define socket win_socket
#define connect(s, a, l) win_connect((SOCKET)(s), a, l)
#define read win_read
#define write win_write
#define close win_close
#define fcntl win_fcntl
#define pipe(p) win_pipe(p, 0)
#define pipe2(p, f) win_pipe(p, f)
#define fork win_fork
#define getrlimit win_rlimit
#define setrlimit win_rlimit
#define dup win_dup
#define dup2(a, b) win_dup2(a, b)
#define mmap win_mmap
#define munmap(p, l) win_munmap(p, l)
#define posix_memalign win_posix_memalign
#define waitpid(p, s, o) win_waitpid(p, s, o)
#define pause() win_pause()
#define waitid(t, p, i, o) win_waitid(p, i)
#define kill(p, s) win_kill(p, s)
#define sigaction(s, a, o) win_sigaction(s, a, o)
#define raise(s) win_raise(s)
#define sigemptyset(s) win_sigset(s, 0)
#define sigfillset(s) win_sigset(s, ~(sigset_t)0)
#define sigaddset(s, n) win_sigset(s, *(s) | (sigset_t)1 << (n))
#define sysconf(x) 4096
#define poll WSAPoll
#define recv(s, b, l, f) win_recv((SOCKET)(s), b, l, f)
#define setsockopt(s, l, o, v, n) setsockopt(s, l, o, (const char *)(v), n)
#define getsockopt(s, l, o, v, n) getsockopt(s, l, o, (char *)(v), n)
#define F_DUPFD 0
#define aligned_alloc(a, n) malloc(n)
#define mkdtemp win_mkdtemp
#define memmem win_memmem
#define gmtime_r win_gmtime_r
#define rename win_rename
#define symlink win_symlink
#define ftruncate win_ftruncate
#define remove win_remove
#define mkdir(p, m) _mkdir(p)
#define TCP_KEEPIDLE 3
#define RUSAGE_SELF 0
#define ioctl(fd, req, p) ioctlsocket((SOCKET)(unsigned)(fd), req, (u_long *)(p))
#define setenv(n, v, o) _putenv_s(n, v)
#define unsetenv(n) _putenv_s(n, "")

struct rusage {
    struct timeval ru_utime, ru_stime;
};

/* The process's CPU time so far, as getrusage gives it. */
static inline int getrusage(int who, struct rusage *ru)
{
    FILETIME c, e, k, u;
    (void)who;
    if (!GetProcessTimes(GetCurrentProcess(), &c, &e, &k, &u))
        return -1;
    uint64_t ku = ((uint64_t)k.dwHighDateTime << 32 | k.dwLowDateTime) / 10,
             uu = ((uint64_t)u.dwHighDateTime << 32 | u.dwLowDateTime) / 10;
    ru->ru_stime.tv_sec = (long)(ku / 1000000);
    ru->ru_stime.tv_usec = (long)(ku % 1000000);
    ru->ru_utime.tv_sec = (long)(uu / 1000000);
    ru->ru_utime.tv_usec = (long)(uu % 1000000);
    return 0;
}
#define alarm harness_watchdog
typedef int nfds_t;

#endif
