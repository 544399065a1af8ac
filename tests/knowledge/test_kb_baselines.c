/* knowledge base: baselines. Set, get, latest, list and remove, the
 * not-found messages, duplicate tags and replace, automatic tags, the exact
 * round trip of the samples, damaged samples reported rather than trusted,
 * and the checks on service names, tags and empty runs. */
#include "kb_test.h"

TestSuite(kb_baselines, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* ---- baselines ----------------------------------------------------------- */

Test(kb_baselines, set_get_latest_list_remove)
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

Test(kb_baselines, not_found_names_the_service_and_its_tags)
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

Test(kb_baselines, duplicate_tag_is_refused_and_replace_overwrites)
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

Test(kb_baselines, automatic_tags_count_up_and_are_never_reused)
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

Test(kb_baselines, samples_round_trip_exactly)
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

Test(kb_baselines, damaged_samples_are_reported_not_trusted)
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

Test(kb_baselines, names_are_checked)
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
