/* SPDX-License-Identifier: MIT */
/* What the service cases count to show that nothing is left behind: the process's threads,
 * descriptors and unreaped children, from /proc. */
#ifndef IOMUX_TEST_WORK_UTIL_H
#define IOMUX_TEST_WORK_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* The entries of a /proc directory, "." and ".." left out; fails the case if it cannot be
 * read. */
static inline long count_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        harness_fail(__FILE__, __LINE__, "opendir", path);
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

/* The process's threads, ThreadSanitizer's own (a background thread it starts with the
 * process's second thread) left out. */
static inline long count_threads(void)
{
    long n = count_dir("/proc/self/task");
#if defined(__SANITIZE_THREAD__)
    if (n > 1)
        n--;
#endif
    return n;
}

/* The process's open descriptors (the one that reads them is not counted). */
static inline long count_fds(void)
{
    return count_dir("/proc/self/fd") - 1;
}

#endif
