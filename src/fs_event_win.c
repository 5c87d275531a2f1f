/* SPDX-License-Identifier: MIT */
/* fs_event watchers on Windows: ReadDirectoryChangesW on directory handles.
 *
 * What is odd about Windows here, and what this file does about it:
 *   - Only a directory can be watched, and a read tells what happened to its entries. A file is
 *     watched by watching its directory, the events of other names passed by; its removal, or
 *     a rename away from its name or onto it, is MUX_FS_GONE. A watched directory's own removal
 *     is told by its parent: a third read on the parent, for the directory's name alone (the
 *     read on the directory itself may end with an error then, or with nothing at all: then
 *     whether the path is still there is looked at).
 *   - A read says FILE_ACTION_MODIFIED for a write and for an attribute change alike; which one
 *     depends on the filter it was given. So there are two reads per directory: one for names,
 *     sizes and write times (MUX_FS_CHANGE), one for attributes and security (MUX_FS_ATTRIB).
 *   - A read keeps recording into the system's buffer between two calls; when that overflows,
 *     the next read completes with ERROR_NOTIFY_ENUM_DIR, or with no bytes: MUX_FS_OVERFLOW.
 *   - How the loop learns a read completed: one mechanism for both backends. Each read's
 *     OVERLAPPED has an event, and a wait registered on that event (RegisterWaitForSingleObject,
 *     the system's pool) marks the read done and wakes the loop through an async of its own. The
 *     select backend has no completion port to receive the completions, and on iocp the port's
 *     packets are the backend's operations; the wait costs one pool thread per 63 reads, and
 *     the reads are re-issued and their buffers read on the loop's thread alone.
 *   - A stop takes the waits off (waiting for a callback running at that moment), cancels the
 *     reads (CancelIoEx) and waits for their end before the buffers are freed: nothing touches
 *     a watcher once its stop returned.
 *   - Watchers of one path share its reads; the events of one iteration are coalesced per
 *     watch and name, as on Linux. A read that completed is re-issued at once and, when it
 *     completes again meanwhile, read again in the same iteration (up to a budget).
 *   - Names come as UTF-16 and are given as UTF-8. No fork: nothing to redo after one.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <windows.h>

#include "internal.h"
#include "platform/win.h"

enum { MUX__FSR_CONTENT, MUX__FSR_META, MUX__FSR_SELF };
#define MUX__FSR_CONTENT_FILTER                                                                 \
    (FILE_NOTIFY_CHANGE_FILE_NAME | FILE_NOTIFY_CHANGE_DIR_NAME | FILE_NOTIFY_CHANGE_SIZE |    \
     FILE_NOTIFY_CHANGE_LAST_WRITE | FILE_NOTIFY_CHANGE_CREATION)
#define MUX__FSR_META_FILTER (FILE_NOTIFY_CHANGE_ATTRIBUTES | FILE_NOTIFY_CHANGE_SECURITY)
#define MUX__FSR_SELF_FILTER (FILE_NOTIFY_CHANGE_DIR_NAME)
#define MUX__FSR_BIG 65536u   /* the content read's buffer: the most a network share takes */
#define MUX__FSR_SMALL 16384u /* the others' */
#define MUX__FSR_ROUNDS 16    /* reads of one read per iteration at most */

struct mux__fsn;
struct mux__fsw;

/* One outstanding ReadDirectoryChangesW. */
struct mux__fsr {
    struct mux__fsw *watch;
    HANDLE dir, event, wait;
    OVERLAPPED ov;
    DWORD filter, size;
    int role, issued;
    volatile LONG done; /* set by the wait's callback, taken by the loop */
    void *buf;          /* DWORD-aligned (malloc's) */
};

/* The reads of one watched path, and its watchers. */
struct mux__fsw {
    struct mux__fsw *next;
    struct mux__fsn *fsn;
    uint32_t id;
    int is_file;
    WCHAR *path; /* full */
    WCHAR *name; /* its last component: the file's name, or the directory's in its parent */
    struct mux__fsr r[3];
    int nr;
    mux_fs_event_t *head;
};

/* One coalesced event of an iteration. */
struct mux__fse {
    uint32_t watch, hash, slot;
    int status;
    size_t name; /* offset in the names, or SIZE_MAX: the watched path's own name */
    unsigned events;
};

