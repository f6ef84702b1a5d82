/* libFuzzer target for `memsnap summary` of one file, printers included:
 * the bytes are a snapshot file; cmd_summary (cli/cmd_summary.c) reads it
 * through the library path (analyze/report.c msnap_summarize: the findings
 * model, the breakdown, the sites at the peak, labels) and prints its text
 * (the first screen, the details, the driver table and categories from
 * summary_text.c), with --stacks and --json in turn, into /dev/null.  Any
 * crash, leak or UB is a bug; unreadable input must end in a clean error.
 *   ./tests/cli/fuzz_summary -dict=tests/fuzz/memsnap.dict work/ tests/cli/corpus-summary/
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* the text goes nowhere: the printers run, the terminal stays quiet */
    if (!freopen("/dev/null", "w", stdout))
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/fuzz_summary.XXXXXX";
    if (fuzz_file(path, data, size))
        return 0;
    /* the variants by the input's size: the text, with every frame, the
     * JSON, a few sites */
    char *v[4][6] = {{"summary", path, NULL},
                     {"summary", "--stacks", path, NULL},
                     {"summary", "--json", path, NULL},
                     {"summary", "--top", "2", "--marks", path, NULL}};
    int k = (int)(size % 4), argc = 0;
    while (v[k][argc])
        argc++;
    (void)cmd_summary(argc, v[k]);
    fflush(stdout);
    unlink(path);
    return 0;
}
