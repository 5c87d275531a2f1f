/* SPDX-License-Identifier: MIT */
/* Cleanup watchers: called once when the loop closes, the last started first, so that a
 * library layered on the loop lets go of what it hangs on it. */
#include <errno.h>
#include <string.h>

#include "harness.h"

static int order[8], norder;
static mux_timer_t lib_timer; /* a library's unreferenced housekeeping timer */

static void lib_tick(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop, (void)t;
}

static void cleanup_cb(mux_loop_t *loop, mux_cleanup_t *w)
{
    CHECK_LT(norder, 8);
    order[norder++] = (int)(intptr_t)w->data;
    CHECK_EQ(mux_cleanup_stop(loop, w), 0); /* stopped already: a no-op */
    CHECK_EQ(mux_loop_close(loop), -EINVAL); /* not from inside the close */
    if ((intptr_t)w->data == 2)
        CHECK_EQ(mux_timer_stop(loop, &lib_timer), 0); /* what the library hangs on the loop */
}

/* The cleanups run at close, the last started first, each once; a stopped one does not;
 * they keep nothing running, and a library's unreferenced timer stopped by its cleanup lets
 * the close end. */
TEST(cleanup_runs_at_close_last_started_first) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_cleanup_t c[4];
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(mux_cleanup_init(&c[i], cleanup_cb), 0);
        c[i].data = (void *)(intptr_t)(i + 1);
        CHECK_EQ(mux_cleanup_start(&loop, &c[i]), 0);
    }
    CHECK_EQ(mux_cleanup_start(&loop, &c[0]), -EBUSY);
    CHECK_EQ(mux_cleanup_stop(&loop, &c[2]), 0); /* the third will not run */
    CHECK_EQ(mux_loop_active(&loop), 0);         /* they keep nothing running */
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(mux_timer_init(&lib_timer, lib_tick), 0);
    CHECK_EQ(mux_timer_start(&loop, &lib_timer, 1000 * MS, 1000 * MS), 0);
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_TIMER, &lib_timer), 0);
    /* A referenced watcher of the caller's: -EBUSY, and no cleanup ran. */
    mux_timer_t mine;
    CHECK_EQ(mux_timer_init(&mine, lib_tick), 0);
    CHECK_EQ(mux_timer_start(&loop, &mine, 1000 * MS, 0), 0);
    CHECK_EQ(mux_loop_close(&loop), -EBUSY);
    CHECK_EQ(norder, 0);
    CHECK_EQ(mux_timer_stop(&loop, &mine), 0);
    CHECK_EQ(mux_loop_close(&loop), 0); /* the cleanups stop the library's timer */
    CHECK_EQ(norder, 3);
    CHECK_EQ(order[0], 4);
    CHECK_EQ(order[1], 2);
    CHECK_EQ(order[2], 1);
}

static void cleanup_leaves_timer(mux_loop_t *loop, mux_cleanup_t *w)
{
    (void)loop;
    norder++;
    (void)w;
}

/* An unreferenced watcher nobody stops: the cleanups run, and the close says -EBUSY; once it
 * is stopped the loop closes (the cleanups are not run twice). Bad arguments: -EINVAL. */
TEST(cleanup_close_with_an_unreferenced_watcher_left_is_ebusy) {
    mux_loop_t loop;
    loop_open(&loop);
    norder = 0;
    mux_cleanup_t c;
    CHECK_EQ(mux_cleanup_init(&c, NULL), -EINVAL);
    CHECK_EQ(mux_cleanup_init(NULL, cleanup_leaves_timer), -EINVAL);
    CHECK_EQ(mux_cleanup_init(&c, cleanup_leaves_timer), 0);
    CHECK_EQ(mux_cleanup_start(NULL, &c), -EINVAL);
    CHECK_EQ(mux_cleanup_start(&loop, &c), 0);
    mux_timer_t t;
    CHECK_EQ(mux_timer_init(&t, lib_tick), 0);
    CHECK_EQ(mux_timer_start(&loop, &t, 1000 * MS, 0), 0);
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_TIMER, &t), 0);
    CHECK_EQ(mux_loop_close(&loop), -EBUSY);
    CHECK_EQ(norder, 1);
    CHECK_EQ(mux_timer_stop(&loop, &t), 0);
    CHECK_EQ(mux_loop_close(&loop), 0);
    CHECK_EQ(norder, 1);
    CHECK_EQ(mux_cleanup_stop(NULL, &c), -EINVAL);
}
