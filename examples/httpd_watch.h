/* SPDX-License-Identifier: MIT */
/* iomux-httpd --watch-root: file-system watchers on the served directory and every directory
 * below it (one each: the kernel's notifications are not recursive), which drop what the
 * open-file cache holds of a file as soon as it changes, instead of trusting the cache for up
 * to a second. The watchers are unreferenced (they keep no loop running) and go with the loop:
 * a cleanup watcher stops and frees them when it closes. */
#ifndef IOMUX_EXAMPLES_HTTPD_WATCH_H
#define IOMUX_EXAMPLES_HTTPD_WATCH_H

#include "iomux.h"
#include "iomux/http.h"

/* At most this many directories are watched (inotify's per-user limit is 8192 by default on
 * older kernels); the others are served as the cache does without watching. */
#define HTTPD_WATCH_MAX_DIRS 4096

struct httpd_watch;

/* Watches `root` for `files`, whose loop is `loop`. Returns the watch, or NULL with the reason
 * said on the error log (no notifications on this system, or no memory). */
struct httpd_watch *httpd_watch_start(mux_loop_t *loop, mux_http_static_t *files, const char *root);

#endif
