/* The memory size of a simulated device, as MEMSNAP_SIM_DEVICE_MEM and
 * `memsnap run --sim-device` take it: one parser, one range, so memsnap run
 * refuses up front exactly what the simulated device would refuse at cuInit.
 *
 *   80G, 512M, 64KiB, 1T, 1073741824 (bytes): util/size.h's sizes.
 *   From SIM_SIZE_MIN (2 MiB, the VMM granularity: one page) to SIM_SIZE_MAX
 *   (64 TiB).  Device memory is host address space (MAP_NORESERVE mappings)
 *   and a 64-bit Linux process has 128 TiB of it, so a device past half of
 *   that could never be filled; the largest GPUs hold a few hundred GB.
 */
#ifndef MEMSNAP_SIMDEV_SIZE_H
#define MEMSNAP_SIMDEV_SIZE_H
#include <stdint.h>

#include "util/size.h"

#define SIM_SIZE_MIN (2ull << 20)
#define SIM_SIZE_MAX (64ull << 40)
#define SIM_SIZE_RANGE "from 2M to 64T" /* for messages */

/* Parses s into *out.  0 when s is a size in [SIM_SIZE_MIN, SIM_SIZE_MAX];
 * -1 otherwise (*out unchanged). */
static inline int sim_size_parse(const char *s, uint64_t *out)
{
    uint64_t v;
    if (msnap_size_parse(s, &v) || v < SIM_SIZE_MIN || v > SIM_SIZE_MAX)
        return -1;
    *out = v;
    return 0;
}
#endif
