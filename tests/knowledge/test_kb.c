/* knowledge base: the file (creation with WAL, identity, version and
 * migration checks, default path, refusal of trace stores, foreign and
 * newer files), baselines (set, get, latest, list, remove, automatic and
 * duplicate tags, replace, exact sample round trip, damaged samples, the
 * interference probe through set/get, export/import and the migration from
 * schema version 2) and validations (recorded, listed newest first, kept
 * after their baseline is removed), and two processes writing one file at
 * the same time. */
#include "knowledge/kb.h"
#include "knowledge/kb_internal.h"
#include "knowledge/kb_tuning.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <sqlite3.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(kb, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* ---- helpers ------------------------------------------------------------- */

static struct cp_kb *open_kb(const char *path)
{
    struct cp_kb *kb = cp_t_kb(path);
    cr_assert_not_null(kb, "open %s (see stderr)", path);
    return kb;
}

/* Open expecting a failure; returns the diag. */
static struct cp_diag open_fails(const char *path, enum cp_status want)
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

static int64_t q_int_db(sqlite3 *db, const char *sql)
{
    int64_t v = 0;
    cr_assert(cp_t_sql_int(db, sql, &v), "%s (see stderr)", sql);
    return v;
}

static int64_t q_int(struct cp_kb *kb, const char *sql)
{
    return q_int_db(cp_kb_db(kb), sql);
}

/* The text of a one-value query ("" for SQL NULL). */
static char *q_text(struct cp_kb *kb, const char *sql)
{
    char *v = NULL;
    cr_assert(cp_t_sql_text(cp_kb_db(kb), sql, &v), "%s (see stderr)", sql);
    return v ? v : strdup("");
}

/* Run SQL on a separate raw connection (as another program would). */
static void raw_exec(const char *path, const char *sql)
{
    cr_assert(cp_t_sql_exec(path, sql), "%s: %s (see stderr)", path, sql);
}

/* Figures as cp_trace_store_run_metrics would give them: n latency
 * samples (base + i*step), kernel time when with_device. Strings are
 * pointers to literals: the struct is never released. */
static struct cp_run_metrics metrics(size_t n, uint64_t base, uint64_t step, bool with_device,
                                     uint64_t *lat, uint64_t *dev)
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

static int64_t set_ok(struct cp_kb *kb, const char *service, const char *tag,
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

static void get_ok(struct cp_kb *kb, const char *service, const char *tag, struct cp_kb_baseline *b)
{
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_kb_baseline_get(kb, service, tag, b, &d);
    cr_assert_eq(st, CP_OK, "get %s/%s: %s", service, tag ? tag : "(latest)", d.msg);
}

static struct cp_diag get_fails(struct cp_kb *kb, const char *service, const char *tag,
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

/* ---- the file ------------------------------------------------------------ */

Test(kb, open_creates_folders_schema_and_wal)
{
    char *path = cp_t_path("a/b/c/kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    cr_assert_str_eq(cp_kb_path(kb), path);
    cr_assert(cp_path_exists(path));
    cr_assert_eq(q_int(kb, "PRAGMA application_id"), CP_KB_APPLICATION_ID);
    cr_assert_eq(q_int(kb, "PRAGMA application_id"), 0x43504B42, "the bytes \"CPKB\"");
    cr_assert_eq(q_int(kb, "PRAGMA user_version"), CP_KB_SCHEMA_VERSION);
    char *mode = q_text(kb, "PRAGMA journal_mode");
    cr_assert_str_eq(mode, "wal");
    free(mode);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                           "('meta', 'schema_history', 'baselines', 'services', 'validations')"),
                 5);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM schema_history"), CP_KB_SCHEMA_VERSION);
    char *v = q_text(kb, "SELECT value FROM meta WHERE key = 'schema_version'");
    cr_assert_eq(atoi(v), CP_KB_SCHEMA_VERSION);
    free(v);
    cp_kb_close(kb);
    free(path);
}

Test(kb, reopen_keeps_data_and_does_not_migrate_again)
{
    char *path = cp_t_path("kb.sqlite");
    uint64_t lat[8], dev[8];
    struct cp_run_metrics m = metrics(8, 1000, 10, true, lat, dev);
    struct cp_kb *kb = open_kb(path);
    int64_t id = set_ok(kb, "api", "v1", &m);
    cp_kb_close(kb);
    kb = open_kb(path);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM schema_history"), CP_KB_SCHEMA_VERSION);
    struct cp_kb_baseline b;
    get_ok(kb, "api", "v1", &b);
    cr_assert_eq(b.id, id);
    cr_assert_eq(b.m.n, 8);
    cp_kb_baseline_release(&b);
    cp_kb_close(kb);
    cp_kb_close(NULL);
    free(path);
}

Test(kb, refuses_a_trace_store)
{
    char *path = cp_t_path("t.db");
    struct cp_trace_store *s = cp_t_trace_store(path, NULL, NULL);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    cp_trace_store_close(s);
    d = open_fails(path, CP_ERR_INVALID);
    cr_assert(strstr(d.msg, path) && strstr(d.msg, "trace store"), "%s", d.msg);
    cr_assert(strstr(d.msg, "not a knowledge base"), "%s", d.msg);
    /* Still a valid trace store. */
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open_ro(path, &s, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    free(path);
}

Test(kb, refuses_a_foreign_sqlite_database_and_leaves_it_untouched)
{
    char *path = cp_t_path("other.sqlite");
    raw_exec(path, "CREATE TABLE users(id INTEGER); INSERT INTO users VALUES (7);");
    struct cp_diag d = open_fails(path, CP_ERR_INVALID);
    cr_assert(strstr(d.msg, path) && strstr(d.msg, "not a cannprof knowledge base"), "%s", d.msg);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(q_int_db(db, "PRAGMA application_id"), 0);
    cr_assert_eq(q_int_db(db, "SELECT count(*) FROM sqlite_master"), 1);
    cr_assert_eq(q_int_db(db, "SELECT id FROM users"), 7);
    sqlite3_close(db);

    /* Another program's application_id, even with no tables. */
    char *tagged = cp_t_path("tagged.sqlite");
    raw_exec(tagged, "PRAGMA application_id = 1234;");
    d = open_fails(tagged, CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "0x000004d2"), "%s", d.msg);
    free(tagged);
    free(path);
}

Test(kb, refuses_a_file_that_is_not_sqlite_and_a_directory)
{
    char *path = cp_t_path("notes.txt");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("these are not the droids\n", f);
    fclose(f);
    struct cp_diag d = open_fails(path, CP_ERR_INVALID);
    cr_assert(strstr(d.msg, path) && strstr(d.msg, "not a SQLite file"), "%s", d.msg);
    d = open_fails(cp_t_dir, CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "is a directory"), "%s", d.msg);
    free(path);
}

