/* libFuzzer target for the what-if engines' input: the bytes are a
 * snapshot file; its request stream (whatif/requests.c: one read, the
 * breakdown's figures outside the allocator, refused frees put back) is
 * replayed in this process through the engine the stream picks or the
 * other one (the PyTorch caching allocator emulation, libmemsnap_alloc on
 * the simulated device), on the recording's device or a small one, with a
 * config or none; and the file is aligned with itself as predict's two
 * inputs (pr_build: the fits) and asked which sites grow.  Any crash, leak
 * or UB is a bug; unreadable input must end in a clean error, a request
 * the allocator cannot serve in an OOM.
 *   ./tests/interop/fuzz_requests -dict=tests/fuzz/memsnap.dict work/ tests/interop/corpus-requests/
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "whatif/predict.h"
#include "whatif/requests.h"
#include "whatif/torchalloc.h"
#include "whatif/whatif.h"
#include "tests/fuzz/fuzz_file.h"

/* The stream's requests through the PyTorch allocator emulation alone
 * (what the torch engine's replay drives; in a reader-only build, which
 * the fuzz build is, msnap_replay_stream says the replay is missing): the
 * sizes as the engine asks them (rq_request_size), frees of the oldest of
 * the last 64 blocks, empty_cache now and then; a 1 GiB device. */
static void drive_torchalloc(rq_stream *q, const char *conf)
{
    ta_config c;
    ta_config_default(&c);
    char err[256];
    if (conf && ta_config_parse(&c, conf, err, sizeof err))
        return;
    ta_alloc *a = ta_create(&c, 1ull << 30, (1ull << 30) - (64ull << 20), 1ull << 40, NULL, NULL);
    if (!a)
        return;
    uint64_t held[64];
    unsigned nh = 0, first = 0, k = 0;
    spill_rec r;
    if (rq_rewind(q) == 0) {
        while (rq_next(q, &r) == 1 && k++ < 100000) {
            int kind = rq_kind(q, &r);
            if (kind == RQ_ALLOC || kind == RQ_FAILED) {
                uint64_t p;
                if (nh == 64) {
                    (void)ta_free(a, held[first]);
                    first = (first + 1) % 64;
                    nh--;
                }
                if (ta_malloc(a, rq_request_size(&r.e, 1), r.e.stream, &p) == TA_OK)
                    held[(first + nh++) % 64] = p;
            } else if (kind == RQ_FREE && nh) {
                if (ta_free(a, held[first]))
                    abort();           /* a block the emulation handed out */
                first = (first + 1) % 64;
                nh--;
            } else if (k % 97 == 0) {
                ta_empty_cache(a);
            }
        }
    }
    ta_stats s;
    ta_stats_get(a, &s);
    ta_destroy(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/fuzz_requests.XXXXXX";
    if (fuzz_file(path, data, size))
        return 0;
    char err[1280];
    rq_stream q;
    if (rq_read(&q, path, err, sizeof err) == 0) {
        static const char *const confs[] = {NULL, "expandable_segments:True",
                                            "max_split_size_mb:20,garbage_collection_threshold:0.6"};
        msnap_replay_opts o = {.conf = confs[size % 3],
                               .device_mem = size & 4 ? (64ull << 20) : 0,
                               .engine = (size & 8) ? MSNAP_ENGINE_TORCH : MSNAP_ENGINE_AUTO};
        msnap_replay_result res;
        memset(&res, 0, sizeof res);
        (void)msnap_replay_stream(&q, &o, &res, err, sizeof err);
        drive_torchalloc(&q, confs[size % 3]);
    }
    rq_free(&q);
    if (size & 16) {
        const char *paths[2] = {path, path};
        double values[2] = {1, 2};
        pr_model *m = NULL;
        if (pr_build(&m, paths, values, 2, MSNAP_ENGINE_AUTO, 1 + (int)(size & 1), err,
                     sizeof err) == 0) {
            pr_growth g[4];
            (void)pr_growth_at(m, 4, g, 4);
            (void)pr_alignment_of(m);
        }
        pr_free(m);
    }
    unlink(path);
    return 0;
}
