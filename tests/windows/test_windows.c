/* SPDX-License-Identifier: MIT */
/* What the Windows build does differently, stated as cases (built for Windows only). */
#include <ctype.h>

#include "harness.h"
#include "http_fixture.h"
#include "platform/win.h"
#include "iomux/process.h"

/* Windows' error codes reach the caller as the codes the POSIX build returns, and
 * mux_strerror names every one of them. */
CORE_TEST(windows_errors_map_to_the_posix_codes) {
    static const struct {
        DWORD win;
        int posix;
    } map[] = {
        {WSAECONNRESET, -ECONNRESET},       {ERROR_NETNAME_DELETED, -ECONNRESET},
        {WSAEWOULDBLOCK, -EAGAIN},          {ERROR_OPERATION_ABORTED, -ECANCELED},
        {WSAECONNREFUSED, -ECONNREFUSED},   {ERROR_CONNECTION_REFUSED, -ECONNREFUSED},
        {WSAENOTSOCK, -EBADF},              {ERROR_INVALID_HANDLE, -EBADF},
        {WSAEADDRINUSE, -EADDRINUSE},       {WSAEADDRNOTAVAIL, -EADDRNOTAVAIL},
        {WSAEAFNOSUPPORT, -EAFNOSUPPORT},   {WSAENOTCONN, -ENOTCONN},
        {WSAESHUTDOWN, -EPIPE},             {WSAETIMEDOUT, -ETIMEDOUT},
        {WSAEHOSTUNREACH, -EHOSTUNREACH},   {WSAENETUNREACH, -ENETUNREACH},
        {WSAENOBUFS, -ENOBUFS},             {WSAEMFILE, -EMFILE},
        {WSAECONNABORTED, -ECONNABORTED},   {ERROR_NOT_ENOUGH_MEMORY, -ENOMEM},
        {WSAEINVAL, -EINVAL},               {WSAEACCES, -EACCES},
        {WSAEINPROGRESS, -EINPROGRESS},     {WSAEISCONN, -EISCONN},
        {WSAENETDOWN, -ENETDOWN},           {WSAEMSGSIZE, -EMSGSIZE},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        CHECK_EQ(mux__win_errno(map[i].win), map[i].posix);
        CHECK(strcmp(mux_strerror(map[i].posix), "unknown error") != 0);
    }
    CHECK_EQ(mux__win_errno(0), 0);
    CHECK_EQ(mux__win_errno(123456), -EIO); /* no closer meaning */
}

static void fork_cb(mux_loop_t *l, mux_fork_t *w)
{
    (void)l, (void)w;
}

/* Windows has no fork: a fork watcher initialises, for portable code, and refuses to start;
 * nothing is left active. */
TEST(windows_fork_watcher_refuses_to_start) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_fork_t f;
    CHECK_EQ(mux_fork_init(&f, fork_cb), 0);
    CHECK_EQ(mux_fork_start(&loop, &f), -ENOTSUP);
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_fork_stop(&loop, &f), 0);
    loop_close(&loop);
}

/* ---- signals: the console's events ---------------------------------------------------- */

struct wsig {
    int calls, signum;
};

static void wsig_cb(mux_loop_t *l, mux_signal_t *w, int signum)
{
    struct wsig *s = w->data;
    (void)l;
    s->calls++;
    s->signum = signum;
}

/* Runs the loop until *calls is nonzero, 2 s at most. */
static void wsig_wait(mux_loop_t *loop, const int *calls)
{
    uint64_t end = mono_ns() + 2000 * MS;
    while (*calls == 0 && mono_ns() < end)
        CHECK_GE(mux_run(loop, MUX_RUN_ONCE), 0);
}

/* Ctrl-C, Ctrl-Break and the console's closing reach the watchers of SIGINT, SIGBREAK and
 * SIGHUP, each its own, through the handler Windows calls on a thread of its own. */
