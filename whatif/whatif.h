/* whatif: would this run fit under another allocator configuration, or
 * another device?  msnap_replay runs a recorded allocation sequence
 * through libmemsnap_alloc on the simulated device or through an emulation
 * of PyTorch's caching allocator (replay.c says how); the request stream
 * is read through the analysis library (analyze/analysis.h).
 * docs/interop.md, "Replay", is the guide. */
#ifndef MEMSNAP_WHATIF_H
#define MEMSNAP_WHATIF_H

#include <stddef.h>
#include <stdint.h>

#include "util/u64map.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- replay ------------------------------------------------------------ */

/* What one replay did: the allocator's view at the end plus the OOMs. */
typedef struct msnap_replay_result {
    uint64_t requests;        /* allocations replayed (the recorded OOMs included) */
    uint64_t frees;           /* frees replayed */
    uint64_t skipped_frees;   /* frees of blocks the replay never allocated */
    uint64_t peak_allocated;  /* bytes */
    uint64_t peak_reserved;   /* bytes */
    double frag_free_at_peak; /* 1 - largest_free/cached, at peak reserved */
    double frag_peak;         /* 1 - peak_allocated/peak_reserved */
    int oom;                  /* 1 when a request failed for lack of memory */
    uint64_t oom_t_ns;        /* time of the first failed request (input clock) */
    uint64_t oom_size;        /* its size */
    uint64_t oom_index;       /* its position among the requests, from 1 */
    uint64_t ooms;            /* failed requests in all (replay goes on) */
    /* the requests that failed in the recording (its oom events) */
    uint64_t rec_ooms;        /* how many the input has */
    uint64_t rec_ooms_served; /* how many this config served */
    uint64_t rec_oom_size, rec_oom_stream, rec_oom_t_ns, rec_oom_index; /* the first */
    int rec_oom_served;       /* 1: this config served the first one */
    uint64_t headroom;        /* there: the largest request still servable (the
                                 larger of the largest cached free block and the
                                 device memory not reserved; a lower bound) */
    uint64_t reserved_at;     /* there: reserved bytes */
    uint64_t peak_reserved_at;/* there: the peak of reserved so far */
    double frag_at;           /* there: 1 - largest_free/cached */
    uint64_t empty_cache_calls; /* torch engine: empty_cache calls read from the trace */
    uint64_t driver_calls;    /* cuMemAlloc/Free + VMM calls the allocator made */
    uint64_t driver_allocs, driver_frees, driver_maps, driver_unmaps;
    uint64_t device_mem;      /* the device memory replayed on */
    char device_mem_from[24]; /* where that came from: "the recording",
                                 "--device-mem" or "the default" */
    uint64_t outside;         /* of it, what the recording measured outside the
                                 allocator (the CUDA context, other libraries'
                                 driver memory; requests.h), left out: 0 with
                                 opts.device_mem */
    uint64_t outside_context, outside_libs; /* its two parts */
    int outside_measured;     /* the recording had the device used */
    uint64_t available;       /* device_mem - outside: what the allocator could
                                 get from the driver (a memory fraction is of
                                 device_mem, as PyTorch's is of the device) */
    uint64_t restored;        /* requests for memory a refused free put back */
    int bad_config;           /* the error was the config */
    char level[16];           /* "blocks" or "reserved": which events fed it */
    char engine[16];          /* "memsnap" or "torch" */
    /* the first failed request (oom): its stack (the stream's tables) and
     * the NVTX mark or range the stream was in (a string id, 0 none) */
    uint32_t oom_stack, oom_where;
    uint64_t grown;           /* requests a grow spec resized */
} msnap_replay_result;

/* Progress of one replay, written by the replay (another process may read
 * it: plain words, updated every 64K records). */
typedef struct msnap_replay_progress {
    uint64_t bytes_done, bytes_total, records;
} msnap_replay_progress;

