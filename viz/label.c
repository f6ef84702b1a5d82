/* Site labels: which frame of a stack names an allocation site, and how
 * that frame is written in a legend (model.h, sm_site_label & co).
 *
 * The rule.  Every stack of a real program starts inside the memory
 * runtime: PyTorch's caching allocator (libc10_cuda: ...ExpandableSegment::
 * map, DeviceCachingAllocator::malloc), cudart's cudaMalloc, the driver,
 * memsnap's own allocator.  Those frames are the same for every site, so a
 * site is named by its first frame OUTSIDE them: the first frame whose
 * module (from the "module" records, whatever the "sym" record says) has a
 * basename starting with none of libcuda., libcudart, libc10_cuda, libc10.,
 * libmemsnap (libmemsnap.so, libmemsnap_alloc) or libmsnap, and whose
 * function is none of the allocators' entry points by name (the caching
 * allocator's namespace, cudaMalloc*, cuMem*, memsnap_* / msnap_*: this
 * catches frames with no module record and an allocator linked statically
 * into the program).  When every frame is inside
 * them, the innermost frame names the site.
 *
 * The name.  "function (file:line)" from the sym record, the function
 * shortened (sm_short_name): demangled when it arrives mangled (_Z...: a
 * recording made before the recorder demangled in-process) and
 * __cxa_demangle is reachable, then without argument list, template
 * arguments, return type, "(anonymous namespace)::" and " [clone ...]".
 * Without a function name: "module+0xoffset", else "0xip".
 *
 * Telling sites apart.  Sites listed together whose labels read the same
 * (every torch.empty reaches at::detail::empty_generic) get the first
 * caller, outwards from the labelling frame, whose name appears in no other
 * stack of that group: "at::detail::empty_generic from at::native::randn";
 * else the first whose "name (file:line)" appears in no other ("mem_alloc
 * (mem.c:96) from kv_reserve (decode.c:88)"); when there is none (two
 * stacks that differ only in an offset inside the allocator), " (stack N)".
 * The last four frames (process entry) are never used.
 */
#include "model.h"

#include <ctype.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- demangling --------------------------------------------------------- */

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static int allow_loading;
static int demangle_tried;
static demangle_fn demangler;

void sm_demangle_allow_loading(int allow)
{
    allow_loading = allow;
    if (allow && demangle_tried && !demangler)
        demangle_tried = 0;   /* look again, now allowed to load */
}

static demangle_fn get_demangler(void)
{
    if (demangle_tried)
        return demangler;
    demangle_tried = 1;
    demangler = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!demangler) {
        int flags = RTLD_LAZY | RTLD_LOCAL | (allow_loading ? 0 : RTLD_NOLOAD);
        void *h = dlopen("libstdc++.so.6", flags);
        if (h)
            demangler = (demangle_fn)dlsym(h, "__cxa_demangle");
        /* the handle stays open: the demangler lives in it */
    }
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

/* ---- which frame names the site ----------------------------------------- */

/* Whether frame f is inside the memory runtime / allocator libraries. */
static int in_runtime(const sm_frame_info *f)
{
    if (f->module[0]) {
        const char *b = sm_base_name(f->module);
        static const char *libs[] = {"libcuda.", "libcudart", "libc10_cuda",
                                     "libc10.", "libmemsnap", "libmsnap"};
        for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
            if (!strncmp(b, libs[i], strlen(libs[i])))
                return 1;
    }
    /* By name: frames without a module record, and the allocators when
     * they are linked into the program itself (memsnap_alloc_* in a static
     * binary). */
    const char *fn = f->fn;
    static const char *names[] = {
        "c10::cuda::CUDACachingAllocator::", "_ZN3c104cuda20CUDACachingAllocator",
        "cudaMalloc", "cuMem", "memsnap_", "msnap_"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(fn, names[i], strlen(names[i])))
            return 1;
    return 0;
}

/* Index of the frame that names the stack's site; -1 for an unknown stack. */
static int label_frame(const sm_model *m, uint32_t stack)
{
    sm_frame_info f;
    int depth = sm_frame_get(m, stack, 0, &f);
    if (!depth)
        return -1;
    for (int i = 0; i < depth; i++) {
        sm_frame_get(m, stack, i, &f);
        if (!in_runtime(&f))
            return i;
    }
    return 0;
}

/* The name of frame i without addresses: short function, else
 * module+0xoff, else 0xip. */
static void frame_name(const sm_model *m, uint32_t stack, int i, char *buf,
                       size_t cap)
{
    sm_frame_info f;
    sm_frame_get(m, stack, i, &f);
    if (f.fn[0])
        sm_short_name(f.fn, buf, cap);
    else if (f.module[0])
        snprintf(buf, cap, "%s+0x%" PRIx64, sm_base_name(f.module),
                 f.ip - f.module_base);
    else
        snprintf(buf, cap, "0x%" PRIx64, f.ip);
}

/* Frame i written for a legend: "short_fn (file:line)" etc. */
static void frame_label(const sm_model *m, uint32_t stack, int i, char *buf,
                        size_t cap)
{
    sm_frame_info f;
    sm_frame_get(m, stack, i, &f);
    char fn[SM_LABEL_MAX];
    frame_name(m, stack, i, fn, sizeof fn);
    if (f.fn[0] && f.file[0] && f.line)
        snprintf(buf, cap, "%s (%s:%d)", fn, sm_base_name(f.file), f.line);
    else if (f.fn[0] && f.file[0])
        snprintf(buf, cap, "%s (%s)", fn, sm_base_name(f.file));
    else
        snprintf(buf, cap, "%s", fn);
}