struct mux__fsn {
    mux_async_t async; /* a part of the machinery (MUX__W_NOREF), not counted */
    struct mux__fsw *watches;
    uint32_t next_id;
    mux_fs_event_t *next; /* the delivery's next watcher: a stop of it moves this on */
    struct mux__fse *ev;
    uint32_t nev, evcap;
    uint32_t *slot; /* index + 1 of an event, by (watch, name) hash; twice evcap */
    char *names;
    size_t nlen, ncap;
};

/* ---- paths ------------------------------------------------------------------------------ */

static WCHAR *mux__fs_wide(const char *s)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    WCHAR *w = n > 0 ? malloc((size_t)n * sizeof *w) : NULL;
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
        free(w);
        w = NULL;
    }
    return w;
}

/* The full path of `path` (its separators Windows'), without a trailing separator unless a
 * root's; NULL without memory, or for a path Windows cannot name. */
static WCHAR *mux__fs_full(const char *path, int *err)
{
    *err = -ENOMEM;
    WCHAR *w = mux__fs_wide(path);
    if (!w) {
        *err = GetLastError() == ERROR_NO_UNICODE_TRANSLATION ? -EINVAL : -ENOMEM;
        return NULL;
    }
    DWORD n = GetFullPathNameW(w, 0, NULL, NULL);
    WCHAR *full = n ? malloc(((size_t)n + 1) * sizeof *full) : NULL;
    if (full && GetFullPathNameW(w, n, full, NULL) >= n) {
        free(full);
        full = NULL;
    }
    free(w);
    if (!full) {
        *err = n ? -ENOMEM : mux__win_errno(GetLastError());
        return NULL;
    }
    size_t len = wcslen(full);
    while (len > 3 && (full[len - 1] == L'\\' || full[len - 1] == L'/'))
        full[--len] = 0;
    return full;
}

/* Why `full` cannot be opened: -ENOTDIR when a component before its last is a file, else the
 * system's error. */
static int mux__fs_open_error(const WCHAR *full, DWORD err)
{
    if (err != ERROR_PATH_NOT_FOUND && err != ERROR_DIRECTORY)
        return mux__win_errno(err);
    WCHAR *p = _wcsdup(full);
    if (!p)
        return -ENOMEM;
    int r = -ENOENT;
    for (WCHAR *sep; (sep = wcsrchr(p, L'\\')) != NULL && sep > p;) {
        *sep = 0;
        DWORD at = GetFileAttributesW(p);
        if (at != INVALID_FILE_ATTRIBUTES) {
            r = (at & FILE_ATTRIBUTE_DIRECTORY) ? -ENOENT : -ENOTDIR;
            break;
        }
    }
    free(p);
    return r;
}

static HANDLE mux__fs_open_dir(const WCHAR *dir)
{
    return CreateFileW(dir, FILE_LIST_DIRECTORY,
                       FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                       FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OVERLAPPED, NULL);
}

/* The last path component of a watcher's path (either separator): the name of an event on
 * the watched path itself. */
static const char *mux__fs_base(const mux_fs_event_t *w)
{
    const char *p = w->path_ + strlen(w->path_);
    while (p > w->path_ && (p[-1] == '/' || p[-1] == '\\'))
        p--;
    const char *end = p;
    while (p > w->path_ && p[-1] != '/' && p[-1] != '\\' && p[-1] != ':')
        p--;
    return p < end ? p : w->path_;
}

/* ---- the reads ---------------------------------------------------------------------------- */

static VOID CALLBACK mux__fsr_signalled(PVOID arg, BOOLEAN timed_out)
{
    struct mux__fsr *r = arg;
    (void)timed_out; /* INFINITE: never */
    InterlockedExchange(&r->done, 1);
    mux_async_send(&r->watch->fsn->async);
}

/* Issues the read again; 0, or the system's error. */
static DWORD mux__fsr_issue(struct mux__fsr *r)
{
    memset(&r->ov, 0, sizeof r->ov);
    r->ov.hEvent = r->event;
    if (!ReadDirectoryChangesW(r->dir, r->buf, r->size, FALSE, r->filter, NULL, &r->ov, NULL))
        return GetLastError();
    r->issued = 1;
    return 0;
}

/* Ends a read: its wait off, its request cancelled and waited for, its handles closed. */
static void mux__fsr_end(struct mux__fsr *r)
{
    if (r->wait)
        UnregisterWaitEx(r->wait, INVALID_HANDLE_VALUE);
    if (r->issued) {
        DWORD n;
        CancelIoEx(r->dir, &r->ov);
        GetOverlappedResult(r->dir, &r->ov, &n, TRUE);
    }
    if (r->event)
        CloseHandle(r->event);
    if (r->dir && r->dir != INVALID_HANDLE_VALUE)
        CloseHandle(r->dir);
    free(r->buf);
    memset(r, 0, sizeof *r);
}

