/* The conversion config: ATC flag names and values, validation, the
 * reproducing command line, JSON form and stable id. */
#include "core/json.h"
#include "om/config.h"
#include "om/config_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const precision_names[] = {
    [CP_PREC_FORCE_FP32] = "force_fp32",
    [CP_PREC_FORCE_FP16] = "force_fp16",
    [CP_PREC_CUBE_FP16IN_FP32OUT] = "cube_fp16in_fp32out",
    [CP_PREC_ALLOW_MIX_PRECISION] = "allow_mix_precision",
    [CP_PREC_ALLOW_FP32_TO_FP16] = "allow_fp32_to_fp16",
    [CP_PREC_MUST_KEEP_ORIGIN_DTYPE] = "must_keep_origin_dtype",
    [CP_PREC_ALLOW_MIX_PRECISION_FP16] = "allow_mix_precision_fp16",
    [CP_PREC_ALLOW_MIX_PRECISION_BF16] = "allow_mix_precision_bf16",
    [CP_PREC_ALLOW_FP32_TO_BF16] = "allow_fp32_to_bf16",
};
_Static_assert(sizeof precision_names / sizeof *precision_names == CP_PREC_COUNT, "precision");

static const char *const implmode_names[] = {
    [CP_IMPL_HIGH_PERFORMANCE] = "high_performance",
    [CP_IMPL_HIGH_PRECISION] = "high_precision",
    [CP_IMPL_HIGH_PRECISION_FOR_ALL] = "high_precision_for_all",
    [CP_IMPL_HIGH_PERFORMANCE_FOR_ALL] = "high_performance_for_all",
};
_Static_assert(sizeof implmode_names / sizeof *implmode_names == CP_IMPL_COUNT, "implmode");

static const char *const buffer_names[] = {
    [CP_BUF_L2_OPTIMIZE] = "l2_optimize",
    [CP_BUF_L1_OPTIMIZE] = "l1_optimize",
    [CP_BUF_OFF_OPTIMIZE] = "off_optimize",
};
_Static_assert(sizeof buffer_names / sizeof *buffer_names == CP_BUF_COUNT, "buffer");

static const char *const format_names[] = {
    [CP_FMT_NCHW] = "NCHW",
    [CP_FMT_NCDHW] = "NCDHW",
    [CP_FMT_ND] = "ND",
    [CP_FMT_NHWC] = "NHWC",
};
_Static_assert(sizeof format_names / sizeof *format_names == CP_FMT_COUNT, "format");

static const char *const layout_policy_names[] = {
    [CP_LAYOUT_POLICY_NCHW] = "nchw",
    [CP_LAYOUT_POLICY_NHWC] = "nhwc",
    [CP_LAYOUT_POLICY_BLOCKED] = "blocked",
    [CP_LAYOUT_POLICY_AUTO] = "auto",
};
_Static_assert(sizeof layout_policy_names / sizeof *layout_policy_names == CP_LAYOUT_POLICY_COUNT,
               "layout policy");

static const char *const log_names[] = {"debug", "info", "warning", "error", "null"};
static const char *const calib_names[] = {"minmax", "percentile", "entropy"};

const char *cp_precision_mode_name(enum cp_precision_mode m)
{
    return (unsigned)m < CP_PREC_COUNT ? precision_names[m] : "?";
}

const char *cp_implmode_name(enum cp_implmode m)
{
    return (unsigned)m < CP_IMPL_COUNT ? implmode_names[m] : "?";
}

const char *cp_buffer_opt_name(enum cp_buffer_opt b)
{
    return (unsigned)b < CP_BUF_COUNT ? buffer_names[b] : "?";
}

const char *cp_input_format_name(enum cp_input_format f)
{
    return (unsigned)f < CP_FMT_COUNT ? format_names[f] : "?";
}

const char *cp_layout_policy_name(enum cp_layout_policy p)
{
    return (unsigned)p < CP_LAYOUT_POLICY_COUNT ? layout_policy_names[p] : "?";
}

const char *cp_log_level_name(enum cp_log_level l)
{
    return (unsigned)l <= CP_LOG_NULL ? log_names[l] : "?";
}

const char *cp_calib_method_name(enum cp_calib_method m)
{
    return (unsigned)m < CP_CALIB_COUNT ? calib_names[m] : "?";
}

void cp_convert_config_init(struct cp_convert_config *c)
{
    memset(c, 0, sizeof *c);
    c->framework = 5;
    c->input_format = CP_FMT_NCHW;
    c->layout_policy = CP_LAYOUT_POLICY_AUTO;
    c->precision_mode = CP_PREC_FORCE_FP32;
    c->buffer_optimize = CP_BUF_L2_OPTIMIZE;
    c->implmode = CP_IMPL_HIGH_PERFORMANCE;
    snprintf(c->soc_version, sizeof c->soc_version, "cpu");
    c->log = CP_LOG_NULL;
    c->calibration_method = CP_CALIB_MINMAX;
    c->calibration_percentile = 99.999;
}

