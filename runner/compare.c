/* Output comparison: the error metrics of `cannprof compare` and of the
 * precision constraint (precision_loss), defined in docs/precision.md.
 *
 * Everything is accumulated in double whatever the tensors' dtype, so an
 * fp32 reference and a bf16 candidate are compared on the values they hold,
 * and sums over millions of elements do not lose the small differences they
 * are meant to measure. */
#include "runner/runner.h"

#include <math.h>
#include <string.h>

static double f16_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, e - 25);
    return h & 0x8000 ? -v : v;
}

static double bf16_to_double(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Element i of t as a double; t's dtype was checked by the caller. */
static double value_at(const struct cp_host_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case CP_DTYPE_F32:
        return ((const float *)t->data)[i];
    case CP_DTYPE_F16:
        return f16_to_double(((const uint16_t *)t->data)[i]);
    case CP_DTYPE_BF16:
        return bf16_to_double(((const uint16_t *)t->data)[i]);
    case CP_DTYPE_I8:
        return ((const int8_t *)t->data)[i];
    case CP_DTYPE_U8:
    case CP_DTYPE_BOOL:
        return ((const uint8_t *)t->data)[i];
    case CP_DTYPE_I32:
        return ((const int32_t *)t->data)[i];
    case CP_DTYPE_I64:
        return (double)((const int64_t *)t->data)[i];
    default:
        return NAN;
    }
}

static bool comparable_dtype(enum cp_dtype t)
{
    return t != CP_DTYPE_UNDEFINED && t < CP_DTYPE_COUNT;
}

static void format_dims(const struct cp_host_tensor *t, char *out, size_t n)
{
    struct cp_shape s;
    cp_shape_set(&s, t->rank, t->dims);
    cp_shape_format(&s, out, n);
}

/* Two non-finite values agree when they are the same kind (both NaN, or the
 * same infinity). */
static bool nonfinite_agree(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return a == b;
}

enum cp_status cp_tensor_compare(const struct cp_host_tensor *ref,
                                 const struct cp_host_tensor *cand, double rtol, double atol,
                                 struct cp_tensor_diff *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    out->worst_index = -1;
    if (!comparable_dtype(ref->dtype) || !comparable_dtype(cand->dtype))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "output '%s': dtype %s vs %s cannot be compared",
                           ref->name, cp_dtype_name(ref->dtype), cp_dtype_name(cand->dtype));
    bool same_shape = ref->rank == cand->rank;
    for (int k = 0; same_shape && k < ref->rank; k++)
        same_shape = ref->dims[k] == cand->dims[k];
    if (!same_shape) {
        char a[96], b[96];
        format_dims(ref, a, sizeof a);
        format_dims(cand, b, sizeof b);
        return cp_diag_set(d, CP_ERR_INVALID, "output '%s' has shape %s in the reference but %s",
                           ref->name, a, b);
    }
    int64_t n = cp_host_tensor_numel(ref);
    if (n < 0)
        return cp_diag_set(d, CP_ERR_INVALID, "output '%s' has no concrete shape", ref->name);
    out->n = n;
    double sum_abs = 0, ref_sq = 0, cand_sq = 0, diff_sq = 0, dot = 0;
    double worst_excess = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double a = value_at(ref, i), b = value_at(cand, i);
        if (!isfinite(a) || !isfinite(b)) {
            if (!nonfinite_agree(a, b)) {
                out->n_nonfinite_mismatch++;
                out->n_beyond++;
                if (worst_excess < INFINITY) {
                    worst_excess = INFINITY;
                    out->worst_index = i;
                }
            }
            continue;
        }
        double e = fabs(a - b);
        sum_abs += e;
        if (e > out->max_abs)
            out->max_abs = e;
        ref_sq += a * a;
        cand_sq += b * b;
        diff_sq += e * e;
        dot += a * b;
        double excess = e - (atol + rtol * fabs(a));
        if (excess > 0)
            out->n_beyond++;
        if (excess > worst_excess) {
            worst_excess = excess;
            out->worst_index = i;
        }
    }
    if (out->worst_index >= 0) {
        out->worst_ref = value_at(ref, out->worst_index);
        out->worst_cand = value_at(cand, out->worst_index);
    }
    out->ref_sq = ref_sq;
    out->diff_sq = diff_sq;
    out->mean_abs = n ? sum_abs / (double)n : 0;
    if (out->n_nonfinite_mismatch) {
        out->max_abs = INFINITY;
        out->mean_abs = INFINITY;
    }
    out->rel_l2 = cp_rel_l2(diff_sq, ref_sq);
    if (out->n_nonfinite_mismatch)
        out->rel_l2 = INFINITY;
    /* Equal values are exactly similar: the division below rounds a cosine
     * of equal vectors to 1 - 1 ulp as often as not, and JSON's 17 digits
     * show it. */
    if ((ref_sq == 0 && cand_sq == 0) || (diff_sq == 0 && !out->n_nonfinite_mismatch))
        out->cosine = 1;
    else if (ref_sq == 0 || cand_sq == 0)
        out->cosine = 0;
    else
        out->cosine = fmin(1.0, fmax(-1.0, dot / (sqrt(ref_sq) * sqrt(cand_sq))));
    out->within = out->n_beyond == 0;
    return CP_OK;
}

double cp_rel_l2(double diff_sq, double ref_sq)
{
    if (diff_sq == 0)
        return 0;
    if (ref_sq == 0)
        return INFINITY;
    return sqrt(diff_sq) / sqrt(ref_sq);
}

double cp_precision_loss(const struct cp_tensor_diff *diffs, size_t n)
{
    double diff_sq = 0, ref_sq = 0;
    for (size_t i = 0; i < n; i++) {
        if (diffs[i].n_nonfinite_mismatch)
            return INFINITY;
        diff_sq += diffs[i].diff_sq;
        ref_sq += diffs[i].ref_sq;
    }
    return 100.0 * cp_rel_l2(diff_sq, ref_sq);
}
