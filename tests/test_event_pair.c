/* SPDX-License-Identifier: MIT */
/* libiomux-event's paired bufferevents and rate limits, beyond test_event_compat.c: a pair's
 * watermarks, flushes and the end of one side; a bufferevent's own token bucket (its levels,
 * decrements, a new configuration, the refill that ends a suspension); and groups (the
 * share of each member, the minimum share, totals, members joining, leaving and being
 * freed, the group's tick that wakes the members it stopped).
 *
 * The exact levels are read with a tick of an hour, so that no refill happens between two
 * looks however slow the machine is; the refills are waited for with short ticks, and only
 * their order is checked (a bucket never fills before its tick). */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>

#include <stdint.h>
#include <string.h>

#include "event_fixture.h"
#include "harness.h"

static int reads[2], writes[2], events[2];
static short last_what[2];

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    reads[(intptr_t)arg]++;
}

static void on_write(struct bufferevent *bev, void *arg)
{
    (void)bev;
    writes[(intptr_t)arg]++;
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    events[(intptr_t)arg]++;
    last_what[(intptr_t)arg] = what;
}

/* A pair whose ends count their callbacks in reads[i], writes[i] and events[i], reading
 * enabled at both. */
static void open_pair(struct event_base *base, struct bufferevent *pair[2])
{
    CHECK_EQ(bufferevent_pair_new(base, 0, pair), 0);
    memset(reads, 0, sizeof reads);
    memset(writes, 0, sizeof writes);
    memset(events, 0, sizeof events);
    for (intptr_t i = 0; i < 2; i++) {
        bufferevent_setcb(pair[i], on_read, on_write, on_event, (void *)i);
        CHECK_EQ(bufferevent_enable(pair[i], EV_READ), 0);
    }
}

static size_t in_len(struct bufferevent *bev)
{
    return evbuffer_get_length(bufferevent_get_input(bev));
}

static size_t out_len(struct bufferevent *bev)
{
    return evbuffer_get_length(bufferevent_get_output(bev));
}

/* Runs the active callbacks (a pair's are deferred). */
static void run_deferred(struct event_base *base)
{
    CHECK_GE(event_base_loop(base, EVLOOP_NONBLOCK), 0);
}

static long ms_since(uint64_t t0)
{
    return (long)((mono_ns() - t0) / MS);
}

static const struct timeval an_hour = {3600, 0};

/* ---- pairs ---- */

TEST(pair_calls_on_bad_input_fail) {
    struct bufferevent *pair[2];
    CHECK_EQ(bufferevent_pair_new(NULL, 0, pair), -1); /* no base, no event_init */
    struct event_base *base = evt_base_open();
    CHECK_EQ(bufferevent_pair_new(base, 0, NULL), -1);
    CHECK(bufferevent_pair_get_partner(NULL) == NULL);
    struct bufferevent *sock = bufferevent_socket_new(base, -1, 0);
    CHECK(sock != NULL);
    CHECK(bufferevent_pair_get_partner(sock) == NULL); /* not a pair's end */
    CHECK_EQ(bufferevent_setfd(sock, -1), -1);
    bufferevent_free(sock);
    CHECK_EQ(bufferevent_pair_new(base, 0, pair), 0);
    CHECK_EQ(bufferevent_setfd(pair[0], 0), -1); /* a pair's end takes no descriptor */
    struct timeval tv = {1, 0};
    CHECK_EQ(bufferevent_set_timeouts(pair[0], &tv, &tv), 0); /* accepted, never fire */
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    evt_base_close(base);
}

TEST(pair_reader_high_watermark_holds_the_rest_until_the_input_is_drained) {
    struct event_base *base = evt_base_open();
    struct bufferevent *pair[2];
    open_pair(base, pair);
    bufferevent_setwatermark(pair[1], EV_READ, 0, 10);
    CHECK_EQ(bufferevent_write(pair[0], "0123456789abcdefghijklmnopqrst", 30), 0);
    CHECK_EQ(in_len(pair[1]), 10);
    CHECK_EQ(out_len(pair[0]), 20);
    CHECK_EQ(bufferevent_write(pair[0], "uv", 2), 0); /* the input is full: nothing moves */
    CHECK_EQ(in_len(pair[1]), 10);
    CHECK_EQ(out_len(pair[0]), 22);
    char buf[32];
    CHECK_EQ(bufferevent_get_max_to_read(pair[1]), 0); /* no room under the mark */
    CHECK_EQ(bufferevent_read(pair[1], buf, 4), 4); /* room for 4: 4 more come */
    CHECK_EQ(memcmp(buf, "0123", 4), 0);
    CHECK_EQ(in_len(pair[1]), 10);
    CHECK_EQ(out_len(pair[0]), 18);
    /* A higher mark lets in more at once; none lets in the rest. */
    bufferevent_setwatermark(pair[1], EV_READ, 0, 15);
    CHECK_EQ(in_len(pair[1]), 15);
    bufferevent_setwatermark(pair[1], EV_READ, 0, 0);
    CHECK_EQ(in_len(pair[1]), 28);
    CHECK_EQ(out_len(pair[0]), 0);
    CHECK_EQ(bufferevent_read(pair[1], buf, sizeof buf), 28);
    CHECK_EQ(memcmp(buf, "456789abcdefghijklmnopqrstuv", 28), 0);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    evt_base_close(base);
}

