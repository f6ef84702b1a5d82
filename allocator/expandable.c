/* expandable.c: expandable segments on the CUDA virtual-memory API.
 *
 * Per (stream, pool) one reservation of a->exp_va bytes (cuMemAddressReserve)
 * that starts as one UNMAPPED block.  Growing for n bytes looks for the
 * lowest UNMAPPED block U where
 *
 *     [FREE P usable by the stream] U [FREE N usable by the stream]
 *
 * can hold n bytes starting at P (or at U when P is not usable), maps just the
 * pages needed at the bottom of U (cuMemCreate + cuMemMap per page, then ONE
 * cuMemSetAccess for the whole range), and merges P, the new pages and N into
 * one FREE block that malloc then splits from its lowest address.  Memory is
 * therefore used from the bottom of the reservation up and free space stays
 * contiguous.  (An ANY neighbour is first given to the stream: safe, since
 * ANY memory is safe for every stream.)
 *
 * Releasing (empty_cache, OOM retry, GC; always after a context synchronize
 * and with every FREE block owned by ANY) unmaps and releases the whole
 * pages inside FREE blocks; their range becomes UNMAPPED and merges with
 * UNMAPPED neighbours.  Pages are unmapped one by one, so a failure leaves
 * a consistent segment (the part done is UNMAPPED, the rest stays FREE); a
 * handle whose release fails after its unmap is kept as a zombie and retried.
 *
 * Costs on an H200 per 2 MiB page (issue 3): create ~11 us, map ~1 us,
 * set-access ~26 us (once per range here), unmap ~17 us, release ~12 us.
 * None of it is on the cache-hit path.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void ms_unmapped_insert(ms_segment *s, ms_block *b)
{
    ms_block *prev = NULL, *cur = s->unmapped;
    while (cur && cur->addr < b->addr) {
        prev = cur;
        cur = cur->right;
    }
    b->left = prev;
    b->right = cur;
    if (prev)
        prev->right = b;
    else
        s->unmapped = b;
    if (cur)
        cur->left = b;
}

void ms_unmapped_remove(ms_segment *s, ms_block *b)
{
    if (b->left)
        b->left->right = b->right;
    else
        s->unmapped = b->right;
    if (b->right)
        b->right->left = b->left;
    b->left = b->right = NULL;
}

static int ms_zombie_add(memsnap_alloc *a, CUdeviceptr addr, CUmemGenericAllocationHandle h)
{
    if (a->nzombies == a->zombies_cap) {
        size_t cap = a->zombies_cap ? a->zombies_cap * 2 : 16;
        ms_zombie *z = realloc(a->zombies, cap * sizeof *z);
        if (!z)
            return -1; /* host OOM on top of a driver failure: the handle leaks */
        a->zombies = z;
        a->zombies_cap = cap;
    }
    a->zombies[a->nzombies].addr = addr;
    a->zombies[a->nzombies].h = h;
    a->nzombies++;
    return 0;
}

void ms_release_zombies(memsnap_alloc *a)
{
    size_t keep = 0;
    for (size_t i = 0; i < a->nzombies; i++) {
        ms_zombie z = a->zombies[i];
        if (z.addr && a->drv.cuMemUnmap(z.addr, a->gran) == CUDA_SUCCESS) {
            a->st.driver_unmaps++;
            z.addr = 0;
        }
        if (!z.addr && a->drv.cuMemRelease(z.h) == CUDA_SUCCESS) {
            a->st.driver_frees++;
            continue;
        }
        a->zombies[keep++] = z;
    }
    a->nzombies = keep;
}

