/* The CLI's output files: created new and renamed into place (outfile.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

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
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        tmp[0] = 0;
        return -1;
    }
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0666 & ~um);
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
