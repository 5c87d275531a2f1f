/* SPDX-License-Identifier: MIT */
/* libiomux-event, the libevent 2.1 emulation: what libevent's own regression cases
 * (tests/libevent) do not pin down -- misuse refused with a warning instead of a crash, the
 * ordering of priorities, a loopbreak from another thread, timeouts restarted without a heap
 * operation, memory of event_base_once events given back by event_base_free. */
#include <event2/event.h>
#include <event2/event_compat.h>
#include <event2/event_struct.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static char last_warning[512];
static int warnings;

static void record_log(int severity, const char *msg)
{
    if (severity >= EVENT_LOG_WARN) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", msg);
    }
}

/* A base on the backend the harness runs this case on (IOMUX_BACKEND), every other
 * method avoided, so that the case runs on each backend in turn. */
static struct event_base *base_open(void)
{
    const char *want = getenv("IOMUX_BACKEND");
    struct event_config *cfg = event_config_new();
    CHECK(cfg != NULL);
    for (const char **m = event_get_supported_methods(); want && *m; m++)
        if (strcmp(*m, want) != 0)
            CHECK_EQ(event_config_avoid_method(cfg, *m), 0);
    event_config_set_flag(cfg, EVENT_BASE_FLAG_IGNORE_ENV);
    struct event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    CHECK(base != NULL);
    if (want)
        CHECK_STR_EQ(event_base_get_method(base), want);
    event_set_log_callback(record_log);
    warnings = 0;
    return base;
}

static void base_close(struct event_base *base)
{
    event_base_free(base);
    event_set_log_callback(NULL);
}

static void count_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    (*(int *)arg)++;
}

TEST(event_add_of_a_never_assigned_event_is_refused_with_a_warning) {
    struct event_base *base = base_open();
    struct event ev;
    memset(&ev, 0xa5, sizeof ev); /* stack garbage, as an unassigned event would hold */
    CHECK_EQ(event_add(&ev, NULL), -1);
    CHECK_EQ(warnings, 1);
    CHECK(strstr(last_warning, "never assigned") != NULL);
    CHECK_EQ(event_del(&ev), -1);
    CHECK_EQ(event_initialized(&ev), 0);
    CHECK_EQ(event_add(NULL, NULL), -1);
    base_close(base);
}

TEST(event_assign_of_a_pending_event_is_refused_and_leaves_it_working) {
    struct event_base *base = base_open();
    int sv[2], n = 0, m = 0;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event ev;
    CHECK_EQ(event_assign(&ev, base, sv[0], EV_READ, count_cb, &n), 0);
    CHECK_EQ(event_add(&ev, NULL), 0);
    CHECK_EQ(event_assign(&ev, base, sv[0], EV_READ, count_cb, &m), -1);
    CHECK(strstr(last_warning, "pending") != NULL);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(m, 0);
    CHECK_EQ(event_pending(&ev, EV_READ, NULL), 0); /* not persistent: deleted before its call */
    close(sv[0]);
    close(sv[1]);
    base_close(base);
}

TEST(event_add_of_an_fd_beyond_the_descriptor_limit_fails_at_once) {
    struct event_base *base = base_open();
    int n = 0;
    struct event *ev = event_new(base, 1 << 30, EV_READ, count_cb, &n);
    CHECK(ev != NULL);
    CHECK_EQ(event_add(ev, NULL), -1);
    CHECK(strstr(last_warning, "fd 1073741824") != NULL);
    CHECK_EQ(event_pending(ev, EV_READ, NULL), 0);
    struct event *sig = evsignal_new(base, 0, count_cb, &n);
    CHECK(sig != NULL);
    CHECK_EQ(event_add(sig, NULL), -1);
    event_free(ev);
    event_free(sig);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1); /* nothing was added */
    base_close(base);
}

static int order[8], norder;

static void order_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    order[norder++] = (int)(intptr_t)arg;
}

