/* Machine calibration: measuring gives positive finite figures and bf16
 * exactly when /proc/cpuinfo says the CPU has it; the cache round-trips the
 * very same numbers, --force measures again, a corrupt or foreign cache
 * file is replaced, XDG_CACHE_HOME and HOME are honoured; `cannprof
 * calibrate` prints the figures (text and JSON) and fails clearly when the
 * cache folder cannot be created. Magnitudes are never asserted: only > 0. */
#include "core/host.h"
#include "core/core.h"
#include "rules/calibrate.h"
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Small, so a measurement takes well under a second. */
#define BUDGET_MS 10

TestSuite(calibrate, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

static bool positive_finite(double v)
{
    return isfinite(v) && v > 0;
}

/* Whether the host description says the CPU has native bf16. */
static bool cpuinfo_has_bf16(void)
{
    struct cp_host h;
    cp_host_detect(&h);
    return h.has_bf16;
}

static void calibrate_in(const char *dir, bool force, struct cp_machine *m)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_calibrate_options o = {.cache_dir = dir, .force = force, .budget_ms = BUDGET_MS};
    cr_assert_eq(cp_calibrate_run(&o, m, &d), CP_OK, "%s", d.msg);
}

static void assert_same_figures(const struct cp_machine *a, const struct cp_machine *b)
{
    cr_assert_eq(a->peak_flops_f32, b->peak_flops_f32);
    cr_assert_eq(a->peak_flops_f32_1t, b->peak_flops_f32_1t);
    cr_assert_eq(a->peak_flops_bf16, b->peak_flops_bf16);
    cr_assert_eq(a->peak_flops_bf16_1t, b->peak_flops_bf16_1t);
    cr_assert_eq(a->mem_bw, b->mem_bw);
    cr_assert_eq(a->threads_used, b->threads_used);
    cr_assert_eq(a->has_bf16, b->has_bf16);
    cr_assert_str_eq(a->measured_at, b->measured_at);
    cr_assert_str_eq(a->cache_key, b->cache_key);
    cr_assert_str_eq(a->impl_f32, b->impl_f32);
}

/* ---- measuring ------------------------------------------------------------ */

Test(calibrate, measure_with_a_small_budget_gives_positive_finite_figures)
{
    struct cp_machine m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_calibrate_measure(BUDGET_MS, &m, &d), CP_OK, "%s", d.msg);
    cr_assert(positive_finite(m.peak_flops_f32), "fp32 peak %g", m.peak_flops_f32);
    cr_assert(positive_finite(m.peak_flops_f32_1t), "fp32 1-thread peak %g", m.peak_flops_f32_1t);
    cr_assert(positive_finite(m.mem_bw), "bandwidth %g", m.mem_bw);
    cr_assert_gt(m.cores, 0);
    cr_assert_eq(m.threads_used, m.cores);
    cr_assert_str_eq(m.source, "measured");
    cr_assert_str_eq(m.cache_path, "");
    cr_assert_neq(m.impl_f32[0], '\0');
    cr_assert(m.matmul_size == 512 || m.matmul_size == CP_CALIBRATE_MATMUL_SIZE, "size %lld",
              (long long)m.matmul_size);
    cr_assert_geq(m.triad_array_bytes, (uint64_t)64 << 20);
    cr_assert_eq(m.budget_ms, BUDGET_MS);
    cr_assert_eq(strlen(m.measured_at), 20, "measured_at '%s'", m.measured_at);
    cr_assert_eq(strlen(m.cache_key), 16);
}

