/* Site labels: which frame of a stack names an allocation site, how that
 * frame is written in a legend, and the key that matches a site across
 * snapshots (label.h, sm_site_label & co).
 *
 * The frame.  Every stack of a real program starts inside the memory
 * runtime (the driver, cudart, PyTorch's caching allocator, memsnap's
 * allocator), then passes through libraries (cuBLAS, libtorch, the C++
 * runtime, the Python interpreter, installed Python packages) before it
 * reaches the user's code.  siterules.h sorts each frame into user code,
 * installed Python package, PyTorch's Python, a Python frame the user's
 * rules skip, other library, or memory runtime (a default table plus the
 * user's MEMSNAP_SITE_RULES file).  A Python stack (one with model code,
 * the user's or a package's, or an autograd node) is named in PyTorch's
 * terms by python_base: "MODEL (file.py:N) via API <- user.py:N", its
 * innermost model-code frame (a skipped Python frame is not model code:
 * the next one outwards names the site).  Any other stack is named by its
 * innermost user frame; without one, by its innermost skipped Python frame
 * (a fallback); without one, by its first frame outside the memory
 * runtime; when every frame is inside it, by the innermost frame that is
 * not memsnap's own (siterules.h sr_own: our recorder, plugin and
 * allocator never name a site; a file before format 1.2 has no autograd
 * node to name a backward allocation, whose stack is then the runtime's
 * alone).
 *
 * The name.  Native: "function (file:line)", the function shortened
 * (sm_short_name: demangled when it arrives mangled and __cxa_demangle is
 * reachable, then without argument list, template arguments, return type,
 * "(anonymous namespace)::", " [clone ...]" and compiler suffixes such as
 * ".constprop.0"); without a function name "module+0xoffset", else
 * "0xip".  Python: "qualname (file.py:line)", the file as a base name.
 *
 * One label per site, whatever lists it.  A site is the set of stacks whose
 * frames from the first frame outside the memory runtime outwards (for a
 * Python stack: up to the user's line) read the same: stacks that differ
 * only inside the allocator (a segment and the blocks carved from it,
 * another allocator setting) are one site with one label.  Sites whose
 * names read the same (a group) are told apart among ALL the sites of the
 * file, not among those a command happens to list, so summary, render and
 * compare print the same label (label_group).  A Python site gets the
 * first model-code caller outwards, up to the user's line, that no other
 * site of the group has (" from LlamaDecoderLayer.forward
 * (modeling_llama.py:306)"), else the first frame inwards with a line that
 * only it has (" at adam.py:178"); it goes after MODEL and its API, before
 * " <- user.py:N".  Any other site gets the first caller outwards, not
 * among the last four frames (process entry), whose name no other site of
 * the group has (" from at::native::randn"), then the first with its
 * "name (file:line)" (" from server_run (server.c:574)"); then, inwards,
 * the first library frame between the runtime and the naming frame that
 * only it has (" via forward (modeling_llama.py:175)").  A site with no
 * such frame (each of its frames is another site's too) is then told
 * apart, by the same rules, by a frame that none of the sites told apart
 * above has, so the plain name is left only to a site with nothing of its
 * own.  Sites whose labels read
 * the same are one site (sm_site_group, sm_site_key: the label's hash);
 * no label carries a stack number.
 *
 * Every stack of the file is labelled once, on the first label asked for
 * (an_labels: the file keeps them): O(frames) with one classification per
 * distinct ip.
 */
#define _GNU_SOURCE        /* RTLD_DEFAULT: glibc before 2.34 declares it only so */
#include "label.h"
#include "siterules.h"
#include "util/hash.h"

#include <ctype.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- demangling --------------------------------------------------------- */

/* Found once per process, under a lock: reads on several threads (-j, a
 * Dask worker's threads) all see the same demangler, so a label never
 * depends on which thread asked first. */
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static pthread_mutex_t demangle_mu = PTHREAD_MUTEX_INITIALIZER;
static int allow_loading;
static int demangle_tried;
static _Atomic int demangle_ready;     /* demangle_tried, as readers see it */
static demangle_fn demangler;

void sm_demangle_allow_loading(int allow)
{
    pthread_mutex_lock(&demangle_mu);
    allow_loading = allow;
    if (allow && demangle_tried && !demangler) {
        demangle_tried = 0;   /* look again, now allowed to load */
        atomic_store(&demangle_ready, 0);
    }
    pthread_mutex_unlock(&demangle_mu);
}

static demangle_fn get_demangler(void)
{
    if (atomic_load_explicit(&demangle_ready, memory_order_acquire))
        return demangler;
    pthread_mutex_lock(&demangle_mu);
    if (!demangle_tried) {
        demangle_tried = 1;
        demangler = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
        if (!demangler) {
            int flags = RTLD_LAZY | RTLD_LOCAL | (allow_loading ? 0 : RTLD_NOLOAD);
            void *h = dlopen("libstdc++.so.6", flags);
            if (h)
                demangler = (demangle_fn)dlsym(h, "__cxa_demangle");
            /* the handle stays open: the demangler lives in it */
        }
        atomic_store_explicit(&demangle_ready, 1, memory_order_release);
    }
    pthread_mutex_unlock(&demangle_mu);
    return demangler;
}

