/* Reference kernels of the [nn] family's normalisations: LRN,
 * LpNormalization and MeanVarianceNormalization (ref_nn_ops.h). */
#include "runner/cpu/ref_nn_ops.h"

/* ---- LRN ---------------------------------------------------------------------------- */

static bool lrn_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return cp_nn_float_io(g, n) && cp_ref_in(g, n, 0)->shape.rank >= 2 &&
           cp_nn_same_shape(cp_ref_in(g, n, 0), cp_ref_out(g, n, 0)) &&
           cp_node_attr_int(n, "size", 0) >= 1;
}

static enum cp_status lrn_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int64_t size = cp_node_attr_int(k->node, "size", 1);
    double alpha = cp_node_attr_float(k->node, "alpha", 1e-4f);
    double beta = cp_node_attr_float(k->node, "beta", 0.75f);
    double bias = cp_node_attr_float(k->node, "bias", 1.0f);
    int64_t batch = xs->dims[0].value, ch = xs->dims[1].value;
    int64_t plane = cp_ref_span(xs, 2, xs->rank);
    int64_t lo_off = (size - 1) / 2, hi_off = size - 1 - lo_off;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t c = 0; c < ch; c++) {
            int64_t c0 = c - lo_off < 0 ? 0 : c - lo_off;
            int64_t c1 = c + hi_off > ch - 1 ? ch - 1 : c + hi_off;
            for (int64_t p = 0; p < plane; p++) {
                double sum = 0.0;
                for (int64_t j = c0; j <= c1; j++) {
                    double v = LD(0, (b * ch + j) * plane + p);
                    sum += v * v;
                }
                int64_t i = (b * ch + c) * plane + p;
                ST(i, LD(0, i) / pow(bias + alpha / (double)size * sum, beta));
            }
        }
    return CP_OK;
}

static enum cp_status lrn_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, lrn_run_plain);
}

CP_REF_KERNEL(cp_ref_lrn, CP_OP_LRN, lrn_supports, cp_ref_layout_prepare, lrn_run);

/* ---- LpNormalization ---------------------------------------------------------------------- */

static int norm_axis(const struct cp_node *n, int rank)
{
    int64_t a = cp_node_attr_int(n, "axis", -1);
    return (int)(a < 0 ? a + rank : a);
}

static bool lp_norm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_nn_float_io(g, n) || !cp_nn_same_shape(cp_ref_in(g, n, 0), cp_ref_out(g, n, 0)))
        return false;
    int r = cp_ref_in(g, n, 0)->shape.rank, ax = norm_axis(n, r);
    int64_t p = cp_node_attr_int(n, "p", 2);
    return r >= 1 && ax >= 0 && ax < r && (p == 1 || p == 2);
}

static enum cp_status lp_norm_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int ax = norm_axis(k->node, xs->rank);
    bool p1 = cp_node_attr_int(k->node, "p", 2) == 1;
    int64_t outer = cp_ref_span(xs, 0, ax), len = xs->dims[ax].value;
    int64_t inner = cp_ref_span(xs, ax + 1, xs->rank);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in;
            double s = 0.0;
            for (int64_t j = 0; j < len; j++) {
                double v = LD(0, base + j * inner);
                s += p1 ? fabs(v) : v * v;
            }
            double norm = p1 ? s : sqrt(s);
            for (int64_t j = 0; j < len; j++)
                ST(base + j * inner, norm != 0.0 ? LD(0, base + j * inner) / norm : 0.0);
        }
    return CP_OK;
}

static enum cp_status lp_norm_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, lp_norm_run_plain);
}

CP_REF_KERNEL(cp_ref_lp_normalization, CP_OP_LP_NORMALIZATION, lp_norm_supports,
              cp_ref_layout_prepare, lp_norm_run);

/* ---- MeanVarianceNormalization --------------------------------------------------------------- */

/* The reduced axes as a mask; false when an axis is out of range. */
static bool mvn_mask(const struct cp_node *n, int rank, bool *mask)
{
    for (int i = 0; i < rank; i++)
        mask[i] = false;
    const struct cp_attr *a = cp_node_attr(n, "axes");
    static const int64_t dflt[] = {0, 2, 3};
    const int64_t *ax = a ? a->ints : dflt;
    size_t na = a ? a->n : 3;
    for (size_t i = 0; i < na; i++) {
        int64_t v = ax[i] < 0 ? ax[i] + rank : ax[i];
        if (v < 0 || v >= rank)
            return false;
        mask[v] = true;
    }
    return true;
}

static bool mvn_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_nn_float_io(g, n) || !cp_nn_same_shape(cp_ref_in(g, n, 0), cp_ref_out(g, n, 0)))
        return false;
    bool mask[CP_MAX_RANK];
    const struct cp_attr *a = cp_node_attr(n, "axes");
    if (a && a->type != CP_ATTR_INTS)
        return false;
    return mvn_mask(n, cp_ref_in(g, n, 0)->shape.rank, mask);
}

/* Flat index of element r of group gi: the kept dims' coordinates come from
 * gi, the reduced dims' from r (both row-major over their dims). */
static int64_t mvn_index(const struct cp_shape *s, const bool *mask, int64_t gi, int64_t r)
{
    int64_t idx = 0, stride = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        int64_t n = s->dims[d].value, c;
        if (mask[d]) {
            c = r % n;
            r /= n;
        } else {
            c = gi % n;
            gi /= n;
        }
        idx += c * stride;
        stride *= n;
    }
    return idx;
}

static enum cp_status mvn_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    bool mask[CP_MAX_RANK];
    mvn_mask(k->node, xs->rank, mask);
    int64_t red = 1, groups = 1;
    for (int d = 0; d < xs->rank; d++)
        *(mask[d] ? &red : &groups) *= xs->dims[d].value;
    if (red == 0)
        return CP_OK;
    for (int64_t gi = 0; gi < groups; gi++) {
        double s = 0.0;
        for (int64_t r = 0; r < red; r++)
            s += LD(0, mvn_index(xs, mask, gi, r));
        double mean = s / (double)red, v = 0.0;
        for (int64_t r = 0; r < red; r++) {
            double dv = LD(0, mvn_index(xs, mask, gi, r)) - mean;
            v += dv * dv;
        }
        double sd = sqrt(v / (double)red) + 1e-9;
        for (int64_t r = 0; r < red; r++) {
            int64_t i = mvn_index(xs, mask, gi, r);
            ST(i, (LD(0, i) - mean) / sd);
        }
    }
    return CP_OK;
}

static enum cp_status mvn_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, mvn_run_plain);
}

CP_REF_KERNEL(cp_ref_mvn, CP_OP_MEAN_VARIANCE_NORMALIZATION, mvn_supports, cp_ref_layout_prepare,
              mvn_run);
