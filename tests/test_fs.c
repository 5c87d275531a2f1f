/* SPDX-License-Identifier: MIT */
/* File-system watchers: fs_event (the kernel's notifications: inotify on Linux, EVFILT_VNODE
 * where kqueue is) and fs_poll (a path's status looked at on a timer), on every backend. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "stream_util.h"

#ifdef IOMUX_TEST_FS_KQUEUE
/* EVFILT_VNODE tells a directory only that its entries changed, and names none: they are
 * found by reading it again (docs/fs.md). So an entry's writes and attribute changes are not
 * heard through its directory, and an entry created and removed between two reads not at all. */
static const int fs_kq = 1;
#else
static const int fs_kq = 0;
#endif

/* What one watcher heard: per name (up to NAMES), the events or-ed, and the calls. */
#define NAMES 16
struct heard {
    int calls, overflows, gone;
    char names[NAMES][64];
    unsigned events[NAMES];
    int n;
};

static unsigned *heard_of(struct heard *h, const char *name)
{
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->names[i], name) == 0)
            return &h->events[i];
    CHECK_LT(h->n, NAMES);
    snprintf(h->names[h->n], sizeof h->names[0], "%s", name);
    h->events[h->n] = 0;
    return &h->events[h->n++];
}

static void heard_cb(mux_loop_t *loop, mux_fs_event_t *w, const char *name, unsigned events,
                     int status)
{
    (void)loop;
    struct heard *h = w->data;
    CHECK_EQ(status, 0);
    h->calls++;
    if (events & MUX_FS_OVERFLOW) {
        CHECK(name == NULL);
        h->overflows++;
        return;
    }
    CHECK(name != NULL);
    if (events & MUX_FS_GONE) {
        h->gone++;
        CHECK_EQ(mux_fs_event_is_active(w), 0); /* stopped before the call */
    }
    *heard_of(h, name) |= events;
}

/* A fresh directory under /tmp, and a path in it. */
static void fs_dir(char *dir, size_t cap)
{
    CHECK_LT(snprintf(dir, cap, "/tmp/iomux-fs-XXXXXX"), (int)cap);
    CHECK(mkdtemp(dir) != NULL);
}

static void fs_path(char *out, size_t cap, const char *dir, const char *name)
{
    CHECK_LT(snprintf(out, cap, "%s/%s", dir, name), (int)cap);
}

static void fs_write(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    CHECK_GE(fd, 0);
    CHECK_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    CHECK_EQ(close(fd), 0);
}

