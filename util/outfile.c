/* Output files: created new and renamed into place (outfile.h has the
 * policy and its reasons). */
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

#include <signal.h>

/* ---- temporaries a signal must not leave behind (outfile.h) ---------- */

#define TRACK_MAX 16
#define TRACK_LEN 4200
static int tracking;
static char tracked[TRACK_MAX][TRACK_LEN];
static volatile sig_atomic_t tracked_used[TRACK_MAX];

void outfile_track(int on)
{
    tracking = on;
}

void outfile_track_name(const char *tmp)
{
    if (!tracking || !tmp || !tmp[0] || strlen(tmp) >= TRACK_LEN)
        return;
    for (int i = 0; i < TRACK_MAX; i++)
        if (!tracked_used[i]) {
            memcpy(tracked[i], tmp, strlen(tmp) + 1);
            tracked_used[i] = 1;   /* set after the name: a handler reads whole names */
            return;
        }
}

void outfile_untrack_name(const char *tmp)
{
    if (!tmp || !tmp[0])
        return;
    for (int i = 0; i < TRACK_MAX; i++)
        if (tracked_used[i] && !strcmp(tracked[i], tmp))
            tracked_used[i] = 0;
}

void outfile_unlink_tracked(void)
{
    for (int i = 0; i < TRACK_MAX; i++)
        if (tracked_used[i]) {
            unlink(tracked[i]);
            tracked_used[i] = 0;
        }
}

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
        /* while tracking, the signals whose handler removes the tracked
         * temporaries wait between the file's creation and its tracking:
         * one that came there left the file (the CLI's handler, SIGINT,
         * SIGTERM, SIGHUP) */
        sigset_t block, was;
        if (tracking) {
            sigemptyset(&block);
            sigaddset(&block, SIGINT);
            sigaddset(&block, SIGTERM);
            sigaddset(&block, SIGHUP);
            sigprocmask(SIG_BLOCK, &block, &was);
        }
        int fd = open(tmpl, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        int saved = errno;
        if (fd >= 0)
            outfile_track_name(tmpl);
        if (tracking)
            sigprocmask(SIG_SETMASK, &was, NULL);
        errno = saved;
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

/* Contract in outfile.h. */
int outfile_create(const char *path, int links, char *tmp, size_t cap)
{
    struct stat st;
    tmp[0] = 0;
    int refuse = links == OUTFILE_REFUSE_LINK;
    /* the recorder looks at the name itself, the commands at what it names */
    if ((refuse ? lstat(path, &st) : stat(path, &st)) == 0) {
        if (S_ISLNK(st.st_mode)) {
            errno = ELOOP;
            return -1;
        }
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
            return open(path, O_WRONLY | O_CLOEXEC | (refuse ? O_NOFOLLOW : 0));
    }
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
    if (!tmp[0])
        return 0;
    if (rename(tmp, path) == 0) {
        outfile_untrack_name(tmp);
        return 0;
    }
    outfile_discard(tmp);
    return -1;
}

/* Contract in outfile.h. */
void outfile_discard(const char *tmp)
{
    int e = errno;
    if (tmp[0]) {
        unlink(tmp);
        outfile_untrack_name(tmp);
    }
    errno = e;
}
