/* Prometheus metrics of a run's allocators: the live views (live.h) of
 * every process of the run, as the text exposition format (version 0.0.4),
 * served over HTTP by a thread of the process that watches: `memsnap run
 * --metrics [ADDR:]PORT` (never the recorded program), or the program
 * itself for `memsnap.record(..., metrics=PORT)`.
 *
 * Metrics (docs/recorder.md, "Prometheus"), each with the labels device,
 * pid, host and rank (the process's $RANK, "" when unset; events and
 * dropped without device):
 *
 *   memsnap_reserved_bytes            gauge    device memory held from the driver now
 *   memsnap_allocated_bytes           gauge    allocator blocks live now (*)
 *   memsnap_peak_reserved_bytes       gauge    the peaks so far
 *   memsnap_peak_allocated_bytes      gauge    (*)
 *   memsnap_free_in_reserved_bytes    gauge    reserved but in no block (*)
 *   memsnap_largest_free_block_bytes  gauge    (*)
 *   memsnap_device_total_bytes        gauge    the device's memory
 *   memsnap_device_used_bytes         gauge    NVML's used figure (every process)
 *   memsnap_oom_total                 counter  OOM events so far
 *   memsnap_events_total              counter  events recorded
 *   memsnap_dropped_events_total      counter  events the recorder could not keep
 *   memsnap_site_live_bytes           gauge    the top sites' live bytes, label
 *                                              site (as every view names it) and
 *                                              layer
 *   (*) only for a process whose allocator's blocks are recorded.
 *
 * Serving.  One listening socket (close-on-exec: the program never holds
 * it), bound before the program starts, so a port that is taken or an
 * address that cannot be had is one line and nothing runs.  A refresher
 * thread updates every view once a second and renders the text; a server
 * thread answers with the text of the last refresh, so a scrape costs a
 * copy and never waits for a read.  Requests are bounded: at most 16
 * connections at once (more are closed at once), 8 KiB of request, 10 s
 * from accept to the last byte of the answer; GET or HEAD of /metrics
 * (any query string) gets 200, any other path 404, another method 405,
 * too long a request 431.  Sockets are non-blocking and written with
 * MSG_NOSIGNAL: a slow or vanished scraper costs the serving thread a
 * connection slot, nothing else.  After the answer the connection is shut
 * for writing and what the peer still sends is read and dropped until it
 * closes (within the same 10 s), so a refused request still gets its
 * answer rather than a reset.
 */
#ifndef MEMSNAP_ANALYZE_METRICS_H
#define MEMSNAP_ANALYZE_METRICS_H

#include <stddef.h>

#include "live.h"

#define AN_METRICS_SITES 10          /* memsnap_site_live_bytes per device */

/* One process's view and its rank label. */
typedef struct an_metrics_proc {
    const an_live_view *view;
    const char *rank;                /* "" when unknown */
} an_metrics_proc;

/* The exposition text of n processes into a new buffer (*out, free() it;
 * *len bytes).  0 ok, -1 out of memory. */
int an_metrics_text(const an_metrics_proc *p, int n, char **out, size_t *len);

typedef struct an_metrics an_metrics;

/* Parses [ADDR:]PORT (ADDR an IPv4 address, "localhost" or [IPv6];
 * 127.0.0.1 when left out; PORT 1-65535, 0 for any free one), binds and
 * listens.  NULL with one line in err: "bad address ..." (a spec that does
 * not parse, an address of no interface here) or "port N on ADDR is taken". */
an_metrics *an_metrics_listen(const char *spec, char *err, size_t errlen);

/* "ADDR:PORT" as bound (the port the kernel chose for 0). */
const char *an_metrics_address(const an_metrics *m);

/* Starts the refresher and the server.  Sources: every process that
 * registers in reg_dir (recorder/live.c: MEMSNAP_LIVE_DIR), or, when
 * reg_dir is NULL, the one recording at path with the rank label rank.
 * 0 ok, -1 (threads could not start). */
int an_metrics_start(an_metrics *m, const char *reg_dir, const char *path, const char *rank);

/* One more refresh now, waiting for it (the program ended: its last lines
 * are in the next answer). */
void an_metrics_refresh(an_metrics *m);

/* Stops the threads, closes every socket, frees m (NULL is fine). */
void an_metrics_stop(an_metrics *m);

#endif