TEST(windows_console_events_reach_their_signal_watchers) {
    mux_loop_t loop;
    loop_open(&loop);
    static const int sigs[] = {SIGINT, SIGBREAK, SIGHUP};
    struct wsig s[3];
    mux_signal_t w[3];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(mux_signal_init(&w[i], wsig_cb, sigs[i]), 0);
        w[i].data = &s[i];
        CHECK_EQ(mux_signal_start(&loop, &w[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(raise(sigs[i]), 0); /* win_raise: the event, as Windows raises it */
        wsig_wait(&loop, &s[i].calls);
        for (int k = 0; k < 3; k++)
            CHECK_EQ(s[k].calls, k <= i);
        CHECK_EQ(s[i].signum, sigs[i]);
    }
    for (int i = 0; i < 3; i++)
        CHECK_EQ(mux_signal_stop(&loop, &w[i]), 0);
    loop_close(&loop);
}

/* Windows delivers no other signal: a watcher of one initialises, for portable code, and
 * refuses to start; SIGWINCH starts (a console window's resize). */
TEST(windows_signal_start_refuses_what_windows_never_delivers) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_signal_t w;
    static const int never[] = {SIGTERM, SIGABRT, SIGSEGV, 30, 63};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        CHECK_EQ(mux_signal_init(&w, wsig_cb, never[i]), 0);
        CHECK_EQ(mux_signal_start(&loop, &w), -ENOTSUP);
        CHECK_EQ(mux_loop_active(&loop), 0);
        CHECK_EQ(mux_signal_stop(&loop, &w), 0);
    }
    CHECK_EQ(mux_signal_init(&w, wsig_cb, 64), -EINVAL);
    CHECK_EQ(mux_signal_init(&w, wsig_cb, SIGWINCH), 0);
    CHECK_EQ(mux_signal_start(&loop, &w), 0);
    CHECK_EQ(mux_loop_active(&loop), 1);
    CHECK_EQ(mux_signal_stop(&loop, &w), 0);
    loop_close(&loop);
}

static volatile LONG own_calls[3];

static BOOL WINAPI own_handler(DWORD type)
{
    if (type > CTRL_BREAK_EVENT)
        return FALSE;
    InterlockedIncrement(&own_calls[type]);
    return TRUE;
}

/* The library's handler takes only the events some loop watches: an event nobody watches
 * goes on down the chain to the handler installed before it, as does every event once the
 * last watcher stopped (the handler left the chain). */
TEST(windows_console_event_nobody_watches_goes_down_the_chain) {
    CHECK(SetConsoleCtrlHandler(own_handler, TRUE));
    mux_loop_t loop;
    loop_open(&loop);
    struct wsig s = {0, 0};
    mux_signal_t w;
    CHECK_EQ(mux_signal_init(&w, wsig_cb, SIGINT), 0);
    w.data = &s;
    CHECK_EQ(mux_signal_start(&loop, &w), 0);
    CHECK_EQ(raise(SIGBREAK), 0); /* not watched: the next handler's */
    CHECK_EQ(own_calls[CTRL_BREAK_EVENT], 1);
    CHECK_EQ(raise(SIGINT), 0); /* watched: the library's alone */
    wsig_wait(&loop, &s.calls);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(own_calls[CTRL_C_EVENT], 0);
    CHECK_EQ(mux_signal_stop(&loop, &w), 0);
    CHECK_EQ(raise(SIGINT), 0); /* no watcher left: the next handler's again */
    CHECK_EQ(own_calls[CTRL_C_EVENT], 1);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(s.calls, 1);
    loop_close(&loop);
    CHECK(SetConsoleCtrlHandler(own_handler, FALSE));
}

