/* SPDX-License-Identifier: MIT */
/* io_uring written by hand with liburing, used as a readiness mechanism: a one-shot
 * POLL_ADD per watched fd, re-armed after each callback. One-shot polls check readiness
 * when armed, which gives level-triggered behaviour (a token left unread is reported
 * again); multishot polls only fire on new wake-ups. Re-arms are queued in the submission
 * ring and flushed by the next dispatch's io_uring_submit, so a round costs one
 * io_uring_enter. Stop only marks the slot, as in raw_epoll.c: a completion for a stopped
 * slot is simply not re-armed.
 *
 * raw-uring-multi (variant "multi") is the edge-triggered loop: one multishot POLL_ADD
 * (IORING_POLL_ADD_MULTI) per fd, armed once; each wake-up of the file posts a CQE, and
 * nothing is re-armed unless the kernel ended the request (a CQE without IORING_CQE_F_MORE).
 * A dispatch with nothing to re-arm makes no system call at all. Study 1 only (harness.h,
 * `edge`): the floor of iomux's MUX_EDGE watchers on io_uring. */
#include "../harness.h"
#include "raw_timers.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

enum { WANTED = 1, IN_FLIGHT = 2 };

static const struct bench_setup *setup;
static int multi; /* raw-uring-multi: multishot requests */
static struct io_uring ring;
static unsigned char *state;
static struct raw_timers timers;

static const char *unavailable(const char *variant)
{
    static char why[128];
    struct io_uring r;
    (void)variant;
    int err = io_uring_queue_init(8, &r, 0);
    if (err == 0) {
        io_uring_queue_exit(&r);
        return NULL;
    }
    snprintf(why, sizeof why, "io_uring_queue_init: %s", strerror(-err));
    return why;
}

static int identify(const char *variant, char *buf, size_t len)
{
    snprintf(buf, len, "io_uring(7), %s POLL_ADD through liburing",
             variant ? "multishot" : "one-shot");
    return 0;
}

static int arm(size_t i)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    if (!sqe) {
        int r = io_uring_submit(&ring);
        if (r < 0)
            return r;
        if (!(sqe = io_uring_get_sqe(&ring)))
            return -EBUSY;
    }
    if (multi)
        io_uring_prep_poll_multishot(sqe, setup->fd[i], POLLIN);
    else
        io_uring_prep_poll_add(sqe, setup->fd[i], POLLIN);
    io_uring_sqe_set_data64(sqe, i);
    state[i] |= IN_FLIGHT;
    return 0;
}

static int open_(const char *variant, const struct bench_setup *s)
{
    multi = variant != NULL;
    struct io_uring_params p = {.flags = IORING_SETUP_CQSIZE};
    unsigned cq = 4096;
    while (cq < 2 * s->n && cq < 65536)
        cq *= 2;
    p.cq_entries = cq;
    int r = io_uring_queue_init_params(1024, &ring, &p);
    if (r < 0)
        return r;
    setup = s;
    if (!(state = calloc(s->n, 1)) || (s->timeouts && raw_timers_open(&timers, s->n) < 0))
        return -ENOMEM;
    return 0;
}

static int start(size_t i)
{
    state[i] |= WANTED;
    if (setup->timeouts)
        raw_timers_set(&timers, (uint32_t)i, setup->timeout_ns[i]);
    return state[i] & IN_FLIGHT ? 0 : arm(i);
}

static int stop(size_t i)
{
    state[i] &= (unsigned char)~WANTED;
    if (setup->timeouts)
        raw_timers_remove(&timers, (uint32_t)i);
    return 0;
}

static int dispatch(void)
{
    struct io_uring_cqe *cqes[256];
    int r = io_uring_submit(&ring);
    if (r < 0)
        return r;
    if (setup->timeouts)
        timers.now = bench_now_ns();
    for (;;) {
        unsigned n = io_uring_peek_batch_cqe(&ring, cqes, 256);
        if (n == 0)
            break;
        for (unsigned k = 0; k < n; k++) {
            size_t i = (size_t)io_uring_cqe_get_data64(cqes[k]);
            int res = cqes[k]->res;
            int ended = !(cqes[k]->flags & IORING_CQE_F_MORE); /* always, for one-shot */
            if (ended)
                state[i] &= (unsigned char)~IN_FLIGHT;
            if (!(state[i] & WANTED))
                continue;
            if (res < 0)
                bench_count.errors++;
            else
                bench_readable(i);
            if (setup->timeouts)
                raw_timers_set(&timers, (uint32_t)i, setup->timeout_ns[i]);
            if (ended && (r = arm(i)) < 0)
                return r;
        }
        io_uring_cq_advance(&ring, n);
        if (n < 256)
            break;
    }
    if (setup->timeouts)
        raw_timers_expire(&timers);
    return 0;
}

static int close_(void)
{
    io_uring_queue_exit(&ring);
    free(state);
    if (setup->timeouts)
        raw_timers_close(&timers);
    return 0;
}

static const struct bench_driver drivers[] = {
    {.name = "raw-uring", .unavailable = unavailable, .identify = identify, .open = open_,
     .start = start, .stop = stop, .dispatch = dispatch, .close = close_},
    {.name = "raw-uring-multi", .variant = "multi", .edge = 1, .unavailable = unavailable,
     .identify = identify, .open = open_, .start = start, .stop = stop, .dispatch = dispatch,
     .close = close_}};

__attribute__((constructor)) static void register_drivers(void)
{
    for (size_t i = 0; i < sizeof drivers / sizeof drivers[0]; i++)
        bench_register(&drivers[i]);
}
