/* PyTorch's allocated layer: finding PyTorch, loading the plugin, and the
 * entry point its trace tracker calls.
 *
 * PyTorch's CUDA caching allocator hands out blocks from segments it got from
 * the driver; the hooks see only the segments.  Its trace tracker
 * (c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker) calls a
 * function for every block alloc, free, segment change and OOM whether or
 * not PyTorch's own history is on.  Attaching one needs C++ against the exact
 * libc10_cuda.so of the process, so it lives in a plugin
 * (libmemsnap_torch-<build-id>.so, torch/memsnap_torch.cpp) built either with
 * memsnap (CMake option MEMSNAP_TORCH) or at first use (`memsnap
 * torch-setup`), and named by the GNU build-id of the libc10_cuda.so it was
 * compiled against.
 *
 * When: the device allocators exist only after PyTorch's lazy init, and the
 * tracker list of each is guarded by that device's recursive mutex, which
 * PyTorch holds during its own cudaMalloc.  So the recorder attaches from the
 * hook of a driver allocation (cuMemAlloc_v2, cuMemAddressReserve,
 * cuMemCreate) whose stack runs through libc10_cuda.so: that thread already
 * holds the mutex (recursive, so attaching does not block on it), the
 * allocator is initialized, and the block that the allocation serves is
 * traced after the driver call returns, so it is recorded too.  One thread
 * at a time tries (a compare-and-swap to BUSY); others never wait for it.
 *
 * The version rule: the plugin is loaded only when its name and its own
 * memsnap_torch_build_id() both carry the build-id of the libc10_cuda.so
 * loaded in the process.  Otherwise one line on stderr and the driver level
 * only, as before.  Searched, in order: $MEMSNAP_TORCH_PLUGIN_DIR, the folder
 * of libmemsnap.so, ${XDG_CACHE_HOME:-$HOME/.cache}/memsnap/torch.
 *
 * MEMSNAP_TORCH: "auto" (default) or "off" (never look for PyTorch).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memsnap/memsnap.h"
#include "modrange.h"
#include "recorder.h"
#include "stacks.h"
#include "torch.h"

enum { T_PENDING = 0, T_BUSY = 1, T_ATTACHED = 2, T_DONE = 3 };
_Atomic int g_torch_state;          /* T_* */

static unsigned long long seen_adds;     /* dlpi_adds at the last look for libc10_cuda */
static uintptr_t c10_lo, c10_hi;          /* libc10_cuda.so's mapped range, 0 = not found */
static char c10_path[1024];
static char c10_build_id[129];            /* hex */

/* ---- finding libc10_cuda.so ---------------------------------------------- */

/* Hex of the NT_GNU_BUILD_ID note among info's PT_NOTE segments into out
 * (cap >= 129); "" when there is none. */
static void note_build_id(const struct dl_phdr_info *info, char *out, size_t cap)
{
    out[0] = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const unsigned char *name = p + sizeof *nh;
            const unsigned char *desc = name + ((nh->n_namesz + 3u) & ~3u);
            const unsigned char *next = desc + ((nh->n_descsz + 3u) & ~3u);
            if (next > end)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                memcmp(name, "GNU", 4) == 0 && nh->n_descsz * 2 < cap) {
                for (unsigned j = 0; j < nh->n_descsz; j++)
                    snprintf(out + 2 * j, 3, "%02x", desc[j]);
                return;
            }
            p = next;
        }
    }
}

/* dl_iterate_phdr callback: stops at once when nothing was loaded since the
 * last look (the first entry carries the counter); else fills c10_* when it
 * meets libc10_cuda.so. */
static int find_c10(struct dl_phdr_info *info, size_t size, void *arg)
{
    int *first = arg;
    if (*first) {
        *first = 0;
        if (size >= offsetof(struct dl_phdr_info, dlpi_subs) && info->dlpi_adds == seen_adds)
            return 1;
        if (size >= offsetof(struct dl_phdr_info, dlpi_subs))
            seen_adds = info->dlpi_adds;
    }
    const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    const char *base = slash ? slash + 1 : info->dlpi_name;
    if (!base || strcmp(base, "libc10_cuda.so") != 0)
        return 0;
    uintptr_t lo, hi;
    rec_module_extent(info, &lo, &hi);
    snprintf(c10_path, sizeof c10_path, "%s", info->dlpi_name);
    note_build_id(info, c10_build_id, sizeof c10_build_id);
    c10_lo = lo;
    c10_hi = hi;
    return 1;
}

