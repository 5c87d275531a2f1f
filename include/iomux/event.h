/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: the all-in-one <event.h> that libevent 1.x programs
 * include (libevent 2.1 keeps it for them). */
#ifndef IOMUX_EVENT_H_INCLUDED_
#define IOMUX_EVENT_H_INCLUDED_

#include <event2/event-config.h>
#include <event2/event_struct.h>
#include <event2/event.h>
#include <event2/event_compat.h>
#include <event2/util.h>

#endif /* IOMUX_EVENT_H_INCLUDED_ */
