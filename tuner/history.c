/* The knowledge base's measured history of the rules: what a rule's
 * change gained when the tuner measured it on similar models on this
 * hardware. It refines the rule's prior, in the tuner's proposals and in
 * `suggest` (tuner/tuner.h). */
#include "tuner/tuner_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void cp_tune_rule_history(struct cp_kb *kb, const struct cp_kb_fingerprint *fp,
                          const struct cp_kb_hardware *hw, const char *rule, double prior,
                          struct cp_tune_rule_history *h)
{
    memset(h, 0, sizeof *h);
    h->mean = NAN;
    h->refined = prior;
    char source[160];
    snprintf(source, sizeof source, "rule:%s", rule ? rule : "");
    struct cp_diag ignored;
    cp_diag_init(&ignored);
    double mean = NAN, sim = 0;
    int count = 0;
    if (!kb ||
        cp_kb_rule_history_near(kb, source, fp, hw, CP_TUNE_HISTORY_MIN_SIMILARITY, &mean, &count,
                                &sim, &ignored) != CP_OK ||
        count <= 0 || !isfinite(mean) || !isfinite(prior))
        return;
    h->runs = count;
    h->mean = mean;
    h->similarity = sim;
    /* the prior counts as one measurement more */
    h->refined = (prior + mean * count) / (1 + count);
}

/* The knowledge base suggest reads: the one named, else the default; one
 * that does not exist is not created. *path NULL: none. */
static enum cp_status kb_to_read(const char *kb_path, char **path, struct cp_diag *d)
{
    *path = NULL;
    char *p = NULL;
    if (kb_path)
        p = cp_strdup(kb_path);
    else if (cp_kb_default_path(&p, d) != CP_OK)
        return d->status;
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (!cp_path_exists(p)) {
        free(p);
        return CP_OK;
    }
    *path = p;
    return CP_OK;
}

enum cp_status cp_tune_history_refine(struct cp_analysis *a, const char *model_path,
                                      const char *kb_path, char *note, size_t note_size,
                                      struct cp_diag *d)
{
    snprintf(note, note_size, "no knowledge base");
    char *path = NULL;
    enum cp_status st = kb_to_read(kb_path, &path, d);
    if (st != CP_OK || !path)
        return st;
    struct cp_kb *kb = NULL;
    if ((st = cp_kb_open(path, &kb, d)) != CP_OK) {
        free(path);
        return st;
    }
    struct cp_kb_fingerprint fp;
    memset(&fp, 0, sizeof fp);
    bool approximate = false;
    struct cp_diag fd;
    cp_diag_init(&fd);
    if (cp_tune_fingerprint_model(kb, model_path, &fp, &approximate, &fd) != CP_OK) {
        snprintf(note, note_size, "%s: the run's model cannot be fingerprinted (%s)", path, fd.msg);
        cp_kb_close(kb);
        free(path);
        return CP_OK;
    }
    struct cp_kb_hardware hw;
    cp_kb_hardware_detect(&hw);
    size_t refined = 0;
    int runs = 0;
    for (size_t i = 0; i < a->n; i++) {
        struct cp_finding *f = &a->findings[i];
        if (f->unclassified)
            continue;
        struct cp_tune_rule_history h;
        cp_tune_rule_history(kb, &fp, &hw, f->rule, f->gain, &h);
        if (h.runs == 0)
            continue;
        f->history_runs = h.runs;
        f->history_gain = h.mean;
        f->history_similarity = h.similarity;
        f->prior_gain = f->gain;
        double shift = h.refined - f->gain;
        f->gain = h.refined;
        f->gain_lo += shift;
        f->gain_hi += shift;
        refined++;
        runs += h.runs;
    }
    cp_analysis_sort(a);
    snprintf(note, note_size,
             "%s: %zu of %zu findings refined by %d measured outcomes of their rules on similar "
             "models (similarity >= %.1f) on this hardware%s",
             path, refined, a->n, runs, CP_TUNE_HISTORY_MIN_SIMILARITY,
             approximate ? " (the model was fingerprinted from its converted graph: similarity "
                           "is approximate)"
                         : "");
    cp_kb_fingerprint_release(&fp);
    cp_kb_close(kb);
    free(path);
    return CP_OK;
}
