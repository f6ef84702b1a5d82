/* A disk that fills up, for the recorder's writer: preloaded next to the
 * recorder, this write() lets ENOSPC_AFTER bytes (default 20000) through to
 * files whose name contains ".msnap" and then fails every further write to
 * them with ENOSPC (the write that crosses the limit is cut short, as on a
 * full file system).  Writes to anything else (the program's stdout and
 * stderr) pass untouched.  Test-only: a tmpfs of a few KiB would need root.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Atomic long written;   /* bytes let through to snapshot files */

/* 1 when fd is a file whose path contains ".msnap". */
static int is_snapshot(int fd)
{
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
        return 0;
    target[n] = 0;
    return strstr(target, ".msnap") != NULL;
}

/* write(2) with the limit above; the real write for everything else. */
ssize_t write(int fd, const void *buf, size_t count)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (!real)
        real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (fd <= 2 || !is_snapshot(fd))
        return real(fd, buf, count);
    const char *s = getenv("ENOSPC_AFTER");
    long limit = s ? atol(s) : 20000;
    long room = limit - atomic_load(&written);
    if (room <= 0) {
        errno = ENOSPC;
        return -1;
    }
    if ((long)count > room)
        count = (size_t)room;
    ssize_t w = real(fd, buf, count);
    if (w > 0)
        atomic_fetch_add(&written, (long)w);
    return w;
}
