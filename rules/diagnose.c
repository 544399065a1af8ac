/* One call from a trace file to sorted findings. */
#include "rules/rules.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>

void cp_diagnosis_release(struct cp_diagnosis *dg)
{
    cp_rule_set_free(dg->rules);
    cp_features_free(dg->features);
    cp_analysis_release(&dg->analysis);
    cp_run_metrics_release(&dg->run);
    memset(dg, 0, sizeof *dg);
    dg->run.precision_loss = NAN;
}

static enum cp_status load_rules(struct cp_rule_set *rs, const struct cp_diagnose_opts *o,
                                 struct cp_diag *d)
{
    if (o->n_rule_paths == 0)
        return cp_rule_set_load_dir(rs, cp_rules_default_dir(), d);
    for (size_t i = 0; i < o->n_rule_paths; i++) {
        struct stat sb;
        const char *p = o->rule_paths[i];
        if (stat(p, &sb) != 0)
            return cp_diag_set(d, CP_ERR_INVALID, "--rules %s: no such file or folder", p);
        enum cp_status st =
            S_ISDIR(sb.st_mode) ? cp_rule_set_load_dir(rs, p, d) : cp_rule_set_load_file(rs, p, d);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

enum cp_status cp_rules_diagnose(const char *trace_path, const struct cp_diagnose_opts *o,
                                 struct cp_diagnosis *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    out->run.precision_loss = NAN;
    if (!(out->rules = cp_rule_set_create()))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = load_rules(out->rules, o, d);
    if (st != CP_OK)
        return st;
    if (!cp_path_exists(trace_path))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: no such file", trace_path);
    struct cp_trace_store *s = NULL;
    if ((st = cp_trace_store_open_ro(trace_path, &s, d)) != CP_OK)
        return st;
    st = cp_trace_store_run_metrics(s, o->run_id, &out->run, d);
    if (st == CP_OK && out->run.n == 0)
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: run %lld has no latency samples: nothing was measured to diagnose "
                         "(record a run with `cannprof bench MODEL --trace %s`)",
                         trace_path, (long long)out->run.run_id, trace_path);
    if (st == CP_OK && o->calibrate) {
        if (cp_calibrate(o->cache_dir, false, &out->machine, d) != CP_OK) {
            cp_trace_store_close(s);
            return d ? d->status : CP_ERR_IO;
        }
        out->calibrated = true;
    }
    if (st == CP_OK)
        st = cp_features_compute(s, out->run.run_id, out->calibrated ? &out->machine : NULL,
                                 &out->features, d);
    cp_trace_store_close(s);
    if (st != CP_OK)
        return st;
    struct cp_analysis_opts ao = o->analysis;
    ao.run = &out->run;
    if (ao.memory_bytes <= 0)
        ao.memory_bytes = (double)(out->run.weight_bytes + out->run.arena_bytes);
    return cp_rules_analyze(out->rules, out->features, &ao, &out->analysis, d);
}
