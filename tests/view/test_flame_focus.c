/* view --flame --focus REGEX [--callers] and --left-heavy: the frames
 * around the matched ones, their callees merged under one root or their
 * callers above it (speedscope's sandwich), and children widest first. On a tree with known times
 * the merged widths are the sums they must be, per iteration, with nested matches counted once; on
 * a real run the command draws both sides and refuses what it cannot draw with exit 2. */
#include "cli/cli_test.h"
#include "support/run.h"
#include "view/flame_internal.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(flame_focus, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 240);

/* A frame of t under `parent` with times a and b in two iterations. */
static int32_t frame(struct fl_tree *t, int32_t parent, enum fl_kind kind, const char *name,
                     double a, double b)
{
    int32_t id = fl_child(t, parent, kind, 1, name);
    cr_assert_geq(id, 0);
    struct fl_frame *f = &t->f[id];
    f->per = cp_calloc(2, sizeof *f->per);
    cr_assert_not_null(f->per);
    f->n_per = 2;
    f->per[0] = a;
    f->per[1] = b;
    f->total = a + b;
    return id;
}

/*  all
 *    runtime (track)
 *      execute 10 12
 *        ConvA 4 5
 *          Conv_sub 1 1      (a match inside a match)
 *        relu 2 2
 *      load 3 3
 *        ConvB 1 2
 *        ConvA 1 1           (the same name elsewhere) */
static void tree(struct fl_tree *t)
{
    memset(t, 0, sizeof *t);
    cp_strmap_init(&t->by_key);
    cr_assert_eq(fl_child(t, -1, FK_ROOT, -1, "all"), 0);
    int32_t track = frame(t, 0, FK_TRACK, "runtime", 13, 15);
    int32_t exec = frame(t, track, FK_EVENT, "execute", 10, 12);
    int32_t conv_a = frame(t, exec, FK_KERNEL, "ConvA", 4, 5);
    frame(t, conv_a, FK_EVENT, "Conv_sub", 1, 1);
    frame(t, exec, FK_KERNEL, "relu", 2, 2);
    int32_t load = frame(t, track, FK_EVENT, "load", 3, 3);
    frame(t, load, FK_KERNEL, "ConvB", 1, 2);
    frame(t, load, FK_KERNEL, "ConvA", 1, 1);
    /* the root: all of it */
    t->f[0].per = cp_calloc(2, sizeof *t->f[0].per);
    cr_assert_not_null(t->f[0].per);
    t->f[0].n_per = 2;
    t->f[0].per[0] = 13;
    t->f[0].per[1] = 15;
    t->f[0].total = 28;
}

/* The frame at the end of a path of names from the root; -1 when none. */
static int32_t find(const struct fl_tree *t, const char *const *names, size_t n)
{
    int32_t at = 0;
    for (size_t k = 0; k < n; k++) {
        int32_t next = -1;
        for (size_t i = 1; i < t->n && next < 0; i++)
            if (t->f[i].parent == at && strcmp(t->f[i].name, names[k]) == 0)
                next = (int32_t)i;
        if (next < 0)
            return -1;
        at = next;
    }
    return at;
}

static void expect_times(const struct fl_tree *t, const char *const *path, size_t n, double a,
                         double b)
{
    int32_t id = find(t, path, n);
    cr_assert_geq(id, 0, "no frame %s at depth %zu", path[n - 1], n);
    cr_expect_float_eq(fl_per(&t->f[id], 0), a, 1e-12, "%s: %g", path[n - 1], fl_per(&t->f[id], 0));
    cr_expect_float_eq(fl_per(&t->f[id], 1), b, 1e-12, "%s: %g", path[n - 1], fl_per(&t->f[id], 1));
}

