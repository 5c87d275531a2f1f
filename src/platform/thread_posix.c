/* SPDX-License-Identifier: MIT */
/* The platform seam's threads on POSIX systems (thread.h): detached POSIX threads. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include "platform/thread.h"

struct mux__thread_start {
    void (*fn)(void *);
    void *arg;
};

static void *mux__thread_main(void *p)
{
    struct mux__thread_start s = *(struct mux__thread_start *)p;
    free(p);
    s.fn(s.arg);
    return NULL;
}

int mux__thread_start(void (*fn)(void *), void *arg)
{
    struct mux__thread_start *s = malloc(sizeof *s);
    if (!s)
        return -ENOMEM;
    s->fn = fn;
    s->arg = arg;
    /* The new thread inherits the mask in force when it is created: all blocked, then the
     * caller's own mask back. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (err == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_t t;
        err = pthread_create(&t, &attr, mux__thread_main, s);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    if (err != 0)
        free(s);
    return -err;
}

int mux__thread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    return -pthread_atfork(prepare, parent, child);
}
