/* Unit test of pyframes_line_at, the recorder's decoder of CPython 3.11+
 * location tables: reads py/dump_lines.py's output on stdin (each code
 * object's table and the line CPython itself gives every bytecode offset)
 * and checks that the decoder gives the same line for every offset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyframes.h"

int main(void)
{
    static char line[1 << 20];
    static uint8_t table[1 << 19];
    uint32_t len = 0;
    int first = 0;
    long codes = 0, offsets = 0, bad = 0;
    while (fgets(line, sizeof line, stdin)) {
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
        int got = pyframes_line_at(table, len, first, off);
        if (got != want && bad++ < 10)
            fprintf(stderr, "FAIL: code #%ld (first line %d) offset %u: line %d, CPython says %d\n",
                    codes, first, off, got, want);
    }
    printf("test_pylines: %ld code objects, %ld offsets, %ld wrong\n", codes, offsets, bad);
    if (codes < 100) {
        printf("FAIL: too few code objects read\n");
        return 1;
    }
    return bad ? 1 : 0;
}
