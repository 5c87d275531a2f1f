/* SPDX-License-Identifier: MIT */
/* libiomux-event's evbuffers, beyond what libevent's own evbuffer/ group checks here (most of
 * its cases look inside libevent's chains; tests/libevent): every call on bad input, frozen
 * buffers, reservations, pull-ups across chunks, line styles, and reading and writing
 * descriptors (pipes and sockets, more chunks than one gathered write takes). */
#include <event2/buffer.h>
#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wchar.h>

#include "event_fixture.h"
#include "harness.h"

CORE_TEST(evbuffer_calls_refuse_null_and_empty_input) {
    struct evbuffer_iovec v;
    CHECK_EQ(evbuffer_get_length(NULL), 0);
    CHECK_EQ(evbuffer_get_contiguous_space(NULL), 0);
    CHECK_EQ(evbuffer_expand(NULL, 1), -1);
    CHECK_EQ(evbuffer_add(NULL, "x", 1), -1);
    CHECK_EQ(evbuffer_prepend(NULL, "x", 1), -1);
    CHECK_EQ(evbuffer_add_printf(NULL, "%d", 1), -1);
    CHECK_EQ(evbuffer_drain(NULL, 1), -1);
    CHECK_EQ(evbuffer_copyout(NULL, &v, 1), -1);
    CHECK_EQ(evbuffer_remove(NULL, &v, 1), -1);
    CHECK(evbuffer_pullup(NULL, -1) == NULL);
    CHECK(evbuffer_readln(NULL, NULL, EVBUFFER_EOL_LF) == NULL);
    CHECK_EQ(evbuffer_peek(NULL, -1, NULL, &v, 1), -1);
    CHECK_EQ(evbuffer_reserve_space(NULL, 1, &v, 1), -1);
    CHECK_EQ(evbuffer_commit_space(NULL, &v, 1), -1);
    CHECK_EQ(evbuffer_read(NULL, 0, 1), -1);
    CHECK_EQ(evbuffer_write(NULL, 1), -1);
    CHECK_EQ(evbuffer_freeze(NULL, 1), -1);
    CHECK_EQ(evbuffer_unfreeze(NULL, 0), -1);
    CHECK_EQ(evbuffer_enable_locking(NULL, NULL), -1);
    evbuffer_free(NULL);

    struct evbuffer *b = evbuffer_new(), *o = evbuffer_new();
    CHECK(b && o);
    CHECK_EQ(evbuffer_enable_locking(b, NULL), 0); /* a base belongs to one thread: no lock */
    evbuffer_lock(b);
    evbuffer_unlock(b);
    CHECK_EQ(evbuffer_add(b, NULL, 1), -1);
    CHECK_EQ(evbuffer_add(b, NULL, 0), 0);
    CHECK_EQ(evbuffer_prepend(b, NULL, 1), -1);
    CHECK_EQ(evbuffer_prepend(b, NULL, 0), 0);
    CHECK_EQ(evbuffer_add_printf(b, NULL), -1);
    CHECK_EQ(evbuffer_copyout(b, NULL, 1), -1);
    CHECK_EQ(evbuffer_copyout(b, NULL, 0), 0);
    CHECK_EQ(evbuffer_remove(b, NULL, 1), -1);
    CHECK_EQ(evbuffer_get_length(b), 0);
    CHECK_EQ(evbuffer_get_contiguous_space(b), 0);
    CHECK(evbuffer_pullup(b, 0) == NULL); /* nothing to point at */
    CHECK(evbuffer_pullup(b, 1) == NULL);  /* more than there is */
    CHECK_EQ(evbuffer_add_buffer(b, b), -1);
    CHECK_EQ(evbuffer_add_buffer(b, NULL), -1);
    CHECK_EQ(evbuffer_add_buffer(NULL, b), -1);
    CHECK_EQ(evbuffer_add_buffer(b, o), 0); /* nothing to move */
    CHECK_EQ(evbuffer_remove_buffer(b, b, 1), -1);
    CHECK_EQ(evbuffer_remove_buffer(NULL, o, 1), -1);
    CHECK_EQ(evbuffer_remove_buffer(b, NULL, 1), -1);
    CHECK_EQ(evbuffer_remove_buffer(b, o, 10), 0);
    CHECK_EQ(evbuffer_unfreeze(b, 1), -1); /* was not frozen */
    CHECK_EQ(evbuffer_unfreeze(b, 0), -1);
    CHECK_EQ(evbuffer_peek(b, -1, NULL, &v, 1), 0);
    char *line = evbuffer_readln(b, NULL, EVBUFFER_EOL_LF);
    CHECK(line == NULL);
    evbuffer_free(b);
    evbuffer_free(o);
}

