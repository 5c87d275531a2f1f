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
    /* name resolution's, which are not errno values */
    {-MUX_EAI_AGAIN, "EAI_AGAIN: temporary failure in name resolution"},
    {-MUX_EAI_BADFLAGS, "EAI_BADFLAGS: bad flags in the lookup's hints"},
    {-MUX_EAI_FAIL, "EAI_FAIL: non-recoverable failure in name resolution"},
    {-MUX_EAI_FAMILY, "EAI_FAMILY: address family not supported by the resolver"},
    {-MUX_EAI_NODATA, "EAI_NODATA: the name has no address of the asked kind"},
    {-MUX_EAI_NONAME, "EAI_NONAME: name or service not known"},
    {-MUX_EAI_SERVICE, "EAI_SERVICE: service not supported for the socket type"},
    {-MUX_EAI_SOCKTYPE, "EAI_SOCKTYPE: socket type not supported by the resolver"},
    {-MUX_EAI_OVERFLOW, "EAI_OVERFLOW: a name did not fit its buffer"},
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
    {EBADMSG, "EBADMSG: bad message (malformed input)"},
    /* the rest of what a system call can fail with, passed on as it is */
#ifdef EHWPOISON
    {EHWPOISON, "EHWPOISON: memory page has hardware error"},
#endif
#ifdef ENXIO
    {ENXIO, "ENXIO: no such device or address"},
#endif
#ifdef E2BIG
    {E2BIG, "E2BIG: argument list too long"},
#endif
#ifdef ENOEXEC
    {ENOEXEC, "ENOEXEC: exec format error"},
#endif
#ifdef ENOTBLK
    {ENOTBLK, "ENOTBLK: block device required"},
#endif
#ifdef EXDEV
    {EXDEV, "EXDEV: invalid cross-device link"},
#endif
#ifdef ENODEV
    {ENODEV, "ENODEV: no such device"},
#endif
#ifdef ENOTDIR
    {ENOTDIR, "ENOTDIR: not a directory"},
#endif
#ifdef EISDIR
    {EISDIR, "EISDIR: is a directory"},
#endif
#ifdef ENOTTY
    {ENOTTY, "ENOTTY: inappropriate ioctl for device"},
#endif
#ifdef ETXTBSY
    {ETXTBSY, "ETXTBSY: text file busy"},
#endif
#ifdef EFBIG
    {EFBIG, "EFBIG: file too large"},
#endif
#ifdef ESPIPE
    {ESPIPE, "ESPIPE: illegal seek"},
#endif
#ifdef EROFS
    {EROFS, "EROFS: read-only file system"},
#endif
#ifdef EMLINK
    {EMLINK, "EMLINK: too many links"},
#endif
#ifdef EDOM
    {EDOM, "EDOM: numerical argument out of domain"},
#endif
#ifdef ERANGE
    {ERANGE, "ERANGE: numerical result out of range"},
#endif
#ifdef EDEADLOCK
    {EDEADLOCK, "EDEADLOCK: resource deadlock avoided"},
#endif
#ifdef ENAMETOOLONG
    {ENAMETOOLONG, "ENAMETOOLONG: file name too long"},
#endif
#ifdef ENOLCK
    {ENOLCK, "ENOLCK: no locks available"},
#endif
#ifdef ENOTEMPTY
    {ENOTEMPTY, "ENOTEMPTY: directory not empty"},
#endif
#ifdef ELOOP
    {ELOOP, "ELOOP: too many levels of symbolic links"},
#endif
#ifdef ENOMSG
    {ENOMSG, "ENOMSG: no message of desired type"},
#endif
#ifdef EIDRM
    {EIDRM, "EIDRM: identifier removed"},
#endif
#ifdef ECHRNG
    {ECHRNG, "ECHRNG: channel number out of range"},
#endif
#ifdef EL2NSYNC
    {EL2NSYNC, "EL2NSYNC: level 2 not synchronized"},
#endif
#ifdef EL3HLT
    {EL3HLT, "EL3HLT: level 3 halted"},
#endif
#ifdef EL3RST
    {EL3RST, "EL3RST: level 3 reset"},
#endif
#ifdef ELNRNG
    {ELNRNG, "ELNRNG: link number out of range"},
#endif
#ifdef EUNATCH
    {EUNATCH, "EUNATCH: protocol driver not attached"},
#endif
#ifdef ENOCSI
    {ENOCSI, "ENOCSI: no CSI structure available"},
#endif
#ifdef EL2HLT
    {EL2HLT, "EL2HLT: level 2 halted"},
#endif
#ifdef EBADE
    {EBADE, "EBADE: invalid exchange"},
#endif
#ifdef EBADR
    {EBADR, "EBADR: invalid request descriptor"},
#endif
#ifdef EXFULL
    {EXFULL, "EXFULL: exchange full"},
#endif
#ifdef ENOANO
    {ENOANO, "ENOANO: no anode"},
#endif
#ifdef EBADRQC
    {EBADRQC, "EBADRQC: invalid request code"},
#endif
#ifdef EBADSLT
    {EBADSLT, "EBADSLT: invalid slot"},
#endif
#ifdef EBFONT
    {EBFONT, "EBFONT: bad font file format"},
#endif
#ifdef ENOSTR
    {ENOSTR, "ENOSTR: device not a stream"},
#endif
#ifdef ETIME
    {ETIME, "ETIME: timer expired"},
#endif
#ifdef ENOSR
    {ENOSR, "ENOSR: out of streams resources"},
#endif
#ifdef ENONET
    {ENONET, "ENONET: machine is not on the network"},
#endif
#ifdef ENOPKG
    {ENOPKG, "ENOPKG: package not installed"},
