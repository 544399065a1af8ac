/* int8 calibration: run the source model (unconverted, fp32) on
 * representative inputs and take the range of every activation an int8
 * node reads or writes, by minmax, percentile or entropy (see
 * cp_calib_range). The ranges go into the conversion config
 * (quant_ranges), which Int8QuantizationPass quantizes with and the .om
 * records.
 *
 * Minmax needs one pass over the samples; percentile and entropy two: the
 * first finds each tensor's extent, the second fills a histogram of
 * CP_CALIB_BINS bins over it (of |x| for entropy). Only the histograms are
 * kept, never the activations. */
#include "tuner/tuner_internal.h"

#include "onnx/onnx.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the ranges from a histogram ----------------------------------------------- */

/* Percentile: the values below which (100 - p)% and p% of the samples
 * fall, from a histogram over [lo, hi]. */
static void percentile_range(const struct cp_calib_acc *a, double p, double *lo, double *hi)
{
    double total = 0;
    for (int i = 0; i < CP_CALIB_BINS; i++)
        total += (double)a->hist[i];
    double w = (a->max - a->min) / CP_CALIB_BINS;
    double want_lo = total * (100.0 - p) / 100.0, want_hi = total * p / 100.0;
    double cum = 0;
    *lo = a->min;
    *hi = a->max;
    bool lo_set = false;
    for (int i = 0; i < CP_CALIB_BINS; i++) {
        cum += (double)a->hist[i];
        if (!lo_set && cum > want_lo) {
            *lo = a->min + i * w;
            lo_set = true;
        }
        if (cum >= want_hi) {
            *hi = a->min + (i + 1) * w;
            break;
        }
    }
}

/* Entropy (KL divergence, as TensorRT's calibrator): among thresholds T =
 * i bins of the |x| histogram (i from the number of levels up), the one
 * whose `levels`-level quantization of the clipped distribution differs
 * least from it. Values above T are clipped into the last bin. */
static double entropy_threshold(const struct cp_calib_acc *a, int levels)
{
    const int B = CP_CALIB_BINS;
    double amax = fmax(fabs(a->min), fabs(a->max));
    double w = amax / B;
    double *p = malloc((size_t)B * sizeof *p), *q = malloc((size_t)B * sizeof *q);
    if (!p || !q) {
        free(p);
        free(q);
        return amax;
    }
    double tail = 0;
    for (int i = 0; i < B; i++)
        tail += (double)a->hist[i];
    double best_kl = INFINITY;
    int best = B;
    /* tail = sum of hist[i..B) at the top of each step */
    for (int i = 0; i < levels && i < B; i++)
        tail -= (double)a->hist[i];
    for (int i = levels; i <= B; i++) {
        double total = 0;
        for (int k = 0; k < i; k++) {
            p[k] = (double)a->hist[k];
            total += p[k];
        }
        p[i - 1] += tail;
        total += tail;
        if (i < B)
            tail -= (double)a->hist[i];
        if (!(total > 0))
            continue;
        /* q: the first i bins, without the clipped tail, merged into
         * `levels` groups, each group's mass spread over its non-empty
         * bins: what `levels` quantization levels over [0, T] can tell
         * apart. The tail is in p only, so clipping is what a small T
         * pays for (at i == levels, q is the bins themselves). */
        double qtotal = 0;
        for (int g = 0; g < levels; g++) {
            int b0 = (int)((int64_t)g * i / levels), b1 = (int)((int64_t)(g + 1) * i / levels);
            double mass = 0;
            int nz = 0;
            for (int k = b0; k < b1; k++) {
                mass += (double)a->hist[k];
                nz += a->hist[k] != 0;
            }
            for (int k = b0; k < b1; k++)
                q[k] = a->hist[k] != 0 && nz ? mass / nz : 0;
            qtotal += mass;
        }
        if (!(qtotal > 0))
            continue;
        double kl = 0;
        for (int k = 0; k < i; k++) {
            if (p[k] <= 0)
                continue;
            double pk = p[k] / total, qk = q[k] / qtotal;
            /* a bin p has and q lacks (the last, holding the tail): a
             * large but finite penalty, as TensorRT's smoothing gives */
            kl += pk * log(pk / (qk > 0 ? qk : 1e-4 / i));
        }
        if (kl < best_kl) {
            best_kl = kl;
            best = i;
        }
    }
    free(p);
    free(q);
    return fmin((best + 0.5) * w, amax);
}

