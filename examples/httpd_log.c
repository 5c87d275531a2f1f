/* SPDX-License-Identifier: MIT */
/* iomux-httpd's access and error logs (httpd_log.h). */
#define _GNU_SOURCE
#include "httpd_log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _WIN32 /* the C runtime's: UTC by gmtime_s, files binary and not inherited */
#define gmtime_r(t, tm) (gmtime_s(tm, t) == 0 ? (tm) : NULL)
#define O_CLOEXEC       (O_BINARY | O_NOINHERIT)
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#endif

#define ACCESS_BUF  65536 /* a loop's buffer */
#define ACCESS_LINE 4096  /* the longest line: longer fields are cut */

/* ---- the error log ---- */

static struct {
    pthread_mutex_t lock;
    char last[512];
    char last_when[32];
    time_t last_sec;
    unsigned long repeats; /* of `last`, within its second, not yet said */
} errlog = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void error_log_repeats(void)
{
    if (errlog.repeats)
        fprintf(stderr, "%s iomux-httpd: (said %lu more times in that second)\n", errlog.last_when,
                errlog.repeats);
    errlog.repeats = 0;
}

void error_log(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    time_t now = time(NULL);
    pthread_mutex_lock(&errlog.lock);
    if (now == errlog.last_sec && strcmp(msg, errlog.last) == 0) {
        errlog.repeats++; /* a flood of one failure says it once a second, with a count */
    } else {
        error_log_repeats();
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(errlog.last_when, sizeof errlog.last_when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        fprintf(stderr, "%s iomux-httpd: %s\n", errlog.last_when, msg);
        snprintf(errlog.last, sizeof errlog.last, "%s", msg);
        errlog.last_sec = now;
    }
    pthread_mutex_unlock(&errlog.lock);
}

void error_log_flush(void)
{
    pthread_mutex_lock(&errlog.lock);
    error_log_repeats();
    pthread_mutex_unlock(&errlog.lock);
}

/* ---- the access log ---- */

int access_log_open(const char *path)
{
    if (strcmp(path, "-") == 0)
        return STDOUT_FILENO;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        error_log("access log %s: %s", path, strerror(errno));
    return fd;
}

int access_log_init(struct access_log *l, int fd)
{
    memset(l, 0, sizeof *l);
    l->fd = fd;
    l->sec = -1;
    l->buf = malloc(ACCESS_BUF);
    return l->buf ? 0 : -1;
}

void access_log_free(struct access_log *l)
{
    access_log_flush(l);
    free(l->buf);
    l->buf = NULL;
}

void access_log_flush(struct access_log *l)
{
    size_t off = 0;
    while (off < l->len) {
        ssize_t n = write(l->fd, l->buf + off, l->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) { /* a full disk or a closed pipe: the lines are lost, and said so */
            error_log("access log: %s (%llu bytes of lines lost)", n < 0 ? strerror(errno) : "",
                      (unsigned long long)(l->len - off));
            break;
        }
        off += (size_t)n;
    }
    l->len = 0;
}

/* Appends `len` bytes of `s` to p[0 .. end), each byte outside printable ASCII and each '"'
 * and '\' as \xHH (nginx's escaping), so that a field cannot end the quotes or the line. */
static char *put_escaped(char *p, char *end, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len && p + 4 < end; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = 'x';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        } else {
            *p++ = (char)c;
        }
    }
    return p;
}

/* A request field's value, quoted, or "-" when the request has none. */
static char *put_field(char *p, char *end, const mux_http_request_t *req, const char *name)
{
    mux_http_str_t v;
    *p++ = '"';
    if (req && mux_http_header_get(req, name, &v) == 0)
        p = put_escaped(p, end - 2, v.base, v.len);
    else
        *p++ = '-';
    *p++ = '"';
    return p;
}

/* The client's address, as Apache's %h: the IP address, or "-". */
static char *put_client(char *p, const mux_http_log_t *e)
{
    char host[INET6_ADDRSTRLEN] = "-";
    if (e->peer && e->peer->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)e->peer)->sin_addr, host, sizeof host);
    else if (e->peer && e->peer->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)e->peer)->sin6_addr, host, sizeof host);
    size_t n = strlen(host);
    memcpy(p, host, n);
    return p + n;
}

void access_log_add(struct access_log *l, const mux_http_log_t *e)
{
    if (l->len + ACCESS_LINE > ACCESS_BUF)
        access_log_flush(l);
    if (e->time_s != l->sec) { /* the time is formatted once a second */
        time_t t = (time_t)e->time_s;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(l->stamp, sizeof l->stamp, "[%d/%b/%Y:%H:%M:%S +0000]", &tm);
        l->sec = e->time_s;
    }
    char *p = l->buf + l->len, *end = p + ACCESS_LINE - 8;
    const mux_http_request_t *r = e->req;
    p = put_client(p, e);
    p += sprintf(p, " - - %s \"", l->stamp);
    if (r) { /* the request line, as it was read */
        p = put_escaped(p, end - 600, r->method.base, r->method.len);
        *p++ = ' ';
        p = put_escaped(p, end - 600, r->target.base, r->target.len);
        p += sprintf(p, " HTTP/1.%d", r->version == 10 ? 0 : 1);
    } else {
        *p++ = '-';
    }
    p += sprintf(p, "\" %d %llu ", e->status, (unsigned long long)e->body_bytes);
    p = put_field(p, end - 300, r, "referer");
    *p++ = ' ';
    p = put_field(p, end, r, "user-agent");
    *p++ = '\n';
    l->len = (size_t)(p - l->buf);
}
