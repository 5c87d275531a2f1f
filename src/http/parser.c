/* SPDX-License-Identifier: MIT */
/* The HTTP/1.1 request parser and chunked decoder (include/iomux/http.h).
 *
 * The head is parsed in one pass once its end is in the buffer: the request line, then one
 * field per line, each checked as RFC 9110 and 9112 write them, then the framing fields
 * (Content-Length, Transfer-Encoding), Host, Connection and Expect are read from the fields
 * found. Before the end has come only the new bytes are searched for it, so a slow sender
 * costs linear time; the first call and a head over its limit are parsed as they are, so
 * that garbage, a long target or a long head is refused as soon as it can be.
 */
#include <errno.h>
#include <string.h>

#include "http/http_internal.h"
#include "internal.h"

/* tchar (RFC 9110, 5.6.2): the bytes of a token. */
/* clang-format off */
const uint8_t mux__http_tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
    ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};
/* clang-format on */

/* Eight bytes at a time (SWAR): a word is loaded, and one test tells whether any of its
 * bytes needs a look of its own; the byte loops after the word loops decide. */
#define MUX__ONES 0x0101010101010101ull
#define MUX__HIGH 0x8080808080808080ull
/* Nonzero when some byte of x is below n (n <= 128); or is `b`. */
#define MUX__ANY_BELOW(x, n) (((x)-MUX__ONES * (n)) & ~(x)&MUX__HIGH)
#define MUX__ANY_IS(x, b)    MUX__ANY_BELOW((x) ^ (MUX__ONES * (b)), 1)

static uint64_t mux__load8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The index in memory of the first byte a MUX__ANY_ test flagged in a word mux__load8 read
 * (m nonzero) on a little-endian machine, or 8 (look at the bytes one by one) elsewhere. The
 * lowest flagged byte is always a true one: a borrow runs from a byte to the ones above it,
 * never below; a flag above it may be false. So only that index is taken. */
static size_t mux__first_flagged(uint64_t m)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return (size_t)__builtin_ctzll(m) / 8;
#else /* big-endian: the byte first in memory is the top one, which a borrow may flag */
    (void)m;
    return 8;
#endif
}

