/*
 * Conformance: ONNX's own backend test cases, run through the whole stack.
 *
 * The cases come from Debian's libonnx-testdata (data/node,
 * data/pytorch-converted, data/pytorch-operator, data/simple under
 * /usr/share/libonnx-testdata; CP_ONNX_TESTDATA overrides the root). Each is
 * a model.onnx and test_data_set_N/{input,output}_K.pb. A case is imported
 * with its test inputs' shapes, verified, inferred, wrapped in a model and
 * planned twice, once with the fast kernels and once with the reference
 * kernels only; each plan runs on the inputs and every output is compared
 * with ONNX's default tolerances: |actual - expected| <= atol + rtol *
 * |expected|, rtol 1e-3, atol 1e-7 for floats (NaN matches NaN), exact for
 * integers and bools, and shapes must match.
 *
 * A case is skipped, with its cause counted, when it needs what cannprof
 * does not claim to support: an op outside the op table (or outside the
 * opsets its row of the importer's table covers), an opset outside 1..21, a dtype or value kind we
 * do not take, or a node no kernel accepts with its attributes and dtypes. Anything else that goes
 * wrong on a case whose ops are all supported is a failure: a mismatch, an error from the importer,
 * inference or the runtime, a crash, a hang, or (under ASan) a leak. Each case runs in its own
 * forked process, so a crashing kernel fails that case only.
 *
 * When a case fails and some of its inputs set an output's shape (Reshape's
 * shape, Slice's starts, Resize's sizes...), it is run once more with those
 * inputs folded into initializers, and the failure says whether the outputs
 * then match: that tells a planner that cannot take runtime-valued shapes
 * from a wrong kernel. The case still counts as failed.
 *
 * The summary is printed as "conformance summary: N passed, M failed, K
 * skipped": the two-word prefix keeps CI from mistaking it for a test
 * runner's own closing "N passed, M failed" line.
 *
 * CP_CONFORMANCE_FILTER=substring runs only the matching cases;
 * CP_CONFORMANCE_VERBOSE=1 prints every case's outcome.
 */
#include "onnx/onnx.h"
#include "runner/runner.h"

#include "proto/onnx.pb-c.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TESTDATA_ROOT   "/usr/share/libonnx-testdata/data"
#define OPSET_MIN       1
#define OPSET_MAX       21
#define RTOL            1e-3
#define ATOL            1e-7
#define CASE_TIMEOUT_MS 60000
#define MAX_IO          CP_MAX_INPUT_SHAPES
#define PATH_LEN        2048

static const char *const categories[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

enum outcome { OUT_PASS = 0, OUT_FAIL = 1, OUT_SKIP = 2 };

/* What a child sends back. For a skip, `text` holds its causes separated by
 * '\n' (each counted once); for a failure, one line of detail. */
struct case_result {
    int outcome;
    char text[1024];
};

/* ---- small helpers -------------------------------------------------------- */

/* LeakSanitizer (NULL in a normal build). A child checks its own leaks
 * before it _exits, since LeakSanitizer only runs at exit(). In a forked
 * child it cannot scan the parent's stack, so what the parent allocates
 * (case lists, the tally) is made invisible to it with lsan_off/lsan_on. */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));
extern void __lsan_disable(void) __attribute__((weak));
extern void __lsan_enable(void) __attribute__((weak));

static void lsan_off(void)
{
    if (__lsan_disable)
        __lsan_disable();
}

static void lsan_on(void)
{
    if (__lsan_enable)
        __lsan_enable();
}

