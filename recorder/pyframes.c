/* Python frames read from the interpreter's own structures (see pyframes.h;
 * docs/recorder.md, "Python frames", says what is read and when).
 *
 * Finding the interpreter.  Nothing happens until the first stack is
 * captured (never in a constructor).  Then, once: dlsym(RTLD_DEFAULT,
 * "Py_Version") gives 3.11+; without it, PyCode_Type and Py_GetVersion tell
 * CPython and PyIter_Send (3.10) or PyThreadState_GetFrame (3.9) which one
 * (nothing is called).  For 3.9 to 3.13 the layout table below gives the
 * offsets of the few fields read; they were checked with offsetof() against
 * each version's own headers (Include/internal/pycore_frame.h,
 * Include/cpython/code.h, Include/cpython/pystate.h,
 * Include/cpython/unicodeobject.h, Include/internal/pycore_runtime.h).
 * Other versions: a notice, native frames.
 *
 * Which thread's frames:
 *   cur  = _PyThreadState_UncheckedGet()   (3.13: PyThreadState_GetUnchecked)
 *   mine = PyGILState_GetThisThreadState()
 *   main = PyInterpreterState_Main()
 * all three only read memory.  cur == mine: the thread holds the GIL, its
 * frame chain cannot change under us and every code object on it is alive.
 * mine != NULL but not current: the thread released the GIL (ctypes,
 * PyTorch's ops); it alone changes its frames and it is here, so they stand
 * still, and only finalization could free them: they are read under the
 * runtime's head lock, tried without waiting, and only while finalization
 * has not begun.  Frames are read only when mine->interp == main; anything
 * else (no Python state, a sub-interpreter, finalization past the GIL
 * state) gets native frames only.
 *
 * Code objects: on first sight a copy of the qualified name (co_name before
 * 3.11), file name, first line and line table goes into an arena; with the
 * GIL held also one strong reference (Py_IncRef), never released, so the
 * address is never reused for another code object.  Seen without the GIL,
 * a code object is told from a later one at the same address by a
 * fingerprint (3.12/3.13: co_version).  Every code pointer is checked
 * against &PyCode_Type before anything else is read, except where its
 * identity is already proven.  The table is lock-free (one CAS claims a
 * slot); each thread keeps a small cache of the ids it found.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "mapmem.h"
#include "modrange.h"
#include "pyframes.h"
#include "recorder.h"
#include "stacktab.h"

/* ---- per-version layout ------------------------------------------------------ */

typedef struct py_layout {
    int minor;
    int ts_interp;        /* PyThreadState.interp */
    int ts_cframe;        /* PyThreadState.cframe (-1: frames hang off the tstate) */
    int cf_current;       /* _PyCFrame.current_frame, or PyThreadState.current_frame */
    int fr_code;          /* _PyInterpreterFrame.f_code / f_executable */
    int fr_previous;
    int fr_instr;         /* prev_instr (3.11, 3.12) / instr_ptr (3.13) */
    int fr_owner;
    int fr_is_entry;      /* 3.11 only; -1: entry frames are FRAME_OWNED_BY_CSTACK shims */
    int co_firstlineno;
    int co_filename;
    int co_qualname;
    int co_linetable;
    int co_firsttraceable;
    int co_code;          /* co_code_adaptive: the first code unit */
    int str_ascii_data;   /* sizeof(PyASCIIObject) */
    int str_compact_data; /* sizeof(PyCompactUnicodeObject) */
    int rt_finalizing;    /* _PyRuntimeState._finalizing (-1: no released-GIL reads) */
    int rt_head_lock;     /* _PyRuntimeState.interpreters.mutex: a PyThread_type_lock,
                             or (3.13) a PyMutex, one byte in place */
    int rt_main;          /* _PyRuntimeState.interpreters.main */
    int co_version;       /* 3.12: PyCodeObject.co_version (-1: not used) */
    int fr_lasti;         /* 3.9, 3.10: PyFrameObject.f_lasti (-1: 3.11+) */
    int rt_mutex;         /* 1: rt_head_lock is a PyMutex (3.13) */
} py_layout;

static const py_layout layouts[] = {
    /* 3.9 and 3.10: frames are PyFrameObjects chained by f_back from
     * PyThreadState.frame, each run by its own eval-loop call; code objects
     * have no qualified name (co_name stands in) and 3.9's table is
     * co_lnotab. */
    {9, 16, -1, 24, 32, 24, -1, -1, -1, 40, 104, 112, 120, -1, -1, 48, 72, 16, 24, 40, -1, 104, 0},
    {10, 16, -1, 24, 32, 24, -1, -1, -1, 40, 104, 112, 120, -1, -1, 48, 72, 16, 24, 40, -1, 96, 0},
    {11, 16, 56, 8, 32, 48, 56, 69, 68, 72, 112, 128, 136, 168, 184, 48, 72, 24, 32, 48, -1, -1, 0},
    {12, 16, 56, 0, 0, 8, 56, 70, -1, 68, 112, 128, 136, 176, 192, 40, 56, 24, 32, 48, 92, -1, 0},
    /* 3.13: the head lock is a PyMutex, and co_version counts per
     * interpreter (only the main one's frames are read). */
    {13, 16, -1, 72, 0, 8, 56, 70, -1, 68, 112, 128, 136, 184, 200, 40, 56, 608, 624, 640, 92, -1, 1},
};

/* Common to 3.11-3.13 (non-free-threaded builds). */
#define OB_TYPE 8             /* PyObject.ob_type */
#define VAR_SIZE 16           /* PyVarObject.ob_size, PyASCIIObject.length */
#define BYTES_DATA 32         /* PyBytesObject.ob_sval */
#define STR_HASH 24           /* PyASCIIObject.hash */
#define STR_STATE 32          /* PyASCIIObject.state: interned:2 kind:3 compact:1 ascii:1 */
#define OWNED_BY_GENERATOR 1
#define OWNED_BY_CSTACK 3

typedef void *(*get_ptr_fn)(void);
typedef void (*incref_fn)(void *);
typedef int (*lock_fn)(void *, int);
typedef void (*unlock_fn)(void *);

enum { PY_UNKNOWN = 0, PY_STARTING, PY_READY, PY_OFF };
MSNAP_HOT_DATA static _Atomic int py_state;
MSNAP_HOT_DATA static const py_layout *L;
MSNAP_HOT_DATA static get_ptr_fn py_current, py_gil_this, py_main_interp;
static incref_fn py_incref;
MSNAP_HOT_DATA static const void *py_code_type;
MSNAP_HOT_DATA static const char *py_runtime;       /* &_PyRuntime (released-GIL reads only) */
MSNAP_HOT_DATA static lock_fn py_lock;              /* PyThread_acquire_lock */
MSNAP_HOT_DATA static int py_lock_sem;              /* 1: the head lock is a sem_t, taken with sem_trywait */
MSNAP_HOT_DATA static unlock_fn py_unlock;          /* PyThread_release_lock, or (3.13) PyMutex_Unlock */
static uintptr_t eval_lo, eval_hi;   /* _PyEval_EvalFrameDefault's code */

/* The code watcher (3.12+): see "Watching code objects die" below. */
typedef int (*pending_fn)(int (*)(void *), void *);
typedef int (*add_watcher_fn)(int (*)(int, void *));
static pending_fn py_add_pending;    /* Py_AddPendingCall */
static add_watcher_fn py_add_watcher;   /* PyCode_AddWatcher */
static void (*py_err_clear)(void);
enum { WATCH_NONE = 0, WATCH_ASKED, WATCH_ON, WATCH_NEVER };
/* Read at every walk, written about never: a line of their own. */
static struct {
    _Atomic uint32_t epoch;          /* +1 at each death of a code object we named */
    _Atomic int state;               /* WATCH_*: ON once the main thread's call ran */
    _Atomic int watching;            /* 3.12+: the code watcher is in place */
    _Atomic uint32_t ref_gen;        /* +1 when the main thread's call referenced more */
    _Atomic int ref_asked;           /* a call to reference is pending */
    int asks;                        /* Py_AddPendingCall refusals */
    uint64_t ref_last_ns;            /* when the last such call ran (monotonic) */
    void *main_ts;                   /* the main thread's state, set before WATCH_ON */
    pthread_t main_thread;           /* and the thread (the pending call ran there) */
} watch MSNAP_HOT_DATA __attribute__((aligned(64)));
static MSNAP_TLS int t_main;         /* this thread is main_thread: 1, not: -1, unknown: 0 */

/* ---- the code table --------------------------------------------------------------- */

#define CODE_MAX 65536u              /* code objects */
#define CODE_SLOTS (2 * CODE_MAX)
#define ARENA_BYTES (64u << 20)
#define NAME_MAX_BYTES 1024u
#define CODE_FULL UINT32_MAX

typedef struct code_slot {
    _Atomic uintptr_t key;           /* code object address, 0 = free */
    _Atomic uint32_t id;             /* 0 = being filled, CODE_FULL = not stored */
    uint32_t pad;
} code_slot;

typedef struct code_entry {
    uint32_t qual, file, table;      /* arena offsets (names NUL-terminated) */
    uint32_t table_len;
    int first_line;
    int referenced;                  /* 1: Py_IncRef taken (the GIL was held) */
    uint32_t version;                /* 3.12's co_version (0: none) */
    int64_t qual_hash;               /* co_qualname's cached hash (-1: not computed) */
    const void *co_qualname, *co_filename, *co_linetable;  /* fingerprint */
} code_entry;

static code_slot *slots;
static code_entry *entries;          /* by id, 1..CODE_MAX */
static char *arena;
static _Atomic uint32_t next_id = 1;
static _Atomic uint32_t arena_used = 1;   /* offset 0 is the empty string */

