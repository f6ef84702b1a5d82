/* A fault armed on cuInit from the environment (MEMSNAP_SIM_FAIL=cuInit:1,
 * MEMSNAP_SIM_DEVICES=3): the first cuInit fails with CUDA_ERROR_UNKNOWN and
 * initialises nothing; the second succeeds with the configured devices. */
#include "simtest.h"

int main(void)
{
    sim_bind();
    int n = -1;
    CHECK(cuInit(0) == CUDA_ERROR_UNKNOWN);
    CHECK(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
    CK(cuInit(0));
    CK(cuDeviceGetCount(&n));
    CHECK(n == 3);
    CHECK(sim.calls("cuInit") == 2);
    CHECK(cuInit(1) == CUDA_ERROR_INVALID_VALUE); /* flags must be 0 */
    return check_summary();
}
