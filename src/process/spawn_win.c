/* SPDX-License-Identifier: MIT */
/* Child processes on Windows: mux_spawn with CreateProcessW, the exit through a child watcher
 * on the process (child_win.c) (POSIX: spawn.c).
 *
 * What is odd about Windows here, and what this file does about it:
 * - A program gets one command line, not an argv: the C runtime of the child splits it again
 *   (the MSVCRT rules: white space separates, double quotes group, backslashes are literal
 *   except before a double quote, where 2n backslashes and a quote are n backslashes and a
 *   grouping quote, and 2n+1 are n and a literal quote). Each argument is quoted so that it
 *   comes back as given: one without white space or quotes, as it is; any other in quotes,
 *   with the backslashes before a quote, and before the closing quote, doubled.
 * - CreateProcess searches for a bare name in the parent's own directory, the current one and
 *   the system's before PATH, and appends ".exe" itself; a program that does not exist would
 *   be found out only by its failure. So the file is found here first, as posix_spawnp does:
 *   a name without a separator in the directories of the parent's PATH, a path as given; each
 *   as it is, then with ".com" and ".exe" when it has no extension (the two kinds of program
 *   CreateProcess starts itself; PATHEXT's others are scripts, which it does not). Nothing
 *   found is -ENOENT before any child exists, as libuv reports it; CreateProcess gets the
 *   full name, and searches nothing.
 * - The environment is one block of UTF-16 "NAME=value" strings sorted by name, without
 *   regard to case, as Windows keeps it (a child's GetEnvironmentVariable relies on the
 *   order). A program without SYSTEMROOT cannot load Winsock, so the parent's SYSTEMROOT and
 *   SYSTEMDRIVE are added when the given environment lacks them, as libuv adds its list.
 * - Standard handles are inherited, and inheritance is a flag of the handle, process-wide:
 *   another thread's CreateProcess with inheritance on takes every inheritable handle of the
 *   process, a pipe's write end too, whose reader then never sees its end. So the handles a
 *   child is to get are made inheritable copies (DuplicateHandle), given to it in a
 *   PROC_THREAD_ATTRIBUTE_HANDLE_LIST (which keeps every other handle out of it), and closed
 *   once it runs; and the library's spawns hold a lock from the copies to their close, for
 *   the systems that ignore the list (Wine's CreateProcess takes every inheritable handle).
 * - A slot closed in the child is no handle at all (NULL in STARTUPINFO), as a closed
 *   descriptor is on POSIX, where libuv gives the NUL device.
 * - A slot connected to a stream. Where the loop's backend drives streams on pipes (iocp), it
 *   is what libuv makes: a named pipe of a unique name (\\.\pipe\iomux-<pid>-<count>), byte
 *   mode, one instance, remote clients refused; its server end, duplex and overlapped, is
 *   the parent's stream, and its client end, opened without the overlapped attribute (the
 *   child's ReadFile and WriteFile block), is the child's: to read from for stdin, to write
 *   to for stdout and stderr, as libuv gives it. select() cannot wait for a pipe at all, so
 *   on the select backend the slot is one side of a loopback TCP connection instead, made
 *   without the overlapped attribute and blocking: such a socket is a handle a program can
 *   ReadFile and WriteFile as it would a pipe (Winsock's base provider, and Wine, serve both;
 *   a socket behind a layered provider, an LSP, is no such handle: docs/process.md says so),
 *   and the parent's end is an ordinary overlapped, non-blocking socket, opened as the
 *   stream. The choice is made in one place, mux_spawn (mux__stream_pipes).
 * - No signals. mux_process_kill maps as libuv does: SIGTERM, SIGKILL, SIGINT and SIGQUIT
 *   end the process (TerminateProcess, exit code 1), and the exit is then reported as killed
 *   by that signal; 0 checks that it still runs; any other number is -ENOSYS.
 * - No process groups either. What ends a process and everything it started is a job object:
 *   a MUX_SPAWN_PROCESS_GROUP child is started suspended, put in a job of its own (which the
 *   processes it starts join), and then let run, so that nothing it starts escapes the job;
 *   a negative signal ends the whole job (TerminateJobObject). The job is not set to kill on
 *   its close: what the child started outlives the handle, as a POSIX group outlives its
 *   leader.
 * - The exit comes through a child watcher on the process (child_win.c: a wait registered on
 *   it wakes the loop), which reports the exit code. The handle CreateProcess gave is kept
 *   until then, so the id cannot go to another process while the handle is active.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <winsock2.h>
#include <windows.h>

#include "internal.h"
#include "iomux/process.h"
#include "process/process.h"
#include "platform/win.h"
#include "stream/stream.h"

#ifndef SIGKILL
#define SIGKILL 9 /* the numbers the C runtime of mingw-w64 does not name */
#endif
#ifndef SIGQUIT
#define SIGQUIT 3
#endif

