/* SPDX-License-Identifier: MIT */
/* The static-file server: its pure parts (paths that must not escape the root, media types,
 * byte ranges, HTTP dates, entity tags, escapes), then the whole of it over loopback on every
 * backend (defects found under hostile use, ranges, listings, dot-files, media types). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "http/fs.h"
#include "http/http_internal.h"
#include "http_client.h"
#include "http_fixture.h"
#include "stream_util.h"

static mux_http_str_t S(const char *s)
{
    return (mux_http_str_t){s, strlen(s)};
}

static void path_is(const char *target, const char *want, int want_dir)
{
    char out[256];
    int dir = -1;
    int r = mux__http_path(target, strlen(target), out, sizeof out, &dir, 0);
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
    int r = mux__http_path(target, strlen(target), out, sizeof out, &dir, 0);
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
    CHECK_EQ(mux__http_path("/abcdef", 7, small, sizeof small, &dir, 0), -ENAMETOOLONG);
    CHECK_EQ(mux__http_path("/abcde", 6, small, sizeof small, &dir, 0), 0);
    CHECK_STR_EQ(small, "abcde");
}

/* The names Windows reads as something else than named, which the static files refuse there
 * (404) before opening anything: a byte Windows reads otherwise or does not allow, a trailing
 * dot or space, a device name with any extension. Pure: checked on every system. */
CORE_TEST(http_win_name_refuses_what_windows_reads_otherwise) {
    static const char *ok[] = {"", "index.html", "a/b.txt", "a b.txt", "comet", "conx",
                               "com10", "lpt", "console/nul2", "x.con", "a~1.htm", ".well-known/x",
                               "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (mux__http_win_name(ok[i]) != 0)
            fprintf(stderr, "refused: %s\n", ok[i]);
        CHECK_EQ(mux__http_win_name(ok[i]), 0);
    }
    static const char *no[] = {
        "a.", "a ", "a..", "dir./x", "x/y. ", "a:b", "a::$DATA", "C:", "x/C:", "a\\b", "a*",
        "a?", "a\"", "a<", "a>", "a|", "a\x01", "a\x1f", "a\x7f", "CON", "con", "nul.txt",
        "Aux.tar.gz", "aux .txt", "x/PRN", "COM1", "lpt9.log", "com0", "COM\xc2\xb9",
        "lpt\xc2\xb3.x", "CONIN$", "conout$.txt", "clock$"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        if (mux__http_win_name(no[i]) != -ENOENT)
            fprintf(stderr, "allowed: %s\n", no[i]);
        CHECK_EQ(mux__http_win_name(no[i]), -ENOENT);
    }
}

/* /.well-known/ is served (ACME's challenges live there), other dot-files only when they
 * are allowed; ".." stays refused above the root either way. */
CORE_TEST(http_path_dot_files_well_known_and_allowed) {
    char out[256];
    int dir;
    path_is("/.well-known/acme-challenge/tok", ".well-known/acme-challenge/tok", 0);
    path_is("/.well-known/", ".well-known", 1);
    path_is("/x/../.well-known/a", ".well-known/a", 0);
    path_refused("/a/.well-known/x", -EACCES); /* only right below the root */
    path_refused("/.well-known/.hidden", -EACCES);
    path_refused("/.well-knownx", -EACCES);
    CHECK_EQ(mux__http_path("/.git/config", 12, out, sizeof out, &dir, MUX_HTTP_STATIC_DOTFILES),
             0);
    CHECK_STR_EQ(out, ".git/config");
    CHECK_EQ(mux__http_path("/a/.b/...", 9, out, sizeof out, &dir, MUX_HTTP_STATIC_DOTFILES), 0);
    CHECK_STR_EQ(out, "a/.b/...");
    CHECK_EQ(mux__http_path("/..", 3, out, sizeof out, &dir, MUX_HTTP_STATIC_DOTFILES), -EACCES);
    CHECK_EQ(mux__http_path("/a/%2e%2e/%2e%2e", 16, out, sizeof out, &dir,
                            MUX_HTTP_STATIC_DOTFILES),
             -EACCES);
}

/* The built-in table (searched as it is, and as a loaded table without a file) answers
 * the same. */
static void mime_builtin_is(const struct mux__mime *m, const char *name, const char *want)
{
    size_t len = 0;
    const char *t = mux__mime_find(m, name, &len);
    CHECK_STR_EQ(t, want);
    CHECK_EQ(len, strlen(want));
}

CORE_TEST(http_mime_types_by_extension) {
    for (size_t i = 1; i < mux__mime_nbuiltins; i++) /* the order the binary search needs */
        CHECK_LT(strcmp(mux__mime_builtins[i - 1].ext, mux__mime_builtins[i].ext), 0);
    struct mux__mime *m = NULL;
    CHECK_EQ(mux__mime_load(&m, NULL), 0);
    const struct mux__mime *tables[2] = {NULL, m};
    for (int k = 0; k < 2; k++) {
        const struct mux__mime *t = tables[k];
        mime_builtin_is(t, "index.html", "text/html; charset=utf-8");
        mime_builtin_is(t, "a/b/STYLE.CSS", "text/css; charset=utf-8");
        mime_builtin_is(t, "x.tar.gz", "application/gzip");
        mime_builtin_is(t, "img.JpEg", "image/jpeg");
        mime_builtin_is(t, "font.woff2", "font/woff2");
        mime_builtin_is(t, "README", "application/octet-stream");
        mime_builtin_is(t, "dir.d/file", "application/octet-stream");
        mime_builtin_is(t, "trailing.", "application/octet-stream");
        mime_builtin_is(t, "a.htmlx", "application/octet-stream");
        mime_builtin_is(t, ".html", "application/octet-stream"); /* a dot-file's name */
        mime_builtin_is(t, "a/.b.txt", "text/plain; charset=utf-8");
        for (size_t i = 0; i < mux__mime_nbuiltins; i++) {
            char name[64];
            snprintf(name, sizeof name, "f.%s", mux__mime_builtins[i].ext);
            mime_builtin_is(t, name, mux__mime_builtins[i].type);
        }
    }
    mux__mime_free(m);
}

/* A mime.types file: its types win over the built-in ones, later lines over earlier ones;
 * comments, blank lines, a type without extensions and lines that are not well formed are
 * passed by; text types get a charset. */