CORE_TEST(evbuffer_sizes_no_allocation_can_hold_are_refused) {
    struct evbuffer *b = evbuffer_new();
    CHECK_EQ(evbuffer_expand(b, SIZE_MAX), -1);
    /* Empty, so nothing of the data is read before the chunk for all of it fails. */
    CHECK_EQ(evbuffer_add(b, "x", SIZE_MAX - 1), -1);
    CHECK_EQ(evbuffer_prepend(b, "x", SIZE_MAX - 1), -1);
    CHECK_EQ(evbuffer_get_length(b), 0);
    /* A format the C library cannot convert (a wide character outside the "C" locale). */
#ifndef _WIN32 /* Windows' C runtime converts any wide character, as '?' where it must */
    static const wchar_t wide[] = {0x20ac, 0};
    CHECK_EQ(evbuffer_add_printf(b, "%ls", wide), -1);
    CHECK_EQ(evbuffer_get_length(b), 0);
#endif
    evbuffer_free(b);
}

static int vprintf_into(struct evbuffer *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = evbuffer_add_vprintf(b, fmt, ap);
    va_end(ap);
    return n;
}

CORE_TEST(evbuffer_adds_prepends_and_prints_in_order) {
    struct evbuffer *b = evbuffer_new();
    CHECK_EQ(evbuffer_prepend(b, "mid", 3), 0); /* onto an empty buffer */
    CHECK_EQ(evbuffer_add(b, "-end", 4), 0);
    CHECK_EQ(evbuffer_prepend(b, "start-", 6), 0);
    CHECK_EQ(evbuffer_add_printf(b, "/%d/%s", 42, "x"), 5);
    CHECK_EQ(vprintf_into(b, "[%03d]", 7), 5);
    CHECK_STR_EQ(evt_buffer_text(b), "start-mid-end/42/x[007]");
    CHECK_EQ(evbuffer_get_length(b), 23);
    CHECK_EQ(evbuffer_get_contiguous_space(b), 6); /* the prepended chunk */
    CHECK_EQ(evbuffer_expand(b, 100000), 0);       /* room at the end, no bytes */
    CHECK_EQ(evbuffer_get_length(b), 23);
    CHECK_EQ(evbuffer_add(b, "!", 1), 0);
    CHECK_STR_EQ(evt_buffer_text(b), "start-mid-end/42/x[007]!");
    evbuffer_free(b);
}