void cp_calib_range(const struct cp_calib_acc *a, enum cp_calib_method m, double percentile,
                    double *lo, double *hi)
{
    *lo = a->min;
    *hi = a->max;
    if (!(a->max > a->min) || a->count == 0)
        return;
    if (m == CP_CALIB_PERCENTILE) {
        percentile_range(a, percentile, lo, hi);
    } else if (m == CP_CALIB_ENTROPY) {
        bool nonneg = a->min >= 0;
        double t = entropy_threshold(a, nonneg ? 255 : 128);
        *lo = nonneg ? 0 : -t;
        *hi = t;
    }
}

void cp_calib_acc_add(struct cp_calib_acc *a, const float *v, int64_t n, int pass,
                      enum cp_calib_method m)
{
    if (pass == 0) {
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(v[i]))
                continue;
            if (a->count == 0 || v[i] < a->min)
                a->min = v[i];
            if (a->count == 0 || v[i] > a->max)
                a->max = v[i];
            a->count++;
        }
        return;
    }
    if (!(a->max > a->min))
        return;
    if (m == CP_CALIB_ENTROPY) {
        double amax = fmax(fabs(a->min), fabs(a->max));
        double scale = CP_CALIB_BINS / amax;
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(v[i]))
                continue;
            int64_t b = (int64_t)(fabs(v[i]) * scale);
            a->hist[b >= CP_CALIB_BINS ? CP_CALIB_BINS - 1 : b]++;
        }
    } else {
        double scale = CP_CALIB_BINS / (a->max - a->min);
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(v[i]))
                continue;
            int64_t b = (int64_t)((v[i] - a->min) * scale);
            a->hist[b < 0 ? 0 : b >= CP_CALIB_BINS ? CP_CALIB_BINS - 1 : b]++;
        }
    }
}

