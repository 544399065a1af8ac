/* Test support: CLI-driving helpers (see cli.h). */
#include "support/cli.h"

#include "core/core.h"
#include "support/run.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FLAGS 32

char *cp_t_dir;

static char *vfmt(const char *f, va_list ap)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_vprintf(&b, f, ap);
    if (cp_buf_status(&b) != CP_OK) {
        fprintf(stderr, "cp_t_fmt: out of memory formatting '%s'\n", f);
        abort();
    }
    return cp_buf_steal(&b);
}

char *cp_t_fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = vfmt(f, ap);
    va_end(ap);
    return s;
}

void cp_t_scratch_setup(void)
{
    cp_t_dir = cp_scratch_dir();
    if (!cp_t_dir) {
        fprintf(stderr, "cp_t_scratch_setup: cannot create a scratch folder under /tmp\n");
        abort();
    }
}

void cp_t_scratch_close(void)
{
    if (!cp_t_dir)
        return;
    cp_scratch_remove(cp_t_dir);
    free(cp_t_dir);
    cp_t_dir = NULL;
}

char *cp_t_path(const char *name)
{
    return cp_t_fmt("%s/%s", cp_t_dir, name);
}

char *cp_t_example(const char *name)
{
    return cp_t_fmt("%s/examples/models/%s.onnx", CP_SOURCE_DIR, name);
}

/* ---- running the CLI ------------------------------------------------------- */

/* A command line for cp_run_argv: the binary, `fixed` words, then the
 * NULL-terminated words of `ap`. False when there are too many. */
struct cmd {
    char *argv[4 + 4 + MAX_FLAGS + 1];
    size_t n;
};

static void cmd_init(struct cmd *c, size_t n_fixed, char *const *fixed)
{
    c->n = 0;
    c->argv[c->n++] = (char *)CP_CLI;
    for (size_t i = 0; i < n_fixed; i++)
        c->argv[c->n++] = fixed[i];
    c->argv[c->n] = NULL;
}

static bool cmd_add_flags(struct cmd *c, va_list ap)
{
    const char *a;
    size_t added = 0;
    while ((a = va_arg(ap, const char *)) != NULL) {
        if (++added > MAX_FLAGS) {
            fprintf(stderr, "cp_t: more than %d flags\n", MAX_FLAGS);
            return false;
        }
        c->argv[c->n++] = (char *)a;
    }
    c->argv[c->n] = NULL;
    return true;
}

/* Print the command line and what came of it. */
static void report(const struct cmd *c, const struct cp_run *r, const char *what)
{
    fprintf(stderr, "cp_t: %s:", what);
    for (size_t i = 1; i < c->n; i++)
        fprintf(stderr, " %s", c->argv[i]);
    fprintf(stderr, "\n  exit %d, signal %d\n  stdout: %s\n  stderr: %s\n", r->exit_code, r->signal,
            r->out ? r->out : "", r->err ? r->err : "");
}

/* Run the command; true when it exits 0. Leaves the output in *r. */
static bool run_ok(const struct cmd *c, struct cp_run *r)
{
    cp_run_argv(r, c->argv);
    if (r->signal == 0 && r->exit_code == 0)
        return true;
    report(c, r, "command failed");
    return false;
}

static char *vconvert(const char *model, const char *base, va_list ap)
{
    char *mflag = cp_t_fmt("--model=%s", model);
    char *oflag = cp_t_fmt("--output=%s", base);
    char *fixed[] = {(char *)"convert", mflag, (char *)"--framework=5", oflag};
    struct cmd c;
    cmd_init(&c, 4, fixed);
    char *om = NULL;
    if (cmd_add_flags(&c, ap)) {
        struct cp_run r;
        if (run_ok(&c, &r)) {
            om = cp_t_fmt("%s.om", base);
            if (!cp_path_exists(om)) {
                report(&c, &r, "convert said ok but wrote no .om");
                free(om);
                om = NULL;
            }
        }
        cp_run_release(&r);
    }
    free(mflag);
    free(oflag);
    return om;
}

char *cp_t_vconvert(const char *dir, const char *name, const char *out, va_list flags)
{
    char *model = cp_t_example(name);
    char *base = cp_t_fmt("%s/%s", dir, out);
    char *om = vconvert(model, base, flags);
    free(model);
    free(base);
    return om;
}

char *cp_t_convert(const char *dir, const char *name, const char *out, ...)
{
    va_list ap;
    va_start(ap, out);
    char *om = cp_t_vconvert(dir, name, out, ap);
    va_end(ap);
    return om;
}

char *cp_t_convert_file(const char *onnx, const char *base, ...)
{
    va_list ap;
    va_start(ap, base);
    char *om = vconvert(onnx, base, ap);
    va_end(ap);
    return om;
}

