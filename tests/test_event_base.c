/* SPDX-License-Identifier: MIT */
/* libiomux-event's bases and events, beyond test_event.c and libevent's own main/ group
 * (tests/libevent): configurations, the environment, the 1.x calls on the current base,
 * event_reinit after fork, loopcontinue, common timeouts, counts and the dump, EV_CLOSED,
 * signal events run more than once, and what every call does with NULL. */
#include <event2/event.h>
#include <event2/event_compat.h>
#include <event2/event_struct.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "event_fixture.h"
#include "harness.h"

/* ---- configurations ---- */

CORE_TEST(event_config_calls_refuse_null_and_accept_their_hints) {
    event_config_free(NULL);
    struct event_config *cfg = event_config_new();
    CHECK(cfg != NULL);
    CHECK_EQ(event_config_avoid_method(NULL, "poll"), -1);
    CHECK_EQ(event_config_avoid_method(cfg, NULL), -1);
    CHECK_EQ(event_config_require_features(NULL, EV_FEATURE_O1), -1);
    CHECK_EQ(event_config_set_flag(NULL, EVENT_BASE_FLAG_NOLOCK), -1);
    CHECK_EQ(event_config_set_num_cpus_hint(NULL, 4), -1);
    CHECK_EQ(event_config_set_num_cpus_hint(cfg, 4), 0);
    struct timeval tv = {0, 1000};
    CHECK_EQ(event_config_set_max_dispatch_interval(NULL, &tv, 10, 0), -1);
    CHECK_EQ(event_config_set_max_dispatch_interval(cfg, &tv, 10, 0), 0);
    event_config_free(cfg);
}

CORE_TEST(a_config_no_backend_satisfies_makes_no_base) {
    struct event_config *cfg = event_config_new();
    const char **m = event_get_supported_methods();
    CHECK(m[0] != NULL);
    for (; *m; m++)
        CHECK_EQ(event_config_avoid_method(cfg, *m), 0);
    CHECK(event_base_new_with_config(cfg) == NULL); /* every method avoided */
    event_config_free(cfg);
    cfg = event_config_new();
    CHECK_EQ(event_config_require_features(cfg, EV_FEATURE_EARLY_CLOSE | EV_FEATURE_FDS), 0);
    CHECK_EQ(event_config_avoid_method(cfg, "epoll"), 0);
    CHECK_EQ(event_config_avoid_method(cfg, "uring"), 0);
    CHECK_EQ(event_config_avoid_method(cfg, "poll"), 0);
    CHECK(event_base_new_with_config(cfg) == NULL); /* select, rtsig, kqueue: not offered */
    event_config_free(cfg);
    cfg = event_config_new();
    CHECK_EQ(event_config_require_features(cfg, EV_FEATURE_O1), 0);
    CHECK_EQ(event_config_set_flag(cfg, EVENT_BASE_FLAG_IGNORE_ENV), 0);
    struct event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!base)
        SKIP("neither epoll nor io_uring here: no backend with EV_FEATURE_O1");
    CHECK_NE(event_base_get_features(base) & EV_FEATURE_O1, 0);
    event_base_free(base);
}

CORE_TEST(a_backend_the_kernel_refuses_is_not_offered_and_is_passed_by) {
    int has_uring = 0;
    for (const char **m = event_get_supported_methods(); *m; m++)
        has_uring |= strcmp(*m, "uring") == 0;
    if (!has_uring)
        SKIP("no io_uring backend here (not built, or the kernel refuses it)");
    CHECK_EQ(setenv("IOMUX_TEST_URING_REFUSE", "EPERM", 1), 0); /* as a refusing kernel */
    for (const char **m = event_get_supported_methods(); *m; m++)
        CHECK(strcmp(*m, "uring") != 0);
    struct event_config *cfg = event_config_new();
    CHECK_EQ(event_config_avoid_method(cfg, "epoll"), 0);
    CHECK_EQ(event_config_require_features(cfg, EV_FEATURE_O1), 0); /* only uring is left */
    CHECK(event_base_new_with_config(cfg) == NULL);
    event_config_free(cfg);
    CHECK_EQ(unsetenv("IOMUX_TEST_URING_REFUSE"), 0);
}

CORE_TEST(event_no_variables_and_event_show_method_are_read_unless_ignored) {
    const char **m = event_get_supported_methods();
    const char *first = m[0];
    CHECK(first != NULL);
    if (!m[1])
        SKIP("one backend only: nothing to fall back to");
    char var[64] = "EVENT_NO";
    for (size_t i = 0; first[i]; i++)
        var[8 + i] = (char)(first[i] >= 'a' && first[i] <= 'z' ? first[i] - 32 : first[i]);
    CHECK_EQ(setenv(var, "1", 1), 0);
    CHECK_EQ(setenv("EVENT_SHOW_METHOD", "1", 1), 0);
    evt_log_capture();
    struct event_base *base = event_base_new();
    CHECK(base != NULL);
    CHECK(strcmp(event_base_get_method(base), first) != 0); /* the next one */
    char want[80];
    snprintf(want, sizeof want, "libevent using: %s", event_base_get_method(base));
    CHECK_EQ(evt_warnings, 1);
    CHECK_STR_EQ(evt_last_warning, want);
    event_base_free(base);
    struct event_config *cfg = event_config_new();
    CHECK_EQ(event_config_set_flag(cfg, EVENT_BASE_FLAG_IGNORE_ENV), 0);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    CHECK_STR_EQ(event_base_get_method(base), first); /* the variables are not read */
    CHECK_EQ(evt_warnings, 1);
    event_base_free(base);
    evt_log_release();
    unsetenv(var);
    unsetenv("EVENT_SHOW_METHOD");
}

