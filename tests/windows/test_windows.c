/* SPDX-License-Identifier: MIT */
/* What the Windows build does differently, stated as cases (built for Windows only). */
#include "harness.h"
#include "http_fixture.h"
#include "platform/win.h"

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
    char shortp[512];
    DWORD n = GetShortPathNameA(path, shortp, sizeof shortp);
    CHECK(n > 0 && n < sizeof shortp);
    const char *sn = strrchr(shortp, '\\') ? strrchr(shortp, '\\') + 1 : strrchr(shortp, '/') + 1;
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