TEST(pair_low_watermarks_decide_when_the_read_and_write_callbacks_run) {
    struct event_base *base = evt_base_open();
    struct bufferevent *pair[2];
    open_pair(base, pair);
    bufferevent_setwatermark(pair[1], EV_READ, 5, 0);
    bufferevent_setwatermark(pair[0], EV_WRITE, 3, 0);
    /* Writing is held by the reader: the writer's output stays above its low mark. */
    CHECK_EQ(bufferevent_disable(pair[1], EV_READ), 0);
    CHECK_EQ(bufferevent_write(pair[0], "abc", 3), 0);
    run_deferred(base);
    CHECK_EQ(writes[0], 0);
    CHECK_EQ(bufferevent_enable(pair[1], EV_READ), 0);
    run_deferred(base);
    CHECK_EQ(in_len(pair[1]), 3);
    CHECK_EQ(reads[1], 0); /* 3 is under the low mark of 5 */
    CHECK_EQ(writes[0], 1); /* the output went to 0, under its low mark of 3 */
    CHECK_EQ(bufferevent_write(pair[0], "de", 2), 0);
    run_deferred(base);
    CHECK_EQ(reads[1], 1);
    CHECK_EQ(writes[0], 2);
    CHECK_EQ(strcmp(evt_buffer_text(bufferevent_get_input(pair[1])), "abcde"), 0);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    evt_base_close(base);
}

TEST(pair_flush_moves_what_may_move_and_finished_tells_the_partner_eof) {
    struct event_base *base = evt_base_open();
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_disable(pair[1], EV_READ), 0);
    CHECK_EQ(bufferevent_write(pair[0], "abc", 3), 0);
    CHECK_EQ(bufferevent_write(pair[1], "xyz", 3), 0);
    CHECK_EQ(in_len(pair[0]), 3);
    CHECK_EQ(bufferevent_flush(pair[0], EV_WRITE, BEV_NORMAL), 0);
    CHECK_EQ(bufferevent_flush(pair[0], EV_READ | EV_WRITE, BEV_FLUSH), 0);
    CHECK_EQ(out_len(pair[0]), 3); /* the partner does not read */
    run_deferred(base);
    CHECK_EQ(events[0], 0);
    CHECK_EQ(events[1], 0);
    /* BEV_FINISHED: the partner hears of the end, writing's for EV_READ, reading's for
     * EV_WRITE. */
    CHECK_EQ(bufferevent_flush(pair[0], EV_WRITE, BEV_FINISHED), 0);
    run_deferred(base);
    CHECK_EQ(events[1], 1);
    CHECK_EQ(last_what[1], BEV_EVENT_EOF | BEV_EVENT_READING);
    CHECK_EQ(bufferevent_flush(pair[0], EV_READ, BEV_FINISHED), 0);
    run_deferred(base);
    CHECK_EQ(events[1], 2);
    CHECK_EQ(last_what[1], BEV_EVENT_EOF | BEV_EVENT_WRITING);
    CHECK_EQ(events[0], 0);
    /* With reading on again, a flush of the reader's side pulls the bytes in. */
    pair[1]->enabled |= EV_READ; /* as a 1.x program may: no update until the flush */
    CHECK_EQ(bufferevent_flush(pair[1], EV_READ, BEV_FLUSH), 0);
    CHECK_EQ(in_len(pair[1]), 3);
    CHECK_EQ(out_len(pair[0]), 0);
    /* Without a partner there is nothing to flush to, and nobody to tell. */
    bufferevent_free(pair[1]);
    CHECK_EQ(bufferevent_write(pair[0], "late", 4), 0);
    CHECK_EQ(bufferevent_flush(pair[0], EV_WRITE, BEV_FINISHED), 0);
    CHECK_EQ(out_len(pair[0]), 4);
    run_deferred(base);
    CHECK_EQ(events[0], 0);
    bufferevent_free(pair[0]);
    evt_base_close(base);
}

TEST(pair_end_freed_with_callbacks_owed_runs_none_of_them) {
    struct event_base *base = evt_base_open();
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_write(pair[0], "owed", 4), 0);
    CHECK_EQ(in_len(pair[1]), 4);
    bufferevent_free(pair[1]); /* its read callback was owed */
    CHECK(bufferevent_pair_get_partner(pair[0]) == NULL);
    run_deferred(base);
    CHECK_EQ(reads[1], 0);
    CHECK_EQ(writes[0], 1); /* the writer's own callback still runs */
    bufferevent_free(pair[0]);
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1); /* nothing left */
    evt_base_close(base);
}

TEST(pair_transfer_waits_while_the_program_holds_a_buffer_frozen) {
    struct event_base *base = evt_base_open();
    struct bufferevent *pair[2];
    open_pair(base, pair);
    struct evbuffer *in = bufferevent_get_input(pair[1]);
    CHECK_EQ(evbuffer_freeze(in, 0), 0); /* its end: nothing may be added */
    CHECK_EQ(bufferevent_write(pair[0], "frozen", 6), 0);
    CHECK_EQ(in_len(pair[1]), 0);
    CHECK_EQ(out_len(pair[0]), 6);
    CHECK_EQ(evbuffer_unfreeze(in, 0), 0);
    CHECK_EQ(bufferevent_enable(pair[1], EV_READ), 0); /* tried again */
    CHECK_EQ(strcmp(evt_buffer_text(in), "frozen"), 0);
    CHECK_EQ(out_len(pair[0]), 0);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    evt_base_close(base);
}

