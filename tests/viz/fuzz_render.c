/* libFuzzer target for the render pipeline: the bytes are a snapshot file;
 * reader -> model pass 1 -> pass 2 (columns, NVTX ranges, layout) ->
 * painters into memory -> the canvas replayed through cairo (no PNG
 * written).  Any crash, leak or UB is a bug; unreadable input must end in a
 * clean error.
 *   ./tests/viz/fuzz_render -max_total_time=180 work/ tests/viz/corpus/
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/model.h"
#include "viz/render.h"
#include "tests/fuzz/fuzz_file.h"

/* fontconfig, which cairo's toy font API asks for DejaVu Sans, keeps its
 * configuration and match caches for the life of the process, some no
 * longer pointed to at exit: allocated once by the library, not per input,
 * so LeakSanitizer is told to leave them out. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libfontconfig.so\n";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/fuzz_render.XXXXXX";
    if (fuzz_file(path, data, size))
        return 0;
    sm_opts o = {.top = 4, .columns = viz_timeline_columns(400),
                 .x_mode = size % 2 ? SM_X_EVENTS : SM_X_TIME,
                 .at = (int)(size % 5)};
    o.at_t_ns = 1000;
    sm_model *m = sm_new(&o);
    char err[512];
    if (m && sm_read_file(m, path, 1, err, sizeof err) == 0) {
        canvas c;
        /* canvas_get replays the list into the raster: text through cairo */
        if (viz_timeline(m, &c, 400, 300, "f", NULL, 0, NULL) == 0) {
            (void)canvas_get(&c, 0, 0);
            canvas_free(&c);
        }
        if (viz_segmap(m, &c, 400, 400, "f", NULL) == 0) {
            (void)canvas_get(&c, 0, 0);
            canvas_free(&c);
        }
    }
    sm_free(m);
    unlink(path);
    return 0;
}
