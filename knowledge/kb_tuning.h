/*
 * knowledge (tuning): what the closed-loop tuner remembers, in the same
 * kb.sqlite as baselines (schema version 2, docs/kb-schema.md).
 *
 * The pieces, and how they fit:
 *  - a model *fingerprint* (kb_fingerprint.c) describes a model by its
 *    structure, not its weights: op-type histogram, parameter count, FLOPs,
 *    input shapes, which attention/conv/norm/GELU patterns it has, a model
 *    class and a structure hash. cp_kb_similarity compares two of them; it
 *    is what lets a strategy learned on one model be tried first on
 *    another ("transfer").
 *  - a *hardware signature* (CPU model, ISA flags, cores, or an Ascend
 *    soc_version) plus the tool version: gains are only comparable on the
 *    same hardware.
 *  - *sessions* (kb_session.c): one run of `cannprof tune`, keyed by a
 *    resume key so an interrupted session can be found and continued; its
 *    *candidates* (each evaluated config: delta, source, verdict, measured
 *    gain with its interval) and the raw latency samples of each
 *    *measurement*.
 *  - *strategies* (kb_strategy.c): the outcome of every evaluated delta per
 *    model and hardware; cp_kb_query_strategies ranks those that held on
 *    similar models, cp_kb_rule_history gives a rule's observed record.
 *  - *cards* (kb_card.c): a Markdown summary of a session, generated on
 *    demand, never stored.
 *  - *JSON Lines* export/import (kb_jsonl.c): every record with stable
 *    natural keys, so knowledge bases can be merged without duplicates.
 *
 * Everything goes through a `struct cp_kb` (knowledge/kb.h), with the same
 * concurrency rules: WAL, short BEGIN IMMEDIATE write transactions, a busy
 * timeout, so several tuners can share one file. Gains are fractions of
 * latency saved (0.2 = 20% faster; negative = slower); NaN means unknown and
 * is stored as NULL. Strings returned in structs are owned by the struct and
 * freed by the matching release/free function. Errors follow kb.h: messages
 * start with the knowledge base's path; bad input is CP_ERR_INVALID.
 */
#ifndef CP_KNOWLEDGE_KB_TUNING_H
#define CP_KNOWLEDGE_KB_TUNING_H

#include "core/core.h"
#include "core/json.h"
#include "graph/graph.h"
#include "knowledge/kb.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- model fingerprints -------------------------------------------------- */

/* A model's fingerprint. The fixed-size strings are NUL-terminated; the two
 * JSON strings are heap-owned (cp_kb_fingerprint_release). */
struct cp_kb_fingerprint {
    /* XXH3-128 hex of the op types in topological order, the edges between
     * them and the graph input shapes (never the weights): two exports of
     * one architecture with different weights share it. */
    char structure_hash[33];
    /* The source ONNX file's content hash, as the .om records it (32 hex
     * digits; "" when unknown). */
    char source_hash[65];
    char name[128]; /* file stem, e.g. "sd_unet_tiny" */
    /* "unet" (conv and attention), "transformer" (attention, no conv),
     * "cnn" (conv, no attention), "mlp" (MatMul/Gemm, no conv, no
     * attention), "other". */
    char model_class[32];
    int64_t params;          /* elements in initializers */
    double flops;            /* cp_graph_stats: a multiply-add counts 2 */
    int n_nodes;             /* live nodes */
    char *op_histogram_json; /* {"Add":12,"Conv":16,...}, keys sorted */
    char *inputs_json;       /* [{"name":"sample","shape":[1,4,32,32]}], "?" dims as -1 */
    /* Patterns present, decomposed (as exported) or fused (our own ops). */
    bool has_attention, has_conv, has_layernorm, has_groupnorm, has_batchnorm, has_gelu;
};

/* Fingerprint a graph. `g` should be verified and shape-inferred (as after
 * cp_onnx_import + cp_graph_verify + cp_graph_compact + cp_graph_infer);
 * FLOPs count dynamic dimensions as 1. Fingerprint the *source* model (the
 * ONNX), not a converted one, so every candidate of a model shares it.
 * source_hash and name may be NULL (then ""). OUT: *out (release with
 * cp_kb_fingerprint_release; zeroed on failure). Errors: CP_ERR_NOMEM,
 * CP_ERR_INVALID (a cycle). */
enum cp_status cp_kb_fingerprint_graph(const struct cp_graph *g, const char *source_hash,
                                       const char *name, struct cp_kb_fingerprint *out,
                                       struct cp_diag *d);

