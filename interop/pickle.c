/* pickle: a reader for the subset of Python's pickle format that
 * torch.cuda.memory._dump_snapshot writes (pickle.dump of a dict of plain
 * data), protocols 2 to 5.  It never executes anything.
 *
 * The pickle format is a program for a small stack machine.  This file runs
 * that machine with only the data opcodes: marks, None/bools, ints of every
 * width, floats, str/bytes, lists/tuples/dicts/sets built from the stack,
 * the memo (PUT/GET/MEMOIZE), FRAME and PROTO.  Every opcode that imports a
 * name, calls something or hands data to the loader's hooks is refused with
 * one line naming it and its byte offset:
 *
 *   GLOBAL, STACK_GLOBAL, REDUCE, INST, OBJ, NEWOBJ, NEWOBJ_EX, BUILD,
 *   EXT1, EXT2, EXT4, PERSID, BINPERSID, NEXT_BUFFER, READONLY_BUFFER
 *
 * The text opcodes of protocols 0 and 1 (INT, LONG, FLOAT, STRING, UNICODE,
 * GET, PUT, DICT, LIST, TUPLE, INST) are not needed for protocols 2+ and are
 * refused as unsupported.
 *
 * Streaming: the pickler writes a list as EMPTY_LIST, then batches of at
 * most 1000 items, each followed by APPENDS.  A list gets a role from where
 * it is created (value.h): right after the top-level key "segments" or
 * "device_traces", or as an item of the device_traces list; items appended
 * to a streaming list go to the sink and are dropped, and their memo slot
 * is cleared.  A later memo GET of a dropped item is refused ("refers back
 * to a trace entry already read"): the pickler only repeats objects that are
 * shared, which in a snapshot are strings, frame dicts and frame lists,
 * never whole trace entries.  Memory therefore grows with the shared objects
 * (one small node per distinct traceback once the importer has converted
 * it), not with the number of events.
 *
 * No cycles: a container that has become an item of another one is sealed;
 * adding to a sealed container (only a recursive structure needs that) is
 * refused.  A streamed item is sealed too, and a sealed container streamed
 * again (DUP, or a second memo slot) is refused: the importer would read
 * it again for each byte.  Limits: strings up to 1 GiB, 4M stack entries,
 * memo ids below 2^27 and at most 65536 past the number of memo entries set
 * so far (the pickler numbers them in order), so the memo table grows with
 * the input.
 *
 * Cost: O(1) amortized per opcode.  The innermost MARK and the role of a new
 * list come from a record kept per stack slot (pk_below), never from a scan
 * down the stack; a value is moved off the stack once.  Each opcode, each
 * container made and each value moved counts against the input's work
 * budget (value.h), which also counts the importer's work on the streamed
 * items: past it the pickle is refused ("byte N: ... steps of work ...").
 */
#include "value.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PK_MAX_STACK (1u << 22)
#define PK_MAX_MEMO (1u << 27)
#define PK_MEMO_SKIP 65536u /* how far a memo id may run ahead of the count */
#define PK_MAX_STR (1ull << 30)

static ival pk_mark = {.type = IV_MARK};
static ival pk_tomb = {.type = IV_NONE};

/* What lies at or below a stack slot, kept as the slot is pushed, so that
 * finding the innermost MARK and giving a new list its role take O(1)
 * however deep the stack is (they used to scan down the stack for each
 * new container: 220 KB of EMPTY_LIST took 40 s).  Slots never change once
 * pushed (only popped), and a container's role is set before it is pushed,
 * so both stay true. */
typedef struct pk_below {
    uint32_t mark;  /* 1 + index of the topmost MARK at or below the slot; 0: none */
    uint32_t outer; /* 1 + index of the topmost slot at or below it that is
                       neither a MARK nor a device list; 0: none */
} pk_below;