static void add_cause(struct case_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_cause(struct case_result *r, const char *fmt, ...)
{
    if (r->outcome == OUT_FAIL)
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One line each, no duplicates within a case. */
    for (char *p = line; *p; p++)
        if (*p == '\n')
            *p = ' ';
    size_t n = strlen(r->text);
    const char *s = r->text;
    while ((s = strstr(s, line)) != NULL) {
        size_t k = strlen(line);
        if ((s == r->text || s[-1] == '\n') && (s[k] == '\n' || s[k] == '\0'))
            return;
        s += k;
    }
    if (n + 1 + strlen(line) < sizeof r->text) /* whole lines only */
        snprintf(r->text + n, sizeof r->text - n, "%s%s", n ? "\n" : "", line);
    r->outcome = OUT_SKIP;
}

static void set_fail(struct case_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_fail(struct case_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text, sizeof r->text, fmt, ap);
    va_end(ap);
    for (char *p = r->text; *p; p++)
        if (*p == '\n')
            *p = ' ';
    r->outcome = OUT_FAIL;
}

/* Add to a failure's text (truncating when full). */
static void append(struct case_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void append(struct case_result *r, const char *fmt, ...)
{
    size_t n = strlen(r->text);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text + n, sizeof r->text - n, fmt, ap);
    va_end(ap);
}

/* A diag message without the leading "path: " that names where it came
 * from, when it starts with `prefix`. */
static const char *strip_prefix(const char *msg, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(msg, prefix, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

/* The op type in a runtime message "... node 'NAME' (OpType) ...", or NULL. */
static bool op_from_message(const char *msg, char *op, size_t n)
{
    const char *p = strstr(msg, "node '");
    if (!p)
        return false;
    p = strstr(p + 6, "' (");
    if (!p)
        return false;
    p += 3;
    const char *e = strchr(p, ')');
    if (!e || (size_t)(e - p) >= n)
        return false;
    memcpy(op, p, (size_t)(e - p));
    op[e - p] = '\0';
    return true;
}

static const char *onnx_type_name(int t)
{
    static const char *const names[] = {
        "UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",   "INT16",
        "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16",  "DOUBLE",
        "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
    };
    return t >= 0 && (size_t)t < sizeof names / sizeof *names ? names[t] : "an unknown type";
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in `dir` starting with `prefix` (NULL-terminated array;
 * caller frees each and the array). */
static char **list_dir(const char *dir, const char *prefix, size_t *n)
{
    *n = 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return NULL;
    size_t cap = 16;
    char **v = malloc(cap * sizeof *v);
    struct dirent *e;
    while (v && (e = readdir(dp)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (*n + 1 >= cap) {
            char **w = realloc(v, (cap *= 2) * sizeof *v);
            if (!w)
                break;
            v = w;
        }
        v[(*n)++] = strdup(e->d_name);
    }
    closedir(dp);
    if (v) {
        qsort(v, *n, sizeof *v, cmp_str);
        v[*n] = NULL;
    }
    return v;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* ---- first pass over the model: what would make us skip ----------------- */

struct model_io {
    size_t n_in, n_out;
    const char *in[MAX_IO + 1];
    const char *out[MAX_IO + 1];
    enum cp_dtype in_dtype[MAX_IO + 1], out_dtype[MAX_IO + 1]; /* declared; UNDEFINED if none */
};

static enum cp_dtype declared_dtype(const Onnx__ValueInfoProto *vi)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
        !tp->tensor_type->has_elem_type)
        return CP_DTYPE_UNDEFINED;
    return cp_dtype_from_onnx(tp->tensor_type->elem_type);
}

static void check_value_type(const Onnx__ValueInfoProto *vi, struct case_result *r)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp)
        return;
    switch (tp->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        if (tp->tensor_type && tp->tensor_type->has_elem_type &&
            cp_dtype_from_onnx(tp->tensor_type->elem_type) == CP_DTYPE_UNDEFINED)
            add_cause(r, "unsupported dtype: %s", onnx_type_name(tp->tensor_type->elem_type));
        break;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        add_cause(r, "unsupported value kind: sequence");
        break;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        add_cause(r, "unsupported value kind: map");
        break;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        add_cause(r, "unsupported value kind: optional");
        break;
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        add_cause(r, "unsupported value kind: sparse tensor");
        break;
    default:
        break;
    }
}

static bool is_default_domain(const char *dom)
{
    return !dom || !dom[0] || strcmp(dom, "ai.onnx") == 0;
}

/* Opset, ops, and value types. Fills `io` with the graph inputs the test
 * data feeds (those that are not initializers) and the outputs. */
/* Generators whose values are the test data's own random draws: ours are
 * deterministic but not numpy's. */
static bool is_random_op(const char *op)
{
    static const char *const ops[] = {"Bernoulli",        "Multinomial",   "RandomNormal",
                                      "RandomNormalLike", "RandomUniform", "RandomUniformLike"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(ops[i], op) == 0)
            return true;
    return false;
}

static void first_pass(const Onnx__ModelProto *mp, struct model_io *io, struct case_result *r)
{
    int64_t opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++)
        if (is_default_domain(mp->opset_import[i]->domain) && mp->opset_import[i]->has_version)
            opset = mp->opset_import[i]->version;
    if (opset < 0)
        add_cause(r, "no default-domain opset (only other domains)");
    else if (opset < OPSET_MIN || opset > OPSET_MAX)
        add_cause(r, "opset %lld (outside %d..%d)", (long long)opset, OPSET_MIN, OPSET_MAX);
    const Onnx__GraphProto *g = mp->graph;
    if (!g) {
        add_cause(r, "model has no graph");
        return;
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        const char *op = n->op_type ? n->op_type : "";
        if (!is_default_domain(n->domain))
            add_cause(r, "unsupported op: %s::%s", n->domain, op);
        else if (cp_op_from_name(op) == CP_OP_UNKNOWN && !cp_onnx_op_known(op))
            add_cause(r, "unsupported op: %s", op);
        else if (is_random_op(op))
            add_cause(r, "random output (%s): not comparable with the test data", op);
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (t->has_data_type && cp_dtype_from_onnx(t->data_type) == CP_DTYPE_UNDEFINED)
            add_cause(r, "unsupported dtype: %s", onnx_type_name(t->data_type));
    }
    if (g->n_sparse_initializer)
        add_cause(r, "unsupported value kind: sparse tensor");
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        bool init = false;
        for (size_t k = 0; k < g->n_initializer && !init; k++)
            init = g->initializer[k]->name && vi->name &&
                   strcmp(g->initializer[k]->name, vi->name) == 0;
        if (init)
            continue;
        check_value_type(vi, r);
        if (io->n_in < MAX_IO) {
            io->in[io->n_in] = vi->name ? vi->name : "";
            io->in_dtype[io->n_in] = declared_dtype(vi);
        }
        io->n_in++;
    }
    for (size_t i = 0; i < g->n_output; i++) {
        check_value_type(g->output[i], r);
        if (io->n_out < MAX_IO) {
            io->out[io->n_out] = g->output[i]->name ? g->output[i]->name : "";
            io->out_dtype[io->n_out] = declared_dtype(g->output[i]);
        }
        io->n_out++;
    }
    if (io->n_in > MAX_IO || io->n_out > MAX_IO)
        add_cause(r, "more than %d inputs or outputs", MAX_IO);
}

