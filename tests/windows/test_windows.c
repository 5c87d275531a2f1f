/* SPDX-License-Identifier: MIT */
/* What the Windows build does differently, stated as cases (built for Windows only). */
#include "harness.h"
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

static void signal_cb(mux_loop_t *l, mux_signal_t *w, int signum)
{
    (void)l, (void)w, (void)signum;
}
static void child_cb(mux_loop_t *l, mux_child_t *w, int pid, int status)
{
    (void)l, (void)w, (void)pid, (void)status;
}
static void fork_cb(mux_loop_t *l, mux_fork_t *w)
{
    (void)l, (void)w;
}

/* Windows has no POSIX signals, no SIGCHLD and no fork: those watchers initialise, for
 * portable code, and refuse to start; nothing is left active. */
TEST(windows_signal_child_and_fork_watchers_refuse_to_start) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_signal_t s;
    mux_child_t c;
    mux_fork_t f;
    CHECK_EQ(mux_signal_init(&s, signal_cb, SIGINT), 0);
    CHECK_EQ(mux_child_init(&c, child_cb, 0), 0);
    CHECK_EQ(mux_fork_init(&f, fork_cb), 0);
    CHECK_EQ(mux_signal_start(&loop, &s), -ENOTSUP);
    CHECK_EQ(mux_child_start(&loop, &c), -ENOTSUP);
    CHECK_EQ(mux_fork_start(&loop, &f), -ENOTSUP);
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_signal_stop(&loop, &s), 0);
    CHECK_EQ(mux_child_stop(&loop, &c), 0);
    CHECK_EQ(mux_fork_stop(&loop, &f), 0);
    loop_close(&loop);
}

static void exit_cb(mux_process_t *p, int exit_status, int term_signal)
{
    (void)exit_status, (void)term_signal;
    p->data = NULL; /* never called: no process handle becomes active on Windows */
}

/* mux_spawn is not written for Windows yet: it checks its arguments as on POSIX, then
 * refuses with -ENOTSUP, and leaves nothing active; the calls on the handle are those of a
 * handle that was never spawned. */
TEST(windows_spawn_is_not_supported) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_process_t p = {.data = &p};
    char *argv[] = {"cmd.exe", "/c", "exit", NULL};
    mux_spawn_options_t o = {.file = "cmd.exe", .argv = argv};
    CHECK_EQ(mux_spawn(&loop, &p, &o, exit_cb), -ENOTSUP);
    CHECK_EQ(mux_spawn(&loop, &p, &o, NULL), -EINVAL);
    CHECK_EQ(mux_spawn(NULL, &p, &o, exit_cb), -EINVAL);
    o.flags = 0x100;
    CHECK_EQ(mux_spawn(&loop, &p, &o, exit_cb), -EINVAL);
    o.flags = 0;
    o.stdio[1].kind = MUX_STDIO_STREAM; /* without a stream */
    CHECK_EQ(mux_spawn(&loop, &p, &o, exit_cb), -EINVAL);
    o.stdio[1].kind = MUX_STDIO_FD;
    o.stdio[1].fd = -1;
    CHECK_EQ(mux_spawn(&loop, &p, &o, exit_cb), -EINVAL);
    o.stdio[1].kind = MUX_STDIO_INHERIT;
    o.file = "";
    CHECK_EQ(mux_spawn(&loop, &p, &o, exit_cb), -EINVAL);
    CHECK_EQ(mux_process_kill(&p, 15), -EINVAL);
    CHECK_EQ(mux_process_pid(&p), -EINVAL);
    CHECK_EQ(mux_process_detach(&p), -EINVAL);
    CHECK(p.data == &p);
    CHECK_EQ(mux_loop_active(&loop), 0);
    loop_close(&loop);
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
