/* Writer side of the snapshot format: one function per line type, each
 * formatting one JSON line into a caller buffer.
 *
 * docs/format.md is the reference for what is written; this file is the one
 * place that writes it.  Two kinds of line:
 *
 *   - Event lines are the bulk of a snapshot (millions per run), formatted on
 *     the recorder's writer thread.  msnap_fmt_event is hand-written: keys
 *     are string literals, integers go through a two-digits-at-a-time decimal
 *     routine, fields that are zero are left out, and nothing is checked per
 *     byte: an event line is never longer than MSNAP_EVENT_LINE_MAX, so one
 *     capacity check up front is enough (a small cap formats into a stack
 *     buffer and copies).
 *   - Every other line (header, stack, module, sym, str, counters, state,
 *     live, trailer) is rare and goes through a bounds-checked "wb" cursor
 *     that records overflow; the function returns 0 when it overflowed.
 *
 * Integers: values below 2^53 are JSON numbers, values at or above it are
 * "0x..." hex strings (exact for every JSON reader).  Strings are escaped for
 * JSON: '"', '\\' and control characters are escaped, valid UTF-8 is copied,
 * and every byte that is not part of valid UTF-8 becomes U+FFFD, so the
 * output is always valid JSON in valid UTF-8 whatever the input bytes were. */
#include <stdlib.h>
#include <string.h>


#include "memsnap/format.h"
#include "internal.h"

static const char digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536"
    "37383940414243444546474849505152535455565758596061626364656667686970717273"
    "7475767778798081828384858687888990919293949596979899";
static const char hexdig[] = "0123456789abcdef";

/* ---- Unchecked integer formatting (callers reserve 24 bytes). ---------- */

/* Writes v in decimal at p; returns the end. */
static inline char *dec_u64(char *p, uint64_t v)
{
    char tmp[20];
    char *q = tmp + sizeof tmp;
    while (v >= 100) {
        unsigned i = (unsigned)(v % 100) * 2;
        v /= 100;
        q -= 2;
        memcpy(q, digits2 + i, 2);
    }
    if (v >= 10) {
        q -= 2;
        memcpy(q, digits2 + v * 2, 2);
    } else {
        *--q = (char)('0' + v);
    }
    size_t n = (size_t)(tmp + sizeof tmp - q);
    memcpy(p, q, n);
    return p + n;
}

/* Writes v as a quoted "0x..." hex string at p; returns the end. */
static char *hex_u64_str(char *p, uint64_t v)
{
    char tmp[16];
    int n = 0;
    do {
        tmp[n++] = hexdig[v & 15];
        v >>= 4;
    } while (v);
    *p++ = '"';
    *p++ = '0';
    *p++ = 'x';
    while (n)
        *p++ = tmp[--n];
    *p++ = '"';
    return p;
}

/* Writes v as a JSON integer (number below 2^53, hex string above). */
static inline char *json_u64(char *p, uint64_t v)
{
    if (v < MSNAP_JSON_EXACT_LIMIT)
        return dec_u64(p, v);
    return hex_u64_str(p, v);
}

/* Writes a signed v as a JSON integer. */
static inline char *json_i64(char *p, int64_t v)
{
    if (v >= 0)
        return json_u64(p, (uint64_t)v);
    *p++ = '-';
    return dec_u64(p, (uint64_t)0 - (uint64_t)v);
}

/* Copies a string literal (without its NUL) to p; returns the end. */
#define LIT(p, s) (memcpy((p), (s), sizeof(s) - 1), (p) + sizeof(s) - 1)

/* ---- Event lines: the hot path. ---------------------------------------- */