char *cp_t_switch_file(const char *dir, const char *name, const char *text)
{
    char *path = cp_t_fmt("%s/%s", dir, name);
    char *flag = NULL;
    if (cp_t_write_file(path, text, strlen(text)))
        flag = cp_t_fmt("--fusion_switch_file=%s", path);
    free(path);
    return flag;
}

bool cp_t_bench_trace(const char *om, const char *trace, ...)
{
    char *fixed[] = {(char *)"bench", (char *)om};
    struct cmd c;
    cmd_init(&c, 2, fixed);
    va_list ap;
    va_start(ap, trace);
    bool ok = cmd_add_flags(&c, ap);
    va_end(ap);
    if (!ok)
        return false;
    c.argv[c.n++] = (char *)"--trace";
    c.argv[c.n++] = (char *)trace;
    c.argv[c.n] = NULL;
    struct cp_run r;
    ok = run_ok(&c, &r);
    if (ok && (!strstr(r.out, trace) || !cp_path_exists(trace))) {
        report(&c, &r, "bench does not name the trace or did not write it");
        ok = false;
    }
    cp_run_release(&r);
    return ok;
}

/* ---- files ------------------------------------------------------------------ */

json_t *cp_t_json(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text ? text : "", 0, &e);
    if (!j)
        fprintf(stderr, "cp_t_json: not JSON (%s at %d:%d): %s\n", e.text, e.line, e.column,
                text ? text : "(null)");
    return j;
}

json_t *cp_t_json_file(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j)
        fprintf(stderr, "cp_t_json_file: %s is not JSON: %s (line %d)\n", path, e.text, e.line);
    return j;
}

uint8_t *cp_t_read_file(const char *path, size_t *len)
{
    uint8_t *data = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_file_read(path, &data, len, &d) != CP_OK)
        fprintf(stderr, "cp_t_read_file: %s\n", d.msg);
    return data;
}

bool cp_t_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cp_t_write_file: cannot create %s\n", path);
        return false;
    }
    bool ok = fwrite(data, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    if (!ok)
        fprintf(stderr, "cp_t_write_file: cannot write %s\n", path);
    return ok;
}

/* ---- reading what the CLI printed -------------------------------------------- */

bool cp_t_has_line(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, prefix, n) == 0)
            return true;
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return false;
}

char *cp_t_section_value(const char *text, const char *section, const char *key)
{
    size_t slen = strlen(section), klen = strlen(key);
    bool inside = false;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (!inside) {
            inside = strncmp(line, section, slen) == 0;
        } else if (line[0] != ' ') {
            break;
        } else {
            const char *t = line;
            while (*t == ' ')
                t++;
            if ((size_t)(t - line) + klen < n && strncmp(t, key, klen) == 0 && t[klen] == ' ') {
                const char *v = t + klen;
                while (*v == ' ')
                    v++;
                const char *ve = line + n;
                while (ve > v && (ve[-1] == ' ' || ve[-1] == '\r'))
                    ve--;
                return cp_t_fmt("%.*s", (int)(ve - v), v);
            }
        }
        line = end ? end + 1 : NULL;
    }
    return NULL;
}

const char *cp_t_last_word(const char *s)
{
    const char *w = strrchr(s, ' ');
    return w ? w + 1 : s;
}

/* One word of a command line from *pp, into w; false on an open quote. */
static bool shell_word(const char **pp, struct cp_buf *w)
{
    const char *p = *pp;
    while (*p && *p != ' ') {
        if (*p == '\'' || *p == '"') {
            char q = *p++;
            while (*p && *p != q) {
                if (q == '"' && *p == '\\' && p[1])
                    p++;
                cp_buf_putc(w, *p++);
            }
            if (*p != q)
                return false;
            p++;
        } else if (*p == '\\' && p[1]) {
            cp_buf_putc(w, p[1]);
            p += 2;
        } else {
            cp_buf_putc(w, *p++);
        }
    }
    *pp = p;
    return true;
}

bool cp_t_shell_split(const char *line, char **words, size_t max, size_t *n)
{
    *n = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ')
            p++;
        if (!*p)
            return true;
        struct cp_buf w;
        cp_buf_init(&w);
        const char *why = *n == max ? "too many words" : !shell_word(&p, &w) ? "open quote" : NULL;
        if (!why && cp_buf_status(&w) != CP_OK)
            why = "out of memory";
        if (why) {
            fprintf(stderr, "cp_t_shell_split: %s in: %s\n", why, line);
            cp_buf_release(&w);
            while (*n > 0)
                free(words[--*n]);
            return false;
        }
        words[(*n)++] = cp_buf_steal(&w);
    }
}
