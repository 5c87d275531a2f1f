/* SPDX-License-Identifier: MIT */
/* libiomux-event: evbuffers, a queue of chunks. Moving bytes between buffers moves chunks;
 * only the edges of a partial move are copied. A buffer frozen at the front (a bufferevent's
 * output while its chunks are in a write) refuses drains, as libevent's does. */
#include "event_internal.h"

#include <event2/buffer.h>
#include <event2/buffer_compat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

#define EVX_CHAIN_MIN 4096
#define EVX_IOV_MAX   64

/* Chunks of the size bufferevents read into are kept for reuse, a few per thread: an echo
 * takes and gives back one per message, and malloc would hand a 16 KB chunk back to the
 * kernel (brk) every few messages. */
#define EVX_CACHE_MAX 64
static _Thread_local struct evx_chain *chain_cache;
static _Thread_local int chain_cached;

struct evx_chain *evx_chain_new(size_t cap)
{
    if (cap == EVX_CHAIN_READ && chain_cache) {
        struct evx_chain *ch = chain_cache;
        chain_cache = ch->next;
        chain_cached--;
        ch->next = NULL;
        ch->misalign = ch->off = 0;
        ch->cleanup = NULL;
        return ch;
    }
    if (cap > SIZE_MAX - sizeof(struct evx_chain))
        return NULL;
    struct evx_chain *ch = evx_malloc(sizeof *ch + cap);
    if (ch) {
        ch->next = NULL;
        ch->misalign = ch->off = 0;
        ch->cap = cap;
        ch->cleanup = NULL;
    }
    return ch;
}

void evx_chain_free(struct evx_chain *ch)
{
    if (ch && ch->cleanup) {
        ch->cleanup(ch->ref, ch->cap, ch->ref_arg);
        ch->cleanup = NULL;
    }
    if (ch && ch->cap == EVX_CHAIN_READ && chain_cached < EVX_CACHE_MAX) {
        ch->next = chain_cache;
        chain_cache = ch;
        chain_cached++;
        return;
    }
    evx_free(ch);
}

/* Gives the calling thread's kept chunks back (libevent_global_shutdown). */
void evx_chain_cache_clear(void)
{
    while (chain_cache) {
        struct evx_chain *ch = chain_cache;
        chain_cache = ch->next;
        evx_free(ch);
    }
    chain_cached = 0;
}

static size_t chain_space(const struct evx_chain *ch)
{
    return ch->cap - ch->misalign - ch->off;
}

void evx_buffer_append_chain(struct evbuffer *buf, struct evx_chain *ch)
{
    ch->next = NULL;
    if (buf->last)
        buf->last->next = ch;
    else
        buf->first = ch;
    buf->last = ch;
    buf->total += ch->off;
}

/* The evbuffer_setcb callback, told the length it was last told and the length now. */
static void tell(struct evbuffer *buf)
{
    size_t old = buf->cb_len;
    buf->cb_len = buf->total;
    if (old != buf->total)
        buf->cb(buf, old, buf->total, buf->cbarg);
}

void evx_buffer_changed(struct evbuffer *buf, size_t old_len)
{
    (void)old_len; /* the callback is told the length it last saw, which is this one */
    if (buf->cb)
        tell(buf);
}

static void added(struct evbuffer *buf)
{
    if (buf->cb)
        tell(buf);
    if (buf->bev_out)
        evx_bev_output_added(buf->bev_out);
}

static void drained(struct evbuffer *buf)
{
    if (buf->cb)
        tell(buf);
    if (buf->bev_in)
        evx_bev_input_drained(buf->bev_in);
}

EVX_EXPORT struct evbuffer *evbuffer_new(void)
{
    return evx_calloc(1, sizeof(struct evbuffer));
}

static void free_chains(struct evx_chain *ch)
{
    while (ch) {
        struct evx_chain *next = ch->next;
        evx_chain_free(ch);
        ch = next;
    }
}

EVX_EXPORT void evbuffer_free(struct evbuffer *buf)
{
    if (!buf)
        return;
    free_chains(buf->first);
    evx_free(buf);
}

EVX_EXPORT int evbuffer_enable_locking(struct evbuffer *buf, void *lock)
{
    (void)lock;
    return buf ? 0 : -1;
}

