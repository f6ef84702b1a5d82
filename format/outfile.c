/* The CLI's output files: created new and renamed into place (outfile.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "outfile.h"

/* Contract in outfile.h. */
int outfile_open_new(char *tmpl)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    size_t n = strlen(tmpl);
    if (n < 6 || strcmp(tmpl + n - 6, "XXXXXX")) {
        errno = EINVAL;
        return -1;
    }
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned char r[6];
        if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t v = (uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)getpid() << 20 ^
                         (uint64_t)attempt << 40;
            for (int i = 0; i < 6; i++, v >>= 8)
                r[i] = (unsigned char)v;
        }
        for (int i = 0; i < 6; i++)
            tmpl[n - 6 + i] = chars[r[i] % (sizeof chars - 1)];
        int fd = open(tmpl, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

/* Contract in outfile.h. */
int outfile_create(const char *path, char *tmp, size_t cap)
{
    struct stat st;
    tmp[0] = 0;
    if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
        return open(path, O_WRONLY | O_CLOEXEC);
    if ((size_t)snprintf(tmp, cap, "%s.tmp.XXXXXX", path) >= cap) {
        tmp[0] = 0;
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = outfile_open_new(tmp);
    if (fd < 0)
        tmp[0] = 0;
    return fd;
}

/* Contract in outfile.h. */
int outfile_commit(const char *tmp, const char *path)
{
    if (!tmp[0] || rename(tmp, path) == 0)
        return 0;
    outfile_discard(tmp);
    return -1;
}

/* Contract in outfile.h. */
void outfile_discard(const char *tmp)
{
    int e = errno;
    if (tmp[0])
        unlink(tmp);
    errno = e;
}
