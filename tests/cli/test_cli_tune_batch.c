/* `cannprof tune --batch`: every model listed is tuned however many there
 * are, models that share a file name (ONNX's own test layout: a/model.onnx,
 * b/model.onnx) get folders of their own and rows of their own in the
 * summary, and list lines of any length are read whole; the jobs run on
 * CPUs of their own, which the summary and each report.json name, and the
 * summary counts the inconclusive verdicts. Tune runs are tiny (budget 1,
 * 5 rounds) or fail at import; nothing here looks at measured speed. */
#include "cli/cli_test.h"
#include "support/calibration.h"
#include "tuner/tuner.h"

#include <sys/stat.h>

TestSuite(cli_tune_batch, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 600);

/* `tune --batch SRC` with a tiny budget into <scratch>/out, with its own
 * knowledge base. */
static void run_batch(struct cp_run *r, const char *src)
{
    char *kb = cp_t_path("kb.sqlite");
    char *out = cp_t_path("out");
    cp_run_cli(r, "tune", "--batch", src, "--budget", "1", "--rounds", "5", "--warmup", "0",
               "--threads", "1", "--no-kb-strategies", "-q", "--kb", kb, "-o", out, NULL);
    free(kb);
    free(out);
}

/* The summary's table rows (lines starting "| " that are not the header). */
static size_t table_rows(const char *text)
{
    size_t n = 0;
    for (const char *l = text; l && *l;) {
        if (strncmp(l, "| ", 2) == 0 && strncmp(l, "| model |", 9) != 0)
            n++;
        const char *e = strchr(l, '\n');
        l = e ? e + 1 : NULL;
    }
    return n;
}

static void copy_example(const char *name, const char *to)
{
    char *src = cp_t_example(name);
    size_t len = 0;
    uint8_t *data = ct_read(src, &len);
    ct_write(to, data, len);
    free(data);
    free(src);
}

Test(cli_tune_batch, models_with_one_file_name_get_their_own_folders_and_rows)
{
    char *a = cp_t_path("a"), *b = cp_t_path("b");
    cr_assert_eq(mkdir(a, 0755), 0);
    cr_assert_eq(mkdir(b, 0755), 0);
    char *ma = cp_t_path("a/model.onnx"), *mb = cp_t_path("b/model.onnx");
    copy_example("resnet_tiny", ma);
    copy_example("launch_bound_tiny", mb);
    char *list = cp_t_path("list.txt");
    char *text = cp_t_fmt("%s\n%s\n", ma, mb);
    ct_write_text(list, text);
    struct cp_run r;
    run_batch(&r, list);
    cr_assert_eq(r.signal, 0, "%s", r.err);
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    cr_assert_eq(table_rows(r.out), 2, "%s", r.out);
    const char *models[2] = {ma, mb}, *dirs[2] = {"out/a-model", "out/b-model"};
    for (int i = 0; i < 2; i++) {
        char *file = cp_t_fmt("%s/report.json", dirs[i]);
        char *report = cp_t_path(file);
        json_t *j = cp_t_json_file(report);
        cr_assert_not_null(j, "%s (see stderr)", report);
        /* each folder holds its own model's session ... */
        cr_assert_str_eq(json_string_value(json_object_get(j, "model")), models[i]);
        /* ... and the summary row shows that report's figures */
        double b0 = json_number_value(json_object_get(json_object_get(j, "baseline"), "median_ms"));
        char *row = cp_t_fmt("| %s | %.3f |", dirs[i] + 4, b0);
        cr_assert(strstr(r.out, row), "no row '%s' in: %s", row, r.out);
        free(row);
        json_decref(j);
        free(report);
        free(file);
    }
    cp_run_release(&r);
    free(text);
    free(list);
    free(ma);
    free(mb);
    free(a);
    free(b);
}

/* Models that fail at import are quick: 1025 of them, one past the 1024
 * the list used to stop at without a word. */
Test(cli_tune_batch, every_model_of_a_folder_is_tuned_however_many)
{
    char *dir = cp_t_path("many");
    cr_assert_eq(mkdir(dir, 0755), 0);
    for (int i = 0; i < 1025; i++) {
        char *name = cp_t_fmt("many/m%04d.onnx", i);
        char *path = cp_t_path(name);
        ct_write_text(path, "not onnx");
        free(path);
        free(name);
    }
    struct cp_run r;
    run_batch(&r, dir);
    cr_assert_eq(r.signal, 0, "%s", r.err);
    ct_assert_mentions(r.err, "1025 models", NULL);
    cr_assert_eq(table_rows(r.out), 1025);
    ct_assert_mentions(r.out, "| m0000 |", "| m1024 |", "not a valid ONNX model", NULL);
    cp_run_release(&r);
    free(dir);
}

