/* Baselines: storing a run of a trace as a service's reference, and what
 * `cannprof baseline` shows of it (validate/validate.h). */
#include "validate/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A string, or null when there is none or it is empty. */
static json_t *str_or_null(const char *s)
{
    return s && *s ? cp_json_str(s) : json_null();
}

static const char *or_dash(const char *s)
{
    return s && *s ? s : "-";
}

static int width(const char *s, int w)
{
    int len = (int)strlen(s);
    return len > w ? len : w;
}

enum cp_status cp_validate_baseline_set(struct cp_kb *kb, const char *service, const char *tag,
                                        const char *trace, int64_t run, bool replace,
                                        struct cp_kb_baseline *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    enum cp_status st = cp_kb_check_service(service, d);
    if (st == CP_OK && tag)
        st = cp_kb_check_tag(tag, d);
    if (st != CP_OK)
        return st;
    struct cp_trace_store *store = NULL;
    struct cp_run_metrics m;
    memset(&m, 0, sizeof m);
    char *abs_trace = NULL;
    int64_t id = -1;
    if ((st = cp_trace_store_open_ro(trace, &store, d)) != CP_OK ||
        (st = cp_trace_store_run_metrics(store, run, &m, d)) != CP_OK)
        goto out;
    if (m.n == 0) {
        st = cp_diag_set(
            d, CP_ERR_INVALID,
            "%s: run %lld has no latency samples; record one with cannprof bench --trace", trace,
            (long long)m.run_id);
        goto out;
    }
    abs_trace = realpath(trace, NULL); /* so the record means something from anywhere */
    if ((st = cp_kb_baseline_set(kb, service, tag, abs_trace ? abs_trace : trace, &m, replace, &id,
                                 d)) == CP_OK)
        st = cp_kb_baseline_get_id(kb, id, out, d);
out:
    free(abs_trace);
    cp_run_metrics_release(&m);
    cp_trace_store_close(store);
    return st;
}

/* The summary of n samples in ns; zeroed when there are none. */
static enum cp_status summarize(const uint64_t *ns, size_t n, struct cp_summary *s,
                                struct cp_diag *d)
{
    memset(s, 0, sizeof *s);
    if (!ns || n == 0)
        return CP_OK;
    double *x = cp_calloc(n, sizeof *x);
    if (!x)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        x[i] = (double)ns[i];
    enum cp_status st = cp_stats_summary(x, n, s, d);
    free(x);
    return st;
}

enum cp_status cp_validate_baseline_figures(const struct cp_kb_baseline *b,
                                            struct cp_baseline_figures *f, struct cp_diag *d)
{
    memset(f, 0, sizeof *f);
    f->throughput = NAN;
    enum cp_status st = summarize(b->m.latency_ns, b->m.n, &f->latency, d);
    if (st == CP_OK)
        st = summarize(b->m.device_ns, b->m.n, &f->device, d);
    int batch = b->m.batch > 0 ? b->m.batch : 1;
    if (st == CP_OK && f->latency.mean > 0)
        f->throughput = batch * 1e9 / f->latency.mean;
    return st;
}

/* ---- JSON ------------------------------------------------------------------- */

/* {"mean","median","p90","p99","sd","min","max" in ms,"cv"} */
static json_t *summary_json(const struct cp_summary *s)
{
    const double v[] = {s->mean, s->median, s->p90, s->p99, s->sd, s->min, s->max};
    const char *k[] = {"mean", "median", "p90", "p99", "sd", "min", "max"};
    json_t *o = json_object();
    bool ok = o != NULL;
    for (size_t i = 0; ok && i < sizeof v / sizeof v[0]; i++)
        ok = cp_json_set_num(o, k[i], v[i] / 1e6);
    if (ok && cp_json_set_num(o, "cv", s->cv))
        return o;
    json_decref(o);
    return NULL;
}