void sm_site_label(const sm_model *m, uint32_t stack, char *buf, size_t cap)
{
    if (!stack) {
        /* Pre-window allocations known only from a free carry no stack. */
        snprintf(buf, cap, "%s", sm_ring_mode(m)
                                     ? "(no stack: allocated before the event window)"
                                     : "(no stack)");
        return;
    }
    int i = label_frame(m, stack);
    if (i < 0) {
        snprintf(buf, cap, "stack %" PRIu32, stack);
        return;
    }
    frame_label(m, stack, i, buf, cap);
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

/* The frame names of a stack, computed once per sm_site_labels call. */
typedef struct named_stack {
    int lf, depth;
    char (*names)[SM_LABEL_MAX];   /* [2 * depth]: function names, then with file:line */
} named_stack;

static void name_stack(const sm_model *m, uint32_t stack, named_stack *ns)
{
    sm_frame_info f;
    ns->lf = stack ? label_frame(m, stack) : -1;
    ns->depth = stack ? sm_frame_get(m, stack, 0, &f) : 0;
    ns->names = ns->depth ? malloc((size_t)ns->depth * 2 * SM_LABEL_MAX) : NULL;
    if (!ns->names)
        ns->depth = 0;
    for (int i = 0; i < ns->depth; i++) {
        frame_name(m, stack, i, ns->names[i], SM_LABEL_MAX);
        frame_label(m, stack, i, ns->names[ns->depth + i], SM_LABEL_MAX);
    }
}

/* Whether the stack has a frame of this name (level 0: function names,
 * level 1: with file:line). */
static int has_name(const named_stack *ns, const char *name, int level)
{
    for (int i = 0; i < ns->depth; i++)
        if (!strcmp(ns->names[level * ns->depth + i], name))
            return 1;
    return 0;
}

void sm_site_labels(const sm_model *m, const uint32_t *stacks, int n,
                    char (*labels)[SM_LABEL_MAX])
{
    for (int i = 0; i < n; i++)
        sm_site_label(m, stacks[i], labels[i], SM_LABEL_MAX);
    int *group = malloc(((size_t)n + 1) * sizeof *group);
    named_stack *ns = calloc((size_t)n + 1, sizeof *ns);
    if (!group || !ns) {
        free(group);
        free(ns);
        return;
    }
    /* group[i]: index of the first label equal to labels[i]. */
    int any = 0;
    for (int i = 0; i < n; i++) {
        group[i] = i;
        for (int j = 0; j < i; j++)
            if (!strcmp(labels[i], labels[j])) {
                group[i] = group[j];
                any = 1;
                break;
            }
    }
    if (!any) {
        free(group);
        free(ns);
        return;
    }
    int *shared = calloc((size_t)n + 1, sizeof *shared);
    for (int i = 0; shared && i < n; i++)
        for (int j = 0; j < n; j++)
            if (j != i && group[j] == group[i])
                shared[i] = 1;
    for (int i = 0; shared && i < n; i++)
        if (shared[i])
            name_stack(m, stacks[i], &ns[i]);
    for (int k = 0; shared && k < n; k++) {
        if (!shared[k])
            continue;
        char suffix[SM_LABEL_MAX] = "";
        /* Callers from the labelling frame outwards, not the last few
         * (process entry: main, _start...; and a stack cut at the depth
         * limit lacks them, which would make them look unique). */
        /* First by function names; then with file:line (one function
         * calling the allocator from two lines). */
        for (int level = 0; level < 2 && !suffix[0]; level++)
            for (int fi = ns[k].lf + (level ? 0 : 1);
                 ns[k].lf >= 0 && fi < ns[k].depth - 4 && !suffix[0]; fi++) {
                const char *name = ns[k].names[level * ns[k].depth + fi];
                int unique = 1;
                for (int o = 0; o < n && unique; o++)
                    if (o != k && group[o] == group[k] && stacks[o] != stacks[k] &&
                        has_name(&ns[o], name, level))
                        unique = 0;
                if (unique && fi == ns[k].lf)
                    unique = 0;   /* the label already shows this frame's line */
                if (unique)
                    snprintf(suffix, sizeof suffix, " from %s", tail2(name));
            }
        if (!suffix[0])
            snprintf(suffix, sizeof suffix, " (stack %" PRIu32 ")", stacks[k]);
        size_t sl = strlen(suffix), bl = strlen(labels[k]);
        if (sl > SM_LABEL_MAX - 1)
            sl = SM_LABEL_MAX - 1;
        if (bl + sl > SM_LABEL_MAX - 1)
            bl = SM_LABEL_MAX - 1 - sl;
        memcpy(labels[k] + bl, suffix, sl);
        labels[k][bl + sl] = '\0';
    }
    for (int i = 0; i < n; i++)
        free(ns[i].names);
    free(shared);
    free(group);
    free(ns);
}

uint64_t sm_site_key(const sm_model *m, uint32_t stack)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    int lf = stack ? label_frame(m, stack) : -1;
    if (lf < 0) {
        const char *s = stack ? "unknown stack" : "no stack";
        for (; *s; s++)
            h = (h ^ (uint8_t)*s) * 1099511628211ull;
        return h ^ (stack ? stack : 0);
    }
    sm_frame_info f;
    int depth = sm_frame_get(m, stack, 0, &f);
    char name[SM_LABEL_MAX];
    for (int i = lf; i < depth; i++) {
        frame_label(m, stack, i, name, sizeof name);
        for (const char *s = name; *s; s++)
            h = (h ^ (uint8_t)*s) * 1099511628211ull;
        h = (h ^ '\n') * 1099511628211ull;
    }
    return h;
}
