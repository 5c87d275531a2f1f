/* SPDX-License-Identifier: MIT */
/* libiomux-event: EV_FEATURE_EARLY_CLOSE and EV_CLOSED, offered where the base's backend
 * reports the peer's hang-up without a read (MUX_RDHUP: epoll, io_uring, Linux's poll); and
 * EVENT_PRECISE_TIMER / EVENT_BASE_FLAG_PRECISE_TIMER with the monotonic timers of
 * event2/util.h, whose EV_MONOT_PRECISE is what the flag asks libevent for. */
#include <event2/event.h>
#include <event2/util.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "compat/libevent/event_internal.h" /* the base's flags, which libevent does not show */
#include "event_fixture.h"
#include "harness.h"

/* Whether the method must offer EV_FEATURE_EARLY_CLOSE, as docs/libevent.md says. */
static int early_close_expected(const char *method)
{
    if (strcmp(method, "epoll") == 0 || strcmp(method, "uring") == 0)
        return 1;
#if defined(POLLRDHUP) && !defined(IOMUX_TEST_PORTABLE) /* as poll.c */
    if (strcmp(method, "poll") == 0)
        return 1;
#endif
    return 0;
}

/* A configuration that allows only `method`, and asks for `features`. */
static struct event_config *config_for(const char *method, int features)
{
    struct event_config *cfg = event_config_new();
    CHECK(cfg != NULL);
    for (const char **m = event_get_supported_methods(); *m; m++)
        if (strcmp(*m, method) != 0)
            CHECK_EQ(event_config_avoid_method(cfg, *m), 0);
    CHECK_EQ(event_config_set_flag(cfg, EVENT_BASE_FLAG_IGNORE_ENV), 0);
    CHECK_EQ(event_config_require_features(cfg, features), 0);
    return cfg;
}

TEST(early_close_is_offered_where_the_backend_reports_the_hang_up) {
    struct event_base *base = evt_base_open();
    const char *method = event_base_get_method(base);
    int offered = (event_base_get_features(base) & EV_FEATURE_EARLY_CLOSE) != 0;
    CHECK_EQ(offered, early_close_expected(method));
    evt_base_close(base);
    /* Required: a base on that backend where it has it, no base at all where not. */
    struct event_config *cfg = config_for(method, EV_FEATURE_EARLY_CLOSE);
    struct event_base *b2 = event_base_new_with_config(cfg);
    event_config_free(cfg);
    CHECK_EQ(b2 != NULL, offered);
    if (b2) {
        CHECK_STR_EQ(event_base_get_method(b2), method);
        CHECK_NE(event_base_get_features(b2) & EV_FEATURE_EARLY_CLOSE, 0);
        event_base_free(b2);
    }
}

static short closed_what;
static int closed_calls;

static void closed_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)arg;
    closed_what = what;
    closed_calls++;
}

/* libevent's test-closed, checked: the peer sends a byte and shuts its writing down. With
 * EV_FEATURE_EARLY_CLOSE the EV_CLOSED event hears of it with the byte still unread (and not
 * of the byte alone); without, only once the byte is read, as docs/libevent.md says. */
static void closed_behind_data(int by_close)
{
    struct event_base *base = evt_base_open();
    int early = (event_base_get_features(base) & EV_FEATURE_EARLY_CLOSE) != 0;
    int sv[2];
    make_socketpair(sv);
    closed_calls = 0;
    closed_what = 0;
    struct timeval ten = {10, 0};
    struct event *ev = event_new(base, sv[0], EV_CLOSED | EV_PERSIST, closed_cb, NULL);
    CHECK_EQ(event_add(ev, &ten), 0);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    CHECK_EQ(closed_calls, 0); /* a byte is no close */
    if (by_close) {
        close(sv[1]);
        sv[1] = -1;
    } else {
        CHECK_EQ(shutdown(sv[1], SHUT_WR), 0);
    }
    if (early) {
        CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
        CHECK_EQ(closed_calls, 1);
        CHECK_EQ(closed_what, EV_CLOSED);
        char c;
        CHECK_EQ(recv(sv[0], &c, 1, MSG_PEEK), 1); /* still unread */
    } else {
        CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 0);
        CHECK_EQ(closed_calls, 0); /* seen behind the byte only once it is read */
        char c;
        CHECK_EQ(read(sv[0], &c, 1), 1);
        CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
        CHECK_EQ(closed_calls, 1);
        CHECK_EQ(closed_what, EV_CLOSED);
    }
    event_free(ev);
    close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    evt_base_close(base);
}

TEST(ev_closed_tells_a_shutdown_behind_unread_data_where_early_close_is_offered) {
    closed_behind_data(0);
}

TEST(ev_closed_tells_a_close_behind_unread_data_where_early_close_is_offered) {
    closed_behind_data(1);
}