#define RD(p, off, type) (*(type const *)((const char *)(p) + (off)))
#define WALK_MAX 4096   /* frames looked at, kept or not: bounds a corrupt chain */

/* The innermost frame of thread state ts: 3.9/3.10 PyThreadState.frame,
 * 3.11/3.12 through its cframe, 3.13 current_frame. */
static inline const char *first_frame(const void *ts)
{
    if (L->fr_lasti >= 0)
        return RD(ts, L->cf_current, const char *);
    const char *fr = L->ts_cframe >= 0 ? RD(ts, L->ts_cframe, const char *) : (const char *)ts;
    return fr ? RD(fr, L->cf_current, const char *) : NULL;
}

/* 1 once finalization has begun (_PyRuntime._finalizing; py_runtime set). */
static inline int py_finalizing(void)
{
    return atomic_load_explicit((_Atomic(void *) *)(py_runtime + L->rt_finalizing),
                                memory_order_acquire) != NULL;
}

/* The stack entry of a frame of code id at bytecode offset off (bytes; a
 * negative one, before the first instruction, counts as 0). */
static inline uint64_t py_entry(uint32_t id, int64_t off)
{
    return MSNAP_PYFRAME_BIT | (uint64_t)id << 32 | ((uint64_t)(off > 0 ? off : 0) & 0x7fffffffu);
}

/* Arena space for n bytes; its offset, or 0 when full. */
static uint32_t arena_take(uint32_t n)
{
    uint32_t off = atomic_fetch_add_explicit(&arena_used, n, memory_order_relaxed);
    if ((uint64_t)off + n > ARENA_BYTES)
        return 0;
    return off;
}

/* Appends the UTF-8 form of code point c to dst (room for 4 bytes). */
static uint32_t put_utf8(char *dst, uint32_t c)
{
    if (c < 0x80) { dst[0] = (char)c; return 1; }
    if (c < 0x800) {
        dst[0] = (char)(0xc0 | c >> 6);
        dst[1] = (char)(0x80 | (c & 63));
        return 2;
    }
    if (c < 0x10000) {
        dst[0] = (char)(0xe0 | c >> 12);
        dst[1] = (char)(0x80 | (c >> 6 & 63));
        dst[2] = (char)(0x80 | (c & 63));
        return 3;
    }
    dst[0] = (char)(0xf0 | c >> 18);
    dst[1] = (char)(0x80 | (c >> 12 & 63));
    dst[2] = (char)(0x80 | (c >> 6 & 63));
    dst[3] = (char)(0x80 | (c & 63));
    return 4;
}

/* Copies the str object s into the arena as UTF-8 (at most NAME_MAX_BYTES);
 * its offset (0 = "" when s is not a compact str or the arena is full). */
static uint32_t copy_str(const void *s)
{
    if (!s)
        return 0;
    uint32_t state = RD(s, STR_STATE, uint32_t);
    unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
    int64_t len = RD(s, VAR_SIZE, int64_t);
    if (!compact || len < 0 || (kind != 1 && kind != 2 && kind != 4))
        return 0;
    char tmp[NAME_MAX_BYTES + 8];
    uint32_t n = 0;
    const uint8_t *data = (const uint8_t *)s + (ascii ? L->str_ascii_data : L->str_compact_data);
    for (int64_t i = 0; i < len && n < NAME_MAX_BYTES; i++) {
        uint32_t c = kind == 1 ? data[i]
                   : kind == 2 ? ((const uint16_t *)data)[i] : ((const uint32_t *)data)[i];
        n += put_utf8(tmp + n, c);
    }
    uint32_t off = arena_take(n + 1);
    if (!off)
        return 0;
    memcpy(arena + off, tmp, n);
    arena[off + n] = 0;
    return off;
}

/* Fills entry id from code object co (alive: a frame of this thread holds
 * it). */
static void fill_entry(uint32_t id, const void *co)
{
    code_entry *e = &entries[id];
    e->co_qualname = RD(co, L->co_qualname, const void *);
    e->co_filename = RD(co, L->co_filename, const void *);
    e->co_linetable = RD(co, L->co_linetable, const void *);
    e->qual_hash = e->co_qualname ? RD(e->co_qualname, STR_HASH, int64_t) : -1;
    e->first_line = RD(co, L->co_firstlineno, int);
    e->version = L->co_version >= 0 ? RD(co, L->co_version, uint32_t) : 0;
    e->qual = copy_str(RD(co, L->co_qualname, const void *));
    e->file = copy_str(RD(co, L->co_filename, const void *));
    const void *lt = RD(co, L->co_linetable, const void *);
    if (lt && RD(lt, VAR_SIZE, int64_t) > 0 && RD(lt, VAR_SIZE, int64_t) < (1 << 24)) {
        uint32_t n = (uint32_t)RD(lt, VAR_SIZE, int64_t);
        uint32_t off = arena_take(n);
        if (off) {
            memcpy(arena + off, (const char *)lt + BYTES_DATA, n);
            e->table = off;
            e->table_len = n;
        }
    }
}

/* 1 when entry id still names the code object co now at its address.  A
 * code object seen only on threads without the GIL holds no reference of
 * ours, so it may have been freed and its address reused -- and so may its
 * name, file and table objects (the allocator reuses freed blocks first).
 * So besides those addresses the fingerprint holds what names a frame: the
 * first line, the name's text (ASCII) or hash, the table's length and its
 * first bytes.  A code object that matches all that is named the same. */
static int same_code(uint32_t id, const void *co)
{
    const code_entry *e = &entries[id];
    if (__atomic_load_n(&e->referenced, __ATOMIC_ACQUIRE))
        return 1;
    /* 3.12 numbers code objects as it makes them (co_version, from a
     * process-wide counter that stops at 0 rather than wrap): a code object
     * with the entry's number is the entry's object. */
    if (e->version)
        return RD(co, L->co_version, uint32_t) == e->version;
    const void *q = RD(co, L->co_qualname, const void *);
    const void *lt = RD(co, L->co_linetable, const void *);
    if (e->co_qualname != q || e->co_filename != RD(co, L->co_filename, const void *) ||
        e->co_linetable != lt || e->first_line != RD(co, L->co_firstlineno, int))
        return 0;
    if (!lt || (uint32_t)RD(lt, VAR_SIZE, int64_t) != e->table_len ||
        memcmp((const char *)lt + BYTES_DATA, arena + e->table,
               e->table_len < 16 ? e->table_len : 16) != 0)
        return 0;
    uint32_t state = RD(q, STR_STATE, uint32_t);
    int64_t len = RD(q, VAR_SIZE, int64_t);
    if ((state >> 6 & 1) && (state >> 5 & 1) && len < NAME_MAX_BYTES)
        return memcmp((const char *)q + L->str_ascii_data, arena + e->qual, (size_t)len) == 0 &&
               arena[e->qual + len] == 0;
    return RD(q, STR_HASH, int64_t) == e->qual_hash;
}

/* The slot where a code object at address key is looked for first (then
 * the next ones, 64 at most). */
static inline uint32_t code_slot_first(uintptr_t key)
{
    return (uint32_t)(((uint64_t)(key >> 4) * 0x9e3779b97f4a7c15ull) >> 40) & (CODE_SLOTS - 1);
}

/* A new entry for code object co: its id, or 0 when the table is full.
 * One Py_IncRef when gil (this thread holds the GIL). */
static uint32_t code_new(const void *co, int gil)
{
    uint32_t id = atomic_fetch_add(&next_id, 1);
    if (id > CODE_MAX)
        return 0;
    if (gil) {
        py_incref((void *)co);
        entries[id].referenced = 1;
    }
    fill_entry(id, co);
    return id;
}

/* The id of code object co, adding it on first sight (with one Py_IncRef
 * when gil, i.e. this thread holds the GIL); 0 when the table is full or
 * another thread is filling the slot right now.
 *
 * A slot whose entry does not match co names a code object that lived at
 * co's address before: dead, since co is alive there now (a referenced
 * entry always matches: its object cannot die).  Its slot is taken over
 * (the id swapped for a new entry's; the old entry stays, for the stacks
 * that name it) rather than a new slot claimed further on: code made and
 * dropped without end at a few addresses (exec, fx's generated modules)
 * filled the 64 slots a key may probe, and every later object there went
 * unnamed. */
static uint32_t code_id(const void *co, int gil)
{
    uintptr_t key = (uintptr_t)co;
    code_slot *stale = NULL;
    uint32_t stale_id = 0;
    for (uint32_t probe = 0, i = code_slot_first(key); probe < 64;
         probe++, i = (i + 1) & (CODE_SLOTS - 1)) {
        code_slot *s = &slots[i];
        uintptr_t cur = atomic_load_explicit(&s->key, memory_order_acquire);
        if (cur == 0) {
            if (stale)
                break;
            uintptr_t zero = 0;
            if (atomic_compare_exchange_strong(&s->key, &zero, key)) {
                uint32_t id = code_new(co, gil);
                atomic_store_explicit(&s->id, id ? id : CODE_FULL, memory_order_release);
                return id;
            }
            cur = zero;
        }
        if (cur == key) {
            uint32_t id = atomic_load_explicit(&s->id, memory_order_acquire);
            if (id == 0 || id == CODE_FULL)
                return 0;
            if (same_code(id, co))
                return id;
            if (!stale) {             /* an older code object at this address */
                stale = s;
                stale_id = id;
            }
        }
    }
    if (!stale)
        return 0;
    uint32_t id = code_new(co, gil);
    /* Lost to another thread taking it over first (most likely for co
     * too): this entry names co all the same (a second id for the same
     * frames). */
    if (id)
        (void)atomic_compare_exchange_strong(&stale->id, &stale_id, id);
    return id;
}

