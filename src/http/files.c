/* SPDX-License-Identifier: MIT */
/* Static files (include/iomux/http.h, mux_http_serve_static): the pure parts of
 * static.c put to work on a directory.
 *
 * A file is opened below the root's descriptor. Where the kernel has openat2, with
 * RESOLVE_BENEATH, so that no symbolic link or ".." leads out of the root; elsewhere the
 * real path of what was opened must lie under the root's real path.
 *
 * The cache keeps the descriptor, the metadata and the response fields made from it, and
 * the bytes of a file up to MUX__FCACHE_MEM_FILE (while the bytes kept stay under
 * MUX__FCACHE_MEM), read when it is opened. Up to MUX_HTTP_STATIC_INLINE they are copied
 * after the head; above, they are lent to the response, which holds a reference to the
 * entry, as one whose body goes with mux_http_respond_file does: an entry dropped from the
 * cache (changed, or the cache closed) frees its bytes and closes its descriptor once the
 * last response that sends from it is done.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__) && !defined(MUX_PORTABLE_POSIX)
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif

#include "http/http_internal.h"
#include "internal.h"

/* ---- the open-file cache ------------------------------------------------------------- */

#define MUX__FCACHE_BUCKETS  1024u               /* and at most as many files */
#define MUX__FCACHE_VALID    1000000000ll        /* ns between checks of a file */
#define MUX__FCACHE_MEM_FILE (64u * 1024)        /* files kept in memory: up to this size */
#define MUX__FCACHE_MEM      (16u * 1024 * 1024) /* and up to this many bytes in all */

struct mux__fentry {
    struct mux__fentry *next;
    char *key; /* the request's path below the root ("" for the root) */
    int fd;
    struct stat sb;
    int64_t checked; /* CLOCK_MONOTONIC ns of the last check */
    char *file;      /* the file's path below the root (the index's for a directory) */
    char etag[48], lastmod[32];
    size_t el, ll;
    const char *type;
    size_t tl;
    char *data;    /* the bytes of a small file (NULL when empty, or not kept) */
    uint32_t refs; /* the cache's, and one per response sending from fd */
};

struct mux__fcache {
    struct mux__fentry *b[MUX__FCACHE_BUCKETS];
    uint32_t n;
    size_t mem; /* file bytes the entries keep */
};

static uint32_t mux__hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void mux__fentry_unref(struct mux__fentry *e)
{
    if (--e->refs)
        return;
    close(e->fd);
    free(e->key);
    free(e->file);
    free(e->data);
    free(e);
}

/* A response that sent from the entry's descriptor is done with it. */
static void mux__fentry_sent(void *arg, int status)
{
    (void)status; /* a failure closed that connection; the entry is checked as usual */
    mux__fentry_unref(arg);
}

static void mux__fcache_clear(struct mux__fcache *c)
{
    for (uint32_t i = 0; i < MUX__FCACHE_BUCKETS; i++)
        while (c->b[i]) {
            struct mux__fentry *e = c->b[i];
            c->b[i] = e->next;
            mux__fentry_unref(e);
        }
    c->n = 0;
    c->mem = 0;
}

/* Drops the entry for `key`, if any. */
static void mux__fcache_drop(struct mux__fcache *c, const char *key)
{
    struct mux__fentry **p = &c->b[mux__hash(key) % MUX__FCACHE_BUCKETS];
    for (; *p; p = &(*p)->next)
        if (strcmp((*p)->key, key) == 0) {
            struct mux__fentry *e = *p;
            *p = e->next;
            if (e->data)
                c->mem -= (size_t)e->sb.st_size;
            mux__fentry_unref(e);
            c->n--;
            return;
        }
}

/* The entry for `key`, checked again when its last check is over a second old: the name
 * must still lead to the same file, and the file must be as it was. NULL when there is
 * none, or it did not pass (then it is gone). */
static struct mux__fentry *mux__fcache_get(const mux_http_static_t *st, const char *key,
                                           int64_t now)
{
    struct mux__fcache *c = st->cache_;
    if (!c)
        return NULL;
    struct mux__fentry *e = c->b[mux__hash(key) % MUX__FCACHE_BUCKETS];
    while (e && strcmp(e->key, key) != 0)
        e = e->next;
    if (!e)
        return NULL;
    if (now - e->checked < MUX__FCACHE_VALID)
        return e;
    struct stat now_sb, name_sb;
    if (fstat(e->fd, &now_sb) != 0 || fstatat(st->root_fd_, e->file, &name_sb, 0) != 0 ||
        name_sb.st_ino != e->sb.st_ino || name_sb.st_dev != e->sb.st_dev ||
        now_sb.st_size != e->sb.st_size || now_sb.st_mtim.tv_sec != e->sb.st_mtim.tv_sec ||
        now_sb.st_mtim.tv_nsec != e->sb.st_mtim.tv_nsec) {
        mux__fcache_drop(c, key);
        return NULL;
    }
    e->checked = now;
    return e;
}

/* Reads the whole of a small file into `out`. 0, or -errno (-EIO when it shrank). */
static int mux__read_all(int fd, char *out, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, out + got, len - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        got += (size_t)n;
    }
    return 0;
}

