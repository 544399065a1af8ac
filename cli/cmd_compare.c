/* cannprof compare: run two models on the same inputs and measure how far
 * the second's outputs are from the first's (docs/precision.md). */
#include "cli/commands.h"
#include "cli/options.h"
#include "runner/session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* fp32-equivalence: loose enough for the reassociation of sums that fused
 * and blocked kernels bring (~1e-6 relative), tight enough that bf16
 * arithmetic (~1e-2 relative) fails it. */
#define DEFAULT_RTOL 1e-3
#define DEFAULT_ATOL 1e-4

enum {
    OPT_ATOL = 1,
    OPT_BATCH,
    OPT_HELP,
    OPT_INPUT,
    OPT_INPUT_SHAPE,
    OPT_JSON,
    OPT_RTOL,
    OPT_SEED,
    OPT_THREADS,
};

static const struct cp_opt options[] = {
    {"atol", 0, CP_OPT_VALUE, OPT_ATOL, "A", "absolute tolerance (default 1e-4)"},
    {"batch", 0, CP_OPT_VALUE, OPT_BATCH, "B", "batch size, for both models"},
    {"help", 'h', CP_OPT_FLAG, OPT_HELP, NULL, "show this help"},
    {"input", 'i', CP_OPT_MULTI, OPT_INPUT, "NAME=FILE",
     "input from a .pb (TensorProto) or .npy file; repeat per input"},
    {"input_shape", 0, CP_OPT_VALUE, OPT_INPUT_SHAPE, "\"name:1,3,224,224;...\"",
     "concrete shapes for dynamic inputs, for both models"},
    {"json", 0, CP_OPT_FLAG, OPT_JSON, NULL, "print the comparison as JSON"},
    {"rtol", 0, CP_OPT_VALUE, OPT_RTOL, "R", "relative tolerance (default 1e-3)"},
    {"seed", 0, CP_OPT_VALUE, OPT_SEED, "N", "seed of random inputs (default 0)"},
    {"threads", 't', CP_OPT_VALUE, OPT_THREADS, "T", "threads (default: all cores)"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static void help(void)
{
    printf("usage: cannprof compare A B [--input NAME=FILE ...] [--seed N] [--rtol R --atol A]\n"
           "                        [--threads T] [--json]\n\n"
           "Run models A and B (.om or .onnx; an .onnx runs unconverted, in fp32 without\n"
           "fusion, as the reference) on the same inputs and compare B's outputs with A's,\n"
           "matched by name. Inputs not given are drawn once from a seeded random generator\n"
           "(floats uniform in [-1,1)) and fed to both.\n\n"
           "Per output: max and mean absolute error, relative L2 error ||a-b||/||a|| with A\n"
           "as reference, cosine similarity, and whether every element satisfies\n"
           "|a-b| <= atol + rtol*|a|. precision_loss is the relative L2 error of all outputs\n"
           "together, in percent (docs/precision.md).\n\n"
           "exit: 0 within tolerance, 1 beyond it, 2 bad input (missing outputs, different\n"
           "shapes or inputs), 3 environment failure.\n\noptions:\n");
    cp_opts_print_help(stdout, options, N_OPTIONS);
}

static bool parse_tol(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0)
        return false;
    *out = v;
    return true;
}

/* One side of the comparison: its session and, after the run, its outputs. */
struct side {
    const char *path;
    struct cp_session s;
    struct cp_host_tensor *out;
    size_t n_out;
};

static void side_release(struct side *x)
{
    for (size_t i = 0; i < x->n_out; i++)
        cp_host_tensor_release(&x->out[i]);
    free(x->out);
    x->out = NULL;
    x->n_out = 0;
    cp_session_close(&x->s);
}

static enum cp_status side_outputs(struct side *x, struct cp_diag *d)
{
    size_t n = cp_plan_n_outputs(x->s.plan);
    x->out = cp_calloc(n ? n : 1, sizeof *x->out);
    if (!x->out)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        enum cp_status st = cp_plan_get_output(x->s.plan, i, &x->out[i], d);
        if (st != CP_OK)
            return st;
        x->n_out = i + 1;
    }
    return CP_OK;
}

static long find_output(const struct side *x, const char *name)
{
    for (size_t i = 0; i < x->n_out; i++)
        if (strcmp(x->out[i].name, name) == 0)
            return (long)i;
    return -1;
}