CORE_TEST(http_mime_types_from_a_file) {
    char path[] = "/tmp/iomux-mime-XXXXXX";
    int fd = mkstemp(path);
    CHECK_GE(fd, 0);
    static const char text[] =
        "# a comment\n"
        "\n"
        "application/x-iomux\tiomux  IOMUXB\r\n"
        "text/x-thing thing # the rest is a comment: notext\n"
        "text/x-html html\n"
        "application/x-empty\n"
        "not-a-type foo\n"
        "bad/ bar\n"
        "a/b/c baz\n"
        "image/x-first dup\n"
        "image/x-second dup\n"
        "text/plain; txt2\n" /* not a token: skipped */
        "application/x-last last"; /* no final newline */
    CHECK_EQ(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    CHECK_EQ(close(fd), 0);
    struct mux__mime *m = NULL;
    CHECK_EQ(mux__mime_load(&m, path), 0);
    mime_builtin_is(m, "a.iomux", "application/x-iomux");
    mime_builtin_is(m, "a.IOMUXB", "application/x-iomux");
    mime_builtin_is(m, "a.thing", "text/x-thing; charset=utf-8");
    mime_builtin_is(m, "a.notext", "application/octet-stream");
    mime_builtin_is(m, "index.html", "text/x-html; charset=utf-8"); /* over the built-in */
    mime_builtin_is(m, "a.css", "text/css; charset=utf-8");         /* the built-in stays */
    mime_builtin_is(m, "a.foo", "application/octet-stream");
    mime_builtin_is(m, "a.bar", "application/octet-stream");
    mime_builtin_is(m, "a.baz", "application/octet-stream");
    mime_builtin_is(m, "a.dup", "image/x-second");
    mime_builtin_is(m, "a.txt2", "application/octet-stream");
    mime_builtin_is(m, "a.last", "application/x-last");
    mux__mime_free(m);
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(mux__mime_load(&m, path), -ENOENT);
    CHECK_EQ(mux__mime_load(&m, "/tmp"), -EINVAL); /* a directory */
}

/* Debian's /etc/mime.types (the media-types package) reads whole: some of its types. */
CORE_TEST(http_mime_types_from_etc_mime_types) {
    if (access("/etc/mime.types", R_OK) != 0)
        SKIP("no /etc/mime.types: scripts/install-deps test installs media-types");
    struct mux__mime *m = NULL;
    CHECK_EQ(mux__mime_load(&m, "/etc/mime.types"), 0);
    mime_builtin_is(m, "a.deb", "application/vnd.debian.binary-package");
    mime_builtin_is(m, "a.html", "text/html; charset=utf-8");
    mime_builtin_is(m, "a.png", "image/png");
    mime_builtin_is(m, "a.woff2", "font/woff2");
    mux__mime_free(m);
}

/* Parses `v` for a resource of `size` bytes with room for `cap` ranges, and checks the
 * result: `want` (0 ignored, -1 unsatisfiable, n ranges) and the ranges as "f-l,f-l". */
static void ranges_are(const char *v, uint64_t size, unsigned cap, int want, const char *list)
{
    mux__range_t r[MUX_HTTP_STATIC_RANGES_MAX];
    int n = mux__http_ranges(S(v), size, r, cap);
    char got[512] = "";
    size_t o = 0;
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%llu-%llu", i ? "," : "",
                              (unsigned long long)r[i].first, (unsigned long long)r[i].last);
    if (n != want || strcmp(got, list) != 0)
        fprintf(stderr, "Range: %s of %llu: %d [%s]\n", v, (unsigned long long)size, n, got);
    CHECK_EQ(n, want);
    CHECK_STR_EQ(got, list);
}

static void range_is(const char *v, uint64_t size, int want, uint64_t f, uint64_t l)
{
    char list[64] = "";
    if (want == 1)
        snprintf(list, sizeof list, "%llu-%llu", (unsigned long long)f, (unsigned long long)l);
    ranges_are(v, size, 16, want, list);
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
    range_is("bytes=0-", 0, -1, 0, 0);    /* nothing to give from an empty file */
    range_is("bytes=5-3", 1000, 0, 0, 0); /* last before first: ignored */
    range_is("items=0-1", 1000, 0, 0, 0);
    range_is("bytes=a-b", 1000, 0, 0, 0);
    range_is("bytes=", 1000, 0, 0, 0);
    range_is("bytes= , ", 1000, 0, 0, 0);
    range_is("bytes=1-2x", 1000, 0, 0, 0);
    range_is("bytes=99999999999999999999-", 1000, 0, 0, 0);
}

/* Several ranges: overlapping and touching ones merged, the others kept in the order they
 * were asked, unsatisfiable ones dropped, more than the cap ignored (counted as listed). */
CORE_TEST(http_multiple_byte_ranges_coalesced_in_request_order) {
    ranges_are("bytes=0-1,5-6", 1000, 16, 2, "0-1,5-6");
    ranges_are("bytes=500-599, 0-99", 1000, 16, 2, "500-599,0-99"); /* the order asked */
    ranges_are("bytes=0-1,2-3", 1000, 16, 1, "0-3");                 /* touching: one */
    ranges_are("bytes=0-10,5-20,30-40", 1000, 16, 2, "0-20,30-40");  /* overlapping */
    ranges_are("bytes=30-40,5-20,0-10", 1000, 16, 2, "30-40,0-20");
    ranges_are("bytes=0-,0-,0-,0-", 1000, 16, 1, "0-999"); /* the many-ranges attack: one */
    ranges_are("bytes=-100,0-0", 1000, 16, 2, "900-999,0-0");
    ranges_are("bytes=900-,-50", 1000, 16, 1, "900-999");
    ranges_are("bytes=0-1,2000-3000", 1000, 16, 1, "0-1"); /* the unsatisfiable one goes */
    ranges_are("bytes=2000-3000,5000-", 1000, 16, -1, "");
    ranges_are("bytes=,0-1,,\t 4-5 ,", 1000, 16, 2, "0-1,4-5"); /* empty list elements */
    ranges_are("bytes=0-1,5-3", 1000, 16, 0, "");               /* one invalid: ignored */
    ranges_are("bytes=0-1;4-5", 1000, 16, 0, "");
    ranges_are("bytes=0-0,2-2,4-4", 1000, 3, 3, "0-0,2-2,4-4");
    ranges_are("bytes=0-0,2-2,4-4,6-6", 1000, 3, 0, ""); /* more than the cap */
    ranges_are("bytes=0-0,0-0,0-0,0-0", 1000, 3, 0, ""); /* counted as listed */
    /* The whole ceiling of ranges, in reverse: sorted, merged, put back in order. */
    char v[8192];
    size_t o = (size_t)snprintf(v, sizeof v, "bytes=");
    for (int i = MUX_HTTP_STATIC_RANGES_MAX - 1; i >= 0; i--)
        o += (size_t)snprintf(v + o, sizeof v - o, "%d-%d%s", 3 * i, 3 * i, i ? "," : "");
    mux__range_t r[MUX_HTTP_STATIC_RANGES_MAX];
    CHECK_EQ(mux__http_ranges(S(v), 10000, r, MUX_HTTP_STATIC_RANGES_MAX),
             MUX_HTTP_STATIC_RANGES_MAX);
    for (unsigned i = 0; i < MUX_HTTP_STATIC_RANGES_MAX; i++)
        CHECK_EQ(r[i].first, 3 * (MUX_HTTP_STATIC_RANGES_MAX - 1 - i));
}

