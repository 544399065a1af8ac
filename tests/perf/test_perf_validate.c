/* `cannprof validate` on one real pair: the SD-like example converted
 * without its fusion passes measures slower than with them, and validate
 * says so (exit 1), on every iteration and on the undisturbed ones, and
 * the reverse is an improvement. Measured for real, so it runs under the
 * ctest label `perf` (bench/perf_tests.sh), never in scripts/test.sh:
 * whether the unfused model is slower is this machine's answer (on an AMD
 * AVX2 machine the fused one has measured slower), and whether the probe
 * found the machine quiet enough decides which branch the default
 * comparison takes. tests/cli/test_cli_validate.c pins both branches on
 * traces with injected samples. */
#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdlib.h>
#include <string.h>

TestSuite(cli_validate, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* Convert the SD-like example (flags may be NULL) and bench it into a trace. */
static char *bench_sd(const char *name, const char *flag)
{
    char *om = ct_convert_to("sd_unet_tiny", name, flag, NULL);
    char *db = cp_t_fmt("%s/%s.db", cp_t_dir, name);
    /* One thread: a test running beside this one (ctest -j) then takes a
     * core, not a share of every iteration. */
    cr_assert(cp_t_bench_trace(om, db, "-n", "30", "-w", "3", "--threads", "1", NULL),
              "bench --trace %s failed (see stderr)", db);
    free(om);
    return db;
}

Test(cli_validate, a_model_converted_without_fusion_really_is_slower, .timeout = 300)
{
    char *flag = ct_switch_file("all_off.cfg", "ALL:off\n");
    char *fast = bench_sd("fused", NULL), *slow = bench_sd("unfused", flag);
    struct cp_run r;
    /* Every iteration: the slowdown is far larger than anything a busy
     * machine does to 30 iterations. */
    cp_run_cli(&r, "validate", "--before", fast, "--after", slow, "--json", "--all-iterations",
               NULL);
    cr_expect_eq(r.exit_code, 1, "%s %s", r.out, r.err);
    json_t *j = ct_json(r.out);
    cr_expect_str_eq(ct_verdict_of(j, "latency"), "regressed");
    cr_expect_str_eq(json_string_value(json_object_get(j, "verdict")), "regressed");
    cr_expect_str_eq(json_string_value(json_object_get(j, "iterations")), "all");
    json_decref(j);
    cp_run_release(&r);
    /* Undisturbed iterations (the default): the same verdict, unless the
     * probe found the machine too busy during one run to judge timing at
     * all, which the output must then say. */
    cp_run_cli(&r, "validate", "--before", fast, "--after", slow, "--json", NULL);
    j = ct_json(r.out);
    const char *used = json_string_value(json_object_get(j, "iterations"));
    cr_assert_not_null(used, "%s", r.out);
    if (strcmp(used, "too-few-undisturbed") == 0) {
        /* no timing verdict; memory (the unfused plan keeps more buffers)
         * is still judged, and the exit code follows the overall verdict */
        cr_expect_str_eq(ct_verdict_of(j, "latency"), "inconclusive");
        const char *overall = json_string_value(json_object_get(j, "verdict"));
        cr_expect_eq(r.exit_code,
                     strcmp(overall, "regressed") == 0      ? 1
                     : strcmp(overall, "inconclusive") == 0 ? 4
                                                            : 0,
                     "%s %s", r.out, r.err);
    } else {
        cr_expect_str_eq(used, "undisturbed");
        cr_expect_eq(r.exit_code, 1, "%s %s", r.out, r.err);
        cr_expect_str_eq(ct_verdict_of(j, "latency"), "regressed");
    }
    json_decref(j);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--before", slow, "--after", fast, "--metrics", "latency",
               "--all-iterations", NULL);
    cr_expect_eq(r.exit_code, 0, "%s %s", r.out, r.err);
    cr_expect(strstr(r.out, "improved") != NULL, "%s", r.out);
    cp_run_release(&r);
    free(flag);
    free(fast);
    free(slow);
}
