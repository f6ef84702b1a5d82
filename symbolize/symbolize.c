/* memsnap symbolizer: instruction pointers -> function, file:line, offline or
 * in-process, with elfutils libdwfl.  symbolize/symbolize.h is the
 * contract; this file is the mechanics.
 *
 * State:
 *   - one Dwfl session holding every reported module (ELF file + bias);
 *   - a per-IP cache (open addressing, linear probing, never shrinks) keyed
 *     by (ip, is_return_address): an entry holds the whole answer, so a
 *     repeated IP costs one hash probe;
 *   - a string pool: every name/file returned is interned once and owned by
 *     the symbolizer, so callers can keep the pointers until _free.
 *
 * Modules are reported with dwfl_report_elf(base = load bias): for ET_DYN
 * files (shared objects, PIE executables) the bias is where the file sits,
 * for ET_EXEC the file's own addresses are used and base is ignored.
 */
#define _GNU_SOURCE
#include "symbolize.h"
#include "util/hash.h"

#include <dlfcn.h>
#include <elf.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One cached answer.  key = ip * 2 + is_return_address; used says the slot
 * is taken (ip 0 with flag 0 is a legal key). */
typedef struct sym_entry {
    uint64_t key;
    const char *function; /* interned, "" when unknown */
    const char *file;     /* interned, "" when unknown */
    uint64_t offset;
    int line;
    int found;            /* 1: a function name was found */
    int used;
} sym_entry;

/* Interned strings: open-addressing set of owned copies. */
typedef struct str_pool {
    char **slots;
    size_t cap, n;        /* cap is a power of two, n < cap / 2 */
} str_pool;

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static int allow_loading;      /* msnap_symbolizer_allow_loading */

struct msnap_symbolizer {
    Dwfl *dwfl;
    sym_entry *cache;
    size_t cache_cap, cache_n; /* power of two; n < cap / 2 */
    str_pool strings;
    demangle_fn demangle;      /* __cxa_demangle when in the process */
    void *libstdcxx;           /* dlopen handle that gave demangle, or NULL */
    char err[512];
    int err_kind;              /* MSNAP_SYM_ERR_* of the last add_module error */
};

static char *debuginfo_path_; /* NULL: elfutils' default search path */

static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path_,
};

/* 64-bit mix (splitmix64 finaliser): spreads IPs that differ in low bits. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t hash_str(const char *s)
{
    return msnap_fnv1a_str(MSNAP_FNV_BASIS, s);
}

/* Returns the pool's copy of s (s itself is not kept); "" for NULL/"".
 * NULL only when out of memory. */
static const char *pool_intern(str_pool *p, const char *s)
{
    if (!s || !*s)
        return "";
    if ((p->n + 1) * 2 > p->cap) {
        size_t ncap = p->cap ? p->cap * 2 : 256;
        char **ns = calloc(ncap, sizeof *ns);
        if (!ns)
            return NULL;
        for (size_t i = 0; i < p->cap; i++) {
            if (!p->slots[i])
                continue;
            size_t j = hash_str(p->slots[i]) & (ncap - 1);
            while (ns[j])
                j = (j + 1) & (ncap - 1);
            ns[j] = p->slots[i];
        }
        free(p->slots);
        p->slots = ns;
        p->cap = ncap;
    }
    size_t i = hash_str(s) & (p->cap - 1);
    while (p->slots[i]) {
        if (strcmp(p->slots[i], s) == 0)
            return p->slots[i];
        i = (i + 1) & (p->cap - 1);
    }
    p->slots[i] = strdup(s);
    if (!p->slots[i])
        return NULL;
    p->n++;
    return p->slots[i];
}

/* Frees every interned string and the table. */
static void pool_free(str_pool *p)
{
    for (size_t i = 0; i < p->cap; i++)
        free(p->slots[i]);
    free(p->slots);
    memset(p, 0, sizeof *p);
}

msnap_symbolizer *msnap_symbolizer_new(void)
{
    msnap_symbolizer *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->dwfl = dwfl_begin(&offline_callbacks);
    if (!s->dwfl) {
        free(s);
        return NULL;
    }
    s->demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!s->demangle) {
        /* libstdc++ may be loaded in a local scope (PyTorch's extensions are
         * dlopen'ed RTLD_LOCAL); the CLI may also load it.  The recorder never
         * loads a library into the program it records. */
        int flags = RTLD_LAZY | RTLD_LOCAL | (allow_loading ? 0 : RTLD_NOLOAD);
        s->libstdcxx = dlopen("libstdc++.so.6", flags);
        if (s->libstdcxx)
            s->demangle = (demangle_fn)dlsym(s->libstdcxx, "__cxa_demangle");
    }
    return s;
}