/* ---- a bufferevent's own rate limit ---- */

TEST(rate_limit_configurations_refuse_bad_rates_bursts_and_ticks) {
    struct timeval tick = {0, 50000};
    CHECK(ev_token_bucket_cfg_new(200, 100, 100, 100, &tick) == NULL); /* read rate > burst */
    CHECK(ev_token_bucket_cfg_new(100, 100, 200, 100, &tick) == NULL); /* write rate > burst */
    CHECK(ev_token_bucket_cfg_new(0, 100, 100, 100, &tick) == NULL);   /* no read rate */
    CHECK(ev_token_bucket_cfg_new(100, 100, 0, 100, &tick) == NULL);   /* no write rate */
    size_t over = (size_t)EV_RATE_LIMIT_MAX + 1;
    CHECK(ev_token_bucket_cfg_new(1, over, 1, 1, &tick) == NULL);
    CHECK(ev_token_bucket_cfg_new(1, 1, 1, over, &tick) == NULL);
    struct timeval bad[] = {{-1, 0}, {0, -1}, {0, 999}, {0, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(ev_token_bucket_cfg_new(1, 1, 1, 1, &bad[i]) == NULL);
    struct timeval one_ms = {0, 1000};
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(1, 1, 1, 1, &one_ms);
    CHECK(cfg != NULL);
    ev_token_bucket_cfg_free(cfg);
    cfg = ev_token_bucket_cfg_new(1, EV_RATE_LIMIT_MAX, 1, EV_RATE_LIMIT_MAX, NULL); /* 1 s */
    CHECK(cfg != NULL);
    ev_token_bucket_cfg_free(cfg);
    ev_token_bucket_cfg_free(NULL);

    /* The calls on no bufferevent, or one without a limit. */
    CHECK_EQ(bufferevent_set_rate_limit(NULL, NULL), -1);
    CHECK(bufferevent_get_token_bucket_cfg(NULL) == NULL);
    CHECK_EQ(bufferevent_get_read_limit(NULL), EV_SSIZE_MAX);
    CHECK_EQ(bufferevent_get_write_limit(NULL), EV_SSIZE_MAX);
    CHECK_EQ(bufferevent_get_max_to_read(NULL), -1);
    CHECK_EQ(bufferevent_get_max_to_write(NULL), -1);
    CHECK_EQ(bufferevent_decrement_read_limit(NULL, 1), -1);
    CHECK_EQ(bufferevent_decrement_write_limit(NULL, 1), -1);
    struct event_base *base = evt_base_open();
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_set_rate_limit(pair[0], NULL), 0); /* none to take off */
    CHECK(bufferevent_get_token_bucket_cfg(pair[0]) == NULL);
    CHECK_EQ(bufferevent_get_write_limit(pair[0]), EV_SSIZE_MAX);
    CHECK_EQ(bufferevent_get_max_to_read(pair[0]), 16384); /* the single read's maximum */
    CHECK_EQ(bufferevent_get_max_to_write(pair[0]), 16384);
    CHECK_EQ(bufferevent_decrement_read_limit(pair[0], 1), -1);
    CHECK_EQ(bufferevent_decrement_write_limit(pair[0], 1), -1);
    bufferevent_free(pair[1]);
    bufferevent_free(pair[0]);
    evt_base_close(base);
}

/* pair[0] writes through its own write limit, pair[1] reads through its read limit. */
TEST(rate_limit_levels_go_down_with_each_byte_and_with_decrements) {
    struct event_base *base = evt_base_open();
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(100, 100, 50, 50, &an_hour);
    CHECK(cfg != NULL);
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_set_rate_limit(pair[0], cfg), 0);
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], cfg), 0);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 100);
    CHECK_EQ(bufferevent_get_write_limit(pair[0]), 50);
    CHECK_EQ(bufferevent_get_max_to_read(pair[1]), 100);
    CHECK_EQ(bufferevent_get_max_to_write(pair[0]), 50);
    char data[200];
    memset(data, 'd', sizeof data);
    CHECK_EQ(bufferevent_write(pair[0], data, 30), 0);
    CHECK_EQ(in_len(pair[1]), 30);
    CHECK_EQ(bufferevent_get_write_limit(pair[0]), 20);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 70);
    CHECK_EQ(bufferevent_get_read_limit(pair[0]), 100); /* its reading took nothing */
    /* The writer's bucket lets 20 more go; the rest waits for its tick. */
    CHECK_EQ(bufferevent_write(pair[0], data, 40), 0);
    CHECK_EQ(in_len(pair[1]), 50);
    CHECK_EQ(out_len(pair[0]), 20);
    CHECK_EQ(bufferevent_get_write_limit(pair[0]), 0);
    CHECK_EQ(bufferevent_get_max_to_write(pair[0]), 0);
    /* Decrements take tokens (a negative one gives them). */
    CHECK_EQ(bufferevent_decrement_read_limit(pair[1], 40), 0);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 10);
    CHECK_EQ(bufferevent_get_max_to_read(pair[1]), 10);
    CHECK_EQ(bufferevent_decrement_read_limit(pair[1], -25), 0);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 35);
    /* Giving the writer tokens lets its output go, up to what the reader may take. */
    CHECK_EQ(bufferevent_decrement_write_limit(pair[0], -15), 0); /* moved at once */
    CHECK_EQ(in_len(pair[1]), 65);
    CHECK_EQ(out_len(pair[0]), 5);
    CHECK_EQ(bufferevent_get_write_limit(pair[0]), 0);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 20);
    /* The reader's bucket empties: the writer holds its output even with tokens. */
    CHECK_EQ(bufferevent_decrement_read_limit(pair[1], 20), 0);
    CHECK_EQ(bufferevent_decrement_write_limit(pair[0], -50), 0);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 0);
    CHECK_EQ(bufferevent_get_max_to_read(pair[1]), 0);
    CHECK_EQ(out_len(pair[0]), 5);
    CHECK_EQ(in_len(pair[1]), 65);
    /* Without its limit, the reader takes the rest at once. */
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], NULL), 0);
    CHECK(bufferevent_get_token_bucket_cfg(pair[1]) == NULL);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), EV_SSIZE_MAX);
    CHECK_EQ(in_len(pair[1]), 70);
    CHECK_EQ(out_len(pair[0]), 0);
    CHECK_EQ(bufferevent_get_write_limit(pair[0]), 45);
    run_deferred(base);
    CHECK_GE(reads[1], 1);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    ev_token_bucket_cfg_free(cfg);
    evt_base_close(base);
}