EVX_EXPORT void evbuffer_lock(struct evbuffer *buf)
{
    (void)buf;
}

EVX_EXPORT void evbuffer_unlock(struct evbuffer *buf)
{
    (void)buf;
}

EVX_EXPORT size_t evbuffer_get_length(const struct evbuffer *buf)
{
    return buf ? buf->total : 0;
}

EVX_EXPORT size_t evbuffer_get_contiguous_space(const struct evbuffer *buf)
{
    return buf && buf->first ? buf->first->off : 0;
}

/* The last chunk, with at least `need` bytes free at its end (a new one if not). */
static struct evx_chain *room(struct evbuffer *buf, size_t need)
{
    struct evx_chain *last = buf->last;
    if (last && chain_space(last) >= need)
        return last;
    if (last && last->off == 0 && last->cap >= need && !last->cleanup) {
        last->misalign = 0;
        return last;
    }
    struct evx_chain *ch = evx_chain_new(need > EVX_CHAIN_MIN ? need : EVX_CHAIN_MIN);
    if (ch)
        evx_buffer_append_chain(buf, ch);
    return ch;
}

EVX_EXPORT int evbuffer_expand(struct evbuffer *buf, size_t datlen)
{
    return buf && room(buf, datlen) ? 0 : -1;
}

EVX_EXPORT int evbuffer_add(struct evbuffer *buf, const void *data, size_t len)
{
    if (!buf || (!data && len) || buf->frozen_back)
        return -1;
    if (!len)
        return 0;
    const char *p = data;
    struct evx_chain *last = buf->last;
    size_t first = last ? chain_space(last) : 0;
    if (first > len)
        first = len;
    if (first) { /* fill what is left of the last chunk, then one new chunk for the rest */
        memcpy(last->buf + last->misalign + last->off, p, first);
        last->off += first;
        buf->total += first;
    }
    if (len > first) {
        struct evx_chain *ch = room(buf, len - first);
        if (!ch)
            return -1;
        memcpy(ch->buf + ch->misalign + ch->off, p + first, len - first);
        ch->off += len - first;
        buf->total += len - first;
    }
    added(buf);
    return 0;
}

EVX_EXPORT int evbuffer_add_reference(struct evbuffer *outbuf, const void *data, size_t datlen,
                                      evbuffer_ref_cleanup_cb cleanupfn, void *cleanupfn_arg)
{
    /* A copy in a chunk of its own: a chunk that pointed into the program's memory would be a
     * second kind of chunk for every reader and writer of chunks to know. What the program
     * sees is libevent's: its bytes are not written to, and the cleanup runs once they have
     * all been drained (or the buffer freed). */
    if (!outbuf || (!data && datlen) || outbuf->frozen_back)
        return -1;
    if (!datlen) {
        if (cleanupfn)
            cleanupfn(data, 0, cleanupfn_arg);
        return 0;
    }
    struct evx_chain *ch = evx_chain_new(datlen);
    if (!ch)
        return -1;
    memcpy(ch->buf, data, datlen);
    ch->off = datlen;
    ch->cleanup = cleanupfn;
    ch->ref = data;
    ch->ref_arg = cleanupfn_arg;
    evx_buffer_append_chain(outbuf, ch);
    added(outbuf);
    return 0;
}

EVX_EXPORT int evbuffer_prepend(struct evbuffer *buf, const void *data, size_t len)
{
    if (!buf || (!data && len) || buf->frozen_front)
        return -1;
    if (!len)
        return 0;
    struct evx_chain *ch = evx_chain_new(len);
    if (!ch)
        return -1;
    memcpy(ch->buf, data, len);
    ch->off = len;
    ch->next = buf->first;
    buf->first = ch;
    if (!buf->last)
        buf->last = ch;
    buf->total += len;
    added(buf);
    return 0;
}

EVX_EXPORT int evbuffer_add_vprintf(struct evbuffer *buf, const char *fmt, va_list ap)
{
    if (!buf || !fmt || buf->frozen_back)
        return -1;
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    struct evx_chain *ch = n < 0 ? NULL : room(buf, (size_t)n + 1);
    if (!ch)
        return -1;
    vsnprintf(ch->buf + ch->misalign + ch->off, (size_t)n + 1, fmt, ap);
    ch->off += (size_t)n;
    buf->total += (size_t)n;
    added(buf);
    return n;
}