/* 1 when a frame of the calling thread's stack is in libc10_cuda.so. */
static int called_from_c10(void)
{
    /* No unwinder of ours (--stack-depth 0, or libmemsnap_stacks.so not
     * loaded): the C library's backtrace() (libgcc's unwinder, which a
     * C++ program has loaded anyway), only until the plugin is attached.
     * Before, such a run never attached it and recorded no PyTorch block
     * at all.  The plugin must be attached from c10's own allocations:
     * from another thread's, c10's allocator could be half made. */
    void *raw[48];
    int n = g_stacks_api ? stacks_backtrace(raw, 48) : backtrace(raw, 48);
    for (int i = 0; i < n; i++) {
        uintptr_t a = (uintptr_t)raw[i];
        if (a >= c10_lo && a < c10_hi)
            return 1;
    }
    return 0;
}

/* PyTorch's version from torch/version.py next to torch/lib/libc10_cuda.so,
 * into out; "?" when it cannot be read. */
static void torch_version(char *out, size_t cap)
{
    snprintf(out, cap, "?");
    char path[1100];
    snprintf(path, sizeof path, "%s", c10_path);
    char *slash = strrchr(path, '/');
    if (!slash)
        return;
    *slash = 0;                                   /* .../torch/lib */
    slash = strrchr(path, '/');
    if (!slash)
        return;
    snprintf(slash, sizeof path - (size_t)(slash - path), "/version.py");
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char *q;
        if (strncmp(line, "__version__", 11) != 0 || !(q = strchr(line, '\'')))
            continue;
        char *e = strchr(q + 1, '\'');
        if (e && (size_t)(e - q - 1) < cap) {
            memcpy(out, q + 1, (size_t)(e - q - 1));
            out[e - q - 1] = 0;
        }
        break;
    }
    fclose(f);
}

/* ---- the plugin ---------------------------------------------------------- */

typedef const char *(*build_id_fn)(void);
typedef int (*attach_fn)(memsnap_trace_torch_fn fn, char *msg, size_t msglen);
typedef int (*attach2_fn)(const memsnap_torch_api *api, char *msg, size_t msglen);

static void *plugin;                 /* dlopen handle, kept once loaded */
static attach_fn plugin_attach;      /* memsnap_torch_attach: every plugin has it */
static attach2_fn plugin_attach2;    /* memsnap_torch_attach2: plugins of format 1.2 */
static char plugin_path[4096];

/* Folder of libmemsnap.so into out; "" when unknown. */
static void own_dir(char *out, size_t cap)
{
    Dl_info di;
    out[0] = 0;
    if (!dladdr((void *)&own_dir, &di) || !di.dli_fname)
        return;
    snprintf(out, cap, "%s", di.dli_fname);
    char *slash = strrchr(out, '/');
    if (slash)
        *slash = 0;
    else
        out[0] = 0;
}

/* Loads libmemsnap_torch-<build-id>.so from the first folder that has one
 * whose memsnap_torch_build_id() agrees.  0, or -1 (nothing loaded). */
static int load_plugin(void)
{
    char dirs[3][1024];
    const char *e = getenv("MEMSNAP_TORCH_PLUGIN_DIR");
    snprintf(dirs[0], sizeof dirs[0], "%s", e ? e : "");
    own_dir(dirs[1], sizeof dirs[1]);
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(dirs[2], sizeof dirs[2], "%s/memsnap/torch", xdg);
    else if (home && *home)
        snprintf(dirs[2], sizeof dirs[2], "%s/.cache/memsnap/torch", home);
    else
        dirs[2][0] = 0;
    for (int i = 0; i < 3; i++) {
        if (!dirs[i][0])
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/libmemsnap_torch-%s.so", dirs[i], c10_build_id);
        if (access(path, R_OK) != 0)
            continue;
        void *h = core_dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            continue;
        build_id_fn bid = (build_id_fn)dlsym(h, "memsnap_torch_build_id");
        attach_fn at = (attach_fn)dlsym(h, "memsnap_torch_attach");
        if (bid && at && strcmp(bid(), c10_build_id) == 0) {
            plugin = h;
            plugin_attach = at;
            plugin_attach2 = (attach2_fn)dlsym(h, "memsnap_torch_attach2");
            snprintf(plugin_path, sizeof plugin_path, "%s", path);
            return 0;
        }
        core_dlclose(h);
    }
    return -1;
}

/* Attaches the loaded plugin's tracker with the settings' interface: the
 * plugin's own return code (memsnap_torch_attach2), msg its reason. */
static pthread_once_t ws_once;
static void ws_sizes_once(void);

static int attach_tracker(char *msg, size_t cap)
{
    static memsnap_torch_api api;
    pthread_once(&ws_once, ws_sizes_once);   /* before the tracker's first event */
    if (!plugin_attach2)
        return plugin_attach(memsnap_trace_torch, msg, cap);
    api = (memsnap_torch_api){sizeof(memsnap_torch_api),
                              (g_cfg.torch_nodes ? MEMSNAP_TORCH_API_NODES : 0u) |
                                  (g_cfg.torch_free_requested ? 0u
                                                              : MEMSNAP_TORCH_API_NO_FREE_REQUESTED) |
                                  MEMSNAP_TORCH_API_POOL_KINDS,
                              memsnap_trace_torch2, memsnap_torch_node_id};
    return plugin_attach2(&api, msg, cap);
}

