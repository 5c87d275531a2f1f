/* SPDX-License-Identifier: MIT */
/* The platform seam's threads on Windows (thread.h): CreateThread, closed at once (a
 * detached thread). Windows delivers no signals to threads, and has no fork. */
#include <errno.h>
#include <stdlib.h>

#include "platform/thread.h"
#include "platform/win.h"

struct mux__thread_start {
    void (*fn)(void *);
    void *arg;
};

static DWORD WINAPI mux__thread_main(LPVOID p)
{
    struct mux__thread_start s = *(struct mux__thread_start *)p;
    free(p);
    s.fn(s.arg);
    return 0;
}

int mux__thread_start(void (*fn)(void *), void *arg)
{
    struct mux__thread_start *s = malloc(sizeof *s);
    if (!s)
        return -ENOMEM;
    s->fn = fn;
    s->arg = arg;
    HANDLE h = CreateThread(NULL, 0, mux__thread_main, s, 0, NULL);
    if (!h) {
        int err = mux__win_errno(GetLastError());
        free(s);
        return err;
    }
    CloseHandle(h);
    return 0;
}

int mux__thread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    (void)prepare;
    (void)parent;
    (void)child;
    return 0;
}