Test(calibrate, bf16_is_measured_exactly_when_cpuinfo_has_native_bf16)
{
    bool want = cpuinfo_has_bf16();
    struct cp_machine id, m;
    cp_machine_detect(&id);
    cr_assert_eq(id.has_bf16, want);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_calibrate_measure(BUDGET_MS, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(m.has_bf16, want);
    if (want) {
        cr_assert(positive_finite(m.peak_flops_bf16), "bf16 peak %g", m.peak_flops_bf16);
        cr_assert(positive_finite(m.peak_flops_bf16_1t));
        cr_assert_neq(m.impl_bf16[0], '\0');
        cr_assert(strstr(m.isa, "bf16") != NULL, "isa '%s'", m.isa);
    } else {
        cr_assert_eq(m.peak_flops_bf16, 0);
        cr_assert_eq(m.peak_flops_bf16_1t, 0);
        cr_assert_str_eq(m.impl_bf16, "");
    }
}

Test(calibrate, detect_names_the_machine_without_measuring)
{
    struct cp_machine m;
    cp_machine_detect(&m);
    cr_assert_neq(m.cpu_model[0], '\0');
    cr_assert_neq(m.onednn[0], '\0');
    cr_assert_gt(m.cores, 0);
    cr_assert_eq(strlen(m.cache_key), 16);
    cr_assert_eq(m.peak_flops_f32, 0);
    cr_assert_eq(m.mem_bw, 0);
    struct cp_machine again;
    cp_machine_detect(&again);
    cr_assert_str_eq(m.cache_key, again.cache_key, "the key must be stable");
}

Test(calibrate, peak_and_ridge_follow_threads_and_dtype)
{
    struct cp_machine m = {.threads_used = 4,
                           .has_bf16 = true,
                           .peak_flops_f32 = 400e9,
                           .peak_flops_f32_1t = 120e9,
                           .peak_flops_bf16 = 800e9,
                           .peak_flops_bf16_1t = 210e9,
                           .mem_bw = 50e9};
    cr_assert_float_eq(cp_machine_peak_flops(&m, false, 0), 400e9, 1);
    cr_assert_float_eq(cp_machine_peak_flops(&m, false, 4), 400e9, 1);
    cr_assert_float_eq(cp_machine_peak_flops(&m, false, 1), 120e9, 1);
    cr_assert_float_eq(cp_machine_peak_flops(&m, false, 2), 240e9, 1);
    cr_assert_float_eq(cp_machine_peak_flops(&m, false, 3), 360e9, 1);
    cr_assert_float_eq(cp_machine_peak_flops(&m, true, 2), 420e9, 1);
    cr_assert_float_eq(cp_machine_ridge(&m, false), 8.0, 1e-9);
    cr_assert_float_eq(cp_machine_ridge(&m, true), 16.0, 1e-9);
    /* Without native bf16 the runtime computes in fp32. */
    m.has_bf16 = false;
    m.peak_flops_bf16 = m.peak_flops_bf16_1t = 0;
    cr_assert_float_eq(cp_machine_peak_flops(&m, true, 0), 400e9, 1);
    cr_assert_float_eq(cp_machine_ridge(&m, true), 8.0, 1e-9);
    struct cp_machine none = {0};
    cr_assert_eq(cp_machine_ridge(&none, false), 0);
    cr_assert_eq(cp_machine_peak_flops(&none, false, 1), 0);
}

/* A figure that is not a number must not read as a measured 0. */
Test(calibrate, json_writes_a_figure_that_is_not_finite_as_null)
{
    struct cp_machine m = {
        .threads_used = 2, .peak_flops_f32 = NAN, .mem_bw = INFINITY, .load_avg = 0.5};
    snprintf(m.cpu_model, sizeof m.cpu_model, "cpu \xff");
    json_t *j = cp_machine_to_json(&m);
    cr_assert_not_null(j);
    cr_assert(json_is_null(json_object_get(j, "peak_flops_f32")));
    cr_assert(json_is_null(json_object_get(j, "mem_bw")));
    cr_assert_float_eq(json_number_value(json_object_get(j, "load_avg")), 0.5, 1e-12);
    cr_assert_str_eq(json_string_value(json_object_get(j, "cpu_model")), "cpu \xef\xbf\xbd",
                     "invalid UTF-8 is repaired, not replaced by '?'");
    json_decref(j);
}

/* ---- the cache --------------------------------------------------------------- */

Test(calibrate, cache_round_trip_gives_the_same_numbers)
{
    struct cp_machine a, b;
    calibrate_in(cp_t_dir, false, &a);
    cr_assert_str_eq(a.source, "measured");
    cr_assert_str_eq(a.cache_note, "");
    char *want = cp_t_fmt("%s/calibration-%s.json", cp_t_dir, a.cache_key);
    cr_assert_str_eq(a.cache_path, want);
    cr_assert(cp_path_exists(want));
    calibrate_in(cp_t_dir, false, &b);
    cr_assert_str_eq(b.source, "cache");
    cr_assert_str_eq(b.cache_path, want);
    assert_same_figures(&a, &b);
    cr_assert_str_eq(a.cpu_model, b.cpu_model);
    cr_assert_str_eq(a.isa, b.isa);
    cr_assert_eq(a.cores, b.cores);
    cr_assert_eq(a.triad_array_bytes, b.triad_array_bytes);
    cr_assert_eq(a.budget_ms, b.budget_ms);
    free(want);
}

Test(calibrate, cache_file_is_json_with_a_schema_version)
{
    struct cp_machine a;
    calibrate_in(cp_t_dir, false, &a);
    json_error_t err;
    json_t *o = json_load_file(a.cache_path, 0, &err);
    cr_assert_not_null(o, "%s: %s", a.cache_path, err.text);
    cr_assert_str_eq(json_string_value(json_object_get(o, "schema")), "cannprof-calibration");
    cr_assert_eq(json_integer_value(json_object_get(o, "schema_version")),
                 CP_CALIBRATE_SCHEMA_VERSION);
    cr_assert_str_eq(json_string_value(json_object_get(o, "cache_key")), a.cache_key);
    cr_assert_eq(json_real_value(json_object_get(o, "mem_bw")), a.mem_bw);
    cr_assert_null(json_object_get(o, "source"), "where it came from is not cached");
    json_decref(o);
}

Test(calibrate, force_measures_again_and_rewrites_the_cache)
{
    struct cp_machine a, b, c;
    calibrate_in(cp_t_dir, false, &a);
    calibrate_in(cp_t_dir, true, &b);
    cr_assert_str_eq(b.source, "measured");
    cr_assert_str_eq(b.cache_path, a.cache_path);
    calibrate_in(cp_t_dir, false, &c);
    cr_assert_str_eq(c.source, "cache");
    assert_same_figures(&b, &c);
}

Test(calibrate, corrupt_cache_file_is_measured_again_and_replaced)
{
    struct cp_machine id, a, b;
    cp_machine_detect(&id);
    char *path = cp_t_fmt("%s/calibration-%s.json", cp_t_dir, id.cache_key);
    ct_write_text(path, "{\"schema\": \"cannprof-calibration\", \"schema_version\": 1, \"peak");
    calibrate_in(cp_t_dir, false, &a);
    cr_assert_str_eq(a.source, "measured");
    cr_assert(strstr(a.cache_note, "does not parse"), "note '%s'", a.cache_note);
    cr_assert(positive_finite(a.peak_flops_f32));
    calibrate_in(cp_t_dir, false, &b);
    cr_assert_str_eq(b.source, "cache");
    assert_same_figures(&a, &b);
    free(path);
}

Test(calibrate, cache_file_with_implausible_figures_is_replaced)
{
    struct cp_machine a, b;
    calibrate_in(cp_t_dir, false, &a);
    /* The same file with a negative bandwidth. */
    json_t *o = json_load_file(a.cache_path, 0, NULL);
    cr_assert_not_null(o);
    json_object_set_new(o, "mem_bw", json_real(-1.0));
    cr_assert_eq(json_dump_file(o, a.cache_path, 0), 0);
    json_decref(o);
    calibrate_in(cp_t_dir, false, &b);
    cr_assert_str_eq(b.source, "measured");
    cr_assert(strstr(b.cache_note, "mem_bw"), "note '%s'", b.cache_note);
    cr_assert(positive_finite(b.mem_bw));
}

Test(calibrate, foreign_or_newer_cache_file_is_measured_again)
{
    struct cp_machine a, b, c;
    calibrate_in(cp_t_dir, false, &a);
    json_t *o = json_load_file(a.cache_path, 0, NULL);
    cr_assert_not_null(o);
    json_object_set_new(o, "cpu_model", json_string("Some Other CPU 9000"));
    cr_assert_eq(json_dump_file(o, a.cache_path, 0), 0);
    calibrate_in(cp_t_dir, false, &b);
    cr_assert_str_eq(b.source, "measured");
    cr_assert(strstr(b.cache_note, "another machine"), "note '%s'", b.cache_note);
    cr_assert_str_eq(b.cpu_model, a.cpu_model);

    json_object_set_new(o, "cpu_model", json_string(a.cpu_model));
    json_object_set_new(o, "schema_version", json_integer(CP_CALIBRATE_SCHEMA_VERSION + 1));
    cr_assert_eq(json_dump_file(o, a.cache_path, 0), 0);
    json_decref(o);
    calibrate_in(cp_t_dir, false, &c);
    cr_assert_str_eq(c.source, "measured");
    cr_assert(strstr(c.cache_note, "schema_version"), "note '%s'", c.cache_note);
}

Test(calibrate, xdg_cache_home_is_the_default_location)
{
    char *xdg = cp_t_path("xdg");
    cr_assert_eq(setenv("XDG_CACHE_HOME", xdg, 1), 0);
    struct cp_machine m;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_calibrate_options o = {.budget_ms = BUDGET_MS};
    cr_assert_eq(cp_calibrate_run(&o, &m, &d), CP_OK, "%s", d.msg);
    char *want = cp_t_fmt("%s/cannprof/calibration-%s.json", xdg, m.cache_key);
    cr_assert_str_eq(m.cache_path, want);
    cr_assert(cp_path_exists(want));
    char dir[1024];
    cr_assert_eq(cp_calibrate_cache_dir(NULL, dir, sizeof dir, &d), CP_OK);
    char *want_dir = cp_t_fmt("%s/cannprof", xdg);
    cr_assert_str_eq(dir, want_dir);
    free(want_dir);
    free(want);
    free(xdg);
}

Test(calibrate, home_cache_is_used_without_an_absolute_xdg_cache_home)
{
    char *home = cp_t_path("home");
    cr_assert_eq(setenv("HOME", home, 1), 0);
    cr_assert_eq(setenv("XDG_CACHE_HOME", "relative/cache", 1), 0);
    char dir[1024];
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_calibrate_cache_dir(NULL, dir, sizeof dir, &d), CP_OK, "%s", d.msg);
    char *want = cp_t_fmt("%s/.cache/cannprof", home);
    cr_assert_str_eq(dir, want);
    cr_assert_eq(unsetenv("XDG_CACHE_HOME"), 0);
    cr_assert_eq(cp_calibrate_cache_dir(NULL, dir, sizeof dir, &d), CP_OK);
    cr_assert_str_eq(dir, want);
    cr_assert_eq(unsetenv("HOME"), 0);
    cr_assert_neq(cp_calibrate_cache_dir(NULL, dir, sizeof dir, &d), CP_OK);
    cr_assert(strstr(d.msg, "XDG_CACHE_HOME"), "%s", d.msg);
    free(want);
    free(home);
}

