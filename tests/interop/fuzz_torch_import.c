/* libFuzzer target: the PyTorch importer (pickle subset and JSON reader)
 * on arbitrary bytes.  It must never crash, leak or hang; errors are fine.
 *   cmake -DMEMSNAP_FUZZ=ON -DCMAKE_C_COMPILER=clang -B build-fuzz && \
 *   build-fuzz/tests/interop/fuzz_torch_import tests/interop/corpus
 *
 * Defaults (LLVMFuzzerInitialize, each unless given on the command line):
 * inputs up to 1 MB and 10 s an input.  libFuzzer's own (4 KB, or the
 * largest corpus file; 1200 s) hid a quadratic pickle reader: 40 KB of
 * EMPTY_LIST took 0.7 s, 220 KB 40 s (issue 23).  With the import's work
 * budget (interop/value.h) no input of 1 MB takes near 10 s, even under
 * ASan, so a timeout here is a finding. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interop/interop.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char *defaults[] = {"-max_len=1048576", "-timeout=10"};
    static char *args[256];
    int n = 0;
    if (*argc + 2 >= (int)(sizeof args / sizeof args[0]))
        return 0;
    for (int i = 0; i < *argc; i++)
        args[n++] = (*argv)[i];
    for (size_t d = 0; d < sizeof defaults / sizeof defaults[0]; d++) {
        size_t k = strchr(defaults[d], '=') - defaults[d] + 1; /* "-max_len=" */
        int given = 0;
        for (int i = 1; i < *argc; i++)
            given |= !strncmp((*argv)[i], defaults[d], k);
        if (!given)
            args[n++] = (char *)defaults[d];
    }
    args[n] = NULL;
    *argc = n;
    *argv = args;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[] = "/tmp/fuzz_torch_in.XXXXXX";
    if (fuzz_file(in, data, size))
        return 0;
    int out = open("/dev/null", O_WRONLY);
    char err[512];
    msnap_import_torch(in, MSNAP_IMPORT_AUTO, out, 0, "fuzz", NULL, err, sizeof err);
    unlink(in);
    return 0;
}
