/* SPDX-License-Identifier: MIT */
/* Static files (include/iomux/http.h, mux_http_serve_static): the pure parts of
 * static.c and mime.c put to work on a directory.
 *
 * A file is opened below the root through the file-system seam (fs.h: descriptors on POSIX,
 * handles on Windows), never through a link that leads out of the root.
 *
 * The cache keeps the metadata and the response fields made from it, and either the bytes
 * of a file up to MUX__FCACHE_MEM_FILE (while the bytes kept stay under MUX__FCACHE_MEM),
 * read when it is opened, or its descriptor (files up to MUX__FCACHE_KEEP are always kept).
 * Up to MUX_HTTP_STATIC_INLINE the bytes are copied after the head (a copy that small costs
 * less than a second buffer in the send); above, they are lent to the response, which holds a
 * reference to the entry, as one whose body goes with mux_http_respond_file does (the copy of
 * a 4 KB file was an eighth of iomux-httpd's instructions per request, and a fifth of the
 * time it spent outside the kernel: docs/studies.md). An entry dropped from
 * the cache (changed, evicted, or the cache closed) frees its bytes and closes its
 * descriptor once the last response that sends from it is done.
 *
 * Descriptors are the process's to share with its connections, so the cache keeps no more
 * than max_open of them, and none for a file it holds in memory: the name, not the
 * descriptor, is what the check once a second looks at. Entries are kept in the order of
 * their use; the oldest goes when the cache is full, the oldest holding a descriptor when
 * max_open are held or an open fails with EMFILE or ENFILE. A hit moves its entry to the
 * front: a few pointers, no allocation and no system call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/fs.h"
#include "http/http_internal.h"
#include "internal.h"

/* ---- the open-file cache ------------------------------------------------------------- */

#define MUX__FCACHE_BUCKETS  4096u
#define MUX__FCACHE_MAX      16384u              /* entries */
#define MUX__FCACHE_VALID    1000000000ll        /* ns between checks of a file */
#define MUX__FCACHE_MEM_FILE (64u * 1024)        /* files kept in memory: up to this size */
#define MUX__FCACHE_MEM      (16u * 1024 * 1024) /* and up to this many bytes in all */
#define MUX__FCACHE_KEEP     16384u /* files kept in memory whatever the bytes kept in all */
#define MUX__MULTIPART_READ  (1u << 20)          /* a multipart body read from a descriptor */

struct mux__fentry {
    struct mux__fentry *next;          /* in its bucket */
    struct mux__fentry *newer, *older; /* in the order of use */
    uint32_t hash;
    char *key; /* the request's path below the root ("" for the root) */
    int fd;    /* -1 when the bytes are kept, or the file is empty (fs.h: a file) */
    struct mux__fs_stat sb;
    int64_t checked; /* CLOCK_MONOTONIC ns of the last check */
    char *file;      /* the file's path below the root (the index's for a directory) */
    char etag[48], lastmod[32];
    size_t el, ll;
    const char *type;
    size_t tl;
    char *data;    /* the bytes of a small file (NULL when empty, or not kept) */
    uint32_t refs; /* the cache's, and one per response sending from it */
    /* The fields of a 200 with the whole file, made once (ETag, Last-Modified, Accept-Ranges,
     * Content-Type, each with its CRLF): most requests are answered with them as they are.
     * fl is 0 when they did not fit (then they are made per response). */
    char fields[256];
    size_t fl;
};

struct mux__fcache {
    struct mux__fentry *b[MUX__FCACHE_BUCKETS];
    struct mux__fentry *newest, *oldest;
    uint32_t n, nfd, max_fd;
    size_t mem;     /* file bytes the entries keep */
    uint64_t parts; /* multipart answers made: each boundary differs */
    struct mux__mime *mime;
};

static uint32_t mux__hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The last write's time in whole seconds (rounded down, before the epoch too). */
static int64_t mux__mtime_s(const struct mux__fs_stat *sb)
{
    int64_t s = sb->mtime_ns / 1000000000;
    return s - (sb->mtime_ns % 1000000000 < 0);
}

