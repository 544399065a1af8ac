/* Einsum's equation and its reference arithmetic (op_eval.h), shared by
 * inference and the reference kernel. */
#include "graph/op_eval.h"

#include <stdio.h>
#include <string.h>

static int letter_label(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return 26 + ch - 'a';
    return -1;
}

/* One term: labels (ELL for the ellipsis) in order. OUT: *n, *has_ell. */
#define ELL (-2)
static bool parse_term(const char **p, int *labels, int *n, bool *has_ell, char *why, size_t wn)
{
    *n = 0;
    *has_ell = false;
    while (**p == ' ')
        (*p)++;
    while (**p && **p != ',' && **p != '-') {
        if (**p == ' ') {
            (*p)++;
            continue;
        }
        if (**p == '.') {
            if (strncmp(*p, "...", 3) != 0 || *has_ell) {
                snprintf(why, wn, "a malformed ellipsis");
                return false;
            }
            *has_ell = true;
            labels[(*n)++] = ELL;
            *p += 3;
            continue;
        }
        int l = letter_label(**p);
        if (l < 0) {
            snprintf(why, wn, "character '%c' is not a letter", **p);
            return false;
        }
        if (*n >= CP_MAX_RANK + 1) {
            snprintf(why, wn, "a term has more than %d labels", CP_MAX_RANK);
            return false;
        }
        labels[(*n)++] = l;
        (*p)++;
    }
    return true;
}

bool cp_eval_einsum_plan(const char *eq, int n_in, const struct cp_shape *const *shapes,
                         struct cp_einsum *e, char *why, size_t wn)
{
    memset(e, 0, sizeof *e);
    for (int l = 0; l < CP_EINSUM_MAX_LABELS; l++)
        e->size[l] = -1;
    if (n_in < 1 || n_in > CP_EINSUM_MAX_IN) {
        snprintf(why, wn, "%d inputs (1 to %d supported)", n_in, CP_EINSUM_MAX_IN);
        return false;
    }
    e->n_in = n_in;
    const char *p = eq ? eq : "";
    int terms[CP_EINSUM_MAX_IN][CP_MAX_RANK + 1], nt[CP_EINSUM_MAX_IN];
    bool ell[CP_EINSUM_MAX_IN];
    int n_ell = 0, count[52] = {0};
    for (int i = 0; i < n_in; i++) {
        if (i > 0) {
            if (*p != ',') {
                snprintf(why, wn, "the equation has fewer terms than the %d inputs", n_in);
                return false;
            }
            p++;
        }
        if (!parse_term(&p, terms[i], &nt[i], &ell[i], why, wn))
            return false;
        int r = shapes[i]->rank, letters = nt[i] - (ell[i] ? 1 : 0);
        if (r < 0 || (ell[i] ? r < letters : r != letters)) {
            snprintf(why, wn, "input %d has rank %d but its term has %d labels", i, r, letters);
            return false;
        }
        if (ell[i] && r - letters > n_ell)
            n_ell = r - letters;
    }
    if (*p == ',') {
        snprintf(why, wn, "the equation has more terms than the %d inputs", n_in);
        return false;
    }
    /* Dims of each input and label sizes. */
    for (int i = 0; i < n_in; i++) {
        int r = shapes[i]->rank, letters = nt[i] - (ell[i] ? 1 : 0), d = 0;
        int ne = r - letters;
        for (int t = 0; t < nt[i]; t++) {
            if (terms[i][t] == ELL) {
                for (int j = 0; j < ne; j++)
                    e->label[i][d++] = 52 + (n_ell - ne) + j;
            } else {
                count[terms[i][t]]++;
                e->label[i][d++] = terms[i][t];
            }
        }
        e->rank[i] = r;
        for (int a = 0; a < r; a++) {
            int l = e->label[i][a];
            int64_t v = shapes[i]->dims[a].value;
            e->dim[i][a] = v;
            if (v < 0)
                continue;
            if (e->size[l] < 0 || e->size[l] == 1)
                e->size[l] = v;
            else if (v != e->size[l] && !(v == 1 && l >= 52)) {
                snprintf(why, wn, "label dims disagree (%lld vs %lld)", (long long)v,
                         (long long)e->size[l]);
                return false;
            }
        }
        for (int a = 0; a < r; a++)
            if (e->size[e->label[i][a]] < 0)
                e->size[e->label[i][a]] = -2; /* used, size unknown */
    }
    e->out_rank = 0;
    if (strncmp(p, "->", 2) == 0) {
        p += 2;
        int o[CP_MAX_RANK + 1], no;
        bool oe;
        if (!parse_term(&p, o, &no, &oe, why, wn))
            return false;
        if (*p) {
            snprintf(why, wn, "unexpected '%c' in the output term", *p);
            return false;
        }
        for (int t = 0; t < no; t++) {
            if (o[t] == ELL) {
                for (int j = 0; j < n_ell; j++)
                    e->out_label[e->out_rank++] = 52 + j;
                continue;
            }
            if (count[o[t]] == 0) {
                snprintf(why, wn, "output label '%c' is in no input",
                         o[t] < 26 ? 'A' + o[t] : 'a' + o[t] - 26);
                return false;
            }
            for (int q = 0; q < e->out_rank; q++)
                if (e->out_label[q] == o[t]) {
                    snprintf(why, wn, "an output label repeats");
                    return false;
                }
            if (e->out_rank >= CP_MAX_RANK) {
                snprintf(why, wn, "the output has more than %d dims", CP_MAX_RANK);
                return false;
            }
            e->out_label[e->out_rank++] = o[t];
        }
    } else if (*p) {
        snprintf(why, wn, "unexpected '%c'", *p);
        return false;
    } else {
        for (int j = 0; j < n_ell; j++)
            e->out_label[e->out_rank++] = 52 + j;
        for (int l = 0; l < 52; l++)
            if (count[l] == 1) {
                if (e->out_rank >= CP_MAX_RANK) {
                    snprintf(why, wn, "the output has more than %d dims", CP_MAX_RANK);
                    return false;
                }
                e->out_label[e->out_rank++] = l;
            }
    }
    return true;
}

