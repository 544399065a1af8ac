/* cannprof view: a flame graph, a differential flame graph, a topology or a
 * timeline, each one file that opens offline (view/view.h, docs/views.md). */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/json.h"
#include "rules/rules.h"
#include "view/view.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_FLAME = 1,
    OPT_DIFF,
    OPT_TOPOLOGY,
    OPT_TIMELINE,
    OPT_OUTPUT,
    OPT_GROUP,
    OPT_ITERATION,
    OPT_RUN_B,
    OPT_FORCE,
    OPT_MIN_CHANGE,
    OPT_WIDTH,
    OPT_TITLE,
    OPT_FIRST,
    OPT_COUNT,
    OPT_NO_FINDINGS,
    OPT_ALL_ITERATIONS,
    OPT_FOCUS,
    OPT_CALLERS,
    OPT_LEFT_HEAVY,
};

static const struct cp_opt own[] = {
    {"all-iterations", 0, CP_OPT_FLAG, OPT_ALL_ITERATIONS, NULL,
     "--flame, --diff: every measured iteration, not only those the interference probe found "
     "undisturbed (as validate compares them)"},
    {"callers", 0, CP_OPT_FLAG, OPT_CALLERS, NULL,
     "--focus: the matched frames' callers above them (an inverted flame graph), instead of "
     "their callees"},
    {"count", 0, CP_OPT_VALUE, OPT_COUNT, "K",
     "--timeline: how many iterations (1..16, default 1)"},
    {"diff", 0, CP_OPT_FLAG, OPT_DIFF, NULL,
     "a differential flame graph of A.db and B.db: B's widths, each frame coloured by its "
     "change and grey when the change is within the noise of its per-iteration times"},
    {"first", 0, CP_OPT_VALUE, OPT_FIRST, "N",
     "--timeline: the first iteration shown (default: the median one)"},
    {"flame", 0, CP_OPT_FLAG, OPT_FLAME, NULL,
     "an interactive SVG flame graph (search, zoom, tooltips)"},
    {"focus", 0, CP_OPT_VALUE, OPT_FOCUS, "REGEX",
     "--flame, --diff: only the frames whose names match (an extended regular expression) and "
     "what they call, merged under one root wherever they ran"},
    {"force", 0, CP_OPT_FLAG, OPT_FORCE, NULL, "--diff: draw runs of different models anyway"},
    {"group", 0, CP_OPT_VALUE, OPT_GROUP, "BY",
     "what kernels' frames are named by: layer (the stack as recorded, default), op (under "
     "their op type), onnx (the original ONNX nodes), pipeline (a flow's nodes)"},
    {"iteration", 0, CP_OPT_VALUE, OPT_ITERATION, "WHICH",
     "the widths: mean (the mean iteration, default), median (the median iteration), all "
     "(summed), or an iteration's number"},
    {"left-heavy", 0, CP_OPT_FLAG, OPT_LEFT_HEAVY, NULL,
     "--flame, --diff: each frame's children widest first (speedscope's left heavy), not in "
     "name order"},
    {"min-change", 0, CP_OPT_VALUE, OPT_MIN_CHANGE, "PCT",
     "--diff: the smallest change marked, even when significant (default 2%)"},
    {"no-findings", 0, CP_OPT_FLAG, OPT_NO_FINDINGS, NULL,
     "--topology of a trace: do not run analyze's rules to mark the nodes its findings name"},
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "FILE",
     "where to write (- for stdout; default: beside the input, .flame.svg, .diff.svg, "
     ".topology.svg or .timeline.html); --flame, --diff and --topology also write a still "
     "picture as .png or .pdf"},
    {"run-b", 0, CP_OPT_VALUE, OPT_RUN_B, "ID", "--diff: the run of B.db (default: its last)"},
    {"timeline", 0, CP_OPT_FLAG, OPT_TIMELINE, NULL,
     "a self-contained HTML timeline of one or a few iterations"},
    {"title", 0, CP_OPT_VALUE, OPT_TITLE, "TEXT", "the picture's title"},
    {"topology", 0, CP_OPT_FLAG, OPT_TOPOLOGY, NULL,
     "the graph of a trace's kernels, a .om or a flow, laid out by Graphviz"},
    {"width", 0, CP_OPT_VALUE, OPT_WIDTH, "PX", "a flame graph's width (default 1200)"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_ALPHA, "--diff: the family-wise error rate over the frames' tests (Holm; default "
                  "0.05)"},
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print what was drawn as JSON"},
    {CP_SO_RUN, "which run of the store (default: the last); --diff: the run of A.db"},
};

