/* The Python API's way into the analysis library (libmemsnap_py.so,
 * pyapi.c; python/memsnap/_lib.py calls it through ctypes).
 *
 * A Python Snapshot never parses a snapshot itself: each of its answers is
 * one read of the file by this library (analysis.h's read loop, the state
 * model, the findings model's labels), and what it hands over is tables of
 * columns built here, one C array per column, which numpy arrays then
 * wrap (mpy_column_release) - no copy, no Python object per row.
 *
 * Tables, by name (mpy_table):
 *
 *   "events"           one row per event, in file order (MPY_EVENTS):
 *                      action, t_ns, device, addr, size, stream, stack,
 *                      api, tid, aux, aux2, result, seq as the file has
 *                      them (docs/format.md, event lines; absent = 0,
 *                      device -1), and three the state model adds:
 *                      freed (bytes of live memory the event removed: a
 *                      free's object, an unmap's mappings; 0 for a free
 *                      of memory the file never saw allocated), reserved
 *                      and allocated (the process's levels after the
 *                      event, state.h's layers, all devices together);
 *   "state"            the live objects after the last event at or before
 *                      a moment (MPY_STATE, an_moment: the rule of
 *                      `memsnap render --at TIME`), with their site's
 *                      layer and label.
 *
 * The sites are not a table here: Python takes them from the summary
 * (mpy_summary with as many top sites as there are), so that a site, its
 * grouping, its label and its rank have one definition, report.c's.
 *
 * Column types (mpy_column_type): a numpy dtype string ("<u8", "<i2",
 * "|u1" ...) for plain columns; "cat:DTYPE" for categorical columns (codes
 * of that dtype, -1 none; the categories are the column's text,
 * mpy_column_text).
 *
 * Ownership: everything belongs to the mpy_result until mpy_free, but the
 * columns' values handed over (mpy_column_release), which belong to the
 * caller from then on.  Not thread-safe per result; separate results are
 * independent.
 */
#ifndef MEMSNAP_ANALYZE_PYAPI_H
#define MEMSNAP_ANALYZE_PYAPI_H

#include <stddef.h>
#include <stdint.h>

#define MPY_EVENTS 1u    /* the "events" table */
#define MPY_STATE 4u     /* the "state" table (needs at) */

typedef struct mpy_result mpy_result;

/* Reads the snapshot at path once for the tables in want (MPY_* bits).
 * at (MPY_STATE): "peak" (the allocated layer's peak when the file has
 * blocks, else reserved's), "oom" (the first OOM event), "end", or a time
 * since the recorder's t0 as sm_parse_at takes it ("12.5s", "800ms",
 * "1500ns"; a bare number is seconds).  NULL on failure, with one line
 * "PATH: why" in err. */
mpy_result *mpy_read(const char *path, unsigned want, const char *at, char *err,
                     size_t errlen);
void mpy_free(mpy_result *r);

/* mpy_read and mpy_summary in ONE read of the file: the tables of want
 * (as mpy_read, at for MPY_STATE) and the summary's JSON (as mpy_summary
 * with top, marks, rules_path), taken from the same an_file (report.h's
 * attach and done hooks), so a Python Snapshot reads a file once for
 * what most sessions ask first.  NULL on failure with "PATH: why". */
mpy_result *mpy_read_all(const char *path, unsigned want, const char *at, int top,
                         int marks, const char *rules_path, char *err, size_t errlen);
/* Its summary's JSON text (the result owns it) and exit status (0, 1 an
 * OOM); NULL for a result of mpy_read. */
const char *mpy_result_summary(const mpy_result *r, int *rc);
/* A hook for the reads' progress (format.h "Progress": what, done,
 * total; done UINT64_MAX at the end); NULL: none.  Process-wide. */
void mpy_set_progress(void (*fn)(const char *what, uint64_t done, uint64_t total));

/* The index of a table by name, -1 when the result has none. */
int mpy_table(const mpy_result *r, const char *name);
uint64_t mpy_rows(const mpy_result *r, int table);
int mpy_columns(const mpy_result *r, int table);
/* NULL when out of range. */
const char *mpy_column_name(const mpy_result *r, int table, int col);
const char *mpy_column_type(const mpy_result *r, int table, int col);
/* Hands a plain or categorical column's values over: a malloc'd array of
 * rows x item size bytes (*nbytes), which the caller owns from then on and
 * frees with mpy_free_buffer (numpy wraps it: no copy).  NULL for a text
 * column or one handed over already (*nbytes 0); NULL also for 0 rows. */
void *mpy_column_release(mpy_result *r, int table, int col, uint64_t *nbytes);
void mpy_free_buffer(void *p);
/* A categorical column's categories, each NUL-terminated, one after
 * another: *count strings in *nbytes bytes; NULL for plain columns. */
const char *mpy_column_text(const mpy_result *r, int table, int col, uint64_t *count,
                            uint64_t *nbytes);

/* What the read found besides the tables, as a JSON object text:
 * {"events": N, "allocated_seen": bool, "truncated": bool, and with
 * MPY_STATE "at": {"event_index": I (0: before the first event), "t_ns":
 * T, "found": bool (false: "oom" asked, none in the file)}}. */
const char *mpy_info(const mpy_result *r);

/* The object `memsnap summary --json` prints for path (report.h
 * msnap_summarize; top sites per layer, marks, category rules file or
 * NULL), as JSON text: free it with mpy_free_text.  *rc: 0, 1 (the file
 * has an OOM event), 2 (NULL returned, "PATH: why" in err). */
char *mpy_summary(const char *path, int top, int marks, const char *rules_path, int *rc,
                  char *err, size_t errlen);
void mpy_free_text(char *text);

/* The job view's map and reduce (job.h), for memsnap.job() on Dask workers
 * or local processes: mpy_job_file reads one snapshot into its rank record
 * (JSON text; *rc 0, 1 an OOM, 2 NULL with "PATH: why" in err), a few KiB
 * that travel to where the reduce runs; mpy_job_reduce takes a JSON array
 * of records (in file order) and returns the job object `memsnap job
 * --json` prints (NULL with the reason in err).  Free both with
 * mpy_free_text. */
char *mpy_job_file(const char *path, int *rc, char *err, size_t errlen);
char *mpy_job_reduce(const char *records, char *err, size_t errlen);
/* Prometheus metrics of the recording at path served from a thread of
 * this process (metrics.h; memsnap.record(..., metrics=PORT)): spec is
 * [ADDR:]PORT, rank the rank label ("" none).  The port is bound here: a
 * handle, or NULL with one line in err (a bad address, a taken port).
 * The thread follows path from the moment it exists. */
void *mpy_metrics_start(const char *spec, const char *path, const char *rank, char *err,
                        size_t errlen);
/* "ADDR:PORT" as bound. */
const char *mpy_metrics_address(void *m);
/* Stops serving and frees the handle (NULL is fine). */
void mpy_metrics_stop(void *m);

/* memsnap's version ("0.1.0"). */
const char *mpy_version(void);

#endif
