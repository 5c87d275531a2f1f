/* SPDX-License-Identifier: MIT */
/* A program outside the tree that uses an installed iomux. */
#include <iomux.h>
#include <stdio.h>

static void on_timer(mux_loop_t *loop, mux_timer_t *t)
{
    (void)t;
    mux_loop_stop(loop);
}

int main(void)
{
    mux_loop_t loop;
    mux_timer_t t;
    if (mux_loop_init(&loop, NULL) != 0 || mux_timer_init(&t, on_timer) != 0 ||
        mux_timer_start(&loop, &t, 1000000, 0) != 0 || mux_run(&loop, MUX_RUN_DEFAULT) < 0)
        return 1;
    printf("iomux %s on %s\n", mux_version_string(), mux_loop_backend(&loop));
    return mux_loop_close(&loop) == 0 ? 0 : 1;
}
