/* One output layer, as a user meets it: the --json outputs the issue added
 * (export, suggest, baseline set/rm, kb import) parse and say what they
 * did, and an output that cannot be written exits 3 (the environment), not
 * 2, in every command family that writes a file: convert, run, export,
 * suggest, analyze's rule skeleton, kb export, and calibrate and baseline
 * (in their own suites). Tests
 * run as root, so an unwritable place is a path under a regular file
 * (<scratch>/afile/...), which no permission bit lets anyone create. */
#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void setup(void)
{
    cp_t_scratch_setup();
    ct_private_xdg();
}

TestSuite(cli_output, .init = setup, .fini = cp_t_scratch_close, .timeout = 300);

/* nhwc_roundtrip converted and benchmarked into <scratch>/t.db. */
static char *small_trace(void)
{
    char *om = ct_convert("nhwc_roundtrip");
    char *db = cp_t_path("t.db");
    cr_assert(cp_t_bench_trace(om, db, "--no-probe", "--iterations", "5", "--warmup", "1",
                               "--threads", "1", NULL),
              "bench --trace failed (see stderr)");
    free(om);
    return db;
}

/* <scratch>/afile, a regular file: nothing can be created under it. */
static char *regular_file(void)
{
    char *file = cp_t_path("afile");
    ct_write_text(file, "not a folder\n");
    return file;
}

/* Assert the command exited 3, naming `path` on stderr, printing nothing. */
static void expect_write_failure(struct cp_run *r, const char *what, const char *path)
{
    cr_assert_eq(r->signal, 0, "%s: killed by signal %d", what, r->signal);
    cr_assert_eq(r->exit_code, 3, "%s: exit %d (an output that cannot be written is 3); stderr: %s",
                 what, r->exit_code, r->err);
    cr_assert(strstr(r->err, path), "%s: stderr should name %s: %s", what, path, r->err);
    cr_assert(strstr(r->err, "error:"), "%s: %s", what, r->err);
    cp_run_release(r);
}

static int64_t file_size(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s is missing", path);
    return (int64_t)st.st_size;
}

/* ---- --json says what was done ------------------------------------------------------ */

Test(cli_output, export_json_describes_what_it_wrote)
{
    char *db = small_trace();
    char *out = cp_t_path("t.json");
    struct cp_run r;
    cp_run_cli(&r, "export", db, "--format", "chrome", "-o", out, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "trace")), db);
    cr_assert_str_eq(json_string_value(json_object_get(j, "format")), "chrome");
    cr_assert_str_eq(json_string_value(json_object_get(j, "output")), out);
    cr_assert_eq(json_integer_value(json_object_get(j, "run")), 1);
    cr_assert_eq(json_integer_value(json_object_get(j, "bytes")), file_size(out));
    /* the events it counts are the events the file draws */
    json_t *chrome = cp_t_json_file(out);
    cr_assert_not_null(chrome);
    size_t x = 0, i;
    json_t *e;
    json_array_foreach(json_object_get(chrome, "traceEvents"), i, e) x +=
        strcmp(json_string_value(json_object_get(e, "ph")), "X") == 0;
    cr_assert_gt(x, 0);
    cr_assert_eq(json_integer_value(json_object_get(j, "events")), (json_int_t)x);
    json_decref(chrome);
    json_decref(j);

    char *folded = cp_t_path("t.folded");
    cp_run_cli(&r, "export", db, "--format", "folded", "-o", folded, "--run", "1", "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "format")), "folded");
    cr_assert_eq(json_integer_value(json_object_get(j, "bytes")), file_size(folded));
    cr_assert_eq(json_integer_value(json_object_get(j, "events")), (json_int_t)x);
    json_decref(j);
    free(folded);
    free(out);
    free(db);
}

Test(cli_output, suggest_json_prints_the_report_or_what_it_wrote)
{
    char *db = small_trace();
    struct cp_run r;
    cp_run_cli(&r, "suggest", db, "--json", "--no-calibrate", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    json_t *findings = json_object_get(j, "findings");
    cr_assert(json_is_array(findings));
    cr_assert_eq(json_array_size(json_object_get(j, "commands")), json_array_size(findings));
    cr_assert_str_eq(json_string_value(json_object_get(j, "trace")), db);
    size_t n = json_array_size(findings);
    json_decref(j);

    char *html = cp_t_path("s.html");
    cp_run_cli(&r, "suggest", db, "--json", "--no-calibrate", "-o", html, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "output")), html);
    cr_assert_str_eq(json_string_value(json_object_get(j, "format")), "html");
    cr_assert_eq(json_integer_value(json_object_get(j, "findings")), (json_int_t)n);
    char *text = ct_read_text(html);
    cr_assert(strstr(text, "<!DOCTYPE html>"), "the report is written as -o says");
    free(text);
    json_decref(j);
    free(html);
    free(db);
}