static const struct cp_command_opts OPTS = {
    .cmd = "view",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage = "usage: cannprof view TRACE.db --flame [-o F.svg] [--group layer|op|onnx|pipeline]\n"
             "                                   [--iteration mean|median|all|N]\n"
             "       cannprof view --diff A.db B.db [-o D.svg] [--force] [--min-change 2%]\n"
             "       cannprof view --topology TRACE.db|MODEL.om|FLOW.toml [-o T.svg|.png|.pdf]\n"
             "       cannprof view --timeline TRACE.db [-o T.html] [--first N] [--count K]\n\n"
             "Draw a trace (or a model, or a flow) as one self-contained file that opens\n"
             "offline: an SVG flame graph with search, zoom and tooltips; a differential\n"
             "flame graph whose frames are marked only when their change stands out of the\n"
             "noise of their per-iteration times; a Graphviz topology coloured by time\n"
             "share; an HTML timeline with tracks per layer and thread (docs/views.md).\n",
    .exit_codes = "0 drawn, 2 bad usage or input (an empty trace, a run without iterations, "
                  "two different models without --force), 3 environment failure (FILE cannot "
                  "be written)",
};

/* The default output beside the input: its name without .db, then ext. */
static char *default_output(const char *input, const char *ext)
{
    size_t n = strlen(input);
    const char *dot = strrchr(input, '.');
    const char *slash = strrchr(input, '/');
    if (dot && (!slash || dot > slash))
        n = (size_t)(dot - input);
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_append(&b, input, n);
    cp_buf_puts(&b, ext);
    return cp_buf_status(&b) == CP_OK ? cp_buf_steal(&b) : NULL;
}

/* Write the picture to `path`, or stdout for "-". */
static int write_out(const char *path, const struct cp_buf *b, struct cp_diag *d)
{
    if (strcmp(path, "-") == 0)
        return cp_out_buf(b, "view");
    if (cp_file_write_atomic(path, b->data, b->len, d) != CP_OK)
        return cp_cli_fail("view", d);
    return 0;
}