/* One look for PyTorch, on the thread in a driver-allocation hook.  Returns
 * the next state. */
static int try_attach(void)
{
    int first = 1;
    dl_iterate_phdr(find_c10, &first);
    if (!c10_hi || !called_from_c10())
        return T_PENDING;          /* not PyTorch, or not its allocator yet */
    char ver[64];
    if (!plugin) {
        if (!c10_build_id[0] || load_plugin() != 0) {
            torch_version(ver, sizeof ver);
            fprintf(stderr,
                    "memsnap: PyTorch %s found but no matching plugin (libmemsnap_torch-%s.so; "
                    "build it with: memsnap torch-setup); recording the driver level only\n",
                    ver, c10_build_id[0] ? c10_build_id : "(no build-id)");
            return T_DONE;
        }
    }
    char msg[256] = "";
    int rc = attach_tracker(msg, sizeof msg);
    if (rc == 0 && !plugin_attach2 && !g_cfg.quiet)
        fprintf(stderr,
                "memsnap: %s predates this recorder: PyTorch's blocks get the requested sizes "
                "and no autograd nodes (rebuild it with: memsnap torch-setup)\n",
                plugin_path);
    if (rc == 0)
        return T_ATTACHED;
    if (rc > 0)
        return T_PENDING;          /* allocator not initialized yet */
    if (rc == -2)
        return T_DONE;             /* another backend: its blocks are not PyTorch's to trace */
    torch_version(ver, sizeof ver);
    fprintf(stderr, "memsnap: PyTorch %s: %s; recording the driver level only\n", ver,
            msg[0] ? msg : "the plugin could not attach");
    return T_DONE;
}

/* In-process (inproc.c, memsnap_record_torch): finds libc10_cuda.so among
 * the loaded libraries now and loads the plugin for it; with attach, also
 * attaches its tracker (once per process: PyTorch has no way to detach
 * one, and the tracker sends nothing while no recording runs).  Called on
 * a thread that holds no allocator mutex.  0 done (attached, or the plugin
 * loaded when !attach); 1 the allocator is not initialized yet (attach
 * later: PyTorch's CUDA init); -1 no libc10_cuda.so in the process; -2 no
 * matching plugin; -3 another allocator backend is in charge; -4 the
 * plugin could not attach.  msg: one line for -1..-4. */
int torch_inproc(int attach, char *msg, size_t cap)
{
    msg[0] = 0;
    int st = atomic_load(&g_torch_state);
    if (st == T_ATTACHED)
        return 0;
    if (st == T_BUSY || !atomic_compare_exchange_strong(&g_torch_state, &st, T_BUSY))
        return 1;                  /* another thread is at it: not yet */
    int first = 1, rc = 0, next = T_PENDING;
    char ver[64];
    dl_iterate_phdr(find_c10, &first);
    if (!c10_hi) {
        snprintf(msg, cap, "PyTorch's CUDA library (libc10_cuda.so) is not loaded in this "
                 "process: no PyTorch with CUDA here");
        rc = -1;
    } else if (!plugin && (!c10_build_id[0] || load_plugin() != 0)) {
        torch_version(ver, sizeof ver);
        snprintf(msg, cap, "PyTorch %s has no matching plugin (libmemsnap_torch-%s.so; build it "
                 "with: memsnap torch-setup)", ver, c10_build_id[0] ? c10_build_id : "(no build-id)");
        rc = -2;
    } else if (attach) {
        char why[256] = "";
        int r = attach_tracker(why, sizeof why);
        torch_version(ver, sizeof ver);
        if (r == 0) {
            next = T_ATTACHED;
        } else if (r > 0) {
            rc = 1;
        } else if (r == -2) {
            snprintf(msg, cap, "PyTorch %s: %s", ver, why[0] ? why : "another allocator backend");
            rc = -3;
        } else {
            snprintf(msg, cap, "PyTorch %s: %s", ver, why[0] ? why : "the plugin could not attach");
            rc = -4;
        }
    }
    atomic_store(&g_torch_state, next);
    return rc;
}

void torch_on_driver_alloc_slow(void)
{
    int expect = T_PENDING;
    if (!atomic_compare_exchange_strong(&g_torch_state, &expect, T_BUSY))
        return;                    /* another thread is looking: never wait for it */
    if (g_cfg.torch_off) {
        atomic_store(&g_torch_state, T_DONE);
        return;
    }
    atomic_store(&g_torch_state, try_attach());
}

