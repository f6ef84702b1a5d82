/* The memory size of a simulated device, as MEMSNAP_SIM_DEVICE_MEM and
 * `memsnap run --sim-device` take it: one parser, one range, so memsnap run
 * refuses up front exactly what the simulated device would refuse at cuInit.
 *
 *   80G, 512M, 64KiB, 1T, 1073741824 (bytes): binary units, K/M/G/T in either
 *   case, an optional "i" after the unit and an optional "B".
 *   From SIM_SIZE_MIN (2 MiB, the VMM granularity: one page) to SIM_SIZE_MAX
 *   (64 TiB).  Device memory is host address space (MAP_NORESERVE mappings)
 *   and a 64-bit Linux process has 128 TiB of it, so a device past half of
 *   that could never be filled; the largest GPUs hold a few hundred GB.
 */
#ifndef MEMSNAP_SIMDEV_SIZE_H
#define MEMSNAP_SIMDEV_SIZE_H
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#define SIM_SIZE_MIN (2ull << 20)
#define SIM_SIZE_MAX (64ull << 40)
#define SIM_SIZE_RANGE "from 2M to 64T" /* for messages */

/* Parses s into *out.  0 when s is a size in [SIM_SIZE_MIN, SIM_SIZE_MAX];
 * -1 otherwise (*out unchanged). */
static inline int sim_size_parse(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
    }
    if (shift && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || v > SIM_SIZE_MAX >> shift || (v << shift) < SIM_SIZE_MIN)
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}
#endif