bool cp_cfg_parse_f64(const char *s, double *out)
{
    char *end = NULL;
    if (!s || !*s)
        return false;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* Find `value` in a name table; on failure list the accepted names. */
static enum cp_status pick(const char *const *names, int n, const char *flag, const char *value,
                           int *out, struct cp_diag *d)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], value) == 0) {
            *out = i;
            return CP_OK;
        }
    struct cp_buf b;
    cp_buf_init(&b);
    for (int i = 0; i < n; i++)
        cp_buf_printf(&b, "%s%s", i ? ", " : "", names[i]);
    enum cp_status st =
        cp_diag_set(d, CP_ERR_USAGE, "--%s: '%s' is not a valid value; use one of: %s", flag, value,
                    b.data ? b.data : "");
    cp_buf_release(&b);
    return st;
}

static enum cp_status copy_str(char *dst, size_t cap, const char *flag, const char *value,
                               struct cp_diag *d)
{
    if (strlen(value) >= cap)
        return cp_diag_set(d, CP_ERR_USAGE, "--%s: value is longer than %zu characters", flag,
                           cap - 1);
    memcpy(dst, value, strlen(value) + 1);
    return CP_OK;
}

/* --optypelist_for_implmode: the op types with a fast and an exact
 * implementation (ImplModePass), in their ONNX spelling; ATC's SoftmaxV2
 * reads as Softmax. Sorted, without repeats, joined by ','. */
static enum cp_status parse_optypelist(const char *value, char *out, size_t cap, struct cp_diag *d)
{
    static const char *const known[] = {"Erf", "FusedAttention", "Gelu", "Softmax"};
    bool on[sizeof known / sizeof *known] = {false};
    char copy[512];
    if (strlen(value) >= sizeof copy)
        return cp_diag_set(d, CP_ERR_USAGE, "--optypelist_for_implmode: the list is too long");
    snprintf(copy, sizeof copy, "%s", value);
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        char *e = t + strlen(t);
        while (e > t && e[-1] == ' ')
            *--e = '\0';
        if (strcmp(t, "SoftmaxV2") == 0)
            t = "Softmax";
        size_t k = 0;
        while (k < sizeof known / sizeof *known && strcmp(known[k], t) != 0)
            k++;
        if (k == sizeof known / sizeof *known)
            return cp_diag_set(d, CP_ERR_USAGE,
                               "--optypelist_for_implmode: '%s' has no implementation choice; "
                               "the op types that have one: Erf, FusedAttention, Gelu, Softmax "
                               "(SoftmaxV2)",
                               t);
        on[k] = true;
    }
    size_t at = 0;
    out[0] = '\0';
    for (size_t k = 0; k < sizeof known / sizeof *known; k++)
        if (on[k])
            at += (size_t)snprintf(out + at, cap - at, "%s%s", at ? "," : "", known[k]);
    if (!out[0])
        return cp_diag_set(d, CP_ERR_USAGE, "--optypelist_for_implmode: no op type given");
    return CP_OK;
}

/* "name:1,3,224,224;name2:-1,77" */
static enum cp_status parse_input_shape(struct cp_convert_config *c, const char *value,
                                        struct cp_diag *d)
{
    c->n_input_shapes = 0;
    char *copy = cp_strdup(value);
    if (!copy)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = CP_OK;
    char *save = NULL;
    for (char *item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        if (c->n_input_shapes == CP_MAX_INPUT_SHAPES) {
            st = cp_diag_set(d, CP_ERR_USAGE, "--input_shape: more than %d inputs",
                             CP_MAX_INPUT_SHAPES);
            goto out;
        }
        /* Names may themselves contain ':' (TensorFlow style "x:0"), so the
         * dimensions start after the last one. */
        char *colon = strrchr(item, ':');
        if (!colon || colon == item) {
            st = cp_diag_set(d, CP_ERR_USAGE,
                             "--input_shape: '%s' should be name:d0,d1,... (e.g. "
                             "\"input:1,3,224,224\")",
                             item);
            goto out;
        }
        *colon = '\0';
        struct cp_input_shape *s = &c->input_shapes[c->n_input_shapes];
        memset(s, 0, sizeof *s);
        if (strlen(item) >= sizeof s->name) {
            st = cp_diag_set(d, CP_ERR_USAGE, "--input_shape: input name '%s' is too long", item);
            goto out;
        }
        for (size_t k = 0; k < c->n_input_shapes; k++)
            if (strcmp(c->input_shapes[k].name, item) == 0) {
                st = cp_diag_set(d, CP_ERR_USAGE, "--input_shape: input '%s' is given twice", item);
                goto out;
            }
        snprintf(s->name, sizeof s->name, "%s", item);
        char *dims = colon + 1;
        if (*dims != '\0') {
            char *save2 = NULL;
            for (char *tok = strtok_r(dims, ",", &save2); tok; tok = strtok_r(NULL, ",", &save2)) {
                int64_t v;
                if (strchr(tok, '~')) {
                    st = cp_diag_set(d, CP_ERR_USAGE,
                                     "--input_shape: input '%s': shape ranges ('%s') are not "
                                     "supported on the cpu target; use -1 with "
                                     "--dynamic_batch_size",
                                     s->name, tok);
                    goto out;
                }
                if (!cp_parse_i64(tok, &v) || v < -1 || v > (1ll << 31)) {
                    st = cp_diag_set(d, CP_ERR_USAGE,
                                     "--input_shape: input '%s': '%s' is not a dimension "
                                     "(0 or a positive integer, or -1 for dynamic)",
                                     s->name, tok);
                    goto out;
                }
                if (s->rank == CP_MAX_RANK) {
                    st = cp_diag_set(d, CP_ERR_USAGE,
                                     "--input_shape: input '%s' has more than %d dimensions",
                                     s->name, CP_MAX_RANK);
                    goto out;
                }
                s->dims[s->rank++] = v;
            }
        }
        c->n_input_shapes++;
    }
    if (c->n_input_shapes == 0)
        st = cp_diag_set(d, CP_ERR_USAGE, "--input_shape: empty value");
out:
    free(copy);
    return st;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static enum cp_status parse_dynamic_batch(struct cp_convert_config *c, const char *value,
                                          struct cp_diag *d)
{
    c->n_dynamic_batch = 0;
    char *copy = cp_strdup(value);
    if (!copy)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = CP_OK;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (!cp_parse_i64(tok, &v) || v < 1 || v > 65536) {
            st = cp_diag_set(d, CP_ERR_USAGE,
                             "--dynamic_batch_size: '%s' is not a batch size (1..65536)", tok);
            goto out;
        }
        if (c->n_dynamic_batch == CP_MAX_DYN_BATCH) {
            st = cp_diag_set(d, CP_ERR_USAGE, "--dynamic_batch_size: at most %d profiles",
                             CP_MAX_DYN_BATCH);
            goto out;
        }
        for (size_t k = 0; k < c->n_dynamic_batch; k++)
            if (c->dynamic_batch[k] == v) {
                st = cp_diag_set(d, CP_ERR_USAGE,
                                 "--dynamic_batch_size: batch size %lld is listed twice",
                                 (long long)v);
                goto out;
            }
        c->dynamic_batch[c->n_dynamic_batch++] = v;
    }
    if (c->n_dynamic_batch < 2)
        st = cp_diag_set(d, CP_ERR_USAGE,
                         "--dynamic_batch_size: give at least 2 batch sizes, e.g. \"1,2,4,8\"");
    else
        qsort(c->dynamic_batch, c->n_dynamic_batch, sizeof c->dynamic_batch[0], cmp_i64);
out:
    free(copy);
    return st;
}

