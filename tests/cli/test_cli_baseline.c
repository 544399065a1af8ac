/* `cannprof baseline` driven as a user would, on a real trace recorded by
 * `cannprof bench --trace`: set (explicit and automatic tags, --replace,
 * --run), list and show as text and JSON, rm, the default knowledge base
 * under $XDG_DATA_HOME, validations shown by `show`, and every refusal:
 * missing options, missing or wrong files, unknown services and tags,
 * duplicate tags, a trace without samples (exit 2), and a knowledge base
 * folder that cannot be created (exit 3). */
#include "core/core.h"
#include "knowledge/kb.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setup(void)
{
    cp_t_scratch_setup();
    ct_private_xdg();
}

TestSuite(cli_baseline, .init = setup, .fini = cp_t_scratch_close);

/* Convert the smallest example and record `bench -n 20 --trace` runs of it
 * into <scratch>/LEAF (`runs` runs). Returns the trace path. */
static char *make_trace(const char *leaf, int runs)
{
    char *om = cp_t_path("m.om");
    if (!cp_path_exists(om))
        free(ct_convert_to("nhwc_roundtrip", "m", NULL));
    char *trace = cp_t_path(leaf);
    for (int i = 0; i < runs; i++)
        cr_assert(cp_t_bench_trace(om, trace, "--no-probe", "-n", "20", "-w", "2", "--threads", "1",
                                   NULL),
                  "bench --trace %s failed (see stderr)", trace);
    free(om);
    return trace;
}

/* Expect exit `code` with a stderr mentioning every given string. */
static void expect_fail(struct cp_run *r, int code, ...)
{
    cr_assert_eq(r->signal, 0, "signal %d; stderr: %s", r->signal, r->err);
    cr_assert_eq(r->exit_code, code, "exit %d, expected %d; stdout: %s stderr: %s", r->exit_code,
                 code, r->out, r->err);
    cr_assert(strstr(r->err, "error:"), "stderr: %s", r->err);
    va_list ap;
    va_start(ap, code);
    const char *s;
    while ((s = va_arg(ap, const char *)) != NULL)
        cr_assert(strstr(r->err, s), "stderr does not mention '%s': %s", s, r->err);
    va_end(ap);
    cp_run_release(r);
}

static void expect_ok(struct cp_run *r)
{
    cr_assert_eq(r->signal, 0, "signal %d; stderr: %s", r->signal, r->err);
    cr_assert_eq(r->exit_code, 0, "exit %d; stdout: %s stderr: %s", r->exit_code, r->out, r->err);
}

/* ---- the happy path -------------------------------------------------------- */

