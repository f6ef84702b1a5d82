/* Output files: the one policy every file memsnap writes follows (the
 * recorder's snapshots, symbolize -o and in place, export -o, import -o,
 * the render and compare PNGs and SVGs through viz/canvas.c, replay -o).
 *
 *   - Never opened in place.  A new file is created (O_EXCL, O_NOFOLLOW) as
 *     PATH.tmp.XXXXXX in the target's folder and renamed over PATH when
 *     complete (the recorder's stream: as soon as its header is on disk),
 *     so a reader never sees half a file, a failure leaves PATH as it was,
 *     and an existing file or a hard link at PATH is replaced, never
 *     truncated or written through (the other names of a hard-linked file
 *     keep their content).
 *   - Mode 0666 less the umask, as for any file a program creates (not
 *     mkstemp's 0600, which would ignore the umask).
 *   - A device or FIFO at PATH (-o /dev/null, a named pipe) is written in
 *     place: renaming over it would put a file where the device or pipe was
 *     (a root user would replace /dev/null) and the pipe's reader would wait
 *     for ever.
 *   - A symbolic link at PATH: the two writers differ, on purpose.
 *       OUTFILE_REPLACE_LINK (the commands: cli/, viz/, whatif/): the link
 *         is replaced by the new file, its target left alone.  The person
 *         typed the path just now, so a link there is theirs; replacing it
 *         touches nothing outside the name they gave (symbolize in place
 *         resolves a link first, so that it rewrites the file the link
 *         names, cmd_symbolize.c).
 *       OUTFILE_REFUSE_LINK (the recorder, recorder/writer.c): refused
 *         (ELOOP).  The recorder writes from inside somebody else's program,
 *         to a name made from a pattern (%p, %n, %t) that others can guess,
 *         often in a shared folder such as /tmp, with nobody there to ask: a
 *         link planted at such a name is an attack or a mistake, so the
 *         program runs on unrecorded with one line on stderr (memsnap run
 *         refuses such a path before it starts the program, cmd_run.c).
 */
#ifndef MEMSNAP_UTIL_OUTFILE_H
#define MEMSNAP_UTIL_OUTFILE_H
#include <stddef.h>

/* What outfile_create does with a symbolic link at the path (see above). */
enum { OUTFILE_REPLACE_LINK = 0, OUTFILE_REFUSE_LINK = 1 };

/* Opens the file that will become path (links: OUTFILE_*); tmp (cap
 * bytes) receives its temporary name, "" when path is written in place.
 * Returns the fd, or -1 with errno set (ELOOP: a link refused,
 * ENAMETOOLONG: path too long for tmp), nothing left behind. */
int outfile_create(const char *path, int links, char *tmp, size_t cap);

/* Creates a new file from the name tmpl, whose last six characters are
 * "XXXXXX" (replaced, in place, by random letters and digits until a name
 * is free): O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, read-write, mode
 * 0666 less the umask.  The umask is left alone (never set and reset),
 * so this is safe in a multi-threaded process: the recorder's writer
 * creates its snapshots with it.  Returns the fd, or -1 with errno set. */
int outfile_open_new(char *tmpl);

/* Puts the finished file in place (renames tmp over path; nothing when
 * tmp is "").  0, or -1 with errno (tmp is then removed). */
int outfile_commit(const char *tmp, const char *path);

/* Removes the temporary file after a failure (errno kept). */
void outfile_discard(const char *tmp);

/* Temporaries a signal must not leave behind (the commands': Ctrl-C during
 * an export leaves no 70 MB PATH.tmp.XXXXXX).  Off until outfile_track(1)
 * (the CLI turns it on; the recorder never does: it runs inside somebody
 * else's program and installs no handler).  While on, every temporary
 * outfile_open_new makes is kept in a small table until outfile_commit or
 * outfile_discard; outfile_track_name / outfile_untrack_name do the same
 * for a temporary made another way (SQLite's).  outfile_unlink_tracked
 * removes them all and is async-signal-safe (unlink only): a handler of
 * SIGINT or SIGTERM calls it, then dies of the signal. */
void outfile_track(int on);
void outfile_track_name(const char *tmp);
void outfile_untrack_name(const char *tmp);
void outfile_unlink_tracked(void);

#endif