/* Formats e into buf, which has room for MSNAP_EVENT_LINE_MAX bytes. */
static size_t fmt_event_unchecked(char *buf, const msnap_event *e)
{
    char *p = buf;
    const char *name = msnap_action_name(e->action);
    size_t nlen = strlen(name);

    p = LIT(p, "{\"a\":\"");
    memcpy(p, name, nlen);
    p += nlen;
    p = LIT(p, "\",\"t\":");
    p = json_u64(p, e->t_ns);
    if (e->device) {
        p = LIT(p, ",\"d\":");
        p = json_i64(p, e->device);
    }
    if (e->addr) {
        p = LIT(p, ",\"p\":");
        p = json_u64(p, e->addr);
    }
    if (e->size) {
        p = LIT(p, ",\"n\":");
        p = json_u64(p, e->size);
    }
    if (e->stream) {
        p = LIT(p, ",\"s\":");
        p = json_u64(p, e->stream);
    }
    if (e->aux) {
        p = LIT(p, ",\"x\":");
        p = json_u64(p, e->aux);
    }
    if (e->aux2) {
        p = LIT(p, ",\"y\":");
        p = json_u64(p, e->aux2);
    }
    if (e->stack) {
        p = LIT(p, ",\"k\":");
        p = dec_u64(p, e->stack);
    }
    if (e->tid) {
        p = LIT(p, ",\"th\":");
        p = dec_u64(p, e->tid);
    }
    if (e->api > MSNAP_API_NONE && e->api < MSNAP_API_COUNT) {
        const char *api = msnap_api_name(e->api);
        size_t alen = strlen(api);
        p = LIT(p, ",\"f\":\"");
        memcpy(p, api, alen);
        p += alen;
        *p++ = '"';
    }
    if (e->result) {
        p = LIT(p, ",\"r\":");
        p = json_i64(p, e->result);
    }
    if (e->seq) {
        p = LIT(p, ",\"q\":");
        p = json_u64(p, e->seq);
    }
    p = LIT(p, "}\n");
    return (size_t)(p - buf);
}

/* Event line: {"a":"alloc","t":..,...}.  Returns bytes written or 0 when cap
 * is too small or e->action is not a real action (none / out of range). */
size_t msnap_fmt_event(char *buf, size_t cap, const msnap_event *e)
{
    if (e->action <= MSNAP_A_NONE || e->action >= MSNAP_A_COUNT)
        return 0;
    if (cap >= MSNAP_EVENT_LINE_MAX)
        return fmt_event_unchecked(buf, e);
    char tmp[MSNAP_EVENT_LINE_MAX];
    size_t n = fmt_event_unchecked(tmp, e);
    if (n > cap)
        return 0;
    memcpy(buf, tmp, n);
    return n;
}

/* ---- Bounds-checked cursor for the other lines. ------------------------ */

typedef struct wb {
    char *p;
    char *end;
    int overflow;
} wb;

static void wb_put(wb *w, const void *s, size_t n)
{
    if (w->overflow || (size_t)(w->end - w->p) < n) {
        w->overflow = 1;
        return;
    }
    memcpy(w->p, s, n);
    w->p += n;
}

static void wb_lit(wb *w, const char *s)
{
    wb_put(w, s, strlen(s));
}

static void wb_u64(wb *w, uint64_t v)
{
    char tmp[24];
    wb_put(w, tmp, (size_t)(json_u64(tmp, v) - tmp));
}

static void wb_i64(wb *w, int64_t v)
{
    char tmp[24];
    wb_put(w, tmp, (size_t)(json_i64(tmp, v) - tmp));
}

/* Always a quoted hex string, for addresses people read in hex. */
static void wb_hex(wb *w, uint64_t v)
{
    char tmp[24];
    wb_put(w, tmp, (size_t)(hex_u64_str(tmp, v) - tmp));
}

/* Length of the valid UTF-8 sequence (2..4 bytes) starting at the non-ASCII
 * byte s[0], or 0 if it is not one.  s is NUL-terminated, and a NUL is never
 * a continuation byte, so this never reads past the terminator. */
