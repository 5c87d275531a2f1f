/* SPDX-License-Identifier: MIT */
/* What the service cases count to show that nothing is left behind: the process's threads,
 * descriptors and unreaped children, from /proc (on Windows: the process's threads from a
 * Toolhelp snapshot, its handles from GetProcessHandleCount). */
#ifndef IOMUX_TEST_WORK_UTIL_H
#define IOMUX_TEST_WORK_UTIL_H

#ifdef _WIN32
#include <tlhelp32.h>

#include "harness.h"

static inline long count_threads(void)
{
    HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
    if (snap == INVALID_HANDLE_VALUE)
        harness_fail(__FILE__, __LINE__, "CreateToolhelp32Snapshot", "threads");
    THREADENTRY32 t = {.dwSize = sizeof t};
    DWORD self = GetCurrentProcessId();
    long n = 0;
    for (BOOL ok = Thread32First(snap, &t); ok; ok = Thread32Next(snap, &t))
        n += t.th32OwnerProcessID == self;
    CloseHandle(snap);
    return n;
}

static inline long count_fds(void)
{
    DWORD n = 0;
    if (!GetProcessHandleCount(GetCurrentProcess(), &n))
        harness_fail(__FILE__, __LINE__, "GetProcessHandleCount", "handles");
    return (long)n;
}
#else
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

#endif