/* ---- the samples ------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The entries of `dir` (no dot files), sorted, as full paths. */
static enum cp_status list_dir(const char *dir, char ***out, size_t *n, struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    DIR *dh = opendir(dir);
    if (!dh)
        return cp_diag_set(d, CP_ERR_USAGE, "--calibration_data=%s: cannot open the folder", dir);
    size_t cap = 0;
    enum cp_status st = CP_OK;
    for (struct dirent *e; (e = readdir(dh)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **g = cp_realloc_array(*out, cap, sizeof *g);
            if (!g) {
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            *out = g;
        }
        struct cp_buf b;
        cp_buf_init(&b);
        cp_buf_printf(&b, "%s/%s", dir, e->d_name);
        if (!b.data) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        (*out)[(*n)++] = b.data;
    }
    closedir(dh);
    if (*n)
        qsort(*out, *n, sizeof **out, cmp_str);
    return st;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* The calibration samples: each one the "NAME=FILE" input values of one
 * run. DIR holds either one sub-folder a sample (its files name the inputs
 * by file name without suffix, or, as many as the inputs, give them in
 * sorted order), or, for a model of one input, one file a sample. */
struct samples {
    char **args; /* n * n_inputs strings */
    size_t n, n_inputs;
};

static void samples_release(struct samples *s)
{
    free_list(s->args, s->n * s->n_inputs);
    memset(s, 0, sizeof *s);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static bool stem_is(const char *path, const char *name)
{
    const char *b = base_name(path);
    size_t k = strlen(name);
    return strncmp(b, name, k) == 0 && (strcmp(b + k, ".pb") == 0 || strcmp(b + k, ".npy") == 0);
}

static enum cp_status arg(char **slot, const char *name, const char *file, struct cp_diag *d)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_printf(&b, "%s=%s", name, file);
    if (!b.data)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    *slot = b.data;
    return CP_OK;
}

static enum cp_status find_samples(const char *dir, const struct cp_plan *plan, struct samples *s,
                                   struct cp_diag *d)
{
    memset(s, 0, sizeof *s);
    s->n_inputs = cp_plan_n_inputs(plan);
    char **ents = NULL;
    size_t n_ents = 0;
    enum cp_status st = list_dir(dir, &ents, &n_ents, d);
    if (st != CP_OK)
        goto out;
    if (n_ents == 0) {
        st = cp_diag_set(d, CP_ERR_USAGE, "--calibration_data=%s: the folder is empty", dir);
        goto out;
    }
    size_t n_dirs = 0;
    for (size_t i = 0; i < n_ents; i++)
        n_dirs += is_dir(ents[i]);
    if (n_dirs && n_dirs != n_ents) {
        st = cp_diag_set(d, CP_ERR_USAGE,
                         "--calibration_data=%s: mixes sample folders and files; give one folder "
                         "a sample, or (one input) one file a sample",
                         dir);
        goto out;
    }
    if (!n_dirs && s->n_inputs != 1) {
        st = cp_diag_set(d, CP_ERR_USAGE,
                         "--calibration_data=%s: the model has %zu inputs; give one folder a "
                         "sample, holding a NAME.pb or NAME.npy file per input",
                         dir, s->n_inputs);
        goto out;
    }
    s->args = calloc(n_ents * s->n_inputs, sizeof *s->args);
    if (!s->args) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    s->n = n_ents;
    for (size_t k = 0; k < n_ents && st == CP_OK; k++) {
        char **slot = s->args + k * s->n_inputs;
        if (!n_dirs) {
            st = arg(slot, cp_plan_input(plan, 0)->name, ents[k], d);
            continue;
        }
        char **files = NULL;
        size_t n_files = 0;
        if ((st = list_dir(ents[k], &files, &n_files, d)) != CP_OK)
            break;
        /* by name when any file names an input, else by position */
        bool named = false;
        for (size_t i = 0; i < s->n_inputs && !named; i++)
            for (size_t f = 0; f < n_files && !named; f++)
                named = stem_is(files[f], cp_plan_input(plan, i)->name);
        for (size_t i = 0; i < s->n_inputs && st == CP_OK; i++) {
            const char *name = cp_plan_input(plan, i)->name;
            const char *file = NULL;
            for (size_t f = 0; f < n_files && !file; f++)
                if (stem_is(files[f], name))
                    file = files[f];
            if (!file && !named && n_files == s->n_inputs)
                file = files[i];
            if (!file)
                st = cp_diag_set(d, CP_ERR_USAGE,
                                 "--calibration_data: sample %s has no file for input '%s' "
                                 "(%s.pb or %s.npy, or exactly %zu files in input order)",
                                 ents[k], name, name, name, s->n_inputs);
            else
                st = arg(&slot[i], name, file, d);
        }
        free_list(files, n_files);
    }
out:
    free_list(ents, n_ents);
    if (st != CP_OK)
        samples_release(s);
    return st;
}

/* ---- what to capture ----------------------------------------------------------- */

static bool is_int8_op(const char *type)
{
    return strcmp(type, "Conv") == 0 || strcmp(type, "MatMul") == 0 || strcmp(type, "Gemm") == 0;
}

static bool listed(const char *canon, const struct cp_node *n)
{
    if (!canon)
        return true;
    char entry[160];
    snprintf(entry, sizeof entry, "OpType::%s", n->op_type ? n->op_type : "");
    return cp_keep_dtype_has(canon, n->name) || cp_keep_dtype_has(canon, entry);
}

static enum cp_status add_name(char ***v, size_t *n, size_t *cap, const char *name,
                               struct cp_diag *d)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i], name) == 0)
            return CP_OK;
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 32;
        char **g = cp_realloc_array(*v, *cap, sizeof *g);
        if (!g)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        *v = g;
    }
    if (!((*v)[*n] = cp_strdup(name)))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    (*n)++;
    return CP_OK;
}

/* The f32 tensors an int8 node of the source model reads (input 0) or
 * writes (output 0), with the names the conversion may give them instead:
 * the input of a Pad that PadFoldingPass folds into the Conv, the output of
 * a BatchNormalization that ConvBatchNormFusionPass folds into it. */