static int flame(const struct cp_args *a, bool diff, const char *out)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_flame_opts o;
    cp_flame_opts_init(&o);
    const char *g = cp_args_get(a, OPT_GROUP), *it = cp_args_get(a, OPT_ITERATION);
    char msg[256];
    if (g && !cp_flame_group_parse(g, &o.group)) {
        snprintf(msg, sizeof msg, "--group %.60s: use layer, op, onnx or pipeline", g);
        cp_cli_error("view", msg);
        return 2;
    }
    if (it && !cp_flame_iters_parse(it, &o.iters, &o.iteration)) {
        snprintf(msg, sizeof msg,
                 "--iteration %.60s: use mean, median, all or an iteration's number", it);
        cp_cli_error("view", msg);
        return 2;
    }
    const char *w = cp_args_get(a, OPT_WIDTH);
    if (w) {
        char *end = NULL;
        o.width = strtod(w, &end);
        if (*end || !(o.width >= 200 && o.width <= 20000)) {
            snprintf(msg, sizeof msg, "--width %.60s: a number of pixels from 200 to 20000", w);
            cp_cli_error("view", msg);
            return 2;
        }
    }
    const char *mc = cp_args_get(a, OPT_MIN_CHANGE);
    if (mc) {
        double pct;
        if (!cp_parse_percent(mc, 1000, &pct)) {
            snprintf(msg, sizeof msg, "--min-change %.60s: a percentage, e.g. 2%%", mc);
            cp_cli_error("view", msg);
            return 2;
        }
        o.min_change = pct > 0 ? pct / 100 : 1e-9;
    }
    o.fdr = cp_args_num(a, CP_SO_ALPHA, 0);
    o.force = cp_args_has(a, OPT_FORCE);
    o.all_iterations = cp_args_has(a, OPT_ALL_ITERATIONS);
    o.focus = cp_args_get(a, OPT_FOCUS);
    o.callers = cp_args_has(a, OPT_CALLERS);
    o.left_heavy = cp_args_has(a, OPT_LEFT_HEAVY);
    if (o.callers && !o.focus) {
        cp_cli_error("view", "--callers needs --focus REGEX: whose callers to draw");
        return 2;
    }
    /* -o F.png or F.pdf: the still picture, for a page or a slide */
    if (cp_path_has_suffix(out, ".png") || cp_path_has_suffix(out, ".pdf")) {
        o.still = true;
        o.still_format = cp_path_has_suffix(out, ".png") ? CP_CHART_PNG : CP_CHART_PDF;
    }
    o.title = cp_args_get(a, OPT_TITLE);
    int64_t run = cp_args_int(a, CP_SO_RUN, -1);
    struct cp_trace_store *sa = NULL, *sb = NULL;
    struct cp_buf b;
    cp_buf_init(&b);
    struct cp_flame_info info;
    enum cp_status st = cp_trace_store_open_ro(a->positional[0], &sa, &d);
    if (st == CP_OK && diff)
        st = cp_trace_store_open_ro(a->positional[1], &sb, &d);
    if (st == CP_OK && diff)
        st = cp_view_flame_diff(sa, sb, run, cp_args_int(a, OPT_RUN_B, -1), &o, &b, &info, &d);
    else if (st == CP_OK) {
        o.run_id = run;
        st = cp_view_flame(sa, &o, &b, &info, &d);
    }
    cp_trace_store_close(sa);
    cp_trace_store_close(sb);
    int rc = st == CP_OK ? write_out(out, &b, &d) : cp_cli_fail("view", &d);
    cp_buf_release(&b);
    if (rc != 0 || strcmp(out, "-") == 0)
        return rc;
    if (cp_args_has(a, CP_SO_JSON)) {
        json_t *j = json_object();
        bool ok = j && cp_json_set_str(j, "view", diff ? "diff" : "flame") &&
                  cp_json_set_str(j, "output", out) && cp_json_set_int(j, "run", info.run_id) &&
                  cp_json_set_int(j, "frames", (int64_t)info.frames) &&
                  cp_json_set_int(j, "iterations", (int64_t)info.iterations) &&
                  cp_json_set_num(j, "total_ms", info.total_ns / 1e6);
        if (ok && o.focus)
            ok = cp_json_set_str(j, "focus", o.focus) &&
                 cp_json_set_str(j, "side", o.callers ? "callers" : "callees") &&
                 cp_json_set_int(j, "matched", (int64_t)info.matched);
        if (ok && diff)
            ok = cp_json_set_int(j, "run_b", info.run_id_b) &&
                 cp_json_set_int(j, "slower", (int64_t)info.slower) &&
                 cp_json_set_int(j, "faster", (int64_t)info.faster) &&
                 cp_json_set_int(j, "within_noise", (int64_t)info.unchanged) &&
                 cp_json_set_int(j, "gone", (int64_t)info.gone);
        if (!ok) {
            json_decref(j);
            j = NULL;
        }
        return cp_out_json_take(j, "view");
    }
    if (diff)
        printf("view: %s (%zu frames; %zu significantly slower, %zu faster, %zu within noise, "
               "%zu gone)\n",
               out, info.frames, info.slower, info.faster, info.unchanged, info.gone);
    else
        printf("view: %s (%zu frames, %zu iteration%s, %.3f ms at the root)\n", out, info.frames,
               info.iterations, info.iterations == 1 ? "" : "s", info.total_ns / 1e6);
    if (o.focus)
        printf("view: %zu frame%s matched /%s/: their %s\n", info.matched,
               info.matched == 1 ? "" : "s", o.focus, o.callers ? "callers" : "callees");
    return 0;
}

/* Analyze's findings on a trace, as marks on the nodes each names. A trace
 * the rules cannot diagnose (a flow's run, an import without kernels) is
 * drawn without marks, and stderr says why. OUT: *marks (free each text and
 * node, then the array), *n. */
static void findings_marks(const char *path, int64_t run, struct cp_topology_mark **marks,
                           size_t *n)
{
    *marks = NULL;
    *n = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_diagnose_opts o = {.run_id = run, .calibrate = true};
    struct cp_diagnosis dg;
    if (cp_rules_diagnose(path, &o, &dg, &d) != CP_OK) {
        fprintf(stderr, "view: no findings marked: %s\n", d.msg);
        cp_diagnosis_release(&dg);
        return;
    }
    size_t cap = 0;
    for (size_t i = 0; i < dg.analysis.n; i++) {
        const struct cp_finding *f = &dg.analysis.findings[i];
        json_t *nodes = json_loads(f->nodes_json ? f->nodes_json : "[]", 0, NULL);
        char text[192];
        snprintf(text, sizeof text, "%zu. %.140s", i + 1, f->root_cause);
        for (size_t k = 0; json_is_array(nodes) && k < json_array_size(nodes); k++) {
            const char *node = json_string_value(json_array_get(nodes, k));
            if (!node)
                continue;
            if (*n == cap) {
                size_t c = cap ? 2 * cap : 16;
                struct cp_topology_mark *m = cp_realloc_array(*marks, c, sizeof *m);
                if (!m)
                    break;
                *marks = m;
                cap = c;
            }
            (*marks)[*n].node = cp_strdup(node);
            (*marks)[*n].text = cp_strdup(text);
            if ((*marks)[*n].node && (*marks)[*n].text)
                (*n)++;
            else {
                free((char *)(*marks)[*n].node);
                free((char *)(*marks)[*n].text);
            }
        }
        json_decref(nodes);
    }
    cp_diagnosis_release(&dg);
}