/* Free the JSON strings; leaves *fp zeroed. NULL ok. */
void cp_kb_fingerprint_release(struct cp_kb_fingerprint *fp);

/* Similarity of two fingerprints in [0, 1]: 1.0 exactly when the structure
 * hashes are equal; otherwise at most 0.99, a weighted mix of the cosine
 * similarity of the log-damped op histograms (0.40), matching pattern flags
 * (0.20), closeness of log FLOPs (0.15) and of log params (0.15) and the
 * same model class (0.10). Definition: docs/kb-schema.md. Symmetric. */
double cp_kb_similarity(const struct cp_kb_fingerprint *a, const struct cp_kb_fingerprint *b);

/* ---- hardware ------------------------------------------------------------ */

struct cp_kb_hardware {
    char signature[17];    /* 16 hex: hash of cpu_model, isa, cores, soc_version */
    char cpu_model[128];   /* /proc/cpuinfo "model name" */
    char isa[256];         /* the flags that matter, space separated, fixed order */
    int cores;             /* online processors */
    char soc_version[32];  /* "cpu" for the CPU target, else the Ascend soc_version */
    char tool_version[32]; /* CP_VERSION_STRING; not part of the signature */
};

/* Describe this machine for the CPU target (soc_version "cpu"). Never
 * fails: what cannot be read stays "" / 0. */
void cp_kb_hardware_detect(struct cp_kb_hardware *out);

/* Recompute hw->signature from its other fields (after changing
 * soc_version for an Ascend target, say). */
void cp_kb_hardware_sign(struct cp_kb_hardware *hw);

/* ---- models and hardware rows ------------------------------------------- */

/* Insert the model or find it, keyed by (structure_hash, source_hash); an
 * existing row's name and figures are refreshed. OUT: *model_id. */
enum cp_status cp_kb_model_upsert(struct cp_kb *kb, const struct cp_kb_fingerprint *fp,
                                  int64_t *model_id, struct cp_diag *d);

/* Read a model's fingerprint back. No such id: CP_ERR_INVALID.
 * OUT: *out (cp_kb_fingerprint_release). */
enum cp_status cp_kb_model_get(struct cp_kb *kb, int64_t model_id, struct cp_kb_fingerprint *out,
                               struct cp_diag *d);

/* The most recently updated model recorded with this source hash (the
 * ONNX content hash a .om records), for a .om whose source file is gone.
 * OUT: *out (cp_kb_fingerprint_release; zeroed when not found), *found. */
enum cp_status cp_kb_model_find_source(struct cp_kb *kb, const char *source_hash,
                                       struct cp_kb_fingerprint *out, bool *found,
                                       struct cp_diag *d);

/* Insert or find the hardware row, keyed by signature (tool_version is
 * refreshed). OUT: *hw_id. */
enum cp_status cp_kb_hardware_upsert(struct cp_kb *kb, const struct cp_kb_hardware *hw,
                                     int64_t *hw_id, struct cp_diag *d);

/* Read a hardware row. No such id: CP_ERR_INVALID. */
enum cp_status cp_kb_hardware_get(struct cp_kb *kb, int64_t hw_id, struct cp_kb_hardware *out,
                                  struct cp_diag *d);

/* ---- sessions ------------------------------------------------------------ */

/* One tuning session. On read every string is owned by the struct
 * (cp_kb_session_release); NULL strings read back as NULL. */
struct cp_kb_session {
    int64_t id;
    char *uid; /* 32 hex, globally unique (export key); made by begin when NULL */
    char *key; /* resume key: built by the tuner from source hash + target + constraints +
                  hardware + budget */
    int64_t model_id, hw_id;
    char *model_path;
    char *target;                  /* "cpu", "ascend" */
    char *constraints;             /* as given, e.g. "precision_loss<=1%,memory<=2GiB" */
    char *status;                  /* "running", "interrupted", "done" */
    char *created_at, *updated_at; /* filled on read */
    char *baseline_config_json;
    char *best_config_json;
    int64_t best_candidate_id; /* 0: none */
    int budget;
    int evaluations;
    double baseline_median_ns, best_median_ns; /* NaN unknown */
    char *out_dir;
    char *stop_reason;
    /* Filled on read only: */
    char *model_name;   /* the model's fingerprint name */
    char *hw_signature; /* the hardware's signature */
};

/* Start a session (key, status required; created_at = updated_at = now).
 * OUT: *id. */