enum cp_status cp_calib_tensors(const struct cp_graph *g, const char *canon, char ***out, size_t *n,
                                struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < cp_graph_n_nodes(g) && st == CP_OK; i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (nd->dead || !nd->op_type || !is_int8_op(nd->op_type) || !listed(canon, nd) ||
            nd->n_inputs < 1 || nd->n_outputs < 1)
            continue;
        int32_t x = nd->inputs[0], y = nd->outputs[0];
        const struct cp_tensor *xt = cp_graph_tensor(g, x), *yt = cp_graph_tensor(g, y);
        if (xt->dtype != CP_DTYPE_F32)
            continue;
        st = add_name(out, n, &cap, xt->name, d);
        if (st == CP_OK && xt->producer >= 0) {
            const struct cp_node *p = cp_graph_node(g, xt->producer);
            if (p->op_type && strcmp(p->op_type, "Pad") == 0 && p->n_inputs > 0)
                st = add_name(out, n, &cap, cp_graph_tensor(g, p->inputs[0])->name, d);
        }
        if (st == CP_OK)
            st = add_name(out, n, &cap, yt->name, d);
        for (size_t k = 0; st == CP_OK && k < cp_graph_n_nodes(g); k++) {
            const struct cp_node *c = cp_graph_node(g, (int32_t)k);
            if (c->dead || !c->op_type || strcmp(c->op_type, "BatchNormalization") != 0 ||
                c->n_inputs < 1 || c->inputs[0] != y)
                continue;
            st = add_name(out, n, &cap, cp_graph_tensor(g, c->outputs[0])->name, d);
        }
    }
    if (st != CP_OK) {
        free_list(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return st;
}

void cp_calib_names_free(char **v, size_t n)
{
    free_list(v, n);
}

enum cp_status cp_calib_nodes(const struct cp_convert_config *c, char ***out, size_t *n,
                              struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    struct cp_graph *g = NULL;
    char hash[33];
    size_t cap = 0;
    enum cp_status st = cp_onnx_import(c->model, c->input_shapes, c->n_input_shapes, &g, hash, d);
    if (st == CP_OK)
        st = cp_graph_verify(g, d);
    if (st == CP_OK)
        st = cp_graph_compact(g, d);
    if (st == CP_OK)
        st = cp_graph_infer(g, d);
    for (size_t i = 0; st == CP_OK && i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (!nd->dead && nd->op_type && is_int8_op(nd->op_type) && nd->n_inputs > 1 &&
            cp_graph_tensor(g, nd->inputs[0])->dtype == CP_DTYPE_F32)
            st = add_name(out, n, &cap, nd->name, d);
    }
    cp_graph_free(g);
    if (st != CP_OK) {
        free_list(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return st;
}

/* ---- the run --------------------------------------------------------------------- */

static void shapes_text(const struct cp_convert_config *c, struct cp_buf *b)
{
    for (size_t i = 0; i < c->n_input_shapes; i++) {
        const struct cp_input_shape *s = &c->input_shapes[i];
        cp_buf_printf(b, "%s%s:", i ? ";" : "", s->name);
        for (int k = 0; k < s->rank; k++)
            cp_buf_printf(b, "%s%lld", k ? "," : "", (long long)s->dims[k]);
    }
}

/* The value of tensor `name` in this run: an output of the plan, or an
 * input given (graph inputs are not outputs). */
static enum cp_status tensor_values(struct cp_session *s, const struct cp_session_inputs *in,
                                    const char *name, struct cp_host_tensor *t, bool *own,
                                    struct cp_diag *d)
{
    *own = false;
    for (size_t i = 0; i < in->n; i++)
        if (strcmp(cp_plan_input(s->plan, i)->name, name) == 0) {
            *t = in->t[i];
            return CP_OK;
        }
    for (size_t i = 0; i < cp_plan_n_outputs(s->plan); i++)
        if (strcmp(cp_plan_output(s->plan, i)->name, name) == 0) {
            *own = true;
            return cp_plan_get_output(s->plan, i, t, d);
        }
    return cp_diag_set(d, CP_ERR_INTERNAL, "calibration: tensor '%s' is not an output", name);
}

enum cp_status cp_tune_calibrate(struct cp_convert_config *c, const struct cp_calib_opts *o,
                                 struct cp_diag *d)
{
    struct cp_buf shapes;
    cp_buf_init(&shapes);
    shapes_text(c, &shapes);
    char **names = NULL;
    size_t n_names = 0;
    struct cp_calib_acc *acc = NULL;
    struct samples smp = {0};
    struct cp_session s;
    memset(&s, 0, sizeof s);
    struct cp_buf table;
    cp_buf_init(&table);

    /* The tensors, from the source graph. */
    struct cp_graph *g = NULL;
    char hash[33];
    enum cp_status st = cp_onnx_import(c->model, c->input_shapes, c->n_input_shapes, &g, hash, d);
    if (st == CP_OK)
        st = cp_graph_verify(g, d);
    if (st == CP_OK)
        st = cp_graph_compact(g, d);
    if (st == CP_OK)
        st = cp_graph_infer(g, d);
    for (const char *p = o->all_candidates ? "" : c->int8_nodes; st == CP_OK && *p;) {
        /* a node the model lacks is named before any sample runs */
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        bool found = len >= 8 && strncmp(p, "OpType::", 8) == 0;
        for (size_t i = 0; !found && i < cp_graph_n_nodes(g); i++) {
            const char *nm = cp_graph_node(g, (int32_t)i)->name;
            found = strlen(nm) == len && strncmp(nm, p, len) == 0;
        }
        if (!found)
            st = cp_diag_set(d, CP_ERR_USAGE,
                             "--int8_nodes=%s: %s has no node named '%.*s' (list the ONNX node "
                             "names of the source model, or OpType::TYPE)",
                             c->int8_nodes_file, c->model, (int)len, p);
        p = nl ? nl + 1 : p + len;
    }
    if (st == CP_OK)
        st = cp_calib_tensors(g, o->all_candidates ? NULL : c->int8_nodes, &names, &n_names, d);
    cp_graph_free(g);
    if (st != CP_OK)
        goto out;
    if (n_names == 0) {
        st = cp_diag_set(d, CP_ERR_USAGE,
                         "--int8_nodes=%s: %s has no listed Conv, MatMul or Gemm with an f32 "
                         "input to quantize",
                         c->int8_nodes_file, c->model);
        goto out;
    }
    struct cp_session_opts so = {
        .model_path = c->model,
        .input_shape = shapes.len ? shapes.data : NULL,
        .threads = o->threads,
        .buffer_optimize = -1,
        .extra_outputs = (const char *const *)names,
        .n_extra_outputs = n_names,
    };
    if ((st = cp_session_open(&s, &so, d)) != CP_OK)
        goto out;
    size_t n_samples;
    if (c->calibration_data[0]) {
        if ((st = find_samples(c->calibration_data, s.plan, &smp, d)) != CP_OK)
            goto out;
        n_samples = smp.n;
        if (c->calibration_samples && (size_t)c->calibration_samples < n_samples)
            n_samples = (size_t)c->calibration_samples;
    } else {
        n_samples = c->calibration_samples ? (size_t)c->calibration_samples : 8;
        cp_log_msg(o->log, CP_LOG_WARNING,
                   "int8 calibration on %zu seeded random inputs: they are not representative of "
                   "real data, so the ranges (and the precision loss measured on random inputs) "
                   "can mislead; give --calibration_data DIR",
                   n_samples);
    }
    acc = calloc(n_names, sizeof *acc);
    if (!acc) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    int passes = c->calibration_method == CP_CALIB_MINMAX ? 1 : 2;
    for (int pass = 0; pass < passes && st == CP_OK; pass++) {
        for (size_t k = 0; k < n_samples && st == CP_OK; k++) {
            struct cp_session_inputs in;
            const char *const *args =
                smp.args ? (const char *const *)smp.args + k * smp.n_inputs : NULL;
            st = cp_session_make_inputs(&s, args, args ? smp.n_inputs : 0,
                                        o->seed + 7919 * (uint64_t)k, &in, d);
            if (st != CP_OK)
                break;
            for (size_t i = 0; i < in.n && st == CP_OK; i++)
                st = cp_plan_set_input(s.plan, i, &in.t[i], d);
            if (st == CP_OK)
                st = cp_plan_run(s.plan, -1, d);
            for (size_t t = 0; t < n_names && st == CP_OK; t++) {
                struct cp_host_tensor v;
                bool own;
                if ((st = tensor_values(&s, &in, names[t], &v, &own, d)) != CP_OK)
                    break;
                if (v.dtype == CP_DTYPE_F32)
                    cp_calib_acc_add(&acc[t], v.data, cp_host_tensor_numel(&v), pass,
                                     c->calibration_method);
                if (own)
                    cp_host_tensor_release(&v);
            }
            cp_session_inputs_release(&in);
        }
    }
    if (st != CP_OK)
        goto out;
    cp_buf_printf(&table, "# int8 activation ranges of %s: %s calibration on %zu %s\n", c->model,
                  cp_calib_method_name(c->calibration_method), n_samples,
                  c->calibration_data[0] ? "samples" : "seeded random inputs");
    for (size_t t = 0; t < n_names; t++) {
        if (acc[t].count == 0)
            continue;
        double lo, hi;
        cp_calib_range(&acc[t], c->calibration_method, c->calibration_percentile, &lo, &hi);
        cp_buf_printf(&table, "%s %.9g %.9g\n", names[t], lo, hi);
    }
    if (table.failed) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    st = cp_quant_ranges_parse("(calibration)", table.data, table.len, c->quant_ranges,
                               sizeof c->quant_ranges, d);
    if (st == CP_OK)
        c->calibration_samples = (int)n_samples;
out:
    cp_session_close(&s);
    samples_release(&smp);
    free_list(names, n_names);
    free(acc);
    cp_buf_release(&shapes);
    cp_buf_release(&table);
    return st;
}
