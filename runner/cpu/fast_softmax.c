/*
 * Softmax over the innermost axis in plain C (f32): the attention scores
 * case, [batch, heads, tokens, tokens] along the last axis.
 *
 * One row at a time, kept in L1: max, then exp(x - max) written straight to
 * the output while summing, then one scaling pass over the output row. The
 * input is read once and the output written once, which makes it a
 * streaming kernel, with an exp specialised for x <= 0 (fast_math.h). On
 * [1,4,1024,1024] with 2 threads: 0.75 ms against 1.47 ms for oneDNN's
 * softmax_v2. oneDNN's softmax handles the other axes and ragged rows.
 *
 * The node's impl attribute (ImplModePass, --op_select_implmode) picks the
 * exponential: "fast" (the default) is the polynomial above, within a few
 * ulp; "exact" is libm's expf, one call per element, for rows of any
 * length (oneDNN's softmax then refuses the node, so every exact softmax
 * over the innermost axis runs here, and other axes on the reference).
 */
#include "runner/cpu/fast_math.h"
#include "runner/cpu/fast_util.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

struct smx_state {
    int64_t rows, len;
    bool exact;
};

static bool smx_exact(const struct cp_node *n)
{
    return strcmp(cp_node_attr_string(n, "impl", "fast"), "exact") == 0;
}

/* Rows and row length when the softmax runs over a contiguous innermost
 * block; false otherwise. */
static bool smx_geom(const struct cp_graph *g, const struct cp_node *n, int64_t *rows, int64_t *len)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0);
    int64_t xd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    if (r < 1)
        return false;
    bool old = cp_fk_opset(g) < 13;
    int64_t axis = cp_node_attr_int(n, "axis", old ? 1 : -1);
    if (axis < 0)
        axis += r;
    if (axis < 0 || axis >= r)
        return false;
    *rows = 1;
    *len = 1;
    for (int i = 0; i < r; i++) {
        if (i < axis)
            *rows *= xd[i];
        else if (i == axis || old)
            *len *= xd[i];
        else if (xd[i] != 1)
            return false; /* softmax over a strided axis: oneDNN */
    }
    /* Rows that are not whole vectors (cross-attention's 77 keys) leave a
     * scalar tail per row; oneDNN's softmax is faster there (136 us against
     * 187 us on [1,4,1024,77]). */
    return *rows > 0 && *len > 0 && (*len % 16 == 0 || smx_exact(n));
}

static bool smx_supports(const struct cp_graph *g, const struct cp_node *n)
{
    int64_t rows, len;
    return n->n_inputs == 1 && n->n_outputs == 1 && cp_fk_in_is(g, n, 0, CP_DTYPE_F32) &&
           cp_fk_out_is(g, n, 0, CP_DTYPE_F32) && smx_geom(g, n, &rows, &len);
}

static enum cp_status smx_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct smx_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    if (!smx_geom(k->g, k->node, &s->rows, &s->len)) {
        free(s);
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': bad softmax axis", k->node->name);
    }
    s->exact = smx_exact(k->node);
    k->state = s;
    return CP_OK;
}

CP_FK_HOT static void smx_rows(const float *x, float *y, int64_t len, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * len;
        float *yr = y + r * len;
        float m = xr[0];
#pragma omp simd reduction(max : m)
        for (int64_t i = 0; i < len; i++)
            m = xr[i] > m ? xr[i] : m;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < len; i++) {
            float e = cp_fm_exp_nonpos(xr[i] - m);
            yr[i] = e;
            sum += e;
        }
        float inv = 1.0f / sum;
        for (int64_t i = 0; i < len; i++)
            yr[i] *= inv;
    }
}

/* The same with libm's expf (impl "exact"). */
static void smx_rows_exact(const float *x, float *y, int64_t len, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * len;
        float *yr = y + r * len;
        float m = xr[0];
        for (int64_t i = 0; i < len; i++)
            m = xr[i] > m ? xr[i] : m;
        float sum = 0.0f;
        for (int64_t i = 0; i < len; i++) {
            float e = expf(xr[i] - m);
            yr[i] = e;
            sum += e;
        }
        float inv = 1.0f / sum;
        for (int64_t i = 0; i < len; i++)
            yr[i] *= inv;
    }
}

static void smx_range(const struct smx_state *s, const float *x, float *y, int64_t r0, int64_t r1)
{
    if (s->exact)
        smx_rows_exact(x, y, s->len, r0, r1);
    else
        smx_rows(x, y, s->len, r0, r1);
}

static enum cp_status smx_run(struct cp_kexec *k)
{
    const struct smx_state *s = k->state;
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    int nt = cp_fk_threads(k, s->rows * s->len, 8192);
    if (nt <= 1) {
        smx_range(s, x, y, 0, s->rows);
        return CP_OK;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t b, e;
        cp_fk_split(s->rows, 1, &b, &e);
        smx_range(s, x, y, b, e);
    }
    return CP_OK;
}

static void smx_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

const struct cp_kernel cp_fast_softmax = {"c:softmax", CP_OP_SOFTMAX, smx_supports, smx_prepare,
                                          smx_run,     smx_release,   NULL};
