/* cannprof compare: run two models on the same inputs and measure how far
 * the second's outputs are from the first's (docs/precision.md). */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
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
    OPT_RTOL,
};

static const struct cp_opt own[] = {
    {"atol", 0, CP_OPT_VALUE, OPT_ATOL, "A", "absolute tolerance (default 1e-4)"},
    {"rtol", 0, CP_OPT_VALUE, OPT_RTOL, "R", "relative tolerance (default 1e-3)"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_BATCH, "batch size, for both models"},
    {CP_SO_HELP, NULL},
    {CP_SO_INPUT, "input from a .pb (TensorProto) or .npy file; repeat per input"},
    {CP_SO_INPUT_SHAPE, "concrete shapes for dynamic inputs, for both models"},
    {CP_SO_JSON, "print the comparison as JSON"},
    {CP_SO_SEED, "seed of random inputs (default 0)"},
    {CP_SO_THREADS, NULL},
};

static const struct cp_command_opts OPTS = {
    .cmd = "compare",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage = "usage: cannprof compare A B [--input NAME=FILE ...] [--seed N] [--rtol R --atol A]\n"
             "                        [--threads T] [--json]\n\n"
             "Run models A and B (.om or .onnx; an .onnx runs unconverted, in fp32 without\n"
             "fusion, as the reference) on the same inputs and compare B's outputs with A's,\n"
             "matched by name. Inputs not given are drawn once from a seeded random generator\n"
             "(floats uniform in [-1,1)) and fed to both.\n\n"
             "Per output: max and mean absolute error, relative L2 error ||a-b||/||a|| with A\n"
             "as reference, cosine similarity, and whether every element satisfies\n"
             "|a-b| <= atol + rtol*|a|. precision_loss is the relative L2 error of all outputs\n"
             "together, in percent (docs/precision.md).\n",
    .exit_codes = "0 within tolerance, 1 beyond it, 2 bad usage or input (missing outputs, "
                  "different shapes or inputs), 3 environment failure",
};

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

static json_t *output_json(const struct report *r, size_t i)
{
    const struct cp_tensor_diff *df = &r->diff[i];
    char shape[96];
    shape_text(&r->a->out[i], shape, sizeof shape);
    json_t *o = json_object();
    bool ok = o && cp_json_set_str(o, "name", r->a->out[i].name) &&
              cp_json_set_str(o, "shape", shape) && cp_json_set_int(o, "elements", df->n) &&
              cp_json_set_num(o, "max_abs_error", df->max_abs) &&
              cp_json_set_num(o, "mean_abs_error", df->mean_abs) &&
              cp_json_set_num(o, "rel_l2_error", df->rel_l2) &&
              cp_json_set_num(o, "cosine_similarity", df->cosine) &&
              cp_json_set_num(o, "precision_loss_pct", 100.0 * df->rel_l2) &&
              cp_json_set_int(o, "beyond_tolerance", df->n_beyond) &&
              cp_json_set_int(o, "nonfinite_mismatches", df->n_nonfinite_mismatch);
    if (ok && !df->within) {
        json_t *w = json_object();
        ok = w && cp_json_set_int(w, "index", df->worst_index) &&
             cp_json_set_num(w, "reference", df->worst_ref) &&
             cp_json_set_num(w, "candidate", df->worst_cand);
        if (!cp_json_set(o, "worst", w))
            ok = false;
    }
    ok = ok && cp_json_set_bool(o, "within_tolerance", df->within);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

/* The comparison as JSON; NULL when out of memory. */
static json_t *report_json(const struct report *r)
{
    json_t *j = json_object(), *outs = json_array();
    bool ok = j && outs;
    for (size_t i = 0; ok && i < r->a->n_out; i++)
        ok = cp_json_push(outs, output_json(r, i));
    ok = ok && cp_json_set_str(j, "reference", r->a->path) &&
         cp_json_set_str(j, "candidate", r->b->path) && cp_json_set_num(j, "rtol", r->rtol) &&
         cp_json_set_num(j, "atol", r->atol) && cp_json_set_int(j, "seed", (int64_t)r->seed) &&
         cp_json_set_bool(j, "random_inputs", r->random_inputs);
    if (ok) {
        ok = cp_json_set(j, "outputs", outs);
        outs = NULL;
    }
    ok = ok && cp_json_set_num(j, "precision_loss_pct", r->loss) &&
         cp_json_set_bool(j, "within_tolerance", r->within);
    json_decref(outs);
    if (ok)
        return j;
    json_decref(j);
    return NULL;
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
    if (cp_args_parse_cmd(&OPTS, argc, argv, args, &d) != CP_OK) {
        cp_cli_error("compare", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
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
    o->json = cp_args_has(args, CP_SO_JSON);
    const char *val;
    if ((val = cp_args_get(args, OPT_RTOL)) && !parse_tol(val, &o->rtol)) {
        cp_cli_error("compare", "--rtol takes a non-negative number, e.g. 1e-3");
        return 2;
    }
    if ((val = cp_args_get(args, OPT_ATOL)) && !parse_tol(val, &o->atol)) {
        cp_cli_error("compare", "--atol takes a non-negative number, e.g. 1e-4");
        return 2;
    }
    o->seed = (uint64_t)cp_args_int(args, CP_SO_SEED, 0);
    o->so.threads = (int)cp_args_int(args, CP_SO_THREADS, 0);
    o->so.batch = cp_args_int(args, CP_SO_BATCH, 0);
    o->so.input_shape = cp_args_get(args, CP_SO_INPUT_SHAPE);
    o->n_inputs = cp_args_all(args, CP_SO_INPUT, o->inputs, CP_MAX_ARGS);
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
    rc = r.within ? 0 : 1;
    if (o.json) {
        json_t *j = report_json(&r);
        if (cp_out_json(j, "compare") != 0)
            rc = 3;
        json_decref(j);
    } else
        print_table(&r);
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