CORE_TEST(evbuffer_frozen_ends_refuse_what_would_change_them) {
    struct evbuffer *b = evbuffer_new(), *o = evbuffer_new();
    struct evbuffer_iovec v;
    char c[8];
    CHECK_EQ(evbuffer_add(b, "ab", 2), 0);
    CHECK_EQ(evbuffer_prepend(b, "x", 1), 0); /* two chunks: "x", "ab" */
    CHECK_EQ(evbuffer_add(o, "o", 1), 0);
    CHECK_EQ(evbuffer_freeze(b, 1), 0);
    CHECK_EQ(evbuffer_drain(b, 1), -1);
    CHECK_EQ(evbuffer_remove(b, c, 1), -1);
    CHECK_EQ(evbuffer_prepend(b, "y", 1), -1);
    CHECK(evbuffer_readln(b, NULL, EVBUFFER_EOL_ANY) == NULL);
    CHECK(evbuffer_pullup(b, 3) == NULL);  /* would move the front */
    CHECK(evbuffer_pullup(b, 1) != NULL);  /* already contiguous: nothing moves */
    CHECK_EQ(evbuffer_add_buffer(o, b), -1);
    CHECK_EQ(evbuffer_remove_buffer(b, o, 1), -1);
    CHECK_EQ(evbuffer_copyout(b, c, 3), 3); /* reading without draining is allowed */
    CHECK_EQ(evbuffer_add(b, "c", 1), 0);   /* and the back is free */
    CHECK_EQ(evbuffer_unfreeze(b, 1), 0);
    CHECK_EQ(evbuffer_freeze(b, 0), 0);
    CHECK_EQ(evbuffer_add(b, "d", 1), -1);
    CHECK_EQ(evbuffer_add_printf(b, "%d", 1), -1);
    CHECK_EQ(evbuffer_reserve_space(b, 1, &v, 1), -1);
    CHECK_EQ(evbuffer_commit_space(b, &v, 1), -1);
    CHECK_EQ(evbuffer_add_buffer(b, o), -1);
    CHECK_EQ(evbuffer_remove_buffer(o, b, 1), -1);
    CHECK_EQ(evbuffer_read(b, 0, 1), -1);
    CHECK_EQ(evbuffer_drain(b, 1), 0); /* the front is free */
    CHECK_EQ(evbuffer_unfreeze(b, 0), 0);
    CHECK_STR_EQ(evt_buffer_text(b), "abc");
    evbuffer_free(b);
    evbuffer_free(o);
}

CORE_TEST(evbuffer_remove_buffer_moves_whole_chunks_and_copies_the_edge) {
    struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
    CHECK_EQ(evbuffer_add(src, "6789", 4), 0);
    CHECK_EQ(evbuffer_prepend(src, "345", 3), 0);
    CHECK_EQ(evbuffer_prepend(src, "012", 3), 0); /* chunks "012" "345" "6789" */
    CHECK_EQ(evbuffer_add(dst, ">", 1), 0);
    CHECK_EQ(evbuffer_remove_buffer(src, dst, 5), 5); /* "012" moves, "34" is copied */
    CHECK_STR_EQ(evt_buffer_text(dst), ">01234");
    CHECK_STR_EQ(evt_buffer_text(src), "56789");
    CHECK_EQ(evbuffer_remove_buffer(src, dst, 1), 1); /* what is left of a chunk moves whole */
    CHECK_STR_EQ(evt_buffer_text(src), "6789");
    CHECK_EQ(evbuffer_remove_buffer(src, dst, 4), 4); /* the last chunk whole */
    CHECK_EQ(evbuffer_get_length(src), 0);
    CHECK_STR_EQ(evt_buffer_text(dst), ">0123456789");
    CHECK_EQ(evbuffer_add(src, "abc", 3), 0);
    CHECK_EQ(evbuffer_remove_buffer(src, dst, 100), 3); /* more than there is: all */
    CHECK_STR_EQ(evt_buffer_text(dst), ">0123456789abc");
    evbuffer_free(src);
    evbuffer_free(dst);
}

