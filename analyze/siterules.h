/* Site rules: which frames of a stack are the user's code, and which belong
 * to the libraries between the user's code and the driver.  label.c names
 * an allocation site by the innermost frame these rules call user code.
 *
 * A frame is one of six classes:
 *   SR_USER     the user's code: a frame no rule skips, or one a "keep"
 *               rule matches;
 *   SR_PYLIB    a Python frame of an installed package (site-packages,
 *               dist-packages): model code (transformers, diffusers, ...)
 *               - for a Python stack the site is its innermost model-code
 *               frame, user's or package's;
 *   SR_PYSKIP   a Python frame a user "skip" rule matches: not model code
 *               (the site is named by the next model-code frame outwards),
 *               only a fallback name for a stack without any;
 *   SR_TORCH    PyTorch's own Python (torch/, functorch, triton): the API
 *               the model calls ("via Linear.forward") and its internals,
 *               never the site itself; sr_plumbing() tells the frames
 *               that only pass a call on (Module._call_impl, decorators,
 *               autocast) from the API;
 *   SR_LIB      any other skipped frame: CUDA's libraries, the C/C++
 *               runtime, PyTorch's native libraries, the interpreter, the
 *               Python standard library;
 *   SR_RUNTIME  the memory runtime: the driver, cudart, PyTorch's caching
 *               allocator, memsnap's recorder and allocator (also linked
 *               statically: ms_*, memsnap_*, the names of all its
 *               functions, static helpers included, so that a build
 *               without debug information is recognised too).  These
 *               frames differ with the allocator's settings, so a site's
 *               identity starts outside them.
 *
 * Rules are checked in order, the first match decides: the user's rules
 * (MEMSNAP_SITE_RULES, file order), then the default table in siterules.c.
 * A rule matches one field with a glob (fnmatch, '*' also crosses '/'):
 *   fn      the function: the name as the file has it, or its short form
 *           (demangled, without arguments, templates, clone suffixes);
 *   file    the source file (for a Python frame the .py path);
 *   module  the shared object or executable the ip is in.
 * A file or module pattern without '/' matches the base name, one with '/'
 * the whole path.
 *
 * Rules file (docs/render.md, "Site rules"): one rule a line,
 *   skip|keep  fn|file|module  GLOB
 * '#' starts a comment; blank lines are ignored.
 *
 * State: one process-wide rule list (the CLI's), empty at start; every load
 * bumps a generation number so that cached labels are recomputed.
 */
#ifndef MEMSNAP_ANALYZE_SITERULES_H
#define MEMSNAP_ANALYZE_SITERULES_H

#include <stddef.h>

enum sr_class { SR_USER = 0, SR_PYLIB = 1, SR_LIB = 2, SR_RUNTIME = 3, SR_TORCH = 4,
                SR_PYSKIP = 5 };

/* What the rules look at in a frame; "" for an unknown field. */
typedef struct sr_frame {
    const char *fn;          /* as recorded (maybe mangled) */
    const char *short_fn;    /* shortened (label.c sm_short_name), or "" */
    const char *file;
    const char *module;      /* path */
    int python;              /* a Python frame (format.h msnap_ip_is_python) */
} sr_frame;

/* The class of a frame (enum sr_class).  *matched (may be NULL) is set to
 * 1 when a rule decided, 0 when no rule matched (user code by default). */
int sr_classify(const sr_frame *f, int *matched);

/* Whether a frame is memsnap's own (its recorder, its PyTorch plugin, its
 * allocator: the memory runtime's rules for libmemsnap*, libmsnap*,
 * memsnap_*, msnap_*, ms_* and memsnap_torch.cpp), whatever the user's
 * rules say: such a frame never names a site (label.h). */
int sr_own(const sr_frame *f);

/* Whether a PyTorch frame (SR_TORCH) only passes a call on: a module's
 * __call__ machinery, a decorator's wrapper, autocast, no_grad, dynamo's
 * frame hooks. */
int sr_plumbing(const sr_frame *f);

/* Replaces the user's rules by those of the file at path.  0 ok; -1 with a
 * one-line reason in err ("line 3: ...", "cannot read: ..."), the previous
 * rules kept. */
int sr_load_file(const char *path, char *err, size_t errlen);

/* Loads the file named by MEMSNAP_SITE_RULES when it is set and not empty.
 * 0 ok (also when unset); -1 with "MEMSNAP_SITE_RULES=PATH: why" in err. */
int sr_load_env(char *err, size_t errlen);

/* Drops the user's rules (the defaults stay). */
void sr_clear(void);

/* Changes whenever the rules change. */
unsigned sr_generation(void);

#endif
