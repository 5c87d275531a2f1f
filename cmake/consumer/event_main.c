/* SPDX-License-Identifier: MIT */
/* A libevent 2.1 program, unchanged, built against an installed libiomux-event. */
#include <event2/event.h>
#include <stdio.h>
#include <string.h>

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    *(short *)arg = what;
}

int main(void)
{
    short got = 0;
    struct event_base *base = event_base_new();
    struct event *ev = base ? evtimer_new(base, on_timeout, &got) : NULL;
    struct timeval tv = {0, 1000};
    if (!ev || evtimer_add(ev, &tv) != 0 || event_base_dispatch(base) != 1 || got != EV_TIMEOUT)
        return 1;
    /* The symbols must be libiomux-event's, not a system libevent's that slipped in. */
    static const char *const ours[] = {"epoll", "uring", "kqueue", "poll", "select"};
    int known = 0;
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
        known |= strcmp(event_base_get_method(base), ours[i]) == 0;
    if (!known)
        return 1;
    printf("libevent %s API on iomux, %s\n", event_get_version(), event_base_get_method(base));
    event_free(ev);
    event_base_free(base);
    return 0;
}