typedef struct pk {
    iv_in *in;
    const iv_sink *sink;
    char *err;
    size_t errlen;
    int failed;
    uint64_t op_off;     /* offset of the opcode being run */
    ival **st;           /* the stack */
    pk_below *below;     /* below[i] for st[i], i < sp */
    size_t sp, stcap;
    ival **memo;
    size_t memocap, memolen;
    char *tmp;
    size_t tmpcap;
} pk;

static void pk_fail(pk *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>
static void pk_fail(pk *p, const char *fmt, ...)
{
    if (p->failed)
        return;
    p->failed = 1;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "byte %llu: %s", (unsigned long long)p->op_off, msg);
}

static int pk_read(pk *p, void *dst, size_t n)
{
    unsigned char *d = dst;
    while (n) {
        iv_in *in = p->in;
        if (in->pos == in->len && iv_in_fill(in) <= 0) {
            pk_fail(p, "the pickle is cut off (ends inside an opcode's argument)");
            return -1;
        }
        size_t k = in->len - in->pos;
        if (k > n)
            k = n;
        memcpy(d, in->buf + in->pos, k);
        in->pos += k;
        d += k;
        n -= k;
    }
    return 0;
}

static uint64_t le(const unsigned char *b, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static int push(pk *p, ival *v)
{
    if (!v) {
        pk_fail(p, "out of memory");
        return -1;
    }
    if (p->sp == p->stcap) {
        if (p->stcap >= PK_MAX_STACK) {
            iv_unref(v);
            pk_fail(p, "the pickle stack grows past %u entries", PK_MAX_STACK);
            return -1;
        }
        size_t nc = p->stcap ? p->stcap * 2 : 256;
        ival **ns = realloc(p->st, nc * sizeof *ns);
        if (ns)
            p->st = ns;
        pk_below *nb = ns ? realloc(p->below, nc * sizeof *nb) : NULL;
        if (!nb) {
            iv_unref(v);
            pk_fail(p, "out of memory");
            return -1;
        }
        p->below = nb;
        p->stcap = nc;
    }
    size_t i = p->sp++;
    pk_below b = i ? p->below[i - 1] : (pk_below){0, 0};
    if (v == &pk_mark)
        b.mark = (uint32_t)i + 1;
    else if (!(v->type == IV_LIST && v->role == IV_ROLE_DEVICE))
        b.outer = (uint32_t)i + 1;
    p->below[i] = b;
    p->st[i] = v;
    return 0;
}

/* Index of the topmost mark, or -1 (after failing) when there is none. */
static long find_mark(pk *p, const char *op)
{
    long m = p->sp ? (long)p->below[p->sp - 1].mark - 1 : -1;
    if (m < 0)
        pk_fail(p, "%s without a MARK", op);
    return m;
}

static int memo_put(pk *p, uint64_t id)
{
    if (!p->sp || p->st[p->sp - 1] == &pk_mark) {
        pk_fail(p, "memo put with an empty stack");
        return -1;
    }
    /* Python's pickler numbers memo entries in order (id = entries so far),
     * so an id far past the count is hostile: without this bound a 9-byte
     * pickle made the memo table 1 GiB (found by fuzz_torch_import). */
    if (id >= PK_MAX_MEMO || id > p->memolen + PK_MEMO_SKIP) {
        pk_fail(p, "memo id %llu too large (%zu memo entries so far)",
                (unsigned long long)id, p->memolen);
        return -1;
    }
    if (id >= p->memocap) {
        size_t nc = p->memocap ? p->memocap : 1024;
        while (nc <= id)
            nc *= 2;
        ival **nm = realloc(p->memo, nc * sizeof *nm);
        if (!nm) {
            pk_fail(p, "out of memory");
            return -1;
        }
        memset(nm + p->memocap, 0, (nc - p->memocap) * sizeof *nm);
        p->memo = nm;
        p->memocap = nc;
    }
    ival *v = p->st[p->sp - 1];
    ival *old = p->memo[id];
    if (!old)
        p->memolen++;
    else if (old != &pk_tomb) {
        if (old->memo == (int64_t)id)
            old->memo = -1;
        iv_unref(old);
    }
    p->memo[id] = iv_ref(v);
    v->memo = (int64_t)id;
    return 0;
}

static int memo_get(pk *p, uint64_t id)
{
    ival *v = id < p->memocap ? p->memo[id] : NULL;
    if (v == &pk_tomb) {
        pk_fail(p, "memo %llu refers back to a trace entry already read; "
                   "not a layout PyTorch writes", (unsigned long long)id);
        return -1;
    }
    if (!v) {
        pk_fail(p, "memo %llu is not set", (unsigned long long)id);
        return -1;
    }
    return push(p, iv_ref(v));
}

/* Role of a new empty list or dict from what is below it (value.h), in
 * O(1) from p->below. */
static void assign_role(pk *p, ival *v)
{
    if (!p->sp)
        return;
    long k = (long)p->sp - 1;
    ival *key = p->st[k];
    if (v->type == IV_LIST) {
        /* an item of device_traces: the first slot down that is not a MARK
         * or an earlier device list is the device_traces list */
        long i = (long)p->below[k].outer - 1;
        if (i >= 0 && p->st[i]->type == IV_LIST && p->st[i]->role == IV_ROLE_TRACES) {
            v->role = IV_ROLE_DEVICE;
            v->index = p->st[i]->index++;
            return;
        }
    }
    if (key->type != IV_STR)
        return;
    /* the dict the key belongs to: [D, key] (SETITEM) or [D, MARK, k, v, ..., key] */
    ival *owner = NULL;
    if (k >= 1 && p->st[k - 1]->type == IV_DICT && p->st[k - 1]->role == IV_ROLE_EXT)
        owner = p->st[k - 1];
    if (!owner) {
        long m = k >= 1 ? (long)p->below[k - 1].mark - 1 : -1; /* innermost MARK */
        if (m >= 1 && ((k - (m + 1)) % 2) == 0 && p->st[m - 1]->type == IV_DICT)
            owner = p->st[m - 1];
        else if (m < 0 && k >= 1 && p->st[k - 1]->type == IV_DICT)
            owner = p->st[k - 1];
    }
    if (!owner)
        return;
    if (owner == p->st[0] && v->type == IV_LIST) {
        if (!strcmp(key->u.s.p, "segments"))
            v->role = IV_ROLE_SEGMENTS;
        else if (!strcmp(key->u.s.p, "device_traces"))
            v->role = IV_ROLE_TRACES;
    } else if (owner == p->st[0] && v->type == IV_DICT && !strcmp(key->u.s.p, "memsnap")) {
        v->role = IV_ROLE_EXT;
    } else if (owner->role == IV_ROLE_EXT && v->type == IV_LIST && !strcmp(key->u.s.p, "events")) {
        v->role = IV_ROLE_EXT_EVENTS;
    }
}

/* Fails with the work budget's message (value.h); -1. */
static int budget_fail(pk *p)
{
    char why[256];
    pk_fail(p, "%s", iv_budget_why(p->in, why, sizeof why));
    return -1;
}

/* Adds item (a reference the caller gives up) to container c: streamed to
 * the sink for streaming roles, else stored. */
static int add_item(pk *p, ival *c, ival *item)
{
    if (item == &pk_mark) {
        pk_fail(p, "a MARK used as a value");
        return -1;
    }
    if (item == c) {
        iv_unref(item);
        pk_fail(p, "a container added to itself (recursive structure); refused");
        return -1;
    }
    p->in->steps++;
    if (c->role == IV_ROLE_SEGMENTS || c->role == IV_ROLE_DEVICE || c->role == IV_ROLE_EXT_EVENTS) {
        /* An entry is read once: the same dict again (DUP, or a second memo
         * slot) would make the importer read it again for a byte each. */
        if (item->sealed &&
            (item->type == IV_LIST || item->type == IV_TUPLE || item->type == IV_DICT)) {
            iv_unref(item);
            pk_fail(p, "a trace entry or segment added twice; not a layout PyTorch writes");
            return -1;
        }
        item->sealed = 1;
        int rc = p->sink->item(p->sink->ctx, c->role, c->index, item, p->err, p->errlen);
        if (rc)
            p->failed = 1;
        else if (iv_over_budget(p->in))
            rc = budget_fail(p);
        if (item->memo >= 0 && (size_t)item->memo < p->memocap && p->memo[item->memo] == item) {
            p->memo[item->memo] = &pk_tomb;
            item->memo = -1;
            iv_unref(item);
        }
        iv_unref(item);
        return rc;
    }
    item->sealed = 1;
    if (iv_push(c, item)) {
        iv_unref(item);
        pk_fail(p, "out of memory");
        return -1;
    }
    return 0;
}

static int container_ok(pk *p, ival *c, int want_dict, const char *op)
{
    int ok = want_dict ? c->type == IV_DICT : (c->type == IV_LIST);
    if (!ok) {
        pk_fail(p, "%s on a %s", op, want_dict ? "value that is not a dict" : "value that is not a list");
        return 0;
    }
    if (c->sealed) {
        pk_fail(p, "%s modifies a finished container (recursive structure); refused", op);
        return 0;
    }
    return 1;
}

static const char *refused_name(int op)
{
    switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'b': return "BUILD";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    }
    return NULL;
}