enum { MUX__CMDLINE_MAX = 32767 }; /* CreateProcess's limit, in UTF-16 units */

/* ---- the exit ---------------------------------------------------------------------- */

/* Closes the process's handle and its job's. */
static void mux__process_release(mux_process_t *p)
{
    CloseHandle((HANDLE)p->handle_);
    if (p->job_)
        CloseHandle(p->job_);
    p->handle_ = 0;
    p->job_ = NULL;
}

static void mux__process_child_cb(mux_loop_t *pub, mux_child_t *w, int pid, int code)
{
    mux_process_t *p = mux__container_of(w, mux_process_t, child_);
    (void)pub;
    (void)pid;
    mux__process_release(p);
    if (p->signal_ != 0)
        mux__process_ended(p, 0, p->signal_); /* ended by mux_process_kill */
    else
        mux__process_ended(p, code, 0);
}

/* ---- strings ------------------------------------------------------------------------ */

/* `s` (UTF-8) as a new UTF-16 string, or NULL (*err: -ENOMEM, -EINVAL for bad UTF-8). */
static wchar_t *mux__wide(const char *s, int *err)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    if (n <= 0) {
        *err = -EINVAL;
        return NULL;
    }
    wchar_t *w = malloc((size_t)n * sizeof *w);
    if (!w || MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
        free(w);
        *err = w ? -EINVAL : -ENOMEM;
        return NULL;
    }
    return w;
}

/* Appends `arg` to `out` (at *n, room checked by the caller: 2 * len + 3), quoted so that the
 * MSVCRT rules split it back as it is. */
static void mux__quote_arg(wchar_t *out, size_t *n, const wchar_t *arg)
{
    size_t k = *n;
    if (*arg && !wcspbrk(arg, L" \t\n\v\"")) {
        size_t len = wcslen(arg);
        memcpy(out + k, arg, len * sizeof *arg);
        *n = k + len;
        return;
    }
    out[k++] = L'"';
    for (const wchar_t *c = arg;; c++) {
        size_t slashes = 0;
        while (*c == L'\\') {
            slashes++;
            c++;
        }
        if (*c == L'\0' || *c == L'"') {
            /* Backslashes before a quote, or before the closing one, count double; a quote
             * of the argument's own is escaped. */
            for (size_t i = 0; i < 2 * slashes; i++)
                out[k++] = L'\\';
            if (*c == L'\0')
                break;
            out[k++] = L'\\';
            out[k++] = L'"';
        } else {
            for (size_t i = 0; i < slashes; i++)
                out[k++] = L'\\';
            out[k++] = *c;
        }
    }
    out[k++] = L'"';
    *n = k;
}

/* The command line of `argv`, or NULL (*err). */
static wchar_t *mux__cmdline(char *const *argv, int *err)
{
    size_t room = 1, n = 0;
    int count = 0;
    while (argv[count])
        count++;
    wchar_t **w = calloc((size_t)count + 1, sizeof *w);
    if (!w) {
        *err = -ENOMEM;
        return NULL;
    }
    wchar_t *out = NULL;
    for (int i = 0; i < count; i++) {
        if (!(w[i] = mux__wide(argv[i], err)))
            goto done;
        room += 2 * wcslen(w[i]) + 3;
    }
    if (!(out = malloc(room * sizeof *out))) {
        *err = -ENOMEM;
        goto done;
    }
    for (int i = 0; i < count; i++) {
        if (i > 0)
            out[n++] = L' ';
        mux__quote_arg(out, &n, w[i]);
    }
    out[n] = L'\0';
    if (n >= MUX__CMDLINE_MAX) {
        free(out);
        out = NULL;
        *err = -E2BIG;
    }
done:
    for (int i = 0; i < count; i++)
        free(w[i]);
    free(w);
    return out;
}

