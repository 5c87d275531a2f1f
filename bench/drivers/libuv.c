/* SPDX-License-Identifier: MIT */
/* libuv through uv_poll_t (its readiness handle for an fd it does not own), on epoll, the
 * only backend it has on Linux. Re-arming is uv_poll_stop + uv_poll_start; the idle
 * timeout is a uv_timer_t with a repeat, restarted with uv_timer_again at each read. */
#include "../harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

struct slot {
    uv_poll_t poll;
    uv_timer_t timer;
};

static const struct bench_setup *setup;
static uv_loop_t loop;
static struct slot *slots;

static void on_poll(uv_poll_t *p, int status, int events)
{
    struct slot *s = (struct slot *)p;
    (void)events;
    if (status < 0) {
        bench_count.errors++;
        return;
    }
    bench_readable((size_t)(s - slots));
    if (setup->timeouts)
        uv_timer_again(&s->timer);
}

static void on_timeout(uv_timer_t *t)
{
    bench_timer_fired((size_t)(uintptr_t)t->data);
}

static const char *unavailable(const char *variant)
{
    (void)variant;
    return NULL;
}

static int identify(const char *variant, char *buf, size_t len)
{
    Dl_info info = {0};
    (void)variant;
    dladdr((void *)(uintptr_t)uv_run, &info);
    const char *where = info.dli_fname ? info.dli_fname : "?";
    int ok = strstr(where, "libuv") && uv_version() >> 16 == UV_VERSION_MAJOR;
    snprintf(buf, len, "libuv %s, epoll (%s)%s", uv_version_string(), where,
             ok ? "" : ": not libuv, or not the version of its header");
    return ok ? 0 : -1;
}

static int open_(const char *variant, const struct bench_setup *s)
{
    (void)variant;
    int r = uv_loop_init(&loop);
    if (r < 0)
        return r;
    setup = s;
    if (!(slots = calloc(s->n, sizeof *slots)))
        return -ENOMEM;
    for (size_t i = 0; i < s->n; i++) {
        if ((r = uv_poll_init(&loop, &slots[i].poll, s->fd[i])) < 0 ||
            (r = uv_timer_init(&loop, &slots[i].timer)) < 0)
            return r;
        slots[i].timer.data = (void *)(uintptr_t)i;
    }
    return 0;
}

static int start(size_t i)
{
    int r = uv_poll_start(&slots[i].poll, UV_READABLE, on_poll);
    if (r == 0 && setup->timeouts) {
        uint64_t ms = setup->timeout_ns[i] / 1000000u;
        r = uv_timer_start(&slots[i].timer, on_timeout, ms, ms);
    }
    return r;
}

static int stop(size_t i)
{
    int r = uv_poll_stop(&slots[i].poll);
    if (r == 0)
        r = uv_timer_stop(&slots[i].timer);
    return r;
}

static int dispatch(void)
{
    uv_run(&loop, UV_RUN_NOWAIT);
    return 0;
}

static int close_(void)
{
    for (size_t i = 0; i < setup->n; i++) {
        uv_close((uv_handle_t *)&slots[i].poll, NULL);
        uv_close((uv_handle_t *)&slots[i].timer, NULL);
    }
    uv_run(&loop, UV_RUN_DEFAULT); /* runs the close callbacks */
    int r = uv_loop_close(&loop);
    free(slots);
    return r;
}

static const struct bench_driver driver = {
    .name = "libuv", .unavailable = unavailable, .identify = identify, .open = open_,
    .start = start, .stop = stop, .dispatch = dispatch, .close = close_};

__attribute__((constructor)) static void register_driver(void)
{
    bench_register(&driver);
}
