/* SPDX-License-Identifier: MIT */
/* How signals are caught on Windows (internal.h, mux__sig_catch): the console's events, mapped
 * to signals as libuv maps them.
 *
 * What is odd about Windows here, and what this file does about it:
 * - There are no POSIX signals. What a terminal tells a program comes as console control
 *   events, to the handlers SetConsoleCtrlHandler installed, each event on a thread the
 *   system starts in the process for it. The handlers form a chain, the last installed first,
 *   until one returns TRUE; at its end is the default, which ends the process. CTRL_C_EVENT
 *   is SIGINT, CTRL_BREAK_EVENT is SIGBREAK, and CTRL_CLOSE_EVENT (the console window closed,
 *   or the terminal went) is SIGHUP. CTRL_LOGOFF_EVENT and CTRL_SHUTDOWN_EVENT reach services
 *   only, which hear of them through their own control handler: not signals here.
 * - One handler of ours sits in the chain while some loop watches SIGINT, SIGBREAK or SIGHUP.
 *   It hands the event to the registry (signal.c), which wakes every loop watching it, and
 *   answers TRUE (handled) only when one does, so that an event nobody watches goes on down
 *   the chain (to the default: the process ends, as a POSIX process does on a signal it left
 *   to its default). When the last watcher stops, the handler leaves the chain.
 * - A close event ends the process as soon as the handlers return, or some seconds after it
 *   came (5 on Windows 10) if they do not. So the handler does not return from one it
 *   delivered: the loops get those seconds to act on their SIGHUP. The system runs the
 *   handlers holding the chain's lock, so from then on the handler stays in the chain (taking
 *   it out would wait for that lock for ever).
 * - SIGWINCH: a console window that changes its size. The console host announces a new
 *   layout (EVENT_CONSOLE_LAYOUT) to WinEvent hooks, which need a thread with a message loop;
 *   one is started the first time a SIGWINCH watcher starts, in a process with a console
 *   window, and compares the window's size at each announcement with the one before. user32,
 *   which has the hooks, is loaded then: a server that never watches SIGWINCH does not load
 *   it. A process without a console window never gets a SIGWINCH (the watcher starts all the
 *   same: a console may be attached to it later, for which it would need starting again).
 * - The C runtime's signal() serves SIGINT, SIGTERM, SIGABRT and a few faults, but only for
 *   raise() within the process (and Ctrl-C, which this handler gets first): nothing outside
 *   it sends them. mux_signal_start refuses every number but the four above: -ENOTSUP.
 */
#include <errno.h>
#include <signal.h>

#include <windows.h>

#include "internal.h"
#include "platform/win.h"

/* Under the registry's lock: the console signals watched, and whether the handler is in the
 * chain. Atomic: a close event is being held (see the top). */
static unsigned mux__console_users;
static int mux__console_chained;
static int mux__console_closing;

static BOOL WINAPI mux__win_console_ctrl(DWORD type)
{
    int signum;
    switch (type) {
    case CTRL_C_EVENT:
        signum = SIGINT;
        break;
    case CTRL_BREAK_EVENT:
        signum = SIGBREAK;
        break;
    case CTRL_CLOSE_EVENT:
        signum = SIGHUP;
        break;
    default:
        return FALSE;
    }
    if (!mux__sig_watched(signum))
        return FALSE;
    if (type == CTRL_CLOSE_EVENT)
        __atomic_store_n(&mux__console_closing, 1, __ATOMIC_SEQ_CST);
    mux__sig_deliver(signum);
    if (type == CTRL_CLOSE_EVENT)
        Sleep(INFINITE); /* the process ends when this returns: the loops act meanwhile */
    return TRUE;
}

/* ---- SIGWINCH ----------------------------------------------------------------------- */

typedef HANDLE(WINAPI *mux__hook_fn)(DWORD, DWORD, HMODULE, WINEVENTPROC, DWORD, DWORD, DWORD);
typedef BOOL(WINAPI *mux__getmsg_fn)(LPMSG, HWND, UINT, UINT);
typedef LRESULT(WINAPI *mux__dispatch_fn)(const MSG *);

static COORD mux__winch_size; /* the console window's, as last seen; the hook's thread's */