CORE_TEST(base_calls_on_null_fail_or_answer_nothing) {
    evt_log_capture();
    CHECK(event_base_get_method(NULL) == NULL);
    CHECK_EQ(event_base_get_features(NULL), 0);
    CHECK_EQ(event_base_priority_init(NULL, 2), -1);
    CHECK_EQ(event_base_get_npriorities(NULL), 0); /* and no current base */
    CHECK_EQ(event_reinit(NULL), -1);
    CHECK_EQ(event_base_loop(NULL, EVLOOP_NONBLOCK), -1);
    CHECK_EQ(event_base_loopexit(NULL, NULL), -1);
    CHECK_EQ(event_base_loopbreak(NULL), -1);
    CHECK_EQ(event_base_loopcontinue(NULL), -1);
    CHECK_EQ(event_base_got_exit(NULL), 0);
    CHECK_EQ(event_base_got_break(NULL), 0);
    CHECK_EQ(event_base_once(NULL, -1, EV_TIMEOUT, evt_count_cb, NULL, NULL), -1);
    CHECK_EQ(event_base_update_cache_time(NULL), -1);
    CHECK(event_base_get_running_event(NULL) == NULL);
    struct timeval tv = {1, 0};
    CHECK(event_base_init_common_timeout(NULL, &tv) == NULL);
    CHECK_EQ(event_base_get_num_events(NULL, EVENT_BASE_COUNT_ADDED), -1);
    CHECK_EQ(event_base_get_max_events(NULL, EVENT_BASE_COUNT_ADDED, 0), -1);
    CHECK_EQ(event_base_foreach_event(NULL, NULL, NULL), -1);
    event_base_dump_events(NULL, stderr);
    event_base_active_by_fd(NULL, 0, EV_READ);
    event_base_active_by_signal(NULL, SIGUSR1);
    event_base_free(NULL); /* no current base either: nothing */
    struct timeval now;
    CHECK_EQ(event_base_gettimeofday_cached(NULL, &now), 0); /* the time itself */
    CHECK_GT(now.tv_sec, 0);
    CHECK_EQ(evt_warnings, 0);
    evt_log_release();
}

CORE_TEST(event_calls_on_null_or_unassigned_events_fail_with_a_warning) {
    evt_log_capture();
    CHECK_EQ(event_assign(NULL, NULL, -1, 0, evt_count_cb, NULL), -1);
    CHECK_STR_EQ(evt_last_warning, "event_assign: the event is NULL");
    struct event ev;
    memset(&ev, 0, sizeof ev);
    CHECK_EQ(event_assign(&ev, NULL, -1, 0, NULL, NULL), -1);
    CHECK_STR_EQ(evt_last_warning, "event_assign: the callback is NULL");
    CHECK_EQ(event_assign(&ev, NULL, SIGUSR1, EV_SIGNAL | EV_READ, evt_count_cb, NULL), -1);
    CHECK(strstr(evt_last_warning, "EV_SIGNAL is not compatible") != NULL);
    CHECK(event_new(NULL, -1, 0, NULL, NULL) == NULL);
    CHECK_EQ(event_del(NULL), -1);
    CHECK_STR_EQ(evt_last_warning, "event_del: the event is NULL");
    CHECK_EQ(event_remove_timer(&ev), -1);
    CHECK_STR_EQ(evt_last_warning,
                 "event_remove_timer: the event was never assigned (event_assign or event_new)");
    event_active(&ev, EV_TIMEOUT, 1);
    CHECK(strstr(evt_last_warning, "event_active: ") != NULL);
    CHECK_EQ(event_pending(&ev, EV_TIMEOUT, NULL), 0);
    CHECK_EQ(event_priority_set(&ev, 0), -1);
    CHECK_EQ(event_finalize(0, &ev, NULL), -1);
    CHECK_EQ(event_free_finalize(0, &ev, NULL), -1);
    int before = evt_warnings;
    CHECK_EQ(event_get_priority(NULL), -1);
    CHECK_EQ(event_get_fd(NULL), -1);
    CHECK(event_get_base(NULL) == NULL);
    CHECK_EQ(event_get_events(NULL), 0);
    CHECK(event_get_callback(NULL) == NULL);
    CHECK(event_get_callback_arg(NULL) == NULL);
    event_get_assignment(NULL, NULL, NULL, NULL, NULL, NULL);
    event_free(NULL);
    event_debug_unassign(NULL);
    CHECK_EQ(evt_warnings, before);
    CHECK_EQ(event_base_set(NULL, &ev), -1);
    CHECK_STR_EQ(evt_last_warning, "event_base_set: the base is NULL");
    evt_log_release();
}

/* ---- the 1.x calls: event_init's base is the current one ---- */

