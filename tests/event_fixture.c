/* SPDX-License-Identifier: MIT */
#include "event_fixture.h"

#include <event2/buffer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int evt_warnings;
char evt_last_warning[512];

static void record_log(int severity, const char *msg)
{
    if (severity >= EVENT_LOG_WARN) {
        evt_warnings++;
        snprintf(evt_last_warning, sizeof evt_last_warning, "%s", msg);
    }
}

void evt_log_capture(void)
{
    event_set_log_callback(record_log);
    evt_warnings = 0;
    evt_last_warning[0] = '\0';
}

void evt_log_release(void)
{
    event_set_log_callback(NULL);
}

struct event_base *evt_base_open(void)
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
    evt_log_capture();
    return base;
}

void evt_base_close(struct event_base *base)
{
    event_base_free(base);
    evt_log_release();
}

void evt_turn_until(struct event_base *base, const int *count, int want)
{
    for (int i = 0; i < 1500 && *count < want; i++) {
        struct timeval step = {0, 10000};
        CHECK_EQ(event_base_loopexit(base, &step), 0);
        CHECK_GE(event_base_dispatch(base), 0);
    }
    CHECK_GE(*count, want);
}

void evt_count_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    (*(int *)arg)++;
}

const char *evt_buffer_text(struct evbuffer *b)
{
    static char out[4096];
    size_t n = evbuffer_get_length(b);
    CHECK_LT(n, sizeof out);
    CHECK_EQ(evbuffer_copyout(b, out, n), (long long)n);
    out[n] = '\0';
    return out;
}