TEST(priorities_run_most_urgent_first_and_are_checked) {
    struct event_base *base = base_open();
    CHECK_EQ(event_base_priority_init(base, 3), 0);
    CHECK_EQ(event_base_get_npriorities(base), 3);
    struct event ev[3];
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(event_assign(&ev[i], base, -1, 0, order_cb, (void *)(intptr_t)i), 0);
        CHECK_EQ(event_get_priority(&ev[i]), 1); /* the middle one by default */
        CHECK_EQ(event_priority_set(&ev[i], 2 - i), 0);
    }
    CHECK_EQ(event_priority_set(&ev[0], 3), -1); /* out of range */
    CHECK_EQ(event_priority_set(&ev[0], -1), -1);
    norder = 0;
    for (int i = 0; i < 3; i++)
        event_active(&ev[i], EV_TIMEOUT, 1);
    CHECK_EQ(event_base_priority_init(base, 5), -1); /* not while events are active */
    CHECK_EQ(event_priority_set(&ev[0], 0), -1);      /* nor on an active event */
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    CHECK_EQ(norder, 3);
    CHECK_EQ(order[0], 2);
    CHECK_EQ(order[1], 1);
    CHECK_EQ(order[2], 0);
    base_close(base);
}

static void *break_later(void *arg)
{
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
    event_base_loopbreak(arg);
    return NULL;
}

THREAD_TEST(loopbreak_from_another_thread_wakes_a_base_with_nothing_added) {
    struct event_base *base = base_open();
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, break_later, base), 0);
    CHECK_EQ(event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY), 0);
    CHECK_EQ(event_base_got_break(base), 1);
    CHECK_EQ(event_base_got_exit(base), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    base_close(base);
}

TEST(persistent_timeout_counts_from_each_activation) {
    struct event_base *base = base_open();
    int sv[2], n = 0;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event *ev = event_new(base, sv[0], EV_READ | EV_PERSIST, count_cb, &n);
    struct timeval tv = {0, 150 * 1000};
    CHECK_EQ(event_add(ev, &tv), 0);
    char c;
    /* Readable at 0, 100 and 200 ms (each read drains it): the 150 ms timeout never ends. */
    for (int i = 0; i < 3; i++) {
        struct timespec ts = {0, 100 * 1000000L};
        if (i)
            nanosleep(&ts, NULL);
        CHECK_EQ(write(sv[1], "x", 1), 1);
        CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
        CHECK_EQ(read(sv[0], &c, 1), 1);
    }
    CHECK_EQ(n, 3);
    struct timeval left;
    CHECK_EQ(event_pending(ev, EV_TIMEOUT | EV_READ, &left), EV_TIMEOUT | EV_READ);
    struct timeval now;
    event_base_gettimeofday_cached(base, &now);
    long ms = (long)(left.tv_sec - now.tv_sec) * 1000 + (long)(left.tv_usec - now.tv_usec) / 1000;
    CHECK_GT(ms, 100); /* re-armed at the last read, not at the first */
    CHECK_LE(ms, 150);
    event_free(ev);
    close(sv[0]);
    close(sv[1]);
    base_close(base);
}

TEST(event_base_free_gives_back_events_of_event_base_once_that_never_ran) {
    struct event_base *base = base_open();
    int n = 0, sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct timeval hour = {3600, 0};
    CHECK_EQ(event_base_once(base, -1, EV_TIMEOUT, count_cb, &n, &hour), 0);
    CHECK_EQ(event_base_once(base, sv[0], EV_READ, count_cb, &n, NULL), 0);
    CHECK_EQ(event_base_once(base, -1, EV_TIMEOUT, count_cb, &n, NULL), 0); /* active at once */
    CHECK_EQ(event_base_once(base, -1, EV_SIGNAL, count_cb, &n, NULL), -1);
    CHECK_EQ(event_base_once(base, sv[0], EV_READ | EV_PERSIST, count_cb, &n, NULL), -1);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 2);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE), 1);
    /* The sanitizer's leak check fails the case if the three are not freed. */
    base_close(base);
    CHECK_EQ(n, 0);
    close(sv[0]);
    close(sv[1]);
}

static int count_fn(const struct event_base *b, const struct event *ev, void *arg)
{
    (void)b, (void)ev;
    ++*(int *)arg;
    return 0;
}

static int stop_at_3_fn(const struct event_base *b, const struct event *ev, void *arg)
{
    (void)b, (void)ev;
    return ++*(int *)arg == 3 ? 42 : 0;
}

