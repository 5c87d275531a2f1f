/* SPDX-License-Identifier: MIT */
/* How signals are caught on POSIX systems (internal.h, mux__sig_catch): one handler, which
 * hands the signal to the registry (signal.c), installed with sigaction while some watcher
 * of the signal is active, and the disposition it replaced restored after the last one.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "internal.h"

static struct sigaction mux__sig_saved[MUX__NSIG];

static void mux__sig_handler(int signum)
{
    mux__sig_deliver(signum);
}

int mux__sig_valid(int signum)
{
    /* The system's signals, but not the two that cannot be caught. */
    return signum < NSIG && signum != SIGKILL && signum != SIGSTOP;
}

int mux__sig_deliverable(int signum)
{
    (void)signum;
    return 0;
}

int mux__sig_catch(int signum)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = mux__sig_handler;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    return sigaction(signum, &sa, &mux__sig_saved[signum]) == 0 ? 0 : -errno;
}

void mux__sig_release(int signum)
{
    sigaction(signum, &mux__sig_saved[signum], NULL);
}
