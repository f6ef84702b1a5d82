/* Where a device's memory went, two ways: reconciled with what the driver
 * says is used (nvidia-smi's figure), by library; and by category
 * (parameters, gradients, activations, ...).  `memsnap summary` prints
 * both (text and JSON, from bd_add_json's members); the renderer can use the category rules directly
 * (analyze/category.h).
 *
 * Reconciliation, per device, at one moment: the "counters" record with
 * the highest device_used whose time is not behind the last event read
 * (so the replayed state is that of the moment; in a ring dump that is the
 * last one), else the peak of recorded memory with "device used: not
 * recorded".  At that moment:
 *
 *   device used      = recorded + unexplained
 *   recorded         = sum over libraries of their live driver memory
 *                      (cuMemAlloc/Pitch, cuMemCreate on the device,
 *                      stream-ordered allocations), the library named by
 *                      the allocating stack (cat_library)
 *   PyTorch reserved = torch segment events live when the file has them,
 *                      else the "PyTorch allocator" library's bytes
 *   PyTorch allocated= torch blocks live (block_alloc/block_free, api torch)
 *   unexplained      = device used - recorded: the CUDA context, module
 *                      images, other processes (signed: NVML and the
 *                      recorder read at slightly different instants)
 *
 * Categories, per device: each live allocation counts once, in the layer
 * the user thinks in.  When the device has allocator blocks (PyTorch's or
 * memsnap's), the blocks, plus driver memory of every other library (a
 * cuBLAS workspace, NCCL buffers); the allocators' own driver memory is
 * then the cache around the blocks and is left out.  Without blocks, every
 * driver allocation.  Per category: its own peak, its bytes at the moment
 * the categories together peaked, and at the first OOM of the device.
 *
 * It observes the one read of the file (analysis.h) and works at its end,
 * when the tables are complete (the sym lines that name Python and native
 * frames may come last), over the file's change log.
 */
#ifndef MEMSNAP_ANALYZE_BREAKDOWN_H
#define MEMSNAP_ANALYZE_BREAKDOWN_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "category.h"
#include "memsnap/format.h"
#include "symtab.h"

#define BD_NDEV (MSNAP_MAX_DEVICES + 1) /* last slot: unknown device */
#define BD_MAX_LIBS 32                  /* more are summed in the last */

/* Memory of one device at the reconciliation moment. */
typedef struct bd_moment {
    int valid;
    int used_recorded;         /* device_used known at this moment */
    uint64_t t;
    uint64_t device_used;
    uint64_t recorded;
    uint64_t torch_reserved, torch_allocated;
    uint64_t by_lib[BD_MAX_LIBS];
    uint64_t outside;          /* driver memory no allocator block was ever in,
                                  of no allocator's library (bd_outside) */
} bd_moment;

/* Categories of one device. */
typedef struct bd_cats {
    uint64_t cur[CAT_MAX], peak[CAT_MAX];
    uint64_t at_peak[CAT_MAX], at_oom[CAT_MAX];
    uint64_t total, total_peak, total_peak_t, oom_t;
    int oom_seen;
} bd_cats;

typedef struct bd_device {
    int seen;
    int torch_segments_seen, torch_blocks_seen, blocks_seen;
    uint64_t recorded, torch_seg, torch_blk;   /* running */
    uint64_t by_lib[BD_MAX_LIBS];              /* running */
    uint64_t outside;                          /* running (bd_moment) */
    bd_moment at_used, at_peak;
    bd_cats blocks_view, driver_view;          /* see the file comment */
} bd_device;

typedef struct breakdown breakdown;

/* A breakdown over the given rules (borrowed; they must outlive it).
 * NULL when out of memory. */
breakdown *bd_new(const cat_rules *rules);
void bd_free(breakdown *b);

/* Observes the read of f (before an_read; f outlives b's use).  0 ok, -1
 * out of memory or too many observers. */
int bd_attach(breakdown *b, an_file *f);

/* Keeps, for a picture by category (render --by category), the category
 * of every change of the file's log as the second replay meets it: one
 * byte a change.  Call before the read. */
void bd_keep_change_categories(breakdown *b);

/* After the read, with bd_keep_change_categories: byte i is for the i-th
 * change an_replay gives (the objects live before the first event first,
 * then in file order; every change, counted or not): its category
 * (cat_name) when it counts in the view bd_cats_shown gives for its device
 * (the change's site's device), else BD_NOT_COUNTED.  *n bytes; NULL with
 * *n = 0 when not kept.  Another replay of the same log meets the same
 * changes in the same order, so an observer that replays after this one's
 * end can follow the bytes change by change. */
#define BD_NOT_COUNTED 0xff
const uint8_t *bd_change_categories(const breakdown *b, size_t *n);

/* The categories a device is shown by (summary's table): the blocks view
 * when the device has allocator blocks, else the driver view; *layer (may
 * be NULL) names it ("allocator blocks + other libraries' driver memory",
 * "driver allocations, no allocator blocks seen").  NULL when dev is out
 * of range. */
const bd_cats *bd_cats_shown(const breakdown *b, int dev, const char **layer);

/* Per-device results (NULL when dev is out of range). */
const bd_device *bd_device_of(const breakdown *b, int dev);
/* Name of a library slot ("" when unused). */
const char *bd_lib_name(const breakdown *b, int lib);

/* What device dev's recording measured outside an allocator that a replay
 * stands in for, at the reconciliation moment (above): *context the device
 * used less everything recorded (the CUDA context, module images, other
 * processes; 0 when not recorded or below 0), *libs, when blocks (the
 * replay is of the allocator's blocks), the driver memory of every other
 * library (cuBLAS's workspaces, NCCL: memory no allocator block was ever
 * in, made under no allocator's frames; a segment that held blocks is the
 * allocator's whoever's frames made it), else 0 (a replay of the driver
 * allocations replays theirs too).  Returns 1 when the device used was
 * recorded there, 0 otherwise (then only *libs is known). */
int bd_outside(const breakdown *b, int dev, int blocks, uint64_t *context, uint64_t *libs);
/* The category of memory live now from stack (its site's, in the tables
 * t), as this breakdown would count it if it lived on: for an allocator
 * block (block set) the part of the program that made it and its fate
 * taken as kept (a backward's gradients, a forward's activations), else
 * the rules' (memsnap top, while a recording is written, has no end to
 * wait for).  A category index of rules (cat_name). */
int bd_live_category(const cat_rules *rules, const sm_symtab *t, uint32_t stack, int block);

/* {"reconcile":[...],"categories":[...]} members added to root (the
 * summary's text is printed from them: cli/summary_text.c). */
void bd_add_json(const breakdown *b, cJSON *root);

#endif