CORE_TEST(http_dates_formatted_and_parsed_in_all_three_forms) {
    char buf[32];
    CHECK_EQ(mux__http_date(784111777, buf), 29);
    CHECK_STR_EQ(buf, "Sun, 06 Nov 1994 08:49:37 GMT");
    CHECK_EQ(mux__http_date(0, buf), 29);
    CHECK_STR_EQ(buf, "Thu, 01 Jan 1970 00:00:00 GMT");
    CHECK_EQ(mux__http_date(951782400, buf), 29); /* a leap day */
    CHECK_STR_EQ(buf, "Tue, 29 Feb 2000 00:00:00 GMT");
    CHECK_EQ(mux__http_date(253402300799LL, buf), 29);
    CHECK_STR_EQ(buf, "Fri, 31 Dec 9999 23:59:59 GMT");
    /* Times a file system can hold (tmpfs keeps 64 bits) that the form cannot carry. */
    CHECK_EQ(mux__http_date(253402300800LL, buf), 0);
    CHECK_EQ(mux__http_date(10000000000000LL, buf), 0);
    CHECK_EQ(mux__http_date(-62167219201LL, buf), 0);
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

/* Each field of each form spoiled in turn: every one is refused, and the valid edges
 * (a day of one digit, a two-digit year either side of 1970, a leap day) are read. */
CORE_TEST(http_dates_spoiled_at_each_field_are_refused) {
    int64_t t;
    CHECK_EQ(mux__http_date_parse(S("Tue, 29 Feb 2000 00:00:00 GMT"), &t), 0);
    CHECK_EQ(t, 951782400);
    CHECK_EQ(mux__http_date_parse(S("Tuesday, 29-Feb-00 00:00:00 GMT"), &t), 0);
    CHECK_EQ(t, 951782400); /* 00: 2000 */
    CHECK_EQ(mux__http_date_parse(S("Thursday, 01-Jan-70 00:00:00 GMT"), &t), 0);
    CHECK_EQ(t, 0); /* 70: 1970 */
    CHECK_EQ(mux__http_date_parse(S("Tue Feb 29 00:00:00 2000"), &t), 0);
    CHECK_EQ(t, 951782400);
    CHECK_EQ(mux__http_date_parse(S("Sun Nov  6 08:49:60 1994"), &t), 0); /* a leap second */
    static const char *bad[] = {
        /* IMF-fixdate */
        "Sun, 06 Nov 1994 08:49:37 GMTX", "Sun,X06 Nov 1994 08:49:37 GMT",
        "Sun, 0x Nov 1994 08:49:37 GMT",  "Sun, 06XNov 1994 08:49:37 GMT",
        "Sun, 06 Nov-1994 08:49:37 GMT",  "Sun, 06 Nov 19x4 08:49:37 GMT",
        "Sun, 06 Nov 1994X08:49:37 GMT",  "Sun, 06 Nov 1994 0x:49:37 GMT",
        "Sun, 06 Nov 1994 08x49:37 GMT",  "Sun, 06 Nov 1994 08:4x:37 GMT",
        "Sun, 06 Nov 1994 08:49x37 GMT",  "Sun, 06 Nov 1994 08:49:3x GMT",
        "Sun, 06 Nov 1994 08:60:37 GMT",  "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT",  "Sun, 31 Nov 1994 08:49:37 GMT",
        /* RFC 850 */
        "Sunday, 06-Nov-94 08:49:37 GMTX", "Sunday,X06-Nov-94 08:49:37 GMT",
        "Sunday, x6-Nov-94 08:49:37 GMT",  "Sunday, 06XNov-94 08:49:37 GMT",
        "Sunday, 06-Nox-94 08:49:37 GMT",  "Sunday, 06-NovX94 08:49:37 GMT",
        "Sunday, 06-Nov-9x 08:49:37 GMT",  "Sunday, 06-Nov-94X08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 UTC",  "Sunday, 06-Nov-94 25:49:37 GMT",
        /* asctime */
        "SunXNov  6 08:49:37 1994", "Sun Nox  6 08:49:37 1994", "Sun NovX 6 08:49:37 1994",
        "Sun Nov  x 08:49:37 1994", "Sun Nov x6 08:49:37 1994", "Sun Nov  6X08:49:37 1994",
        "Sun Nov  6 08:49:37X1994", "Sun Nov  6 08:49:37 199x", "Sun Nov  6 08:49:3 1994 ",
        /* none of the three */
        "Sun", "Sun,", "Sunday 06-Nov-94 08:49:37 GMT", "Sun  Nov  6 08:49:37 1994",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (mux__http_date_parse(S(bad[i]), &t) != -EINVAL)
            fprintf(stderr, "date %s\n", bad[i]);
        CHECK_EQ(mux__http_date_parse(S(bad[i]), &t), -EINVAL);
    }
}

CORE_TEST(http_if_none_match_lists_with_odd_spacing_and_bad_tags) {
    const char *tag = "\"1000-17979cfe3d85cd15\"";
    size_t n = strlen(tag);
    CHECK_EQ(mux__http_etag_match(S("\t*\t"), tag, n), 1);
    CHECK_EQ(mux__http_etag_match(S(",\t,\"a\"\t, \"1000-17979cfe3d85cd15\"\t,"), tag, n), 1);
    CHECK_EQ(mux__http_etag_match(S("\"1000-17979cfe3d85cd16\""), tag, n), 0); /* same length */
    CHECK_EQ(mux__http_etag_match(S("\"1000\""), tag, n), 0);
    CHECK_EQ(mux__http_etag_match(S("W"), tag, n), 0);
    CHECK_EQ(mux__http_etag_match(S("W/"), tag, n), 0);
    CHECK_EQ(mux__http_etag_match(S("Wx\"a\""), tag, n), 0);
    CHECK_EQ(mux__http_etag_match(S("\"a b\""), tag, n), 0);    /* a space inside */
    CHECK_EQ(mux__http_etag_match(S("\"a\x7f\""), tag, n), 0); /* DEL inside */
    CHECK_EQ(mux__http_etag_match(S("\"a\"\t\"b\""), tag, n), 0); /* no comma between */
}

CORE_TEST(http_ranges_and_paths_refuse_malformed_input) {
    range_is("bytes=-", 1000, 0, 0, 0);
    range_is("bytes=1-a", 1000, 0, 0, 0); /* "1-" then garbage: ignored */
    range_is("bytes=1", 1000, 0, 0, 0);
    range_is("bytes=1x2", 1000, 0, 0, 0);
    range_is("byte", 1000, 0, 0, 0);
    range_is("BYTES=0-0", 1000, 1, 0, 0);
    range_is("bytes=0-0 \t", 1000, 1, 0, 0);
    range_is("bytes=-5", 0, -1, 0, 0); /* a suffix of an empty file */
    range_is("bytes=0-99999999999999999999", 1000, 0, 0, 0);
    char out[64];
    int dir = 0;
    CHECK_EQ(mux__http_path(NULL, 1, out, sizeof out, &dir, 0), -EINVAL);
    CHECK_EQ(mux__http_path("/", 1, NULL, sizeof out, &dir, 0), -EINVAL);
    CHECK_EQ(mux__http_path("/", 1, out, 0, &dir, 0), -EINVAL);
    CHECK_EQ(mux__http_path("/", 1, out, sizeof out, NULL, 0), -EINVAL);
    CHECK_EQ(mux__http_path("", 0, out, sizeof out, &dir, 0), -EINVAL);
    CHECK_EQ(mux__http_path("a", 1, out, sizeof out, &dir, 0), -EINVAL);
    CHECK_EQ(mux__http_path("/%4A%4a%4g", 10, out, sizeof out, &dir, 0), -EINVAL);
    CHECK_EQ(mux__http_path("/%g4", 4, out, sizeof out, &dir, 0), -EINVAL);
    CHECK_EQ(mux__http_path("/%4", 3, out, sizeof out, &dir, 0), -EINVAL);
    CHECK_EQ(mux__http_path("/%4A%4b%7E", 10, out, sizeof out, &dir, 0), 0);
    CHECK_STR_EQ(out, "JK~");
}

static void pct_is(const char *s, int slash, const char *want)
{
    char out[256];
    size_t n = mux__http_pct(s, strlen(s), out, sizeof out, slash);
    CHECK_LT(n, sizeof out);
    out[n] = 0;
    CHECK_STR_EQ(out, want);
    CHECK_EQ(mux__http_pct(s, strlen(s), NULL, 0, slash), n); /* measured alone */
}

static void html_is(const char *s, const char *want)
{
    char out[256];
    size_t n = mux__http_html(s, strlen(s), out, sizeof out);
    CHECK_LT(n, sizeof out);
    out[n] = 0;
    CHECK_STR_EQ(out, want);
    CHECK_EQ(mux__http_html(s, strlen(s), NULL, 0), n);
}

CORE_TEST(http_names_escaped_for_urls_and_html) {
    pct_is("a-b_c.d~e09AZ", 0, "a-b_c.d~e09AZ");
    pct_is("a b/c?d#e%f:g", 0, "a%20b%2Fc%3Fd%23e%25f%3Ag");
    pct_is("a b/c", 1, "a%20b/c");
    pct_is("\xc3\xa9\x01\x7f", 0, "%C3%A9%01%7F");
    html_is("<a href=\"x\">&'</a>", "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
    html_is("\x01\n\x7f\xc3\xa9", "&#1;&#10;&#127;\xc3\xa9");
    char small[4];
    CHECK_EQ(mux__http_html("<<", 2, small, sizeof small), 8); /* what fits is written */
    CHECK_EQ(memcmp(small, "&lt;", 4), 0);
}

/* ---- the static-file server over loopback (http_fixture.h) ------------------------------ */

/* ---- defects -------------------------------------------------------------------------- */

static struct hclient cl1;
static struct hanswer rsp1;

/* A directory named without its slash is redirected however long the target is: the
 * Location is made of the resolved path (so "//host" cannot become a redirect to another
 * host) and the query as sent. It was made in a fixed 4,200-byte buffer, and a longer one
 * was never answered. */
TEST(http_static_redirect_of_any_length_is_answered) {
    struct fx f;
    fx_dir(&f);
    fx_mkdir(&f, "sub");
    fx_mkdir(&f, "a b");
    fx_serve(&f);
    hc_open(&cl1, f.port);
    static char target[8192], want[8192];
    for (size_t q = 4190; q <= 4200; q++) {
        memcpy(target, "/sub?", 5);
        memset(target + 5, 'q', q);
        target[5 + q] = 0;
        cl_get(&f, &cl1, target, "", &rsp1);
        CHECK_EQ(rsp1.status, 301);
        memcpy(want, "/sub/?", 6);
        memset(want + 6, 'q', q);
        want[6 + q] = 0;
        CHECK_STR_EQ(ha_field(&rsp1, "Location"), want);
    }
    target[0] = '/';
    memset(target + 1, '/', 5000);
    memcpy(target + 5001, "sub", 4);
    cl_get(&f, &cl1, target, "", &rsp1);
    CHECK_EQ(rsp1.status, 301);
    CHECK_STR_EQ(ha_field(&rsp1, "Location"), "/sub/");
    cl_get(&f, &cl1, "//sub", "", &rsp1);
    CHECK_STR_EQ(ha_field(&rsp1, "Location"), "/sub/");
    cl_get(&f, &cl1, "/./sub/../a%20b?x=%41", "", &rsp1);
    CHECK_STR_EQ(ha_field(&rsp1, "Location"), "/a%20b/?x=%41");
    CHECK_EQ(f.calls, 11 + 3);
    hc_close(&cl1);
    fx_close(&f);
}

/* Sets the soft RLIMIT_NOFILE to `n` (skips when the hard limit is lower). */
static void nofile_soft(rlim_t n)
{
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < n)
        SKIP("the hard RLIMIT_NOFILE is below what the case needs");
    rl.rlim_cur = n;
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

#define FD_FILES  600
#define FD_SIZE   70000 /* over the 64 KB the cache keeps in memory: served from a descriptor */
#define FD_LIMIT  256
#define FD_CLIENT 10

/* "f<i>.bin": FD_SIZE bytes (a hole) that start with "file <i>\n". */
static void fd_files(struct fx *f)
{
    for (int i = 0; i < FD_FILES; i++) {
        char name[32], path[128], tag[32];
        snprintf(name, sizeof name, "f%d.bin", i);
        snprintf(path, sizeof path, "%s/%s", f->dir, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK_GE(fd, 0);
        int n = snprintf(tag, sizeof tag, "file %d\n", i);
        CHECK_EQ(write(fd, tag, (size_t)n), n);
        CHECK_EQ(ftruncate(fd, FD_SIZE), 0);
        CHECK_EQ(close(fd), 0);
    }
}

/* Asks for the first bytes of f<i>.bin and checks them. */
static void fd_get(struct fx *f, struct hclient *c, int i, struct hanswer *r)
{
    char target[32], tag[32];
    snprintf(target, sizeof target, "/f%d.bin", i);
    cl_get(f, c, target, "Range: bytes=0-15\r\n", r);
    if (r->status != 206)
        fprintf(stderr, "%s: %d\n", target, r->status);
    CHECK_EQ(r->status, 206);
    int n = snprintf(tag, sizeof tag, "file %d\n", i);
    CHECK_EQ(r->body_len, 16);
    CHECK_EQ(memcmp(r->body, tag, (size_t)n), 0);
}

static struct hclient fd_cl[FD_CLIENT];

/* FD_CLIENT clients that connect at once each get a cached file. */
static void fd_clients_at_once(struct fx *f)
{
    for (int i = 0; i < FD_CLIENT; i++)
        hc_open(&fd_cl[i], f->port);
    for (int i = 0; i < FD_CLIENT; i++)
        hc_send(&f->loop, &fd_cl[i], "GET /f0.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=0-15\r\n\r\n", 52);
    for (int i = 0; i < FD_CLIENT; i++) {
        CHECK_EQ(hc_answer(&f->loop, &fd_cl[i], &rsp1, 0), 0);
        CHECK_EQ(rsp1.status, 206);
        CHECK_EQ(memcmp(rsp1.body, "file 0\n", 7), 0);
        hc_close(&fd_cl[i]);
    }
}

/* Under a descriptor limit of FD_LIMIT, more distinct files than that (each kept open by the
 * cache) are all served, twice, and clients that come at once meanwhile are all answered:
 * the cache keeps no more descriptors than its share of the limit. It kept up to 1,024 and
 * emptied itself only when full, so past the limit every new file was 500 and new
 * connections could not be accepted. */
TEST(http_static_more_files_than_the_descriptor_limit_all_served) {
    nofile_soft(FD_LIMIT);
    struct fx f;
    fx_dir(&f);
    fd_files(&f);
    fx_serve(&f);
    for (int round = 0; round < 2; round++) {
        hc_open(&cl1, f.port); /* a connection per round: max_requests is 1,000 */
        for (int i = 0; i < FD_FILES; i++) {
            fd_get(&f, &cl1, i, &rsp1);
            if (i % 100 == 0)
                fd_clients_at_once(&f);
        }
        hc_close(&cl1);
    }
    CHECK_EQ(f.errors, 0);
    fx_close(&f);
}

/* Takes every descriptor left under the soft limit (dups of stdin's or of /dev/null's) into
 * fds[]; returns how many. */
static int fds_fill(int *fds, int cap)
{
    int base = open("/dev/null", O_RDONLY | O_CLOEXEC), n = 0;
    CHECK_GE(base, 0);
    while (n < cap) {
        int fd = dup(base);
        if (fd < 0) {
            CHECK_EQ(errno, EMFILE);
            break;
        }
        fds[n++] = fd;
    }
    CHECK_LT(n, cap);
    fds[n++] = base;
    return n;
}

static void fds_free(int *fds, int n)
{
    while (n)
        CHECK_EQ(close(fds[--n]), 0);
}

/* With max_open over what the process may open, an open that fails with EMFILE makes the
 * cache close its least recently used idle descriptor and try again: the file is served.
 * When the cache holds none, the answer is 503 with Retry-After (and on_error hears
 * -EMFILE), not 500; once descriptors are free again the file is served. */
TEST(http_static_out_of_descriptors_evicts_then_503) {
    nofile_soft(FD_LIMIT);
    struct fx f;
    fx_dir(&f);
    fd_files(&f);
    f.st.max_open = 100000;
    fx_serve(&f);
    hc_open(&cl1, f.port);
    fd_get(&f, &cl1, 0, &rsp1);
    fd_get(&f, &cl1, 1, &rsp1);
    static int fds[FD_LIMIT];
    int n = fds_fill(fds, FD_LIMIT);
    fd_get(&f, &cl1, 2, &rsp1); /* f0's descriptor given back for it */
    fd_get(&f, &cl1, 3, &rsp1); /* f1's */
    fd_get(&f, &cl1, 3, &rsp1); /* cached */
    CHECK_EQ(f.errors, 0);
    fd_get(&f, &cl1, 2, &rsp1); /* cached too: evicting f3 cannot free f2's */
    fds_free(fds, n);
    /* Nothing for the cache to give back: every descriptor is taken by others. */
    static struct fx g;
    fx_dir(&g);
    fd_files(&g);
    fx_serve(&g);
    hc_open(&cl1, g.port);
    fd_get(&g, &cl1, 0, &rsp1); /* the connection is up; its descriptors taken */
    mux_http_static_close(&g.st);
    CHECK_EQ(mux_http_static_init(&g.st, g.dir), 0); /* an empty cache */
    n = fds_fill(fds, FD_LIMIT);
    cl_get(&g, &cl1, "/f5.bin", "", &rsp1);
    CHECK_EQ(rsp1.status, 503);
    CHECK_STR_EQ(ha_field(&rsp1, "Retry-After"), "1");
    CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "text/plain");
    CHECK_STR_EQ(rsp1.body, "503 Service Unavailable\n");
    CHECK_EQ(g.errors, 1);
    CHECK_EQ(g.last_error, -EMFILE);
    fds_free(fds, n);
    fd_get(&g, &cl1, 5, &rsp1);
    hc_close(&cl1);
    fx_close(&g);
    fx_close(&f);
}

/* ---- ranges ----------------------------------------------------------------------------- */

/* Takes a multipart/byteranges answer apart and checks it byte for byte against the file's
 * bytes `file` (`size` of them): each part's Content-Type is `type`, its Content-Range names
 * a range of the file and its bytes are those; the ranges, in order, are `want`
 * ("f-l,f-l"). */
static void multipart_check(const struct hanswer *r, const char *file, size_t size, const char *type,
                            const char *want)
{
    CHECK_EQ(r->status, 206);
    const char *ct = ha_field(r, "Content-Type");
    static const char pre[] = "multipart/byteranges; boundary=";
    CHECK(ct != NULL && strncmp(ct, pre, sizeof pre - 1) == 0);
    char delim[128];
    int dl = snprintf(delim, sizeof delim, "--%s", ct + sizeof pre - 1);
    CHECK(dl > 2 && dl < (int)sizeof delim);
    CHECK(ha_field(r, "Content-Range") == NULL); /* only in the parts */
    const char *p = r->body, *end = r->body + r->body_len;
    if (end - p >= 2 && memcmp(p, "\r\n", 2) == 0)
        p += 2;
    char got[1024] = "";
    size_t gl = 0;
    CHECK(end - p >= dl && memcmp(p, delim, (size_t)dl) == 0);
    p += dl;
    for (;;) {
        if (end - p == 4 && memcmp(p, "--\r\n", 4) == 0)
            break; /* the close delimiter ends the body */
        CHECK(end - p >= 2 && memcmp(p, "\r\n", 2) == 0);
        p += 2;
        const char *he = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
        CHECK(he != NULL);
        char heads[512];
        CHECK_LT((size_t)(he - p), sizeof heads - 2);
        memcpy(heads, "\r\n", 2);
        memcpy(heads + 2, p, (size_t)(he - p));
        heads[2 + (he - p)] = 0;
        char want_type[160];
        snprintf(want_type, sizeof want_type, "\r\nContent-Type: %s", type);
        CHECK(strstr(heads, want_type) != NULL);
        const char *crp = strstr(heads, "\r\nContent-Range: bytes ");
        CHECK(crp != NULL);
        unsigned long long first, last, total;
        CHECK_EQ(sscanf(crp, "\r\nContent-Range: bytes %llu-%llu/%llu", &first, &last, &total), 3);
        CHECK_EQ(total, size);
        CHECK(first <= last && last < size);
        p = he + 4;
        size_t len = (size_t)(last - first + 1);
        CHECK_GE((size_t)(end - p), len);
        CHECK_EQ(memcmp(p, file + first, len), 0);
        p += len;
        int n = snprintf(got + gl, sizeof got - gl, "%s%llu-%llu", gl ? "," : "", first, last);
        CHECK(n > 0 && (size_t)n < sizeof got - gl);
        gl += (size_t)n;
        CHECK(end - p >= 2 + dl && memcmp(p, "\r\n", 2) == 0);
        CHECK_EQ(memcmp(p + 2, delim, (size_t)dl), 0);
        p += 2 + dl;
    }
    CHECK_STR_EQ(got, want);
}

static char *pattern_file(struct fx *f, const char *name, size_t size)
{
    char *b = malloc(size);
    CHECK(b != NULL);
    pattern_fill(b, 0, size);
    fx_file(f, name, b, size);
    return b;
}

/* Several ranges of a small file (copied after the head), of one kept in memory (lent), and
 * of one sent from its descriptor (read for the answer): multipart/byteranges, whose parts
 * are the bytes asked, coalesced, in the order asked; Content-Length is the body's. HEAD
 * has the same length. */
TEST(http_static_multiple_ranges_as_multipart_byteranges) {
    pattern_init();
    struct fx f;
    fx_dir(&f);
    static const struct {
        const char *name, *type;
        size_t size;
    } files[] = {
        {"small.txt", "text/plain; charset=utf-8", 5000},
        {"mid.png", "image/png", 40000},
        {"big.bin", "application/octet-stream", 300000},
    };
    char *data[3];
    for (int i = 0; i < 3; i++)
        data[i] = pattern_file(&f, files[i].name, files[i].size);
    fx_serve(&f);
    hc_open(&cl1, f.port);
    static const struct {
        const char *range, *want;
    } cases[] = {
        {"bytes=0-9,20-29", "0-9,20-29"},
        {"bytes=100-199, 0-49", "100-199,0-49"},
        {"bytes=0-9,5-30,40-49", "0-30,40-49"},
        {"bytes=-10,0-0", "-,0-0"}, /* the suffix: filled in below */
        {"bytes=1-1,3-3,5-5,7-7,9-9,11-11,13-13,15-15,17-17,19-19,21-21,23-23,25-25,27-27,"
         "29-29,31-31",
         "1-1,3-3,5-5,7-7,9-9,11-11,13-13,15-15,17-17,19-19,21-21,23-23,25-25,27-27,29-29,"
         "31-31"},
        {"bytes=0-0,4000-", "0-0,4000-"},
    };
    for (int i = 0; i < 3; i++) {
        char target[64];
        snprintf(target, sizeof target, "/%s", files[i].name);
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            char fields[512], want[512];
            snprintf(fields, sizeof fields, "Range: %s\r\n", cases[k].range);
            if (k == 3)
                snprintf(want, sizeof want, "%zu-%zu,0-0", files[i].size - 10, files[i].size - 1);
            else if (k == 5)
                snprintf(want, sizeof want, "0-0,4000-%zu", files[i].size - 1);
            else
                snprintf(want, sizeof want, "%s", cases[k].want);
            cl_get(&f, &cl1, target, fields, &rsp1);
            multipart_check(&rsp1, data[i], files[i].size, files[i].type, want);
            size_t body = rsp1.body_len;
            cl_ask(&f, &cl1, "HEAD", target, fields, &rsp1);
            CHECK_EQ(rsp1.status, 206);
            CHECK_EQ(strtoull(ha_field(&rsp1, "Content-Length"), NULL, 10), body);
        }
        /* Ranges that touch are one: a plain 206. */
        cl_get(&f, &cl1, target, "Range: bytes=10-19,20-29,0-9\r\n", &rsp1);
        CHECK_EQ(rsp1.status, 206);
        CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), files[i].type);
        char cr[64];
        snprintf(cr, sizeof cr, "bytes 0-29/%zu", files[i].size);
        CHECK_STR_EQ(ha_field(&rsp1, "Content-Range"), cr);
        CHECK_EQ(rsp1.body_len, 30);
        CHECK_EQ(memcmp(rsp1.body, data[i], 30), 0);
        /* More than max_ranges (16) listed: the whole. */
        cl_get(&f, &cl1, target, "Range: bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,"
               "20-20,22-22,24-24,26-26,28-28,30-30,32-32\r\n", &rsp1);
        CHECK_EQ(rsp1.status, 200);
        CHECK_EQ(rsp1.body_len, files[i].size);
        CHECK_EQ(memcmp(rsp1.body, data[i], files[i].size), 0);
        free(data[i]);
    }
    hc_close(&cl1);
    fx_close(&f);
}