/* Windows' order of an environment block: by name, without regard to case. */
static int mux__env_cmp(const void *a, const void *b)
{
    const wchar_t *x = *(const wchar_t *const *)a, *y = *(const wchar_t *const *)b;
    const wchar_t *xe = wcschr(x + 1, L'='), *ye = wcschr(y + 1, L'='); /* "=C:=..." names */
    int xl = xe ? (int)(xe - x) : (int)wcslen(x), yl = ye ? (int)(ye - y) : (int)wcslen(y);
    return CompareStringOrdinal(x, xl, y, yl, TRUE) - CSTR_EQUAL;
}

/* Whether `vars` (count `n`) has variable `name` (UTF-16, with its '='). */
static int mux__env_has(wchar_t **vars, int n, const wchar_t *name)
{
    int len = (int)wcslen(name);
    for (int i = 0; i < n; i++)
        if (wcslen(vars[i]) >= (size_t)len &&
            CompareStringOrdinal(vars[i], len, name, len, TRUE) == CSTR_EQUAL)
            return 1;
    return 0;
}

/* The environment block of `env` (plus the parent's SYSTEMROOT and SYSTEMDRIVE), or NULL
 * (*err). */
static wchar_t *mux__envblock(char *const *env, int *err)
{
    static const wchar_t *const needed[] = {L"SYSTEMROOT=", L"SYSTEMDRIVE="};
    int count = 0, n = 0;
    while (env[count])
        count++;
    wchar_t **vars = calloc((size_t)count + 2, sizeof *vars), *block = NULL;
    if (!vars) {
        *err = -ENOMEM;
        return NULL;
    }
    for (; n < count; n++)
        if (!(vars[n] = mux__wide(env[n], err)))
            goto done;
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        wchar_t name[16], value[MAX_PATH];
        size_t len = wcslen(needed[i]);
        memcpy(name, needed[i], (len - 1) * sizeof *name);
        name[len - 1] = L'\0';
        DWORD got = GetEnvironmentVariableW(name, value, MAX_PATH);
        if (got == 0 || got >= MAX_PATH || mux__env_has(vars, n, needed[i]))
            continue;
        if (!(vars[n] = malloc((len + got + 1) * sizeof *vars[n]))) {
            *err = -ENOMEM;
            goto done;
        }
        memcpy(vars[n], needed[i], len * sizeof *name);
        memcpy(vars[n] + len, value, ((size_t)got + 1) * sizeof *value);
        n++;
    }
    qsort(vars, (size_t)n, sizeof *vars, mux__env_cmp);
    size_t total = 2;
    for (int i = 0; i < n; i++)
        total += wcslen(vars[i]) + 1;
    if (!(block = malloc(total * sizeof *block))) {
        *err = -ENOMEM;
        goto done;
    }
    wchar_t *at = block;
    for (int i = 0; i < n; i++) {
        size_t len = wcslen(vars[i]) + 1;
        memcpy(at, vars[i], len * sizeof *at);
        at += len;
    }
    *at++ = L'\0';
    if (n == 0)
        *at = L'\0'; /* an empty block is two NULs */
done:
    for (int i = 0; i < n; i++)
        free(vars[i]);
    free(vars);
    return block;
}

/* ---- finding the program -------------------------------------------------------------- */

/* `dir` (length `dlen`, may be 0) joined to `name`, found as it is or with ".com" or ".exe"
 * when the name has no extension: a new string, or NULL, with *err -EACCES where the name as
 * it is names a directory (execve's answer for one), else left as it was. */
