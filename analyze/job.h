/* The job view: many snapshots of one job (a file per rank, the recorder's
 * `-o run-%q{RANK}.msnap`), reduced to what its user asks first: which
 * rank ran out or came closest, and why; which sites differ between ranks.
 *
 * Map, then reduce, as Nsight Systems' recipes do:
 *
 *   job_read_file  one file, one read (report.h msnap_summarize without
 *                  the breakdown, with an observer of its own for the
 *                  NVTX steps and marks): the file's rank record, a small
 *                  JSON object (a few KiB whatever the file's size) that is
 *                  all the reduce needs.  Records travel: the CLI's
 *                  threads, or the Python API's Dask workers, hand them
 *                  over as JSON text (pyapi.h mpy_job_file).
 *   job_reduce     the records of every file, in the order given, to the
 *                  job object that `memsnap job --json` prints and its text
 *                  is printed from (cli/cmd_job.c).  It reads nothing.
 *
 * A rank record (job_read_file):
 *   file, rank (null: the reduce names it from the file names; the place
 *   for a header's rank, which format 1.2 has not), host, pid, mode
 *   ("stream"/"ring"), version;
 *   device (the ordinal with the highest reserved peak, -1 none),
 *   device_name, device_total; events, duration_ns, truncated, trailer
 *   (its reason, null when none); peak_reserved, peak_reserved_t_ns,
 *   peak_allocated and peak_allocated_t_ns (null without allocator
 *   blocks): the process's peaks, all devices at one moment, as summary's
 *   "process"; ooms, alloc_errors; top_site {label, layer, peak} (null:
 *   none), sites [{label, peak}] (the allocated layer's, then the
 *   reserved layer's not named already, largest first, at most
 *   JOB_SITES) and sites_complete (every site of the file is listed, so a
 *   site missing from the list is 0 there; never for a ring dump, whose
 *   sites are its window's); oom (the first OOM: t_ns,
 *   wall_ns = the header's t0 + t, device, requested, device_free,
 *   device_total, api, allocated, reserved, free_inside_reserved,
 *   largest_free_block, verdict, site (its label), frames (up to 4 of the
 *   program's), step) or null; window {first_event_t_ns, last_t_ns,
 *   dropped (events the ring left out before it), state_t_ns, step}; steps
 *   {ranges (outermost NVTX ranges), marks, at_peak (the step of the
 *   allocated layer's peak when the file has allocator blocks, else of
 *   reserved's)}.  A step is {text,
 *   number, word, t_ns}: the outermost NVTX range open at that moment
 *   ("step 41": number 41, word "step"), else the last NVTX mark before it
 *   (text prefixed "after "), number null when the text has none; null
 *   when the file has neither.
 *
 * The job object (job_reduce):
 *   files; ranks_from ("header", "name", "mixed" or "none"); hosts;
 *   failed (ranks with an OOM); peak_reserved {min, median, max};
 *   ranks: one row per file, ordered by rank (files without one last, in
 *     the order given): file, rank, host, pid, device, device_name,
 *     mode, events, peak_reserved, peak_allocated, ooms, top_site,
 *     top_site_peak;
 *   imbalance (null with fewer than 2 files): the rank with the highest
 *     peak against the median rank (the lower median: a rank's own
 *     figure), of layer (allocated when every rank has allocator blocks,
 *     else reserved): highest {file, rank, peak}, median {file, rank, peak},
 *     above_median, above_median_pct (null when the median is 0), sites
 *     [{label, peak, median, difference}]: the highest rank's sites whose
 *     peak is most above that site's median over the ranks, at most
 *     JOB_SHOWN;
 *   divergent_sites {ranks: the rank of each column (null: unknown),
 *     sites: [{label, min, min_rank, min_file, median, max, max_rank,
 *     max_file, spread,
 *     ranks_with, peaks: [one per row of ranks, null where unknown: not
 *     among that file's JOB_SITES]}]}: the sites whose peak differs most
 *     (max - min) across ranks, at most JOB_TABLE_SITES;
 *   failures: every rank with an OOM, the first to fail first (by wall
 *     clock, the header's t0 + t): file, rank, host and its oom record;
 *   alignment {by: "steps", "marks" or "none", word, same_step (every
 *     rank's peak in one step), peak_steps: [{step (its number, else its
 *     text), ranks (how many), first_ranks (up to 8)}], most ranks first};
 *   windows {ring: how many ring dumps, truncated: how many cut off,
 *     files: [{file, rank, mode, truncated, first_event_t_ns, dropped,
 *     step}] for each ring dump or cut-off file}.
 *
 * Figures are exact integers (raw JSON numbers, report.h).  Thread-safe:
 * separate calls share nothing (the CLI reads files on several threads).
 */
#ifndef MEMSNAP_ANALYZE_JOB_H
#define MEMSNAP_ANALYZE_JOB_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "category.h"

#define JOB_SITES 32          /* sites kept per rank record */
#define JOB_SHOWN 3           /* imbalance sites */
#define JOB_TABLE_SITES 32    /* rows of the site x rank table */

/* Reads the snapshot at path once into its rank record (*rec, cJSON_Delete
 * it).  rules: category rules (borrowed, may be NULL).  Returns 0, 1 when
 * the file has an OOM event, 2 with "PATH: why" in err. */
int job_read_file(const char *path, const cat_rules *rules, cJSON **rec, char *err,
                  size_t errlen);

/* The job object from n rank records (borrowed; in the order the files
 * were given).  NULL when out of memory. */
cJSON *job_reduce(cJSON *const *recs, int n);

/* JSON text (rank records that traveled as text, an array of them) parsed
 * with every integer kept exact (a raw number, as job_read_file writes
 * them; cJSON_Parse rounds above 2^53).  NULL when it is not JSON. */
cJSON *job_parse(const char *text);

#endif