CORE_TEST(evbuffer_pullup_makes_the_front_contiguous_without_losing_bytes) {
    struct evbuffer *b = evbuffer_new();
    CHECK_EQ(evbuffer_add(b, "world", 5), 0);
    CHECK_EQ(evbuffer_prepend(b, "hello ", 6), 0);
    unsigned char *p = evbuffer_pullup(b, 0); /* no bytes asked: the front as it is */
    CHECK(p != NULL);
    CHECK_EQ(memcmp(p, "hello ", 6), 0);
    CHECK(evbuffer_pullup(b, 6) == p); /* the first chunk holds them: no copy */
    CHECK(evbuffer_pullup(b, 12) == NULL);
    p = evbuffer_pullup(b, 8);
    CHECK(p != NULL);
    CHECK_EQ(memcmp(p, "hello wo", 8), 0);
    CHECK_EQ(evbuffer_get_contiguous_space(b), 8);
    CHECK_STR_EQ(evt_buffer_text(b), "hello world");
    p = evbuffer_pullup(b, -1);
    CHECK_EQ(memcmp(p, "hello world", 11), 0);
    CHECK_EQ(evbuffer_get_contiguous_space(b), 11);
    CHECK_EQ(evbuffer_get_length(b), 11);
    evbuffer_free(b);
}

CORE_TEST(evbuffer_peek_lists_the_chunks_up_to_a_length) {
    struct evbuffer *b = evbuffer_new();
    CHECK_EQ(evbuffer_add(b, "cc", 2), 0);
    CHECK_EQ(evbuffer_prepend(b, "bbb", 3), 0);
    CHECK_EQ(evbuffer_prepend(b, "a", 1), 0);
    struct evbuffer_iovec v[4];
    CHECK_EQ(evbuffer_peek(b, -1, NULL, NULL, 0), 3); /* how many extents it takes */
    CHECK_EQ(evbuffer_peek(b, -1, NULL, v, 4), 3);
    CHECK_EQ(v[0].iov_len, 1);
    CHECK_EQ(v[1].iov_len, 3);
    CHECK_EQ(v[2].iov_len, 2);
    CHECK_EQ(memcmp(v[1].iov_base, "bbb", 3), 0);
    CHECK_EQ(evbuffer_peek(b, 2, NULL, v, 4), 2); /* the second extent cut to fit */
    CHECK_EQ(v[1].iov_len, 1);
    CHECK_EQ(evbuffer_peek(b, -1, NULL, v, 1), 3); /* fills one, says three */
    CHECK_EQ(v[0].iov_len, 1);
    int pos = 0; /* struct evbuffer_ptr positions are not offered */
    CHECK_EQ(evbuffer_peek(b, -1, (void *)&pos, v, 4), -1);
    evbuffer_free(b);
}

CORE_TEST(evbuffer_reserve_and_commit_take_one_extent_and_check_it) {
    struct evbuffer *b = evbuffer_new();
    struct evbuffer_iovec v[2];
    CHECK_EQ(evbuffer_reserve_space(b, 0, v, 1), -1);
    CHECK_EQ(evbuffer_reserve_space(b, 10, v, 0), -1);
    CHECK_EQ(evbuffer_reserve_space(b, 100, v, 2), 1); /* one extent, however many given */
    CHECK_GE(v[0].iov_len, 100);
    memcpy(v[0].iov_base, "reserved", 8);
    v[0].iov_len = 8;
    CHECK_EQ(evbuffer_commit_space(b, v, 2), -1); /* two extents were never handed out */
    CHECK_EQ(evbuffer_commit_space(b, v, -1), -1);
    CHECK_EQ(evbuffer_commit_space(b, v, 0), 0); /* nothing */
    CHECK_EQ(evbuffer_get_length(b), 0);
    struct evbuffer_iovec wrong = {(char *)v[0].iov_base + 1, 4};
    CHECK_EQ(evbuffer_commit_space(b, &wrong, 1), -1); /* not where the space starts */
    struct evbuffer_iovec toolong = {v[0].iov_base, 1u << 20};
    CHECK_EQ(evbuffer_commit_space(b, &toolong, 1), -1); /* more than there is room for */
    CHECK_EQ(evbuffer_commit_space(b, v, 1), 0);
    CHECK_STR_EQ(evt_buffer_text(b), "reserved");
    CHECK_EQ(evbuffer_reserve_space(b, 4, v, 1), 1); /* the same chunk's rest */
    v[0].iov_len = 0;
    CHECK_EQ(evbuffer_commit_space(b, v, 1), 0); /* committing nothing is allowed */
    CHECK_EQ(evbuffer_get_length(b), 8);
    evbuffer_free(b);
    b = evbuffer_new();
    struct evbuffer_iovec none = {NULL, 0};
    CHECK_EQ(evbuffer_commit_space(b, &none, 1), -1); /* nothing was reserved */
    evbuffer_free(b);
}

