/* memsnap run validates the MEMSNAP_* settings with the recorder's own parser
 * (recorder/config.c is compiled into the CLI), so a bad value is refused
 * before the program starts, with the same message the recorder would give. */
#include "cli.h"
#include "recorder/recorder.h"

/* Contract in cli.h. */
int memsnap_cli_check_settings(void)
{
    config_for_run = 1;
    int rc = config_load();
    config_for_run = 0;
    return rc;
}
