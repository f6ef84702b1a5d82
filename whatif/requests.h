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
 *
 * The same read reconciles the recording with the driver's used figure
 * (analyze/breakdown.h, as `memsnap summary` does, so the two say the
 * same bytes): what it measured outside the allocator (the CUDA context,
 * other libraries' driver memory) is memory the replayed allocator could
 * not have had, and a replay on the recording's device leaves it out
 * (whatif.h).  That keeps the change log (about 8-10 bytes an event)
 * while the stream lives.
 *
 * A stream can also be built by a caller instead of read (rq_synth_init,
 * rq_put): a prediction (predict.h) writes the requests it expects at
 * another size, and the replay takes that stream as it takes a recorded
 * one.  What an entry is at the stream's level (rq_kind) and the size a
 * request asks for (rq_request_size) are said here once, for the replay
 * and the prediction alike.
 */
#ifndef MEMSNAP_WHATIF_REQUESTS_H
#define MEMSNAP_WHATIF_REQUESTS_H

#include <stdint.h>

#include "analyze/analysis.h"
#include "analyze/breakdown.h"
#include "interop/common.h"

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
    /* what the recording measured outside the allocator a replay stands in
     * for (breakdown.h bd_outside, the device where it is largest): the
     * replay subtracts it from the recording's device memory */
    uint64_t outside_context;  /* device used less everything recorded */
    uint64_t outside_libs;     /* other libraries' driver memory (blocks only) */
    int outside_measured;      /* the device used was recorded */
    breakdown *bd;             /* while reading */
    cat_rules *bd_rules;
    /* while reading */
    int in_free_error;
} rq_stream;

/* Reads path ("-" = stdin) once into *q.  0 ok; 2 with "PATH: why" in
 * err.  rq_free even after an error. */
int rq_read(rq_stream *q, const char *path, char *err, size_t errlen);

/* rq_read in two steps, for a caller that hangs observers of its own on
 * q->f (analysis.h; an sm_model for site labels) between them: rq_init
 * (0, or -1 out of memory; rq_free either way), then rq_load (as
 * rq_read). */
int rq_init(rq_stream *q, const char *path);
int rq_load(rq_stream *q, char *err, size_t errlen);

/* A stream that a caller fills with rq_put: like's level, engine and
 * device memory, an empty table, name as its path (for messages; borrowed).
 * rq_free it as a read one. */
void rq_synth_init(rq_stream *q, const rq_stream *like, const char *name);
/* Appends an entry.  0, or -1 (errno). */
int rq_put(rq_stream *q, const spill_rec *r);

void rq_free(rq_stream *q);

/* What an entry of q is at q's level:
 *   RQ_ALLOC   a request (an allocator block, else a driver allocation; a
 *              restored object, RQ_RESTORE, too);
 *   RQ_FAILED  a request that failed in the recording (an oom event of the
 *              allocator or of a driver allocation call, as the level has);
 *   RQ_FREE    a free at the level;
 *   RQ_OTHER   anything else (marks, segment records, other levels). */
enum { RQ_OTHER = 0, RQ_ALLOC, RQ_FAILED, RQ_FREE };
int rq_kind(const rq_stream *q, const spill_rec *r);

/* The bytes a request asks for: for the torch engine, PyTorch's requested
 * size when the event carries it (y of a block_alloc of api torch, format
 * 1.2, whose n is the block's size), else n. */
static inline uint64_t rq_request_size(const msnap_event *e, int torch_engine)
{
    return torch_engine && e->api == MSNAP_API_TORCH && e->aux2 && e->action != MSNAP_A_OOM
               ? e->aux2 : e->size;
}

/* Reads the entries back in order: rq_rewind, then rq_next until 0.
 * Each reader should open its own copy with rq_reopen when several
 * processes read one stream (forked children): rq_reopen gives a file
 * position of its own.  0 / 1 entry / -1 error. */
int rq_reopen(rq_stream *q);
int rq_rewind(rq_stream *q);
int rq_next(rq_stream *q, spill_rec *r);

#endif
