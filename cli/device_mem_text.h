/* The device memory a replay or a prediction ran on, in words (replay and
 * predict print the same line): the device, what the recording measured
 * outside the allocator and left out of it, what the allocator got. */
#ifndef MEMSNAP_CLI_DEVICE_MEM_TEXT_H
#define MEMSNAP_CLI_DEVICE_MEM_TEXT_H

#include <stddef.h>

#include "whatif/whatif.h"

/* "device memory 139.80 GiB (the recording's), less 5.60 GiB ...: 134.20
 * GiB for the allocator" into buf (no newline); exact: sizes in bytes. */
void cli_device_mem_text(const msnap_replay_result *r, int exact, char *buf, size_t n);

#endif