Test(cli_baseline, set_list_show_rm_round_trip)
{
    char *trace = make_trace("t.db", 1);
    char *kb = cp_t_path("kb/kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--tag", "v3.2", "--kb",
               kb, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "api/v3.2") && strstr(r.out, "20 iterations") &&
                  strstr(r.out, "median") && strstr(r.out, "p99") && strstr(r.out, "memory"),
              "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "set", "--service=api", "--trace", trace, "--kb", kb, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "api/b1"), "automatic tag: %s", r.out);
    cp_run_release(&r);

    cp_run_cli(&r, "baseline", "list", "--kb", kb, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "service") && strstr(r.out, "median ms") && strstr(r.out, "v3.2") &&
                  strstr(r.out, "b1") && strstr(r.out, "m.om"),
              "%s", r.out);
    cp_run_release(&r);

    cp_run_cli(&r, "baseline", "list", "--json", "--kb", kb, NULL);
    expect_ok(&r);
    json_t *j = ct_json(r.out);
    cr_assert(json_is_array(j));
    cr_assert_eq(json_array_size(j), 2);
    json_t *e = json_array_get(j, 0);
    cr_assert_str_eq(json_string_value(json_object_get(e, "service")), "api");
    cr_assert_str_eq(json_string_value(json_object_get(e, "tag")), "v3.2");
    cr_assert_eq(json_integer_value(json_object_get(e, "n")), 20);
    cr_assert_gt(json_real_value(json_object_get(e, "median_ms")), 0);
    cr_assert_eq(strlen(json_string_value(json_object_get(e, "model_hash"))), 32);
    json_decref(j);
    cp_run_release(&r);

    cp_run_cli(&r, "baseline", "show", "--service", "api", "--tag", "v3.2", "--json", "--kb", kb,
               NULL);
    expect_ok(&r);
    j = ct_json(r.out);
    cr_assert_str_eq(json_string_value(json_object_get(j, "tag")), "v3.2");
    cr_assert_eq(json_integer_value(json_object_get(j, "n")), 20);
    json_t *lat = json_object_get(j, "latency_ms");
    const char *keys[] = {"mean", "median", "p90", "p99", "sd", "cv", "min", "max"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        cr_assert(json_is_number(json_object_get(lat, keys[i])), "latency_ms.%s", keys[i]);
    cr_assert_leq(json_real_value(json_object_get(lat, "min")),
                  json_real_value(json_object_get(lat, "median")));
    cr_assert(json_is_object(json_object_get(j, "device_ms")), "bench records kernel time");
    cr_assert_gt(json_real_value(json_object_get(j, "throughput_items_per_s")), 0);
    json_t *mem = json_object_get(j, "memory");
    cr_assert_gt(json_integer_value(json_object_get(mem, "weight_bytes")), 0);
    json_t *model = json_object_get(j, "model");
    cr_assert_eq(strlen(json_string_value(json_object_get(model, "hash"))), 32);
    cr_assert(strstr(json_string_value(json_object_get(model, "path")), "m.om"));
    cr_assert_eq(strlen(json_string_value(json_object_get(j, "config_id"))), 16);
    json_t *src = json_object_get(j, "source");
    cr_assert(strstr(json_string_value(json_object_get(src, "trace")), "t.db"));
    cr_assert_eq(json_integer_value(json_object_get(src, "run_id")), 1);
    cr_assert_eq(json_array_size(json_object_get(j, "validations")), 0);
    json_decref(j);
    cp_run_release(&r);

    cp_run_cli(&r, "baseline", "show", "--service", "api", "--kb", kb, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "api/b1"), "latest by default: %s", r.out);
    const char *words[] = {"mean",       "median",    "p90",        "p99",
                           "sd",         "cv",        "throughput", "memory",
                           "model hash", "config id", "t.db",       "validations"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        cr_assert(strstr(r.out, words[i]), "show lacks '%s': %s", words[i], r.out);
    cp_run_release(&r);

    cp_run_cli(&r, "baseline", "rm", "--service", "api", "--tag", "v3.2", "--kb", kb, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "api/v3.2"), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "list", "--json", "--service", "api", "--kb", kb, NULL);
    expect_ok(&r);
    j = ct_json(r.out);
    cr_assert_eq(json_array_size(j), 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 0), "tag")), "b1");
    json_decref(j);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "show", "--service", "api", "--tag", "v3.2", "--kb", kb, NULL);
    expect_fail(&r, 2, "'api'", "v3.2", "b1", NULL);
    free(kb);
    free(trace);
}

Test(cli_baseline, the_default_knowledge_base_lives_under_xdg_data_home)
{
    char *trace = make_trace("t.db", 1);
    struct cp_run r;
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, NULL);
    expect_ok(&r);
    cp_run_release(&r);
    char *kb = cp_t_path("xdg/cannprof/kb.sqlite");
    cr_assert(cp_path_exists(kb), "no %s", kb);
    cp_run_cli(&r, "baseline", "list", NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "api") && strstr(r.out, "b1"), "%s", r.out);
    cp_run_release(&r);
    free(kb);
    free(trace);
}

Test(cli_baseline, replace_and_run_choose_what_is_stored)
{
    char *trace = make_trace("t.db", 2);
    char *kb = cp_t_path("kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--tag", "v1", "--run",
               "1", "--kb", kb, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "run 1"), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--tag", "v1", "--kb",
               kb, NULL);
    expect_fail(&r, 2, "already has a baseline tagged 'v1'", "--replace", NULL);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--tag", "v1",
               "--replace", "--kb", kb, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "run 2"), "the last run by default: %s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "show", "--service", "api", "--json", "--kb", kb, NULL);
    expect_ok(&r);
    json_t *j = ct_json(r.out);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "source"), "run_id")), 2);
    json_decref(j);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--run", "9", "--kb",
               kb, NULL);
    expect_fail(&r, 2, "t.db", "no run 9", NULL);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--run", "zero", "--kb",
               kb, NULL);
    expect_fail(&r, 2, "--run", NULL);
    free(kb);
    free(trace);
}

