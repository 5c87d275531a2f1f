/* SPDX-License-Identifier: MIT */
/* Media types by file extension (http_internal.h): a built-in table, and mime.types files.
 *
 * A file is read once, when the static files are opened, into one table: an open-addressed
 * hash of the extensions, whose strings stay in the file's own buffer (cut into words in
 * place) or, for text types that get a charset, in a second buffer sized in a first pass.
 * The built-in types go in first, so that the file's win; an extension the file does not
 * know keeps its built-in type. A lookup happens when a file enters the open-file cache,
 * never per request: the cache keeps the type with the file.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/fs.h"
#include "http/http_internal.h"

#define MUX__MIME_EXT_MAX  64                 /* longer extensions are not looked up */
#define MUX__MIME_TYPE_MAX 255                /* longer types are skipped */
#define MUX__MIME_FILE_MAX (4u * 1024 * 1024) /* Debian's is 75 KB */
#define MUX__MIME_CHARSET  "; charset=utf-8"

/* Sorted by extension (bytewise): mux__mime_find searches it when it has no table. */
const struct mux__mime_builtin mux__mime_builtins[] = {
    {"avif", "image/avif"},
    {"css", "text/css; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"gif", "image/gif"},
    {"gz", "application/gzip"},
    {"htm", "text/html; charset=utf-8"},
    {"html", "text/html; charset=utf-8"},
    {"ico", "image/vnd.microsoft.icon"},
    {"jpeg", "image/jpeg"},
    {"jpg", "image/jpeg"},
    {"js", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"md", "text/markdown; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"mp3", "audio/mpeg"},
    {"mp4", "video/mp4"},
    {"ogg", "audio/ogg"},
    {"otf", "font/otf"},
    {"pdf", "application/pdf"},
    {"png", "image/png"},
    {"svg", "image/svg+xml"},
    {"tar", "application/x-tar"},
    {"ttf", "font/ttf"},
    {"txt", "text/plain; charset=utf-8"},
    {"wasm", "application/wasm"},
    {"wav", "audio/wav"},
    {"webm", "video/webm"},
    {"webp", "image/webp"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"xml", "application/xml"},
    {"zip", "application/zip"},
};
const size_t mux__mime_nbuiltins = sizeof mux__mime_builtins / sizeof mux__mime_builtins[0];

struct mux__mime_slot {
    const char *ext; /* NULL: free */
    const char *type;
    uint32_t hash;
    uint32_t tlen;
};

struct mux__mime {
    uint32_t mask; /* slots - 1 (a power of two, at least twice the extensions) */
    uint32_t count;
    struct mux__mime_slot *slots;
    char *file;  /* the file's bytes, cut into words */
    char *types; /* text types with their charset */
    size_t types_len, types_cap;
};

static const char mux__octet[] = "application/octet-stream";

static uint32_t mux__mime_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* Adds or replaces the type of `ext` (lower case, NUL-terminated). */
static void mux__mime_put(struct mux__mime *m, const char *ext, const char *type, size_t tlen)
{
    size_t el = strlen(ext);
    uint32_t h = mux__mime_hash(ext, el);
    for (uint32_t i = h & m->mask;; i = (i + 1) & m->mask) {
        struct mux__mime_slot *s = &m->slots[i];
        if (!s->ext) {
            *s = (struct mux__mime_slot){ext, type, h, (uint32_t)tlen};
            m->count++;
            return;
        }
        if (s->hash == h && strcmp(s->ext, ext) == 0) {
            s->type = type;
            s->tlen = (uint32_t)tlen;
            return;
        }
    }
}

/* A media type as mime.types writes it: type "/" subtype, both tokens. */
static int mux__mime_type_ok(const char *s, size_t n)
{
    size_t slash = 0, slashes = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '/')
            slash = i, slashes++;
        else if (!mux__http_tchar[(unsigned char)s[i]])
            return 0;
    }
    return n <= MUX__MIME_TYPE_MAX && slashes == 1 && slash > 0 && slash < n - 1;
}

static int mux__mime_ext_ok(const char *s, size_t n)
{
    if (n == 0 || n > MUX__MIME_EXT_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!mux__http_tchar[(unsigned char)s[i]])
            return 0;
    return 1;
}

static int mux__mime_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* The next word of b[*i .. end), NUL-terminated in place when `cut`; its start, or NULL at
 * the end. */
static char *mux__mime_word(char *b, size_t *i, size_t end, size_t *len, int cut)
{
    while (*i < end && mux__mime_space(b[*i]))
        (*i)++;
    if (*i == end)
        return NULL;
    size_t start = *i;
    while (*i < end && !mux__mime_space(b[*i]))
        (*i)++;
    *len = *i - start;
    if (cut)
        b[*i] = 0; /* a space, the line's end, or the byte after the buffer */
    if (*i < end)
        (*i)++;
    return b + start;
}