TEST(rate_limit_a_new_configuration_keeps_the_level_within_its_burst) {
    struct event_base *base = evt_base_open();
    struct ev_token_bucket_cfg *big = ev_token_bucket_cfg_new(100, 100, 100, 100, &an_hour);
    struct ev_token_bucket_cfg *small = ev_token_bucket_cfg_new(10, 20, 5, 30, &an_hour);
    CHECK(big != NULL);
    CHECK(small != NULL);
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], big), 0);
    CHECK_EQ(bufferevent_decrement_write_limit(pair[1], 60), 0);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 100);
    CHECK_EQ(bufferevent_get_write_limit(pair[1]), 40);
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], small), 0);
    CHECK(bufferevent_get_token_bucket_cfg(pair[1]) == small);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 20);  /* cut to the bursts */
    CHECK_EQ(bufferevent_get_write_limit(pair[1]), 30);
    CHECK_EQ(bufferevent_decrement_write_limit(pair[1], 10), 0);
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], small), 0);
    CHECK_EQ(bufferevent_get_write_limit(pair[1]), 20); /* under the burst: kept */
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], big), 0);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 20); /* a bigger burst adds nothing */
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]); /* with its limit: freed with it */
    ev_token_bucket_cfg_free(big);
    ev_token_bucket_cfg_free(small);
    evt_base_close(base);
}

TEST(rate_limit_an_empty_bucket_suspends_reading_until_the_ticks_refill_it) {
    struct event_base *base = evt_base_open();
    struct timeval tick = {0, 20000};
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(100, 100, 100, 100, &tick);
    CHECK(cfg != NULL);
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], cfg), 0);
    /* 300 below empty: four ticks at least before a byte may be read. */
    CHECK_EQ(bufferevent_decrement_read_limit(pair[1], 400), 0);
    CHECK_LE(bufferevent_get_read_limit(pair[1]), 0);
    uint64_t t0 = mono_ns();
    CHECK_EQ(bufferevent_write(pair[0], "suspended", 9), 0);
    CHECK_EQ(in_len(pair[1]), 0);
    CHECK_EQ(out_len(pair[0]), 9);
    evt_turn_until(base, &reads[1], 1);
    CHECK_GE(ms_since(t0), 2 * 20);
    CHECK_EQ(strcmp(evt_buffer_text(bufferevent_get_input(pair[1])), "suspended"), 0);
    CHECK_EQ(out_len(pair[0]), 0);
    CHECK_LE(bufferevent_get_read_limit(pair[1]), 100 - 9);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    ev_token_bucket_cfg_free(cfg);
    evt_base_close(base);
}

TEST(rate_limit_tokens_given_over_the_burst_are_kept_until_used) {
    struct event_base *base = evt_base_open();
    struct timeval tick = {0, 5000};
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(10, 10, 10, 10, &tick);
    CHECK(cfg != NULL);
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], cfg), 0);
    CHECK_EQ(bufferevent_decrement_read_limit(pair[1], -90), 0);
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 100);
    sleep_ms(30); /* ticks pass: a level over the burst neither grows nor is cut */
    CHECK_EQ(bufferevent_get_read_limit(pair[1]), 100);
    CHECK_EQ(bufferevent_get_max_to_read(pair[1]), 100);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    ev_token_bucket_cfg_free(cfg);
    evt_base_close(base);
}

TEST(rate_limit_taken_off_while_suspended_resumes_at_once) {
    struct event_base *base = evt_base_open();
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(10, 10, 10, 10, &an_hour);
    CHECK(cfg != NULL);
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_set_rate_limit(pair[0], cfg), 0);
    CHECK_EQ(bufferevent_write(pair[0], "0123456789abcdef", 16), 0);
    CHECK_EQ(in_len(pair[1]), 10);
    CHECK_EQ(out_len(pair[0]), 6);
    CHECK_EQ(bufferevent_set_rate_limit(pair[0], NULL), 0); /* its refill timer goes too */
    CHECK_EQ(in_len(pair[1]), 16);
    /* Nothing of the limit keeps the loop: only the owed callbacks run. */
    CHECK_EQ(event_base_loop(base, EVLOOP_NONBLOCK), 1);
    CHECK_EQ(reads[1], 1);
    CHECK_EQ(event_base_dispatch(base), 1);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    ev_token_bucket_cfg_free(cfg);
    evt_base_close(base);
}

