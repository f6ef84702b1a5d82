/* interop: memsnap snapshots to and from the tools people already use, and
 * replay of a recorded allocation sequence through another allocator config.
 * docs/interop.md is the guide (mappings both ways, what is lost, replay
 * semantics); this header is the contract the CLI and the tests use.
 *
 *   msnap_export_torch     snapshot -> PyTorch memory snapshot, pickle or
 *                          JSON (what pytorch.org/memory_viz loads)
 *   msnap_export_perfetto  snapshot -> Chrome/Perfetto trace JSON
 *   msnap_import_torch     PyTorch snapshot (JSON or pickle) -> snapshot
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
    uint64_t start_objects; /* import: what was live when the trace started (the
                               final state and the frees of what the trace did
                               not allocate), written as events at its first
                               time; not in events_out */
    int wall_clock;         /* perfetto: times since the Unix epoch (else from
                               the recording's start: no t0_unix_ns) */
    uint64_t other_lib_allocs, other_lib_bytes; /* torch export: other libraries'
                               driver memory live at the end, beside allocator
                               blocks, left out of the segments (and their
                               allocs and frees out of the trace) */
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

/* Writes the snapshots paths[0..n) as SQLite tables into the database
 * outp (sqlite_export.c has the schema), each file tagged with its rank.
 * The database is written under a temporary name and renamed at the end.
 * Returns 0, or -1 with a message in err (also when this build has no
 * SQLite). */
int msnap_export_sqlite(char **paths, int n, const char *outp, char *err, size_t errlen);

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

#ifdef __cplusplus
}
#endif
#endif