/* Whether the file is a trace store (SQLite), which findings can mark. */
static bool is_trace(const char *path)
{
    FILE *f = fopen(path, "rb");
    char head[16] = {0};
    bool yes = f && cp_trace_is_sqlite(head, fread(head, 1, sizeof head, f));
    if (f)
        fclose(f);
    return yes;
}

static int topology(const struct cp_args *a, const char *out)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_topology_opts o = {.run_id = cp_args_int(a, CP_SO_RUN, -1),
                                 .title = cp_args_get(a, OPT_TITLE)};
    struct cp_topology_mark *marks = NULL;
    size_t n_marks = 0;
    if (!cp_args_has(a, OPT_NO_FINDINGS) && is_trace(a->positional[0]))
        findings_marks(a->positional[0], o.run_id, &marks, &n_marks);
    o.marks = marks;
    o.n_marks = n_marks;
    /* -o T.png or T.pdf: Graphviz's layout drawn still by the chart module */
    if (cp_path_has_suffix(out, ".png") || cp_path_has_suffix(out, ".pdf")) {
        o.still = true;
        o.still_format = cp_path_has_suffix(out, ".png") ? CP_CHART_PNG : CP_CHART_PDF;
    }
    struct cp_topology_info info;
    memset(&info, 0, sizeof info);
    struct cp_buf b;
    cp_buf_init(&b);
    enum cp_status st = cp_view_topology(a->positional[0], &o, &b, &info, &d);
    int rc = st == CP_OK ? write_out(out, &b, &d) : cp_cli_fail("view", &d);
    cp_buf_release(&b);
    for (size_t i = 0; i < n_marks; i++) {
        free((char *)marks[i].node);
        free((char *)marks[i].text);
    }
    free(marks);
    if (rc != 0 || strcmp(out, "-") == 0)
        return rc;
    if (cp_args_has(a, CP_SO_JSON)) {
        json_t *j = json_object();
        if (!(j && cp_json_set_str(j, "view", "topology") && cp_json_set_str(j, "output", out) &&
              cp_json_set_str(j, "kind", info.kind ? info.kind : "") &&
              cp_json_set_int(j, "nodes", (int64_t)info.nodes) &&
              cp_json_set_int(j, "edges", (int64_t)info.edges) &&
              cp_json_set_int(j, "fused", (int64_t)info.fused) &&
              cp_json_set_int(j, "flagged", (int64_t)info.flagged))) {
            json_decref(j);
            j = NULL;
        }
        return cp_out_json_take(j, "view");
    }
    printf("view: %s (%s: %zu nodes, %zu edges, %zu fused, %zu marked by findings)\n", out,
           info.kind ? info.kind : "?", info.nodes, info.edges, info.fused, info.flagged);
    return 0;
}

