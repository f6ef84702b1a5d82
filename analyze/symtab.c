/* The snapshot's stack, sym, module and str tables and the frame-to-text
 * rule (see symtab.h for what each record does to the table). */
#include "symtab.h"

#include <inttypes.h>
#include <stdio.h>

void sm_symtab_free(sm_symtab *t)
{
    u64map_free(&t->stack_map);
    for (size_t i = 0; i < t->nstacks; i++)
        free(t->stacks[i].ips);
    free(t->stacks);
    u64map_free(&t->sym_map);
    for (size_t i = 0; i < t->nsyms; i++) {
        free(t->syms[i].fn);
        free(t->syms[i].file);
    }
    free(t->syms);
    for (size_t i = 0; i < t->nmods; i++) {
        free(t->mods[i].path);
        free(t->mods[i].build_id);
    }
    free(t->mods);
    u64map_free(&t->str_map);
    for (size_t i = 0; i < t->nstrs; i++)
        free(t->strs[i]);
    free(t->strs);
    memset(t, 0, sizeof *t);
}

/* Stores a stack record (a later record with the same id replaces it). */
static int take_stack(sm_symtab *t, const msnap_stack *st)
{
    uint64_t *v = u64map_get(&t->stack_map, 0, st->id);
    size_t i;
    if (v) {
        i = (size_t)*v;
        free(t->stacks[i].ips);
    } else {
        if (msnap_grow((void **)&t->stacks, &t->cap_stacks, t->nstacks,
                    sizeof *t->stacks) ||
            u64map_put(&t->stack_map, 0, st->id, t->nstacks))
            return -1;
        i = t->nstacks++;
    }
    int depth = st->depth < 0 ? 0 : st->depth;
    t->stacks[i] = (sm_stack_rec){.id = st->id, .depth = 0, .ips = NULL};
    if (depth) {
        t->stacks[i].ips = malloc((size_t)depth * sizeof(uint64_t));
        if (!t->stacks[i].ips)
            return -1;
        memcpy(t->stacks[i].ips, st->ips, (size_t)depth * sizeof(uint64_t));
        t->stacks[i].depth = depth;
    }
    return 0;
}

/* Stores a sym record: the first one with a function name for an ip wins
 * (a named record replaces an earlier nameless one). */
static int take_sym(sm_symtab *t, const msnap_symbol *y)
{
    uint64_t *v = u64map_get(&t->sym_map, 0, y->ip);
    if (v) {
        sm_sym *d = &t->syms[*v];
        if (d->fn[0] || !y->function || !y->function[0])
            return 0;
        char *fn = sm_dupstr(y->function), *file = sm_dupstr(y->file);
        if (!fn || !file) {
            free(fn);
            free(file);
            return -1;
        }
        free(d->fn);
        free(d->file);
        *d = (sm_sym){.ip = y->ip, .off = y->offset, .line = y->line,
                      .fn = fn, .file = file};
        return 0;
    }
    char *fn = sm_dupstr(y->function), *file = sm_dupstr(y->file);
    if (!fn || !file ||
        msnap_grow((void **)&t->syms, &t->cap_syms, t->nsyms, sizeof *t->syms) ||
        u64map_put(&t->sym_map, 0, y->ip, t->nsyms)) {
        free(fn);
        free(file);
        return -1;
    }
    t->syms[t->nsyms++] = (sm_sym){.ip = y->ip, .off = y->offset,
                                   .line = y->line, .fn = fn, .file = file};
    return 0;
}

/* Stores a module record. */
static int take_module(sm_symtab *t, const msnap_module *md)
{
    char *path = sm_dupstr(md->path), *bid = sm_dupstr(md->build_id);
    if (!path || !bid ||
        msnap_grow((void **)&t->mods, &t->cap_mods, t->nmods, sizeof *t->mods)) {
        free(path);
        free(bid);
        return -1;
    }
    t->mods[t->nmods++] = (sm_module){.base = md->base, .size = md->size,
                                      .path = path, .build_id = bid};
    return 0;
}