/* ---- Watching code objects die (3.12+) ---------------------------------------------
 * A thread that released the GIL (every allocation of a PyTorch op) holds no
 * reference of ours on the code objects it shows, so a way of its cache
 * proves each frame's code object by reading its co_version: one more cache
 * line a frame, about a third of a walk's time on a cold stack.  A code
 * watcher (PyCode_AddWatcher) is told of every code object's death before
 * its memory is freed.  With one in place, a code object proven once by
 * its version, on the thread's own stack (so alive then), stays the object
 * at that address until the watcher says it died: its way is kept without
 * a check (want 0), and every death of a code object the table names
 * moves watch.epoch on, which sends each thread back to checking versions
 * at its next walk.  A thread cannot miss a death that matters: a code
 * object made at a dead one's address can only be on its stack after it
 * ran Python, i.e. took the GIL from the thread that saw the death.
 *
 * A watcher is added with the GIL held, which this recorder never takes:
 * Py_AddPendingCall (callable without the GIL from any thread) asks the
 * main thread to add it at its next check of the eval loop's breaker.
 * Until it runs (or where it cannot: 3.11, no slot left), versions are
 * read as before. */

/* 1 when the table has an entry for the code object at co's address. */
static int code_named(const void *co)
{
    uintptr_t key = (uintptr_t)co;
    for (uint32_t probe = 0, i = code_slot_first(key); probe < 64;
         probe++, i = (i + 1) & (CODE_SLOTS - 1)) {
        uintptr_t cur = atomic_load_explicit(&slots[i].key, memory_order_acquire);
        if (cur == 0)
            return 0;
        if (cur == key)
            return 1;
    }
    return 0;
}

/* The watcher: called with the GIL for every code object made and freed. */
static int code_watch(int event, void *co)
{
    if (event == 1 /* PY_CODE_EVENT_DESTROY */ && code_named(co))
        atomic_fetch_add_explicit(&watch.epoch, 1, memory_order_release);
    return 0;
}

/* Before 3.12 there is no watcher: the main thread's call instead takes a
 * reference (never given back, as at a sighting with the GIL) on each code
 * object on its own stack that the table names without one, and moves
 * watch.ref_gen on so that every thread fills its cache again, with those
 * ways held by references (3.11's fast path needs them).  The call runs
 * at the main thread's next look at the eval loop's breaker: when an op
 * returns, in the very frames whose code objects a walk just found held by
 * nothing of ours.  Asked for by the main thread only, at most every 50 ms. */