static int ms_exp_create(memsnap_alloc *a, int stream, int pool, ms_segment **out)
{
    ms_segment *s = calloc(1, sizeof *s);
    ms_block *b = ms_block_new(a);
    size_t npages = a->exp_va / a->gran;
    CUmemGenericAllocationHandle *pages = calloc(npages, sizeof *pages);
    if (!s || !b || !pages) {
        free(s);
        free(pages);
        if (b)
            ms_block_delete(a, b);
        ms_set_error("memsnap_alloc: out of host memory");
        return MEMSNAP_ALLOC_ERR_NOMEM;
    }
    CUdeviceptr base = 0;
    CUresult rc = a->drv.cuMemAddressReserve(&base, a->exp_va, a->gran, 0, 0);
    if (rc != CUDA_SUCCESS) {
        free(s);
        free(pages);
        ms_block_delete(a, b);
        return ms_driver_error(&a->drv, "cuMemAddressReserve", rc);
    }
    s->base = base;
    s->size = a->exp_va;
    s->expandable = 1;
    s->pool = pool;
    s->stream = stream;
    s->pages = pages;
    s->npages = npages;
    s->first = b;
    b->seg = s;
    b->addr = base;
    b->size = a->exp_va;
    b->state = MEMSNAP_BLOCK_UNMAPPED;
    ms_unmapped_insert(s, b);
    ms_segment_link(a, s);
    a->streams[stream].exp[pool] = s;
    *out = s;
    return MEMSNAP_ALLOC_OK;
}

/* Maps [addr, addr+len) (whole pages of s) with new physical pages and sets
 * access once.  All or nothing: on failure the pages mapped here are undone
 * (an undo step that fails leaves a zombie, never a page we think is
 * unmapped yet hold). */
static int ms_map_range(memsnap_alloc *a, ms_segment *s, uint64_t addr, uint64_t len)
{
    CUmemAllocationProp prop = ms_device_prop(a->device);
    size_t first = (size_t)((addr - s->base) / a->gran), n = (size_t)(len / a->gran), i;
    int err = MEMSNAP_ALLOC_OK;
    CUresult rc;
    for (i = 0; i < n; i++) {
        CUmemGenericAllocationHandle h = 0;
        rc = a->drv.cuMemCreate(&h, a->gran, &prop, 0);
        if (rc != CUDA_SUCCESS) {
            err = ms_driver_error(&a->drv, "cuMemCreate", rc);
            goto undo;
        }
        a->st.driver_allocs++;
        rc = a->drv.cuMemMap(addr + i * a->gran, a->gran, 0, h, 0);
        if (rc != CUDA_SUCCESS) {
            err = ms_driver_error(&a->drv, "cuMemMap", rc);
            if (a->drv.cuMemRelease(h) == CUDA_SUCCESS)
                a->st.driver_frees++;
            else
                ms_zombie_add(a, 0, h);
            goto undo;
        }
        a->st.driver_maps++;
        s->pages[first + i] = h;
    }
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = a->device;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    rc = a->drv.cuMemSetAccess(addr, len, &desc, 1);
    if (rc != CUDA_SUCCESS) {
        err = ms_driver_error(&a->drv, "cuMemSetAccess", rc);
        goto undo;
    }
    a->st.driver_set_access++;
    s->mapped_pages += n;
    a->st.mapped_pages += n;
    ms_reserved_add(a, len);
    return MEMSNAP_ALLOC_OK;
undo:
    while (i-- > 0) {
        CUdeviceptr p = addr + i * a->gran;
        CUmemGenericAllocationHandle h = s->pages[first + i];
        s->pages[first + i] = 0;
        if (a->drv.cuMemUnmap(p, a->gran) == CUDA_SUCCESS) {
            a->st.driver_unmaps++;
            if (a->drv.cuMemRelease(h) == CUDA_SUCCESS)
                a->st.driver_frees++;
            else
                ms_zombie_add(a, 0, h);
        } else {
            ms_zombie_add(a, p, h);
        }
    }
    return err;
}

static int ms_usable(const ms_block *b, int stream)
{
    return b && b->state == MEMSNAP_BLOCK_FREE && (b->owner == stream || b->owner == MS_ANY);
}

/* Gives an ANY block to `stream` (merging with its neighbours). */
static ms_block *ms_claim(memsnap_alloc *a, ms_block *b, int stream)
{
    if (b->owner == stream)
        return b;
    ms_free_remove(a, b);
    return ms_make_free(a, b, stream, b->free_seq);
}

