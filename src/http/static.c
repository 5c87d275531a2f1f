/* SPDX-License-Identifier: MIT */
/* The static-file server's pure parts (http_internal.h): paths, ranges, dates, entity tags
 * and the escapes of names in URLs and HTML. Media types are mime.c's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "http/http_internal.h"

static int mux__hex(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int mux__http_path(const char *target, size_t len, char *out, size_t cap, int *dir, unsigned flags)
{
    if (!target || !out || cap == 0 || !dir)
        return -EINVAL;
    if (len == 0 || target[0] != '/')
        return -EINVAL;  /* origin-form only */
    size_t o = 0, i = 1; /* out[0 .. o): the segments kept, joined by '/' */
    for (;;) {
        /* One segment, decoded, after a '/' when it is not the first. */
        size_t start = o ? o + 1 : 0, p = start;
        if (start >= cap)
            return -ENAMETOOLONG;
        while (i < len && target[i] != '/' && target[i] != '?' && target[i] != '#') {
            unsigned char c = (unsigned char)target[i];
            if (c == '%') {
                int hi = i + 2 < len ? mux__hex((unsigned char)target[i + 1]) : -1;
                int lo = i + 2 < len ? mux__hex((unsigned char)target[i + 2]) : -1;
                if (hi < 0 || lo < 0)
                    return -EINVAL;
                c = (unsigned char)(hi << 4 | lo);
                if (c == 0)
                    return -EINVAL;
                if (c == '/')
                    return -EACCES;
                i += 3;
            } else {
                i++;
            }
            if (p + 1 >= cap)
                return -ENAMETOOLONG;
            out[p++] = (char)c;
        }
        size_t n = p - start;
        const char *seg = out + start;
        int names_dir =
            n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.');
        if (n == 2 && seg[0] == '.' && seg[1] == '.') {
            if (o == 0)
                return -EACCES; /* above the root */
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--; /* and the '/' before it */
        } else if (n > 0 && seg[0] == '.' && n != 1 && !(flags & MUX_HTTP_STATIC_DOTFILES) &&
                   !(o == 0 && n == 11 && memcmp(seg, ".well-known", 11) == 0)) {
            return -EACCES; /* a hidden name (RFC 8615's /.well-known/ excepted) */
        } else if (!names_dir) {
            if (o)
                out[o] = '/';
            o = p;
        }
        if (i >= len || target[i] != '/') {
            *dir = names_dir;
            break;
        }
        i++;
    }
    out[o] = 0;
    return 0;
}

/* Whether `seg`, n bytes, is one of Windows' device names, which name a device in every
 * folder: the part before the first '.', without trailing spaces, compared without regard to
 * case ("con", "NUL.txt", "com1 .log"), the digits including the superscripts ¹²³ in UTF-8. */
static int mux__win_device(const char *seg, size_t n)
{
    static const char *const names[] = {"con", "prn", "aux", "nul", "conin$", "conout$", "clock$"};
    size_t b = 0;
    while (b < n && seg[b] != '.')
        b++;
    while (b > 0 && seg[b - 1] == ' ')
        b--;
    char low[8];
    if (b < 3 || b > sizeof low)
        return 0;
    for (size_t i = 0; i < b; i++)
        low[i] = (char)(seg[i] >= 'A' && seg[i] <= 'Z' ? seg[i] + 32 : seg[i]);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == b && memcmp(low, names[i], b) == 0)
            return 1;
    if (memcmp(low, "com", 3) != 0 && memcmp(low, "lpt", 3) != 0)
        return 0;
    if (b == 4)
        return low[3] >= '0' && low[3] <= '9';
    return b == 5 && (unsigned char)low[3] == 0xc2 &&
           ((unsigned char)low[4] == 0xb9 || (unsigned char)low[4] == 0xb2 ||
            (unsigned char)low[4] == 0xb3);
}

int mux__http_win_name(const char *rel)
{
    for (const char *seg = rel; *seg;) {
        size_t n = 0;
        for (; seg[n] && seg[n] != '/'; n++) {
            unsigned char c = (unsigned char)seg[n];
            /* '\\' would read as a separator, ':' as a drive or a stream ("a::$DATA"); the
             * others cannot be in a name, '*' and '?' would be patterns to some calls. */
            if (c < 0x20 || c == 0x7f || strchr("\\:*?\"<>|", c))
                return -ENOENT;
        }
        /* Windows drops a name's trailing dots and spaces ("index.html." opens index.html),
         * which would pass a check by the name's end by. */
        if (n && (seg[n - 1] == '.' || seg[n - 1] == ' '))
            return -ENOENT;
        if (mux__win_device(seg, n))
            return -ENOENT;
        seg += n + (seg[n] == '/');
    }
    return 0;
}

