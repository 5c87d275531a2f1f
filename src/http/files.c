/* SPDX-License-Identifier: MIT */
/* Static files (include/iomux/http.h, mux_http_serve_static): the pure parts of
 * static.c put to work on a directory.
 *
 * A file is opened below the root's descriptor. Where the kernel has openat2, with
 * RESOLVE_BENEATH, so that no symbolic link or ".." leads out of the root; elsewhere the
 * real path of what was opened must lie under the root's real path. Its body is read into
 * the response (up to MUX_HTTP_STATIC_MAX_FILE for now).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__) && !defined(MUX_PORTABLE_POSIX)
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif

#include "http/http_internal.h"
#include "internal.h"

MUX_EXPORT int mux_http_static_init(mux_http_static_t *st, const char *root)
{
    if (!st || !root)
        return -EINVAL;
    const char *index = st->index;
    memset(st, 0, sizeof *st);
    st->index = index;
    st->root_fd_ = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (st->root_fd_ < 0)
        return -errno;
    st->root_real_ = realpath(root, NULL);
    if (!st->root_real_) {
        int err = errno == ENOMEM ? -ENOMEM : -errno;
        close(st->root_fd_);
        st->root_fd_ = -1;
        return err;
    }
    return 0;
}

MUX_EXPORT void mux_http_static_close(mux_http_static_t *st)
{
    if (!st || !st->root_real_)
        return;
    close(st->root_fd_);
    free(st->root_real_);
    st->root_real_ = NULL;
    st->root_fd_ = -1;
}

/* Opens `rel` below the root, read-only. The descriptor, or -errno (-ENOENT, -EACCES, and
 * -EXDEV for a path that leads out of the root). */
static int mux__open_beneath(const mux_http_static_t *st, const char *rel)
{
    const char *p = *rel ? rel : ".";
#if defined(__linux__) && !defined(MUX_PORTABLE_POSIX) && defined(SYS_openat2)
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, st->root_fd_, p, &how, sizeof how);
    if (fd >= 0)
        return (int)fd;
    if (errno != ENOSYS && errno != EPERM) /* EPERM: a seccomp filter that lacks it */
        return -errno;
#endif
    int fd2 = openat(st->root_fd_, p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd2 < 0)
        return -errno;
    /* Where it really is must be under the root. */
    char proc[64], real[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd2);
    ssize_t n = readlink(proc, real, sizeof real - 1);
    char *rp = NULL;
    if (n < 0) { /* no /proc: resolve the name instead */
        char full[PATH_MAX];
        if ((size_t)snprintf(full, sizeof full, "%s/%s", st->root_real_, rel) >= sizeof full ||
            !(rp = realpath(full, NULL))) {
            close(fd2);
            return -ENOENT;
        }
    } else {
        real[n] = 0;
    }
    const char *r = rp ? rp : real;
    size_t rl = strlen(st->root_real_);
    int inside = strncmp(r, st->root_real_, rl) == 0 && (r[rl] == '/' || r[rl] == 0);
    free(rp);
    if (!inside) {
        close(fd2);
        return -EXDEV;
    }
    return fd2;
}

static int mux__status_of(int err)
{
    return err == -ENOENT || err == -ENOTDIR || err == -EXDEV || err == -ELOOP ? 404 : 403;
}

static int mux__plain(mux_http_exchange_t *x, int status, const mux_http_header_t *h, uint32_t nh)
{
    char body[64];
    int n = snprintf(body, sizeof body, "%d\n", status);
    return mux_http_respond(x, status, h, nh, body, (size_t)n);
}

