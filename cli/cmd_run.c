/* memsnap run: placeholder, the recorder owner writes this file. */
#include "cli.h"
#include <stdio.h>
int cmd_run(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "memsnap run: not built yet\n"); return 2; }