static void mux__fentry_unref(struct mux__fentry *e)
{
    if (--e->refs)
        return;
    if (e->fd >= 0)
        mux__fs_close(e->fd);
    free(e->key);
    free(e->file);
    free(e->data);
    free(e);
}

/* Makes e->fields; returns their length, or 0 when they do not fit. */
static size_t mux__fentry_fields(struct mux__fentry *e)
{
    int n = snprintf(e->fields, sizeof e->fields,
                     "ETag: %.*s\r\n%s%.*s%sAccept-Ranges: bytes\r\nContent-Type: %.*s\r\n",
                     (int)e->el, e->etag, e->ll ? "Last-Modified: " : "", (int)e->ll,
                     e->lastmod, e->ll ? "\r\n" : "", (int)e->tl, e->type);
    return n > 0 && (size_t)n < sizeof e->fields ? (size_t)n : 0;
}

/* A response that sent from the entry is done with it. */
static void mux__fentry_sent(void *arg, int status)
{
    (void)status; /* a failure closed that connection; the entry is checked as usual */
    mux__fentry_unref(arg);
}

static void mux__lru_unlink(struct mux__fcache *c, struct mux__fentry *e)
{
    *(e->newer ? &e->newer->older : &c->newest) = e->older;
    *(e->older ? &e->older->newer : &c->oldest) = e->newer;
}

static void mux__lru_front(struct mux__fcache *c, struct mux__fentry *e)
{
    e->newer = NULL;
    e->older = c->newest;
    *(c->newest ? &c->newest->newer : &c->oldest) = e;
    c->newest = e;
}

/* Takes `e` out of the cache, which lets go of it. */
static void mux__fcache_drop(struct mux__fcache *c, struct mux__fentry *e)
{
    struct mux__fentry **p = &c->b[e->hash % MUX__FCACHE_BUCKETS];
    while (*p != e)
        p = &(*p)->next;
    *p = e->next;
    mux__lru_unlink(c, e);
    c->n--;
    if (e->fd >= 0)
        c->nfd--;
    if (e->data)
        c->mem -= (size_t)e->sb.size;
    mux__fentry_unref(e);
}

/* Drops the least recently used entry that holds a descriptor; with `idle`, only one that
 * no response sends from (so that its descriptor is closed now). 1, or 0 when there is
 * none. */
static int mux__fcache_evict_fd(struct mux__fcache *c, int idle)
{
    for (struct mux__fentry *e = c->oldest; e; e = e->newer)
        if (e->fd >= 0 && (!idle || e->refs == 1)) {
            mux__fcache_drop(c, e);
            return 1;
        }
    return 0;
}

static void mux__fcache_clear(struct mux__fcache *c)
{
    while (c->oldest)
        mux__fcache_drop(c, c->oldest);
}

/* The entry for `key`, checked again when its last check is over a second old: the name
 * must still lead to the same file, as it was (the same inode, so the descriptor's file
 * too). NULL when there is none, or it did not pass (then it is gone). */
static struct mux__fentry *mux__fcache_get(const mux_http_static_t *st, const char *key,
                                           int64_t now)
{
    struct mux__fcache *c = st->cache_;
    uint32_t h = mux__hash(key);
    struct mux__fentry *e = c->b[h % MUX__FCACHE_BUCKETS];
    while (e && (e->hash != h || strcmp(e->key, key) != 0))
        e = e->next;
    if (!e)
        return NULL;
    if (now - e->checked >= MUX__FCACHE_VALID) {
        struct mux__fs_stat sb;
        if (mux__fs_stat_at(st->root_fd_, st->root_real_, e->file, &sb) != 0 ||
            sb.ino != e->sb.ino || sb.dev != e->sb.dev || sb.size != e->sb.size ||
            sb.mtime_ns != e->sb.mtime_ns) {
            mux__fcache_drop(c, e);
            return NULL;
        }
        e->checked = now;
    }
    if (e != c->newest) {
        mux__lru_unlink(c, e);
        mux__lru_front(c, e);
    }
    return e;
}

/* Keeps the file `fd` (`file`, served for `key`) with its metadata, and its bytes instead
 * of its descriptor when it is small; takes the descriptor. The entry, or NULL with *err
 * set (-ENOMEM, or a read's error; the descriptor is closed then). */
