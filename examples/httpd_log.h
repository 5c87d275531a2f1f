/* SPDX-License-Identifier: MIT */
/* iomux-httpd's logs: the access log, a line per answer in the Combined Log Format (a buffer
 * per loop, written out when it fills and once a second, never a system call per request);
 * and the error log on stderr, every line with its time, a line said again within its second
 * counted instead of repeated. */
#ifndef IOMUX_EXAMPLES_HTTPD_LOG_H
#define IOMUX_EXAMPLES_HTTPD_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "iomux/http.h"

struct access_log {
    int fd;    /* the log's file (opened O_APPEND: whole writes do not interleave) */
    char *buf; /* lines not yet written */
    size_t len;
    int64_t sec; /* the second `stamp` says */
    char stamp[40];
};

/* Opens `path` ("-": standard output) for appending: the descriptor, or -1 with the reason
 * said on the error log. */
int access_log_open(const char *path);
/* A loop's buffer on the log's descriptor `fd` (not closed by it): 0, or -1 without memory. */
int access_log_init(struct access_log *l, int fd);
/* Adds the line of one answer; writes the buffer out first when the line may not fit. */
void access_log_add(struct access_log *l, const mux_http_log_t *e);
/* Writes out what is buffered. */
void access_log_flush(struct access_log *l);
void access_log_free(struct access_log *l);

/* A line on stderr: "2026-11-28T17:04:36Z iomux-httpd: <message>". Any thread may call it. */
void error_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Says how many times the last line was repeated, if it was (at exit). */
void error_log_flush(void);

#endif