Test(calibrate, cache_folder_that_cannot_be_created_is_a_write_error)
{
    char *file = cp_t_path("a-file");
    ct_write_text(file, "not a folder\n");
    char *dir = cp_t_fmt("%s/cache", file);
    struct cp_machine m;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_calibrate_options o = {.cache_dir = dir, .budget_ms = BUDGET_MS};
    cr_assert_eq(cp_calibrate_run(&o, &m, &d), CP_ERR_WRITE);
    cr_assert(strstr(d.msg, dir), "the message names the folder: %s", d.msg);
    cr_assert_eq(m.peak_flops_f32, 0, "outputs are zeroed on failure");
    free(dir);
    free(file);
}

/* ---- the command ---------------------------------------------------------------- */

static json_t *run_json(struct cp_run *r, const char *dir, const char *extra)
{
    char budget[16];
    snprintf(budget, sizeof budget, "%d", BUDGET_MS);
    if (extra)
        cp_run_cli(r, "calibrate", "--json", "--cache-dir", dir, "--budget-ms", budget, extra,
                   NULL);
    else
        cp_run_cli(r, "calibrate", "--json", "--cache-dir", dir, "--budget-ms", budget, NULL);
    cr_assert_eq(r->exit_code, 0, "exit %d: %s", r->exit_code, r->err);
    return ct_json(r->out);
}

