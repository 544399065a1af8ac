/* cannprof run: execute a model once and write its outputs as .npy. */
#include "cli/commands.h"
#include "cli/options.h"
#include "runner/session.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
    OPT_ALLOW_NONFINITE = 1,
    OPT_BATCH,
    OPT_HELP,
    OPT_INPUT,
    OPT_INPUT_SHAPE,
    OPT_JSON,
    OPT_OUTPUT_DIR,
    OPT_SEED,
    OPT_THREADS,
};

static const struct cp_opt options[] = {
    {"allow-nonfinite", 0, CP_OPT_FLAG, OPT_ALLOW_NONFINITE, NULL,
     "do not fail (exit 1) when an output holds NaN or Inf"},
    {"batch", 0, CP_OPT_VALUE, OPT_BATCH, "B", "batch size (a dynamic-batch profile of the .om)"},
    {"help", 'h', CP_OPT_FLAG, OPT_HELP, NULL, "show this help"},
    {"input", 'i', CP_OPT_MULTI, OPT_INPUT, "NAME=FILE",
     "input from a .pb (TensorProto) or .npy file; repeat per input"},
    {"input_shape", 0, CP_OPT_VALUE, OPT_INPUT_SHAPE, "\"name:1,3,224,224;...\"",
     "concrete shapes for dynamic inputs"},
    {"json", 0, CP_OPT_FLAG, OPT_JSON, NULL, "print the output summary as JSON"},
    {"output-dir", 'o', CP_OPT_VALUE, OPT_OUTPUT_DIR, "DIR", "write each output as DIR/NAME.npy"},
    {"seed", 0, CP_OPT_VALUE, OPT_SEED, "N", "seed of random inputs (default 0)"},
    {"threads", 't', CP_OPT_VALUE, OPT_THREADS, "T", "threads (default: all cores)"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static void help(void)
{
    printf("usage: cannprof run MODEL.om|MODEL.onnx [--input NAME=FILE ...] [--output-dir DIR]\n\n"
           "Run a model once. Inputs not given are drawn from a seeded random generator\n"
           "(floats uniform in [-1,1)). An .onnx runs unconverted, as the reference.\n"
           "Outputs with NaN or Inf are reported and make the exit code 1.\n\noptions:\n");
    cp_opts_print_help(stdout, options, N_OPTIONS);
}

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
        double v;
        switch (t->dtype) {
        case CP_DTYPE_F32:
            v = ((const float *)t->data)[i];
            break;
        case CP_DTYPE_I64:
            v = (double)((const int64_t *)t->data)[i];
            break;
        case CP_DTYPE_I32:
            v = ((const int32_t *)t->data)[i];
            break;
        case CP_DTYPE_I8:
            v = ((const int8_t *)t->data)[i];
            break;
        case CP_DTYPE_U8:
        case CP_DTYPE_BOOL:
            v = ((const uint8_t *)t->data)[i];
            break;
        case CP_DTYPE_F16:
            v = cp_f16_to_f32(((const uint16_t *)t->data)[i]);
            break;
        case CP_DTYPE_BF16:
            v = cp_bf16_to_f32(((const uint16_t *)t->data)[i]);
            break;
        default:
            continue;
        }
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

int cp_cmd_run(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse("run", options, N_OPTIONS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("run", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, OPT_HELP)) {
        help();
        return 0;
    }
    if (args.n_positional != 1) {
        cp_cli_error("run", "give exactly one MODEL (.om or .onnx)");
        return 2;
    }
    struct cp_session_opts so = {.model_path = args.positional[0], .buffer_optimize = -1};
    int64_t v;
    const char *val;
    uint64_t seed = 0;
    if ((val = cp_args_get(&args, OPT_THREADS))) {
        if (!cp_parse_i64(val, &v) || v < 1 || v > 1024) {
            cp_cli_error("run", "--threads takes a whole number from 1 to 1024");
            return 2;
        }
        so.threads = (int)v;
    }
    if ((val = cp_args_get(&args, OPT_BATCH))) {
        if (!cp_parse_i64(val, &v) || v < 1 || v > 65536) {
            cp_cli_error("run", "--batch takes a whole number from 1 to 65536");
            return 2;
        }
        so.batch = v;
    }
    if ((val = cp_args_get(&args, OPT_SEED))) {
        if (!cp_parse_i64(val, &v) || v < 0) {
            cp_cli_error("run", "--seed takes a non-negative whole number");
            return 2;
        }
        seed = (uint64_t)v;
    }
    so.input_shape = cp_args_get(&args, OPT_INPUT_SHAPE);
    const char *outdir = cp_args_get(&args, OPT_OUTPUT_DIR);
    const char *inputs[CP_MAX_ARGS];
    size_t n_inputs = 0;
    for (size_t i = 0; i < args.n_opts; i++)
        if (args.opts[i].id == OPT_INPUT)
            inputs[n_inputs++] = args.opts[i].value;

    struct cp_session s;
    if (cp_session_open(&s, &so, &d) != CP_OK ||
        cp_session_set_inputs(&s, inputs, n_inputs, seed, &d) != CP_OK ||
        cp_plan_run(s.plan, -1, &d) != CP_OK) {
        cp_cli_error("run", d.msg);
        cp_session_close(&s);
        return cp_status_exit_code(d.status);
    }
    /* Made only once the model ran, so a failed run leaves no empty folder. */
    if (outdir && mkdir(outdir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannprof run: error: --output-dir %s: %s\n", outdir, strerror(errno));
        cp_session_close(&s);
        return 2;
    }
    bool json = cp_args_has(&args, OPT_JSON);
    int rc = 0;
    struct cp_buf b;
    cp_buf_init(&b);
    if (json)
        cp_buf_puts(&b, "{\"outputs\":[");
    for (size_t i = 0; i < cp_plan_n_outputs(s.plan); i++) {
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
        if (json) {
            cp_buf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
            cp_buf_json_str(&b, t.name);
            cp_buf_printf(&b,
                          ",\"dtype\":\"%s\",\"shape\":\"%s\",\"min\":%.9g,\"max\":%.9g,"
                          "\"mean\":%.9g,\"nan\":%zu,\"inf\":%zu",
                          cp_dtype_name(t.dtype), shape, st.min, st.max, st.mean, st.nan, st.inf);
            if (outdir) {
                cp_buf_puts(&b, ",\"file\":");
                cp_buf_json_str(&b, path);
            }
            cp_buf_putc(&b, '}');
        } else {
            cp_buf_printf(&b, "%-24s %-5s %-16s min %-12.6g max %-12.6g mean %-12.6g%s%s\n", t.name,
                          cp_dtype_name(t.dtype), shape, st.min, st.max, st.mean,
                          outdir ? " -> " : "", path);
        }
        if ((st.nan || st.inf) && !cp_args_has(&args, OPT_ALLOW_NONFINITE)) {
            fprintf(stderr, "cannprof run: output '%s' holds %zu NaN and %zu Inf values\n", t.name,
                    st.nan, st.inf);
            rc = rc ? rc : 1;
        }
        cp_host_tensor_release(&t);
    }
    if (json)
        cp_buf_puts(&b, "]}\n");
    fputs(b.data ? b.data : "", stdout);
    cp_buf_release(&b);
    cp_session_close(&s);
    return rc;
}
