/* SPDX-License-Identifier: MIT */
/* A stream connect by host name, with Happy Eyeballs (RFC 8305): mux_dial.
 *
 * The name goes to the resolver (resolve.c, on the pool); its addresses are ordered so that
 * the families alternate, starting with the resolver's first (RFC 8305, 4: the "First Address
 * Family Count" is 1), and are tried as attempts, each an internal stream that connects. A
 * new attempt starts when the last one failed, or when it has not connected within the
 * attempt delay, while those before go on (RFC 8305, 5): the first to connect wins. Its
 * socket moves to the caller's stream (mux__stream_move: no new socket, no new
 * registration with the backend), and every other attempt is closed.
 *
 * Where libuv leaves this to the program and Asio's async_connect tries one address after
 * the other, a host whose first address silently drops packets costs one attempt delay here,
 * not a TCP connect timeout. Not done: RFC 8305's separate AAAA and A queries (section 3),
 * since the system's getaddrinfo asks both and answers once.
 *
 * Everything the dialer decides, it decides in its task, after the callback that told it
 * something (the lookup's, an attempt's connect or close, a timer's) has returned: the
 * streams it moves or closes are then never inside their own callbacks. The job is freed
 * once the caller has been called back and every attempt's close has come.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <netdb.h>
#include <netinet/in.h>
#endif

#include "internal.h"
#include "stream/stream.h"
#include "work/work.h"

#define MUX__DIAL_MAX           32 /* addresses tried at most */
#define MUX__DIAL_DELAY_DEFAULT (250ull * 1000000)
#define MUX__DIAL_DELAY_MIN     (10ull * 1000000)

enum { A_IDLE, A_CONNECTING, A_FAILED, A_CLOSING, A_CLOSED, A_WON };

struct mux__attempt {
    mux_stream_t s;
    struct sockaddr_storage addr;
    socklen_t len;
    int state;  /* A_* */
    int status; /* its connect's */
    struct mux__dial *job;
};

struct mux__dial {
    struct mux__loop *loop;
    mux_dial_t *d; /* the caller's, until called back */
    int outcome;   /* 1 once the outcome is known: `status` then */
    int status;    /* the outcome */
    int delivered; /* the caller was called back */
    int resolving; /* the lookup's callback has yet to come */
    int kick;      /* start the next attempt */
    int winner;    /* the attempt that connected, or -1 */
    int last_err;  /* of the last attempt that failed */
    int family;    /* the family asked for, or AF_UNSPEC */
    uint64_t delay_ns;
    unsigned n, next; /* attempts, and the next to start */
    unsigned live;    /* attempts whose stream is open (connecting, or closing) */
    mux_getaddrinfo_t gai;
    mux_timer_t delay, deadline;
    struct mux__task task;
    struct mux__attempt att[MUX__DIAL_MAX];
};

static void mux__dial_kick(struct mux__dial *job)
{
    mux__task_queue(job->loop, &job->task);
}

/* The outcome, if none is known yet. */
static void mux__dial_settle(struct mux__dial *job, int status)
{
    if (!job->outcome) {
        job->outcome = 1;
        job->status = status;
    }
    mux__dial_kick(job);
}

/* ---- the attempts' callbacks ------------------------------------------------------- */

static void mux__attempt_closed(mux_stream_t *s)
{
    struct mux__attempt *a = mux__container_of(s, struct mux__attempt, s);
    a->state = A_CLOSED;
    a->job->live--;
    mux__dial_kick(a->job);
}

static void mux__attempt_connected(mux_stream_t *s, int status)
{
    struct mux__attempt *a = mux__container_of(s, struct mux__attempt, s);
    struct mux__dial *job = a->job;
    if (a->state != A_CONNECTING)
        return; /* closing: its -ECANCELED */
    a->status = status;
    if (status == 0 && job->winner < 0 && !job->outcome) {
        job->winner = (int)(a - job->att);
        a->state = A_WON;
        mux__dial_settle(job, 0);
        return;
    }
    a->state = A_FAILED; /* or connected second: closed by the task */
    if (status != 0)
        job->last_err = status;
    job->kick = 1; /* the next address at once (RFC 8305, 5) */
    mux__dial_kick(job);
}

static void mux__dial_delay_cb(mux_loop_t *pub, mux_timer_t *t)
{
    struct mux__dial *job = mux__container_of(t, struct mux__dial, delay);
    (void)pub;
    job->kick = 1;
    mux__dial_kick(job);
}

static void mux__dial_deadline_cb(mux_loop_t *pub, mux_timer_t *t)
{
    (void)pub;
    mux__dial_settle(mux__container_of(t, struct mux__dial, deadline), -ETIMEDOUT);
}

/* ---- the addresses ----------------------------------------------------------------- */