Test(kb, refuses_a_newer_schema_version)
{
    char *path = cp_t_path("kb.sqlite");
    cp_kb_close(open_kb(path));
    raw_exec(path, "PRAGMA user_version = 99;");
    struct cp_diag d = open_fails(path, CP_ERR_VERSION);
    cr_assert(strstr(d.msg, path) && strstr(d.msg, "99") && strstr(d.msg, "upgrade"), "%s", d.msg);
    free(path);
}

Test(kb, an_empty_file_becomes_a_knowledge_base)
{
    char *path = cp_t_path("empty.sqlite");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fclose(f);
    struct cp_kb *kb = open_kb(path);
    cr_assert_eq(q_int(kb, "PRAGMA user_version"), CP_KB_SCHEMA_VERSION);
    cp_kb_close(kb);
    free(path);
}

Test(kb, a_folder_that_cannot_be_created_is_an_environment_error)
{
    char *file = cp_t_path("plain");
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fclose(f);
    char *path = cp_t_path("plain/sub/kb.sqlite");
    struct cp_diag d = open_fails(path, CP_ERR_INTERNAL);
    cr_assert(strstr(d.msg, "cannot create the folder"), "%s", d.msg);
    cr_assert_eq(cp_status_exit_code(d.status), 3);
    free(path);
    free(file);
}

Test(kb, default_path_follows_xdg_data_home_then_home)
{
    struct cp_diag d;
    cp_diag_init(&d);
    char *p = NULL;
    setenv("XDG_DATA_HOME", "/data/x", 1);
    setenv("HOME", "/home/u", 1);
    cr_assert_eq(cp_kb_default_path(&p, &d), CP_OK);
    cr_assert_str_eq(p, "/data/x/cannprof/kb.sqlite");
    free(p);
    setenv("XDG_DATA_HOME", "relative/ignored", 1);
    cr_assert_eq(cp_kb_default_path(&p, &d), CP_OK);
    cr_assert_str_eq(p, "/home/u/.local/share/cannprof/kb.sqlite");
    free(p);
    unsetenv("XDG_DATA_HOME");
    cr_assert_eq(cp_kb_default_path(&p, &d), CP_OK);
    cr_assert_str_eq(p, "/home/u/.local/share/cannprof/kb.sqlite");
    free(p);
    unsetenv("HOME");
    cr_assert_eq(cp_kb_default_path(&p, &d), CP_ERR_INTERNAL);
    cr_assert_null(p);
    cr_assert(strstr(d.msg, "--kb"), "%s", d.msg);
}

