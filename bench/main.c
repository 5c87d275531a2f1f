/* SPDX-License-Identifier: MIT */
/* The command line every bench-* executable shares. bench/run drives it; see README.md.
 *
 *   bench-X --list                      the drivers built in, whether they can run here,
 *                                       and which library their calls reach
 *   bench-X --limits                    RLIMIT_NOFILE before and after raising it
 *   bench-X --driver D --study poller|chain [--transport socketpair|eventfd] --n N
 *           [--active 1,100] [--rounds R --batches B] [--warmup W]
 *           [--writes W --iterations I --timeouts 0,1] [--seed S]
 *
 * A run prints one `RESULT {json}` line per measured cell and exits 0, or prints
 * `FAIL: ...` on stderr and exits 1 when a driver miscounts or a call fails.
 */
#include "harness.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void json_str(const char *key, const char *v)
{
    printf(",\"%s\":\"", key);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\')
            putchar('\\');
        putchar(*v);
    }
    putchar('"');
}

static int list(void)
{
    const struct bench_driver *d;
    for (size_t i = 0; (d = bench_driver_at(i)); i++) {
        char id[512] = "";
        const char *why = d->unavailable(d->variant);
        int ok = why ? -1 : d->identify(d->variant, id, sizeof id);
        printf("DRIVER {\"name\":\"%s\",\"available\":%s", d->name, why ? "false" : "true");
        if (why)
            json_str("reason", why);
        else
            printf(",\"identity_ok\":%s", ok == 0 ? "true" : "false");
        json_str("identity", id);
        printf(",\"max_fd\":%d%s}\n", d->max_fd, d->edge ? ",\"edge\":true" : "");
    }
    return 0;
}

static size_t parse_list(const char *s, size_t *out, size_t max)
{
    size_t n = 0;
    while (*s && n < max) {
        char *end;
        out[n++] = strtoull(s, &end, 10);
        if (end == s)
            bench_fail("bad number list: %s", s);
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static void parse(int argc, char **argv, struct bench_opts *o, const char **study)
{
    static const struct option longopts[] = {
        {"driver", 1, 0, 'd'},  {"study", 1, 0, 's'},   {"transport", 1, 0, 't'},
        {"n", 1, 0, 'n'},       {"active", 1, 0, 'a'},  {"rounds", 1, 0, 'r'},
        {"batches", 1, 0, 'b'}, {"warmup", 1, 0, 'w'},  {"writes", 1, 0, 'W'},
        {"iterations", 1, 0, 'i'}, {"timeouts", 1, 0, 'T'}, {"seed", 1, 0, 'S'},
        {0, 0, 0, 0}};
    size_t tmp[8];
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (!(o->driver = bench_find(optarg)))
                bench_fail("no driver %s in %s (try --list)", optarg, argv[0]);
            break;
        case 's': *study = optarg; break;
        case 't':
            if (strcmp(optarg, "socketpair") && strcmp(optarg, "eventfd"))
                bench_fail("unknown transport %s", optarg);
            o->transport = strcmp(optarg, "eventfd") == 0 ? BENCH_EVENTFD : BENCH_SOCKETPAIR;
            break;
        case 'n': o->n = strtoull(optarg, NULL, 10); break;
        case 'a': o->nactive = parse_list(optarg, o->active, 8); break;
        case 'r': o->rounds = (unsigned)atoi(optarg); break;
        case 'b': o->batches = (unsigned)atoi(optarg); break;
        case 'w': o->warmup = (unsigned)atoi(optarg); break;
        case 'W': o->writes = strtoull(optarg, NULL, 10); break;
        case 'i': o->iterations = (unsigned)atoi(optarg); break;
        case 'T':
            o->ntimeouts = parse_list(optarg, tmp, 2);
            for (size_t i = 0; i < o->ntimeouts; i++)
                o->timeouts[i] = tmp[i] != 0;
            break;
        case 'S': o->seed = (unsigned)atoi(optarg); break;
        default: exit(2);
        }
    }
    if (!o->driver || !*study || !o->n || !o->nactive || !o->rounds || !o->batches ||
        !o->iterations)
        bench_fail("need --driver, --study and --n with positive counts (see main.c)");
}

int main(int argc, char **argv)
{
    long before, after, hard;
    bench_raise_nofile(&before, &after, &hard);
    if (argc == 2 && strcmp(argv[1], "--list") == 0)
        return list();
    if (argc == 2 && strcmp(argv[1], "--limits") == 0) {
        printf("LIMITS {\"nofile_before\":%ld,\"nofile\":%ld,\"nofile_hard\":%ld}\n", before,
               after, hard);
        return 0;
    }

    struct bench_opts o = {.active = {1}, .nactive = 1, .timeouts = {0}, .ntimeouts = 1,
                           .rounds = 100, .batches = 5, .warmup = 10, .iterations = 3,
                           .writes = 10000, .seed = 1};
    const char *study = "";
    parse(argc, argv, &o, &study);
    int (*run)(const struct bench_opts *) = strcmp(study, "poller") == 0  ? bench_study_poller
                                            : strcmp(study, "chain") == 0 ? bench_study_chain
                                                                          : NULL;
    if (!run)
        bench_fail("unknown study %s", study);

    const struct bench_driver *d = o.driver;
    const char *why = d->unavailable(d->variant);
    if (why)
        bench_fail("%s cannot run here: %s", d->name, why);
    char id[512];
    if (d->identify(d->variant, id, sizeof id) < 0)
        bench_fail("%s does not reach the library it claims: %s", d->name, id);

    size_t made;
    uint64_t t0 = bench_now_ns();
    int r = bench_fds_open(o.transport, o.n, &made);
    uint64_t t1 = bench_now_ns();
    if (r < 0)
        bench_fail("could only create %zu of %zu slots (RLIMIT_NOFILE %ld): %s", made, o.n,
                   after, strerror(-r));
    printf("TRANSPORT {\"transport\":\"%s\",\"n\":%zu,\"open_ns\":%.1f",
           o.transport == BENCH_EVENTFD ? "eventfd" : "socketpair", o.n,
           (double)(t1 - t0) / (double)o.n);

    if (d->max_fd && bench_fds_max() >= d->max_fd) {
        printf("}\n");
        bench_print_head(study, &o);
        printf(",\"skip\":\"fd %d >= %d (FD_SETSIZE)\"}\n", bench_fds_max(), d->max_fd);
    } else if (d->edge && run != bench_study_poller) {
        printf("}\n");
        bench_print_head(study, &o);
        printf(",\"skip\":\"edge-triggered watchers run study 1 only\"}\n");
    } else {
        printf("}\n");
        run(&o);
    }
    t0 = bench_now_ns();
    bench_fds_close();
    printf("TRANSPORT {\"transport\":\"%s\",\"n\":%zu,\"close_ns\":%.1f}\n",
           o.transport == BENCH_EVENTFD ? "eventfd" : "socketpair", o.n,
           (double)(bench_now_ns() - t0) / (double)o.n);
    return 0;
}
