/* The features as JSON (cp_features_to_json): for `analyze --json`, reports
 * and tests. Built on core/json.h, so absent numbers (NaN) are null and
 * names from a damaged trace are valid UTF-8. */
#include "core/json.h"
#include "rules/features_internal.h"

#include <string.h>

/* A JSON array stored as text (origins, node lists): the array itself when
 * the text is one, else the text as a string. */
static json_t *array_text(const char *s)
{
    json_t *j = s && s[0] == '[' ? json_loads(s, 0, NULL) : NULL;
    if (json_is_array(j))
        return j;
    json_decref(j);
    return cp_json_str(s ? s : "");
}

static json_t *kernel_json(const struct cp_kernel_feat *k)
{
    json_t *o = json_object();
    bool ok = o && cp_json_set_int(o, "idx", (int64_t)k->idx) &&
              cp_json_set_str(o, "node", k->node) && cp_json_set_str(o, "op_type", k->op_type) &&
              cp_json_set_str(o, "impl", k->impl) && cp_json_set_str(o, "dtype", k->dtype) &&
              cp_json_set_str(o, "layout", k->layout ? k->layout : "") &&
              cp_json_set(o, "origins", array_text(k->origins)) &&
              cp_json_set_str(o, "pattern", k->pattern);
    static const char *const names[] = {
        "calls",     "mean_ns",        "time_share",  "flops",    "bytes",
        "intensity", "achieved_flops", "achieved_bw", "alu_util", "memory_bandwidth_util"};
    const double v[] = {k->calls,     k->mean_ns,        k->time_share,  k->flops,    k->bytes,
                        k->intensity, k->achieved_flops, k->achieved_bw, k->alu_util, k->bw_util};
    for (size_t i = 0; ok && i < sizeof v / sizeof v[0]; i++)
        ok = cp_json_set_num(o, names[i], v[i]);
    ok = ok &&
         cp_json_set(o, "bound",
                     k->has_bound ? cp_json_str(k->memory_bound ? "memory" : "compute")
                                  : json_null()) &&
         cp_json_set_bool(o, "small", k->small) &&
         cp_json_set_bool(o, "layout_transform", k->layout_transform) &&
         cp_json_set_bool(o, "copy", k->copy) && cp_json_set_bool(o, "compute", k->compute);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

static json_t *pattern_json(const struct cp_pattern *p)
{
    json_t *o = json_object(), *kernels = json_array();
    bool ok = o && kernels;
    for (size_t i = 0; ok && i < p->n; i++)
        ok = cp_json_push(kernels, cp_json_int((int64_t)p->kernels[i]));
    ok = ok && cp_json_set_str(o, "kind", p->kind) && cp_json_set_str(o, "fix_pass", p->fix_pass) &&
         cp_json_set_bool(o, "fix_pass_off", p->fix_pass_off) &&
         cp_json_set_str(o, "fix_hint", p->fix_hint);
    if (ok) {
        ok = cp_json_set(o, "kernels", kernels);
        kernels = NULL;
    }
    ok = ok && cp_json_set(o, "nodes", array_text(p->nodes_json)) &&
         cp_json_set(o, "origins", array_text(p->origins_json)) &&
         cp_json_set_num(o, "time_ns", p->time_ns) &&
         cp_json_set_num(o, "time_share", p->time_share);
    json_decref(kernels);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

static json_t *op_type_json(const struct cp_op_type_feat *t)
{
    json_t *o = json_object();
    if (o && cp_json_set_str(o, "op_type", t->op_type) &&
        cp_json_set_int(o, "kernels", (int64_t)t->n_kernels) &&
        cp_json_set_num(o, "time_ns", t->time_ns) &&
        cp_json_set_num(o, "time_share", t->time_share))
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_features_to_json(const struct cp_features *f)
{
    size_t n;
    const char *const *names = cp_features_scalar_names(&n);
    json_t *o = json_object(), *scalars = json_object(), *absent = json_object();
    json_t *kernels = json_array(), *ops = json_array(), *patterns = json_array();
    bool ok = o && scalars && absent && kernels && ops && patterns;
    for (size_t i = 0; ok && i < n; i++) {
        double v;
        if (cp_features_get(f, names[i], &v))
            ok = cp_json_set_num(scalars, names[i], v);
        else
            ok = cp_json_set(scalars, names[i], json_null()) &&
                 cp_json_set_str(absent, names[i], cp_features_absent_reason(f, names[i]));
    }
    for (size_t i = 0; ok && i < f->n_kernels; i++)
        ok = cp_json_push(kernels, kernel_json(&f->kernels[i]));
    for (size_t i = 0; ok && i < f->n_op_types; i++)
        ok = cp_json_push(ops, op_type_json(&f->op_types[i]));
    for (size_t i = 0; ok && i < f->n_patterns; i++)
        ok = cp_json_push(patterns, pattern_json(&f->patterns[i]));
    ok = ok && cp_json_set_int(o, "run", f->run_id);
    /* each set steals its value: clear the local so the cleanup skips it */
    json_t **parts[] = {&scalars, &absent, &kernels, &ops, &patterns};
    static const char *const keys[] = {"scalars", "absent", "kernels", "op_types", "patterns"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        if (ok)
            ok = cp_json_set(o, keys[i], *parts[i]);
        else
            json_decref(*parts[i]);
        *parts[i] = NULL;
    }
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}