/* Digits at s[*i ..): a number below 2^62, or -1 when there is none or it is too big. */
static int64_t mux__digits(mux_http_str_t s, size_t *i)
{
    size_t start = *i;
    int64_t v = 0;
    while (*i < s.len && s.base[*i] >= '0' && s.base[*i] <= '9') {
        if (v > ((int64_t)1 << 62) / 10)
            return -1;
        v = v * 10 + (s.base[*i] - '0');
        (*i)++;
    }
    return *i == start ? -1 : v;
}

/* One range-spec at v[*i ..) (RFC 9110, 14.1.1): "a-b", "a-" (*b -1) or the suffix "-b" (*a
 * -1). 0, or -1 when it is malformed or its last byte comes before its first. */
static int mux__range_spec(mux_http_str_t v, size_t *i, int64_t *a, int64_t *b)
{
    *a = *b = -1;
    if (*i < v.len && v.base[*i] == '-') {
        (*i)++;
        *b = mux__digits(v, i);
        return *b < 0 ? -1 : 0;
    }
    *a = mux__digits(v, i);
    if (*a < 0 || *i >= v.len || v.base[*i] != '-')
        return -1;
    (*i)++;
    if (*i < v.len && v.base[*i] >= '0' && v.base[*i] <= '9') {
        *b = mux__digits(v, i);
        if (*b < 0 || *b < *a)
            return -1;
    }
    return 0;
}

/* Merges the ranges that overlap or touch, and keeps the rest in the order they were asked
 * (each merged range takes the place of the first of its pieces). n is at most
 * MUX_HTTP_STATIC_RANGES_MAX: insertion sorts are quick enough. Returns the new count. */
static unsigned mux__ranges_coalesce(mux__range_t *r, unsigned n)
{
    for (unsigned k = 1; k < n; k++) /* by first byte */
        for (unsigned j = k; j > 0 && r[j - 1].first > r[j].first; j--) {
            mux__range_t t = r[j];
            r[j] = r[j - 1];
            r[j - 1] = t;
        }
    unsigned m = 0;
    for (unsigned k = 1; k < n; k++) {
        if (r[k].first <= r[m].last + 1) {
            if (r[k].last > r[m].last)
                r[m].last = r[k].last;
            if (r[k].order < r[m].order)
                r[m].order = r[k].order;
        } else {
            r[++m] = r[k];
        }
    }
    n = m + 1;
    for (unsigned k = 1; k < n; k++) /* back to the order of the request */
        for (unsigned j = k; j > 0 && r[j - 1].order > r[j].order; j--) {
            mux__range_t t = r[j];
            r[j] = r[j - 1];
            r[j - 1] = t;
        }
    return n;
}

int mux__http_ranges(mux_http_str_t v, uint64_t size, mux__range_t *out, unsigned cap)
{
    static const char unit[] = "bytes=";
    size_t i = 0;
    for (; i < 6; i++)
        if (i >= v.len || (v.base[i] | (i < 5 ? 0x20 : 0)) != unit[i])
            return 0;
    unsigned listed = 0, n = 0;
    for (;;) {
        /* A list (RFC 9110, 5.6.1): white space around the commas, and empty elements. */
        while (i < v.len && (v.base[i] == ' ' || v.base[i] == '\t' || v.base[i] == ','))
            i++;
        if (i == v.len)
            break;
        int64_t a, b;
        if (mux__range_spec(v, &i, &a, &b) != 0)
            return 0;
        while (i < v.len && (v.base[i] == ' ' || v.base[i] == '\t'))
            i++;
        if ((i < v.len && v.base[i] != ',') || ++listed > cap)
            return 0; /* trailing garbage, or more ranges than allowed: served whole */
        uint64_t first, last;
        if (a < 0) { /* a suffix: the last b bytes */
            if (b == 0 || size == 0)
                continue;
            first = (uint64_t)b >= size ? 0 : size - (uint64_t)b;
            last = size - 1;
        } else {
            if ((uint64_t)a >= size)
                continue; /* starts past the end: not satisfiable */
            first = (uint64_t)a;
            last = b < 0 || (uint64_t)b >= size ? size - 1 : (uint64_t)b;
        }
        out[n++] = (mux__range_t){first, last, listed};
    }
    if (listed == 0)
        return 0; /* "bytes=" and nothing */
    return n ? (int)mux__ranges_coalesce(out, n) : -1;
}