static enum cp_status set_framework(struct cp_convert_config *c, const char *value,
                                    struct cp_diag *d)
{
    int64_t v;
    if (!cp_parse_i64(value, &v))
        return cp_diag_set(d, CP_ERR_USAGE, "--framework: '%s' is not a number; use 5 (ONNX)",
                           value);
    static const char *const names[] = {"Caffe", "MindSpore", NULL, "TensorFlow"};
    if (v >= 0 && v <= 3 && names[v])
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--framework=%lld (%s) is not supported: cannprof converts ONNX "
                           "models, use --framework=5",
                           (long long)v, names[v]);
    if (v != 5)
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--framework=%lld is not a valid framework; use 5 (ONNX)", (long long)v);
    c->framework = 5;
    return CP_OK;
}

enum cp_status cp_convert_config_set(struct cp_convert_config *c, const char *flag,
                                     const char *value, struct cp_diag *d)
{
    int v = 0;
    enum cp_status st;
    if (!value)
        return cp_diag_set(d, CP_ERR_USAGE, "--%s needs a value", flag);
    if (strcmp(flag, "model") == 0)
        return copy_str(c->model, sizeof c->model, flag, value, d);
    if (strcmp(flag, "output") == 0) {
        if (!value[0])
            return cp_diag_set(d, CP_ERR_USAGE, "--output: empty path");
        if (cp_path_has_suffix(value, ".om"))
            return cp_diag_set(d, CP_ERR_USAGE,
                               "--output=%s: give the path without the .om suffix, as with "
                               "ATC (cannprof adds .om)",
                               value);
        return copy_str(c->output, sizeof c->output, flag, value, d);
    }
    if (strcmp(flag, "framework") == 0)
        return set_framework(c, value, d);
    if (strcmp(flag, "input_shape") == 0)
        return parse_input_shape(c, value, d);
    if (strcmp(flag, "dynamic_batch_size") == 0)
        return parse_dynamic_batch(c, value, d);
    if (strcmp(flag, "fusion_switch_file") == 0) {
        if (!value[0])
            return cp_diag_set(d, CP_ERR_USAGE, "--fusion_switch_file: empty path");
        /* The switches come from the file's content, read later
         * (cp_convert_config_load_fusion_switches); a new path makes the
         * old set stale. */
        c->fusion_switches[0] = '\0';
        return copy_str(c->fusion_switch_file, sizeof c->fusion_switch_file, flag, value, d);
    }
    if (strcmp(flag, "optypelist_for_implmode") == 0)
        return parse_optypelist(value, c->optypelist_for_implmode,
                                sizeof c->optypelist_for_implmode, d);
    if (strcmp(flag, "layout_regions") == 0)
        return cp_layout_regions_parse(value, c->layout_regions, sizeof c->layout_regions, d);
    if (strcmp(flag, "op_kernels") == 0)
        return cp_op_kernels_parse(value, c->op_kernels, sizeof c->op_kernels, d);
    if (strcmp(flag, "keep_dtype") == 0) {
        if (!value[0])
            return cp_diag_set(d, CP_ERR_USAGE, "--keep_dtype: empty path");
        c->keep_dtype[0] = '\0'; /* read from the file later, as the switches */
        return copy_str(c->keep_dtype_file, sizeof c->keep_dtype_file, flag, value, d);
    }
    if (strcmp(flag, "modify_mixlist") == 0 || strcmp(flag, "customize_dtypes") == 0) {
        if (!value[0])
            return cp_diag_set(d, CP_ERR_USAGE, "--%s: empty path", flag);
        c->precision_overrides[0] = '\0'; /* read from the files later */
        bool mix = flag[0] == 'm';
        return copy_str(mix ? c->modify_mixlist_file : c->customize_dtypes_file,
                        mix ? sizeof c->modify_mixlist_file : sizeof c->customize_dtypes_file, flag,
                        value, d);
    }
    if (strcmp(flag, "int8_nodes") == 0) {
        if (!value[0])
            return cp_diag_set(d, CP_ERR_USAGE, "--int8_nodes: empty path");
        c->int8_nodes[0] = '\0';
        return copy_str(c->int8_nodes_file, sizeof c->int8_nodes_file, flag, value, d);
    }
    if (strcmp(flag, "quant_ranges") == 0) {
        if (!value[0])
            return cp_diag_set(d, CP_ERR_USAGE, "--quant_ranges: empty path");
        c->quant_ranges[0] = '\0';
        return copy_str(c->quant_ranges_file, sizeof c->quant_ranges_file, flag, value, d);
    }
    if (strcmp(flag, "calibration_data") == 0) {
        if (!value[0])
            return cp_diag_set(d, CP_ERR_USAGE, "--calibration_data: empty path");
        return copy_str(c->calibration_data, sizeof c->calibration_data, flag, value, d);
    }
    if (strcmp(flag, "calibration_method") == 0) {
        st = pick(calib_names, CP_CALIB_COUNT, flag, value, &v, d);
        if (st == CP_OK)
            c->calibration_method = (enum cp_calib_method)v;
        return st;
    }
    if (strcmp(flag, "calibration_percentile") == 0) {
        double p;
        if (!cp_cfg_parse_f64(value, &p) || p < 50 || p > 100)
            return cp_diag_set(d, CP_ERR_USAGE,
                               "--calibration_percentile: '%s' is not a percentile from 50 to "
                               "100 (e.g. 99.99)",
                               value);
        c->calibration_percentile = p;
        return CP_OK;
    }
    if (strcmp(flag, "calibration_samples") == 0) {
        int64_t n;
        if (!cp_parse_i64(value, &n) || n < 1 || n > 100000)
            return cp_diag_set(d, CP_ERR_USAGE,
                               "--calibration_samples: '%s' is not a sample count (1..100000)",
                               value);
        c->calibration_samples = (int)n;
        return CP_OK;
    }
    if (strcmp(flag, "soc_version") == 0) {
        if (strcmp(value, "cpu") != 0)
            return cp_diag_set(d, CP_ERR_USAGE,
                               "--soc_version=%s: this build converts for the embedded cpu "
                               "target only; use --soc_version=cpu",
                               value);
        return copy_str(c->soc_version, sizeof c->soc_version, flag, value, d);
    }
    if (strcmp(flag, "input_format") == 0) {
        st = pick(format_names, CP_FMT_COUNT, flag, value, &v, d);
        if (st == CP_OK)
            c->input_format = (enum cp_input_format)v;
        return st;
    }
    if (strcmp(flag, "layout_policy") == 0) {
        st = pick(layout_policy_names, CP_LAYOUT_POLICY_COUNT, flag, value, &v, d);
        if (st == CP_OK)
            c->layout_policy = (enum cp_layout_policy)v;
        return st;
    }
    if (strcmp(flag, "precision_mode") == 0) {
        st = pick(precision_names, CP_PREC_COUNT, flag, value, &v, d);
        if (st == CP_OK)
            c->precision_mode = (enum cp_precision_mode)v;
        return st;
    }
    if (strcmp(flag, "buffer_optimize") == 0) {
        st = pick(buffer_names, CP_BUF_COUNT, flag, value, &v, d);
        if (st == CP_OK)
            c->buffer_optimize = (enum cp_buffer_opt)v;
        return st;
    }
    if (strcmp(flag, "op_select_implmode") == 0) {
        st = pick(implmode_names, CP_IMPL_COUNT, flag, value, &v, d);
        if (st == CP_OK)
            c->implmode = (enum cp_implmode)v;
        return st;
    }
    if (strcmp(flag, "log") == 0) {
        st = pick(log_names, CP_LOG_NULL + 1, flag, value, &v, d);
        if (st == CP_OK)
            c->log = (enum cp_log_level)v;
        return st;
    }
    return cp_diag_set(d, CP_ERR_USAGE, "--%s is not a conversion flag", flag);
}