CORE_TEST(the_1_x_calls_work_on_the_base_event_init_made) {
    evt_log_capture();
    struct event ev;
    int n = 0;
    /* Before event_init there is no base: event_set makes an event that cannot be added. */
    event_set(&ev, -1, 0, evt_count_cb, &n);
    CHECK_EQ(event_add(&ev, NULL), -1);
    CHECK(strstr(evt_last_warning, "the event has no base") != NULL);
    struct event_base *base = event_init();
    CHECK(base != NULL);
    CHECK_STR_EQ(event_get_method(), event_base_get_method(base));
    CHECK_EQ(event_base_set(base, &ev), 0);
    CHECK(event_get_base(&ev) == base);
    CHECK_EQ(event_priority_init(3), 0);
    CHECK_EQ(event_base_get_npriorities(NULL), 3);
    struct event ev2;
    event_set(&ev2, -1, 0, evt_count_cb, &n); /* onto the current base */
    CHECK(event_get_base(&ev2) == base);
    CHECK_EQ(event_get_priority(&ev2), 1);
    struct timeval tv = {0, 1000};
    CHECK_EQ(event_add(&ev2, &tv), 0);
    CHECK_EQ(event_base_set(base, &ev2), -1); /* pending */
    CHECK_STR_EQ(evt_last_warning, "event_base_set: the event is pending or active");
    CHECK_EQ(event_once(-1, EV_TIMEOUT, evt_count_cb, &n, NULL), 0);
    CHECK_EQ(event_dispatch(), 1); /* runs both, then nothing is left */
    CHECK_EQ(n, 2);
    CHECK_EQ(event_loopexit(NULL), 0);
    CHECK_EQ(event_loop(0), 0); /* the exit ends it */
    CHECK_EQ(event_base_got_exit(base), 1);
    CHECK_EQ(event_loopbreak(), 0);
    /* NULL names the current base too. */
    CHECK_EQ(event_base_loopexit(NULL, NULL), 0);
    CHECK_EQ(event_base_loop(NULL, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(event_base_got_exit(base), 1);
    CHECK_EQ(event_base_loopbreak(NULL), 0);
    CHECK_EQ(event_base_got_break(base), 1);
    struct timeval cached;
    CHECK_EQ(event_base_update_cache_time(NULL), 0);
    CHECK_EQ(event_base_gettimeofday_cached(NULL, &cached), 0);
    struct event unset;
    memset(&unset, 0, sizeof unset);
    CHECK_EQ(event_base_set(base, &unset), -1);
    CHECK_STR_EQ(evt_last_warning, "event_base_set: the event was never assigned");
    event_base_free(NULL); /* the current base */
    CHECK(event_get_method() == NULL);
    CHECK_EQ(event_loop(EVLOOP_NONBLOCK), -1);
    evt_log_release();
}

/* ---- running ---- */

static int order[16], norder;

static void order_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    order[norder++] = (int)(intptr_t)arg;
}

struct continue_ctx {
    struct event_base *base;
    int wfd;
    int use_continue;
};

static void first_cb(evutil_socket_t fd, short what, void *arg)
{
    struct continue_ctx *c = arg;
    (void)fd, (void)what;
    order[norder++] = 1;
    CHECK_EQ(write(c->wfd, "x", 1), 1); /* makes the urgent read event ready */
    if (c->use_continue)
        CHECK_EQ(event_base_loopcontinue(c->base), 0);
}

/* Two events queued at the less urgent priority; the first makes an fd of the urgent one
 * ready. With loopcontinue the loop polls again before the second, and the urgent one runs
 * in between. */
static void loopcontinue_order(int use_continue, int expect_second)
{
    struct event_base *base = evt_base_open();
    CHECK_EQ(event_base_priority_init(base, 2), 0);
    int sv[2];
    make_socketpair(sv);
    struct continue_ctx c = {base, sv[1], use_continue};
    struct event *urgent = event_new(base, sv[0], EV_READ, order_cb, (void *)(intptr_t)3);
    struct event *a = event_new(base, -1, 0, first_cb, &c);
    struct event *b = event_new(base, -1, 0, order_cb, (void *)(intptr_t)2);
    CHECK_EQ(event_priority_set(urgent, 0), 0);
    CHECK_EQ(event_priority_set(a, 1), 0);
    CHECK_EQ(event_priority_set(b, 1), 0);
    CHECK_EQ(event_add(urgent, NULL), 0);
    norder = 0;
    event_active(a, EV_TIMEOUT, 1);
    event_active(b, EV_TIMEOUT, 1);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(norder, 3);
    CHECK_EQ(order[0], 1);
    CHECK_EQ(order[1], expect_second);
    event_free(urgent), event_free(a), event_free(b);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

TEST(loopcontinue_polls_again_before_the_rest_of_the_queue_runs) {
    loopcontinue_order(1, 3); /* the urgent read ran before the second */
    loopcontinue_order(0, 2); /* without it, the queue runs to its end first */
}

static void free_base_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    event_base_free(arg);
}

TEST(event_base_free_from_a_callback_is_refused_with_a_warning) {
    struct event_base *base = evt_base_open();
    struct event *ev = event_new(base, -1, 0, free_base_cb, base);
    event_active(ev, EV_TIMEOUT, 1);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    CHECK_EQ(evt_warnings, 1);
    CHECK(strstr(evt_last_warning, "the base is running") != NULL);
    event_free(ev);
    event_base_free_nofinalize(base);
    evt_log_release();
}

static int sig_calls;
static struct event_base *sig_base;

static void sig_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)arg;
    CHECK_EQ(what, EV_SIGNAL);
    if (++sig_calls == 2 && sig_base)
        event_base_loopbreak(sig_base);
}

