/* cannprof calibrate: this machine's peak FLOP/s and memory bandwidth, the
 * ceilings of the roofline (docs/calibration.md). */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "rules/calibrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_BUDGET_MS = 1,
    OPT_CACHE_DIR,
    OPT_FORCE,
};

static const struct cp_opt own[] = {
    {"budget-ms", 0, CP_OPT_VALUE, OPT_BUDGET_MS, "MS",
     "time spent on each of the five figures when measuring (default 600)"},
    {"cache-dir", 0, CP_OPT_VALUE, OPT_CACHE_DIR, "DIR",
     "cache folder (default $XDG_CACHE_HOME/cannprof, else ~/.cache/cannprof)"},
    {"force", 'f', CP_OPT_FLAG, OPT_FORCE, NULL, "measure even when the cache has this machine"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print the figures as JSON"},
};

static const struct cp_command_opts OPTS = {
    .cmd = "calibrate",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage = "usage: cannprof calibrate [--force] [--json] [--cache-dir DIR] [--budget-ms MS]\n\n"
             "Measure what this machine reaches with the runtime's own library: peak FLOP/s of\n"
             "oneDNN matmuls (512^3 and 1024^3) in fp32 and, with native bf16, in bf16, on all\n"
             "cores and on one thread; and memory bandwidth with a STREAM-like triad\n"
             "a[i] = b[i] + s*c[i] on fp32 arrays beyond the last-level cache, counting 12\n"
             "bytes per element. Each figure is the best of repeated runs. The result is\n"
             "cached per CPU model, ISA flags, core count and tool version; later calls read\n"
             "the cache. The analysis divides each kernel's achieved FLOP/s and bytes/s by\n"
             "these peaks (the roofline).\n",
    .exit_codes = "0 ok, 2 bad usage (a --cache-dir path too long to use), 3 environment failure "
                  "(the cache folder, named or default, cannot be created or written; a "
                  "measurement failed)",
};

static void gflops(double v, char out[48])
{
    snprintf(out, 48, "%.1f GFLOP/s", v / 1e9);
}

static void print_text(const struct cp_machine *m)
{
    char a[48], b[48], h[32];
    printf("cpu:        %s (%d cores)\n", m->cpu_model, m->cores);
    printf("isa:        %s\n", *m->isa ? m->isa : "(none of the flags that matter)");
    printf("oneDNN:     %s\n", m->onednn);
    gflops(m->peak_flops_f32, a);
    gflops(m->peak_flops_f32_1t, b);
    printf("fp32 peak:  %s on %d threads, %s on 1 thread (%s)\n", a, m->threads_used, b,
           m->impl_f32);
    if (m->has_bf16) {
        gflops(m->peak_flops_bf16, a);
        gflops(m->peak_flops_bf16_1t, b);
        printf("bf16 peak:  %s on %d threads, %s on 1 thread (%s)\n", a, m->threads_used, b,
               m->impl_bf16);
    } else {
        printf("bf16 peak:  no native bf16 (neither avx512_bf16 nor amx_bf16); bf16 runs as "
               "fp32\n");
    }
    cp_format_bytes(m->triad_array_bytes, h);
    printf("bandwidth:  %.1f GB/s (triad a = b + s*c, 12 bytes per element, 3 x %s arrays)\n",
           m->mem_bw / 1e9, h);
    if (m->has_bf16)
        printf("ridge:      fp32 %.1f FLOP/byte, bf16 %.1f FLOP/byte\n", cp_machine_ridge(m, false),
               cp_machine_ridge(m, true));
    else
        printf("ridge:      fp32 %.1f FLOP/byte\n", cp_machine_ridge(m, false));
    printf("measured:   %s, %ld ms per figure, matmuls 512^3 and %d^3\n", m->measured_at,
           m->budget_ms, CP_CALIBRATE_MATMUL_SIZE);
    if (strcmp(m->source, "cache") == 0)
        printf("source:     cache %s (--force to measure again)\n", m->cache_path);
    else
        printf("source:     measured now, cached in %s\n", m->cache_path);
    if (*m->cache_note)
        printf("note:       %s\n", m->cache_note);
    /* Other work lowers every figure, the all-core ones most, and the cache
     * keeps them: say so when it shows. */
    if (m->load_avg >= 1.0)
        printf("warning:    the load average was %.2f when measuring began (%d cores): other\n"
               "            work lowers the figures; run 'cannprof calibrate --force' when the\n"
               "            machine is idle\n",
               m->load_avg, m->cores);
    else if (m->threads_used > 1 && m->peak_flops_f32 < m->peak_flops_f32_1t)
        printf("warning:    the all-core peak is below the one-thread peak: the machine was busy\n"
               "            while measuring; run 'cannprof calibrate --force' when it is idle\n");
}

int cp_cmd_calibrate(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("calibrate", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (args.n_positional != 0) {
        cp_cli_error("calibrate", "takes no positional arguments (see --help)");
        return 2;
    }
    struct cp_calibrate_options o = {.cache_dir = cp_args_get(&args, OPT_CACHE_DIR),
                                     .force = cp_args_has(&args, OPT_FORCE)};
    const char *val;
    if ((val = cp_args_get(&args, OPT_BUDGET_MS))) {
        int64_t v;
        if (!cp_parse_i64(val, &v) || v < 1 || v > 600000) {
            cp_cli_error("calibrate", "--budget-ms takes a whole number of milliseconds from 1 "
                                      "to 600000");
            return 2;
        }
        o.budget_ms = (long)v;
    }
    if (o.cache_dir && !*o.cache_dir) {
        cp_cli_error("calibrate", "--cache-dir takes a folder, not an empty string");
        return 2;
    }
    struct cp_machine m;
    if (cp_calibrate_run(&o, &m, &d) != CP_OK) {
        cp_cli_error("calibrate", d.msg);
        /* A folder path the user named that cannot be used at all is bad
         * input; one that cannot be created or written (CP_ERR_WRITE), and
         * a default one that cannot be found, are the environment's. */
        if (d.status == CP_ERR_IO)
            return o.cache_dir ? 2 : 3;
        return d.status == CP_ERR_USAGE ? 2 : 3;
    }
    if (cp_args_has(&args, CP_SO_JSON)) {
        json_t *j = cp_machine_to_json(&m);
        int rc = cp_out_json(j, "calibrate");
        json_decref(j);
        return rc;
    } else {
        print_text(&m);
    }
    return 0;
}
