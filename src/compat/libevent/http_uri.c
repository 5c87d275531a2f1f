/* SPDX-License-Identifier: MIT */
/* libiomux-event: evhttp's key/value lists (header fields, query arguments), the
 * percent-encoding helpers, and URIs split into their parts as RFC 3986 writes them. Strings
 * handed to the program come from the emulation's allocator (event_set_mem_functions'),
 * which is malloc unless the program chose another, as with libevent. */
#include "http_internal.h"

#include <string.h>

char *evx_strndup(const char *s, size_t n)
{
    char *out = evx_malloc(n + 1);
    if (!out)
        return NULL;
    memcpy(out, s, n);
    out[n] = '\0';
    return out;
}

/* ---- key/value lists ---- */

EVX_EXPORT const char *evhttp_find_header(const struct evkeyvalq *headers, const char *key)
{
    if (!headers || !key)
        return NULL;
    for (struct evkeyval *kv = headers->tqh_first; kv; kv = kv->next.tqe_next)
        if (evutil_ascii_strcasecmp(kv->key, key) == 0)
            return kv->value;
    return NULL;
}

static void kv_unlink(struct evkeyvalq *headers, struct evkeyval *kv)
{
    if (kv->next.tqe_next)
        kv->next.tqe_next->next.tqe_prev = kv->next.tqe_prev;
    else
        headers->tqh_last = kv->next.tqe_prev;
    *kv->next.tqe_prev = kv->next.tqe_next;
    evx_free(kv->key);
    evx_free(kv->value);
    evx_free(kv);
}

EVX_EXPORT int evhttp_remove_header(struct evkeyvalq *headers, const char *key)
{
    if (!headers || !key)
        return -1;
    for (struct evkeyval *kv = headers->tqh_first; kv; kv = kv->next.tqe_next) {
        if (evutil_ascii_strcasecmp(kv->key, key) == 0) {
            kv_unlink(headers, kv);
            return 0;
        }
    }
    return -1;
}

EVX_EXPORT void evhttp_clear_headers(struct evkeyvalq *headers)
{
    if (!headers)
        return;
    while (headers->tqh_first)
        kv_unlink(headers, headers->tqh_first);
    headers->tqh_last = &headers->tqh_first;
}

/* Appends without checking (query arguments may hold any byte). */
static int kv_append(struct evkeyvalq *headers, const char *key, const char *value)
{
    struct evkeyval *kv = evx_calloc(1, sizeof *kv);
    if (!kv)
        return -1;
    kv->key = evx_strndup(key, strlen(key));
    kv->value = evx_strndup(value, strlen(value));
    if (!kv->key || !kv->value) {
        evx_free(kv->key);
        evx_free(kv->value);
        evx_free(kv);
        return -1;
    }
    kv->next.tqe_next = NULL;
    kv->next.tqe_prev = headers->tqh_last;
    *headers->tqh_last = kv;
    headers->tqh_last = &kv->next.tqe_next;
    return 0;
}

EVX_EXPORT int evhttp_add_header(struct evkeyvalq *headers, const char *key, const char *value)
{
    if (!headers || !key || !value || strpbrk(key, "\r\n"))
        return -1;
    /* A line break is allowed only as a continuation: followed by white space. */
    for (const char *p = strpbrk(value, "\r\n"); p; p = strpbrk(p + 1, "\r\n")) {
        if (*p == '\r' && p[1] == '\n')
            p++;
        if (p[1] != ' ' && p[1] != '\t')
            return -1;
    }
    return kv_append(headers, key, value);
}

/* ---- percent-encoding ---- */

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* `plus`: 1 reads '+' as a space everywhere, 0 nowhere, -1 after the first '?'. */
static size_t decode_into(const char *s, size_t n, char *out, int plus)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '?' && plus < 0)
            plus = 1;
        if (c == '+' && plus > 0) {
            out[o++] = ' ';
        } else if (c == '%' && i + 2 < n && hexval((unsigned char)s[i + 1]) >= 0 &&
                   hexval((unsigned char)s[i + 2]) >= 0) {
            out[o++] =
                (char)(hexval((unsigned char)s[i + 1]) * 16 + hexval((unsigned char)s[i + 2]));
            i += 2;
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
    return o;
}

size_t evx_uri_decode_into(const char *s, size_t n, char *out, int plus)
{
    return decode_into(s, n, out, plus);
}

static char *decode(const char *uri, int plus, size_t *size_out)
{
    if (!uri)
        return NULL;
    size_t n = strlen(uri);
    char *out = evx_malloc(n + 1);
    if (!out)
        return NULL;
    size_t len = decode_into(uri, n, out, plus);
    if (size_out)
        *size_out = len;
    return out;
}

