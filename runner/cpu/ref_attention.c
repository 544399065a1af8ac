/* Reference kernel for FusedAttention: for every batch, head and query row,
 * the scores against all M keys (in double), their softmax, and the
 * weighted sum of V rows, straight from the definition
 * softmax(scale * Q Kᵀ + mask) V. It does hold a whole score row (M
 * doubles of scratch); only the fast kernels avoid it.
 *
 * compute_precision "bf16" is defined as: Q, K and V rounded to bf16
 * (nearest even), everything else as in fp32. */
#include "runner/cpu/attention.h"
#include "runner/cpu/ref_util.h"

#include <math.h>

static bool att_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct cp_att_geom geo;
    return cp_att_geom_init(g, n, &geo);
}

static enum cp_status att_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct cp_att_geom geo;
    if (!cp_att_geom_init(k->g, k->node, &geo))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': malformed FusedAttention", k->node->name);
    /* One score row and one query row. */
    k->scratch_bytes = (size_t)(geo.m + geo.d) * sizeof(double);
    return CP_OK;
}

static double att_load(const float *p, bool bf16)
{
    return bf16 ? (double)cp_att_round_bf16(*p) : (double)*p;
}

static enum cp_status att_run(struct cp_kexec *k)
{
    struct cp_att_geom geo;
    if (!cp_att_geom_init(k->g, k->node, &geo) || !k->scratch)
        return CP_ERR_INTERNAL;
    const float *Q = k->in_data[0], *K = k->in_data[1], *V = k->in_data[2];
    const float *mask = geo.has_mask ? k->in_data[3] : NULL;
    float *Y = k->out_data[0];
    double *score = k->scratch, *qrow = score + geo.m;
    for (int64_t b = 0; b < geo.batch; b++) {
        for (int64_t h = 0; h < geo.heads; h++) {
            const float *qb = Q + b * geo.q.b + h * geo.q.h;
            const float *kb = K + b * geo.k.b + h * geo.k.h;
            const float *vb = V + b * geo.v.b + h * geo.v.h;
            float *yb = Y + b * geo.out.b + h * geo.out.h;
            for (int64_t i = 0; i < geo.n; i++) {
                for (int64_t c = 0; c < geo.d; c++)
                    qrow[c] = att_load(qb + i * geo.q.row + c * geo.q.d, geo.bf16);
                double mx = -INFINITY;
                for (int64_t j = 0; j < geo.m; j++) {
                    double s = 0.0;
                    for (int64_t c = 0; c < geo.d; c++)
                        s += qrow[c] * att_load(kb + j * geo.k.row + c * geo.k.d, geo.bf16);
                    s *= geo.scale;
                    if (mask)
                        s += mask[b * geo.mask.b + h * geo.mask.h + i * geo.mask.row +
                                  j * geo.mask.d];
                    score[j] = s;
                    mx = s > mx ? s : mx;
                }
                /* A row of -inf (fully masked) gives NaN, as the unfused
                 * Softmax does. */
                double sum = 0.0;
                for (int64_t j = 0; j < geo.m; j++) {
                    score[j] = exp(score[j] - mx);
                    sum += score[j];
                }
                for (int64_t c = 0; c < geo.dv; c++) {
                    double o = 0.0;
                    for (int64_t j = 0; j < geo.m; j++)
                        o += score[j] * att_load(vb + j * geo.v.row + c * geo.v.d, geo.bf16);
                    yb[i * geo.out.row + c * geo.out.d] = (float)(o / sum);
                }
            }
        }
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_fused_attention, CP_OP_FUSED_ATTENTION, att_supports, att_prepare, att_run);
