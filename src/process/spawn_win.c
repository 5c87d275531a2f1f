/* SPDX-License-Identifier: MIT */
/* Child processes on Windows: not written yet.
 *
 * The Windows child needs CreateProcess with its standard handles as overlapped named pipes
 * whose ends the parent reads and writes through the stream layer, and its end learned
 * through a registered wait (RegisterWaitForSingleObject) that wakes the loop. The stream
 * layer on Windows takes sockets only so far, so none of it is here: mux_spawn checks its
 * arguments as on POSIX (portable code gets the same -EINVAL) and returns -ENOTSUP, and no
 * process handle can become active, so the calls on one are -EINVAL, as for a handle that
 * was never spawned. docs/process.md says so.
 */
#include <errno.h>

#include "internal.h"
#include "iomux/process.h"
#include "process/process.h"

MUX_EXPORT int mux_spawn(mux_loop_t *pub, mux_process_t *p, const mux_spawn_options_t *opts,
                         mux_exit_cb cb)
{
    if (!mux__loop_of(pub) || !p || !opts || !cb || !mux__spawn_valid(opts))
        return -EINVAL;
    return -ENOTSUP;
}

MUX_EXPORT int mux_process_kill(mux_process_t *p, int signum)
{
    (void)p;
    (void)signum;
    return -EINVAL;
}

MUX_EXPORT int mux_process_detach(mux_process_t *p)
{
    (void)p;
    return -EINVAL;
}

MUX_EXPORT int mux_process_pid(const mux_process_t *p)
{
    (void)p;
    return -EINVAL;
}