EVX_EXPORT char *evhttp_decode_uri(const char *uri)
{
    return decode(uri, -1, NULL);
}

EVX_EXPORT char *evhttp_uridecode(const char *uri, int decode_plus, size_t *size_out)
{
    return decode(uri, decode_plus ? 1 : 0, size_out);
}

static int unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

EVX_EXPORT char *evhttp_uriencode(const char *str, ev_ssize_t size, int space_to_plus)
{
    if (!str)
        return NULL;
    size_t n = size < 0 ? strlen(str) : (size_t)size;
    if (n > (SIZE_MAX - 1) / 3)
        return NULL;
    char *out = evx_malloc(n * 3 + 1), *o = out;
    if (!out)
        return NULL;
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)str[i];
        if (unreserved(c)) {
            *o++ = (char)c;
        } else if (c == ' ' && space_to_plus) {
            *o++ = '+';
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o = '\0';
    return out;
}

EVX_EXPORT char *evhttp_encode_uri(const char *str)
{
    return evhttp_uriencode(str, -1, 0);
}

EVX_EXPORT char *evhttp_htmlescape(const char *html)
{
    if (!html)
        return NULL;
    size_t n = 0;
    for (const char *p = html; *p; p++)
        n += *p == '&' ? 5 : *p == '<' || *p == '>' ? 4 : *p == '"' || *p == '\'' ? 6 : 1;
    char *out = evx_malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = html; *p; p++) {
        const char *rep = *p == '&'    ? "&amp;"
                          : *p == '<'  ? "&lt;"
                          : *p == '>'  ? "&gt;"
                          : *p == '"'  ? "&quot;"
                          : *p == '\'' ? "&#039;"
                                       : NULL;
        if (rep) {
            memcpy(o, rep, strlen(rep));
            o += strlen(rep);
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

/* ---- query strings ---- */

/* Splits `query` at '&' into key=value pairs, the values decoded ('+' as a space), the keys
 * as sent (libevent decodes only the values). */
static int parse_query(const char *query, struct evkeyvalq *headers)
{
    char *copy = evx_strndup(query, strlen(query));
    if (!copy)
        return -1;
    int rc = 0;
    for (char *arg = copy, *next; arg && *arg && rc == 0; arg = next) {
        next = strchr(arg, '&');
        if (next)
            *next++ = '\0';
        char *eq = strchr(arg, '=');
        if (!eq || eq == arg) {
            rc = -1;
            break;
        }
        *eq = '\0';
        char *value = eq + 1;
        decode_into(value, strlen(value), value, 1); /* never longer: in place */
        rc = kv_append(headers, arg, value);
    }
    evx_free(copy);
    if (rc < 0)
        evhttp_clear_headers(headers);
    return rc;
}

EVX_EXPORT int evhttp_parse_query_str(const char *uri, struct evkeyvalq *headers)
{
    if (!headers)
        return -1;
    /* As libevent: the list is set up here, whatever it held. */
    headers->tqh_first = NULL;
    headers->tqh_last = &headers->tqh_first;
    if (!uri)
        return 0;
    return parse_query(uri, headers);
}

EVX_EXPORT int evhttp_parse_query(const char *uri, struct evkeyvalq *headers)
{
    if (!headers)
        return -1;
    headers->tqh_first = NULL;
    headers->tqh_last = &headers->tqh_first;
    if (!uri)
        return 0;
    struct evhttp_uri *u = evhttp_uri_parse(uri);
    if (!u)
        return -1;
    const char *q = evhttp_uri_get_query(u);
    int rc = q ? parse_query(q, headers) : 0;
    evhttp_uri_free(u);
    return rc;
}

/* ---- URIs ---- */

struct evhttp_uri {
    char *scheme, *userinfo, *host, *path, *query, *fragment;
    int port;
};

EVX_EXPORT void evhttp_uri_free(struct evhttp_uri *uri)
{
    if (!uri)
        return;
    evx_free(uri->scheme);
    evx_free(uri->userinfo);
    evx_free(uri->host);
    evx_free(uri->path);
    evx_free(uri->query);
    evx_free(uri->fragment);
    evx_free(uri);
}

/* The bytes RFC 3986 allows in a path, query or fragment (pchar, '/', '?'): unreserved,
 * sub-delims, ':', '@', and '%' (its escapes are not checked, as libevent's). */
static int uri_char(unsigned char c)
{
    return unreserved(c) || (c && strchr("!$&'()*+,;=:@/?%", c) != NULL);
}

static int all_uri_chars(const char *s, size_t n, int lenient)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        /* Lenient: anything but controls, space and '#', which would end the part. */
        if (lenient ? (c <= ' ' || c == 0x7f) : !uri_char(c))
            return 0;
    }
    return 1;
}

