/* SPDX-License-Identifier: MIT */
/* Backend-independent cases: the public ABI, version, error names, the timer heap, the
 * backend registry and how a loop picks its backend. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#if defined(__linux__)
#include <sys/utsname.h>
#endif

#include "backend/backend.h"
#include "harness.h"
#include "heap.h"

CORE_TEST(struct_sizes_are_pinned) {
#if defined(__x86_64__) && defined(__LP64__)
    /* The issue demands an io watcher <= 48 bytes and a timer <= 56; every size is pinned
     * so that growth is a deliberate change of this test. */
    CHECK_EQ(sizeof(mux_io_t), 40);
    CHECK_EQ(sizeof(mux_timer_t), 56);
    CHECK_EQ(sizeof(mux_periodic_t), 56);
    CHECK_EQ(sizeof(mux_signal_t), 40);
    CHECK_EQ(sizeof(mux_child_t), 40);
    CHECK_EQ(sizeof(mux_idle_t), 40);
    CHECK_EQ(sizeof(mux_prepare_t), 40);
    CHECK_EQ(sizeof(mux_check_t), 40);
    CHECK_EQ(sizeof(mux_fork_t), 40);
    CHECK_EQ(sizeof(mux_async_t), 56);
    CHECK_EQ(sizeof(mux_loop_t), 16);
    CHECK_EQ(sizeof(mux_loop_options_t), 16);
    /* The stream layer: a stream is under seven cache lines, a write request one; none of it is one
     * backend's (an operation's private space is a union of the emulation's watcher and a
     * completion backend's links). */
    CHECK_EQ(sizeof(mux_stream_t), 440); /* 432 until the pool send without a request */
    CHECK_EQ(sizeof(mux_write_t), 72); /* 64 until mux_write_file: its descriptor and offset */
    CHECK_EQ(sizeof(mux_listener_t), 288);
    CHECK_EQ(sizeof(mux_bufpool_t), 72);
    CHECK_EQ(sizeof(struct mux__op), 72);
    CHECK_EQ(sizeof(mux_buf_t), 16);
    CHECK_EQ(sizeof(mux_listen_options_t), 16); /* 12 until `cpu` (CPU steering) */
    CHECK_EQ(sizeof(mux_chan_t), 144);
    CHECK_EQ(sizeof(mux_msg_t), 24);
    CHECK_EQ(sizeof(mux_stream_timeouts_t), 24);
    CHECK_LE(sizeof(mux_io_t), 48);
    CHECK_LE(sizeof(mux_timer_t), 56);
#else
    SKIP("sizes are pinned for x86-64 Linux only");
#endif
}

CORE_TEST(version_matches_macros) {
    unsigned v = (MUX_VERSION_MAJOR << 16) | (MUX_VERSION_MINOR << 8) | MUX_VERSION_PATCH;
    CHECK_EQ(mux_version(), v);
    CHECK_EQ(MUX_VERSION_HEX, v);
#if MUX_VERSION_HEX < 0x000100 /* usable in the preprocessor */
#error "MUX_VERSION_HEX is not a constant expression of the version"
#endif
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", MUX_VERSION_MAJOR, MUX_VERSION_MINOR,
             MUX_VERSION_PATCH);
    CHECK_STR_EQ(mux_version_string(), want);
}

CORE_TEST(strerror_names_codes_and_handles_unknown) {
    CHECK(strstr(mux_strerror(-EINVAL), "EINVAL") != NULL);
    CHECK(strstr(mux_strerror(-EBUSY), "EBUSY") != NULL);
    CHECK(strstr(mux_strerror(-ENOMEM), "ENOMEM") != NULL);
    CHECK(strstr(mux_strerror(-ENOTSUP), "ENOTSUP") != NULL);
    /* Every code the stream layer returns or calls back with has its name. */
    static const int stream_codes[] = {
        EADDRINUSE,   EADDRNOTAVAIL, EAFNOSUPPORT, ENOTCONN, ENOTSOCK,     ENOBUFS,    ENETUNREACH,
        EHOSTUNREACH, ECONNABORTED,  EPROTO,       EIO,      ECONNREFUSED, ECONNRESET, EPIPE,
        ETIMEDOUT,    ECANCELED,     EMFILE,       ENFILE,   EALREADY,     EEXIST};
    for (size_t i = 0; i < sizeof stream_codes / sizeof stream_codes[0]; i++)
        CHECK(strcmp(mux_strerror(-stream_codes[i]), "unknown error") != 0);
    CHECK(strstr(mux_strerror(-EADDRINUSE), "EADDRINUSE") != NULL);
    CHECK_STR_EQ(mux_strerror(-123456), "unknown error");
    CHECK_STR_EQ(mux_strerror(-4095), "unknown error");
    CHECK(mux_strerror(0) != NULL);
    CHECK(mux_strerror(-2147483647 - 1) != NULL); /* INT_MIN: no overflow when negated */
    CHECK(mux_strerror(2147483647) != NULL);
}

