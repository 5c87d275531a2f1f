/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: the all-in-one <event.h> that libevent 1.x programs
 * include (libevent 2.1 keeps it for them): the core, the buffers and the bufferevents with
 * their 1.x names and structures. */
#ifndef IOMUX_EVENT_H_INCLUDED_
#define IOMUX_EVENT_H_INCLUDED_

#include <event2/event-config.h>
#include <event2/event_struct.h>
#include <event2/event.h>
#include <event2/event_compat.h>
#include <event2/buffer.h>
#include <event2/buffer_compat.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_struct.h>
#include <event2/bufferevent_compat.h>
#include <event2/util.h>

#endif /* IOMUX_EVENT_H_INCLUDED_ */