/* ---- groups ---- */

TEST(rate_limit_group_calls_on_bad_input_fail) {
    struct event_base *base = evt_base_open();
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(10, 10, 10, 10, &an_hour);
    CHECK(cfg != NULL);
    CHECK(bufferevent_rate_limit_group_new(NULL, cfg) == NULL);
    CHECK(bufferevent_rate_limit_group_new(base, NULL) == NULL);
    struct bufferevent_rate_limit_group *g = bufferevent_rate_limit_group_new(base, cfg);
    CHECK(g != NULL);
    CHECK_EQ(bufferevent_rate_limit_group_set_cfg(NULL, cfg), -1);
    CHECK_EQ(bufferevent_rate_limit_group_set_cfg(g, NULL), -1);
    CHECK_EQ(bufferevent_rate_limit_group_set_min_share(NULL, 1), -1);
    CHECK_EQ(bufferevent_rate_limit_group_set_min_share(g, (size_t)EV_SSIZE_MAX + 1), -1);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(NULL, g), -1);
    CHECK_EQ(bufferevent_remove_from_rate_limit_group(NULL), -1);
    CHECK_EQ(bufferevent_rate_limit_group_get_read_limit(NULL), -1);
    CHECK_EQ(bufferevent_rate_limit_group_get_write_limit(NULL), -1);
    CHECK_EQ(bufferevent_rate_limit_group_decrement_read(NULL, 1), -1);
    CHECK_EQ(bufferevent_rate_limit_group_decrement_write(NULL, 1), -1);
    ev_uint64_t r = 7, w = 7;
    bufferevent_rate_limit_group_get_totals(NULL, &r, &w);
    CHECK_EQ(r, 7);
    CHECK_EQ(w, 7);
    bufferevent_rate_limit_group_get_totals(g, NULL, NULL);
    bufferevent_rate_limit_group_reset_totals(NULL);
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(pair[0], NULL), -1);
    CHECK_EQ(bufferevent_remove_from_rate_limit_group(pair[0]), 0); /* in none: nothing */
    bufferevent_free(pair[1]);
    bufferevent_free(pair[0]);
    bufferevent_rate_limit_group_free(g);
    bufferevent_rate_limit_group_free(NULL);
    ev_token_bucket_cfg_free(cfg);
    evt_base_close(base);
}

TEST(rate_limit_group_members_share_its_bucket_and_it_counts_their_bytes) {
    struct event_base *base = evt_base_open();
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(1000, 1000, 800, 800, &an_hour);
    CHECK(cfg != NULL);
    struct bufferevent_rate_limit_group *g = bufferevent_rate_limit_group_new(base, cfg);
    CHECK(g != NULL);
    ev_token_bucket_cfg_free(cfg); /* the group keeps its own copy */
    CHECK_EQ(bufferevent_rate_limit_group_get_read_limit(g), 1000);
    CHECK_EQ(bufferevent_rate_limit_group_get_write_limit(g), 800);
    struct bufferevent *a[2], *b[2];
    open_pair(base, a);
    CHECK_EQ(bufferevent_pair_new(base, 0, b), 0);
    CHECK_EQ(bufferevent_enable(b[1], EV_READ), 0);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(a[1], g), 0);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(a[1], g), 0); /* a member already */
    CHECK_EQ(bufferevent_get_max_to_read(a[1]), 1000);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(b[1], g), 0);
    CHECK_EQ(bufferevent_get_max_to_read(a[1]), 500); /* half each */
    CHECK_EQ(bufferevent_get_max_to_write(b[1]), 400);
    CHECK_EQ(bufferevent_get_read_limit(a[1]), EV_SSIZE_MAX); /* no bucket of its own */
    /* The minimum share: a member may take that much while the group has any. */
    CHECK_EQ(bufferevent_rate_limit_group_set_min_share(g, 600), 0);
    CHECK_EQ(bufferevent_get_max_to_read(a[1]), 600);
    CHECK_EQ(bufferevent_rate_limit_group_set_min_share(g, 0), 0); /* taken as 1 */
    CHECK_EQ(bufferevent_get_max_to_read(a[1]), 500);
    char data[1000];
    memset(data, 'g', sizeof data);
    CHECK_EQ(bufferevent_write(a[0], data, 300), 0);
    CHECK_EQ(in_len(a[1]), 300);
    CHECK_EQ(bufferevent_rate_limit_group_get_read_limit(g), 700);
    CHECK_EQ(bufferevent_get_max_to_read(b[1]), 350);
    CHECK_EQ(bufferevent_write(a[1], data, 100), 0);
    CHECK_EQ(bufferevent_rate_limit_group_get_write_limit(g), 700);
    ev_uint64_t r = 0, w = 0;
    bufferevent_rate_limit_group_get_totals(g, &r, &w);
    CHECK_EQ(r, 300);
    CHECK_EQ(w, 100);
    bufferevent_rate_limit_group_reset_totals(g);
    bufferevent_rate_limit_group_get_totals(g, &r, NULL);
    bufferevent_rate_limit_group_get_totals(g, NULL, &w);
    CHECK_EQ(r, 0);
    CHECK_EQ(w, 0);
    /* A member takes its share at a time: 350 of the 400 written, the rest waits. An empty
     * bucket stops every member. */
    CHECK_EQ(bufferevent_write(b[0], data, 400), 0);
    CHECK_EQ(in_len(b[1]), 350);
    CHECK_EQ(bufferevent_rate_limit_group_get_read_limit(g), 350);
    CHECK_EQ(bufferevent_rate_limit_group_decrement_read(g, 350), 0);
    CHECK_EQ(bufferevent_rate_limit_group_get_read_limit(g), 0);
    CHECK_EQ(bufferevent_get_max_to_read(a[1]), 0);
    CHECK_EQ(bufferevent_get_max_to_read(b[1]), 0);
    CHECK_EQ(bufferevent_write(a[0], data, 10), 0);
    CHECK_EQ(in_len(a[1]), 300); /* held */
    CHECK_EQ(out_len(a[0]), 10);
    /* Tokens given back wake the members. */
    CHECK_EQ(bufferevent_rate_limit_group_decrement_read(g, -100), 0);
    CHECK_EQ(in_len(a[1]) + in_len(b[1]), 300 + 10 + 350 + 50);
    CHECK_EQ(bufferevent_rate_limit_group_get_read_limit(g), 100 - 60);
    bufferevent_rate_limit_group_get_totals(g, &r, &w);
    CHECK_EQ(r, 350 + 60);
    /* A member that leaves is limited no more. */
    CHECK_EQ(bufferevent_remove_from_rate_limit_group(a[1]), 0);
    CHECK_EQ(bufferevent_get_max_to_read(a[1]), 16384);
    CHECK_EQ(bufferevent_get_max_to_read(b[1]), 40);
    CHECK_EQ(bufferevent_rate_limit_group_decrement_write(g, 700), 0);
    CHECK_EQ(bufferevent_get_max_to_write(b[1]), 0);
    CHECK_EQ(bufferevent_get_max_to_write(a[1]), 16384);
    bufferevent_free(a[0]);
    bufferevent_free(a[1]);
    bufferevent_free(b[0]);
    bufferevent_free(b[1]);
    bufferevent_rate_limit_group_free(g);
    evt_base_close(base);
}

