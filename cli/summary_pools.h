/* The pools section of `memsnap summary`'s text (summary_pools.c), printed
 * from the result object's "pools" and "pool_kinds" (analyze/pools.h). */
#ifndef MEMSNAP_CLI_SUMMARY_POOLS_H
#define MEMSNAP_CLI_SUMMARY_POOLS_H

#include <cjson/cJSON.h>

/* Prints the pools of a result with a private pool in it (a CUDA graph's,
 * a torch.cuda.MemPool): one line per kind ("CUDA graphs: 1 pool, peak 412
 * MiB reserved, 380 MiB allocated"), then each pool with its top sites.
 * Nothing for a file whose blocks are all in the default pools. */
void summary_print_pools(const cJSON *root);

#endif
