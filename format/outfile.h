/* Output files of the CLI (symbolize -o, export -o, the render and compare
 * PNGs through viz/canvas.c, replay -o through whatif/replay.c) are never
 * opened in place: a new file is created (O_EXCL) as PATH.tmp.XXXXXX in the
 * target's folder and renamed over PATH when complete, so an existing file
 * or a hard link at PATH is replaced, never truncated or written through, and a
 * failure leaves PATH as it was.  A device or FIFO at PATH (/dev/null, a
 * named pipe) is written in place; a symlink at PATH is replaced, its target
 * left alone. */
#ifndef MEMSNAP_CLI_OUTFILE_H
#define MEMSNAP_CLI_OUTFILE_H
#include <stddef.h>

/* Opens the file that will become path; tmp (cap bytes) receives its
 * temporary name, "" when path is written in place.  The new file gets
 * mode 0666 less the umask.  Returns the fd, or -1 with errno set. */
int outfile_create(const char *path, char *tmp, size_t cap);

/* Creates a new file from the name tmpl, whose last six characters are
 * "XXXXXX" (replaced, in place, by random letters and digits until a name
 * is free): O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, read-write, mode
 * 0666 less the umask as for any file a program creates (mkstemp's 0600
 * would ignore the umask).  The umask is left alone (never set and reset),
 * so this is safe in a multi-threaded process: the recorder's writer
 * creates its snapshots with it.  Returns the fd, or -1 with errno set. */
int outfile_open_new(char *tmpl);

/* Puts the finished file in place (renames tmp over path; nothing when
 * tmp is "").  0, or -1 with errno (tmp is then removed). */
int outfile_commit(const char *tmp, const char *path);

/* Removes the temporary file after a failure (errno kept). */
void outfile_discard(const char *tmp);

#endif
