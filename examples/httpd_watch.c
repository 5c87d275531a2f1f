/* SPDX-License-Identifier: MIT */
/* iomux-httpd --watch-root (httpd_watch.h). */
#define _GNU_SOURCE
#include "httpd_watch.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "httpd_log.h"

#ifdef _WIN32 /* the C runtime has no lstat (nor symbolic links of its own): stat */
#define lstat stat
#endif

/* One directory below the root, watched. */
struct dir {
    mux_fs_event_t w;
    struct httpd_watch *hw;
    char rel[]; /* its path relative to the root: "" for the root itself */
};

struct httpd_watch {
    mux_loop_t *loop;
    mux_http_static_t *files;
    char *root;
    struct dir **dirs;
    size_t n, cap;
    int said_full;
    mux_cleanup_t cleanup;
};

static void on_change(mux_loop_t *loop, mux_fs_event_t *w, const char *name, unsigned events,
                      int status);

/* `a` and `b` joined by '/' ("" and "x" give "x"), into out[0 .. cap); 0, or -1 when too long. */
static int join(char *out, size_t cap, const char *a, const char *b)
{
    int n = snprintf(out, cap, "%s%s%s", a, *a && *b ? "/" : "", b);
    return n >= 0 && (size_t)n < cap ? 0 : -1;
}

/* Starts watching the directory `rel`; 0, or -1 when it cannot be (said on the error log). */
static int watch_dir(struct httpd_watch *hw, const char *rel)
{
    if (hw->n == HTTPD_WATCH_MAX_DIRS) {
        if (!hw->said_full++)
            error_log("--watch-root: %d directories watched, the others are not",
                      HTTPD_WATCH_MAX_DIRS);
        return -1;
    }
    char path[4096];
    if (join(path, sizeof path, hw->root, rel) != 0)
        return -1;
    if (hw->n == hw->cap) {
        size_t cap = hw->cap ? hw->cap * 2 : 16;
        struct dir **v = realloc(hw->dirs, cap * sizeof *v);
        if (!v)
            return -1;
        hw->dirs = v;
        hw->cap = cap;
    }
    size_t len = strlen(rel) + 1;
    struct dir *d = malloc(sizeof *d + len);
    if (!d)
        return -1;
    memcpy(d->rel, rel, len);
    d->hw = hw;
    int rc = mux_fs_event_init(&d->w, on_change, path);
    if (rc == 0) {
        d->w.data = d;
        rc = mux_fs_event_start(hw->loop, &d->w);
        if (rc != 0)
            mux_fs_event_free(&d->w);
    }
    if (rc != 0) {
        error_log("--watch-root: %s: %s", path, mux_strerror(rc));
        free(d);
        return -1;
    }
    mux_unref(hw->loop, MUX_HANDLE_FS_EVENT, &d->w); /* keeps no loop running */
    hw->dirs[hw->n++] = d;
    return 0;
}

/* Watches `rel` and every directory below it (symbolic links are not followed). */
static void watch_tree(struct httpd_watch *hw, const char *rel)
{
    if (watch_dir(hw, rel) != 0)
        return;
    char path[4096], sub[4096];
    if (join(path, sizeof path, hw->root, rel) != 0)
        return;
    DIR *dir = opendir(path);
    if (!dir)
        return;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat sb;
        char full[4096];
        if (join(sub, sizeof sub, rel, e->d_name) == 0 &&
            join(full, sizeof full, hw->root, sub) == 0 && lstat(full, &sb) == 0 &&
            S_ISDIR(sb.st_mode))
            watch_tree(hw, sub);
    }
    closedir(dir);
}

static void drop_dir(struct httpd_watch *hw, struct dir *d)
{
    for (size_t i = 0; i < hw->n; i++)
        if (hw->dirs[i] == d) {
            hw->dirs[i] = hw->dirs[--hw->n];
            break;
        }
    mux_fs_event_stop(hw->loop, &d->w);
    mux_fs_event_free(&d->w);
    free(d);
}

static void on_change(mux_loop_t *loop, mux_fs_event_t *w, const char *name, unsigned events,
                      int status)
{
    (void)loop;
    struct dir *d = w->data;
    struct httpd_watch *hw = d->hw;
    if (status != 0 || (events & MUX_FS_OVERFLOW)) { /* what changed is not known: all of it */
        if (status != 0)
            error_log("--watch-root: %s: %s", d->rel[0] ? d->rel : "/", mux_strerror(status));
        mux_http_static_forget(hw->files, NULL);
        if (status != 0)
            drop_dir(hw, d);
        return;
    }
    if (events & MUX_FS_GONE) { /* the directory itself: what was below it goes too */
        mux_http_static_forget(hw->files, d->rel);
        drop_dir(hw, d);
        return;
    }
    char rel[4096];
    if (join(rel, sizeof rel, d->rel, name) != 0)
        return;
    mux_http_static_forget(hw->files, rel);
    if (d->rel[0] == 0)
        mux_http_static_forget(hw->files, ""); /* the root's index, say */
    if (events & (MUX_FS_CREATE | MUX_FS_RENAME)) { /* a new directory is watched too */
        char full[4096];
        struct stat sb;
        if (join(full, sizeof full, hw->root, rel) == 0 && lstat(full, &sb) == 0 &&
            S_ISDIR(sb.st_mode))
            watch_tree(hw, rel);
    }
}

/* The loop closes: the watchers go. */
static void on_loop_close(mux_loop_t *loop, mux_cleanup_t *c)
{
    (void)loop;
    struct httpd_watch *hw = c->data;
    while (hw->n)
        drop_dir(hw, hw->dirs[hw->n - 1]);
    free(hw->dirs);
    free(hw->root);
    free(hw);
}

struct httpd_watch *httpd_watch_start(mux_loop_t *loop, mux_http_static_t *files, const char *root)
{
    struct httpd_watch *hw = calloc(1, sizeof *hw);
    if (!hw || !(hw->root = strdup(root))) {
        free(hw);
        error_log("--watch-root: out of memory");
        return NULL;
    }
    hw->loop = loop;
    hw->files = files;
    watch_tree(hw, "");
    if (hw->n == 0) { /* not even the root: said already */
        free(hw->dirs);
        free(hw->root);
        free(hw);
        return NULL;
    }
    mux_cleanup_init(&hw->cleanup, on_loop_close);
    hw->cleanup.data = hw;
    mux_cleanup_start(loop, &hw->cleanup);
    return hw;
}