/* ---- comparing ------------------------------------------------------------- */

static double f16_value(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v = exp == 0    ? ldexp(man, -24)
               : exp == 31 ? (man ? NAN : INFINITY)
                           : ldexp(man | 0x400, exp - 25);
    return (h & 0x8000) ? -v : v;
}

static double element(const struct cp_host_tensor *t, size_t i)
{
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case CP_DTYPE_F32: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    case CP_DTYPE_F16:
    case CP_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        if (t->dtype == CP_DTYPE_F16)
            return f16_value(h);
        uint32_t x = (uint32_t)h << 16;
        float f;
        memcpy(&f, &x, 4);
        return f;
    }
    case CP_DTYPE_I8:
        return (int8_t)p[i];
    case CP_DTYPE_U8:
    case CP_DTYPE_BOOL:
        return p[i];
    case CP_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case CP_DTYPE_I64: {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        return (double)v;
    }
    default:
        return cp_elem_load_f64(p, t->dtype, (int64_t)i);
    }
}

static void shape_text(const struct cp_host_tensor *t, char *out, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(out, n, "(");
    for (int i = 0; i < t->rank && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, i ? ", %lld" : "%lld", (long long)t->dims[i]);
    if (k < n)
        snprintf(out + k, n - k, ")");
}

/* True when `act` matches `exp`; otherwise `why` says where first. */
static bool compare(const struct cp_host_tensor *exp, const struct cp_host_tensor *act, char *why,
                    size_t n)
{
    char se[128], sa[128];
    shape_text(exp, se, sizeof se);
    shape_text(act, sa, sizeof sa);
    if (exp->dtype != act->dtype) {
        snprintf(why, n, "dtype %s, expected %s", cp_dtype_name(act->dtype),
                 cp_dtype_name(exp->dtype));
        return false;
    }
    bool same = exp->rank == act->rank;
    for (int i = 0; same && i < exp->rank; i++)
        same = exp->dims[i] == act->dims[i];
    if (!same) {
        snprintf(why, n, "shape %s, expected %s", sa, se);
        return false;
    }
    if (act->nbytes != exp->nbytes) {
        snprintf(why, n, "%zu bytes, expected %zu", act->nbytes, exp->nbytes);
        return false;
    }
    size_t numel = exp->nbytes / cp_dtype_size(exp->dtype);
    bool is_float = cp_dtype_is_float(exp->dtype);
    for (size_t i = 0; i < numel; i++) {
        double e = element(exp, i), a = element(act, i);
        bool ok;
        if (!is_float)
            ok = cp_dtype_size(exp->dtype) == 8 ? memcmp((const uint8_t *)exp->data + 8 * i,
                                                         (const uint8_t *)act->data + 8 * i, 8) == 0
                                                : e == a;
        else if (isnan(e))
            ok = isnan(a);
        else if (isinf(e))
            ok = a == e;
        else
            ok = fabs(a - e) <= ATOL + RTOL * fabs(e);
        if (!ok) {
            snprintf(why, n, "index %zu: expected %.9g, actual %.9g", i, e, a);
            return false;
        }
    }
    return true;
}

/* ---- one case, in the child ---------------------------------------------- */

struct set_data {
    struct cp_host_tensor in[MAX_IO];
    struct cp_host_tensor out[MAX_IO];
    size_t n_in, n_out;
};

static void set_data_release(struct set_data *s)
{
    for (size_t i = 0; i < MAX_IO; i++) {
        cp_host_tensor_release(&s->in[i]);
        cp_host_tensor_release(&s->out[i]);
    }
}

/* Read input_K.pb / output_K.pb of one data set. False when the case ends
 * (skip or failure recorded in r). */
