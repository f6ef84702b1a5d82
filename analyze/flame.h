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
} fl_tree;

/* An empty tree (the root alone).  0 ok, -1 out of memory. */
int fl_init(fl_tree *t);
void fl_free(fl_tree *t);

/* Adds the objects live at m's capture moment of layer (state.h:
 * MSNAP_LAYER_ALLOCATED or _RESERVED) on device slot dev (-1: every
 * device); vs: to the other moment's counts.  *t_ns receives the moment.
 * 0 ok, -1 out of memory. */
int fl_add_model(fl_tree *t, const sm_model *m, int layer, int dev, int vs, uint64_t *t_ns);

/* Orders every node's children by name.  Call once, after the adds. */
void fl_finish(fl_tree *t);

/* The bytes of the other moment (vs) in frames that hold nothing at the
 * moment drawn, so have no box (the widths are that moment's), each
 * counted once at the outermost such frame; *frames (may be NULL)
 * receives how many such outermost frames there are.  With nothing at
 * all at the moment drawn, every byte of the other moment. */
uint64_t fl_vs_undrawn(const fl_tree *t, size_t *frames);

#endif