/* A fallback for plain nested names when no demangler is reachable:
 * _Z[L]N{r,V,K}* (<n><id> | St | C1 | D1 ...)+ [I...E] E -> a::b::c.
 * Returns 0 and fills buf, or -1 for anything else (left mangled). */
static int mini_demangle(const char *s, char *buf, size_t cap)
{
    if (strncmp(s, "_Z", 2))
        return -1;
    s += 2;
    if (*s == 'L')
        s++;
    int nested = *s == 'N';
    if (nested)
        s++;
    while (nested && (*s == 'r' || *s == 'V' || *s == 'K'))
        s++;
    size_t n = 0;
    const char *last = NULL;
    int last_len = 0, parts = 0;
    buf[0] = '\0';
    for (;;) {
        const char *part = NULL;
        int len = 0;
        if (isdigit((unsigned char)*s)) {
            char *end;
            long l = strtol(s, &end, 10);
            if (l <= 0 || (size_t)l > strlen(end))
                return -1;
            part = end;
            len = (int)l;
            s = end + l;
            if (len == 12 && !strncmp(part, "_GLOBAL__N_1", 12))
                part = NULL;   /* anonymous namespace: left out */
        } else if (nested && s[0] == 'S' && s[1] == 't') {
            part = "std";
            len = 3;
            s += 2;
        } else if (nested && (s[0] == 'C' || s[0] == 'D') &&
                   isdigit((unsigned char)s[1]) && last) {
            part = last;       /* constructor / destructor: the class name */
            len = last_len;
            s += 2;
        } else if (nested && s[0] == 'I') {
            int depth = 0;     /* template arguments: skipped, balanced */
            do {
                if (*s == 'I' || *s == 'N')
                    depth++;
                else if (*s == 'E')
                    depth--;
                else if (!*s)
                    return -1;
                s++;
            } while (depth > 0);
            continue;
        } else {
            break;
        }
        if (part) {
            int w = snprintf(buf + n, cap > n ? cap - n : 0, "%s%.*s",
                             parts ? "::" : "", len, part);
            if (w < 0 || n + (size_t)w >= cap)
                return -1;
            n += (size_t)w;
            parts++;
            last = part;
            last_len = len;
        }
        if (!nested)
            break;
    }
    if (nested && *s != 'E')
        return -1;
    return parts ? 0 : -1;
}

/* ---- shortening --------------------------------------------------------- */

/* Copies s without everything inside <...> (template arguments). */
static void strip_templates(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    int depth = 0;
    for (const char *p = s; *p && n + 1 < cap; p++) {
        /* operator<, operator<<, operator<=, operator-> are names, not
         * template brackets */
        if (!strncmp(p, "operator", 8) && depth == 0) {
            const char *q = p + 8;
            size_t k = 8;
            while (*q == '<' || *q == '>' || *q == '=' || *q == '-') {
                q++;
                k++;
            }
            for (size_t i = 0; i < k && n + 1 < cap; i++)
                out[n++] = p[i];
            p += k - 1;
            continue;
        }
        if (*p == '<') {
            depth++;
            continue;
        }
        if (*p == '>' && depth > 0) {
            depth--;
            continue;
        }
        if (!depth)
            out[n++] = *p;
    }
    out[n] = '\0';
}

/* Cuts what the compiler and the linker add to a C name: a clone's
 * ".constprop.N", ".isra.N", ".part.N", ".cold", ".lto_priv.N", clang's
 * ".llvm.N", and a symbol version ("@@GLIBC_2.34").  The same function
 * then reads the same in every build. */
static void cut_compiler_suffix(char *w)
{
    static const char *marks[] = {".constprop.", ".isra.", ".part.", ".cold",
                                  ".lto_priv.", ".llvm.", "@"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        char *p = strstr(w, marks[i]);
        if (p && p > w)
            *p = '\0';
    }
}

