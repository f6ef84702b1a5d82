/* grow: the serving question, "how large can this buffer be and the run
 * still fit?" - for a serving engine the largest KV cache that fits with
 * its CUDA graphs under an allocator config, for training how much more a
 * buffer could take.  docs/interop.md, "Replay", --grow, is the guide.
 *
 * A grown site is a set of the recording's stacks (gr_match): those whose
 * site label (label.h, as summary and render print it) is SITE, whose
 * label's function is SITE ("allocate_kv_cache"), or whose innermost user
 * frame (the first past sm_runtime_frames) is at FILE:LINE, FILE being the
 * frame's path or a tail of it after a '/'.  Its reference size is the
 * largest request made at it; growing it to S replaces each of its
 * requests r by r * S / reference (rounded up; so a site that allocates
 * once gets S, one that allocates K and V of one size gets S each).
 * Several sites grow together by one scale: site i to ref_i * S / ref_0,
 * ref_i being its =SIZE when given, else its reference size - the largest
 * common scale of the sizes given.  Without a search, each site is made at
 * its ref (gr_spec at ref_0).
 *
 * The replay (replay.c, msnap_replay_opts.grow) applies it to the
 * requests as it meets them: nothing else of the stream changes (the
 * frees, the marks, PyTorch's segment records and empty_cache calls stay
 * where they were), so the answer is the recording's run with that buffer
 * at another size.
 *
 * gr_find_max bisects S, assuming a larger buffer never needs less: the
 * recorded size first, then up to the device's capacity (or the allowed
 * fraction of it), 3 sizes a round (at most `jobs` replays at once; the
 * sizes tried do not depend on it), until the step between the
 * largest size that runs to the end (no OOM in the replay) and the
 * smallest that does not is at most 1/4096 of it, 2 MiB at most (a large
 * segment's granule) and 512 B at least.
 */
#ifndef MEMSNAP_WHATIF_GROW_H
#define MEMSNAP_WHATIF_GROW_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/label.h"
#include "requests.h"
#include "util/u64map.h"
#include "whatif.h"

#define GR_MAX_SITES MSNAP_GROW_MAX

/* Sites to grow, as the user gave them, and what the recording has of
 * them. */
typedef struct gr_sites {
    int n;
    char spec[GR_MAX_SITES][256];       /* SITE (before any '=') */
    uint64_t size[GR_MAX_SITES];        /* =SIZE, 0 when none */
    /* gr_match: */
    char label[GR_MAX_SITES][SM_LABEL_MAX]; /* the first matching stack's label */
    uint64_t base[GR_MAX_SITES];        /* the largest request at the site */
    uint64_t requests[GR_MAX_SITES];    /* requests at it */
    uint64_t bytes[GR_MAX_SITES];       /* bytes they asked for in all */
    uint64_t ref[GR_MAX_SITES];         /* its size at scale 1: =SIZE, else base */
    u64map stacks;                      /* stack id -> site index */
} gr_sites;

/* Parses one --grow argument (SITE or SITE=SIZE, a size util/size.h
 * reads) into s.  0, or -1 with a one-line message (too many, empty SITE,
 * a bad SIZE). */
int gr_add(gr_sites *s, const char *arg, char *err, size_t errlen);

/* Finds each site's stacks among the requests of q, named through the
 * tables and labels of f (q's own file, or a prediction's template), and
 * their reference sizes.  torch: the engine's request sizes (requests.h
 * rq_request_size).  0; -1 with a one-line message (a site no request
 * matches, or out of memory). */
int gr_match(gr_sites *s, rq_stream *q, an_file *f, int torch, char *err, size_t errlen);

void gr_free(gr_sites *s);

/* The replay's grow spec for site 0 at bytes x (the others scaled alike)
 * into *g (which borrows s). */
void gr_spec(const gr_sites *s, uint64_t x, msnap_grow_spec *g);

/* Site i's size when site 0 is at x. */
uint64_t gr_size_of(const gr_sites *s, int i, uint64_t x);

/* What gr_find_max found for one config. */
typedef struct gr_answer {
    const char *conf;             /* borrowed */
    int none;                     /* nothing fits: even the smallest size fails */
    int unbounded;                /* the largest size tried (the limit) fits */
    uint64_t max;                 /* site 0's largest size that runs to the end */
    uint64_t fails_at;            /* the smallest size tried that does not (0: none) */
    uint64_t limit;               /* the most the config may reserve */
    msnap_replay_result at_max;   /* the replay at max */
    msnap_replay_result at_fail;  /* the replay at fails_at (its first OOM) */
    int replays;                  /* replays it took */
    uint64_t also_runs;           /* a size above a failing one that ran (fitting
                                     is not monotonic there), 0 none seen */
} gr_answer;

/* The largest size of the sites that the stream runs to the end with under
 * conf (see above).  device_mem, engine: as replay's (0: the recording's,
 * MSNAP_ENGINE_*).  jobs:
 * replays at once; show: a progress label or NULL.  0, or -1 with err. */
int gr_find_max(rq_stream *q, const gr_sites *s, const char *conf, uint64_t device_mem,
                int engine, int jobs, const char *show, gr_answer *out, char *err,
                size_t errlen);

#endif
