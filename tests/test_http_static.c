/* SPDX-License-Identifier: MIT */
/* The static-file server's pure parts: paths that must not escape the root, media types,
 * byte ranges, HTTP dates and entity tags. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "http/http_internal.h"

static mux_http_str_t S(const char *s)
{
    return (mux_http_str_t){s, strlen(s)};
}

static void path_is(const char *target, const char *want, int want_dir)
{
    char out[256];
    int dir = -1;
    int r = mux__http_path(target, strlen(target), out, sizeof out, &dir);
    if (r != 0 || strcmp(out, want) != 0 || dir != want_dir)
        fprintf(stderr, "target %s: %d, \"%s\", dir %d\n", target, r, r ? "" : out, dir);
    CHECK_EQ(r, 0);
    CHECK_STR_EQ(out, want);
    CHECK_EQ(dir, want_dir);
}

static void path_refused(const char *target, int err)
{
    char out[256];
    int dir;
    int r = mux__http_path(target, strlen(target), out, sizeof out, &dir);
    if (r != err)
        fprintf(stderr, "target %s\n", target);
    CHECK_EQ(r, err);
}

CORE_TEST(http_path_normalises_and_never_leaves_the_root) {
    path_is("/", "", 1);
    path_is("/index.html", "index.html", 0);
    path_is("/a/b/c.txt?x=/../../etc", "a/b/c.txt", 0);
    path_is("/a//b/./c", "a/b/c", 0);
    path_is("/a/b/", "a/b", 1);
    path_is("/a/b/..", "a", 1);
    path_is("/a/b/../../c", "c", 0);
    path_is("/a/%62%2Ec", "a/b.c", 0);
    path_is("/sp%20ace#frag", "sp ace", 0);
    path_is("/a/.", "a", 1);
    path_refused("/..", -EACCES);
    path_refused("/../etc/passwd", -EACCES);
    path_refused("/a/../../etc/passwd", -EACCES);
    path_refused("/%2e%2e/etc/passwd", -EACCES);
    path_refused("/%2E%2E%2Fetc", -EACCES); /* an encoded slash */
    path_refused("/a%2fb", -EACCES);
    path_refused("/.git/config", -EACCES); /* hidden */
    path_refused("/a/.htaccess", -EACCES);
    path_refused("/a/%2e%2e%2e", -EACCES);
    path_refused("/a%00b", -EINVAL);
    path_refused("/a%zz", -EINVAL);
    path_refused("/a%2", -EINVAL);
    path_refused("*", -EINVAL);
    path_refused("http://h/a", -EINVAL);
    path_refused("", -EINVAL);
    char small[6];
    int dir;
    CHECK_EQ(mux__http_path("/abcdef", 7, small, sizeof small, &dir), -ENAMETOOLONG);
    CHECK_EQ(mux__http_path("/abcde", 6, small, sizeof small, &dir), 0);
    CHECK_STR_EQ(small, "abcde");
}

CORE_TEST(http_mime_types_by_extension) {
    CHECK_STR_EQ(mux__http_mime("index.html"), "text/html; charset=utf-8");
    CHECK_STR_EQ(mux__http_mime("a/b/STYLE.CSS"), "text/css; charset=utf-8");
    CHECK_STR_EQ(mux__http_mime("x.tar.gz"), "application/gzip");
    CHECK_STR_EQ(mux__http_mime("img.JpEg"), "image/jpeg");
    CHECK_STR_EQ(mux__http_mime("font.woff2"), "font/woff2");
    CHECK_STR_EQ(mux__http_mime("README"), "application/octet-stream");
    CHECK_STR_EQ(mux__http_mime("dir.d/file"), "application/octet-stream");
    CHECK_STR_EQ(mux__http_mime("trailing."), "application/octet-stream");
    CHECK_STR_EQ(mux__http_mime("a.htmlx"), "application/octet-stream");
}

static void range_is(const char *v, uint64_t size, int want, uint64_t f, uint64_t l)
{
    uint64_t first = 77, last = 77;
    int r = mux__http_range(S(v), size, &first, &last);
    if (r != want || (want == 1 && (first != f || last != l)))
        fprintf(stderr, "Range: %s of %llu: %d [%llu, %llu]\n", v, (unsigned long long)size, r,
                (unsigned long long)first, (unsigned long long)last);
    CHECK_EQ(r, want);
    if (want == 1) {
        CHECK_EQ(first, f);
        CHECK_EQ(last, l);
    }
}