#define MSNAP_ENGINE_AUTO 0    /* torch for PyTorch traces, else memsnap */
#define MSNAP_ENGINE_MEMSNAP 1 /* libmemsnap_alloc on the simulated device */
#define MSNAP_ENGINE_TORCH 2   /* the PyTorch caching allocator emulation */

/* Requests made at other sizes (grow.h): each request whose stack maps to
 * site i in stacks (stack id -> i) is made at its size * size[i] / base[i],
 * rounded up. */
#define MSNAP_GROW_MAX 8
typedef struct msnap_grow_spec {
    const u64map *stacks;      /* borrowed */
    int n;
    uint64_t base[MSNAP_GROW_MAX], size[MSNAP_GROW_MAX];
} msnap_grow_spec;

typedef struct msnap_replay_opts {
    const char *conf;          /* MEMSNAP_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF syntax */
    uint64_t device_mem;       /* bytes; 0 = the recording's device, else
                                  MSNAP_REPLAY_DEFAULT_MEM, less what the
                                  recording measured outside the allocator;
                                  set: all of it for the allocator */
    const char *out_path;      /* the new snapshot, or NULL */
    int engine;                /* MSNAP_ENGINE_* */
    msnap_replay_progress *progress; /* or NULL */
    const msnap_grow_spec *grow;    /* or NULL (borrowed) */
} msnap_replay_opts;

/* The device memory a replay runs on when neither the options nor the
 * recording give one. */
#define MSNAP_REPLAY_DEFAULT_MEM (80ull << 30)

/* A recording's request stream, read once (whatif/requests.h). */
typedef struct rq_stream rq_stream;

/* Replays the stream's allocation sequence, its failed requests included,
 * through the allocator opt->conf configures (whatif/replay.c says how).
 * Returns 0 (an OOM in the replay is a result, not an error), or -1 with a
 * one-line message in err (res->bad_config set when the config was the
 * problem). */
int msnap_replay_stream(rq_stream *q, const msnap_replay_opts *opt, msnap_replay_result *res,
                        char *err, size_t errlen);

/* Replays in_path's allocation sequence, its failed requests included,
 * through the allocator opt->conf configures (whatif/replay.c says how),
 * writing the new snapshot to opt->out_path.  The same input and options
 * give byte-identical output.  Returns 0 (an OOM in the replay is a result,
 * not an error), or -1 with a one-line message in err (res->bad_config set
 * when the config was the problem). */
int msnap_replay(const char *in_path, const msnap_replay_opts *opt, msnap_replay_result *res,
                 char *err, size_t errlen);

/* n replays of the stream, one child process each, at most jobs at a time;
 * res[i] for opts[i].  show: report the whole run's progress as one item
 * through msnap_progress (the CLI draws it on one line after a second); the
 * children report nothing.  0, or -1 with the first error in err. */
int msnap_replay_many(rq_stream *q, const msnap_replay_opts *opts, int n, int jobs,
                      int show, msnap_replay_result *res, char *err, size_t errlen);

/* n replays, of stream qs[i] with opts[i] into res[i] (a stream may appear
 * several times), one child process each, at most jobs at a time.  show:
 * the progress line's label (NULL: none).  0, or -1 with the first error
 * in err.  msnap_replay_many is this with one stream. */
int msnap_replay_streams(rq_stream *const *qs, const msnap_replay_opts *opts, int n, int jobs,
                         const char *show, msnap_replay_result *res, char *err, size_t errlen);

/* Whether this build can replay (a reader-only build cannot): 0, or -1
 * with what is missing in err. */
int msnap_replay_available(char *err, size_t errlen);

/* Checks a PyTorch config (torch = 1) before any replay starts.  0, or -1
 * with the reason.  memsnap configs are checked by the replay itself. */
int msnap_replay_check_conf(const char *conf, int torch, char *err, size_t errlen);

/* The engine msnap_replay_stream picks for q with MSNAP_ENGINE_AUTO
 * (MSNAP_ENGINE_TORCH or _MEMSNAP). */
int msnap_replay_engine_of(const rq_stream *q);

#ifdef __cplusplus
}
#endif
#endif