Test(calibrate, cli_json_has_every_figure_and_says_where_it_came_from)
{
    struct cp_run r;
    json_t *o = run_json(&r, cp_t_dir, NULL);
    static const char *const nums[] = {"peak_flops_f32", "peak_flops_f32_1t", "mem_bw"};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        json_t *v = json_object_get(o, nums[i]);
        cr_assert(json_is_number(v), "%s missing: %s", nums[i], r.out);
        cr_assert(positive_finite(json_number_value(v)), "%s = %g", nums[i], json_number_value(v));
    }
    static const char *const strs[] = {"cpu_model",   "isa",        "onednn",  "cache_key",
                                       "measured_at", "cache_path", "impl_f32"};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
        cr_assert(json_is_string(json_object_get(o, strs[i])), "%s missing: %s", strs[i], r.out);
    cr_assert(json_is_integer(json_object_get(o, "cores")));
    cr_assert(json_is_number(json_object_get(o, "load_avg")));
    cr_assert(json_is_integer(json_object_get(o, "threads_used")));
    json_t *bf16 = json_object_get(o, "has_bf16");
    cr_assert(json_is_boolean(bf16));
    cr_assert_eq(json_is_true(bf16), cpuinfo_has_bf16());
    cr_assert(json_is_number(json_object_get(o, "peak_flops_bf16")));
    json_t *ridge = json_object_get(o, "ridge_flop_per_byte");
    cr_assert(json_is_object(ridge));
    cr_assert(positive_finite(json_number_value(json_object_get(ridge, "f32"))));
    if (cpuinfo_has_bf16())
        cr_assert(positive_finite(json_number_value(json_object_get(ridge, "bf16"))));
    else
        cr_assert(json_is_null(json_object_get(ridge, "bf16")));
    cr_assert_str_eq(json_string_value(json_object_get(o, "source")), "measured");
    double bw = json_number_value(json_object_get(o, "mem_bw"));
    json_decref(o);
    cp_run_release(&r);

    o = run_json(&r, cp_t_dir, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(o, "source")), "cache");
    cr_assert_eq(json_number_value(json_object_get(o, "mem_bw")), bw);
    json_decref(o);
    cp_run_release(&r);

    o = run_json(&r, cp_t_dir, "--force");
    cr_assert_str_eq(json_string_value(json_object_get(o, "source")), "measured");
    json_decref(o);
    cp_run_release(&r);
}