/* The authority (userinfo@host:port): 0, or -1 when it is not well formed. */
static int parse_authority(struct evhttp_uri *u, const char *a, size_t n)
{
    const char *at = memchr(a, '@', n);
    if (at) {
        if (!(u->userinfo = evx_strndup(a, (size_t)(at - a))))
            return -1;
        n -= (size_t)(at + 1 - a);
        a = at + 1;
    }
    const char *host = a, *end = a + n, *port = NULL;
    size_t hlen;
    if (n && a[0] == '[') { /* an IP literal keeps its brackets out of the host */
        const char *close = memchr(a, ']', n);
        if (!close)
            return -1;
        host = a + 1;
        hlen = (size_t)(close - host);
        if (close + 1 < end) {
            if (close[1] != ':')
                return -1;
            port = close + 2;
        }
    } else {
        const char *colon = memchr(a, ':', n);
        hlen = colon ? (size_t)(colon - a) : n;
        if (colon)
            port = colon + 1;
    }
    u->port = -1;
    if (port && port < end) {
        long v = 0;
        for (const char *p = port; p < end; p++) {
            if (*p < '0' || *p > '9' || (v = v * 10 + (*p - '0')) > 65535)
                return -1;
        }
        u->port = (int)v;
    }
    u->host = evx_strndup(host, hlen);
    return u->host ? 0 : -1;
}

/* The scheme's length when `s` starts with one and its ':' (ALPHA *( ALPHA / DIGIT / "+" /
 * "-" / "." )), else 0. */
static size_t scheme_len(const char *s)
{
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return 0;
    size_t i = 1;
    while ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
           (s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '-' || s[i] == '.')
        i++;
    return s[i] == ':' ? i : 0;
}

EVX_EXPORT struct evhttp_uri *evhttp_uri_parse_with_flags(const char *source_uri, unsigned flags)
{
    if (!source_uri)
        return NULL;
    int lenient = (flags & EVHTTP_URI_NONCONFORMANT) != 0;
    struct evhttp_uri *u = evx_calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->port = -1;
    const char *p = source_uri;
    size_t sl = scheme_len(p);
    if (sl) {
        if (!(u->scheme = evx_strndup(p, sl)))
            goto fail;
        p += sl + 1;
    }
    if (p[0] == '/' && p[1] == '/') {
        p += 2;
        size_t n = strcspn(p, "/?#");
        if (parse_authority(u, p, n) < 0)
            goto fail;
        p += n;
    }
    size_t n = strcspn(p, "?#");
    if (!all_uri_chars(p, n, lenient) || !(u->path = evx_strndup(p, n)))
        goto fail;
    p += n;
    if (*p == '?') {
        n = strcspn(++p, "#");
        if (!all_uri_chars(p, n, lenient) || !(u->query = evx_strndup(p, n)))
            goto fail;
        p += n;
    }
    if (*p == '#') {
        n = strlen(++p);
        if (!all_uri_chars(p, n, lenient) || !(u->fragment = evx_strndup(p, n)))
            goto fail;
    }
    return u;
fail:
    evhttp_uri_free(u);
    return NULL;
}

EVX_EXPORT struct evhttp_uri *evhttp_uri_parse(const char *source_uri)
{
    return evhttp_uri_parse_with_flags(source_uri, 0);
}

EVX_EXPORT const char *evhttp_uri_get_scheme(const struct evhttp_uri *uri)
{
    return uri ? uri->scheme : NULL;
}

EVX_EXPORT const char *evhttp_uri_get_userinfo(const struct evhttp_uri *uri)
{
    return uri ? uri->userinfo : NULL;
}

EVX_EXPORT const char *evhttp_uri_get_host(const struct evhttp_uri *uri)
{
    return uri ? uri->host : NULL;
}

EVX_EXPORT int evhttp_uri_get_port(const struct evhttp_uri *uri)
{
    return uri ? uri->port : -1;
}

EVX_EXPORT const char *evhttp_uri_get_path(const struct evhttp_uri *uri)
{
    return uri ? uri->path : NULL;
}

EVX_EXPORT const char *evhttp_uri_get_query(const struct evhttp_uri *uri)
{
    return uri ? uri->query : NULL;
}

EVX_EXPORT const char *evhttp_uri_get_fragment(const struct evhttp_uri *uri)
{
    return uri ? uri->fragment : NULL;
}