Test(kb, open_with_null_uses_the_default_path)
{
    char *xdg = cp_t_path("xdg");
    setenv("XDG_DATA_HOME", xdg, 1);
    struct cp_kb *kb = open_kb(NULL);
    char *want = cp_t_path("xdg/cannprof/kb.sqlite");
    cr_assert_str_eq(cp_kb_path(kb), want);
    cp_kb_close(kb);
    cr_assert(cp_path_exists(want));
    struct stat sb;
    cr_assert_eq(stat(xdg, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0700, "XDG folders are created private");
    free(want);
    free(xdg);
}

/* ---- baselines ----------------------------------------------------------- */

Test(kb, set_get_latest_list_remove)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    uint64_t lat[16], dev[16];
    struct cp_run_metrics m1 = metrics(16, 1000000, 1000, true, lat, dev);
    int64_t id1 = set_ok(kb, "api", "v3.2", &m1);
    uint64_t lat2[5], dev2[5];
    struct cp_run_metrics m2 = metrics(5, 2000000, 1, false, lat2, dev2);
    int64_t id2 = set_ok(kb, "api", "v3.3", &m2);
    set_ok(kb, "batch-jobs", "nightly", &m2);
    cr_assert_gt(id2, id1);

    struct cp_kb_baseline b;
    get_ok(kb, "api", "v3.2", &b);
    cr_assert_eq(b.id, id1);
    cr_assert_str_eq(b.service, "api");
    cr_assert_str_eq(b.tag, "v3.2");
    cr_assert_str_eq(b.trace_path, "/traces/t.db");
    cr_assert_eq(strlen(b.created_at), 20, "ISO 8601 UTC: %s", b.created_at);
    cr_assert_eq(b.m.n, 16);
    cr_assert_str_eq(b.m.model_hash, m1.model_hash);
    cr_assert_str_eq(b.m.model_path, "/models/m.om");
    cr_assert_str_eq(b.m.config_id, "fedcba9876543210");
    cr_assert_str_eq(b.m.kind, "bench");
    cr_assert_str_eq(b.m.created_at, "2025-01-02T03:04:05Z");
    cr_assert_eq(b.m.run_id, 3);
    cr_assert_eq(b.m.batch, 4);
    cr_assert_eq(b.m.threads, 2);
    cr_assert_eq(b.m.weight_bytes, 1000);
    cr_assert_eq(b.m.arena_bytes, 2000);
    cr_assert_eq(b.m.peak_bytes, 1500);
    cr_assert_eq(b.m.peak_rss_bytes, 1u << 30);
    cr_assert(isnan(b.m.precision_loss));
    cr_assert_float_eq(b.median_ns, 1007500.0, 1e-6);
    cr_assert_float_eq(b.mean_ns, 1007500.0, 1e-6);
    cp_kb_baseline_release(&b);
    cr_assert_null(b.service, "release leaves the struct zeroed");
    cp_kb_baseline_release(&b);
    cp_kb_baseline_release(NULL);

    get_ok(kb, "api", NULL, &b);
    cr_assert_str_eq(b.tag, "v3.3", "NULL is the latest");
    cr_assert_null(b.m.device_ns, "no kernel time stored, none read");
    cp_kb_baseline_release(&b);
    get_ok(kb, "api", "latest", &b);
    cr_assert_eq(b.id, id2);
    cp_kb_baseline_release(&b);
    cr_assert_eq(cp_kb_baseline_get_id(kb, id1, &b, NULL), CP_OK);
    cr_assert_str_eq(b.tag, "v3.2");
    cp_kb_baseline_release(&b);
    cr_assert_eq(cp_kb_baseline_get_id(kb, 999, &b, NULL), CP_ERR_INVALID);

    struct cp_kb_baseline *v = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_baseline_list(kb, NULL, &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(v[0].service, "api");
    cr_assert_str_eq(v[0].tag, "v3.2");
    cr_assert_eq(v[0].m.n, 16, "lists keep the count");
    cr_assert_null(v[0].m.latency_ns, "lists omit samples");
    cr_assert_float_eq(v[0].median_ns, 1007500.0, 1e-6);
    cr_assert_str_eq(v[1].tag, "v3.3");
    cr_assert_str_eq(v[2].service, "batch-jobs");
    cp_kb_baseline_list_free(v, n);
    cr_assert_eq(cp_kb_baseline_list(kb, "api", &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 2);
    cp_kb_baseline_list_free(v, n);
    cr_assert_eq(cp_kb_baseline_list(kb, "nobody", &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 0, "a service without baselines lists nothing");
    cp_kb_baseline_list_free(v, n);

    char **names = NULL;
    cr_assert_eq(cp_kb_service_list(kb, &names, &n, NULL), CP_OK);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(names[0], "api");
    cr_assert_str_eq(names[1], "batch-jobs");
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);

    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_baseline_remove(kb, "api", "v3.3", &d), CP_OK, "%s", d.msg);
    get_ok(kb, "api", "latest", &b);
    cr_assert_str_eq(b.tag, "v3.2", "after removing the latest, the one before is latest");
    cp_kb_baseline_release(&b);
    get_fails(kb, "api", "v3.3", CP_ERR_INVALID);
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_baseline_remove(kb, "api", "v3.3", &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'api'") && strstr(d.msg, "v3.3") && strstr(d.msg, "v3.2"), "%s",
              d.msg);
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_baseline_remove(kb, "api", "latest", &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "latest"), "%s", d.msg);
    cp_kb_close(kb);
    free(path);
}

Test(kb, not_found_names_the_service_and_its_tags)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct cp_diag d = get_fails(kb, "api", NULL, CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'api'") && strstr(d.msg, "no baselines") &&
                  strstr(d.msg, "holds none"),
              "%s", d.msg);
    uint64_t lat[3], dev[3];
    struct cp_run_metrics m = metrics(3, 10, 1, false, lat, dev);
    set_ok(kb, "api", "v1", &m);
    set_ok(kb, "api", "v2", &m);
    d = get_fails(kb, "api", "v9", CP_ERR_INVALID);
    cr_assert(strstr(d.msg, path), "%s", d.msg);
    cr_assert(strstr(d.msg, "'v9'") && strstr(d.msg, "v1, v2"), "%s", d.msg);
    d = get_fails(kb, "web", "latest", CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'web'") && strstr(d.msg, "services with baselines: api"), "%s", d.msg);
    cp_kb_close(kb);
    free(path);
}

