/* Helpers shared by the knowledge base tests (test_kb_*.c): open a
 * knowledge base or expect its open to fail, one value from a query, SQL on
 * a raw connection, run figures as the trace store gives them, and set/get
 * of baselines asserting on the status. Each test file declares its own
 * suite, with cp_t_scratch_setup and cp_t_scratch_close (support/cli.h) as
 * .init and .fini. All static inline, so a file that uses only some of them
 * builds without unused-function warnings. */
#ifndef CP_TEST_KB_TEST_H
#define CP_TEST_KB_TEST_H

#include "knowledge/kb.h"
#include "knowledge/kb_internal.h"
#include "support/cli.h"
#include "support/db.h"

#include <criterion/criterion.h>
#include <sqlite3.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline struct cp_kb *open_kb(const char *path)
{
    struct cp_kb *kb = cp_t_kb(path);
    cr_assert_not_null(kb, "open %s (see stderr)", path ? path : "the default knowledge base");
    return kb;
}

/* Open expecting a failure; returns the diag. */
static inline struct cp_diag open_fails(const char *path, enum cp_status want)
{
    struct cp_kb *kb = (struct cp_kb *)1;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_kb_open(path, &kb, &d);
    cr_assert_eq(st, want, "open %s: status %s, expected %s (%s)", path, cp_status_str(st),
                 cp_status_str(want), d.msg);
    cr_assert_null(kb, "a failed open leaves *kb NULL");
    cr_assert_eq(d.status, want);
    return d;
}

static inline int64_t q_int_db(sqlite3 *db, const char *sql)
{
    int64_t v = 0;
    cr_assert(cp_t_sql_int(db, sql, &v), "%s (see stderr)", sql);
    return v;
}

static inline int64_t q_int(struct cp_kb *kb, const char *sql)
{
    return q_int_db(cp_kb_db(kb), sql);
}

/* The text of a one-value query ("" for SQL NULL). */
static inline char *q_text(struct cp_kb *kb, const char *sql)
{
    char *v = NULL;
    cr_assert(cp_t_sql_text(cp_kb_db(kb), sql, &v), "%s (see stderr)", sql);
    return v ? v : strdup("");
}

/* Run SQL on a separate raw connection (as another program would). */
static inline void raw_exec(const char *path, const char *sql)
{
    cr_assert(cp_t_sql_exec(path, sql), "%s: %s (see stderr)", path, sql);
}

/* Figures as cp_trace_store_run_metrics would give them: n latency
 * samples (base + i*step), kernel time when with_device. Strings are
 * pointers to literals: the struct is never released. */
static inline struct cp_run_metrics metrics(size_t n, uint64_t base, uint64_t step,
                                            bool with_device, uint64_t *lat, uint64_t *dev)
{
    struct cp_run_metrics m;
    memset(&m, 0, sizeof m);
    m.run_id = 3;
    m.kind = (char *)"bench";
    m.created_at = (char *)"2025-01-02T03:04:05Z";
    m.model_path = (char *)"/models/m.om";
    m.model_hash = (char *)"0123456789abcdef0123456789abcdef";
    m.config_id = (char *)"fedcba9876543210";
    m.batch = 4;
    m.threads = 2;
    m.n = n;
    for (size_t i = 0; i < n; i++) {
        lat[i] = base + i * step;
        dev[i] = (base + i * step) / 2;
    }
    m.latency_ns = lat;
    m.device_ns = with_device ? dev : NULL;
    m.weight_bytes = 1000;
    m.arena_bytes = 2000;
    m.peak_bytes = 1500;
    m.peak_rss_bytes = 1u << 30;
    m.precision_loss = NAN;
    return m;
}

static inline int64_t set_ok(struct cp_kb *kb, const char *service, const char *tag,
                             const struct cp_run_metrics *m)
{
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t id = -1;
    enum cp_status st = cp_kb_baseline_set(kb, service, tag, "/traces/t.db", m, false, &id, &d);
    cr_assert_eq(st, CP_OK, "set %s/%s: %s", service, tag ? tag : "(auto)", d.msg);
    cr_assert_gt(id, 0);
    return id;
}

static inline void get_ok(struct cp_kb *kb, const char *service, const char *tag,
                          struct cp_kb_baseline *b)
{
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_kb_baseline_get(kb, service, tag, b, &d);
    cr_assert_eq(st, CP_OK, "get %s/%s: %s", service, tag ? tag : "(latest)", d.msg);
}

static inline struct cp_diag get_fails(struct cp_kb *kb, const char *service, const char *tag,
                                       enum cp_status want)
{
    struct cp_kb_baseline b;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_kb_baseline_get(kb, service, tag, &b, &d);
    cr_assert_eq(st, want, "get %s/%s: %s, expected %s (%s)", service, tag ? tag : "(latest)",
                 cp_status_str(st), cp_status_str(want), d.msg);
    cr_assert_null(b.service, "a failed get leaves the struct empty");
    cr_assert_null(b.m.latency_ns);
    return d;
}

#endif