Test(cli_output, baseline_set_rm_and_kb_import_print_json)
{
    char *db = small_trace();
    char *kb = cp_t_path("kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "baseline", "set", "-s", "api", "--trace", db, "--kb", kb, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "service")), "api");
    cr_assert_str_eq(json_string_value(json_object_get(j, "tag")), "b1");
    cr_assert_eq(json_integer_value(json_object_get(j, "n")), 5);
    cr_assert_gt(ct_num(json_object_get(j, "latency_ms"), "median"), 0);
    cr_assert(json_is_null(json_object_get(j, "precision_loss")), "not measured: null");
    json_decref(j);

    /* kb export, then import into another knowledge base */
    char *lines = cp_t_path("kb.jsonl"), *other = cp_t_path("other.sqlite");
    cp_run_cli(&r, "kb", "export", "-o", lines, "--kb", kb, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "import", lines, "--kb", other, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "file")), lines);
    cr_assert_gt(json_integer_value(json_object_get(j, "added")), 0);
    json_decref(j);
    cp_run_cli(&r, "kb", "import", lines, "--kb", other, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_eq(json_integer_value(json_object_get(j, "added")), 0, "nothing twice");
    json_decref(j);

    cp_run_cli(&r, "baseline", "rm", "-s", "api", "--tag", "b1", "--kb", kb, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert(json_is_true(json_object_get(j, "removed")));
    cr_assert_str_eq(json_string_value(json_object_get(j, "tag")), "b1");
    json_decref(j);
    free(other);
    free(lines);
    free(kb);
    free(db);
}

/* ---- an output that cannot be written exits 3 --------------------------------------- */

Test(cli_output, convert_and_run_outputs_that_cannot_be_written_exit_3)
{
    char *file = regular_file();
    char *model = cp_t_example("nhwc_roundtrip");
    char *mflag = cp_t_fmt("--model=%s", model);
    char *base = cp_t_fmt("%s/net", file);
    char *oflag = cp_t_fmt("--output=%s", base);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, NULL);
    expect_write_failure(&r, "convert", base);

    char *om = ct_convert("nhwc_roundtrip");
    char *dir = cp_t_fmt("%s/outputs", file);
    cp_run_cli(&r, "run", om, "-o", dir, "--threads", "1", NULL);
    expect_write_failure(&r, "run -o", dir);
    cp_run_cli(&r, "run", om, "-o", dir, "--threads", "1", "--json", NULL);
    cr_assert_str_eq(r.out, "", "no JSON when the outputs were not written");
    expect_write_failure(&r, "run -o --json", dir);
    free(dir);
    free(om);
    free(oflag);
    free(base);
    free(mflag);
    free(model);
    free(file);
}

Test(cli_output, export_suggest_and_kb_export_outputs_that_cannot_be_written_exit_3)
{
    char *db = small_trace();
    char *file = regular_file();
    char *out = cp_t_fmt("%s/t.json", file);
    struct cp_run r;
    cp_run_cli(&r, "export", db, "--format", "chrome", "-o", out, NULL);
    expect_write_failure(&r, "export", out);
    cp_run_cli(&r, "export", db, "--format", "folded", "-o", out, "--json", NULL);
    cr_assert_str_eq(r.out, "");
    expect_write_failure(&r, "export --json", out);

    char *md = cp_t_fmt("%s/s.md", file);
    cp_run_cli(&r, "suggest", db, "--no-calibrate", "-o", md, NULL);
    expect_write_failure(&r, "suggest -o", md);
    char *sj = cp_t_fmt("%s/s.json", file);
    cp_run_cli(&r, "suggest", db, "--no-calibrate", "-o", sj, "--json", NULL);
    cr_assert_str_eq(r.out, "");
    expect_write_failure(&r, "suggest -o FILE.json", sj);

    char *kb = cp_t_path("kb.sqlite"), *lines = cp_t_fmt("%s/kb.jsonl", file);
    cp_run_cli(&r, "kb", "export", "-o", lines, "--kb", kb, NULL);
    expect_write_failure(&r, "kb export", lines);
    free(lines);
    free(kb);
    free(sj);
    free(md);
    free(out);
    free(file);
    free(db);
}

/* A pack whose one rule cannot fire, so the hot op type of a run is an
 * unclassified hotspot and analyze writes a rule skeleton for it. */
static const char NEVER_PACK[] = "pack: never\n"
                                 "version: 1\n"
                                 "rules:\n"
                                 "  - name: never_fires\n"
                                 "    bottleneck_type: memory_bound\n"
                                 "    indicators:\n"
                                 "      - device_util > 200%\n"
                                 "    root_causes:\n"
                                 "      - name: impossible\n"
                                 "        change:\n"
                                 "          summary: nothing\n"
                                 "          runtime: [\"--threads=1\"]\n"
                                 "        gain: {speedup: 1.5}\n";

Test(cli_output, analyze_skeleton_that_cannot_be_written_exits_3)
{
    char *om = ct_convert("resnet_tiny");
    char *db = cp_t_path("rn.db");
    cr_assert(cp_t_bench_trace(om, db, "--no-probe", "--iterations", "10", "--warmup", "2",
                               "--threads", "1", NULL),
              "bench --trace failed (see stderr)");
    char *pack = cp_t_path("never.yaml");
    ct_write_text(pack, NEVER_PACK);
    char *file = regular_file();
    char *skel = cp_t_fmt("%s/skeleton.yaml", file);
    struct cp_run r;
    /* the hotspot is there: with a writable place the skeleton is written */
    char *ok = cp_t_path("skeleton.yaml");
    cp_run_cli(&r, "analyze", db, "--rules", pack, "--no-calibrate", "--skeleton", ok, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert(cp_path_exists(ok), "no skeleton at %s: %s", ok, r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "analyze", db, "--rules", pack, "--no-calibrate", "--skeleton", skel, NULL);
    expect_write_failure(&r, "analyze --skeleton", skel);
    free(ok);
    free(skel);
    free(file);
    free(pack);
    free(db);
    free(om);
}
