/* SPDX-License-Identifier: MIT */
/* Name resolution on the worker pool: mux_getaddrinfo and mux_getnameinfo.
 *
 * The system's resolver blocks (it reads files, asks a server and waits), so each lookup is a
 * request of the pool. What a pool thread works on is the library's own memory, a job apart
 * from the caller's request: the copies of the name, the service, the hints or the address,
 * and the answer. That is what makes cancellation complete. A lookup still queued is taken
 * off the queue; one that runs is abandoned: its thread finishes the system's call (which
 * nothing can interrupt) and frees the job and its answer, while the caller's request is
 * called back at once, from the loop, with -ECANCELED, and is the caller's again. So a
 * program whose resolver hangs (no server answers) can give up on a lookup, and close its
 * loop, without waiting for the resolver's own timeouts.
 *
 * A lookup answered without the pool (a name under ".invalid", which RFC 6761 asks resolver
 * libraries to refuse at once), or cancelled while it ran, is called back through the
 * request's task, counted in the loop's active handles until it runs.
 *
 * The system's EAI_* codes become MUX_EAI_* (negative, outside errno's range), EAI_MEMORY
 * -ENOMEM and EAI_SYSTEM the thread's negative errno.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <netdb.h>
#include <sys/socket.h>
#endif

#include "internal.h"
#include "work/work.h"

#define MUX__NAME_MAX 1024 /* the longest name or service taken (NI_MAXHOST - 1) */

enum { L_ADDRINFO, L_NAMEINFO };

struct mux__lookup {
    mux_work_t work;
    int kind;      /* L_* */
    void *req;     /* the caller's request */
    int cancelled; /* the request was cancelled after its thread finished */
    int status;    /* the system's answer, as 0 or a negative code */
    union {
        struct {
            char *node, *service; /* into `names` (NULL: none) */
            struct addrinfo hints;
            struct addrinfo *res;
        } ai;
        struct {
            struct sockaddr_storage addr;
            socklen_t len;
            int flags;
            char host[MUX__NAME_MAX + 1];
            char serv[64];
        } ni;
    } u;
    char names[]; /* getaddrinfo: the node and service, each NUL-terminated */
};

/* The system's code as iomux's. `err` is errno as the thread saw it (EAI_SYSTEM). */
static int mux__eai_code(int code, int err)
{
    if (code == 0)
        return 0;
#ifdef EAI_SYSTEM
    if (code == EAI_SYSTEM)
        return err > 0 ? -err : -EIO;
#else
    (void)err; /* Windows: the codes are Winsock's errors, EAI_SYSTEM has no place there */
#endif
    if (code == EAI_MEMORY)
        return -ENOMEM;
    if (code == EAI_AGAIN)
        return MUX_EAI_AGAIN;
    if (code == EAI_BADFLAGS)
        return MUX_EAI_BADFLAGS;
    if (code == EAI_FAIL)
        return MUX_EAI_FAIL;
    if (code == EAI_FAMILY)
        return MUX_EAI_FAMILY;
    if (code == EAI_NONAME)
        return MUX_EAI_NONAME;
#ifdef EAI_NODATA
    if (code == EAI_NODATA)
        return MUX_EAI_NODATA;
#endif
#ifdef EAI_ADDRFAMILY
    if (code == EAI_ADDRFAMILY)
        return MUX_EAI_NODATA; /* the host has no address of the family asked */
#endif
    if (code == EAI_SERVICE)
        return MUX_EAI_SERVICE;
    if (code == EAI_SOCKTYPE)
        return MUX_EAI_SOCKTYPE;
#ifdef EAI_OVERFLOW
    if (code == EAI_OVERFLOW)
        return MUX_EAI_OVERFLOW;
#endif
    return MUX_EAI_FAIL;
}

/* Whether `name` is "invalid" or under it (RFC 6761, 6.4), with or without the final dot. */
static int mux__name_is_invalid(const char *name)
{
    static const char tld[] = "invalid";
    size_t n = strlen(name), k = sizeof tld - 1;
    if (n > 0 && name[n - 1] == '.')
        n--;
    if (n < k || (n > k && name[n - k - 1] != '.'))
        return 0;
    for (size_t i = 0; i < k; i++) {
        char c = name[n - k + i];
        if ((c | 0x20) != tld[i])
            return 0;
    }
    return 1;
}