static bool read_set(const char *set_dir, const struct model_io *io, struct set_data *s,
                     struct case_result *r)
{
    memset(s, 0, sizeof *s);
    for (int pass = 0; pass < 2; pass++) {
        size_t want = pass ? io->n_out : io->n_in;
        for (size_t k = 0; k < want; k++) {
            char path[PATH_LEN];
            if (snprintf(path, sizeof path, "%s/%s_%zu.pb", set_dir, pass ? "output" : "input",
                         k) >= PATH_LEN) {
                set_fail(r, "path too long");
                return false;
            }
            if (!cp_path_exists(path)) {
                if (pass == 0)
                    add_cause(r, "test data omits an optional input");
                else
                    set_fail(r, "%s is missing", path);
                return false;
            }
            struct cp_diag d;
            cp_diag_init(&d);
            struct cp_host_tensor *t = pass ? &s->out[k] : &s->in[k];
            enum cp_status st = cp_tensor_read_file(path, t, &d);
            if (st == CP_ERR_UNSUPPORTED) {
                /* Group with the model's own dtype refusals. */
                const char *dt = strstr(d.msg, "dtype ");
                if (dt)
                    add_cause(r, "unsupported dtype: %.*s", (int)strcspn(dt + 6, " ,;"), dt + 6);
                else
                    add_cause(r, "unsupported test data: %s", strip_prefix(d.msg, path));
                return false;
            }
            if (st != CP_OK) {
                set_fail(r, "reading test data: %s", d.msg);
                return false;
            }
            /* ONNX 1.12 stores bfloat16 test data as UINT16 bit patterns
             * (NumPy has no bfloat16). */
            enum cp_dtype want_dt = pass ? io->out_dtype[k] : io->in_dtype[k];
            if (t->dtype == CP_DTYPE_U16 && want_dt == CP_DTYPE_BF16)
                t->dtype = CP_DTYPE_BF16;
        }
    }
    s->n_in = io->n_in;
    s->n_out = io->n_out;
    return true;
}

/* Plan, run and compare in one kernel mode. */
static void run_mode(struct cp_model *m, const struct model_io *io, const struct set_data *s,
                     const struct cp_input_shape *shapes, size_t n_shapes, bool reference_only,
                     const char *set, struct case_result *r)
{
    const char *mode = reference_only ? "reference kernels" : "fast kernels";
    struct cp_plan_options po = {.input_shapes = shapes,
                                 .n_input_shapes = n_shapes,
                                 .buffer_optimize = -1,
                                 .reference_only = reference_only};
    struct cp_plan *p = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_plan_create(m, &po, &p, &d);
    if (st == CP_ERR_UNSUPPORTED) {
        char op[64];
        if (op_from_message(d.msg, op, sizeof op))
            add_cause(r, "no kernel for %s with these attributes/dtypes", op);
        else
            add_cause(r, "no kernel: %s", d.msg);
        return;
    }
    if (st != CP_OK) {
        set_fail(r, "%s: plan (%s): %s", set, mode, d.msg);
        return;
    }
    for (size_t i = 0; i < cp_plan_n_inputs(p); i++) {
        const struct cp_tensor *pt = cp_plan_input(p, i);
        size_t k = 0;
        while (k < s->n_in && strcmp(io->in[k], pt->name) != 0)
            k++;
        if (k == s->n_in) {
            set_fail(r, "%s: plan input '%s' is not among the model's inputs", set, pt->name);
            goto out_free_plan;
        }
        if ((st = cp_plan_set_input(p, i, &s->in[k], &d)) != CP_OK) {
            set_fail(r, "%s: set input (%s): %s", set, mode, d.msg);
            goto out_free_plan;
        }
    }
    if ((st = cp_plan_run(p, -1, &d)) != CP_OK) {
        set_fail(r, "%s: run (%s): %s", set, mode, d.msg);
        goto out_free_plan;
    }
    for (size_t k = 0; k < s->n_out; k++) {
        size_t i = 0;
        while (i < cp_plan_n_outputs(p) && strcmp(cp_plan_output(p, i)->name, io->out[k]) != 0)
            i++;
        if (i == cp_plan_n_outputs(p)) {
            set_fail(r, "%s: output '%s' is not among the plan's outputs", set, io->out[k]);
            goto out_free_plan;
        }
        struct cp_host_tensor got;
        memset(&got, 0, sizeof got);
        if ((st = cp_plan_get_output(p, i, &got, &d)) != CP_OK) {
            set_fail(r, "%s: get output (%s): %s", set, mode, d.msg);
            goto out_free_plan;
        }
        char why[512];
        bool ok = compare(&s->out[k], &got, why, sizeof why);
        cp_host_tensor_release(&got);
        if (!ok) {
            set_fail(r, "%s: output '%s' (%s): %s", set, io->out[k], mode, why);
            goto out_free_plan;
        }
    }
out_free_plan:
    cp_plan_free(p);
}

/* Verify, infer and wrap `g` (taken over) in a model, then plan, run and
 * compare in both kernel modes. `in_shapes` are the plan's input shapes. */