/* Takes the lookup's addresses in RFC 8305's order: the families alternate, starting with
 * the first address's. */
static int mux__dial_takes(const struct mux__dial *job, const struct addrinfo *ai)
{
    return (ai->ai_family == AF_INET || ai->ai_family == AF_INET6) && ai->ai_addr &&
           (job->family == AF_UNSPEC || ai->ai_family == job->family);
}

static void mux__dial_order(struct mux__dial *job, const struct addrinfo *res)
{
    const struct addrinfo *first = NULL, *second = NULL;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
        if (mux__dial_takes(job, ai)) {
            first = ai;
            break;
        }
    if (!first)
        return;
    int fam1 = first->ai_family;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
        if (mux__dial_takes(job, ai) && ai->ai_family != fam1) {
            second = ai;
            break;
        }
    const struct addrinfo *p[2] = {first, second};
    for (int turn = 0; job->n < MUX__DIAL_MAX && (p[0] || p[1]); turn ^= 1) {
        const struct addrinfo *ai = p[turn];
        if (!ai)
            continue;
        if (ai->ai_addrlen <= sizeof job->att[0].addr) {
            struct mux__attempt *a = &job->att[job->n++];
            memcpy(&a->addr, ai->ai_addr, ai->ai_addrlen);
            a->len = (socklen_t)ai->ai_addrlen;
        }
        int fam = ai->ai_family; /* on to this family's next address */
        for (ai = ai->ai_next; ai && (ai->ai_family != fam || !mux__dial_takes(job, ai));
             ai = ai->ai_next)
            ;
        p[turn] = ai;
    }
}

static void mux__dial_resolved(mux_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct mux__dial *job = mux__container_of(req, struct mux__dial, gai);
    job->resolving = 0;
    if (status == 0) {
        mux__dial_order(job, res);
        mux_freeaddrinfo(res);
        if (job->n == 0)
            status = MUX_EAI_NODATA; /* neither IPv4 nor IPv6 */
    }
    if (status != 0)
        mux__dial_settle(job, status);
    job->kick = 1;
    mux__dial_kick(job);
}

/* ---- the task ---------------------------------------------------------------------- */

/* Starts attempts until one is connecting or none is left. */
static void mux__dial_start_next(struct mux__dial *job)
{
    while (job->next < job->n) {
        struct mux__attempt *a = &job->att[job->next++];
        a->job = job;
        int err = mux_stream_connect(job->loop->pub, &a->s, (struct sockaddr *)&a->addr, a->len,
                                     mux__attempt_connected);
        if (err != 0) { /* no socket of this family here (-EAFNOSUPPORT), no descriptor... */
            a->state = A_CLOSED;
            job->last_err = err;
            continue;
        }
        mux__stream_hide(&a->s);
        a->state = A_CONNECTING;
        job->live++;
        if (mux__timer_set(job->loop, &job->delay, mux__now(job->loop) + job->delay_ns) != 0)
            job->kick = 1; /* no timer: the next one after this one fails, then */
        return;
    }
}

static int mux__dial_connecting(const struct mux__dial *job)
{
    for (unsigned i = 0; i < job->next; i++)
        if (job->att[i].state == A_CONNECTING)
            return 1;
    return 0;
}

/* Closes every attempt that is open and not the winner. */
static void mux__dial_close_others(struct mux__dial *job)
{
    for (unsigned i = 0; i < job->next; i++) {
        struct mux__attempt *a = &job->att[i];
        if (a->state == A_CONNECTING || a->state == A_FAILED) {
            a->state = A_CLOSING;
            mux_stream_close(&a->s, mux__attempt_closed);
        }
    }
}

/* The caller's callback, once. */
static void mux__dial_deliver(struct mux__dial *job)
{
    mux_dial_t *d = job->d;
    job->delivered = 1;
    job->d = NULL;
    mux_timer_stop(job->loop->pub, &job->delay);
    mux_timer_stop(job->loop->pub, &job->deadline);
    d->job_ = NULL;
    d->cb_(d, job->status);
}