TEST(a_signal_event_activated_n_times_runs_n_callbacks_unless_the_loop_breaks) {
    struct event_base *base = evt_base_open();
    struct event *ev = evsignal_new(base, SIGUSR2, sig_cb, NULL);
    CHECK(ev != NULL);
    CHECK_EQ(event_add(ev, NULL), 0);
    sig_calls = 0;
    sig_base = NULL;
    event_active(ev, EV_SIGNAL, 3);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(sig_calls, 3);
    sig_calls = 0;
    sig_base = base;
    event_base_active_by_signal(base, SIGUSR2); /* once */
    event_active(ev, EV_SIGNAL, 3);             /* and three more */
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(sig_calls, 2); /* the break stopped the repeats */
    CHECK_EQ(event_base_got_break(base), 1);
    event_base_active_by_signal(base, SIGUSR1); /* no event for it */
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE), 0);
    event_free(ev);
    evt_base_close(base);
}

TEST(priority_init_moves_events_past_the_new_range_to_the_least_urgent) {
    struct event_base *base = evt_base_open();
    CHECK_EQ(event_base_priority_init(base, 4), 0);
    CHECK_EQ(event_base_priority_init(base, 4), 0); /* the same: nothing to do */
    CHECK_EQ(event_base_priority_init(base, 0), -1);
    CHECK_EQ(event_base_priority_init(base, EVENT_MAX_PRIORITIES), -1);
    int n = 0;
    struct event *added = event_new(base, -1, 0, evt_count_cb, &n);
    struct event *idle = event_new(base, -1, 0, evt_count_cb, &n);
    struct event *act = event_new(base, -1, 0, evt_count_cb, &n);
    CHECK_EQ(event_priority_set(added, 3), 0);
    CHECK_EQ(event_priority_set(idle, 3), 0);
    CHECK_EQ(event_priority_set(act, 3), 0);
    struct event *urgent = event_new(base, -1, 0, evt_count_cb, &n);
    CHECK_EQ(event_priority_set(urgent, 0), 0);
    struct timeval hour = {3600, 0};
    CHECK_EQ(event_add(added, &hour), 0);
    CHECK_EQ(event_add(urgent, &hour), 0);
    CHECK_EQ(event_base_priority_init(base, 2), 0);
    CHECK_EQ(event_get_priority(added), 1); /* moved at once */
    CHECK_EQ(event_get_priority(urgent), 0); /* in range: stays */
    CHECK_EQ(event_get_priority(idle), 3);  /* not the base's yet: moved when added */
    CHECK_EQ(event_add(idle, &hour), 0);
    CHECK_EQ(event_get_priority(idle), 1);
    event_active(act, EV_TIMEOUT, 1); /* or when made active */
    CHECK_EQ(event_get_priority(act), 1);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(event_base_priority_init(base, 1), 0); /* back to the built-in single queue */
    CHECK_EQ(event_get_priority(added), 0);
    event_free(added), event_free(idle), event_free(act), event_free(urgent);
    evt_base_close(base);
}

/* ---- timeouts ---- */

TEST(common_timeouts_are_their_durations_kept_in_the_base) {
    struct event_base *base = evt_base_open();
    struct timeval in = {1, 1500000}; /* 2.5 s written as 1 s and 1.5 million us */
    const struct timeval *c = event_base_init_common_timeout(base, &in);
    CHECK(c != NULL);
    CHECK_EQ(c->tv_sec, 2);
    CHECK_EQ(c->tv_usec, 500000);
    struct timeval same = {2, 500000};
    CHECK(event_base_init_common_timeout(base, &same) == c);
    struct timeval bad = {-1, 0}, bad_us = {0, -1};
    CHECK(event_base_init_common_timeout(base, &bad) == NULL);
    CHECK(event_base_init_common_timeout(base, &bad_us) == NULL);
    CHECK(event_base_init_common_timeout(base, NULL) == NULL);
    /* 32 different durations fit; the 33rd does not. */
    for (int i = 1; i < 32; i++) {
        struct timeval d = {0, i * 1000};
        CHECK(event_base_init_common_timeout(base, &d) != NULL);
    }
    struct timeval extra = {9, 0};
    CHECK(event_base_init_common_timeout(base, &extra) == NULL);
    /* One of them works as any timeout does. */
    struct timeval ms1 = {0, 1000};
    const struct timeval *short_one = event_base_init_common_timeout(base, &ms1);
    CHECK(short_one != NULL);
    int n = 0;
    struct event *ev = evtimer_new(base, evt_count_cb, &n);
    CHECK_EQ(evtimer_add(ev, short_one), 0);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(n, 1);
    event_free(ev);
    evt_base_close(base);
}

