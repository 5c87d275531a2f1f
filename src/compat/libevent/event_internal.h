/* SPDX-License-Identifier: MIT */
/* Private to libiomux-event: the base, the configuration, logging and allocation. */
#ifndef IOMUX_EVENT_INTERNAL_H
#define IOMUX_EVENT_INTERNAL_H

#include <event2/event.h>
#include <event2/event_compat.h>
#include <event2/event_struct.h>

#include <iomux.h>
#include <stddef.h>

#define EVX_MAGIC 0x45564d58u /* "EVMX": event_assign has been here */

/* struct event's ev_x_ bits. */
enum {
    EVX_ONCE = 0x01,  /* event_base_once's: freed after its callback */
    EVX_TIMER = 0x02, /* ev_timer_ is initialised (at the first timeout given) */
};

/* One FIFO per priority of active events, linked through ev_active_next_/prev_. */
struct evx_queue {
    struct event *head, *tail;
};

struct event_base {
    mux_loop_t loop;
    struct evx_queue *active; /* npri queues; index 0 runs first */
    struct evx_queue active_one;
    int npri;
    int mid_pri;  /* npri / 2: where new events go */
    int nactive;  /* events in the active queues */
    int nadded;   /* events added (inserted or with a timeout), internal ones included */
    int ninternal; /* of those, the library's own (EVX_INTERNAL): they keep no loop running */
    int nvirtual; /* reserved for libevent's virtual events: always 0 here */
    int max_added, max_active;
    struct event *added; /* every added event, for foreach, active_by_fd and free */
    struct event *running;
    int running_loop; /* inside event_base_loop */
    int gotterm, docontinue;
    int running_pri;         /* the priority whose queue runs, or -1 */
    long fd_limit;           /* RLIMIT_NOFILE when the base was made: no fd reaches it */
    int n_et;                /* added EV_ET events: while 0, adding needs no mixing check */
    int gotbreak;            /* event_base_loopbreak may set it from another thread */
    int got_exit, got_break; /* what ended the last loop, for got_exit / got_break */
    int flags;               /* EVENT_BASE_FLAG_* */
    int features;
    struct timeval tv_cache; /* valid while tv_cache_set */
    int tv_cache_set;
    short *pncalls;                 /* the running signal event's remaining calls, or NULL */
    mux_async_t keepalive;          /* always started: see event_base_new_with_config */
    struct evx_bev *flush_head;    /* bufferevents with output to write this turn */
    mux_prepare_t flusher;          /* started while flush_head is not empty */
    char *landing;                  /* EVX_CHAIN_READ bytes the bufferevents read into */
    int nbusy;                      /* bufferevents reading, writing, connecting or closing */
    int nclosing;                   /* bufferevents freed whose streams have not closed yet */
    int ndirect;               /* bufferevent callbacks run in this turn (not through the queues) */
    struct timeval common[32]; /* what event_base_init_common_timeout handed out */
    int ncommon;
};

/* The base of libevent 1.x's calls: the last one event_init made. */
extern struct event_base *evx_current_base;

/* struct event's ev_flags bit for the library's own events (a bufferevent's deferred
 * callbacks): counted as libevent counts its deferred callbacks, but not listed by
 * event_base_foreach_event or event_base_dump_events. */
#define EVX_INTERNAL EVLIST_INTERNAL

/* A chunk of an evbuffer: bytes [misalign, misalign + off) of buf are data. A chunk made by
 * evbuffer_add_reference holds a copy of the program's bytes and exactly them (it is full,
 * so nothing is appended to it), and tells the program with `cleanup` when it is freed:
 * when the last of those bytes has left the buffers, as libevent tells it. */
struct evx_chain {
    struct evx_chain *next;
    size_t misalign, off, cap;
    void (*cleanup)(const void *data, size_t len, void *arg); /* or NULL */
    const void *ref;
    void *ref_arg;
    char buf[];
};

struct evbuffer {
    struct evx_chain *first, *last;
    size_t total;
    int frozen_front, frozen_back;
    struct evx_bev *bev_out; /* the bufferevent this is the output of: adds flush it */
    struct evx_bev *bev_in;  /* the one this is the input of: drains may resume reading */
    void (*cb)(struct evbuffer *, size_t, size_t, void *); /* evbuffer_setcb's, or NULL */
    void *cbarg;
    size_t cb_len; /* the length the callback was last told */
};

/* Chunks; those of EVX_CHAIN_READ bytes (a bufferevent's reads) are recycled per thread. */
#define EVX_CHAIN_READ 16384
struct evx_chain *evx_chain_new(size_t cap);
void evx_chain_free(struct evx_chain *ch);
void evx_chain_cache_clear(void);
/* Appends a filled chunk to `buf` (it becomes the buffer's). */
void evx_buffer_append_chain(struct evbuffer *buf, struct evx_chain *ch);
/* The buffer's length changed from `old_len` behind the evbuffer calls' back (a bufferevent
 * read into its chunks): its evbuffer_setcb callback is told. */
void evx_buffer_changed(struct evbuffer *buf, size_t old_len);
/* bufferevent.c: `buf`, a bufferevent's output, has more bytes / its input has fewer. */
struct evx_bev;
void evx_bev_output_added(struct evx_bev *bev);
void evx_bev_input_drained(struct evx_bev *bev);
/* Runs the bufferevents' writes queued during this turn (from the base's prepare watcher). */
void evx_bev_flush_all(struct event_base *base);

/* Logging (libevent's "[warn] ..." to stderr, or the program's callback). */
void evx_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Logs at EVENT_LOG_ERR, calls the fatal callback (or abort()); does not return. */
void evx_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Allocation through event_set_mem_functions' choice. */
void *evx_malloc(size_t n);
void *evx_calloc(size_t n, size_t size);
void evx_free(void *p);

/* The active queues (event.c): queue with `res` (or add `res` to a queued event); take off. */
void evx_activate(struct event *ev, short res);
void evx_unqueue(struct event *ev);
/* Stops the event's watchers and takes it off the added list; `keep_active` leaves it on
 * its active queue. */
void evx_del(struct event *ev, int keep_active);

/* The backend features an iomux backend offers, in libevent's terms. */
int evx_backend_features(const char *name);

#if defined(EVX_BUILDING_SHARED) && defined(_WIN32)
#define EVX_EXPORT __declspec(dllexport)
#elif defined(EVX_BUILDING_SHARED) && defined(__GNUC__)
#define EVX_EXPORT __attribute__((visibility("default")))
#else
#define EVX_EXPORT
#endif

#endif
