/* `cannprof kb` driven as a user would: a knowledge base filled through the
 * library (a finished session on sd_unet_tiny with accepted and rejected
 * candidates, strategy outcomes on this machine's hardware), then list and
 * show (text and JSON), card by session and by model, query by .onnx and by
 * .om (through its recorded source model), export to a file and import
 * into another knowledge base (twice: nothing duplicated), and every
 * refusal: unknown subcommands and sessions, missing arguments, a bad JSON
 * Lines file named with its line (exit 2). */
#include "core/core.h"
#include "knowledge/kb_tuning.h"
#include "support/browser.h"
#include "support/cli.h"
#include "support/examples.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setup(void)
{
    cp_t_scratch_setup();
    ct_private_xdg();
}

TestSuite(cli_kb, .init = setup, .fini = cp_t_scratch_close);

#define OK(call)                                                                                   \
    do {                                                                                           \
        struct cp_diag d_;                                                                         \
        cp_diag_init(&d_);                                                                         \
        struct cp_diag *d = &d_;                                                                   \
        cr_assert_eq((call), CP_OK, "%s: %s", #call, d_.msg);                                      \
    } while (0)

/* A finished session on sd_unet_tiny (step 1 accepted "fa=on" +20%, step 2
 * rejected "threads=1") and a strategy that held on resnet_tiny. */
static void fill(const char *kb_path)
{
    struct cp_kb *kb = NULL;
    OK(cp_kb_open(kb_path, &kb, d));
    struct cp_kb_fingerprint sd, rn;
    OK(cp_ex_fingerprint("sd_unet_tiny", &sd, d));
    OK(cp_ex_fingerprint("resnet_tiny", &rn, d));
    struct cp_kb_hardware hw;
    cp_kb_hardware_detect(&hw);
    int64_t m_sd = 0, m_rn = 0, h = 0, s = 0, c = 0, best = 0;
    OK(cp_kb_model_upsert(kb, &sd, &m_sd, d));
    OK(cp_kb_model_upsert(kb, &rn, &m_rn, d));
    OK(cp_kb_hardware_upsert(kb, &hw, &h, d));
    struct cp_kb_session ses = {.key = (char *)"k",
                                .model_id = m_sd,
                                .hw_id = h,
                                .model_path = (char *)"sd_unet_tiny.onnx",
                                .target = (char *)"latency",
                                .status = (char *)"running",
                                .constraints = (char *)"precision_loss<1%",
                                .budget = 2};
    ses.baseline_median_ns = ses.best_median_ns = NAN;
    OK(cp_kb_session_begin(kb, &ses, &s, d));
    const char *deltas[] = {"", "fa=on", "threads=1"};
    const enum cp_step_status status[] = {CP_STEP_BASELINE, CP_STEP_ACCEPTED, CP_STEP_REJECTED};
    const double gains[] = {NAN, 0.2, -0.3};
    for (int i = 0; i < 3; i++) {
        struct cp_kb_candidate k = {.session_id = s,
                                    .step = i,
                                    .delta = (char *)deltas[i],
                                    .source = (char *)(i ? "rule:attention_unfused" : "baseline"),
                                    .status = status[i],
                                    .reason = (char *)"attention is not fused",
                                    .expected_gain = NAN,
                                    .measured_gain = gains[i],
                                    .ci_lo = gains[i] - 0.02,
                                    .ci_hi = gains[i] + 0.02,
                                    .p = i ? 1e-6 : NAN,
                                    .precision_loss = 0.01,
                                    .memory_bytes = 4096,
                                    .median_ns = 1e6 * (1 - (i ? gains[i] : 0)),
                                    .throughput = NAN};
        OK(cp_kb_candidate_add(kb, &k, &c, d));
        uint64_t ns[3] = {1000, 1001, 1002};
        OK(cp_kb_measurement_add(kb, c, "b", ns, 3, d));
        if (i)
            OK(cp_kb_strategy_record(kb, m_sd, h, s, deltas[i], gains[i], i == 1, d));
        if (i == 1)
            best = c;
    }
    OK(cp_kb_strategy_record(kb, m_rn, h, 0, "layout_policy=nhwc", 0.4, true, d));
    ses.id = s;
    ses.status = (char *)"done";
    ses.best_candidate_id = best;
    ses.baseline_median_ns = 1e6;
    ses.best_median_ns = 0.8e6;
    ses.evaluations = 2;
    ses.stop_reason = (char *)"budget reached";
    OK(cp_kb_session_update(kb, &ses, d));
    cp_kb_fingerprint_release(&sd);
    cp_kb_fingerprint_release(&rn);
    cp_kb_close(kb);
}

static void expect(struct cp_run *r, int code, const char *what)
{
    cr_assert_eq(r->exit_code, code, "%s: exit %d, expected %d\nstdout: %s\nstderr: %s", what,
                 r->exit_code, code, r->out, r->err);
}

/* ---- list, show, card ---------------------------------------------------------- */

Test(cli_kb, list_and_show_as_text_and_json)
{
    char *kb = cp_t_path("kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "kb", "list", "--kb", kb, NULL);
    expect(&r, 0, "list of an empty knowledge base");
    cr_assert(strstr(r.out, "no tuning sessions"), "%s", r.out);
    cp_run_release(&r);

    fill(kb);
    cp_run_cli(&r, "kb", "list", "--kb", kb, NULL);
    expect(&r, 0, "list");
    cr_assert(strstr(r.out, "sd_unet_tiny") && strstr(r.out, "done") &&
                  strstr(r.out, "1.000 → 0.800") && strstr(r.out, "-20.0%"),
              "%s", r.out);
    cp_run_release(&r);

    cp_run_cli(&r, "kb", "list", "--json", "--kb", kb, NULL);
    expect(&r, 0, "list --json");
    json_t *j = json_loads(r.out, 0, NULL);
    cr_assert(json_is_array(j) && json_array_size(j) == 1, "%s", r.out);
    json_t *s0 = json_array_get(j, 0);
    cr_assert_eq(json_integer_value(json_object_get(s0, "id")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(s0, "model")), "sd_unet_tiny");
    cr_assert_float_eq(json_number_value(json_object_get(s0, "delta_pct")), -20.0, 1e-9);
    json_decref(j);
    cp_run_release(&r);

    cp_run_cli(&r, "kb", "show", "1", "--kb", kb, NULL);
    expect(&r, 0, "show");
    cr_assert(strstr(r.out, "fa=on") && strstr(r.out, "accepted") && strstr(r.out, "+20.0%") &&
                  strstr(r.out, "threads=1") && strstr(r.out, "rejected") &&
                  strstr(r.out, "precision_loss<1%"),
              "%s", r.out);
    cp_run_release(&r);

    cp_run_cli(&r, "kb", "show", "1", "--json", "--kb", kb, NULL);
    expect(&r, 0, "show --json");
    j = json_loads(r.out, 0, NULL);
    cr_assert_not_null(j, "%s", r.out);
    json_t *cands = json_object_get(j, "candidates");
    cr_assert_eq(json_array_size(cands), 3);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cands, 1), "delta")),
                     "fa=on");
    cr_assert(json_is_null(json_object_get(json_array_get(cands, 0), "measured_gain")));
    json_decref(j);
    cp_run_release(&r);

    cp_run_cli(&r, "kb", "show", "42", "--kb", kb, NULL);
    expect(&r, 2, "show of an unknown session");
    cr_assert(strstr(r.err, "42") && strstr(r.err, "kb list"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "show", "abc", "--kb", kb, NULL);
    expect(&r, 2, "show of a non-number");
    cr_assert(strstr(r.err, "'abc' is not a session id"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "show", "--kb", kb, NULL);
    expect(&r, 2, "show without a session");
    cp_run_release(&r);
    free(kb);
}

Test(cli_kb, card_by_session_and_by_model)
{
    char *kb = cp_t_path("kb.sqlite");
    fill(kb);
    struct cp_run r;
    cp_run_cli(&r, "kb", "card", "1", "--kb", kb, NULL);
    expect(&r, 0, "card 1");
    const char *want[] = {"# Tuning card: sd_unet_tiny",
                          "## Scenario",
                          "## Core bottlenecks",
                          "attention is not fused",
                          "## Effective changes",
                          "`fa=on`",
                          "## Result",
                          "↓20.0%",
                          "↑25.0%"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(r.out, want[i]), "missing '%s' in\n%s", want[i], r.out);
    cp_run_release(&r);

    char *sd = cp_t_example("sd_unet_tiny"), *rn = cp_t_example("resnet_tiny");
    cp_run_cli(&r, "kb", "card", "--model", sd, "--kb", kb, NULL);
    expect(&r, 0, "card --model");
    cr_assert(strstr(r.out, "## Effective changes"), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "card", "--model", rn, "--kb", kb, NULL);
    expect(&r, 2, "card of a model never tuned");
    cr_assert(strstr(r.err, "resnet_tiny"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "card", "--kb", kb, NULL);
    expect(&r, 2, "card without a session or model");
    cp_run_release(&r);
    free(sd);
    free(rn);
    free(kb);
}

Test(cli_kb, card_as_a_document_draws_the_trajectory_and_the_measured_gains)
{
    char *kb = cp_t_path("kb.sqlite"), *pdf = cp_t_path("card.pdf"), *html = cp_t_path("card.html");
    char *md = cp_t_path("card.md"), *txt = cp_t_path("card.txt");
    fill(kb);
    struct cp_run r;
    cp_run_cli(&r, "kb", "card", "1", "--kb", kb, "-o", pdf, NULL);
    expect(&r, 0, "card -o card.pdf");
    cr_assert(strstr(r.out, "card.pdf"), "%s", r.out);
    cp_run_release(&r);
    char *cmd = cp_t_fmt("pdftotext -raw '%s' -", pdf);
    char *text = cp_run_shell(cmd);
    cr_assert_not_null(text, "%s", cmd);
    /* the text, the accepted change's bar with its number, its CI and
     * what was predicted, and the trajectory */
    const char *want[] = {"Tuning card: sd_unet_tiny",
                          "Effective changes",
                          "Latency each accepted change saved, as measured",
                          "1. fa=on",
                          "20%",
                          "step 1: 95% CI [+18.0%, +22.0%], predicted —",
                          "Tuning trajectory: median latency by step",
                          "best so far",
                          "rejected"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(text, want[i]), "missing '%s' in\n%s", want[i], text);
    free(text);
    free(cmd);

    char *sd = cp_t_example("sd_unet_tiny");
    cp_run_cli(&r, "kb", "card", "--model", sd, "--kb", kb, "-o", html, NULL);
    expect(&r, 0, "card --model -o card.html");
    cp_run_release(&r);
    char *page = ct_read_text(html);
    cr_expect_eq(ct_count(page, "<svg"), 2, "two charts inline");
    cr_expect(strstr(page, "<figcaption><strong>Tuning trajectory"), "captioned");
    cr_expect_null(strstr(page, "<script"), "no script");
    free(page);

    /* Markdown as printed; another extension refused */
    cp_run_cli(&r, "kb", "card", "1", "--kb", kb, "-o", md, NULL);
    expect(&r, 0, "card -o card.md");
    cp_run_release(&r);
    page = ct_read_text(md);
    cr_expect(strstr(page, "## Effective changes") && !strstr(page, "<svg"), "%s", page);
    free(page);
    cp_run_cli(&r, "kb", "card", "1", "--kb", kb, "-o", txt, NULL);
    expect(&r, 2, "card -o card.txt");
    cr_expect(strstr(r.err, ".md, .html or .pdf"), "%s", r.err);
    cp_run_release(&r);
    free(sd);
    free(txt);
    free(md);
    free(html);
    free(pdf);
    free(kb);
}

/* ---- query ------------------------------------------------------------------------ */

Test(cli_kb, query_ranks_strategies_of_similar_models)
{
    char *kb = cp_t_path("kb.sqlite");
    fill(kb);
    char *sd = cp_t_example("sd_unet_tiny"), *rn = cp_t_example("resnet_tiny");
    struct cp_run r;
    cp_run_cli(&r, "kb", "query", "--model", sd, "--min-similarity", "0", "--json", "--kb", kb,
               NULL);
    expect(&r, 0, "query --json");
    json_t *j = json_loads(r.out, 0, NULL);
    cr_assert_not_null(j, "%s", r.out);
    json_t *st = json_object_get(j, "strategies");
    cr_assert_eq(json_array_size(st), 2, "%s", r.out);
    json_t *first = json_array_get(st, 0);
    cr_assert_str_eq(json_string_value(json_object_get(first, "delta")), "fa=on");
    cr_assert_eq(json_integer_value(json_object_get(first, "held")), 1);
    cr_assert_float_eq(json_number_value(json_object_get(first, "similarity")), 1.0, 1e-12);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(first, "models"), 0)),
                     "sd_unet_tiny");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "model"), "class")),
                     "unet");
    json_decref(j);
    cp_run_release(&r);

    /* The default threshold leaves the dissimilar CNN out for SD... */
    cp_run_cli(&r, "kb", "query", "--model", sd, "--kb", kb, NULL);
    expect(&r, 0, "query");
    cr_assert(strstr(r.out, "fa=on") && strstr(r.out, "+20.0%") && strstr(r.out, "1/1"), "%s",
              r.out);
    cr_assert_null(strstr(r.out, "layout_policy=nhwc"), "%s", r.out);
    cp_run_release(&r);
    /* ...and the CNN's own strategy comes first for the CNN. */
    cp_run_cli(&r, "kb", "query", "--model", rn, "--limit", "1", "--kb", kb, NULL);
    expect(&r, 0, "query resnet");
    cr_assert(strstr(r.out, "layout_policy=nhwc"), "%s", r.out);
    cr_assert_null(strstr(r.out, "fa=on"), "--limit 1: %s", r.out);
    cp_run_release(&r);

    /* A .om is queried through the source model it records. */
    char *om = ct_convert_to("sd_unet_tiny", "sd", NULL);
    cp_run_cli(&r, "kb", "query", "--model", om, "--kb", kb, NULL);
    expect(&r, 0, "query of a .om");
    cr_assert(strstr(r.out, "sd_unet_tiny (unet") && strstr(r.out, "fa=on"), "%s", r.out);
    cp_run_release(&r);

    cp_run_cli(&r, "kb", "query", "--kb", kb, NULL);
    expect(&r, 2, "query without --model");
    cr_assert(strstr(r.err, "--model"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "query", "--model", sd, "--min-similarity", "2", "--kb", kb, NULL);
    expect(&r, 2, "query with a bad threshold");
    cp_run_release(&r);
    char *missing = cp_t_path("nope.onnx");
    cp_run_cli(&r, "kb", "query", "--model", missing, "--kb", kb, NULL);
    expect(&r, 2, "query of a missing model");
    cr_assert(strstr(r.err, "nope.onnx"), "%s", r.err);
    cp_run_release(&r);
    free(missing);
    free(om);
    free(sd);
    free(rn);
    free(kb);
}