TEST(a_timeout_given_again_to_an_event_whose_timeout_is_queued_takes_it_back) {
    struct event_base *base = evt_base_open();
    int n = 0;
    struct event *ev = evtimer_new(base, evt_count_cb, &n);
    event_active(ev, EV_TIMEOUT, 1);
    struct timeval hour = {3600, 0};
    CHECK_EQ(evtimer_add(ev, &hour), 0); /* the queued timeout is no longer due */
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(n, 0);
    CHECK_EQ(event_pending(ev, EV_TIMEOUT, NULL), EV_TIMEOUT);
    /* event_remove_timer: the timeout goes, and a queued timeout with it. */
    CHECK_EQ(event_remove_timer(ev), 0);
    CHECK_EQ(event_pending(ev, EV_TIMEOUT, NULL), 0);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
    event_active(ev, EV_TIMEOUT, 1);
    CHECK_EQ(event_remove_timer(ev), 0);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE), 0);
    event_free(ev);
    /* An fd event keeps its fd and what else is queued. */
    int sv[2];
    make_socketpair(sv);
    short got = 0;
    struct event *rd = event_new(base, sv[0], EV_READ, evt_count_cb, &n);
    CHECK_EQ(event_add(rd, &hour), 0);
    event_active(rd, EV_READ | EV_TIMEOUT, 1);
    CHECK_EQ(event_remove_timer(rd), 0);
    CHECK_EQ(event_pending(rd, EV_READ | EV_TIMEOUT, NULL), EV_READ);
    got = (short)event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE);
    CHECK_EQ(got, 1); /* still active, for EV_READ */
    CHECK_EQ(event_del_noblock(rd), 0);
    CHECK_EQ(event_pending(rd, EV_READ, NULL), 0);
    CHECK_EQ(event_add(rd, NULL), 0);
    CHECK_EQ(event_del_block(rd), 0);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED | EVENT_BASE_COUNT_ACTIVE),
             0);
    event_free(rd);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

struct cache_probe {
    struct event_base *base;
    int same_twice;   /* two reads 2 ms apart gave the same time */
    int newer_after;  /* event_base_update_cache_time gave a later one */
};

static long long tv_us(const struct timeval *tv)
{
    return (long long)tv->tv_sec * 1000000 + tv->tv_usec;
}

static void probe_cache_cb(evutil_socket_t fd, short what, void *arg)
{
    struct cache_probe *p = arg;
    (void)fd, (void)what;
    struct timeval a, b, c;
    CHECK_EQ(event_base_gettimeofday_cached(p->base, &a), 0);
    sleep_ms(2);
    CHECK_EQ(event_base_gettimeofday_cached(p->base, &b), 0);
    p->same_twice = tv_us(&a) == tv_us(&b);
    CHECK_EQ(event_base_update_cache_time(p->base), 0);
    CHECK_EQ(event_base_gettimeofday_cached(p->base, &c), 0);
    p->newer_after = tv_us(&c) > tv_us(&a);
}

/* Runs probe_cache_cb once in a loop of a base made with `flags`. */
static struct cache_probe probe_cache(int flags)
{
    struct event_config *cfg = event_config_new();
    CHECK_EQ(event_config_set_flag(cfg, flags), 0);
    struct cache_probe p = {event_base_new_with_config(cfg), -1, -1};
    event_config_free(cfg);
    CHECK(p.base != NULL);
    struct event *ev = evtimer_new(p.base, probe_cache_cb, &p);
    event_active(ev, EV_TIMEOUT, 1);
    CHECK_EQ(event_base_loop(p.base, EVLOOP_NONBLOCK), 1);
    event_free(ev);
    event_base_free(p.base);
    return p;
}

CORE_TEST(cached_time_is_the_turns_unless_the_base_says_no_cache) {
    struct cache_probe p = probe_cache(EVENT_BASE_FLAG_IGNORE_ENV);
    CHECK_EQ(p.same_twice, 1);
    CHECK_EQ(p.newer_after, 1);
    p = probe_cache(EVENT_BASE_FLAG_IGNORE_ENV | EVENT_BASE_FLAG_NO_CACHE_TIME);
    CHECK_EQ(p.same_twice, 0);
    CHECK_EQ(p.newer_after, 1);
    /* Outside a loop there is no turn: the time itself. */
    struct event_base *base = event_base_new();
    struct timeval a, b;
    CHECK_EQ(event_base_gettimeofday_cached(base, &a), 0);
    sleep_ms(2);
    CHECK_EQ(event_base_gettimeofday_cached(base, &b), 0);
    CHECK_GT(tv_us(&b), tv_us(&a));
    event_base_free(base);
}

/* ---- counts, the dump, once ---- */

TEST(event_counts_and_their_maxima_follow_adds_and_activations) {
    struct event_base *base = evt_base_open();
    int n = 0;
    struct event *ev[3];
    struct timeval hour = {3600, 0};
    for (int i = 0; i < 3; i++) {
        ev[i] = evtimer_new(base, evt_count_cb, &n);
        CHECK_EQ(evtimer_add(ev[i], &hour), 0);
    }
    event_active(ev[0], EV_TIMEOUT, 1);
    event_active(ev[1], EV_TIMEOUT, 1);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 3);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE), 2);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_VIRTUAL), 0);
    event_del(ev[1]); /* the later of the two queued: unlinked from behind the first */
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE | EVENT_BASE_COUNT_ADDED), 3);
    CHECK_EQ(event_base_get_max_events(base, EVENT_BASE_COUNT_ADDED, 0), 3);
    CHECK_EQ(event_base_get_max_events(base, EVENT_BASE_COUNT_ACTIVE, 1), 2); /* and clears */
    CHECK_EQ(event_base_get_max_events(base, EVENT_BASE_COUNT_ACTIVE, 0), 0);
    CHECK_EQ(event_base_get_max_events(base, EVENT_BASE_COUNT_ADDED | EVENT_BASE_COUNT_ACTIVE, 1),
             3);
    CHECK_EQ(event_base_get_max_events(base, EVENT_BASE_COUNT_ADDED, 0), 0);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(n, 1);
    for (int i = 0; i < 3; i++)
        event_free(ev[i]);
    evt_base_close(base);
}