/* Resizing the console window is a SIGWINCH. */
TEST(windows_console_resize_is_sigwinch) {
    if (!GetConsoleWindow() && !AllocConsole())
        SKIP("Wine does not implement it here: a process started without a terminal gets no "
             "console window (AllocConsole fails without a display, ERROR_INVALID_HANDLE)");
    mux_loop_t loop;
    loop_open(&loop);
    struct wsig s = {0, 0};
    mux_signal_t w;
    CHECK_EQ(mux_signal_init(&w, wsig_cb, SIGWINCH), 0);
    w.data = &s;
    CHECK_EQ(mux_signal_start(&loop, &w), 0);
    HANDLE out = CreateFileW(L"CONOUT$", GENERIC_READ | GENERIC_WRITE,
                             FILE_SHARE_READ | FILE_SHARE_WRITE, NULL, OPEN_EXISTING, 0, NULL);
    CHECK(out != INVALID_HANDLE_VALUE);
    CONSOLE_SCREEN_BUFFER_INFO bi;
    CHECK(GetConsoleScreenBufferInfo(out, &bi));
    SMALL_RECT smaller = bi.srWindow;
    smaller.Right = (SHORT)(smaller.Left + (bi.srWindow.Right - bi.srWindow.Left) / 2);
    sleep_ms(200); /* the hook's thread is up */
    CHECK(SetConsoleWindowInfo(out, TRUE, &smaller));
    wsig_wait(&loop, &s.calls);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.signum, SIGWINCH);
    SetConsoleWindowInfo(out, TRUE, &bi.srWindow);
    CloseHandle(out);
    CHECK_EQ(mux_signal_stop(&loop, &w), 0);
    loop_close(&loop);
}

/* ---- child processes: this program again, ending with a code ---------------------------
 *
 * A child is this program started again (tests/windows/posix.h, win_spawn): it exits at once
 * with the code given, or waits until it is ended (-1). Its handle is kept here, as its
 * creator's. */

/* Starts a child (`code`, or -1 to wait); its id, and its handle in *h. */
static int wchild(int code, HANDLE *h)
{
    int pid = win_spawn(code);
    CHECK_GT(pid, 0);
    *h = win_child_handle(pid);
    CHECK(*h != NULL);
    return pid;
}

struct wreaped {
    int calls, pid, status, active_in_cb;
};

static void wchild_cb(mux_loop_t *loop, mux_child_t *w, int pid, int status)
{
    struct wreaped *r = w->data;
    r->calls++;
    r->pid = pid;
    r->status = status;
    r->active_in_cb = mux_loop_active(loop);
}

/* A process ended by TerminateProcess before its watcher started is reported all the same
 * (its creator's handle keeps it, and its code, there), with the code its killer gave it;
 * never from inside the start. (test_child.c has the processes that exit by themselves.) */