/* ---- on a pool thread -------------------------------------------------------------- */

static void mux__lookup_work(mux_work_t *w)
{
    struct mux__lookup *job = mux__container_of(w, struct mux__lookup, work);
    int code;
    errno = 0;
    if (job->kind == L_ADDRINFO) {
        code = getaddrinfo(job->u.ai.node, job->u.ai.service, &job->u.ai.hints, &job->u.ai.res);
        if (code != 0)
            job->u.ai.res = NULL;
    } else {
        code = getnameinfo((const struct sockaddr *)&job->u.ni.addr, job->u.ni.len, job->u.ni.host,
                           sizeof job->u.ni.host, job->u.ni.serv, sizeof job->u.ni.serv,
                           job->u.ni.flags);
    }
    job->status = mux__eai_code(code, errno);
}

static void mux__lookup_free(struct mux__lookup *job)
{
    if (job->kind == L_ADDRINFO && job->u.ai.res)
        freeaddrinfo(job->u.ai.res);
    free(job);
}

/* A lookup abandoned while it ran: nobody waits for its answer. */
static void mux__lookup_reap(mux_work_t *w)
{
    mux__lookup_free(mux__container_of(w, struct mux__lookup, work));
}

/* ---- on the loop ------------------------------------------------------------------- */

/* Calls the request back with `status` (and, for a success, the job's answer), then frees
 * the job (may be NULL). */
static void mux__lookup_deliver(int kind, void *req, struct mux__lookup *job, int status)
{
    if (kind == L_ADDRINFO) {
        mux_getaddrinfo_t *r = req;
        struct addrinfo *res = NULL;
        if (job && status == 0) {
            res = job->u.ai.res;
            job->u.ai.res = NULL;
        }
        r->job_ = NULL;
        r->pending_ = 0;
        if (job)
            mux__lookup_free(job);
        r->cb_(r, status, res);
        return;
    }
    mux_getnameinfo_t *r = req;
    r->job_ = NULL;
    r->pending_ = 0;
    if (status != 0 || !job) {
        if (job)
            mux__lookup_free(job);
        r->cb_(r, status, NULL, NULL);
        return;
    }
    r->cb_(r, 0, job->u.ni.host, job->u.ni.serv); /* the names are the job's: freed after */
    mux__lookup_free(job);
}

static void mux__lookup_done(mux_work_t *w, int status)
{
    struct mux__lookup *job = mux__container_of(w, struct mux__lookup, work);
    if (status == 0)
        status = job->cancelled ? -ECANCELED : job->status;
    mux__lookup_deliver(job->kind, job->req, job, status);
}

/* The task of a request answered without the pool, or abandoned. */
static void mux__addrinfo_task(struct mux__task *t)
{
    mux_getaddrinfo_t *r = mux__container_of(t, mux_getaddrinfo_t, task_);
    r->loop_->active--;
    mux__lookup_deliver(L_ADDRINFO, r, NULL, r->status_);
}

static void mux__nameinfo_task(struct mux__task *t)
{
    mux_getnameinfo_t *r = mux__container_of(t, mux_getnameinfo_t, task_);
    r->loop_->active--;
    mux__lookup_deliver(L_NAMEINFO, r, NULL, r->status_);
}

/* Calls the request back from the loop with `status`, without the pool. */
static void mux__lookup_answer(struct mux__loop *loop, struct mux__task *task, int *slot,
                               int status)
{
    *slot = status;
    loop->active++;
    mux__task_queue(loop, task);
}