/* ---- the entry point ----------------------------------------------------- */

/* Frames of ours above the plugin's callback: core_capture_stack_n and
 * memsnap_trace_torch[2] (torch_stack and torch_event are inlined), one
 * spare. */
#define TORCH_OWN_FRAMES 3

MSNAP_HOT_DATA static uint16_t torch_action[9] = {
    [MEMSNAP_TORCH_ALLOC] = MSNAP_A_BLOCK_ALLOC,
    [MEMSNAP_TORCH_FREE_REQUESTED] = MSNAP_A_BLOCK_FREE_REQUESTED,
    [MEMSNAP_TORCH_FREE_COMPLETED] = MSNAP_A_BLOCK_FREE,
    [MEMSNAP_TORCH_SEGMENT_ALLOC] = MSNAP_A_SEGMENT_ALLOC,
    [MEMSNAP_TORCH_SEGMENT_FREE] = MSNAP_A_SEGMENT_FREE,
    [MEMSNAP_TORCH_SEGMENT_MAP] = MSNAP_A_SEGMENT_MAP,
    [MEMSNAP_TORCH_SEGMENT_UNMAP] = MSNAP_A_SEGMENT_UNMAP,
    [MEMSNAP_TORCH_OOM] = MSNAP_A_OOM,
};
/* memsnap_bench_selftime: each event's stack and queue timed (benchmarks) */
MSNAP_HOT_DATA static int torch_selftime;

/* cuBLAS's workspaces.  PyTorch gives each cuBLAS handle and stream a
 * workspace from its caching allocator (at::cuda::getNewWorkspace, inside
 * the first matmul on that stream: a profiling pass's, or the backward's
 * first on the autograd thread), which lives to the end.  On a thread with
 * Python frames an allocation keeps no native frames, so nothing would
 * tell such a block from the model's own: it was counted as parameters
 * (made before the first step, alive past the last) or gradients (made in
 * the backward and kept), 32 MiB too many on the H200.  So a block of a
 * workspace's size, 32 MiB (Hopper and Blackwell) or 8 MiB + 128 KiB
 * (PyTorch's default elsewhere) or what CUBLAS_WORKSPACE_CONFIG
 * (":SIZE:COUNT" pairs, KiB) and CUBLASLT_WORKSPACE_SIZE (KiB) make it,
 * gets WS_NATIVE native frames as well, which name getNewWorkspace,
 * getCUDABlasLtWorkspace or, where those are inlined, the handle getter
 * (getCurrentCUDABlasHandle) for the category rules (analyze/category.c);
 * 32 reach past c10's allocator and the plugin's frames with room.  A
 * model's own blocks of that size pay the unwinding too, so only the first
 * WS_UNWINDS of them in a process do: workspaces are made early, a few per
 * stream. */
#define WS_NATIVE 32
#define WS_UNWINDS 256
#define WS_SIZES 4
MSNAP_HOT_DATA static uint64_t ws_size[WS_SIZES];
MSNAP_HOT_DATA static int ws_n;
MSNAP_HOT_DATA static _Atomic int ws_left = WS_UNWINDS;

static void ws_add(uint64_t v)
{
    for (int i = 0; i < ws_n; i++)
        if (ws_size[i] == v)
            return;
    if (v && ws_n < WS_SIZES)
        ws_size[ws_n++] = v;
}

/* At the tracker's attach: the sizes, from the environment as PyTorch reads it. */
static void ws_sizes_init(void)
{
    ws_add(32ull << 20);
    ws_add((8ull << 20) + (128ull << 10));
    const char *c = getenv("CUBLAS_WORKSPACE_CONFIG");
    uint64_t total = 0;
    while (c && (c = strchr(c, ':'))) {
        char *e;
        unsigned long long kib = strtoull(c + 1, &e, 10);
        if (e == c + 1 || *e != ':')
            break;
        const char *n = e + 1;
        unsigned long long count = strtoull(n, &e, 10);
        if (e == n)
            break;
        if (kib < (1ull << 30) && count < (1ull << 20))
            total += (uint64_t)kib * 1024 * count;
        c = e;
    }
    ws_add(total);
    const char *lt = getenv("CUBLASLT_WORKSPACE_SIZE");
    if (lt && *lt) {
        char *e;
        unsigned long long kib = strtoull(lt, &e, 10);
        if (*e == 0 && kib < (1ull << 30))
            ws_add((uint64_t)kib * 1024);
    }
}

