/* memsnap snapshot format v1: the one reader/writer library.
 *
 * A snapshot is JSON Lines: one JSON object per line, written as the process
 * runs so that it can be streamed, read in constant memory, and read up to
 * the last complete line after a crash.  The file may be zstd-compressed
 * (the reader detects the zstd magic); the writer flushes the compressor at
 * every flush so a crash loses at most the data since the last flush.
 * docs/format.md is the reference for every line type and key; this header
 * is the C view of the same thing.
 *
 * Who uses it:
 *   - the recorder's writer thread (msnap_fmt_* into a buffer, msnap_out_*);
 *   - the analysis library (analyze/), the one reader of snapshots under
 *     every reading command (msnap_reader_*).
 *
 * The hot path never calls anything here: it fills an msnap_event and hands it
 * to the writer thread, which formats it.
 */
#ifndef MEMSNAP_FORMAT_H
#define MEMSNAP_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSNAP_FORMAT_NAME "memsnap"
#define MSNAP_FORMAT_MAJOR 1
#define MSNAP_FORMAT_MINOR 3

/* ---- Actions: what an event says happened. ------------------------------
 * X(enum, json-name).  Order is ABI for the in-memory record only; the file
 * always carries the name, so new actions can be added anywhere. */
#define MSNAP_ACTIONS(X)                                                        \
    X(MSNAP_A_NONE, "none")                 /* placeholder; never written */    \
    X(MSNAP_A_ALLOC, "alloc")               /* cuMemAlloc/Pitch: device memory */\
    X(MSNAP_A_FREE, "free")                 /* cuMemFree of device/managed mem */\
    X(MSNAP_A_ASYNC_ALLOC, "async_alloc")   /* stream-ordered alloc (pool) */   \
    X(MSNAP_A_ASYNC_FREE, "async_free")     /* stream-ordered free */           \
    X(MSNAP_A_HOST_ALLOC, "host_alloc")     /* pinned host memory */            \
    X(MSNAP_A_HOST_FREE, "host_free")                                           \
    X(MSNAP_A_MANAGED_ALLOC, "managed_alloc") /* unified memory */              \
    X(MSNAP_A_VMM_RESERVE, "vmm_reserve")   /* cuMemAddressReserve */           \
    X(MSNAP_A_VMM_ADDR_FREE, "vmm_addr_free") /* cuMemAddressFree */            \
    X(MSNAP_A_VMM_CREATE, "vmm_create")     /* cuMemCreate: physical memory */  \
    X(MSNAP_A_VMM_RELEASE, "vmm_release")   /* cuMemRelease */                  \
    X(MSNAP_A_VMM_MAP, "vmm_map")           /* cuMemMap */                      \
    X(MSNAP_A_VMM_UNMAP, "vmm_unmap")       /* cuMemUnmap */                    \
    X(MSNAP_A_OOM, "oom")                   /* allocation failed: out of memory */\
    X(MSNAP_A_ALLOC_ERROR, "alloc_error")   /* allocation failed: other error */\
    X(MSNAP_A_FREE_ERROR, "free_error")     /* a free the driver refused */     \
    X(MSNAP_A_BLOCK_ALLOC, "block_alloc")   /* allocator block (allocated layer) */\
    X(MSNAP_A_BLOCK_FREE, "block_free")                                         \
    X(MSNAP_A_NVTX_PUSH, "nvtx_push")       /* NVTX range push; str = message */\
    X(MSNAP_A_NVTX_POP, "nvtx_pop")                                             \
    X(MSNAP_A_NVTX_MARK, "nvtx_mark")       /* NVTX mark or memsnap_annotate */ \
    X(MSNAP_A_DUMP, "dump")                 /* a dump was taken; str = reason */\
    X(MSNAP_A_BLOCK_FREE_REQUESTED, "block_free_requested") /* freed by the   \
                                               program, block still waits for  \
                                               other streams' uses (PyTorch) */\
    X(MSNAP_A_SEGMENT_ALLOC, "segment_alloc") /* an allocator's own segment    \
                                               view (PyTorch): informational,  \
                                               reserved comes from the driver */\
    X(MSNAP_A_SEGMENT_FREE, "segment_free")                                     \
    X(MSNAP_A_SEGMENT_MAP, "segment_map")   /* expandable segment pages mapped */\
    X(MSNAP_A_SEGMENT_UNMAP, "segment_unmap")