Test(kb, duplicate_tag_is_refused_and_replace_overwrites)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    uint64_t lat[4], dev[4], lat2[6], dev2[6];
    struct cp_run_metrics m = metrics(4, 100, 1, false, lat, dev);
    struct cp_run_metrics m2 = metrics(6, 500, 1, false, lat2, dev2);
    int64_t id1 = set_ok(kb, "api", "v1", &m);
    set_ok(kb, "api", "v2", &m);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t id = 0;
    cr_assert_eq(cp_kb_baseline_set(kb, "api", "v1", NULL, &m2, false, &id, &d), CP_ERR_INVALID);
    cr_assert_eq(id, -1);
    cr_assert(strstr(d.msg, "already has a baseline tagged 'v1'") && strstr(d.msg, "replace"), "%s",
              d.msg);
    struct cp_kb_baseline b;
    get_ok(kb, "api", "v1", &b);
    cr_assert_eq(b.m.n, 4, "the refused set changed nothing");
    cp_kb_baseline_release(&b);

    cp_diag_init(&d);
    cr_assert_eq(cp_kb_baseline_set(kb, "api", "v1", NULL, &m2, true, &id, &d), CP_OK, "%s", d.msg);
    cr_assert_gt(id, id1, "a replaced baseline gets a new id");
    get_ok(kb, "api", "v1", &b);
    cr_assert_eq(b.m.n, 6);
    cr_assert_eq(b.m.latency_ns[0], 500);
    cr_assert_str_eq(b.trace_path, "", "no trace path given");
    cp_kb_baseline_release(&b);
    get_ok(kb, "api", "latest", &b);
    cr_assert_str_eq(b.tag, "v1", "the replaced baseline is the newest");
    cp_kb_baseline_release(&b);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM baselines"), 2);
    /* The same tag for another service is no duplicate. */
    set_ok(kb, "web", "v1", &m);
    cp_kb_close(kb);
    free(path);
}

Test(kb, automatic_tags_count_up_and_are_never_reused)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    uint64_t lat[2], dev[2];
    struct cp_run_metrics m = metrics(2, 100, 1, false, lat, dev);
    struct cp_kb_baseline b;
    const char *want[] = {"b1", "b2", "b3"};
    for (int i = 0; i < 3; i++) {
        int64_t id = set_ok(kb, "api", NULL, &m);
        cr_assert_eq(cp_kb_baseline_get_id(kb, id, &b, NULL), CP_OK);
        cr_assert_str_eq(b.tag, want[i]);
        cp_kb_baseline_release(&b);
    }
    set_ok(kb, "other", NULL, &m);
    get_ok(kb, "other", "b1", &b); /* per service */
    cp_kb_baseline_release(&b);
    cr_assert_eq(cp_kb_baseline_remove(kb, "api", "b3", NULL), CP_OK);
    set_ok(kb, "api", NULL, &m);
    get_ok(kb, "api", "latest", &b);
    cr_assert_str_eq(b.tag, "b4", "b3 was removed but is not given out again");
    cp_kb_baseline_release(&b);
    /* A tag only validations remember still counts. */
    struct cp_kb_validation v = {.service = "api", .baseline_tag = "b10", .verdict = "unchanged"};
    cr_assert_eq(cp_kb_record_validation(kb, &v, NULL, NULL), CP_OK);
    set_ok(kb, "api", NULL, &m);
    get_ok(kb, "api", "latest", &b);
    cr_assert_str_eq(b.tag, "b11");
    cp_kb_baseline_release(&b);
    cp_kb_close(kb);
    free(path);
}

Test(kb, samples_round_trip_exactly)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    enum { N = 1000 };
    uint64_t lat[N], dev[N];
    struct cp_run_metrics m = metrics(N, 0, 0, true, lat, dev);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        lat[i] = x;
        dev[i] = ~x;
    }
    lat[0] = 0;
    lat[1] = 1;
    lat[2] = UINT64_MAX;
    lat[3] = (uint64_t)1 << 63;
    dev[0] = 0;
    m.precision_loss = 0.125;
    set_ok(kb, "api", "exact", &m);
    cp_kb_close(kb);
    kb = open_kb(path);
    struct cp_kb_baseline b;
    get_ok(kb, "api", "exact", &b);
    cr_assert_eq(b.m.n, N);
    cr_assert_not_null(b.m.latency_ns);
    cr_assert_not_null(b.m.device_ns);
    cr_assert_eq(memcmp(b.m.latency_ns, lat, sizeof lat), 0);
    cr_assert_eq(memcmp(b.m.device_ns, dev, sizeof dev), 0);
    cr_assert_eq(b.m.precision_loss, 0.125);
    cp_kb_baseline_release(&b);
    /* Stored as n*8 little-endian bytes. */
    cr_assert_eq(q_int(kb, "SELECT length(latency_ns) FROM baselines"), N * 8);
    cr_assert_eq(q_int(kb, "SELECT hex(substr(latency_ns, 9, 8)) = '0100000000000000' FROM "
                           "baselines"),
                 1);
    cr_assert_eq(q_int(kb, "SELECT n FROM baselines"), N);
    cp_kb_close(kb);
    free(path);
}