/* The code of PyTorch's cuBLAS workspace functions, as address ranges,
 * found once (at the first workspace-sized block, when libtorch_cuda.so is
 * loaded: from `import torch` on) in the dynamic symbol tables of the
 * loaded objects: the functions that make a workspace (getNewWorkspace,
 * setWorkspaceForHandle, getCUDABlasLtWorkspace) and the handle getters a
 * release build inlines them into, by their names (ws_syms), looked up
 * through each object's GNU hash table.  An object named libtorch_cuda*
 * that has none of those names (another PyTorch's signatures) is read
 * symbol by symbol for names holding "Workspace", "BlasHandle" or
 * "BlasLtHandle" (tens of milliseconds, once).  This took dladdr() for each
 * frame of a workspace-sized block before: a linear search through the
 * object's symbols, about 0.6 ms a call on a library of 44,000 (dev VM)
 * and more on libtorch_cuda.so's, so the first 256 such blocks cost the
 * training loop's first ten steps 160 ms each on the H100
 * (docs/benchmarks.md, the lockstep of 2026-12-06). */
#define WS_RANGES 128
static struct {
    uintptr_t lo, hi;
} ws_range[WS_RANGES];
static int ws_nranges;

static const char *const ws_syms[] = {
    "_ZN2at4cuda15getNewWorkspaceEv",
    "_ZN2at4cuda21setWorkspaceForHandleEP13cublasContextN3c104cuda10CUDAStreamE",
    "_ZN2at4cuda22getCUDABlasLtWorkspaceEv",
    "_ZN2at4cuda24getCurrentCUDABlasHandleEv",
    "_ZN2at4cuda26getCurrentCUDABlasLtHandleEv",
};

static int ws_name(const char *s)
{
    return strstr(s, "Workspace") || strstr(s, "BlasHandle") || strstr(s, "BlasLtHandle");
}

/* An object's dynamic symbols: the tables and, from its hash tables, how
 * many symbols there are. */
typedef struct dynsyms {
    const ElfW(Sym) *sym;
    const char *str;
    size_t strsz;
    uint32_t nsym;
    ElfW(Addr) base;
    /* DT_GNU_HASH (nbuckets 0: none): its buckets, and the chain of the
     * symbols from symoffset on */
    uint32_t nbuckets, symoffset;
    const uint32_t *buckets, *chain;
} dynsyms;

/* The number of symbols ds's GNU hash table covers (the highest index in
 * its chains, plus one). */
static uint32_t gnu_hash_symbols(const dynsyms *ds)
{
    uint32_t last = 0;
    for (uint32_t i = 0; i < ds->nbuckets; i++)
        if (ds->buckets[i] > last)
            last = ds->buckets[i];
    if (last < ds->symoffset)
        return ds->symoffset;
    while (!(ds->chain[last - ds->symoffset] & 1))
        last++;
    return last + 1;
}

/* The defined symbol name of ds through its GNU hash table, or NULL. */
static const ElfW(Sym) *gnu_lookup(const dynsyms *ds, const char *name)
{
    uint32_t h = 5381;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = h * 33 + *c;
    uint32_t i = ds->buckets[h % ds->nbuckets];
    if (i < ds->symoffset)
        return NULL;
    for (;; i++) {
        uint32_t ch = ds->chain[i - ds->symoffset];
        const ElfW(Sym) *y = &ds->sym[i];
        if ((ch | 1) == (h | 1) && y->st_name < ds->strsz && !strcmp(ds->str + y->st_name, name))
            return y->st_shndx != SHN_UNDEF ? y : NULL;
        if (ch & 1)
            return NULL;
    }
}

static void ws_add_range(const dynsyms *ds, const ElfW(Sym) *y)
{
    if (ws_nranges < WS_RANGES && ELF64_ST_TYPE(y->st_info) == STT_FUNC && y->st_size) {
        ws_range[ws_nranges].lo = ds->base + y->st_value;
        ws_range[ws_nranges].hi = ds->base + y->st_value + y->st_size;
        ws_nranges++;
    }
}

static int read_dynsyms(const struct dl_phdr_info *info, dynsyms *ds)
{
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    memset(ds, 0, sizeof *ds);
    ds->base = info->dlpi_addr;
    if (!dyn)
        return -1;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        uintptr_t p = rec_dyn_ptr(d->d_un.d_ptr, ds->base);
        const uint32_t *gh = (const uint32_t *)p;
        switch (d->d_tag) {
        case DT_SYMTAB: ds->sym = (const ElfW(Sym) *)p; break;
        case DT_STRTAB: ds->str = (const char *)p; break;
        case DT_STRSZ: ds->strsz = d->d_un.d_val; break;
        case DT_HASH: if (!ds->nsym) ds->nsym = gh[1]; break;
        case DT_GNU_HASH:
            /* nbuckets, symoffset, bloom words, bloom shift; the bloom
             * filter; the buckets; the chain */
            ds->nbuckets = gh[0];
            ds->symoffset = gh[1];
            ds->buckets = (const uint32_t *)((const ElfW(Addr) *)(gh + 4) + gh[2]);
            ds->chain = ds->buckets + ds->nbuckets;
            break;
        default: break;
        }
    }
    if (ds->nbuckets)
        ds->nsym = gnu_hash_symbols(ds);
    return ds->sym && ds->str ? 0 : -1;
}