enum cp_status cp_convert_config_validate(const struct cp_convert_config *c, struct cp_diag *d)
{
    if (c->optypelist_for_implmode[0] && c->implmode != CP_IMPL_HIGH_PRECISION &&
        c->implmode != CP_IMPL_HIGH_PERFORMANCE)
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--optypelist_for_implmode goes with --op_select_implmode="
                           "high_precision or high_performance, as with ATC; %s sets every op",
                           cp_implmode_name(c->implmode));
    if (c->modify_mixlist_file[0] && c->precision_mode != CP_PREC_ALLOW_MIX_PRECISION &&
        c->precision_mode != CP_PREC_ALLOW_MIX_PRECISION_BF16 &&
        c->precision_mode != CP_PREC_ALLOW_MIX_PRECISION_FP16)
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--modify_mixlist goes with a mixed precision mode, as with ATC: add "
                           "--precision_mode=allow_mix_precision_bf16 (now %s)",
                           cp_precision_mode_name(c->precision_mode));
    if (!c->model[0])
        return cp_diag_set(d, CP_ERR_USAGE, "--model is required (the ONNX file to convert)");
    if (!c->output[0])
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--output is required (the .om path without its suffix)");
    if (c->framework != 5)
        return cp_diag_set(d, CP_ERR_USAGE, "--framework must be 5 (ONNX)");
    if (c->n_dynamic_batch) {
        size_t dyn = 0;
        for (size_t i = 0; i < c->n_input_shapes; i++) {
            const struct cp_input_shape *s = &c->input_shapes[i];
            for (int k = 0; k < s->rank; k++)
                if (s->dims[k] == -1) {
                    if (k != 0)
                        return cp_diag_set(d, CP_ERR_USAGE,
                                           "--dynamic_batch_size: input '%s' has -1 in "
                                           "dimension %d; only the batch dimension (0) may be "
                                           "dynamic",
                                           s->name, k);
                    dyn++;
                }
        }
        if (dyn == 0)
            return cp_diag_set(d, CP_ERR_USAGE,
                               "--dynamic_batch_size needs --input_shape with -1 as the batch "
                               "dimension, e.g. --input_shape=\"input:-1,3,224,224\"");
    }
    return CP_OK;
}