static ival *read_str(pk *p, uint64_t n, int type)
{
    if (n > PK_MAX_STR) {
        pk_fail(p, "a string of %llu bytes (more than 1 GiB)", (unsigned long long)n);
        return NULL;
    }
    if (n + 1 > p->tmpcap) {
        /* grow as the bytes arrive, so a bogus length in a short file fails
         * as "cut off", not as a giant allocation */
        size_t want = n + 1 < (1u << 20) ? n + 1 : (1u << 20);
        if (want > p->tmpcap) {
            char *nt = realloc(p->tmp, want);
            if (!nt) {
                pk_fail(p, "out of memory");
                return NULL;
            }
            p->tmp = nt;
            p->tmpcap = want;
        }
    }
    uint64_t got = 0;
    while (got < n) {
        uint64_t chunk = n - got;
        if (chunk > (1u << 20))
            chunk = 1u << 20;
        if (got + chunk + 1 > p->tmpcap) {
            size_t nc = p->tmpcap * 2;
            while (nc < got + chunk + 1)
                nc *= 2;
            char *nt = realloc(p->tmp, nc);
            if (!nt) {
                pk_fail(p, "out of memory");
                return NULL;
            }
            p->tmp = nt;
            p->tmpcap = nc;
        }
        if (pk_read(p, p->tmp + got, chunk))
            return NULL;
        got += chunk;
    }
    ival *v = iv_new_str(type, p->tmp, n);
    if (!v)
        pk_fail(p, "out of memory");
    return v;
}

