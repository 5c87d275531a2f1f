/* SPDX-License-Identifier: MIT */
/* The platform seam's threads, for the services that run work off the loop's thread (the
 * worker pool, src/work/): a mutex and a condition variable that need no init call (static
 * storage, zeroed or MUX__MUTEX_INIT / MUX__COND_INIT), and detached threads that start with
 * every signal blocked. POSIX threads here; Windows' slim reader-writer locks and condition
 * variables, which are static-initialisable too (thread_win.c). */
#ifndef IOMUX_PLATFORM_THREAD_H
#define IOMUX_PLATFORM_THREAD_H

#ifdef _WIN32
#include <windows.h>
typedef SRWLOCK mux__mutex_t;
typedef CONDITION_VARIABLE mux__cond_t;
#define MUX__MUTEX_INIT SRWLOCK_INIT
#define MUX__COND_INIT  CONDITION_VARIABLE_INIT
static inline void mux__mutex_lock(mux__mutex_t *m)
{
    AcquireSRWLockExclusive(m);
}
static inline void mux__mutex_unlock(mux__mutex_t *m)
{
    ReleaseSRWLockExclusive(m);
}
static inline void mux__cond_wait(mux__cond_t *c, mux__mutex_t *m)
{
    SleepConditionVariableSRW(c, m, INFINITE, 0);
}
static inline void mux__cond_signal(mux__cond_t *c)
{
    WakeConditionVariable(c);
}
#else
#include <pthread.h>
typedef pthread_mutex_t mux__mutex_t;
typedef pthread_cond_t mux__cond_t;
#define MUX__MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#define MUX__COND_INIT  PTHREAD_COND_INITIALIZER
static inline void mux__mutex_lock(mux__mutex_t *m)
{
    pthread_mutex_lock(m);
}
static inline void mux__mutex_unlock(mux__mutex_t *m)
{
    pthread_mutex_unlock(m);
}
static inline void mux__cond_wait(mux__cond_t *c, mux__mutex_t *m)
{
    pthread_cond_wait(c, m);
}
static inline void mux__cond_signal(mux__cond_t *c)
{
    pthread_cond_signal(c);
}
#endif

/* Starts a detached thread running fn(arg), with every signal blocked in it (signals go to
 * the loops' threads, and the rtsig backend's queued signals to the thread that waits for
 * them). 0 or -errno (-EAGAIN: the system's thread limit). */
int mux__thread_start(void (*fn)(void *), void *arg);

/* Registers fork handlers (pthread_atfork); 0 where processes do not fork (Windows). */
int mux__thread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));

#endif
