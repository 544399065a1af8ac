/* A service's noise floor, alerts and the record of validations against
 * a baseline (validate/validate.h). */
#include "validate/validate.h"
#include "stats/stats.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most runs of a service are of code whose speed did not change, so the
 * robust spread of the latency changes its validations recorded (MAD
 * scaled to a standard deviation, which the few real changes among them
 * barely move) is how far two runs drift on this machine; a change smaller
 * than three times it is within the noise. */
void cp_validate_noise_floor(struct cp_kb *kb, const char *service, double *pct, size_t *n)
{
    *pct = NAN;
    *n = 0;
    struct cp_kb_validation *v = NULL;
    size_t nv = 0;
    if (cp_kb_validation_list(kb, service, 60, &v, &nv, NULL) != CP_OK)
        return;
    double *x = cp_calloc(nv ? nv : 1, sizeof *x);
    size_t k = 0;
    for (size_t i = 0; x && i < nv; i++) {
        json_t *f = v[i].figures_json ? json_loads(v[i].figures_json, 0, NULL) : NULL;
        json_t *lat = json_object_get(f, "latency");
        json_t *delta = json_object_get(lat, "delta_pct");
        if (json_is_number(delta) && isfinite(json_number_value(delta)))
            x[k++] = json_number_value(delta);
        json_decref(f);
    }
    struct cp_mad mad;
    if (k >= 5 && cp_stats_mad(x, k, &mad, NULL) == CP_OK) {
        *pct = 3 * mad.scaled;
        *n = k;
    }
    free(x);
    cp_kb_validation_list_free(v, nv);
}

void cp_validate_send_alert(const struct cp_vresult *r, const char *service, const char *tag,
                            const char *trace, struct cp_validate_alert *al)
{
    struct cp_buf text, figures, title;
    cp_buf_init(&text);
    cp_buf_init(&figures);
    cp_buf_init(&title);
    cp_validate_render_text(r, &text);
    json_t *fj = cp_validate_figures_json(r);
    enum cp_status fst = cp_json_dump(fj, false, &figures);
    json_decref(fj);
    cp_buf_printf(&title, "cannprof: %s %s against baseline %s", service ? service : "service",
                  cp_verdict_name(r->overall), tag ? tag : "");
    struct cp_alert a = {
        .event = r->overall == CP_VERDICT_REGRESSED ? "regression" : "validation",
        .title = title.data,
        .service = service,
        .verdict = cp_verdict_name(r->overall),
        .text = text.data,
        .figures_json = figures.data,
        .trace_path = trace,
        .baseline_tag = tag,
    };
    struct cp_notify_opts o;
    cp_notify_opts_init(&o);
    o.url = al->url;
    o.format = al->format;
    o.secret = al->secret;
    struct cp_diag d;
    cp_diag_init(&d);
    int attempts = 0;
    al->attempted = true;
    if (cp_buf_status(&text) != CP_OK || fst != CP_OK || cp_buf_status(&title) != CP_OK)
        snprintf(al->error, sizeof al->error, "out of memory building the alert");
    else if (cp_notify_send(&o, &a, &attempts, &d) == CP_OK)
        al->delivered = true;
    else
        snprintf(al->error, sizeof al->error, "%s", d.msg);
    cp_buf_release(&text);
    cp_buf_release(&figures);
    cp_buf_release(&title);
}

enum cp_status cp_validate_record(struct cp_kb *kb, const struct cp_kb_baseline *b,
                                  const char *service, const char *trace,
                                  const struct cp_vresult *r, int exit_code,
                                  const struct cp_validate_alert *al, struct cp_diag *d)
{
    struct cp_buf figures;
    cp_buf_init(&figures);
    json_t *fj = cp_validate_figures_json(r);
    enum cp_status st = cp_json_dump(fj, false, &figures);
    json_decref(fj);
    if (st != CP_OK) {
        cp_buf_release(&figures);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory recording the validation");
    }
    struct cp_kb_validation v = {
        .service = service,
        .baseline_id = b->id,
        .baseline_tag = b->tag,
        .trace_path = trace,
        .verdict = cp_verdict_name(r->overall),
        .figures_json = figures.data ? figures.data : "{}",
        .exit_code = exit_code,
        .alert_attempted = al->attempted,
        .alert_delivered = al->delivered,
        .alert_error = al->error[0] ? al->error : NULL,
    };
    int64_t id;
    st = cp_kb_record_validation(kb, &v, &id, d);
    cp_buf_release(&figures);
    return st;
}

enum cp_status cp_validate_alert_secret(const char *file, char *out, size_t n, struct cp_diag *d)
{
    out[0] = '\0';
    if (!file) {
        const char *env = getenv("CANNPROF_WEBHOOK_SECRET");
        if (env && strlen(env) >= n) {
            return cp_diag_set(d, CP_ERR_INVALID,
                               "$CANNPROF_WEBHOOK_SECRET is longer than %zu bytes", n - 1);
        }
        snprintf(out, n, "%s", env ? env : "");
        return CP_OK;
    }
    FILE *f = fopen(file, "r");
    if (!f) {
        return cp_diag_set(d, CP_ERR_INVALID, "--webhook-secret-file: %s: %s", file,
                           strerror(errno));
    }
    bool ok = fgets(out, (int)n, f) != NULL;
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
    if (!ok || !out[0]) {
        out[0] = '\0';
        return cp_diag_set(d, CP_ERR_INVALID, "--webhook-secret-file: %s: the first line is empty",
                           file);
    }
    return CP_OK;
}

enum cp_status cp_validate_webhook_setup(const char *url, const char *format,
                                         const char *secret_file, struct cp_validate_alert *al,
                                         char *secret, size_t n, struct cp_diag *d)
{
    memset(al, 0, sizeof *al);
    secret[0] = '\0';
    al->url = url ? url : getenv("CANNPROF_WEBHOOK");
    if (al->url && !al->url[0])
        al->url = NULL;
    if (format && !cp_webhook_format_parse(format, &al->format))
        return cp_diag_set(d, CP_ERR_USAGE, "--webhook-format: '%.60s' is not one of %s", format,
                           cp_webhook_format_choices());
    if (secret_file && !al->url)
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--webhook-secret-file signs alerts: give --webhook URL too");
    enum cp_status st = al->url ? cp_validate_alert_secret(secret_file, secret, n, d) : CP_OK;
    if (st != CP_OK)
        return st;
    al->secret = secret[0] ? secret : NULL;
    if (al->secret && al->format == CP_WEBHOOK_SLACK)
        return cp_diag_set(d, CP_ERR_USAGE,
                           "slack incoming webhooks are not signed (their URL is the secret): "
                           "drop --webhook-secret-file and $CANNPROF_WEBHOOK_SECRET, or use "
                           "another --webhook-format");
    return CP_OK;
}