Test(cli_baseline, show_lists_the_last_ten_validations_newest_first)
{
    char *trace = make_trace("t.db", 1);
    char *kb_path = cp_t_path("kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--tag", "v1", "--kb",
               kb_path, NULL);
    expect_ok(&r);
    cp_run_release(&r);
    /* Validations as `cannprof validate` records them. */
    struct cp_kb *kb = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_open(kb_path, &kb, &d), CP_OK, "%s", d.msg);
    for (int i = 0; i < 12; i++) {
        struct cp_kb_validation v = {
            .service = "api",
            .baseline_id = 1,
            .baseline_tag = "v1",
            .verdict = i == 11 ? "regressed" : "unchanged",
            .figures_json = "{\"latency_median\":{\"delta_pct\":1.5}}",
            .exit_code = i == 11,
            .alert_attempted = i >= 10,
            .alert_delivered = i == 11,
            .alert_error = i == 10 ? "connection refused" : NULL,
        };
        cr_assert_eq(cp_kb_record_validation(kb, &v, NULL, &d), CP_OK, "%s", d.msg);
    }
    cp_kb_close(kb);
    cp_run_cli(&r, "baseline", "show", "--service", "api", "--json", "--kb", kb_path, NULL);
    expect_ok(&r);
    json_t *j = ct_json(r.out);
    json_t *vs = json_object_get(j, "validations");
    cr_assert_eq(json_array_size(vs), 10);
    json_t *first = json_array_get(vs, 0);
    cr_assert_str_eq(json_string_value(json_object_get(first, "verdict")), "regressed");
    cr_assert_eq(json_integer_value(json_object_get(first, "exit_code")), 1);
    cr_assert(json_is_true(json_object_get(json_object_get(first, "alert"), "delivered")));
    cr_assert_eq(
        json_real_value(json_object_get(
            json_object_get(json_object_get(first, "figures"), "latency_median"), "delta_pct")),
        1.5, "figures are embedded as JSON");
    json_t *second = json_array_get(vs, 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(second, "alert"), "error")),
                     "connection refused");
    json_decref(j);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "show", "--service", "api", "--kb", kb_path, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "last 10 validations") && strstr(r.out, "regressed") &&
                  strstr(r.out, "delivered") && strstr(r.out, "failed: connection refused") &&
                  strstr(r.out, "not sent"),
              "%s", r.out);
    cr_assert_lt(strstr(r.out, "regressed"), strstr(r.out, "unchanged"), "newest first");
    cp_run_release(&r);
    /* Removing the baseline keeps the history. */
    cp_run_cli(&r, "baseline", "rm", "--service", "api", "--tag", "v1", "--kb", kb_path, NULL);
    expect_ok(&r);
    cp_run_release(&r);
    cr_assert_eq(cp_kb_open(kb_path, &kb, &d), CP_OK, "%s", d.msg);
    struct cp_kb_validation *v = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_validation_list(kb, "api", 0, &v, &n, &d), CP_OK);
    cr_assert_eq(n, 12);
    cp_kb_validation_list_free(v, n);
    cp_kb_close(kb);
    free(kb_path);
    free(trace);
}

Test(cli_baseline, list_of_an_unknown_service_is_empty_and_names_the_known_ones)
{
    char *trace = make_trace("t.db", 1);
    char *kb = cp_t_path("kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "baseline", "list", "--kb", kb, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "no baselines"), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--kb", kb, NULL);
    expect_ok(&r);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "list", "--service", "web", "--kb", kb, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "'web'") && strstr(r.out, "api"), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "list", "--service", "web", "--json", "--kb", kb, NULL);
    expect_ok(&r);
    json_t *j = ct_json(r.out);
    cr_assert_eq(json_array_size(j), 0);
    json_decref(j);
    cp_run_release(&r);
    free(kb);
    free(trace);
}

/* ---- refusals -------------------------------------------------------------- */