int ms_exp_grow(memsnap_alloc *a, int stream, int pool, uint64_t n, ms_block **out)
{
    char h1[32], h2[32], h3[32];
    if (a->nzombies)
        ms_release_zombies(a);
    ms_segment *s = a->streams[stream].exp[pool];
    int rc;
    if (!s && (rc = ms_exp_create(a, stream, pool, &s)) != MEMSNAP_ALLOC_OK)
        return rc;
    for (ms_block *u = s->unmapped; u; u = u->right) {
        ms_block *p = ms_usable(u->prev, stream) ? u->prev : NULL;
        ms_block *nb = ms_usable(u->next, stream) ? u->next : NULL;
        uint64_t start = p ? p->addr : u->addr, need_end = start + n;
        uint64_t u_end = u->addr + u->size, map_end;
        if (need_end <= u->addr) { /* p alone is enough (the caller's fit passed it over) */
            *out = ms_claim(a, p, stream);
            return MEMSNAP_ALLOC_OK;
        }
        if (need_end <= u_end)
            map_end = ms_align_up(need_end, a->gran);
        else if (nb && need_end <= nb->addr + nb->size)
            map_end = u_end;
        else
            continue;
        uint64_t len = map_end - u->addr;
        if (a->cfg.device_limit && a->st.reserved + len > a->limit) {
            ms_set_error("memsnap_alloc: device_limit %s reached (reserved %s, growing needs %s)",
                         ms_human(a->limit, h1, sizeof h1),
                         ms_human(a->st.reserved, h2, sizeof h2), ms_human(len, h3, sizeof h3));
            return MEMSNAP_ALLOC_ERR_OOM;
        }
        ms_block *f = u;
        if (len < u->size && !(f = ms_block_new(a))) {
            ms_set_error("memsnap_alloc: out of host memory");
            return MEMSNAP_ALLOC_ERR_NOMEM;
        }
        if ((rc = ms_map_range(a, s, u->addr, len)) != MEMSNAP_ALLOC_OK) {
            if (f != u)
                ms_block_delete(a, f);
            return rc;
        }
        if (f == u) {
            ms_unmapped_remove(s, u);
        } else { /* f = the bottom len bytes of u */
            f->seg = s;
            f->addr = u->addr;
            f->size = len;
            f->prev = u->prev;
            f->next = u;
            if (u->prev)
                u->prev->next = f;
            else
                s->first = f;
            u->prev = f;
            u->addr += len;
            u->size -= len;
        }
        if (p)
            ms_claim(a, p, stream);
        if (f == u && nb)
            ms_claim(a, nb, stream);
        *out = ms_make_free(a, f, stream, a->free_seq);
        return MEMSNAP_ALLOC_OK;
    }
    ms_set_error("memsnap_alloc: expandable segment address space exhausted "
                 "(expandable_va %s, request %s)",
                 ms_human(a->exp_va, h1, sizeof h1), ms_human(n, h2, sizeof h2));
    return MEMSNAP_ALLOC_ERR_OOM;
}

/* Unmaps the whole pages inside FREE block b (stopping once *released
 * reaches target, 0 = no target) and splits b into FREE head, UNMAPPED middle
 * (merged with UNMAPPED neighbours) and FREE tail.  *last = the piece to
 * continue a walk from. */
