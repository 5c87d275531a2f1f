/* SPDX-License-Identifier: MIT */
/* Study 2, after libevent's test/bench.c as Lehmann ran it (2008/2011): n slots, a read
 * watcher on each; an iteration re-arms every watcher, writes one token to each of
 * `active` evenly spaced slots, and dispatches until `writes` more tokens have been passed
 * on, each read callback writing to the next slot. Reports the whole iteration (re-arming
 * included) and the event processing alone. Variant two gives every slot an idle timer of
 * 10 to 11 s, restarted at each read the way each library does it best.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void rearm_all(const struct bench_driver *d, size_t n, int armed)
{
    for (size_t i = 0; i < n; i++) {
        int r = armed ? d->stop(i) : 0;
        if (r < 0 || (r = d->start(i)) < 0)
            bench_fail("%s: re-arming slot %zu failed: %s", d->name, i, strerror(-r));
    }
}

static void one_cell(const struct bench_opts *o, size_t active, int timeouts, int *armed)
{
    const struct bench_driver *d = o->driver;
    size_t space = o->n / active;
    unsigned total_iter = o->warmup + o->iterations;
    double *total = calloc(o->iterations, sizeof *total);
    double *proc = calloc(o->iterations, sizeof *proc);
    uint64_t dispatches = 0, expect = active + o->writes;

    for (unsigned it = 0; it < total_iter; it++) {
        uint64_t t0 = bench_now_ns();
        rearm_all(d, o->n, *armed);
        *armed = 1;
        memset(&bench_count, 0, sizeof bench_count);
        int r = d->dispatch();
        if (r < 0)
            bench_fail("%s: dispatch failed: %s", d->name, strerror(-r));
        bench_check(d, "after re-arming", 0);
        bench_count.writes_left = o->writes;
        for (size_t k = 0; k < active; k++)
            bench_put(k * space);
        uint64_t t1 = bench_now_ns();
        uint64_t disp = bench_drain(d, expect);
        uint64_t t2 = bench_now_ns();
        bench_check(d, "chained writes", expect);
        if (it >= o->warmup) {
            total[it - o->warmup] = (double)(t2 - t0) / 1e6;
            proc[it - o->warmup] = (double)(t2 - t1) / 1e6;
            dispatches += disp;
        }
    }
    bench_print_head("chain", o);
    printf(",\"active\":%zu,\"timeouts\":%d,\"writes\":%llu,\"dispatches_per_iter\":%.1f", active,
           timeouts, (unsigned long long)o->writes, (double)dispatches / o->iterations);
    printf(",\"callbacks_checked\":%llu", (unsigned long long)(expect * total_iter));
    bench_print_array("total_ms", total, o->iterations);
    bench_print_array("proc_ms", proc, o->iterations);
    printf("}\n");
    fflush(stdout);
    free(total);
    free(proc);
}

int bench_study_chain(const struct bench_opts *o)
{
    const struct bench_driver *d = o->driver;
    uint64_t *timeout_ns = calloc(o->n, sizeof *timeout_ns);
    uint64_t x = o->seed ? o->seed : 1;
    for (size_t i = 0; i < o->n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64: the same draw for everyone */
        timeout_ns[i] = 10000000000u + x % 1000000000u;
    }
    for (size_t t = 0; t < o->ntimeouts; t++) {
        struct bench_setup s = {
            .n = o->n, .fd = bench_fds.rfd, .timeouts = o->timeouts[t], .timeout_ns = timeout_ns};
        int r = d->open(d->variant, &s), armed = 0;
        if (r < 0)
            bench_fail("%s: open for %zu slots failed: %s", d->name, o->n, strerror(-r));
        for (size_t a = 0; a < o->nactive; a++) {
            if (o->active[a] > o->n) {
                bench_print_head("chain", o);
                printf(",\"active\":%zu,\"timeouts\":%d,\"skip\":\"more active than slots\"}\n",
                       o->active[a], o->timeouts[t]);
                continue;
            }
            one_cell(o, o->active[a], o->timeouts[t], &armed);
        }
        for (size_t i = 0; armed && i < o->n; i++)
            if ((r = d->stop(i)) < 0)
                bench_fail("%s: stop failed: %s", d->name, strerror(-r));
        if ((r = d->close()) < 0)
            bench_fail("%s: close failed: %s", d->name, strerror(-r));
    }
    free(timeout_ns);
    return 0;
}