static void mux__dial_run(struct mux__task *t)
{
    struct mux__dial *job = mux__container_of(t, struct mux__dial, task);
    if (!job->outcome && !job->resolving) {
        if (job->kick) {
            job->kick = 0;
            mux__dial_start_next(job);
        }
        if (!mux__dial_connecting(job) && job->next == job->n)
            mux__dial_settle(job, job->last_err ? job->last_err : -ECONNREFUSED);
    }
    if (job->outcome && !job->delivered) {
        if (job->winner >= 0 && job->status != 0) /* cancelled after one connected */
            job->att[job->winner].state = A_FAILED;
        if (job->status == 0) {
            struct mux__attempt *w = &job->att[job->winner];
            int err = mux__stream_move(&w->s, job->d->stream_);
            if (err != 0) { /* no room in the loop's tables: the winner is closed too */
                job->status = err;
                w->state = A_FAILED;
            } else {
                w->state = A_CLOSED;
                job->live--;
            }
        }
        mux__dial_close_others(job);
        if (job->resolving)
            mux_getaddrinfo_cancel(&job->gai);
        mux__dial_deliver(job);
    } else if (job->outcome) {
        mux__dial_close_others(job); /* an attempt that connected after the winner */
    }
    if (job->delivered && job->live == 0 && !job->resolving) {
        mux__unqueue(job->loop, &job->task.h_);
        job->loop->active--;
        free(job);
    }
}

/* ---- the caller's calls ------------------------------------------------------------ */

/* A job for `d` and `s`, its timers set up and its deadline started. NULL: -EINVAL (bad
 * options) or -ENOMEM, in *err. */
static struct mux__dial *mux__dial_new(struct mux__loop *loop, const mux_dial_options_t *opts,
                                       int *err)
{
    mux_dial_options_t o = {0, 0, 0};
    if (opts)
        o = *opts;
    if ((o.family != AF_UNSPEC && o.family != AF_INET && o.family != AF_INET6) ||
        (o.attempt_delay_ns && o.attempt_delay_ns < MUX__DIAL_DELAY_MIN)) {
        *err = -EINVAL;
        return NULL;
    }
    struct mux__dial *job = calloc(1, sizeof *job);
    if (!job) {
        *err = -ENOMEM;
        return NULL;
    }
    job->loop = loop;
    job->winner = -1;
    job->family = o.family;
    job->delay_ns = o.attempt_delay_ns ? o.attempt_delay_ns : MUX__DIAL_DELAY_DEFAULT;
    mux__task_init(&job->task, mux__dial_run);
    mux_timer_init(&job->delay, mux__dial_delay_cb);
    job->delay.h_.flags |= MUX__W_NOREF; /* the dial counts, once */
    mux_timer_init(&job->deadline, mux__dial_deadline_cb);
    job->deadline.h_.flags |= MUX__W_NOREF;
    *err = mux__reserve(loop);
    if (*err == 0 && o.timeout_ns)
        *err = mux__timer_set(loop, &job->deadline, mux__now(loop) + o.timeout_ns);
    if (*err != 0) {
        free(job);
        return NULL;
    }
    return job;
}

/* The job goes: `d` is pending until its callback. */
static void mux__dial_begin(struct mux__dial *job, mux_dial_t *d, mux_stream_t *s, mux_dial_cb cb)
{
    job->d = d;
    d->job_ = job;
    d->stream_ = s;
    d->cb_ = cb;
    job->loop->active++; /* the dial, until its attempts are closed (after its callback) */
}

MUX_EXPORT int mux_dial(mux_loop_t *pub, mux_dial_t *d, mux_stream_t *s, const char *host,
                        const char *service, const mux_dial_options_t *opts, mux_dial_cb cb)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !d || !s || !host || !service || !cb)
        return -EINVAL;
    int err;
    struct mux__dial *job = mux__dial_new(loop, opts, &err);
    if (!job)
        return err;
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = job->family;
    hints.ai_socktype = SOCK_STREAM;
    err = mux_getaddrinfo(pub, &job->gai, mux__dial_resolved, host, service, &hints);
    if (err != 0) {
        mux_timer_stop(pub, &job->deadline);
        free(job);
        return err;
    }
    job->resolving = 1;
    mux__dial_begin(job, d, s, cb);
    return 0;
}

MUX_EXPORT int mux_dial_addrinfo(mux_loop_t *pub, mux_dial_t *d, mux_stream_t *s,
                                 const struct addrinfo *addrs, const mux_dial_options_t *opts,
                                 mux_dial_cb cb)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !d || !s || !addrs || !cb)
        return -EINVAL;
    int err;
    struct mux__dial *job = mux__dial_new(loop, opts, &err);
    if (!job)
        return err;
    mux__dial_order(job, addrs);
    if (job->n == 0) { /* no IPv4 or IPv6 address of the family asked */
        mux_timer_stop(pub, &job->deadline);
        free(job);
        return -EINVAL;
    }
    mux__dial_begin(job, d, s, cb);
    job->kick = 1; /* the first attempt starts from the loop */
    mux__dial_kick(job);
    return 0;
}

MUX_EXPORT int mux_dial_cancel(mux_dial_t *d)
{
    if (!d || !d->job_)
        return -EINVAL;
    struct mux__dial *job = d->job_;
    job->outcome = 1; /* whatever was known, the caller gives up */
    job->status = -ECANCELED;
    mux__dial_kick(job);
    return 0;
}
