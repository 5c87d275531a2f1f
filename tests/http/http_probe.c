/* SPDX-License-Identifier: MIT */
/* Reads one request head from stdin and prints what mux_http_parse_request made of it, for
 * tests/http/h11_parser_diff.py. Strings are printed in hex.
 *   ok LEN METHOD TARGET VERSION FLAGS CONTENT_LENGTH   then a line "h NAME VALUE" per field
 *   bad STATUS
 *   more
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "iomux/http.h"

static void hex(mux_http_str_t s)
{
    putchar(' ');
    if (s.len == 0)
        putchar('-');
    for (size_t i = 0; i < s.len; i++)
        printf("%02x", (unsigned char)s.base[i]);
}

int main(void)
{
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, stdin);
    static mux_http_header_t h[256];
    mux_http_request_t req = {.headers = h, .headers_cap = 256};
    ssize_t r = mux_http_parse_request(&req, buf, n, 0, NULL);
    if (r == -EAGAIN) {
        puts("more");
    } else if (r == -EBADMSG) {
        printf("bad %d\n", req.status);
    } else if (r < 0) {
        printf("error %zd\n", r);
        return 1;
    } else {
        printf("ok %zd", r);
        hex(req.method);
        hex(req.target);
        printf(" %d %u %llu\n", req.version, req.flags, (unsigned long long)req.content_length);
        for (uint32_t i = 0; i < req.nheaders; i++) {
            printf("h");
            hex(req.headers[i].name);
            hex(req.headers[i].value);
            putchar('\n');
        }
    }
    return 0;
}
