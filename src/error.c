/* SPDX-License-Identifier: MIT */
/* Version and the one table of error codes and their names. */
#include <errno.h>

#include "internal.h"

MUX_EXPORT unsigned mux_version(void)
{
    return (MUX_VERSION_MAJOR << 16) | (MUX_VERSION_MINOR << 8) | MUX_VERSION_PATCH;
}

#define MUX__STR2(x) #x
#define MUX__STR(x)  MUX__STR2(x)

MUX_EXPORT const char *mux_version_string(void)
{
    return MUX__STR(MUX_VERSION_MAJOR) "." MUX__STR(MUX_VERSION_MINOR) "." MUX__STR(
        MUX_VERSION_PATCH);
}

static const struct {
    int code;
    const char *text;
} mux__errors[] = {
    {0, "success"},
    {EINVAL, "EINVAL: invalid argument"},
    {EBUSY, "EBUSY: resource busy or already active"},
    {ENOMEM, "ENOMEM: out of memory"},
    {EBADF, "EBADF: bad file descriptor"},
    {EPERM, "EPERM: operation not permitted"},
    {EACCES, "EACCES: permission denied"},
    {ENOENT, "ENOENT: no such file or directory"},
    {EEXIST, "EEXIST: already exists"},
    {ENOSYS, "ENOSYS: function not implemented by the kernel"},
    {ENOTSUP, "ENOTSUP: not supported on this platform"},
    {ENOSPC, "ENOSPC: no space left (a fixed table is full)"},
    {EMFILE, "EMFILE: too many open files in this process"},
    {ENFILE, "ENFILE: too many open files in the system"},
    {EAGAIN, "EAGAIN: resource temporarily unavailable"},
    {EINTR, "EINTR: interrupted system call"},
    {EPIPE, "EPIPE: broken pipe"},
    {ECONNRESET, "ECONNRESET: connection reset by peer"},
    {ECONNREFUSED, "ECONNREFUSED: connection refused"},
    {ECANCELED, "ECANCELED: operation canceled"},
    {ETIMEDOUT, "ETIMEDOUT: timed out"},
    {ECHILD, "ECHILD: no child processes"},
    {ESRCH, "ESRCH: no such process"},
    {EALREADY, "EALREADY: operation already in progress"},
    /* what streams and listeners return or call back with */
    {EADDRINUSE, "EADDRINUSE: address already in use"},
    {EADDRNOTAVAIL, "EADDRNOTAVAIL: address not available"},
    {EAFNOSUPPORT, "EAFNOSUPPORT: address family not supported"},
    {ENOTCONN, "ENOTCONN: not connected"},
    {ENOTSOCK, "ENOTSOCK: not a socket"},
    {ENOBUFS, "ENOBUFS: no buffer space (an empty pool)"},
    {ENETUNREACH, "ENETUNREACH: network unreachable"},
    {EHOSTUNREACH, "EHOSTUNREACH: host unreachable"},
    {ECONNABORTED, "ECONNABORTED: connection aborted"},
    {EPROTO, "EPROTO: protocol error"},
    {EIO, "EIO: input/output error"},
    /* further codes a Windows error maps to (platform/win.c) */
    {EINPROGRESS, "EINPROGRESS: operation in progress"},
    {EMSGSIZE, "EMSGSIZE: message too long"},
    {ENETDOWN, "ENETDOWN: network is down"},
    {ENETRESET, "ENETRESET: connection reset by the network"},
    {EISCONN, "EISCONN: already connected"},
    {EFAULT, "EFAULT: bad address"},
    {ENODATA, "ENODATA: no data (a file ended early)"},
    {EOPNOTSUPP, "EOPNOTSUPP: operation not supported on the socket"},
    {EOVERFLOW, "EOVERFLOW: value too large (a count past what its type holds)"},
};

MUX_EXPORT const char *mux_strerror(int err)
{
    for (size_t i = 0; i < sizeof mux__errors / sizeof mux__errors[0]; i++)
        if (mux__errors[i].code == err || -mux__errors[i].code == err) /* no -INT_MIN */
            return mux__errors[i].text;
    return "unknown error";
}