static long find_input(const struct cp_plan *p, const char *name)
{
    for (size_t i = 0; i < cp_plan_n_inputs(p); i++)
        if (strcmp(cp_plan_input(p, i)->name, name) == 0)
            return (long)i;
    return -1;
}

/* Feed the inputs made for A to both plans, B's matched by name. */
static enum cp_status feed(struct side *a, struct side *b, const struct cp_session_inputs *in,
                           struct cp_diag *d)
{
    struct cp_plan *pa = a->s.plan, *pb = b->s.plan;
    for (size_t i = 0; i < cp_plan_n_inputs(pb); i++)
        if (find_input(pa, cp_plan_input(pb, i)->name) < 0)
            return cp_diag_set(d, CP_ERR_INVALID, "%s has input '%s', which %s lacks", b->path,
                               cp_plan_input(pb, i)->name, a->path);
    for (size_t i = 0; i < in->n; i++) {
        long j = find_input(pb, in->t[i].name);
        if (j < 0)
            return cp_diag_set(d, CP_ERR_INVALID, "%s has input '%s', which %s lacks", a->path,
                               in->t[i].name, b->path);
        enum cp_status st = cp_plan_set_input(pa, i, &in->t[i], d);
        if (st == CP_OK)
            st = cp_plan_set_input(pb, (size_t)j, &in->t[i], d);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

/* Every output of either side must exist on the other. */
static enum cp_status match_outputs(const struct side *a, const struct side *b, long *map,
                                    struct cp_diag *d)
{
    struct cp_buf miss_b, miss_a;
    cp_buf_init(&miss_b);
    cp_buf_init(&miss_a);
    for (size_t i = 0; i < a->n_out; i++) {
        map[i] = find_output(b, a->out[i].name);
        if (map[i] < 0)
            cp_buf_printf(&miss_b, "%s'%s'", miss_b.len ? ", " : "", a->out[i].name);
    }
    for (size_t i = 0; i < b->n_out; i++)
        if (find_output(a, b->out[i].name) < 0)
            cp_buf_printf(&miss_a, "%s'%s'", miss_a.len ? ", " : "", b->out[i].name);
    enum cp_status st = CP_OK;
    if (miss_b.len || miss_a.len) {
        struct cp_buf m;
        cp_buf_init(&m);
        if (miss_b.len)
            cp_buf_printf(&m, "%s lacks output%s %s of %s", b->path,
                          strchr(miss_b.data, ',') ? "s" : "", miss_b.data, a->path);
        if (miss_a.len)
            cp_buf_printf(&m, "%s%s lacks output%s %s of %s", miss_b.len ? "; " : "", a->path,
                          strchr(miss_a.data, ',') ? "s" : "", miss_a.data, b->path);
        st = cp_diag_set(d, CP_ERR_INVALID, "outputs do not match by name: %s", m.data);
        cp_buf_release(&m);
    }
    cp_buf_release(&miss_b);
    cp_buf_release(&miss_a);
    return st;
}

/* JSON has no Inf or NaN. */
static void json_num(struct cp_buf *b, double v)
{
    if (isfinite(v))
        cp_buf_printf(b, "%.9g", v);
    else
        cp_buf_puts(b, "null");
}

struct report {
    const struct side *a, *b;
    const struct cp_tensor_diff *diff;
    double rtol, atol, loss;
    uint64_t seed;
    bool random_inputs;
    bool within;
};

static void shape_text(const struct cp_host_tensor *t, char *out, size_t n)
{
    struct cp_shape s;
    cp_shape_set(&s, t->rank, t->dims);
    cp_shape_format(&s, out, n);
}

static void print_json(const struct report *r)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, "{\"reference\":");
    cp_buf_json_str(&b, r->a->path);
    cp_buf_puts(&b, ",\"candidate\":");
    cp_buf_json_str(&b, r->b->path);
    cp_buf_puts(&b, ",\"rtol\":");
    json_num(&b, r->rtol);
    cp_buf_puts(&b, ",\"atol\":");
    json_num(&b, r->atol);
    cp_buf_printf(&b, ",\"seed\":%llu,\"random_inputs\":%s,\"outputs\":[",
                  (unsigned long long)r->seed, r->random_inputs ? "true" : "false");
    for (size_t i = 0; i < r->a->n_out; i++) {
        const struct cp_tensor_diff *df = &r->diff[i];
        char shape[96];
        shape_text(&r->a->out[i], shape, sizeof shape);
        cp_buf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
        cp_buf_json_str(&b, r->a->out[i].name);
        cp_buf_printf(&b, ",\"shape\":\"%s\",\"elements\":%lld,\"max_abs_error\":", shape,
                      (long long)df->n);
        json_num(&b, df->max_abs);
        cp_buf_puts(&b, ",\"mean_abs_error\":");
        json_num(&b, df->mean_abs);
        cp_buf_puts(&b, ",\"rel_l2_error\":");
        json_num(&b, df->rel_l2);
        cp_buf_puts(&b, ",\"cosine_similarity\":");
        json_num(&b, df->cosine);
        cp_buf_puts(&b, ",\"precision_loss_pct\":");
        json_num(&b, 100.0 * df->rel_l2);
        cp_buf_printf(&b, ",\"beyond_tolerance\":%lld,\"nonfinite_mismatches\":%lld",
                      (long long)df->n_beyond, (long long)df->n_nonfinite_mismatch);
        if (!df->within) {
            cp_buf_printf(&b,
                          ",\"worst\":{\"index\":%lld,\"reference\":", (long long)df->worst_index);
            json_num(&b, df->worst_ref);
            cp_buf_puts(&b, ",\"candidate\":");
            json_num(&b, df->worst_cand);
            cp_buf_putc(&b, '}');
        }
        cp_buf_printf(&b, ",\"within_tolerance\":%s}", df->within ? "true" : "false");
    }
    cp_buf_puts(&b, "],\"precision_loss_pct\":");
    json_num(&b, r->loss);
    cp_buf_printf(&b, ",\"within_tolerance\":%s}\n", r->within ? "true" : "false");
    fputs(b.data ? b.data : "", stdout);
    cp_buf_release(&b);
}

