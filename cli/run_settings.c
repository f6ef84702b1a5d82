/* memsnap run validates the MEMSNAP_* settings with the recorder's own parser
 * (recorder/config.c is compiled into the CLI), so a bad value is refused
 * before the program starts, with the same message the recorder would give. */
#include "../recorder/recorder.h"

int memsnap_cli_check_settings(void);

/* 0 when every MEMSNAP_* variable now set is valid; -1 after printing one
 * line per bad value. */
int memsnap_cli_check_settings(void)
{
    config_for_run = 1;
    int rc = config_load();
    config_for_run = 0;
    return rc;
}
