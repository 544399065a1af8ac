/*
 * knowledge: what cannprof remembers between runs, in one SQLite file.
 *
 * A `struct cp_kb` is a handle on the knowledge base (`kb.sqlite`, schema in
 * docs/kb-schema.md). This header holds the file itself, per-service
 * *baselines* (the figures of one benchmark run, copied out of its trace so
 * the baseline outlives the trace file) and the *validations* made against
 * them (when, against which baseline, the figures, the verdict, whether an
 * alert went out). What the tuner records (models with fingerprints,
 * hardware, sessions, candidates, measurements, strategies, cards, JSON
 * Lines export/import) is in knowledge/kb_tuning.h, on the same handle.
 *
 * The file carries its own identity and version: PRAGMA application_id is
 * CP_KB_APPLICATION_ID ("CPKB"), so a trace store or any other SQLite file
 * given by mistake is refused with a message saying what it is; PRAGMA
 * user_version is the schema version, brought up to CP_KB_SCHEMA_VERSION by
 * an ordered list of migrations (kb.c), each applied in its own transaction.
 * A newer file is refused (CP_ERR_VERSION), never guessed at.
 *
 * Several processes may share one file (a CI job validating while a person
 * sets a baseline): the journal is WAL, every write is a short
 * BEGIN IMMEDIATE transaction, and a busy timeout (CP_KB_BUSY_TIMEOUT_MS)
 * makes a writer wait for another rather than fail. A handle belongs to one
 * thread at a time. Everything above this header reaches the file only
 * through these functions (and cp_kb_db for later KB modules), so a server
 * database can stand in for SQLite later.
 *
 * Rows that point at others (a candidate at its session, samples at their
 * candidate, ...) are foreign keys, enforced on every connection and
 * checked when a write transaction commits (docs/kb-schema.md, version 4).
 *
 * Errors: every message starts with the knowledge base's path. Bad input
 * (an unknown service or tag, a duplicate tag, a file that is not a
 * knowledge base, a row that would point at a missing one) is
 * CP_ERR_INVALID; a damaged record CP_ERR_CORRUPT; a
 * newer schema CP_ERR_VERSION; an environment failure (no home directory, a
 * folder that cannot be created, SQLite failing) CP_ERR_INTERNAL or
 * CP_ERR_DB, which the CLI reports with exit code 3.
 */
#ifndef CP_KNOWLEDGE_KB_H
#define CP_KNOWLEDGE_KB_H

#include "core/core.h"
#include "trace/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* PRAGMA application_id of every knowledge base: the ASCII bytes "CPKB". */
#define CP_KB_APPLICATION_ID 0x43504B42

/* The schema version this cannprof writes and reads (PRAGMA user_version). */
#define CP_KB_SCHEMA_VERSION 4

/* How long a writer waits for another process holding the file. */
#define CP_KB_BUSY_TIMEOUT_MS 10000

/* Longest service name and tag, in bytes. */
#define CP_KB_MAX_SERVICE 128
#define CP_KB_MAX_TAG     64

struct cp_kb; /* opaque */

/* ---- the file ------------------------------------------------------------ */

/* The default location: $XDG_DATA_HOME/cannprof/kb.sqlite when
 * XDG_DATA_HOME is set to an absolute path, else
 * $HOME/.local/share/cannprof/kb.sqlite. CP_ERR_INTERNAL when neither is
 * usable. OUT: *out (caller frees), NULL on failure. */
enum cp_status cp_kb_default_path(char **out, struct cp_diag *d);

/* Open the knowledge base at `path` (NULL: cp_kb_default_path), creating the
 * file and its missing parent folders when needed, and migrate it to
 * CP_KB_SCHEMA_VERSION. Errors: a folder that cannot be created is
 * CP_ERR_INTERNAL; a directory, a non-SQLite file, a trace store or another
 * program's SQLite database is CP_ERR_INVALID (the file is left untouched);
 * a newer schema is CP_ERR_VERSION; SQLite failures are CP_ERR_DB.
 * OUT: *kb (close with cp_kb_close), NULL on failure. */
enum cp_status cp_kb_open(const char *path, struct cp_kb **kb, struct cp_diag *d);

/* Close the handle. NULL is a no-op. */
void cp_kb_close(struct cp_kb *kb);

/* The path the knowledge base was opened at (owned by the handle). */
const char *cp_kb_path(const struct cp_kb *kb);

/* The sqlite3 handle, for later KB modules that own their own tables.
 * Owned by the handle. */
void *cp_kb_db(struct cp_kb *kb);

/* Check a service name: non-empty, at most CP_KB_MAX_SERVICE bytes, no
 * control characters (bytes >= 0x80 are accepted, for UTF-8). CP_ERR_INVALID
 * naming the problem otherwise. */
enum cp_status cp_kb_check_service(const char *service, struct cp_diag *d);

/* Check a tag: as a service name but at most CP_KB_MAX_TAG bytes, and not
 * "latest" (which names the most recent baseline). */
enum cp_status cp_kb_check_tag(const char *tag, struct cp_diag *d);

/* ---- baselines ----------------------------------------------------------- */

/* A stored baseline. All strings and arrays are owned by the struct
 * (cp_kb_baseline_release). */