/* Stores an interned string (a later record with the same id replaces). */
static int take_str(sm_symtab *t, const msnap_str *x)
{
    char *copy = sm_dupstr(x->s);
    if (!copy)
        return -1;
    uint64_t *v = u64map_get(&t->str_map, 0, x->id);
    if (v) {
        free(t->strs[*v]);
        t->strs[*v] = copy;
        return 0;
    }
    if (msnap_grow((void **)&t->strs, &t->cap_strs, t->nstrs, sizeof *t->strs) ||
        u64map_put(&t->str_map, 0, x->id, t->nstrs)) {
        free(copy);
        return -1;
    }
    t->strs[t->nstrs++] = copy;
    return 0;
}

int sm_symtab_take(sm_symtab *t, const msnap_record *r)
{
    if (r->type == MSNAP_REC_STACK || r->type == MSNAP_REC_SYMBOL || r->type == MSNAP_REC_MODULE)
        t->version++;
    switch (r->type) {
    case MSNAP_REC_STACK: return take_stack(t, &r->u.stack);
    case MSNAP_REC_SYMBOL: return take_sym(t, &r->u.symbol);
    case MSNAP_REC_MODULE: return take_module(t, &r->u.module);
    case MSNAP_REC_STR: return take_str(t, &r->u.str);
    default: return 0;
    }
}

const char *sm_symtab_str(const sm_symtab *t, uint32_t id)
{
    uint64_t *v = u64map_get(&t->str_map, 0, id);
    return v ? t->strs[*v] : "";
}

const sm_module *sm_symtab_module_of(const sm_symtab *t, uint64_t ip,
                                     int match)
{
    for (size_t i = 0; i < t->nmods; i++) {
        const sm_module *md = &t->mods[i];
        if (ip < md->base)
            continue;
        if (md->size ? ip - md->base < md->size
                     : match == SM_MOD_OPEN_LAST && i + 1 == t->nmods)
            return md;
    }
    return NULL;
}

/* The stack record of an id, NULL when unknown. */
static const sm_stack_rec *stack_of(const sm_symtab *t, uint32_t stack)
{
    uint64_t *v = u64map_get(&t->stack_map, 0, stack);
    return v ? &t->stacks[*v] : NULL;
}

int sm_symtab_frame(const sm_symtab *t, uint32_t stack, int i, int match,
                    char *buf, size_t cap)
{
    const sm_stack_rec *st = stack_of(t, stack);
    if (cap)
        buf[0] = '\0';
    if (!st)
        return 0;
    if (i < 0 || i >= st->depth)
        return st->depth;
    uint64_t ip = st->ips[i];
    uint64_t *y = u64map_get(&t->sym_map, 0, ip);
    if (y && t->syms[*y].fn[0]) {
        const sm_sym *s = &t->syms[*y];
        const char *file = msnap_ip_is_python(ip) ? s->file : sm_base_name(s->file);
        if (s->file[0] && s->line)
            snprintf(buf, cap, "%s (%s:%d)", s->fn, file, s->line);
        else if (s->file[0])
            snprintf(buf, cap, "%s (%s)", s->fn, file);
        else
            snprintf(buf, cap, "%s+0x%" PRIx64, s->fn, s->off);
        return st->depth;
    }
    const sm_module *md = sm_symtab_module_of(t, ip, match);
    if (md)
        snprintf(buf, cap, "%s+0x%" PRIx64, sm_base_name(md->path), ip - md->base);
    else
        snprintf(buf, cap, "0x%" PRIx64, ip);
    return st->depth;
}

int sm_symtab_frame_get(const sm_symtab *t, uint32_t stack, int i,
                        sm_frame_info *f)
{
    *f = (sm_frame_info){.fn = "", .file = "", .module = ""};
    const sm_stack_rec *st = stack_of(t, stack);
    if (!st)
        return 0;
    if (i < 0 || i >= st->depth)
        return st->depth;
    f->ip = st->ips[i];
    uint64_t *y = u64map_get(&t->sym_map, 0, f->ip);
    if (y) {
        const sm_sym *s = &t->syms[*y];
        f->fn = s->fn;
        f->file = s->file;
        f->line = s->line;
        f->off = s->off;
    }
    const sm_module *md = sm_symtab_module_of(t, f->ip, SM_MOD_SIZED);
    if (md) {
        f->module = md->path;
        f->module_base = md->base;
    }
    return st->depth;
}