static void reference_main_stack(void)
{
    const char *fr = first_frame(watch.main_ts);
    int more = 0;
    for (int walked = 0; fr && walked < WALK_MAX; walked++) {
        const char *co = RD(fr, L->fr_code, const char *);
        if (co && RD(co, OB_TYPE, const void *) == py_code_type) {
            uint32_t id = code_id(co, 1);
            /* Code made at run time (exec, compile: "<string>", fx's
             * "<eval_with_key>") may be made and dropped without end: not
             * kept alive, it keeps its fingerprint. */
            if (id && !__atomic_load_n(&entries[id].referenced, __ATOMIC_RELAXED) &&
                arena[entries[id].file] != '<') {
                py_incref((void *)co);
                __atomic_store_n(&entries[id].referenced, 1, __ATOMIC_RELEASE);
                more = 1;
            }
        }
        fr = RD(fr, L->fr_previous, const char *);
    }
    if (more)
        atomic_fetch_add_explicit(&watch.ref_gen, 1, memory_order_release);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The pending call, run by the main thread with the GIL: notes the main
 * thread and its state (see "The main thread" at pyframes_collect), adds
 * the code watcher (3.12+), references the code objects on its stack
 * (before 3.12). */
static int main_call(void *arg)
{
    (void)arg;
    int st = atomic_load_explicit(&watch.state, memory_order_acquire);
    /* Queued before a fork from another thread, or before finalization
     * (watch_off): the thread and state noted are not this one's. */
    if (st == WATCH_NEVER ||
        (st == WATCH_ON && !(pthread_equal(pthread_self(), watch.main_thread) &&
                             py_gil_this() == watch.main_ts))) {
        atomic_store_explicit(&watch.ref_asked, 0, memory_order_release);
        return 0;
    }
    if (st != WATCH_ON) {
        watch.main_ts = py_gil_this();
        watch.main_thread = pthread_self();
        if (!watch.main_ts) {
            atomic_store_explicit(&watch.state, WATCH_NEVER, memory_order_release);
            return 0;
        }
        if (py_add_watcher && g_cfg.py_watch) {
            if (py_add_watcher(code_watch) < 0)
                py_err_clear();       /* no watcher slot left: versions, as before */
            else
                atomic_store_explicit(&watch.watching, 1, memory_order_release);
        }
    }
    if (L->minor < 12)
        reference_main_stack();
    watch.ref_last_ns = mono_ns();
    atomic_store_explicit(&watch.ref_asked, 0, memory_order_release);
    atomic_store_explicit(&watch.state, WATCH_ON, memory_order_release);
    return 0;
}

/* Finalization has begun (seen by any capture), or this is a fork's child
 * made by a thread other than the main one: the main thread's noted state
 * is no longer to be trusted (finalization frees it, and clears the code
 * watcher with the interpreter; a child's other threads are gone), so the
 * main-thread path ends for good, and every way kept without a check goes
 * back to checking versions (watching 0, the epoch moved on).  A later
 * Py_Initialize (embedders) then reads as before any of this. */
MSNAP_HOT_DATA static _Atomic int py_finalized_once;

static __attribute__((noinline)) void watch_off(void)
{
    atomic_store_explicit(&watch.state, WATCH_NEVER, memory_order_release);
    if (atomic_exchange(&watch.watching, 0))
        atomic_fetch_add_explicit(&watch.epoch, 1, memory_order_release);
    atomic_store_explicit(&py_finalized_once, 1, memory_order_release);
}

static void watch_atfork_child(void)
{
    if (atomic_load(&watch.state) == WATCH_ON && !pthread_equal(pthread_self(), watch.main_thread))
        watch_off();
    atomic_store(&watch.ref_asked, 0);
}

/* Asks the main thread for its call, once (a refused ask is tried again at
 * later walks, 16 times at most).  Called on a thread that has a Python
 * state, outside the head lock, and not during finalization. */
static __attribute__((noinline)) void watch_ask(void)
{
    int none = WATCH_NONE;
    if (!atomic_compare_exchange_strong(&watch.state, &none, WATCH_ASKED))
        return;
    if (py_add_pending(main_call, NULL) != 0)
        atomic_store(&watch.state, ++watch.asks < 16 ? WATCH_NONE : WATCH_NEVER);
}

/* Whether code id's object is held by a reference of ours, or never will
 * be (made at run time: reference_main_stack leaves it), so that asking
 * the main thread's call is of no use.  Runtime code on every frame (an
 * exec'd chain) had asked at each of its frames' every walk, a clock read
 * each time. */
static inline int ref_held_or_never(uint32_t id)
{
    return id && (__atomic_load_n(&entries[id].referenced, __ATOMIC_RELAXED) ||
                  arena[entries[id].file] == '<');
}

/* Before 3.12, on the main thread: a frame's code object is held by no
 * reference of ours; ask the main thread's call to take one (see
 * reference_main_stack). */
static __attribute__((noinline)) void ref_ask(void)
{
    if (atomic_load_explicit(&watch.ref_asked, memory_order_relaxed) ||
        mono_ns() - watch.ref_last_ns < 50000000u || py_finalizing())
        return;                       /* (t_main > 0: py_runtime is set) */
    int zero = 0;
    if (!atomic_compare_exchange_strong(&watch.ref_asked, &zero, 1))
        return;
    if (py_add_pending(main_call, NULL) != 0)
        atomic_store(&watch.ref_asked, 0);
}

/* ---- the per-thread cache ------------------------------------------------------------
 * code_id() costs a hash probe and, for a code object that holds no reference
 * of ours, the fingerprint (same_code) read through the table and the arena:
 * most of a Python frame's cost on threads that released the GIL, where a
 * training step makes every allocation.  Each thread keeps the last answers
 * in a small cache of its own (64 sets of 4 ways: a model's stack holds
 * dozens of code objects, which a direct-mapped cache of that size would
 * rarely hold all at once), each with the fingerprint laid
 * out for a check in place: the addresses of the name, file and location
 * table, the first line, the table's length and first 16 bytes, and the
 * name's text (ASCII, up to SEEN_NAME bytes).  A hit checks all of that
 * against the code object -- what same_code() checks -- and returns the id;
 * a miss, or a name the cache cannot hold, goes through code_id().
 *
 * Caches come from one region mapped at start-up (pages are touched only
 * when used); a thread claims one at its first Python frame and gives it
 * back when it exits (a thread-specific key's destructor).  Past
 * SEEN_CACHES threads at once, a thread goes without. */

#define SEEN_SETS 64u                /* sets per thread */
#define SEEN_ASSOC 4u                /* ways per set */
#define SEEN_WAYS (SEEN_SETS * SEEN_ASSOC)
#define SEEN_NAME_WORDS 6u           /* name text held: 48 bytes with its NUL */
#define SEEN_CACHES 1024u

typedef struct seen {
    /* What a hit needs when the identity is proven (a reference of ours,
     * or 3.12's co_version): the first 28 bytes, one cache line. */
    const void *co;
    uint32_t id;                     /* 0: empty */
    uint32_t version;                /* 3.12's co_version (0: none) */
    uint32_t referenced, name_words;
    int first;                       /* co_firsttraceable (3.11+) */
    /* The fingerprint, for the rest. */
    const void *q, *fn, *lt;
    int64_t lt_len, q_len;
    uint64_t lt16[2], lt_mask[2];    /* the table's first bytes, and which count */
    uint64_t name[SEEN_NAME_WORDS];  /* the name's text and NUL, zero-padded */
    uint64_t name_last_mask;         /* bytes of the last name word that count */
    int first_line;
} __attribute__((aligned(64))) seen;

/* What walk_proven needs of a way whose code object's identity is proven,
 * in 32 bytes: co (PROVEN_NONE: not proven), the co_version to find there (0: a
 * reference of ours holds it, nothing to check), the first traceable
 * instruction's offset in the object, and the stack entry less the
 * instruction's address (tag + instr - first code unit = base + instr). */
#define PROVEN_NONE ((const void *)~(uintptr_t)0)   /* an empty way's co */

typedef struct proven {
    const void *co;
    uint32_t want, start;
    uint64_t base, tag;
} proven;

/* The code pointer of the shim frames an eval-loop call starts with (3.12:
 * the interpreter's trampoline code object, 3.13: None), once a walk met
 * one (owner FRAME_OWNED_BY_CSTACK).  Only the main interpreter's frames
 * are read, so there is one; were there another, its frames would find no
 * way in walk_proven_t and go the long way, which reads the owner byte. */
MSNAP_HOT_DATA static _Atomic(const void *) shim_code;

/* The frames of a thread's last walk that a stack id was made of, and the
 * id (see "The last stack again" at walk_frames).  Frames visited, kept or
 * not: their instruction pointers. */
#define MEMO_MAX 192   /* frames visited: MEMSNAP_PYTHON_DEPTH (64) kept, with the shims between */
typedef struct py_memo {
    uint32_t stack;                  /* the id core made of the walk (0: none) */
    uint32_t pending;                /* 1: recorded, its id not yet noted */
    uint32_t n;                      /* frames visited */
    int np, maxp;                    /* frames kept, and the most asked */
    int ended;                       /* 1: the chain ended after n (else maxp was reached) */
    uint64_t served;                 /* captures it answered (tests, benchmarks) */
    /* What this thread's walks were (benchmarks: memsnap_bench_walk_stats):
     * all of them, those walk_proven answered, the code objects the ways
     * did not hold (seen_miss: the code table asked), the frames kept. */
    uint64_t walks, proven, misses, kept;
    const char *instr[MEMO_MAX];
} py_memo;

/* Stack ids this thread was given lately, by their key (see "Stack ids
 * again" at pyframes_id_known): 32 KiB on eight pages. */
#define IDC_N 2048u
typedef struct id_seen {
    uint64_t hash;                   /* 0: empty (an ended key's hash never is) */
    uint32_t check, id;
} id_seen;

typedef struct seen_cache {
    py_memo memo;
    seen way[SEEN_WAYS];             /* set k: ways k * SEEN_ASSOC ... */
    proven prov[SEEN_WAYS];          /* by the same index */
    uint8_t victim[SEEN_SETS];       /* the next way of a full set to refill */
    uint32_t epoch;                  /* watch.epoch when the ways were last checked */
    uint32_t ref_gen;                /* watch.ref_gen when the ways were filled */
    id_seen ids[IDC_N];              /* by key.hash's low bits */
} seen_cache;

MSNAP_HOT_DATA static seen_cache *caches;
static _Atomic uint32_t cache_used[SEEN_CACHES];
static pthread_key_t cache_key;
static MSNAP_TLS seen_cache *t_cache;
static MSNAP_TLS int t_cache_state;  /* 0 none yet, 1 claimed, -1 none to be had */

static void cache_release(void *p)
{
    size_t i = (size_t)((seen_cache *)p - caches);
    memset(p, 0, sizeof(seen_cache));
    t_cache = NULL;
    t_cache_state = -1;              /* exiting: no new claim */
    atomic_store_explicit(&cache_used[i], 0, memory_order_release);
}

/* This thread's cache; NULL when none is to be had. */
static MSNAP_HOT_FN seen_cache *cache_get(void)
{
    if (t_cache_state)
        return t_cache;
    t_cache_state = -1;
    for (uint32_t i = 0; i < SEEN_CACHES; i++) {
        uint32_t zero = 0;
        if (atomic_load_explicit(&cache_used[i], memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&cache_used[i], &zero, 1)) {
            if (pthread_setspecific(cache_key, &caches[i]) != 0) {
                atomic_store(&cache_used[i], 0);
                return NULL;
            }
            t_cache = &caches[i];
            t_cache_state = 1;
            for (uint32_t k = 0; k < SEEN_WAYS; k++)
                t_cache->prov[k].co = PROVEN_NONE;
            break;
        }
    }
    return t_cache;
}

static inline uint64_t word_at(const void *p, size_t off)
{
    uint64_t v;
    memcpy(&v, (const char *)p + off, 8);
    return v;
}

/* Mask of the first n bytes of a word (n <= 8). */
static inline uint64_t low_bytes(uint32_t n) { return n >= 8 ? ~0ull : (1ull << (8 * n)) - 1; }

/* 1 when way s, which holds co's address, still names the code object
 * there: the fingerprint checked in place.  The words compared are whole
 * words of the objects themselves: a bytes object's first 16 bytes of data
 * lie inside its smallest allocation (48 bytes), and a str's text and NUL
 * rounded up to 8 bytes inside its own, since the text starts 8-aligned and
 * CPython's allocators hand out multiples of 16 (obmalloc) or of 8 past the
 * requested size (malloc).  l is a local copy of the layout (loads from it
 * stay in registers). */
static inline int seen_hit(const seen *s, const void *co, const py_layout *l)
{
    if (s->referenced)
        return 1;
    if (s->version)                  /* see same_code */
        return RD(co, l->co_version, uint32_t) == s->version;
    const void *q = RD(co, l->co_qualname, const void *);
    const void *lt = RD(co, l->co_linetable, const void *);
    if (!((q == s->q) & (lt == s->lt) & (RD(co, l->co_filename, const void *) == s->fn) &
          (RD(co, l->co_firstlineno, int) == s->first_line)))
        return 0;
    uint64_t d = (uint64_t)(RD(lt, VAR_SIZE, int64_t) ^ s->lt_len) |
                 (uint64_t)(RD(q, VAR_SIZE, int64_t) ^ s->q_len) |
                 ((word_at(lt, BYTES_DATA) ^ s->lt16[0]) & s->lt_mask[0]) |
                 ((word_at(lt, BYTES_DATA + 8) ^ s->lt16[1]) & s->lt_mask[1]) |
                 (uint64_t)((RD(q, STR_STATE, uint32_t) & 0x60) ^ 0x60);
    const char *text = (const char *)q + l->str_ascii_data;
    uint32_t last = s->name_words - 1;
    for (uint32_t k = 0; k < last; k++)
        d |= word_at(text, 8 * k) ^ s->name[k];
    d |= (word_at(text, 8 * last) ^ s->name[last]) & s->name_last_mask;
    return d == 0;
}

/* The proven entry of way s of this thread's cache. */
static inline proven *seen_proven(seen *s)
{
    seen_cache *c = t_cache;
    return &c->prov[s - c->way];
}

/* code_id() for a code object the cache did not answer, and the way s
 * filled from it when its fingerprint fits: an ASCII name whose text and
 * NUL fit SEEN_NAME_WORDS words, and a location table (else the frames of
 * that code object go through code_id each time, as without the cache). */
static __attribute__((noinline)) uint32_t seen_miss(seen *s, const void *co, int gil)
{
    if (t_cache)
        t_cache->memo.misses++;
    uint32_t id = code_id(co, gil);
    if (!id || !s)
        return id;
    const void *q = RD(co, L->co_qualname, const void *);
    const void *lt = RD(co, L->co_linetable, const void *);
    s->co = NULL;
    proven *pv = seen_proven(s);
    pv->co = PROVEN_NONE;
    int referenced = __atomic_load_n(&entries[id].referenced, __ATOMIC_ACQUIRE);
    uint32_t version = entries[id].version;
    if (!referenced && !version) {
        if (!q || !lt)
            return id;
        uint32_t state = RD(q, STR_STATE, uint32_t);
        int64_t qn = RD(q, VAR_SIZE, int64_t), ln = RD(lt, VAR_SIZE, int64_t);
        if ((state & 0x60) != 0x60 || qn < 0 || qn + 1 > 8 * (int64_t)SEEN_NAME_WORDS || ln < 0)
            return id;
        s->q = q;
        s->lt = lt;
        s->fn = RD(co, L->co_filename, const void *);
        s->first_line = RD(co, L->co_firstlineno, int);
        s->q_len = qn;
        s->lt_len = ln;
        uint32_t lb = ln < 16 ? (uint32_t)ln : 16;
        s->lt_mask[0] = low_bytes(lb);
        s->lt_mask[1] = lb > 8 ? low_bytes(lb - 8) : 0;
        s->lt16[0] = word_at(lt, BYTES_DATA) & s->lt_mask[0];
        s->lt16[1] = word_at(lt, BYTES_DATA + 8) & s->lt_mask[1];
        uint32_t nb = (uint32_t)qn + 1, nw = (nb + 7) / 8;
        s->name_words = nw;
        s->name_last_mask = low_bytes(nb - 8 * (nw - 1));
        for (uint32_t k = 0; k < nw; k++)
            s->name[k] = word_at(q, (size_t)L->str_ascii_data + 8 * k);
        s->name[nw - 1] &= s->name_last_mask;
    }
    s->referenced = (uint32_t)referenced;
    s->version = version;
    s->first = L->co_firsttraceable >= 0 ? RD(co, L->co_firsttraceable, int) : 0;
    s->id = id;
    if (referenced || (version && L->minor >= 12)) {
        /* 0: held by a reference of ours, nothing to check (walk_proven_t) */
        pv->want = referenced || atomic_load_explicit(&watch.watching, memory_order_acquire)
                       ? 0 : version;
        pv->start = (uint32_t)L->co_code + 2 * (uint32_t)s->first;
        pv->tag = py_entry(id, 0);
        pv->base = pv->tag - (uint64_t)(uintptr_t)co - (uint64_t)L->co_code;
        pv->co = co;
    }
    s->co = co;
    return id;
}

/* ---- start-up ------------------------------------------------------------------------ */

static void *sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }

static void notice(const char *msg)
{
    if (!g_cfg.quiet)
        fprintf(stderr, "memsnap: %s; stacks hold native frames only\n", msg);
}

/* 1 when the object that defines PyThread_acquire_lock (fn) takes both
 * sem_init and sem_trywait from the C library: CPython's thread_pthread.h
 * builds its locks on POSIX semaphores then (USE_SEMAPHORES, which every
 * glibc build defines), so a PyThread_type_lock is a sem_t *, acquiring it
 * without waiting is sem_trywait and releasing it sem_post -- what
 * pyframes_collect then does itself, since CPython's acquire reads the
 * monotonic clock for a deadline even with a zero timeout (3.11+, ~40 ns on
 * a VM).  Only the object's relocations are read; nothing is called. */
int pyframes_lock_is_semaphore(const void *fn)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!fn || !dladdr1(fn, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_ld)
        return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    size_t strsz = 0, relsz[2] = {0, 0};
    const ElfW(Rela) *rel[2] = {NULL, NULL};
    int pltrel = DT_RELA;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)(const char *)rec_dyn_ptr(d->d_un.d_ptr, lm->l_addr); break;
        case DT_STRTAB: strtab = (const char *)rec_dyn_ptr(d->d_un.d_ptr, lm->l_addr); break;
        case DT_STRSZ: strsz = d->d_un.d_val; break;
        case DT_RELA: rel[0] = (const ElfW(Rela) *)(const char *)rec_dyn_ptr(d->d_un.d_ptr, lm->l_addr); break;
        case DT_RELASZ: relsz[0] = d->d_un.d_val; break;
        case DT_JMPREL: rel[1] = (const ElfW(Rela) *)(const char *)rec_dyn_ptr(d->d_un.d_ptr, lm->l_addr); break;
        case DT_PLTRELSZ: relsz[1] = d->d_un.d_val; break;
        case DT_PLTREL: pltrel = (int)d->d_un.d_val; break;
        default: break;
        }
    }
    if (!symtab || !strtab || pltrel != DT_RELA)
        return 0;
    int found = 0;
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; rel[t] && i < relsz[t] / sizeof(ElfW(Rela)); i++) {
            size_t k = ELF64_R_SYM(rel[t][i].r_info);
            if (!k || symtab[k].st_shndx != SHN_UNDEF || symtab[k].st_name >= strsz)
                continue;
            const char *name = strtab + symtab[k].st_name;
            if (!strcmp(name, "sem_init"))
                found |= 1;
            else if (!strcmp(name, "sem_trywait"))
                found |= 2;
        }
    return found == 3;
}

/* Looks the interpreter up once; PY_READY or PY_OFF. */
static int py_start(void)
{
    const unsigned long *ver = sym("Py_Version");
    unsigned major, minor;
    if (ver) {
        major = (unsigned)(*ver >> 24 & 0xff);
        minor = (unsigned)(*ver >> 16 & 0xff);
    } else if (sym("PyCode_Type") && sym("Py_GetVersion")) {
        /* Before 3.11 there is no Py_Version: 3.10 and 3.9 are told apart
         * by what each added to the C API (nothing is called). */
        major = 3;
        minor = sym("PyIter_Send") ? 10 : sym("PyThreadState_GetFrame") ? 9 : 0;
        if (!minor) {
            notice("Python frames need CPython 3.9 or later");
            return PY_OFF;
        }
    } else {
        return PY_OFF;
    }
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (major == 3 && layouts[i].minor == (int)minor)
            L = &layouts[i];
    if (!L) {
        char msg[96];
        snprintf(msg, sizeof msg, "Python %u.%u frames are not supported by this memsnap",
                 major, minor);
        notice(msg);
        return PY_OFF;
    }
    py_current = (get_ptr_fn)sym(minor >= 13 ? "PyThreadState_GetUnchecked"
                                             : "_PyThreadState_UncheckedGet");
    py_gil_this = (get_ptr_fn)sym("PyGILState_GetThisThreadState");
    py_main_interp = (get_ptr_fn)sym("PyInterpreterState_Main");
    py_incref = (incref_fn)sym("Py_IncRef");
    py_code_type = sym("PyCode_Type");
    py_add_pending = (pending_fn)sym("Py_AddPendingCall");
    if (minor >= 12) {
        py_add_watcher = (add_watcher_fn)sym("PyCode_AddWatcher");
        py_err_clear = (void (*)(void))sym("PyErr_Clear");
        if (!py_err_clear)
            py_add_watcher = NULL;
    }
    if (!py_add_pending || !g_cfg.py_watch)
        atomic_store(&watch.state, WATCH_NEVER);
    else if (pthread_atfork(NULL, NULL, watch_atfork_child) != 0)
        atomic_store(&watch.state, WATCH_NEVER);
    if (!py_current || !py_gil_this || !py_main_interp || !py_incref || !py_code_type) {
        notice("this Python lacks an exported function memsnap reads frames with");
        return PY_OFF;
    }
    /* Threads that released the GIL: their frames are read under the
     * runtime's head lock, which finalization takes before it frees other
     * threads' states.  The layout is checked: the runtime's
     * main-interpreter field must hold what PyInterpreterState_Main says. */
    if (L->rt_head_lock >= 0) {
        py_runtime = sym("_PyRuntime");
        py_lock = L->rt_mutex ? NULL : (lock_fn)sym("PyThread_acquire_lock");
        py_unlock = (unlock_fn)sym(L->rt_mutex ? "PyMutex_Unlock" : "PyThread_release_lock");
        if (!py_runtime || (!L->rt_mutex && !py_lock) || !py_unlock ||
            RD(py_runtime, L->rt_main, void *) != py_main_interp() ||
            (!L->rt_mutex && !RD(py_runtime, L->rt_head_lock, void *)))
            py_runtime = NULL;
        py_lock_sem = py_runtime && !L->rt_mutex && pyframes_lock_is_semaphore((const void *)py_lock);
    }
    void *eval = sym("_PyEval_EvalFrameDefault");
    const ElfW(Sym) *es = NULL;
    Dl_info info;
    if (eval && dladdr1(eval, &info, (void **)&es, RTLD_DL_SYMENT) && es && es->st_size) {
        eval_lo = (uintptr_t)eval;
        eval_hi = eval_lo + es->st_size;
    }
    slots = rec_map_zeroed(CODE_SLOTS * sizeof *slots);
    entries = rec_map_zeroed((CODE_MAX + 1) * sizeof *entries);
    arena = rec_map_zeroed(ARENA_BYTES);
    if (!slots || !entries || !arena)
        return PY_OFF;
    caches = rec_map_zeroed(SEEN_CACHES * sizeof *caches);
    if (caches && pthread_key_create(&cache_key, cache_release) != 0)
        caches = NULL;
    return PY_READY;
}

/* ---- the hot path ------------------------------------------------------------------ */

_Static_assert(SEEN_ASSOC == 4 && sizeof(proven) == 32,
               "walk_proven looks at 4 ways of 32 bytes: a set is 128 bytes");

/* The first way of the set code object co maps to. */
static inline uint32_t seen_set(const void *co)
{
    return ((uint32_t)((uintptr_t)co >> 4) & (SEEN_SETS - 1)) * SEEN_ASSOC;
}

/* The way of this thread's cache that holds co's address, or NULL. */
static inline seen *seen_find(seen_cache *cache, const void *co)
{
    seen *w = &cache->way[seen_set(co)];
    for (uint32_t k = 0; k < SEEN_ASSOC; k++)
        if (w[k].co == co)
            return &w[k];
    return NULL;
}

/* The way to fill for co, which the set does not hold: an empty one, else
 * the set's ways in turn. */
static inline seen *seen_victim(seen_cache *cache, const void *co)
{
    uint32_t first = seen_set(co);
    seen *w = &cache->way[first];
    for (uint32_t k = 0; k < SEEN_ASSOC; k++)
        if (!w[k].co)
            return &w[k];
    uint8_t *v = &cache->victim[first / SEEN_ASSOC];
    return &w[(*v)++ % SEEN_ASSOC];
}

/* Appends the stack entry of a frame of code id at instruction instr. */
static inline void put_frame(uint64_t *py, uint16_t *grp, int *np, uint32_t id,
                             const char *instr, const char *code0, int g)
{
    py[*np] = py_entry(id, instr - code0);
    grp[(*np)++] = (uint16_t)g;
}

static inline uint32_t frame_code_id(seen_cache *cache, const char *co, int gil)
{
    if (!cache)
        return code_id(co, gil);
    seen *s = seen_find(cache, co);
    if (s && seen_hit(s, co, L))      /* a reference, the version, or the fingerprint */
        return s->id;
    return seen_miss(s ? s : seen_victim(cache, co), co, gil);
}