/* The console window's size now (columns, rows), or 0 x 0. */
static COORD mux__console_size(void)
{
    COORD c = {0, 0};
    HANDLE out = CreateFileW(L"CONOUT$", GENERIC_READ | GENERIC_WRITE,
                             FILE_SHARE_READ | FILE_SHARE_WRITE, NULL, OPEN_EXISTING, 0, NULL);
    CONSOLE_SCREEN_BUFFER_INFO bi;
    if (out != INVALID_HANDLE_VALUE && GetConsoleScreenBufferInfo(out, &bi)) {
        c.X = (SHORT)(bi.srWindow.Right - bi.srWindow.Left + 1);
        c.Y = (SHORT)(bi.srWindow.Bottom - bi.srWindow.Top + 1);
    }
    if (out != INVALID_HANDLE_VALUE)
        CloseHandle(out);
    return c;
}

static void CALLBACK mux__winch_hook(HWINEVENTHOOK hook, DWORD event, HWND w, LONG obj, LONG child,
                                     DWORD thread, DWORD ms)
{
    (void)hook, (void)event, (void)w, (void)obj, (void)child, (void)thread, (void)ms;
    COORD now = mux__console_size();
    if (now.X == mux__winch_size.X && now.Y == mux__winch_size.Y)
        return; /* the layout changed otherwise: the buffer scrolled, the cursor moved */
    mux__winch_size = now;
    if (mux__sig_watched(SIGWINCH))
        mux__sig_deliver(SIGWINCH);
}

static DWORD WINAPI mux__winch_thread(void *arg)
{
    HMODULE user32 = arg;
    mux__hook_fn hook = (mux__hook_fn)(void (*)(void))GetProcAddress(user32, "SetWinEventHook");
    mux__getmsg_fn get = (mux__getmsg_fn)(void (*)(void))GetProcAddress(user32, "GetMessageW");
    mux__dispatch_fn dispatch =
        (mux__dispatch_fn)(void (*)(void))GetProcAddress(user32, "DispatchMessageW");
    mux__winch_size = mux__console_size();
    if (!hook || !get || !dispatch ||
        !hook(EVENT_CONSOLE_LAYOUT, EVENT_CONSOLE_LAYOUT, NULL, mux__winch_hook, 0, 0,
              WINEVENT_OUTOFCONTEXT))
        return 1;
    MSG m;
    while (get(&m, NULL, 0, 0) > 0)
        dispatch(&m);
    return 0;
}

/* Starts the hook's thread, once per process, where there is a console window. 0 or -errno. */
static int mux__winch_start(void)
{
    static int started; /* under the registry's lock */
    if (started || !GetConsoleWindow())
        return 0;
    HMODULE user32 = LoadLibraryW(L"user32.dll");
    if (!user32)
        return -ENOTSUP;
    HANDLE t = CreateThread(NULL, 0, mux__winch_thread, user32, 0, NULL);
    if (!t)
        return mux__win_errno(GetLastError());
    CloseHandle(t); /* it lives as long as the process */
    started = 1;
    return 0;
}

/* ---- the seam ----------------------------------------------------------------------- */

int mux__sig_valid(int signum)
{
    return signum != MUX__SIGCHLD; /* the library's own (child_win.c) */
}

int mux__sig_deliverable(int signum)
{
    return signum == SIGINT || signum == SIGBREAK || signum == SIGHUP || signum == SIGWINCH
               ? 0
               : -ENOTSUP;
}

int mux__sig_catch(int signum)
{
    if (signum == SIGWINCH)
        return mux__winch_start();
    if (signum != SIGINT && signum != SIGBREAK && signum != SIGHUP)
        return 0; /* MUX__SIGCHLD: delivered by child_win.c, nothing to catch */
    if (mux__console_users++ == 0 && !mux__console_chained) {
        if (!SetConsoleCtrlHandler(mux__win_console_ctrl, TRUE)) {
            mux__console_users--;
            return mux__win_errno(GetLastError());
        }
        mux__console_chained = 1;
    }
    return 0;
}

void mux__sig_release(int signum)
{
    if (signum != SIGINT && signum != SIGBREAK && signum != SIGHUP)
        return;
    /* While a close event is held, the system holds the chain's lock for it: a change of the
     * chain would wait for ever (the process ends in seconds anyway), so the handler stays. */
    if (--mux__console_users == 0 && !__atomic_load_n(&mux__console_closing, __ATOMIC_SEQ_CST)) {
        SetConsoleCtrlHandler(mux__win_console_ctrl, FALSE);
        mux__console_chained = 0;
    }
}