static int timeline(const struct cp_args *a, const char *out)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_timeline_opts o = {.run_id = cp_args_int(a, CP_SO_RUN, -1),
                                 .first = -1,
                                 .count = 1,
                                 .title = cp_args_get(a, OPT_TITLE)};
    const char *first = cp_args_get(a, OPT_FIRST), *count = cp_args_get(a, OPT_COUNT);
    char *end = NULL;
    char msg[160];
    if (first) {
        o.first = strtoll(first, &end, 10);
        if (*end || o.first < 0) {
            snprintf(msg, sizeof msg, "--first %.60s: an iteration's number (0 or more)", first);
            cp_cli_error("view", msg);
            return 2;
        }
    }
    if (count) {
        o.count = strtoll(count, &end, 10);
        if (*end || o.count < 1 || o.count > 16) {
            snprintf(msg, sizeof msg, "--count %.60s: from 1 to 16 iterations", count);
            cp_cli_error("view", msg);
            return 2;
        }
    }
    struct cp_trace_store *s = NULL;
    struct cp_timeline_info info;
    memset(&info, 0, sizeof info);
    struct cp_buf b;
    cp_buf_init(&b);
    enum cp_status st = cp_trace_store_open_ro(a->positional[0], &s, &d);
    if (st == CP_OK)
        st = cp_view_timeline(s, &o, &b, &info, &d);
    cp_trace_store_close(s);
    int rc = st == CP_OK ? write_out(out, &b, &d) : cp_cli_fail("view", &d);
    cp_buf_release(&b);
    if (rc != 0 || strcmp(out, "-") == 0)
        return rc;
    if (cp_args_has(a, CP_SO_JSON)) {
        json_t *j = json_object();
        if (!(j && cp_json_set_str(j, "view", "timeline") && cp_json_set_str(j, "output", out) &&
              cp_json_set_int(j, "run", info.run_id) && cp_json_set_int(j, "first", info.first) &&
              cp_json_set_int(j, "count", info.count) &&
              cp_json_set_int(j, "events", (int64_t)info.events) &&
              cp_json_set_int(j, "tracks", (int64_t)info.tracks) &&
              cp_json_set_int(j, "flows", (int64_t)info.flows))) {
            json_decref(j);
            j = NULL;
        }
        return cp_out_json_take(j, "view");
    }
    printf("view: %s (iteration%s %lld..%lld: %zu events on %zu tracks, %zu flows)\n", out,
           info.count == 1 ? "" : "s", (long long)info.first,
           (long long)(info.first + info.count - 1), info.events, info.tracks, info.flows);
    return 0;
}

int cp_cmd_view(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("view", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    int kinds = cp_args_has(&args, OPT_FLAME) + cp_args_has(&args, OPT_DIFF) +
                cp_args_has(&args, OPT_TOPOLOGY) + cp_args_has(&args, OPT_TIMELINE);
    if (kinds != 1) {
        cp_cli_error("view", kinds ? "choose one of --flame, --diff, --topology, --timeline"
                                   : "say what to draw: --flame, --diff, --topology or "
                                     "--timeline");
        return 2;
    }
    bool diff = cp_args_has(&args, OPT_DIFF);
    if (args.n_positional != (diff ? 2u : 1u)) {
        cp_cli_error("view", diff ? "--diff takes two traces: A.db B.db"
                                  : "give exactly one input (TRACE.db, or for --topology a "
                                    ".om or a flow's .toml too)");
        return 2;
    }
    static const char *const only_flame[] = {"group", "iteration", "width",     "all-iterations",
                                             "focus", "callers",   "left-heavy"};
    static const int only_flame_id[] = {OPT_GROUP, OPT_ITERATION, OPT_WIDTH,     OPT_ALL_ITERATIONS,
                                        OPT_FOCUS, OPT_CALLERS,   OPT_LEFT_HEAVY};
    bool is_flame = diff || cp_args_has(&args, OPT_FLAME);
    for (size_t i = 0; i < sizeof only_flame_id / sizeof only_flame_id[0]; i++)
        if (!is_flame && cp_args_has(&args, only_flame_id[i])) {
            char msg[128];
            snprintf(msg, sizeof msg, "--%s is an option of --flame and --diff", only_flame[i]);
            cp_cli_error("view", msg);
            return 2;
        }
    if (!diff && (cp_args_has(&args, OPT_FORCE) || cp_args_has(&args, OPT_RUN_B) ||
                  cp_args_has(&args, OPT_MIN_CHANGE) || cp_args_has(&args, CP_SO_ALPHA))) {
        cp_cli_error("view", "--force, --run-b, --min-change and --alpha are options of --diff");
        return 2;
    }
    if (!cp_args_has(&args, OPT_TIMELINE) &&
        (cp_args_has(&args, OPT_FIRST) || cp_args_has(&args, OPT_COUNT))) {
        cp_cli_error("view", "--first and --count are options of --timeline");
        return 2;
    }
    const char *ext = diff                               ? ".diff.svg"
                      : cp_args_has(&args, OPT_FLAME)    ? ".flame.svg"
                      : cp_args_has(&args, OPT_TOPOLOGY) ? ".topology.svg"
                                                         : ".timeline.html";
    char *dflt = NULL;
    const char *out = cp_args_get(&args, OPT_OUTPUT);
    if (!out) {
        dflt = default_output(args.positional[diff ? 1 : 0], ext);
        if (!dflt) {
            cp_cli_error("view", "out of memory");
            return 3;
        }
        out = dflt;
    }
    int rc = is_flame                           ? flame(&args, diff, out)
             : cp_args_has(&args, OPT_TOPOLOGY) ? topology(&args, out)
                                                : timeline(&args, out);
    free(dflt);
    return rc;
}