Test(kb, damaged_samples_are_reported_not_trusted)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    uint64_t lat[20], dev[20];
    struct cp_run_metrics m = metrics(20, 100, 1, true, lat, dev);
    set_ok(kb, "api", "v1", &m);
    set_ok(kb, "api", "v2", &m);
    set_ok(kb, "api", "v3", &m);
    cp_kb_close(kb);
    raw_exec(path, "UPDATE baselines SET latency_ns = x'0102030405' WHERE tag = 'v1';"
                   "UPDATE baselines SET device_ns = zeroblob(24) WHERE tag = 'v2';"
                   "UPDATE baselines SET n = 21 WHERE tag = 'v3';");
    kb = open_kb(path);
    struct cp_diag d = get_fails(kb, "api", "v1", CP_ERR_CORRUPT);
    cr_assert(strstr(d.msg, path) && strstr(d.msg, "'api/v1'") && strstr(d.msg, "latency") &&
                  strstr(d.msg, "5 bytes") && strstr(d.msg, "160"),
              "%s", d.msg);
    d = get_fails(kb, "api", "v2", CP_ERR_CORRUPT);
    cr_assert(strstr(d.msg, "'api/v2'") && strstr(d.msg, "device-time"), "%s", d.msg);
    d = get_fails(kb, "api", "v3", CP_ERR_CORRUPT);
    cr_assert(strstr(d.msg, "'api/v3'") && strstr(d.msg, "21 samples"), "%s", d.msg);
    /* The list does not read samples, so it still works. */
    struct cp_kb_baseline *v = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_baseline_list(kb, "api", &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 3);
    cp_kb_baseline_list_free(v, n);
    cp_kb_close(kb);
    free(path);
}

/* ---- the interference probe (schema version 3) ---------------------------- */

/* n probe durations, distinct from the latencies, from 0 to `max`. */
static void fill_probe(uint64_t *probe, size_t n, uint64_t max)
{
    for (size_t i = 0; i < n; i++)
        probe[i] = 10000 + i * 7 + (i % 3) * 1000;
    probe[0] = 0;
    if (n > 1)
        probe[1] = max;
}

Test(kb, probe_samples_round_trip_exactly_and_are_null_without_a_probe)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    enum { N = 300 };
    uint64_t lat[N], dev[N], probe[N];
    struct cp_run_metrics m = metrics(N, 5000, 3, true, lat, dev);
    fill_probe(probe, N, UINT64_MAX);
    m.probe_ns = probe;
    int64_t id = set_ok(kb, "api", "probed", &m);
    m.probe_ns = NULL;
    set_ok(kb, "api", "plain", &m);
    cp_kb_close(kb);

    kb = open_kb(path);
    struct cp_kb_baseline b;
    get_ok(kb, "api", "probed", &b);
    cr_assert_eq(b.m.n, N);
    cr_assert_not_null(b.m.probe_ns);
    cr_assert_eq(memcmp(b.m.probe_ns, probe, sizeof probe), 0);
    cr_assert_eq(memcmp(b.m.latency_ns, lat, sizeof lat), 0, "the probe does not disturb the rest");
    cr_assert_eq(memcmp(b.m.device_ns, dev, sizeof dev), 0);
    cp_kb_baseline_release(&b);
    cr_assert_null(b.m.probe_ns, "release leaves the struct zeroed");
    cr_assert_eq(cp_kb_baseline_get_id(kb, id, &b, NULL), CP_OK);
    cr_assert_not_null(b.m.probe_ns);
    cr_assert_eq(memcmp(b.m.probe_ns, probe, sizeof probe), 0);
    cp_kb_baseline_release(&b);
    /* Stored as n*8 little-endian bytes, like the other samples. */
    cr_assert_eq(q_int(kb, "SELECT length(probe_ns) FROM baselines WHERE tag = 'probed'"), N * 8);
    cr_assert_eq(q_int(kb, "SELECT hex(substr(probe_ns, 9, 8)) = 'FFFFFFFFFFFFFFFF' FROM "
                           "baselines WHERE tag = 'probed'"),
                 1);

    get_ok(kb, "api", "plain", &b);
    cr_assert_null(b.m.probe_ns, "no probe stored, none read");
    cr_assert_not_null(b.m.latency_ns);
    cp_kb_baseline_release(&b);
    cr_assert_eq(q_int(kb, "SELECT probe_ns IS NULL FROM baselines WHERE tag = 'plain'"), 1,
                 "a run without a probe stores SQL NULL");

    /* Lists carry no samples, the probe included. */
    struct cp_kb_baseline *v = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_baseline_list(kb, "api", &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(v[i].m.n, N);
        cr_assert_null(v[i].m.latency_ns);
        cr_assert_null(v[i].m.probe_ns);
    }
    cp_kb_baseline_list_free(v, n);
    cp_kb_close(kb);
    free(path);
}

static char *export_text(struct cp_kb *kb)
{
    struct cp_buf b;
    cp_buf_init(&b);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_export_jsonl(kb, &b, &d), CP_OK, "%s", d.msg);
    return cp_buf_steal(&b);
}

static void write_text(const char *path, const char *text)
{
    cr_assert(cp_t_write_file(path, text, strlen(text)), "cannot write %s (see stderr)", path);
}

