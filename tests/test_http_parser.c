/* SPDX-License-Identifier: MIT */
/* The HTTP/1.1 request parser and chunked decoder: every framing trap as its own case. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "iomux/http.h"

enum { CAP = 128 };

struct parsed {
    mux_http_request_t req;
    mux_http_header_t h[CAP];
};

/* Parses `s` whole, with the default limits. */
static ssize_t parse(struct parsed *p, const char *s)
{
    memset(p, 0, sizeof *p);
    p->req.headers = p->h;
    p->req.headers_cap = CAP;
    return mux_http_parse_request(&p->req, s, strlen(s), 0, NULL);
}

static int str_is(mux_http_str_t s, const char *lit)
{
    return s.len == strlen(lit) && memcmp(s.base, lit, s.len) == 0;
}

/* Expects `s` refused with `status`. */
static void refused(const char *s, int status)
{
    struct parsed p;
    ssize_t r = parse(&p, s);
    if (r != -EBADMSG || p.req.status != status)
        fprintf(stderr, "request: %s\n", s);
    CHECK_EQ(r, -EBADMSG);
    CHECK_EQ(p.req.status, status);
}

CORE_TEST(http_parse_simple_get_fields_and_length) {
    struct parsed p;
    const char *s = "GET /index.html?q=1 HTTP/1.1\r\nHost: example.com\r\n"
                    "User-Agent:  curl/7.88  \r\nAccept: */*\r\n\r\nNEXT";
    ssize_t r = parse(&p, s);
    CHECK_EQ(r, (ssize_t)(strlen(s) - 4));
    CHECK(str_is(p.req.method, "GET"));
    CHECK(str_is(p.req.target, "/index.html?q=1"));
    CHECK_EQ(p.req.version, 11);
    CHECK_EQ(p.req.nheaders, 3);
    CHECK(str_is(p.req.headers[1].name, "User-Agent"));
    CHECK(str_is(p.req.headers[1].value, "curl/7.88")); /* white space around it trimmed */
    CHECK(str_is(p.req.host, "example.com"));
    CHECK_EQ(p.req.flags, MUX_HTTP_KEEP_ALIVE);
    CHECK_EQ(p.req.content_length, 0);
}

/* Every prefix of a request is -EAGAIN; the whole is its length, fed in one call or a byte
 * at a time with prev_len. */
CORE_TEST(http_parse_every_prefix_needs_more_and_bytewise_feeding_agrees) {
    const char *s = "\r\nPOST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                    "X-Empty:\r\nX-Tab:\tv\t\r\n\r\n";
    size_t n = strlen(s);
    struct parsed p;
    for (size_t i = 0; i < n; i++) {
        memset(&p, 0, sizeof p);
        p.req.headers = p.h;
        p.req.headers_cap = CAP;
        ssize_t r = mux_http_parse_request(&p.req, s, i, 0, NULL);
        if (r != -EAGAIN)
            fprintf(stderr, "prefix of %zu bytes\n", i);
        CHECK_EQ(r, -EAGAIN);
    }
    memset(&p, 0, sizeof p);
    p.req.headers = p.h;
    p.req.headers_cap = CAP;
    ssize_t r = -EAGAIN;
    for (size_t i = 1; i <= n; i++) {
        r = mux_http_parse_request(&p.req, s, i, i - 1, NULL);
        CHECK_EQ(r, i < n ? -EAGAIN : (ssize_t)n);
    }
    CHECK_EQ(p.req.content_length, 5);
    CHECK_EQ(p.req.nheaders, 4);
    CHECK(str_is(p.req.headers[2].value, ""));
    CHECK(str_is(p.req.headers[3].value, "v"));
}

CORE_TEST(http_parse_lone_lf_ends_lines_and_pipelined_requests_split) {
    struct parsed p;
    const char *two = "GET /a HTTP/1.1\nHost: h\n\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
    ssize_t r = parse(&p, two);
    CHECK_EQ(r, (ssize_t)strlen("GET /a HTTP/1.1\nHost: h\n\n"));
    CHECK(str_is(p.req.target, "/a"));
    ssize_t r2 = parse(&p, two + r);
    CHECK_EQ(r2, (ssize_t)strlen(two + r));
    CHECK(str_is(p.req.target, "/b"));
}