void sm_short_name(const char *fn, char *buf, size_t cap)
{
    if (!cap)
        return;
    buf[0] = '\0';
    if (!fn)
        return;
    char *dem = NULL;
    char tmp[1024];
    const char *name = fn;
    if (fn[0] == '_' && fn[1] == 'Z') {
        demangle_fn d = get_demangler();
        int status = -1;
        /* ".constprop.0", ".isra.0", ".cold" suffixes stop __cxa_demangle */
        char core[2048];
        snprintf(core, sizeof core, "%s", fn);
        char *dot = strchr(core, '.');
        if (dot)
            *dot = '\0';
        if (d)
            dem = d(core, NULL, NULL, &status);
        if (dem && status == 0)
            name = dem;
        else if (mini_demangle(core, tmp, sizeof tmp) == 0)
            name = tmp;
        else {
            snprintf(buf, cap, "%s", fn);
            free(dem);
            return;
        }
    }
    /* Cut " [clone ...]" and the argument list: the last top-level (...)
     * group that is not "(anonymous namespace)". */
    size_t len = strlen(name);
    char *w = malloc(len + 1);
    if (!w) {
        snprintf(buf, cap, "%s", name);
        free(dem);
        return;
    }
    memcpy(w, name, len + 1);
    char *clone = strstr(w, " [clone");
    if (clone)
        *clone = '\0';
    cut_compiler_suffix(w);
    int angle = 0, paren = 0;
    long cut = -1;
    for (long i = 0; w[i]; i++) {
        char ch = w[i];
        if (!strncmp(w + i, "operator", 8) && !angle && !paren) {
            i += 7;
            if (w[i + 1] == '(' && w[i + 2] == ')')
                i += 2;        /* operator() */
            continue;
        }
        if (ch == '<') angle++;
        else if (ch == '>' && angle) angle--;
        else if (ch == '(' && !angle) {
            if (!paren && strncmp(w + i, "(anonymous namespace)", 21))
                cut = i;
            paren++;
        } else if (ch == ')' && paren) paren--;
    }
    if (cut > 0)
        w[cut] = '\0';
    char *nt = malloc(strlen(w) + 1);
    if (!nt) {
        snprintf(buf, cap, "%s", w);
        free(w);
        free(dem);
        return;
    }
    strip_templates(w, nt, strlen(w) + 1);
    /* "(anonymous namespace)::" and "{lambda...}" braces are noise */
    char *p;
    while ((p = strstr(nt, "(anonymous namespace)::")))
        memmove(p, p + 23, strlen(p + 23) + 1);
    /* The return type of a template function: the part before the last
     * top-level space (not for "operator new" and friends). */
    char *start = nt;
    if (!strstr(nt, "operator")) {
        char *sp = strrchr(nt, ' ');
        if (sp && sp[1])
            start = sp + 1;
    }
    snprintf(buf, cap, "%s", start);
    free(nt);
    free(w);
    free(dem);
}

/* ---- every stack of the file, labelled once ----------------------------- */

/* What the label needs of one distinct ip, computed once. */
typedef struct lab_ip {
    uint8_t cls, matched, python;   /* enum sr_class; a rule decided; Python frame */
    uint8_t autograd, plumbing;     /* an autograd node; PyTorch passing a call on */
    uint8_t passes;                 /* a call passed on (sm_frame_passes) */
    uint8_t own;                    /* memsnap's own frame (sr_own): never names a site */
    const char *file;               /* the sym record's file (the table's string) */
    char *name;                     /* short function, module+0xoff or 0xip */
    char *text;                     /* name (file:line), file as a base name */
    char *where;                    /* file:line, file as a base name ("" none) */
    uint64_t h0, h1;                /* hashes of name and text */
} lab_ip;

/* One stack record (same index as the table's stacks). */
typedef struct lab_stack {
    int kf;             /* first frame outside the memory runtime (0 when none) */
    int lf;             /* the labelling frame; -1 for an empty stack */
    int end;            /* the last frame the site's identity reads */
    uint32_t site;      /* index into sites */
} lab_stack;

/* One site: the stacks whose frames from kf outwards read the same. */
typedef struct lab_site {
    uint64_t key;
    size_t rep;         /* its first stack (index) */
    uint32_t min_id;    /* its smallest stack id */
    const char *base;   /* the label without what tells it apart */
    size_t cut;         /* where in base that goes (before " <- user.py:N") */
    char *own_base;     /* base when made here (a Python stack's), else NULL */
    int python;         /* named by the Python rule (see the top of the file) */
    char *label;
    uint32_t group;     /* the sites whose labels read the same are one */
} lab_site;

/* The labels of one table (label.h sm_labels). */
typedef struct sm_labels {
    const sm_symtab *t;             /* the table labelled (borrowed) */
    unsigned version;               /* t->version it was built for */
    int ring;                       /* a ring dump (sm_labels_new) */
    unsigned gen;                   /* sr_generation() it was built for */
    u64map ipix;                    /* ip -> index into ips */
    lab_ip *ips;
    size_t nips, cap_ips;
    lab_stack *st;
    lab_site *sites;
    size_t nsites, cap_sites;
    u64map keyix;                   /* key -> index into sites */
    char **glabel;                  /* a group's label (a site's) */
    uint64_t *gkey;                 /* hash of the label */
    size_t ngroups;
} lab_cache;

/* Frees a cache. */
static void cache_free(lab_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nips; i++) {
        free(c->ips[i].name);
        free(c->ips[i].text);
        free(c->ips[i].where);
    }
    free(c->ips);
    u64map_free(&c->ipix);
    free(c->st);
    for (size_t i = 0; i < c->nsites; i++) {
        free(c->sites[i].label);
        free(c->sites[i].own_base);
    }
    free(c->sites);
    u64map_free(&c->keyix);
    free(c->glabel);
    free(c->gkey);
    free(c);
}

