/* Unit test of the recorder's decoders of CPython's line tables
 * (pyframes_line_at for 3.11+, pyframes_line_at_310, pyframes_line_at_39):
 * reads py/dump_lines.py's output on stdin (the interpreter's minor version,
 * each code object's table and the line CPython itself gives every bytecode
 * offset) and checks that the decoder of that version gives the same line
 * for every offset.
 *
 * test_pylines --lock LIB [NOLIB]: the head-lock check
 * (pyframes_lock_is_semaphore) says yes for LIB's PyThread_acquire_lock (a
 * libpython) and no for NOLIB's cos (libm, which has no locks). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recorder/pyframes.h"

static int lock_check(const char *lib, const char *nolib)
{
    void *h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
    void *fn = h ? dlsym(h, "PyThread_acquire_lock") : NULL;
    if (!fn) {
        printf("FAIL: %s: no PyThread_acquire_lock (%s)\n", lib, dlerror());
        return 1;
    }
    int yes = pyframes_lock_is_semaphore(fn);
    printf("test_pylines: %s: head lock %s\n", lib, yes ? "a semaphore" : "not a semaphore");
    if (!yes)
        return 1;
    if (nolib) {
        void *m = dlopen(nolib, RTLD_LAZY | RTLD_LOCAL);
        void *cosf = m ? dlsym(m, "cos") : NULL;
        if (!cosf || pyframes_lock_is_semaphore(cosf)) {
            printf("FAIL: %s: cos taken for a semaphore lock\n", nolib);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--lock"))
        return lock_check(argv[2], argc >= 4 ? argv[3] : NULL);
    static char line[1 << 20];
    static uint8_t table[1 << 19];
    uint32_t len = 0;
    int first = 0, minor = 11;
    long codes = 0, offsets = 0, bad = 0;
    int (*line_at)(const uint8_t *, uint32_t, int, uint32_t) = pyframes_line_at;
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "minor %d", &minor) == 1) {
            line_at = minor >= 11 ? pyframes_line_at
                    : minor == 10 ? pyframes_line_at_310 : pyframes_line_at_39;
            continue;
        }
        if (!strncmp(line, "code ", 5)) {
            char *p = line + 5, *end;
            first = (int)strtol(p, &end, 10);
            p = end + 1;
            len = 0;
            while (p[0] && p[1] && p[0] != '\n' && len < sizeof table) {
                unsigned b;
                sscanf(p, "%2x", &b);
                table[len++] = (uint8_t)b;
                p += 2;
            }
            codes++;
            continue;
        }
        unsigned off;
        int want;
        if (sscanf(line, "%u %d", &off, &want) != 2)
            continue;
        offsets++;
        int got = line_at(table, len, first, off);
        if (got != want && bad++ < 10)
            fprintf(stderr, "FAIL: code #%ld (first line %d) offset %u: line %d, CPython says %d\n",
                    codes, first, off, got, want);
    }
    printf("test_pylines: Python 3.%d, %ld code objects, %ld offsets, %ld wrong\n", minor, codes,
           offsets, bad);
    if (codes < 100) {
        printf("FAIL: too few code objects read\n");
        return 1;
    }
    return bad ? 1 : 0;
}