Test(kb, probe_samples_survive_export_and_import)
{
    char *src_path = cp_t_path("a.sqlite"), *dst_path = cp_t_path("b.sqlite");
    char *file = cp_t_path("kb.jsonl");
    struct cp_kb *src = open_kb(src_path);
    enum { N = 50 };
    uint64_t lat[N], dev[N], probe[N];
    struct cp_run_metrics m = metrics(N, 7000, 11, false, lat, dev);
    /* JSON integers are signed 64-bit: INT64_MAX is the largest a sample
     * can be in an export. */
    fill_probe(probe, N, INT64_MAX);
    m.probe_ns = probe;
    set_ok(src, "api", "probed", &m);
    m.probe_ns = NULL;
    set_ok(src, "api", "plain", &m);
    char *text = export_text(src);
    cr_assert(strstr(text, "\"probe_ns\":[0,9223372036854775807,12014,"), "%.600s", text);
    cr_assert(strstr(text, "\"probe_ns\":null"), "%.600s", text);
    write_text(file, text);

    struct cp_kb *dst = open_kb(dst_path);
    struct cp_diag d;
    cp_diag_init(&d);
    size_t added = 0;
    cr_assert_eq(cp_kb_import_jsonl(dst, file, &added, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(added, 2);
    struct cp_kb_baseline b;
    get_ok(dst, "api", "probed", &b);
    cr_assert_not_null(b.m.probe_ns);
    cr_assert_eq(memcmp(b.m.probe_ns, probe, sizeof probe), 0);
    cr_assert_eq(memcmp(b.m.latency_ns, lat, sizeof lat), 0);
    cp_kb_baseline_release(&b);
    get_ok(dst, "api", "plain", &b);
    cr_assert_null(b.m.probe_ns);
    cp_kb_baseline_release(&b);
    char *again = export_text(dst);
    cr_assert_str_eq(again, text, "an imported knowledge base exports the same lines");

    /* A line exported before version 3 has no probe_ns key at all. */
    write_text(file, "{\"type\":\"baseline\",\"service\":\"old\",\"tag\":\"v1\",\"n\":2,"
                     "\"latency_ns\":[5,6],\"device_ns\":null,\"mean_ns\":5.5}\n");
    cr_assert_eq(cp_kb_import_jsonl(dst, file, &added, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(added, 1);
    get_ok(dst, "old", "v1", &b);
    cr_assert_eq(b.m.n, 2);
    cr_assert_eq(b.m.latency_ns[1], 6);
    cr_assert_null(b.m.probe_ns);
    cp_kb_baseline_release(&b);

    /* The probe's count is checked against n, as the other samples'. */
    write_text(file, "{\"type\":\"baseline\",\"service\":\"old\",\"tag\":\"v2\",\"n\":2,"
                     "\"latency_ns\":[5,6],\"probe_ns\":[9]}\n");
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_import_jsonl(dst, file, &added, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "kb.jsonl:1:") && strstr(d.msg, "'probe_ns' has 1"), "%s", d.msg);
    cr_assert_eq(q_int(dst, "SELECT count(*) FROM baselines WHERE tag = 'v2'"), 0);

    free(again);
    free(text);
    cp_kb_close(src);
    cp_kb_close(dst);
    free(src_path);
    free(dst_path);
    free(file);
}

Test(kb, a_version_2_baseline_reads_without_probe)
{
    char *path = cp_t_path("v2.sqlite");
    struct cp_kb *kb = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_open_at_version(path, 2, &kb, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(q_int(kb, "PRAGMA user_version"), 2);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM pragma_table_info('baselines') WHERE "
                           "name = 'probe_ns'"),
                 0);
    /* The rows a version 2 cannprof wrote: latencies 10, 20, 30 with kernel
     * times 1, 2, 3. */
    cr_assert_eq(sqlite3_exec(cp_kb_db(kb),
                              "INSERT INTO services(name, created_at) VALUES ('svc', "
                              "'2025-01-01T00:00:00Z');"
                              "INSERT INTO baselines(service, tag, created_at, trace_path, "
                              "run_kind, n, latency_ns, device_ns, median_ns) VALUES ('svc', "
                              "'v1', '2025-01-01T00:00:00Z', '/t.db', 'bench', 3, "
                              "x'0a0000000000000014000000000000001e00000000000000', "
                              "x'010000000000000002000000000000000300000000000000', 20);",
                              NULL, NULL, NULL),
                 SQLITE_OK, "%s", sqlite3_errmsg(cp_kb_db(kb)));
    cp_kb_close(kb);

    kb = open_kb(path);
    cr_assert_eq(q_int(kb, "PRAGMA user_version"), CP_KB_SCHEMA_VERSION);
    cr_assert_eq(CP_KB_SCHEMA_VERSION, 4);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM schema_history"), 4);
    cr_assert_eq(q_int(kb, "SELECT max(version) FROM schema_history"), 4);
    char *v = q_text(kb, "SELECT value FROM meta WHERE key = 'schema_version'");
    cr_assert_str_eq(v, "4");
    free(v);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM pragma_table_info('baselines') WHERE "
                           "name = 'probe_ns' AND type = 'BLOB' AND \"notnull\" = 0"),
                 1);
    struct cp_kb_baseline b;
    get_ok(kb, "svc", "v1", &b);
    cr_assert_eq(b.m.n, 3);
    cr_assert_eq(b.m.latency_ns[0], 10);
    cr_assert_eq(b.m.latency_ns[2], 30);
    cr_assert_not_null(b.m.device_ns);
    cr_assert_eq(b.m.device_ns[1], 2);
    cr_assert_null(b.m.probe_ns, "a baseline set before version 3 has no probe");
    cr_assert_float_eq(b.median_ns, 20.0, 1e-9);
    cp_kb_baseline_release(&b);

    /* The migrated file takes probed baselines beside the old one. */
    uint64_t lat[4], dev[4], probe[4];
    struct cp_run_metrics m = metrics(4, 100, 1, false, lat, dev);
    fill_probe(probe, 4, 4000);
    m.probe_ns = probe;
    set_ok(kb, "svc", "v2", &m);
    get_ok(kb, "svc", "latest", &b);
    cr_assert_str_eq(b.tag, "v2");
    cr_assert_not_null(b.m.probe_ns);
    cr_assert_eq(memcmp(b.m.probe_ns, probe, sizeof probe), 0);
    cp_kb_baseline_release(&b);
    cp_kb_close(kb);
    free(path);
}