typedef enum msnap_action {
#define MSNAP_X_ENUM(e, s) e,
    MSNAP_ACTIONS(MSNAP_X_ENUM)
#undef MSNAP_X_ENUM
    MSNAP_A_COUNT
} msnap_action;

/* ---- APIs: which entry point made the event. --------------------------- */
#define MSNAP_APIS(X)                                                           \
    X(MSNAP_API_NONE, "none")                                                   \
    X(MSNAP_API_cuMemAlloc_v2, "cuMemAlloc_v2")                                 \
    X(MSNAP_API_cuMemAllocPitch_v2, "cuMemAllocPitch_v2")                       \
    X(MSNAP_API_cuMemAllocManaged, "cuMemAllocManaged")                         \
    X(MSNAP_API_cuMemFree_v2, "cuMemFree_v2")                                   \
    X(MSNAP_API_cuMemAllocAsync, "cuMemAllocAsync")                             \
    X(MSNAP_API_cuMemAllocAsync_ptsz, "cuMemAllocAsync_ptsz")                   \
    X(MSNAP_API_cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync")             \
    X(MSNAP_API_cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync_ptsz")   \
    X(MSNAP_API_cuMemFreeAsync, "cuMemFreeAsync")                               \
    X(MSNAP_API_cuMemFreeAsync_ptsz, "cuMemFreeAsync_ptsz")                     \
    X(MSNAP_API_cuMemCreate, "cuMemCreate")                                     \
    X(MSNAP_API_cuMemRelease, "cuMemRelease")                                   \
    X(MSNAP_API_cuMemMap, "cuMemMap")                                           \
    X(MSNAP_API_cuMemUnmap, "cuMemUnmap")                                       \
    X(MSNAP_API_cuMemAddressReserve, "cuMemAddressReserve")                     \
    X(MSNAP_API_cuMemAddressFree, "cuMemAddressFree")                           \
    X(MSNAP_API_cuMemHostAlloc, "cuMemHostAlloc")                               \
    X(MSNAP_API_cuMemAllocHost_v2, "cuMemAllocHost_v2")                         \
    X(MSNAP_API_cuMemFreeHost, "cuMemFreeHost")                                 \
    X(MSNAP_API_NVTX, "nvtx")                                                   \
    X(MSNAP_API_USER, "memsnap_api")        /* memsnap_annotate, memsnap_dump */\
    X(MSNAP_API_ALLOCATOR, "allocator")     /* libmemsnap_alloc trace hook */   \
    X(MSNAP_API_RECORDER, "recorder")       /* the recorder itself */         \
    X(MSNAP_API_TORCH, "torch")             /* PyTorch's CUDA caching allocator \
                                               (its trace tracker) */

typedef enum msnap_api {
#define MSNAP_X_ENUM(e, s) e,
    MSNAP_APIS(MSNAP_X_ENUM)
#undef MSNAP_X_ENUM
    MSNAP_API_COUNT
} msnap_api;

const char *msnap_action_name(int action);   /* "?" when out of range */
int msnap_action_from_name(const char *name); /* -1 when unknown */
const char *msnap_api_name(int api);
int msnap_api_from_name(const char *name);

/* ---- Python frames in stacks. ------------------------------------------
 * A stack's ips hold machine addresses, except entries with this bit set:
 * those are Python frames (the recorder's id for a code object and a
 * bytecode offset), named only by their "sym" line (fn = qualified name,
 * file = the .py file, line = the line).  No user-space address has bit 63
 * set on the platforms memsnap runs on. */
#define MSNAP_PYFRAME_BIT (1ULL << 63)
static inline int msnap_ip_is_python(uint64_t ip) { return (ip & MSNAP_PYFRAME_BIT) != 0; }

