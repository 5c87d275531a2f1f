/* SPDX-License-Identifier: MIT */
/* A directory's listing as an HTML page (http_internal.h, mux__http_listing), for the static
 * files' MUX_HTTP_STATIC_AUTOINDEX.
 *
 * A name is whatever bytes the file system holds, so each is written twice, escaped two
 * ways: percent-encoded in its link (a ':' in a name must not read as a scheme, a '?' as a
 * query) and HTML-escaped in the text. The page is built in two passes over the sorted
 * names, one that measures and one that writes, into one allocation.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/fs.h"
#include "http/http_internal.h"

static int mux__dirent_cmp(const void *a, const void *b)
{
    return strcmp(((const struct mux__dirent *)a)->name, ((const struct mux__dirent *)b)->name);
}

/* Appends s[0 .. n) at p[*o ..) when p is not NULL; counts it either way. */
static void mux__emit(char *p, size_t *o, const char *s, size_t n)
{
    if (p)
        memcpy(p + *o, s, n);
    *o += n;
}

#define MUX__EMIT(p, o, lit) mux__emit(p, o, lit, sizeof lit - 1)

static void mux__emit_html(char *p, size_t *o, const char *s, size_t n)
{
    size_t need = mux__http_html(s, n, NULL, 0);
    if (p)
        mux__http_html(s, n, p + *o, need);
    *o += need;
}

static void mux__emit_pct(char *p, size_t *o, const char *s, size_t n, int slash)
{
    size_t need = mux__http_pct(s, n, NULL, 0, slash);
    if (p)
        mux__http_pct(s, n, p + *o, need, slash);
    *o += need;
}

/* The page, written at p (NULL: measured only). Returns its length. */
static size_t mux__page(char *p, const char *path, const struct mux__dirent *v, size_t n)
{
    size_t o = 0, pl = strlen(path);
    MUX__EMIT(p, &o, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of /");
    mux__emit_html(p, &o, path, pl);
    if (pl)
        MUX__EMIT(p, &o, "/");
    MUX__EMIT(p, &o, "</title></head>\n<body>\n<h1>Index of /");
    mux__emit_html(p, &o, path, pl);
    if (pl)
        MUX__EMIT(p, &o, "/");
    MUX__EMIT(p, &o, "</h1>\n<ul>\n");
    if (pl)
        MUX__EMIT(p, &o, "<li><a href=\"../\">../</a></li>\n");
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(v[i].name);
        MUX__EMIT(p, &o, "<li><a href=\"");
        mux__emit_pct(p, &o, v[i].name, nl, 0);
        if (v[i].dir)
            MUX__EMIT(p, &o, "/");
        MUX__EMIT(p, &o, "\">");
        mux__emit_html(p, &o, v[i].name, nl);
        if (v[i].dir)
            MUX__EMIT(p, &o, "/");
        MUX__EMIT(p, &o, "</a></li>\n");
    }
    MUX__EMIT(p, &o, "</ul>\n</body></html>\n");
    return o;
}

int mux__http_listing(int fd, const char *path, unsigned flags, char **page, size_t *len)
{
    struct mux__dirent *v = NULL;
    size_t n = 0;
    int err = mux__fs_dir_read(fd, (flags & MUX_HTTP_STATIC_DOTFILES) != 0, &v, &n);
    if (err)
        return err;
    if (n)
        qsort(v, n, sizeof *v, mux__dirent_cmp);
    size_t need = mux__page(NULL, path, v, n);
    char *p = malloc(need);
    if (p) {
        mux__page(p, path, v, n);
        *page = p;
        *len = need;
    }
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    return p ? 0 : -ENOMEM;
}
