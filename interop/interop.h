/* interop: memsnap snapshots to and from the tools people already use, and
 * replay of a recorded allocation sequence through another allocator config.
 * docs/interop.md is the guide (mappings both ways, what is lost, replay
 * semantics); this header is the contract the CLI and the tests use.
 *
 *   msnap_export_torch     snapshot -> PyTorch memory snapshot, pickle or
 *                          JSON (what pytorch.org/memory_viz loads)
 *   msnap_export_perfetto  snapshot -> Chrome/Perfetto trace JSON
 *   msnap_import_torch     PyTorch snapshot (JSON or pickle) -> snapshot
 *   msnap_replay           snapshot -> one new snapshot + stats per config
 *
 * Every function reads its input in one streaming pass and keeps in memory
 * only what is live, the id tables (stacks, symbols, strings) and fixed
 * buffers; per-device event streams are spilled to unlinked temporary files
 * (spill.c).  Errors: the function returns -1 and writes one line into err
 * naming the problem and, for bad input, where ("byte 1234: ...",
 * "line 7: ..."); messages never contain the input path (callers prefix
 * it).  Nothing here exits or prints.
 */
#ifndef MEMSNAP_INTEROP_H
#define MEMSNAP_INTEROP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Counts an export or import reports back (for the CLI's one-line summary). */
typedef struct msnap_interop_stats {
    uint64_t events_in;     /* event records / trace entries read */
    uint64_t events_out;    /* event records / trace entries written */
    uint64_t segments;      /* segments in the final state */
    uint64_t blocks;        /* blocks in the final state */
    uint64_t stacks;        /* distinct stacks */
    uint64_t devices;       /* devices seen */
    int synthesized_blocks; /* export: no block events, one block per segment */
    uint64_t bytes_read;    /* import: bytes of the input read (also on failure) */
    uint64_t work_steps;    /* import: steps of work done, against the budget of
                               MSNAP_IMPORT_STEPS_PER_BYTE a byte read (value.h;
                               docs/interop.md, Limits); also on failure */
} msnap_interop_stats;

/* The import's work budget: steps a byte of input (interop/value.h). */
#define MSNAP_IMPORT_STEPS_PER_BYTE 32u

/* What msnap_export_torch writes and which part of the snapshot. */
typedef struct msnap_export_opts {
    int json;              /* 1: JSON text with the "memsnap" extension (exact
                              round trip); 0: protocol-4 pickle, frames shared */
    int from_set, from_is_index;
    uint64_t from;         /* first event kept: t_ns, or index in the file */
    int to_set, to_is_index;
    uint64_t to;           /* last event kept (inclusive): t_ns or index */
    uint64_t max_entries;  /* keep at most the last N trace entries; 0 = all */
} msnap_export_opts;

/* Default caps on trace entries, what PyTorch's MemoryViz.js holds (docs/
 * interop.md, "How many entries memory_viz holds"): a pickle of 1.45M
 * entries loads with every view working; a JSON file is read as one string,
 * which the browser caps at 512 MiB (about 800 bytes an entry). */
#define MSNAP_EXPORT_MAX_ENTRIES_PICKLE 1500000u
#define MSNAP_EXPORT_MAX_ENTRIES_JSON 500000u

/* What a torch export wrote beyond msnap_interop_stats. */
typedef struct msnap_export_report {
    uint64_t entries_window;  /* trace entries of the events in --from/--to */
    uint64_t entries_written; /* trace entries written (after --max-entries) */
    int cut;                  /* 1: --max-entries dropped the oldest entries */
    uint64_t cut_index;       /* then: index of the first event kept */
    uint64_t cut_t_ns;        /* and its time */
    int no_wall_clock;        /* the header has no t0_unix_ns: time_us from 0 */
} msnap_export_report;

/* Reads the memsnap snapshot at in_path ("-" = stdin) and writes PyTorch's
 * snapshot dict ({"segments", "device_traces", "allocator_settings"}) to
 * out, as a pickle (torch.cuda.memory._dump_snapshot's format) or JSON
 * (opts->json).  opts NULL = pickle, everything.  segments are the live
 * state at the end of the window; time_us are Unix-epoch microseconds
 * (t0_unix_ns + t).  Returns 0, or -1 with a message in err. */