static char *readln(struct evbuffer *b, enum evbuffer_eol_style style, size_t *n)
{
    char *s = evbuffer_readln(b, n, style);
    static char copy[256];
    if (!s)
        return NULL;
    snprintf(copy, sizeof copy, "%s", s);
    free(s);
    return copy;
}

CORE_TEST(evbuffer_readln_ends_lines_as_each_style_says) {
    struct evbuffer *b = evbuffer_new();
    size_t n = 99;
    CHECK_EQ(evbuffer_add(b, "a\nb\r\nc\r\r\n\nd\0e", 13), 0);
    CHECK_STR_EQ(readln(b, EVBUFFER_EOL_CRLF_STRICT, &n), "a\nb"); /* only \r\n ends it */
    CHECK_EQ(n, 3);
    CHECK_STR_EQ(readln(b, EVBUFFER_EOL_ANY, &n), "c"); /* and the whole \r\r\n\n run */
    CHECK_EQ(n, 1);
    CHECK_STR_EQ(evt_buffer_text(b), "d");
    CHECK_EQ(evbuffer_get_length(b), 3);
    CHECK_STR_EQ(readln(b, EVBUFFER_EOL_NUL, NULL), "d");
    CHECK_EQ(evbuffer_get_length(b), 1);
    CHECK(readln(b, EVBUFFER_EOL_LF, &n) == NULL); /* no end yet */
    CHECK(readln(b, (enum evbuffer_eol_style)99, &n) == NULL);
    CHECK_EQ(evbuffer_drain(b, 1), 0);
    /* A line across chunks, \r\n split between them. */
    CHECK_EQ(evbuffer_add(b, "\nrest", 5), 0);
    CHECK_EQ(evbuffer_prepend(b, "two\r", 4), 0);
    CHECK_EQ(evbuffer_prepend(b, "line ", 5), 0);
    CHECK_STR_EQ(readln(b, EVBUFFER_EOL_CRLF, &n), "line two");
    CHECK_EQ(n, 8);
    CHECK_STR_EQ(evt_buffer_text(b), "rest");
    CHECK_EQ(evbuffer_add(b, "\n\n", 2), 0);
    CHECK_STR_EQ(readln(b, EVBUFFER_EOL_LF, &n), "rest");
    CHECK_STR_EQ(readln(b, EVBUFFER_EOL_CRLF, &n), ""); /* an empty line */
    CHECK_EQ(n, 0);
    CHECK_EQ(evbuffer_get_length(b), 0);
    evbuffer_free(b);
}

#ifdef _WIN32
/* On Windows the cases' socket pairs and pipes are loopback TCP pairs: a send after the peer's
 * close goes out, and the peer's reset makes a later one fail. Writes `b` (one byte, again
 * each time) to `fd` until a write fails; its errno. */
static int write_until_refused(struct evbuffer *b, int fd)
{
    for (int i = 0; i < 400; i++) {
        if (evbuffer_get_length(b) == 0)
            CHECK_EQ(evbuffer_add(b, "x", 1), 0);
        if (evbuffer_write(b, fd) == -1)
            return errno;
        sleep_ms(5);
    }
    CHECK(!"a send to a closed peer never failed");
    return 0;
}
#endif