/* FNV-1a of a string (util/hash.h), continuing from h. */
static uint64_t fnv(uint64_t h, const char *s)
{
    return msnap_fnv1a_str(h, s);
}
/* The seed of the label hashes: not FNV's own basis but the one site keys
 * have had from the start, so that the site_key of an SQLite export (which
 * joins sites across files, docs/interop.md) stays what earlier exports
 * wrote. */
#define FNV0 1469598103934665603ull

/* The cached facts of ip; NULL when out of memory. */
static const lab_ip *ip_info(lab_cache *c, const sm_symtab *t, uint64_t ip)
{
    uint64_t *v = u64map_get(&c->ipix, 0, ip);
    if (v)
        return &c->ips[*v];
    if (msnap_grow((void **)&c->ips, &c->cap_ips, c->nips, sizeof *c->ips) ||
        u64map_put(&c->ipix, 0, ip, c->nips))
        return NULL;
    lab_ip *d = &c->ips[c->nips++];
    *d = (lab_ip){.python = (uint8_t)(msnap_ip_is_python(ip) && !msnap_ip_is_autograd(ip)),
                  .autograd = (uint8_t)msnap_ip_is_autograd(ip), .file = ""};
    const char *fn = "";
    int line = 0;
    uint64_t *y = u64map_get(&t->sym_map, 0, ip);
    if (y) {
        fn = t->syms[*y].fn;
        d->file = t->syms[*y].file;
        line = t->syms[*y].line;
    }
    const sm_module *md = d->python ? NULL : sm_symtab_module_of(t, ip, SM_MOD_SIZED);
    char name[SM_LABEL_MAX], text[SM_LABEL_MAX + 64];
    if (fn[0] && d->python)
        snprintf(name, sizeof name, "%s", fn);   /* a qualname: nothing to shorten */
    else if (fn[0])
        sm_short_name(fn, name, sizeof name);
    else if (md)
        snprintf(name, sizeof name, "%s+0x%" PRIx64, sm_base_name(md->path),
                 ip - md->base);
    else
        snprintf(name, sizeof name, "0x%" PRIx64, ip);
    if (fn[0] && d->file[0] && line)
        snprintf(text, sizeof text, "%s (%s:%d)", name, sm_base_name(d->file), line);
    else if (fn[0] && d->file[0])
        snprintf(text, sizeof text, "%s (%s)", name, sm_base_name(d->file));
    else
        snprintf(text, sizeof text, "%s", name);
    sr_frame f = {.fn = fn, .short_fn = fn[0] ? name : "", .file = d->file,
                  .module = md ? md->path : "", .python = d->python};
    int matched;
    d->cls = (uint8_t)sr_classify(&f, &matched);
    d->own = (uint8_t)sr_own(&f);
    d->matched = (uint8_t)matched;
    d->plumbing = (uint8_t)(d->cls == SR_TORCH && sr_plumbing(&f));
    d->passes = (uint8_t)((d->cls == SR_TORCH || d->cls == SR_PYLIB) && sr_plumbing(&f));
    if (d->autograd) {
        /* an autograd node: what the backward was doing */
        snprintf(name, sizeof name, "%s", fn[0] ? fn : "autograd node");
        snprintf(text, sizeof text, "%s", name);
        d->cls = SR_USER;
        d->matched = 1;
    }
    char where[SM_LABEL_MAX] = "";
    if (d->file[0] && line)
        snprintf(where, sizeof where, "%s:%d", sm_base_name(d->file), line);
    d->where = strdup(where);
    if (d->python && !fn[0] && !matched) {
        /* A Python frame without its sym line (a cut file) says nothing
         * about whose code it is: not a name to show. */
        d->cls = SR_LIB;
        d->matched = 1;
    }
    d->name = strdup(name);
    d->text = strdup(text);
    if (!d->name || !d->text || !d->where)
        return NULL;   /* freed with the cache */
    d->h0 = fnv(FNV0, name);
    d->h1 = fnv(FNV0, text);
    return d;
}

/* Whether two paths are in the same directory (both non-empty). */
static int same_dir(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    size_t la = sa ? (size_t)(sa - a) : 0, lb = sb ? (size_t)(sb - b) : 0;
    return a[0] && b[0] && la == lb && !strncmp(a, b, la);
}

/* The classes of a stack's frames into cls[0..depth).  A run of frames no
 * rule decided, called from the memory runtime (or the stack's start) and
 * calling a runtime frame whose source file is in their directory, are
 * the runtime's own static helpers (a runtime linked into the program
 * with debug information; recordings of memsnap's allocator from before
 * its helpers were all named ms_*: ms_fixed_grow <- slow_path <-
 * memsnap_alloc_malloc).  Without debug information a frame has no source
 * file and this cannot apply: a runtime linked statically is then known by
 * its function names alone (memsnap's allocator names every function ms_*
 * or memsnap_*, allocator/internal.h). */
