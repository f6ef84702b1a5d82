/* What a piece of device memory is for, and which library asked for it,
 * decided from the frames of the stack that allocated it.
 *
 * Categories (as PyTorch's memory profiler and Mosaic report them):
 * parameters, gradients, optimizer_state, activations (a forward's memory
 * kept for the backward, or kept), temporaries (memory freed within the
 * phase that made it: forward, backward or optimizer step), inputs,
 * kv_cache, workspaces, communication, all_gather and reduce_scatter
 * (sharded data parallel's collectives: FSDP's unsharded parameters and
 * the buffers they are gathered into, the gradients on their way to being
 * reduced), graph_pool (the blocks of a CUDA graph's private pool: what its
 * captures hold), other.  For PyTorch's allocated layer breakdown.c decides
 * them from what part of the program made the memory (cat_torch_kind),
 * when it was freed and which pool holds it; the rules below decide the
 * rest (and a user's rules everything they match).  A category is given by
 * rules over frames:
 *
 *   CATEGORY  python  FILE-GLOB [FUNCTION-GLOB]   a Python frame whose .py
 *                                                 file (and qualified name)
 *                                                 match
 *   CATEGORY  native  FUNCTION-GLOB [MODULE-GLOB] a native frame whose
 *                                                 function name (and module
 *                                                 base name) match
 *   CATEGORY  module  MODULE-GLOB                 a native frame whose
 *                                                 module base name matches
 *
 * Globs are fnmatch(3) patterns without FNM_PATHNAME ('*' crosses '/');
 * function names are matched as the file has them (mangled or not), so
 * "*AccumulateGrad*" catches both.  A stack gets the category of the FIRST
 * rule, in order, that matches ANY of its frames; no rule: "other".  The
 * user's rules (a file, docs/cli.md) come before the defaults, so a user
 * rule overrides a default one for every stack it matches.
 *
 * Libraries: the library that made a driver-level allocation is the
 * innermost native frame's known library by module ("PyTorch allocator"
 * for libc10_cuda, "cuBLAS" for libcublas and libcublasLt, "cuDNN", "NCCL",
 * "memsnap allocator" for libmemsnap_alloc) or allocator by function name
 * (memsnap_alloc_*, *CUDACachingAllocator*: an allocator linked into the
 * program); else the module of the innermost native frame outside the CUDA
 * driver and runtime and memsnap's recorder, by base name; "unknown" when
 * the file has no module for any frame.
 *
 * Rules are matched on a plain frame view (cat_frame) so tests can hand-make
 * stacks; cat_classify_stack reads one from a snapshot's tables.
 */
#ifndef MEMSNAP_ANALYZE_CATEGORY_H
#define MEMSNAP_ANALYZE_CATEGORY_H

#include <stddef.h>
#include <stdint.h>

#include "symtab.h"

#define CAT_MAX 32         /* distinct categories, defaults included */
#define CAT_NAME_MAX 32

/* One frame as the rules see it.  Strings never NULL ("" when unknown). */
typedef struct cat_frame {
    int python;            /* 1: a Python frame (file = .py, fn = qualname) */
    const char *fn;        /* function / qualified name */
    const char *file;      /* Python: the .py path; native: the source file */
    const char *module;    /* native: the module path ("" when none) */
    int autograd;          /* 1: an autograd node (fn = its name) */
} cat_frame;

typedef struct cat_rules cat_rules;

/* The default rules (PyTorch, transformers, vLLM/SGLang-style serving,
 * CUDA libraries).  NULL when out of memory. */
cat_rules *cat_rules_new(void);
void cat_rules_free(cat_rules *r);

/* Reads a rules file and puts its rules before every rule already there.
 * 0 ok; -1 with a one-line message "PATH:LINE: why" (or "PATH: why") in
 * err, the rules unchanged. */
int cat_rules_load(cat_rules *r, const char *path, char *err, size_t errlen);

/* Number of categories and the name of one (index < cat_count, "?"
 * otherwise): "other" (CAT_OTHER), then the built-in ones in the order
 * listed above, then those the user's rules name, in file order. */
int cat_count(const cat_rules *r);
const char *cat_name(const cat_rules *r, int cat);
#define CAT_OTHER 0

/* The category of a stack given innermost frame first. */
int cat_classify(const cat_rules *r, const cat_frame *frames, int n);

/* The same for stack `stack` of a snapshot's tables (CAT_OTHER when the
 * stack is unknown). */
int cat_classify_stack(const cat_rules *r, const sm_symtab *t, uint32_t stack);

/* The user's rules alone (those a rules file added): a category, or -1
 * when none matches. */
int cat_classify_user(const cat_rules *r, const cat_frame *frames, int n);

/* The frames of a stack as the rules see them (up to max); how many. */
int cat_frames_of(const sm_symtab *t, uint32_t stack, cat_frame *out, int max);

/* The index of a category name (CAT_OTHER when unknown). */
int cat_index_of(const cat_rules *r, const char *name);

/* What part of a PyTorch program made an allocation, from its frames: the
 * backward (an autograd node first; *node its name), the optimizer
 * (torch/optim, ...), parameter creation or loading, a KV cache's code as
 * the innermost model-code frame, a module's forward, other Python (the
 * program's own code around the model: inputs), or no Python at all.
 * breakdown.c turns these and how long the memory lived into categories. */
enum { CT_NONE = 0, CT_BACKWARD, CT_OPTIM, CT_INIT, CT_FORWARD, CT_KV, CT_OTHER };
int cat_torch_kind(const cat_frame *frames, int n, const char **node);

/* The library that made a driver-level allocation (see above), written to
 * buf and returned. */
const char *cat_library(const cat_frame *frames, int n, char *buf, size_t cap);
const char *cat_library_stack(const sm_symtab *t, uint32_t stack, char *buf,
                              size_t cap);

/* Library names cat_library gives the memory runtimes whose blocks the
 * snapshot can show (their driver memory is reserved, their blocks are
 * the allocated layer). */
#define CAT_LIB_TORCH "PyTorch allocator"
#define CAT_LIB_MEMSNAP "memsnap allocator"
#define CAT_LIB_UNKNOWN "unknown"   /* no module for any frame */

#endif