static wchar_t *mux__try_program(const wchar_t *dir, size_t dlen, const wchar_t *name, int *err)
{
    static const wchar_t *const ext[] = {L"", L".com", L".exe"};
    const wchar_t *base = name + wcslen(name);
    while (base > name && base[-1] != L'\\' && base[-1] != L'/' && base[-1] != L':')
        base--;
    int has_ext = wcschr(base, L'.') != NULL;
    size_t nlen = wcslen(name);
    wchar_t *path = malloc((dlen + nlen + 6) * sizeof *path);
    if (!path) {
        *err = -ENOMEM;
        return NULL;
    }
    size_t k = 0;
    if (dlen > 0) {
        memcpy(path, dir, dlen * sizeof *dir);
        k = dlen;
        if (dir[dlen - 1] != L'\\' && dir[dlen - 1] != L'/')
            path[k++] = L'\\';
    }
    memcpy(path + k, name, nlen * sizeof *name);
    k += nlen;
    for (size_t i = 0; i < (has_ext ? 1u : 3u); i++) {
        wcscpy(path + k, ext[i]);
        DWORD a = GetFileAttributesW(path);
        if (a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY))
            return path;
        if (a != INVALID_FILE_ATTRIBUTES && i == 0)
            *err = -EACCES;
    }
    free(path);
    return NULL;
}

/* The program `file` names, as a full name for CreateProcess: a new string, or NULL (*err:
 * -ENOENT when there is none, -EACCES when what there is was a directory: as execvp, the
 * search of PATH goes on past one). */
static wchar_t *mux__find_program(const char *file, int *err)
{
    wchar_t *name = mux__wide(file, err), *found = NULL;
    if (!name)
        return NULL;
    *err = -ENOENT;
    if (wcspbrk(name, L"\\/:")) {
        found = mux__try_program(NULL, 0, name, err);
    } else {
        DWORD len = GetEnvironmentVariableW(L"PATH", NULL, 0);
        wchar_t *path = len ? malloc(len * sizeof *path) : NULL;
        if (len && !path)
            *err = -ENOMEM;
        if (path && GetEnvironmentVariableW(L"PATH", path, len) < len) {
            for (wchar_t *dir = path, *end; !found && *err != -ENOMEM; dir = end + 1) {
                end = dir + wcscspn(dir, L";");
                wchar_t *d = dir;
                size_t dlen = (size_t)(end - dir);
                if (dlen >= 2 && d[0] == L'"' && d[dlen - 1] == L'"') { /* "C:\a;b" */
                    d++;
                    dlen -= 2;
                }
                if (dlen > 0)
                    found = mux__try_program(d, dlen, name, err);
                if (*end == L'\0')
                    break;
            }
        }
        free(path);
    }
    free(name);
    return found;
}

/* ---- the standard handles ------------------------------------------------------------ */

struct mux__spawn {
    HANDLE child[3];  /* inheritable handles for the child's slots, closed once it runs */
    int sock[3];      /* child[i] is a socket (closesocket, not CloseHandle) */
    SOCKET parent[3]; /* the parent's end of a stream slot, or INVALID_SOCKET */
    int pipe[3];      /* parent[i] is a pipe's handle (CloseHandle, not closesocket) */
    int pipes;        /* stream slots are pipes: the loop's streams run on them */
};

/* An inheritable copy of `h` in *out. 0 or -errno. */
static int mux__dup_inheritable(HANDLE h, HANDLE *out)
{
    HANDLE self = GetCurrentProcess();
    if (!DuplicateHandle(self, h, self, out, 0, TRUE, DUPLICATE_SAME_ACCESS)) {
        *out = NULL;
        DWORD e = GetLastError();
        return e == ERROR_INVALID_HANDLE ? -EBADF : mux__win_errno(e);
    }
    return 0;
}

/* A pipe for stream slot `i`: its server end the parent's, its client end the child's. */
static int mux__spawn_pipe(struct mux__spawn *sp, int i)
{
    HANDLE p, c;
    int err = mux__win_stdio_pipe(&p, &c, i == 0);
    if (err != 0)
        return err;
    if (!SetHandleInformation(c, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT)) {
        err = mux__win_errno(GetLastError());
        CloseHandle(c);
        CloseHandle(p);
        return err;
    }
    sp->child[i] = c;
    sp->parent[i] = (SOCKET)p;
    sp->pipe[i] = 1;
    return 0;
}

