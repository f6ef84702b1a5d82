/* The request stream of a recording: what a what-if engine replays (a
 * replay under another allocator config, a prediction at another size).
 *
 * Built by one read of the snapshot through the analysis library
 * (analyze/analysis.h): the events a replay looks at - allocator blocks and
 * their frees, driver allocations and frees, the failed requests (oom
 * events), PyTorch's segment records, VMM maps, NVTX ranges and marks - in
 * file order, spilled to an unlinked temporary file; plus, for every free
 * the driver refused (free_error), the object the state model put back
 * (state.h), as a request of its own (RQ_RESTORE: the program still holds
 * that memory, so the replay allocates it again).  What the stream is made
 * of is decided once the read is over: allocator blocks when it has any
 * (the allocated layer), else the driver allocations (reserved); PyTorch's
 * allocator made them when the blocks came from it (api torch) or the
 * snapshot was imported from PyTorch.
 *
 * The tables (stacks, syms, modules, strings) and the header stay in the
 * stream's an_file, so a replay can write them to its new snapshot.
 */
#ifndef MEMSNAP_WHATIF_REQUESTS_H
#define MEMSNAP_WHATIF_REQUESTS_H

#include <stdint.h>

#include "analysis.h"
#include "common.h"

/* spill_rec.k1 of a stream entry */
enum { RQ_EVENT = 0,     /* a recorded event (e) */
       RQ_RESTORE = 1 }; /* e.addr/size/stream/device: an object a refused free put back */

typedef struct rq_stream {
    an_file f;                 /* header, tables (state and log not kept) */
    spill items;               /* spill_rec: k1 = RQ_*, k2 = freed size, e */
    uint64_t n;
    int blocks;                /* the stream's level: allocator blocks (else driver) */
    int torch;                 /* PyTorch's allocator made them */
    int torch_api;             /* ... recorded live (api torch), not imported */
    uint64_t device_total;     /* the first device's memory in the recording, 0 unknown */
    /* while reading */
    int in_free_error;
} rq_stream;

/* Reads path ("-" = stdin) once into *q.  0 ok; 2 with "PATH: why" in
 * err. */
int rq_read(rq_stream *q, const char *path, char *err, size_t errlen);
void rq_free(rq_stream *q);

/* Reads the entries back in order: rq_rewind, then rq_next until 0.
 * Each reader should open its own copy with rq_reopen when several
 * processes read one stream (forked children): rq_reopen gives a file
 * position of its own.  0 / 1 entry / -1 error. */
int rq_reopen(rq_stream *q);
int rq_rewind(rq_stream *q);
int rq_next(rq_stream *q, spill_rec *r);

#endif
