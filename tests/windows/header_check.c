/* SPDX-License-Identifier: MIT */
/* Compiled for Windows (mingw-w64) by `core.public_header_compiles_for_windows`: the public
 * header builds there, a mux_buf_t array is a WSABUF array, and an OVERLAPPED fits in an
 * operation's private space. Nothing runs: every check is made by the compiler. */
#include <stddef.h>

#include <iomux.h>

_Static_assert(sizeof(mux_buf_t) == sizeof(WSABUF), "mux_buf_t is a WSABUF");
_Static_assert(offsetof(mux_buf_t, len) == offsetof(WSABUF, len), "len where WSABUF has it");
_Static_assert(offsetof(mux_buf_t, base) == offsetof(WSABUF, buf), "base where WSABUF has buf");
_Static_assert(sizeof(((struct mux__op *)0)->priv_) >= sizeof(OVERLAPPED),
               "an OVERLAPPED fits in an operation's private space");
_Static_assert(sizeof(mux_os_sock_t) == sizeof(SOCKET), "the OS socket type is a SOCKET");

int main(void)
{
    char byte = 'x';
    mux_buf_t b = mux_buf_init(&byte, 1);
    mux_os_sock_t s = MUX_OS_SOCK_INVALID;
    return (int)b.len - 1 + (s == INVALID_SOCKET ? 0 : 1);
}