static void run_graph(struct cp_runtime *rt, struct cp_graph *g, const struct model_io *io,
                      const struct set_data *s, const struct cp_input_shape *in_shapes,
                      size_t n_shapes, const char *set, struct case_result *r)
{
    struct cp_diag d;
    cp_diag_init(&d);
    const char *stage = "verify";
    enum cp_status st = cp_graph_verify(g, &d);
    if (st == CP_OK && (stage = "compact", st = cp_graph_compact(g, &d)) == CP_OK)
        stage = "infer", st = cp_graph_infer(g, &d);
    if (st != CP_OK) {
        if (st == CP_ERR_UNSUPPORTED)
            add_cause(r, "%s: %s", stage, d.msg);
        else
            set_fail(r, "%s: %s: %s", set, stage, d.msg);
        cp_graph_free(g);
        return;
    }
    struct cp_model *m = NULL;
    st = cp_model_from_graph(rt, g, NULL, &m, &d); /* takes g */
    if (st == CP_ERR_UNSUPPORTED) {
        char op[64];
        if (op_from_message(d.msg, op, sizeof op))
            add_cause(r, "no kernel for %s", op);
        else
            add_cause(r, "model: %s", d.msg);
        return;
    }
    if (st != CP_OK) {
        set_fail(r, "%s: model: %s", set, d.msg);
        return;
    }
    run_mode(m, io, s, in_shapes, n_shapes, false, set, r);
    if (r->outcome == OUT_PASS)
        run_mode(m, io, s, in_shapes, n_shapes, true, set, r);
    cp_model_free(m);
}

/* Input slots whose values decide an output's shape. */
static bool is_shape_slot(const char *op, size_t slot)
{
    static const struct {
        const char *op;
        unsigned mask; /* bit i: input i */
    } slots[] = {
        {"ConstantOfShape", 1u << 0},
        {"Expand", 1u << 1},
        {"Pad", 1u << 1},
        {"Range", 7u},
        {"ReduceMax", 1u << 1},
        {"ReduceMean", 1u << 1},
        {"ReduceSum", 1u << 1},
        {"Reshape", 1u << 1},
        {"Resize", 7u << 1},
        {"Slice", 15u << 1},
        {"Split", 1u << 1},
        {"Squeeze", 1u << 1},
        {"Unsqueeze", 1u << 1},
    };
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++)
        if (strcmp(slots[i].op, op) == 0)
            return slot < 32 && (slots[i].mask >> slot & 1u);
    return false;
}

/* Which test inputs feed a shape slot, directly or through other nodes
 * (Cast -> Range in the window functions): bit k for input k. Nodes are
 * walked backwards from the shape slots, so a node whose output reaches a
 * slot marks all its inputs. */
static bool name_in(const char *name, const char **set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(set[i], name) == 0)
            return true;
    return false;
}

static unsigned shape_inputs(const Onnx__ModelProto *mp, const struct model_io *io)
{
    unsigned mask = 0;
    const Onnx__GraphProto *g = mp->graph;
    size_t cap = 0, n_need = 0;
    for (size_t i = 0; i < g->n_node; i++)
        cap += g->node[i]->n_input;
    const char **need = calloc(cap ? cap : 1, sizeof *need);
    if (!need)
        return 0;
    for (size_t i = g->n_node; i-- > 0;) {
        const Onnx__NodeProto *n = g->node[i];
        if (!is_default_domain(n->domain) || !n->op_type)
            continue;
        /* Shape and Size read only the shape, known without the values. */
        bool feeds = false,
             by_shape = strcmp(n->op_type, "Shape") == 0 || strcmp(n->op_type, "Size") == 0;
        for (size_t j = 0; j < n->n_output && !feeds && !by_shape; j++)
            feeds = n->output[j] && name_in(n->output[j], need, n_need);
        for (size_t j = 0; j < n->n_input; j++) {
            if (!n->input[j] || !*n->input[j] || (!feeds && !is_shape_slot(n->op_type, j)))
                continue;
            if (!name_in(n->input[j], need, n_need))
                need[n_need++] = n->input[j];
        }
    }
    for (size_t k = 0; k < io->n_in; k++)
        if (name_in(io->in[k], need, n_need))
            mask |= 1u << k;
    free(need);
    return mask;
}

/* The model with the inputs in `fold` turned into initializers holding the
 * test data. OUT: *buf (caller frees), *len. */
static bool fold_inputs(const Onnx__ModelProto *mp, const struct model_io *io,
                        const struct set_data *s, unsigned fold, uint8_t **buf, size_t *len)
{
    const Onnx__GraphProto *g0 = mp->graph;
    Onnx__GraphProto g = *g0;
    Onnx__ModelProto m = *mp;
    m.graph = &g;
    Onnx__TensorProto tps[MAX_IO];
    size_t n_new = 0;
    g.input = calloc(g0->n_input + 1, sizeof *g.input);
    g.initializer = calloc(g0->n_initializer + MAX_IO + 1, sizeof *g.initializer);
    bool ok = g.input && g.initializer;
    if (!ok)
        goto out;
    g.n_input = 0;
    for (size_t i = 0; i < g0->n_input; i++) {
        size_t k = 0;
        while (k < io->n_in && strcmp(io->in[k], g0->input[i]->name ? g0->input[i]->name : ""))
            k++;
        if (k < io->n_in && (fold >> k & 1u))
            continue;
        g.input[g.n_input++] = g0->input[i];
    }
    if (g0->n_initializer)
        memcpy(g.initializer, g0->initializer, g0->n_initializer * sizeof *g.initializer);
    for (size_t k = 0; k < io->n_in; k++) {
        if (!(fold >> k & 1u))
            continue;
        Onnx__TensorProto *t = &tps[n_new];
        onnx__tensor_proto__init(t);
        t->name = (char *)io->in[k];
        t->n_dims = (size_t)s->in[k].rank;
        t->dims = (int64_t *)s->in[k].dims;
        t->has_data_type = 1;
        t->data_type = cp_dtype_to_onnx(s->in[k].dtype);
        t->has_raw_data = 1;
        t->raw_data.len = s->in[k].nbytes;
        t->raw_data.data = s->in[k].data;
        g.initializer[g0->n_initializer + n_new++] = t;
    }
    g.n_initializer = g0->n_initializer + n_new;
    *len = onnx__model_proto__get_packed_size(&m);
    *buf = malloc(*len ? *len : 1);
    ok = *buf != NULL;
    if (ok)
        onnx__model_proto__pack(&m, *buf);
out:
    free(g.input);
    free(g.initializer);
    return ok;
}