/* Single-quote a value for a POSIX shell when it needs it. */
static void shell_word(struct cp_buf *out, const char *s)
{
    bool plain = *s != '\0';
    for (const char *p = s; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:,=+@%", *p))
            plain = false;
    if (plain) {
        cp_buf_puts(out, s);
        return;
    }
    cp_buf_putc(out, '\'');
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            cp_buf_puts(out, "'\\''");
        else
            cp_buf_putc(out, *p);
    }
    cp_buf_putc(out, '\'');
}

static void shapes_text(const struct cp_convert_config *c, struct cp_buf *b)
{
    for (size_t i = 0; i < c->n_input_shapes; i++) {
        const struct cp_input_shape *s = &c->input_shapes[i];
        cp_buf_printf(b, "%s%s:", i ? ";" : "", s->name);
        for (int k = 0; k < s->rank; k++)
            cp_buf_printf(b, "%s%lld", k ? "," : "", (long long)s->dims[k]);
    }
}

static void batch_text(const struct cp_convert_config *c, struct cp_buf *b)
{
    for (size_t i = 0; i < c->n_dynamic_batch; i++)
        cp_buf_printf(b, "%s%lld", i ? "," : "", (long long)c->dynamic_batch[i]);
}

static void flag(struct cp_buf *out, const char *name, const char *value)
{
    struct cp_buf w;
    cp_buf_init(&w);
    cp_buf_printf(&w, "--%s=%s", name, value);
    cp_buf_putc(out, ' ');
    shell_word(out, w.data ? w.data : "");
    cp_buf_release(&w);
}

void cp_convert_config_cmdline(const struct cp_convert_config *c, struct cp_buf *out)
{
    cp_buf_puts(out, "cannprof convert");
    flag(out, "model", c->model);
    flag(out, "framework", "5");
    flag(out, "output", c->output);
    struct cp_buf t;
    cp_buf_init(&t);
    if (c->n_input_shapes) {
        shapes_text(c, &t);
        flag(out, "input_shape", t.data);
        cp_buf_reset(&t);
    }
    if (c->input_format != CP_FMT_NCHW)
        flag(out, "input_format", cp_input_format_name(c->input_format));
    if (c->layout_policy != CP_LAYOUT_POLICY_AUTO)
        flag(out, "layout_policy", cp_layout_policy_name(c->layout_policy));
    if (c->layout_regions[0]) {
        char joined[sizeof c->layout_regions];
        snprintf(joined, sizeof joined, "%s", c->layout_regions);
        for (char *p = joined; *p; p++)
            if (*p == '\n')
                *p = ';';
        flag(out, "layout_regions", joined);
    }
    if (c->op_kernels[0]) {
        char joined[sizeof c->op_kernels];
        snprintf(joined, sizeof joined, "%s", c->op_kernels);
        for (char *p = joined; *p; p++)
            if (*p == '\n')
                *p = ';';
        flag(out, "op_kernels", joined);
    }
    if (c->precision_mode != CP_PREC_FORCE_FP32)
        flag(out, "precision_mode", cp_precision_mode_name(c->precision_mode));
    if (c->fusion_switch_file[0])
        flag(out, "fusion_switch_file", c->fusion_switch_file);
    if (c->keep_dtype_file[0])
        flag(out, "keep_dtype", c->keep_dtype_file);
    if (c->modify_mixlist_file[0])
        flag(out, "modify_mixlist", c->modify_mixlist_file);
    if (c->customize_dtypes_file[0])
        flag(out, "customize_dtypes", c->customize_dtypes_file);
    if (c->int8_nodes_file[0]) {
        flag(out, "int8_nodes", c->int8_nodes_file);
        if (c->quant_ranges_file[0]) {
            flag(out, "quant_ranges", c->quant_ranges_file);
        } else {
            if (c->calibration_data[0])
                flag(out, "calibration_data", c->calibration_data);
            if (c->calibration_method != CP_CALIB_MINMAX)
                flag(out, "calibration_method", cp_calib_method_name(c->calibration_method));
            if (c->calibration_method == CP_CALIB_PERCENTILE &&
                c->calibration_percentile != 99.999) {
                char num[32];
                snprintf(num, sizeof num, "%.9g", c->calibration_percentile);
                flag(out, "calibration_percentile", num);
            }
            if (c->calibration_samples) {
                char num[32];
                snprintf(num, sizeof num, "%d", c->calibration_samples);
                flag(out, "calibration_samples", num);
            }
        }
    }
    if (c->n_dynamic_batch) {
        batch_text(c, &t);
        flag(out, "dynamic_batch_size", t.data);
        cp_buf_reset(&t);
    }
    if (c->buffer_optimize != CP_BUF_L2_OPTIMIZE)
        flag(out, "buffer_optimize", cp_buffer_opt_name(c->buffer_optimize));
    if (c->implmode != CP_IMPL_HIGH_PERFORMANCE)
        flag(out, "op_select_implmode", cp_implmode_name(c->implmode));
    if (c->optypelist_for_implmode[0])
        flag(out, "optypelist_for_implmode", c->optypelist_for_implmode);
    flag(out, "soc_version", c->soc_version);
    if (c->log != CP_LOG_NULL)
        flag(out, "log", cp_log_level_name(c->log));
    cp_buf_release(&t);
}

