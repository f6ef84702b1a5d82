/* One fuzz input as a file, for the targets that read a file (a snapshot,
 * a PyTorch snapshot): the bytes written to a temporary file named from
 * tmpl (a mkstemp template, "/tmp/fuzz_NAME.XXXXXX", rewritten in place).
 * 0 with the file there (the caller unlinks it), or -1 with nothing left
 * behind. */
#ifndef MEMSNAP_TESTS_FUZZ_FILE_H
#define MEMSNAP_TESTS_FUZZ_FILE_H

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static inline int fuzz_file(char *tmpl, const uint8_t *data, size_t size)
{
    int fd = mkstemp(tmpl);
    if (fd < 0)
        return -1;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        unlink(tmpl);
        return -1;
    }
    close(fd);
    return 0;
}

#endif