/* Keeps `fd` (the file `file`, served for `key`) with its metadata, and its bytes when it is
 * small; takes the descriptor. The entry, or NULL with *err set (-ENOMEM, or a read's
 * error; the descriptor is closed then). */
static struct mux__fentry *mux__fcache_put(mux_http_static_t *st, const char *key, const char *file,
                                           int fd, const struct stat *sb, int64_t now, int *err)
{
    *err = -ENOMEM;
    if (!st->cache_ && !(st->cache_ = calloc(1, sizeof *st->cache_))) {
        close(fd);
        return NULL;
    }
    struct mux__fcache *c = st->cache_;
    if (c->n >= MUX__FCACHE_BUCKETS)
        mux__fcache_clear(c); /* full: start again rather than track use */
    struct mux__fentry *e = calloc(1, sizeof *e);
    if (!e || !(e->key = strdup(key)) || !(e->file = strdup(file))) {
        if (e) {
            free(e->key);
            free(e);
        }
        close(fd);
        return NULL;
    }
    e->fd = fd;
    e->refs = 1;
    size_t size = (size_t)sb->st_size;
    int keep = size && (size <= MUX_HTTP_STATIC_INLINE ||
                        (size <= MUX__FCACHE_MEM_FILE && c->mem + size <= MUX__FCACHE_MEM));
    if (keep && (!(e->data = malloc(size)) || (*err = mux__read_all(fd, e->data, size)) != 0)) {
        mux__fentry_unref(e); /* closes fd */
        return NULL;
    }
    if (keep)
        c->mem += size;
    e->sb = *sb;
    e->checked = now;
    int64_t mns = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
    e->el = mux__http_etag((uint64_t)sb->st_size, mns, e->etag);
    e->ll = mux__http_date((int64_t)sb->st_mtim.tv_sec, e->lastmod);
    e->type = mux__http_mime(file);
    e->tl = strlen(e->type);
    uint32_t i = mux__hash(key) % MUX__FCACHE_BUCKETS;
    e->next = c->b[i];
    c->b[i] = e;
    c->n++;
    return e;
}