static void print_table(const struct report *r)
{
    printf("reference:  %s\ncandidate:  %s\n", r->a->path, r->b->path);
    if (r->random_inputs)
        printf("inputs:     seeded random (seed %llu), the same for both\n",
               (unsigned long long)r->seed);
    else
        printf("inputs:     from files (others seeded random, seed %llu)\n",
               (unsigned long long)r->seed);
    printf("tolerance:  |a-b| <= %g + %g*|a| elementwise\n\n", r->atol, r->rtol);
    printf("%-24s %-14s %-11s %-11s %-11s %-10s %-11s %s\n", "output", "shape", "max_abs",
           "mean_abs", "rel_l2", "cosine", "loss %", "verdict");
    for (size_t i = 0; i < r->a->n_out; i++) {
        const struct cp_tensor_diff *df = &r->diff[i];
        char shape[96], verdict[160];
        shape_text(&r->a->out[i], shape, sizeof shape);
        if (df->within)
            snprintf(verdict, sizeof verdict, "within");
        else
            snprintf(verdict, sizeof verdict, "BEYOND (%lld of %lld; worst [%lld] %.7g vs %.7g)",
                     (long long)df->n_beyond, (long long)df->n, (long long)df->worst_index,
                     df->worst_ref, df->worst_cand);
        printf("%-24s %-14s %-11.4g %-11.4g %-11.4g %-10.7f %-11.4g %s\n", r->a->out[i].name, shape,
               df->max_abs, df->mean_abs, df->rel_l2, df->cosine, 100.0 * df->rel_l2, verdict);
    }
    printf("\nprecision_loss: %.6g%% (relative L2 error of all outputs, %s as reference)\n",
           r->loss, r->a->path);
    printf("verdict:        %s\n", r->within ? "within tolerance" : "beyond tolerance");
}

struct compare_opts {
    double rtol, atol;
    uint64_t seed;
    struct cp_session_opts so;
    const char *inputs[CP_MAX_ARGS];
    size_t n_inputs;
    bool json;
};