/* ---- Autograd nodes in stacks (format 1.2). ------------------------------
 * An event of PyTorch's allocator made while PyTorch's autograd engine
 * evaluates a node on the allocating thread (the backward pass) has the
 * node as its innermost stack entry: bits 63 and 62 set, the recorder's id
 * for the node's type (its name) in the low 32 bits.  Like a Python frame
 * it is named only by its "sym" line (fn = the node's name, e.g.
 * "MmBackward0", file = MSNAP_AUTOGRAD_FILE, line 0), and
 * msnap_ip_is_python() is true for it too: every tool that names Python
 * frames from their sym lines names it the same way.  Python frames never
 * set bit 62 (their code id is below 2^31). */
#define MSNAP_AUTOGRAD_TAG (3ULL << 62)
#define MSNAP_AUTOGRAD_FILE "<autograd>"
static inline int msnap_ip_is_autograd(uint64_t ip) { return (ip >> 62) == 3; }
static inline uint64_t msnap_autograd_ip(uint32_t node_id) { return MSNAP_AUTOGRAD_TAG | node_id; }

/* ---- Memory pools of PyTorch's caching allocator (format 1.3). -----------
 * x of a PyTorch block_alloc (and, from format 1.3, of its segment_alloc,
 * segment_free, segment_map and segment_unmap, and of a block_alloc's live
 * line) names the pool the block or segment belongs to: 0 the default pool;
 * else PyTorch's MempoolId_t (a pair), written as its first half when that
 * is set (a pool CUDAGraph::capture_begin made for one graph), else as its
 * second half with MSNAP_POOL_HANDLE set (a pool of graph_pool_handle(),
 * shared by graphs, or of torch.cuda.MemPool).  MSNAP_POOL_CAPTURING on an
 * allocation (block_alloc, segment_alloc, segment_map) says the allocating
 * stream was capturing a CUDA graph.  The pool itself is x without that
 * bit (msnap_pool_id).  Files before 1.3 name the pool on block_alloc only,
 * as first-or-second half without the bits. */
#define MSNAP_POOL_HANDLE (1ULL << 32)
#define MSNAP_POOL_CAPTURING (1ULL << 33)
static inline uint64_t msnap_pool_id(uint64_t x) { return x & ~MSNAP_POOL_CAPTURING; }

/* ---- The event record (72 bytes, fixed size). ---------------------------
 * The recorder's hot path fills one of these; the writer formats it.  Field
 * meaning per action (unused fields are 0 and are not written):
 *   alloc/managed_alloc/host_alloc/async_alloc/block_alloc:
 *              addr, size, stream (async: the stream; block: the pool stream)
 *              aux = pool handle (cuMemAllocFromPoolAsync), PyTorch's pool
 *              (block_alloc, above), 0 otherwise
 *   segment_alloc/segment_free/segment_map/segment_unmap: addr, size,
 *              stream; aux = PyTorch's pool (format 1.3)
 *   free/host_free/async_free/block_free: addr (size 0: the reader looks it
 *              up from the live allocation; the writer fills it in when known)
 *   vmm_reserve/vmm_addr_free: addr (VA), size; aux = requested alignment
 *   vmm_create: aux = handle, size, device = location id
 *   vmm_release: aux = handle
 *   vmm_map:   addr, size, aux = handle, aux2 = offset
 *   vmm_unmap: addr, size
 *   oom/alloc_error: size = requested, aux = device free bytes, aux2 = device
 *              total bytes (both 0 when they could not be read), result = CUresult
 *   free_error: addr, result
 *   nvtx_push/nvtx_mark/dump: aux = string id (a "str" line, see msnap_str);
 *              nvtx_pop: none
 *   seq:       PyTorch's events (api torch) of an allocation or an OOM: 1 +
 *              the autograd sequence number of the node being evaluated on
 *              the allocating thread (backward), else 1 + that of the last
 *              node the thread created, while grad mode is on (forward);
 *              0 = none (format 1.2)
 * On file: "a" action, "t" t_ns, "d" device, "p" addr, "n" size, "s" stream,
 * "x" aux, "y" aux2, "k" stack, "th" tid, "f" api name, "r" result, "q"
 * seq; zero fields are left out (docs/format.md, "Event lines").
 * seq made the record 72 bytes (it was 64): no field had 8 spare bytes, and
 * the recorder's queue slots have room for it (128 bytes each).
 */