EVX_EXPORT int evbuffer_add_printf(struct evbuffer *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = evbuffer_add_vprintf(buf, fmt, ap);
    va_end(ap);
    return n;
}

EVX_EXPORT int evbuffer_add_buffer(struct evbuffer *out, struct evbuffer *in)
{
    if (!out || !in || out == in || out->frozen_back || in->frozen_front)
        return -1;
    if (!in->total)
        return 0;
    if (out->last)
        out->last->next = in->first;
    else
        out->first = in->first;
    out->last = in->last;
    out->total += in->total;
    in->first = in->last = NULL;
    in->total = 0;
    drained(in);
    added(out);
    return 0;
}

/* Copies up to `len` bytes from the front of `buf` without draining them. */
static size_t copy_front(const struct evbuffer *buf, char *out, size_t len)
{
    size_t done = 0;
    for (const struct evx_chain *ch = buf->first; ch && done < len; ch = ch->next) {
        size_t k = ch->off < len - done ? ch->off : len - done;
        memcpy(out + done, ch->buf + ch->misalign, k);
        done += k;
    }
    return done;
}

/* Drops `len` bytes (no more than there are) from the front, freeing emptied chunks. */
static void drop_front(struct evbuffer *buf, size_t len)
{
    buf->total -= len;
    while (len) {
        struct evx_chain *ch = buf->first;
        if (ch->off > len) {
            ch->misalign += len;
            ch->off -= len;
            return;
        }
        len -= ch->off;
        buf->first = ch->next;
        if (!buf->first)
            buf->last = NULL;
        evx_chain_free(ch);
    }
    /* An empty buffer keeps no chunk: the next add starts a fresh one. */
    if (!buf->total) {
        free_chains(buf->first);
        buf->first = buf->last = NULL;
    }
}

EVX_EXPORT int evbuffer_drain(struct evbuffer *buf, size_t len)
{
    if (!buf || buf->frozen_front)
        return -1;
    drop_front(buf, len < buf->total ? len : buf->total);
    drained(buf);
    return 0;
}

EVX_EXPORT ev_ssize_t evbuffer_copyout(struct evbuffer *buf, void *out, size_t len)
{
    if (!buf || (!out && len))
        return -1;
    return (ev_ssize_t)copy_front(buf, out, len);
}

EVX_EXPORT int evbuffer_remove(struct evbuffer *buf, void *out, size_t len)
{
    if (!buf || (!out && len) || buf->frozen_front)
        return -1;
    if (len > INT32_MAX)
        len = INT32_MAX;
    size_t n = copy_front(buf, out, len);
    drop_front(buf, n);
    drained(buf);
    return (int)n;
}

EVX_EXPORT int evbuffer_remove_buffer(struct evbuffer *src, struct evbuffer *dst, size_t len)
{
    if (!src || !dst || src == dst || src->frozen_front || dst->frozen_back)
        return -1;
    if (len >= src->total) {
        size_t all = src->total;
        return evbuffer_add_buffer(dst, src) == 0 ? (int)all : -1;
    }
    size_t moved = 0;
    while (src->first && src->first->off <= len - moved) { /* whole chunks move */
        struct evx_chain *ch = src->first;
        src->first = ch->next;
        src->total -= ch->off;
        moved += ch->off;
        evx_buffer_append_chain(dst, ch);
    }
    if (!src->first)
        src->last = NULL;
    if (moved < len) { /* and the start of the next one is copied */
        struct evx_chain *ch = src->first;
        size_t k = len - moved;
        struct evx_chain *to = room(dst, k);
        if (!to)
            return -1;
        memcpy(to->buf + to->misalign + to->off, ch->buf + ch->misalign, k);
        to->off += k;
        dst->total += k;
        drop_front(src, k);
        moved += k;
    }
    drained(src);
    added(dst);
    return (int)moved;
}