/* Build the JSON object. `with_paths` false leaves out what does not change
 * the produced model (paths, log level), for the id. */
static json_t *config_to_json(const struct cp_convert_config *c, bool with_paths)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    if (with_paths) {
        json_object_set_new(o, "model", json_string(c->model));
        json_object_set_new(o, "output", json_string(c->output));
    }
    json_object_set_new(o, "framework", json_integer(c->framework));
    json_t *shapes = json_array();
    for (size_t i = 0; i < c->n_input_shapes; i++) {
        json_t *s = json_object();
        json_t *dims = json_array();
        for (int k = 0; k < c->input_shapes[i].rank; k++)
            json_array_append_new(dims, json_integer(c->input_shapes[i].dims[k]));
        json_object_set_new(s, "name", json_string(c->input_shapes[i].name));
        json_object_set_new(s, "dims", dims);
        json_array_append_new(shapes, s);
    }
    json_object_set_new(o, "input_shape", shapes);
    json_object_set_new(o, "input_format", json_string(cp_input_format_name(c->input_format)));
    json_object_set_new(o, "layout_policy", json_string(cp_layout_policy_name(c->layout_policy)));
    json_object_set_new(o, "precision_mode",
                        json_string(cp_precision_mode_name(c->precision_mode)));
    json_object_set_new(o, "fusion_switch_file", json_string(c->fusion_switch_file));
    json_object_set_new(o, "fusion_switches", json_string(c->fusion_switches));
    /* only when given, so that configs without them keep their ids */
    if (with_paths && c->keep_dtype_file[0])
        json_object_set_new(o, "keep_dtype_file", json_string(c->keep_dtype_file));
    if (c->keep_dtype[0])
        json_object_set_new(o, "keep_dtype", json_string(c->keep_dtype));
    if (with_paths && c->modify_mixlist_file[0])
        json_object_set_new(o, "modify_mixlist_file", json_string(c->modify_mixlist_file));
    if (with_paths && c->customize_dtypes_file[0])
        json_object_set_new(o, "customize_dtypes_file", json_string(c->customize_dtypes_file));
    if (c->precision_overrides[0])
        json_object_set_new(o, "precision_overrides", json_string(c->precision_overrides));
    if (c->layout_regions[0])
        json_object_set_new(o, "layout_regions", json_string(c->layout_regions));
    if (c->op_kernels[0])
        json_object_set_new(o, "op_kernels", json_string(c->op_kernels));
    if (c->int8_nodes[0] || c->int8_nodes_file[0]) {
        if (with_paths) {
            json_object_set_new(o, "int8_nodes_file", json_string(c->int8_nodes_file));
            json_object_set_new(o, "quant_ranges_file", json_string(c->quant_ranges_file));
            json_object_set_new(o, "calibration_data", json_string(c->calibration_data));
            json_object_set_new(o, "calibration_samples", json_integer(c->calibration_samples));
        }
        json_object_set_new(o, "int8_nodes", json_string(c->int8_nodes));
        json_object_set_new(o, "quant_ranges", json_string(c->quant_ranges));
        json_object_set_new(o, "calibration_method",
                            json_string(cp_calib_method_name(c->calibration_method)));
        json_object_set_new(o, "calibration_percentile", json_real(c->calibration_percentile));
    }
    if (c->optypelist_for_implmode[0])
        json_object_set_new(o, "optypelist_for_implmode", json_string(c->optypelist_for_implmode));
    json_t *batch = json_array();
    for (size_t i = 0; i < c->n_dynamic_batch; i++)
        json_array_append_new(batch, json_integer(c->dynamic_batch[i]));
    json_object_set_new(o, "dynamic_batch_size", batch);
    json_object_set_new(o, "buffer_optimize", json_string(cp_buffer_opt_name(c->buffer_optimize)));
    json_object_set_new(o, "op_select_implmode", json_string(cp_implmode_name(c->implmode)));
    json_object_set_new(o, "soc_version", json_string(c->soc_version));
    if (with_paths)
        json_object_set_new(o, "log", json_string(cp_log_level_name(c->log)));
    return o;
}