CORE_TEST(http_single_byte_ranges_206_416_or_ignored) {
    range_is("bytes=0-499", 1000, 1, 0, 499);
    range_is("bytes=500-", 1000, 1, 500, 999);
    range_is("bytes=-200", 1000, 1, 800, 999);
    range_is("bytes=-2000", 1000, 1, 0, 999); /* a suffix longer than the file: all */
    range_is("bytes=900-5000", 1000, 1, 900, 999);
    range_is("Bytes=1-1", 1000, 1, 1, 1);
    range_is("bytes=999-999", 1000, 1, 999, 999);
    range_is("bytes=1000-", 1000, -1, 0, 0); /* starts past the end: 416 */
    range_is("bytes=-0", 1000, -1, 0, 0);
    range_is("bytes=0-", 0, -1, 0, 0);        /* nothing to give from an empty file */
    range_is("bytes=5-3", 1000, 0, 0, 0);     /* last before first: ignored */
    range_is("bytes=0-1,5-6", 1000, 0, 0, 0); /* several: served whole */
    range_is("items=0-1", 1000, 0, 0, 0);
    range_is("bytes=a-b", 1000, 0, 0, 0);
    range_is("bytes=", 1000, 0, 0, 0);
    range_is("bytes=1-2x", 1000, 0, 0, 0);
    range_is("bytes=99999999999999999999-", 1000, 0, 0, 0);
}

CORE_TEST(http_dates_formatted_and_parsed_in_all_three_forms) {
    char buf[32];
    CHECK_EQ(mux__http_date(784111777, buf), 29);
    CHECK_STR_EQ(buf, "Sun, 06 Nov 1994 08:49:37 GMT");
    CHECK_EQ(mux__http_date(0, buf), 29);
    CHECK_STR_EQ(buf, "Thu, 01 Jan 1970 00:00:00 GMT");
    CHECK_EQ(mux__http_date(951782400, buf), 29); /* a leap day */
    CHECK_STR_EQ(buf, "Tue, 29 Feb 2000 00:00:00 GMT");
    int64_t t;
    CHECK_EQ(mux__http_date_parse(S("Sun, 06 Nov 1994 08:49:37 GMT"), &t), 0);
    CHECK_EQ(t, 784111777);
    CHECK_EQ(mux__http_date_parse(S("Sunday, 06-Nov-94 08:49:37 GMT"), &t), 0);
    CHECK_EQ(t, 784111777);
    CHECK_EQ(mux__http_date_parse(S("Sun Nov  6 08:49:37 1994"), &t), 0);
    CHECK_EQ(t, 784111777);
    CHECK_EQ(mux__http_date_parse(S("Thu, 01 Jan 1970 00:00:00 GMT"), &t), 0);
    CHECK_EQ(t, 0);
    /* Every second of a few years round-trips through the formatter: a day at a time. */
    for (int64_t s = 0; s < 40 * 366 * 86400LL; s += 86400 + 3607) {
        CHECK_EQ(mux__http_date(s, buf), 29);
        CHECK_EQ(mux__http_date_parse(S(buf), &t), 0);
        CHECK_EQ(t, s);
        struct tm tm;
        time_t tt = (time_t)s;
        char want[32];
        CHECK(gmtime_r(&tt, &tm) != NULL);
        CHECK_EQ(strftime(want, sizeof want, "%a, %d %b %Y %H:%M:%S GMT", &tm), 29);
        CHECK_STR_EQ(buf, want);
    }
    static const char *bad[] = {
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 06 Nov 1994 08:49:37",
        "Sun, 31 Feb 1994 08:49:37 GMT",
        "Sun, 06 Nox 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:49:37 GMT",
        "Sun,06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37",
        "Sun Nov 6 08:49:37 1994",
        "",
        "yesterday",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (mux__http_date_parse(S(bad[i]), &t) != -EINVAL)
            fprintf(stderr, "date %s\n", bad[i]);
        CHECK_EQ(mux__http_date_parse(S(bad[i]), &t), -EINVAL);
    }
}

CORE_TEST(http_etags_and_if_none_match) {
    char tag[48];
    size_t n = mux__http_etag(4096, 1700000000123456789LL, tag);
    CHECK_STR_EQ(tag, "\"1000-17979cfe3d85cd15\"");
    CHECK_EQ(n, strlen(tag));
    CHECK_EQ(mux__http_etag_match(S("*"), tag, n), 1);
    CHECK_EQ(mux__http_etag_match(S(" * "), tag, n), 1);
    CHECK_EQ(mux__http_etag_match(S("\"1000-17979cfe3d85cd15\""), tag, n), 1);
    CHECK_EQ(mux__http_etag_match(S("W/\"1000-17979cfe3d85cd15\""), tag, n), 1); /* weak */
    CHECK_EQ(mux__http_etag_match(S("\"x\", \"1000-17979cfe3d85cd15\""), tag, n), 1);
    CHECK_EQ(mux__http_etag_match(S("\"x\",W/\"y\""), tag, n), 0);
    CHECK_EQ(mux__http_etag_match(S("1000-17979cfe3d85cd15"), tag, n), 0);   /* unquoted */
    CHECK_EQ(mux__http_etag_match(S("\"1000-17979cfe3d85cd15"), tag, n), 0); /* unclosed */
    CHECK_EQ(mux__http_etag_match(S("\"1000-17979cfe3d85cd15\" x"), tag, n), 0);
    CHECK_EQ(mux__http_etag_match(S("*, \"a\""), tag, n), 0);
    CHECK_EQ(mux__http_etag_match(S(""), tag, n), 0);
}
