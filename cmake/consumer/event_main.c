/* SPDX-License-Identifier: MIT */
/* A libevent 2.1 program, unchanged, built against an installed libiomux-event. */
#include <event2/event.h>
#include <event2/event_compat.h>
#include <event2/event_struct.h>
#include <event2/util.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    *(short *)arg = what;
}

/* A struct event inside the program's own struct, set up the 1.x way (event_set, then
 * event_base_set), as memcached does: it works only when the program was compiled with the
 * emulation's struct event, not another libevent's. */
struct conn {
    int before;
    struct event ev;
    int after;
};

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    char byte;
    if ((what & EV_READ) && read(fd, &byte, 1) == 1 && byte == 'x')
        c->after = 1;
}

static int embedded(struct event_base *base)
{
    evutil_socket_t sv[2];
    if (evutil_socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 0;
    struct conn c = {.before = 7, .after = 0};
    event_set(&c.ev, sv[0], EV_READ, on_readable, &c);
    int ok = event_base_set(base, &c.ev) == 0 && event_add(&c.ev, NULL) == 0 &&
             write(sv[1], "x", 1) == 1 && event_base_dispatch(base) == 1 && c.after == 1 &&
             c.before == 7;
    evutil_closesocket(sv[0]);
    evutil_closesocket(sv[1]);
    return ok;
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
    if (!known || !embedded(base))
        return 1;
    printf("libevent %s API on iomux, %s\n", event_get_version(), event_base_get_method(base));
    event_free(ev);
    event_base_free(base);
    return 0;
}