TEST(event_base_dump_events_lists_every_added_and_active_event) {
    struct event_base *base = evt_base_open();
    int sv[2], n = 0;
    make_socketpair(sv);
    struct event *rd = event_new(base, sv[0], EV_READ | EV_PERSIST, evt_count_cb, &n);
    struct event *wr = event_new(base, sv[0], EV_WRITE | EV_CLOSED, evt_count_cb, &n);
    struct event *sig = evsignal_new(base, SIGUSR1, evt_count_cb, &n);
    struct event *act = evtimer_new(base, evt_count_cb, &n);
    struct event *tm = evtimer_new(base, evt_count_cb, &n);
    CHECK_EQ(event_add(rd, NULL), 0);
    CHECK_EQ(event_add(wr, NULL), 0);
    CHECK_EQ(event_add(sig, NULL), 0);
    struct timeval ten = {10, 0}, at;
    CHECK_EQ(event_add(tm, &ten), 0);
    CHECK_EQ(event_pending(tm, EV_TIMEOUT, &at), EV_TIMEOUT);
    event_active(act, EV_TIMEOUT, 1);
    event_active(rd, EV_READ, 1);
    FILE *f = tmpfile(); /* not open_memstream, which Windows lacks */
    CHECK(f != NULL);
    event_base_dump_events(base, f);
    event_base_dump_events(base, NULL); /* nowhere to write: nothing */
    char text[2048];
    rewind(f);
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = '\0';
    CHECK_EQ(fclose(f), 0);
    /* The deadline is on the wall clock, worked out from what is left of the timer when it
     * is asked: within 100 ms of event_pending's answer, it is written as that answer. */
    char *stamp = strstr(text, "Timeout=");
    CHECK(stamp != NULL);
    long sec = 0;
    int usec = 0;
    CHECK_EQ(sscanf(stamp, "Timeout=%ld.%d", &sec, &usec), 2);
    long diff_us = (sec - (long)at.tv_sec) * 1000000 + (usec - (int)at.tv_usec);
    CHECK_LT(labs(diff_us), 100000);
    char fixed[64];
    int flen = snprintf(fixed, sizeof fixed, "Timeout=%ld.%06d", (long)at.tv_sec, (int)at.tv_usec);
    CHECK_EQ(strspn(stamp + 8, "0123456789."), (size_t)flen - 8);
    memcpy(stamp, fixed, (size_t)flen);
    /* libevent's format, which its test/check-dumpevents.py reads: the inserted events with
     * the wall-clock deadline, then the active ones. */
    char want[2048];
    int pri = event_get_priority(rd);
    snprintf(want, sizeof want,
             "Inserted events:\n"
             "  %p [fd  -1] Timeout=%ld.%06d\n"
             "  %p [sig %d] Signal Persist\n"
             "  %p [fd  %d] Write EOF\n"
             "  %p [fd  %d] Read Persist\n"
             "Active events:\n"
             "  %p [fd  %d, priority=%d] Read active\n"
             "  %p [fd  -1, priority=%d] Timeout active\n",
             (void *)tm, (long)at.tv_sec, (int)at.tv_usec, (void *)sig, SIGUSR1, (void *)wr,
             sv[0], (void *)rd, sv[0], (void *)rd, sv[0], pri, (void *)act, pri);
    CHECK_STR_EQ(text, want);
    event_free(rd), event_free(wr), event_free(sig), event_free(act), event_free(tm);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

TEST(event_base_once_refuses_what_it_cannot_add_and_runs_fd_events_through_the_queue) {
    struct event_base *base = evt_base_open();
    int n = 0, sv[2];
    make_socketpair(sv);
    CHECK_EQ(event_base_once(base, -1, 0, evt_count_cb, &n, NULL), -1); /* nothing to wait for */
    CHECK_EQ(event_base_once(base, -1, EV_TIMEOUT, NULL, &n, NULL), -1);
    CHECK_EQ(event_base_once(base, 1 << 30, EV_READ, evt_count_cb, &n, NULL), -1);
    CHECK(strstr(evt_last_warning, "fd 1073741824") != NULL);
    CHECK_EQ(event_base_once(base, sv[0], EV_READ, evt_count_cb, &n, NULL), 0);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(n, 1);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

/* ---- fd events ---- */

static short last_what;

static void what_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    last_what = what;
    ++*(int *)arg;
}

TEST(ev_closed_reports_the_peers_close_and_not_pending_data) {
    struct event_base *base = evt_base_open();
    int sv[2], n = 0;
    make_socketpair(sv);
    struct event *closed = event_new(base, sv[0], EV_CLOSED | EV_PERSIST, what_cb, &n);
    CHECK_EQ(event_add(closed, NULL), 0);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0); /* readable, but not the end */
    CHECK_EQ(n, 0);
    char c;
    CHECK_EQ(read(sv[0], &c, 1), 1);
    close(sv[1]);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(last_what, EV_CLOSED);
    event_free(closed);
    struct event *both = event_new(base, sv[0], EV_READ | EV_CLOSED, what_cb, &n);
    CHECK_EQ(event_add(both, NULL), 0);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(n, 2);
    CHECK_EQ(last_what, EV_READ | EV_CLOSED);
    event_free(both);
    close(sv[0]);
    evt_base_close(base);
}

