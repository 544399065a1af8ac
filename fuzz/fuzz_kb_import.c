/* `kb import FILE`: JSON Lines into a knowledge base, all or nothing. Each
 * input goes into a fresh knowledge base in the temporary folder (a copy
 * of one made once, so the schema is not migrated for every input). What
 * was imported must export, and the export must import into another fresh
 * knowledge base: a shared file can be passed on. */
#include "harness.h"

#include "knowledge/kb.h"
#include "knowledge/kb_tuning.h"

#include <stdio.h>
#include <stdlib.h>

/* A fresh knowledge base at tmp/<name>, a copy of the template. */
static struct cp_kb *fresh_kb(const char *name, char *path, size_t n)
{
    static uint8_t *tmpl;
    static size_t tmpl_len;
    struct cp_diag d;
    cp_diag_init(&d);
    if (!tmpl) {
        char tp[1024];
        struct cp_kb *kb = NULL;
        if (!fuzz_tmp_path("template.sqlite", tp, sizeof tp) || cp_kb_open(tp, &kb, &d) != CP_OK)
            fuzz_fail("cannot make a knowledge base in the temporary folder: %s", d.msg);
        cp_kb_close(kb);
        if (cp_file_read(tp, &tmpl, &tmpl_len, &d) != CP_OK)
            fuzz_fail("cannot read the template knowledge base back: %s", d.msg);
        /* the template stays for the life of the process: reachable, not a leak */
    }
    if (!fuzz_tmp_write(name, tmpl, tmpl_len, path, n))
        fuzz_fail("cannot write a knowledge base into the temporary folder");
    struct cp_kb *kb = NULL;
    if (cp_kb_open(path, &kb, &d) != CP_OK)
        fuzz_fail("cannot open a fresh knowledge base: %s", d.msg);
    return kb;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[1024], kb_path[1024];
    if (!fuzz_tmp_write("import.jsonl", data, size, in, sizeof in))
        return 0;
    struct cp_kb *kb = fresh_kb("kb.sqlite", kb_path, sizeof kb_path);
    struct cp_diag d;
    cp_diag_init(&d);
    size_t added = 0;
    enum cp_status st = cp_kb_import_jsonl(kb, in, &added, &d);
    fuzz_expect_refusal("cp_kb_import_jsonl", st, &d);
    if (st != CP_OK && added)
        fuzz_fail("a refused import says it added %zu records", added);
    if (st == CP_OK && added) {
        struct cp_buf out;
        cp_buf_init(&out);
        cp_diag_init(&d);
        if (cp_kb_export_jsonl(kb, &out, &d) != CP_OK)
            fuzz_fail("what was imported does not export: %s", d.msg);
        char again[1024], kb2_path[1024];
        if (!fuzz_tmp_write("export.jsonl", (const uint8_t *)(out.data ? out.data : ""), out.len,
                            again, sizeof again))
            fuzz_fail("cannot write the export into the temporary folder");
        struct cp_kb *kb2 = fresh_kb("kb2.sqlite", kb2_path, sizeof kb2_path);
        cp_diag_init(&d);
        if (cp_kb_import_jsonl(kb2, again, NULL, &d) != CP_OK)
            fuzz_fail("an export of imported records does not import: %s", d.msg);
        cp_kb_close(kb2);
        fuzz_tmp_remove_db(kb2_path);
        fuzz_tmp_remove(again);
        cp_buf_release(&out);
    }
    cp_kb_close(kb);
    fuzz_tmp_remove_db(kb_path);
    fuzz_tmp_remove(in);
    return 0;
}