void cp_eval_einsum(const struct cp_einsum *e, const enum cp_dtype *in_dt, const void *const *in,
                    enum cp_dtype out_dt, void *out)
{
    /* Iteration labels: the output's, then the contracted ones. */
    int lab[CP_EINSUM_MAX_LABELS], nl = 0;
    bool is_out[CP_EINSUM_MAX_LABELS] = {false};
    for (int q = 0; q < e->out_rank; q++) {
        lab[nl++] = e->out_label[q];
        is_out[e->out_label[q]] = true;
    }
    for (int l = 0; l < CP_EINSUM_MAX_LABELS; l++)
        if (e->size[l] != -1 && !is_out[l])
            lab[nl++] = l;
    /* Per input, the element stride of each label (summed over repeats, so
     * "ii->i" walks the diagonal; 0 where a broadcast dim is 1). */
    int64_t stride[CP_EINSUM_MAX_IN][CP_EINSUM_MAX_LABELS];
    for (int i = 0; i < e->n_in; i++) {
        memset(stride[i], 0, sizeof stride[i]);
        int64_t s = 1;
        for (int a = e->rank[i] - 1; a >= 0; a--) {
            int l = e->label[i][a];
            if (!(e->dim[i][a] == 1 && e->size[l] != 1))
                stride[i][l] += s;
            s *= e->dim[i][a];
        }
    }
    int64_t n_out = 1, n_red = 1;
    for (int q = 0; q < nl; q++) {
        if (q < e->out_rank)
            n_out *= e->size[lab[q]];
        else
            n_red *= e->size[lab[q]];
    }
    int64_t idx[CP_EINSUM_MAX_LABELS];
    for (int64_t o = 0; o < n_out; o++) {
        int64_t rem = o;
        for (int q = e->out_rank - 1; q >= 0; q--) {
            idx[q] = rem % e->size[lab[q]];
            rem /= e->size[lab[q]];
        }
        double acc = 0.0;
        for (int64_t r = 0; r < n_red; r++) {
            rem = r;
            for (int q = nl - 1; q >= e->out_rank; q--) {
                idx[q] = rem % e->size[lab[q]];
                rem /= e->size[lab[q]];
            }
            double prod = 1.0;
            for (int i = 0; i < e->n_in; i++) {
                int64_t off = 0;
                for (int q = 0; q < nl; q++)
                    off += idx[q] * stride[i][lab[q]];
                prod *= cp_elem_load_f64(in[i], in_dt[i], off);
            }
            acc += prod;
        }
        cp_eval_store_f64(out, out_dt, o, acc);
    }
}
