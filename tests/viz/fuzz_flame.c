/* libFuzzer target for the flame graph: the bytes are a snapshot file; the
 * model read at a moment chosen by the input's size (the peak of either
 * layer, the end, an OOM, a time), the tree of what was live there by
 * stack (analyze/flame.c: pass-through frames folded or kept, stacks
 * deeper than FL_MAX_DEPTH folded), a second moment of the same read for
 * a comparison's counts, and the picture painted into memory and replayed
 * through cairo (no SVG or PNG written).  Any crash, leak or UB is a bug;
 * unreadable input must end in a clean error, a tree too large for a
 * canvas in VIZ_TOO_LARGE.
 *   ./tests/viz/fuzz_flame -dict=tests/fuzz/memsnap.dict work/ tests/viz/corpus-flame/
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/analysis.h"
#include "analyze/flame.h"
#include "analyze/model.h"
#include "format/state.h"
#include "viz/render.h"
#include "tests/fuzz/fuzz_file.h"

/* fontconfig's caches live for the process (see fuzz_render.c). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libfontconfig.so\n";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/fuzz_flame.XXXXXX";
    if (fuzz_file(path, data, size))
        return 0;
    int palloc = (int)(size & 1);
    sm_opts o = {.top = 8, .at = (int)(size % 5), .at_t_ns = 1000, .peak_allocated = palloc},
            ov = {.top = 8, .at = SM_AT_TIME, .at_t_ns = size & 2 ? UINT64_MAX : 1};
    int vs = (size & 4) != 0;
    unsigned flags = size & 8 ? 0 : FL_FOLD_PASSES;
    int layer = palloc ? MSNAP_LAYER_ALLOCATED : MSNAP_LAYER_RESERVED;
    an_file f;
    an_init(&f, path);
    sm_model *m = sm_new(&o), *mv = vs ? sm_new(&ov) : NULL;
    fl_tree t = {0};
    char err[1280];
    if (!m || (vs && !mv) || sm_attach(m, &f) || (mv && sm_attach(mv, &f)) ||
        an_read(&f, err, sizeof err))
        goto out;
    uint64_t t_ns = 0, t_vs = 0;
    if (fl_init(&t) || fl_add_model(&t, m, layer, -1, 0, flags, &t_ns) ||
        (mv && fl_add_model(&t, mv, layer, -1, 1, flags, &t_vs)))
        goto out;
    fl_finish(&t);
    size_t nf = 0;
    (void)fl_vs_undrawn(&t, &nf);
    canvas c;
    int rc = viz_flame(&t, &c, size & 16 ? 300 : 1200, "f", "sub");
    if (rc == 0) {
        (void)canvas_get(&c, 0, 0);
        canvas_free(&c);
    } else if (rc != VIZ_TOO_LARGE && rc != -1) {
        abort();                       /* viz_flame says 0, -1 or VIZ_TOO_LARGE */
    }
out:
    fl_free(&t);
    sm_free(mv);
    sm_free(m);
    an_free(&f);
    unlink(path);
    return 0;
}