/* Python's two's-complement little-endian long. */
static ival *read_long(pk *p, uint64_t n)
{
    if (n > 16) {
        pk_fail(p, "an integer of %llu bytes (more than 128 bits)", (unsigned long long)n);
        return NULL;
    }
    unsigned char b[16] = {0};
    if (pk_read(p, b, n))
        return NULL;
    unsigned __int128 u = 0;
    for (int i = (int)n - 1; i >= 0; i--)
        u = u << 8 | b[i];
    if (n && n < 16 && (b[n - 1] & 0x80))
        u |= ~(unsigned __int128)0 << (8 * n);
    ival *v = iv_new(IV_INT);
    if (!v) {
        pk_fail(p, "out of memory");
        return NULL;
    }
    v->u.i = (__int128)u;
    return v;
}

static ival *pop(pk *p)
{
    if (!p->sp) {
        pk_fail(p, "the pickle stack is empty");
        return NULL;
    }
    ival *v = p->st[--p->sp];
    if (v == &pk_mark) {
        pk_fail(p, "a MARK where a value belongs");
        return NULL;
    }
    return v;
}

static ival *make_seq(pk *p, int type, long from)
{
    ival *t = iv_new(type);
    if (!t) {
        pk_fail(p, "out of memory");
        return NULL;
    }
    p->in->steps += 1 + (p->sp - (size_t)from); /* the container, the items moved */
    for (size_t i = (size_t)from; i < p->sp; i++) {
        if (p->st[i] == &pk_mark) {
            pk_fail(p, "a MARK inside a tuple");
            iv_unref(t);
            return NULL;
        }
        p->st[i]->sealed = 1;
        if (iv_push(t, p->st[i])) {
            pk_fail(p, "out of memory");
            iv_unref(t);
            return NULL;
        }
        p->st[i] = NULL;
    }
    p->sp = (size_t)from;
    return t;
}