static size_t utf8_seq_len(const unsigned char *s)
{
    unsigned c = s[0];
#define CONT(b) ((b) >= 0x80 && (b) <= 0xBF)
    if (c >= 0xC2 && c <= 0xDF)
        return CONT(s[1]) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return (s[1] >= lo && s[1] <= hi && CONT(s[2])) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        return (s[1] >= lo && s[1] <= hi && CONT(s[2]) && CONT(s[3])) ? 4 : 0;
    }
    return 0;
#undef CONT
}

static const char replacement_char[] = "\xEF\xBF\xBD"; /* U+FFFD */

/* Writes s as a quoted JSON string (NULL writes ""). */
static void wb_str(wb *w, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    wb_put(w, "\"", 1);
    while (*p) {
        const unsigned char *q = p;
        while (*q >= 0x20 && *q < 0x80 && *q != '"' && *q != '\\')
            q++;
        if (q != p) {
            wb_put(w, p, (size_t)(q - p));
            p = q;
            continue;
        }
        unsigned c = *p;
        if (c >= 0x80) {
            size_t n = utf8_seq_len(p);
            if (n) {
                wb_put(w, p, n);
                p += n;
            } else {
                wb_put(w, replacement_char, 3);
                p++;
            }
            continue;
        }
        char esc[8] = {'\\', 0};
        size_t n = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hexdig[c >> 4];
            esc[5] = hexdig[c & 15];
            n = 6;
        }
        wb_put(w, esc, n);
        p++;
    }
    wb_put(w, "\"", 1);
}

/* Copies JSON text s, replacing bytes that are not valid UTF-8 with U+FFFD
 * (cJSON passes such bytes through inside strings). */
static void wb_json_text(wb *w, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p < 0x80) {
            wb_put(w, p++, 1);
            continue;
        }
        size_t n = utf8_seq_len(p);
        if (n) {
            wb_put(w, p, n);
            p += n;
        } else {
            wb_put(w, replacement_char, 3);
            p++;
        }
    }
}

/* Ends a line: "}\n".  Returns the line length or 0 on overflow. */
static size_t wb_finish(wb *w, char *buf)
{
    wb_put(w, "}\n", 2);
    return w->overflow ? 0 : (size_t)(w->p - buf);
}

#define WB_INIT(buf, cap) {(buf), (buf) + (cap), 0}

/* ---- The other line types. --------------------------------------------- */

/* {"index":0,"name":"...","total":N} (no braces' line end). */
static void wb_device_fields(wb *w, const msnap_device_info *d)
{
    wb_lit(w, "\"index\":");
    wb_i64(w, d->index);
    wb_lit(w, ",\"name\":");
    wb_str(w, d->name);
    wb_lit(w, ",\"total\":");
    wb_u64(w, d->total);
}

/* Header line with settings_json written as it is (see format.h).  Always
 * writes this library's version (MSNAP_FORMAT_MAJOR.MSNAP_FORMAT_MINOR),
 * ignoring h->major/minor.  No allocation. */
size_t msnap_fmt_header_compact(char *buf, size_t cap, const msnap_header *h)
{
    wb w = WB_INIT(buf, cap);
    const char *settings = h->settings_json && *h->settings_json ? h->settings_json : NULL;
    char ver[48];
    char *v = ver;

    v = dec_u64(v, MSNAP_FORMAT_MAJOR);
    *v++ = '.';
    v = dec_u64(v, MSNAP_FORMAT_MINOR);
    *v = 0;

    wb_lit(&w, "{\"type\":\"header\",\"format\":\"" MSNAP_FORMAT_NAME "\",\"version\":");
    wb_str(&w, ver);
    wb_lit(&w, ",\"pid\":");
    wb_i64(&w, h->pid);
    if (h->has_rank) {
        wb_lit(&w, ",\"rank\":");
        wb_i64(&w, h->rank);
    }
    wb_lit(&w, ",\"host\":");
    wb_str(&w, h->host);
    wb_lit(&w, ",\"argv\":[");
    for (int i = 0; h->argv && i < h->argc; i++) {
        if (i)
            wb_put(&w, ",", 1);
        wb_str(&w, h->argv[i]);
    }
    wb_lit(&w, "],\"clock\":");
    wb_str(&w, h->clock);
    wb_lit(&w, ",\"t0_unix_ns\":");
    wb_u64(&w, h->t0_unix_ns);
    wb_lit(&w, ",\"mode\":");
    wb_str(&w, h->mode);
    wb_lit(&w, ",\"settings\":");
    wb_json_text(&w, settings ? settings : "{}");
    wb_lit(&w, ",\"devices\":[");
    int nd = h->ndevices < 0 ? 0 : h->ndevices;
    if (nd > MSNAP_MAX_DEVICES)
        nd = MSNAP_MAX_DEVICES;
    for (int i = 0; i < nd; i++) {
        wb_lit(&w, i ? ",{" : "{");
        wb_device_fields(&w, &h->devices[i]);
        wb_put(&w, "}", 1);
    }
    wb_put(&w, "]", 1);
    return wb_finish(&w, buf);
}

