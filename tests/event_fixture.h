/* SPDX-License-Identifier: MIT */
/* What the libiomux-event cases share (test_event*.c): a base on the backend the harness runs
 * the case on, and the warnings libiomux-event logged meanwhile. */
#ifndef IOMUX_TEST_EVENT_FIXTURE_H
#define IOMUX_TEST_EVENT_FIXTURE_H

#include <event2/event.h>

/* The warnings (EVENT_LOG_WARN and above) since the last evt_base_open / evt_log_capture,
 * and the last one's text. */
extern int evt_warnings;
extern char evt_last_warning[512];

/* A base on the backend of IOMUX_BACKEND, every other method avoided, with the warnings
 * captured (evt_warnings counts from 0). */
struct event_base *evt_base_open(void);
/* Frees the base; warnings go back to stderr. */
void evt_base_close(struct event_base *base);
/* Captures the warnings without a base (evt_warnings counts from 0); NULL callback after. */
void evt_log_capture(void);
void evt_log_release(void);
/* Turns the loop, 10 ms at a time, until *count reaches `want`; fails after 1,500 turns
 * (15 s at the least: a watchdog, not a timing). */
void evt_turn_until(struct event_base *base, const int *count, int want);
/* An event callback that counts its calls in *(int *)arg. */
void evt_count_cb(evutil_socket_t fd, short what, void *arg);
/* The buffer's bytes as a string (copied out, not drained; static storage, under 4 KB). */
struct evbuffer;
const char *evt_buffer_text(struct evbuffer *b);

#endif
