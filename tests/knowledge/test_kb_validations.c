/* knowledge base: validations. Recorded with their verdict and alert
 * outcome, listed newest first with a limit, kept (with the tag text) after
 * their baseline is removed, and refused without a verdict. */
#include "kb_test.h"

TestSuite(kb_validations, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* ---- validations --------------------------------------------------------- */

Test(kb_validations, validations_are_recorded_and_listed_newest_first)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    uint64_t lat[2], dev[2];
    struct cp_run_metrics m = metrics(2, 100, 1, false, lat, dev);
    int64_t bid = set_ok(kb, "api", "v1", &m);
    const char *verdicts[] = {"unchanged", "regressed", "improved", "inconclusive", "regressed"};
    int64_t ids[5];
    for (int i = 0; i < 5; i++) {
        struct cp_kb_validation v = {
            .service = "api",
            .baseline_id = bid,
            .baseline_tag = "v1",
            .trace_path = "/traces/new.db",
            .verdict = verdicts[i],
            .figures_json = "{\"latency_median\":{\"delta_pct\":4.5}}",
            .exit_code = strcmp(verdicts[i], "regressed") == 0,
            .alert_attempted = i >= 3,
            .alert_delivered = i == 4,
            .alert_error = i == 3 ? "HTTP 500 from hook" : NULL,
        };
        struct cp_diag d;
        cp_diag_init(&d);
        cr_assert_eq(cp_kb_record_validation(kb, &v, &ids[i], &d), CP_OK, "%s", d.msg);
        cr_assert_gt(ids[i], i ? ids[i - 1] : 0);
    }
    struct cp_kb_validation other = {.service = "web", .verdict = "unchanged"};
    cr_assert_eq(cp_kb_record_validation(kb, &other, NULL, NULL), CP_OK);

    struct cp_kb_validation *v = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_validation_list(kb, "api", 3, &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(v[0].id, ids[4], "newest first");
    cr_assert_eq(v[1].id, ids[3]);
    cr_assert_eq(v[2].id, ids[2]);
    cr_assert_str_eq(v[0].verdict, "regressed");
    cr_assert_eq(v[0].exit_code, 1);
    cr_assert(v[0].alert_attempted && v[0].alert_delivered);
    cr_assert_null(v[0].alert_error);
    cr_assert(v[1].alert_attempted && !v[1].alert_delivered);
    cr_assert_str_eq(v[1].alert_error, "HTTP 500 from hook");
    cr_assert_str_eq(v[0].service, "api");
    cr_assert_str_eq(v[0].baseline_tag, "v1");
    cr_assert_eq(v[0].baseline_id, bid);
    cr_assert_str_eq(v[0].trace_path, "/traces/new.db");
    cr_assert_str_eq(v[0].figures_json, "{\"latency_median\":{\"delta_pct\":4.5}}");
    cr_assert_eq(strlen(v[0].created_at), 20);
    cp_kb_validation_list_free(v, n);
    cr_assert_eq(cp_kb_validation_list(kb, "api", 0, &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 5, "limit 0 is all");
    cp_kb_validation_list_free(v, n);
    cr_assert_eq(cp_kb_validation_list(kb, "web", 10, &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 1);
    cr_assert_null(v[0].baseline_tag);
    cr_assert_eq(v[0].baseline_id, -1);
    cp_kb_validation_list_free(v, n);

    /* Removing the baseline keeps its validations, with the tag text. */
    cr_assert_eq(cp_kb_baseline_remove(kb, "api", "v1", NULL), CP_OK);
    cr_assert_eq(cp_kb_validation_list(kb, "api", 0, &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 5);
    cr_assert_str_eq(v[4].baseline_tag, "v1");
    cr_assert_eq(v[4].baseline_id, bid);
    cp_kb_validation_list_free(v, n);

    struct cp_kb_validation bad = {.service = "api"};
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_record_validation(kb, &bad, NULL, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "verdict"), "%s", d.msg);
    cp_kb_close(kb);
    free(path);
}