/* dl_iterate_phdr callback: the names in every object; in an object named
 * libtorch_cuda* where none of them is, the long way. */
static int ws_scan_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size, (void)arg;
    dynsyms ds;
    if (read_dynsyms(info, &ds))
        return 0;
    int before = ws_nranges;
    for (size_t k = 0; ds.nbuckets && k < sizeof ws_syms / sizeof ws_syms[0]; k++) {
        const ElfW(Sym) *y = gnu_lookup(&ds, ws_syms[k]);
        if (y)
            ws_add_range(&ds, y);
    }
    if (ws_nranges > before || !info->dlpi_name || !strstr(info->dlpi_name, "libtorch_cuda"))
        return 0;
    for (uint32_t k = 1; k < ds.nsym; k++) {
        const ElfW(Sym) *y = &ds.sym[k];
        if (y->st_shndx != SHN_UNDEF && y->st_name < ds.strsz && ws_name(ds.str + y->st_name))
            ws_add_range(&ds, y);
    }
    return 0;
}

/* 1 when one of a stack's native frames is in a workspace function (the
 * ranges above).  For the few workspace-sized blocks (ws_sized): a
 * workspace keeps those frames and no autograd node (one made in the
 * backward, the autograd thread's first matmul on its own handle, would
 * otherwise be shown on the forward's stack and counted a gradient); any
 * other block of that size gets its usual stack. */
static int ws_frames(uint32_t id)
{
    const uint64_t *ips;
    int n = core_stack_get(id, &ips);
    for (int i = 0; i < n; i++)
        for (int r = 0; r < ws_nranges; r++)
            if (ips[i] >= ws_range[r].lo && ips[i] < ws_range[r].hi)
                return 1;
    return 0;
}

/* The sizes once, at the tracker's attach or, for a caller of
 * memsnap_trace_torch2 that never attached one (found with dlsym), at its
 * first allocation. */
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;
MSNAP_HOT_DATA static _Atomic int ws_ready;

static void ws_sizes_once(void)
{
    ws_sizes_init();
    dl_iterate_phdr(ws_scan_object, NULL);
    atomic_store_explicit(&ws_ready, 1, memory_order_release);
}

static inline int ws_sized(uint64_t requested)
{
    if (__builtin_expect(!atomic_load_explicit(&ws_ready, memory_order_acquire), 0))
        pthread_once(&ws_once, ws_sizes_once);
    for (int i = 0; i < ws_n; i++)
        if (requested == ws_size[i])
            /* read first: once they are spent the line is only read (it
             * is on the hot page, which every allocation reads) */
            return atomic_load_explicit(&ws_left, memory_order_relaxed) > 0 &&
                   atomic_fetch_sub_explicit(&ws_left, 1, memory_order_relaxed) > 0;
    return 0;
}

/* The stack an event of PyTorch's gets (0 = none).  Frees name no site of
 * their own: readers attribute a free to the live block's allocation, whose
 * stack they show, so frees record none unless MEMSNAP_TORCH_FREE_STACKS=1.
 * Allocations keep the Python frames in full and only
 * MEMSNAP_TORCH_NATIVE_DEPTH native frames (the plugin's callback and c10's
 * allocator): unwinding through libtorch to the eval loop was most of an
 * event's cost.  An OOM gets the usual full capture.  node (an autograd
 * node's id, 0 = none) goes in front as the innermost entry, so the
 * backward's stacks differ by node. */