TEST(edge_triggered_events_are_told_so_where_the_backend_has_an_edge) {
    struct event_base *base = evt_base_open();
    int sv[2], n = 0;
    make_socketpair(sv);
    struct event *ev = event_new(base, sv[0], EV_READ | EV_ET | EV_PERSIST, what_cb, &n);
    CHECK_EQ(event_add(ev, NULL), 0);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(n, 1);
    int et = event_base_get_features(base) & EV_FEATURE_ET;
    CHECK_EQ(last_what, EV_READ | (et ? EV_ET : 0));
    event_free(ev);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

TEST(an_event_on_a_regular_file_is_ready_at_once_on_every_backend) {
    struct event_base *base = evt_base_open();
    char name[] = "/tmp/iomux-event-file-XXXXXX";
    int fd = mkstemp(name);
    CHECK_GE(fd, 0);
    unlink(name);
    /* kqueue's rule for a regular file is its own: readable only while the offset is before
     * the end (docs/io.md), so there the file holds a byte ahead of its offset. */
    if (strcmp(event_base_get_method(base), "kqueue") == 0) {
        CHECK_EQ(write(fd, "x", 1), 1);
        CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
    }
    int n = 0;
    struct event *ev = event_new(base, fd, EV_READ | EV_WRITE | EV_CLOSED, what_cb, &n);
    CHECK_EQ(event_add(ev, NULL), 0);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(last_what & (EV_READ | EV_WRITE), EV_READ | EV_WRITE);
    event_free(ev);
    close(fd);
    evt_base_close(base);
}

static void break_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    norder++;
    event_base_loopbreak(arg);
}

/* Two events ready in one turn, each breaking the loop: whichever runs first, the other waits
 * for the next loop (libevent runs no callback after the one that broke the loop). */
TEST(io_events_after_a_loopbreak_wait_in_the_queue_for_the_next_loop) {
    struct event_base *base = evt_base_open();
    int a[2], b[2];
    make_socketpair(a);
    make_socketpair(b);
    struct event *first = event_new(base, a[0], EV_READ, break_cb, base);
    struct event *second = event_new(base, b[0], EV_READ, break_cb, base);
    CHECK_EQ(event_add(first, NULL), 0);
    CHECK_EQ(event_add(second, NULL), 0);
    CHECK_EQ(write(a[1], "x", 1), 1);
    CHECK_EQ(write(b[1], "x", 1), 1);
    norder = 0;
    CHECK_EQ(event_base_dispatch(base), 0);
    CHECK_EQ(norder, 1);
    CHECK_EQ(event_base_got_break(base), 1);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(norder, 2);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED | EVENT_BASE_COUNT_ACTIVE), 0);
    event_free(first), event_free(second);
    close(a[0]), close(a[1]), close(b[0]), close(b[1]);
    evt_base_close(base);
}

/* ---- finalizers, getters ---- */

static int finalized;

static void on_finalize(struct event *ev, void *arg)
{
    CHECK_EQ(event_pending(ev, EV_READ | EV_TIMEOUT, NULL), 0);
    finalized += *(int *)arg;
}