static int ms_unmap_free_block(memsnap_alloc *a, ms_segment *s, ms_block *b, uint64_t target,
                               uint64_t *released, ms_block **last)
{
    *last = b;
    uint64_t start = b->addr, end = b->addr + b->size;
    uint64_t lo = ms_align_up(start, a->gran), hi = ms_align_down(end, a->gran);
    if (hi <= lo)
        return MEMSNAP_ALLOC_OK;
    /* Host memory for the new pieces first, so nothing needs undoing. */
    ms_block *head = NULL, *tail = ms_block_new(a);
    if (!tail || (lo > start && !(head = ms_block_new(a)))) {
        if (tail)
            ms_block_delete(a, tail);
        ms_set_error("memsnap_alloc: out of host memory");
        return MEMSNAP_ALLOC_ERR_NOMEM;
    }
    int err = MEMSNAP_ALLOC_OK;
    uint64_t p;
    for (p = lo; p < hi && (target == 0 || *released < target); p += a->gran) {
        size_t i = (size_t)((p - s->base) / a->gran);
        CUresult rc = a->drv.cuMemUnmap(p, a->gran);
        if (rc != CUDA_SUCCESS) {
            err = ms_driver_error(&a->drv, "cuMemUnmap", rc);
            break;
        }
        a->st.driver_unmaps++;
        if (a->drv.cuMemRelease(s->pages[i]) == CUDA_SUCCESS)
            a->st.driver_frees++;
        else
            ms_zombie_add(a, 0, s->pages[i]);
        s->pages[i] = 0;
        s->mapped_pages--;
        a->st.mapped_pages--;
        a->st.reserved -= a->gran;
        *released += a->gran;
    }
    uint64_t done = p;
    if (done == lo) {
        if (head)
            ms_block_delete(a, head);
        ms_block_delete(a, tail);
        return err;
    }
    ms_free_remove(a, b);
    int owner = b->owner;
    uint64_t seq = b->free_seq;
    ms_block *prev = b->prev, *next = b->next, *left = prev;
    ms_block *um = b;
    um->addr = lo;
    um->size = done - lo;
    um->state = MEMSNAP_BLOCK_UNMAPPED;
    um->owner = MS_ANY;
    if (head) {
        head->seg = s;
        head->addr = start;
        head->size = lo - start;
        head->state = MEMSNAP_BLOCK_FREE;
        head->owner = owner;
        head->free_seq = seq;
        head->prev = left;
        if (left)
            left->next = head;
        else
            s->first = head;
        left = head;
    }
    um->prev = left;
    if (left)
        left->next = um;
    else
        s->first = um;
    if (done < end) {
        tail->seg = s;
        tail->addr = done;
        tail->size = end - done;
        tail->state = MEMSNAP_BLOCK_FREE;
        tail->owner = owner;
        tail->free_seq = seq;
        tail->prev = um;
        tail->next = next;
        if (next)
            next->prev = tail;
        um->next = tail;
        ms_free_insert(a, tail);
    } else {
        ms_block_delete(a, tail);
        tail = NULL;
        um->next = next;
        if (next)
            next->prev = um;
    }
    if (head)
        ms_free_insert(a, head);
    if (!head && prev && prev->state == MEMSNAP_BLOCK_UNMAPPED) {
        prev->size += um->size;
        prev->next = um->next;
        if (um->next)
            um->next->prev = prev;
        ms_block_delete(a, um);
        um = prev;
    } else {
        ms_unmapped_insert(s, um);
    }
    if (!tail && next && next->state == MEMSNAP_BLOCK_UNMAPPED) {
        um->size += next->size;
        um->next = next->next;
        if (next->next)
            next->next->prev = um;
        ms_unmapped_remove(s, next);
        ms_block_delete(a, next);
    }
    *last = tail ? tail : um;
    return err;
}

int ms_exp_release(memsnap_alloc *a, uint64_t target, uint64_t *released)
{
    if (a->nzombies)
        ms_release_zombies(a);
    for (ms_segment *s = a->seg_head; s; s = s->next_seg) {
        if (!s->expandable || !s->mapped_pages)
            continue;
        for (ms_block *b = s->first; b; b = b->next) {
            if (target && *released >= target)
                return MEMSNAP_ALLOC_OK;
            if (b->state != MEMSNAP_BLOCK_FREE)
                continue;
            int rc = ms_unmap_free_block(a, s, b, target, released, &b);
            if (rc != MEMSNAP_ALLOC_OK)
                return rc;
        }
    }
    return MEMSNAP_ALLOC_OK;
}

/* Gives back everything of s (mapped pages, reservation, blocks).  Best
 * effort: a failed unmap/release is kept as a zombie for the caller's final
 * ms_release_zombies; the reservation is freed only when no page of it is
 * still mapped. */
void ms_exp_destroy(memsnap_alloc *a, ms_segment *s)
{
    int still_mapped = 0;
    for (size_t i = 0; i < s->npages; i++) {
        if (!s->pages[i])
            continue;
        CUdeviceptr p = s->base + i * a->gran;
        if (a->drv.cuMemUnmap(p, a->gran) == CUDA_SUCCESS) {
            if (a->drv.cuMemRelease(s->pages[i]) != CUDA_SUCCESS)
                ms_zombie_add(a, 0, s->pages[i]);
        } else {
            ms_zombie_add(a, p, s->pages[i]);
            still_mapped = 1;
        }
        s->pages[i] = 0;
    }
    if (still_mapped || a->nzombies)
        ms_release_zombies(a);
    a->drv.cuMemAddressFree(s->base, s->size);
    ms_block *b = s->first, *nx;
    for (; b; b = nx) {
        nx = b->next;
        ms_block_delete(a, b);
    }
    free(s->pages);
    free(s);
}