static void stack_classes(const lab_ip *const *f, int depth, uint8_t *cls)
{
    for (int i = 0; i < depth; i++)
        cls[i] = f[i]->cls;
    for (int i = 0; i < depth; i++) {
        if (cls[i] != SR_USER || f[i]->matched || f[i]->python || !f[i]->file[0])
            continue;
        int j = i;
        while (j + 1 < depth && cls[j + 1] == SR_USER && !f[j + 1]->matched &&
               !f[j + 1]->python && f[j + 1]->file[0])
            j++;
        int inner = i == 0 || cls[i - 1] == SR_RUNTIME;
        int outer = j + 1 < depth && cls[j + 1] == SR_RUNTIME && f[j + 1]->file[0];
        int dir = outer;
        for (int k = i; dir && k <= j; k++)
            dir = same_dir(f[k]->file, f[j + 1]->file);
        if (inner && outer && dir)
            for (int k = i; k <= j; k++)
                cls[k] = SR_RUNTIME;
        i = j;
    }
}

/* Orders sites by base text, then smallest stack id. */
static int site_cmp(const void *a, const void *b)
{
    const lab_site *x = *(const lab_site *const *)a, *y = *(const lab_site *const *)b;
    int c = strcmp(x->base, y->base);
    return c ? c : (x->min_id > y->min_id) - (x->min_id < y->min_id);
}

/* The last two components of a qualified name: "a::b::c::f" -> "c::f". */
static const char *tail2(const char *name)
{
    const char *stop = strpbrk(name, " (");
    const char *last = NULL, *prev = NULL;
    for (const char *p = name; (p = strstr(p, "::")) && (!stop || p < stop); p += 2) {
        prev = last;
        last = p;
    }
    return prev ? prev + 2 : name;
}

/* Whether frame f of a Python stack is model code (the user's or a
 * package's Python, not PyTorch's, the interpreter's or the standard
 * library's). */
static int model_code(const lab_ip *f, uint8_t cls)
{
    return f->python && (cls == SR_USER || cls == SR_PYLIB);
}

/* A Python stack's label before what tells it apart (see the top of this
 * file) into buf, with *lf its labelling frame: the autograd node if the
 * stack starts with one ("MmBackward0 of ..."), the innermost model-code
 * frame, the PyTorch API it called (" via Linear.forward"), and the user's
 * outermost frame (" <- train.py:20").  0 when the stack has neither a
 * model-code frame nor a node: the native rule names it. */
static int python_base(const lab_ip *const *f, const uint8_t *cls, int depth, int kf,
                       char *buf, size_t cap, int *lf, int *end, size_t *cut)
{
    int i0 = kf, node = -1, m = -1, u = -1, t = -1;
    if (kf < depth && f[kf]->autograd) {
        node = kf;
        i0 = kf + 1;
    }
    for (int i = i0; i < depth && m < 0; i++)
        if (model_code(f[i], cls[i]))
            m = i;
    /* the user's line that called into the model: the innermost user frame
     * outward of a package's model code */
    for (int i = m + 1; m >= 0 && cls[m] != SR_USER && i < depth && u < 0; i++)
        if (f[i]->python && cls[i] == SR_USER)
            u = i;
    if (node < 0 && m < 0)
        return 0;
    /* the API: the outermost PyTorch frame inward of the model's that does
     * more than pass the call on */
    for (int i = m - 1; m >= 0 && i >= i0; i--) {
        if (!f[i]->python || cls[i] != SR_TORCH)
            break;
        if (!f[i]->plumbing) {
            t = i;
            break;
        }
    }
    size_t n = 0;
    buf[0] = '\0';
    if (node >= 0)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", f[node]->name,
                              m >= 0 ? " of " : " (backward)");
    if (m >= 0 && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%s", f[m]->text);
    if (t >= 0 && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, " via %s", f[t]->name);
    *cut = n < cap ? n : cap - 1;
    if (u > m && m >= 0 && f[u]->where[0] && n < cap)
        snprintf(buf + n, cap - n, " <- %s", f[u]->where);
    *lf = m >= 0 ? m : node;
    /* what the site is: up to the user's line (callers further out do not
     * make another site) */
    *end = u >= 0 ? u : m >= 0 && cls[m] == SR_USER ? m : depth - 1;
    return 1;
}

/* The frames of site s that can tell it apart: from its first frame
 * outside the memory runtime to the last its identity reads. */
static void site_frames(const lab_cache *c, const sm_symtab *t, const lab_site *s, int *from,
                        int *to)
{
    *from = c->st[s->rep].kf;
    *to = s->python ? c->st[s->rep].end + 1 : t->stacks[s->rep].depth;
}

/* Counts the frames (both levels: h0 name, h1 text) of the members k of
 * g[0..n) with pick[k] == want (every member when pick is NULL) into
 * counts, tags tag and tag + 1: (last member that had it + 1) << 32 |
 * members that have it.  0 ok, -1 out of memory. */