struct cp_kb_baseline {
    int64_t id; /* never reused, even after removal */
    char *service;
    char *tag;
    char *created_at; /* when the baseline was set, UTC "YYYY-MM-DDTHH:MM:SSZ" */
    char *trace_path; /* the trace it came from (absolute when it could be resolved) */
    /* The figures, copied from the trace at `set` time: run_id, kind and
     * created_at of the source run, model, config, batch, threads, samples,
     * memory, precision_loss (NaN when absent), and the interference probe
     * of each iteration (m.probe_ns, NULL when the run had none or the
     * baseline predates schema version 3). In lists latency_ns, device_ns
     * and probe_ns are NULL (m.n still says how many there are). */
    struct cp_run_metrics m;
    /* Of m.latency_ns, computed at `set` time (also filled in lists). */
    double mean_ns, median_ns, p99_ns;
};

/* Store the figures `m` (m->n >= 1 latency samples; m->device_ns and
 * m->probe_ns, when not NULL, n values each) as the baseline (service, tag)
 * and say where they came from (trace_path, may be NULL).
 * tag NULL: an automatic tag "b1", "b2", ... one past the highest "b<N>" the
 * service was ever given or has used (in baselines or validations), so an
 * automatic tag is never given out twice, even after removal.
 * An existing (service, tag) is CP_ERR_INVALID unless `replace`, which
 * removes the old one first (its validations keep their tag text). The new
 * baseline becomes the service's latest. One transaction.
 * OUT: *id (may be NULL). */
enum cp_status cp_kb_baseline_set(struct cp_kb *kb, const char *service, const char *tag,
                                  const char *trace_path, const struct cp_run_metrics *m,
                                  bool replace, int64_t *id, struct cp_diag *d);

/* Read one baseline with its samples. tag NULL or "latest": the service's
 * most recently set. Not found: CP_ERR_INVALID with a message naming the
 * service and listing its tags (or saying it has none, with the services
 * that do). A sample array (latency, kernel time, probe) whose size does
 * not match the stored count is CP_ERR_CORRUPT naming the baseline. OUT: *out
 * (cp_kb_baseline_release; zeroed on failure). */
enum cp_status cp_kb_baseline_get(struct cp_kb *kb, const char *service, const char *tag,
                                  struct cp_kb_baseline *out, struct cp_diag *d);
void cp_kb_baseline_release(struct cp_kb_baseline *b); /* NULL ok; leaves it zeroed */

/* Read the baseline with this id, as cp_kb_baseline_get (e.g. to show what
 * cp_kb_baseline_set stored). No such id: CP_ERR_INVALID. */
enum cp_status cp_kb_baseline_get_id(struct cp_kb *kb, int64_t id, struct cp_kb_baseline *out,
                                     struct cp_diag *d);

/* All baselines (service NULL) or those of one service, ordered by service
 * then age (oldest first), without their samples. A service without
 * baselines gives an empty list, not an error. OUT: *out
 * (cp_kb_baseline_list_free), *n. */
enum cp_status cp_kb_baseline_list(struct cp_kb *kb, const char *service,
                                   struct cp_kb_baseline **out, size_t *n, struct cp_diag *d);
void cp_kb_baseline_list_free(struct cp_kb_baseline *b, size_t n);

/* Remove the baseline (service, tag): the exact tag ("latest" is refused,
 * to keep removal deliberate). Not found: CP_ERR_INVALID as for get.
 * Validations that referred to it are kept, with its tag text. */
enum cp_status cp_kb_baseline_remove(struct cp_kb *kb, const char *service, const char *tag,
                                     struct cp_diag *d);

/* The names of the services that have baselines, sorted. OUT: *out (an
 * array of *n strings; free each and the array), *n. */
enum cp_status cp_kb_service_list(struct cp_kb *kb, char ***out, size_t *n, struct cp_diag *d);

/* ---- validations --------------------------------------------------------- */

/* One validation of a run against a baseline. On record, created_at and id
 * are ignored (the time is now); on read every string is owned by the array
 * it came in (cp_kb_validation_list_free). */
struct cp_kb_validation {
    int64_t id;
    const char *created_at; /* UTC "YYYY-MM-DDTHH:MM:SSZ"; filled on read */
    const char *service;
    int64_t baseline_id;      /* may refer to a baseline removed since */
    const char *baseline_tag; /* kept as text, so it survives removal */
    const char *trace_path;   /* the candidate's trace; may be NULL */
    const char *verdict;      /* overall: "regressed", "improved", "unchanged", ... */
    const char *figures_json; /* per-metric figures as JSON; may be NULL */
    int exit_code;
    bool alert_attempted;
    bool alert_delivered;
    const char *alert_error; /* may be NULL */
};

/* Record a validation (service and verdict required; service checked as by
 * cp_kb_check_service). OUT: *id (may be NULL). */
enum cp_status cp_kb_record_validation(struct cp_kb *kb, const struct cp_kb_validation *v,
                                       int64_t *id, struct cp_diag *d);

/* The most recent `limit` validations of a service (limit 0: all), newest
 * first. OUT: *out (cp_kb_validation_list_free), *n. */
enum cp_status cp_kb_validation_list(struct cp_kb *kb, const char *service, size_t limit,
                                     struct cp_kb_validation **out, size_t *n, struct cp_diag *d);
void cp_kb_validation_list_free(struct cp_kb_validation *v, size_t n);

#endif