/* Opens `dir` and starts reading it for `role`. 0 or a negative errno. */
static int mux__fsr_begin(struct mux__fsw *f, struct mux__fsr *r, const WCHAR *dir, int role)
{
    static const DWORD filters[] = {MUX__FSR_CONTENT_FILTER, MUX__FSR_META_FILTER,
                                    MUX__FSR_SELF_FILTER};
    r->watch = f;
    r->role = role;
    r->filter = filters[role];
    r->size = role == MUX__FSR_CONTENT ? MUX__FSR_BIG : MUX__FSR_SMALL;
    r->dir = mux__fs_open_dir(dir);
    if (r->dir == INVALID_HANDLE_VALUE) {
        int err = mux__fs_open_error(dir, GetLastError());
        r->dir = NULL;
        return err;
    }
    r->buf = malloc(r->size);
    r->event = CreateEventW(NULL, FALSE, FALSE, NULL); /* auto-reset: the wait takes it */
    if (!r->buf || !r->event)
        return -ENOMEM;
    DWORD e = mux__fsr_issue(r);
    if (e != 0)
        return mux__win_errno(e);
    if (!RegisterWaitForSingleObject(&r->wait, r->event, mux__fsr_signalled, r, INFINITE,
                                     WT_EXECUTEINWAITTHREAD)) {
        r->wait = NULL;
        return mux__win_errno(GetLastError());
    }
    return 0;
}

/* ---- the watches -------------------------------------------------------------------------- */

static void mux__fsw_free(struct mux__fsw *f)
{
    for (int i = 0; i < 3; i++)
        if (f->r[i].watch)
            mux__fsr_end(&f->r[i]);
    free(f->path);
    free(f);
}

/* The watch of `full`, started: its reads on the directory, or on the file's directory. */
static int mux__fsw_open(struct mux__fsn *n, WCHAR *full, struct mux__fsw **out)
{
    DWORD at = GetFileAttributesW(full);
    if (at == INVALID_FILE_ATTRIBUTES)
        return mux__fs_open_error(full, GetLastError());
    struct mux__fsw *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->fsn = n;
    f->path = full;
    f->is_file = !(at & FILE_ATTRIBUTE_DIRECTORY);
    WCHAR *sep = wcsrchr(full, L'\\'), *parent = NULL;
    int err = 0;
    if (sep && sep[1]) { /* a last component, in a parent: C:\\x's is C:\\ */
        size_t plen = (size_t)(sep - full);
        plen = plen == 2 && full[1] == L':' ? 3 : plen ? plen : 1;
        parent = malloc((plen + 1) * sizeof *parent);
        if (!parent)
            err = -ENOMEM;
        else
            wmemcpy(parent, full, plen), parent[plen] = 0;
        f->name = sep + 1;
    } else if (f->is_file) {
        err = -EINVAL; /* a file with no directory: nothing Windows names so */
    }
    if (err == 0 && parent && f->is_file) {
        err = mux__fsr_begin(f, &f->r[0], parent, MUX__FSR_CONTENT);
        if (err == 0)
            err = mux__fsr_begin(f, &f->r[1], parent, MUX__FSR_META);
    } else if (err == 0 && parent) {
        err = mux__fsr_begin(f, &f->r[2], parent, MUX__FSR_SELF);
    }
    free(parent);
    if (err == 0 && !f->is_file) {
        err = mux__fsr_begin(f, &f->r[0], full, MUX__FSR_CONTENT);
        if (err == 0)
            err = mux__fsr_begin(f, &f->r[1], full, MUX__FSR_META);
    }
    if (err != 0) {
        f->path = NULL; /* the caller's still */
        mux__fsw_free(f);
        return err;
    }
    f->id = ++n->next_id;
    f->next = n->watches;
    n->watches = f;
    *out = f;
    return 0;
}

static struct mux__fsw *mux__fsw_find(struct mux__fsn *n, uint32_t id)
{
    struct mux__fsw *f = n->watches;
    while (f && f->id != id)
        f = f->next;
    return f;
}

static void mux__fsw_close(struct mux__fsn *n, struct mux__fsw *f)
{
    struct mux__fsw **pp = &n->watches;
    while (*pp != f)
        pp = &(*pp)->next;
    *pp = f->next;
    mux__fsw_free(f);
}

