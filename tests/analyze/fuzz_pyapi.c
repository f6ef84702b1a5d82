/* libFuzzer target for the Python API's C side (analyze/pyapi.c, what
 * libmemsnap_py.so exports): the bytes are a snapshot file; one read for
 * the tables and the summary (mpy_read_all: the events table with its
 * levels and the pre-window fold, the state at a moment, the summary's
 * JSON) and one for the state at another moment (mpy_read), every column
 * handed over and freed as the package does.  Any crash, leak or UB is a
 * bug; unreadable input must end in a clean error (NULL and a message).
 *   ./tests/analyze/fuzz_pyapi -dict=tests/fuzz/memsnap.dict work/ tests/analyze/corpus-pyapi/
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/pyapi.h"
#include "tests/fuzz/fuzz_file.h"

/* Every column of every table: handed over (and freed) or its text read. */
static void drain(mpy_result *r)
{
    static const char *const names[] = {"events", "state"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        int t = mpy_table(r, names[k]);
        if (t < 0)
            continue;
        uint64_t rows = mpy_rows(r, t);
        for (int c = 0; c < mpy_columns(r, t); c++) {
            const char *type = mpy_column_type(r, t, c);
            uint64_t n = 0, nb = 0;
            if (type && !strncmp(type, "cat:", 4))
                (void)mpy_column_text(r, t, c, &n, &nb);
            void *p = mpy_column_release(r, t, c, &nb);
            if (p && rows && nb == 0)
                abort();               /* a column of rows without bytes */
            mpy_free_buffer(p);
        }
    }
    (void)mpy_info(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/fuzz_pyapi.XXXXXX";
    if (fuzz_file(path, data, size))
        return 0;
    static const char *const moments[] = {"peak", "end", "oom", "1ns", "1.5s", "0ns"};
    char err[1280];
    mpy_result *r = mpy_read_all(path, 1u | 4u, moments[size % 2], 1000, (int)(size & 1), NULL,
                                 err, sizeof err);
    if (r) {
        int rc;
        if (!mpy_result_summary(r, &rc))
            abort();                   /* a result without its summary */
        drain(r);
        mpy_free(r);
    }
    r = mpy_read(path, 4u, moments[2 + size % 4], err, sizeof err);
    if (r) {
        drain(r);
        mpy_free(r);
    }
    unlink(path);
    return 0;
}