Test(cli_baseline, bad_usage_and_bad_files_exit_2)
{
    char *trace = make_trace("t.db", 1);
    char *kb = cp_t_path("kb.sqlite");
    char *missing = cp_t_path("missing.db");
    char *text = cp_t_path("notes.txt");
    FILE *f = fopen(text, "w");
    cr_assert_not_null(f);
    fputs("not a database\n", f);
    fclose(f);
    struct cp_run r;

    cp_run_cli(&r, "baseline", NULL);
    cr_assert_eq(r.exit_code, 2);
    cr_assert(strstr(r.err, "usage"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "sett", NULL);
    expect_fail(&r, 2, "did you mean 'set'", NULL);
    cp_run_cli(&r, "baseline", "--service", "x", NULL);
    expect_fail(&r, 2, "subcommand", NULL);
    cp_run_cli(&r, "baseline", "set", "--trace", trace, "--kb", kb, NULL);
    expect_fail(&r, 2, "--service", NULL);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--kb", kb, NULL);
    expect_fail(&r, 2, "--trace", NULL);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--kb", kb, "extra",
               NULL);
    expect_fail(&r, 2, "extra", NULL);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--tga", "x", NULL);
    expect_fail(&r, 2, "--tag", NULL);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", missing, "--kb", kb, NULL);
    expect_fail(&r, 2, missing, "no such file", NULL);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", text, "--kb", kb, NULL);
    expect_fail(&r, 2, text, "not a SQLite file", NULL);
    cp_run_cli(&r, "baseline", "set", "--service", "", "--trace", trace, "--kb", kb, NULL);
    expect_fail(&r, 2, "service", "empty", NULL);
    char long_name[200];
    memset(long_name, 's', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    cp_run_cli(&r, "baseline", "set", "--service", long_name, "--trace", trace, "--kb", kb, NULL);
    expect_fail(&r, 2, "at most 128", NULL);
    cp_run_cli(&r, "baseline", "set", "--service", "a\x01", "--trace", trace, "--kb", kb, NULL);
    expect_fail(&r, 2, "control character", NULL);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--tag", "latest",
               "--kb", kb, NULL);
    expect_fail(&r, 2, "'latest' cannot be a tag", NULL);
    /* The trace given as the knowledge base, and a text file as one. */
    cp_run_cli(&r, "baseline", "list", "--kb", trace, NULL);
    expect_fail(&r, 2, trace, "trace store, not a knowledge base", NULL);
    cp_run_cli(&r, "baseline", "list", "--kb", text, NULL);
    expect_fail(&r, 2, text, "not a SQLite file", NULL);
    /* A knowledge base given as the trace. */
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--kb", kb, NULL);
    expect_ok(&r);
    cp_run_release(&r);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", kb, "--kb", kb, NULL);
    expect_fail(&r, 2, kb, "not a cannprof trace store", NULL);

    cp_run_cli(&r, "baseline", "show", "--kb", kb, NULL);
    expect_fail(&r, 2, "--service", NULL);
    cp_run_cli(&r, "baseline", "show", "--service", "web", "--kb", kb, NULL);
    expect_fail(&r, 2, "'web'", "no baselines", "api", NULL);
    cp_run_cli(&r, "baseline", "show", "--service", "api", "--tag", "v7", "--kb", kb, NULL);
    expect_fail(&r, 2, "'api'", "'v7'", "b1", NULL);
    cp_run_cli(&r, "baseline", "rm", "--service", "api", "--kb", kb, NULL);
    expect_fail(&r, 2, "--tag", NULL);
    cp_run_cli(&r, "baseline", "rm", "--service", "api", "--tag", "v7", "--kb", kb, NULL);
    expect_fail(&r, 2, "'api'", "'v7'", "b1", NULL);
    cp_run_cli(&r, "baseline", "rm", "--service", "api", "--tag", "latest", "--kb", kb, NULL);
    expect_fail(&r, 2, "latest", NULL);
    free(text);
    free(missing);
    free(kb);
    free(trace);
}

Test(cli_baseline, a_trace_without_samples_exits_2)
{
    char *trace = cp_t_path("empty.db");
    struct cp_trace_run_info info = {.kind = "run", .model_path = "m.om"};
    int64_t run = 0;
    struct cp_trace_store *s = cp_t_trace_store(trace, &info, &run);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    cp_trace_store_close(s);
    char *kb = cp_t_path("kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", trace, "--kb", kb, NULL);
    char *want =
        cp_t_fmt("%s: run 1 has no latency samples; record one with cannprof bench --trace", trace);
    expect_fail(&r, 2, want, NULL);
    free(want);
    /* A trace store without runs at all. */
    char *none = cp_t_path("none.db");
    cr_assert_eq(cp_trace_store_open(none, &s, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    cp_run_cli(&r, "baseline", "set", "--service", "api", "--trace", none, "--kb", kb, NULL);
    expect_fail(&r, 2, none, "no runs", NULL);
    free(none);
    free(kb);
    free(trace);
}

Test(cli_baseline, a_knowledge_base_folder_that_cannot_be_created_exits_3)
{
    char *file = cp_t_path("plain");
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fclose(f);
    char *kb = cp_t_path("plain/sub/kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "baseline", "list", "--kb", kb, NULL);
    expect_fail(&r, 3, "cannot create the folder", NULL);
    free(kb);
    free(file);
}

Test(cli_baseline, every_subcommand_has_help)
{
    const char *subs[] = {"set", "list", "show", "rm"};
    struct cp_run r;
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++) {
        cp_run_cli(&r, "baseline", subs[i], "--help", NULL);
        expect_ok(&r);
        cr_assert(strstr(r.out, "usage: cannprof baseline") && strstr(r.out, "--kb"), "%s: %s",
                  subs[i], r.out);
        cp_run_release(&r);
    }
    cp_run_cli(&r, "baseline", "--help", NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "XDG_DATA_HOME"), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "help", "baseline", NULL);
    expect_ok(&r);
    cp_run_release(&r);
    cp_run_cli(&r, "--help", NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "baseline"), "%s", r.out);
    cp_run_release(&r);
}
