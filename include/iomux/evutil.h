/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: the 1.x name of <event2/util.h>. */
#ifndef IOMUX_EVUTIL_H_INCLUDED_
#define IOMUX_EVUTIL_H_INCLUDED_

#include <event2/util.h>

#endif /* IOMUX_EVUTIL_H_INCLUDED_ */