typedef struct msnap_event {
    uint64_t t_ns;    /* ns since the recorder's t0 (CLOCK_MONOTONIC) */
    uint64_t addr;    /* device / host / virtual address */
    uint64_t size;    /* bytes */
    uint64_t stream;  /* CUstream as an integer; 0 = default/legacy stream */
    uint64_t aux;     /* per action, see above */
    uint64_t aux2;    /* per action, see above */
    uint64_t seq;     /* autograd sequence number + 1 (PyTorch), 0 = none */
    uint32_t stack;   /* stack id; 0 = no stack */
    uint32_t tid;     /* Linux thread id */
    uint16_t action;  /* msnap_action */
    uint16_t api;     /* msnap_api */
    int16_t device;   /* CUDA device ordinal; -1 = unknown / host */
    int16_t result;   /* CUresult for failures, 0 otherwise */
} msnap_event;

/* ---- Other records. ----------------------------------------------------- */

#define MSNAP_MAX_DEVICES 64
#define MSNAP_MAX_FRAMES 128

typedef struct msnap_device_info {
    int index;
    char name[128];
    uint64_t total;   /* bytes */
} msnap_device_info;

/* Header: first line of every snapshot. */
typedef struct msnap_header {
    int major, minor;
    int64_t pid;
    char host[256];
    const char *const *argv;   /* writer: argv (argc entries); reader: owned by reader */
    int argc;
    char clock[32];            /* "CLOCK_MONOTONIC" */
    uint64_t t0_unix_ns;       /* wall-clock time at t0 */
    char mode[16];             /* "stream" | "ring" */
    const char *settings_json; /* recorder settings as a JSON object text */
    int ndevices;
    msnap_device_info devices[MSNAP_MAX_DEVICES];
    int has_rank;              /* 1: rank is the job's rank of this process */
    int64_t rank;              /* "rank" (the launcher's RANK and the like) */
} msnap_header;

/* A deduplicated native stack: raw instruction pointers, innermost first. */
typedef struct msnap_stack {
    uint32_t id;
    int depth;
    const uint64_t *ips;
} msnap_stack;

/* A loaded module, so raw IPs can be symbolized later. */
typedef struct msnap_module {
    uint64_t base;        /* load address (dlpi_addr) */
    uint64_t size;        /* extent of its PT_LOAD segments from base */
    const char *path;
    const char *build_id; /* hex, "" when absent */
} msnap_module;

/* A resolved symbol for one IP. */
typedef struct msnap_symbol {
    uint64_t ip;
    const char *function; /* "" when unknown */
    const char *file;     /* "" when unknown */
    int line;             /* 0 when unknown */
    uint64_t offset;      /* ip - function start, 0 when unknown */
} msnap_symbol;

/* An interned string (NVTX messages, dump reasons). */
typedef struct msnap_str {
    uint32_t id;
    const char *s;
} msnap_str;

/* Periodic counters for one device. */
typedef struct msnap_counters {
    uint64_t t_ns;
    int device;
    uint64_t reserved;    /* cuMemAlloc/Pitch live + cuMemCreate live (device) */
    uint64_t allocated;   /* allocator blocks live (block_alloc), 0 if none seen */
    uint64_t async;       /* stream-ordered allocations live */
    uint64_t managed;     /* managed allocations live */
    uint64_t host;        /* pinned host live (device -1) */
    uint64_t vmm_mapped;  /* bytes mapped with cuMemMap */
    uint64_t device_used; /* what the driver says is in use on the device
                             (NVML total - free, every process and the
                             contexts included); 0 = not recorded (no NVML,
                             host line, files before format 1.1) */
} msnap_counters;

