/* SPDX-License-Identifier: MIT */
/* The static-file server over loopback, for the cases of test_http_static.c and the Windows
 * ones (windows/test_windows.c): a fixture serves a temporary directory with
 * mux_http_serve_static; a raw client (http_client.h) sends requests and takes the answers
 * apart. Everything is static: each case file gets its own copy. */
#ifndef IOMUX_TEST_HTTP_FIXTURE_H
#define IOMUX_TEST_HTTP_FIXTURE_H

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "http_client.h"
#include "iomux/http.h"
#include "stream_util.h"

struct fx {
    char dir[64];
    mux_http_static_t st;
    mux_loop_t loop;
    mux_http_server_t srv;
    mux_timer_t tick;
    uint16_t port;
    int calls, closed, errors, last_error;
};

static inline void fx_handler(mux_http_exchange_t *x)
{
    struct fx *f = mux_http_exchange_server(x)->data;
    f->calls++;
    CHECK_EQ(mux_http_serve_static(x, &f->st), 0);
}

static inline void fx_error(mux_http_server_t *srv, int err)
{
    struct fx *f = srv->data;
    f->errors++;
    f->last_error = err;
}

/* A new directory to serve; the caller fills it, sets f->st's options and calls fx_serve. */
static inline void fx_dir(struct fx *f)
{
    memset(f, 0, sizeof *f);
    CHECK_LT(snprintf(f->dir, sizeof f->dir, "/tmp/iomux-static-XXXXXX"), (int)sizeof f->dir);
    CHECK(mkdtemp(f->dir) != NULL);
}

static inline void fx_serve(struct fx *f)
{
    CHECK_EQ(mux_http_static_init(&f->st, f->dir), 0);
    loop_open(&f->loop);
    mux_http_server_options_t o = {.on_error = fx_error};
    CHECK_EQ(mux_http_server_init(&f->srv, &f->loop, &o, fx_handler), 0);
    f->srv.data = f;
    struct sockaddr_storage ss;
    socklen_t len = addr_v4(&ss, 0);
    CHECK_EQ(mux_http_server_listen(&f->srv, (struct sockaddr *)&ss, len, NULL), 0);
    len = sizeof ss;
    CHECK_EQ(mux_http_server_address(&f->srv, (struct sockaddr *)&ss, &len), 0);
    f->port = addr_port(&ss);
    CHECK_EQ(mux_timer_init(&f->tick, ticker_cb), 0);
    CHECK_EQ(mux_timer_start(&f->loop, &f->tick, 1 * MS, 1 * MS), 0);
}

static inline void fx_srv_closed(mux_http_server_t *srv)
{
    ((struct fx *)srv->data)->closed = 1;
}

static inline int fx_rm(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    return remove(path);
}

/* Closes the server and the files, and removes the directory. */
static inline void fx_close(struct fx *f)
{
    CHECK_EQ(mux_http_server_close(&f->srv, fx_srv_closed), 0);
    uint64_t end = mono_ns() + 5000 * MS;
    while (!f->closed) {
        CHECK_GE(mux_run(&f->loop, MUX_RUN_ONCE), 0);
        CHECK_LT(mono_ns(), end);
    }
    CHECK_EQ(mux_timer_stop(&f->loop, &f->tick), 0);
    loop_close(&f->loop);
    mux_http_static_close(&f->st);
    CHECK_EQ(nftw(f->dir, fx_rm, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* A file below the served directory (`name` may hold '/': the directories must exist). */
static inline void fx_file(struct fx *f, const char *name, const void *data, size_t len)
{
    char path[8192];
    CHECK_LT(snprintf(path, sizeof path, "%s/%s", f->dir, name), (int)sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK_GE(fd, 0);
    write_all(fd, data, len);
    CHECK_EQ(close(fd), 0);
}

static inline void fx_mkdir(struct fx *f, const char *name)
{
    char path[8192];
    CHECK_LT(snprintf(path, sizeof path, "%s/%s", f->dir, name), (int)sizeof path);
    CHECK_EQ(mkdir(path, 0755), 0);
}

/* Sends "METHOD TARGET" with `fields` (each ending in CRLF, may be "") and waits for the
 * answer. */
static inline void cl_ask(struct fx *f, struct hclient *c, const char *method, const char *target,
                   const char *fields, struct hanswer *r)
{
    size_t cap = strlen(target) + strlen(fields) + 64;
    char *req = malloc(cap);
    CHECK(req != NULL);
    int n = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: t\r\n%s\r\n", method, target, fields);
    CHECK(n > 0 && (size_t)n < cap);
    hc_send(&f->loop, c, req, (size_t)n);
    free(req);
    CHECK_EQ(hc_answer(&f->loop, c, r, strcmp(method, "HEAD") == 0), 0);
}

static inline void cl_get(struct fx *f, struct hclient *c, const char *target, const char *fields,
                   struct hanswer *r)
{
    cl_ask(f, c, "GET", target, fields, r);
}

#endif