/* The walk when every frame's code object is one this thread's cache has
 * named with its identity proven (a reference of ours; 3.12/3.13's
 * co_version, 3.13 after the type check): what walk_frames does for such
 * frames and nothing else, its own function so its few values stay in
 * registers and the frame chain is the only dependency.  -1 at the first
 * frame that is not such a hit: the caller walks again the long way.
 * entry: 3.11's is-entry byte (else -1); typed: 3.13. */
static inline __attribute__((always_inline)) int
walk_proven_t(const char *fr, const seen_cache *cache, uint64_t *py, uint16_t *grp, int maxp,
              stacktab_key *key, const py_layout *l, const int typed, const int with_grp,
              int watching, py_memo *m)
{
    uint32_t nv = 0;                  /* frames visited (m) */
    const long o_owner = l->fr_owner, o_code = l->fr_code, o_instr = l->fr_instr,
               o_prev = l->fr_previous, o_code0 = l->co_code, o_version = l->co_version;
    const int entry = l->fr_is_entry;
    const void *code_type = py_code_type;
    int np = 0, g = 0;
    uint64_t h = STACKTAB_HASH_SEED, c = STACKTAB_CHECK_SEED;
    /* Bounded by maxp frames kept, and WALK_MAX looked at and not kept (a
     * corrupt chain). */
    const char *prev;
    const void *tramp = entry < 0 ? atomic_load_explicit(&shim_code, memory_order_relaxed) : NULL;
    for (int left = WALK_MAX; fr; fr = prev) {
        prev = RD(fr, o_prev, const char *);
        const char *co = RD(fr, o_code, const char *);
        if (m) {
            if (nv < MEMO_MAX) {
                m->instr[nv] = RD(fr, o_instr, const char *);
            }
            nv++;
        }
        /* The shim an eval-loop call starts with (3.12, 3.13): known by its
         * code pointer once one was seen (shim_code), so that a frame's
         * owner byte, on the frame's second cache line, is read only for
         * the rare frame before its first traceable instruction. */
        if (entry < 0 && (tramp ? co == tramp : fr[o_owner] == OWNED_BY_CSTACK)) {
            if (!tramp)
                atomic_store_explicit(&shim_code, (const void *)co, memory_order_relaxed);
            tramp = co;
            g++;
            if (!--left)
                break;
            continue;
        }
        /* &prov[seen_set(co)], in two instructions; an empty way holds
         * PROVEN_NONE, which no frame's code pointer (NULL included) is. */
        const proven *p = (const proven *)((const char *)cache->prov +
                                           (((uintptr_t)co << 3) & ((SEEN_SETS - 1) << 7)));
        if (p->co != co && (++p)->co != co && (++p)->co != co && (++p)->co != co)
            return -1;
        /* 3.12/3.13: a way whose object a reference of ours holds (want 0)
         * needs no look at the object: its address cannot be another code
         * object's while we hold it; any other way is proven by the
         * object's own version (never 0 for such a way), read in place.
         * 3.11's ways are all held by references. */
        if (o_version >= 0 && p->want) {
            if ((typed && RD(co, OB_TYPE, const void *) != code_type) ||
                RD(co, o_version, uint32_t) != p->want)
                return -1;
            /* Proven now, on this stack: alive, and the watcher will say
             * when it dies (see "Watching code objects die"). */
            if (watching)
                ((proven *)p)->want = 0;
        }
        const char *instr = RD(fr, o_instr, const char *);
        /* At or past the first traceable instruction (incomplete frames are
         * skipped, as CPython's tracebacks do; a generator's is kept). */
        if ((uint64_t)(instr - (co + p->start)) < 0x40000000u) {
            py[np] = p->base + (uint64_t)(uintptr_t)instr;
        } else if (fr[o_owner] == OWNED_BY_GENERATOR) {
            py[np] = p->tag | py_entry(0, instr - (co + o_code0));
            nv = MEMO_MAX + 1;        /* the owner byte counted: no memo */
        } else {
            if (!--left)
                break;
            goto next;
        }
        h = stacktab_hash_step(h, py[np]);
        c = stacktab_check_step(c, py[np]);
        if (with_grp)
            grp[np] = (uint16_t)g;
        if (++np == maxp)
            break;
    next:
        if (entry >= 0 && fr[entry])
            g++;                      /* 3.11: the frame an eval-loop call was given */
    }
    key->hash = stacktab_hash_end(h, np);
    key->check = stacktab_check_end(c, np);
    if (m) {
        /* Kept where the walk ended (the chain's end, or the depth) within
         * MEMO_MAX frames visited and met no generator frame before its
         * first instruction.  Every frame here is a proven way; one whose
         * version was read now is kept unchecked from now on (the watcher
         * on), and walk_frames passes m only with the watcher on or, before
         * 3.12, with every way held by a reference of ours. */
        m->stack = 0;
        m->pending = nv <= MEMO_MAX && np > 0 && (!fr || np == maxp);
        m->n = nv;
        m->np = np;
        m->maxp = maxp;
        m->ended = !fr;
    }
    return np;
}

static __attribute__((noinline)) MSNAP_HOT_FN int walk_proven(const char *fr, const seen_cache *cache,
                                                 uint64_t *py, uint16_t *grp, int maxp,
                                                 stacktab_key *key, int watching, py_memo *m)
{
    /* The layout as constants for the versions whose layout is fixed (the
     * offsets then cost no registers); the rest read L. */
    if (maxp <= 0)
        return 0;
    if (L == &layouts[3] && layouts[3].minor == 12)
        return grp ? walk_proven_t(fr, cache, py, grp, maxp, key, &layouts[3], 0, 1, watching, m)
                   : walk_proven_t(fr, cache, py, grp, maxp, key, &layouts[3], 0, 0, watching, m);
    if (L == &layouts[4] && layouts[4].minor == 13)
        return grp ? walk_proven_t(fr, cache, py, grp, maxp, key, &layouts[4], 1, 1, watching, m)
                   : walk_proven_t(fr, cache, py, grp, maxp, key, &layouts[4], 1, 0, watching, m);
    return grp ? walk_proven_t(fr, cache, py, grp, maxp, key, L, 0, 1, watching, m)
               : walk_proven_t(fr, cache, py, grp, maxp, key, L, 0, 0, watching, m);
}

/* After a code object's death (watch.epoch moved on to ep): every way
 * this thread keeps without a check goes back to checking its version,
 * but those a reference of ours holds. */
static __attribute__((noinline)) void cache_recheck(seen_cache *cache, uint32_t ep)
{
    for (uint32_t k = 0; k < SEEN_WAYS; k++)
        if (cache->prov[k].co != PROVEN_NONE && !cache->way[k].referenced)
            cache->prov[k].want = cache->way[k].version;
    cache->memo.stack = cache->memo.pending = 0;
    cache->epoch = ep;
}

static __attribute__((noinline)) void cache_refill(seen_cache *cache, uint32_t rg)
{
    for (uint32_t k = 0; k < SEEN_WAYS; k++) {
        cache->way[k].co = NULL;
        cache->prov[k].co = PROVEN_NONE;
    }
    cache->memo.stack = cache->memo.pending = 0;
    cache->ref_gen = rg;
}

/* The last stack again.  Where a caller can use a stack id in place of the
 * frames (memo_id not NULL: core_capture_stack_n, a Python-only stack),
 * the chain is first compared with the thread's last walk that such a
 * caller made an id of: the same instruction pointers frame by
 * frame, ended the same way, give the same entries, so the id stands and
 * neither the ways nor the stack table are looked at.  Consecutive
 * allocations from one line of Python (a foreach op's dozens, an op's
 * output and workspace) are such walks.  Kept only while every frame's
 * code object is proven without a look (the watcher on, or, before 3.12,
 * references of ours): a code object that died moves the epoch on, which
 * drops the memo (cache_recheck), as does a refill. */
/* The instruction pointers alone are compared: an instruction lies inside
 * its code object (3.11+: the bytecode is part of the object; the shims'
 * in the interpreter's own), two live code objects do not overlap, and
 * the memo holds only while none of its objects died (the epoch), so the
 * same instruction is the same code.  Half the memo's lines a walk writes
 * and memo_same reads. */
static inline int memo_same(const char *fr, const py_memo *m, int maxp)
{
    if (!m->stack || m->maxp != maxp)
        return 0;
    const long o_instr = L->fr_instr, o_prev = L->fr_previous;
    uint32_t i = 0;
    for (; fr && i < m->n; i++, fr = RD(fr, o_prev, const char *))
        if (RD(fr, o_instr, const char *) != m->instr[i])
            return 0;
    return i == m->n && (!m->ended || !fr);
}

/* Reads the frames of thread state ts, innermost first, into py (at most
 * maxp); grp[i] = which eval-loop call ran py[i] (0 = the innermost;
 * want_grp 0: not wanted, and the fast path skips it); *key as
 * pyframes_collect says.
 * Returns how many, or -1 when a frame's code is not a code object (the
 * layout is not what we think). */
