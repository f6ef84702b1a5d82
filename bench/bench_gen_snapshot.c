/* bench_gen_snapshot: writes a big synthetic snapshot for the renderer and
 * summary benchmarks (bench/bench_render.sh).
 *
 *   bench_gen_snapshot EVENTS OUT [blocks] [live N] [rank R] [oom]
 *
 * The shape of a training loop with an allocator: 64 cuMemAlloc segments of
 * 256 MiB reserved up front, then steps of 40 block allocations from 40
 * sites (sizes 256 KiB .. 40 MiB) freed at the end of the step, a leaked
 * 1 MiB block every 10 steps, NVTX "step N" ranges, and a counters line
 * every 10 000 events.  Without "blocks" the same loop uses cuMemAlloc /
 * cuMemFree directly (reserved only).  Plain JSON Lines (docs/format.md),
 * written with the format library so the lines are what the recorder writes.
 *
 *   live N   N more driver allocations of 64 KiB made up front (cuMemAlloc,
 *            stack 61) and never freed, at addresses above the loop's: a
 *            program that calls cudaMalloc itself with a big live set (JAX's
 *            platform allocator, CuPy without a pool).  They count in EVENTS.
 *   rank R   a rank of a job (memsnap job): the header's pid is 1000 + R,
 *            its host "bench-node-(R/8)", and every block or allocation of
 *            site 5 is R x 1 MiB larger (one rank grows more than another).
 *   oom      the file ends with an OOM of 80 GiB at site 5 (an imbalance
 *            that failed).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsnap/format.h"

#define MiB (1ull << 20)

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_gen_snapshot EVENTS OUT [blocks] [live N] [rank R] [oom]\n");
        return 2;
    }
    uint64_t want = strtoull(argv[1], NULL, 10), live = 0, rank = 0;
    int blocks = 0, ranked = 0, oom = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "blocks")) {
            blocks = 1;
        } else if (!strcmp(argv[i], "oom")) {
            oom = 1;
        } else if (!strcmp(argv[i], "live") && i + 1 < argc) {
            live = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "rank") && i + 1 < argc) {
            rank = strtoull(argv[++i], NULL, 10);
            ranked = 1;
        } else {
            fprintf(stderr, "bench_gen_snapshot: unknown argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    FILE *f = fopen(argv[2], "w");
    if (!f) {
        perror(argv[2]);
        return 2;
    }
    static char line[1 << 16];
    msnap_header h = {.major = 1, .minor = 0, .pid = ranked ? 1000 + (int64_t)rank : 1,
                      .argc = 0};
    if (ranked)
        snprintf(h.host, sizeof h.host, "bench-node-%" PRIu64, rank / 8);
    else
        snprintf(h.host, sizeof h.host, "bench");
    snprintf(h.clock, sizeof h.clock, "CLOCK_MONOTONIC");
    snprintf(h.mode, sizeof h.mode, "stream");
    h.settings_json = "{}";
    h.ndevices = 1;
    h.devices[0] = (msnap_device_info){.index = 0, .total = 150000000000ull};
    snprintf(h.devices[0].name, sizeof h.devices[0].name, "bench device");
    fwrite(line, 1, msnap_fmt_header(line, sizeof line, &h), f);
    for (uint32_t id = 1; id <= 64; id++) {
        uint64_t ips[6] = {0x400000 + id * 16, 0x401000, 0x402000, 0x403000,
                           0x404000, 0x405000};
        msnap_stack st = {.id = id, .depth = 6, .ips = ips};
        fwrite(line, 1, msnap_fmt_stack(line, sizeof line, &st), f);
    }
    uint64_t t = 1000, n = 0, seg_base = 0x700000000000ull;
    msnap_event e;
    if (blocks)
        for (int i = 0; i < 64; i++, n++) {
            e = (msnap_event){.t_ns = t += 1000, .addr = seg_base + (uint64_t)i * 256 * MiB,
                              .size = 256 * MiB, .stack = 60, .action = MSNAP_A_ALLOC,
                              .api = MSNAP_API_cuMemAlloc_v2};
            fwrite(line, 1, msnap_fmt_event(line, sizeof line, &e), f);
        }
    uint64_t step = 0, leak_addr = seg_base + 63ull * 256 * MiB;
    uint64_t mem_base = 0x100000000000ull, live_base = 0x200000000000ull;
    for (uint64_t i = 0; i < live && n < want; i++, n++) {
        e = (msnap_event){.t_ns = t += 1000, .addr = live_base + i * (64 << 10),
                          .size = 64 << 10, .stack = 61, .tid = 7, .action = MSNAP_A_ALLOC,
                          .api = MSNAP_API_cuMemAlloc_v2};
        fwrite(line, 1, msnap_fmt_event(line, sizeof line, &e), f);
    }
    while (n < want) {
        msnap_str s = {.id = (uint32_t)(step + 1)};
        char txt[32];
        snprintf(txt, sizeof txt, "step %" PRIu64, step);
        s.s = txt;
        fwrite(line, 1, msnap_fmt_str(line, sizeof line, &s), f);
        e = (msnap_event){.t_ns = t += 500, .aux = step + 1, .tid = 7,
                          .action = MSNAP_A_NVTX_PUSH, .api = MSNAP_API_NVTX};
        fwrite(line, 1, msnap_fmt_event(line, sizeof line, &e), f);
        n++;
        uint64_t off = 0;
        for (int i = 0; i < 40 && n < want; i++, n++) {
            uint64_t sz = (256 << 10) + (uint64_t)((i * 7919 + step * 31) % 40) * MiB +
                          (i == 4 ? rank * MiB : 0);
            uint64_t a = blocks ? seg_base + off : mem_base + (uint64_t)i * 64 * MiB;
            off += sz;
            e = (msnap_event){.t_ns = t += 2000, .addr = a, .size = sz,
                              .stack = (uint32_t)(i + 1), .tid = 7,
                              .action = blocks ? MSNAP_A_BLOCK_ALLOC : MSNAP_A_ALLOC,
                              .api = blocks ? MSNAP_API_ALLOCATOR : MSNAP_API_cuMemAlloc_v2};
            fwrite(line, 1, msnap_fmt_event(line, sizeof line, &e), f);
        }
        off = 0;
        for (int i = 0; i < 40 && n < want; i++, n++) {
            uint64_t sz = (256 << 10) + (uint64_t)((i * 7919 + step * 31) % 40) * MiB +
                          (i == 4 ? rank * MiB : 0);
            uint64_t a = blocks ? seg_base + off : mem_base + (uint64_t)i * 64 * MiB;
            off += sz;
            e = (msnap_event){.t_ns = t += 1500, .addr = a, .size = sz, .tid = 7,
                              .action = blocks ? MSNAP_A_BLOCK_FREE : MSNAP_A_FREE,
                              .api = blocks ? MSNAP_API_ALLOCATOR : MSNAP_API_cuMemFree_v2};
            fwrite(line, 1, msnap_fmt_event(line, sizeof line, &e), f);
        }
        if (step % 10 == 9 && n < want) {
            e = (msnap_event){.t_ns = t += 1000, .addr = leak_addr, .size = MiB,
                              .stack = 50, .tid = 7,
                              .action = blocks ? MSNAP_A_BLOCK_ALLOC : MSNAP_A_ALLOC,
                              .api = blocks ? MSNAP_API_ALLOCATOR : MSNAP_API_cuMemAlloc_v2};
            leak_addr += MiB;
            fwrite(line, 1, msnap_fmt_event(line, sizeof line, &e), f);
            n++;
        }
        e = (msnap_event){.t_ns = t += 500, .tid = 7, .action = MSNAP_A_NVTX_POP,
                          .api = MSNAP_API_NVTX};
        fwrite(line, 1, msnap_fmt_event(line, sizeof line, &e), f);
        n++;
        if (step % 120 == 0) {
            msnap_counters c = {.t_ns = t, .device = 0, .reserved = 64 * 256 * MiB};
            fwrite(line, 1, msnap_fmt_counters(line, sizeof line, &c), f);
        }
        step++;
    }
    if (oom) {
        e = (msnap_event){.t_ns = t += 1000, .size = 80ull << 30, .aux = 2ull << 30,
                          .aux2 = h.devices[0].total, .stack = 5, .tid = 7,
                          .action = MSNAP_A_OOM, .result = 2,
                          .api = blocks ? MSNAP_API_ALLOCATOR : MSNAP_API_cuMemAlloc_v2};
        fwrite(line, 1, msnap_fmt_event(line, sizeof line, &e), f);
        n++;
    }
    msnap_trailer tr = {.t_ns = t + 1000, .events = n, .reason = "exit"};
    fwrite(line, 1, msnap_fmt_trailer(line, sizeof line, &tr), f);
    if (fclose(f) != 0) {
        perror(argv[2]);
        return 2;
    }
    fprintf(stderr, "bench_gen_snapshot: %" PRIu64 " events, %" PRIu64 " steps -> %s\n",
            n, step, argv[2]);
    return 0;
}