TEST(windows_child_killed_before_the_watcher_started_is_reported) {
    mux_loop_t loop;
    loop_open(&loop);
    HANDLE h1, h2;
    int p1 = wchild(7, &h1), p2 = wchild(-1, &h2);
    CHECK_EQ(WaitForSingleObject(h1, 5000), WAIT_OBJECT_0);
    CHECK(TerminateProcess(h2, 9));
    CHECK_EQ(WaitForSingleObject(h2, 5000), WAIT_OBJECT_0);
    struct wreaped r1 = {0}, r2 = {0};
    mux_child_t w1, w2;
    CHECK_EQ(mux_child_init(&w1, wchild_cb, p1), 0);
    CHECK_EQ(mux_child_init(&w2, wchild_cb, p2), 0);
    w1.data = &r1;
    w2.data = &r2;
    CHECK_EQ(mux_child_start(&loop, &w1), 0);
    CHECK_EQ(mux_child_start(&loop, &w2), 0);
    CHECK_EQ(r1.calls + r2.calls, 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(r1.calls, 1);
    CHECK_EQ(r1.status, 7);
    CHECK_EQ(r2.calls, 1);
    CHECK_EQ(r2.pid, p2);
    CHECK_EQ(r2.status, 9);
    CHECK_EQ(waitpid(p1, NULL, 0), p1);
    CHECK_EQ(waitpid(p2, NULL, 0), p2);
    loop_close(&loop);
}

/* A watcher stopped before its process ends is never called, and leaves nothing behind. */
TEST(windows_child_watcher_stopped_first_is_never_called) {
    mux_loop_t loop;
    loop_open(&loop);
    HANDLE h;
    int pid = wchild(-1, &h);
    struct wreaped r = {0};
    mux_child_t w;
    CHECK_EQ(mux_child_init(&w, wchild_cb, pid), 0);
    w.data = &r;
    CHECK_EQ(mux_child_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 1);
    CHECK_EQ(mux_child_stop(&loop, &w), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK(TerminateProcess(h, 3));
    CHECK_EQ(WaitForSingleObject(h, 5000), WAIT_OBJECT_0);
    sleep_ms(50);
    CHECK_EQ(mux_run(&loop, MUX_RUN_NOWAIT), 0);
    CHECK_EQ(r.calls, 0);
    CHECK_EQ(waitpid(pid, NULL, 0), pid);
    loop_close(&loop);
}

/* What Windows has no counterpart of, or that is not there: a watcher for any child (no
 * process reaps children as a group), a process that does not exist. */
TEST(windows_child_any_pid_and_a_gone_process_are_refused) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_child_t w;
    CHECK_EQ(mux_child_init(&w, wchild_cb, 0), 0);
    CHECK_EQ(mux_child_start(&loop, &w), -ENOTSUP);
    /* Process ids are multiples of 4 below 2^26 or so: this one names none. */
    CHECK_EQ(mux_child_init(&w, wchild_cb, 0x7ffffffd), 0);
    CHECK_EQ(mux_child_start(&loop, &w), -ESRCH);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
}

struct wproc {
    mux_process_t p;
    int calls, status, signal;
};

static void exit_cb(mux_process_t *p, int exit_status, int term_signal)
{
    struct wproc *w = p->data;
    w->calls++;
    w->status = exit_status;
    w->signal = term_signal;
}

/* Runs `argv` with its standard output into a pipe; what it wrote, in `out`. */
static void wrun(mux_loop_t *loop, struct wproc *w, char *const *argv, char *out, size_t size)
{
    HANDLE rd, wr;
    CHECK(CreatePipe(&rd, &wr, NULL, 0));
    mux_spawn_options_t o = {.file = argv[0], .argv = argv};
    o.stdio[1].kind = MUX_STDIO_FD;
    o.stdio[1].fd = (int)(uintptr_t)wr;
    memset(w, 0, sizeof *w);
    w->p.data = w;
    CHECK_EQ(mux_spawn(loop, &w->p, &o, exit_cb), 0);
    CloseHandle(wr);
    DWORD got = 0, n;
    while (got < size - 1 && ReadFile(rd, out + got, (DWORD)(size - 1 - got), &n, NULL) && n > 0)
        got += n;
    out[got] = '\0';
    CloseHandle(rd);
    CHECK_EQ(mux_run(loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(w->calls, 1);
}

/* Windows gives a program one command line, which its C runtime splits again: each argument
 * comes back as it was given, with white space, quotes and backslashes (the quoting of
 * spawn_win.c; test_process.c's children have plain arguments only). */
TEST(windows_spawn_arguments_come_back_as_given) {
    mux_loop_t loop;
    loop_open(&loop);
    char exe[MAX_PATH];
    CHECK_GT(GetModuleFileNameA(NULL, exe, sizeof exe), 0);
    char *argv[] = {exe, WIN_CHILD_ARG, "argv", "plain", "two words", "", "a\"quote",
                    "back\\slash", "ends\\", "ends in space\\ ", "\\\\\"x", "tab\there",
                    "\"", "é ü", NULL};
    char out[512];
    struct wproc w;
    wrun(&loop, &w, argv, out, sizeof out);
    CHECK_EQ(w.status, 0);
    CHECK_STR_EQ(out, "[plain][two words][][a\"quote][back\\slash][ends\\][ends in space\\ ]"
                      "[\\\\\"x][tab\there][\"][é ü]\n");
    loop_close(&loop);
}

/* Windows' order of names: by their upper case, unit by unit. */
static int wupper_cmp(const char *a, const char *b)
{
    for (;; a++, b++) {
        int x = toupper((unsigned char)*a), y = toupper((unsigned char)*b);
        if (x != y || !x)
            return x - y;
    }
}

/* The environment given is one block sorted by name without regard to case, as Windows keeps
 * it, with SYSTEMROOT in it (a program cannot load Winsock without it). */
TEST(windows_spawn_environment_is_sorted_and_has_systemroot) {
    mux_loop_t loop;
    loop_open(&loop);
    char exe[MAX_PATH];
    CHECK_GT(GetModuleFileNameA(NULL, exe, sizeof exe), 0);
    char *argv[] = {exe, WIN_CHILD_ARG, "env", NULL};
    char *env[] = {"ZED=1", "alpha=2", "Mid=3", "beta=é", NULL};
    HANDLE rd, wr;
    CHECK(CreatePipe(&rd, &wr, NULL, 0));
    mux_spawn_options_t o = {.file = exe, .argv = argv, .env = env};
    o.stdio[1].kind = MUX_STDIO_FD;
    o.stdio[1].fd = (int)(uintptr_t)wr;
    struct wproc w;
    memset(&w, 0, sizeof w);
    w.p.data = &w;
    CHECK_EQ(mux_spawn(&loop, &w.p, &o, exit_cb), 0);
    CloseHandle(wr);
    static char out[8192];
    DWORD got = 0, n;
    while (got < sizeof out - 1 && ReadFile(rd, out + got, sizeof out - 1 - got, &n, NULL) && n > 0)
        got += n;
    out[got] = '\0';
    CloseHandle(rd);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(w.status, 0);
    /* The given names in Windows' order (they were given out of it). Wine's child appends
     * variables of its own after the block (WINE*, SystemRoot, SystemDrive), so only the
     * given ones' order is checked, and SYSTEMROOT's presence. */
    static const char *const order[] = {"alpha", "beta", "Mid", "ZED"};
    int seen = 0, sysroot = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (seen < 4 && strcmp(line, order[seen]) == 0)
            seen++;
        sysroot += wupper_cmp(line, "SYSTEMROOT") == 0;
    }
    CHECK_EQ(seen, 4);
    CHECK_GE(sysroot, 1);
    loop_close(&loop);
}

/* A bare name is looked up in PATH with ".com" and ".exe" (cmd is C:\windows\system32\cmd.exe);
 * what CreateProcess itself would search first (the program's own directory, the current
 * one) is not searched. Signals other than those that end a process are -ENOSYS. */
TEST(windows_spawn_finds_a_program_by_name_in_path) {
    mux_loop_t loop;
    loop_open(&loop);
    char *argv[] = {"cmd", "/c", "exit 7", NULL};
    char out[64];
    struct wproc w;
    wrun(&loop, &w, argv, out, sizeof out);
    CHECK_EQ(w.status, 7);
    CHECK_EQ(w.signal, 0);
    char *self[] = {"iomux-tests", WIN_CHILD_ARG, "exit", "0", NULL}; /* beside us, not in PATH */
    mux_spawn_options_t o = {.file = self[0], .argv = self};
    memset(&w, 0, sizeof w);
    w.p.data = &w;
    CHECK_EQ(mux_spawn(&loop, &w.p, &o, exit_cb), -ENOENT);
    char exe[MAX_PATH];
    CHECK_GT(GetModuleFileNameA(NULL, exe, sizeof exe), 0);
    char *sleeper[] = {exe, WIN_CHILD_ARG, "sleep", NULL};
    o.file = exe;
    o.argv = sleeper;
    CHECK_EQ(mux_spawn(&loop, &w.p, &o, exit_cb), 0);
    CHECK_EQ(mux_process_kill(&w.p, SIGHUP), -ENOSYS);
    CHECK_EQ(mux_process_kill(&w.p, SIGINT), 0);
    int r = mux_process_kill(&w.p, SIGTERM); /* ending already: refused once it has ended */
    CHECK(r == 0 || r == -ESRCH);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(w.calls, 1);
    CHECK_EQ(w.status, 0);
    CHECK_EQ(w.signal, SIGINT); /* the first signal's */
    CHECK_EQ(mux_process_kill(&w.p, SIGTERM), -ESRCH);
    loop_close(&loop);
}

/* Loops in two threads each watch a child of their own: each hears its own, only. */
struct wthread {
    mux_loop_t loop;
    mux_child_t w;
    struct wreaped r;
    int pid;
};

static void *wthread_run(void *arg)
{
    struct wthread *t = arg;
    CHECK_EQ(mux_run(&t->loop, MUX_RUN_DEFAULT), 0);
    return NULL;
}

THREAD_TEST(windows_child_watchers_in_two_threads_each_hear_their_own) {
    struct wthread t[2];
    HANDLE h[2];
    pthread_t th[2];
    memset(t, 0, sizeof t);
    for (int i = 0; i < 2; i++) {
        loop_open(&t[i].loop);
        t[i].pid = wchild(-1, &h[i]);
        CHECK_EQ(mux_child_init(&t[i].w, wchild_cb, t[i].pid), 0);
        t[i].w.data = &t[i].r;
        CHECK_EQ(mux_child_start(&t[i].loop, &t[i].w), 0);
        CHECK_EQ(pthread_create(&th[i], NULL, wthread_run, &t[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        CHECK(TerminateProcess(h[i], 10 + (UINT)i));
        CHECK_EQ(pthread_join(th[i], NULL), 0);
        CHECK_EQ(t[i].r.calls, 1);
        CHECK_EQ(t[i].r.pid, t[i].pid);
        CHECK_EQ(t[i].r.status, 10 + i);
        CHECK_EQ(waitpid(t[i].pid, NULL, 0), t[i].pid);
        loop_close(&t[i].loop);
    }
}

static void never_cb(mux_loop_t *l, mux_io_t *w, unsigned revents)
{
    (void)l, (void)revents;
    *(unsigned *)w->data = revents;
}

/* Only sockets can be watched: a file's descriptor is refused, and its watcher is stopped and
 * told MUX_ERROR, on both backends. */
TEST(windows_io_watcher_on_a_file_gets_error) {
    mux_loop_t loop;
    loop_open(&loop);
    char path[MAX_PATH];
    CHECK(GetTempPathA(sizeof path, path) > 0);
    CHECK(strlen(path) + 20 < sizeof path);
    strcat(path, "iomux-file-XXXXXX");
    CHECK(_mktemp(path) != NULL);
    int fd = _open(path, _O_CREAT | _O_RDWR | _O_TEMPORARY, 0600);
    CHECK_GE(fd, 0);
    unsigned got = 0;
    mux_io_t w;
    CHECK_EQ(mux_io_init(&w, never_cb, fd, MUX_READ), 0);
    w.data = &got;
    CHECK_EQ(mux_io_start(&loop, &w), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* ends: the watcher was stopped */
    CHECK_EQ(got, MUX_ERROR | MUX_READ);
    CHECK_EQ(mux_io_is_active(&w), 0);
    _close(fd);
    loop_close(&loop);
}

/* ---- static files: the names Windows reads otherwise ------------------------------------ */

static struct hclient wcl;
static struct hanswer wrsp;

static int win_status(struct fx *f, const char *target)
{
    cl_get(f, &wcl, target, "", &wrsp);
    if (wrsp.status != 200 && wrsp.status != 404)
        fprintf(stderr, "%s: %d\n", target, wrsp.status);
    return wrsp.status;
}

/* What Windows would open by another name than the one asked for is not served (404, as IIS
 * and nginx for Windows answer): a trailing dot or space (which Windows drops), a stream
 * ("::$DATA", the file's own bytes), a backslash (a separator to Windows), a drive, a device
 * name in any folder, and bytes that cannot be in a name. The file itself is served, by any
 * case of its name (the file system ignores case). */
TEST(windows_static_files_refuse_names_windows_reads_otherwise) {
    struct fx f;
    fx_dir(&f);
    fx_file(&f, "index.html", "root", 4);
    fx_file(&f, "a.txt", "a", 1);
    fx_mkdir(&f, "d");
    fx_file(&f, "d/x.txt", "x", 1);
    fx_serve(&f);
    hc_open(&wcl, f.port);
    CHECK_EQ(win_status(&f, "/a.txt"), 200);
    CHECK_STR_EQ(wrsp.body, "a");
    CHECK_EQ(win_status(&f, "/A.TXT"), 200);
    CHECK_EQ(win_status(&f, "/d/x.txt"), 200);
    static const char *no[] = {
        "/a.txt.", "/a.txt%20", "/a.txt...", "/a.txt%3A%3A$DATA", "/a.txt::$DATA",
        "/a.txt:stream", "/d%5Cx.txt", "/d./x.txt", "/C:/Windows/win.ini",
        "/%43%3A%5CWindows%5Cwin.ini", "/CON", "/con.txt", "/NUL", "/d/aux.html", "/COM1",
        "/LPT1.txt", "/CONIN$", "/a%2A.txt", "/a%3F", "/%3Ca%3E", "/a%7Cb", "/a%01"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        if (win_status(&f, no[i]) != 404)
            fprintf(stderr, "served: %s\n", no[i]);
        CHECK_EQ(wrsp.status, 404);
    }
    CHECK_EQ(f.errors, 0);
    hc_close(&wcl);
    fx_close(&f);
}

/* A file's short (8.3) name reaches the same file by a name no rule about names sees: it is
 * not served; its long name is. */
TEST(windows_static_files_refuse_a_short_name) {
    struct fx f;
    fx_dir(&f);
    fx_file(&f, "longfilename.html", "long", 4);
    char path[512];
    snprintf(path, sizeof path, "%s/longfilename.html", f.dir);
    /* The file's own entry gives its short name: only the case's folder is read. (Asking
     * GetShortPathNameA for the whole path made Wine read every folder on it, /tmp among
     * them, where other cases make and remove folders all the time: it answered
     * ERROR_FILE_NOT_FOUND through 40 tries over 4 s once, in a full run.) Asked again for up
     * to 4 s, saying so. */
    WIN32_FIND_DATAA found;
    HANDLE h = INVALID_HANDLE_VALUE;
    for (int i = 0; i < 40 && h == INVALID_HANDLE_VALUE; i++) {
        if (i) {
            fprintf(stderr, "FindFirstFileA: error %lu, asking again\n", GetLastError());
            sleep_ms(100);
        }
        h = FindFirstFileA(path, &found);
    }
    if (h == INVALID_HANDLE_VALUE)
        fprintf(stderr, "FindFirstFileA: error %lu\n", GetLastError());
    CHECK(h != INVALID_HANDLE_VALUE);
    FindClose(h);
    CHECK_EQ(strcmp(found.cFileName, "longfilename.html"), 0);
    const char *sn = found.cAlternateFileName[0] ? found.cAlternateFileName : found.cFileName;
    if (strcmp(sn, "longfilename.html") == 0)
        SKIP("this volume makes no short (8.3) names");
    fx_serve(&f);
    hc_open(&wcl, f.port);
    CHECK_EQ(win_status(&f, "/longfilename.html"), 200);
    char target[300];
    snprintf(target, sizeof target, "/%s", sn);
    CHECK_EQ(win_status(&f, target), 404);
    fprintf(stderr, "short name %s: 404\n", sn);
    hc_close(&wcl);
    fx_close(&f);
}
