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