/* A multipart body over 1 MB from a file sent from its descriptor would be read whole into
 * memory: it is answered whole instead (200), as HEAD says too; under that it is 206. */
TEST(http_static_multipart_over_a_megabyte_from_a_descriptor_is_whole) {
    pattern_init();
    struct fx f;
    fx_dir(&f);
    free(pattern_file(&f, "huge.bin", 3u << 20));
    fx_serve(&f);
    hc_open(&cl1, f.port);
    cl_ask(&f, &cl1, "HEAD", "/huge.bin", "Range: bytes=0-599999,1000000-1599999\r\n", &rsp1);
    CHECK_EQ(rsp1.status, 200);
    CHECK_STR_EQ(ha_field(&rsp1, "Content-Length"), "3145728");
    cl_ask(&f, &cl1, "HEAD", "/huge.bin", "Range: bytes=0-499999,1000000-1499999\r\n", &rsp1);
    CHECK_EQ(rsp1.status, 206);
    CHECK(strncmp(ha_field(&rsp1, "Content-Type"), "multipart/byteranges; ", 22) == 0);
    hc_close(&cl1);
    fx_close(&f);
}

/* 416 when no range can be satisfied: Content-Range: bytes * /size and a text body; a Range
 * field with an If-Range that does not match the file (its ETag or its Last-Modified, both
 * compared exactly) is ignored: 200 with the whole. */
