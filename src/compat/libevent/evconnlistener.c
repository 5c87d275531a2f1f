/* SPDX-License-Identifier: MIT */
/* libiomux-event: connection listeners. A persistent read event on the listening socket
 * accepts in batches; out of descriptors (EMFILE, ENFILE) or memory, the listener tells the
 * error callback and pauses for 100 ms, where libevent's would spin on the ready socket. */
#include "event_internal.h"

#include <event2/listener.h>

#include <errno.h>
#include <string.h>

#include "sys.h"

#define EVX_ACCEPT_BATCH 64

struct evconnlistener {
    struct event ev, pause;
    struct event_base *base;
    evconnlistener_cb cb;
    evconnlistener_errorcb errorcb;
    void *arg;
    unsigned flags;
    int enabled;
    int in_cb, freed; /* evconnlistener_free from its own callback frees it afterwards */
};

static evutil_socket_t accept_one(struct evconnlistener *lev, struct sockaddr_storage *ss,
                                  socklen_t *len)
{
    return evx_sys_accept(event_get_fd(&lev->ev), (struct sockaddr *)ss, len,
                          !(lev->flags & LEV_OPT_LEAVE_SOCKETS_BLOCKING),
                          (lev->flags & LEV_OPT_CLOSE_ON_EXEC) != 0);
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
    struct evconnlistener *lev = arg;
    (void)fd, (void)what;
    for (int i = 0; i < EVX_ACCEPT_BATCH && lev->enabled; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        evutil_socket_t s = accept_one(lev, &ss, &len);
        if (s >= 0) {
            if (!lev->cb) {
                evx_sys_close(s); /* no one to take it (libevent does the same) */
                continue;
            }
            lev->in_cb = 1;
            lev->cb(lev, s, (struct sockaddr *)&ss, (int)len, lev->arg);
            lev->in_cb = 0;
            if (lev->freed) {
                evx_free(lev);
                return;
            }
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
#ifndef EPROTO
#define EPROTO EIO /* Windows' C runtime has none; Winsock's accept never says it */
#endif
        if (errno == ECONNABORTED || errno == EINTR || errno == EPROTO)
            continue; /* about that one connection only */
        int err = errno;
        if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
            struct timeval tv = {0, 100 * 1000};
            event_del(&lev->ev);
            event_add(&lev->pause, &tv);
        }
        errno = err;
        if (lev->errorcb)
            lev->errorcb(lev, lev->arg);
        else
            evx_warn("evconnlistener: accept: %s", strerror(err));
        return;
    }
}

static void on_pause_end(evutil_socket_t fd, short what, void *arg)
{
    struct evconnlistener *lev = arg;
    (void)fd, (void)what;
    if (lev->enabled)
        event_add(&lev->ev, NULL);
}

EVX_EXPORT struct evconnlistener *evconnlistener_new(struct event_base *base, evconnlistener_cb cb,
                                                     void *ptr, unsigned flags, int backlog,
                                                     evutil_socket_t fd)
{
    if (!base || fd < 0)
        return NULL;
    if (backlog != 0) { /* 0: the socket is listening already; < 0: a default of 128 */
        if (evx_sys_listen(fd, backlog > 0 ? backlog : 128) < 0) {
            evx_warn("evconnlistener_new: listen: %s", strerror(errno));
            return NULL;
        }
    }
    struct evconnlistener *lev = evx_calloc(1, sizeof *lev);
    if (!lev)
        return NULL;
    lev->base = base;
    lev->cb = cb;
    lev->arg = ptr;
    lev->flags = flags;
    if (event_assign(&lev->ev, base, fd, EV_READ | EV_PERSIST, on_accept, lev) < 0 ||
        event_assign(&lev->pause, base, -1, 0, on_pause_end, lev) < 0) {
        evx_free(lev);
        return NULL;
    }
    if (!(flags & LEV_OPT_DISABLED) && evconnlistener_enable(lev) < 0) {
        evx_free(lev);
        return NULL;
    }
    return lev;
}

EVX_EXPORT struct evconnlistener *evconnlistener_new_bind(struct event_base *base,
                                                          evconnlistener_cb cb, void *ptr,
                                                          unsigned flags, int backlog,
                                                          const struct sockaddr *sa, int socklen)
{
    if (!base || !sa || socklen <= 0)
        return NULL;
    evutil_socket_t fd = evx_sys_stream_socket(sa->sa_family);
    if (fd < 0) {
        evx_warn("evconnlistener_new_bind: socket: %s", strerror(errno));
        return NULL;
    }
    int ok = evutil_make_socket_nonblocking(fd) == 0;
    if (ok && (flags & LEV_OPT_CLOSE_ON_EXEC))
        ok = evutil_make_socket_closeonexec(fd) == 0;
    if (ok && (flags & LEV_OPT_REUSEABLE))
        ok = evutil_make_listen_socket_reuseable(fd) == 0;
    if (ok && (flags & LEV_OPT_REUSEABLE_PORT))
        ok = evutil_make_listen_socket_reuseable_port(fd) == 0;
    if (ok && (flags & LEV_OPT_DEFERRED_ACCEPT))
        ok = evutil_make_tcp_listen_socket_deferred(fd) == 0;
    if (ok && (flags & LEV_OPT_BIND_IPV6ONLY))
        ok = evutil_make_listen_socket_ipv6only(fd) == 0;
    if (ok && evx_sys_bind(fd, sa, (socklen_t)socklen) < 0) {
        evx_warn("evconnlistener_new_bind: bind: %s", strerror(errno));
        ok = 0;
    }
    struct evconnlistener *lev =
        ok ? evconnlistener_new(base, cb, ptr, flags | LEV_OPT_CLOSE_ON_FREE,
                                backlog ? backlog : -1, fd)
           : NULL;
    if (!lev)
        evx_sys_close(fd);
    return lev;
}

EVX_EXPORT void evconnlistener_free(struct evconnlistener *lev)
{
    if (!lev)
        return;
    event_del(&lev->ev);
    event_del(&lev->pause);
    if (lev->flags & LEV_OPT_CLOSE_ON_FREE)
        evx_sys_close(event_get_fd(&lev->ev));
    lev->enabled = 0;
    if (lev->in_cb)
        lev->freed = 1; /* on_accept frees it once the callback has returned */
    else
        evx_free(lev);
}

EVX_EXPORT int evconnlistener_enable(struct evconnlistener *lev)
{
    if (!lev)
        return -1;
    lev->enabled = 1;
    if (event_pending(&lev->pause, EV_TIMEOUT, NULL))
        return 0; /* paused for want of descriptors: it resumes by itself */
    return event_add(&lev->ev, NULL);
}

EVX_EXPORT int evconnlistener_disable(struct evconnlistener *lev)
{
    if (!lev)
        return -1;
    lev->enabled = 0;
    event_del(&lev->pause);
    return event_del(&lev->ev);
}

EVX_EXPORT struct event_base *evconnlistener_get_base(struct evconnlistener *lev)
{
    return lev ? lev->base : NULL;
}

EVX_EXPORT evutil_socket_t evconnlistener_get_fd(struct evconnlistener *lev)
{
    return lev ? event_get_fd(&lev->ev) : -1;
}

EVX_EXPORT void evconnlistener_set_cb(struct evconnlistener *lev, evconnlistener_cb cb, void *arg)
{
    if (lev) {
        lev->cb = cb;
        lev->arg = arg;
    }
}

EVX_EXPORT void evconnlistener_set_error_cb(struct evconnlistener *lev,
                                            evconnlistener_errorcb errorcb)
{
    if (lev)
        lev->errorcb = errorcb;
}
