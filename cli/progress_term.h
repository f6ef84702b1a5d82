/* progress: one line on the terminal saying how far long work got.
 *
 *   progress_init(quiet)        once, at start: on only when stderr is a
 *                               terminal (not a pipe, not a CI log), TERM is
 *                               not "dumb" and quiet is 0
 *   progress_update(what, done, total, bytes)
 *                               how far the item `what` got; cheap (a clock
 *                               read, a redraw at most 5 times a second)
 *   progress_done(what)         the item finished: its line is cleared
 *   progress_clear()            clears any line (before printing results)
 *
 * Nothing is drawn in the first second after progress_init, so quick
 * commands never flicker (MEMSNAP_PROGRESS_AFTER_MS changes the delay; the
 * tests set 0).  The line: what, done / total (MiB for bytes),
 * percent, rate and ETA when total is known.  progress_hook adapts the
 * format library's msnap_progress reports (readers, import, export), so
 * `msnap_set_progress(progress_hook, NULL)` gives every reader a line.
 * Single-threaded: call it from one thread.
 */
#ifndef MEMSNAP_CLI_PROGRESS_TERM_H
#define MEMSNAP_CLI_PROGRESS_TERM_H
#include <stdint.h>

void progress_init(int quiet);
int progress_enabled(void);
void progress_update(const char *what, uint64_t done, uint64_t total, int bytes);
void progress_done(const char *what);
void progress_clear(void);
/* msnap_progress_fn for msnap_set_progress (done = MSNAP_PROGRESS_END ends
 * the item). */
void progress_hook(void *ctx, const char *what, uint64_t done, uint64_t total, int bytes);
#endif
