/* SPDX-License-Identifier: MIT */
/* The static files' file system on POSIX systems (fs.h): descriptors.
 *
 * A file is opened below the root's descriptor. Where the kernel has openat2, with
 * RESOLVE_BENEATH, so that no symbolic link or ".." leads out of the root; elsewhere the real
 * path of what was opened (/proc/self/fd, or realpath of the name) must lie under the root's
 * real path.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__) && !defined(MUX_PORTABLE_POSIX)
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif

#include "http/fs.h"

static void mux__fs_from(const struct stat *s, struct mux__fs_stat *sb)
{
    sb->size = (uint64_t)s->st_size;
    sb->mtime_ns = (int64_t)s->st_mtim.tv_sec * 1000000000 + s->st_mtim.tv_nsec;
    sb->dev = (uint64_t)s->st_dev;
    sb->ino = (uint64_t)s->st_ino;
    sb->kind = S_ISREG(s->st_mode)   ? MUX__FS_REG
               : S_ISDIR(s->st_mode) ? MUX__FS_DIR
                                     : MUX__FS_OTHER;
}

int mux__fs_root_open(const char *root, char **real)
{
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || !(*real = realpath(root, NULL))) {
        int err = -errno;
        if (fd >= 0)
            close(fd);
        return err;
    }
    return fd;
}

int mux__fs_open(int root, const char *root_real, const char *rel)
{
    const char *p = *rel ? rel : ".";
#if defined(__linux__) && !defined(MUX_PORTABLE_POSIX) && defined(SYS_openat2)
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, root, p, &how, sizeof how);
    if (fd >= 0)
        return (int)fd;
    if (errno != ENOSYS && errno != EPERM) /* EPERM: a seccomp filter that lacks it */
        return -errno;
#endif
    int fd2 = openat(root, p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd2 < 0)
        return -errno;
    /* Where it really is must be under the root. */
    char proc[64], real[PATH_MAX];
    ssize_t n = -1;
    if ((size_t)snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd2) < sizeof proc)
        n = readlink(proc, real, sizeof real - 1);
    char *rp = NULL;
    if (n < 0) { /* no /proc: resolve the name instead */
        char full[PATH_MAX];
        if ((size_t)snprintf(full, sizeof full, "%s/%s", root_real, rel) >= sizeof full ||
            !(rp = realpath(full, NULL))) {
            close(fd2);
            return -ENOENT;
        }
    } else {
        real[n] = 0;
    }
    const char *r = rp ? rp : real;
    size_t rl = strlen(root_real);
    int inside = strncmp(r, root_real, rl) == 0 && (r[rl] == '/' || r[rl] == 0);
    free(rp);
    if (!inside) {
        close(fd2);
        return -EXDEV;
    }
    return fd2;
}

void mux__fs_close(int file)
{
    close(file);
}

int mux__fs_stat(int file, struct mux__fs_stat *sb)
{
    struct stat s;
    if (fstat(file, &s) != 0)
        return -errno;
    mux__fs_from(&s, sb);
    return 0;
}

int mux__fs_stat_at(int root, const char *root_real, const char *rel, struct mux__fs_stat *sb)
{
    (void)root_real;
    struct stat s;
    if (fstatat(root, *rel ? rel : ".", &s, 0) != 0)
        return -errno;
    mux__fs_from(&s, sb);
    return 0;
}

int mux__fs_read_at(int file, char *out, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(file, out + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        got += (size_t)n;
    }
    return 0;
}

int mux__fs_read_file(const char *path, size_t max, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    int err = 0;
    char *b = NULL;
    size_t got = 0;
    if (fstat(fd, &sb) != 0)
        err = -errno;
    else if (!S_ISREG(sb.st_mode))
        err = -EINVAL;
    else if ((uint64_t)sb.st_size > max)
        err = -EFBIG;
    else if (!(b = malloc((size_t)sb.st_size + 1)))
        err = -ENOMEM;
    while (!err && got < (size_t)sb.st_size) {
        ssize_t n = read(fd, b + got, (size_t)sb.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            err = -errno;
        else if (n == 0)
            break; /* it shrank: what there is */
        else
            got += (size_t)n;
    }
    close(fd);
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
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur / 4 >= cap)
        return cap;
    return rl.rlim_cur < 4 ? 1 : (uint32_t)(rl.rlim_cur / 4);
}

const char *mux__fs_mime_types(void)
{
    return "/etc/mime.types";
}

/* Whether `name` in the directory leads to a directory (through a link too). */
static int mux__is_dir(DIR *d, const struct dirent *de)
{
#ifdef DT_DIR
    if (de->d_type == DT_DIR)
        return 1;
    if (de->d_type != DT_UNKNOWN && de->d_type != DT_LNK)
        return 0;
#endif
    struct stat sb;
    return fstatat(dirfd(d), de->d_name, &sb, 0) == 0 && S_ISDIR(sb.st_mode);
}

int mux__fs_dir_read(int file, int dotfiles, struct mux__dirent **out, size_t *n)
{
    DIR *d = fdopendir(file);
    if (!d) {
        int err = -errno;
        close(file);
        return err;
    }
    struct mux__dirent *v = NULL;
    size_t len = 0, cap = 0;
    struct dirent *de;
    int err = 0;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (nm[0] == '.' && (!dotfiles || nm[1] == 0 || (nm[1] == '.' && nm[2] == 0)))
            continue;
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
        if (!(v[len].name = strdup(nm))) {
            err = -ENOMEM;
            break;
        }
        v[len++].dir = mux__is_dir(d, de);
        errno = 0;
    }
    if (!err && errno)
        err = -errno;
    closedir(d);
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