void cp_convert_config_json(const struct cp_convert_config *c, struct cp_buf *out)
{
    json_t *o = config_to_json(c, true);
    if (!o || cp_json_dump(o, false, out) != CP_OK)
        out->failed = true;
    json_decref(o);
}

static enum cp_status json_pick(json_t *o, const char *key, const char *const *names, int n,
                                int *out, struct cp_diag *d)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return CP_OK; /* absent: keep the default */
    if (!json_is_string(v))
        return cp_diag_set(d, CP_ERR_CORRUPT, "config: '%s' is not a string", key);
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], json_string_value(v)) == 0) {
            *out = i;
            return CP_OK;
        }
    return cp_diag_set(d, CP_ERR_CORRUPT, "config: '%s' has unknown value '%s'", key,
                       json_string_value(v));
}

static enum cp_status json_str(json_t *o, const char *key, char *dst, size_t cap, struct cp_diag *d)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return CP_OK;
    if (!json_is_string(v) || strlen(json_string_value(v)) >= cap)
        return cp_diag_set(d, CP_ERR_CORRUPT, "config: '%s' is not a string of < %zu chars", key,
                           cap);
    snprintf(dst, cap, "%s", json_string_value(v));
    return CP_OK;
}

static enum cp_status json_shapes(json_t *o, struct cp_convert_config *c, struct cp_diag *d)
{
    json_t *arr = json_object_get(o, "input_shape");
    if (!arr)
        return CP_OK;
    if (!json_is_array(arr) || json_array_size(arr) > CP_MAX_INPUT_SHAPES)
        return cp_diag_set(d, CP_ERR_CORRUPT, "config: bad 'input_shape'");
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *s = json_array_get(arr, i);
        json_t *dims = json_object_get(s, "dims");
        struct cp_input_shape *is = &c->input_shapes[i];
        memset(is, 0, sizeof *is);
        if (json_str(s, "name", is->name, sizeof is->name, d) != CP_OK)
            return CP_ERR_CORRUPT;
        if (!json_is_array(dims) || json_array_size(dims) > CP_MAX_RANK)
            return cp_diag_set(d, CP_ERR_CORRUPT, "config: bad 'input_shape' dims");
        for (size_t k = 0; k < json_array_size(dims); k++) {
            json_t *v = json_array_get(dims, k);
            if (!json_is_integer(v) || json_integer_value(v) < -1)
                return cp_diag_set(d, CP_ERR_CORRUPT, "config: bad 'input_shape' dim");
            is->dims[k] = json_integer_value(v);
        }
        is->rank = (int)json_array_size(dims);
    }
    c->n_input_shapes = json_array_size(arr);
    return CP_OK;
}