Test(kb, a_damaged_probe_blob_is_reported_not_trusted)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    uint64_t lat[20], dev[20], probe[20];
    struct cp_run_metrics m = metrics(20, 100, 1, true, lat, dev);
    fill_probe(probe, 20, 1);
    m.probe_ns = probe;
    int64_t id = set_ok(kb, "api", "v1", &m);
    set_ok(kb, "api", "v2", &m);
    cp_kb_close(kb);
    raw_exec(path, "UPDATE baselines SET probe_ns = zeroblob(24) WHERE tag = 'v1';"
                   "UPDATE baselines SET probe_ns = x'01' WHERE tag = 'v2';");
    kb = open_kb(path);
    struct cp_diag d = get_fails(kb, "api", "v1", CP_ERR_CORRUPT);
    cr_assert(strstr(d.msg, path) && strstr(d.msg, "'api/v1'") && strstr(d.msg, "probe") &&
                  strstr(d.msg, "24 bytes") && strstr(d.msg, "160"),
              "%s", d.msg);
    d = get_fails(kb, "api", "v2", CP_ERR_CORRUPT);
    cr_assert(strstr(d.msg, "'api/v2'") && strstr(d.msg, "probe") && strstr(d.msg, "1 bytes"), "%s",
              d.msg);
    struct cp_kb_baseline b;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_baseline_get_id(kb, id, &b, &d), CP_ERR_CORRUPT);
    cr_assert(strstr(d.msg, "'api/v1'") && strstr(d.msg, "probe"), "%s", d.msg);
    cr_assert_null(b.m.latency_ns, "a failed get leaves the struct empty");
    cr_assert_null(b.m.probe_ns);
    /* The list does not read samples, so it still works. */
    struct cp_kb_baseline *v = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_baseline_list(kb, "api", &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 2);
    cp_kb_baseline_list_free(v, n);
    cp_kb_close(kb);
    free(path);
}

Test(kb, names_are_checked)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    uint64_t lat[2], dev[2];
    struct cp_run_metrics m = metrics(2, 100, 1, false, lat, dev);
    char long_name[CP_KB_MAX_SERVICE + 2];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    const char *bad_services[] = {"", "tab\there", "bell\a", long_name};
    for (size_t i = 0; i < sizeof bad_services / sizeof *bad_services; i++) {
        struct cp_diag d;
        cp_diag_init(&d);
        cr_assert_eq(cp_kb_baseline_set(kb, bad_services[i], "t", NULL, &m, false, NULL, &d),
                     CP_ERR_INVALID, "service #%zu accepted", i);
        cr_assert(strstr(d.msg, "service"), "%s", d.msg);
    }
    cr_assert_eq(cp_kb_baseline_set(kb, NULL, "t", NULL, &m, false, NULL, NULL), CP_ERR_INVALID);
    long_name[CP_KB_MAX_SERVICE] = 0; /* exactly the limit */
    set_ok(kb, long_name, "t", &m);
    set_ok(kb, "caf\xc3\xa9 api", "v1", &m); /* UTF-8 is printable */
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_baseline_set(kb, "api", "latest", NULL, &m, false, NULL, &d),
                 CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'latest' cannot be a tag"), "%s", d.msg);
    cr_assert_eq(cp_kb_baseline_set(kb, "api", "", NULL, &m, false, NULL, NULL), CP_ERR_INVALID);
    struct cp_run_metrics empty = m;
    empty.n = 0;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_baseline_set(kb, "api", "v1", NULL, &empty, false, NULL, &d),
                 CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "no latency samples"), "%s", d.msg);
    cp_kb_close(kb);
    free(path);
}

/* ---- validations --------------------------------------------------------- */

