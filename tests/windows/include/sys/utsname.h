/* SPDX-License-Identifier: MIT */
/* Windows stand-in: the declarations come from tests/windows/posix.h. */
#include "../../posix.h"
