/* knowledge base: the file. Creation with its folders, the schema and WAL,
 * identity (application_id) and version checks, no second migration on
 * reopen, refusal of trace stores, foreign SQLite databases, non-SQLite
 * files, directories and newer schema versions, and the default path
 * (XDG_DATA_HOME, then HOME). */
#include "kb_test.h"

#include <sys/stat.h>

TestSuite(kb_file, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* ---- the file ------------------------------------------------------------ */

Test(kb_file, open_creates_folders_schema_and_wal)
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

Test(kb_file, reopen_keeps_data_and_does_not_migrate_again)
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

Test(kb_file, refuses_a_trace_store)
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

Test(kb_file, refuses_a_foreign_sqlite_database_and_leaves_it_untouched)
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

Test(kb_file, refuses_a_file_that_is_not_sqlite_and_a_directory)
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

Test(kb_file, refuses_a_newer_schema_version)
{
    char *path = cp_t_path("kb.sqlite");
    cp_kb_close(open_kb(path));
    raw_exec(path, "PRAGMA user_version = 99;");
    struct cp_diag d = open_fails(path, CP_ERR_VERSION);
    cr_assert(strstr(d.msg, path) && strstr(d.msg, "99") && strstr(d.msg, "upgrade"), "%s", d.msg);
    free(path);
}

Test(kb_file, an_empty_file_becomes_a_knowledge_base)
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

Test(kb_file, a_folder_that_cannot_be_created_is_an_environment_error)
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

Test(kb_file, default_path_follows_xdg_data_home_then_home)
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

Test(kb_file, open_with_null_uses_the_default_path)
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
