/* Unit test of the recorder's decoders of CPython's line tables
 * (pyframes_line_at for 3.11+, pyframes_line_at_310, pyframes_line_at_39):
 * reads py/dump_lines.py's output on stdin (the interpreter's minor version,
 * each code object's table and the line CPython itself gives every bytecode
 * offset) and checks that the decoder of that version gives the same line
 * for every offset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyframes.h"

int main(void)
{
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