static inline __attribute__((always_inline)) uint32_t torch_stack(int action, uint32_t node,
                                                                  uint64_t requested)
{
    uint64_t first = node ? msnap_autograd_ip(node) : 0;
    switch (action) {
    case MEMSNAP_TORCH_FREE_REQUESTED:
    case MEMSNAP_TORCH_FREE_COMPLETED:
    case MEMSNAP_TORCH_SEGMENT_FREE:
    case MEMSNAP_TORCH_SEGMENT_UNMAP:
        if (!g_cfg.torch_free_stacks)
            return 0;
        return core_capture_stack_n(g_cfg.torch_native_depth, TORCH_OWN_FRAMES, 0);
    case MEMSNAP_TORCH_OOM:
        if (first)   /* the usual depth, behind the node */
            return core_capture_stack_n(g_cfg.stack_depth, TORCH_OWN_FRAMES, first);
        return core_capture_stack();
    default:
        /* The backward pass's allocations (they name their node): a reader
         * shows such a block on the stack of the forward allocation that
         * made the node, linked by its sequence number, and keeps only the
         * node of the event's own stack (analyze/analysis.c, torch_stack),
         * so by default no native frame is captured (the plugin's and
         * c10's, the same in every stack; unwinding the autograd thread's
         * frames was most of what a backward allocation cost).  Python
         * frames are kept where the thread runs Python: a hook or a Python
         * function's backward (FSDP's all-gathers and reduce-scatters, a
         * DDP communication hook) says more than the forward allocation,
         * and readers keep those frames (torch_stack again). */
        if (g_cfg.torch_native_depth == TORCH_NATIVE_AUTO && action == MEMSNAP_TORCH_ALLOC &&
            ws_sized(requested)) {
            /* A workspace keeps its native frames and no node; the model's
             * own block of that size gets the stack it gets at any other
             * size, so two runs of the program at different sizes give its
             * requests the same stacks (predict aligns them by their frames:
             * a 32 MiB activation at batch 8 that kept native frames did not
             * match its 16 MiB at batch 4). */
            uint32_t id = core_capture_stack_n(WS_NATIVE, TORCH_OWN_FRAMES, 0);
            if (id && ws_frames(id))
                return id;
        }
        if (first && g_cfg.torch_native_depth == TORCH_NATIVE_AUTO)
            return core_capture_node_stack(first);
        return core_capture_stack_n(g_cfg.torch_native_depth, TORCH_OWN_FRAMES, first);
    }
}

/* ---- self-timing, for benchmarks ----------------------------------------------
 * With memsnap_bench_selftime(1) each PyTorch event's stack (torch_stack)
 * and its queueing (core_emit) are timed with the TSC on their thread, so
 * that a benchmark (bench/bench_lockstep.py, configuration selftime) sees
 * what they cost in situ: the plugin times the whole call around them.
 * Each thread writes only its own slot. */
#define SELF_SLOTS 64
typedef struct self_slot {
    _Atomic uint64_t stack_ticks, emit_ticks, events;
    char name[16];
} self_slot;
static self_slot self_slots[SELF_SLOTS];
static _Atomic int self_n;
static MSNAP_TLS self_slot *t_self;