/* Reads the lines of b[0 .. n) (b[n] is writable). With `fill` 0, counts the extensions
 * and the bytes the text types need; with `fill` 1, cuts the words and adds them. */
static void mux__mime_lines(struct mux__mime *m, char *b, size_t n, int fill, size_t *exts,
                            size_t *extra)
{
    size_t i = 0;
    while (i < n) {
        size_t eol = i;
        while (eol < n && b[eol] != '\n')
            eol++;
        size_t end = i;
        while (end < eol && b[end] != '#')
            end++;
        size_t next = eol + 1, tl, el;
        char *type = mux__mime_word(b, &i, end, &tl, 0);
        if (type && mux__mime_type_ok(type, tl)) {
            int text = tl > 5 && memcmp(type, "text/", 5) == 0;
            const char *t = type;
            size_t tlen = tl;
            if (text && !fill) {
                *extra += tl + sizeof MUX__MIME_CHARSET;
            } else if (text) {
                char *dst = m->types + m->types_len;
                memcpy(dst, type, tl);
                memcpy(dst + tl, MUX__MIME_CHARSET, sizeof MUX__MIME_CHARSET);
                m->types_len += tl + sizeof MUX__MIME_CHARSET;
                t = dst;
                tlen = tl + sizeof MUX__MIME_CHARSET - 1;
            }
            if (fill && !text)
                type[tl] = 0;
            char *ext;
            while ((ext = mux__mime_word(b, &i, end, &el, fill)) != NULL) {
                if (!mux__mime_ext_ok(ext, el))
                    continue;
                if (!fill) {
                    (*exts)++;
                    continue;
                }
                for (size_t k = 0; k < el; k++)
                    if (ext[k] >= 'A' && ext[k] <= 'Z')
                        ext[k] = (char)(ext[k] + 32);
                mux__mime_put(m, ext, t, tlen);
            }
        }
        i = next;
    }
}

int mux__mime_load(struct mux__mime **out, const char *path)
{
    struct mux__mime *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    size_t flen = 0, exts = 0, extra = 0;
    if (path) {
        int err = mux__fs_read_file(path, MUX__MIME_FILE_MAX, &m->file, &flen);
        if (err) {
            free(m);
            return err;
        }
        mux__mime_lines(m, m->file, flen, 0, &exts, &extra);
    }
    size_t want = 2 * (exts + mux__mime_nbuiltins), slots = 64;
    while (slots < want)
        slots *= 2;
    m->mask = (uint32_t)(slots - 1);
    m->slots = calloc(slots, sizeof *m->slots);
    m->types_cap = extra;
    if (!m->slots || (extra && !(m->types = malloc(extra)))) {
        mux__mime_free(m);
        return -ENOMEM;
    }
    for (size_t i = 0; i < mux__mime_nbuiltins; i++)
        mux__mime_put(m, mux__mime_builtins[i].ext, mux__mime_builtins[i].type,
                      strlen(mux__mime_builtins[i].type));
    if (path)
        mux__mime_lines(m, m->file, flen, 1, &exts, &extra);
    *out = m;
    return 0;
}

void mux__mime_free(struct mux__mime *m)
{
    if (!m)
        return;
    free(m->slots);
    free(m->file);
    free(m->types);
    free(m);
}

const char *mux__mime_find(const struct mux__mime *m, const char *name, size_t *len)
{
    const char *type = mux__octet;
    size_t tlen = sizeof mux__octet - 1;
    const char *slash = name ? strrchr(name, '/') : NULL;
    const char *base = slash ? slash + 1 : name;
    const char *dot = base ? strrchr(base, '.') : NULL;
    size_t el = dot ? strlen(dot + 1) : 0;
    char ext[MUX__MIME_EXT_MAX + 1];
    if (dot && dot != base && el > 0 && el <= MUX__MIME_EXT_MAX) {
        for (size_t k = 0; k <= el; k++) {
            char c = dot[1 + k];
            ext[k] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
        }
        if (m) {
            uint32_t h = mux__mime_hash(ext, el);
            for (uint32_t i = h & m->mask; m->slots[i].ext; i = (i + 1) & m->mask)
                if (m->slots[i].hash == h && strcmp(m->slots[i].ext, ext) == 0) {
                    type = m->slots[i].type;
                    tlen = m->slots[i].tlen;
                    break;
                }
        } else {
            size_t lo = 0, hi = mux__mime_nbuiltins;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(ext, mux__mime_builtins[mid].ext);
                if (c == 0) {
                    type = mux__mime_builtins[mid].type;
                    tlen = strlen(type);
                    break;
                }
                if (c < 0)
                    hi = mid;
                else
                    lo = mid + 1;
            }
        }
    }
    if (len)
        *len = tlen;
    return type;
}