/* {"type":"device","index":0,"name":"NVIDIA H200","total":150..} */
size_t msnap_fmt_device(char *buf, size_t cap, const msnap_device_info *d)
{
    wb w = WB_INIT(buf, cap);
    wb_lit(&w, "{\"type\":\"device\",");
    wb_device_fields(&w, d);
    return wb_finish(&w, buf);
}

/* {"type":"stack","id":7,"ips":["0x7f..",...]}; innermost frame first. */
size_t msnap_fmt_stack(char *buf, size_t cap, const msnap_stack *s)
{
    wb w = WB_INIT(buf, cap);
    wb_lit(&w, "{\"type\":\"stack\",\"id\":");
    wb_u64(&w, s->id);
    wb_lit(&w, ",\"ips\":[");
    for (int i = 0; s->ips && i < s->depth; i++) {
        if (i)
            wb_put(&w, ",", 1);
        wb_hex(&w, s->ips[i]);
    }
    wb_put(&w, "]", 1);
    return wb_finish(&w, buf);
}

/* {"type":"module","base":"0x..","size":N,"path":"..","build_id":".."} */
size_t msnap_fmt_module(char *buf, size_t cap, const msnap_module *m)
{
    wb w = WB_INIT(buf, cap);
    wb_lit(&w, "{\"type\":\"module\",\"base\":");
    wb_hex(&w, m->base);
    wb_lit(&w, ",\"size\":");
    wb_u64(&w, m->size);
    wb_lit(&w, ",\"path\":");
    wb_str(&w, m->path);
    wb_lit(&w, ",\"build_id\":");
    wb_str(&w, m->build_id);
    return wb_finish(&w, buf);
}

/* {"type":"sym","ip":"0x..","fn":"..","file":"..","line":N,"off":N} */
size_t msnap_fmt_symbol(char *buf, size_t cap, const msnap_symbol *s)
{
    wb w = WB_INIT(buf, cap);
    wb_lit(&w, "{\"type\":\"sym\",\"ip\":");
    wb_hex(&w, s->ip);
    wb_lit(&w, ",\"fn\":");
    wb_str(&w, s->function);
    wb_lit(&w, ",\"file\":");
    wb_str(&w, s->file);
    wb_lit(&w, ",\"line\":");
    wb_i64(&w, s->line < 0 ? 0 : s->line);
    wb_lit(&w, ",\"off\":");
    wb_u64(&w, s->offset);
    return wb_finish(&w, buf);
}

/* {"type":"str","id":N,"s":".."} */
size_t msnap_fmt_str(char *buf, size_t cap, const msnap_str *s)
{
    wb w = WB_INIT(buf, cap);
    wb_lit(&w, "{\"type\":\"str\",\"id\":");
    wb_u64(&w, s->id);
    wb_lit(&w, ",\"s\":");
    wb_str(&w, s->s);
    return wb_finish(&w, buf);
}