void msnap_symbolizer_allow_loading(int allow)
{
    allow_loading = allow;
}

const char *msnap_symbolizer_error(const msnap_symbolizer *s)
{
    return s ? s->err : "";
}

int msnap_symbolizer_error_kind(const msnap_symbolizer *s)
{
    return s && s->err[0] ? s->err_kind : 0;
}

/* Opens path for reading if it is a regular file: never blocks (a FIFO or
 * a device named in a recording is refused, not waited on).  The fd, or -1
 * with errno (EINVAL: not a regular file). */
static int open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* Reads the GNU build-id of the ELF file open at fd as lowercase hex into
 * out.  Returns its length in hex digits, 0 when the file has none, -1
 * when it is not ELF. */
static int file_build_id(int fd, char *out, size_t cap)
{
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    int n = -1;
    if (elf && elf_kind(elf) == ELF_K_ELF) {
        const void *id = NULL;
        ssize_t len = dwelf_elf_gnu_build_id(elf, &id);
        n = 0;
        for (ssize_t i = 0; i < len && (size_t)(2 * i + 2) < cap; i++, n += 2)
            snprintf(out + 2 * i, 3, "%02x", ((const unsigned char *)id)[i]);
    }
    if (n >= 0 && cap)
        out[n < (int)cap ? n : (int)cap - 1] = '\0';
    if (elf)
        elf_end(elf);
    return n;
}

int msnap_symbolizer_add_module(msnap_symbolizer *s, const char *path,
                                uint64_t base, uint64_t size,
                                const char *build_id)
{
    (void)size;
    if (!s || !path || !*path)
        return -1;
    s->err[0] = '\0';
    s->err_kind = 0;
    char have[129];
    errno = 0;
    int fd = open_regular(path);
    if (fd < 0) {
        int e = errno;
        s->err_kind = e == ENOENT || e == ENOTDIR ? MSNAP_SYM_ERR_MISSING : MSNAP_SYM_ERR_UNUSABLE;
        snprintf(s->err, sizeof s->err, "%s: %s", path,
                 e == EINVAL ? "not a regular file" : strerror(e));
        return -1;
    }
    int n = file_build_id(fd, have, sizeof have);
    if (n < 0) {
        close(fd);
        s->err_kind = MSNAP_SYM_ERR_UNUSABLE;
        snprintf(s->err, sizeof s->err, "%s: cannot read ELF file: not an ELF file", path);
        return -1;
    }
    if (build_id && *build_id && n > 0 && strcasecmp(build_id, have) != 0) {
        close(fd);
        s->err_kind = MSNAP_SYM_ERR_CHANGED;
        snprintf(s->err, sizeof s->err,
                 "%s: build-id %s differs from the recorded %s (the file "
                 "changed since the recording); its frames stay unresolved",
                 path, have, build_id);
        return -1;
    }
    /* libdwfl takes the fd we checked (it closes it) */
    dwfl_report_begin_add(s->dwfl);
    Dwfl_Module *m = dwfl_report_elf(s->dwfl, path, path, fd, base, false);
    dwfl_report_end(s->dwfl, NULL, NULL);
    if (!m) {
        s->err_kind = MSNAP_SYM_ERR_UNUSABLE;
        snprintf(s->err, sizeof s->err, "%s: %s", path, dwfl_errmsg(-1));
        return -1;
    }
    return 0;
}

/* A module of the current process, copied out of dl_iterate_phdr so that
 * libdwfl (which may dlopen debuginfod) runs after the loader lock is
 * released. */
typedef struct self_mod {
    char *path, *build_id;
    uint64_t base, size;
} self_mod;

typedef struct self_list {
    self_mod *v;
    size_t n, cap;
} self_list;

/* msnap_self_modules callback: appends a copy of *m.  -1 when out of
 * memory (stops the walk). */
