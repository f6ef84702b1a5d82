/* Site labels: one label per allocation site, named by the user's code,
 * computed from a file's tables alone (symtab.h) and the site rules
 * (siterules.h).  label.c opens with the rule: which frame names a site,
 * how it is written, and what tells two sites apart whose names read the
 * same.
 *
 * Ownership.  The labels of a file are its an_file's (an_labels,
 * analysis.h): made on the first label asked for after the read, kept by
 * the file, made again when the tables or the site rules changed since,
 * freed with it.  Every view asks the file, so summary, render, compare,
 * export, predict and the Python API print the same label for the same
 * stack, and none of them needs a findings model for it.
 *
 * Our own frames (memsnap's recorder, its PyTorch plugin
 * memsnap_torch.cpp, memsnap's allocator) never name a site, whatever the
 * file's format version: a stack of nothing but the memory runtime (a
 * recording before format 1.2 has no autograd node to name a backward
 * allocation) is named by its innermost frame that is not ours.
 *
 * A NULL labels object (out of memory when it was made) is allowed
 * everywhere: stacks then read "stack N".
 */
#ifndef MEMSNAP_ANALYZE_LABEL_H
#define MEMSNAP_ANALYZE_LABEL_H

#include <stddef.h>
#include <stdint.h>

#include "symtab.h"

#define SM_LABEL_MAX 160

typedef struct sm_labels sm_labels;

/* The labels of every stack of t, made now (t complete: after the read);
 * ring: the file is a ring dump (a stack-less allocation was made before
 * the event window).  t must outlive them.  NULL when out of memory. */
sm_labels *sm_labels_new(const sm_symtab *t, int ring);
void sm_labels_free(sm_labels *l);
/* Whether l still fits its table and the site rules in force (siterules.h
 * sr_generation): an_labels makes them again when not. */
int sm_labels_current(const sm_labels *l);

/* The frame that names a site: the innermost one outside the memory
 * runtime and allocator libraries, shortened for a legend; where sites
 * would read the same, what tells each apart (see label.c). */
void sm_site_label(const sm_labels *l, uint32_t stack, char *buf, size_t cap);
/* sm_site_label of n stacks (a legend, a list). */
void sm_site_labels(const sm_labels *l, const uint32_t *stacks, int n,
                    char (*labels)[SM_LABEL_MAX]);
/* How many of a stack's innermost frames are the memory runtime's (the
 * driver, cudart, an allocator, memsnap's recorder and plugin): what a
 * listing of the site's frames leaves out. */
int sm_runtime_frames(const sm_labels *l, uint32_t stack);
/* Whether frame i (0 = innermost) of a stack only passes a call on: the
 * framework's machinery between two frames of the program (siterules.h
 * sr_plumbing: Module._call_impl and _wrapped_call_impl, decorators' and
 * hooks' wrappers, autocast, no_grad, dynamo's frame hooks; of PyTorch or
 * of an installed package).  A flame graph folds them (flame.h).  0 for an
 * unknown stack or frame. */
int sm_frame_passes(const sm_labels *l, uint32_t stack, int i);
/* The group of a stack's site: the sites whose labels read the same are
 * one (UINT32_MAX when the stack is unknown). */
uint32_t sm_site_group(const sm_labels *l, uint32_t stack);
/* A key that names the same site in another snapshot of the same program
 * (another run, another rank, another allocator setting): the hash of the
 * site's label, which holds no address, no stack id and none of the
 * allocator's frames; the same for every stack of one sm_site_group. */
uint64_t sm_site_key(const sm_labels *l, uint32_t stack);

/* A C++ function name shortened for a legend: demangled when it is
 * mangled (_Z...) and a demangler is reachable, without the argument
 * list, template arguments, return type, "(anonymous namespace)::" and
 * " [clone ...]". */
void sm_short_name(const char *fn, char *buf, size_t cap);
/* Lets the demangler load libstdc++ when it is not in the process (the
 * CLI does; default off, as for the symbolizer). */
void sm_demangle_allow_loading(int allow);

#endif