/* A list line longer than any fixed buffer: a path of 3000 bytes
 * ("./././.../m.onnx"). It used to be cut into pieces, each read as a
 * model of its own. */
Test(cli_tune_batch, a_long_list_line_is_one_model)
{
    char *model = cp_t_path("m.onnx");
    ct_write_text(model, "not onnx");
    struct cp_buf line;
    cp_buf_init(&line);
    cp_buf_printf(&line, "%s/", cp_t_dir);
    for (int i = 0; i < 1500; i++)
        cp_buf_puts(&line, "./");
    cp_buf_puts(&line, "m.onnx\n");
    cr_assert_eq(cp_buf_status(&line), CP_OK);
    char *list = cp_t_path("list.txt");
    ct_write_text(list, line.data);
    struct cp_run r;
    run_batch(&r, list);
    cr_assert_eq(r.signal, 0, "%s", r.err);
    cr_assert_eq(table_rows(r.out), 1, "%s", r.out);
    ct_assert_mentions(r.out, "| m | - | - | - | error: ", NULL);
    cp_run_release(&r);
    cp_buf_release(&line);
    free(list);
    free(model);
}

/* The line of `text` that starts with `prefix`, copied (without its
 * newline); NULL when none. */
static char *line_starting(const char *text, const char *prefix)
{
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (strncmp(l, prefix, strlen(prefix)) == 0)
            return cp_t_fmt("%.*s", (int)len, l);
        l = e ? e + 1 : NULL;
    }
    return NULL;
}

static json_int_t int_of(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    cr_assert(json_is_integer(v), "'%s' is not an integer", key);
    return json_integer_value(v);
}

/* Two models, --jobs 2, no --threads: the CPUs this test may use are split
 * between two jobs as cp_tune_batch_plan_cpus plans it (tested on its own
 * in tests/tuner/test_tune_batch_cpus.c); the plan is said once on stderr,
 * each report.json and each summary row name the job's CPUs, and the
 * summary's inconclusive counts are the reports'. */