TEST(rate_limit_group_writing_empties_it_and_stops_every_member) {
    struct event_base *base = evt_base_open();
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(1000, 1000, 100, 100, &an_hour);
    CHECK(cfg != NULL);
    struct bufferevent_rate_limit_group *g = bufferevent_rate_limit_group_new(base, cfg);
    CHECK(g != NULL);
    struct bufferevent *a[2], *b[2];
    open_pair(base, a);
    CHECK_EQ(bufferevent_pair_new(base, 0, b), 0);
    CHECK_EQ(bufferevent_enable(b[1], EV_READ), 0);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(a[0], g), 0);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(b[0], g), 0);
    CHECK_EQ(bufferevent_rate_limit_group_set_min_share(g, 100), 0);
    char data[200];
    memset(data, 'w', sizeof data);
    CHECK_EQ(bufferevent_write(a[0], data, 150), 0); /* the whole bucket at most */
    CHECK_EQ(in_len(a[1]), 100);
    CHECK_EQ(out_len(a[0]), 50);
    CHECK_EQ(bufferevent_rate_limit_group_get_write_limit(g), 0);
    CHECK_EQ(bufferevent_write(b[0], data, 5), 0);
    CHECK_EQ(in_len(b[1]), 0);
    CHECK_EQ(bufferevent_get_max_to_write(b[0]), 0);
    /* A member with a bucket of its own is held by the emptier of the two. */
    struct ev_token_bucket_cfg *own = ev_token_bucket_cfg_new(1000, 1000, 30, 30, &an_hour);
    CHECK(own != NULL);
    CHECK_EQ(bufferevent_set_rate_limit(b[0], own), 0);
    CHECK_EQ(bufferevent_get_write_limit(b[0]), 30);
    CHECK_EQ(bufferevent_get_max_to_write(b[0]), 0);
    CHECK_EQ(bufferevent_rate_limit_group_decrement_write(g, -1000), 0);
    CHECK_EQ(bufferevent_rate_limit_group_get_write_limit(g), 1000 - 50 - 5);
    CHECK_EQ(in_len(a[1]) + in_len(b[1]), 155);
    CHECK_EQ(bufferevent_get_write_limit(b[0]), 25);
    CHECK_EQ(bufferevent_get_max_to_write(b[0]), 25);
    /* Out of the group, its own bucket still holds it. */
    CHECK_EQ(bufferevent_remove_from_rate_limit_group(b[0]), 0);
    CHECK(bufferevent_get_token_bucket_cfg(b[0]) == own);
    CHECK_EQ(bufferevent_get_max_to_write(b[0]), 25);
    bufferevent_free(a[0]);
    bufferevent_free(a[1]);
    bufferevent_free(b[0]);
    bufferevent_free(b[1]);
    bufferevent_rate_limit_group_free(g);
    ev_token_bucket_cfg_free(cfg);
    ev_token_bucket_cfg_free(own);
    evt_base_close(base);
}