static int collect_self(const msnap_module *m, void *ctx)
{
    self_list *l = ctx;
    if (l->n == l->cap) {
        size_t ncap = l->cap ? 2 * l->cap : 32;
        self_mod *nv = realloc(l->v, ncap * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = ncap;
    }
    self_mod *d = &l->v[l->n];
    d->path = strdup(m->path);
    d->build_id = strdup(m->build_id);
    d->base = m->base;
    d->size = m->size;
    if (!d->path || !d->build_id) {
        free(d->path);
        free(d->build_id);
        return -1;
    }
    l->n++;
    return 0;
}

int msnap_symbolizer_add_self(msnap_symbolizer *s)
{
    if (!s)
        return -1;
    self_list l = {0};
    int rc = msnap_self_modules(collect_self, &l);
    int added = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (msnap_symbolizer_add_module(s, l.v[i].path, l.v[i].base,
                                        l.v[i].size, l.v[i].build_id) == 0)
            added++;
        free(l.v[i].path);
        free(l.v[i].build_id);
    }
    free(l.v);
    return rc ? -1 : added;
}

/* Grows the cache when half full.  0 ok, -1 out of memory. */
static int cache_grow(msnap_symbolizer *s)
{
    if ((s->cache_n + 1) * 2 <= s->cache_cap)
        return 0;
    size_t ncap = s->cache_cap ? s->cache_cap * 2 : 1024;
    sym_entry *nc = calloc(ncap, sizeof *nc);
    if (!nc)
        return -1;
    for (size_t i = 0; i < s->cache_cap; i++) {
        if (!s->cache[i].used)
            continue;
        size_t j = mix64(s->cache[i].key) & (ncap - 1);
        while (nc[j].used)
            j = (j + 1) & (ncap - 1);
        nc[j] = s->cache[i];
    }
    free(s->cache);
    s->cache = nc;
    s->cache_cap = ncap;
    return 0;
}

/* Fills e (key already set) by asking libdwfl about ip. */
static void lookup(msnap_symbolizer *s, uint64_t ip, int ra, sym_entry *e)
{
    uint64_t addr = ra && ip ? ip - 1 : ip;
    e->function = e->file = "";
    Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, addr);
    if (!mod)
        return;
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name =
        dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
    if (name && *name) {
        char *dem = NULL;
        if (s->demangle && name[0] == '_' && name[1] == 'Z') {
            int status = -1;
            dem = s->demangle(name, NULL, NULL, &status);
            if (status != 0) {
                free(dem);
                dem = NULL;
            }
        }
        const char *in = pool_intern(&s->strings, dem ? dem : name);
        free(dem);
        if (in) {
            e->function = in;
            e->found = 1;
            e->offset = off + (uint64_t)(addr != ip);
        }
    }
    Dwfl_Line *line = dwfl_module_getsrc(mod, addr);
    if (line) {
        int lineno = 0;
        const char *file =
            dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
        const char *in = pool_intern(&s->strings, file);
        if (in) {
            e->file = in;
            e->line = lineno;
        }
    }
}

int msnap_symbolizer_resolve_frame(msnap_symbolizer *s, uint64_t ip,
                                   int is_return_address, msnap_symbol *out)
{
    if (!s || !out)
        return -1;
    int ra = is_return_address ? 1 : 0;
    uint64_t key = ip * 2 + (uint64_t)ra;
    sym_entry tmp = {.key = key};
    sym_entry *e = &tmp;
    if (cache_grow(s) == 0) {
        size_t i = mix64(key) & (s->cache_cap - 1);
        while (s->cache[i].used && s->cache[i].key != key)
            i = (i + 1) & (s->cache_cap - 1);
        e = &s->cache[i];
        if (!e->used) {
            e->key = key;
            lookup(s, ip, ra, e);
            e->used = 1;
            s->cache_n++;
        }
    } else {
        lookup(s, ip, ra, e); /* out of memory: answer without caching */
    }
    out->ip = ip;
    out->function = e->function;
    out->file = e->file;
    out->line = e->line;
    out->offset = e->offset;
    return e->found;
}

int msnap_symbolizer_resolve(msnap_symbolizer *s, uint64_t ip,
                             msnap_symbol *out)
{
    return msnap_symbolizer_resolve_frame(s, ip, 0, out);
}

void msnap_symbolizer_free(msnap_symbolizer *s)
{
    if (!s)
        return;
    if (s->dwfl)
        dwfl_end(s->dwfl);
    free(s->cache);
    pool_free(&s->strings);
    if (s->libstdcxx)
        dlclose(s->libstdcxx);
    free(s);
}