enum cp_status cp_convert_config_from_json(struct cp_convert_config *c, const char *text,
                                           struct cp_diag *d)
{
    cp_convert_config_init(c);
    json_error_t err;
    json_t *o = json_loads(text, 0, &err);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return cp_diag_set(d, CP_ERR_CORRUPT, "config: not a JSON object (%s at line %d)", err.text,
                           err.line);
    }
    enum cp_status st;
    int v;
    if ((st = json_str(o, "model", c->model, sizeof c->model, d)) ||
        (st = json_str(o, "output", c->output, sizeof c->output, d)) ||
        (st = json_str(o, "fusion_switch_file", c->fusion_switch_file, sizeof c->fusion_switch_file,
                       d)) ||
        (st = json_str(o, "fusion_switches", c->fusion_switches, sizeof c->fusion_switches, d)) ||
        (st = json_str(o, "keep_dtype_file", c->keep_dtype_file, sizeof c->keep_dtype_file, d)) ||
        (st = json_str(o, "keep_dtype", c->keep_dtype, sizeof c->keep_dtype, d)) ||
        (st = json_str(o, "modify_mixlist_file", c->modify_mixlist_file,
                       sizeof c->modify_mixlist_file, d)) ||
        (st = json_str(o, "customize_dtypes_file", c->customize_dtypes_file,
                       sizeof c->customize_dtypes_file, d)) ||
        (st = json_str(o, "precision_overrides", c->precision_overrides,
                       sizeof c->precision_overrides, d)) ||
        (st = json_str(o, "layout_regions", c->layout_regions, sizeof c->layout_regions, d)) ||
        (st = json_str(o, "op_kernels", c->op_kernels, sizeof c->op_kernels, d)) ||
        (st = json_str(o, "int8_nodes_file", c->int8_nodes_file, sizeof c->int8_nodes_file, d)) ||
        (st = json_str(o, "int8_nodes", c->int8_nodes, sizeof c->int8_nodes, d)) ||
        (st = json_str(o, "quant_ranges_file", c->quant_ranges_file, sizeof c->quant_ranges_file,
                       d)) ||
        (st = json_str(o, "quant_ranges", c->quant_ranges, sizeof c->quant_ranges, d)) ||
        (st =
             json_str(o, "calibration_data", c->calibration_data, sizeof c->calibration_data, d)) ||
        (st = json_str(o, "optypelist_for_implmode", c->optypelist_for_implmode,
                       sizeof c->optypelist_for_implmode, d)) ||
        (st = json_str(o, "soc_version", c->soc_version, sizeof c->soc_version, d)) ||
        (st = json_shapes(o, c, d)))
        goto out;
    json_t *fw = json_object_get(o, "framework");
    if (fw && !json_is_integer(fw)) {
        st = cp_diag_set(d, CP_ERR_CORRUPT, "config: 'framework' is not an integer");
        goto out;
    }
    if (fw)
        c->framework = (int)json_integer_value(fw);
    v = c->input_format;
    if ((st = json_pick(o, "input_format", format_names, CP_FMT_COUNT, &v, d)))
        goto out;
    c->input_format = (enum cp_input_format)v;
    v = c->layout_policy;
    if ((st = json_pick(o, "layout_policy", layout_policy_names, CP_LAYOUT_POLICY_COUNT, &v, d)))
        goto out;
    c->layout_policy = (enum cp_layout_policy)v;
    v = c->precision_mode;
    if ((st = json_pick(o, "precision_mode", precision_names, CP_PREC_COUNT, &v, d)))
        goto out;
    c->precision_mode = (enum cp_precision_mode)v;
    v = c->buffer_optimize;
    if ((st = json_pick(o, "buffer_optimize", buffer_names, CP_BUF_COUNT, &v, d)))
        goto out;
    c->buffer_optimize = (enum cp_buffer_opt)v;
    v = c->implmode;
    if ((st = json_pick(o, "op_select_implmode", implmode_names, CP_IMPL_COUNT, &v, d)))
        goto out;
    c->implmode = (enum cp_implmode)v;
    v = c->log;
    if ((st = json_pick(o, "log", log_names, CP_LOG_NULL + 1, &v, d)))
        goto out;
    c->log = (enum cp_log_level)v;
    v = c->calibration_method;
    if ((st = json_pick(o, "calibration_method", calib_names, CP_CALIB_COUNT, &v, d)))
        goto out;
    c->calibration_method = (enum cp_calib_method)v;
    json_t *pct = json_object_get(o, "calibration_percentile");
    if (pct) {
        if (!json_is_number(pct) ||
            !(json_number_value(pct) >= 50 && json_number_value(pct) <= 100)) {
            st = cp_diag_set(d, CP_ERR_CORRUPT, "config: bad 'calibration_percentile'");
            goto out;
        }
        c->calibration_percentile = json_number_value(pct);
    }
    json_t *ns = json_object_get(o, "calibration_samples");
    if (ns) {
        if (!json_is_integer(ns) || json_integer_value(ns) < 0 || json_integer_value(ns) > 100000) {
            st = cp_diag_set(d, CP_ERR_CORRUPT, "config: bad 'calibration_samples'");
            goto out;
        }
        c->calibration_samples = (int)json_integer_value(ns);
    }
    json_t *batch = json_object_get(o, "dynamic_batch_size");
    if (batch) {
        if (!json_is_array(batch) || json_array_size(batch) > CP_MAX_DYN_BATCH) {
            st = cp_diag_set(d, CP_ERR_CORRUPT, "config: bad 'dynamic_batch_size'");
            goto out;
        }
        for (size_t i = 0; i < json_array_size(batch); i++) {
            json_t *b = json_array_get(batch, i);
            if (!json_is_integer(b) || json_integer_value(b) < 1) {
                st = cp_diag_set(d, CP_ERR_CORRUPT, "config: bad 'dynamic_batch_size'");
                goto out;
            }
            c->dynamic_batch[i] = json_integer_value(b);
        }
        c->n_dynamic_batch = json_array_size(batch);
    }
out:
    json_decref(o);
    return st;
}

void cp_convert_config_id(const struct cp_convert_config *c, char out[17])
{
    json_t *o = config_to_json(c, false);
    char *s = cp_json_text(o);
    uint64_t h = s ? cp_hash64(s, strlen(s)) : 0;
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    free(s);
    json_decref(o);
}

bool cp_fusion_switches_turn_off(const char *switches, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = switches; p && *p;) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == nl + 4 && strncmp(p, name, nl) == 0 && strncmp(p + nl, ":off", 4) == 0)
            return true;
        p += len + (end ? 1 : 0);
    }
    return false;
}

const char *cp_convert_flag_pass(const char *key)
{
    static const struct {
        const char *key, *pass;
    } via[] = {
        {"precision_mode", "PrecisionModePass"},
        {"op_select_implmode", "ImplModePass"},
        {"layout_policy", "LayoutTransformPass"},
        {"input_format", "LayoutTransformPass"},
        {"dynamic_batch_size", "DynamicBatchPass"},
        {"keep_dtype", "PrecisionModePass"},
        {"int8_nodes", "Int8QuantizationPass"},
        {"op_kernels", "KernelSelectionPass"},
        {"modify_mixlist", "PrecisionModePass"},
        {"customize_dtypes", "PrecisionModePass"},
        {"quant_ranges", "Int8QuantizationPass"},
        {"calibration_data", "Int8QuantizationPass"},
        {"calibration_method", "Int8QuantizationPass"},
        {"calibration_percentile", "Int8QuantizationPass"},
        {"calibration_samples", "Int8QuantizationPass"},
        {"layout_regions", "LayoutTransformPass"},
        {"optypelist_for_implmode", "ImplModePass"},
    };
    for (size_t i = 0; key && i < sizeof via / sizeof *via; i++)
        if (strcmp(via[i].key, key) == 0)
            return via[i].pass;
    return NULL;
}

bool cp_convert_config_pass_is_off(const struct cp_convert_config *c, const char *name)
{
    return cp_fusion_switches_turn_off(c->fusion_switches, name);
}