/* ---- sharing ------------------------------------------------------------------------ */

Test(cli_kb, export_and_import_merge_without_duplicates)
{
    char *a = cp_t_path("a.sqlite"), *b = cp_t_path("b.sqlite"), *file = cp_t_path("kb.jsonl");
    fill(a);
    struct cp_run r;
    cp_run_cli(&r, "kb", "export", "-o", file, "--kb", a, NULL);
    expect(&r, 0, "export -o");
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "export", "--kb", a, NULL);
    expect(&r, 0, "export to stdout");
    cr_assert(strstr(r.out, "{\"type\":\"session\""), "%s", r.out);
    char *exported = strdup(r.out);
    cp_run_release(&r);

    cp_run_cli(&r, "kb", "import", file, "--kb", b, NULL);
    expect(&r, 0, "import");
    /* 2 models, 1 hardware, 1 session, 3 candidates, 3 measurements, 3 strategies. */
    cr_assert(strstr(r.out, "imported 13 new records"), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "import", file, "--kb", b, NULL);
    expect(&r, 0, "import again");
    cr_assert(strstr(r.out, "imported 0 new records"), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "export", "--kb", b, NULL);
    expect(&r, 0, "export of the copy");
    cr_assert_str_eq(r.out, exported);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "card", "1", "--kb", b, NULL);
    expect(&r, 0, "card of an imported session");
    cr_assert(strstr(r.out, "`fa=on`"), "%s", r.out);
    cp_run_release(&r);

    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fputs("{\"type\":\"hardware\",\"signature\":\"aa\"}\n\n{\"type\":\"candidate\",\"session\":"
          "\"nope\",\"step\":1,\"status\":\"accepted\"}\n",
          f);
    fclose(f);
    cp_run_cli(&r, "kb", "import", file, "--kb", b, NULL);
    expect(&r, 2, "import of a dangling reference");
    char *where = cp_t_fmt("%s:3:", file);
    cr_assert(strstr(r.err, where) && strstr(r.err, "session nope"), "%s", r.err);
    free(where);
    cp_run_release(&r);
    f = fopen(file, "w");
    cr_assert_not_null(f);
    fputs("{\"type\":\"candidate\",\"session\":\"nope\",\"step\":1,\"status\":\"maybe\"}\n", f);
    fclose(f);
    cp_run_cli(&r, "kb", "import", file, "--kb", b, NULL);
    expect(&r, 2, "import of a status no step has");
    where = cp_t_fmt("%s:1:", file);
    cr_assert(strstr(r.err, where) && strstr(r.err, "'maybe'"), "%s", r.err);
    free(where);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "import", "--kb", b, NULL);
    expect(&r, 2, "import without a file");
    cp_run_release(&r);
    free(exported);
    free(a);
    free(b);
    free(file);
}

Test(cli_kb, unknown_subcommands_are_refused_with_a_suggestion)
{
    struct cp_run r;
    cp_run_cli(&r, "kb", "lst", NULL);
    expect(&r, 2, "unknown subcommand");
    cr_assert(strstr(r.err, "did you mean 'list'"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", NULL);
    expect(&r, 2, "no subcommand");
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "--help", NULL);
    expect(&r, 0, "--help");
    cr_assert(strstr(r.out, "kb query"), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "query", "--help", NULL);
    expect(&r, 0, "query --help");
    cr_assert(strstr(r.out, "--min-similarity"), "%s", r.out);
    cp_run_release(&r);
}
