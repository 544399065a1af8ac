/* One call from a trace file to sorted findings. */
#include "core/json.h"
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

/* A call stack as the importer kept it ("a/b/c.py(12): f;\r\nd.py(3): g")
 * as frames, each path cut to its last two parts: stacks carry the
 * developer's absolute paths, which a report should not spread. */
static json_t *frames(const char *stack)
{
    json_t *a = json_array();
    for (const char *p = stack; a && *p;) {
        size_t n = strcspn(p, ";\r\n");
        const char *end = p + n;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (end > p) {
            /* the path part ends at the last '(' (line number) */
            const char *paren = NULL;
            for (const char *q = p; q < end; q++)
                if (*q == '(')
                    paren = q;
            const char *cut = p;
            int slashes = 0;
            for (const char *q = paren ? paren : end; q > p; q--)
                if (q[-1] == '/' && ++slashes == 2) {
                    cut = q;
                    break;
                }
            if (cp_json_push(a, cp_json_strn(cut, (size_t)(end - cut))) == false) {
                json_decref(a);
                return NULL;
            }
        }
        p = end;
        while (*p == ';' || *p == '\r' || *p == '\n')
            p++;
    }
    return a;
}

/* The call stacks an import kept ("run.<id>.import.stack.<op>") of the
 * ops each finding names. */
static enum cp_status attach_stacks(struct cp_trace_store *s, int64_t run, struct cp_analysis *a,
                                    struct cp_diag *d)
{
    for (size_t i = 0; i < a->n; i++) {
        struct cp_finding *f = &a->findings[i];
        json_t *nodes = f->nodes_json ? json_loads(f->nodes_json, 0, NULL) : NULL;
        json_t *out = json_object();
        enum cp_status st = out ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        for (size_t k = 0; st == CP_OK && k < json_array_size(nodes); k++) {
            const char *op = json_string_value(json_array_get(nodes, k));
            char key[256], *stack = NULL;
            if (!op || (size_t)snprintf(key, sizeof key, "run.%lld.import.stack.%s", (long long)run,
                                        op) >= sizeof key)
                continue;
            st = cp_trace_store_get_meta(s, key, &stack, d);
            if (st == CP_OK && stack) {
                json_t *fr = frames(stack);
                if (!fr || !cp_json_set(out, op, fr))
                    st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            }
            free(stack);
        }
        if (st == CP_OK && json_object_size(out) > 0 && !(f->stacks_json = cp_json_text(out)))
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        json_decref(out);
        json_decref(nodes);
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
    struct cp_analysis_opts ao = o->analysis;
    ao.run = &out->run;
    if (ao.memory_bytes <= 0)
        ao.memory_bytes = (double)(out->run.weight_bytes + out->run.arena_bytes);
    if (st == CP_OK)
        st = cp_rules_analyze(out->rules, out->features, &ao, &out->analysis, d);
    if (st == CP_OK && out->run.kind && strcmp(out->run.kind, "import") == 0)
        st = attach_stacks(s, out->run.run_id, &out->analysis, d);
    cp_trace_store_close(s);
    return st;
}