/* Shapes of the inputs not in `fold`, for the importer and the plan. */
static size_t input_shapes(const struct model_io *io, const struct set_data *s, unsigned fold,
                           struct cp_input_shape *shapes)
{
    size_t n = 0;
    memset(shapes, 0, MAX_IO * sizeof *shapes);
    for (size_t k = 0; k < s->n_in; k++) {
        if (fold >> k & 1u)
            continue;
        snprintf(shapes[n].name, sizeof shapes[n].name, "%s", io->in[k]);
        shapes[n].rank = s->in[k].rank;
        memcpy(shapes[n].dims, s->in[k].dims, sizeof shapes[n].dims);
        n++;
    }
    return n;
}

/* One data set: import with the test inputs' shapes and run. When that
 * fails and some inputs set a shape (Reshape's shape, Slice's starts...),
 * which a plan of static shapes cannot take at run time, run again with
 * those inputs folded into constants and say in the failure whether the
 * kernels were right then, so the report tells planner from kernel. */
static void run_set(struct cp_runtime *rt, const Onnx__ModelProto *mp, const char *case_dir,
                    const char *model_path, const char *set_dir, const char *set,
                    const struct model_io *io, struct case_result *r)
{
    struct set_data s;
    struct cp_input_shape shapes[MAX_IO];
    if (!read_set(set_dir, io, &s, r))
        goto out_release;
    size_t n_shapes = input_shapes(io, &s, 0, shapes);
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_onnx_import(model_path, shapes, n_shapes, &g, NULL, &d);
    if (st == CP_ERR_UNSUPPORTED) {
        add_cause(r, "importer: %s", strip_prefix(d.msg, model_path));
        goto out_release;
    }
    if (st == CP_ERR_INVALID && strstr(d.msg, "--input_shape gives input")) {
        /* A few ONNX 1.12 cases (CastLike's expanded forms) feed data whose
         * rank contradicts the model's declared input; ONNX Runtime refuses
         * them as well. */
        add_cause(r, "test data contradicts the model's declared input shape");
        goto out_release;
    }
    if (st != CP_OK) {
        set_fail(r, "%s: import: %s", set, strip_prefix(d.msg, model_path));
        goto out_release;
    }
    run_graph(rt, g, io, &s, shapes, n_shapes, set, r);
    unsigned fold = shape_inputs(mp, io);
    if (r->outcome != OUT_FAIL || !fold)
        goto out_release;

    struct case_result r2;
    memset(&r2, 0, sizeof r2);
    uint8_t *buf = NULL;
    size_t len = 0;
    char names[256] = "";
    for (size_t k = 0, w = 0; k < io->n_in; k++)
        if ((fold >> k & 1u) && w < sizeof names)
            w += (size_t)snprintf(names + w, sizeof names - w, "%s'%s'", w ? ", " : "", io->in[k]);
    if (!fold_inputs(mp, io, &s, fold, &buf, &len)) {
        set_fail(&r2, "out of memory");
    } else {
        n_shapes = input_shapes(io, &s, fold, shapes);
        cp_diag_init(&d);
        st = cp_onnx_import_buffer(buf, len, case_dir, model_path, shapes, n_shapes, &g, &d);
        free(buf);
        if (st != CP_OK)
            set_fail(&r2, "import: %s", strip_prefix(d.msg, model_path));
        else
            run_graph(rt, g, io, &s, shapes, n_shapes, set, &r2);
    }
    if (r2.outcome == OUT_PASS && strstr(r->text, "the plan needs both to be known")) {
        /* Not a wrong result: a shape that only the input's value decides,
         * which a static plan refuses (as it says); counted as a skip. */
        r->outcome = OUT_PASS;
        r->text[0] = '\0';
        add_cause(r, "output shape set by a runtime input value (static plans only)");
    } else if (r2.outcome == OUT_PASS)
        append(r,
               " [with %s folded to constants the outputs match: only the runtime-valued shape "
               "is the problem]",
               names);
    else
        append(r, " [with %s folded to constants: %s]", names,
               r2.outcome == OUT_SKIP ? "skipped" : r2.text);
out_release:
    set_data_release(&s);
}

