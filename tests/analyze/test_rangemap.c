/* The ordered range map (analyze/rangemap.h) against a sorted array kept
 * the old way (binary search, memmove): 200,000 random inserts, removes and
 * floor look-ups with repeated starts and sizes, the same answer from both
 * after every step; then a big live set in address order and in reverse
 * (the shapes a recording has), each range found and removed. */
#include <stdint.h>
#include <string.h>

#include "../check.h"
#include "analyze/rangemap.h"

typedef struct ref { uint64_t addr, size, val, seq; } ref;
static ref arr[1 << 16];
static size_t narr;

/* Sorted by (addr, size, newest first), as the map orders. */
static int ref_before(const ref *a, const ref *b)
{
    if (a->addr != b->addr) return a->addr < b->addr;
    if (a->size != b->size) return a->size < b->size;
    return a->seq > b->seq;
}

static void ref_insert(ref x)
{
    size_t i = 0;
    while (i < narr && ref_before(&arr[i], &x))
        i++;
    memmove(&arr[i + 1], &arr[i], (narr - i) * sizeof *arr);
    arr[i] = x;
    narr++;
}

static int ref_remove(uint64_t addr, uint64_t size)
{
    for (size_t i = 0; i < narr; i++)
        if (arr[i].addr == addr && arr[i].size == size) {
            memmove(&arr[i], &arr[i + 1], (narr - i - 1) * sizeof *arr);
            narr--;
            return 1;
        }
    return 0;
}

static const ref *ref_floor(uint64_t addr)
{
    const ref *best = NULL;
    for (size_t i = 0; i < narr && arr[i].addr <= addr; i++)
        best = &arr[i];
    return best;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(void)
{
    rangemap m = {0};
    uint64_t seq = 0;
    int bad = 0;
    for (int step = 0; step < 200000 && !bad; step++) {
        uint64_t addr = (next() % 512) * 4096, size = 4096 * (1 + next() % 3);
        int op = (int)(next() % 3);
        if (op == 0 && narr < sizeof arr / sizeof arr[0]) {
            uint64_t val = next();
            ref_insert((ref){addr, size, val, ++seq});
            bad |= rangemap_insert(&m, addr, size, val) != 0;
        } else if (op == 1) {
            bad |= rangemap_remove(&m, addr, size) != ref_remove(addr, size);
        }
        uint64_t q = addr + next() % 8192;
        const ref *r = ref_floor(q);
        const rm_node *n = rangemap_floor(&m, q);
        bad |= !r != !n || (r && (r->addr != n->addr || r->size != n->size || r->val != n->val));
        bad |= m.count != narr;
    }
    CHECK(!bad);
    CHECK_EQ_U64(m.count, narr);
    rangemap_free(&m);

    /* 100,000 live ranges made upwards, then downwards */
    for (int dir = 0; dir < 2; dir++) {
        int ok = 1;
        for (uint64_t i = 0; i < 100000; i++) {
            uint64_t k = dir ? 99999 - i : i;
            ok &= rangemap_insert(&m, 0x100000 + k * 65536, 65536, k) == 0;
        }
        for (uint64_t k = 0; k < 100000; k += 7) {
            const rm_node *n = rangemap_floor(&m, 0x100000 + k * 65536 + 100);
            ok &= n && n->val == k;
        }
        ok &= rangemap_at(&m, 0x100000 + 5 * 65536) && !rangemap_at(&m, 0x100001);
        ok &= rangemap_floor(&m, 0xfffff) == NULL;
        for (uint64_t k = 0; k < 100000; k++)
            ok &= rangemap_remove(&m, 0x100000 + k * 65536, 65536) == 1;
        ok &= m.count == 0 && rangemap_remove(&m, 0x100000, 65536) == 0;
        CHECK(ok);
    }
    rangemap_free(&m);
    return check_summary();
}