TEST(finalize_deletes_the_event_then_calls_back_and_free_finalize_frees_it) {
    struct event_base *base = evt_base_open();
    int sv[2], n = 0, weight = 10;
    make_socketpair(sv);
    struct event ev;
    CHECK_EQ(event_assign(&ev, base, sv[0], EV_READ, evt_count_cb, &weight), 0);
    struct timeval hour = {3600, 0};
    CHECK_EQ(event_add(&ev, &hour), 0);
    finalized = 0;
    CHECK_EQ(event_finalize(0, &ev, on_finalize), 0);
    CHECK_EQ(finalized, 10);
    CHECK_EQ(event_finalize(0, &ev, NULL), 0); /* no callback */
    struct event *heap = event_new(base, sv[0], EV_READ, evt_count_cb, &weight);
    CHECK_EQ(event_add(heap, NULL), 0);
    CHECK_EQ(event_free_finalize(0, heap, on_finalize), 0); /* freed: the sanitizer checks */
    CHECK_EQ(finalized, 20);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
    CHECK_EQ(n, 0);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

TEST(event_getters_give_back_the_assignment_and_debug_unassign_forgets_idle_events) {
    struct event_base *base = evt_base_open();
    int n = 0;
    struct event ev;
    CHECK_EQ(event_assign(&ev, base, 7, EV_READ | EV_PERSIST, evt_count_cb, &n), 0);
    CHECK_EQ(event_get_fd(&ev), 7);
    CHECK_EQ(event_get_events(&ev), EV_READ | EV_PERSIST);
    CHECK(event_get_callback(&ev) == evt_count_cb);
    CHECK(event_get_callback_arg(&ev) == &n);
    struct event_base *b;
    evutil_socket_t fd;
    short what;
    event_callback_fn cb;
    void *arg;
    event_get_assignment(&ev, &b, &fd, &what, &cb, &arg);
    CHECK(b == base);
    CHECK_EQ(fd, 7);
    CHECK_EQ(what, EV_READ | EV_PERSIST);
    CHECK(cb == evt_count_cb);
    CHECK(arg == &n);
    event_get_assignment(&ev, NULL, NULL, NULL, NULL, NULL); /* nothing asked for */
    CHECK_EQ(event_get_struct_event_size(), sizeof(struct event));
    struct event tm;
    CHECK_EQ(evtimer_assign(&tm, base, evt_count_cb, &n), 0);
    struct timeval hour = {3600, 0};
    CHECK_EQ(evtimer_add(&tm, &hour), 0);
    event_debug_unassign(&tm); /* pending: left alone */
    CHECK_EQ(event_initialized(&tm), 1);
    CHECK_EQ(evtimer_del(&tm), 0);
    event_debug_unassign(&tm);
    CHECK_EQ(event_initialized(&tm), 0);
    event_debug_unassign(&ev);
    CHECK_EQ(event_initialized(&ev), 0);
    evt_base_close(base);
}

/* ---- more on adding, deleting and activating ---- */

TEST(an_fd_event_set_before_event_init_works_once_given_a_base) {
    struct event ev;
    int sv[2], n = 0;
    make_socketpair(sv);
    event_set(&ev, sv[0], EV_READ, evt_count_cb, &n); /* no current base: none */
    struct event_base *base = evt_base_open();
    CHECK_EQ(event_base_set(base, &ev), 0);
    CHECK_EQ(event_add(&ev, NULL), 0);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(n, 1);
    struct event *orphan = event_new(NULL, -1, 0, evt_count_cb, &n); /* no base either */
    CHECK(orphan != NULL);
    CHECK(event_get_base(orphan) == NULL);
    event_free(orphan); /* nothing to take it out of */
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

TEST(a_negative_timeout_is_due_at_once) {
    struct event_base *base = evt_base_open();
    int n = 0;
    struct event *ev = evtimer_new(base, evt_count_cb, &n);
    struct timeval neg = {-5, 0};
    CHECK_EQ(evtimer_add(ev, &neg), 0);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(n, 1);
    event_free(ev);
    evt_base_close(base);
}

static void del_self_sig_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    sig_calls++;
    CHECK_EQ(event_del(arg), 0);
}

TEST(a_signal_callback_that_deletes_its_event_stops_the_repeats) {
    struct event_base *base = evt_base_open();
    struct event *ev = evsignal_new(base, SIGUSR2, del_self_sig_cb, event_self_cbarg());
    CHECK_EQ(event_add(ev, NULL), 0);
    sig_calls = 0;
    event_active(ev, EV_SIGNAL, 3);
    CHECK_EQ(event_base_dispatch(base), 1);
    CHECK_EQ(sig_calls, 1);
    event_active(ev, EV_SIGNAL, 0); /* not added, no count: one call */
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    CHECK_EQ(sig_calls, 2);
    event_free(ev);
    evt_base_close(base);
}

TEST(active_by_fd_and_by_signal_pass_by_events_of_other_kinds) {
    struct event_base *base = evt_base_open();
    int n = 0;
    struct event *sig = evsignal_new(base, SIGUSR1, evt_count_cb, &n);
    struct event *tm = evtimer_new(base, evt_count_cb, &n);
    struct timeval hour = {3600, 0};
    CHECK_EQ(event_add(sig, NULL), 0);
    CHECK_EQ(evtimer_add(tm, &hour), 0);
    event_base_active_by_fd(base, SIGUSR1, EV_READ); /* a signal number is no fd */
    event_base_active_by_fd(base, -1, EV_READ);      /* a timer has no fd to be ready */
    event_base_active_by_signal(base, -1);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE), 0);
    event_base_active_by_fd(base, -1, EV_TIMEOUT); /* its timeout, though */
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE), 1);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(n, 1);
    event_free(sig), event_free(tm);
    evt_base_close(base);
}

TEST(remove_timer_keeps_an_io_activation_and_pending_reads_only_what_is_asked) {
    struct event_base *base = evt_base_open();
    int sv[2], n = 0;
    make_socketpair(sv);
    struct event *ev = event_new(base, sv[0], EV_READ, evt_count_cb, &n);
    struct timeval hour = {3600, 0}, tv;
    CHECK_EQ(event_add(ev, &hour), 0);
    CHECK_EQ(event_pending(ev, EV_READ, &tv), EV_READ); /* no EV_TIMEOUT asked: tv untouched */
    event_active(ev, EV_READ, 1);
    CHECK_EQ(event_remove_timer(ev), 0);
    CHECK_EQ(event_pending(ev, EV_READ | EV_TIMEOUT, NULL), EV_READ);
    CHECK_EQ(event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE), 1);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    CHECK_EQ(n, 1);
    /* An event forgotten by event_debug_unassign is an unassigned one again. */
    event_debug_unassign(ev);
    CHECK_EQ(event_add(ev, NULL), -1);
    CHECK(strstr(evt_last_warning, "never assigned") != NULL);
    event_free(ev);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

/* ---- fork ---- */

TEST(event_reinit_in_a_forked_child_keeps_its_events_working) {
    struct event_base *base = evt_base_open();
    int sv[2], n = 0;
    make_socketpair(sv);
    struct event *ev = event_new(base, sv[0], EV_READ | EV_PERSIST, evt_count_cb, &n);
    CHECK_EQ(event_add(ev, NULL), 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        int ok = event_reinit(base) == 0;
        ok = ok && write(sv[1], "x", 1) == 1;
        ok = ok && event_base_loop(base, EVLOOP_ONCE) == 0 && n == 1;
        child_exit(ok ? 0 : 1);
    }
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    /* The parent's base is untouched: the byte the child wrote is there for it too. */
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(n, 1);
    event_free(ev);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}
