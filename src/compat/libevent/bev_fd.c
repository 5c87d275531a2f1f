/* SPDX-License-Identifier: MIT */
/* libiomux-event: the descriptor kind of bufferevent, for what is not a socket (a pipe, a
 * pty, a FIFO, a character device): the public ev_read and ev_write events watch the
 * descriptor, and read(2) / writev(2) move the bytes when they say so, as libevent's socket
 * bufferevent does on any descriptor (tmux puts one on every pane's pty).
 *
 * The events are persistent and added only while reading / writing is wanted, with the
 * bufferevent's timeouts; they keep the loop running as libevent's do. The kind holds no
 * reference of its own: its events are deleted when the bufferevent is freed. */
#include "bufferevent_internal.h"

#include <errno.h>

#include "sys.h"

static const struct timeval *timeout_of(const struct timeval *tv)
{
    return tv->tv_sec || tv->tv_usec ? tv : NULL;
}

static int want_write(struct evx_bev *b)
{
    return b->fd >= 0 && evx_bev_wants_write(b) && evx_bev_write_max(b) > 0;
}

static void fd_update(struct evx_bev *b)
{
    struct bufferevent *p = &b->pub;
    int rd = b->fd >= 0 && evx_bev_wants_read(b) && evx_bev_read_max(b) > 0;
    int rd_on = event_pending(&p->ev_read, EV_READ, NULL);
    if (rd && !rd_on)
        event_add(&p->ev_read, timeout_of(&p->timeout_read));
    else if (!rd && rd_on)
        event_del(&p->ev_read);
    int wr = want_write(b);
    int wr_on = event_pending(&p->ev_write, EV_WRITE, NULL);
    if (wr && !wr_on)
        event_add(&p->ev_write, timeout_of(&p->timeout_write));
    else if (!wr && wr_on)
        event_del(&p->ev_write);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct evx_bev *b = arg;
    struct bufferevent *p = &b->pub;
    short err = BEV_EVENT_READING;
    if (what & EV_TIMEOUT) {
        err |= BEV_EVENT_TIMEOUT;
        goto fail;
    }
    size_t max = evx_bev_read_max(b);
    if (!max) {
        fd_update(b);
        return;
    }
    size_t old = evbuffer_get_length(p->input);
    int n = evbuffer_read(p->input, fd, max > INT32_MAX ? INT32_MAX : (int)max);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        err |= n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR;
        goto fail;
    }
    evx_buffer_changed(p->input, old);
    evx_bev_ref(b);
    evx_bev_did_read(b, (size_t)n);
    if (!b->freed)
        fd_update(b);
    evx_bev_unref(b);
    return;
fail:
    /* As libevent: reading is disabled, then the program is told. */
    p->enabled &= (short)~EV_READ;
    fd_update(b);
    evx_bev_eventcb(b, err, 0, 0);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    struct evx_bev *b = arg;
    struct bufferevent *p = &b->pub;
    short err = BEV_EVENT_WRITING;
    if (what & EV_TIMEOUT) {
        err |= BEV_EVENT_TIMEOUT;
        goto fail;
    }
    size_t max = evx_bev_write_max(b);
    if (!max || !evbuffer_get_length(p->output)) {
        fd_update(b);
        return;
    }
    int n = evbuffer_write_atmost(p->output, fd, (ev_ssize_t)max);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        err |= n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR;
        goto fail;
    }
    evx_bev_ref(b);
    fd_update(b);
    evx_bev_did_write(b, (size_t)n);
    evx_bev_unref(b);
    return;
fail:
    p->enabled &= (short)~EV_WRITE;
    fd_update(b);
    evx_bev_eventcb(b, err, 0, 0);
}

static void fd_output_added(struct evx_bev *b)
{
    if (!b->freed && !event_pending(&b->pub.ev_write, EV_WRITE, NULL) && want_write(b))
        event_add(&b->pub.ev_write, timeout_of(&b->pub.timeout_write));
}

static int fd_flush(struct evx_bev *b, short iotype, enum bufferevent_flush_mode mode)
{
    (void)b, (void)iotype, (void)mode;
    return 0; /* as libevent's socket bufferevent: the events write what there is */
}

static void fd_release(struct evx_bev *b)
{
    event_del(&b->pub.ev_read);
    event_del(&b->pub.ev_write);
    if (b->fd >= 0 && (b->options & BEV_OPT_CLOSE_ON_FREE))
        evx_sys_close(b->fd);
    b->fd = -1;
}

/* New timeouts apply to the events added now: each one pending is added again. */
static int fd_set_timeouts(struct evx_bev *b)
{
    struct bufferevent *p = &b->pub;
    int r = 0;
    if (event_pending(&p->ev_read, EV_READ, NULL))
        r |= event_add(&p->ev_read, timeout_of(&p->timeout_read));
    if (event_pending(&p->ev_write, EV_WRITE, NULL))
        r |= event_add(&p->ev_write, timeout_of(&p->timeout_write));
    return r ? -1 : 0;
}

static evutil_socket_t fd_getfd(struct evx_bev *b)
{
    return b->fd;
}

const struct bufferevent_ops evx_bev_fd_ops = {
    .type = "descriptor",
    .update = fd_update,
    .output_added = fd_output_added,
    .flush = fd_flush,
    .release = fd_release,
    .set_timeouts = fd_set_timeouts,
    .getfd = fd_getfd,
};

int evx_bev_fd_set(struct evx_bev *b, evutil_socket_t fd)
{
    struct bufferevent *p = &b->pub;
    int pri = p->ev_read.ev_pri;
    event_del(&p->ev_read);
    event_del(&p->ev_write);
    if (event_assign(&p->ev_read, p->ev_base, fd, EV_READ | EV_PERSIST, on_readable, b) < 0 ||
        event_assign(&p->ev_write, p->ev_base, fd, EV_WRITE | EV_PERSIST, on_writable, b) < 0)
        return -EINVAL;
    event_priority_set(&p->ev_read, pri);
    event_priority_set(&p->ev_write, pri);
    b->fd = fd;
    fd_update(b);
    return 0;
}