static struct mux__fentry *mux__fcache_put(mux_http_static_t *st, const char *key, const char *file,
                                           int fd, const struct mux__fs_stat *sb, int64_t now,
                                           int *err)
{
    struct mux__fcache *c = st->cache_;
    *err = -ENOMEM;
    struct mux__fentry *e = calloc(1, sizeof *e);
    if (!e || !(e->key = strdup(key)) || !(e->file = strdup(file))) {
        if (e) {
            free(e->key);
            free(e);
        }
        mux__fs_close(fd);
        return NULL;
    }
    e->fd = fd;
    e->refs = 1;
    size_t size = (size_t)sb->size;
    int keep = size && (size <= MUX__FCACHE_KEEP ||
                        (size <= MUX__FCACHE_MEM_FILE && c->mem + size <= MUX__FCACHE_MEM));
    if (keep &&
        (!(e->data = malloc(size)) || (*err = mux__fs_read_at(fd, e->data, size, 0)) != 0)) {
        mux__fentry_unref(e); /* closes fd */
        return NULL;
    }
    if (keep || size == 0) { /* sent from memory: the descriptor is not needed */
        mux__fs_close(fd);
        e->fd = -1;
    }
    if (c->n >= MUX__FCACHE_MAX)
        mux__fcache_drop(c, c->oldest);
    if (e->fd >= 0 && c->nfd >= c->max_fd)
        mux__fcache_evict_fd(c, 0);
    if (keep)
        c->mem += size;
    e->sb = *sb;
    e->checked = now;
    e->el = mux__http_etag(sb->size, sb->mtime_ns, e->etag);
    e->ll = mux__http_date(mux__mtime_s(sb), e->lastmod);
    e->type = mux__mime_find(c->mime, file, &e->tl);
    e->fl = mux__fentry_fields(e);
    e->hash = mux__hash(key);
    e->next = c->b[e->hash % MUX__FCACHE_BUCKETS];
    c->b[e->hash % MUX__FCACHE_BUCKETS] = e;
    mux__lru_front(c, e);
    c->n++;
    c->nfd += e->fd >= 0;
    return e;
}

/* The media types: the named file, or /etc/mime.types when it can be read. */
static int mux__mime_open(const mux_http_static_t *st, struct mux__mime **m)
{
    if (st->mime_types)
        return mux__mime_load(m, *st->mime_types ? st->mime_types : NULL);
    const char *sys = mux__fs_mime_types();
    int err = sys ? mux__mime_load(m, sys) : -ENOENT;
    if (err == -ENOENT || err == -EACCES || err == -ENOTDIR)
        err = mux__mime_load(m, NULL);
    return err;
}

MUX_EXPORT int mux_http_static_init(mux_http_static_t *st, const char *root)
{
    if (!st || !root)
        return -EINVAL;
    mux_http_static_t opts = *st;
    memset(st, 0, sizeof *st);
    st->index = opts.index;
    st->mime_types = opts.mime_types;
    st->flags = opts.flags;
    st->max_open = opts.max_open ? opts.max_open : mux__fs_default_max_open(MUX__FCACHE_MAX);
    st->max_ranges = opts.max_ranges ? opts.max_ranges : MUX_HTTP_STATIC_RANGES;
    if (st->max_ranges > MUX_HTTP_STATIC_RANGES_MAX)
        st->max_ranges = MUX_HTTP_STATIC_RANGES_MAX;
    st->root_fd_ = -1;
    struct mux__fcache *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->max_fd = st->max_open;
    int err = mux__mime_open(st, &c->mime);
    if (err) {
        free(c);
        return err;
    }
    st->root_fd_ = mux__fs_root_open(root, &st->root_real_);
    if (st->root_fd_ < 0) {
        err = st->root_fd_;
        st->root_fd_ = -1;
        mux__mime_free(c->mime);
        free(c);
        return err;
    }
    st->cache_ = c;
    return 0;
}