EVX_EXPORT unsigned char *evbuffer_pullup(struct evbuffer *buf, ev_ssize_t size)
{
    if (!buf)
        return NULL;
    size_t want = size < 0 ? buf->total : (size_t)size;
    if (want > buf->total)
        return NULL;
    if (!want)
        return buf->first ? (unsigned char *)buf->first->buf + buf->first->misalign : NULL;
    if (buf->first->off >= want)
        return (unsigned char *)buf->first->buf + buf->first->misalign;
    if (buf->frozen_front)
        return NULL;
    struct evx_chain *ch = evx_chain_new(want);
    if (!ch)
        return NULL;
    ch->off = copy_front(buf, ch->buf, want);
    drop_front(buf, want);
    buf->total += want;
    ch->next = buf->first;
    buf->first = ch;
    if (!buf->last)
        buf->last = ch;
    return (unsigned char *)ch->buf;
}

/* The byte at offset `i` from the front (which must be inside the buffer). */
static int byte_at(const struct evbuffer *buf, size_t i)
{
    const struct evx_chain *ch = buf->first;
    while (i >= ch->off) {
        i -= ch->off;
        ch = ch->next;
    }
    return (unsigned char)ch->buf[ch->misalign + i];
}

/* Where the first line ends: the line's length and its end-of-line's; -1 when none yet. */
static int find_eol(const struct evbuffer *buf, enum evbuffer_eol_style style, size_t *line,
                    size_t *eol)
{
    size_t i = 0;
    for (const struct evx_chain *ch = buf->first; ch; ch = ch->next) {
        const char *p = ch->buf + ch->misalign;
        for (size_t k = 0; k < ch->off; k++, i++) {
            char c = p[k];
            int hit = style == EVBUFFER_EOL_NUL   ? c == '\0'
                      : style == EVBUFFER_EOL_ANY ? (c == '\r' || c == '\n')
                                                  : c == '\n';
            if (style == EVBUFFER_EOL_CRLF_STRICT)
                hit = c == '\n' && i > 0 && byte_at(buf, i - 1) == '\r';
            if (!hit)
                continue;
            *line = i, *eol = 1;
            if (style == EVBUFFER_EOL_ANY) {
                while (i + *eol < buf->total &&
                       (byte_at(buf, i + *eol) == '\r' || byte_at(buf, i + *eol) == '\n'))
                    (*eol)++;
            } else if ((style == EVBUFFER_EOL_CRLF || style == EVBUFFER_EOL_CRLF_STRICT) && i > 0 &&
                       byte_at(buf, i - 1) == '\r') {
                *line = i - 1, *eol = 2;
            }
            return 0;
        }
    }
    return -1;
}

EVX_EXPORT char *evbuffer_readln(struct evbuffer *buf, size_t *n_read_out,
                                 enum evbuffer_eol_style style)
{
    size_t line, eol;
    if (!buf || buf->frozen_front || style > EVBUFFER_EOL_NUL ||
        find_eol(buf, style, &line, &eol) < 0)
        return NULL;
    char *out = evx_malloc(line + 1);
    if (!out)
        return NULL;
    copy_front(buf, out, line);
    out[line] = '\0';
    drop_front(buf, line + eol);
    drained(buf);
    if (n_read_out)
        *n_read_out = line;
    return out;
}

EVX_EXPORT int evbuffer_peek(struct evbuffer *buf, ev_ssize_t len, void *start_at,
                             struct evbuffer_iovec *vec, int n_vec)
{
    if (!buf || start_at) /* struct evbuffer_ptr positions are not offered */
        return -1;
    size_t want = len < 0 ? buf->total : (size_t)len, got = 0;
    int n = 0;
    for (struct evx_chain *ch = buf->first; ch && got < want; ch = ch->next, n++) {
        if (n < n_vec) {
            vec[n].iov_base = ch->buf + ch->misalign;
            vec[n].iov_len = ch->off < want - got ? ch->off : want - got;
        }
        got += ch->off;
    }
    return n;
}

EVX_EXPORT int evbuffer_reserve_space(struct evbuffer *buf, ev_ssize_t size,
                                      struct evbuffer_iovec *vec, int n_vec)
{
    if (!buf || size <= 0 || n_vec < 1 || buf->frozen_back)
        return -1;
    struct evx_chain *ch = room(buf, (size_t)size);
    if (!ch)
        return -1;
    vec[0].iov_base = ch->buf + ch->misalign + ch->off;
    vec[0].iov_len = chain_space(ch);
    return 1;
}