Test(calibrate, cli_text_names_peaks_bandwidth_ridge_and_cache)
{
    struct cp_run r;
    cp_run_cli(&r, "calibrate", "--cache-dir", cp_t_dir, "--budget-ms", "10", NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    static const char *const want[] = {"cpu:", "isa:",   "fp32 peak:", "GFLOP/s", "bf16 peak:",
                                       "GB/s", "ridge:", "FLOP/byte",  "source:", "measured now"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert(strstr(r.out, want[i]), "'%s' missing from:\n%s", want[i], r.out);
    cr_assert(strstr(r.out, cp_t_dir), "the cache path is printed:\n%s", r.out);
    if (!cpuinfo_has_bf16())
        cr_assert(strstr(r.out, "no native bf16"), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "calibrate", "--cache-dir", cp_t_dir, NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    cr_assert(strstr(r.out, "source:     cache"), "%s", r.out);
    cp_run_release(&r);
}

Test(calibrate, cli_named_cache_folder_that_cannot_be_created_exits_3)
{
    char *file = cp_t_path("a-file");
    ct_write_text(file, "x\n");
    char *dir = cp_t_fmt("%s/sub", file);
    struct cp_run r;
    cp_run_cli(&r, "calibrate", "--cache-dir", dir, NULL);
    /* the cache is an output: one that cannot be written exits 3 */
    cr_assert_eq(r.exit_code, 3, "exit %d: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "cannprof calibrate: error:"), "%s", r.err);
    cr_assert(strstr(r.err, dir), "the folder is named: %s", r.err);
    cr_assert_str_eq(r.out, "");
    cp_run_release(&r);
    free(dir);
    free(file);
}

Test(calibrate, cli_default_cache_folder_that_cannot_be_created_exits_3)
{
    char *file = cp_t_path("a-file");
    ct_write_text(file, "x\n");
    cr_assert_eq(setenv("XDG_CACHE_HOME", file, 1), 0); /* inherited by the child */
    struct cp_run r;
    cp_run_cli(&r, "calibrate", NULL);
    cr_assert_eq(r.exit_code, 3, "exit %d: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "cache folder"), "%s", r.err);
    cr_assert(strstr(r.err, file), "the folder is named: %s", r.err);
    cp_run_release(&r);
    free(file);
}

Test(calibrate, cli_rejects_bad_usage)
{
    struct cp_run r;
    cp_run_cli(&r, "calibrate", "--budget-ms", "soon", NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "--budget-ms"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "calibrate", "--forse", NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "--force"), "suggests the nearest flag: %s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "calibrate", "extra", NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "calibrate", "--help", NULL);
    cr_assert_eq(r.exit_code, 0);
    cr_assert(strstr(r.out, "--cache-dir"), "%s", r.out);
    cp_run_release(&r);
}
