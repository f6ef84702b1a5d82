/* The tables a snapshot carries besides its events: call stacks ("stack"
 * records), symbols ("sym"), loaded modules ("module") and interned strings
 * ("str"), and the rule that turns a frame of a stack into text.  The
 * an_file of a read owns one (analysis.h, f->tab), complete after the
 * read; every observer and view reads that one (the labels, label.h, are
 * computed from it).
 *
 * Rules, as records come in file order:
 *   stack   a later record with the same id replaces the earlier one;
 *   sym     the first record with a function name for an ip wins (a named
 *           record replaces an earlier nameless one, nothing else does);
 *   module  every record is kept, in file order (the first that covers an
 *           ip names it);
 *   str     a later record with the same id replaces the earlier one.
 *
 * Ownership: the table owns copies of every string and ip array; the
 * pointers sm_symtab_frame_get hands out live until sm_symtab_free.
 */
#ifndef MEMSNAP_ANALYZE_SYMTAB_H
#define MEMSNAP_ANALYZE_SYMTAB_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memsnap/format.h"
#include "util/grow.h"
#include "util/u64map.h"

/* Last component of a path ("a/b/c.so" -> "c.so"). */
static inline const char *sm_base_name(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

/* strdup that treats NULL as "". */
static inline char *sm_dupstr(const char *s)
{
    return strdup(s ? s : "");
}

typedef struct sm_stack_rec {
    uint32_t id;
    int depth;                   /* entries in ips; 0 when none kept */
    uint64_t *ips;               /* innermost frame first */
} sm_stack_rec;

typedef struct sm_sym {
    uint64_t ip, off;
    char *fn, *file;             /* never NULL ("" when the record had none) */
    int line;
} sm_sym;

typedef struct sm_module {
    uint64_t base, size;         /* size 0: see SM_MOD_OPEN_LAST */
    char *path;                  /* never NULL */
    char *build_id;              /* never NULL ("" when absent) */
} sm_module;

/* Zero-initialised is an empty table. */
typedef struct sm_symtab {
    u64map stack_map;            /* id -> index into stacks */
    sm_stack_rec *stacks;
    size_t nstacks, cap_stacks;
    u64map sym_map;              /* ip -> index into syms */
    sm_sym *syms;
    size_t nsyms, cap_syms;
    sm_module *mods;             /* file order */
    size_t nmods, cap_mods;
    u64map str_map;              /* id -> index into strs */
    char **strs;
    size_t nstrs, cap_strs;
    unsigned version;            /* counts the stack, sym and module records
                                  * taken: what was computed from the table
                                  * (label.h) knows when it is stale */
} sm_symtab;

/* Frees everything the table holds and leaves it empty. */
void sm_symtab_free(sm_symtab *t);

/* Takes a stack, sym, module or str record (other records are ignored;
 * a stack, sym or module record moves version on).  0 ok, -1 out of memory (the table
 * stays consistent). */
int sm_symtab_take(sm_symtab *t, const msnap_record *r);

/* The string of an interned-string id, "" when unknown. */
const char *sm_symtab_str(const sm_symtab *t, uint32_t id);

/* Which module records a bare ip may fall in:
 *   SM_MOD_SIZED      only [base, base+size) of modules with a size;
 *   SM_MOD_OPEN_LAST  the same, and a size-0 module that is the last
 *                     module record reaches from its base upwards
 *                     (`memsnap summary`'s frames). */
enum { SM_MOD_SIZED = 0, SM_MOD_OPEN_LAST = 1 };

/* The first module record holding ip under rule `match`, NULL when none. */
const sm_module *sm_symtab_module_of(const sm_symtab *t, uint64_t ip,
                                     int match);

/* Frame i of a stack as text into buf: "fn (file:line)", "fn (file)" or
 * "fn+0xoff" from a named sym record, else "module+0xoff" from the module
 * records (rule `match`), else "0xip"; file and module as base names,
 * except a Python frame's file (format.h msnap_ip_is_python), written in
 * full: the .py path is what tells site-packages from the user's code.
 * Returns the stack's depth, 0 when the id is unknown; buf is "" when the
 * stack is unknown or i out of range. */
int sm_symtab_frame(const sm_symtab *t, uint32_t stack, int i, int match,
                    char *buf, size_t cap);

/* What the file says about frame i of a stack: its ip, the sym record's
 * function/file/line/offset ("" / 0 when none) and the module record that
 * holds the ip (SM_MOD_SIZED; path "" and base 0 when none).  Returns the
 * stack's depth (0 when the stack is unknown); for i out of range only the
 * depth. */
typedef struct sm_frame_info {
    uint64_t ip, off, module_base;
    const char *fn, *file, *module;
    int line;
} sm_frame_info;
int sm_symtab_frame_get(const sm_symtab *t, uint32_t stack, int i,
                        sm_frame_info *f);

#endif