MUX_EXPORT int mux_http_static_init(mux_http_static_t *st, const char *root)
{
    if (!st || !root)
        return -EINVAL;
    const char *index = st->index;
    memset(st, 0, sizeof *st);
    st->index = index;
    st->cache_ = NULL;
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
    if (st->cache_) {
        mux__fcache_clear(st->cache_);
        free(st->cache_);
        st->cache_ = NULL;
    }
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

/* The status for an open that failed: 404 for what is not there (or not below the root),
 * 403 for what may not be read, 500 for a failure of the server's own (EMFILE, ENOMEM,
 * EIO), which is reported too. */
static int mux__status_of(mux_http_exchange_t *x, int err)
{
    if (err == -ENOENT || err == -ENOTDIR || err == -EXDEV || err == -ELOOP || err == -ENAMETOOLONG)
        return 404;
    if (err == -EACCES || err == -EPERM)
        return 403;
    mux__http_exchange_error(x, err);
    return 500;
}

static int mux__plain(mux_http_exchange_t *x, int status, const mux_http_header_t *h, uint32_t nh)
{
    char body[64];
    int n = snprintf(body, sizeof body, "%d\n", status);
    return mux_http_respond(x, status, h, nh, body, (size_t)n);
}

/* Opens `path` below the root and stats it: the descriptor, or minus the status to answer. */
static int mux__open_stat(mux_http_exchange_t *x, mux_http_static_t *st, const char *path,
                          struct stat *sb)
{
    int fd = mux__open_beneath(st, path);
    if (fd < 0)
        return -mux__status_of(x, fd);
    if (fstat(fd, sb) != 0) {
        int err = -errno;
        close(fd);
        return -mux__status_of(x, err);
    }
    return fd;
}

/* Opens what `rel` names for serving: a regular file, or a directory's index. Fills
 * `file` with the file's path below the root. The descriptor, or a status to answer
 * (a negative number: -301 for a directory named without its slash, -404, -403, -414). */
static int mux__open_file(mux_http_exchange_t *x, mux_http_static_t *st, const char *rel, int dir,
                          char *file, size_t cap, struct stat *sb)
{
    int fd = mux__open_stat(x, st, rel, sb);
    if (fd < 0)
        return fd;
    size_t rl = strlen(rel);
    if (S_ISDIR(sb->st_mode)) {
        close(fd);
        if (!dir && rl)
            return -301;
        const char *index = st->index ? st->index : "index.html";
        if ((size_t)snprintf(file, cap, "%s%s%s", rel, rl ? "/" : "", index) >= cap)
            return -414;
        if ((fd = mux__open_stat(x, st, file, sb)) < 0)
            return fd;
    } else {
        memcpy(file, rel, rl + 1);
    }
    if (!S_ISREG(sb->st_mode)) {
        close(fd);
        return -404;
    }
    return fd;
}

MUX_EXPORT int mux_http_serve_static(mux_http_exchange_t *x, mux_http_static_t *st)
{
    const mux_http_request_t *req = mux_http_exchange_request(x);
    if (!req || !st || !st->root_real_)
        return -EINVAL;
    int head = req->method.len == 4 && memcmp(req->method.base, "HEAD", 4) == 0;
    if (!head && !(req->method.len == 3 && memcmp(req->method.base, "GET", 3) == 0)) {
        mux_http_header_t allow = {{"Allow", 5}, {"GET, HEAD", 9}};
        return mux__plain(x, 405, &allow, 1);
    }
    char rel[4096], file[4200];
    int dir = 0;
    int r = mux__http_path(req->target.base, req->target.len, rel, sizeof rel - 1, &dir);
    if (r != 0)
        return mux__plain(x, r == -EACCES ? 403 : r == -ENAMETOOLONG ? 414 : 400, NULL, 0);
    /* The cache's key: a directory named with its slash is not the same request as one
     * named without (which is a redirect). */
    size_t rl = strlen(rel);
    if (dir) {
        rel[rl] = '/';
        rel[rl + 1] = 0;
    }
    /* The loop's time, read once per iteration: the cache's checks need no finer. */
    int64_t now = (int64_t)mux_now(mux__http_exchange_loop(x));
    struct mux__fentry *e = mux__fcache_get(st, rel, now);
    if (!e) {
        rel[rl] = 0;
        struct stat sb;
        int fd = mux__open_file(x, st, rel, dir, file, sizeof file, &sb);
        if (fd == -301) {
            size_t tl = req->target.len;
            const char *q = memchr(req->target.base, '?', tl);
            size_t pl = q ? (size_t)(q - req->target.base) : tl;
            char loc[4200];
            int n = snprintf(loc, sizeof loc, "%.*s/%.*s", (int)pl, req->target.base,
                             (int)(tl - pl), req->target.base + pl);
            mux_http_header_t h = {{"Location", 8}, {loc, (size_t)n}};
            return mux__plain(x, 301, &h, 1);
        }
        if (fd < 0)
            return mux__plain(x, -fd, NULL, 0);
        if (dir) {
            rel[rl] = '/';
            rel[rl + 1] = 0;
        }
        int err;
        if (!(e = mux__fcache_put(st, rel, file, fd, &sb, now, &err))) {
            mux__http_exchange_error(x, err);
            return mux__plain(x, 500, NULL, 0);
        }
    }
    uint64_t size = (uint64_t)e->sb.st_size;
    mux_http_header_t h[5];
    uint32_t nh = 0;
    h[nh++] = (mux_http_header_t){{"ETag", 4}, {e->etag, e->el}};
    h[nh++] = (mux_http_header_t){{"Last-Modified", 13}, {e->lastmod, e->ll}};
    /* The fields that matter here, in one pass (the first of each name counts). */
    mux_http_str_t inm = {NULL, 0}, ims = {NULL, 0}, range = {NULL, 0};
    for (uint32_t i = 0; i < req->nheaders; i++) {
        mux_http_str_t n = req->headers[i].name;
        int c0 = n.base[0] | 0x20;
        if (c0 == 'i' && !inm.base && mux__http_same(n, "if-none-match"))
            inm = req->headers[i].value;
        else if (c0 == 'i' && !ims.base && mux__http_same(n, "if-modified-since"))
            ims = req->headers[i].value;
        else if (c0 == 'r' && !range.base && mux__http_same(n, "range"))
            range = req->headers[i].value;
    }
    /* 304: If-None-Match, when present, decides alone. */
    int not_modified = 0;
    if (inm.base) {
        not_modified = mux__http_etag_match(inm, e->etag, e->el);
    } else if (ims.base) {
        int64_t since;
        not_modified = mux__http_date_parse(ims, &since) == 0 && e->sb.st_mtim.tv_sec <= since;
    }
    if (not_modified)
        return mux__http_respond_own(x, 304, h, nh, NULL, 0, -1, 0, NULL, NULL);
    h[nh++] = (mux_http_header_t){{"Content-Type", 12}, {e->type, e->tl}};
    h[nh++] = (mux_http_header_t){{"Accept-Ranges", 13}, {"bytes", 5}};
    uint64_t first = 0, last = size ? size - 1 : 0;
    int status = 200;
    char cr[80];
    if (range.base) {
        int rr = mux__http_range(range, size, &first, &last);
        if (rr < 0) {
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
    /* HEAD: the same Content-Length, and no body (the server leaves it out). */
    if (len <= MUX_HTTP_STATIC_INLINE && (e->data || len == 0)) /* copied after the head */
        return mux__http_respond_own(x, status, h, nh, len ? e->data + first : NULL, (size_t)len,
                                     -1, 0, NULL, NULL);
    e->refs++; /* until the response is done with the bytes, or the descriptor */
    if (e->data)
        r = mux__http_respond_own(x, status, h, nh, e->data + first, (size_t)len, -1, 0,
                                  mux__fentry_sent, e);
    else
        r = mux__http_respond_own(x, status, h, nh, NULL, (size_t)len, e->fd, first,
                                  mux__fentry_sent, e);
    if (r != 0)
        mux__fentry_unref(e);
    return r;
}
