/* SPDX-License-Identifier: MIT */
/* Windows stand-in: getaddrinfo and its kin come from tests/windows/posix.h. */
#include "../posix.h"