static int count_frames(lab_cache *c, const sm_symtab *t, lab_site **g, size_t n,
                        const uint8_t *pick, int want, u64map *counts, uint32_t tag)
{
    for (size_t k = 0; k < n; k++) {
        if (pick && pick[k] != want)
            continue;
        const sm_stack_rec *st = &t->stacks[g[k]->rep];
        int from, to;
        site_frames(c, t, g[k], &from, &to);
        for (int i = from; i < to; i++) {
            const lab_ip *f = ip_info(c, t, st->ips[i]);
            if (!f)
                return -1;
            for (uint32_t lv = 0; lv < 2; lv++) {
                uint64_t h = lv ? f->h1 : f->h0;
                uint64_t *v = u64map_get(counts, tag + lv, h);
                if (!v) {
                    if (u64map_put(counts, tag + lv, h, ((uint64_t)k + 1) << 32 | 1))
                        return -1;
                } else if (*v >> 32 != (uint64_t)k + 1) {
                    *v = ((uint64_t)k + 1) << 32 | ((*v & 0xffffffffu) + 1);
                }
            }
        }
    }
    return 0;
}

/* Whether a frame (hash h at level lv) tells a member apart.  others NULL:
 * no other member of the group has it (counts, tag: count_frames of all);
 * else none of the members that others counts (tag: count_frames of
 * those) has it. */
static int tells_apart(const u64map *counts, const u64map *others, uint32_t tag, uint32_t lv,
                       uint64_t h)
{
    if (others)
        return !u64map_get(others, tag + lv, h);
    uint64_t *v = u64map_get(counts, tag + lv, h);
    return v && (*v & 0xffffffffu) == 1;
}

/* What tells site s apart (see the top of this file) into suffix ("" when
 * nothing does), by tells_apart(counts, others, tag).  fr: room for the
 * stack's frames. */
static void find_suffix(lab_cache *c, const sm_symtab *t, const lab_site *s, const u64map *counts,
                        const u64map *others, uint32_t tag, const lab_ip **fr, char *suffix,
                        size_t cap)
{
    const sm_stack_rec *st = &t->stacks[s->rep];
    const lab_stack *ls = &c->st[s->rep];
    suffix[0] = '\0';
    for (int i = 0; i < st->depth; i++)
        fr[i] = ip_info(c, t, st->ips[i]);   /* all cached by count_frames */
    if (s->python) {
        /* the first model-code caller outwards, up to the user's line
         * (" from ..."), else the first line inwards (" at ...") */
        for (int i = ls->lf + 1; i <= ls->end && !suffix[0]; i++)
            if (model_code(fr[i], fr[i]->cls) && tells_apart(counts, others, tag, 1, fr[i]->h1))
                snprintf(suffix, cap, " from %s", fr[i]->text);
        for (int i = ls->lf - 1; i >= ls->kf && !suffix[0]; i--)
            if (!fr[i]->autograd && fr[i]->where[0] &&
                tells_apart(counts, others, tag, 1, fr[i]->h1))
                snprintf(suffix, cap, " at %s", fr[i]->where);
        return;
    }
    /* Callers outwards (not the last four frames: process entry, and a
     * stack cut at the depth limit lacks them, which would make them look
     * unique), by name then with file:line; then the library frames
     * between the site and the user's frame. */
    for (int pass = 0; pass < 4 && !suffix[0]; pass++) {
        uint32_t lv = (uint32_t)(pass & 1);
        int out = pass < 2;
        int from = out ? ls->lf + 1 : ls->lf - 1;
        int to = out ? st->depth - 4 : ls->kf - 1;
        for (int i = from; i != to && !suffix[0] && (out ? i < to : i > to); i += out ? 1 : -1)
            if (tells_apart(counts, others, tag, lv, lv ? fr[i]->h1 : fr[i]->h0))
                snprintf(suffix, cap, " %s %s", out ? "from" : "via",
                         tail2(lv ? fr[i]->text : fr[i]->name));
    }
}

/* s's label: its base with suffix put in at s->cut (before a Python
 * site's " <- user.py:N"); the base is shortened when the whole does not
 * fit.  0 ok, -1 out of memory. */
static int set_label(lab_site *s, const char *suffix)
{
    char lab[SM_LABEL_MAX];
    const char *tail = s->base + s->cut;
    size_t hl = s->cut, sl = strlen(suffix), tl = strlen(tail);
    if (sl + tl > SM_LABEL_MAX - 1)
        tl = sl > SM_LABEL_MAX - 1 ? 0 : SM_LABEL_MAX - 1 - sl;
    if (hl + sl + tl > SM_LABEL_MAX - 1)
        hl = SM_LABEL_MAX - 1 - sl - tl;
    snprintf(lab, sizeof lab, "%.*s%.*s%.*s", (int)hl, s->base,
             (int)(SM_LABEL_MAX - 1 - hl), suffix, (int)tl, tail);
    s->label = strdup(lab);
    return s->label ? 0 : -1;
}

/* Gives every site of one group (sites whose labelling frames read the
 * same, g[0..n)) its label: the base, and when n > 1 what tells it apart
 * (see the top of this file).  First, what only that site has; then, for
 * the sites left without (their frames each shared with another site),
 * what none of the sites told apart has, so that the plain name is left
 * only to a site with nothing of its own.  counts: an empty map, used with
 * tags tag to tag + 3.  0 ok, -1 out of memory. */