/* {"type":"counters","t":..,"d":0,"reserved":..,...}: every key written,
 * except device_used, which only a recorder that could read it writes. */
size_t msnap_fmt_counters(char *buf, size_t cap, const msnap_counters *c)
{
    wb w = WB_INIT(buf, cap);
    wb_lit(&w, "{\"type\":\"counters\",\"t\":");
    wb_u64(&w, c->t_ns);
    wb_lit(&w, ",\"d\":");
    wb_i64(&w, c->device);
    wb_lit(&w, ",\"reserved\":");
    wb_u64(&w, c->reserved);
    wb_lit(&w, ",\"allocated\":");
    wb_u64(&w, c->allocated);
    wb_lit(&w, ",\"async\":");
    wb_u64(&w, c->async);
    wb_lit(&w, ",\"managed\":");
    wb_u64(&w, c->managed);
    wb_lit(&w, ",\"host\":");
    wb_u64(&w, c->host);
    wb_lit(&w, ",\"vmm_mapped\":");
    wb_u64(&w, c->vmm_mapped);
    if (c->device_used) {   /* left out when not read (format 1.1) */
        wb_lit(&w, ",\"device_used\":");
        wb_u64(&w, c->device_used);
    }
    return wb_finish(&w, buf);
}

/* {"type":"live","kind":"alloc","t":..,"d":..,"p":..,"n":..,"s":..,"x":..,
 * "k":..}: d, s, x, k left out when 0.  0 when kind is not a real action. */
size_t msnap_fmt_live(char *buf, size_t cap, const msnap_live *l)
{
    wb w = WB_INIT(buf, cap);
    if (l->kind <= MSNAP_A_NONE || l->kind >= MSNAP_A_COUNT)
        return 0;
    wb_lit(&w, "{\"type\":\"live\",\"kind\":\"");
    wb_lit(&w, msnap_action_name(l->kind));
    wb_lit(&w, "\",\"t\":");
    wb_u64(&w, l->t_ns);
    if (l->device) {
        wb_lit(&w, ",\"d\":");
        wb_i64(&w, l->device);
    }
    wb_lit(&w, ",\"p\":");
    wb_u64(&w, l->addr);
    wb_lit(&w, ",\"n\":");
    wb_u64(&w, l->size);
    if (l->stream) {
        wb_lit(&w, ",\"s\":");
        wb_u64(&w, l->stream);
    }
    if (l->aux) {
        wb_lit(&w, ",\"x\":");
        wb_u64(&w, l->aux);
    }
    if (l->stack) {
        wb_lit(&w, ",\"k\":");
        wb_u64(&w, l->stack);
    }
    return wb_finish(&w, buf);
}

/* {"type":"state","t":..,"nlive":N}: the live lines follow. */
size_t msnap_fmt_state_begin(char *buf, size_t cap, uint64_t t_ns, uint64_t nlive)
{
    wb w = WB_INIT(buf, cap);
    wb_lit(&w, "{\"type\":\"state\",\"t\":");
    wb_u64(&w, t_ns);
    wb_lit(&w, ",\"nlive\":");
    wb_u64(&w, nlive);
    return wb_finish(&w, buf);
}

/* {"type":"trailer","t":..,"events":..,"dropped":..,"stacks_dropped":..,
 * "reason":".."} */
size_t msnap_fmt_trailer(char *buf, size_t cap, const msnap_trailer *t)
{
    wb w = WB_INIT(buf, cap);
    wb_lit(&w, "{\"type\":\"trailer\",\"t\":");
    wb_u64(&w, t->t_ns);
    wb_lit(&w, ",\"events\":");
    wb_u64(&w, t->events);
    wb_lit(&w, ",\"dropped\":");
    wb_u64(&w, t->dropped);
    wb_lit(&w, ",\"stacks_dropped\":");
    wb_u64(&w, t->stacks_dropped);
    wb_lit(&w, ",\"reason\":");
    wb_str(&w, t->reason);
    return wb_finish(&w, buf);
}