/* Every errno the C library names has a name in mux_strerror too, "NAME: what it means", so
 * that no code a system call passes up through the library prints as "unknown error"
 * (ENOTDIR did, for iomux-httpd --root naming a file). The C library's own list is walked,
 * not a copy of it; names that share a number (EAGAIN and EWOULDBLOCK) may stand for it. */
CORE_TEST(strerror_names_every_errno_the_c_library_names) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
    static const char *const aliases[][2] = {
        {"EWOULDBLOCK", "EAGAIN"}, {"EDEADLOCK", "EDEADLK"}, {"EOPNOTSUPP", "ENOTSUP"}};
    int named = 0;
    for (int e = 1; e < 4096; e++) {
        const char *name = strerrorname_np(e);
        if (!name)
            continue;
        named++;
        const char *text = mux_strerror(-e);
        CHECK_STR_EQ(text, mux_strerror(e));
        size_t n = strlen(name);
        int ok = strncmp(text, name, n) == 0 && text[n] == ':';
        for (size_t i = 0; !ok && i < sizeof aliases / sizeof aliases[0]; i++)
            if (strcmp(name, aliases[i][0]) == 0 || strcmp(name, aliases[i][1]) == 0) {
                const char *other = strcmp(name, aliases[i][0]) == 0 ? aliases[i][1] : aliases[i][0];
                ok = strncmp(text, other, strlen(other)) == 0 && text[strlen(other)] == ':';
            }
        if (!ok)
            fprintf(stderr, "errno %d (%s) is named \"%s\"\n", e, name, text);
        CHECK(ok);
    }
    CHECK_GT(named, 120); /* Linux names 133 */
#else
    SKIP("the C library has no strerrorname_np (glibc 2.32 and later) to walk its errnos");
#endif
}

/* Pops the minimum and checks (at, seq) never goes backwards. */
CORE_TEST(heap_random_operations_keep_order) {
    enum { N = 20000 };
    struct mux__hlink *links = calloc(N, sizeof *links);
    uint64_t *at = calloc(N, sizeof *at);
    char *in = calloc(N, 1);
    CHECK(links && at && in);
    struct mux__heap h = {0};
    CHECK_EQ(mux__heap_reserve(&h, N), 0);
    uint64_t rng = 12345, seq = 0;
    for (int round = 0; round < 200000; round++) {
        uint32_t i = (uint32_t)(prng_next(&rng) % N);
        uint64_t key = prng_next(&rng) % 1000; /* many ties: the sequence decides */
        if (!in[i]) {
            links[i].seq = ++seq;
            at[i] = key;
            mux__heap_insert(&h, &links[i], key);
            in[i] = 1;
        } else if (round % 3 == 0) {
            at[i] = key;
            mux__heap_update(&h, &links[i], key);
        } else {
            mux__heap_remove(&h, &links[i]);
            in[i] = 0;
        }
    }
    uint32_t count = 0;
    for (uint32_t i = 0; i < N; i++) {
        if (in[i]) {
            count++;
            CHECK_EQ(links[i].index < h.n, 1);
            CHECK(h.v[links[i].index].link == &links[i]);
            CHECK_EQ(mux__heap_at(&h, &links[i]), at[i]);
        }
    }
    CHECK_EQ(h.n, count);
    uint64_t last_at = 0, last_seq = 0;
    while (h.n > 0) {
        struct mux__hlink *l = h.v[0].link;
        uint64_t a = h.v[0].at;
        CHECK(a > last_at || (a == last_at && l->seq > last_seq));
        last_at = a;
        last_seq = l->seq;
        mux__heap_remove(&h, l);
    }
    mux__aligned_free(h.v);
    free(links);
    free(at);
    free(in);
}

static int is_backend(const char *name)
{
    for (size_t i = 0; mux_backend_name(i); i++)
        if (strcmp(mux_backend_name(i), name) == 0)
            return 1;
    return 0;
}

/* The registry holds exactly the backends the build configured (IOMUX_TEST_BACKENDS, from
 * CMakeLists.txt), in that order: epoll and io_uring on Linux, only poll and select in a
 * portable-POSIX build. */