static MSNAP_HOT_FN int walk_frames(const void *ts, int gil, uint64_t *py, uint16_t *grp, int want_grp,
                       int maxp, stacktab_key *key, uint32_t *memo_id)
{
    seen_cache *cache = caches ? cache_get() : NULL;
    const char *fr = first_frame(ts);
    int np, watching = 0;
    if (cache) {
        /* A code object this thread's ways hold unchecked may have died
         * since its last walk: check versions again. */
        uint32_t ep = atomic_load_explicit(&watch.epoch, memory_order_acquire);
        if (__builtin_expect(ep != cache->epoch, 0))
            cache_recheck(cache, ep);
        /* The main thread's call referenced more code objects: fill the
         * ways again, as held by references (before 3.12). */
        uint32_t rg = atomic_load_explicit(&watch.ref_gen, memory_order_acquire);
        if (__builtin_expect(rg != cache->ref_gen, 0))
            cache_refill(cache, rg);
        watching = atomic_load_explicit(&watch.watching, memory_order_acquire);
        py_memo *m = NULL;
        cache->memo.walks++;
        if (memo_id && (watching || L->co_version < 0)) {
            m = &cache->memo;
            if (memo_same(fr, m, maxp)) {
                m->served++;
                m->kept += (uint64_t)m->np;
                *memo_id = m->stack;   /* py is not written */
                return m->np;
            }
        }
        if ((np = walk_proven(fr, cache, py, want_grp ? grp : NULL, maxp, key, watching, m)) >= 0) {
            cache->memo.proven++;
            cache->memo.kept += (uint64_t)np;
            return np;
        }
        if (m)
            m->stack = m->pending = 0;
    }
    /* The offsets in locals: the loop's loads then need no other memory. */
    const int o_owner = L->fr_owner, o_code = L->fr_code, o_instr = L->fr_instr,
              o_prev = L->fr_previous, o_entry = L->fr_is_entry, o_first = L->co_firsttraceable,
              o_code0 = L->co_code, o_version = L->co_version;
    const int version_proof = L->minor == 12;
    const void *code_type = py_code_type;
    int g = 0;
    np = 0;
    key->hash = 0;                    /* the long way does not make it */
    for (int walked = 0; fr && np < maxp && walked < WALK_MAX; walked++) {
        char owner = fr[o_owner];
        const char *co = RD(fr, o_code, const char *);
        seen *s = cache && co ? seen_find(cache, co) : NULL;
        if (owner == OWNED_BY_CSTACK && o_entry < 0) {
            g++;                    /* the shim an eval-loop call starts with */
        } else if (s &&
                   (s->referenced || (version_proof && s->version &&
                                      RD(co, o_version, uint32_t) == s->version))) {
            /* A code object this thread has named before, its identity
             * proven (a reference of ours, or 3.12's version number: its
             * frames always hold code objects): nothing else of it is
             * read, its first traceable instruction kept with it. */
            const char *instr = RD(fr, o_instr, const char *);
            const char *code0 = co + o_code0;
            if (owner == OWNED_BY_GENERATOR || instr >= code0 + 2 * (ptrdiff_t)s->first)
                put_frame(py, grp, &np, s->id, instr, code0, g);
        } else if (co && RD(co, OB_TYPE, const void *) == code_type) {
            const char *instr = RD(fr, o_instr, const char *);
            const char *code0 = co + o_code0;
            /* Incomplete frames (not yet at their first traceable
             * instruction) are skipped, as CPython's tracebacks do. */
            if (owner == OWNED_BY_GENERATOR || instr >= code0 + 2 * (ptrdiff_t)RD(co, o_first, int)) {
                uint32_t id = frame_code_id(cache, co, gil);
                if (id)
                    put_frame(py, grp, &np, id, instr, code0, g);
                if (!gil && t_main > 0 && L->minor < 12 && !ref_held_or_never(id))
                    ref_ask();
            }
        } else if (co && L->minor < 13) {
            return -1;
        }
        if (o_entry >= 0 && fr[o_entry])
            g++;                    /* 3.11: the frame an eval-loop call was given */
        fr = RD(fr, o_prev, const char *);
    }
    if (cache)
        cache->memo.kept += (uint64_t)np;
    return np;
}

/* walk_frames for 3.9 and 3.10: PyFrameObjects from PyThreadState.frame by
 * f_back, each run by an eval-loop call of its own; f_lasti is the last
 * instruction's byte offset (3.9) or code-unit index (3.10), -1 before the
 * first. */
static int walk_legacy(const void *ts, int gil, uint64_t *py, uint16_t *grp, int maxp,
                       stacktab_key *key)
{
    (void)key;                        /* not made here (0: stacktab_intern makes it) */
    const int o_code = L->fr_code, o_prev = L->fr_previous, o_lasti = L->fr_lasti,
              unit = L->minor >= 10 ? 2 : 1;
    const void *code_type = py_code_type;
    seen_cache *cache = caches ? cache_get() : NULL;
    int np = 0, g = 0;
    const char *fr = first_frame(ts);
    for (int walked = 0; fr && np < maxp && walked < WALK_MAX; walked++, g++) {
        const char *co = RD(fr, o_code, const char *);
        if (!co || RD(co, OB_TYPE, const void *) != code_type)
            return -1;
        int lasti = RD(fr, o_lasti, int);
        if (lasti >= 0) {
            uint32_t id = frame_code_id(cache, co, gil);
            if (!gil && t_main > 0 && !ref_held_or_never(id))
                ref_ask();
            if (id) {
                py[np] = py_entry(id, (int64_t)lasti * unit);
                grp[np++] = (uint16_t)g;
            }
        }
        fr = RD(fr, o_prev, const char *);
    }
    return np;
}

static inline void head_unlock(void *head_lock)
{
    if (py_lock_sem)
        sem_post(head_lock);
    else
        py_unlock(head_lock);
}

MSNAP_HOT_FN int pyframes_collect(uint64_t *py, uint16_t *grp, int cap, stacktab_key *key,
                                  uint32_t *memo_id)
{
    key->hash = 0;
    if (memo_id)
        *memo_id = 0;
    if (!g_cfg.py_frames)
        return -1;
    int st = atomic_load_explicit(&py_state, memory_order_acquire);
    if (st != PY_READY) {
        if (st != PY_UNKNOWN)
            return -1;
        int expect = PY_UNKNOWN;
        if (!atomic_compare_exchange_strong(&py_state, &expect, PY_STARTING))
            return -1;
        st = py_start();
        atomic_store_explicit(&py_state, st, memory_order_release);
        if (st != PY_READY)
            return -1;
    }
    void *ts, *head_lock = NULL;
    int gil;
    /* The main thread, once its pending call ran: its state lives until
     * finalization, which only this thread runs (CPython's own rule for
     * Py_FinalizeEx; see "The main thread" in docs/recorder.md), so while
     * it has not begun the state is read with neither the GIL-state lookup
     * nor the head lock (two calls into the interpreter and an atomic
     * exchange on a shared line: a third of a cold capture).  No reference
     * is taken (gil 0): the watcher, or the call's references (before
     * 3.12), prove its code objects. */
    if (__builtin_expect(t_main == 0, 0) &&
        atomic_load_explicit(&watch.state, memory_order_acquire) == WATCH_ON)
        t_main = py_runtime && g_cfg.py_frames == 1 &&
                         pthread_equal(pthread_self(), watch.main_thread) ? 1 : -1;
    if (t_main > 0 && atomic_load_explicit(&watch.state, memory_order_relaxed) == WATCH_ON) {
        if (py_finalizing()) {
            watch_off();
        } else if (RD(py_runtime, L->rt_main - 8, void *) == RD(py_runtime, L->rt_main, void *)) {
            /* (interpreters.head is the main one: no sub-interpreter, whose
             * state this thread could be running in instead) */
            ts = watch.main_ts;      /* the main interpreter's */
            gil = 0;
            goto walk;
        }
    }
    /* This thread's Python state (NULL: it has none, or the GIL state is
     * gone), and whether it holds the GIL: the interpreter's current
     * thread state is this one. */
    ts = py_gil_this();
    if (!ts)
        return -1;
#if defined(__x86_64__)
    /* Another thread of the main interpreter's with no Python frame (PyTorch's
     * autograd device threads keep a state between the nodes they run): said
     * without the head lock.  Only finalization frees a running thread's
     * state (and its cframe), and it marks _PyRuntime._finalizing before:
     * the frame pointer read between two looks that both find it unmarked
     * was read before any free (x86 keeps loads in order and sees another
     * CPU's stores in the order made; the fences keep the compiler from
     * moving the reads).  A frame found, or finalization begun, goes the
     * usual way, under the lock.  Not excluded: this thread preempted
     * between the first look and its read while finalization frees the
     * state and malloc trims that page away (docs/recorder.md). */
    if (t_main < 0 && py_runtime && g_cfg.py_frames == 1 && !py_finalizing()) {
        const char *fr = (const char *)1;   /* not known: the usual way */
        if (L->fr_lasti >= 0 || L->ts_cframe < 0) {
            fr = RD(ts, L->cf_current, const char *);
        } else {
            const char *cf = RD(ts, L->ts_cframe, const char *);
            atomic_thread_fence(memory_order_acquire);
            if (cf && !py_finalizing())
                fr = RD(cf, L->cf_current, const char *);
        }
        atomic_thread_fence(memory_order_acquire);
        if (!fr && !py_finalizing())
            return -1;
    }
#endif
    /* Once the watcher is on, no reference is needed: the head lock is
     * tried (never waited on) whether or not this thread holds the GIL. */
    gil = t_main < 0 && g_cfg.py_frames == 1 && py_runtime &&
                  atomic_load_explicit(&watch.watching, memory_order_relaxed)
              ? 0 : py_current() == ts;
    /* Finalization has begun: see watch_off (a thread holding the GIL
     * reads its frames all the same). */
    if (gil && py_runtime && py_finalizing() &&
        atomic_load_explicit(&watch.state, memory_order_relaxed) != WATCH_NEVER)
        watch_off();
    if (__builtin_expect(atomic_load_explicit(&watch.state, memory_order_relaxed) == WATCH_NONE,
                         0) &&
        py_runtime && !py_finalizing())
        watch_ask();
    if (!gil) {
        /* Released the GIL (a ctypes call, PyTorch's ops): this thread
         * alone changes its frames, and it is here, so they are still; only
         * finalization could free them (daemon threads' states).  Read them
         * under the head lock, taken without waiting, and not at all once
         * finalization has begun. */
        if (!py_runtime || g_cfg.py_frames != 1)
            return -1;
        int got = 0;
        if (L->rt_mutex) {
            /* A PyMutex: locked is bit 0 of its byte; taken by the same
             * compare-and-swap as PyMutex_Lock's fast path, given back by
             * PyMutex_Unlock (which wakes a waiter parked meanwhile). */
            head_lock = (void *)(py_runtime + L->rt_head_lock);
            for (int tries = 0; tries < 4 && !got; tries++) {
                uint8_t unlocked = 0;
                got = atomic_compare_exchange_strong((_Atomic uint8_t *)head_lock, &unlocked, 1);
            }
        } else {
            head_lock = RD(py_runtime, L->rt_head_lock, void *);
            if (py_lock_sem)
                for (int tries = 0; tries < 4 && !(got = sem_trywait(head_lock) == 0); tries++)
                    ;
            else
                for (int tries = 0; tries < 4 && !(got = py_lock(head_lock, 0)); tries++)
                    ;
        }
        if (!got)
            return -1;
        if (py_finalizing()) {
            head_unlock(head_lock);
            if (atomic_load_explicit(&watch.state, memory_order_relaxed) != WATCH_NEVER)
                watch_off();
            return -1;
        }
    }
    /* The main interpreter does not change (a fork's child keeps it). */
    MSNAP_HOT_DATA static _Atomic(void *) main_interp_seen;
    void *main_interp = atomic_load_explicit(&main_interp_seen, memory_order_relaxed);
    if (!main_interp || atomic_load_explicit(&py_finalized_once, memory_order_relaxed))
        atomic_store_explicit(&main_interp_seen, main_interp = py_main_interp(),
                              memory_order_relaxed);
    if (!main_interp || RD(ts, L->ts_interp, void *) != main_interp) {
        if (head_lock)
            head_unlock(head_lock);
        return -1;
    }
walk:;
    int np, maxp = g_cfg.py_depth < cap ? g_cfg.py_depth : cap;
    uint16_t scratch[MSNAP_MAX_FRAMES];   /* grp not wanted: the long ways make it and drop it */
    uint16_t *g = grp ? grp : scratch;
    if (!grp && maxp > MSNAP_MAX_FRAMES)
        maxp = MSNAP_MAX_FRAMES;
    np = L->fr_lasti >= 0 ? walk_legacy(ts, gil, py, g, maxp, key)
                          : walk_frames(ts, gil, py, g, grp != NULL, maxp, key, memo_id);
    if (head_lock)
        head_unlock(head_lock);
    return np > 0 ? np : -1;
}