MUX_EXPORT void mux_http_static_close(mux_http_static_t *st)
{
    if (!st || !st->root_real_)
        return;
    mux__fcache_clear(st->cache_);
    mux__mime_free(st->cache_->mime);
    free(st->cache_);
    st->cache_ = NULL;
    mux__fs_close(st->root_fd_);
    free(st->root_real_);
    st->root_real_ = NULL;
    st->root_fd_ = -1;
}

MUX_EXPORT int mux_http_static_forget(mux_http_static_t *st, const char *path)
{
    if (!st || !st->root_real_)
        return -EINVAL;
    struct mux__fcache *c = st->cache_;
    int dropped = 0;
    size_t n = path ? strlen(path) : 0;
    while (n && path[n - 1] == '/')
        n--; /* "sub/" is "sub" */
    for (struct mux__fentry *e = c->oldest, *newer; e; e = newer) {
        newer = e->newer;
        /* An entry's file (an index's, for a directory's key) or its key: the path itself,
         * or below it. */
        const char *names[2] = {e->file, e->key};
        for (int i = 0; i < 2; i++)
            if (!path || (strncmp(names[i], path, n) == 0 &&
                          (names[i][n] == 0 || names[i][n] == '/'))) {
                mux__fcache_drop(c, e);
                dropped++;
                break;
            }
    }
    return dropped;
}

/* Opens `rel` and stats it, giving back descriptors of the cache to make room when the
 * process has none left. The descriptor, or -errno. */
static int mux__open_stat(mux_http_static_t *st, const char *rel, struct mux__fs_stat *sb)
{
    int fd;
    while ((fd = mux__fs_open(st->root_fd_, st->root_real_, rel)) == -EMFILE || fd == -ENFILE)
        if (!mux__fcache_evict_fd(st->cache_, 1))
            return fd;
    int err = fd >= 0 ? mux__fs_stat(fd, sb) : 0;
    if (err) {
        mux__fs_close(fd);
        return err;
    }
    return fd;
}

/* ---- answers ------------------------------------------------------------------------- */

static const char *mux__error_text(int status)
{
    switch (status) {
    case 301:
        return "301 Moved Permanently\n";
    case 400:
        return "400 Bad Request\n";
    case 403:
        return "403 Forbidden\n";
    case 404:
        return "404 Not Found\n";
    case 405:
        return "405 Method Not Allowed\n";
    case 414:
        return "414 URI Too Long\n";
    case 416:
        return "416 Range Not Satisfiable\n";
    case 503:
        return "503 Service Unavailable\n";
    default:
        return "500 Internal Server Error\n";
    }
}

/* An answer without a file: its status and reason as a text/plain body, after the fields
 * h[0 .. nh) (at most 2). */
static int mux__error(mux_http_exchange_t *x, int status, const mux_http_header_t *h, uint32_t nh)
{
    mux_http_header_t f[3];
    for (uint32_t i = 0; i < nh; i++)
        f[i] = h[i];
    f[nh++] = (mux_http_header_t){{"Content-Type", 12}, {"text/plain", 10}};
    const char *body = mux__error_text(status);
    return mux__http_respond_own(x, status, f, nh, body, strlen(body), -1, 0, NULL, NULL);
}

/* The answer for an open that failed: 404 for what is not there (or not below the root),
 * 403 for what may not be read, 503 when no descriptor is left (the cache gave back what it
 * could), 500 for another failure of the server's own (ENOMEM, EIO); those two are
 * reported. */
static int mux__open_failed(mux_http_exchange_t *x, int err)
{
    if (err == -ENOENT || err == -ENOTDIR || err == -EXDEV || err == -ELOOP || err == -ENAMETOOLONG)
        return mux__error(x, 404, NULL, 0);
    if (err == -EACCES || err == -EPERM)
        return mux__error(x, 403, NULL, 0);
    mux__http_exchange_error(x, err);
    if (err == -EMFILE || err == -ENFILE) {
        mux_http_header_t ra = {{"Retry-After", 11}, {"1", 1}};
        return mux__error(x, 503, &ra, 1);
    }
    return mux__error(x, 500, NULL, 0);
}

