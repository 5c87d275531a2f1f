/* SPDX-License-Identifier: MIT */
/* The worker pool's calls for the services built on it (the resolver, the dialer). */
#ifndef IOMUX_WORK_WORK_H
#define IOMUX_WORK_WORK_H

#include "iomux/work.h"

/* For requests that are the library's own memory: takes `w` off the queue if no thread has
 * started it (its done callback comes with -ECANCELED; returns 0), or, when it runs, leaves
 * it to its thread, which calls `reap(w)` once the work function returns, and forgets it on
 * the loop at once (returns 1: no callback will come). -EBUSY when it has run and its
 * callback is due (it comes with 0); -EINVAL when it is not pending. From its loop's thread.
 * With `reap` NULL, a running request is -EBUSY (mux_work_cancel). */
int mux__work_abandon(mux_work_t *w, void (*reap)(mux_work_t *w));

#endif