static int parse(int argc, char **argv, struct cp_args *args, struct compare_opts *o)
{
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_args_parse("compare", options, N_OPTIONS, argc, argv, args, &d) != CP_OK) {
        cp_cli_error("compare", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(args, OPT_HELP)) {
        help();
        return 0;
    }
    if (args->n_positional != 2) {
        cp_cli_error("compare", "give two models: A (the reference) and B (.om or .onnx)");
        return 2;
    }
    memset(o, 0, sizeof *o);
    o->rtol = DEFAULT_RTOL;
    o->atol = DEFAULT_ATOL;
    o->so.buffer_optimize = -1;
    o->json = cp_args_has(args, OPT_JSON);
    const char *val;
    int64_t v;
    if ((val = cp_args_get(args, OPT_RTOL)) && !parse_tol(val, &o->rtol)) {
        cp_cli_error("compare", "--rtol takes a non-negative number, e.g. 1e-3");
        return 2;
    }
    if ((val = cp_args_get(args, OPT_ATOL)) && !parse_tol(val, &o->atol)) {
        cp_cli_error("compare", "--atol takes a non-negative number, e.g. 1e-4");
        return 2;
    }
    if ((val = cp_args_get(args, OPT_SEED))) {
        if (!cp_parse_i64(val, &v) || v < 0) {
            cp_cli_error("compare", "--seed takes a non-negative whole number");
            return 2;
        }
        o->seed = (uint64_t)v;
    }
    if ((val = cp_args_get(args, OPT_THREADS))) {
        if (!cp_parse_i64(val, &v) || v < 1 || v > 1024) {
            cp_cli_error("compare", "--threads takes a whole number from 1 to 1024");
            return 2;
        }
        o->so.threads = (int)v;
    }
    if ((val = cp_args_get(args, OPT_BATCH))) {
        if (!cp_parse_i64(val, &v) || v < 1 || v > 65536) {
            cp_cli_error("compare", "--batch takes a whole number from 1 to 65536");
            return 2;
        }
        o->so.batch = v;
    }
    o->so.input_shape = cp_args_get(args, OPT_INPUT_SHAPE);
    for (size_t i = 0; i < args->n_opts; i++)
        if (args->opts[i].id == OPT_INPUT)
            o->inputs[o->n_inputs++] = args->opts[i].value;
    return -1;
}

int cp_cmd_compare(int argc, char **argv)
{
    struct cp_args args;
    struct compare_opts o;
    int rc = parse(argc, argv, &args, &o);
    if (rc >= 0)
        return rc;
    struct cp_diag d;
    cp_diag_init(&d);
    struct side a = {.path = args.positional[0]}, b = {.path = args.positional[1]};
    struct cp_session_inputs in = {0};
    struct cp_tensor_diff *diff = NULL;
    long *map = NULL;
    struct cp_session_opts so = o.so;
    so.model_path = a.path;
    if (cp_session_open(&a.s, &so, &d) != CP_OK)
        goto out_error;
    so.model_path = b.path;
    if (cp_session_open(&b.s, &so, &d) != CP_OK ||
        cp_session_make_inputs(&a.s, o.inputs, o.n_inputs, o.seed, &in, &d) != CP_OK ||
        feed(&a, &b, &in, &d) != CP_OK || cp_plan_run(a.s.plan, -1, &d) != CP_OK ||
        cp_plan_run(b.s.plan, -1, &d) != CP_OK || side_outputs(&a, &d) != CP_OK ||
        side_outputs(&b, &d) != CP_OK)
        goto out_error;
    diff = cp_calloc(a.n_out + 1, sizeof *diff);
    map = cp_calloc(a.n_out + 1, sizeof *map);
    if (!diff || !map) {
        cp_diag_set(&d, CP_ERR_NOMEM, "out of memory");
        goto out_error;
    }
    if (match_outputs(&a, &b, map, &d) != CP_OK)
        goto out_error;
    struct report r = {.a = &a,
                       .b = &b,
                       .diff = diff,
                       .rtol = o.rtol,
                       .atol = o.atol,
                       .seed = o.seed,
                       .random_inputs = o.n_inputs == 0,
                       .within = true};
    for (size_t i = 0; i < a.n_out; i++) {
        if (cp_tensor_compare(&a.out[i], &b.out[map[i]], o.rtol, o.atol, &diff[i], &d) != CP_OK)
            goto out_error;
        r.within = r.within && diff[i].within;
    }
    r.loss = cp_precision_loss(diff, a.n_out);
    if (o.json)
        print_json(&r);
    else
        print_table(&r);
    rc = r.within ? 0 : 1;
    goto out;
out_error:
    cp_cli_error("compare", d.msg);
    rc = cp_status_exit_code(d.status);
out:
    free(diff);
    free(map);
    cp_session_inputs_release(&in);
    side_release(&a);
    side_release(&b);
    return rc;
}