static int run(pk *p, ival **result)
{
    for (;; p->in->steps++) {
        if (iv_over_budget(p->in))
            return budget_fail(p);
        p->op_off = iv_in_offset(p->in);
        int op = iv_in_get(p->in);
        if (op < 0) {
            if (p->in->error)
                pk_fail(p, "read error");
            else
                pk_fail(p, "the pickle is cut off (no STOP opcode)");
            return -1;
        }
        const char *bad = refused_name(op);
        if (bad) {
            pk_fail(p, "pickle opcode %s (0x%02x) would import or call Python code; refused "
                       "(memsnap reads plain data only and never executes a pickle)", bad, op);
            return -1;
        }
        unsigned char b[8];
        ival *v = NULL;
        long m;
        switch (op) {
        case 0x80: /* PROTO */
            if (pk_read(p, b, 1))
                return -1;
            if (b[0] > 5) {
                pk_fail(p, "pickle protocol %d is newer than this reader (2 to 5)", b[0]);
                return -1;
            }
            break;
        case 0x95: /* FRAME: just a length prefix */
            if (pk_read(p, b, 8))
                return -1;
            break;
        case '.': /* STOP */
            if (p->sp != 1 || p->st[0] == &pk_mark) {
                pk_fail(p, "STOP with %zu values on the stack (expected one)", p->sp);
                return -1;
            }
            *result = p->st[0];
            p->sp = 0;
            return 0;
        case '(':
            if (push(p, &pk_mark))
                return -1;
            break;
        case '0': /* POP */
            if (!p->sp) {
                pk_fail(p, "POP on an empty stack");
                return -1;
            }
            iv_unref(p->st[--p->sp]);
            break;
        case '1': /* POP_MARK */
            if ((m = find_mark(p, "POP_MARK")) < 0)
                return -1;
            p->in->steps += p->sp - (size_t)m;
            while (p->sp > (size_t)m + 1)
                iv_unref(p->st[--p->sp]);
            p->sp--;
            break;
        case '2': /* DUP */
            if (!p->sp || p->st[p->sp - 1] == &pk_mark) {
                pk_fail(p, "DUP with nothing to copy");
                return -1;
            }
            if (push(p, iv_ref(p->st[p->sp - 1])))
                return -1;
            break;
        case 'N':
            if (push(p, iv_new(IV_NONE)))
                return -1;
            break;
        case 0x88: /* NEWTRUE */
        case 0x89: /* NEWFALSE */
            v = iv_new(IV_BOOL);
            if (v)
                v->u.i = op == 0x88;
            if (push(p, v))
                return -1;
            break;
        case 'J': /* BININT: signed 4 bytes */
            if (pk_read(p, b, 4))
                return -1;
            if ((v = iv_new(IV_INT)))
                v->u.i = (int32_t)le(b, 4);
            if (push(p, v))
                return -1;
            break;
        case 'K': /* BININT1 */
        case 'M': /* BININT2 */
            if (pk_read(p, b, op == 'K' ? 1 : 2))
                return -1;
            if ((v = iv_new(IV_INT)))
                v->u.i = le(b, op == 'K' ? 1 : 2);
            if (push(p, v))
                return -1;
            break;
        case 0x8a: /* LONG1 */
            if (pk_read(p, b, 1) || push(p, read_long(p, b[0])))
                return -1;
            break;
        case 0x8b: /* LONG4 */
            if (pk_read(p, b, 4))
                return -1;
            if ((int32_t)le(b, 4) < 0) {
                pk_fail(p, "LONG4 with a negative length");
                return -1;
            }
            if (push(p, read_long(p, le(b, 4))))
                return -1;
            break;
        case 'G': { /* BINFLOAT: big-endian double */
            if (pk_read(p, b, 8))
                return -1;
            uint64_t u = 0;
            for (int i = 0; i < 8; i++)
                u = u << 8 | b[i];
            if ((v = iv_new(IV_FLOAT)))
                memcpy(&v->u.f, &u, 8);
            if (push(p, v))
                return -1;
            break;
        }
        case 0x8c: /* SHORT_BINUNICODE */
        case 'U':  /* SHORT_BINSTRING (Python 2 str) */
        case 'C':  /* SHORT_BINBYTES */
            if (pk_read(p, b, 1) || push(p, read_str(p, b[0], op == 'C' ? IV_BYTES : IV_STR)))
                return -1;
            break;
        case 'X': /* BINUNICODE */
        case 'T': /* BINSTRING */
        case 'B': /* BINBYTES */
            if (pk_read(p, b, 4))
                return -1;
            if (op == 'T' && (int32_t)le(b, 4) < 0) {
                pk_fail(p, "BINSTRING with a negative length");
                return -1;
            }
            if (push(p, read_str(p, le(b, 4), op == 'B' ? IV_BYTES : IV_STR)))
                return -1;
            break;
        case 0x8d: /* BINUNICODE8 */
        case 0x8e: /* BINBYTES8 */
        case 0x96: /* BYTEARRAY8 */
            if (pk_read(p, b, 8) || push(p, read_str(p, le(b, 8), op == 0x8d ? IV_STR : IV_BYTES)))
                return -1;
            break;
        case ']': /* EMPTY_LIST */
        case '}': /* EMPTY_DICT */
        case 0x8f: /* EMPTY_SET (kept as a list) */
            v = iv_new(op == '}' ? IV_DICT : IV_LIST);
            p->in->steps++;
            if (v)
                assign_role(p, v);
            if (push(p, v))
                return -1;
            break;
        case ')': /* EMPTY_TUPLE */
            p->in->steps++;
            if (push(p, iv_new(IV_TUPLE)))
                return -1;
            break;
        case 0x85: /* TUPLE1 */
        case 0x86: /* TUPLE2 */
        case 0x87: { /* TUPLE3 */
            long n = op - 0x84;
            if ((long)p->sp < n) {
                pk_fail(p, "TUPLE%ld with %zu values on the stack", n, p->sp);
                return -1;
            }
            if (push(p, make_seq(p, IV_TUPLE, (long)p->sp - n)))
                return -1;
            break;
        }
        case 't': /* TUPLE (from the mark) */
        case 0x91: /* FROZENSET (kept as a list) */
            if ((m = find_mark(p, op == 't' ? "TUPLE" : "FROZENSET")) < 0)
                return -1;
            v = make_seq(p, op == 't' ? IV_TUPLE : IV_LIST, m + 1);
            if (!v)
                return -1;
            p->sp--; /* the mark */
            if (push(p, v))
                return -1;
            break;
        case 'a': { /* APPEND */
            ival *item = pop(p);
            if (!item)
                return -1;
            if (!p->sp || p->st[p->sp - 1] == &pk_mark ||
                !container_ok(p, p->st[p->sp - 1], 0, "APPEND")) {
                pk_fail(p, "APPEND without a list");
                iv_unref(item);
                return -1;
            }
            if (add_item(p, p->st[p->sp - 1], item))
                return -1;
            break;
        }
        case 'e':  /* APPENDS */
        case 0x90: { /* ADDITEMS */
            const char *name = op == 'e' ? "APPENDS" : "ADDITEMS";
            if ((m = find_mark(p, name)) < 0)
                return -1;
            if (m == 0 || !container_ok(p, p->st[m - 1], 0, name))
                return -1;
            ival *c = p->st[m - 1];
            size_t top = p->sp;
            p->sp = (size_t)m;
            for (size_t i = (size_t)m + 1; i < top; i++) {
                ival *it = p->st[i];
                p->st[i] = NULL;
                if (add_item(p, c, it)) {
                    for (size_t j = i + 1; j < top; j++)
                        iv_unref(p->st[j]);
                    return -1;
                }
            }
            break;
        }
        case 's': { /* SETITEM */
            if (p->sp < 3) {
                pk_fail(p, "SETITEM without a dict, key and value");
                return -1;
            }
            ival *val = p->st[p->sp - 1], *key = p->st[p->sp - 2], *d = p->st[p->sp - 3];
            if (val == &pk_mark || key == &pk_mark || d == &pk_mark) {
                pk_fail(p, "SETITEM across a MARK");
                return -1;
            }
            if (!container_ok(p, d, 1, "SETITEM"))
                return -1;
            p->sp -= 2;
            if (add_item(p, d, key)) {
                iv_unref(val);
                return -1;
            }
            if (add_item(p, d, val))
                return -1;
            break;
        }
        case 'u': { /* SETITEMS */
            if ((m = find_mark(p, "SETITEMS")) < 0)
                return -1;
            if (m == 0 || !container_ok(p, p->st[m - 1], 1, "SETITEMS"))
                return -1;
            if ((p->sp - (size_t)m - 1) % 2) {
                pk_fail(p, "SETITEMS with an odd number of values");
                return -1;
            }
            ival *d = p->st[m - 1];
            size_t top = p->sp;
            p->sp = (size_t)m;
            for (size_t i = (size_t)m + 1; i < top; i++) {
                ival *it = p->st[i];
                p->st[i] = NULL;
                if (add_item(p, d, it)) {
                    for (size_t j = i + 1; j < top; j++)
                        iv_unref(p->st[j]);
                    return -1;
                }
            }
            break;
        }
        case 'q': /* BINPUT */
            if (pk_read(p, b, 1) || memo_put(p, b[0]))
                return -1;
            break;
        case 'r': /* LONG_BINPUT */
            if (pk_read(p, b, 4) || memo_put(p, le(b, 4)))
                return -1;
            break;
        case 0x94: /* MEMOIZE */
            if (memo_put(p, p->memolen))
                return -1;
            break;
        case 'h': /* BINGET */
            if (pk_read(p, b, 1) || memo_get(p, b[0]))
                return -1;
            break;
        case 'j': /* LONG_BINGET */
            if (pk_read(p, b, 4) || memo_get(p, le(b, 4)))
                return -1;
            break;
        default:
            if (op >= 0x20 && op < 0x7f)
                pk_fail(p, "pickle opcode '%c' (0x%02x) is not supported (protocols 2 to 5 "
                           "of plain data only)", op, op);
            else
                pk_fail(p, "unknown pickle opcode 0x%02x; not a pickle, or a newer one", op);
            return -1;
        }
        if (p->failed)
            return -1;
    }
}

ival *iv_read_pickle(iv_in *in, const iv_sink *sink, char *err, size_t errlen)
{
    pk p = {.in = in, .sink = sink, .err = err, .errlen = errlen};
    ival *result = NULL;
    int c = iv_in_peek(in);
    if (c != 0x80) {
        snprintf(err, errlen, "byte 0: %s", c < 0 ? "the input is empty"
                 : "not a pickle of protocol 2 to 5 (no PROTO opcode)");
        return NULL;
    }
    int rc = run(&p, &result);
    for (size_t i = 0; i < p.sp; i++)
        iv_unref(p.st[i]);
    free(p.st);
    free(p.below);
    for (size_t i = 0; i < p.memocap; i++)
        if (p.memo[i] && p.memo[i] != &pk_tomb) {
            p.memo[i]->memo = -1;
            iv_unref(p.memo[i]);
        }
    free(p.memo);
    free(p.tmp);
    if (rc) {
        iv_unref(result);
        return NULL;
    }
    return result;
}
