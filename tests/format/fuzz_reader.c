/* libFuzzer target for the snapshot reader (build with -DMEMSNAP_FUZZ=ON and
 * clang).  The input is the file's bytes, as written to a memfd: open it,
 * read every record, touch every string and stack, close.  Whatever the
 * bytes, the reader must return records or one-line errors: no crash, no
 * leak, no read out of bounds, no unbounded allocation.  Seed corpus:
 * tests/format/corpus/ (plain and zstd snapshots).
 *   ./fuzz_reader -max_total_time=60 corpus-work/ ../tests/format/corpus/ */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memsnap/format.h"

static volatile size_t sink;

/* Reads strlen of s into the sink (so ASan sees every byte). */
static void touch(const char *s)
{
    if (s)
        sink += strlen(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz", 0);
    if (fd < 0)
        return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            close(fd);
            return 0;
        }
        off += (size_t)w;
    }
    lseek(fd, 0, SEEK_SET);
    char err[512];
    msnap_reader *r = msnap_reader_fdopen(fd, err, sizeof err);
    if (!r) {
        touch(err);
        return 0;
    }
    static msnap_record rec;
    int n = 0;
    while (msnap_reader_next(r, &rec) == 1 && n++ < 100000) {
        switch (rec.type) {
        case MSNAP_REC_HEADER:
            for (int i = 0; i < rec.u.header.argc; i++)
                touch(rec.u.header.argv[i]);
            touch(rec.u.header.settings_json);
            break;
        case MSNAP_REC_STACK:
            for (int i = 0; i < rec.u.stack.depth; i++)
                sink += rec.u.stack.ips[i];
            break;
        case MSNAP_REC_MODULE:
            touch(rec.u.module.path);
            touch(rec.u.module.build_id);
            break;
        case MSNAP_REC_SYMBOL:
            touch(rec.u.symbol.function);
            touch(rec.u.symbol.file);
            break;
        case MSNAP_REC_STR:
            touch(rec.u.str.s);
            break;
        case MSNAP_REC_TRAILER:
            touch(rec.u.trailer.reason);
            break;
        default:
            break;
        }
    }
    touch(msnap_reader_error(r));
    msnap_reader_close(r);
    return 0;
}