MUX_EXPORT int mux_http_serve_static(mux_http_exchange_t *x, const mux_http_static_t *st)
{
    const mux_http_request_t *req = mux_http_exchange_request(x);
    if (!req || !st || !st->root_real_)
        return -EINVAL;
    int head = req->method.len == 4 && memcmp(req->method.base, "HEAD", 4) == 0;
    if (!head && !(req->method.len == 3 && memcmp(req->method.base, "GET", 3) == 0)) {
        mux_http_header_t allow = {{"Allow", 5}, {"GET, HEAD", 9}};
        return mux__plain(x, 405, &allow, 1);
    }
    char rel[4096];
    int dir = 0;
    int r = mux__http_path(req->target.base, req->target.len, rel, sizeof rel - 16, &dir);
    if (r != 0)
        return mux__plain(x, r == -EACCES ? 403 : r == -ENAMETOOLONG ? 414 : 400, NULL, 0);
    int fd = mux__open_beneath(st, rel);
    if (fd < 0)
        return mux__plain(x, mux__status_of(fd), NULL, 0);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return mux__plain(x, 500, NULL, 0);
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        size_t tl = req->target.len;
        const char *q = memchr(req->target.base, '?', tl);
        size_t pl = q ? (size_t)(q - req->target.base) : tl;
        if (!dir && rel[0]) { /* "/sub": the index's links are relative to "/sub/" */
            char loc[4200];
            int n = snprintf(loc, sizeof loc, "%.*s/%.*s", (int)pl, req->target.base,
                             (int)(tl - pl), req->target.base + pl);
            mux_http_header_t h = {{"Location", 8}, {loc, (size_t)n}};
            return mux__plain(x, 301, &h, 1);
        }
        const char *index = st->index ? st->index : "index.html";
        size_t rl = strlen(rel);
        if (rl + 1 + strlen(index) + 1 > sizeof rel)
            return mux__plain(x, 414, NULL, 0);
        snprintf(rel + rl, sizeof rel - rl, "%s%s", rl ? "/" : "", index);
        fd = mux__open_beneath(st, rel);
        if (fd < 0)
            return mux__plain(x, mux__status_of(fd), NULL, 0);
        if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            close(fd);
            return mux__plain(x, 404, NULL, 0);
        }
    } else if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return mux__plain(x, 404, NULL, 0);
    }
    uint64_t size = (uint64_t)sb.st_size;
    int64_t mns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    char etag[48], lastmod[32];
    size_t el = mux__http_etag(size, mns, etag);
    size_t ll = mux__http_date((int64_t)sb.st_mtim.tv_sec, lastmod);
    mux_http_header_t h[5];
    uint32_t nh = 0;
    h[nh++] = (mux_http_header_t){{"ETag", 4}, {etag, el}};
    h[nh++] = (mux_http_header_t){{"Last-Modified", 13}, {lastmod, ll}};
    /* 304: If-None-Match, when present, decides alone. */
    mux_http_str_t v;
    int not_modified = 0;
    if (mux_http_header_get(req, "If-None-Match", &v) == 0) {
        not_modified = mux__http_etag_match(v, etag, el);
    } else if (mux_http_header_get(req, "If-Modified-Since", &v) == 0) {
        int64_t since;
        not_modified = mux__http_date_parse(v, &since) == 0 && sb.st_mtim.tv_sec <= since;
    }
    if (not_modified) {
        close(fd);
        return mux_http_respond(x, 304, h, nh, NULL, 0);
    }
    const char *type = mux__http_mime(rel);
    h[nh++] = (mux_http_header_t){{"Content-Type", 12}, {type, strlen(type)}};
    h[nh++] = (mux_http_header_t){{"Accept-Ranges", 13}, {"bytes", 5}};
    uint64_t first = 0, last = size ? size - 1 : 0;
    int status = 200;
    char cr[80];
    if (mux_http_header_get(req, "Range", &v) == 0) {
        int rr = mux__http_range(v, size, &first, &last);
        if (rr < 0) {
            close(fd);
            int n = snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)size);
            h[nh - 1] = (mux_http_header_t){{"Content-Range", 13}, {cr, (size_t)n}};
            return mux__plain(x, 416, h + 2, 2);
        }
        if (rr > 0) {
            status = 206;
            int n = snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)first,
                             (unsigned long long)last, (unsigned long long)size);
            h[nh++] = (mux_http_header_t){{"Content-Range", 13}, {cr, (size_t)n}};
        }
    }
    uint64_t len = size ? last - first + 1 : 0;
    if (len > MUX_HTTP_STATIC_MAX_FILE) {
        close(fd);
        return mux__plain(x, 500, NULL, 0);
    }
    char *body = NULL;
    if (len && !head) {
        body = malloc((size_t)len);
        if (!body) {
            close(fd);
            return mux__plain(x, 500, NULL, 0);
        }
        size_t got = 0;
        while (got < len) {
            ssize_t n = pread(fd, body + got, (size_t)len - got, (off_t)(first + got));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                free(body);
                close(fd);
                return mux__plain(x, 500, NULL, 0); /* shrank, or an I/O error */
            }
            got += (size_t)n;
        }
    }
    close(fd);
    /* HEAD: the same Content-Length, and no body (the server leaves it out). */
    static char zero;
    r = mux_http_respond(x, status, h, nh, body ? body : &zero, head ? (size_t)len : (size_t)len);
    free(body);
    return r;
}