enum cp_status cp_kb_session_begin(struct cp_kb *kb, const struct cp_kb_session *s, int64_t *id,
                                   struct cp_diag *d);

/* The most recent session with this key (any status). OUT: *out (release;
 * zeroed when not found), *found. */
enum cp_status cp_kb_session_find(struct cp_kb *kb, const char *key, struct cp_kb_session *out,
                                  bool *found, struct cp_diag *d);

/* Read a session. No such id: CP_ERR_INVALID naming it. OUT: *out. */
enum cp_status cp_kb_session_get(struct cp_kb *kb, int64_t id, struct cp_kb_session *out,
                                 struct cp_diag *d);

/* Update session s->id from *s: best_config_json, best_candidate_id,
 * best_median_ns, baseline_median_ns, evaluations and stop_reason are
 * written as given (NULL / NaN / 0 clear them), status,
 * baseline_config_json and out_dir only when not NULL; updated_at = now.
 * Pass a struct read back with cp_kb_session_get and changed. No such
 * session: CP_ERR_INVALID. */
enum cp_status cp_kb_session_update(struct cp_kb *kb, const struct cp_kb_session *s,
                                    struct cp_diag *d);

/* All sessions, oldest first. OUT: *out (cp_kb_session_list_free), *n. */
enum cp_status cp_kb_session_list(struct cp_kb *kb, struct cp_kb_session **out, size_t *n,
                                  struct cp_diag *d);
void cp_kb_session_release(struct cp_kb_session *s); /* NULL ok; leaves it zeroed */
void cp_kb_session_list_free(struct cp_kb_session *s, size_t n);

/* ---- candidates and measurements ---------------------------------------- */

/* What became of a tuning step. Stored by name (cp_step_status_name); a
 * name the table does not know, in the knowledge base or in an import, is
 * refused as corrupt. */
enum cp_step_status {
    CP_STEP_BASELINE = 0, /* step 0: the model as given */
    CP_STEP_ACCEPTED,     /* significantly better, constraints hold: the new best */
    CP_STEP_REJECTED,     /* measured and not better, or a constraint broken */
    CP_STEP_FAILED,       /* could not be converted, run or measured */
    CP_STEP_STATUS_COUNT
};

/* "baseline", "accepted", "rejected", "failed"; "?" out of range. */
const char *cp_step_status_name(enum cp_step_status s);
/* The status a name stands for; false for any other text (NULL too). */
bool cp_step_status_parse(const char *name, enum cp_step_status *out);

/* One evaluated candidate. On read strings are owned by the list. */
struct cp_kb_candidate {
    int64_t id, session_id;
    int step;     /* 0 = the baseline */
    char *delta;  /* canonical change text, e.g. "precision_mode=allow_mix_precision_bf16
                     switch:FlashAttentionFusionPass=on" ("" for the baseline) */
    char *source; /* "baseline", "rule:<name>", "kb", "exhaustive", ... */
    char *config_json, *config_id, *om_path, *trace_path;
    enum cp_step_status status;
    char *reason; /* why, one line */
    /* Fractions of latency saved (0.2 = 20% faster); p the test's p-value.
     * NaN unknown (stored NULL). */
    double expected_gain, measured_gain, ci_lo, ci_hi, p;
    double precision_loss; /* percent; NaN unknown */
    uint64_t memory_bytes;
    double median_ns;  /* NaN unknown */
    double throughput; /* items/s; NaN unknown */
    char *created_at;  /* filled on read; on add: now unless given */
};

/* Record a candidate (session_id required). OUT: *id. */
enum cp_status cp_kb_candidate_add(struct cp_kb *kb, const struct cp_kb_candidate *c, int64_t *id,
                                   struct cp_diag *d);

/* A session's candidates ordered by step, then id. OUT: *out
 * (cp_kb_candidate_list_free), *n. */
enum cp_status cp_kb_candidate_list(struct cp_kb *kb, int64_t session_id,
                                    struct cp_kb_candidate **out, size_t *n, struct cp_diag *d);
void cp_kb_candidate_list_free(struct cp_kb_candidate *c, size_t n);

/* Raw samples (nanoseconds) of one side of a candidate's measurement: role
 * "a" = the current best, "b" = the candidate (any short name is
 * accepted). Recording a role again replaces it. */
enum cp_status cp_kb_measurement_add(struct cp_kb *kb, int64_t candidate_id, const char *role,
                                     const uint64_t *ns, size_t n, struct cp_diag *d);