/* Final-state entry: one live allocation or segment at dump time. */
typedef struct msnap_live {
    int kind;             /* msnap_action of the allocation that made it */
    int device;
    uint64_t addr;
    uint64_t size;
    uint64_t stream;
    uint64_t aux;         /* vmm handle for vmm_create, offset for maps */
    uint32_t stack;
    uint64_t t_ns;        /* when it was made */
} msnap_live;

/* Trailer written at a clean end / dump: counts for integrity checks. */
typedef struct msnap_trailer {
    uint64_t t_ns;
    uint64_t events;      /* events written in this file */
    uint64_t dropped;     /* events the recorder could not keep (ring: overwritten) */
    uint64_t stacks_dropped; /* events whose stack could not be stored */
    const char *reason;   /* "exit", "signal", "oom", "api", ... */
} msnap_trailer;

/* ---- Writer side: format one line into buf. -------------------------------
 * Each returns the number of bytes written (including the trailing '\n'), or
 * 0 if cap was too small (nothing useful written).  No I/O, no allocation
 * except msnap_fmt_header (cJSON). */
/* The header line; settings_json is parsed and re-printed compactly (NULL,
 * invalid JSON or a non-object writes {}): cJSON, allocates; 0 also when
 * out of memory. */
size_t msnap_fmt_header(char *buf, size_t cap, const msnap_header *h);
/* The same with settings_json written as it is: the caller promises one
 * compact JSON object (or NULL: {}).  For writers that make their settings
 * themselves and must not need cJSON (the recorder: libmemsnap.so links no
 * shared library but libc). */
size_t msnap_fmt_header_compact(char *buf, size_t cap, const msnap_header *h);
/* msnap_fmt_event never needs more than this many bytes. */
#define MSNAP_FMT_EVENT_MAX 400
size_t msnap_fmt_device(char *buf, size_t cap, const msnap_device_info *d);
size_t msnap_fmt_event(char *buf, size_t cap, const msnap_event *e);
size_t msnap_fmt_stack(char *buf, size_t cap, const msnap_stack *s);
size_t msnap_fmt_module(char *buf, size_t cap, const msnap_module *m);
size_t msnap_fmt_symbol(char *buf, size_t cap, const msnap_symbol *s);
size_t msnap_fmt_str(char *buf, size_t cap, const msnap_str *s);
size_t msnap_fmt_counters(char *buf, size_t cap, const msnap_counters *c);
size_t msnap_fmt_live(char *buf, size_t cap, const msnap_live *l);
size_t msnap_fmt_state_begin(char *buf, size_t cap, uint64_t t_ns, uint64_t nlive);
size_t msnap_fmt_trailer(char *buf, size_t cap, const msnap_trailer *t);

/* Output sink: a file, optionally zstd-compressed.  Buffers internally;
 * msnap_out_flush makes everything written so far readable from the file
 * (zstd: ZSTD_e_flush).  All return 0 on success, -1 with errno set. */
typedef struct msnap_out msnap_out;
msnap_out *msnap_out_fdopen(int fd, int zstd_level /* 0 = plain text */);
int msnap_out_write(msnap_out *o, const void *buf, size_t len);
int msnap_out_flush(msnap_out *o);
int msnap_out_close(msnap_out *o); /* flush, end the frame, close the fd */
uint64_t msnap_out_bytes(const msnap_out *o); /* bytes that reached the fd */

/* ---- Reader side. -----------------------------------------------------------
 * Streams a snapshot (plain or zstd) line by line.  Unknown keys are ignored,
 * unknown line types are skipped (or kept: msnap_reader_keep_unknown), a
 * truncated last line is accepted (reported
 * through msnap_reader_truncated), a major version other than 1 is refused. */
typedef enum msnap_rec_type {
    MSNAP_REC_HEADER = 1,
    MSNAP_REC_DEVICE,
    MSNAP_REC_EVENT,
    MSNAP_REC_STACK,
    MSNAP_REC_MODULE,
    MSNAP_REC_SYMBOL,
    MSNAP_REC_STR,
    MSNAP_REC_COUNTERS,
    MSNAP_REC_STATE_BEGIN,
    MSNAP_REC_LIVE,
    MSNAP_REC_TRAILER,
    MSNAP_REC_OTHER,        /* a line of a type this reader does not know:
                               text only, and only after
                               msnap_reader_keep_unknown */
} msnap_rec_type;