TEST(http_static_416_and_if_range) {
    struct fx f;
    fx_dir(&f);
    fx_file(&f, "a.png", "0123456789", 10);
    fx_serve(&f);
    hc_open(&cl1, f.port);
    cl_get(&f, &cl1, "/a.png", "Range: bytes=10-,20-30\r\n", &rsp1);
    CHECK_EQ(rsp1.status, 416);
    CHECK_STR_EQ(ha_field(&rsp1, "Content-Range"), "bytes */10");
    CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "text/plain");
    CHECK_STR_EQ(rsp1.body, "416 Range Not Satisfiable\n");
    cl_get(&f, &cl1, "/a.png", "", &rsp1);
    char etag[64], lm[64], fields[256];
    snprintf(etag, sizeof etag, "%s", ha_field(&rsp1, "ETag"));
    snprintf(lm, sizeof lm, "%s", ha_field(&rsp1, "Last-Modified"));
    snprintf(fields, sizeof fields, "Range: bytes=2-3\r\nIf-Range: %s\r\n", etag);
    cl_get(&f, &cl1, "/a.png", fields, &rsp1);
    CHECK_EQ(rsp1.status, 206);
    CHECK_STR_EQ(rsp1.body, "23");
    snprintf(fields, sizeof fields, "Range: bytes=2-3\r\nIf-Range: %s\r\n", lm);
    cl_get(&f, &cl1, "/a.png", fields, &rsp1);
    CHECK_EQ(rsp1.status, 206);
    cl_get(&f, &cl1, "/a.png", "Range: bytes=2-3\r\nIf-Range: \"other\"\r\n", &rsp1);
    CHECK_EQ(rsp1.status, 200);
    CHECK_STR_EQ(rsp1.body, "0123456789");
    snprintf(fields, sizeof fields, "Range: bytes=2-3\r\nIf-Range: W/%s\r\n", etag);
    cl_get(&f, &cl1, "/a.png", fields, &rsp1); /* a weak tag never matches */
    CHECK_EQ(rsp1.status, 200);
    cl_get(&f, &cl1, "/a.png", "Range: bytes=2-3\r\nIf-Range: Sun, 06 Nov 1994 08:49:37 GMT\r\n",
           &rsp1);
    CHECK_EQ(rsp1.status, 200);
    hc_close(&cl1);
    fx_close(&f);
}