int msnap_export_torch(const char *in_path, FILE *out, const msnap_export_opts *opts,
                       msnap_interop_stats *st, msnap_export_report *rep, char *err,
                       size_t errlen);

/* Same, as a Chrome/Perfetto "traceEvents" JSON trace. */
int msnap_export_perfetto(const char *in_path, FILE *out, msnap_interop_stats *st,
                          char *err, size_t errlen);

/* Input kinds msnap_import_torch accepts. */
typedef enum msnap_import_kind {
    MSNAP_IMPORT_AUTO = 0, /* by the first byte: 0x80 = pickle, '{' = JSON */
    MSNAP_IMPORT_JSON,
    MSNAP_IMPORT_PICKLE,
} msnap_import_kind;

/* Reads a PyTorch memory snapshot (in_path, "-" = stdin) and writes a memsnap
 * snapshot (plain JSON Lines, or zstd at zstd_level > 0) to out_fd, which
 * it closes.  source_name goes into the header's argv ("imported from
 * NAME").  Returns 0, or -1 with a message in err. */
int msnap_import_torch(const char *in_path, msnap_import_kind kind, int out_fd,
                       int zstd_level, const char *source_name,
                       msnap_interop_stats *st, char *err, size_t errlen);

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
    int bad_config;           /* the error was the config */
    char level[16];           /* "blocks" or "reserved": which events fed it */
    char engine[16];          /* "memsnap" or "torch" */
} msnap_replay_result;

/* Progress of one replay, written by the replay (another process may read
 * it: plain words, updated every 64K records). */
typedef struct msnap_replay_progress {
    uint64_t bytes_done, bytes_total, records;
} msnap_replay_progress;

#define MSNAP_ENGINE_AUTO 0    /* torch for PyTorch traces, else memsnap */
#define MSNAP_ENGINE_MEMSNAP 1 /* libmemsnap_alloc on the simulated device */
#define MSNAP_ENGINE_TORCH 2   /* the PyTorch caching allocator emulation */

typedef struct msnap_replay_opts {
    const char *conf;          /* MEMSNAP_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF syntax */
    uint64_t device_mem;       /* bytes; 0 = the snapshot's device (torch), else 80 GiB */
    const char *out_path;      /* the new snapshot, or NULL */
    int engine;                /* MSNAP_ENGINE_* */
    msnap_replay_progress *progress; /* or NULL */
} msnap_replay_opts;

/* Replays in_path's allocation sequence, its failed requests included,
 * through the allocator opt->conf configures (interop/replay.c says how),
 * writing the new snapshot to opt->out_path.  The same input and options
 * give byte-identical output.  Returns 0 (an OOM in the replay is a result,
 * not an error), or -1 with a one-line message in err (res->bad_config set
 * when the config was the problem). */
int msnap_replay(const char *in_path, const msnap_replay_opts *opt, msnap_replay_result *res,
                 char *err, size_t errlen);

/* n replays of in_path, one child process each, at most jobs at a time;
 * res[i] for opts[i].  show: a progress line on stderr once it runs longer
 * than a second.  0, or -1 with the first error in err. */
int msnap_replay_many(const char *in_path, const msnap_replay_opts *opts, int n, int jobs,
                      int show, msnap_replay_result *res, char *err, size_t errlen);

/* Checks a PyTorch config (torch = 1) before any replay starts.  0, or -1
 * with the reason.  memsnap configs are checked by the replay itself. */
int msnap_replay_check_conf(const char *conf, int torch, char *err, size_t errlen);

/* The engine msnap_replay would pick for in_path with MSNAP_ENGINE_AUTO
 * (MSNAP_ENGINE_TORCH or _MEMSNAP), or -1 with err. */
int msnap_replay_engine_of(const char *in_path, char *err, size_t errlen);

/* Parses "80G", "512M", "1073741824" (binary units, K/M/G/T, optional "iB"
 * or "B").  Returns 0, or -1 for anything else. */
int msnap_parse_size(const char *s, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
