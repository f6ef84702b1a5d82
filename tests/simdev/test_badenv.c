/* A bad MEMSNAP_SIM_DEVICE_MEM (the test sets "12Q"): cuInit returns
 * CUDA_ERROR_INVALID_VALUE, again on a second call, nothing is initialised,
 * and stderr gets exactly one line naming the variable and the value. */
#include "simtest.h"

#include <unistd.h>

int main(void)
{
    sim_bind();
    const char *val = getenv("MEMSNAP_SIM_DEVICE_MEM");
    CHECK(val && strcmp(val, "12Q") == 0);

    /* Capture stderr in a file around the cuInit calls. */
    fflush(stderr);
    FILE *cap = tmpfile();
    int saved = dup(2);
    dup2(fileno(cap), 2);
    CUresult rc1 = cuInit(0), rc2 = cuInit(0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);

    CHECK(rc1 == CUDA_ERROR_INVALID_VALUE);
    CHECK(rc2 == CUDA_ERROR_INVALID_VALUE);
    char buf[4096] = "";
    rewind(cap);
    size_t n = fread(buf, 1, sizeof buf - 1, cap);
    buf[n] = '\0';
    fprintf(stderr, "captured: %s", buf);
    int lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += buf[i] == '\n';
    CHECK(lines == 1);
    CHECK(strstr(buf, "MEMSNAP_SIM_DEVICE_MEM") != NULL);
    CHECK(strstr(buf, "12Q") != NULL);

    int count = -1;
    CHECK(cuDeviceGetCount(&count) == CUDA_ERROR_NOT_INITIALIZED);
    CHECK_EQ_U64(sim.capacity(0), 0);
    return check_summary();
}