/* ---- error bodies, dot-files, listings, media types ------------------------------------- */

/* Every error the static server answers has a text/plain body naming it. */
TEST(http_static_error_answers_have_a_text_body) {
    struct fx f;
    fx_dir(&f);
    fx_file(&f, ".secret", "no\n", 3);
    fx_file(&f, "locked.txt", "no\n", 3);
    fx_mkdir(&f, "d");
    char path[128];
    snprintf(path, sizeof path, "%s/locked.txt", f.dir);
    CHECK_EQ(chmod(path, 0), 0);
    int locked = access(path, R_OK) != 0; /* root reads it anyway */
    fx_serve(&f);
    hc_open(&cl1, f.port);
    static const struct {
        const char *method, *target, *body;
        int status;
    } cases[] = {
        {"GET", "/missing", "404 Not Found\n", 404},
        {"GET", "/.secret", "403 Forbidden\n", 403},
        {"GET", "/../x", "403 Forbidden\n", 403},
        {"GET", "/a%zz", "400 Bad Request\n", 400},
        {"POST", "/x", "405 Method Not Allowed\n", 405},
        {"GET", "/d", "301 Moved Permanently\n", 301},
        {"GET", "/d/", "404 Not Found\n", 404}, /* no index, no listing */
        {"GET", "/locked.txt", "403 Forbidden\n", 403},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (i == 7 && !locked)
            continue;
        cl_ask(&f, &cl1, cases[i].method, cases[i].target,
               strcmp(cases[i].method, "POST") == 0 ? "Content-Length: 0\r\n" : "", &rsp1);
        if (rsp1.status != cases[i].status)
            fprintf(stderr, "%s %s: %d\n", cases[i].method, cases[i].target, rsp1.status);
        CHECK_EQ(rsp1.status, cases[i].status);
        CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "text/plain");
        CHECK_STR_EQ(rsp1.body, cases[i].body);
    }
    static char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[0] = '/';
    cl_get(&f, &cl1, big, "", &rsp1);
    CHECK_EQ(rsp1.status, 414);
    CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "text/plain");
    CHECK_STR_EQ(rsp1.body, "414 URI Too Long\n");
    hc_close(&cl1);
    fx_close(&f);
}