TEST(rate_limit_group_members_move_leave_and_are_freed_in_any_order) {
    struct event_base *base = evt_base_open();
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(900, 900, 900, 900, &an_hour);
    CHECK(cfg != NULL);
    struct bufferevent_rate_limit_group *g = bufferevent_rate_limit_group_new(base, cfg);
    struct bufferevent_rate_limit_group *h = bufferevent_rate_limit_group_new(base, cfg);
    CHECK(g != NULL);
    CHECK(h != NULL);
    struct bufferevent *p[3][2];
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(bufferevent_pair_new(base, 0, p[i]), 0);
        CHECK_EQ(bufferevent_add_to_rate_limit_group(p[i][1], g), 0);
    }
    CHECK_EQ(bufferevent_get_max_to_read(p[0][1]), 300);
    /* The middle one, the first and the last of the list leave in turn. */
    bufferevent_free(p[1][1]);
    CHECK_EQ(bufferevent_get_max_to_read(p[0][1]), 450);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(p[2][1], h), 0); /* moves: out of g */
    CHECK_EQ(bufferevent_get_max_to_read(p[0][1]), 900);
    CHECK_EQ(bufferevent_get_max_to_read(p[2][1]), 900);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(p[1][0], h), 0);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(p[0][0], h), 0);
    CHECK_EQ(bufferevent_get_max_to_read(p[2][1]), 300);
    CHECK_EQ(bufferevent_remove_from_rate_limit_group(p[2][1]), 0); /* the list's last */
    CHECK_EQ(bufferevent_get_max_to_read(p[0][0]), 450);
    CHECK_EQ(bufferevent_remove_from_rate_limit_group(p[0][0]), 0); /* the list's first */
    CHECK_EQ(bufferevent_get_max_to_read(p[1][0]), 900);
    /* A group freed with members lets them go unlimited. */
    CHECK_EQ(bufferevent_add_to_rate_limit_group(p[0][0], h), 0);
    CHECK_EQ(bufferevent_rate_limit_group_decrement_read(h, 900), 0);
    CHECK_EQ(bufferevent_get_max_to_read(p[0][0]), 0);
    bufferevent_rate_limit_group_free(h);
    CHECK_EQ(bufferevent_get_max_to_read(p[0][0]), 16384);
    CHECK_EQ(bufferevent_get_max_to_read(p[1][0]), 16384);
    CHECK_EQ(bufferevent_get_max_to_read(p[0][1]), 900);
    for (int i = 0; i < 3; i++) {
        bufferevent_free(p[i][0]);
        if (i != 1)
            bufferevent_free(p[i][1]);
    }
    bufferevent_rate_limit_group_free(g); /* empty by now */
    ev_token_bucket_cfg_free(cfg);
    evt_base_close(base);
}

TEST(rate_limit_group_new_configuration_caps_its_levels) {
    struct event_base *base = evt_base_open();
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(500, 500, 400, 400, &an_hour);
    struct ev_token_bucket_cfg *same = ev_token_bucket_cfg_new(50, 100, 40, 300, &an_hour);
    struct timeval day = {86400, 0};
    struct ev_token_bucket_cfg *other = ev_token_bucket_cfg_new(5, 20, 4, 10, &day);
    CHECK(cfg != NULL);
    CHECK(same != NULL);
    CHECK(other != NULL);
    struct bufferevent_rate_limit_group *g = bufferevent_rate_limit_group_new(base, cfg);
    CHECK(g != NULL);
    CHECK_EQ(bufferevent_rate_limit_group_set_cfg(g, same), 0);
    CHECK_EQ(bufferevent_rate_limit_group_get_read_limit(g), 100);
    CHECK_EQ(bufferevent_rate_limit_group_get_write_limit(g), 300);
    CHECK_EQ(bufferevent_rate_limit_group_decrement_write(g, 295), 0);
    CHECK_EQ(bufferevent_rate_limit_group_set_cfg(g, other), 0); /* a new tick */
    CHECK_EQ(bufferevent_rate_limit_group_get_read_limit(g), 20);
    CHECK_EQ(bufferevent_rate_limit_group_get_write_limit(g), 5);
    /* Its timer is the library's own: it does not keep the loop running. */
    CHECK_EQ(event_base_dispatch(base), 1);
    bufferevent_rate_limit_group_free(g);
    ev_token_bucket_cfg_free(cfg);
    ev_token_bucket_cfg_free(same);
    ev_token_bucket_cfg_free(other);
    evt_base_close(base);
}

TEST(rate_limit_group_tick_refills_it_and_wakes_the_members_it_stopped) {
    struct event_base *base = evt_base_open();
    struct timeval tick = {0, 20000};
    struct ev_token_bucket_cfg *cfg = ev_token_bucket_cfg_new(100, 100, 100, 100, &tick);
    CHECK(cfg != NULL);
    struct bufferevent_rate_limit_group *g = bufferevent_rate_limit_group_new(base, cfg);
    CHECK(g != NULL);
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(pair[1], g), 0);
    CHECK_EQ(bufferevent_rate_limit_group_decrement_read(g, 400), 0);
    uint64_t t0 = mono_ns();
    CHECK_EQ(bufferevent_write(pair[0], "woken by the tick", 17), 0);
    CHECK_EQ(in_len(pair[1]), 0);
    evt_turn_until(base, &reads[1], 1);
    CHECK_GE(ms_since(t0), 2 * 20); /* 300 below empty: three ticks at least */
    CHECK_EQ(strcmp(evt_buffer_text(bufferevent_get_input(pair[1])), "woken by the tick"), 0);
    ev_uint64_t r = 0;
    bufferevent_rate_limit_group_get_totals(g, &r, NULL);
    CHECK_EQ(r, 17);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    bufferevent_rate_limit_group_free(g);
    ev_token_bucket_cfg_free(cfg);
    evt_base_close(base);
}

