/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the HTTP request parser and the chunked decoder (tests/fuzz/run).
 *
 * Besides "no crash, no sanitizer report", it checks what the parser promises:
 *   - a parse returns the head's length (within the input, every string inside the head),
 *     -EAGAIN, or -EBADMSG with one of the statuses the header lists;
 *   - a complete head parses to the same result when it comes in two pieces (prev_len);
 *   - a chunked decode, whole or in two pieces, gives the same data and the same leftover,
 *     never more data than input.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iomux/http.h"

#define REQUIRE(e)                                                                                 \
    do {                                                                                           \
        if (!(e))                                                                                  \
            abort();                                                                               \
    } while (0)

enum { CAP = 128 };

static int inside(mux_http_str_t s, const uint8_t *base, size_t n)
{
    return s.len == 0 ||
           ((const uint8_t *)s.base >= base && (const uint8_t *)s.base + s.len <= base + n);
}

static ssize_t parse(mux_http_request_t *req, mux_http_header_t *h, const uint8_t *d, size_t n,
                     size_t prev, const mux_http_limits_t *lim)
{
    memset(req, 0, sizeof *req);
    req->headers = h;
    req->headers_cap = CAP;
    return mux_http_parse_request(req, (const char *)d, n, prev, lim);
}

static void check_head(const mux_http_request_t *req, ssize_t r, const uint8_t *d, size_t n)
{
    if (r == -EAGAIN)
        return;
    if (r == -EBADMSG) {
        int s = req->status;
        REQUIRE(s == 400 || s == 413 || s == 414 || s == 417 || s == 431 || s == 501 || s == 505);
        return;
    }
    REQUIRE(r > 0 && (size_t)r <= n);
    REQUIRE(req->method.len > 0 && req->target.len > 0);
    REQUIRE(inside(req->method, d, (size_t)r) && inside(req->target, d, (size_t)r));
    REQUIRE(inside(req->host, d, (size_t)r));
    REQUIRE(req->version == 10 || req->version == 11);
    REQUIRE(req->nheaders <= CAP);
    for (uint32_t i = 0; i < req->nheaders; i++) {
        REQUIRE(req->headers[i].name.len > 0);
        REQUIRE(inside(req->headers[i].name, d, (size_t)r));
        REQUIRE(inside(req->headers[i].value, d, (size_t)r));
    }
    if (req->flags & MUX_HTTP_CHUNKED)
        REQUIRE(req->content_length == 0 && req->version == 11);
    REQUIRE(req->content_length <= MUX_HTTP_DEFAULT_MAX_BODY);
}

/* Decodes d[0..n) split at `cut`; returns the result and the data in out/outlen. */
static ssize_t decode(const uint8_t *d, size_t n, size_t cut, uint8_t *out, size_t *outlen,
                      size_t *left)
{
    mux_http_chunked_t st;
    mux_http_chunked_init(&st);
    *outlen = 0;
    *left = 0;
    size_t pieces[2] = {cut, n - cut};
    size_t at = 0;
    ssize_t r = -EAGAIN;
    for (int p = 0; p < 2 && r == -EAGAIN; p++) {
        size_t len = pieces[p];
        memcpy(out + *outlen, d + at, len); /* decoded in place, at the output's end */
        size_t got = len;
        r = mux_http_chunked_decode(&st, (char *)out + *outlen, &got);
        if (r == -EBADMSG)
            return r;
        REQUIRE(got <= len);
        *outlen += got;
        at += len;
        if (r >= 0) {
            REQUIRE((size_t)r <= len);
            *left = (size_t)r + (n - at);
        }
    }
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static mux_http_header_t h[CAP], h2[CAP];
    mux_http_request_t req, req2;
    ssize_t r = parse(&req, h, d, n, 0, NULL);
    check_head(&req, r, d, n);

    /* Small limits reach the 414 and 431 paths with short inputs. */
    mux_http_limits_t lim = {.max_head = 96, .max_target = 16, .max_headers = 3, .max_body = 50};
    mux_http_request_t small;
    check_head(&small, parse(&small, h2, d, n, 0, &lim), d, n);

    /* The same head, complete, in two pieces: the same answer. */
    if (r > 0 && n > 1) {
        size_t cut = d[0] % n;
        ssize_t a = parse(&req2, h2, d, cut, 0, NULL);
        REQUIRE(a == -EAGAIN || a == -EBADMSG || a == r);
        if (a == -EAGAIN) {
            ssize_t b = parse(&req2, h2, d, n, cut, NULL);
            REQUIRE(b == r);
            REQUIRE(req2.nheaders == req.nheaders && req2.flags == req.flags &&
                    req2.content_length == req.content_length);
        }
    }

    /* The body as chunked (after a chunked head, else the whole input), whole and split. */
    const uint8_t *body = d;
    size_t blen = n;
    if (r > 0 && (req.flags & MUX_HTTP_CHUNKED)) {
        body = d + r;
        blen = n - (size_t)r;
    }
    if (blen == 0)
        return 0;
    uint8_t *o1 = malloc(blen), *o2 = malloc(blen);
    REQUIRE(o1 && o2);
    size_t l1, l2, left1, left2;
    ssize_t r1 = decode(body, blen, blen, o1, &l1, &left1);
    ssize_t r2 = decode(body, blen, body[blen - 1] % blen, o2, &l2, &left2);
    REQUIRE(r1 == -EAGAIN || r1 == -EBADMSG || r1 >= 0);
    if (r1 >= 0 || r2 >= 0) {
        REQUIRE(r1 >= 0 && r2 >= 0);
        REQUIRE(l1 == l2 && memcmp(o1, o2, l1) == 0 && left1 == left2);
        REQUIRE(l1 + left1 <= blen);
    } else {
        REQUIRE(r1 == r2);
    }
    free(o1);
    free(o2);
    return 0;
}