Test(flame_focus, callees_merge_every_match_by_name_and_count_a_nested_match_once)
{
    struct fl_tree t;
    tree(&t);
    size_t matched = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(fl_focus(&t, "Conv", false, "t.db", &matched, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(matched, 3, "ConvA twice and ConvB; Conv_sub is inside ConvA");
    cr_expect_str_eq(t.f[0].name, "callees of /Conv/");
    /* the root: every outermost match once (4+1+1, 5+2+1) */
    cr_expect_float_eq(fl_per(&t.f[0], 0), 6, 1e-12);
    cr_expect_float_eq(fl_per(&t.f[0], 1), 8, 1e-12);
    expect_times(&t, (const char *const[]){"ConvA"}, 1, 5, 6);
    expect_times(&t, (const char *const[]){"ConvB"}, 1, 1, 2);
    expect_times(&t, (const char *const[]){"ConvA", "Conv_sub"}, 2, 1, 1);
    cr_expect_lt(find(&t, (const char *const[]){"relu"}, 1), 0, "not a callee of a match");
    cr_expect_lt(find(&t, (const char *const[]){"Conv_sub"}, 1), 0, "nested: not a root");
    cr_expect_eq(t.n, 4, "the root and three frames: %zu", t.n);
    cr_expect_eq(t.max_depth, 2);
    fl_tree_release(&t);
}

Test(flame_focus, callers_stack_each_match_under_its_callers_with_its_own_time)
{
    struct fl_tree t;
    tree(&t);
    size_t matched = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(fl_focus(&t, "^Conv[AB]$", true, "t.db", &matched, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(matched, 3);
    cr_expect_str_eq(t.f[0].name, "callers of /^Conv[AB]$/");
    cr_expect_float_eq(fl_per(&t.f[0], 0), 6, 1e-12);
    /* ConvA: called from execute (4, 5) and from load (1, 1), both on the
     * runtime track, each caller as wide as the match's time through it */
    expect_times(&t, (const char *const[]){"ConvA"}, 1, 5, 6);
    expect_times(&t, (const char *const[]){"ConvA", "execute"}, 2, 4, 5);
    expect_times(&t, (const char *const[]){"ConvA", "execute", "runtime"}, 3, 4, 5);
    expect_times(&t, (const char *const[]){"ConvA", "load", "runtime"}, 3, 1, 1);
    expect_times(&t, (const char *const[]){"ConvB", "load", "runtime"}, 3, 1, 2);
    cr_expect_lt(find(&t, (const char *const[]){"ConvA", "execute", "runtime", "all"}, 4), 0,
                 "the old root is not a caller");
    fl_tree_release(&t);
}

Test(flame_focus, a_bad_expression_or_no_match_leaves_the_tree_and_says_why)
{
    struct fl_tree t;
    tree(&t);
    size_t n = t.n, matched = 9;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_expect_eq(fl_focus(&t, "([", false, "t.db", &matched, &d), CP_ERR_INVALID);
    ct_assert_mentions(d.msg, "--focus ([", "not a regular expression", NULL);
    cp_diag_init(&d);
    cr_expect_eq(fl_focus(&t, "^nothing$", true, "t.db", &matched, &d), CP_ERR_INVALID);
    ct_assert_mentions(d.msg, "t.db", "no frame's name matches --focus ^nothing$", NULL);
    cr_expect_eq(matched, 0);
    cr_expect_eq(fl_focus(&t, "runtime", false, "t.db", &matched, &d), CP_ERR_INVALID,
                 "a track is not a frame to focus on");
    cr_expect_eq(t.n, n, "the tree is as it was");
    cr_expect_str_eq(t.f[0].name, "all");
    fl_tree_release(&t);
}

Test(flame_focus, the_command_draws_both_sides_of_a_run_and_refuses_what_it_cannot)
{
    char *model = cp_t_example("resnet_tiny");
    char *db = cp_t_path("t.db"), *svg = cp_t_path("f.svg"), *up = cp_t_path("c.svg");
    struct cp_run r;
    cp_run_cli(&r, "bench", model, "-n", "5", "--trace", db, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);

    /* the whole of every iteration's time under /Conv/ is the root */
    cp_run_cli(&r, "view", db, "--flame", "--group", "op", "--focus", "^Conv$", "-o", svg, "--json",
               NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(r.out, "\"focus\":\"^Conv$\"", "\"side\":\"callees\"", "\"matched\":1",
                       NULL);
    cp_run_release(&r);
    char *text = ct_read_text(svg);
    ct_assert_mentions(text, "callees of /^Conv$/", "/conv1/Conv", NULL);
    cr_expect_null(strstr(text, ">execute<"), "the caller is not drawn");
    free(text);

    cp_run_cli(&r, "view", db, "--flame", "--focus", "Conv", "--callers", "-o", up, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(r.out, "matched /Conv/: their callers", NULL);
    cp_run_release(&r);
    text = ct_read_text(up);
    ct_assert_mentions(text, "callers of /Conv/", "execute", NULL);
    free(text);

    /* refused: a bad expression, no match, --callers alone, on a timeline */
    static const char *const bad[][6] = {
        {"--flame", "--focus", "(", NULL},
        {"--flame", "--focus", "^no such frame$", NULL},
        {"--flame", "--callers", NULL},
        {"--timeline", "--focus", "Conv", NULL},
    };
    static const char *const why[] = {"not a regular expression", "no frame's name matches",
                                      "--callers needs --focus", "--focus is an option of"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cp_run_cli(&r, "view", db, bad[i][0], bad[i][1], bad[i][2], bad[i][3], "-o", "-", NULL);
        cr_expect_eq(r.exit_code, 2, "case %zu: exit %d", i, r.exit_code);
        cr_expect_not_null(strstr(r.err, why[i]), "case %zu: %s", i, r.err);
        cp_run_release(&r);
    }
    free(up);
    free(svg);
    free(db);
    free(model);
}

/* The widths of both iterations, as fl_build leaves a tree for the mean. */
static void choose_both(struct fl_tree *t)
{
    t->n_iters = 2;
    t->chosen = cp_calloc(2, sizeof *t->chosen);
    cr_assert_not_null(t->chosen);
    t->chosen[0] = t->chosen[1] = true;
    t->divisor = 2;
}

Test(flame_focus, left_heavy_puts_the_widest_child_first_and_name_order_stays_the_default)
{
    for (int heavy = 0; heavy < 2; heavy++) {
        struct fl_tree t;
        tree(&t);
        choose_both(&t);
        t.left_heavy = heavy;
        cr_assert_eq(fl_layout(&t), CP_OK);
        int32_t load = find(&t, (const char *const[]){"runtime", "load"}, 2);
        cr_assert_geq(load, 0);
        const struct fl_frame *f = &t.f[load];
        cr_assert_eq(f->n_kids, 2);
        /* ConvA 1 ms a mean, ConvB 1.5 ms: by name ConvA first, left-heavy ConvB */
        const char *first = t.f[f->kids[0]].name, *second = t.f[f->kids[1]].name;
        cr_expect_str_eq(first, heavy ? "ConvB" : "ConvA");
        cr_expect_str_eq(second, heavy ? "ConvA" : "ConvB");
        cr_expect_lt(t.f[f->kids[0]].x, t.f[f->kids[1]].x, "the first is on the left");
        cr_expect_float_eq(t.f[f->kids[0]].x, f->x, 1e-12, "from the parent's left edge");
        fl_tree_release(&t);
    }
}