static json_t *validation_json(const struct cp_kb_validation *x)
{
    json_t *o = json_object(), *alert = json_object();
    bool ok = o && alert && cp_json_set_bool(alert, "attempted", x->alert_attempted) &&
              cp_json_set_bool(alert, "delivered", x->alert_delivered) &&
              cp_json_set(alert, "error", str_or_null(x->alert_error)) &&
              cp_json_set_int(o, "id", x->id) && cp_json_set_str(o, "created_at", x->created_at) &&
              cp_json_set(o, "baseline_id",
                          x->baseline_id > 0 ? cp_json_int(x->baseline_id) : json_null()) &&
              cp_json_set(o, "baseline_tag", str_or_null(x->baseline_tag)) &&
              cp_json_set(o, "trace", str_or_null(x->trace_path)) &&
              cp_json_set_str(o, "verdict", x->verdict) &&
              cp_json_set_int(o, "exit_code", x->exit_code);
    if (ok) {
        ok = cp_json_set(o, "alert", alert);
        alert = NULL;
    }
    ok = ok && cp_json_set(o, "figures", cp_json_embed(x->figures_json));
    json_decref(alert);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

static json_t *figures_json(const struct cp_kb_baseline *x, const struct cp_baseline_figures *f)
{
    json_t *o = json_object(), *src = json_object(), *model = json_object(), *mem = json_object();
    bool ok = o && src && model && mem && cp_json_set(src, "trace", str_or_null(x->trace_path)) &&
              cp_json_set_int(src, "run_id", x->m.run_id) &&
              cp_json_set(src, "kind", str_or_null(x->m.kind)) &&
              cp_json_set(src, "recorded_at", str_or_null(x->m.created_at)) &&
              cp_json_set(model, "path", str_or_null(x->m.model_path)) &&
              cp_json_set(model, "hash", str_or_null(x->m.model_hash)) &&
              cp_json_set_int(mem, "weight_bytes", (int64_t)x->m.weight_bytes) &&
              cp_json_set_int(mem, "arena_bytes", (int64_t)x->m.arena_bytes) &&
              cp_json_set_int(mem, "peak_bytes", (int64_t)x->m.peak_bytes) &&
              cp_json_set_int(mem, "peak_rss_bytes", (int64_t)x->m.peak_rss_bytes) &&
              cp_json_set_int(o, "id", x->id) && cp_json_set_str(o, "service", x->service) &&
              cp_json_set_str(o, "tag", x->tag) && cp_json_set_str(o, "created_at", x->created_at);
    if (ok) {
        ok = cp_json_set(o, "source", src) && cp_json_set(o, "model", model);
        src = model = NULL;
    }
    ok = ok && cp_json_set(o, "config_id", str_or_null(x->m.config_id)) &&
         cp_json_set_int(o, "batch", x->m.batch) && cp_json_set_int(o, "threads", x->m.threads) &&
         cp_json_set_int(o, "n", (int64_t)x->m.n) &&
         cp_json_set(o, "latency_ms", summary_json(&f->latency)) &&
         cp_json_set(o, "device_ms", x->m.device_ns ? summary_json(&f->device) : json_null()) &&
         cp_json_set_num(o, "throughput_items_per_s", f->throughput);
    if (ok) {
        ok = cp_json_set(o, "memory", mem);
        mem = NULL;
    }
    ok = ok && cp_json_set_num(o, "precision_loss", x->m.precision_loss);
    json_decref(src);
    json_decref(model);
    json_decref(mem);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_validate_baseline_json(const struct cp_kb_baseline *b,
                                  const struct cp_baseline_figures *f,
                                  const struct cp_kb_validation *v, size_t nv)
{
    json_t *o = figures_json(b, f);
    if (!o || !v)
        return o;
    json_t *arr = json_array();
    bool ok = arr != NULL;
    for (size_t i = 0; ok && i < nv; i++)
        ok = cp_json_push(arr, validation_json(&v[i]));
    if (ok) {
        ok = cp_json_set(o, "validations", arr);
        arr = NULL;
    }
    json_decref(arr);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_validate_baselines_json(const struct cp_kb_baseline *v, size_t n)
{
    json_t *arr = json_array();
    bool ok = arr != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        const struct cp_kb_baseline *x = &v[i];
        json_t *o = json_object();
        ok = o && cp_json_set_int(o, "id", x->id) && cp_json_set_str(o, "service", x->service) &&
             cp_json_set_str(o, "tag", x->tag) && cp_json_set_str(o, "created_at", x->created_at) &&
             cp_json_set_int(o, "n", (int64_t)x->m.n) &&
             cp_json_set_num(o, "median_ms", x->median_ns / 1e6) &&
             cp_json_set_num(o, "mean_ms", x->mean_ns / 1e6) &&
             cp_json_set_num(o, "p99_ms", x->p99_ns / 1e6) &&
             cp_json_set(o, "model_path", str_or_null(x->m.model_path)) &&
             cp_json_set(o, "model_hash", str_or_null(x->m.model_hash)) &&
             cp_json_set(o, "config_id", str_or_null(x->m.config_id)) &&
             cp_json_set(o, "trace", str_or_null(x->trace_path)) &&
             cp_json_set_int(o, "run_id", x->m.run_id);
        if (ok)
            ok = cp_json_push(arr, o); /* steals o */
        else
            json_decref(o);
    }
    if (ok)
        return arr;
    json_decref(arr);
    return NULL;
}

/* ---- text ------------------------------------------------------------------- */

static void memory_line(const struct cp_run_metrics *m, struct cp_buf *out)
{
    char w[32], a[32], pk[32], r[32];
    cp_format_bytes(m->weight_bytes, w);
    cp_format_bytes(m->arena_bytes, a);
    cp_format_bytes(m->peak_bytes, pk);
    cp_format_bytes(m->peak_rss_bytes, r);
    cp_buf_printf(out, "memory:     weights %s, arena %s, peak activations %s, peak RSS %s\n", w, a,
                  pk, r);
}

void cp_validate_render_baseline_set(const struct cp_kb *kb, const struct cp_kb_baseline *b,
                                     const struct cp_baseline_figures *f, struct cp_buf *out)
{
    const struct cp_summary *s = &f->latency;
    cp_buf_printf(out, "baseline:   %s/%s stored (id %lld) in %s\n", b->service, b->tag,
                  (long long)b->id, cp_kb_path(kb));
    cp_buf_printf(out, "source:     %s, run %lld (%s, recorded %s)\n", b->trace_path,
                  (long long)b->m.run_id, or_dash(b->m.kind), or_dash(b->m.created_at));
    cp_buf_printf(out, "model:      %s\n", or_dash(b->m.model_path));
    cp_buf_printf(out, "samples:    %zu iterations%s\n", b->m.n,
                  b->m.device_ns ? " (with kernel time)" : "");
    cp_buf_printf(out, "latency ms: median %.3f  p99 %.3f  mean %.3f\n", s->median / 1e6,
                  s->p99 / 1e6, s->mean / 1e6);
    memory_line(&b->m, out);
}

static const char *alert_status(const struct cp_kb_validation *v, char *buf, size_t n)
{
    if (!v->alert_attempted)
        return "not sent";
    if (v->alert_delivered)
        return "delivered";
    snprintf(buf, n, "failed: %s", v->alert_error && *v->alert_error ? v->alert_error : "?");
    return buf;
}

void cp_validate_render_baseline(const struct cp_kb *kb, const struct cp_kb_baseline *x,
                                 const struct cp_baseline_figures *f,
                                 const struct cp_kb_validation *v, size_t nv, struct cp_buf *out)
{
    const struct cp_summary *lat = &f->latency, *dev = &f->device;
    cp_buf_printf(out, "baseline:   %s/%s (id %lld), set %s in %s\n", x->service, x->tag,
                  (long long)x->id, x->created_at, cp_kb_path(kb));
    cp_buf_printf(out, "source:     %s, run %lld (%s, recorded %s)\n", or_dash(x->trace_path),
                  (long long)x->m.run_id, or_dash(x->m.kind), or_dash(x->m.created_at));
    cp_buf_printf(out, "model:      %s\n", or_dash(x->m.model_path));
    cp_buf_printf(out, "model hash: %s\n", or_dash(x->m.model_hash));
    cp_buf_printf(out, "config id:  %s\n", or_dash(x->m.config_id));
    cp_buf_printf(out, "batch:      %d (%d threads)\n", x->m.batch, x->m.threads);
    cp_buf_printf(out, "iterations: %zu\n", x->m.n);
    cp_buf_printf(out, "latency ms: mean %.3f  median %.3f  p90 %.3f  p99 %.3f\n", lat->mean / 1e6,
                  lat->median / 1e6, lat->p90 / 1e6, lat->p99 / 1e6);
    cp_buf_printf(out, "            sd %.3f  cv %.2f%%  min %.3f  max %.3f\n", lat->sd / 1e6,
                  lat->cv * 100, lat->min / 1e6, lat->max / 1e6);
    if (x->m.device_ns)
        cp_buf_printf(out, "kernel ms:  mean %.3f  median %.3f  p99 %.3f\n", dev->mean / 1e6,
                      dev->median / 1e6, dev->p99 / 1e6);
    cp_buf_printf(out, "throughput: %.2f items/s\n", f->throughput);
    memory_line(&x->m, out);
    if (isfinite(x->m.precision_loss))
        cp_buf_printf(out, "precision:  precision_loss %.4f%%\n", x->m.precision_loss);
    if (nv == 0) {
        cp_buf_printf(out, "\nvalidations: none yet against service '%s'\n", x->service);
        return;
    }
    cp_buf_printf(out, "\nlast %zu validation%s of service '%s' (newest first):\n", nv,
                  nv == 1 ? "" : "s", x->service);
    int wt = 3;
    for (size_t i = 0; i < nv; i++)
        wt = width(or_dash(v[i].baseline_tag), wt);
    cp_buf_printf(out, "  %-20s  %-*s  %-12s  %4s  %s\n", "time", wt, "tag", "verdict", "exit",
                  "alert");
    for (size_t i = 0; i < nv; i++) {
        char buf[256];
        cp_buf_printf(out, "  %-20s  %-*s  %-12s  %4d  %s\n", v[i].created_at, wt,
                      or_dash(v[i].baseline_tag), v[i].verdict, v[i].exit_code,
                      alert_status(&v[i], buf, sizeof buf));
    }
}

void cp_validate_render_baselines(const struct cp_kb_baseline *v, size_t n, struct cp_buf *out)
{
    int ws = 7, wt = 3;
    for (size_t i = 0; i < n; i++) {
        ws = width(v[i].service, ws);
        wt = width(v[i].tag, wt);
    }
    cp_buf_printf(out, "%-*s  %-*s  %-20s  %6s  %10s  %s\n", ws, "service", wt, "tag", "created",
                  "n", "median ms", "model");
    for (size_t i = 0; i < n; i++) {
        char med[32];
        if (isfinite(v[i].median_ns))
            snprintf(med, sizeof med, "%.3f", v[i].median_ns / 1e6);
        else
            snprintf(med, sizeof med, "-");
        cp_buf_printf(out, "%-*s  %-*s  %-20s  %6zu  %10s  %s\n", ws, v[i].service, wt, v[i].tag,
                      v[i].created_at, v[i].m.n, med, or_dash(v[i].m.model_path));
    }
}
