/* A tuning card as a file (knowledge/kb_tuning.h): the Markdown as it is, or
 * read back as a document with its charts, the candidates' latency by step
 * under "Result" and the accepted changes' gains, measured beside
 * predicted, under "Effective changes". */
#include "knowledge/kb_internal.h"
#include "report/doc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A change's label on a bar: its step and canonical text, cut. */
#define LABEL_CHARS 48

struct card_charts {
    /* the trajectory: the best so far at each step, and each candidate */
    struct cp_chart_trajectory traj;
    /* the accepted changes: measured gains (%), their labels and notes */
    double *gain;
    char **labels;
    size_t ng;
    struct cp_buf note;
};

static void charts_release(struct card_charts *c)
{
    cp_chart_trajectory_release(&c->traj);
    free(c->gain);
    for (size_t i = 0; i < c->ng; i++)
        free(c->labels[i]);
    free(c->labels);
    cp_buf_release(&c->note);
}

/* "3. DELTA", DELTA cut to LABEL_CHARS characters with "…" (the chart
 * cuts a label too long for its column from the left: the value stays). */
static char *label_of(int step, const char *delta)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_printf(&b, "%d. ", step);
    size_t chars = 0;
    const char *p = delta && delta[0] ? delta : "(no change)";
    for (; *p && chars < LABEL_CHARS; chars++) {
        size_t len = 1;
        while (p[len] && ((unsigned char)p[len] & 0xc0) == 0x80)
            len++;
        cp_buf_append(&b, p, len);
        p += len;
    }
    if (*p)
        cp_buf_puts(&b, "\xe2\x80\xa6");
    return cp_buf_status(&b) == CP_OK ? cp_buf_steal(&b) : (cp_buf_release(&b), NULL);
}

static bool charts_init(struct card_charts *c, const struct cp_kb_candidate *k, size_t n)
{
    memset(c, 0, sizeof *c);
    cp_buf_init(&c->note);
    size_t cap = n ? n : 1;
    if (!cp_chart_trajectory_init(&c->traj, cap) || !(c->gain = cp_calloc(cap, sizeof *c->gain)) ||
        !(c->labels = cp_calloc(cap, sizeof *c->labels)))
        return false;
    double best = NAN;
    for (size_t i = 0; i < n; i++) {
        const struct cp_kb_candidate *e = &k[i];
        double ms = e->median_ns / 1e6;
        if (!isfinite(ms) || e->status == CP_STEP_FAILED)
            continue;
        if (e->status == CP_STEP_BASELINE || (e->status == CP_STEP_ACCEPTED && !isfinite(best)))
            best = ms;
        if (e->status == CP_STEP_ACCEPTED)
            best = ms;
        if (e->status == CP_STEP_ACCEPTED || e->status == CP_STEP_REJECTED)
            cp_chart_trajectory_point(&c->traj, e->step, ms, e->status == CP_STEP_ACCEPTED);
        /* one point per step: the best after it */
        if (isfinite(best))
            cp_chart_trajectory_best(&c->traj, e->step, best);
    }
    for (size_t i = 0; i < n; i++) {
        const struct cp_kb_candidate *e = &k[i];
        if (e->status != CP_STEP_ACCEPTED || !isfinite(e->measured_gain))
            continue;
        char pred[32], lo[32], hi[32];
        cp_kb_fmt_pct(pred, e->expected_gain);
        cp_kb_fmt_pct(lo, e->ci_lo);
        cp_kb_fmt_pct(hi, e->ci_hi);
        c->labels[c->ng] = label_of(e->step, e->delta);
        if (!c->labels[c->ng])
            return false;
        c->gain[c->ng++] = 100 * e->measured_gain;
        cp_buf_printf(&c->note, "%sstep %d: 95%% CI [%s, %s], predicted %s", c->ng > 1 ? "; " : "",
                      e->step, lo, hi, pred);
    }
    return cp_buf_status(&c->note) == CP_OK;
}

static void card_section(void *ctx, struct cp_doc *doc, const char *heading)
{
    const struct card_charts *c = ctx;
    if (strncmp(heading, "Effective changes", 17) == 0 && c->ng > 0) {
        struct cp_chart ch = {.kind = CP_CHART_BARS,
                              .title = "Latency each accepted change saved, as measured",
                              .unit = "%",
                              .labels = (const char *const *)c->labels,
                              .n = c->ng,
                              .values = c->gain,
                              .note = c->note.data};
        cp_doc_chart(doc, &ch);
    }
    if (strncmp(heading, "Result", 6) == 0 && c->traj.n > 1) {
        struct cp_chart ch =
            cp_chart_trajectory(&c->traj, "Tuning trajectory: median latency by step");
        cp_doc_chart(doc, &ch);
    }
}

enum cp_status cp_kb_card_write(struct cp_kb *kb, int64_t session_id, const char *path,
                                struct cp_diag *d)
{
    bool md = cp_path_has_suffix(path, ".md");
    if (!md && !cp_path_has_suffix(path, ".html") && !cp_path_has_suffix(path, ".htm") &&
        !cp_path_has_suffix(path, ".pdf"))
        return cp_diag_set(d, CP_ERR_USAGE, "%s: a card is written as .md, .html or .pdf", path);
    struct cp_buf text;
    cp_buf_init(&text);
    struct cp_kb_candidate *k = NULL;
    size_t n = 0;
    struct card_charts c;
    memset(&c, 0, sizeof c);
    cp_buf_init(&c.note);
    enum cp_status st = cp_kb_card_session(kb, session_id, &text, d);
    if (st == CP_OK && md) {
        st = cp_file_write_atomic(path, text.data, text.len, d);
        goto out;
    }
    if (st == CP_OK)
        st = cp_kb_candidate_list(kb, session_id, &k, &n, d);
    if (st == CP_OK && !charts_init(&c, k, n))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (st == CP_OK) {
        struct cp_doc *doc = cp_doc_from_markdown(text.data, NULL, card_section, &c);
        st = doc ? cp_doc_write(doc, path, d) : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        cp_doc_free(doc);
    }
out:
    charts_release(&c);
    cp_kb_candidate_list_free(k, n);
    cp_buf_release(&text);
    return st;
}
