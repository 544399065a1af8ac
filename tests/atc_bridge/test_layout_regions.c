/* --layout_regions, the layout of single conv regions: the flag's form and
 * canonical text, how it travels in the config, and what a conversion does
 * with it (resnet_tiny's one region made NHWC or left plain, with the same
 * outputs), and what it refuses. */
#include "atc_bridge/convert.h"
#include "support/cli.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(layout_regions, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 120);

static enum cp_status parse(const char *text, char *out, size_t cap, struct cp_diag *d)
{
    cp_diag_init(d);
    return cp_layout_regions_parse(text, out, cap, d);
}

Test(layout_regions, the_flag_becomes_sorted_lines_by_node)
{
    char out[256];
    struct cp_diag d;
    cr_assert_eq(parse(" b/conv:nchw ; a:1/conv:nhwc;;c:blocked", out, sizeof out, &d), CP_OK, "%s",
                 d.msg);
    cr_expect_str_eq(out, "a:1/conv:nhwc\nb/conv:nchw\nc:blocked",
                     "the last ':' separates a node's name from its layout");
    cr_expect_eq(parse("a:nhwc;a:blocked", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "node 'a' is given twice"), "%s", d.msg);
    cr_expect_str_eq(out, "");
    cr_expect_eq(parse("a:1:nhwc;a:nhwc", out, sizeof out, &d), CP_OK, "%s: different nodes",
                 d.msg);
    cr_expect_eq(parse("conv", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "is not NODE:POLICY"), "%s", d.msg);
    cr_expect_eq(parse(":nhwc", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_eq(parse("a:auto", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "use nchw, nhwc or blocked"), "%s", d.msg);
    cr_expect_eq(parse("aaaaaaaaaaaa:nhwc;bbbbbbbbbbbbbb:nhwc", out, 20, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "longer than 19 bytes"), "%s", d.msg);

    struct cp_convert_config a, b;
    cp_convert_config_init(&a);
    b = a;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&b, "layout_regions", "x:nhwc;w:nchw", &d), CP_OK, "%s",
                 d.msg);
    char ia[17], ib[17];
    cp_convert_config_id(&a, ia);
    cp_convert_config_id(&b, ib);
    cr_expect_str_neq(ia, ib, "the regions' layouts change the model, so the id");
    struct cp_buf cmd, js;
    cp_buf_init(&cmd);
    cp_buf_init(&js);
    cp_convert_config_cmdline(&b, &cmd);
    cr_expect_not_null(strstr(cmd.data, "--layout_regions=w:nchw;x:nhwc"), "%s", cmd.data);
    cp_convert_config_json(&b, &js);
    struct cp_convert_config back;
    cr_assert_eq(cp_convert_config_from_json(&back, js.data, &d), CP_OK, "%s", d.msg);
    cr_expect_str_eq(back.layout_regions, "w:nchw\nx:nhwc");
    cp_buf_release(&cmd);
    cp_buf_release(&js);
    cr_expect_str_eq(cp_convert_flag_pass("layout_regions"), "LayoutTransformPass");
}

/* The layouts of the kernels' first outputs in a trace of `om`, joined. */
static char *kernel_layouts(const char *om, const char *trace)
{
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "-n", "2", "--no-probe", "--threads", "1", "--trace", trace, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open_v2(trace, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(db,
                                    "SELECT group_concat(json_extract(outputs, '$[0].layout'), "
                                    "',') FROM kernels WHERE run_id = (SELECT max(id) FROM runs)",
                                    -1, &st, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    char *out = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

Test(layout_regions, a_region_made_nhwc_or_left_plain_computes_the_same)
{
    char *dflt = cp_t_convert(cp_t_dir, "resnet_tiny", "default", NULL);
    char *nhwc =
        cp_t_convert(cp_t_dir, "resnet_tiny", "nhwc", "--layout_regions=/conv1/Conv:nhwc", NULL);
    char *plain = cp_t_convert(cp_t_dir, "resnet_tiny", "plain",
                               "--layout_regions=/layers/layers.3/conv2/Conv:nchw", NULL);
    cr_assert(dflt && nhwc && plain, "a conversion failed (see stderr)");
    char *ld = kernel_layouts(dflt, cp_t_path("d.db"));
    char *ln = kernel_layouts(nhwc, cp_t_path("n.db"));
    char *lp = kernel_layouts(plain, cp_t_path("p.db"));
    cr_expect_not_null(strstr(ld, "nChw16c"), "the default region is blocked: %s", ld);
    cr_expect_null(strstr(ln, "nChw"), "the region made NHWC has no blocked tensor: %s", ln);
    cr_expect_not_null(strstr(ln, "NHWC"), "%s", ln);
    cr_expect_null(strstr(lp, "nChw"), "a region named by any of its nodes is left plain: %s", lp);
    cr_expect_null(strstr(lp, "NHWC"), "%s", lp);
    struct cp_run r;
    cp_run_cli(&r, "compare", dflt, nhwc, "--json", "--threads", "1", NULL);
    cr_expect_eq(r.exit_code, 0, "layouts change how, not what: %s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "compare", dflt, plain, "--json", "--threads", "1", NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.out);
    cp_run_release(&r);
    free(ld);
    free(ln);
    free(lp);
}

Test(layout_regions, a_name_in_no_region_or_no_model_and_an_nchw_policy_are_refused)
{
    struct cp_run r;
    const char *model = cp_t_fmt("--model=%s", cp_t_example("resnet_tiny"));
    const char *out = cp_t_fmt("--output=%s/x", cp_t_dir);
    cp_run_cli(&r, "convert", model, "--framework=5", out, "--layout_regions=/fc/Gemm:nhwc", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    cr_expect_not_null(strstr(r.err, "'/fc/Gemm' is in no conv region"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "convert", model, "--framework=5", out, "--layout_regions=nope:nhwc", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    cr_expect_not_null(strstr(r.err, "no node named 'nope'"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "convert", model, "--framework=5", out, "--layout_policy=nchw",
               "--layout_regions=/conv1/Conv:nhwc", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    cr_expect_not_null(strstr(r.err, "nchw forms no conv regions"), "%s", r.err);
    cp_run_release(&r);
}