static void run_case(const char *case_dir, struct case_result *r)
{
    memset(r, 0, sizeof *r);
    char model_path[PATH_LEN];
    if (snprintf(model_path, sizeof model_path, "%s/model.onnx", case_dir) >= PATH_LEN) {
        set_fail(r, "path too long");
        return;
    }
    uint8_t *bytes = NULL;
    size_t len = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_file_read(model_path, &bytes, &len, &d) != CP_OK) {
        set_fail(r, "%s", d.msg);
        return;
    }
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, bytes);
    free(bytes);
    if (!mp) {
        set_fail(r, "model.onnx does not parse as a ModelProto");
        return;
    }
    struct model_io io;
    memset(&io, 0, sizeof io);
    first_pass(mp, &io, r);
    if (r->outcome != OUT_PASS)
        goto out_free_model;

    size_t n_sets;
    char **sets = list_dir(case_dir, "test_data_set_", &n_sets);
    if (!sets || n_sets == 0) {
        set_fail(r, "no test_data_set_N folder");
        goto out_free_sets;
    }
    struct cp_runtime *rt = NULL;
    struct cp_runtime_options ro = {.threads = 2, .trace = NULL};
    if (cp_runtime_create(&ro, &rt, &d) != CP_OK) {
        set_fail(r, "runtime: %s", d.msg);
        goto out_free_sets;
    }
    for (size_t i = 0; i < n_sets && r->outcome == OUT_PASS; i++) {
        char set_dir[PATH_LEN];
        if (snprintf(set_dir, sizeof set_dir, "%s/%s", case_dir, sets[i]) >= PATH_LEN) {
            set_fail(r, "path too long");
            break;
        }
        run_set(rt, mp, case_dir, model_path, set_dir, sets[i], &io, r);
    }
    cp_runtime_free(rt);
out_free_sets:
    free_list(sets, n_sets);
out_free_model:
    onnx__model_proto__free_unpacked(mp, NULL);
}

/* ---- the parent: fork per case, tally ----------------------------------- */

struct tally {
    size_t passed, failed, skipped;
    struct cause {
        char *text;
        size_t count;
    } * causes;
    size_t n_causes, cap_causes;
    char **failures;
    size_t n_failures, cap_failures;
};

static void tally_cause(struct tally *t, const char *text)
{
    lsan_off();
    for (size_t i = 0; i < t->n_causes; i++)
        if (strcmp(t->causes[i].text, text) == 0) {
            t->causes[i].count++;
            lsan_on();
            return;
        }
    if (t->n_causes == t->cap_causes) {
        t->cap_causes = t->cap_causes ? 2 * t->cap_causes : 64;
        t->causes = realloc(t->causes, t->cap_causes * sizeof *t->causes);
        cr_assert_not_null(t->causes);
    }
    t->causes[t->n_causes].text = strdup(text);
    t->causes[t->n_causes++].count = 1;
    lsan_on();
}

static void tally_failure(struct tally *t, const char *name, const char *detail)
{
    lsan_off();
    if (t->n_failures == t->cap_failures) {
        t->cap_failures = t->cap_failures ? 2 * t->cap_failures : 64;
        t->failures = realloc(t->failures, t->cap_failures * sizeof *t->failures);
        cr_assert_not_null(t->failures);
    }
    size_t n = strlen(name) + strlen(detail) + 4;
    char *s = malloc(n);
    cr_assert_not_null(s);
    snprintf(s, n, "%s: %s", name, detail);
    t->failures[t->n_failures++] = s;
    lsan_on();
}

static int cmp_cause(const void *a, const void *b)
{
    const struct cause *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->text, y->text);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* In the child, after the case: whether it leaked. LeakSanitizer warns in
 * every forked child that it cannot suspend the parent's thread, so its
 * output goes to a scratch file and reaches stderr only with a leak to
 * report. No allocation here: the child's stack is not scanned. */
static bool child_leaks(void)
{
    if (!__lsan_do_recoverable_leak_check)
        return false;
    char tmpl[] = "/tmp/cp_conformance_lsanXXXXXX";
    int fd = mkstemp(tmpl);
    int saved = fd >= 0 ? dup(2) : -1;
    if (fd < 0 || saved < 0)
        return __lsan_do_recoverable_leak_check() != 0;
    unlink(tmpl);
    dup2(fd, 2);
    bool leaked = __lsan_do_recoverable_leak_check() != 0;
    dup2(saved, 2);
    close(saved);
    if (leaked && lseek(fd, 0, SEEK_SET) == 0) {
        char buf[4096];
        ssize_t k;
        while ((k = read(fd, buf, sizeof buf)) > 0)
            if (write(2, buf, (size_t)k) != k)
                break;
    }
    close(fd);
    return leaked;
}

/* Run one case in a child; a crash, hang or leak is a failure of that
 * case. */
