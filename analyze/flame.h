/* The flame graph's tree: what holds the memory at one moment, by stack.
 *
 * Every object live at the moment (the model's capture moment, model.h
 * sm_capture_objects) of one layer and device adds its bytes to the path
 * of its stack's frames, from the outermost frame (the root's child) to the
 * innermost frame outside the memory runtime (the driver's, an
 * allocator's and memsnap's own frames are never shown: sm_runtime_frames).
 * Frames are named as a site's listing names them, the file as a base name
 * ("LlamaMLP.forward (modeling_llama.py:175)", "MmBackward0"), and siblings
 * with the same name are one node.  A second moment (another time of the
 * same file, or another file) can be added for a comparison: each node
 * then has both byte counts (vs).
 *
 * The tree is nodes in one array, node 0 the root (all the bytes); children
 * in a list through first/next, ordered by name when the tree is finished,
 * so the picture is the same for the same input.
 */
#ifndef MEMSNAP_ANALYZE_FLAME_H
#define MEMSNAP_ANALYZE_FLAME_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define FL_NONE UINT32_MAX

typedef struct fl_node {
    char *name;
    uint32_t parent, first, next;   /* FL_NONE: none */
    int depth;                      /* the root 0 */
    uint64_t bytes, vs;             /* at the moment; at the other moment */
} fl_node;

typedef struct fl_tree {
    fl_node *n;
    size_t nn, cap;
    int maxdepth;
    int has_vs;
    uint64_t passes_folded;         /* FL_FOLD_PASSES: frames left out (per stack) */
    uint64_t deep_stacks;           /* stacks deeper than FL_MAX_DEPTH, folded */
    int deepest;                    /* the most frames a stack had to draw */
} fl_tree;

/* fl_add_model's flags.  FL_FOLD_PASSES: the framework's pass-through
 * frames (label.h sm_frame_passes: Module._call_impl, decorators'
 * wrappers, ...) are left out of the paths, so the program's frames meet
 * (a stack's innermost drawn frame always stays). */
#define FL_FOLD_PASSES 1u
/* A stack with more frames to draw keeps its outermost FL_MAX_DEPTH / 2
 * and innermost FL_MAX_DEPTH / 2 - 1, and one box between them names how
 * many frames it stands for ("(812 frames)"): a recursion thousands deep
 * is a picture a reader can use, and its height stays in a canvas. */
#define FL_MAX_DEPTH 200

/* An empty tree (the root alone).  0 ok, -1 out of memory. */
int fl_init(fl_tree *t);
void fl_free(fl_tree *t);

/* Adds the objects live at m's capture moment of layer (state.h:
 * MSNAP_LAYER_ALLOCATED or _RESERVED) on device slot dev (-1: every
 * device); vs: to the other moment's counts; flags FL_*.  *t_ns receives
 * the moment.  Each distinct stack's path is made once and its bytes
 * summed up the tree once at the end: O(objects + stacks x frames).
 * 0 ok, -1 out of memory. */
int fl_add_model(fl_tree *t, const sm_model *m, int layer, int dev, int vs, unsigned flags,
                 uint64_t *t_ns);

/* Which of PyTorch's pools a tree holds (flame --pool): the blocks of the
 * default pool (kind AN_POOL_DEFAULT), of every pool of a kind (graph,
 * mempool), of every private pool (AN_POOL_KINDS), or of one pool: its id
 * as the file names it (summary --json "pool") or PyTorch's MempoolId_t
 * pair ("0,1"). */
typedef struct fl_pool {
    int kind;            /* AN_POOL_*, AN_POOL_KINDS: any private pool, -1: by id */
    uint64_t id;         /* kind -1: the pool's id (0 the default pool) */
    uint64_t pair[2];    /* ... or its MempoolId_t, when has_pair */
    int has_pair;
} fl_pool;

/* Parses "default", "graph", "mempool", "private", a pool id or "A,B"
 * into *p.  0, or -1. */
int fl_pool_parse(const char *s, fl_pool *p);

/* fl_add_model with only the blocks of pool (NULL: every object). */
int fl_add_model_pool(fl_tree *t, const sm_model *m, int layer, int dev, int vs, unsigned flags,
                      const fl_pool *pool, uint64_t *t_ns);

/* Orders every node's children by name.  Call once, after the adds. */
void fl_finish(fl_tree *t);

/* The bytes of the other moment (vs) in frames that hold nothing at the
 * moment drawn, so have no box (the widths are that moment's), each
 * counted once at the outermost such frame; *frames (may be NULL)
 * receives how many such outermost frames there are.  With nothing at
 * all at the moment drawn, every byte of the other moment. */
uint64_t fl_vs_undrawn(const fl_tree *t, size_t *frames);

#endif