static const char mux__wday[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char mux__month[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm, proleptic Gregorian). */
static int64_t mux__days(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

size_t mux__http_date(int64_t t, char out[32])
{
    int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400;
    int64_t secs = t - days * 86400;
    /* civil from days (the inverse of mux__days) */
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = (int64_t)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    unsigned d = doy - (153 * mp + 2) / 5 + 1;
    unsigned m = mp < 10 ? mp + 3 : mp - 9;
    y += m <= 2;
    if (y < 0 || y > 9999)
        return 0;                           /* not a year of four digits: no HTTP date */
    int wd = (int)((days % 7 + 7 + 4) % 7); /* 1970-01-01 was a Thursday */
    int n = snprintf(out, 32, "%s, %02u %s %04lld %02d:%02d:%02d GMT", mux__wday[wd], d,
                     mux__month[m - 1], (long long)y, (int)(secs / 3600), (int)(secs / 60 % 60),
                     (int)(secs % 60));
    return n == 29 ? 29 : 0;
}

/* A fixed-width decimal at s[i .. i+n). */
static int mux__date_digits(mux_http_str_t s, size_t i, size_t n, int *v)
{
    if (i + n > s.len)
        return -1;
    int x = 0;
    for (size_t k = 0; k < n; k++) {
        char c = s.base[i + k];
        if (c < '0' || c > '9')
            return -1;
        x = x * 10 + (c - '0');
    }
    *v = x;
    return 0;
}

static int mux__month_of(mux_http_str_t s, size_t i)
{
    if (i + 3 > s.len)
        return -1;
    for (int m = 0; m < 12; m++)
        if (memcmp(s.base + i, mux__month[m], 3) == 0)
            return m + 1;
    return -1;
}

/* "HH:MM:SS" at s[i ..). */
static int mux__clock(mux_http_str_t s, size_t i, int *h, int *mi, int *se)
{
    if (mux__date_digits(s, i, 2, h) || i + 2 >= s.len || s.base[i + 2] != ':' ||
        mux__date_digits(s, i + 3, 2, mi) || i + 5 >= s.len || s.base[i + 5] != ':' ||
        mux__date_digits(s, i + 6, 2, se))
        return -1;
    return *h < 24 && *mi < 60 && *se < 61 ? 0 : -1;
}

/* 1 when s[i ..) starts with `lit`. */
static int mux__date_literal(mux_http_str_t s, size_t i, const char *lit)
{
    size_t n = strlen(lit);
    return i + n <= s.len && memcmp(s.base + i, lit, n) == 0;
}

int mux__http_date_parse(mux_http_str_t s, int64_t *t)
{
    int y, m, d, h, mi, se;
    size_t comma = 0;
    while (comma < s.len && s.base[comma] != ',' && s.base[comma] != ' ')
        comma++;
    if (comma == 3 && comma < s.len && s.base[3] == ',') {
        /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
        if (s.len != 29 || s.base[4] != ' ' || mux__date_digits(s, 5, 2, &d) || s.base[7] != ' ' ||
            (m = mux__month_of(s, 8)) < 0 || s.base[11] != ' ' || mux__date_digits(s, 12, 4, &y) ||
            s.base[16] != ' ' || mux__clock(s, 17, &h, &mi, &se) ||
            !mux__date_literal(s, 25, " GMT"))
            return -EINVAL;
    } else if (comma > 3 && comma < s.len && s.base[comma] == ',') {
        /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
        size_t i = comma + 1;
        if (s.len != i + 23 || s.base[i] != ' ' || mux__date_digits(s, i + 1, 2, &d) ||
            s.base[i + 3] != '-' || (m = mux__month_of(s, i + 4)) < 0 || s.base[i + 7] != '-' ||
            mux__date_digits(s, i + 8, 2, &y) || s.base[i + 10] != ' ' ||
            mux__clock(s, i + 11, &h, &mi, &se) || !mux__date_literal(s, i + 19, " GMT"))
            return -EINVAL;
        y += y < 70 ? 2000 : 1900; /* RFC 9110: a year over 50 ahead is the past century */
    } else if (comma == 3 && s.len == 24) {
        /* asctime: "Sun Nov  6 08:49:37 1994" */
        if (s.base[3] != ' ' || (m = mux__month_of(s, 4)) < 0 || s.base[7] != ' ')
            return -EINVAL;
        char d1 = s.base[8];
        if (d1 == ' ') {
            if (mux__date_digits(s, 9, 1, &d))
                return -EINVAL;
        } else if (mux__date_digits(s, 8, 2, &d)) {
            return -EINVAL;
        }
        if (s.base[10] != ' ' || mux__clock(s, 11, &h, &mi, &se) || s.base[19] != ' ' ||
            mux__date_digits(s, 20, 4, &y))
            return -EINVAL;
    } else {
        return -EINVAL;
    }
    static const unsigned char mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (d < 1 || d > mdays[m - 1])
        return -EINVAL;
    *t = mux__days(y, (unsigned)m, (unsigned)d) * 86400 + h * 3600 + mi * 60 + se;
    return 0;
}

size_t mux__http_etag(uint64_t size, int64_t mtime_ns, char out[48])
{
    /* At most 2 + 16 + 1 + 16 bytes: it always fits. */
    int n =
        snprintf(out, 48, "\"%llx-%llx\"", (unsigned long long)size, (unsigned long long)mtime_ns);
    return n > 0 && n < 48 ? (size_t)n : 0;
}

int mux__http_etag_match(mux_http_str_t inm, const char *etag, size_t etag_len)
{
    size_t i = 0;
    while (i < inm.len && (inm.base[i] == ' ' || inm.base[i] == '\t'))
        i++;
    if (i < inm.len && inm.base[i] == '*') {
        i++;
        while (i < inm.len && (inm.base[i] == ' ' || inm.base[i] == '\t'))
            i++;
        return i == inm.len;
    }
    int match = 0;
    for (;;) {
        while (i < inm.len && (inm.base[i] == ' ' || inm.base[i] == '\t' || inm.base[i] == ','))
            i++;
        if (i == inm.len)
            return match;
        if (i + 1 < inm.len && inm.base[i] == 'W' && inm.base[i + 1] == '/')
            i += 2;
        if (i >= inm.len || inm.base[i] != '"')
            return 0; /* malformed: nothing matches */
        size_t start = i++;
        while (i < inm.len && inm.base[i] != '"') {
            unsigned char c = (unsigned char)inm.base[i];
            if (c < 0x21 || c == 0x7f)
                return 0;
            i++;
        }
        if (i == inm.len)
            return 0;
        i++;
        if (i - start == etag_len && memcmp(inm.base + start, etag, etag_len) == 0)
            match = 1;
        while (i < inm.len && (inm.base[i] == ' ' || inm.base[i] == '\t'))
            i++;
        if (i < inm.len && inm.base[i] != ',')
            return 0;
    }
}

/* RFC 3986's unreserved bytes: the only ones a URL never needs to escape. */
static int mux__unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

size_t mux__http_pct(const char *s, size_t n, char *out, size_t cap, int slash)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (mux__unreserved(c) || (slash && c == '/')) {
            if (o < cap)
                out[o] = (char)c;
            o++;
            continue;
        }
        char e[3] = {'%', hex[c >> 4], hex[c & 15]};
        for (int k = 0; k < 3; k++, o++)
            if (o < cap)
                out[o] = e[k];
    }
    return o;
}

size_t mux__http_html(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char ref[8];
        const char *w = ref;
        size_t wl;
        if (c == '&')
            w = "&amp;", wl = 5;
        else if (c == '<')
            w = "&lt;", wl = 4;
        else if (c == '>')
            w = "&gt;", wl = 4;
        else if (c == '"')
            w = "&quot;", wl = 6;
        else if (c == '\'')
            w = "&#39;", wl = 5;
        else if (c < 0x20 || c == 0x7f) { /* a control byte, made visible as a reference */
            wl = 0;
            ref[wl++] = '&';
            ref[wl++] = '#';
            if (c >= 100)
                ref[wl++] = (char)('0' + c / 100);
            if (c >= 10)
                ref[wl++] = (char)('0' + c / 10 % 10);
            ref[wl++] = (char)('0' + c % 10);
            ref[wl++] = ';';
        } else
            ref[0] = (char)c, wl = 1;
        for (size_t k = 0; k < wl; k++, o++)
            if (o < cap)
                out[o] = w[k];
    }
    return o;
}
