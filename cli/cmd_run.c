/* cannprof run: execute a model once and write its outputs as .npy. */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "runner/session.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
    OPT_ALLOW_NONFINITE = 1,
    OPT_OUTPUT_DIR,
};

static const struct cp_opt own[] = {
    {"allow-nonfinite", 0, CP_OPT_FLAG, OPT_ALLOW_NONFINITE, NULL,
     "do not fail (exit 1) when an output holds NaN or Inf"},
    {"output-dir", 'o', CP_OPT_VALUE, OPT_OUTPUT_DIR, "DIR", "write each output as DIR/NAME.npy"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_BATCH, "batch size (a dynamic-batch profile of the .om)"},
    {CP_SO_HELP, NULL},
    {CP_SO_INPUT, "input from a .pb (TensorProto) or .npy file; repeat per input"},
    {CP_SO_INPUT_SHAPE, NULL},
    {CP_SO_JSON, "print the output summary as JSON"},
    {CP_SO_SEED, "seed of random inputs (default 0)"},
    {CP_SO_THREADS, NULL},
};

static const struct cp_command_opts OPTS = {
    .cmd = "run",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage =
        "usage: cannprof run MODEL.om|MODEL.onnx [--input NAME=FILE ...] [--output-dir DIR]\n\n"
        "Run a model once. Inputs not given are drawn from a seeded random generator\n"
        "(floats uniform in [-1,1)). An .onnx runs unconverted, as the reference.\n"
        "Outputs with NaN or Inf are reported and make the exit code 1.\n",
    .exit_codes = "0 ran, 1 an output holds NaN or Inf, 2 bad usage or input (a model or input "
                  "file that cannot be read or does not fit), 3 environment failure (DIR or an "
                  "output file cannot be written)",
};

/* Output names may hold '/' or ':'; keep file names tame. */
static void safe_name(const char *name, char *out, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; name[i] && j + 1 < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.';
        out[j++] = ok ? c : '_';
    }
    if (j == 0 || out[0] == '.')
        out[j == 0 ? j++ : 0] = '_';
    out[j] = 0;
}

struct out_stats {
    double min, max, mean;
    size_t nan, inf;
};

static struct out_stats describe(const struct cp_host_tensor *t)
{
    struct out_stats s = {0};
    int64_t n = cp_host_tensor_numel(t);
    double sum = 0;
    size_t finite = 0;
    s.min = INFINITY;
    s.max = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == CP_DTYPE_UNDEFINED)
            break;
        /* every dtype (f64, the 16- and 64-bit integers too) */
        double v = cp_elem_load_f64(t->data, t->dtype, i);
        if (isnan(v)) {
            s.nan++;
            continue;
        }
        if (isinf(v)) {
            s.inf++;
            continue;
        }
        s.min = v < s.min ? v : s.min;
        s.max = v > s.max ? v : s.max;
        sum += v;
        finite++;
    }
    s.mean = finite ? sum / (double)finite : 0;
    if (!finite)
        s.min = s.max = 0;
    return s;
}

/* One output's --json entry: name, dtype, shape, min, max, mean, nan, inf
 * and the file it went to. NULL when out of memory. */
static json_t *output_json(const struct cp_host_tensor *t, const char *shape,
                           const struct out_stats *st, const char *file)
{
    json_t *o = json_object();
    if (o && cp_json_set_str(o, "name", t->name) &&
        cp_json_set_str(o, "dtype", cp_dtype_name(t->dtype)) &&
        cp_json_set_str(o, "shape", shape) && cp_json_set_num(o, "min", st->min) &&
        cp_json_set_num(o, "max", st->max) && cp_json_set_num(o, "mean", st->mean) &&
        cp_json_set_int(o, "nan", (int64_t)st->nan) &&
        cp_json_set_int(o, "inf", (int64_t)st->inf) && (!file || cp_json_set_str(o, "file", file)))
        return o;
    json_decref(o);
    return NULL;
}

