/* SPDX-License-Identifier: MIT */
/* The clocks' shared state, and the fork generation that lets every loop notice a fork by
 * itself. The clocks themselves are read through the platform seam (platform.h). */
#include "internal.h"

int64_t mux__test_wall_offset;
unsigned mux__fork_gen;