/* The handle slot `i` gives the child, in sp->child[i]. 0 or -errno. */
static int mux__spawn_slot(struct mux__spawn *sp, const mux_stdio_t *s, int i)
{
    static const DWORD std[3] = {STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE};
    switch (s->kind) {
    case MUX_STDIO_INHERIT: {
        HANDLE h = GetStdHandle(std[i]);
        if (h == NULL || h == INVALID_HANDLE_VALUE)
            return 0; /* the parent has none: neither has the child */
        return mux__dup_inheritable(h, &sp->child[i]);
    }
    case MUX_STDIO_STREAM: {
        if (sp->pipes)
            return mux__spawn_pipe(sp, i);
        SOCKET c;
        int err = mux__win_stdio_pair(&sp->parent[i], &c);
        if (err != 0)
            return err;
        if (!SetHandleInformation((HANDLE)c, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT)) {
            err = mux__win_errno(GetLastError());
            closesocket(c);
            return err;
        }
        sp->child[i] = (HANDLE)c;
        sp->sock[i] = 1;
        return 0;
    }
    case MUX_STDIO_FD: /* a handle's value, as the API takes sockets on Windows */
        return mux__dup_inheritable((HANDLE)(uintptr_t)(unsigned)s->fd, &sp->child[i]);
    default:
        return 0; /* closed: no handle */
    }
}

static void mux__spawn_cleanup(struct mux__spawn *sp, int close_parent)
{
    for (int i = 0; i < 3; i++) {
        if (sp->child[i] && sp->sock[i])
            closesocket((SOCKET)sp->child[i]);
        else if (sp->child[i])
            CloseHandle(sp->child[i]);
        sp->child[i] = NULL;
        if (close_parent && sp->parent[i] != INVALID_SOCKET && sp->pipe[i])
            CloseHandle((HANDLE)sp->parent[i]);
        else if (close_parent && sp->parent[i] != INVALID_SOCKET)
            closesocket(sp->parent[i]);
    }
}

/* ---- starting ------------------------------------------------------------------------ */

/* What CreateProcessW takes, made from the options. */
struct mux__spawn_args {
    wchar_t *app, *cmd, *env, *cwd;
};

static void mux__spawn_args_free(struct mux__spawn_args *a)
{
    free(a->app);
    free(a->cmd);
    free(a->env);
    free(a->cwd);
}

static int mux__spawn_args(struct mux__spawn_args *a, const mux_spawn_options_t *o)
{
    int err = 0;
    memset(a, 0, sizeof *a);
    char *const argv0[] = {(char *)o->file, NULL};
    for (int i = 0; i < 3; i++) { /* a handle that is not open: -EBADF, as POSIX's dup */
        DWORD f;
        if (o->stdio[i].kind == MUX_STDIO_FD &&
            !GetHandleInformation((HANDLE)(uintptr_t)(unsigned)o->stdio[i].fd, &f))
            return -EBADF;
    }
    if (o->cwd) {
        if (!(a->cwd = mux__wide(o->cwd, &err)))
            return err;
        DWORD at = GetFileAttributesW(a->cwd);
        if (at == INVALID_FILE_ATTRIBUTES)
            return -ENOENT;
        if (!(at & FILE_ATTRIBUTE_DIRECTORY))
            return -ENOTDIR;
    }
    if (!(a->app = mux__find_program(o->file, &err)))
        return err;
    if (!(a->cmd = mux__cmdline(o->argv ? o->argv : argv0, &err)))
        return err;
    if (o->env && !(a->env = mux__envblock(o->env, &err)))
        return err;
    return 0;
}

/* The errors of CreateProcess that mux__win_errno does not know. */
static int mux__spawn_errno(DWORD e)
{
    switch (e) {
    case ERROR_BAD_EXE_FORMAT:
    case ERROR_EXE_MACHINE_TYPE_MISMATCH:
        return -ENOEXEC;
    case ERROR_DIRECTORY:
        return -ENOTDIR;
    case ERROR_FILENAME_EXCED_RANGE:
        return -ENAMETOOLONG;
    default:
        return mux__win_errno(e);
    }
}