#endif
#ifdef EREMOTE
    {EREMOTE, "EREMOTE: object is remote"},
#endif
#ifdef ENOLINK
    {ENOLINK, "ENOLINK: link has been severed"},
#endif
#ifdef EADV
    {EADV, "EADV: advertise error"},
#endif
#ifdef ESRMNT
    {ESRMNT, "ESRMNT: srmount error"},
#endif
#ifdef ECOMM
    {ECOMM, "ECOMM: communication error on send"},
#endif
#ifdef EMULTIHOP
    {EMULTIHOP, "EMULTIHOP: multihop attempted"},
#endif
#ifdef EDOTDOT
    {EDOTDOT, "EDOTDOT: rFS specific error"},
#endif
#ifdef ENOTUNIQ
    {ENOTUNIQ, "ENOTUNIQ: name not unique on network"},
#endif
#ifdef EBADFD
    {EBADFD, "EBADFD: file descriptor in bad state"},
#endif
#ifdef EREMCHG
    {EREMCHG, "EREMCHG: remote address changed"},
#endif
#ifdef ELIBACC
    {ELIBACC, "ELIBACC: can not access a needed shared library"},
#endif
#ifdef ELIBBAD
    {ELIBBAD, "ELIBBAD: accessing a corrupted shared library"},
#endif
#ifdef ELIBSCN
    {ELIBSCN, "ELIBSCN: .lib section in a.out corrupted"},
#endif
#ifdef ELIBMAX
    {ELIBMAX, "ELIBMAX: attempting to link in too many shared libraries"},
#endif
#ifdef ELIBEXEC
    {ELIBEXEC, "ELIBEXEC: cannot exec a shared library directly"},
#endif
#ifdef EILSEQ
    {EILSEQ, "EILSEQ: invalid or incomplete multibyte or wide character"},
#endif
#ifdef ERESTART
    {ERESTART, "ERESTART: interrupted system call should be restarted"},
#endif
#ifdef ESTRPIPE
    {ESTRPIPE, "ESTRPIPE: streams pipe error"},
#endif
#ifdef EUSERS
    {EUSERS, "EUSERS: too many users"},
#endif
#ifdef EDESTADDRREQ
    {EDESTADDRREQ, "EDESTADDRREQ: destination address required"},
#endif
#ifdef EPROTOTYPE
    {EPROTOTYPE, "EPROTOTYPE: protocol wrong type for socket"},
#endif
#ifdef ENOPROTOOPT
    {ENOPROTOOPT, "ENOPROTOOPT: protocol not available"},
#endif
#ifdef EPROTONOSUPPORT
    {EPROTONOSUPPORT, "EPROTONOSUPPORT: protocol not supported"},
#endif
#ifdef ESOCKTNOSUPPORT
    {ESOCKTNOSUPPORT, "ESOCKTNOSUPPORT: socket type not supported"},
#endif
#ifdef EPFNOSUPPORT
    {EPFNOSUPPORT, "EPFNOSUPPORT: protocol family not supported"},
#endif
#ifdef ESHUTDOWN
    {ESHUTDOWN, "ESHUTDOWN: cannot send after transport endpoint shutdown"},
#endif
#ifdef ETOOMANYREFS
    {ETOOMANYREFS, "ETOOMANYREFS: too many references: cannot splice"},
#endif
#ifdef EHOSTDOWN
    {EHOSTDOWN, "EHOSTDOWN: host is down"},
#endif
#ifdef ESTALE
    {ESTALE, "ESTALE: stale file handle"},
#endif
#ifdef EUCLEAN
    {EUCLEAN, "EUCLEAN: structure needs cleaning"},
#endif
#ifdef ENOTNAM
    {ENOTNAM, "ENOTNAM: not a XENIX named type file"},
#endif
#ifdef ENAVAIL
    {ENAVAIL, "ENAVAIL: no XENIX semaphores available"},
#endif
#ifdef EISNAM
    {EISNAM, "EISNAM: is a named type file"},
#endif
#ifdef EREMOTEIO
    {EREMOTEIO, "EREMOTEIO: remote I/O error"},
#endif
#ifdef EDQUOT
    {EDQUOT, "EDQUOT: disk quota exceeded"},
#endif
#ifdef ENOMEDIUM
    {ENOMEDIUM, "ENOMEDIUM: no medium found"},
#endif
#ifdef EMEDIUMTYPE
    {EMEDIUMTYPE, "EMEDIUMTYPE: wrong medium type"},
#endif
#ifdef ENOKEY
    {ENOKEY, "ENOKEY: required key not available"},
#endif
#ifdef EKEYEXPIRED
    {EKEYEXPIRED, "EKEYEXPIRED: key has expired"},
#endif
#ifdef EKEYREVOKED
    {EKEYREVOKED, "EKEYREVOKED: key has been revoked"},
#endif
#ifdef EKEYREJECTED
    {EKEYREJECTED, "EKEYREJECTED: key was rejected by service"},
#endif
#ifdef EOWNERDEAD
    {EOWNERDEAD, "EOWNERDEAD: owner died"},
#endif
#ifdef ENOTRECOVERABLE
    {ENOTRECOVERABLE, "ENOTRECOVERABLE: state not recoverable"},
#endif
#ifdef ERFKILL
    {ERFKILL, "ERFKILL: operation not possible due to RF-kill"},
#endif
};

MUX_EXPORT const char *mux_strerror(int err)
{
    for (size_t i = 0; i < sizeof mux__errors / sizeof mux__errors[0]; i++)
        if (mux__errors[i].code == err || -mux__errors[i].code == err) /* no -INT_MIN */
            return mux__errors[i].text;
    return "unknown error";
}