typedef struct msnap_record {
    msnap_rec_type type;
    uint64_t line;          /* 1-based line number in the (decompressed) file */
    const char *text;       /* the line as read, without its '\n' and
                               trailing blanks, NUL-terminated; valid as
                               long as the record's strings */
    size_t text_len;
    union {
        msnap_header header;
        msnap_device_info device;
        msnap_event event;
        msnap_stack stack;
        msnap_module module;
        msnap_symbol symbol;
        msnap_str str;
        msnap_counters counters;
        struct { uint64_t t_ns, nlive; } state_begin;
        msnap_live live;
        msnap_trailer trailer;
    } u;
} msnap_record;

typedef struct msnap_reader msnap_reader;

/* Opens path ("-" = stdin) and reads the header (line 1), so a file that is
 * not a snapshot, or a newer major version, fails here.  On failure returns
 * NULL and writes a one-line message to err, e.g. "line 1: not a memsnap
 * snapshot (no header)"; messages never contain the path (callers prefix
 * it). */
msnap_reader *msnap_reader_open(const char *path, char *err, size_t errlen);
/* Same on an open fd, which the reader owns from then on (closed by
 * msnap_reader_close, or by this function when it fails). */
msnap_reader *msnap_reader_fdopen(int fd, char *err, size_t errlen);
/* The header read by open; it and its strings (argv, settings_json) stay
 * valid until msnap_reader_close. */
const msnap_header *msnap_reader_header(const msnap_reader *r);
/* 1: *rec filled; the first record is always the header.  Pointers inside
 * (strings, stack ips) stay valid until the next call, except the header's,
 * which stay valid until close.  Only rec->type, rec->line and the member
 * for that type are written.
 * 0: end of data (also after a cut-off last line: msnap_reader_truncated);
 * -1: error, one-line message "line N: ..." in msnap_reader_error(); every
 * later call returns -1 again. */
int msnap_reader_next(msnap_reader *r, msnap_record *rec);
const char *msnap_reader_error(const msnap_reader *r);
int msnap_reader_truncated(const msnap_reader *r); /* last line was cut off */
int msnap_reader_is_zstd(const msnap_reader *r);   /* the input is zstd-compressed */
/* From the next record on, a line of a type this reader does not know (a
 * newer minor version's) comes back as an MSNAP_REC_OTHER record, its text
 * only, instead of being skipped: for a tool that rewrites a snapshot and
 * must keep every line (memsnap symbolize). */
void msnap_reader_keep_unknown(msnap_reader *r);
/* Following a file that is still being written (memsnap top, the live
 * metrics): with on set, the end of the input is only where the writer has
 * got to.  msnap_reader_next then returns 0 at the end of what is there now
 * without taking a line the writer has not finished (nor a zstd block it
 * has not flushed), and a later call reads on from there.  Set it off when
 * no more will come (the writer is gone): a cut-off last line is then
 * msnap_reader_truncated, as for any file. */
void msnap_reader_follow(msnap_reader *r, int on);
void msnap_reader_close(msnap_reader *r);

/* ---- Progress ------------------------------------------------------------
 * Long work reports how far it got through one process-wide hook; the CLI
 * installs one that draws a progress line on a terminal.  Every reader
 * reports "reading NAME" with the input bytes consumed so far (compressed
 * bytes for zstd) and the file's size (0 when unknown: a pipe), after each
 * read, and done = MSNAP_PROGRESS_END when it closes.  bytes: 1 when done
 * and total count bytes, 0 when they count items. */
#define MSNAP_PROGRESS_END UINT64_MAX
typedef void (*msnap_progress_fn)(void *ctx, const char *what, uint64_t done, uint64_t total,
                                  int bytes);
void msnap_set_progress(msnap_progress_fn fn, void *ctx); /* NULL: no hook */
void msnap_progress(const char *what, uint64_t done, uint64_t total, int bytes);

#ifdef __cplusplus
}
#endif
#endif