TEST(foreach_visits_added_and_active_events_and_stops_on_nonzero) {
    struct event_base *base = base_open();
    int n = 0, seen = 0;
    struct event *t1 = evtimer_new(base, count_cb, &n), *t2 = evtimer_new(base, count_cb, &n);
    struct event *idle = evtimer_new(base, count_cb, &n), *act = evtimer_new(base, count_cb, &n);
    struct timeval tv = {10, 0};
    CHECK_EQ(evtimer_add(t1, &tv), 0);
    CHECK_EQ(evtimer_add(t2, &tv), 0);
    event_active(act, EV_TIMEOUT, 1);
    CHECK_EQ(event_base_foreach_event(base, count_fn, &seen), 0);
    CHECK_EQ(seen, 3); /* t1, t2 and act; idle is neither added nor active */
    CHECK_EQ(evtimer_add(idle, &tv), 0);
    seen = 0;
    CHECK_EQ(event_base_foreach_event(base, stop_at_3_fn, &seen), 42);
    CHECK_EQ(seen, 3);
    event_free(t1), event_free(t2), event_free(idle), event_free(act);
    CHECK_EQ(n, 0);
    base_close(base);
}

TEST(active_by_fd_activates_only_the_matching_directions) {
    struct event_base *base = base_open();
    int sv[2], r = 0, w = 0;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event *re = event_new(base, sv[0], EV_READ | EV_PERSIST, count_cb, &r);
    struct event *we = event_new(base, sv[0], EV_WRITE | EV_PERSIST, count_cb, &w);
    CHECK_EQ(event_add(re, NULL), 0);
    event_base_active_by_fd(base, sv[0], EV_READ);
    event_base_active_by_fd(base, sv[1], EV_READ);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(r, 1); /* nothing to read: only the activation called it */
    CHECK_EQ(w, 0); /* not added */
    event_free(re);
    event_free(we);
    close(sv[0]);
    close(sv[1]);
    base_close(base);
}

static void del_self_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    event_free(arg);
}

TEST(a_callback_may_free_its_own_event) {
    struct event_base *base = base_open();
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event *ev = event_new(base, sv[0], EV_READ | EV_PERSIST, del_self_cb, event_self_cbarg());
    CHECK(event_get_callback_arg(ev) == ev);
    CHECK_EQ(event_add(ev, NULL), 0);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    CHECK_EQ(event_base_dispatch(base), 1); /* ran, freed, then nothing was left */
    close(sv[0]);
    close(sv[1]);
    base_close(base);
}

TEST(edge_triggered_and_level_triggered_events_on_one_fd_are_refused) {
    struct event_base *base = base_open();
    int sv[2], n = 0;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event *et = event_new(base, sv[0], EV_READ | EV_ET, count_cb, &n);
    struct event *lt = event_new(base, sv[0], EV_WRITE, count_cb, &n);
    CHECK_EQ(event_add(et, NULL), 0);
    CHECK_EQ(event_add(lt, NULL), -1);
    CHECK(strstr(last_warning, "mix edge-triggered") != NULL);
    CHECK_EQ(event_del(et), 0);
    CHECK_EQ(event_add(lt, NULL), 0); /* alone on the fd now */
    event_free(et);
    event_free(lt);
    close(sv[0]);
    close(sv[1]);
    base_close(base);
}

static int inner_result;
static struct event *seen_running;

static void reenter_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct event_base *base = arg;
    seen_running = event_base_get_running_event(base);
    inner_result = event_base_loop(base, EVLOOP_NONBLOCK);
}

TEST(reentrant_event_base_loop_is_refused_and_running_event_is_known) {
    struct event_base *base = base_open();
    struct event ev;
    CHECK_EQ(event_assign(&ev, base, -1, 0, reenter_cb, base), 0);
    CHECK(event_base_get_running_event(base) == NULL);
    event_active(&ev, EV_TIMEOUT, 1);
    inner_result = 0;
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1); /* 1: nothing left afterwards */
    CHECK_EQ(inner_result, -1);
    CHECK(strstr(last_warning, "reentrant") != NULL);
    CHECK(seen_running == &ev);
    CHECK(event_base_get_running_event(base) == NULL);
    base_close(base);
}