/* 301 to the directory `rel` with its '/': the resolved path, percent-encoded (the target
 * as sent could start with "//", which a browser reads as another host), and the query as
 * sent. Made at whatever length the limits let the target have. */
static int mux__redirect(mux_http_exchange_t *x, const mux_http_request_t *req, const char *rel)
{
    const char *t = req->target.base, *end = t + req->target.len;
    const char *q = t;
    while (q < end && *q != '?' && *q != '#')
        q++;
    const char *qe = q;
    while (qe < end && *qe != '#')
        qe++;
    size_t qlen = q < end && *q == '?' ? (size_t)(qe - q) : 0;
    size_t rl = strlen(rel), pl = mux__http_pct(rel, rl, NULL, 0, 1);
    size_t len = 1 + pl + 1 + qlen;
    char *loc = malloc(len);
    if (!loc) {
        mux__http_exchange_error(x, -ENOMEM);
        return mux__error(x, 500, NULL, 0);
    }
    loc[0] = '/';
    mux__http_pct(rel, rl, loc + 1, pl, 1);
    loc[1 + pl] = '/';
    if (qlen)
        memcpy(loc + 2 + pl, q, qlen);
    mux_http_header_t h = {{"Location", 8}, {loc, len}};
    int r = mux__error(x, 301, &h, 1);
    free(loc);
    return r;
}

/* The listing of the directory `fd` (taken), `rel` below the root. */
static int mux__autoindex(mux_http_exchange_t *x, mux_http_static_t *st, int fd, const char *rel)
{
    char *page;
    size_t len;
    int err = mux__http_listing(fd, rel, st->flags, &page, &len);
    if (err)
        return mux__open_failed(x, err);
    mux_http_header_t h = {{"Content-Type", 12}, {"text/html; charset=utf-8", 24}};
    int r = mux__http_respond_own(x, 200, &h, 1, page, len, -1, 0, NULL, NULL);
    free(page);
    return r;
}

/* Opens what `rel` names (a file, or a directory's index) and puts it in the cache under
 * `key`. The entry, or NULL when it answered `x` itself (a redirect, a listing, an error),
 * with *rc set to what that answer returned. */
static struct mux__fentry *mux__fill(mux_http_exchange_t *x, mux_http_static_t *st, const char *rel,
                                     const char *key, int dir, int64_t now, int *rc)
{
    struct mux__fs_stat sb;
    char file[4096 + 256];
    const char *name = rel;
    int fd = mux__open_stat(st, rel, &sb);
    if (fd >= 0 && sb.kind == MUX__FS_DIR) {
        size_t rl = strlen(rel);
        if (!dir && rl) {
            mux__fs_close(fd);
            *rc = mux__redirect(x, mux_http_exchange_request(x), rel);
            return NULL;
        }
        const char *index = st->index ? st->index : "index.html";
        int n = snprintf(file, sizeof file, "%s%s%s", rel, rl ? "/" : "", index);
        int ifd = n > 0 && (size_t)n < sizeof file ? mux__open_stat(st, file, &sb) : -ENAMETOOLONG;
        if (ifd == -ENOENT && (st->flags & MUX_HTTP_STATIC_AUTOINDEX)) {
            *rc = mux__autoindex(x, st, fd, rel);
            return NULL;
        }
        mux__fs_close(fd);
        fd = ifd;
        name = file;
    }
    if (fd >= 0 && sb.kind != MUX__FS_REG) {
        mux__fs_close(fd);
        fd = -ENOENT;
    }
    if (fd < 0) {
        *rc = mux__open_failed(x, fd);
        return NULL;
    }
    int err;
    struct mux__fentry *e = mux__fcache_put(st, key, name, fd, &sb, now, &err);
    if (!e)
        *rc = mux__open_failed(x, err);
    return e;
}

/* ---- ranges -------------------------------------------------------------------------- */

/* Writes u's decimal digits at p; returns their count. */
static size_t mux__u64(char *p, uint64_t u)
{
    char t[20];
    size_t n = 0;
    do
        t[n++] = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    for (size_t i = 0; i < n; i++)
        p[i] = t[n - 1 - i];
    return n;
}