/* EV_READ | EV_CLOSED: both, in one call, where the hang-up is seen. */
TEST(ev_read_and_ev_closed_come_together_on_a_hang_up) {
    struct event_base *base = evt_base_open();
    int early = (event_base_get_features(base) & EV_FEATURE_EARLY_CLOSE) != 0;
    int sv[2];
    make_socketpair(sv);
    closed_calls = 0;
    struct event *ev = event_new(base, sv[0], EV_READ | EV_CLOSED, closed_cb, NULL);
    CHECK_EQ(event_add(ev, NULL), 0);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    CHECK_EQ(shutdown(sv[1], SHUT_WR), 0);
    CHECK_EQ(event_base_loop(base, EVLOOP_ONCE), 0);
    CHECK_EQ(closed_calls, 1);
    CHECK_EQ(closed_what, early ? EV_READ | EV_CLOSED : EV_READ);
    event_free(ev);
    close(sv[0]);
    close(sv[1]);
    evt_base_close(base);
}

/* ---- EVENT_PRECISE_TIMER ---- */

/* The smallest step between 10 distinct readings of `timer`, in microseconds; checks that
 * they never go back. */
static long smallest_step(struct evutil_monotonic_timer *timer)
{
    struct timeval tv[10];
    long least = 1000000000;
    CHECK_EQ(evutil_gettime_monotonic(timer, &tv[0]), 0);
    for (int i = 1; i < 10; i++) {
        do
            CHECK_EQ(evutil_gettime_monotonic(timer, &tv[i]), 0);
        while (evutil_timercmp(&tv[i], &tv[i - 1], ==));
        CHECK(evutil_timercmp(&tv[i], &tv[i - 1], >));
        struct timeval d;
        evutil_timersub(&tv[i], &tv[i - 1], &d);
        long us = (long)d.tv_sec * 1000000 + (long)d.tv_usec;
        if (us < least)
            least = us;
    }
    return least;
}

/* What EV_MONOT_PRECISE (the clock EVENT_PRECISE_TIMER gives a libevent base) changes: a
 * precise timer moves in microseconds, a default one on Linux in the coarse clock's ticks,
 * never less than its resolution apart. No bound on elapsed time: the steps are the clocks'. */
CORE_TEST(monotonic_timers_are_precise_when_asked_and_coarse_by_default_on_linux) {
    struct evutil_monotonic_timer *t = evutil_monotonic_timer_new();
    CHECK(t != NULL);
    CHECK_EQ(evutil_configure_monotonic_time(NULL, 0), -1);
    CHECK_EQ(evutil_configure_monotonic_time(t, 4), -1);
    CHECK_EQ(evutil_gettime_monotonic(NULL, NULL), -1);
    CHECK_EQ(evutil_configure_monotonic_time(t, EV_MONOT_PRECISE), 0);
    CHECK_LT(smallest_step(t), 1000); /* the least of nine steps: preemption cannot stretch all */
    CHECK_EQ(evutil_configure_monotonic_time(t, EV_MONOT_FALLBACK), 0);
    CHECK_LT(smallest_step(t), 1000);
    CHECK_EQ(evutil_configure_monotonic_time(t, 0), 0);
#ifdef CLOCK_MONOTONIC_COARSE
    struct timespec res;
    CHECK_EQ(clock_getres(CLOCK_MONOTONIC_COARSE, &res), 0);
    long tick_us = (long)res.tv_sec * 1000000 + res.tv_nsec / 1000;
    CHECK_GE(tick_us, 1000);                 /* a jiffy: HZ is at most 1000 */
    CHECK_GE(smallest_step(t), tick_us - 1); /* (whole microseconds of nanosecond ticks) */
#elif defined(_WIN32)
    CHECK_GE(smallest_step(t), 1000); /* as libevent there: the tick count, in milliseconds */
#else
    CHECK_LT(smallest_step(t), 1000);
#endif
    evutil_monotonic_timer_free(t);
}

/* As libevent's event_base_new_with_config: the variable sets the base's flag unless the
 * configuration ignores the environment; the configuration's flag sets it too. (libevent has
 * no call that shows a base's flags: the base's own record is read.) */
static int base_is_precise(const struct event_config *cfg)
{
    struct event_base *base = event_base_new_with_config(cfg);
    CHECK(base != NULL);
    int precise = (base->flags & EVENT_BASE_FLAG_PRECISE_TIMER) != 0;
    event_base_free(base);
    return precise;
}

CORE_TEST(event_precise_timer_sets_the_flag_as_libevent_does) {
    struct event_config *ignore = event_config_new(), *asked = event_config_new();
    CHECK_EQ(event_config_set_flag(ignore, EVENT_BASE_FLAG_IGNORE_ENV), 0);
    CHECK_EQ(event_config_set_flag(asked, EVENT_BASE_FLAG_PRECISE_TIMER), 0);
    CHECK_EQ(unsetenv("EVENT_PRECISE_TIMER"), 0);
    CHECK_EQ(base_is_precise(NULL), 0);
    CHECK_EQ(base_is_precise(ignore), 0);
    CHECK_EQ(base_is_precise(asked), 1);
    CHECK_EQ(setenv("EVENT_PRECISE_TIMER", "1", 1), 0);
    CHECK_EQ(base_is_precise(NULL), 1);
    CHECK_EQ(base_is_precise(ignore), 0);
    CHECK_EQ(base_is_precise(asked), 1);
    CHECK_EQ(unsetenv("EVENT_PRECISE_TIMER"), 0);
    event_config_free(ignore);
    event_config_free(asked);
}