uint64_t pyframes_memo_served(void)
{
    return t_cache ? t_cache->memo.served : 0;
}

/* Stack ids again.  A stack's key (a Python walk makes it as it goes;
 * core.c makes it for the others) names
 * its id in the stack table as surely as the table's own slot does (a
 * slot matches on the same 96 bits and never reads the frames), and an id
 * never changes meaning, so the thread keeps the ids it was given by key
 * in a small table of its own and asks the stack table only on a miss.
 * The stack table's slots lie on 2,048 pages, one a stack: between two
 * captures of a step's hundreds of stacks, PyTorch's work has taken each
 * slot's page out of the TLB.  These 2,048 ids lie on eight pages that
 * every capture touches.  0: not known here. */
MSNAP_HOT_FN uint32_t pyframes_id_known(uint64_t hash, uint32_t check)
{
    /* A thread that walked no Python frame yet (PyTorch's autograd
     * threads: their node stacks) claims its cache here. */
    const seen_cache *c = t_cache;
    if (__builtin_expect(!c, 0) && (!caches || !(c = cache_get())))
        return 0;
    const id_seen *e = &c->ids[hash & (IDC_N - 1)];
    return e->hash == hash && e->check == check ? e->id : 0;
}

MSNAP_HOT_FN void pyframes_id_keep(uint64_t hash, uint32_t check, uint32_t id)
{
    seen_cache *c = t_cache;
    if (!c || !id)
        return;
    id_seen *e = &c->ids[hash & (IDC_N - 1)];
    e->hash = hash;
    e->check = check;
    e->id = id;
}

int pyframes_walk_stats(uint64_t *out, int n)
{
    const py_memo *m = t_cache ? &t_cache->memo : NULL;
    uint64_t v[5] = {m ? m->walks : 0, m ? m->served : 0, m ? m->proven : 0,
                     m ? m->misses : 0, m ? m->kept : 0};
    int k = n < 5 ? n : 5;
    for (int i = 0; i < k; i++)
        out[i] = v[i];
    return k;
}

MSNAP_HOT_FN void pyframes_memo_note(uint32_t id)
{
    seen_cache *c = t_cache;
    if (c && c->memo.pending) {
        c->memo.stack = id;
        c->memo.pending = 0;
    }
}

MSNAP_HOT_FN int pyframes_merge(void *const *native, int n, const uint64_t *py, const uint16_t *grp,
                   int np, uint64_t *out, int cap)
{
    /* Each eval-loop frame gives way to the Python frames it ran. */
    int d = 0, i = 0, cur = 0;
    for (int k = 0; k < n && d < cap; k++) {
        uintptr_t ip = (uintptr_t)native[k];
        if (ip >= eval_lo && ip < eval_hi && i < np) {
            int put = 0;
            while (i < np && grp[i] == cur && d < cap) {
                out[d++] = py[i++];
                put++;
            }
            cur++;
            while (i < np && grp[i] < cur)  /* frames cut by cap */
                i++;
            if (put)
                continue;
        }
        out[d++] = ip;
    }
    /* Python frames of eval-loop calls the native stack did not reach (it
     * was cut at its depth, or the eval loop's range is unknown). */
    if (i < np && d < cap) {
        int k = np - i < cap - d ? np - i : cap - d;
        memcpy(out + d, py + i, (size_t)k * sizeof *out);
        d += k;
    }
    return d;
}

/* ---- naming (writer thread) --------------------------------------------------------- */

int pyframes_line_at(const uint8_t *t, uint32_t len, int first_line, uint32_t off)
{
    uint32_t target = off / 2, addr = 0, i = 0;
    int line = first_line;
    while (i < len) {
        uint8_t b = t[i++];
        if (!(b & 0x80))
            return -1;
        unsigned code = b >> 3 & 15, units = (b & 7) + 1;
        int delta = 0, has_line = 1;
        if (code == 15) {
            has_line = 0;
        } else if (code == 14 || code == 13) {
            /* line delta: a signed varint of 6-bit chunks, 0x40 = more */
            uint32_t v = 0, shift = 0;
            uint8_t c;
            do {
                if (i >= len)
                    return -1;
                c = t[i++];
                v |= (uint32_t)(c & 63) << shift;
                shift += 6;
            } while ((c & 64) && shift < 32);
            delta = (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
            if (code == 14)        /* end line, column, end column: skipped */
                for (int k = 0; k < 3; k++)
                    do {
                        if (i >= len)
                            return -1;
                        c = t[i++];
                    } while (c & 64);
        } else if (code >= 10) {
            delta = (int)code - 10;
            i += 2;
        } else {
            i += 1;
        }
        line += delta;
        if (target < addr + units)
            return has_line ? line : -1;
        addr += units;
    }
    return -1;
}

int pyframes_line_at_310(const uint8_t *t, uint32_t len, int first_line, uint32_t off)
{
    /* (bytes, line delta) pairs; a line delta of -128 means "no line".
     * Empty ranges move the line too. */
    uint32_t start, end = 0;
    int line = first_line, cur = -1;
    for (uint32_t i = 0; i + 1 < len; i += 2) {
        start = end;
        end += t[i];
        int8_t d = (int8_t)t[i + 1];
        if (d == -128) {
            cur = -1;
        } else {
            line += d;
            cur = line;
        }
        if (off >= start && off < end)
            return cur;
    }
    return -1;
}

int pyframes_line_at_39(const uint8_t *t, uint32_t len, int first_line, uint32_t off)
{
    /* co_lnotab: (bytes, line delta) pairs; the line of off is the first
     * line plus the deltas of every pair whose running offset is <= off. */
    uint32_t addr = 0;
    int line = first_line;
    for (uint32_t i = 0; i + 1 < len; i += 2) {
        addr += t[i];
        if (addr > off)
            break;
        line += (int8_t)t[i + 1];
    }
    return line;
}

int pyframes_name(uint64_t ip, const char **fn, const char **file, int *line, uint64_t *off)
{
    static const char empty[] = "";
    uint32_t id = (uint32_t)(ip >> 32) & 0x7fffffffu;
    *fn = *file = empty;
    *line = 0;
    *off = ip & 0xffffffffu;
    if (!entries || id == 0 || id > CODE_MAX || id >= atomic_load(&next_id))
        return -1;
    const code_entry *e = &entries[id];
    *fn = arena + e->qual;
    *file = arena + e->file;
    int (*line_at)(const uint8_t *, uint32_t, int, uint32_t) =
        L->minor >= 11 ? pyframes_line_at : L->minor == 10 ? pyframes_line_at_310 : pyframes_line_at_39;
    int l = e->table_len ? line_at((const uint8_t *)arena + e->table, e->table_len,
                                   e->first_line, (uint32_t)*off)
                         : e->first_line;
    *line = l > 0 ? l : 0;
    return 0;
}

uint32_t pyframes_code_count(void)
{
    uint32_t n = atomic_load(&next_id) - 1;
    return n > CODE_MAX ? CODE_MAX : n;
}
