/* Helpers shared by the tests that run the tuning loop (tests/tuner and
 * the measured ones in tests/perf): options for a quick session with its
 * own knowledge base and output folder, finding a step by its change, and
 * an example converted with every fusion pass off. Like cli_test.h, they
 * assert with Criterion where they can fail. (The names are those the
 * tests had when these lived in test_tune.c.) */
#ifndef CP_TESTS_TUNE_TEST_H
#define CP_TESTS_TUNE_TEST_H

#include "support/cli.h"
#include "tuner/tuner.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

/* Options for a quick session on `model` with its own KB and out folder. */
static inline void quick_opts(struct cp_tune_opts *o, const char *model, const char *tag)
{
    cp_tune_opts_init(o);
    o->model = model;
    o->out_dir = cp_t_fmt("%s/out-%s", cp_t_dir, tag);
    o->kb_path = cp_t_path("kb.sqlite");
    o->rounds = 30;
    o->warmup = 3;
    o->threads = 1; /* steady when ctest runs another test beside this one */
    o->use_kb_strategies = false;
}

/* Free what quick_opts made. */
static inline void opts_release(struct cp_tune_opts *o)
{
    free((char *)o->out_dir);
    free((char *)o->kb_path);
}

/* The first step whose change contains `delta`, or NULL. */
static inline const struct cp_tune_step *step_with(const struct cp_tune_result *r,
                                                   const char *delta)
{
    for (size_t i = 0; i < r->n_steps; i++)
        if (strstr(r->steps[i].delta, delta))
            return &r->steps[i];
    return NULL;
}

/* A replayed machine on which one run of point p takes mean_ns(p) with a
 * small deterministic scatter: the body of a cp_tune_measure_fn. */
static inline enum cp_status tt_replay(const struct cp_tune_ab_request *q,
                                       struct cp_measurement *out,
                                       double (*mean_ns)(const struct cp_tune_point *p))
{
    size_t n = (size_t)q->rounds;
    out->n_subjects = 2;
    out->n = n;
    out->warmup = q->warmup;
    out->target = q->rounds;
    out->stop = CP_MEASURE_STOP_COUNT;
    const struct cp_tune_point *pts[2] = {q->a, q->b};
    for (size_t s = 0; s < 2; s++) {
        out->ns[s] = malloc(n * sizeof *out->ns[s]);
        cr_assert_not_null(out->ns[s]);
        double mean = mean_ns(pts[s]);
        for (size_t i = 0; i < n; i++)
            out->ns[s][i] = (uint64_t)(mean * (1 + 0.003 * (double)((i * 7 + s) % 5)));
    }
    return CP_OK;
}

/* quick_opts for a replayed session with no rule pack (the proposals are
 * the planned ones and the knob space's neighbours): 20 rounds, 1 warm-up,
 * `budget` steps, `measure` as the measurement. */
static inline void replayed_quick_opts(struct cp_tune_opts *o, const char *model, const char *tag,
                                       int budget, cp_tune_measure_fn measure)
{
    static char *rules;
    quick_opts(o, model, tag);
    o->rounds = 20;
    o->warmup = 1;
    o->budget = budget;
    o->measure = measure;
    free(rules);
    rules = cp_t_path("none.yaml");
    ct_write_text(rules, "pack: none\nversion: 1\nrules: []\n");
    o->rule_paths = (const char *const *)&rules;
    o->n_rule_paths = 1;
}

/* Convert an example with every pass switched off to <scratch>/OUT.om. */
static inline char *convert_unfused(const char *model, const char *out)
{
    char *name = cp_t_fmt("%s.cfg", out);
    char *flag = ct_switch_file(name, "ALL:off\n");
    char *om = ct_convert_to(model, out, flag, NULL);
    free(name);
    free(flag);
    return om;
}

#endif