static int label_group(lab_cache *c, const sm_symtab *t, lab_site **g, size_t n,
                       u64map *counts, uint32_t tag, const lab_ip **fr)
{
    if (n == 1)
        return set_label(g[0], "");
    char suffix[SM_LABEL_MAX];
    uint8_t *found = calloc(n, 1);
    if (!found || count_frames(c, t, g, n, NULL, 0, counts, tag))
        goto err;
    size_t nfound = 0;
    for (size_t k = 0; k < n; k++) {
        find_suffix(c, t, g[k], counts, NULL, tag, fr, suffix, sizeof suffix);
        if (suffix[0]) {
            found[k] = 1;
            nfound++;
            if (set_label(g[k], suffix))
                goto err;
        }
    }
    /* the others: told apart from the sites above (by what none of them
     * has); those that then read the same are one site */
    if (nfound && count_frames(c, t, g, n, found, 1, counts, tag + 2))
        goto err;
    for (size_t k = 0; k < n; k++) {
        if (found[k])
            continue;
        suffix[0] = '\0';
        if (nfound)
            find_suffix(c, t, g[k], counts, counts, tag + 2, fr, suffix, sizeof suffix);
        /* nothing of its own: it reads as the plain name, one site with
         * those that read the same */
        if (set_label(g[k], suffix))
            goto err;
    }
    free(found);
    return 0;
err:
    free(found);
    return -1;
}

/* Builds the labels of every stack of the table.  NULL when out of memory. */
static lab_cache *cache_build(const sm_symtab *t)
{
    lab_cache *c = calloc(1, sizeof *c);
    if (c) {
        c->t = t;
        c->version = t->version;
    }
    int maxd = 1;
    for (size_t s = 0; s < t->nstacks; s++)
        if (t->stacks[s].depth > maxd)
            maxd = t->stacks[s].depth;
    const lab_ip **fr = malloc((size_t)maxd * sizeof *fr);
    uint8_t *cls = malloc((size_t)maxd);
    lab_site **order = NULL;
    u64map counts = {0};
    if (!c || !fr || !cls || !(c->st = calloc(t->nstacks + 1, sizeof *c->st)))
        goto err;
    c->gen = sr_generation();
    for (size_t s = 0; s < t->nstacks; s++) {
        const sm_stack_rec *st = &t->stacks[s];
        lab_stack *ls = &c->st[s];
        *ls = (lab_stack){.kf = 0, .lf = -1, .site = UINT32_MAX};
        if (!st->depth)
            continue;
        /* two loops: a new ip may move c->ips, so pointers only after */
        for (int i = 0; i < st->depth; i++)
            if (!ip_info(c, t, st->ips[i]))
                goto err;
        for (int i = 0; i < st->depth; i++)
            fr[i] = ip_info(c, t, st->ips[i]);
        stack_classes(fr, st->depth, cls);
        int kf = -1, user = -1, pylib = -1, pyskip = -1, notown = -1;
        for (int i = 0; i < st->depth; i++) {
            if (!fr[i]->own && notown < 0)
                notown = i;
            if (fr[i]->own)
                continue;   /* never names a site (label.h), whatever the rules say */
            if (cls[i] != SR_RUNTIME && kf < 0)
                kf = i;
            if (cls[i] == SR_USER && user < 0)
                user = i;
            if (cls[i] == SR_PYLIB && pylib < 0)
                pylib = i;
            if (cls[i] == SR_PYSKIP && pyskip < 0)
                pyskip = i;
        }
        ls->kf = kf < 0 ? 0 : kf;
        /* every frame the runtime's: the innermost that is not ours names it */
        int rt = kf >= 0 ? kf : notown >= 0 ? notown : 0;
        ls->lf = user >= 0 ? user : pylib >= 0 ? pylib : pyskip >= 0 ? pyskip : rt;
        char pbase[SM_LABEL_MAX];
        int plf, pend;
        size_t pcut = 0;
        int python = python_base(fr, cls, st->depth, ls->kf, pbase, sizeof pbase, &plf, &pend,
                                 &pcut);
        ls->end = st->depth - 1;
        if (python) {
            ls->lf = plf;
            ls->end = pend;
        }
        uint64_t key = FNV0;
        for (int i = ls->kf; i <= ls->end; i++)
            for (int b = 0; b < 64; b += 8) {
                unsigned char byte = (unsigned char)(fr[i]->h1 >> b);
                key = msnap_fnv1a(key, &byte, 1);
            }
        uint64_t *v = u64map_get(&c->keyix, 0, key);
        if (v) {
            ls->site = (uint32_t)*v;
            if (st->id < c->sites[*v].min_id)
                c->sites[*v].min_id = st->id;
            continue;
        }
        if (msnap_grow((void **)&c->sites, &c->cap_sites, c->nsites, sizeof *c->sites) ||
            u64map_put(&c->keyix, 0, key, c->nsites))
            goto err;
        c->sites[c->nsites] = (lab_site){.key = key, .rep = s, .min_id = st->id,
                                         .base = fr[ls->lf]->text, .python = python};
        c->sites[c->nsites].cut = python ? pcut : strlen(fr[ls->lf]->text);
        if (python && !(c->sites[c->nsites].base = c->sites[c->nsites].own_base =
                            strdup(pbase)))
            goto err;
        ls->site = (uint32_t)c->nsites++;
    }
    /* Sites in groups of equal base text: each group told apart. */
    order = malloc((c->nsites + 1) * sizeof *order);
    if (!order)
        goto err;
    for (size_t i = 0; i < c->nsites; i++)
        order[i] = &c->sites[i];
    /* the base pointers stay valid: ips no longer grow during sorting */
    qsort(order, c->nsites, sizeof *order, site_cmp);
    const uint32_t tag = 0;
    for (size_t i = 0; i < c->nsites;) {
        size_t j = i + 1;
        while (j < c->nsites && !strcmp(order[j]->base, order[i]->base))
            j++;
        if (label_group(c, t, order + i, j - i, &counts, tag, fr))
            goto err;
        u64map_free(&counts);   /* one group's counts at a time: memory stays small */
        i = j;
    }
    u64map_free(&counts);
    /* Sites whose labels read the same are one (a group each). */
    c->glabel = malloc((c->nsites + 1) * sizeof *c->glabel);
    c->gkey = malloc((c->nsites + 1) * sizeof *c->gkey);
    if (!c->glabel || !c->gkey)
        goto err;
    for (size_t i = 0; i < c->nsites; i++) {
        uint64_t h = fnv(FNV0, c->sites[i].label);
        uint64_t *v = u64map_get(&counts, 0, h);
        if (v) {
            c->sites[i].group = (uint32_t)*v;
            continue;
        }
        if (u64map_put(&counts, 0, h, c->ngroups))
            goto err;
        c->glabel[c->ngroups] = c->sites[i].label;
        c->gkey[c->ngroups] = h;
        c->sites[i].group = (uint32_t)c->ngroups++;
    }
    u64map_free(&counts);
    free(order);
    free(fr);
    free(cls);
    return c;
err:
    u64map_free(&counts);
    free(order);
    free(fr);
    free(cls);
    cache_free(c);
    return NULL;
}

