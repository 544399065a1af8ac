/* The geometry of a convolution against its concrete shapes (conv_geom.h). */
#include "runner/cpu/conv_geom.h"
#include "runner/cpu/fast_util.h"

#include <string.h>

static const char *auto_pad_of(const struct cp_node *n)
{
    return cp_node_attr_string(n, "auto_pad", "NOTSET");
}

static bool ints_attr(const struct cp_node *n, const char *name, int64_t *out, size_t want,
                      int64_t dflt)
{
    const struct cp_attr *a = cp_node_attr(n, name);
    if (!a) {
        for (size_t i = 0; i < want; i++)
            out[i] = dflt;
        return true;
    }
    if (a->type != CP_ATTR_INTS || a->n != want)
        return false;
    memcpy(out, a->ints, want * sizeof *out);
    return true;
}

bool cp_conv_geom(const struct cp_node *n, const struct cp_tensor *x, const struct cp_tensor *w,
                  const struct cp_tensor *y, bool transpose, struct cp_conv_geom *gm)
{
    int64_t xd[CP_MAX_RANK], wd[CP_MAX_RANK], yd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    if (r < 3 || r > 5 || cp_fk_dims(w, wd) != r || cp_fk_dims(y, yd) != r)
        return false;
    int ns = r - 2;
    gm->ns = ns;
    gm->group = cp_node_attr_int(n, "group", 1);
    if (gm->group < 1)
        return false;
    int64_t ks[3], st[3], dl[3], pads[6];
    if (!ints_attr(n, "strides", st, (size_t)ns, 1) ||
        !ints_attr(n, "dilations", dl, (size_t)ns, 1) ||
        !ints_attr(n, "pads", pads, (size_t)(2 * ns), 0) ||
        !ints_attr(n, "kernel_shape", ks, (size_t)ns, -1))
        return false;
    const char *ap = auto_pad_of(n);
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    bool valid = strcmp(ap, "VALID") == 0;
    if (!same && !valid && strcmp(ap, "NOTSET") != 0)
        return false;
    if (transpose && (same || cp_node_attr(n, "output_shape")))
        return false;
    for (int i = 0; i < ns; i++) {
        int64_t k = wd[2 + i];
        if ((ks[i] != -1 && ks[i] != k) || st[i] < 1 || dl[i] < 1)
            return false;
        int64_t range = (k - 1) * dl[i] + 1;
        int64_t in = xd[2 + i], out = yd[2 + i], pb, pe;
        if (valid) {
            pb = 0;
        } else if (same) {
            int64_t total = (out - 1) * st[i] + range - in;
            if (total < 0)
                total = 0;
            pb = strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
        } else {
            pb = pads[i];
        }
        /* The end padding follows from the output size: this also covers
         * ConvTranspose's output_padding and SAME's odd totals. */
        if (!transpose) {
            pe = (out - 1) * st[i] + range - in - pb;
            if (pe < 0) /* rows past the last window are simply unused */
                pe = 0;
            if ((in + pb + pe - range) / st[i] + 1 != out)
                return false;
        } else {
            pe = (in - 1) * st[i] + range - pb - out;
        }
        if (pb < 0 || pe < 0)
            return false;
        gm->strides[i] = st[i];
        gm->dil[i] = dl[i] - 1;
        gm->pl[i] = pb;
        gm->pr[i] = pe;
    }
    return true;
}