Test(cli_tune_batch, two_jobs_run_on_cpus_of_their_own_and_count_inconclusive_verdicts)
{
    /* the fixed calibration: nothing is measured before the jobs */
    char *cache = cp_t_path("cache");
    cr_assert_eq(setenv("XDG_CACHE_HOME", cache, 1), 0);
    cr_assert(cp_t_fixed_calibration(), "(see stderr)");
    char *ma = cp_t_example("resnet_tiny"), *mb = cp_t_example("launch_bound_tiny");
    char *list = cp_t_path("list.txt");
    char *text = cp_t_fmt("%s\n%s\n", ma, mb);
    ct_write_text(list, text);
    int *cpus = NULL;
    size_t n_cpus = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune_affinity(&cpus, &n_cpus, &d), CP_OK, "%s", d.msg);
    struct cp_tune_batch_plan plan;
    cr_assert_eq(cp_tune_batch_plan_cpus(cpus, n_cpus, 2, 0, 2, &plan, &d), CP_OK, "%s", d.msg);
    free(cpus);

    char *kb = cp_t_path("kb.sqlite"), *out = cp_t_path("out");
    struct cp_run r;
    cp_run_cli(&r, "tune", "--batch", list, "--jobs", "2", "--budget", "1", "--rounds", "5",
               "--warmup", "0", "--no-kb-strategies", "-q", "--kb", kb, "-o", out, NULL);
    cr_assert_eq(r.signal, 0, "%s", r.err);
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    char *said = cp_t_fmt("cannprof tune: %s\n", plan.note);
    cr_assert(strstr(r.err, said), "no '%s' in: %s", said, r.err);
    if (n_cpus >= 2)
        ct_assert_mentions(r.err, "2 jobs, each pinned to", "job 1 on CPU", "job 2 on CPU", NULL);
    else
        ct_assert_mentions(r.err, "running 1 job at a time", NULL);

    const char *names[2] = {"resnet_tiny", "launch_bound_tiny"};
    char *job_cpus[2];
    json_int_t verdicts = 0, inconclusive = 0;
    for (size_t i = 0; i < 2; i++) {
        size_t n = 0;
        const int *c = cp_tune_batch_plan_job_cpus(&plan, i, &n);
        struct cp_buf b;
        cp_buf_init(&b);
        cp_tune_cpus_format(c, n, &b);
        cr_assert_eq(cp_buf_status(&b), CP_OK);
        job_cpus[i] = cp_buf_steal(&b);
        char *file = cp_t_fmt("out/%s/report.json", names[i]);
        char *path = cp_t_path(file);
        json_t *j = cp_t_json_file(path);
        cr_assert_not_null(j, "%s (see stderr)", path);
        /* the job ran where the plan put it, with as many threads */
        cr_expect_str_eq(json_string_value(json_object_get(j, "cpus")), job_cpus[i], "%s", path);
        json_t *point = json_object_get(json_object_get(j, "baseline"), "point");
        cr_expect_eq(int_of(point, "threads"), plan.threads, "%s", path);
        json_int_t v = int_of(j, "verdicts"), k = int_of(j, "inconclusive");
        cr_expect(k >= 0 && k <= v, "%s: %lld of %lld", path, (long long)k, (long long)v);
        verdicts += v;
        inconclusive += k;
        /* the summary row: its CPUs, then the report's count */
        char *prefix = cp_t_fmt("| %s |", names[i]);
        char *row = line_starting(r.out, prefix);
        cr_assert_not_null(row, "no row for %s in: %s", names[i], r.out);
        char *tail = cp_t_fmt("| %s | %lld of %lld |", job_cpus[i], (long long)k, (long long)v);
        size_t rl = strlen(row), tl = strlen(tail);
        cr_expect(rl >= tl && strcmp(row + rl - tl, tail) == 0, "row '%s' does not end '%s'", row,
                  tail);
        free(tail);
        free(row);
        free(prefix);
        json_decref(j);
        free(path);
        free(file);
    }
    if (n_cpus >= 2)
        cr_expect_str_neq(job_cpus[0], job_cpus[1], "the two jobs share no CPU");
    char *total = cp_t_fmt("%lld of %lld verdict%s inconclusive", (long long)inconclusive,
                           (long long)verdicts, verdicts == 1 ? "" : "s");
    cr_expect(strstr(r.out, total), "no '%s' in: %s", total, r.out);
    cp_run_release(&r);

    /* --json: the same, one object per model (both sessions are done now) */
    cp_run_cli(&r, "tune", "--batch", list, "--jobs", "2", "--budget", "1", "--rounds", "5",
               "--warmup", "0", "--no-kb-strategies", "-q", "--kb", kb, "-o", out, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    json_error_t err;
    json_t *arr = json_loads(r.out, 0, &err);
    cr_assert(json_is_array(arr) && json_array_size(arr) == 2, "%s: %s", err.text, r.out);
    for (size_t i = 0; i < 2; i++) {
        json_t *o = json_array_get(arr, i);
        cr_expect_str_eq(json_string_value(json_object_get(o, "cpus")), job_cpus[i]);
        cr_expect_eq(int_of(o, "threads"), plan.threads);
        char *file = cp_t_fmt("out/%s/report.json", names[i]);
        char *path = cp_t_path(file);
        json_t *j = cp_t_json_file(path);
        cr_assert_not_null(j, "%s", path);
        cr_expect_eq(int_of(o, "verdicts"), int_of(j, "verdicts"));
        cr_expect_eq(int_of(o, "inconclusive"), int_of(j, "inconclusive"));
        json_decref(j);
        free(path);
        free(file);
        free(job_cpus[i]);
    }
    json_decref(arr);
    cp_run_release(&r);
    cp_tune_batch_plan_release(&plan);
    free(total);
    free(said);
    free(kb);
    free(out);
    free(text);
    free(list);
    free(ma);
    free(mb);
    free(cache);
}

/* OMP_PROC_BIND has libgomp bind threads where it likes, past any job's
 * CPUs: the batch says so rather than claim CPUs of their own. (The model
 * fails at import: nothing is measured.) */
Test(cli_tune_batch, an_openmp_binding_in_the_environment_is_named)
{
    cr_assert_eq(setenv("OMP_PROC_BIND", "true", 1), 0);
    char *model = cp_t_path("m.onnx");
    ct_write_text(model, "not onnx");
    char *list = cp_t_path("list.txt");
    char *text = cp_t_fmt("%s\n", model);
    ct_write_text(list, text);
    struct cp_run r;
    run_batch(&r, list);
    cr_assert_eq(r.signal, 0, "%s", r.err);
    ct_assert_mentions(r.err, "OMP_PROC_BIND is set", "unset it", NULL);
    cp_run_release(&r);
    free(text);
    free(list);
    free(model);
}
