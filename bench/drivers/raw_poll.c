/* SPDX-License-Identifier: MIT */
/* poll(2) written by hand: one pollfd per slot, indexed by slot; a stopped slot has fd -1,
 * which poll skips. The scan stops once it has seen as many ready entries as poll said. */
#include "../harness.h"
#include "raw_timers.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>

static const struct bench_setup *setup;
static struct pollfd *pfd;
static struct raw_timers timers;

static const char *unavailable(const char *variant)
{
    (void)variant;
    return NULL;
}

static int identify(const char *variant, char *buf, size_t len)
{
    (void)variant;
    snprintf(buf, len, "poll(2)");
    return 0;
}

static int open_(const char *variant, const struct bench_setup *s)
{
    (void)variant;
    setup = s;
    if (!(pfd = calloc(s->n, sizeof *pfd)) ||
        (s->timeouts && raw_timers_open(&timers, s->n) < 0))
        return -ENOMEM;
    for (size_t i = 0; i < s->n; i++)
        pfd[i] = (struct pollfd){.fd = -1, .events = POLLIN};
    return 0;
}

static int start(size_t i)
{
    pfd[i].fd = setup->fd[i];
    if (setup->timeouts)
        raw_timers_set(&timers, (uint32_t)i, setup->timeout_ns[i]);
    return 0;
}

static int stop(size_t i)
{
    pfd[i].fd = -1;
    pfd[i].revents = 0;
    if (setup->timeouts)
        raw_timers_remove(&timers, (uint32_t)i);
    return 0;
}

static int dispatch(void)
{
    int n = poll(pfd, setup->n, 0);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    if (setup->timeouts)
        timers.now = bench_now_ns();
    for (size_t i = 0; n > 0 && i < setup->n; i++) {
        if (!pfd[i].revents)
            continue;
        n--;
        pfd[i].revents = 0;
        bench_readable(i);
        if (setup->timeouts)
            raw_timers_set(&timers, (uint32_t)i, setup->timeout_ns[i]);
    }
    if (setup->timeouts)
        raw_timers_expire(&timers);
    return 0;
}

static int close_(void)
{
    free(pfd);
    if (setup->timeouts)
        raw_timers_close(&timers);
    return 0;
}

static const struct bench_driver driver = {
    .name = "raw-poll", .unavailable = unavailable, .identify = identify, .open = open_,
    .start = start, .stop = stop, .dispatch = dispatch, .close = close_};

__attribute__((constructor)) static void register_driver(void)
{
    bench_register(&driver);
}
