/* Python frames in recorded stacks: the interface between the hot path
 * (core.c), the writer (writer.c) and pyframes.c.
 *
 * When the thread that records an event holds the GIL of the main CPython
 * interpreter (3.9 to 3.13), pyframes_merge() reads that thread's
 * interpreter frames straight from memory and puts them into the native
 * stack where the evaluation loop ran them: each group of Python frames that
 * one _PyEval_EvalFrameDefault call ran replaces that call's native frame,
 * innermost first.  A Python frame is the stack entry
 *     MSNAP_PYFRAME_BIT | code id << 32 | bytecode offset in bytes
 * where the code id names a code object in a table that keeps it alive (one
 * strong reference, taken with Py_IncRef while the GIL is held) and holds a
 * copy of its qualified name, file name, first line and location table, made
 * at first sight.  The writer names frames from that copy alone: it never
 * reads interpreter memory.  See docs/recorder.md for what is read when.
 */
#ifndef MEMSNAP_PYFRAMES_H
#define MEMSNAP_PYFRAMES_H

#include <stdint.h>

#include "stacktab.h"

/* This thread's Python frames, innermost first, into py (at most
 * min(cap, the Python depth setting)); grp[i] says which eval-loop call ran
 * py[i] (0 = the innermost; grp may be NULL when no native frames are to
 * be merged); *key = stacktab.h's key of py[0..n), or a key whose hash
 * is 0 when not made (the walk's fast path makes it as it goes).  Returns how
 * many, or -1 when there are none
 * to give (Python frames off, no interpreter, no Python state on this
 * thread, a released GIL where that is not read, unsupported version).
 * Never waits on a lock; calls the interpreter only for reads, a try of
 * its head lock (threads without the GIL; a sem_trywait of our own where
 * pyframes_lock_is_semaphore says so) and Py_IncRef on a code object seen
 * for the first time by a thread that holds the GIL. */
int pyframes_collect(uint64_t *py, uint16_t *grp, int cap, stacktab_key *key,
                     uint32_t *memo_id);

/* memo_id (may be NULL): for a caller that makes a stack of the Python
 * frames alone, nothing in front.  *memo_id is then the id of that stack
 * when the frames are those of this thread's last walk the caller noted
 * (py is not written), else 0: the caller makes the id of py[0..n) and
 * gives it to pyframes_memo_note (0 when none was made). */
void pyframes_memo_note(uint32_t id);
/* How many of this thread's captures the memo answered. */
uint64_t pyframes_memo_served(void);
/* The calling thread's walks (benchmarks): out[0..n) of walks, those the
 * memo answered, those walk_proven answered (the rest went the long way),
 * code objects its ways did not hold (the code table asked), frames kept
 * in all.  Returns how many were written (at most 5). */
int pyframes_walk_stats(uint64_t *out, int n);
/* The id this thread was last given for the stack of key (hash, check),
 * or 0; and keeping one (pyframes.c, "Stack ids again"). */
uint32_t pyframes_id_known(uint64_t hash, uint32_t check);
void pyframes_id_keep(uint64_t hash, uint32_t check, uint32_t id);

/* Merges py[0..np) (from pyframes_collect) into the native stack
 * native[0..n) (return addresses, innermost first): each eval-loop frame
 * gives way to the Python frames it ran; Python frames of eval-loop calls
 * the native stack does not reach follow its last frame.  Writes at most
 * cap entries to out; returns how many. */
int pyframes_merge(void *const *native, int n, const uint64_t *py, const uint16_t *grp,
                   int np, uint64_t *out, int cap);

/* Names a Python stack entry for the writer: qualified name, file, line and
 * bytecode offset.  0 on success, -1 for an id the table does not know (the
 * strings are then "").  The strings live as long as the process. */
int pyframes_name(uint64_t ip, const char **fn, const char **file, int *line,
                  uint64_t *off);

/* 1 when the object that defines fn (PyThread_acquire_lock) builds its
 * locks on POSIX semaphores: it takes both sem_init and sem_trywait from the
 * C library (read from its relocations; nothing is called). */
int pyframes_lock_is_semaphore(const void *fn);

/* Code objects in the table (for tests and the writer's statistics). */
uint32_t pyframes_code_count(void);

/* Line of bytecode offset off (bytes) in a CPython 3.11+ location table
 * (co_linetable) of a code object that starts at first_line; -1 when the
 * table says "no line" or off lies past its end.  Pure: unit-tested. */
int pyframes_line_at(const uint8_t *table, uint32_t len, int first_line, uint32_t off);
/* The same for 3.10's co_linetable and 3.9's co_lnotab. */
int pyframes_line_at_310(const uint8_t *table, uint32_t len, int first_line, uint32_t off);
int pyframes_line_at_39(const uint8_t *table, uint32_t len, int first_line, uint32_t off);

#endif
