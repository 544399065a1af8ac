/* `tune --serve` in the knowledge base (tuner/serve_tune_kb.c), without
 * serving anything: the delta a step records, the knobs a recorded delta
 * gives back (and the ones it refuses), a session with its steps and
 * outcomes, and the hints a later run on the same model gets from it (and
 * that the model tuner's strategies leave them out). */
#include "knowledge/kb.h"
#include "support/cli.h"
#include "support/run.h"
#include "tuner/tuner.h"
#include "tuner/tuner_internal.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(serve_tune_kb, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

Test(serve_tune_kb, a_delta_names_the_knobs_a_step_set)
{
    struct cp_serve_knobs a = {1, 0, 2}, b = {2, 0, 2}, c = {2, 0.9, 1};
    char t[256];
    cp_serve_kb_delta(&a, &b, t, sizeof t);
    cr_expect_str_eq(t, "serve:max_batch=2");
    cp_serve_kb_delta(&a, &c, t, sizeof t);
    cr_expect_str_eq(t, "serve:max_batch=2 serve:window_ms=0.9 serve:threads=1");
    cp_serve_kb_delta(&a, &a, t, sizeof t);
    cr_expect_str_eq(t, "");
}

Test(serve_tune_kb, a_recorded_delta_gives_its_knobs_back_or_is_refused)
{
    struct cp_serve_knobs cur = {1, 0, 2}, k;
    cr_assert(cp_serve_kb_apply("serve:max_batch=4 serve:window_ms=1.5", &cur, 2, true, &k));
    cr_expect_eq(k.max_batch, 4);
    cr_expect_float_eq(k.window_ms, 1.5, 1e-12);
    cr_expect_eq(k.threads, 2);
    cr_assert(cp_serve_kb_apply("serve:threads=1", &cur, 2, true, &k));
    cr_expect_eq(k.threads, 1);
    /* back to one request a batch drops the window */
    struct cp_serve_knobs batched = {4, 2.0, 2};
    cr_assert(cp_serve_kb_apply("serve:max_batch=1", &batched, 2, true, &k));
    cr_expect_eq(k.max_batch, 1);
    cr_expect_eq(k.window_ms, 0);
    const char *refused[] = {
        "serve:threads=3",           /* more threads than cores */
        "serve:max_batch=0",         /* out of range */
        "serve:max_batch=2.5",       /* not whole */
        "serve:window_ms=-1",        /* negative */
        "serve:colour=red",          /* no such knob */
        "serve:max_batch",           /* no value */
        "serve:max_batch=2x",        /* junk */
        "precision_mode=force_fp16", /* a conversion change */
        "serve:threads=2",           /* changes nothing */
        "serve:max_batch=2 switch:GeluFusionPass=off",
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        cr_expect(!cp_serve_kb_apply(refused[i], &cur, 2, true, &k), "took '%s'", refused[i]);
    /* batching where the model's batch cannot be set */
    cr_expect(!cp_serve_kb_apply("serve:max_batch=2", &cur, 2, false, &k));
}

/* A step as the tuner judges it: measured_pct of the target's figure. */
static struct cp_flow_tune_step step(double pct, bool accepted)
{
    struct cp_flow_tune_step s = {.round = 1,
                                  .predicted_pct = NAN,
                                  .measured_pct = pct,
                                  .ci_lo = pct - 5,
                                  .ci_hi = pct + 5,
                                  .p = 0.01,
                                  .before = 1000,
                                  .after = 1000 * (1 + pct / 100),
                                  .accepted = accepted};
    snprintf(s.reason, sizeof s.reason, "%s", accepted ? "better" : "not better");
    return s;
}

Test(serve_tune_kb, a_session_records_its_steps_and_a_later_run_gets_what_held)
{
    char *kb_path = cp_t_path("kb.sqlite"), model[2048];
    cp_example_model(model, sizeof model, "resnet_tiny");
    struct cp_serve_tune_opts o;
    cp_serve_tune_opts_init(&o);
    o.model = model;
    o.target = CP_TARGET_THROUGHPUT;
    o.kb_path = kb_path;
    o.out_dir = cp_t_dir;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_serve_kb k;
    cr_assert_eq(cp_serve_kb_open(kb_path, model, &k, &d), CP_OK, "%s", d.msg);
    struct cp_serve_knobs start = {1, 0, 2}, b2 = {2, 0, 2}, t1 = {2, 0, 1};
    cr_assert_eq(cp_serve_kb_begin(&k, &o, &start, &d), CP_OK, "%s", d.msg);
    cr_assert_gt(k.session_id, 0);
    struct cp_flow_tune_step won = step(30, true), lost = step(-7, false);
    struct cp_flow_tune_step failed = step(NAN, false);
    cr_assert_eq(cp_serve_kb_step(&k, &o, 1, &start, &b2, &won, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_serve_kb_step(&k, &o, 2, &b2, &t1, &lost, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_serve_kb_step(&k, &o, 3, &b2, &t1, &failed, &d), CP_OK, "%s", d.msg);
    struct cp_serve_tune_result r = {.best = b2, .evaluations = 3};
    snprintf(r.stop_reason, sizeof r.stop_reason, "budget spent");
    r.final_pct = NAN;
    cr_assert_eq(cp_serve_kb_finish(&k, &o, &r, &d), CP_OK, "%s", d.msg);

    /* the candidates: the baseline and the three steps, gains as fractions
     * of throughput won */
    struct cp_kb_candidate *c = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_candidate_list(k.kb, k.session_id, &c, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 4);
    cr_expect_eq(c[0].status, CP_STEP_BASELINE);
    cr_expect_str_eq(c[1].delta, "serve:max_batch=2");
    cr_expect_str_eq(c[1].source, "serve");
    cr_expect_eq(c[1].status, CP_STEP_ACCEPTED);
    cr_expect_float_eq(c[1].measured_gain, 0.30, 1e-9);
    cr_expect_float_eq(c[1].ci_lo, 0.25, 1e-9);
    cr_expect_str_eq(c[2].delta, "serve:threads=1");
    cr_expect_eq(c[2].status, CP_STEP_REJECTED);
    cr_expect_eq(c[3].status, CP_STEP_FAILED);
    cr_expect(isnan(c[3].measured_gain));
    cp_kb_candidate_list_free(c, n);
    struct cp_kb_session s;
    cr_assert_eq(cp_kb_session_get(k.kb, k.session_id, &s, &d), CP_OK, "%s", d.msg);
    cr_expect_str_eq(s.status, "done");
    cr_expect_eq(s.evaluations, 3);
    cr_expect(strstr(s.best_config_json, "\"max_batch\":2"), "%s", s.best_config_json);
    cp_kb_session_release(&s);

    /* a later run on the same model: what held comes back as a hint */
    struct cp_kb_strategy_hit *h = NULL;
    size_t nh = 0;
    cr_assert_eq(cp_serve_kb_hints(&k, &h, &nh, &d), CP_OK, "%s", d.msg);
    bool batch_hint = false;
    for (size_t i = 0; i < nh; i++) {
        cr_expect(strncmp(h[i].delta, "serve:", 6) == 0, "%s", h[i].delta);
        batch_hint |= strcmp(h[i].delta, "serve:max_batch=2") == 0;
    }
    cr_expect(batch_hint, "the batch that held is not a hint");
    cp_kb_strategy_hits_free(h, nh);
    /* and the model tuner, which reads the same strategies, cannot take it
     * for a conversion change */
    struct cp_delta dl;
    struct cp_diag pd;
    cp_diag_init(&pd);
    cr_expect_neq(cp_delta_parse("serve:max_batch=2", &dl, &pd), CP_OK);
    cp_serve_kb_close(&k);
    free(kb_path);
}
