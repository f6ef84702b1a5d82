/* readahead: the format library's reader (msnap_reader, format.h) on a
 * thread of its own, so that decompressing and parsing the next lines
 * overlaps with what the analysis does with the last ones (on two cores,
 * `memsnap summary` of a 10M-event file spends about as long parsing as
 * updating the state).
 *
 * The thread reads records into batches (ra_batch: BATCH records with the
 * strings and stack entries they point to copied into the batch's own
 * arena) and hands them over through a ring of NBATCH batches; the reader
 * of the batches gets them in file order, exactly the records the format
 * library gives, with the same errors, truncation flag and progress
 * reports (those come from the thread: the progress hook is called from
 * that one thread only).
 *
 * Pointers in a record stay valid until the next ra_next call (the
 * header's until ra_close), as with msnap_reader_next.
 */
#ifndef MEMSNAP_ANALYZE_READAHEAD_H
#define MEMSNAP_ANALYZE_READAHEAD_H

#include <stddef.h>

#include "memsnap/format.h"

typedef struct ra_reader ra_reader;

/* Opens path ("-" = stdin) and reads its header, as msnap_reader_open
 * (NULL with the one-line message in err), then starts the thread.  text:
 * every record keeps its line's text (msnap_record.text, copied into the
 * batch like its strings) and lines of unknown types come as
 * MSNAP_REC_OTHER records (msnap_reader_keep_unknown); 0 leaves both out,
 * the records' text NULL. */
ra_reader *ra_open(const char *path, int text, char *err, size_t errlen);

/* The next record: 1 (*rec set), 0 at the end, -1 on an error (message in
 * ra_error; every later call returns -1 again). */
int ra_next(ra_reader *r, const msnap_record **rec);

const char *ra_error(const ra_reader *r);
int ra_truncated(const ra_reader *r);   /* after the end: the last line was cut */
int ra_zstd(const ra_reader *r);        /* the input is zstd-compressed */

/* Stops the thread (also in the middle of the file) and closes. */
void ra_close(ra_reader *r);

#endif
