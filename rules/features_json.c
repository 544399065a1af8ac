/* The features as JSON (cp_features_json): for `analyze --json`, reports
 * and tests. Numbers that are absent print as null. */
#include "rules/features_internal.h"

#include <math.h>
#include <string.h>

static void num(struct cp_buf *b, double v)
{
    if (isfinite(v))
        cp_buf_printf(b, "%.17g", v);
    else
        cp_buf_puts(b, "null");
}

static void key(struct cp_buf *b, bool *first, const char *k)
{
    if (!*first)
        cp_buf_putc(b, ',');
    *first = false;
    cp_buf_json_str(b, k);
    cp_buf_putc(b, ':');
}

/* A JSON value stored as text (origins): embedded as is when it looks like
 * an array, else as a string. */
static void raw_array(struct cp_buf *b, const char *s)
{
    if (s && s[0] == '[')
        cp_buf_puts(b, s);
    else
        cp_buf_json_str(b, s ? s : "");
}

static void kernel_json(struct cp_buf *b, const struct cp_kernel_feat *k)
{
    bool first = true;
    cp_buf_putc(b, '{');
    key(b, &first, "idx");
    cp_buf_printf(b, "%zu", k->idx);
    key(b, &first, "node");
    cp_buf_json_str(b, k->node);
    key(b, &first, "op_type");
    cp_buf_json_str(b, k->op_type);
    key(b, &first, "impl");
    cp_buf_json_str(b, k->impl);
    key(b, &first, "dtype");
    cp_buf_json_str(b, k->dtype);
    key(b, &first, "origins");
    raw_array(b, k->origins);
    key(b, &first, "pattern");
    cp_buf_json_str(b, k->pattern);
    static const char *const names[] = {
        "calls",     "mean_ns",        "time_share",  "flops",    "bytes",
        "intensity", "achieved_flops", "achieved_bw", "alu_util", "memory_bandwidth_util"};
    const double v[] = {k->calls,     k->mean_ns,        k->time_share,  k->flops,    k->bytes,
                        k->intensity, k->achieved_flops, k->achieved_bw, k->alu_util, k->bw_util};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        key(b, &first, names[i]);
        num(b, v[i]);
    }
    key(b, &first, "bound");
    if (k->has_bound)
        cp_buf_json_str(b, k->memory_bound ? "memory" : "compute");
    else
        cp_buf_puts(b, "null");
    key(b, &first, "small");
    cp_buf_puts(b, k->small ? "true" : "false");
    key(b, &first, "layout_transform");
    cp_buf_puts(b, k->layout_transform ? "true" : "false");
    key(b, &first, "copy");
    cp_buf_puts(b, k->copy ? "true" : "false");
    key(b, &first, "compute");
    cp_buf_puts(b, k->compute ? "true" : "false");
    cp_buf_putc(b, '}');
}

static void pattern_json(struct cp_buf *b, const struct cp_pattern *p)
{
    cp_buf_puts(b, "{\"kind\":");
    cp_buf_json_str(b, p->kind);
    cp_buf_puts(b, ",\"fix_pass\":");
    cp_buf_json_str(b, p->fix_pass);
    cp_buf_printf(b, ",\"fix_pass_off\":%s,\"fix_hint\":", p->fix_pass_off ? "true" : "false");
    cp_buf_json_str(b, p->fix_hint);
    cp_buf_puts(b, ",\"kernels\":[");
    for (size_t i = 0; i < p->n; i++)
        cp_buf_printf(b, "%s%zu", i ? "," : "", p->kernels[i]);
    cp_buf_puts(b, "],\"nodes\":");
    raw_array(b, p->nodes_json);
    cp_buf_puts(b, ",\"origins\":");
    raw_array(b, p->origins_json);
    cp_buf_puts(b, ",\"time_ns\":");
    num(b, p->time_ns);
    cp_buf_puts(b, ",\"time_share\":");
    num(b, p->time_share);
    cp_buf_putc(b, '}');
}

void cp_features_json(const struct cp_features *f, struct cp_buf *out)
{
    size_t n;
    const char *const *names = cp_features_scalar_names(&n);
    cp_buf_printf(out, "{\"run\":%lld,\"scalars\":{", (long long)f->run_id);
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        double v;
        key(out, &first, names[i]);
        if (cp_features_get(f, names[i], &v))
            num(out, v);
        else
            cp_buf_puts(out, "null");
    }
    cp_buf_puts(out, "},\"absent\":{");
    first = true;
    for (size_t i = 0; i < n; i++) {
        double v;
        if (cp_features_get(f, names[i], &v))
            continue;
        key(out, &first, names[i]);
        cp_buf_json_str(out, cp_features_absent_reason(f, names[i]));
    }
    cp_buf_puts(out, "},\"kernels\":[");
    for (size_t i = 0; i < f->n_kernels; i++) {
        if (i)
            cp_buf_putc(out, ',');
        kernel_json(out, &f->kernels[i]);
    }
    cp_buf_puts(out, "],\"op_types\":[");
    for (size_t i = 0; i < f->n_op_types; i++) {
        const struct cp_op_type_feat *o = &f->op_types[i];
        cp_buf_puts(out, i ? ",{\"op_type\":" : "{\"op_type\":");
        cp_buf_json_str(out, o->op_type);
        cp_buf_printf(out, ",\"kernels\":%zu,\"time_ns\":", o->n_kernels);
        num(out, o->time_ns);
        cp_buf_puts(out, ",\"time_share\":");
        num(out, o->time_share);
        cp_buf_putc(out, '}');
    }
    cp_buf_puts(out, "],\"patterns\":[");
    for (size_t i = 0; i < f->n_patterns; i++) {
        if (i)
            cp_buf_putc(out, ',');
        pattern_json(out, &f->patterns[i]);
    }
    cp_buf_puts(out, "]}");
}