/* "bytes FIRST-LAST/SIZE" at p (68 bytes at most); its length. */
static size_t mux__content_range(char *p, uint64_t first, uint64_t last, uint64_t size)
{
    size_t n = 0;
    memcpy(p, "bytes ", 6);
    n = 6 + mux__u64(p + 6, first);
    p[n++] = '-';
    n += mux__u64(p + n, last);
    p[n++] = '/';
    return n + mux__u64(p + n, size);
}

#define MUX__BOUNDARY_LEN 22 /* "iomux-" and 16 hex digits */

/* One part's head at p (NULL: measured): the delimiter, its type and its range. */
static size_t mux__part_head(char *p, const char *boundary, const struct mux__fentry *e,
                             const mux__range_t *r, int first)
{
    char tmp[300], cr[80];
    size_t crl = mux__content_range(cr, r->first, r->last, e->sb.size);
    size_t n = 0;
    char *w = p ? p : tmp;
    if (!first) {
        memcpy(w + n, "\r\n", 2);
        n += 2;
    }
    memcpy(w + n, "--", 2);
    memcpy(w + n + 2, boundary, MUX__BOUNDARY_LEN);
    n += 2 + MUX__BOUNDARY_LEN;
    if (!p) /* measured: the type may be longer than tmp */
        return n + 16 + e->tl + 17 + crl + 4;
    memcpy(w + n, "\r\nContent-Type: ", 16);
    memcpy(w + n + 16, e->type, e->tl);
    n += 16 + e->tl;
    memcpy(w + n, "\r\nContent-Range: ", 17);
    memcpy(w + n + 17, cr, crl);
    n += 17 + crl;
    memcpy(w + n, "\r\n\r\n", 4);
    return n + 4;
}

/* A boundary of its own for each answer (splitmix64 of a count), unlikely in the bytes. */
static void mux__boundary(struct mux__fcache *c, char out[MUX__BOUNDARY_LEN + 1])
{
    uint64_t z = (++c->parts + (uintptr_t)c) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    memcpy(out, "iomux-", 6);
    for (int i = 0; i < 16; i++)
        out[6 + i] = "0123456789abcdef"[(z >> (60 - 4 * i)) & 15];
    out[MUX__BOUNDARY_LEN] = 0;
}

static void mux__free_body(void *arg, int status)
{
    (void)status;
    free(arg);
}

/* 206 with the ranges r[0 .. n) (n >= 2) as multipart/byteranges (RFC 9110, 14.6), built
 * in memory. *rc set and 1, or 0 when it is to be answered whole instead (a body over
 * MUX__MULTIPART_READ read from a descriptor). */
static int mux__multipart(mux_http_exchange_t *x, mux_http_static_t *st, struct mux__fentry *e,
                          mux_http_header_t *h, uint32_t nh, const mux__range_t *r, unsigned n,
                          int head, int *rc)
{
    char boundary[MUX__BOUNDARY_LEN + 1], type[64];
    mux__boundary(st->cache_, boundary);
    size_t total = 2 + 2 + MUX__BOUNDARY_LEN + 4; /* the closing delimiter */
    uint64_t bytes = 0;
    for (unsigned i = 0; i < n; i++) {
        total += mux__part_head(NULL, boundary, e, &r[i], i == 0);
        bytes += r[i].last - r[i].first + 1;
    }
    if (!e->data && bytes > MUX__MULTIPART_READ)
        return 0;
    total += (size_t)bytes;
    memcpy(type, "multipart/byteranges; boundary=", 31);
    memcpy(type + 31, boundary, MUX__BOUNDARY_LEN);
    h[nh++] = (mux_http_header_t){{"Content-Type", 12}, {type, 31 + MUX__BOUNDARY_LEN}};
    if (head) { /* the length alone */
        *rc = mux__http_respond_own(x, 206, h, nh, NULL, total, -1, 0, NULL, NULL);
        return 1;
    }
    char *body = malloc(total), *p = body;
    int err = body ? 0 : -ENOMEM;
    for (unsigned i = 0; i < n && !err; i++) {
        p += mux__part_head(p, boundary, e, &r[i], i == 0);
        size_t len = (size_t)(r[i].last - r[i].first + 1);
        if (e->data)
            memcpy(p, e->data + r[i].first, len);
        else
            err = mux__fs_read_at(e->fd, p, len, r[i].first);
        p += len;
    }
    if (err) {
        free(body);
        mux__http_exchange_error(x, err);
        *rc = mux__error(x, 500, NULL, 0);
        return 1;
    }
    memcpy(p, "\r\n--", 4);
    memcpy(p + 4, boundary, MUX__BOUNDARY_LEN);
    memcpy(p + 4 + MUX__BOUNDARY_LEN, "--\r\n", 4);
    *rc = mux__http_respond_own(x, 206, h, nh, body, total, -1, 0, mux__free_body, body);
    if (*rc != 0)
        free(body);
    return 1;
}

