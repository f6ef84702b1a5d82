/* memsnap symbolizer: instruction pointers -> function, file, line.
 *
 * The recorder's hot path stores raw instruction pointers only (DESIGN.md:
 * "no symbolization on the hot path").  Names are attached later, either
 * offline by `memsnap symbolize` (from the "module" records of a snapshot,
 * on a machine where the same binaries exist) or in-process by the
 * recorder's writer thread at dump time (msnap_symbolizer_add_self).
 *
 * How it works: every module (ELF file + load bias) is reported to an
 * elfutils libdwfl session; an IP is mapped to its module with
 * dwfl_addrmodule, to a function with dwfl_module_addrinfo (ELF symbol
 * tables: .symtab, else .dynsym) and to file:line with the DWARF line table
 * (dwfl_module_getsrc + dwfl_lineinfo).  Separate debug files are found the
 * standard elfutils way (build-id under /usr/lib/debug, .gnu_debuglink).
 * Every answer is cached per IP, so a stack table with thousands of unique
 * IPs costs one DWARF lookup per IP, however many events use them.
 *
 * Return addresses.  IPs in a backtrace are return addresses: they point at
 * the instruction AFTER the call, which can belong to the next source line
 * or even to the next function (a call at the end of a noreturn function).
 * msnap_symbolizer_resolve_frame(..., is_return_address = 1, ...) looks up
 * ip - 1 for the function and the line, which lands inside the call
 * instruction; the reported offset stays relative to the real ip.
 *
 * C++ names are demangled when a demangler is already in the process
 * (__cxa_demangle, found with dlsym: libstdc++ is never linked for it).
 *
 * Ownership: every string in an msnap_symbol the symbolizer returns is owned
 * by the symbolizer and stays valid until msnap_symbolizer_free.
 * Thread safety: none; one symbolizer per thread.
 */
#ifndef MEMSNAP_SYMBOLIZE_H
#define MEMSNAP_SYMBOLIZE_H

#include <stdint.h>

#include "memsnap/format.h"   /* msnap_symbol, msnap_module */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct msnap_symbolizer msnap_symbolizer;

/* A new symbolizer with no modules.  NULL when out of memory. */
msnap_symbolizer *msnap_symbolizer_new(void);

/* Reports one module: the ELF file at path, loaded with bias base (the
 * dl_iterate_phdr dlpi_addr; 0 for a non-PIE executable), covering size
 * bytes from base (informational, may be 0).  build_id: hex string or
 * NULL/"": when given and the file's GNU build-id differs, the module is
 * refused (the binary changed since the recording) so no wrong names come
 * out.  Returns 0 on success, -1 when the file cannot be used; then
 * msnap_symbolizer_error() says why in one line.  IPs in a refused module
 * resolve to "unknown". */
int msnap_symbolizer_add_module(msnap_symbolizer *s, const char *path,
                                uint64_t base, uint64_t size,
                                const char *build_id);

/* Reports every module of the calling process (dl_iterate_phdr; the main
 * executable through /proc/self/exe; the vDSO and files that cannot be
 * opened are skipped).  Returns the number of modules added, -1 on error. */
int msnap_symbolizer_add_self(msnap_symbolizer *s);

/* Resolves ip as an exact code address (use for a faulting/current IP).
 * Fills *out (ip, function, file, line, offset; "" and 0 for what is not
 * known).  Returns 1 when a function name was found, 0 when not (out still
 * filled, with empty strings), -1 on bad arguments. */
int msnap_symbolizer_resolve(msnap_symbolizer *s, uint64_t ip,
                             msnap_symbol *out);

/* Same, for a backtrace frame: when is_return_address is non-zero the
 * lookup uses ip - 1 (see the top of this file).  Cached separately from
 * exact lookups of the same ip. */
int msnap_symbolizer_resolve_frame(msnap_symbolizer *s, uint64_t ip,
                                   int is_return_address, msnap_symbol *out);

/* The last add_module error, "" when none. */
const char *msnap_symbolizer_error(const msnap_symbolizer *s);
/* What kind it was: the file is not there (a recording from another
 * machine), it changed since the recording (another build-id), or it is
 * there but of no use (not a regular file: a FIFO is never opened for
 * good, not ELF, unreadable); 0 when there was none. */
#define MSNAP_SYM_ERR_MISSING 1
#define MSNAP_SYM_ERR_CHANGED 2
#define MSNAP_SYM_ERR_UNUSABLE 3
int msnap_symbolizer_error_kind(const msnap_symbolizer *s);

/* C++ names are demangled with libstdc++'s __cxa_demangle when the process
 * has libstdc++ loaded (in any scope).  allow = 1 lets new symbolizers load
 * libstdc++ for that when it is not loaded (the CLI does; the recorder never
 * loads a library into the program it records).  Default 0. */
void msnap_symbolizer_allow_loading(int allow);

/* Frees the symbolizer and every string it returned. NULL is fine. */
void msnap_symbolizer_free(msnap_symbolizer *s);

/* Calls fn once per module of the calling process, as a snapshot "module"
 * record would describe it (path absolute when known, base = load bias,
 * size = extent of the PT_LOAD segments, build_id hex or "").  Modules
 * without a file (the vDSO) are skipped.  Stops early and returns fn's
 * value when fn returns non-zero; returns 0 otherwise.  The strings in *m
 * are valid only during the call.  The recorder uses this to write its
 * module records; it takes no locks of its own (dl_iterate_phdr takes the
 * loader lock). */
int msnap_self_modules(int (*fn)(const msnap_module *m, void *ctx),
                       void *ctx);

#ifdef __cplusplus
}
#endif
#endif