/* /.well-known/ is served, other dot-files are not (403), unless the static files allow them;
 * either way nothing above the root. */
TEST(http_static_well_known_served_and_dot_files_on_request) {
    struct fx f;
    fx_dir(&f);
    fx_mkdir(&f, ".well-known");
    fx_mkdir(&f, ".well-known/acme-challenge");
    fx_file(&f, ".well-known/acme-challenge/tok", "key\n", 4);
    fx_file(&f, ".env", "SECRET=1\n", 9);
    fx_mkdir(&f, "d");
    fx_file(&f, "d/.htpasswd", "x\n", 2);
    fx_serve(&f);
    hc_open(&cl1, f.port);
    cl_get(&f, &cl1, "/.well-known/acme-challenge/tok", "", &rsp1);
    CHECK_EQ(rsp1.status, 200);
    CHECK_STR_EQ(rsp1.body, "key\n");
    cl_get(&f, &cl1, "/.env", "", &rsp1);
    CHECK_EQ(rsp1.status, 403);
    cl_get(&f, &cl1, "/d/.htpasswd", "", &rsp1);
    CHECK_EQ(rsp1.status, 403);
    cl_get(&f, &cl1, "/.well-known/../.env", "", &rsp1);
    CHECK_EQ(rsp1.status, 403);
    hc_close(&cl1);
    mux_http_static_close(&f.st);
    f.st.flags = MUX_HTTP_STATIC_DOTFILES;
    CHECK_EQ(mux_http_static_init(&f.st, f.dir), 0);
    hc_open(&cl1, f.port);
    cl_get(&f, &cl1, "/.env", "", &rsp1);
    CHECK_EQ(rsp1.status, 200);
    CHECK_STR_EQ(rsp1.body, "SECRET=1\n");
    cl_get(&f, &cl1, "/d/.htpasswd", "", &rsp1);
    CHECK_EQ(rsp1.status, 200);
    cl_get(&f, &cl1, "/../x", "", &rsp1);
    CHECK_EQ(rsp1.status, 403);
    hc_close(&cl1);
    fx_close(&f);
}

/* Names with what a URL and HTML must escape, with their links and texts in a listing.
 * Windows has no names with '"', '?', ':', '<' or '>' in them (mux__http_win_name). */
#ifdef _WIN32
#define AB_NAME  "a b&i.txt"
#define AB_ITEM  "<li><a href=\"a%%20b%%26i.txt\">a b&amp;i.txt</a></li>\n"
#define ODD_NAME "q'#%.txt"
#define ODD_ITEM "<li><a href=\"q%%27%%23%%25.txt\">q&#39;#%%.txt</a></li>\n"
#else
#define AB_NAME  "a b&<i>.txt"
#define AB_ITEM  "<li><a href=\"a%%20b%%26%%3Ci%%3E.txt\">a b&amp;&lt;i&gt;.txt</a></li>\n"
#define ODD_NAME "q\"'?#:%.txt"
#define ODD_ITEM                                                                                   \
    "<li><a href=\"q%%22%%27%%3F%%23%%3A%%25.txt\">q&quot;&#39;?#:%%.txt</a></li>\n"
#endif

