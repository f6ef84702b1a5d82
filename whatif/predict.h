/* predict: will it fit at another size?  From two or three recordings of
 * one program that differ in one size parameter (a batch size, a sequence
 * length), the peak allocated and reserved, and the OOM, at values of that
 * parameter nobody ran.  docs/interop.md, "Predict", is the guide.
 *
 * The idea.  A program run at another batch size makes the same requests
 * in the same order from the same lines of code; only their sizes change,
 * and each size is a simple function of the parameter (a tensor's bytes are
 * a product of its dimensions: constant, linear, or quadratic where two of
 * them grow, as attention scores do with the sequence).  So:
 *
 *   read      each recording once (requests.h: rq_init/rq_load; site labels
 *             from the file, label.h);
 *   align     their requests (the allocated layer when the recordings have
 *             one, else the driver allocations; the same level replay
 *             uses) one by one, in order, a request matching when its
 *             whole stack reads the same frame by frame ("fn (file:line)",
 *             "module+0xoff": never the stack id, which differs between
 *             runs), and its sizes could be one request's at the two values
 *             (not less than half at the larger value, not more than the
 *             cube of the ratio of the values: two requests of one line of
 *             code are told apart).  The recording with the largest value
 *             is the template.
 *             Where the recordings stop matching (a kernel that needs a
 *             workspace at one size only, a data-dependent shape) the
 *             alignment looks ahead up to ALIGN_WINDOW requests in each for
 *             ALIGN_RUN requests that match again and goes on from there;
 *             the template's requests in between are unaligned;
 *   fit       each aligned request's size to the values: constant; c*x or
 *             c*x^2 when that is exact; else a + b*x through two points
 *             (exact for two recordings); with three, a + b*x when the
 *             three lie on a line, else a + b*x + c*x^2 through them when
 *             that grows (c > 0), else the line through the two largest
 *             values (the smallest is a special case: batch 1 often is).
 *             Unaligned requests keep the template's size;
 *   replay    the template's request stream with every request's size
 *             taken from its fit at the value asked for: a stream of its
 *             own (rq_synth_init), replayed by msnap_replay_streams
 *             through the PyTorch allocator emulation (PyTorch traces) or
 *             libmemsnap_alloc on the simulated device (others), under
 *             each config and the device's memory; the template's frees
 *             and marks as they were.
 *
 * Besides the replay, a walk of the predicted stream's allocated bytes
 * (requested sizes, rounded to 512 bytes for PyTorch) finds the moment of
 * the peak and what is live there: the share of aligned requests (how much
 * of the prediction stands on measured sizes) and, per site, how fast it
 * grows (the sum of its live requests' slopes).
 *
 * Limits, said in the output: the prediction is the template's run with
 * other sizes.  Requests that exist at one size only (other kernels, other
 * code paths), counts that change with the parameter (a loop over the
 * batch) and sizes that are not polynomial in it (rounding to a tile,
 * power-of-two buckets) are not predicted; the caching allocator's
 * placement is emulated, the CUDA context and libraries that allocate
 * outside the allocator are not counted.
 *
 * Cost: each input read once; memory about 80 bytes per request of the
 * template and 20 per request of the others, plus the template's request
 * stream (a temporary file); each value predicted writes a stream of the
 * template's length and replays it in a child process.
 */
#ifndef MEMSNAP_WHATIF_PREDICT_H
#define MEMSNAP_WHATIF_PREDICT_H

#include <stddef.h>
#include <stdint.h>

#include "whatif.h"
#include "requests.h"

#define PR_MAX_INPUTS 3
#define PR_LABEL_MAX 160    /* as SM_LABEL_MAX */
#define PR_WHERE_MAX 128

/* How a request's size follows the parameter. */
enum pr_fit {
    PR_FIT_NONE = 0,     /* unaligned: the template's size at every value */
    PR_FIT_CONST,        /* the same in every recording */
    PR_FIT_LINEAR,       /* a + b*x (c*x included) */
    PR_FIT_QUAD,         /* a + b*x + c*x^2 (c*x^2 included) */
    PR_FIT_KINDS
};

/* What the alignment found. */
typedef struct pr_alignment {
    int ninputs;
    int tmpl;                           /* the template: the input with the largest value */
    uint64_t requests[PR_MAX_INPUTS];   /* each input's requests */
    uint64_t aligned;                   /* template requests matched in every input */
    uint64_t fits[PR_FIT_KINDS];        /* template requests by enum pr_fit */
    uint64_t bent;                      /* linear fits of three points that are not on a
                                           line (the smallest value a special case) */
    uint64_t regions;                   /* stretches where an input stopped matching */
    int gave_up;                        /* the alignment found no match again (the rest unaligned) */
    /* the first stretch (regions > 0) */
    int div_input;                      /* the input that stopped matching */
    uint64_t div_index;                 /* the template's request there, from 1 */
    uint64_t div_other;                 /* that input's, from 1; 0: it had no more */
    uint64_t div_t_ns;                  /* the template's time there */
    uint64_t div_size[2];               /* the two requests' sizes */
    char div_site[2][PR_LABEL_MAX];     /* and their sites */
} pr_alignment;