/* Read them back. Not recorded: CP_ERR_INVALID. OUT: *ns (caller frees), *n. */
enum cp_status cp_kb_measurement_get(struct cp_kb *kb, int64_t candidate_id, const char *role,
                                     uint64_t **ns, size_t *n, struct cp_diag *d);

/* ---- one tuning step, atomically ----------------------------------------- */

/* What one evaluated candidate leaves in the knowledge base. */
struct cp_kb_step {
    const struct cp_kb_candidate *candidate; /* session_id and status required */
    /* The raw samples of both sides of its measurement, n each: "a" the
     * current best, "b" the candidate. n 0: it was not measured (the
     * baseline, a failed candidate). */
    const uint64_t *a_ns, *b_ns;
    size_t n;
    /* Whether to record the outcome of the candidate's delta on the model
     * and hardware (cp_kb_strategy_record with the candidate's session,
     * delta and measured_gain; model_id, hw_id and a delta required). */
    bool record_strategy;
    int64_t model_id, hw_id;
    bool held; /* the delta was accepted */
};

/* Record one tuning step in ONE write transaction: the candidate row, its
 * measurements and its strategy outcome are all written or none is, so a
 * tuner that crashes or fails half-way never leaves a candidate without
 * its samples (or an outcome without its candidate). Arguments are checked
 * (and samples encoded) before the transaction starts. A session, model
 * or hardware id that does not exist is refused at commit (foreign keys,
 * CP_ERR_INVALID). OUT: *candidate_id (0 on failure). */
enum cp_status cp_kb_step_record(struct cp_kb *kb, const struct cp_kb_step *s,
                                 int64_t *candidate_id, struct cp_diag *d);

/* ---- strategies ---------------------------------------------------------- */

/* Record one evaluated delta's outcome on a model and hardware (held =
 * accepted). session_id 0: none. Recording the same (session, delta) again
 * replaces the earlier outcome. `gain` NaN when it was not measured. */
enum cp_status cp_kb_strategy_record(struct cp_kb *kb, int64_t model_id, int64_t hw_id,
                                     int64_t session_id, const char *delta, double gain, bool held,
                                     struct cp_diag *d);

/* A strategy that held on models similar to the one asked about. */
struct cp_kb_strategy_hit {
    char *delta;
    double mean_gain, sd_gain; /* over the outcomes where it held (sd 0 for one) */
    int count;                 /* times it held */
    int tried;                 /* times it was evaluated on those models */
    double similarity;         /* best similarity of a model it held on */
    double score;              /* the ranking key: similarity * mean_gain * count / tried */
    char *models;              /* comma-separated names of the models it held on */
};

/* Strategies that held on models with similarity >= min_sim to `fp`, on the
 * hardware with hw's signature (hw NULL: any hardware), best first by
 * score (ties: more holds, then delta text). exclude_self leaves out
 * outcomes on models with fp's structure hash. limit 0: all.
 * OUT: *out (cp_kb_strategy_hits_free), *n. */
enum cp_status cp_kb_query_strategies(struct cp_kb *kb, const struct cp_kb_fingerprint *fp,
                                      const struct cp_kb_hardware *hw, double min_sim,
                                      bool exclude_self, size_t limit,
                                      struct cp_kb_strategy_hit **out, size_t *n,
                                      struct cp_diag *d);
void cp_kb_strategy_hits_free(struct cp_kb_strategy_hit *h, size_t n);

/* A rule's record, for refining its prior: over all candidates whose source
 * is `source` ("rule:x") and whose measured_gain is known, the mean gain and
 * how many there were (0 and NaN when none). */
enum cp_status cp_kb_rule_history(struct cp_kb *kb, const char *source, double *mean_gain,
                                  int *count, struct cp_diag *d);

/* The same record conditioned on the model and the hardware: over the
 * candidates of `source` measured in sessions on hardware with hw's
 * signature (NULL: any) whose model has similarity >= min_sim to fp, the
 * mean gain weighted by that similarity, how many there were, and the
 * largest similarity among them (0, NaN, 0 when none). */
enum cp_status cp_kb_rule_history_near(struct cp_kb *kb, const char *source,
                                       const struct cp_kb_fingerprint *fp,
                                       const struct cp_kb_hardware *hw, double min_sim,
                                       double *mean_gain, int *count, double *best_sim,
                                       struct cp_diag *d);

/* ---- cards --------------------------------------------------------------- */