/* Whether an If-Range value lets the ranges be served: a strong entity tag equal to the
 * file's, or the file's Last-Modified date exactly (RFC 9110, 13.1.5). */
static int mux__if_range(mux_http_str_t v, const struct mux__fentry *e)
{
    if (v.len && v.base[0] == '"')
        return v.len == e->el && memcmp(v.base, e->etag, e->el) == 0;
    return e->ll && v.len == e->ll && memcmp(v.base, e->lastmod, e->ll) == 0;
}

/* The body of `e` from `first`, `len` bytes, with status and fields: copied after the head
 * when it is small and in memory, lent when it is in memory, from the descriptor else. */
static int mux__send_body(mux_http_exchange_t *x, struct mux__fentry *e, int status,
                          const mux_http_header_t *h, uint32_t nh, uint64_t first, uint64_t len)
{
    if (len <= MUX_HTTP_STATIC_INLINE && (e->data || len == 0)) /* copied after the head */
        return mux__http_respond_own(x, status, h, nh, len ? e->data + first : NULL, (size_t)len,
                                     -1, 0, NULL, NULL);
    e->refs++; /* until the response is done with the bytes, or the descriptor */
    int r;
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

/* The common answer, a 200 with the whole file from memory and the entry's fields as they
 * were made: copied after the head when small, lent when larger (as mux__send_body). */
static int mux__send_fields(mux_http_exchange_t *x, struct mux__fentry *e, int head)
{
    size_t len = (size_t)e->sb.size;
    (void)head; /* HEAD: the same Content-Length, and no body (the server leaves it out) */
    if (len <= MUX_HTTP_STATIC_INLINE)
        return mux__http_respond_raw(x, 200, e->fields, e->fl, e->data, len, NULL, NULL);
    e->refs++; /* until the response is done with the bytes */
    int r = mux__http_respond_raw(x, 200, e->fields, e->fl, e->data, len, mux__fentry_sent, e);
    if (r != 0)
        mux__fentry_unref(e);
    return r;
}

/* Answers a Range field: 416, 206 with one range or several. 1 with *rc set, or 0 when the
 * field is to be ignored (then the whole file is the answer). h[0 .. nh) are the fields so
 * far, the file's Content-Type last; h has room for two more. */
static int mux__ranges(mux_http_exchange_t *x, mux_http_static_t *st, struct mux__fentry *e,
                       mux_http_header_t *h, uint32_t nh, mux_http_str_t range, int head, int *rc)
{
    uint64_t size = e->sb.size;
    mux__range_t r[MUX_HTTP_STATIC_RANGES_MAX];
    int n = mux__http_ranges(range, size, r, st->max_ranges);
    char cr[80];
    if (n < 0) {
        memcpy(cr, "bytes */", 8);
        size_t crl = 8 + mux__u64(cr + 8, size);
        mux_http_header_t f[2] = {h[nh - 2], {{"Content-Range", 13}, {cr, crl}}};
        *rc = mux__error(x, 416, f, 2); /* with Accept-Ranges */
        return 1;
    }
    if (n == 0)
        return 0;
    if (n > 1)
        return mux__multipart(x, st, e, h, nh - 1, r, (unsigned)n, head, rc);
    size_t crl = mux__content_range(cr, r[0].first, r[0].last, size);
    h[nh++] = (mux_http_header_t){{"Content-Range", 13}, {cr, crl}};
    *rc = mux__send_body(x, e, 206, h, nh, r[0].first, r[0].last - r[0].first + 1);
    return 1;
}

/* ---- serving ------------------------------------------------------------------------- */

/* Answers `x` with the cached file `e`: 304, ranges, or the whole. */
static int mux__send(mux_http_exchange_t *x, mux_http_static_t *st, struct mux__fentry *e,
                     const mux_http_request_t *req, int head)
{
    mux_http_header_t h[6];
    uint32_t nh = 0;
    h[nh++] = (mux_http_header_t){{"ETag", 4}, {e->etag, e->el}};
    if (e->ll)
        h[nh++] = (mux_http_header_t){{"Last-Modified", 13}, {e->lastmod, e->ll}};
    /* The fields that matter here, in one pass (the first of each name counts). */
    mux_http_str_t inm = {NULL, 0}, ims = {NULL, 0}, range = {NULL, 0}, ifr = {NULL, 0};
    for (uint32_t i = 0; i < req->nheaders; i++) {
        mux_http_str_t n = req->headers[i].name;
        int c0 = n.base[0] | 0x20;
        if (c0 == 'i' && !inm.base && mux__http_same(n, "if-none-match"))
            inm = req->headers[i].value;
        else if (c0 == 'i' && !ims.base && mux__http_same(n, "if-modified-since"))
            ims = req->headers[i].value;
        else if (c0 == 'i' && !ifr.base && mux__http_same(n, "if-range"))
            ifr = req->headers[i].value;
        else if (c0 == 'r' && !range.base && mux__http_same(n, "range"))
            range = req->headers[i].value;
    }
    /* Without a field that may change the answer, the fields made beforehand go as they are. */
    if (!inm.base && !ims.base && !range.base && e->fl && (e->data || e->sb.size == 0))
        return mux__send_fields(x, e, head);
    /* 304: If-None-Match, when present, decides alone. */
    int not_modified = 0;
    if (inm.base) {
        not_modified = mux__http_etag_match(inm, e->etag, e->el);
    } else if (ims.base) {
        int64_t since;
        not_modified = mux__http_date_parse(ims, &since) == 0 && mux__mtime_s(&e->sb) <= since;
    }
    if (not_modified)
        return mux__http_respond_own(x, 304, h, nh, NULL, 0, -1, 0, NULL, NULL);
    h[nh++] = (mux_http_header_t){{"Accept-Ranges", 13}, {"bytes", 5}};
    h[nh++] = (mux_http_header_t){{"Content-Type", 12}, {e->type, e->tl}};
    int rc;
    if (range.base && (!ifr.base || mux__if_range(ifr, e)) &&
        mux__ranges(x, st, e, h, nh, range, head, &rc))
        return rc;
    /* HEAD: the same Content-Length, and no body (the server leaves it out). */
    return mux__send_body(x, e, 200, h, nh, 0, e->sb.size);
}

MUX_EXPORT int mux_http_serve_static(mux_http_exchange_t *x, mux_http_static_t *st)
{
    const mux_http_request_t *req = mux_http_exchange_request(x);
    if (!req || !st || !st->root_real_)
        return -EINVAL;
    int head = req->method.len == 4 && memcmp(req->method.base, "HEAD", 4) == 0;
    if (!head && !(req->method.len == 3 && memcmp(req->method.base, "GET", 3) == 0)) {
        mux_http_header_t allow = {{"Allow", 5}, {"GET, HEAD", 9}};
        return mux__error(x, 405, &allow, 1);
    }
    char rel[4096];
    int dir = 0;
    int r = mux__http_path(req->target.base, req->target.len, rel, sizeof rel - 1, &dir, st->flags);
    if (r != 0)
        return mux__error(x, r == -EACCES ? 403 : r == -ENAMETOOLONG ? 414 : 400, NULL, 0);
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
        char key[4096];
        memcpy(key, rel, rl + (size_t)dir + 1);
        rel[rl] = 0;
        if (!(e = mux__fill(x, st, rel, key, dir, now, &r)))
            return r;
    }
    return mux__send(x, st, e, req, head);
}