/* A child that started but cannot be kept (no job, no watch): it is ended at once. */
static void mux__spawn_undo(HANDLE proc)
{
    TerminateProcess(proc, 1);
    WaitForSingleObject(proc, INFINITE);
    CloseHandle(proc);
}

/* Puts the suspended child in a job of its own (*job), and lets it run. 0, or -errno with the
 * child ended and its handles closed. */
static int mux__spawn_job(PROCESS_INFORMATION *pi, HANDLE *job)
{
    int err = 0;
    *job = CreateJobObjectW(NULL, NULL);
    if (!*job || !AssignProcessToJobObject(*job, pi->hProcess) ||
        ResumeThread(pi->hThread) == (DWORD)-1)
        err = mux__win_errno(GetLastError());
    if (err == 0)
        return 0;
    if (*job)
        CloseHandle(*job);
    *job = NULL;
    CloseHandle(pi->hThread);
    mux__spawn_undo(pi->hProcess);
    return err;
}

/* One spawn at a time makes inheritable handles: see the top of the file. */
static SRWLOCK mux__spawn_lock = SRWLOCK_INIT;

/* Starts the child, its standard handles made under the lock. 0 (pi and, for a group, *job
 * filled in, the parents' ends of the stream slots left in sp->parent) or -errno, with
 * nothing left open. */
static int mux__spawn_run(struct mux__spawn *sp, const mux_spawn_options_t *o,
                          const struct mux__spawn_args *a, PROCESS_INFORMATION *pi, HANDLE *job)
{
    STARTUPINFOEXW si;
    memset(&si, 0, sizeof si);
    si.StartupInfo.cb = sizeof si.StartupInfo;
    si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    HANDLE list[3];
    DWORD nlist = 0;
    union {
        void *align;
        char bytes[128]; /* a list of one attribute: 48 bytes on x64 */
    } attrs;
    SIZE_T asize = sizeof attrs;
    int err = 0;
    AcquireSRWLockExclusive(&mux__spawn_lock);
    for (int i = 0; i < 3 && err == 0; i++)
        err = mux__spawn_slot(sp, &o->stdio[i], i);
    for (int i = 0; i < 3 && err == 0; i++)
        if (sp->child[i])
            list[nlist++] = sp->child[i];
    si.StartupInfo.hStdInput = sp->child[0];
    si.StartupInfo.hStdOutput = sp->child[1];
    si.StartupInfo.hStdError = sp->child[2];
    DWORD flags = CREATE_UNICODE_ENVIRONMENT;
    if (err == 0 && nlist > 0 &&
        InitializeProcThreadAttributeList((LPPROC_THREAD_ATTRIBUTE_LIST)attrs.bytes, 1, 0,
                                          &asize)) {
        si.lpAttributeList = (LPPROC_THREAD_ATTRIBUTE_LIST)attrs.bytes;
        if (UpdateProcThreadAttribute(si.lpAttributeList, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST,
                                      list, nlist * sizeof *list, NULL, NULL)) {
            flags |= EXTENDED_STARTUPINFO_PRESENT;
            si.StartupInfo.cb = sizeof si;
        }
    }
    if (o->flags & MUX_SPAWN_PROCESS_GROUP)
        flags |= CREATE_SUSPENDED; /* let run once in its job */
    if (err == 0 && !CreateProcessW(a->app, a->cmd, NULL, NULL, nlist > 0, flags, a->env, a->cwd,
                                    &si.StartupInfo, pi))
        err = mux__spawn_errno(GetLastError());
    if (si.lpAttributeList)
        DeleteProcThreadAttributeList(si.lpAttributeList);
    mux__spawn_cleanup(sp, err != 0); /* the child's copies, before another spawn runs */
    ReleaseSRWLockExclusive(&mux__spawn_lock);
    if (err == 0 && (o->flags & MUX_SPAWN_PROCESS_GROUP) && (err = mux__spawn_job(pi, job)) != 0)
        mux__spawn_cleanup(sp, 1); /* the parents' ends of the stream slots */
    if (err == 0)
        CloseHandle(pi->hThread);
    return err;
}

