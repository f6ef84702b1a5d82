/* A census of what a program calls that a preloaded recorder could make
 * costly: bench_overhead.py's `census` configuration preloads this library
 * (and names it as the NVTX injection), runs the training step, and reads
 * the counts per step through census_read().
 *
 *   NVTX     every callback slot of every NVTX module (core, CUDA, OpenCL,
 *            CUDA runtime, core2 = domains, sync) gets a counting stub that
 *            returns 0, as an unset slot does: so a library that asks for a
 *            domain (nvtxDomainCreateA) gets none, as under memsnap, and the
 *            counts show which NVTX calls the program's libraries make per
 *            step (cuBLAS? cuDNN? PyTorch?) and so which ones an injection
 *            pays for.
 *   C++      __cxa_throw is counted and forwarded: each throw unwinds through
 *            whichever _Unwind_RaiseException the process binds (libgcc's, or
 *            a preloaded library's dependency's: libunwind exports one).
 *   backtrace()  counted and forwarded (libunwind exports a weak one too).
 *
 * Counting stubs are called through NVTX's function pointers with the
 * arguments of the real API; on x86-64 a function that takes none ignores
 * them, and 0 in rax is each API's "nothing" result.  Benchmark code only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#define MODULES 7      /* NVTX_CB_MODULE_CORE .. NVTX_CB_MODULE_SYNC, 0 unused */
#define SLOTS 32
#define N_THROW (MODULES * SLOTS)
#define N_BACKTRACE (N_THROW + 1)
#define N_COUNTS (N_THROW + 2)

static _Atomic uint64_t counts[N_COUNTS];

#define STUB(m, i)                                                                        \
    static int stub_##m##_##i(void)                                                       \
    {                                                                                     \
        atomic_fetch_add_explicit(&counts[(m) * SLOTS + (i)], 1, memory_order_relaxed);   \
        return 0;                                                                         \
    }
#define STUBS(m)                                                                          \
    STUB(m, 0) STUB(m, 1) STUB(m, 2) STUB(m, 3) STUB(m, 4) STUB(m, 5) STUB(m, 6)         \
    STUB(m, 7) STUB(m, 8) STUB(m, 9) STUB(m, 10) STUB(m, 11) STUB(m, 12) STUB(m, 13)     \
    STUB(m, 14) STUB(m, 15) STUB(m, 16) STUB(m, 17) STUB(m, 18) STUB(m, 19) STUB(m, 20)  \
    STUB(m, 21) STUB(m, 22) STUB(m, 23) STUB(m, 24) STUB(m, 25) STUB(m, 26) STUB(m, 27)  \
    STUB(m, 28) STUB(m, 29) STUB(m, 30) STUB(m, 31)
#define ROW(m)                                                                            \
    {stub_##m##_0, stub_##m##_1, stub_##m##_2, stub_##m##_3, stub_##m##_4,               \
     stub_##m##_5, stub_##m##_6, stub_##m##_7, stub_##m##_8, stub_##m##_9,               \
     stub_##m##_10, stub_##m##_11, stub_##m##_12, stub_##m##_13, stub_##m##_14,          \
     stub_##m##_15, stub_##m##_16, stub_##m##_17, stub_##m##_18, stub_##m##_19,          \
     stub_##m##_20, stub_##m##_21, stub_##m##_22, stub_##m##_23, stub_##m##_24,          \
     stub_##m##_25, stub_##m##_26, stub_##m##_27, stub_##m##_28, stub_##m##_29,          \
     stub_##m##_30, stub_##m##_31}
STUBS(1) STUBS(2) STUBS(3) STUBS(4) STUBS(5) STUBS(6)

static int (*const stubs[MODULES][SLOTS])(void) = {
    {0}, ROW(1), ROW(2), ROW(3), ROW(4), ROW(5), ROW(6),
};

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    const NvtxExportTableCallbacks *cb = get ? get(NVTX_ETID_CALLBACKS) : NULL;
    if (!cb || !cb->GetModuleFunctionTable)
        return 0;
    for (int m = 1; m < MODULES; m++) {
        NvtxFunctionTable t = NULL;
        unsigned int n = 0;
        if (!cb->GetModuleFunctionTable((NvtxCallbackModule)m, &t, &n) || !t)
            continue;
        for (unsigned int i = 1; i < n && i < SLOTS; i++)
            if (t[i])
                *t[i] = (NvtxFunctionPointer)stubs[m][i];
    }
    return 1;
}

typedef void (*throw_fn)(void *, void *, void (*)(void *));
__attribute__((visibility("default"), noreturn)) void __cxa_throw(void *obj, void *tinfo,
                                                                  void (*dest)(void *))
{
    static throw_fn real;
    if (!real)
        real = (throw_fn)dlsym(RTLD_NEXT, "__cxa_throw");
    atomic_fetch_add_explicit(&counts[N_THROW], 1, memory_order_relaxed);
    real(obj, tinfo, dest);
    __builtin_unreachable();
}

typedef int (*backtrace_fn)(void **, int);
__attribute__((visibility("default"))) int backtrace(void **buf, int size)
{
    static backtrace_fn real;
    if (!real)
        real = (backtrace_fn)dlsym(RTLD_NEXT, "backtrace");
    atomic_fetch_add_explicit(&counts[N_BACKTRACE], 1, memory_order_relaxed);
    return real ? real(buf, size) : 0;
}

/* Copies the counts into out[0..n): [module * 32 + callback id] for the NVTX
 * modules, then C++ throws, then backtrace() calls.  Returns how many exist. */
__attribute__((visibility("default"))) int census_read(uint64_t *out, int n)
{
    for (int i = 0; i < n && i < N_COUNTS; i++)
        out[i] = atomic_load_explicit(&counts[i], memory_order_relaxed);
    return N_COUNTS;
}
