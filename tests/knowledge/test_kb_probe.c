/* knowledge base: the interference probe (schema version 3). Probe samples
 * round trip exactly and are NULL without a probe, survive export and
 * import (and lines exported before version 3 import without them), a
 * version 2 file migrates and its baselines read without a probe, and a
 * damaged probe blob is reported rather than trusted. */
#include "kb_test.h"

TestSuite(kb_probe, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

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

Test(kb_probe, probe_samples_round_trip_exactly_and_are_null_without_a_probe)
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

Test(kb_probe, probe_samples_survive_export_and_import)
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

Test(kb_probe, a_version_2_baseline_reads_without_probe)
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

Test(kb_probe, a_damaged_probe_blob_is_reported_not_trusted)
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
