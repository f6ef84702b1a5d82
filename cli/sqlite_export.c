/* sqlite_export: placeholder until the SQLite exporter lands. */
#include <stdio.h>
#include "cli.h"

/* Reports that this build has no SQLite support; exit status 2. */
int cmd_export_sqlite(int nsnaps, char **snaps, const char *outp)
{
    (void)nsnaps;
    (void)snaps;
    (void)outp;
    fprintf(stderr, "memsnap export: this memsnap was built without SQLite (libsqlite3-dev); "
                    "--format sqlite is not available\n");
    return 2;
}
