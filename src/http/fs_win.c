/* SPDX-License-Identifier: MIT */
/* The static files' file system on Windows (fs.h): handles, and names checked the way IIS and
 * nginx for Windows check them.
 *
 * What is odd about Windows' names, and what this file does about it:
 * - One file has many names. Win32 drops a name's trailing dots and spaces ("index.html."),
 *   reads ':' as a drive or an alternate data stream ("file::$DATA" is the file's bytes, a
 *   way around a check of the extension), '\' as a separator, and a device name in any folder
 *   (CON, NUL, COM1, "aux.txt") as the device. mux__http_win_name (static.c, pure, tested on
 *   every system) refuses such a path before anything is opened: 404, as nginx does.
 * - Short names: NTFS may give a file a second, 8.3 name ("LONGFI~1.HTM"), which reaches the
 *   same file by a name that no rule about names sees. After the open, the path is expanded
 *   with GetLongPathNameW: a path that was not its own long form named something through a
 *   short name, 404.
 * - Paths are made absolute from the root's final path, which has the "\\?\" prefix: Win32
 *   then passes the name to the file system as it is (no device names, no dots dropped, no
 *   MAX_PATH), so what was checked is what is opened.
 * - Links: a symbolic link or a junction below the root may lead out of it. The final path
 *   of what was opened (GetFinalPathNameByHandleW) must lie under the root's: else -EXDEV,
 *   404, as openat2's RESOLVE_BENEATH refuses it on Linux.
 * - Files are opened with every sharing mode, so that the server never stops anyone renaming,
 *   replacing or deleting a file it keeps open (the cache notices by the file's identity, its
 *   volume serial number and file index, as it notices a new inode on POSIX).
 * - Handles are not a scarce resource (there is no descriptor table to fill: a process may
 *   hold millions), so the cache keeps as many as it holds entries by default.
 * - Directories are listed through the handle (GetFileInformationByHandleEx), not by name
 *   again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <windows.h>

#include "http/fs.h"
#include "http/http_internal.h"
#include "platform/win.h"

#define MUX__FS_HANDLE(f) ((HANDLE)(intptr_t)(f))

/* The UTF-16 form of UTF-8 `s` (n bytes, or -1: NUL-terminated), allocated with `extra`
 * spare characters. NULL with *err set (-ENOENT for bytes that are not UTF-8, -ENOMEM). */
static WCHAR *mux__wide(const char *s, int n, size_t extra, int *err)
{
    int wn = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, n, NULL, 0);
    if (wn <= 0 && n != 0) {
        *err = -ENOENT; /* no file has a name that is not text */
        return NULL;
    }
    WCHAR *w = malloc(((size_t)wn + extra + 1) * sizeof *w);
    if (!w) {
        *err = -ENOMEM;
        return NULL;
    }
    if (wn > 0)
        MultiByteToWideChar(CP_UTF8, 0, s, n, w, wn);
    w[wn] = 0;
    return w;
}

/* The UTF-8 form of `w`, allocated; NULL for want of memory. */
static char *mux__narrow(const WCHAR *w)
{
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    char *s = n > 0 ? malloc((size_t)n) : NULL;
    if (s)
        WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL);
    return s;
}

/* An open's failure as the seam says it. */
static int mux__fs_errno(DWORD e)
{
    switch (e) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME:
    case ERROR_BAD_PATHNAME:
    case ERROR_DIRECTORY:
    case ERROR_CANT_RESOLVE_FILENAME:
    case ERROR_BAD_NETPATH:
        return -ENOENT;
    case ERROR_FILENAME_EXCED_RANGE:
        return -ENAMETOOLONG;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
    case ERROR_LOCK_VIOLATION:
        return -EACCES;
    default:
        return mux__win_errno(e);
    }
}

static HANDLE mux__open_w(const WCHAR *path, DWORD access)
{
    return CreateFileW(path, access, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                       OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_SEQUENTIAL_SCAN,
                       NULL);
}

