/* libFuzzer target: the PyTorch importer (pickle subset and JSON reader)
 * on arbitrary bytes.  It must never crash, leak or hang; errors are fine.
 *   cmake -DMEMSNAP_FUZZ=ON -DCMAKE_C_COMPILER=clang -B build-fuzz && \
 *   build-fuzz/tests/interop/fuzz_torch_import tests/interop/corpus */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "interop.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[] = "/tmp/fuzz_torch_in.XXXXXX";
    int fd = mkstemp(in);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        unlink(in);
        return 0;
    }
    close(fd);
    int out = open("/dev/null", O_WRONLY);
    char err[512];
    msnap_import_torch(in, MSNAP_IMPORT_AUTO, out, 0, "fuzz", NULL, err, sizeof err);
    unlink(in);
    return 0;
}