static void fork_case(const char *case_dir, struct case_result *r)
{
    memset(r, 0, sizeof *r);
    int fds[2];
    if (pipe(fds) != 0) {
        set_fail(r, "pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        set_fail(r, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        struct case_result res;
        run_case(case_dir, &res);
        if (child_leaks() && res.outcome != OUT_FAIL)
            set_fail(&res, "leaks memory (LeakSanitizer's report is on stderr)");
        const char *p = (const char *)&res;
        size_t left = sizeof res;
        while (left) {
            ssize_t k = write(fds[1], p, left);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            p += k;
            left -= (size_t)k;
        }
        _exit(0); /* not exit(): Criterion's handlers belong to the parent */
    }
    close(fds[1]);
    size_t got = 0;
    bool timed_out = false;
    uint64_t deadline = now_ms() + CASE_TIMEOUT_MS;
    while (got < sizeof *r) {
        uint64_t t = now_ms();
        if (t >= deadline) {
            timed_out = true;
            break;
        }
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(deadline - t));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            timed_out = pr == 0;
            break;
        }
        ssize_t k = read(fds[0], (char *)r + got, sizeof *r - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fds[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out) {
        set_fail(r, "timed out after %d s", CASE_TIMEOUT_MS / 1000);
    } else if (got != sizeof *r) {
        if (WIFSIGNALED(status))
            set_fail(r, "crashed with signal %d (%s)", WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        else
            set_fail(r, "exited with status %d without a result",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    } else {
        r->text[sizeof r->text - 1] = '\0';
    }
}

Test(conformance, onnx_backend_test_cases, .timeout = 0)
{
    const char *root = getenv("CP_ONNX_TESTDATA");
    if (!root || !*root)
        root = TESTDATA_ROOT;
    const char *filter = getenv("CP_CONFORMANCE_FILTER");
    const char *verbose = getenv("CP_CONFORMANCE_VERBOSE");
    struct stat sb;
    cr_assert(stat(root, &sb) == 0 && S_ISDIR(sb.st_mode),
              "%s not found: install Debian's libonnx-testdata (scripts/deps.sh does)", root);

    struct tally t;
    memset(&t, 0, sizeof t);
    uint64_t t0 = now_ms();
    for (size_t c = 0; c < sizeof categories / sizeof *categories; c++) {
        char cat_dir[PATH_LEN];
        cr_assert_lt(snprintf(cat_dir, sizeof cat_dir, "%s/%s", root, categories[c]), PATH_LEN);
        size_t n;
        lsan_off();
        char **cases = list_dir(cat_dir, "test_", &n);
        lsan_on();
        cr_assert(cases && n > 0, "no test cases under %s", cat_dir);
        for (size_t i = 0; i < n; i++) {
            char name[PATH_LEN], dir[PATH_LEN];
            cr_assert_lt(snprintf(name, sizeof name, "%s/%s", categories[c], cases[i]), PATH_LEN);
            if (filter && *filter && !strstr(name, filter))
                continue;
            cr_assert_lt(snprintf(dir, sizeof dir, "%s/%s", cat_dir, cases[i]), PATH_LEN);
            struct case_result r;
            fork_case(dir, &r);
            if (verbose && *verbose && *verbose != '0')
                printf("%s: %s%s%s\n", name,
                       r.outcome == OUT_PASS   ? "pass"
                       : r.outcome == OUT_SKIP ? "skip"
                                               : "FAIL",
                       r.text[0] ? " - " : "", r.text);
            if (r.outcome == OUT_PASS) {
                t.passed++;
            } else if (r.outcome == OUT_SKIP) {
                t.skipped++;
                for (char *line = strtok(r.text, "\n"); line; line = strtok(NULL, "\n"))
                    tally_cause(&t, line);
            } else {
                t.failed++;
                tally_failure(&t, name, r.text);
            }
        }
        free_list(cases, n);
    }

    if (t.n_causes)
        qsort(t.causes, t.n_causes, sizeof *t.causes, cmp_cause);
    printf("conformance summary: %zu passed, %zu failed, %zu skipped\n", t.passed, t.failed,
           t.skipped);
    printf("(%zu cases in %.1f s, each in its own process, fast and reference kernels)\n",
           t.passed + t.failed + t.skipped, (double)(now_ms() - t0) / 1000.0);
    if (t.n_causes)
        printf("skipped cases by cause (a case may have several causes):\n");
    for (size_t i = 0; i < t.n_causes; i++)
        printf("  %5zu  %s\n", t.causes[i].count, t.causes[i].text);
    if (t.n_failures)
        printf("failed cases (first mismatch or error):\n");
    for (size_t i = 0; i < t.n_failures; i++)
        printf("  %s\n", t.failures[i]);
    fflush(stdout);

    size_t failed = t.failed, passed = t.passed;
    for (size_t i = 0; i < t.n_causes; i++)
        free(t.causes[i].text);
    free(t.causes);
    for (size_t i = 0; i < t.n_failures; i++)
        free(t.failures[i]);
    free(t.failures);
    cr_assert_eq(failed, 0, "%zu conformance case(s) failed (listed above)", failed);
    if (!filter || !*filter)
        cr_assert_gt(passed, 0, "no conformance case passed");
}