/* The final path of `h` (with the "\\?\" prefix), allocated; NULL with *err set. */
static WCHAR *mux__final(HANDLE h, int *err)
{
    DWORD n = GetFinalPathNameByHandleW(h, NULL, 0, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
    WCHAR *w = n ? malloc(((size_t)n + 1) * sizeof *w) : NULL;
    if (!w) {
        *err = n ? -ENOMEM : mux__fs_errno(GetLastError());
        return NULL;
    }
    DWORD got = GetFinalPathNameByHandleW(h, w, n + 1, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
    if (got == 0 || got > n) {
        *err = got ? -EIO : mux__fs_errno(GetLastError());
        free(w);
        return NULL;
    }
    return w;
}

/* Whether the first n characters of a and b are the same name, case aside (as the file
 * system compares them). */
static int mux__same_name(const WCHAR *a, const WCHAR *b, size_t n)
{
    return CompareStringOrdinal(a, (int)n, b, (int)n, TRUE) == CSTR_EQUAL;
}

int mux__fs_root_open(const char *root, char **real)
{
    int err = 0;
    WCHAR *w = mux__wide(root, -1, 0, &err);
    if (!w)
        return err;
    HANDLE h = mux__open_w(w, FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES);
    free(w);
    if (h == INVALID_HANDLE_VALUE)
        return mux__fs_errno(GetLastError());
    BY_HANDLE_FILE_INFORMATION fi;
    WCHAR *f = NULL;
    if (!GetFileInformationByHandle(h, &fi))
        err = mux__fs_errno(GetLastError());
    else if (!(fi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY))
        err = -ENOTDIR;
    else if ((f = mux__final(h, &err)) != NULL && !(*real = mux__narrow(f)))
        err = -ENOMEM;
    free(f);
    if (err) {
        CloseHandle(h);
        return err;
    }
    return (int)(intptr_t)h;
}

/* The absolute path of `rel` below the root, "\\?\" and all, with '\' between its names. */
static WCHAR *mux__path(const char *root_real, const char *rel, int *err)
{
    size_t rl = strlen(root_real), nl = strlen(rel);
    char *j = malloc(rl + 1 + nl + 1);
    if (!j) {
        *err = -ENOMEM;
        return NULL;
    }
    memcpy(j, root_real, rl);
    if (nl) {
        j[rl++] = '\\';
        for (size_t i = 0; i < nl; i++)
            j[rl++] = rel[i] == '/' ? '\\' : rel[i];
    }
    j[rl] = 0;
    WCHAR *w = mux__wide(j, -1, 0, err);
    free(j);
    return w;
}

/* Whether `path` is its own long form: no short name in it. 0, -ENOENT or another -errno. A
 * drive's path is asked for without its "\\?\" while it fits MAX_PATH: Wine (8) expands
 * short names only then, and Windows the same either way. */
static int mux__long_form(const WCHAR *path)
{
    size_t pn = wcslen(path);
    if (pn < MAX_PATH + 4 && wcsncmp(path, L"\\\\?\\", 4) == 0 && path[5] == L':') {
        path += 4;
        pn -= 4;
    }
    int err = 0;
    DWORD ln = GetLongPathNameW(path, NULL, 0);
    WCHAR *lp = ln ? malloc(((size_t)ln + 1) * sizeof *lp) : NULL;
    if (!lp)
        return ln ? -ENOMEM : mux__fs_errno(GetLastError());
    DWORD got = GetLongPathNameW(path, lp, ln + 1);
    if (got == 0 || got > ln)
        err = got ? -EIO : mux__fs_errno(GetLastError());
    else if (got != pn || !mux__same_name(lp, path, pn))
        err = -ENOENT; /* a short name in it */
    free(lp);
    return err;
}

/* Whether the handle `h`, opened as `path`, is that file: reached by its long names (no
 * short one), and still below the root (`rootw`, rn characters) once every link is followed.
 * 0, -ENOENT or -EXDEV. */
static int mux__check_open(HANDLE h, const WCHAR *path, const WCHAR *rootw, size_t rn)
{
    int err = mux__long_form(path);
    if (err)
        return err;
    WCHAR *f = mux__final(h, &err);
    if (!f)
        return err;
    size_t fn = wcslen(f);
    if (fn < rn || !mux__same_name(f, rootw, rn) || (fn > rn && f[rn] != L'\\'))
        err = -EXDEV;
    free(f);
    return err;
}

int mux__fs_open(int root, const char *root_real, const char *rel)
{
    (void)root;
    int err = mux__http_win_name(rel);
    if (err)
        return err;
    WCHAR *path = mux__path(root_real, rel, &err);
    if (!path)
        return err;
    WCHAR *rootw = mux__wide(root_real, -1, 0, &err);
    HANDLE h = INVALID_HANDLE_VALUE;
    if (rootw) {
        h = mux__open_w(path, GENERIC_READ);
        if (h == INVALID_HANDLE_VALUE)
            err = mux__fs_errno(GetLastError());
        else if ((err = mux__check_open(h, path, rootw, wcslen(rootw))) != 0)
            CloseHandle(h);
    }
    free(rootw);
    free(path);
    return err ? err : (int)(intptr_t)h;
}

void mux__fs_close(int file)
{
    CloseHandle(MUX__FS_HANDLE(file));
}

int mux__fs_stat(int file, struct mux__fs_stat *sb)
{
    HANDLE h = MUX__FS_HANDLE(file);
    BY_HANDLE_FILE_INFORMATION fi;
    if (!GetFileInformationByHandle(h, &fi))
        return mux__fs_errno(GetLastError());
    FILETIME w = fi.ftLastWriteTime;
    uint64_t t = (uint64_t)w.dwHighDateTime << 32 | w.dwLowDateTime;
    sb->size = (uint64_t)fi.nFileSizeHigh << 32 | fi.nFileSizeLow;
    sb->mtime_ns = ((int64_t)t - 116444736000000000LL) * 100; /* 100 ns steps since 1601 */
    sb->dev = fi.dwVolumeSerialNumber;
    sb->ino = (uint64_t)fi.nFileIndexHigh << 32 | fi.nFileIndexLow;
    if (fi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
        sb->kind = MUX__FS_DIR;
    else if (GetFileType(h) == FILE_TYPE_DISK && !(fi.dwFileAttributes & FILE_ATTRIBUTE_DEVICE))
        sb->kind = MUX__FS_REG;
    else
        sb->kind = MUX__FS_OTHER;
    return 0;
}

int mux__fs_stat_at(int root, const char *root_real, const char *rel, struct mux__fs_stat *sb)
{
    (void)root;
    int err = 0;
    WCHAR *path = mux__path(root_real, rel, &err);
    if (!path)
        return err;
    HANDLE h = mux__open_w(path, FILE_READ_ATTRIBUTES);
    free(path);
    if (h == INVALID_HANDLE_VALUE)
        return mux__fs_errno(GetLastError());
    err = mux__fs_stat((int)(intptr_t)h, sb);
    CloseHandle(h);
    return err;
}

int mux__fs_read_at(int file, char *out, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        OVERLAPPED at; /* a synchronous handle reads at the offset it names */
        memset(&at, 0, sizeof at);
        at.Offset = (DWORD)(off + got);
        at.OffsetHigh = (DWORD)((off + got) >> 32);
        DWORD want = len - got > 1u << 30 ? 1u << 30 : (DWORD)(len - got), n = 0;
        if (!ReadFile(MUX__FS_HANDLE(file), out + got, want, &n, &at)) {
            DWORD e = GetLastError();
            return e == ERROR_HANDLE_EOF ? -EIO : mux__fs_errno(e);
        }
        if (n == 0)
            return -EIO; /* it shrank */
        got += n;
    }
    return 0;
}

int mux__fs_read_file(const char *path, size_t max, char **out, size_t *len)
{
    int err = 0;
    WCHAR *w = mux__wide(path, -1, 0, &err);
    if (!w)
        return err;
    HANDLE h = mux__open_w(w, GENERIC_READ);
    free(w);
    if (h == INVALID_HANDLE_VALUE)
        return mux__fs_errno(GetLastError());
    struct mux__fs_stat sb;
    char *b = NULL;
    if ((err = mux__fs_stat((int)(intptr_t)h, &sb)) != 0)
        ;
    else if (sb.kind != MUX__FS_REG)
        err = -EINVAL;
    else if (sb.size > max)
        err = -EFBIG;
    else if (!(b = malloc((size_t)sb.size + 1)))
        err = -ENOMEM;
    size_t got = 0;
    while (!err && got < sb.size) {
        DWORD n = 0;
        if (!ReadFile(h, b + got, (DWORD)(sb.size - got), &n, NULL))
            err = mux__fs_errno(GetLastError());
        else if (n == 0)
            break; /* it shrank: what there is */
        got += n;
    }
    CloseHandle(h);
    if (err) {
        free(b);
        return err;
    }
    *out = b;
    *len = got;
    return 0;
}

uint32_t mux__fs_default_max_open(uint32_t cap)
{
    return cap;
}

const char *mux__fs_mime_types(void)
{
    return NULL; /* Windows keeps media types in its registry, by extension, per machine */
}

/* One entry of a listing: `nm` (UTF-16, nl characters) as UTF-8 at v[*len], unless it is
 * left out. 0 or -ENOMEM. */
static int mux__dir_add(struct mux__dirent *v, size_t *len, const WCHAR *nm, size_t nl, int dir,
                        int dotfiles)
{
    if (nm[0] == L'.' && (!dotfiles || nl == 1 || (nl == 2 && nm[1] == L'.')))
        return 0;
    int n = WideCharToMultiByte(CP_UTF8, 0, nm, (int)nl, NULL, 0, NULL, NULL);
    char *s = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (!s)
        return n > 0 ? -ENOMEM : 0; /* a name that is not text: not one a URL can reach */
    WideCharToMultiByte(CP_UTF8, 0, nm, (int)nl, s, n, NULL, NULL);
    s[n] = 0;
    if (mux__http_win_name(s) != 0) { /* one that would not be served */
        free(s);
        return 0;
    }
    v[*len].name = s;
    v[(*len)++].dir = dir;
    return 0;
}

int mux__fs_dir_read(int file, int dotfiles, struct mux__dirent **out, size_t *n)
{
    HANDLE h = MUX__FS_HANDLE(file);
    struct mux__dirent *v = NULL;
    size_t len = 0, cap = 0;
    int err = 0;
    /* DWORD-aligned (malloc's), for the entries the system writes into it. */
    size_t bufsize = 65536;
    DWORD *buf = malloc(bufsize);
    if (!buf)
        err = -ENOMEM;
    FILE_INFO_BY_HANDLE_CLASS cls = FileFullDirectoryRestartInfo;
    while (!err) {
        if (!GetFileInformationByHandleEx(h, cls, buf, (DWORD)bufsize)) {
            DWORD e = GetLastError();
            if (e != ERROR_NO_MORE_FILES)
                err = mux__fs_errno(e);
            break;
        }
        cls = FileFullDirectoryInfo;
        for (const char *p = (const char *)buf;;) {
            const FILE_FULL_DIR_INFO *fi = (const FILE_FULL_DIR_INFO *)(const void *)p;
            if (len == cap) {
                size_t nc = cap ? 2 * cap : 64;
                struct mux__dirent *nv = realloc(v, nc * sizeof *nv);
                if (!nv) {
                    err = -ENOMEM;
                    break;
                }
                v = nv;
                cap = nc;
            }
            err = mux__dir_add(v, &len, fi->FileName, fi->FileNameLength / sizeof(WCHAR),
                               (fi->FileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0, dotfiles);
            if (err || fi->NextEntryOffset == 0)
                break;
            p += fi->NextEntryOffset;
        }
    }
    CloseHandle(h);
    free(buf);
    if (err) {
        while (len)
            free(v[--len].name);
        free(v);
        return err;
    }
    *out = v;
    *n = len;
    return 0;
}