typedef struct pr_model pr_model;

/* Reads the n (2..PR_MAX_INPUTS) recordings at paths, each taken at
 * values[i] (distinct, > 0), once each, aligns and fits them.  engine:
 * MSNAP_ENGINE_* (auto: torch for PyTorch traces); degree: the highest
 * power of the parameter a size may have, 1 or 2.  0 with *out; 2 with a
 * one-line message in err: an unreadable input ("PATH: why"), inputs of
 * different levels or engines, an input without requests, or inputs that
 * do not align (fewer than half of the template's requests match one of
 * them: not one program at two sizes). */
int pr_build(pr_model **out, const char *const *paths, const double *values, int n, int engine,
             int degree, char *err, size_t errlen);
void pr_free(pr_model *m);

const pr_alignment *pr_alignment_of(const pr_model *m);
const char *pr_path(const pr_model *m, int i);
double pr_value(const pr_model *m, int i);
int pr_engine(const pr_model *m);          /* MSNAP_ENGINE_TORCH or _MEMSNAP */
uint64_t pr_device_total(const pr_model *m); /* the template's device memory, 0 unknown */
int pr_grows(const pr_model *m);            /* some aligned request is larger at a larger value */
uint64_t pr_shrinks(const pr_model *m);     /* aligned requests smaller at a larger value */

/* One prediction: a value under a config. */
typedef struct pr_result {
    double at;
    const char *conf;                 /* borrowed from the caller */
    msnap_replay_result rp;           /* the replay's figures (peaks, the first OOM) */
    uint64_t limit;                   /* what it may reserve: the device memory, times
                                         memory_fraction, or device_limit (memsnap),
                                         at most what the recording left the
                                         allocator (whatif.h available) */
    uint64_t headroom;                /* limit - peak reserved; 0 with an OOM */
    uint64_t walk_peak;               /* the walk's peak of allocated bytes */
    double aligned_share;             /* of it: bytes of aligned requests */
    /* the first request that failed (rp.oom) */
    uint64_t oom_request;             /* from 1, of pr_alignment requests[tmpl] */
    char oom_site[PR_LABEL_MAX];
    char oom_where[PR_WHERE_MAX];     /* the mark or NVTX range the template was in, "" none */
} pr_result;

/* Predicts each value of at[] under each config: res[v * nconf + c].
 * device_mem: bytes, 0 = the template's device (else the replay's
 * default).  jobs: replays at once; show: a progress label or NULL.
 * 0, or -1 with a one-line message (a bad config: "bad config ...").  */
int pr_predict(pr_model *m, const double *at, int nat, const char *const *confs, int nconf,
               uint64_t device_mem, int jobs, const char *show, pr_result *res, char *err,
               size_t errlen);

/* The largest whole value that fits under conf (no OOM in the replay),
 * assuming a larger value never needs less: *fit its prediction (at = 0
 * and rp.oom set from the value 1 when none fits) and *next the value
 * after it (the first that does not fit).  When nothing grows, or nothing
 * fails below 2^40, *fit is the last value tried and *next has at = 0.
 * 0, or -1 with a message. */
int pr_find_max(pr_model *m, const char *conf, uint64_t device_mem, int jobs, const char *show,
                pr_result *fit, pr_result *next, char *err, size_t errlen);

/* The predicted request stream at x: the template's, every request at its
 * fitted size, the template's failed requests left out; name is its path
 * in messages (borrowed).  Its stacks are the template's (pr_template's
 * tables and labels).  rq_free it.  0, or -1 with err. */
int pr_stream_at(pr_model *m, double x, rq_stream *out, const char *name, char *err,
                 size_t errlen);
/* The template's file: the tables and labels of every predicted stream. */
an_file *pr_template(pr_model *m);

/* A site whose live bytes at the predicted peak grow with the parameter. */
typedef struct pr_growth {
    char label[PR_LABEL_MAX];
    uint64_t bytes;        /* live at the peak */
    uint64_t requests;     /* live requests of the site there */
    double per_unit;       /* sum of their b: bytes per unit of the parameter */
    double per_unit2;      /* sum of their c: bytes per unit squared */
} pr_growth;

/* The sites live at the walk's peak at value x whose size grows (b + 2cx
 * > 0), fastest first, at most max of them into out.  Returns how many, or
 * -1 out of memory. */
int pr_growth_at(pr_model *m, double x, pr_growth *out, int max);

#endif
