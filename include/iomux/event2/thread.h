/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: <event2/thread.h>. A base belongs to the thread that runs
 * it, as an iomux loop does; these calls exist so that programs which enable libevent's
 * locking build and run unchanged, and they change nothing. docs/libevent.md has the rule. */
#ifndef IOMUX_EVENT2_THREAD_H_INCLUDED_
#define IOMUX_EVENT2_THREAD_H_INCLUDED_

#include <event2/visibility.h>

#ifdef __cplusplus
extern "C" {
#endif

struct event_base;

#define EVTHREAD_USE_PTHREADS_IMPLEMENTED 1
/* Returns 0. */
EVENT2_EXPORT_SYMBOL int evthread_use_pthreads(void);
/* libevent's check of its own locks' use: there are no locks to check here. Does nothing. */
EVENT2_EXPORT_SYMBOL void evthread_enable_lock_debugging(void);
EVENT2_EXPORT_SYMBOL void evthread_enable_lock_debuging(void); /* libevent's old spelling */
/* Returns 0: a base is always woken by iomux's own wake-up. */
EVENT2_EXPORT_SYMBOL int evthread_make_base_notifiable(struct event_base *base);

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_THREAD_H_INCLUDED_ */