CORE_TEST(http_parse_versions_keep_alive_and_expect) {
    struct parsed p;
    CHECK_GT(parse(&p, "GET / HTTP/1.0\r\n\r\n"), 0);
    CHECK_EQ(p.req.version, 10);
    CHECK_EQ(p.req.flags, 0); /* 1.0 closes by default; no Host needed */
    CHECK_GT(parse(&p, "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), 0);
    CHECK_EQ(p.req.flags, MUX_HTTP_KEEP_ALIVE);
    CHECK_GT(parse(&p, "GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade, close\r\n\r\n"), 0);
    CHECK_EQ(p.req.flags, 0);
    CHECK_GT(parse(&p, "GET / HTTP/1.7\r\nHost: h\r\n\r\n"), 0);
    CHECK_EQ(p.req.version, 11); /* a later 1.x reads as 1.1 */
    CHECK_GT(parse(&p, "PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n"
                       "Content-Length: 3\r\n\r\n"),
             0);
    CHECK_EQ(p.req.flags, MUX_HTTP_KEEP_ALIVE | MUX_HTTP_EXPECT_CONTINUE);
    CHECK_GT(parse(&p, "PUT /f HTTP/1.0\r\nExpect: 100-continue\r\n\r\n"), 0);
    CHECK_EQ(p.req.flags, 0); /* ignored in HTTP/1.0 (RFC 9110, 10.1.1) */
    refused("PUT /f HTTP/1.1\r\nHost: h\r\nExpect: something\r\n\r\n", 417);
    refused("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505);
    refused("GET / HTTP/0.9\r\n\r\n", 505);
    refused("GET / HTTP/1\r\nHost: h\r\n\r\n", 400);
    refused("GET / HTTP/1.10\r\nHost: h\r\n\r\n", 400);
    refused("GET / http/1.1\r\nHost: h\r\n\r\n", 400);
    refused("GET /\r\n\r\n", 400);
}

/* A field value is scanned eight bytes at a time and then straight to the first byte that
 * needs a look: a tab at any offset of a word is part of the value, obs-text too, and a
 * control byte or DEL after the tab, in the same word or the next, is refused. */
CORE_TEST(http_parse_field_values_with_a_tab_at_every_offset) {
    for (int k = 0; k < 16; k++) {
        char v[64], s[160];
        memset(v, 'a', (size_t)k + 1); /* a value's leading white space is not its own */
        strcpy(v + k + 1, "\tb\xe9" "cdefghij"); /* a tab, a letter, obs-text, eight more */
        snprintf(s, sizeof s, "GET / HTTP/1.1\r\nHost: h\r\nX: %s\r\n\r\n", v);
        struct parsed p;
        CHECK_EQ(parse(&p, s), (ssize_t)strlen(s));
        CHECK_EQ(p.req.nheaders, 2);
        CHECK(str_is(p.req.headers[1].value, v));
        for (int bad = 0; bad < 2; bad++) {
            for (int at = 1; at < 12; at++) { /* after the tab, in its word or the next */
                char w[64];
                strcpy(w, v);
                w[k + 1 + at] = bad ? '\x7f' : '\x01';
                snprintf(s, sizeof s, "GET / HTTP/1.1\r\nHost: h\r\nX: %s\r\n\r\n", w);
                refused(s, 400);
            }
        }
    }
}

CORE_TEST(http_parse_request_line_traps) {
    refused("G@T / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    refused(" GET / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    refused("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    refused("GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400);
    refused("GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    refused("GET /\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    refused("GET /\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    refused("GET / HTTP/1.1\rHost: h\r\n\r\n", 400);
    /* A NUL in the target */
    struct parsed p;
    const char nul[] = "GET /a\0b HTTP/1.1\r\nHost: h\r\n\r\n";
    memset(&p, 0, sizeof p);
    p.req.headers = p.h;
    p.req.headers_cap = CAP;
    CHECK_EQ(mux_http_parse_request(&p.req, nul, sizeof nul - 1, 0, NULL), -EBADMSG);
    CHECK_EQ(p.req.status, 400);
}

CORE_TEST(http_parse_field_traps) {
    refused("GET / HTTP/1.1\r\nHost: h\r\nX-A : v\r\n\r\n", 400); /* space before colon */
    refused("GET / HTTP/1.1\r\nHost: h\r\nX-A: v\r\n  folded\r\n\r\n", 400); /* obs-fold */
    refused("GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\nX(A): v\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x01b\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x7f\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\rb\r\n\r\n", 400);
    /* obs-text in a value is allowed */
    struct parsed p;
    CHECK_GT(parse(&p, "GET / HTTP/1.1\r\nHost: h\r\nX-A: caf\xc3\xa9\r\n\r\n"), 0);
    CHECK(str_is(p.req.headers[1].value, "caf\xc3\xa9"));
    refused("GET / HTTP/1.1\r\n\r\n", 400);                       /* no Host in 1.1 */
    refused("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400); /* two */
}

CORE_TEST(http_parse_framing_traps) {
    struct parsed p;
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
            "Transfer-Encoding: chunked\r\n\r\n",
            400);
    refused("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
            "Transfer-Encoding: chunked\r\n\r\n",
            400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n", 400);
    CHECK_GT(parse(&p, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"), 0);
    CHECK_EQ(p.req.flags, MUX_HTTP_KEEP_ALIVE | MUX_HTTP_CHUNKED);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 4\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +3\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3x\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: ,\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1048577\r\n\r\n", 413);
    CHECK_GT(parse(&p, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1048576\r\n\r\n"), 0);
    CHECK_EQ(p.req.content_length, 1048576);
    CHECK_GT(parse(&p, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\n"
                       "Content-Length: 7, 7\r\n\r\n"),
             0);
    CHECK_EQ(p.req.content_length, 7); /* the same length repeated is one length */
}

CORE_TEST(http_parse_limits_414_431_and_caller_array) {
    struct parsed p;
    char *buf = malloc(200000);
    CHECK(buf != NULL);
    /* A target of 8 KB passes; one byte more is 414, even before the head has ended. */
    int n = sprintf(buf, "GET /");
    memset(buf + n, 'a', 8191);
    n += 8191;
    n += sprintf(buf + n, " HTTP/1.1\r\nHost: h\r\n\r\n");
    CHECK_EQ(parse(&p, buf), n);
    n = sprintf(buf, "GET /");
    memset(buf + n, 'a', 8192);
    buf[n + 8192] = 0;
    refused(buf, 414);
    /* A head over 64 KB is 431 as soon as that many bytes have come. */
    n = sprintf(buf, "GET / HTTP/1.1\r\nHost: h\r\n");
    while (n < 70000)
        n += sprintf(buf + n, "X-Pad: %0100d\r\n", 0);
    refused(buf, 431);
    /* 100 fields pass, 101 are 431; and a caller's array smaller than that is its limit. */
    n = sprintf(buf, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < 99; i++)
        n += sprintf(buf + n, "X-%d: v\r\n", i);
    strcpy(buf + n, "\r\n");
    CHECK_GT(parse(&p, buf), 0);
    CHECK_EQ(p.req.nheaders, 100);
    sprintf(buf + n, "X-last: v\r\n\r\n");
    refused(buf, 431);
    memset(&p, 0, sizeof p);
    p.req.headers = p.h;
    p.req.headers_cap = 2;
    const char *three = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n";
    CHECK_EQ(mux_http_parse_request(&p.req, three, strlen(three), 0, NULL), -EBADMSG);
    CHECK_EQ(p.req.status, 431);
    /* Limits of the caller's own. */
    mux_http_limits_t lim = {.max_target = 4, .max_head = 64};
    memset(&p, 0, sizeof p);
    p.req.headers = p.h;
    p.req.headers_cap = CAP;
    const char *t5 = "GET /abcd HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK_EQ(mux_http_parse_request(&p.req, t5, strlen(t5), 0, &lim), -EBADMSG);
    CHECK_EQ(p.req.status, 414);
    free(buf);
}

CORE_TEST(http_parse_garbage_refused_at_the_first_call_and_bad_arguments) {
    struct parsed p;
    memset(&p, 0, sizeof p);
    p.req.headers = p.h;
    p.req.headers_cap = CAP;
    /* Not a request at all, and the head has not ended: refused at once. */
    CHECK_EQ(mux_http_parse_request(&p.req, "\x16\x03\x01\x02", 4, 0, NULL), -EBADMSG);
    CHECK_EQ(p.req.status, 400);
    CHECK_EQ(mux_http_parse_request(NULL, "x", 1, 0, NULL), -EINVAL);
    CHECK_EQ(mux_http_parse_request(&p.req, NULL, 1, 0, NULL), -EINVAL);
    p.req.headers = NULL;
    CHECK_EQ(mux_http_parse_request(&p.req, "x", 1, 0, NULL), -EINVAL);
}

/* ---- chunked ---- */

/* Decodes `in` fed in pieces of `step` bytes; returns the result of the last call and
 * writes the data to `out`, its length to *outlen, and the leftover to *left. */
static ssize_t chunked(const char *in, size_t n, size_t step, char *out, size_t *outlen,
                       size_t *left)
{
    mux_http_chunked_t d;
    mux_http_chunked_init(&d);
    char piece[4096];
    *outlen = 0;
    ssize_t r = -EAGAIN;
    for (size_t i = 0; i < n && r == -EAGAIN; i += step) {
        size_t len = n - i < step ? n - i : step;
        memcpy(piece, in + i, len);
        size_t got = len;
        r = mux_http_chunked_decode(&d, piece, &got);
        if (r == -EBADMSG)
            return r;
        memcpy(out + *outlen, piece, got);
        *outlen += got;
        if (r >= 0)
            *left = (size_t)r + (n - i - len);
    }
    return r;
}

CORE_TEST(http_chunked_decodes_in_any_split_with_extensions_and_trailers) {
    const char *body = "5;ext=1;q=\"a b\"\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n"
                       "0\r\nX-Trailer: yes\r\nX-Other:\r\n\r\nGET /next";
    size_t n = strlen(body);
    for (size_t step = 1; step <= n; step++) {
        char out[256];
        size_t outlen, left = 0;
        ssize_t r = chunked(body, n, step, out, &outlen, &left);
        CHECK_GE(r, 0);
        CHECK_EQ(outlen, 31);
        CHECK(memcmp(out, "helloabcdefghijklmnopqrstuvwxyz", 31) == 0);
        CHECK_EQ(left, strlen("GET /next"));
    }
    /* Lone LFs, and an empty body */
    char out[64];
    size_t outlen, left = 9;
    CHECK_EQ(chunked("3\nabc\n0\n\n", 9, 9, out, &outlen, &left), 0);
    CHECK_EQ(outlen, 3);
    CHECK_EQ(chunked("0\r\n\r\n", 5, 5, out, &outlen, &left), 0);
    CHECK_EQ(outlen, 0);
}

CORE_TEST(http_chunked_traps) {
    static const char *bad[] = {
        "x\r\n",                        /* not hex */
        "\r\n",                         /* no size */
        "5\r\nhelloX\r\n",              /* no CRLF after the data */
        "5\r\nhello\rX",                /* CR without LF */
        "1000000000000000\r\n",         /* 16 hex digits: past the limit */
        "5;\x01\r\nhello\r\n0\r\n\r\n", /* a control byte in an extension */
        "0\r\nBad Field: v\r\n\r\n",    /* not a token */
        "0\r\nX-A: a\x01\r\n\r\n",      /* a control byte in a trailer */
        "0\r\n: v\r\n\r\n",             /* no field name */
        "0\r\n\rX",                     /* CR without LF at the end */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[64];
        size_t outlen, left;
        ssize_t r = chunked(bad[i], strlen(bad[i]), strlen(bad[i]), out, &outlen, &left);
        if (r != -EBADMSG)
            fprintf(stderr, "case %zu\n", i);
        CHECK_EQ(r, -EBADMSG);
    }
    /* A size line over 4 KB, in extensions */
    char *line = malloc(5000);
    CHECK(line != NULL);
    memset(line, ';', 4999);
    line[0] = '1';
    line[4999] = 0;
    char out[64];
    size_t outlen, left;
    CHECK_EQ(chunked(line, 4999, 4999 > 4096 ? 4096 : 4999, out, &outlen, &left), -EBADMSG);
    free(line);
    /* A decoder used after its body ended, and bad arguments */
    mux_http_chunked_t d;
    mux_http_chunked_init(&d);
    char b[8] = "0\r\n\r\n";
    size_t len = 5;
    CHECK_EQ(mux_http_chunked_decode(&d, b, &len), 0);
    len = 1;
    CHECK_EQ(mux_http_chunked_decode(&d, b, &len), -EBADMSG);
    CHECK_EQ(mux_http_chunked_decode(NULL, b, &len), -EINVAL);
    CHECK_EQ(mux_http_chunked_decode(&d, b, NULL), -EINVAL);
}

CORE_TEST(http_header_get_finds_fields_without_case) {
    struct parsed p;
    CHECK_GT(parse(&p, "GET / HTTP/1.1\r\nHost: h\r\nX-One: 1\r\nx-one: 2\r\n\r\n"), 0);
    mux_http_str_t v;
    CHECK_EQ(mux_http_header_get(&p.req, "X-ONE", &v), 0);
    CHECK(str_is(v, "1")); /* the first of them */
    CHECK_EQ(mux_http_header_get(&p.req, "host", &v), 0);
    CHECK(str_is(v, "h"));
    CHECK_EQ(mux_http_header_get(&p.req, "X-Two", &v), -ENOENT);
    CHECK_EQ(mux_http_header_get(&p.req, "X-a-name-much-longer-than-any-field-name-in-this-request-"
                                          "at-all", &v),
             -ENOENT);
    CHECK_EQ(mux_http_header_get(NULL, "Host", &v), -EINVAL);
    CHECK_EQ(mux_http_header_get(&p.req, NULL, &v), -EINVAL);
    CHECK_EQ(mux_http_header_get(&p.req, "Host", NULL), -EINVAL);
}

/* Empty lines before the request line: up to 8 are skipped, CRLF or lone LF; a 9th is 400,
 * however the bytes come (a flood of them must not wait for a request line that never comes);
 * and they count against the head's limit. */
CORE_TEST(http_parse_empty_lines_before_the_request_are_capped_and_counted) {
    struct parsed p;
    char buf[512];
    int n = sprintf(buf, "\r\n\n\r\n\n\r\n\n\r\n\n");
    int head = sprintf(buf + n, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    CHECK_EQ(parse(&p, buf), n + head);
    CHECK(str_is(p.req.target, "/"));
    n = sprintf(buf, "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
    refused(buf, 400);
    /* Nine empty lines and nothing else yet: refused at once, not -EAGAIN. */
    refused("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n", 400);
    refused("\n\n\n\n\n\n\n\n\n", 400);
    /* Eight: more may come. */
    CHECK_EQ(parse(&p, "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n"), -EAGAIN);
    /* Fed a byte at a time with prev_len, the ninth is refused as it completes. */
    const char *flood = "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n";
    memset(&p, 0, sizeof p);
    p.req.headers = p.h;
    p.req.headers_cap = CAP;
    ssize_t r = -EAGAIN;
    size_t i = 0;
    while (r == -EAGAIN && i < strlen(flood)) {
        i++;
        r = mux_http_parse_request(&p.req, flood, i, i - 1, NULL);
    }
    CHECK_EQ(r, -EBADMSG);
    CHECK_EQ(p.req.status, 400);
    CHECK_EQ(i, 18);
    /* With a head limit of 42 bytes, a 27-byte head passes alone, but not after 8 empty
     * lines (16 bytes): 431. With 43, it passes after them. */
    mux_http_limits_t lim = {.max_head = 42};
    const char *fits = "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK_EQ(strlen(fits), 16 + 27);
    memset(&p, 0, sizeof p);
    p.req.headers = p.h;
    p.req.headers_cap = CAP;
    CHECK_EQ(mux_http_parse_request(&p.req, fits, strlen(fits), 0, &lim), -EBADMSG);
    CHECK_EQ(p.req.status, 431);
    CHECK_EQ(mux_http_parse_request(&p.req, fits + 16, strlen(fits) - 16, 0, &lim), 27);
    lim.max_head = 43;
    CHECK_EQ(mux_http_parse_request(&p.req, fits, strlen(fits), 0, &lim), 43);
}
