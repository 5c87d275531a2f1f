/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: the list of key and value pairs that holds an HTTP
 * message's header fields and a parsed query. Its layout is libevent's (a <sys/queue.h>
 * TAILQ), spelled out here so that the header needs no <sys/queue.h>: a program may walk it
 * with TAILQ_FOREACH(kv, headers, next). */
#ifndef IOMUX_EVENT2_KEYVALQ_STRUCT_H_INCLUDED_
#define IOMUX_EVENT2_KEYVALQ_STRUCT_H_INCLUDED_

#ifdef __cplusplus
extern "C" {
#endif

/* One pair; both strings belong to the list (evhttp_clear_headers frees them). */
struct evkeyval {
    struct {
        struct evkeyval *tqe_next;  /* the next pair, or NULL */
        struct evkeyval **tqe_prev; /* where this pair is pointed to from */
    } next;
    char *key;
    char *value;
};

/* The list's head: TAILQ_INIT, or evhttp's own, set it up. */
struct evkeyvalq {
    struct evkeyval *tqh_first; /* the first pair, or NULL */
    struct evkeyval **tqh_last; /* the last pair's tqe_next (tqh_first when empty) */
};

#ifdef __cplusplus
}
#endif

#endif /* IOMUX_EVENT2_KEYVALQ_STRUCT_H_INCLUDED_ */