/* A field value's bytes: HTAB, SP, VCHAR, obs-text. */
static int mux__vchar(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int mux__lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* `s` equals the lower-case `lit` without regard to case. */
static int mux__is(mux_http_str_t s, const char *lit)
{
    size_t n = strlen(lit);
    if (s.len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (mux__lower((unsigned char)s.base[i]) != lit[i])
            return 0;
    return 1;
}

/* Where the head ends: the index just past its empty line (CRLF CRLF, or with lone LFs),
 * searching from `from`; 0 when it has not come. Leading empty lines are not its end. */
static size_t mux__head_end(const char *buf, size_t len, size_t from, size_t start)
{
    for (size_t i = from < start ? start : from; i < len; i++) {
        const char *lf = memchr(buf + i, '\n', len - i);
        if (!lf)
            return 0;
        i = (size_t)(lf - buf);
        /* the line before this LF is empty: LF LF, or LF CR LF */
        if (i >= start + 1 && buf[i - 1] == '\n')
            return i + 1;
        if (i >= start + 2 && buf[i - 1] == '\r' && buf[i - 2] == '\n')
            return i + 1;
    }
    return 0;
}

/* Empty lines taken before a request line. RFC 9112 (2.2) asks a server to ignore at least
 * one (clients have sent a CRLF after a body); a few more are tolerated, and a client that
 * sends more is refused, so that a flood of them can neither grow the buffer nor be scanned
 * again at every read. */
#define MUX__HTTP_EMPTY_MAX 8

/* Empty lines before the request line: their length, at most MUX__HTTP_EMPTY_MAX + 1 of
 * them (*lines says how many). */
static size_t mux__skip_empty(const char *buf, size_t len, unsigned *lines)
{
    size_t i = 0;
    *lines = 0;
    while (i < len && *lines <= MUX__HTTP_EMPTY_MAX) {
        if (buf[i] == '\n')
            i++;
        else if (buf[i] == '\r' && i + 1 < len && buf[i + 1] == '\n')
            i += 2;
        else
            break;
        ++*lines;
    }
    return i;
}

struct mux__cursor {
    const char *p, *end;
};

static ssize_t mux__refuse(mux_http_request_t *req, int status)
{
    req->status = status;
    return -EBADMSG;
}

/* Takes a line ending (CRLF or LF). 1, or 0 when the next byte is not one (a lone CR too). */
static int mux__eol(struct mux__cursor *c)
{
    if (c->p < c->end && *c->p == '\n') {
        c->p++;
        return 1;
    }
    if (c->p + 1 < c->end && c->p[0] == '\r' && c->p[1] == '\n') {
        c->p += 2;
        return 1;
    }
    return 0;
}

/* The request line. 0, -EAGAIN (it is not all here: only at a first call or over the
 * limit), or a refusal. */
static ssize_t mux__request_line(mux_http_request_t *req, struct mux__cursor *c,
                                 const mux_http_limits_t *lim, int complete)
{
    const char *m = c->p;
    while (c->p < c->end && mux__http_tchar[(unsigned char)*c->p])
        c->p++;
    if (c->p == c->end)
        return complete ? mux__refuse(req, 400) : -EAGAIN;
    if (c->p == m || *c->p != ' ')
        return mux__refuse(req, 400);
    req->method = (mux_http_str_t){m, (size_t)(c->p - m)};
    const char *t = ++c->p;
    while (c->end - c->p >= 8 && (size_t)(c->p - t) + 8 <= lim->max_target) {
        uint64_t x = mux__load8(c->p); /* visible ASCII: 0x21 .. 0x7e */
        if (MUX__ANY_BELOW(x, 0x21) | MUX__ANY_IS(x, 0x7f) | (x & MUX__HIGH))
            break;
        c->p += 8;
    }
    while (c->p < c->end && (unsigned char)*c->p > 0x20 && (unsigned char)*c->p < 0x7f) {
        if ((size_t)(c->p - t) >= lim->max_target)
            return mux__refuse(req, 414);
        c->p++;
    }
    if (c->p == c->end)
        return complete ? mux__refuse(req, 400) : -EAGAIN;
    if (c->p == t || *c->p != ' ')
        return mux__refuse(req, 400); /* an empty target, or a byte no target may hold */
    req->target = (mux_http_str_t){t, (size_t)(c->p - t)};
    c->p++;
    /* HTTP-version = "HTTP/" DIGIT "." DIGIT */
    static const char proto[] = "HTTP/";
    for (size_t i = 0; i < 5; i++, c->p++) {
        if (c->p == c->end)
            return complete ? mux__refuse(req, 400) : -EAGAIN;
        if (*c->p != proto[i])
            return mux__refuse(req, 400);
    }
    if (c->end - c->p < 3)
        return complete ? mux__refuse(req, 400) : -EAGAIN;
    char major = c->p[0], minor = c->p[2];
    if (major < '0' || major > '9' || c->p[1] != '.' || minor < '0' || minor > '9')
        return mux__refuse(req, 400);
    c->p += 3;
    if (!mux__eol(c)) {
        if (!complete && (c->p == c->end || (*c->p == '\r' && c->p + 1 == c->end)))
            return -EAGAIN;
        return mux__refuse(req, 400);
    }
    if (major != '1')
        return mux__refuse(req, 505);
    req->version = minor == '0' ? 10 : 11;
    return 0;
}

/* One header field line, `c` at its start. 0 with the field stored, 1 at the empty line
 * that ends the head, -EAGAIN, or a refusal. */
static ssize_t mux__field(mux_http_request_t *req, struct mux__cursor *c, uint32_t max_fields,
                          int complete)
{
    if (mux__eol(c))
        return 1;
    if (c->p == c->end || (*c->p == '\r' && c->p + 1 == c->end))
        return complete ? mux__refuse(req, 400) : -EAGAIN;
    if (*c->p == ' ' || *c->p == '\t')
        return mux__refuse(req, 400); /* obs-fold, or white space before the first field */
    const char *n = c->p;
    while (c->p < c->end && mux__http_tchar[(unsigned char)*c->p])
        c->p++;
    if (c->p == c->end)
        return complete ? mux__refuse(req, 400) : -EAGAIN;
    if (c->p == n || *c->p != ':')
        return mux__refuse(req, 400); /* not a token, or white space before the colon */
    mux_http_str_t name = {n, (size_t)(c->p - n)};
    c->p++;
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
    const char *v = c->p;
    while (c->end - c->p >= 8) {
        uint64_t x = mux__load8(c->p); /* no control byte (a tab is looked at alone) */
        uint64_t m = MUX__ANY_BELOW(x, 0x20) | MUX__ANY_IS(x, 0x7f);
        if (!m) {
            c->p += 8;
            continue;
        }
        /* Straight to the first flagged byte, most often the line's CR, instead of a byte
         * loop up to it; a tab there is part of the value, and the scan goes on after it. */
        size_t k = mux__first_flagged(m);
        if (k == 8 || c->p[k] != '\t') {
            c->p += k == 8 ? 0 : k;
            break;
        }
        c->p += k + 1;
    }
    while (c->p < c->end && mux__vchar((unsigned char)*c->p))
        c->p++;
    const char *vend = c->p;
    while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
        vend--;
    if (!mux__eol(c)) {
        if (c->p == c->end || (*c->p == '\r' && c->p + 1 == c->end))
            return complete ? mux__refuse(req, 400) : -EAGAIN;
        return mux__refuse(req, 400); /* a control byte, or a lone CR */
    }
    if (req->nheaders == max_fields)
        return mux__refuse(req, 431);
    req->headers[req->nheaders++] = (mux_http_header_t){name, {v, (size_t)(vend - v)}};
    return 0;
}

/* Calls `fn` with each element of a comma-separated list (RFC 9110, 5.6.1), trimmed; empty
 * elements are skipped. Stops at the first nonzero return and returns it. */
static int mux__list(mux_http_str_t v, int (*fn)(mux_http_str_t e, void *arg), void *arg)
{
    size_t i = 0;
    while (i <= v.len) {
        size_t j = i;
        while (j < v.len && v.base[j] != ',')
            j++;
        size_t a = i, b = j;
        while (a < b && (v.base[a] == ' ' || v.base[a] == '\t'))
            a++;
        while (b > a && (v.base[b - 1] == ' ' || v.base[b - 1] == '\t'))
            b--;
        if (b > a) {
            int r = fn((mux_http_str_t){v.base + a, b - a}, arg);
            if (r)
                return r;
        }
        i = j + 1;
    }
    return 0;
}

struct mux__framing {
    int te_seen, chunked, chunked_last, other_coding, connection_close, connection_keep;
    int cl_seen, cl_elems;
    uint64_t cl;
};

static int mux__te_elem(mux_http_str_t e, void *arg)
{
    struct mux__framing *f = arg;
    /* A coding may carry parameters (";q=..."): only its name matters here. */
    size_t n = 0;
    while (n < e.len && mux__http_tchar[(unsigned char)e.base[n]])
        n++;
    mux_http_str_t name = {e.base, n};
    if (n == 0)
        return 400;
    if (mux__is(name, "chunked")) {
        if (f->chunked)
            return 400; /* chunked twice */
        f->chunked = 1;
        f->chunked_last = 1;
    } else {
        f->chunked_last = 0;
        f->other_coding = 1;
    }
    return 0;
}

static int mux__cl_elem(mux_http_str_t e, void *arg)
{
    struct mux__framing *f = arg;
    uint64_t v = 0;
    for (size_t i = 0; i < e.len; i++) {
        unsigned char d = (unsigned char)e.base[i];
        if (d < '0' || d > '9' || v > (UINT64_C(1) << 62) / 10)
            return 400;
        v = v * 10 + (d - '0');
    }
    if (f->cl_seen && v != f->cl)
        return 400; /* lengths that differ */
    f->cl_seen = 1;
    f->cl_elems++;
    f->cl = v;
    return 0;
}

static int mux__conn_elem(mux_http_str_t e, void *arg)
{
    struct mux__framing *f = arg;
    if (mux__is(e, "close"))
        f->connection_close = 1;
    else if (mux__is(e, "keep-alive"))
        f->connection_keep = 1;
    return 0;
}

/* Reads framing, Host, Connection and Expect from the fields. 0 or a refusal. */
static ssize_t mux__semantics(mux_http_request_t *req, const mux_http_limits_t *lim)
{
    struct mux__framing f;
    memset(&f, 0, sizeof f);
    int hosts = 0, expect_continue = 0, expect_other = 0;
    for (uint32_t i = 0; i < req->nheaders; i++) {
        mux_http_str_t n = req->headers[i].name, v = req->headers[i].value;
        int st = 0;
        switch (mux__lower((unsigned char)n.base[0])) {
        case 'c':
            if (mux__is(n, "content-length")) {
                int before = f.cl_elems;
                st = mux__list(v, mux__cl_elem, &f);
                if (!st && f.cl_elems == before)
                    st = 400; /* empty, or only commas */
            } else if (mux__is(n, "connection")) {
                st = mux__list(v, mux__conn_elem, &f);
            }
            break;
        case 't':
            if (mux__is(n, "transfer-encoding")) {
                f.te_seen = 1;
                st = mux__list(v, mux__te_elem, &f);
            }
            break;
        case 'h':
            if (mux__is(n, "host")) {
                req->host = v;
                hosts++;
            }
            break;
        case 'e':
            if (mux__is(n, "expect")) {
                if (mux__is(v, "100-continue"))
                    expect_continue = 1;
                else
                    expect_other = 1;
            }
            break;
        default:
            break;
        }
        if (st)
            return mux__refuse(req, st);
    }
    if (f.te_seen) {
        if (f.cl_seen || req->version == 10)
            return mux__refuse(req, 400);
        if (!f.chunked_last)
            return mux__refuse(req, 400); /* no way to tell where the body ends */
        if (f.other_coding)
            return mux__refuse(req, 501); /* gzip, chunked: a coding this server lacks */
        req->flags |= MUX_HTTP_CHUNKED;
    } else if (f.cl_seen) {
        if (f.cl > lim->max_body)
            return mux__refuse(req, 413);
        req->content_length = f.cl;
    }
    if (hosts > 1 || (hosts == 0 && req->version == 11))
        return mux__refuse(req, 400);
    if (req->version == 11) {
        if (expect_other)
            return mux__refuse(req, 417);
        if (expect_continue)
            req->flags |= MUX_HTTP_EXPECT_CONTINUE;
        if (!f.connection_close)
            req->flags |= MUX_HTTP_KEEP_ALIVE;
    } else if (f.connection_keep && !f.connection_close) {
        req->flags |= MUX_HTTP_KEEP_ALIVE;
    }
    return 0;
}

MUX_EXPORT ssize_t mux_http_parse_request(mux_http_request_t *req, const char *buf, size_t len,
                                          size_t prev_len, const mux_http_limits_t *lim)
{
    if (!req || (!buf && len) || (req->headers_cap && !req->headers) || (ssize_t)len < 0)
        return -EINVAL;
    mux_http_limits_t l = {0};
    if (lim)
        l = *lim;
    if (!l.max_head)
        l.max_head = MUX_HTTP_DEFAULT_MAX_HEAD;
    if (!l.max_target)
        l.max_target = MUX_HTTP_DEFAULT_MAX_TARGET;
    if (!l.max_headers)
        l.max_headers = MUX_HTTP_DEFAULT_MAX_HEADERS;
    if (!l.max_body)
        l.max_body = MUX_HTTP_DEFAULT_MAX_BODY;
    uint32_t max_fields = l.max_headers < req->headers_cap ? l.max_headers : req->headers_cap;

    unsigned empty;
    size_t start = mux__skip_empty(buf, len, &empty);
    if (empty > MUX__HTTP_EMPTY_MAX)
        return mux__refuse(req, 400);
    if (start + 1 == len && buf[start] == '\r')
        return -EAGAIN; /* an empty line's CR, or a bare one: the next byte says */
    size_t from = prev_len > 3 ? prev_len - 3 : 0;
    size_t end = mux__head_end(buf, len, from, start);
    /* The empty lines count against the head's limit too. */
    int over = (end ? end : len) > l.max_head;
    if (!end && !over && prev_len > 0)
        return -EAGAIN; /* checked at the first call; the rest waits for the end */
    size_t scan = end ? end : len;
    if (over && l.max_head < scan)
        scan = l.max_head > start ? l.max_head : start;

    req->nheaders = 0;
    req->flags = 0;
    req->content_length = 0;
    req->status = 0;
    req->version = 0;
    req->method = req->target = req->host = (mux_http_str_t){NULL, 0};
    struct mux__cursor c = {buf + start, buf + scan};
    int complete = end != 0 && !over;
    ssize_t r = mux__request_line(req, &c, &l, complete);
    if (r == -EAGAIN)
        return over ? mux__refuse(req, 431) : -EAGAIN;
    if (r < 0)
        return r;
    for (;;) {
        r = mux__field(req, &c, max_fields, complete);
        if (r == 1)
            break;
        if (r == -EAGAIN)
            return over ? mux__refuse(req, 431) : -EAGAIN;
        if (r < 0)
            return r;
    }
    r = mux__semantics(req, &l);
    if (r < 0)
        return r;
    return (ssize_t)(c.p - buf);
}

/* ---- chunked bodies ----------------------------------------------------------------- */

enum {
    CH_SIZE,      /* hex digits of a chunk size */
    CH_EXT,       /* after the size: extensions up to the line's end */
    CH_SIZE_LF,   /* the size line's CR was seen */
    CH_DATA,      /* chunk data */
    CH_DATA_CR,   /* the CRLF after the data */
    CH_DATA_LF,   /* its CR was seen */
    CH_TRAILER,   /* at the start of a trailer line (or the final empty line) */
    CH_TFIELD,    /* inside a trailer field line */
    CH_TFIELD_LF, /* a trailer line's CR was seen */
    CH_END_LF,    /* the final empty line's CR was seen */
};

#define MUX__CHUNK_LINE_MAX 4096u
#define MUX__TRAILER_MAX    16384u

MUX_EXPORT void mux_http_chunked_init(mux_http_chunked_t *d)
{
    if (d)
        memset(d, 0, sizeof *d);
}

static int mux__hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (unsigned char)mux__lower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

MUX_EXPORT ssize_t mux_http_chunked_decode(mux_http_chunked_t *d, char *buf, size_t *len)
{
    if (!d || !len || (!buf && *len))
        return -EINVAL;
    size_t in = *len, out = 0, i = 0;
    while (i < in) {
        unsigned char ch = (unsigned char)buf[i];
        switch (d->state) {
        case CH_SIZE: {
            int h = mux__hexval(ch);
            if (h >= 0) {
                if (d->hexdig == 15) /* 16 hex digits would pass 2^60 */
                    return -EBADMSG;
                d->left = d->left << 4 | (uint64_t)h;
                d->hexdig++;
                d->line++;
                i++;
                break;
            }
            if (d->hexdig == 0)
                return -EBADMSG;
            d->state = CH_EXT;
            break; /* this byte again, as an extension's or the line's end */
        }
        case CH_EXT:
            i++;
            if (++d->line > MUX__CHUNK_LINE_MAX)
                return -EBADMSG;
            if (ch == '\r') {
                d->state = CH_SIZE_LF;
            } else if (ch == '\n') {
                goto size_done;
            } else if (ch != ';' && ch != '=' && ch != ' ' && ch != '\t' && ch != '"' &&
                       ch != '\\' && !mux__http_tchar[ch] && ch < 0x80) {
                return -EBADMSG; /* not what chunk-ext = *( BWS ";" BWS ext-name ... ) has */
            }
            break;
        case CH_SIZE_LF:
            if (ch != '\n')
                return -EBADMSG;
            i++;
        size_done:
            d->line = 0;
            d->hexdig = 0;
            d->state = d->left ? CH_DATA : CH_TRAILER;
            break;
        case CH_DATA: {
            size_t n = in - i < d->left ? in - i : (size_t)d->left;
            if (out != i)
                memmove(buf + out, buf + i, n);
            out += n;
            i += n;
            d->left -= n;
            if (d->left == 0)
                d->state = CH_DATA_CR;
            break;
        }
        case CH_DATA_CR:
            i++;
            if (ch == '\r')
                d->state = CH_DATA_LF;
            else if (ch == '\n')
                d->state = CH_SIZE;
            else
                return -EBADMSG;
            break;
        case CH_DATA_LF:
            if (ch != '\n')
                return -EBADMSG;
            i++;
            d->state = CH_SIZE;
            break;
        case CH_TRAILER:
            i++;
            if (ch == '\n')
                goto body_done;
            if (ch == '\r') {
                d->state = CH_END_LF;
                break;
            }
            if (!mux__http_tchar[ch])
                return -EBADMSG; /* a field name starts with a token byte */
            d->line = 1;
            d->hexdig = 0; /* here: the colon was seen */
            d->state = CH_TFIELD;
            if (++d->trailer > MUX__TRAILER_MAX)
                return -EBADMSG;
            break;
        case CH_TFIELD:
            i++;
            if (++d->line > MUX__CHUNK_LINE_MAX || ++d->trailer > MUX__TRAILER_MAX)
                return -EBADMSG;
            if (!d->hexdig) { /* still in the name */
                if (ch == ':')
                    d->hexdig = 1;
                else if (!mux__http_tchar[ch])
                    return -EBADMSG;
            } else if (ch == '\r') {
                d->state = CH_TFIELD_LF;
            } else if (ch == '\n') {
                d->state = CH_TRAILER;
            } else if (!mux__vchar(ch)) {
                return -EBADMSG;
            }
            break;
        case CH_TFIELD_LF:
            if (ch != '\n')
                return -EBADMSG;
            i++;
            d->state = CH_TRAILER;
            break;
        case CH_END_LF:
            if (ch != '\n')
                return -EBADMSG;
            i++;
            goto body_done;
        default:
            return -EBADMSG; /* a decoder used after its body ended */
        }
    }
    *len = out;
    return -EAGAIN;
body_done:
    d->state = 0xff; /* ended: init again for the next body */
    *len = out;
    return (ssize_t)(in - i);
}