/* Takes `w` off its watch; the watch goes with its last watcher. */
static void mux__fs_detach(struct mux__loop *loop, mux_fs_event_t *w)
{
    struct mux__fsn *n = loop->fsn;
    struct mux__fsw *f = mux__fsw_find(n, (uint32_t)w->wd_);
    if (n->next == w)
        n->next = w->next_;
    if (f) {
        mux_fs_event_t **pp = &f->head;
        while (*pp && *pp != w)
            pp = &(*pp)->next_;
        if (*pp)
            *pp = w->next_;
        if (!f->head)
            mux__fsw_close(n, f);
    }
    w->next_ = NULL;
    w->wd_ = -1;
    mux__deactivate(loop, &w->h_);
}

/* ---- the batch ---------------------------------------------------------------------------- */

static uint32_t mux__fse_hash(uint32_t watch, const char *name)
{
    uint32_t h = 2166136261u ^ watch;
    for (const char *p = name; p && *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h | 1;
}

static int mux__fse_grow(struct mux__fsn *n)
{
    uint32_t cap = n->evcap ? n->evcap * 2 : 256;
    struct mux__fse *ev = realloc(n->ev, cap * sizeof *ev);
    if (!ev)
        return -ENOMEM;
    n->ev = ev;
    uint32_t *slot = calloc((size_t)cap * 2, sizeof *slot);
    if (!slot)
        return -ENOMEM;
    free(n->slot);
    n->slot = slot;
    n->evcap = cap;
    for (uint32_t i = 0; i < n->nev; i++) { /* the index again, over the larger table */
        uint32_t k = n->ev[i].hash & (cap * 2 - 1);
        while (n->slot[k])
            k = (k + 1) & (cap * 2 - 1);
        n->slot[k] = i + 1;
        n->ev[i].slot = k;
    }
    return 0;
}

/* Adds an event to the batch, or its bits to the batch's event of the same watch and name.
 * `name` (UTF-8, NUL-terminated) is NULL for the watched path itself. -ENOMEM when the batch
 * cannot grow: the event is lost, and the watch hears an overflow instead. */
static int mux__fse_add(struct mux__fsn *n, uint32_t watch, const char *name, unsigned events,
                        int status)
{
    if (n->nev + 1 > n->evcap && mux__fse_grow(n) != 0)
        return -ENOMEM;
    uint32_t hash = mux__fse_hash(watch, name), mask = n->evcap * 2 - 1, k = hash & mask;
    for (; n->slot[k]; k = (k + 1) & mask) {
        struct mux__fse *e = &n->ev[n->slot[k] - 1];
        if (e->watch != watch || e->hash != hash)
            continue;
        const char *en = e->name == SIZE_MAX ? NULL : n->names + e->name;
        if (en == name || (en && name && strcmp(en, name) == 0)) {
            e->events |= events;
            e->status = e->status ? e->status : status;
            return 0;
        }
    }
    size_t off = SIZE_MAX;
    if (name) {
        size_t len = strlen(name) + 1;
        if (n->nlen + len > n->ncap) {
            size_t cap = n->ncap ? n->ncap * 2 : 4096;
            while (cap < n->nlen + len)
                cap *= 2;
            char *p = realloc(n->names, cap);
            if (!p)
                return -ENOMEM;
            n->names = p;
            n->ncap = cap;
        }
        memcpy(n->names + n->nlen, name, len);
        off = n->nlen;
        n->nlen += len;
    }
    n->ev[n->nev] = (struct mux__fse){watch, hash, k, status, off, events};
    n->slot[k] = ++n->nev;
    return 0;
}

static void mux__fse_clear(struct mux__fsn *n)
{
    for (uint32_t i = 0; i < n->nev; i++)
        n->slot[n->ev[i].slot] = 0;
    n->nev = 0;
    n->nlen = 0;
}

/* ---- reading ------------------------------------------------------------------------------ */

/* What an action on an entry means to a read of `role` (of a file's watch when `file`). */
static unsigned mux__fs_bits(int role, int file, DWORD action)
{
    switch (action) {
    case FILE_ACTION_ADDED:
        return role == MUX__FSR_CONTENT ? (file ? MUX_FS_GONE : MUX_FS_CREATE) : 0;
    case FILE_ACTION_REMOVED:
        return role == MUX__FSR_META ? 0 : file || role == MUX__FSR_SELF ? MUX_FS_GONE
                                                                        : MUX_FS_DELETE;
    case FILE_ACTION_MODIFIED:
        return role == MUX__FSR_CONTENT ? MUX_FS_CHANGE : role == MUX__FSR_META ? MUX_FS_ATTRIB : 0;
    case FILE_ACTION_RENAMED_OLD_NAME:
    case FILE_ACTION_RENAMED_NEW_NAME:
        return role == MUX__FSR_META ? 0 : file || role == MUX__FSR_SELF ? MUX_FS_GONE
                                                                        : MUX_FS_RENAME;
    default:
        return 0;
    }
}

/* Adds what a completed read holds to the batch. */
static void mux__fsr_parse(struct mux__fsn *n, struct mux__fsr *r, DWORD bytes)
{
    struct mux__fsw *f = r->watch;
    int own = f->is_file || r->role == MUX__FSR_SELF; /* only the watched name counts */
    size_t nlen = own && f->name ? wcslen(f->name) : 0;
    char name[MAX_PATH * 4];
    for (DWORD off = 0; off + offsetof(FILE_NOTIFY_INFORMATION, FileName) <= bytes;) {
        FILE_NOTIFY_INFORMATION *fi = (FILE_NOTIFY_INFORMATION *)((char *)r->buf + off);
        int wlen = (int)(fi->FileNameLength / sizeof(WCHAR));
        unsigned ev = mux__fs_bits(r->role, f->is_file, fi->Action);
        if (ev && own) {
            if ((size_t)wlen == nlen &&
                CompareStringOrdinal(fi->FileName, wlen, f->name, (int)nlen, TRUE) == CSTR_EQUAL)
                mux__fse_add(n, f->id, NULL, ev, 0);
        } else if (ev) {
            int k = WideCharToMultiByte(CP_UTF8, 0, fi->FileName, wlen, name, sizeof name - 1,
                                        NULL, NULL);
            name[k > 0 ? k : 0] = 0;
            mux__fse_add(n, f->id, name, ev, 0);
        }
        if (fi->NextEntryOffset == 0)
            break;
        off += fi->NextEntryOffset;
    }
}

/* Whether the watched path is gone: an event on the watch's own name, or its error. */
static void mux__fsr_failed(struct mux__fsn *n, struct mux__fsr *r, DWORD err)
{
    struct mux__fsw *f = r->watch;
    DWORD at = GetFileAttributesW(f->path);
    if (at == INVALID_FILE_ATTRIBUTES || (!(at & FILE_ATTRIBUTE_DIRECTORY)) != !!f->is_file)
        mux__fse_add(n, f->id, NULL, MUX_FS_GONE, 0);
    else
        mux__fse_add(n, f->id, NULL, 0, err ? mux__win_errno(err) : -EIO);
}

/* Takes what a read has (and, re-issued, has again meanwhile) into the batch. */
static void mux__fsr_collect(struct mux__fsn *n, struct mux__fsr *r)
{
    for (int round = 0; round < MUX__FSR_ROUNDS && r->issued; round++) {
        DWORD bytes = 0, err = 0;
        if (!GetOverlappedResult(r->dir, &r->ov, &bytes, FALSE)) {
            err = GetLastError();
            if (err == ERROR_IO_INCOMPLETE)
                return; /* nothing (more) yet */
        }
        r->issued = 0;
        if (err == ERROR_OPERATION_ABORTED)
            return;
        if (err == ERROR_NOTIFY_ENUM_DIR || (err == 0 && bytes == 0)) {
            if (GetFileAttributesW(r->watch->path) == INVALID_FILE_ATTRIBUTES) {
                mux__fsr_failed(n, r, err);
                return;
            }
            mux__fse_add(n, r->watch->id, NULL, MUX_FS_OVERFLOW, 0);
        } else if (err != 0) {
            mux__fsr_failed(n, r, err);
            return;
        } else {
            mux__fsr_parse(n, r, bytes);
        }
        err = mux__fsr_issue(r);
        if (err != 0) {
            mux__fsr_failed(n, r, err);
            return;
        }
        /* What was recorded since may be there at once. Windows completes such a read in the
         * call; Wine completes it in the thread's next call to its server, which an alertable
         * look at nothing makes (it also runs an APC queued to the loop's thread, as the iocp
         * backend's alertable wait would). */
        SleepEx(0, TRUE);
    }
}

/* ---- delivering --------------------------------------------------------------------------- */

/* Calls the watchers of one watch for one event. A callback may stop or start any watcher,
 * so the next one is kept where a stop moves it on (n->next). */
static void mux__fs_deliver(struct mux__loop *loop, struct mux__fsw *f, const struct mux__fse *e)
{
    struct mux__fsn *n = loop->fsn;
    int end = (e->events & MUX_FS_GONE) || e->status != 0;
    unsigned events = e->status ? 0 : e->events;
    for (mux_fs_event_t *w = f->head; w; w = n->next) {
        n->next = w->next_;
        char base[256];
        const char *name = e->name == SIZE_MAX ? NULL : n->names + e->name;
        if (!name && !(events & MUX_FS_OVERFLOW)) { /* its own path; cut where too long */
            size_t k = strlen(mux__fs_base(w));
            k = k < sizeof base - 1 ? k : sizeof base - 1;
            memcpy(base, mux__fs_base(w), k);
            base[k] = 0;
            name = base;
        }
        if (end)
            mux__fs_detach(loop, w); /* the watch goes with its last watcher */
        w->cb_(loop->pub, w, name, events, e->status);
        if (!loop->fsn)
            return;
    }
}

static void mux__fsn_ready(mux_loop_t *pub, mux_async_t *a)
{
    (void)a;
    struct mux__loop *loop = mux__loop_of(pub);
    struct mux__fsn *n = loop->fsn;
    mux__fse_clear(n);
    for (struct mux__fsw *f = n->watches; f; f = f->next)
        for (int i = 0; i < 3; i++)
            if (f->r[i].watch && InterlockedExchange(&f->r[i].done, 0))
                mux__fsr_collect(n, &f->r[i]);
    for (uint32_t i = 0; i < n->nev && loop->fsn; i++) {
        struct mux__fse e = n->ev[i];
        struct mux__fsw *f = mux__fsw_find(n, e.watch);
        if (f) /* else closed since, by a callback */
            mux__fs_deliver(loop, f, &e);
    }
}

/* ---- the loop's state --------------------------------------------------------------------- */

int mux__fsn_open(struct mux__loop *loop)
{
    struct mux__fsn *n = calloc(1, sizeof *n);
    if (!n)
        return -ENOMEM;
    int err = mux__fse_grow(n);
    if (err == 0) {
        mux_async_init(&n->async, mux__fsn_ready);
        n->async.h_.flags |= MUX__W_NOREF; /* the watchers count, not their machinery */
        err = mux_async_start(loop->pub, &n->async);
    }
    if (err != 0) {
        free(n->ev);
        free(n->slot);
        free(n);
        return err;
    }
    loop->fsn = n;
    return 0;
}

void mux__fsn_close(struct mux__loop *loop)
{
    struct mux__fsn *n = loop->fsn;
    if (!n)
        return;
    while (n->watches) {
        struct mux__fsw *f = n->watches;
        for (mux_fs_event_t *w = f->head; w; w = w->next_) {
            w->wd_ = -1;
            mux__deactivate(loop, &w->h_);
        }
        n->watches = f->next;
        mux__fsw_free(f);
    }
    mux_async_stop(loop->pub, &n->async);
    free(n->ev);
    free(n->slot);
    free(n->names);
    free(n);
    loop->fsn = NULL;
}

int mux__fsn_fork(struct mux__loop *loop)
{
    (void)loop; /* Windows has no fork */
    return 0;
}

void mux__fsn_walk(struct mux__loop *loop, void (*add)(void *ctx, struct mux__whdr *h), void *ctx)
{
    struct mux__fsn *n = loop->fsn;
    for (struct mux__fsw *f = n ? n->watches : NULL; f; f = f->next)
        for (mux_fs_event_t *w = f->head; w; w = w->next_)
            add(ctx, &w->h_);
}

/* ---- the watchers ------------------------------------------------------------------------- */

MUX_EXPORT int mux_fs_event_start(mux_loop_t *pub, mux_fs_event_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    int err = mux__fs_event_begin(loop, w);
    if (err != 0)
        return err;
    struct mux__fsn *n = loop->fsn;
    WCHAR *full = mux__fs_full(w->path_, &err);
    if (!full)
        return err;
    struct mux__fsw *f = n->watches;
    while (f && CompareStringOrdinal(f->path, -1, full, -1, TRUE) != CSTR_EQUAL)
        f = f->next;
    if (f) {
        free(full);
    } else if ((err = mux__fsw_open(n, full, &f)) != 0) {
        free(full);
        return err;
    }
    mux__fs_event_join(loop, &f->head, w, (int)f->id);
    return 0;
}

MUX_EXPORT int mux_fs_event_stop(mux_loop_t *pub, mux_fs_event_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_FS_EVENT)
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        mux__fs_detach(loop, w);
    return 0;
}