CORE_TEST(backend_list_is_the_configured_one) {
    char want[128];
    snprintf(want, sizeof want, "%s", IOMUX_TEST_BACKENDS);
    size_t n = 0;
    for (char *save = NULL, *name = strtok_r(want, ",", &save); name;
         name = strtok_r(NULL, ",", &save), n++)
        CHECK_STR_EQ(mux_backend_name(n), name);
    CHECK(mux_backend_name(n) == NULL);
    CHECK(mux_backend_name((size_t)-1) == NULL);
#ifdef _WIN32
    CHECK(is_backend("iocp"));
    CHECK(!is_backend("poll"));
#else
    CHECK(is_backend("poll"));
#endif
    CHECK(is_backend("select"));
#if defined(__linux__) && !defined(IOMUX_TEST_PORTABLE)
    CHECK(is_backend("epoll"));
#else
    CHECK(!is_backend("epoll"));
#endif
}

/* Whether `name` is one of this build's backends. */
static int backend_built(const char *name)
{
    for (size_t i = 0; mux_backend_name(i); i++)
        if (strcmp(mux_backend_name(i), name) == 0)
            return 1;
    return 0;
}

CORE_TEST(backend_probe_results) {
    CHECK_EQ(mux_backend_probe(NULL), -EINVAL);
    CHECK_EQ(mux_backend_probe("no-such-backend"), -EINVAL);
    CHECK_EQ(mux_backend_probe(""), -EINVAL);
#ifdef _WIN32
    CHECK_EQ(mux_backend_probe("iocp"), 0);
    CHECK_EQ(mux_backend_probe("poll"), -ENOTSUP);
#else
    CHECK_EQ(mux_backend_probe("poll"), 0);
    CHECK_EQ(mux_backend_probe("iocp"), -ENOTSUP);
#endif
    CHECK_EQ(mux_backend_probe("select"), 0);
#if defined(__linux__) && !defined(IOMUX_TEST_PORTABLE)
    CHECK_EQ(mux_backend_probe("epoll"), 0);
#else
    CHECK_EQ(mux_backend_probe("epoll"), -ENOTSUP); /* known, not in this build */
    CHECK_EQ(mux_backend_probe("uring"), -ENOTSUP);
#endif
    /* Names of other platforms' mechanisms: known but absent here (kqueue is built on Linux
     * against libkqueue when asked: IOMUX_KQUEUE). */
    CHECK_EQ(mux_backend_probe("kqueue"), backend_built("kqueue") ? 0 : -ENOTSUP);
    for (size_t i = 0; mux_backend_name(i); i++) {
        int r = mux_backend_probe(mux_backend_name(i));
        CHECK(r <= 0);
        CHECK(r != -EINVAL);
    }
}

static void count_timer(mux_loop_t *loop, mux_timer_t *t)
{
    (void)loop;
    (*(int *)t->data)++;
}

/* A loop on `name` runs a timer. */
static void check_named_backend_works(const char *name)
{
    mux_loop_t loop;
    mux_loop_options_t opts = {name, 0};
    CHECK_EQ(mux_loop_init(&loop, &opts), 0);
    CHECK_STR_EQ(mux_loop_backend(&loop), name);
    mux_timer_t t;
    int fired = 0;
    CHECK_EQ(mux_timer_init(&t, count_timer), 0);
    t.data = &fired;
    CHECK_EQ(mux_timer_start(&loop, &t, 1 * MS, 0), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0);
    CHECK_EQ(fired, 1);
    CHECK_EQ(mux_loop_close(&loop), 0);
}

CORE_TEST(loop_opens_every_compiled_backend_by_name) {
    unsetenv("IOMUX_BACKEND");
    for (size_t i = 0; mux_backend_name(i); i++) {
        const char *name = mux_backend_name(i);
        int probe = mux_backend_probe(name);
        if (probe == 0) {
            check_named_backend_works(name);
        } else {
            mux_loop_t loop;
            mux_loop_options_t opts = {name, 0};
            printf("backend %s cannot open here: %s\n", name, mux_strerror(probe));
            CHECK_EQ(mux_loop_init(&loop, &opts), probe);
        }
    }
}

/* io_uring declines to be the automatic choice on a kernel before 6.1 (docs/backends.md,
 * "How the default is chosen"; test_uring.c tests the rule itself). */