static void selftime_add(uint64_t stack_ticks, uint64_t emit_ticks)
{
    self_slot *s = t_self;
    if (!s) {
        int i = atomic_fetch_add(&self_n, 1);
        if (i >= SELF_SLOTS)
            return;
        s = t_self = &self_slots[i];
        pthread_getname_np(pthread_self(), s->name, sizeof s->name);
    }
    atomic_store_explicit(&s->stack_ticks,
                          atomic_load_explicit(&s->stack_ticks, memory_order_relaxed) + stack_ticks,
                          memory_order_relaxed);
    atomic_store_explicit(&s->emit_ticks,
                          atomic_load_explicit(&s->emit_ticks, memory_order_relaxed) + emit_ticks,
                          memory_order_relaxed);
    atomic_store_explicit(&s->events, atomic_load_explicit(&s->events, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* on: 1 starts the timing again from zero, 0 stops it. */
MSNAP_EXPORT void memsnap_bench_selftime(int on)
{
    if (on) {
        for (int i = 0; i < SELF_SLOTS; i++) {
            atomic_store(&self_slots[i].stack_ticks, 0);
            atomic_store(&self_slots[i].emit_ticks, 0);
            atomic_store(&self_slots[i].events, 0);
        }
    }
    torch_selftime = on != 0;
}

/* What was timed, as JSON into buf: {"NAME": [stack ticks, queue ticks,
 * events], ...} (threads of one name summed).  Returns the length, 0 when
 * buf is too small. */
MSNAP_EXPORT size_t memsnap_bench_selftime_read(char *buf, size_t len)
{
    int n = atomic_load(&self_n);
    if (n > SELF_SLOTS)
        n = SELF_SLOTS;
    size_t used = 0;
    int first = 1;
    if (len < 3)
        return 0;
    buf[used++] = '{';
    for (int i = 0; i < n; i++) {
        int dup = 0;
        for (int j = 0; j < i && !dup; j++)
            dup = strncmp(self_slots[j].name, self_slots[i].name, 16) == 0;
        if (dup)
            continue;
        uint64_t v[3] = {0, 0, 0};
        for (int j = i; j < n; j++) {
            if (strncmp(self_slots[j].name, self_slots[i].name, 16) != 0)
                continue;
            v[0] += atomic_load(&self_slots[j].stack_ticks);
            v[1] += atomic_load(&self_slots[j].emit_ticks);
            v[2] += atomic_load(&self_slots[j].events);
        }
        char name[17];
        int k = 0;
        for (; k < 16 && self_slots[i].name[k]; k++) {
            char c = self_slots[i].name[k];
            name[k] = (c == '"' || c == '\\' || (unsigned char)c <= 32) ? '_' : c;
        }
        name[k] = 0;
        int w = snprintf(buf + used, len - used, "%s\"%s\": [%llu, %llu, %llu]", first ? "" : ", ",
                         name, (unsigned long long)v[0], (unsigned long long)v[1],
                         (unsigned long long)v[2]);
        if (w < 0 || (size_t)w >= len - used)
            return 0;
        used += (size_t)w;
        first = 0;
    }
    if (used + 2 > len)
        return 0;
    buf[used++] = '}';
    buf[used] = 0;
    return used;
}

/* One PyTorch trace entry -> one event (both entry points). */
static inline __attribute__((always_inline)) void torch_event(int action, int device,
                                                              uint64_t addr, uint64_t size,
                                                              uint64_t stream, uint64_t pool,
                                                              uint64_t requested, uint64_t seq,
                                                              uint32_t node)
{
    if (action < 0 || action > MEMSNAP_TORCH_OOM || !torch_action[action])
        return;
    /* A free's request is not recorded by default: no reader uses it (a
     * block is freed at its completion, which follows at once unless the
     * block waits for other streams), and it was a third of the events of a
     * training step; a plugin of this recorder does not even call for it
     * (MEMSNAP_TORCH_API_NO_FREE_REQUESTED). */
    if (action == MEMSNAP_TORCH_FREE_REQUESTED && !g_cfg.torch_free_requested)
        return;
    if (!core_recording())
        return;
    t_in_hook++;
    msnap_event e;
    memset(&e, 0, sizeof e);
    e.t_ns = core_stamp();
    e.action = torch_action[action];
    e.api = MSNAP_API_TORCH;
    e.device = (int16_t)device;
    e.size = size;
    e.stream = stream;
    /* In-process no driver hook names the devices: the first event of one
     * does (name, total, bus id; the calls the hooks would make). */
    if (g_inproc && device >= 0 && device < MSNAP_MAX_DEVICES &&
        !core_device_ready(device))
        hooks_note_device(device);
    switch (action) {   /* what names a site: allocations and OOMs (docs/format.md) */
    case MEMSNAP_TORCH_ALLOC:
    case MEMSNAP_TORCH_SEGMENT_ALLOC:
    case MEMSNAP_TORCH_SEGMENT_MAP:
    case MEMSNAP_TORCH_OOM:
        if (g_cfg.torch_nodes) {
            e.seq = seq;
            break;
        }
        /* fall through */
    default:
        node = 0;
        break;
    }
    if (action == MEMSNAP_TORCH_OOM) {
        e.aux = addr;                      /* device free bytes, as PyTorch read them */
        if (device >= 0 && device < MSNAP_MAX_DEVICES &&
            core_device_ready(device))
            e.aux2 = g_devices[device].info.total;
        e.result = 2;                      /* CUDA_ERROR_OUT_OF_MEMORY */
    } else {
        e.addr = addr;
        /* the pool of a block and, from format 1.3, of a segment (PyTorch's
         * trace entry names it for both; memsnap/format.h, "Memory pools") */
        e.aux = pool;
        if (action == MEMSNAP_TORCH_ALLOC)
            e.aux2 = requested;
    }
    if (__builtin_expect(torch_selftime, 0)) {
        uint64_t t0 = core_rdtsc();
        e.stack = torch_stack(action, node, requested);
        uint64_t t1 = core_rdtsc();
        core_emit(&e, action == MEMSNAP_TORCH_OOM);
        selftime_add(t1 - t0, core_rdtsc() - t1);
    } else {
        e.stack = torch_stack(action, node, requested);
        core_emit(&e, action == MEMSNAP_TORCH_OOM);
    }
    t_in_hook--;
}

MSNAP_EXPORT MSNAP_HOT_FN void memsnap_trace_torch(int action, int device, uint64_t addr, uint64_t size,
                                      uint64_t stream, uint64_t pool, uint64_t requested)
{
    torch_event(action, device, addr, size, stream, pool, requested, 0, 0);
}

MSNAP_EXPORT MSNAP_HOT_FN void memsnap_trace_torch2(int action, int device, uint64_t addr, uint64_t size,
                                       uint64_t stream, uint64_t pool, uint64_t requested,
                                       uint64_t seq, uint32_t node)
{
    torch_event(action, device, addr, size, stream, pool, requested, seq, node);
}

/* A node's name is interned in the recorder's string table (core_intern:
 * a short lock, once per node type); its id makes the autograd frame, which
 * the writer names from the same table (writer.c). */
MSNAP_EXPORT uint32_t memsnap_torch_node_id(const char *name)
{
    if (!name || !*name || !core_recording())
        return 0;
    t_in_hook++;
    uint32_t id = core_intern(name);
    t_in_hook--;
    return id;
}
