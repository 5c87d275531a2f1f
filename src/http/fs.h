/* SPDX-License-Identifier: MIT */
/* The static files' file system: the one place the HTTP module learns which system it runs
 * on, as src/platform/ is for the layers below. fs_posix.c implements it with descriptors and
 * openat (openat2 where Linux has it); fs_win.c with Windows handles, whose values fit an int
 * as sockets' do (Windows keeps handles to 32 bits for 32-bit processes that share them), so
 * that the cache and the server keep an `int` for a file on both. The stream layer sends such
 * a file as it is (mux__write_os_file, stream/stream.h).
 *
 * Paths are UTF-8. Every call returns 0 (or a file) on success and a negative errno on
 * failure: -ENOENT for a name that is not there or that the system would not read as named
 * (Windows: a device name, a stream, a short name, a trailing dot), -EACCES, -EXDEV for a name
 * that leads out of the root through a link, -EMFILE when the process has no file left. */
#ifndef IOMUX_HTTP_FS_H
#define IOMUX_HTTP_FS_H

#include <stddef.h>
#include <stdint.h>

enum { MUX__FS_OTHER, MUX__FS_REG, MUX__FS_DIR };

/* What the cache knows of a file. */
struct mux__fs_stat {
    uint64_t size;
    int64_t mtime_ns; /* last written, ns since the Unix epoch */
    uint64_t dev, ino; /* which file it is: st_dev and st_ino; a volume and a file index */
    int kind;          /* MUX__FS_* */
};

/* The root directory, opened for serving, and its real path (allocated: free it): the file,
 * or -errno (-ENOTDIR for a root that is not a directory). */
int mux__fs_root_open(const char *root, char **real);
/* Opens `rel` (a path mux__http_path made: no "..", '/' between segments; "" for the root
 * itself) below the root, read-only, never through a link that leads out of it. The file, or
 * -errno. */
int mux__fs_open(int root, const char *root_real, const char *rel);
void mux__fs_close(int file);
int mux__fs_stat(int file, struct mux__fs_stat *sb);
/* What `rel` below the root names now (the cache's check of a name). */
int mux__fs_stat_at(int root, const char *root_real, const char *rel, struct mux__fs_stat *sb);
/* Reads `len` bytes from `off`. 0, or -errno (-EIO when the file ends first). */
int mux__fs_read_at(int file, char *out, size_t len, uint64_t off);
/* The whole file at `path` (a regular file of at most `max` bytes: else -EINVAL, -EFBIG),
 * with a byte to spare after it. 0 with *out (free it) and *len set, or -errno. */
int mux__fs_read_file(const char *path, size_t max, char **out, size_t *len);
/* How many files the cache may keep open by default: a quarter of the soft RLIMIT_NOFILE on
 * POSIX, where connections share the descriptors; `cap` where handles are no scarcer than
 * memory (Windows). */
uint32_t mux__fs_default_max_open(uint32_t cap);
/* The system's mime.types, or NULL where there is none to look for (Windows). */
const char *mux__fs_mime_types(void);

/* A directory's entry, for a listing. */
struct mux__dirent {
    char *name; /* UTF-8 */
    int dir;    /* leads to a directory (through a link too) */
};
/* The entries of the directory `file` (taken: closed before it returns), "." and ".." left
 * out, names that start with '.' too unless `dotfiles`, and on Windows the names it would
 * refuse to serve. Unsorted. 0 with *out (free each name, then it) and *n set, or -errno. */
int mux__fs_dir_read(int file, int dotfiles, struct mux__dirent **out, size_t *n);

#endif
