/* A program outside the memsnap tree that uses the installed allocator:
 * built against an installed prefix with pkg-config and with
 * find_package(memsnap) (tests/install/install_test.sh), and run on the
 * installed simulated device.  Prints "consumer ok <allocated> <reserved>"
 * with 3 MiB still allocated; exit 1 on any failure. */
#include <stdio.h>

#include <memsnap/alloc.h>

int main(void)
{
    memsnap_alloc_config cfg;
    memsnap_alloc_config_default(&cfg);
    memsnap_alloc *a;
    if (memsnap_alloc_create(&cfg, 0, NULL, &a) != 0) {
        fprintf(stderr, "consumer: %s\n", memsnap_alloc_error());
        return 1;
    }
    CUdeviceptr p, q;
    if (memsnap_alloc_malloc(a, 3u << 20, NULL, &p) != 0 ||
        memsnap_alloc_malloc(a, 5u << 20, NULL, &q) != 0 || memsnap_alloc_free(a, q) != 0) {
        fprintf(stderr, "consumer: %s\n", memsnap_alloc_error());
        return 1;
    }
    memsnap_alloc_stats s;
    memsnap_alloc_stats_get(a, &s);
    printf("consumer ok %llu %llu\n", (unsigned long long)s.allocated,
           (unsigned long long)s.reserved);
    memsnap_alloc_free(a, p);
    memsnap_alloc_destroy(a);
    return 0;
}