/* Cancels a pending lookup whose request has these fields. */
static int mux__lookup_cancel(struct mux__lookup **jobp, struct mux__loop *loop,
                              struct mux__task *task, int *status, int pending)
{
    struct mux__lookup *job = *jobp;
    if (!pending)
        return -EINVAL;
    if (!job) { /* answered without the pool: the task delivers -ECANCELED instead */
        *status = -ECANCELED;
        return 0;
    }
    int r = mux__work_abandon(&job->work, mux__lookup_reap);
    if (r == -EBUSY) /* it has run: its callback frees the answer */
        job->cancelled = 1;
    else if (r == 1) { /* abandoned while it runs: its thread frees the job */
        *jobp = NULL;
        mux__lookup_answer(loop, task, status, -ECANCELED);
    }
    return r == -EINVAL ? -EINVAL : 0; /* queued: its callback comes with -ECANCELED */
}

static int mux__lookup_queue(struct mux__loop *loop, struct mux__lookup *job)
{
    int err = mux_work_queue(loop->pub, &job->work, mux__lookup_work, mux__lookup_done);
    if (err != 0)
        free(job);
    return err;
}

MUX_EXPORT int mux_getaddrinfo(mux_loop_t *pub, mux_getaddrinfo_t *req, mux_getaddrinfo_cb cb,
                               const char *node, const char *service, const struct addrinfo *hints)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !req || !cb || (!node && !service) || (node && strlen(node) > MUX__NAME_MAX) ||
        (service && strlen(service) > MUX__NAME_MAX))
        return -EINVAL;
    req->cb_ = cb;
    req->loop_ = loop;
    req->job_ = NULL;
    mux__task_init(&req->task_, mux__addrinfo_task);
    if (node && mux__name_is_invalid(node)) {
        req->pending_ = 1;
        mux__lookup_answer(loop, &req->task_, &req->status_, MUX_EAI_NONAME);
        return 0;
    }
    size_t nlen = node ? strlen(node) + 1 : 0, slen = service ? strlen(service) + 1 : 0;
    struct mux__lookup *job = calloc(1, sizeof *job + nlen + slen);
    if (!job)
        return -ENOMEM;
    job->kind = L_ADDRINFO;
    job->req = req;
    if (node)
        job->u.ai.node = memcpy(job->names, node, nlen);
    if (service)
        job->u.ai.service = memcpy(job->names + nlen, service, slen);
    if (hints) {
        job->u.ai.hints.ai_flags = hints->ai_flags;
        job->u.ai.hints.ai_family = hints->ai_family;
        job->u.ai.hints.ai_socktype = hints->ai_socktype;
        job->u.ai.hints.ai_protocol = hints->ai_protocol;
    }
    int err = mux__lookup_queue(loop, job);
    if (err != 0)
        return err;
    req->job_ = job;
    req->pending_ = 1;
    return 0;
}

MUX_EXPORT int mux_getaddrinfo_cancel(mux_getaddrinfo_t *req)
{
    if (!req)
        return -EINVAL;
    return mux__lookup_cancel(&req->job_, req->loop_, &req->task_, &req->status_, req->pending_);
}

MUX_EXPORT void mux_freeaddrinfo(struct addrinfo *res)
{
    if (res)
        freeaddrinfo(res);
}

MUX_EXPORT int mux_getnameinfo(mux_loop_t *pub, mux_getnameinfo_t *req, mux_getnameinfo_cb cb,
                               const struct sockaddr *addr, socklen_t addrlen, int flags)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !req || !cb || !addr || addrlen < (socklen_t)sizeof addr->sa_family ||
        addrlen > (socklen_t)sizeof(struct sockaddr_storage))
        return -EINVAL;
    struct mux__lookup *job = calloc(1, sizeof *job);
    if (!job)
        return -ENOMEM;
    job->kind = L_NAMEINFO;
    job->req = req;
    memcpy(&job->u.ni.addr, addr, addrlen);
    job->u.ni.len = addrlen;
    job->u.ni.flags = flags;
    req->cb_ = cb;
    req->loop_ = loop;
    mux__task_init(&req->task_, mux__nameinfo_task);
    int err = mux__lookup_queue(loop, job);
    if (err != 0)
        return err;
    req->job_ = job;
    req->pending_ = 1;
    return 0;
}

MUX_EXPORT int mux_getnameinfo_cancel(mux_getnameinfo_t *req)
{
    if (!req)
        return -EINVAL;
    return mux__lookup_cancel(&req->job_, req->loop_, &req->task_, &req->status_, req->pending_);
}