/* ---- a new tick length ---- */

/* A bucket counts ticks of its configuration's length: a configuration with another length
 * starts the count again, so that the ticks of the old length are not taken as the new one's
 * (a longer tick would otherwise never come, a shorter one fill the bucket at once). */
TEST(rate_limit_a_longer_tick_set_while_suspended_still_refills) {
    struct event_base *base = evt_base_open();
    struct timeval short_tick = {0, 20000}, long_tick = {0, 50000};
    struct ev_token_bucket_cfg *slow = ev_token_bucket_cfg_new(1, 1, 1, 1, &short_tick);
    struct ev_token_bucket_cfg *fast = ev_token_bucket_cfg_new(100, 100, 100, 100, &long_tick);
    CHECK(slow != NULL);
    CHECK(fast != NULL);
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], slow), 0);
    CHECK_EQ(bufferevent_decrement_read_limit(pair[1], 150), 0); /* 150 ticks at 1 a tick */
    CHECK_EQ(bufferevent_write(pair[0], "tick", 4), 0);
    CHECK_EQ(in_len(pair[1]), 0);
    /* At 100 a tick, two ticks of 50 ms end the suspension. */
    CHECK_EQ(bufferevent_set_rate_limit(pair[1], fast), 0);
    CHECK_LE(bufferevent_get_read_limit(pair[1]), 0);
    evt_turn_until(base, &reads[1], 1);
    CHECK_EQ(in_len(pair[1]), 4);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    ev_token_bucket_cfg_free(slow);
    ev_token_bucket_cfg_free(fast);
    evt_base_close(base);
}

TEST(rate_limit_group_a_longer_tick_set_while_suspended_still_refills) {
    struct event_base *base = evt_base_open();
    struct timeval short_tick = {0, 20000}, long_tick = {0, 50000};
    struct ev_token_bucket_cfg *slow = ev_token_bucket_cfg_new(1, 1, 1, 1, &short_tick);
    struct ev_token_bucket_cfg *fast = ev_token_bucket_cfg_new(1000, 1000, 1000, 1000, &long_tick);
    CHECK(slow != NULL);
    CHECK(fast != NULL);
    struct bufferevent_rate_limit_group *g = bufferevent_rate_limit_group_new(base, slow);
    CHECK(g != NULL);
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(pair[1], g), 0);
    CHECK_EQ(bufferevent_rate_limit_group_decrement_read(g, 1000), 0); /* 1,000 ticks */
    CHECK_EQ(bufferevent_write(pair[0], "group tick", 10), 0);
    CHECK_EQ(in_len(pair[1]), 0);
    /* At 1,000 a tick the next tick of 50 ms ends the suspension. */
    CHECK_EQ(bufferevent_rate_limit_group_set_cfg(g, fast), 0);
    evt_turn_until(base, &reads[1], 1);
    CHECK_EQ(in_len(pair[1]), 10);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    bufferevent_rate_limit_group_free(g);
    ev_token_bucket_cfg_free(slow);
    ev_token_bucket_cfg_free(fast);
    evt_base_close(base);
}

/* ---- calls on a bufferevent freed from its own callback ---- */

static struct ev_token_bucket_cfg *freed_cfg;
static struct bufferevent_rate_limit_group *freed_group;
static int freed_checked;

static void free_then_limit(struct bufferevent *bev, void *arg)
{
    (void)arg;
    bufferevent_free(bev); /* the callback's reference keeps the memory until it returns */
    CHECK_EQ(bufferevent_set_rate_limit(bev, freed_cfg), -1);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(bev, freed_group), -1);
    CHECK_EQ(bufferevent_enable(bev, EV_READ), -1);
    CHECK(bufferevent_pair_get_partner(bev) == NULL);
    freed_checked++;
}

TEST(rate_limit_calls_on_a_bufferevent_freed_inside_its_callback_fail) {
    struct event_base *base = evt_base_open();
    freed_cfg = ev_token_bucket_cfg_new(10, 10, 10, 10, &an_hour);
    CHECK(freed_cfg != NULL);
    freed_group = bufferevent_rate_limit_group_new(base, freed_cfg);
    CHECK(freed_group != NULL);
    struct bufferevent *pair[2];
    open_pair(base, pair);
    CHECK_EQ(bufferevent_add_to_rate_limit_group(pair[1], freed_group), 0);
    bufferevent_setcb(pair[1], free_then_limit, NULL, NULL, NULL);
    CHECK_EQ(bufferevent_write(pair[0], "bye", 3), 0);
    run_deferred(base);
    CHECK_EQ(freed_checked, 1);
    CHECK(bufferevent_pair_get_partner(pair[0]) == NULL);
    bufferevent_free(pair[0]);
    bufferevent_rate_limit_group_free(freed_group); /* its member left when freed */
    ev_token_bucket_cfg_free(freed_cfg);
    evt_base_close(base);
}
