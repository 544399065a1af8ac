/* The memory planner: liveness over the execution order, then placement in
 * one arena (see memplan.h for the rules). */
#include "runner/cpu/memplan.h"

#include <stdlib.h>
#include <string.h>

static uint64_t align_up(uint64_t x)
{
    return (x + (CP_MEM_ALIGN - 1)) & ~(uint64_t)(CP_MEM_ALIGN - 1);
}

uint64_t cp_memplan_tensor_bytes(const struct cp_tensor *t)
{
    size_t bytes;
    return cp_shape_nbytes(&t->shape, t->dtype, &bytes) ? bytes : 0;
}

/* ---- placement -------------------------------------------------------------- */

struct place_key {
    uint64_t size;
    int32_t first;
    uint32_t idx;
};

/* Larger first; ties by earlier start, then by index, so placement is
 * deterministic. */
static int cmp_key(const void *a, const void *b)
{
    const struct place_key *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static bool lifetimes_overlap(const struct cp_mem_block *a, const struct cp_mem_block *b)
{
    return a->first <= b->last && b->first <= a->last;
}

/* The lowest offset at which `b` (aligned size `sz`) overlaps none of the
 * placed blocks that are live at the same time. `placed` is sorted by
 * offset, so the first gap that fits is the lowest. */
static uint64_t lowest_fit(const struct cp_mem_block *all, const uint32_t *placed, size_t np,
                           const struct cp_mem_block *b, uint64_t sz)
{
    uint64_t off = 0;
    for (size_t j = 0; j < np; j++) {
        const struct cp_mem_block *p = &all[placed[j]];
        if (p->size == 0 || !lifetimes_overlap(p, b))
            continue;
        if (p->offset >= off + sz)
            break;
        uint64_t end = p->offset + align_up(p->size);
        if (end > off)
            off = end;
    }
    return off;
}

static void place_greedy(struct cp_mem_block *b, const struct place_key *keys, size_t n,
                         uint32_t *placed, uint64_t *arena)
{
    size_t np = 0;
    for (size_t k = 0; k < n; k++) {
        struct cp_mem_block *blk = &b[keys[k].idx];
        uint64_t sz = align_up(blk->size);
        blk->offset = sz ? lowest_fit(b, placed, np, blk, sz) : 0;
        if (blk->offset + sz > *arena)
            *arena = blk->offset + sz;
        size_t pos = np;
        while (pos > 0 && b[placed[pos - 1]].offset > blk->offset)
            pos--;
        memmove(placed + pos + 1, placed + pos, (np - pos) * sizeof *placed);
        placed[pos] = keys[k].idx;
        np++;
    }
}

/* Largest sum of live aligned sizes over steps 0..n_steps. */
static enum cp_status compute_peak(const struct cp_mem_block *b, size_t n, int32_t n_steps,
                                   uint64_t *peak)
{
    uint64_t *starts = cp_calloc((size_t)n_steps + 2, sizeof *starts);
    uint64_t *ends = cp_calloc((size_t)n_steps + 2, sizeof *ends);
    if (!starts || !ends) {
        free(starts);
        free(ends);
        return CP_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t first = b[i].first < 0 ? 0 : b[i].first;
        int32_t last = b[i].last > n_steps ? n_steps : b[i].last;
        starts[first] += align_up(b[i].size);
        ends[last] += align_up(b[i].size);
    }
    uint64_t live = 0;
    *peak = 0;
    for (int32_t s = 0; s <= n_steps; s++) {
        live += starts[s];
        if (live > *peak)
            *peak = live;
        live -= ends[s];
    }
    free(starts);
    free(ends);
    return CP_OK;
}

enum cp_status cp_memplan_place(struct cp_mem_block *b, size_t n, int32_t n_steps, bool reuse,
                                uint64_t *arena_bytes, uint64_t *peak_bytes)
{
    *arena_bytes = 0;
    *peak_bytes = 0;
    if (n == 0)
        return CP_OK;
    if (n > UINT32_MAX || n_steps < 0)
        return CP_ERR_NOMEM;
    enum cp_status st = compute_peak(b, n, n_steps, peak_bytes);
    if (st != CP_OK)
        return st;
    if (!reuse) {
        uint64_t off = 0;
        for (size_t i = 0; i < n; i++) {
            b[i].offset = off;
            off += align_up(b[i].size);
        }
        *arena_bytes = off;
        return CP_OK;
    }
    struct place_key *keys = cp_calloc(n, sizeof *keys);
    uint32_t *placed = cp_calloc(n, sizeof *placed);
    if (!keys || !placed) {
        free(keys);
        free(placed);
        return CP_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = (struct place_key){align_up(b[i].size), b[i].first, (uint32_t)i};
    qsort(keys, n, sizeof *keys, cmp_key);
    place_greedy(b, keys, n, placed, arena_bytes);
    free(keys);
    free(placed);
    return CP_OK;
}

/* ---- liveness ------------------------------------------------------------------ */

struct build_ctx {
    const struct cp_graph *g;
    struct cp_memplan *mp;
    struct cp_diag *d;
};

/* A buffer for tensor t, written by node `n` (NULL: a graph input). A size
 * that does not compute is refused here rather than planned as 0 bytes
 * that a kernel would then write past. */
static enum cp_status add_block(struct build_ctx *c, const struct cp_node *n, int32_t t,
                                int32_t first, int32_t last)
{
    struct cp_memplan *mp = c->mp;
    const struct cp_tensor *T = cp_graph_tensor(c->g, t);
    size_t bytes;
    if (!cp_shape_nbytes(&T->shape, T->dtype, &bytes)) {
        char s[96];
        cp_shape_format(&T->shape, s, sizeof s);
        if (!n)
            return cp_diag_set(c->d, CP_ERR_INVALID,
                               "input '%s' (%s %s) is too large: its byte size does not fit in "
                               "64 bits",
                               T->name, s, cp_dtype_name(T->dtype));
        return cp_diag_set(c->d, CP_ERR_INVALID,
                           "node '%s' (%s): output '%s' (%s %s) is too large: its byte size does "
                           "not fit in 64 bits",
                           n->name, n->op_type, T->name, s, cp_dtype_name(T->dtype));
    }
    mp->blocks[mp->n_blocks] =
        (struct cp_mem_block){.size = bytes, .first = first, .last = last, .tensor = t};
    mp->root[t] = t;
    mp->block[t] = (int32_t)mp->n_blocks++;
    return CP_OK;
}

static enum cp_status read_inputs(struct build_ctx *c, const struct cp_node *n, bool runs,
                                  int32_t step, bool *weight_seen)
{
    struct cp_memplan *mp = c->mp;
    for (size_t i = 0; i < n->n_inputs; i++) {
        int32_t t = n->inputs[i];
        if (t < 0)
            continue;
        int32_t r = mp->root[t];
        if (r < 0)
            return cp_diag_set(c->d, CP_ERR_INVALID,
                               "node '%s' (%s) reads tensor '%s', which no earlier node produces",
                               n->name, n->op_type, cp_graph_tensor(c->g, t)->name);
        const struct cp_tensor *R = cp_graph_tensor(c->g, r);
        if (R->kind == CP_TENSOR_INITIALIZER && !weight_seen[r]) {
            weight_seen[r] = true;
            mp->weight_bytes += R->nbytes;
        }
        int32_t b = mp->block[r];
        if (runs && b >= 0 && mp->blocks[b].last < step)
            mp->blocks[b].last = step;
    }
    return CP_OK;
}

static enum cp_status alias_view(struct build_ctx *c, const struct cp_node *n)
{
    struct cp_memplan *mp = c->mp;
    int32_t in = n->n_inputs ? n->inputs[0] : -1;
    int32_t out = n->n_outputs ? n->outputs[0] : -1;
    if (in < 0 || out < 0)
        return cp_diag_set(c->d, CP_ERR_INVALID, "node '%s' (%s) has no data %s", n->name,
                           n->op_type, in < 0 ? "input" : "output");
    const struct cp_tensor *I = cp_graph_tensor(c->g, in), *O = cp_graph_tensor(c->g, out);
    uint64_t ib = cp_memplan_tensor_bytes(I), ob = cp_memplan_tensor_bytes(O);
    if (ib != ob || I->dtype != O->dtype)
        return cp_diag_set(c->d, CP_ERR_INVALID,
                           "node '%s' (%s): output '%s' (%s, %llu bytes) cannot view input '%s' "
                           "(%s, %llu bytes)",
                           n->name, n->op_type, O->name, cp_dtype_name(O->dtype),
                           (unsigned long long)ob, I->name, cp_dtype_name(I->dtype),
                           (unsigned long long)ib);
    if (mp->root[out] >= 0)
        return cp_diag_set(c->d, CP_ERR_INVALID, "tensor '%s' is written twice (node '%s')",
                           O->name, n->name);
    mp->root[out] = mp->root[in];
    mp->block[out] = mp->block[mp->root[in]];
    return CP_OK;
}

static enum cp_status write_outputs(struct build_ctx *c, const struct cp_node *n, int32_t step)
{
    for (size_t i = 0; i < n->n_outputs; i++) {
        int32_t t = n->outputs[i];
        if (t < 0)
            continue;
        if (c->mp->root[t] >= 0)
            return cp_diag_set(c->d, CP_ERR_INVALID,
                               "tensor '%s' is written by node '%s' (%s) but is a graph input, "
                               "an initializer or written before",
                               cp_graph_tensor(c->g, t)->name, n->name, n->op_type);
        enum cp_status st = add_block(c, n, t, step, step);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

static enum cp_status init_tensors(struct build_ctx *c)
{
    struct cp_memplan *mp = c->mp;
    size_t nt = cp_graph_n_tensors(c->g);
    mp->root = cp_calloc(nt + 1, sizeof *mp->root);
    mp->block = cp_calloc(nt + 1, sizeof *mp->block);
    mp->blocks = cp_calloc(nt + 1, sizeof *mp->blocks);
    if (!mp->root || !mp->block || !mp->blocks)
        return cp_diag_set(c->d, CP_ERR_NOMEM, "out of memory planning memory");
    for (size_t i = 0; i < nt; i++) {
        const struct cp_tensor *t = cp_graph_tensor(c->g, (int32_t)i);
        mp->root[i] = t->kind == CP_TENSOR_INITIALIZER ? (int32_t)i : -1;
        mp->block[i] = -1;
    }
    /* Graph inputs first: live over the whole run. */
    for (size_t i = 0; i < cp_graph_n_inputs(c->g); i++) {
        int32_t t = cp_graph_input(c->g, i);
        if (mp->root[t] >= 0)
            continue; /* listed twice, or an initializer listed as an input */
        enum cp_status st = add_block(c, NULL, t, 0, mp->n_steps);
        if (st != CP_OK)
            return st;
    }
    /* A subgraph's outer-scope references are filled like inputs. */
    for (size_t i = 0; i < cp_graph_n_outer(c->g); i++) {
        int32_t t = cp_graph_outer(c->g, i);
        if (mp->root[t] >= 0)
            continue;
        enum cp_status st = add_block(c, NULL, t, 0, mp->n_steps);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

/* FusedConv writes its result over its residual (input 3) when nothing
 * reads the residual afterwards: its oneDNN kernel then adds the residual
 * with a sum post-op onto the destination it already fills, instead of
 * copying the residual there first. Conditions: the residual's buffer ends
 * at this step, has the output's size, is read by no other input of the
 * node, and the output has a buffer of its own; the output's buffer (and
 * its views) then become the residual's, which lives as long as both. */
static void share_residuals(struct build_ctx *c, const int32_t *order, const bool *is_view,
                            size_t n)
{
    struct cp_memplan *mp = c->mp;
    size_t nt = cp_graph_n_tensors(c->g);
    int32_t step = 0;
    for (size_t k = 0; k < n; k++) {
        if (is_view[k])
            continue;
        const struct cp_node *node = cp_graph_node(c->g, order[k]);
        int32_t here = step++;
        if (node->op != CP_OP_FUSED_CONV || node->n_inputs < 4 || node->inputs[3] < 0 ||
            node->n_outputs < 1 || node->outputs[0] < 0)
            continue;
        int32_t r = mp->root[node->inputs[3]], out = node->outputs[0];
        if (r < 0 || mp->root[out] != out)
            continue;
        int32_t br = mp->block[r], bo = mp->block[out];
        if (br < 0 || bo < 0 || br == bo || mp->blocks[br].last != here ||
            mp->blocks[br].size != mp->blocks[bo].size)
            continue;
        bool shared = false; /* read by another input, or a graph output */
        for (size_t i = 0; i < 3 && i < node->n_inputs; i++)
            shared = shared || (node->inputs[i] >= 0 && mp->root[node->inputs[i]] == r);
        for (size_t i = 0; i < cp_graph_n_outputs(c->g); i++)
            shared = shared || mp->root[cp_graph_output(c->g, i)] == r;
        if (shared)
            continue;
        mp->blocks[br].last = mp->blocks[bo].last;
        mp->blocks[bo].size = 0; /* no longer anyone's */
        mp->blocks[bo].last = mp->blocks[bo].first;
        for (size_t t = 0; t < nt; t++)
            if (mp->block[t] == bo) {
                mp->block[t] = br;
                mp->root[t] = r;
            }
    }
}

enum cp_status cp_memplan_build(const struct cp_graph *g, const int32_t *order, const bool *is_view,
                                size_t n, enum cp_buffer_opt mode, struct cp_memplan *mp,
                                struct cp_diag *d)
{
    memset(mp, 0, sizeof *mp);
    struct build_ctx c = {.g = g, .mp = mp, .d = d};
    for (size_t k = 0; k < n; k++)
        mp->n_steps += is_view[k] ? 0 : 1;
    enum cp_status st = init_tensors(&c);
    if (st != CP_OK)
        return st;
    bool *weight_seen = cp_calloc(cp_graph_n_tensors(g) + 1, sizeof *weight_seen);
    if (!weight_seen)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory planning memory");
    int32_t step = 0;
    for (size_t k = 0; k < n && st == CP_OK; k++) {
        const struct cp_node *node = cp_graph_node(g, order[k]);
        st = read_inputs(&c, node, !is_view[k], step, weight_seen);
        if (st != CP_OK)
            break;
        if (is_view[k]) {
            st = alias_view(&c, node);
        } else {
            st = write_outputs(&c, node, step);
            step++;
        }
    }
    free(weight_seen);
    if (st != CP_OK)
        return st;
    if (mode != CP_BUF_OFF_OPTIMIZE)
        share_residuals(&c, order, is_view, n);
    /* Outputs are read after the last step: keep them intact until then. */
    for (size_t i = 0; i < cp_graph_n_outputs(g); i++) {
        int32_t t = cp_graph_output(g, i);
        int32_t r = mp->root[t];
        if (r < 0)
            return cp_diag_set(d, CP_ERR_INVALID, "graph output '%s' is never produced",
                               cp_graph_tensor(g, t)->name);
        if (mp->block[r] >= 0)
            mp->blocks[mp->block[r]].last = mp->n_steps;
    }
    /* Any placement ends at or below the sum of the aligned sizes, so once
     * that sum fits, no offset computed while placing can wrap. */
    uint64_t total = 0;
    for (size_t i = 0; i < mp->n_blocks; i++) {
        uint64_t sz = align_up(mp->blocks[i].size);
        if (sz > CP_TENSOR_MAX_BYTES - total)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "the tensors need more than %llu bytes together (at tensor '%s'), "
                               "more than 64-bit offsets address",
                               (unsigned long long)CP_TENSOR_MAX_BYTES,
                               cp_graph_tensor(g, mp->blocks[i].tensor)->name);
        total += sz;
    }
    bool reuse = mode != CP_BUF_OFF_OPTIMIZE;
    if (cp_memplan_place(mp->blocks, mp->n_blocks, mp->n_steps, reuse, &mp->arena_bytes,
                         &mp->peak_bytes) != CP_OK)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory planning memory");
    return CP_OK;
}

void cp_memplan_release(struct cp_memplan *mp)
{
    free(mp->root);
    free(mp->block);
    free(mp->blocks);
    memset(mp, 0, sizeof *mp);
}