/* Starts `w` on `path`, or skips where this build has no notifications. */
static void fs_start(mux_loop_t *loop, mux_fs_event_t *w, const char *path, struct heard *h)
{
    memset(h, 0, sizeof *h);
    CHECK_EQ(mux_fs_event_init(w, heard_cb, path), 0);
    w->data = h;
    int err = mux_fs_event_start(loop, w);
    if (err == -ENOTSUP)
        SKIP("this build has no file-system notifications (inotify is Linux's, EVFILT_VNODE "
             "kqueue's; a portable POSIX build without kqueue, and Windows, have none): fs_poll "
             "serves there");
    CHECK_EQ(err, 0);
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            fs_path(p, sizeof p, dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

/* An entry created, written, its mode changed, renamed and deleted: each heard, by name. */
TEST(fs_event_directory_entries_are_reported_by_name) {
    mux_loop_t loop;
    loop_open(&loop);
    char dir[64], a[128], b[128];
    fs_dir(dir, sizeof dir);
    fs_path(a, sizeof a, dir, "a");
    fs_path(b, sizeof b, dir, "b");
    mux_fs_event_t w;
    struct heard h;
    fs_start(&loop, &w, dir, &h);
    CHECK_EQ(mux_loop_active(&loop), 1);
    fs_write(a, "x");
    run_for(&loop, &h.calls, 5000, "the new entry");
    run_until_count(&loop, (int *)heard_of(&h, "a"),
                    fs_kq ? MUX_FS_CREATE : MUX_FS_CREATE | MUX_FS_CHANGE, 5000, "its write");
    CHECK(*heard_of(&h, "a") & MUX_FS_CREATE);
    int before = h.calls;
#ifdef _WIN32 /* a mode there is the read-only attribute: set, then cleared for the removal */
    CHECK_EQ(chmod(a, 0444), 0);
    run_until_count(&loop, &h.calls, before + 1, 5000, "the mode change");
    CHECK(*heard_of(&h, "a") & MUX_FS_ATTRIB);
    *heard_of(&h, "a") = 0;
    CHECK_EQ(chmod(a, 0644), 0);
    before = h.calls;
    run_until_count(&loop, &h.calls, before + 1, 5000, "the mode change back");
    CHECK_EQ(*heard_of(&h, "a"), MUX_FS_ATTRIB);
#else
    if (!fs_kq) { /* an entry's own change: not the directory's on kqueue */
        CHECK_EQ(chmod(a, 0600), 0);
        run_until_count(&loop, &h.calls, before + 1, 5000, "the mode change");
        CHECK(*heard_of(&h, "a") & MUX_FS_ATTRIB);
    }
#endif
    CHECK_EQ(rename(a, b), 0);
    before = h.calls;
    run_until_count(&loop, &h.calls, before + 2, 5000, "the rename, both names");
    CHECK(*heard_of(&h, "a") & MUX_FS_RENAME);
    CHECK_EQ(*heard_of(&h, "b"), MUX_FS_RENAME);
    CHECK_EQ(unlink(b), 0);
    before = h.calls;
    run_until_count(&loop, &h.calls, before + 1, 5000, "the removal");
    CHECK(*heard_of(&h, "b") & MUX_FS_DELETE);
    CHECK_EQ(h.gone, 0);
    CHECK_EQ(h.overflows, 0);
    CHECK_EQ(mux_fs_event_stop(&loop, &w), 0);
    CHECK_EQ(mux_fs_event_free(&w), 0);
    rm_tree(dir);
    loop_finish(&loop);
}

/* Many writes to one file between two iterations come as one call (coalesced), with the
 * file's own name for a watched file; its removal stops the watcher (MUX_FS_GONE). */
TEST(fs_event_file_events_coalesce_and_its_removal_stops_the_watcher) {
    mux_loop_t loop;
    loop_open(&loop);
    char dir[64], f[128];
    fs_dir(dir, sizeof dir);
    fs_path(f, sizeof f, dir, "watched.txt");
    fs_write(f, "0");
    mux_fs_event_t w;
    struct heard h;
    fs_start(&loop, &w, f, &h);
    for (int i = 0; i < 100; i++)
        fs_write(f, "1");
    run_for(&loop, &h.calls, 5000, "the writes");
    CHECK_EQ(h.calls, 1); /* a hundred writes read in one go: one call */
    CHECK(*heard_of(&h, "watched.txt") & MUX_FS_CHANGE);
    CHECK_EQ(unlink(f), 0);
    run_for(&loop, &h.gone, 5000, "the file's removal");
    CHECK_EQ(mux_fs_event_is_active(&w), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_run(&loop, MUX_RUN_DEFAULT), 0); /* nothing keeps it running */
    CHECK_EQ(mux_fs_event_free(&w), 0);
    rm_tree(dir);
    loop_finish(&loop);
}

/* A watched directory removed: MUX_FS_GONE, the watcher stopped. */
TEST(fs_event_watched_directory_removed_is_gone) {
    mux_loop_t loop;
    loop_open(&loop);
    char dir[64], sub[128];
    fs_dir(dir, sizeof dir);
    fs_path(sub, sizeof sub, dir, "sub");
    CHECK_EQ(mkdir(sub, 0755), 0);
    mux_fs_event_t w;
    struct heard h;
    fs_start(&loop, &w, sub, &h);
    CHECK_EQ(rmdir(sub), 0);
#ifdef _WIN32
    if (win_is_wine()) {
        uint64_t end = mono_ns() + 1000 * MS;
        while (!h.gone && mono_ns() < end)
            run_ms(&loop, 20);
        if (!h.gone)
            SKIP("Wine does not implement it: Wine removes a directory that has open handles "
                 "(the watcher's) only when the last one closes, as Windows did before its "
                 "POSIX deletion semantics, and completes no ReadDirectoryChangesW of it "
                 "meanwhile (Windows completes them)");
    }
#endif
    run_for(&loop, &h.gone, 5000, "the directory's removal");
    CHECK_EQ(*heard_of(&h, "sub") & MUX_FS_GONE, MUX_FS_GONE);
    CHECK_EQ(mux_fs_event_is_active(&w), 0);
    CHECK_EQ(mux_fs_event_free(&w), 0);
    rm_tree(dir);
    loop_finish(&loop);
}

static mux_fs_event_t *victim;

static void stop_other_cb(mux_loop_t *loop, mux_fs_event_t *w, const char *name,
                          unsigned events, int status)
{
    heard_cb(loop, w, name, events, status);
    if (victim)
        CHECK_EQ(mux_fs_event_stop(loop, victim), 0);
    victim = NULL;
}

/* Two watchers of one path are both called, in start order; one stopped by the other's
 * callback is not called after; stopping both takes the kernel's watch away, and a start on
 * the path again works. */
TEST(fs_event_watchers_of_one_path_and_a_stop_from_a_callback) {
    mux_loop_t loop;
    loop_open(&loop);
    char dir[64], a[128];
    fs_dir(dir, sizeof dir);
    fs_path(a, sizeof a, dir, "a");
    mux_fs_event_t w1, w2;
    struct heard h1, h2;
    fs_start(&loop, &w1, dir, &h1);
    fs_start(&loop, &w2, dir, &h2);
    CHECK_EQ(mux_loop_active(&loop), 2);
    fs_write(a, "x");
    run_for(&loop, &h2.calls, 5000, "the second watcher");
    CHECK_EQ(h1.calls, h2.calls);
    CHECK_EQ(mux_fs_event_stop(&loop, &w1), 0);
    CHECK_EQ(mux_fs_event_stop(&loop, &w2), 0);
    CHECK_EQ(mux_fs_event_free(&w1), 0);
    CHECK_EQ(mux_fs_event_free(&w2), 0);
    /* The first stops the second from its callback. */
    memset(&h1, 0, sizeof h1);
    memset(&h2, 0, sizeof h2);
    CHECK_EQ(mux_fs_event_init(&w1, stop_other_cb, dir), 0);
    w1.data = &h1;
    CHECK_EQ(mux_fs_event_init(&w2, heard_cb, dir), 0);
    w2.data = &h2;
    CHECK_EQ(mux_fs_event_start(&loop, &w1), 0);
    CHECK_EQ(mux_fs_event_start(&loop, &w2), 0);
    victim = &w2;
    CHECK_EQ(unlink(a), 0);
    run_for(&loop, &h1.calls, 5000, "the first watcher");
    run_ms(&loop, 20);
    CHECK_EQ(h2.calls, 0);
    CHECK_EQ(mux_fs_event_is_active(&w2), 0);
    CHECK_EQ(mux_fs_event_stop(&loop, &w1), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    /* Again on the same path, after its watch went. */
    CHECK_EQ(mux_fs_event_start(&loop, &w2), 0);
    fs_write(a, "y");
    run_for(&loop, &h2.calls, 5000, "a watcher started again");
    CHECK_EQ(mux_fs_event_stop(&loop, &w2), 0);
    CHECK_EQ(mux_fs_event_free(&w1), 0);
    CHECK_EQ(mux_fs_event_free(&w2), 0);
    rm_tree(dir);
    loop_finish(&loop);
}

/* Bad input: -EINVAL, -ENOENT, -ENOTDIR, -EBUSY; never a crash. */
TEST(fs_event_refuses_bad_arguments) {
    mux_loop_t loop;
    loop_open(&loop);
    mux_fs_event_t w;
    struct heard h;
    memset(&h, 0, sizeof h);
    CHECK_EQ(mux_fs_event_init(NULL, heard_cb, "/tmp"), -EINVAL);
    CHECK_EQ(mux_fs_event_init(&w, NULL, "/tmp"), -EINVAL);
    CHECK_EQ(mux_fs_event_init(&w, heard_cb, NULL), -EINVAL);
    CHECK_EQ(mux_fs_event_init(&w, heard_cb, ""), -EINVAL);
    CHECK_EQ(mux_fs_event_init(&w, heard_cb, "/nonexistent/iomux/path"), 0);
    w.data = &h;
    int err = mux_fs_event_start(&loop, &w);
    if (err != -ENOTSUP) {
        CHECK_EQ(err, -ENOENT);
        CHECK_EQ(mux_fs_event_is_active(&w), 0);
        CHECK_EQ(mux_fs_event_free(&w), 0);
        CHECK_EQ(mux_fs_event_init(&w, heard_cb, "/etc/hostname/x"), 0);
        CHECK_EQ(mux_fs_event_start(&loop, &w), -ENOTDIR);
        CHECK_EQ(mux_fs_event_free(&w), 0);
        CHECK_EQ(mux_fs_event_init(&w, heard_cb, "/tmp"), 0);
        CHECK_EQ(mux_fs_event_start(&loop, &w), 0);
        CHECK_EQ(mux_fs_event_start(&loop, &w), -EBUSY);
        CHECK_EQ(mux_fs_event_free(&w), -EBUSY);
        CHECK_EQ(mux_fs_event_stop(NULL, &w), -EINVAL);
        CHECK_EQ(mux_fs_event_stop(&loop, &w), 0);
        CHECK_EQ(mux_fs_event_stop(&loop, &w), 0);
    }
    CHECK_EQ(mux_fs_event_start(NULL, &w), -EINVAL);
    CHECK_EQ(mux_fs_event_free(&w), 0);
    CHECK_EQ(mux_fs_event_free(&w), 0); /* twice: nothing left to free */
    loop_finish(&loop);
}

/* Many changes at once: 10,000 files created, written and removed in a watched directory.
 * Every file is heard of, created, written and deleted, unless the kernel's queue overflowed,
 * which is then heard; no descriptor is left behind (nor memory: the sanitizer's leak check). */
struct many {
    unsigned char *seen; /* per file: the events heard */
    int overflows, calls, bad;
};

#define MANY 10000

static void many_cb(mux_loop_t *loop, mux_fs_event_t *w, const char *name, unsigned events,
                    int status)
{
    (void)loop;
    struct many *m = w->data;
    CHECK_EQ(status, 0);
    m->calls++;
    if (events & MUX_FS_OVERFLOW) {
        m->overflows++;
        return;
    }
    unsigned i;
    char rest;
    if (!name || sscanf(name, "f%u%c", &i, &rest) != 1 || i >= MANY) {
        m->bad++;
        return;
    }
    m->seen[i] |= (unsigned char)events;
}

static int many_missing(const struct many *m, unsigned want)
{
    int missing = 0;
    for (int i = 0; i < MANY; i++)
        missing += (m->seen[i] & want) != want;
    return missing;
}

TEST(fs_event_ten_thousand_files_all_heard_or_an_overflow) {
    /* 20,000 files written and removed under the sanitizers take 3 s on a quiet machine and
     * more than the harness's 20 s at a load of 18: the watchdog waits longer here. */
    harness_watchdog(240);
    if (fs_kq) { /* libkqueue keeps two descriptors from its first kqueue on: made first */
        mux_loop_t first;
        mux_fs_event_t w;
        struct heard h;
        loop_open(&first);
        fs_start(&first, &w, "/tmp", &h);
        CHECK_EQ(mux_fs_event_stop(&first, &w), 0);
        CHECK_EQ(mux_fs_event_free(&w), 0);
        loop_finish(&first);
    }
    int fds_before = 0;
    for (int fd = 0; fd < 1024; fd++)
        fds_before += fcntl(fd, F_GETFD) >= 0;
    mux_loop_t loop;
    loop_open(&loop);
    char dir[64], p[128];
    fs_dir(dir, sizeof dir);
    static struct many m;
    m = (struct many){.seen = calloc(MANY, 1)};
    CHECK(m.seen != NULL);
    mux_fs_event_t w;
    struct heard unused;
    fs_start(&loop, &w, dir, &unused);
    w.cb_ = many_cb; /* the case's own callback, set before any event */
    w.data = &m;
    /* Twice: read as they come (every 500 files), then all at once, past what the kernel
     * queues by default (16,384 events: 30,000 here), where the overflow is what is heard.
     * On kqueue, where a file created and removed between two reads of the directory is never
     * seen and no queue overflows, the files are all created in the first pass (each heard
     * created) and all removed in the second (each heard removed). */
    for (int pass = 0; pass < 2; pass++) {
        memset(m.seen, 0, MANY);
        m.overflows = m.calls = 0;
        unsigned want = !fs_kq ? MUX_FS_CREATE | MUX_FS_CHANGE | MUX_FS_DELETE
                        : pass == 0 ? MUX_FS_CREATE
                                    : MUX_FS_DELETE;
        for (int i = 0; i < MANY; i++) {
            snprintf(p, sizeof p, "%s/f%d", dir, i);
            if (!fs_kq || pass == 0)
                fs_write(p, "data");
            if (!fs_kq || pass == 1)
                CHECK_EQ(unlink(p), 0);
            if (pass == 0 && i % 500 == 499)
                CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0);
        }
        /* Everything the kernel queued is read: the last file's removal comes last (on
         * kqueue, whose reads tell entries in name order, every file is counted). */
        int all = 0, missing = MANY;
        uint64_t end = mono_ns() + 60000 * MS;
        while (!all && mono_ns() < end) {
            run_ms(&loop, 20);
            if (fs_kq)
                missing = many_missing(&m, want);
            all = m.overflows > 0 || (fs_kq ? missing == 0 : m.seen[MANY - 1] & MUX_FS_DELETE);
        }
        run_ms(&loop, 50);
        CHECK(all);
        missing = many_missing(&m, want);
        fprintf(stderr, "pass %d: %d calls, %d overflows, %d files missing an event\n", pass,
                m.calls, m.overflows, missing);
        CHECK_EQ(m.bad, 0);
        CHECK(missing == 0 || m.overflows > 0);
    }
    CHECK_EQ(mux_fs_event_stop(&loop, &w), 0);
    CHECK_EQ(mux_fs_event_free(&w), 0);
    free(m.seen);
    rm_tree(dir);
    loop_finish(&loop);
    int fds_after = 0;
    for (int fd = 0; fd < 1024; fd++)
        fds_after += fcntl(fd, F_GETFD) >= 0;
    CHECK_EQ(fds_after, fds_before); /* the loop's inotify descriptor went with it */
}

/* ---- fs_poll ---- */

struct polled {
    int calls, status, in_start;
    mux_fs_stat_t prev, curr;
};

static void polled_cb(mux_loop_t *loop, mux_fs_poll_t *w, int status, const mux_fs_stat_t *prev,
                      const mux_fs_stat_t *curr)
{
    (void)loop;
    struct polled *p = w->data;
    CHECK_EQ(p->in_start, 0); /* never from inside mux_fs_poll_start */
    p->calls++;
    p->status = status;
    p->prev = *prev;
    p->curr = *curr;
}

/* A file's change, removal and return are each heard once, with the status before and after;
 * a path missing at the start is said at once, from the loop. */
TEST(fs_poll_reports_changes_removal_and_return) {
    mux_loop_t loop;
    loop_open(&loop);
    char dir[64], f[128];
    fs_dir(dir, sizeof dir);
    fs_path(f, sizeof f, dir, "polled");
    fs_write(f, "1");
    mux_fs_poll_t w;
    struct polled p = {0};
    CHECK_EQ(mux_fs_poll_init(&w, polled_cb, f, 0), -EINVAL);
    CHECK_EQ(mux_fs_poll_init(&w, polled_cb, "", 5 * MS), -EINVAL);
    CHECK_EQ(mux_fs_poll_init(&w, polled_cb, f, 5 * MS), 0);
    w.data = &p;
    p.in_start = 1;
    CHECK_EQ(mux_fs_poll_start(&loop, &w), 0);
    p.in_start = 0;
    CHECK_EQ(mux_fs_poll_start(&loop, &w), -EBUSY);
    CHECK_EQ(mux_loop_active(&loop), 1);
    run_ms(&loop, 30);
    CHECK_EQ(p.calls, 0); /* nothing changed */
    fs_write(f, "22");
    run_for(&loop, &p.calls, 5000, "the change");
    CHECK_EQ(p.status, 0);
    CHECK_EQ(p.prev.size, 1);
    CHECK_EQ(p.curr.size, 3);
    CHECK_EQ(p.curr.ino, p.prev.ino);
    CHECK_EQ(unlink(f), 0);
    run_until_count(&loop, &p.calls, 2, 5000, "the removal");
    CHECK_EQ(p.status, -ENOENT);
    CHECK_EQ(p.prev.size, 3);
    CHECK_EQ(p.curr.size, 0);
    run_ms(&loop, 30);
    CHECK_EQ(p.calls, 2); /* once per change of status */
    fs_write(f, "4444");
    run_until_count(&loop, &p.calls, 3, 5000, "the return");
    CHECK_EQ(p.status, 0);
    CHECK_EQ(p.curr.size, 4);
    CHECK_EQ(mux_fs_poll_free(&w), -EBUSY);
    CHECK_EQ(mux_unref(&loop, MUX_HANDLE_FS_POLL, &w), 0);
    CHECK_EQ(mux_loop_active(&loop), 0);
    CHECK_EQ(mux_fs_poll_stop(&loop, &w), 0);
    CHECK_EQ(mux_fs_poll_free(&w), 0);
    /* Missing at start: said once, from the loop. */
    CHECK_EQ(mux_fs_poll_init(&w, polled_cb, "/nonexistent/iomux/polled", 5 * MS), 0);
    memset(&p, 0, sizeof p);
    w.data = &p;
    p.in_start = 1;
    CHECK_EQ(mux_fs_poll_start(&loop, &w), 0);
    p.in_start = 0;
    CHECK_EQ(p.calls, 0);
    run_for(&loop, &p.calls, 5000, "the missing path");
    CHECK_EQ(p.status, -ENOENT);
    run_ms(&loop, 30);
    CHECK_EQ(p.calls, 1);
    CHECK_EQ(mux_fs_poll_stop(&loop, &w), 0);
    CHECK_EQ(mux_fs_poll_free(&w), 0);
    CHECK_EQ(mux_fs_poll_stop(NULL, &w), -EINVAL);
    rm_tree(dir);
    loop_finish(&loop);
}

/* After a fork, the child's loop has a notification descriptor of its own: it hears what is
 * done in the watched directory, and so does the parent's, neither taking the other's. */
TEST(fs_event_after_fork_child_and_parent_each_hear) {
    mux_loop_t loop;
    loop_open(&loop);
    char dir[64], c[128];
    fs_dir(dir, sizeof dir);
    fs_path(c, sizeof c, dir, "from-child");
    mux_fs_event_t w;
    struct heard h;
    fs_start(&loop, &w, dir, &h);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        CHECK_GE(mux_run(&loop, MUX_RUN_NOWAIT), 0); /* the loop notices the fork */
        fs_write(c, "x");
        uint64_t end = mono_ns() + 5000 * MS;
        while (!(*heard_of(&h, "from-child") & MUX_FS_CREATE) && mono_ns() < end)
            run_ms(&loop, 5);
        child_exit((*heard_of(&h, "from-child") & MUX_FS_CREATE) ? 0 : 1);
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    uint64_t end = mono_ns() + 5000 * MS;
    while (!(*heard_of(&h, "from-child") & MUX_FS_CREATE) && mono_ns() < end)
        run_ms(&loop, 5);
    CHECK(*heard_of(&h, "from-child") & MUX_FS_CREATE);
    CHECK_EQ(mux_fs_event_stop(&loop, &w), 0);
    CHECK_EQ(mux_fs_event_free(&w), 0);
    rm_tree(dir);
    loop_finish(&loop);
}
