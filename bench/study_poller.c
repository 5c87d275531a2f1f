/* SPDX-License-Identifier: MIT */
/* Study 1, after Kegel's Poller_bench (2000): n slots, a read watcher on each; one round
 * writes one token to `active` evenly spaced slots and runs one non-blocking dispatch
 * whose callbacks read them (more dispatches only if a capped batch left some behind).
 * Reports microseconds per round, and the time to create and to tear down the watchers.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Creation counts the loop, every start, and the first dispatch: libraries that batch
 * interest changes only tell the kernel then. */
static double create(const struct bench_driver *d, const struct bench_setup *s)
{
    memset(&bench_count, 0, sizeof bench_count);
    uint64_t t0 = bench_now_ns();
    int r = d->open(d->variant, s);
    if (r < 0)
        bench_fail("%s: open for %zu slots failed: %s", d->name, s->n, strerror(-r));
    for (size_t i = 0; i < s->n; i++)
        if ((r = d->start(i)) < 0)
            bench_fail("%s: start of slot %zu failed: %s", d->name, i, strerror(-r));
    if ((r = d->dispatch()) < 0)
        bench_fail("%s: first dispatch failed: %s", d->name, strerror(-r));
    uint64_t t1 = bench_now_ns();
    bench_check(d, "after creating the watchers", 0);
    return (double)(t1 - t0) / (double)s->n;
}

static double teardown(const struct bench_driver *d, size_t n)
{
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        int r = d->stop(i);
        if (r < 0)
            bench_fail("%s: stop of slot %zu failed: %s", d->name, i, strerror(-r));
    }
    int r = d->close();
    if (r < 0)
        bench_fail("%s: close failed: %s", d->name, strerror(-r));
    return (double)(bench_now_ns() - t0) / (double)n;
}

/* One round; returns the dispatches it took. */
static uint64_t round_once(const struct bench_driver *d, size_t active, size_t spacing)
{
    uint64_t expect = bench_count.tokens + active;
    for (size_t k = 0; k < active; k++)
        bench_put(k * spacing + spacing / 2);
    return bench_drain(d, expect);
}

static void one_cell(const struct bench_opts *o, const struct bench_setup *s, size_t active)
{
    const struct bench_driver *d = o->driver;
    size_t spacing = o->n / active;
    double create_ns = create(d, s);

    memset(&bench_count, 0, sizeof bench_count);
    for (unsigned r = 0; r < o->warmup; r++)
        round_once(d, active, spacing);
    bench_check(d, "warm-up rounds", (uint64_t)o->warmup * active);

    double *us = calloc(o->batches, sizeof *us);
    uint64_t dispatches = 0;
    for (unsigned b = 0; b < o->batches; b++) {
        memset(&bench_count, 0, sizeof bench_count);
        uint64_t t0 = bench_now_ns();
        for (unsigned r = 0; r < o->rounds; r++)
            dispatches += round_once(d, active, spacing);
        uint64_t t1 = bench_now_ns();
        bench_check(d, "timed rounds", (uint64_t)o->rounds * active);
        us[b] = (double)(t1 - t0) / 1e3 / o->rounds;
    }
    double teardown_ns = teardown(d, o->n);

    bench_print_head("poller", o);
    printf(",\"active\":%zu,\"rounds\":%u,\"create_ns\":%.1f,\"teardown_ns\":%.1f", active,
           o->rounds, create_ns, teardown_ns);
    printf(",\"dispatches_per_round\":%.3f,\"callbacks_checked\":%llu",
           (double)dispatches / ((double)o->batches * o->rounds),
           (unsigned long long)((uint64_t)o->batches * o->rounds * active));
    bench_print_array("round_us", us, o->batches);
    printf("}\n");
    fflush(stdout);
    free(us);
}

int bench_study_poller(const struct bench_opts *o)
{
    struct bench_setup s = {.n = o->n, .fd = bench_fds.rfd, .timeouts = 0};
    for (size_t a = 0; a < o->nactive; a++) {
        if (o->active[a] > o->n) {
            bench_print_head("poller", o);
            printf(",\"active\":%zu,\"skip\":\"more active than slots\"}\n", o->active[a]);
            continue;
        }
        one_cell(o, &s, o->active[a]);
    }
    return 0;
}