MUX_EXPORT int mux_spawn(mux_loop_t *pub, mux_process_t *p, const mux_spawn_options_t *opts,
                         mux_exit_cb cb)
{
    struct mux__loop *loop = mux__loop_of(pub);
    int err;
    struct mux__handles *procs = mux__spawn_begin(loop, p, opts, cb, &err);
    if (!procs)
        return err;
    struct mux__spawn_args args;
    err = mux__spawn_args(&args, opts);
    struct mux__spawn sp;
    for (int i = 0; i < 3; i++) {
        sp.child[i] = NULL;
        sp.sock[i] = sp.pipe[i] = 0;
        sp.parent[i] = INVALID_SOCKET;
    }
    /* The one place where the kind of a stream slot is chosen: a named pipe where the loop's
     * backend runs streams on pipes (iocp), else a socket pair (select cannot wait for a pipe). */
    sp.pipes = mux__stream_pipes(loop);
    PROCESS_INFORMATION pi;
    HANDLE job = NULL;
    if (err == 0)
        err = mux__spawn_run(&sp, opts, &args, &pi, &job);
    mux__spawn_args_free(&args);
    if (err != 0)
        return err;
    mux__process_reset(p, loop, cb, (int)pi.dwProcessId);
    p->handle_ = (intptr_t)pi.hProcess;
    p->job_ = job;
    mux_child_init(&p->child_, mux__process_child_cb, p->pid_);
    p->child_.h_.flags |= MUX__W_NOREF; /* a part of the handle, which counts itself */
    err = mux_child_start(pub, &p->child_);
    if (err == 0)
        err = mux__spawn_open_streams(loop, opts, sp.parent, sp.pipe);
    mux__spawn_cleanup(&sp, 1);
    if (err != 0) { /* rare: the loop's tables could not grow, or no wait could be registered */
        mux__spawn_close_streams(opts);
        mux_child_stop(pub, &p->child_);
        if (job)
            TerminateJobObject(job, 1);
        mux__spawn_undo(pi.hProcess);
        if (job)
            CloseHandle(job);
        p->handle_ = 0;
        p->job_ = NULL;
        return err;
    }
    mux__spawn_done(loop, procs, p, opts);
    return 0;
}

MUX_EXPORT int mux_process_kill(mux_process_t *p, int signum)
{
    if (!p || signum <= -MUX__NSIG || signum >= MUX__NSIG)
        return -EINVAL;
    int err = mux__process_signallable(p, signum);
    if (err != 0)
        return err;
    HANDLE h = (HANDLE)p->handle_;
    switch (signum < 0 ? -signum : signum) {
    case 0:
        return WaitForSingleObject(h, 0) == WAIT_OBJECT_0 ? -ESRCH : 0;
    case SIGTERM:
    case SIGKILL:
    case SIGINT:
    case SIGQUIT:
        if (signum < 0 && WaitForSingleObject(h, 0) == WAIT_OBJECT_0)
            return -ESRCH; /* the job would end without it: its exit is its own */
        if (signum < 0 ? TerminateJobObject(p->job_, 1) : TerminateProcess(h, 1)) {
            if (p->signal_ == 0)
                p->signal_ = signum < 0 ? -signum : signum;
            return 0;
        }
        /* It has ended, or is ending: TerminateProcess is refused then. */
        DWORD e = GetLastError(), code = 0;
        if (e == ERROR_ACCESS_DENIED && GetExitCodeProcess(h, &code) && code != STILL_ACTIVE)
            return -ESRCH;
        return mux__win_errno(e);
    default:
        return -ENOSYS;
    }
}

MUX_EXPORT int mux_process_detach(mux_process_t *p)
{
    if (!p || (p->flags_ & MUX__P_STATE) != MUX__P_RUNNING)
        return -EINVAL;
    struct mux__loop *loop = p->loop_;
    mux_child_stop(loop->pub, &p->child_);
    mux__process_release(p);
    mux__handle_close(loop, &p->link_, &p->flags_);
    p->flags_ = MUX__P_IDLE;
    return 0;
}

MUX_EXPORT int mux_process_pid(const mux_process_t *p)
{
    if (!p || (p->flags_ & MUX__P_STATE) != MUX__P_RUNNING)
        return -EINVAL;
    return p->pid_;
}