EVX_EXPORT int evbuffer_commit_space(struct evbuffer *buf, struct evbuffer_iovec *vec, int n_vecs)
{
    if (!buf || n_vecs < 0 || n_vecs > 1 || buf->frozen_back)
        return -1;
    if (n_vecs == 0)
        return 0;
    struct evx_chain *ch = buf->last;
    if (!ch || vec[0].iov_base != ch->buf + ch->misalign + ch->off ||
        vec[0].iov_len > chain_space(ch))
        return -1; /* not the space evbuffer_reserve_space handed out */
    ch->off += vec[0].iov_len;
    buf->total += vec[0].iov_len;
    if (vec[0].iov_len)
        added(buf);
    return 0;
}

EVX_EXPORT int evbuffer_read(struct evbuffer *buf, evutil_socket_t fd, int howmuch)
{
    if (!buf || buf->frozen_back)
        return -1;
    size_t want = howmuch <= 0 ? 16384 : (size_t)howmuch;
    struct evx_chain *ch = room(buf, want);
    if (!ch)
        return -1;
    ssize_t n = evx_sys_read(fd, ch->buf + ch->misalign + ch->off, want);
    if (n <= 0)
        return (int)n;
    ch->off += (size_t)n;
    buf->total += (size_t)n;
    added(buf);
    return (int)n;
}

EVX_EXPORT int evbuffer_write_atmost(struct evbuffer *buf, evutil_socket_t fd, ev_ssize_t howmuch)
{
    if (!buf || buf->frozen_front)
        return -1;
    size_t want = howmuch < 0 || (size_t)howmuch > buf->total ? buf->total : (size_t)howmuch;
    struct evbuffer_iovec iov[EVX_IOV_MAX];
    int n = evbuffer_peek(buf, (ev_ssize_t)want, NULL, iov, EVX_IOV_MAX);
    if (n > EVX_IOV_MAX)
        n = EVX_IOV_MAX;
    if (!n)
        return 0;
    ssize_t w = evx_sys_writev(fd, iov, n);
    if (w <= 0)
        return (int)w;
    drop_front(buf, (size_t)w);
    drained(buf);
    return (int)w;
}

EVX_EXPORT int evbuffer_write(struct evbuffer *buf, evutil_socket_t fd)
{
    return evbuffer_write_atmost(buf, fd, -1);
}

EVX_EXPORT int evbuffer_freeze(struct evbuffer *buf, int at_front)
{
    if (!buf)
        return -1;
    if (at_front)
        buf->frozen_front++;
    else
        buf->frozen_back++;
    return 0;
}

EVX_EXPORT int evbuffer_unfreeze(struct evbuffer *buf, int at_front)
{
    int *f = buf ? (at_front ? &buf->frozen_front : &buf->frozen_back) : NULL;
    if (!f || *f == 0)
        return -1;
    (*f)--;
    return 0;
}

/* ---- libevent 1.x's names (<event2/buffer_compat.h>) ---- */

EVX_EXPORT char *evbuffer_readline(struct evbuffer *buf)
{
    return evbuffer_readln(buf, NULL, EVBUFFER_EOL_ANY);
}

EVX_EXPORT int evbuffer_setcb(struct evbuffer *buf, evbuffer_cb cb, void *cbarg)
{
    if (!buf)
        return -1;
    buf->cb = cb;
    buf->cbarg = cbarg;
    buf->cb_len = buf->total;
    return 0;
}

EVX_EXPORT unsigned char *evbuffer_find(struct evbuffer *buf, const unsigned char *what,
                                        size_t len)
{
    if (!buf || !what || len > buf->total)
        return NULL;
    for (size_t i = 0; i + len <= buf->total; i++) {
        size_t k = 0;
        while (k < len && byte_at(buf, i + k) == what[k])
            k++;
        if (k == len) {
            unsigned char *p = evbuffer_pullup(buf, (ev_ssize_t)(i + len));
            return p ? p + i : NULL;
        }
    }
    return NULL;
}