Test(kb, validations_are_recorded_and_listed_newest_first)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    uint64_t lat[2], dev[2];
    struct cp_run_metrics m = metrics(2, 100, 1, false, lat, dev);
    int64_t bid = set_ok(kb, "api", "v1", &m);
    const char *verdicts[] = {"unchanged", "regressed", "improved", "inconclusive", "regressed"};
    int64_t ids[5];
    for (int i = 0; i < 5; i++) {
        struct cp_kb_validation v = {
            .service = "api",
            .baseline_id = bid,
            .baseline_tag = "v1",
            .trace_path = "/traces/new.db",
            .verdict = verdicts[i],
            .figures_json = "{\"latency_median\":{\"delta_pct\":4.5}}",
            .exit_code = strcmp(verdicts[i], "regressed") == 0,
            .alert_attempted = i >= 3,
            .alert_delivered = i == 4,
            .alert_error = i == 3 ? "HTTP 500 from hook" : NULL,
        };
        struct cp_diag d;
        cp_diag_init(&d);
        cr_assert_eq(cp_kb_record_validation(kb, &v, &ids[i], &d), CP_OK, "%s", d.msg);
        cr_assert_gt(ids[i], i ? ids[i - 1] : 0);
    }
    struct cp_kb_validation other = {.service = "web", .verdict = "unchanged"};
    cr_assert_eq(cp_kb_record_validation(kb, &other, NULL, NULL), CP_OK);

    struct cp_kb_validation *v = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_validation_list(kb, "api", 3, &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(v[0].id, ids[4], "newest first");
    cr_assert_eq(v[1].id, ids[3]);
    cr_assert_eq(v[2].id, ids[2]);
    cr_assert_str_eq(v[0].verdict, "regressed");
    cr_assert_eq(v[0].exit_code, 1);
    cr_assert(v[0].alert_attempted && v[0].alert_delivered);
    cr_assert_null(v[0].alert_error);
    cr_assert(v[1].alert_attempted && !v[1].alert_delivered);
    cr_assert_str_eq(v[1].alert_error, "HTTP 500 from hook");
    cr_assert_str_eq(v[0].service, "api");
    cr_assert_str_eq(v[0].baseline_tag, "v1");
    cr_assert_eq(v[0].baseline_id, bid);
    cr_assert_str_eq(v[0].trace_path, "/traces/new.db");
    cr_assert_str_eq(v[0].figures_json, "{\"latency_median\":{\"delta_pct\":4.5}}");
    cr_assert_eq(strlen(v[0].created_at), 20);
    cp_kb_validation_list_free(v, n);
    cr_assert_eq(cp_kb_validation_list(kb, "api", 0, &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 5, "limit 0 is all");
    cp_kb_validation_list_free(v, n);
    cr_assert_eq(cp_kb_validation_list(kb, "web", 10, &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 1);
    cr_assert_null(v[0].baseline_tag);
    cr_assert_eq(v[0].baseline_id, -1);
    cp_kb_validation_list_free(v, n);

    /* Removing the baseline keeps its validations, with the tag text. */
    cr_assert_eq(cp_kb_baseline_remove(kb, "api", "v1", NULL), CP_OK);
    cr_assert_eq(cp_kb_validation_list(kb, "api", 0, &v, &n, NULL), CP_OK);
    cr_assert_eq(n, 5);
    cr_assert_str_eq(v[4].baseline_tag, "v1");
    cr_assert_eq(v[4].baseline_id, bid);
    cp_kb_validation_list_free(v, n);

    struct cp_kb_validation bad = {.service = "api"};
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_record_validation(kb, &bad, NULL, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "verdict"), "%s", d.msg);
    cp_kb_close(kb);
    free(path);
}

/* ---- several processes ----------------------------------------------------- */

/* In a child: open its own handle and set `n` baselines with automatic tags;
 * the exit status says how many failed (0: all stored). */
static void child_inserts(const char *path, int n)
{
    struct cp_kb *kb = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_kb_open(path, &kb, &d) != CP_OK) {
        fprintf(stderr, "child %d: %s\n", (int)getpid(), d.msg);
        _exit(100);
    }
    uint64_t lat[64], dev[64];
    struct cp_run_metrics m = metrics(64, 1000, 3, true, lat, dev);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        cp_diag_init(&d);
        if (cp_kb_baseline_set(kb, "shared", NULL, "/t.db", &m, false, NULL, &d) != CP_OK) {
            fprintf(stderr, "child %d: %s\n", (int)getpid(), d.msg);
            failed++;
        }
        struct cp_kb_validation v = {.service = "shared", .verdict = "unchanged"};
        if (cp_kb_record_validation(kb, &v, NULL, &d) != CP_OK)
            failed++;
    }
    cp_kb_close(kb);
    _exit(failed > 99 ? 99 : failed);
}

Test(kb, two_processes_write_one_file_at_once)
{
    char *path = cp_t_path("shared/kb.sqlite");
    enum { PER_CHILD = 40 };
    fflush(NULL);
    pid_t pids[2];
    /* Both open a file that does not exist yet: creation races too. */
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        cr_assert_geq(pids[i], 0);
        if (pids[i] == 0)
            child_inserts(path, PER_CHILD);
    }
    for (int i = 0; i < 2; i++) {
        int status = 0;
        cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
        cr_assert(WIFEXITED(status), "child %d crashed", i);
        cr_assert_eq(WEXITSTATUS(status), 0, "child %d: %d writes failed", i, WEXITSTATUS(status));
    }
    struct cp_kb *kb = open_kb(path);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM baselines WHERE service = 'shared'"),
                 2 * PER_CHILD);
    cr_assert_eq(q_int(kb, "SELECT count(DISTINCT tag) FROM baselines"), 2 * PER_CHILD,
                 "automatic tags never collide");
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM validations"), 2 * PER_CHILD);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM schema_history"), CP_KB_SCHEMA_VERSION,
                 "the schema was created once");
    struct cp_kb_baseline b;
    get_ok(kb, "shared", "latest", &b);
    cr_assert_eq(b.m.n, 64);
    cp_kb_baseline_release(&b);
    cp_kb_close(kb);
    free(path);
}