/* Append a Markdown card for a session to `out`: "## Scenario" (model,
 * class, hardware, target, constraints), "## Core bottlenecks" (sources and
 * reasons of accepted steps), "## Effective changes" (accepted deltas with
 * measured gain and CI), "## Result" (latency ↓x%, throughput ↑y%, memory,
 * precision, the best config's convert command when recorded). No such
 * session: CP_ERR_INVALID. */
enum cp_status cp_kb_card_session(struct cp_kb *kb, int64_t session_id, struct cp_buf *out,
                                  struct cp_diag *d);

/* The card of the latest "done" session (else the latest of any status) of
 * the model with fp's structure hash (and source hash when set). None:
 * CP_ERR_INVALID naming the model. */
enum cp_status cp_kb_card_model(struct cp_kb *kb, const struct cp_kb_fingerprint *fp,
                                struct cp_buf *out, struct cp_diag *d);

/* That session's id, the one cp_kb_card_model draws. */
enum cp_status cp_kb_card_find_session(struct cp_kb *kb, const struct cp_kb_fingerprint *fp,
                                       int64_t *session_id, struct cp_diag *d);

/* The card of a session written to `path` by its extension: .md the
 * Markdown as it is; .html or .pdf the same text as a document
 * (report/doc.h) with two charts, the latency of every candidate by step
 * with the best so far under "Result", and under "Effective changes" the
 * latency each accepted change saved as measured beside what was
 * predicted. Errors: no such session (CP_ERR_INVALID), another extension
 * (CP_ERR_USAGE, naming the ones taken), writing (CP_ERR_IO). */
enum cp_status cp_kb_card_write(struct cp_kb *kb, int64_t session_id, const char *path,
                                struct cp_diag *d);

/* ---- sharing: JSON Lines ------------------------------------------------- */

/* Append the whole knowledge base to `out` as JSON Lines: one object per
 * line with a "type" ("model", "hardware", "baseline", "validation",
 * "session", "candidate", "measurement", "strategy") and natural keys
 * instead of row ids (docs/kb-schema.md), models and hardware first. */
enum cp_status cp_kb_export_jsonl(struct cp_kb *kb, struct cp_buf *out, struct cp_diag *d);
/* The same, written to `path` atomically (a reader never sees half a file);
 * a failure to write is CP_ERR_WRITE. */
enum cp_status cp_kb_export_jsonl_file(struct cp_kb *kb, const char *path, struct cp_diag *d);

/* Merge a JSON Lines file into the knowledge base, in one transaction:
 * records whose natural key is already present are skipped, so importing
 * twice adds nothing. Bad input is CP_ERR_PARSE / CP_ERR_INVALID naming
 * path:line (nothing is imported then). OUT: *imported (records added; may
 * be NULL). */
enum cp_status cp_kb_import_jsonl(struct cp_kb *kb, const char *path, size_t *imported,
                                  struct cp_diag *d);

/* ---- renderings (kb_render.c): what `cannprof kb` prints ------------------ */

/* Latency change of a session's best over its baseline in percent
 * (negative: faster); NaN when either is unknown. */
double cp_kb_session_delta_pct(const struct cp_kb_session *s);

/* The JSON of a fingerprint; of the strategies a query found for it (hw
 * NULL: any hardware); of a session (full: with its configs and output
 * folder); of every session of a list; of a session with its candidates.
 * NULL when out of memory. */
json_t *cp_kb_fingerprint_json(const struct cp_kb_fingerprint *fp);
json_t *cp_kb_strategies_json(const struct cp_kb_fingerprint *fp, const struct cp_kb_hardware *hw,
                              double min_sim, const struct cp_kb_strategy_hit *h, size_t n);
json_t *cp_kb_session_json(const struct cp_kb_session *s, bool full);
json_t *cp_kb_sessions_json(const struct cp_kb_session *s, size_t n);
json_t *cp_kb_session_detail_json(const struct cp_kb_session *s, const struct cp_kb_candidate *c,
                                  size_t n);

/* The same as text tables, appended to b. */
void cp_kb_render_strategies(struct cp_buf *b, const struct cp_kb_fingerprint *fp,
                             const struct cp_kb_hardware *hw, double min_sim,
                             const struct cp_kb_strategy_hit *h, size_t n);
void cp_kb_render_sessions(struct cp_buf *b, const struct cp_kb *kb, const struct cp_kb_session *s,
                           size_t n);
void cp_kb_render_session(struct cp_buf *b, const struct cp_kb_session *s,
                          const struct cp_kb_candidate *c, size_t n);

#endif