sm_labels *sm_labels_new(const sm_symtab *t, int ring)
{
    lab_cache *c = cache_build(t);
    if (c)
        c->ring = ring;
    return c;
}

void sm_labels_free(sm_labels *l)
{
    cache_free(l);
}

int sm_labels_current(const sm_labels *l)
{
    return l && l->gen == sr_generation() && l->version == l->t->version;
}

/* The labelled stack of an id, NULL when unknown or empty (or l NULL). */
static const lab_stack *stack_of(const sm_labels *l, uint32_t stack)
{
    if (!l || !stack)
        return NULL;
    uint64_t *v = u64map_get(&l->t->stack_map, 0, stack);
    if (!v || l->st[*v].lf < 0)
        return NULL;
    return &l->st[*v];
}

void sm_site_label(const sm_labels *l, uint32_t stack, char *buf, size_t cap)
{
    if (!cap)
        return;
    if (!stack) {
        /* Pre-window allocations known only from a free carry no stack. */
        snprintf(buf, cap, "%s", l && l->ring
                                     ? "(no stack: allocated before the event window)"
                                     : "(no stack)");
        return;
    }
    const lab_stack *ls = stack_of(l, stack);
    if (!ls) {
        snprintf(buf, cap, "stack %" PRIu32, stack);
        return;
    }
    snprintf(buf, cap, "%s", l->sites[ls->site].label);
}

void sm_site_labels(const sm_labels *l, const uint32_t *stacks, int n,
                    char (*labels)[SM_LABEL_MAX])
{
    for (int i = 0; i < n; i++)
        sm_site_label(l, stacks[i], labels[i], SM_LABEL_MAX);
}

int sm_runtime_frames(const sm_labels *l, uint32_t stack)
{
    const lab_stack *ls = stack_of(l, stack);
    return ls ? ls->kf : 0;
}

int sm_frame_passes(const sm_labels *l, uint32_t stack, int i)
{
    if (!l || !stack || i < 0)
        return 0;
    uint64_t *v = u64map_get(&l->t->stack_map, 0, stack);
    if (!v || *v >= l->t->nstacks)
        return 0;
    const sm_stack_rec *st = &l->t->stacks[*v];
    if (i >= st->depth)
        return 0;
    uint64_t *k = u64map_get(&l->ipix, 0, st->ips[i]);
    return k && !l->ips[*k].autograd ? l->ips[*k].passes : 0;
}

uint32_t sm_site_group(const sm_labels *l, uint32_t stack)
{
    const lab_stack *ls = stack_of(l, stack);
    return ls ? l->sites[ls->site].group : UINT32_MAX;
}

uint64_t sm_site_key(const sm_labels *l, uint32_t stack)
{
    const lab_stack *ls = stack_of(l, stack);
    if (ls)
        return l->gkey[l->sites[ls->site].group];
    const char *s = stack ? "unknown stack" : "no stack";
    return fnv(FNV0, s) ^ stack;
}