int cp_cmd_run(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("run", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (args.n_positional != 1) {
        cp_cli_error("run", "give exactly one MODEL (.om or .onnx)");
        return 2;
    }
    struct cp_session_opts so = {.model_path = args.positional[0],
                                 .buffer_optimize = -1,
                                 .threads = (int)cp_args_int(&args, CP_SO_THREADS, 0),
                                 .batch = cp_args_int(&args, CP_SO_BATCH, 0),
                                 .input_shape = cp_args_get(&args, CP_SO_INPUT_SHAPE)};
    uint64_t seed = (uint64_t)cp_args_int(&args, CP_SO_SEED, 0);
    const char *outdir = cp_args_get(&args, OPT_OUTPUT_DIR);
    const char *inputs[CP_MAX_ARGS];
    size_t n_inputs = cp_args_all(&args, CP_SO_INPUT, inputs, CP_MAX_ARGS);

    struct cp_session s;
    if (cp_session_open(&s, &so, &d) != CP_OK ||
        cp_session_set_inputs(&s, inputs, n_inputs, seed, &d) != CP_OK ||
        cp_plan_run(s.plan, -1, &d) != CP_OK) {
        cp_cli_error("run", d.msg);
        cp_session_close(&s);
        return cp_status_exit_code(d.status);
    }
    /* Made only once the model ran, so a failed run leaves no empty folder.
     * A folder that cannot be made is an output that cannot be written. */
    if (outdir && mkdir(outdir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannprof run: error: --output-dir %s: cannot create the folder: %s\n",
                outdir, strerror(errno));
        cp_session_close(&s);
        return 3;
    }
    bool json = cp_args_has(&args, CP_SO_JSON);
    int rc = 0;
    struct cp_buf b;
    cp_buf_init(&b);
    json_t *outs = json ? json_array() : NULL;
    bool ok = !json || outs;
    for (size_t i = 0; ok && i < cp_plan_n_outputs(s.plan); i++) {
        struct cp_host_tensor t;
        if (cp_plan_get_output(s.plan, i, &t, &d) != CP_OK) {
            rc = cp_status_exit_code(d.status);
            cp_cli_error("run", d.msg);
            break;
        }
        char shape[160] = "";
        struct cp_shape sh;
        cp_shape_set(&sh, t.rank, t.dims);
        cp_shape_format(&sh, shape, sizeof shape);
        struct out_stats st = describe(&t);
        char path[1400] = "";
        if (outdir) {
            char fname[300];
            safe_name(t.name, fname, sizeof fname);
            snprintf(path, sizeof path, "%s/%s.npy", outdir, fname);
            if (cp_tensor_write_npy(path, &t, &d) != CP_OK) {
                cp_cli_error("run", d.msg);
                cp_host_tensor_release(&t);
                rc = cp_status_exit_code(d.status);
                break;
            }
        }
        if (json)
            ok = cp_json_push(outs, output_json(&t, shape, &st, outdir ? path : NULL));
        else
            cp_buf_printf(&b, "%-24s %-5s %-16s min %-12.6g max %-12.6g mean %-12.6g%s%s\n", t.name,
                          cp_dtype_name(t.dtype), shape, st.min, st.max, st.mean,
                          outdir ? " -> " : "", path);
        if ((st.nan || st.inf) && !cp_args_has(&args, OPT_ALLOW_NONFINITE)) {
            fprintf(stderr, "cannprof run: output '%s' holds %zu NaN and %zu Inf values\n", t.name,
                    st.nan, st.inf);
            rc = rc ? rc : 1;
        }
        cp_host_tensor_release(&t);
    }
    if (json) {
        json_t *j = ok ? json_object() : NULL;
        if (!j)
            json_decref(outs);
        else if (!cp_json_set(j, "outputs", outs)) { /* steals outs */
            json_decref(j);
            j = NULL;
        }
        if (cp_out_json(j, "run") != 0)
            rc = 3;
        json_decref(j);
    } else if (cp_buf_status(&b) != CP_OK) {
        cp_cli_error("run", "out of memory");
        rc = 3;
    } else
        fputs(b.data ? b.data : "", stdout);
    cp_buf_release(&b);
    cp_session_close(&s);
    return rc;
}