CORE_TEST(evbuffer_read_and_write_move_bytes_through_a_pipe) {
    int p[2];
    make_pipe(p);
    struct evbuffer *b = evbuffer_new();
    CHECK_EQ(evbuffer_read(b, p[0], 10), -1); /* nothing yet */
    CHECK_EQ(errno, EAGAIN);
    CHECK_EQ(write(p[1], "0123456789", 10), 10);
    CHECK_EQ(evbuffer_read(b, p[0], 4), 4);
    CHECK_EQ(evbuffer_read(b, p[0], -1), 6); /* as much as there is */
    CHECK_STR_EQ(evt_buffer_text(b), "0123456789");
    /* A pipe is not a socket: the write falls back from sendmsg to writev. */
    CHECK_EQ(evbuffer_write_atmost(b, p[1], 3), 3);
    CHECK_STR_EQ(evt_buffer_text(b), "3456789");
    CHECK_EQ(evbuffer_write(b, p[1]), 7);
    CHECK_EQ(evbuffer_get_length(b), 0);
    CHECK_EQ(evbuffer_write(b, p[1]), 0); /* nothing to write */
    char got[16];
    CHECK_EQ(read(p[0], got, sizeof got), 10);
    CHECK_EQ(memcmp(got, "0123456789", 10), 0);
    close(p[1]);
    CHECK_EQ(evbuffer_read(b, p[0], 0), 0); /* the end */
    CHECK_EQ(evbuffer_add(b, "x", 1), 0);
    CHECK_EQ(evbuffer_freeze(b, 1), 0);
    CHECK_EQ(evbuffer_write(b, p[0]), -1); /* frozen at the front */
    CHECK_EQ(evbuffer_unfreeze(b, 1), 0);
#ifdef _WIN32 /* the pipe is a TCP pair: its read end can send, until the peer's reset */
    int err = write_until_refused(b, p[0]);
    CHECK(err == ECONNRESET || err == ECONNABORTED || err == EPIPE);
#else
    CHECK_EQ(evbuffer_write(b, p[0]), -1); /* the read end of a pipe */
    CHECK_EQ(evbuffer_get_length(b), 1);
#endif
    close(p[0]);
    evbuffer_free(b);
}

CORE_TEST(evbuffer_write_sends_at_most_64_chunks_at_once_over_a_socket) {
    int sv[2];
    make_socketpair(sv);
    struct evbuffer *b = evbuffer_new();
    char chunk[10];
    for (int i = 99; i >= 0; i--) { /* 100 chunks of 10 bytes, chunk i filled with 'A' + i%26 */
        memset(chunk, 'A' + i % 26, sizeof chunk);
        CHECK_EQ(evbuffer_prepend(b, chunk, sizeof chunk), 0);
    }
    CHECK_EQ(evbuffer_peek(b, -1, NULL, NULL, 0), 100);
    CHECK_EQ(evbuffer_write(b, sv[0]), 640);
    CHECK_EQ(evbuffer_get_length(b), 360);
    char got[1000];
    CHECK_EQ(read(sv[1], got, sizeof got), 640);
    CHECK_EQ(got[0], 'A');
    CHECK_EQ(got[639], 'A' + 63 % 26);
    CHECK_EQ(evbuffer_write(b, sv[0]), 360);
    CHECK_EQ(read(sv[1], got, sizeof got), 360);
    CHECK_EQ(got[359], 'A' + 99 % 26);
    close(sv[1]);
    CHECK_EQ(evbuffer_add(b, "x", 1), 0);
#ifdef _WIN32 /* a TCP pair: the peer's close is learnt from its reset */
    int err = write_until_refused(b, sv[0]);
    CHECK(err == ECONNRESET || err == ECONNABORTED || err == EPIPE);
#else
    CHECK_EQ(evbuffer_write(b, sv[0]), -1); /* the peer is gone, and no SIGPIPE came */
    CHECK_EQ(errno, EPIPE);
#endif
    close(sv[0]);
    evbuffer_free(b);
}