/* A listing: off by default (404); on request, an HTML page whose entries are sorted,
 * directories marked with '/', names escaped for HTML and links for URLs, and dot-files left
 * out unless allowed. An index file wins over the listing. */
TEST(http_static_autoindex_lists_escaped_sorted_names) {
    struct fx f;
    fx_dir(&f);
    fx_mkdir(&f, "pub");
    fx_file(&f, "pub/b.txt", "b", 1);
    fx_file(&f, "pub/" AB_NAME, "a", 1);
    fx_file(&f, "pub/" ODD_NAME, "q", 1);
    fx_mkdir(&f, "pub/zdir");
    fx_mkdir(&f, "pub/Upper");
    fx_file(&f, "pub/.hidden", "h", 1);
    fx_mkdir(&f, "withindex");
    fx_file(&f, "withindex/index.html", "index", 5);
    fx_serve(&f);
    hc_open(&cl1, f.port);
    cl_get(&f, &cl1, "/pub/", "", &rsp1);
    CHECK_EQ(rsp1.status, 404);
    hc_close(&cl1);
    for (int dots = 0; dots < 2; dots++) {
        mux_http_static_close(&f.st);
        f.st.flags = MUX_HTTP_STATIC_AUTOINDEX | (dots ? MUX_HTTP_STATIC_DOTFILES : 0);
        CHECK_EQ(mux_http_static_init(&f.st, f.dir), 0);
        hc_open(&cl1, f.port);
        cl_get(&f, &cl1, "/pub/", "", &rsp1);
        CHECK_EQ(rsp1.status, 200);
        CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "text/html; charset=utf-8");
        char want[2048];
        snprintf(want, sizeof want,
                 "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of "
                 "/pub/</title></head>\n<body>\n<h1>Index of /pub/</h1>\n<ul>\n"
                 "<li><a href=\"../\">../</a></li>\n%s"
                 "<li><a href=\"Upper/\">Upper/</a></li>\n"
                 AB_ITEM
                 "<li><a href=\"b.txt\">b.txt</a></li>\n" ODD_ITEM
                 "<li><a href=\"zdir/\">zdir/</a></li>\n"
                 "</ul>\n</body></html>\n",
                 dots ? "<li><a href=\".hidden\">.hidden</a></li>\n" : "");
        CHECK_STR_EQ(rsp1.body, want);
        cl_ask(&f, &cl1, "HEAD", "/pub/", "", &rsp1);
        CHECK_EQ(strtoul(ha_field(&rsp1, "Content-Length"), NULL, 10), strlen(want));
        cl_get(&f, &cl1, "/pub", "", &rsp1); /* the slash first, as for an index */
        CHECK_EQ(rsp1.status, 301);
        cl_get(&f, &cl1, "/withindex/", "", &rsp1);
        CHECK_STR_EQ(rsp1.body, "index");
        cl_get(&f, &cl1, "/", "", &rsp1); /* the root: no "../" */
        CHECK(strstr(rsp1.body, "<h1>Index of /</h1>\n<ul>\n<li><a href=\"pub/\">pub/</a></li>\n"
                                "<li><a href=\"withindex/\">withindex/</a></li>\n</ul>") != NULL);
        hc_close(&cl1);
    }
    fx_close(&f);
}

/* A link to a directory is listed as one (marked with '/'). */
TEST(http_static_autoindex_marks_a_link_to_a_directory) {
    struct fx f;
    fx_dir(&f);
    fx_mkdir(&f, "pub");
    fx_mkdir(&f, "pub/zdir");
    char target[256], link[256];
    snprintf(target, sizeof target, "%s/pub/zdir", f.dir);
    snprintf(link, sizeof link, "%s/pub/link", f.dir);
    CHECK_EQ(symlink(target, link), 0);
    f.st.flags = MUX_HTTP_STATIC_AUTOINDEX;
    fx_serve(&f);
    hc_open(&cl1, f.port);
    cl_get(&f, &cl1, "/pub/", "", &rsp1);
    CHECK_EQ(rsp1.status, 200);
    CHECK(strstr(rsp1.body, "<ul>\n<li><a href=\"../\">../</a></li>\n"
                            "<li><a href=\"link/\">link/</a></li>\n"
                            "<li><a href=\"zdir/\">zdir/</a></li>\n</ul>") != NULL);
    hc_close(&cl1);
    fx_close(&f);
}

/* Media types from the file the static files were given (which win over the built-in
 * table), from /etc/mime.types by default, the table alone with ""; a file that cannot be
 * read fails init. */
TEST(http_static_media_types_from_a_mime_types_file) {
    struct fx f;
    fx_dir(&f);
    fx_file(&f, "x.iomux", "x", 1);
    fx_file(&f, "x.deb", "x", 1);
    fx_file(&f, "x.html", "x", 1);
    char types[128];
    snprintf(types, sizeof types, "%s/.types", f.dir);
    static const char text[] = "application/x-iomux iomux\ntext/x-page html\n";
    fx_file(&f, ".types", text, sizeof text - 1);
    f.st.mime_types = types;
    fx_serve(&f);
    hc_open(&cl1, f.port);
    cl_get(&f, &cl1, "/x.iomux", "", &rsp1);
    CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "application/x-iomux");
    cl_get(&f, &cl1, "/x.html", "", &rsp1);
    CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "text/x-page; charset=utf-8");
    hc_close(&cl1);
    mux_http_static_close(&f.st);
    f.st.mime_types = ""; /* the built-in table */
    CHECK_EQ(mux_http_static_init(&f.st, f.dir), 0);
    hc_open(&cl1, f.port);
    cl_get(&f, &cl1, "/x.iomux", "", &rsp1);
    CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "application/octet-stream");
    cl_get(&f, &cl1, "/x.html", "", &rsp1);
    CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "text/html; charset=utf-8");
    cl_get(&f, &cl1, "/x.deb", "", &rsp1);
    CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "application/octet-stream");
    hc_close(&cl1);
    mux_http_static_close(&f.st);
    f.st.mime_types = NULL; /* /etc/mime.types, when there is one */
    CHECK_EQ(mux_http_static_init(&f.st, f.dir), 0);
    hc_open(&cl1, f.port);
    cl_get(&f, &cl1, "/x.deb", "", &rsp1);
    const char *sys = mux__fs_mime_types(); /* none on Windows */
    if (sys && access(sys, R_OK) == 0)
        CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "application/vnd.debian.binary-package");
    else
        CHECK_STR_EQ(ha_field(&rsp1, "Content-Type"), "application/octet-stream");
    hc_close(&cl1);
    mux_http_static_close(&f.st);
    snprintf(types, sizeof types, "%s/none", f.dir);
    f.st.mime_types = types;
    CHECK_EQ(mux_http_static_init(&f.st, f.dir), -ENOENT);
    f.st.mime_types = NULL;
    CHECK_EQ(mux_http_static_init(&f.st, f.dir), 0);
    fx_close(&f);
}