static int declines_default(const char *name)
{
#if defined(__linux__)
    struct utsname u;
    unsigned major = 0, minor = 0;
    if (strcmp(name, "uring") != 0 || uname(&u) != 0 ||
        sscanf(u.release, "%u.%u", &major, &minor) < 1)
        return 0;
    return major < 6 || (major == 6 && minor < 1);
#else
    (void)name;
    return 0;
#endif
}

/* The default: the first backend that opens, an opt-in one (MUX__CAP_NAMED_ONLY) passed by,
 * and io_uring on a kernel its rule declines. */
static const char *first_openable(void)
{
    for (size_t i = 0; mux__backends[i]; i++)
        if (!(mux__backends[i]->caps & MUX__CAP_NAMED_ONLY) &&
            !declines_default(mux__backends[i]->name) &&
            mux_backend_probe(mux__backends[i]->name) == 0)
            return mux__backends[i]->name;
    return NULL;
}

CORE_TEST(loop_default_backend_is_first_that_opens) {
    unsetenv("IOMUX_BACKEND");
    CHECK(first_openable() != NULL);
    mux_loop_t loop;
    CHECK_EQ(mux_loop_init(&loop, NULL), 0);
    CHECK_STR_EQ(mux_loop_backend(&loop), first_openable());
    CHECK_EQ(mux_loop_close(&loop), 0);
}

CORE_TEST(loop_env_names_backend) {
    mux_loop_t loop;
    CHECK_EQ(setenv("IOMUX_BACKEND", "select", 1), 0);
    CHECK_EQ(mux_loop_init(&loop, NULL), 0);
    CHECK_STR_EQ(mux_loop_backend(&loop), "select");
    CHECK_EQ(mux_loop_close(&loop), 0);
    /* Options win over the environment. */
#ifdef _WIN32
    const char *other = "iocp"; /* no poll on Windows */
#else
    const char *other = "poll";
#endif
    mux_loop_options_t opts = {other, 0};
    CHECK_EQ(mux_loop_init(&loop, &opts), 0);
    CHECK_STR_EQ(mux_loop_backend(&loop), other);
    CHECK_EQ(mux_loop_close(&loop), 0);
    unsetenv("IOMUX_BACKEND");
}

CORE_TEST(loop_env_empty_counts_as_unset) {
    CHECK_EQ(setenv("IOMUX_BACKEND", "", 1), 0);
    mux_loop_t loop;
    CHECK_EQ(mux_loop_init(&loop, NULL), 0);
    CHECK_STR_EQ(mux_loop_backend(&loop), first_openable());
    CHECK_EQ(mux_loop_close(&loop), 0);
    unsetenv("IOMUX_BACKEND");
}

CORE_TEST(loop_env_unknown_backend_is_einval) {
    mux_loop_t loop;
    CHECK_EQ(setenv("IOMUX_BACKEND", "no-such-backend", 1), 0);
    CHECK_EQ(mux_loop_init(&loop, NULL), -EINVAL);
    mux_loop_options_t plain = {NULL, 0};
    CHECK_EQ(mux_loop_init(&loop, &plain), -EINVAL);
    /* MUX_LOOP_IGNORE_ENV: the variable is not read at all. */
    mux_loop_options_t ignore = {NULL, MUX_LOOP_IGNORE_ENV};
    CHECK_EQ(mux_loop_init(&loop, &ignore), 0);
    CHECK(mux_loop_backend(&loop) != NULL);
    CHECK_EQ(mux_loop_close(&loop), 0);
    /* A name in the options is used, the environment is not consulted. */
    mux_loop_options_t named = {"select", 0};
    CHECK_EQ(mux_loop_init(&loop, &named), 0);
    CHECK_STR_EQ(mux_loop_backend(&loop), "select");
    CHECK_EQ(mux_loop_close(&loop), 0);
    unsetenv("IOMUX_BACKEND");
}

CORE_TEST(loop_init_rejects_bad_options) {
    mux_loop_t loop;
    mux_loop_options_t unknown = {"no-such-backend", 0};
    CHECK_EQ(mux_loop_init(&loop, &unknown), -EINVAL);
    mux_loop_options_t flags = {NULL, 0x100};
    CHECK_EQ(mux_loop_init(&loop, &flags), -EINVAL);
    CHECK_EQ(mux_loop_init(NULL, NULL), -EINVAL);
#ifdef __linux__
    mux_loop_options_t kq = {"kqueue", 0};
    if (!backend_built("kqueue")) {
        int r = mux_loop_init(&loop, &kq);
        CHECK(r == -ENOTSUP || r == -EINVAL);
    }
#endif
}
