/* Chrome trace-event JSON as a stream of events: yajl's callback parser
 * over zlib's reader (which reads plain files as they are), a chunk at a
 * time, so a file of any size costs the memory of one event.
 *
 * The events are the top-level array, or the array under "traceEvents" of
 * the top-level object; the other scalars of that object (and of its
 * "distributedInfo" and first "deviceProperties" entry) go to the
 * handler's `top`. Raw control characters inside strings, which some
 * profilers write unescaped, are read as spaces and counted. */
#include "import/import_internal.h"

#include <yajl/yajl_parse.h>
#include <zlib.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK (1 << 20)

/* ---- values ------------------------------------------------------------------- */

bool cp_imp_val_is(const struct cp_imp_val *v, const char *s)
{
    size_t n = strlen(s);
    return v->s && v->len == n && memcmp(v->s, s, n) == 0;
}

/* v without leading and trailing blanks (spaces, tabs, CR, LF). */
static void trim(const struct cp_imp_val *v, const char **s, size_t *n)
{
    const char *p = v->s;
    size_t len = v->s ? v->len : 0;
    while (len && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) {
        p++;
        len--;
    }
    while (len &&
           (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '\r' || p[len - 1] == '\n'))
        len--;
    *s = p;
    *n = len;
}

bool cp_imp_val_num(const struct cp_imp_val *v, double *out)
{
    const char *s;
    size_t n;
    trim(v, &s, &n);
    if (n == 0 || n > 63)
        return false;
    char buf[64];
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end = NULL;
    errno = 0;
    double x = strtod(buf, &end);
    if (end != buf + n || errno == ERANGE || !isfinite(x))
        return false;
    *out = x;
    return true;
}

bool cp_imp_us_to_ns(const struct cp_imp_val *v, int64_t *ns)
{
    const char *s;
    size_t n;
    trim(v, &s, &n);
    if (n == 0)
        return false;
    size_t i = 0;
    bool neg = s[0] == '-';
    i += neg;
    /* digits[.digits] exactly, so that 1.7e15 us keeps its nanoseconds */
    int64_t whole = 0;
    size_t int_digits = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, int_digits++) {
        if (whole > (INT64_MAX / 1000 - 9) / 10)
            return false;
        whole = whole * 10 + (s[i] - '0');
    }
    int64_t frac = 0;
    int frac_digits = 0, round = 0;
    if (i < n && s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            if (frac_digits < 3) {
                frac = frac * 10 + (s[i] - '0');
                frac_digits++;
            } else if (frac_digits == 3) {
                round = s[i] >= '5';
                frac_digits++;
            }
        }
    }
    if (i == n && int_digits > 0) {
        for (int k = frac_digits > 3 ? 3 : frac_digits; k < 3; k++)
            frac *= 10;
        int64_t v_ns = whole * 1000 + frac + round;
        if (v_ns >= CP_IMP_MAX_NS)
            return false;
        *ns = neg ? -v_ns : v_ns;
        return true;
    }
    /* an exponent, or something else: the double's precision */
    double x;
    if (!cp_imp_val_num(v, &x))
        return false;
    x *= 1000.0;
    if (!(fabs(x) < (double)CP_IMP_MAX_NS))
        return false;
    *ns = (int64_t)llround(x);
    return true;
}

const struct cp_imp_val *cp_imp_arg(const struct cp_imp_event *e, const char *key)
{
    for (size_t i = 0; i < e->n_args; i++)
        if (strcmp(e->args[i].key, key) == 0)
            return &e->args[i].v;
    return NULL;
}

/* ---- the parse state -------------------------------------------------------------- */

enum field {
    F_NONE = 0,
    F_NAME,
    F_CAT,
    F_PH,
    F_TS,
    F_DUR,
    F_PID,
    F_TID,
    F_ID,
    F_ARGS,
    F_OTHER,
};

/* Where a value's text lives: an offset into the event's buffer. */
struct slot {
    size_t off, len;
    bool set, number;
};

struct reader {
    const struct cp_imp_handler *h;
    struct cp_imp_read_info *info;
    struct cp_diag *d;
    enum cp_status st;    /* the handler's status when it stopped the parse */
    int depth;            /* containers open */
    int ev_level;         /* the level of event objects (0: not in the events array) */
    int root_kind;        /* 0 none yet, 1 map, 2 array */
    bool in_dist, in_dev; /* in distributedInfo, in deviceProperties[0] */
    int dev_index;
    char top_key[128]; /* the current key of the top-level object */
    char sub_key[128]; /* of distributedInfo / deviceProperties[0] */
    /* the event being read */
    enum field field;
    bool in_args;
    struct slot f[F_OTHER];
    char *buf;
    size_t len, cap;
    size_t arg_key[CP_IMP_MAX_ARGS];
    struct slot arg_val[CP_IMP_MAX_ARGS];
    size_t n_args, args_dropped;
    size_t cur_arg_key; /* offset of the current key inside args */
    bool have_arg_key;
    uint64_t base; /* bytes before the current chunk */
    uint64_t n_events;
    struct cp_imp_event ev;
};

static bool keep(struct reader *r, const char *s, size_t n, size_t *off)
{
    if (r->len + n + 1 > r->cap) {
        size_t nc = r->cap ? r->cap : 4096;
        while (nc < r->len + n + 1)
            nc *= 2;
        char *b = realloc(r->buf, nc);
        if (!b)
            return false;
        r->buf = b;
        r->cap = nc;
    }
    memcpy(r->buf + r->len, s, n);
    r->buf[r->len + n] = '\0';
    *off = r->len;
    r->len += n + 1;
    return true;
}

static int oom(struct reader *r)
{
    r->st = cp_diag_set(r->d, CP_ERR_NOMEM, "out of memory reading an event");
    return 0;
}

static struct cp_imp_val val_of(const struct reader *r, const struct slot *s)
{
    struct cp_imp_val v = {NULL, 0, false};
    if (s->set) {
        v.s = r->buf + s->off;
        v.len = s->len;
        v.number = s->number;
    }
    return v;
}

static void event_start(struct reader *r)
{
    memset(r->f, 0, sizeof r->f);
    r->len = 0;
    r->n_args = 0;
    r->args_dropped = 0;
    r->field = F_NONE;
    r->in_args = false;
    r->have_arg_key = false;
}

static int event_end(struct reader *r)
{
    struct cp_imp_event *e = &r->ev;
    e->name = val_of(r, &r->f[F_NAME]);
    e->cat = val_of(r, &r->f[F_CAT]);
    e->ph = val_of(r, &r->f[F_PH]);
    e->ts = val_of(r, &r->f[F_TS]);
    e->dur = val_of(r, &r->f[F_DUR]);
    e->pid = val_of(r, &r->f[F_PID]);
    e->tid = val_of(r, &r->f[F_TID]);
    e->id = val_of(r, &r->f[F_ID]);
    e->n_args = r->n_args;
    for (size_t i = 0; i < r->n_args; i++) {
        e->args[i].key = r->buf + r->arg_key[i];
        e->args[i].v = val_of(r, &r->arg_val[i]);
    }
    e->args_dropped = r->args_dropped;
    e->offset = r->base;
    e->index = r->n_events++;
    if (r->h->event && (r->st = r->h->event(r->h->u, e, r->d)) != CP_OK)
        return 0;
    return 1;
}

static enum field field_of(const unsigned char *k, size_t n)
{
    switch (n) {
    case 2:
        return k[0] == 'p' && k[1] == 'h'   ? F_PH
               : k[0] == 't' && k[1] == 's' ? F_TS
               : k[0] == 'i' && k[1] == 'd' ? F_ID
                                            : F_OTHER;
    case 3:
        return memcmp(k, "cat", 3) == 0   ? F_CAT
               : memcmp(k, "dur", 3) == 0 ? F_DUR
               : memcmp(k, "pid", 3) == 0 ? F_PID
               : memcmp(k, "tid", 3) == 0 ? F_TID
                                          : F_OTHER;
    case 4:
        return memcmp(k, "name", 4) == 0 ? F_NAME : memcmp(k, "args", 4) == 0 ? F_ARGS : F_OTHER;
    default:
        return F_OTHER;
    }
}

/* A scalar: an event's field or argument, or a top-level value. */
static int scalar(struct reader *r, const char *s, size_t n, bool number)
{
    if (r->ev_level && r->depth == r->ev_level) {
        if (r->field > F_NONE && r->field < F_ARGS) {
            struct slot *sl = &r->f[r->field];
            if (!keep(r, s, n, &sl->off))
                return oom(r);
            sl->len = n;
            sl->set = true;
            sl->number = number;
        }
        return 1;
    }
    if (r->ev_level && r->in_args && r->depth == r->ev_level + 1) {
        if (!r->have_arg_key)
            return 1;
        r->have_arg_key = false;
        if (r->n_args == CP_IMP_MAX_ARGS) {
            r->args_dropped++;
            return 1;
        }
        struct slot *sl = &r->arg_val[r->n_args];
        if (!keep(r, s, n, &sl->off))
            return oom(r);
        sl->len = n;
        sl->set = true;
        sl->number = number;
        r->arg_key[r->n_args++] = r->cur_arg_key;
        return 1;
    }
    if (r->ev_level && r->depth > r->ev_level)
        return 1; /* nested inside an event */
    /* top level */
    if (!r->h->top)
        return 1;
    char key[300];
    if (r->root_kind == 1 && r->depth == 1)
        snprintf(key, sizeof key, "%s", r->top_key);
    else if (r->in_dist && r->depth == 2)
        snprintf(key, sizeof key, "distributedInfo.%s", r->sub_key);
    else if (r->in_dev && r->depth == 3)
        snprintf(key, sizeof key, "deviceProperties.0.%s", r->sub_key);
    else
        return 1;
    struct cp_imp_val v = {s, n, number};
    if ((r->st = r->h->top(r->h->u, key, &v, r->d)) != CP_OK)
        return 0;
    return 1;
}

static int cb_null(void *u)
{
    return scalar(u, "null", 4, false);
}

static int cb_bool(void *u, int b)
{
    return scalar(u, b ? "true" : "false", b ? 4 : 5, false);
}

static int cb_number(void *u, const char *s, size_t n)
{
    return scalar(u, s, n, true);
}

static int cb_string(void *u, const unsigned char *s, size_t n)
{
    return scalar(u, (const char *)s, n, false);
}

static int cb_map_key(void *u, const unsigned char *k, size_t n)
{
    struct reader *r = u;
    if (r->ev_level && r->depth == r->ev_level) {
        r->field = field_of(k, n);
        return 1;
    }
    if (r->ev_level && r->in_args && r->depth == r->ev_level + 1) {
        if (!keep(r, (const char *)k, n, &r->cur_arg_key))
            return oom(r);
        r->have_arg_key = true;
        return 1;
    }
    if (r->root_kind == 1 && r->depth == 1) {
        size_t m = n < sizeof r->top_key - 1 ? n : sizeof r->top_key - 1;
        memcpy(r->top_key, k, m);
        r->top_key[m] = '\0';
    } else if ((r->in_dist && r->depth == 2) || (r->in_dev && r->depth == 3)) {
        size_t m = n < sizeof r->sub_key - 1 ? n : sizeof r->sub_key - 1;
        memcpy(r->sub_key, k, m);
        r->sub_key[m] = '\0';
    }
    return 1;
}

static int cb_start_map(void *u)
{
    struct reader *r = u;
    int level = r->depth + 1;
    if (r->depth == 0) {
        r->root_kind = 1;
    } else if (r->ev_level && level == r->ev_level) {
        event_start(r);
    } else if (r->ev_level && level == r->ev_level + 1 && r->depth == r->ev_level) {
        if (r->field == F_ARGS) {
            r->in_args = true;
            r->have_arg_key = false;
        }
    } else if (r->ev_level && level > r->ev_level) {
        if (r->in_args && r->depth == r->ev_level + 1 && r->have_arg_key) {
            r->have_arg_key = false;
            r->args_dropped++;
        }
    } else if (r->root_kind == 1 && level == 2 && strcmp(r->top_key, "distributedInfo") == 0) {
        r->in_dist = true;
    } else if (r->root_kind == 1 && level == 3 && strcmp(r->top_key, "deviceProperties") == 0) {
        r->in_dev = r->dev_index++ == 0;
    }
    r->depth = level;
    return 1;
}

static int cb_end_map(void *u)
{
    struct reader *r = u;
    int level = r->depth;
    r->depth--;
    if (r->ev_level && level == r->ev_level)
        return event_end(r);
    if (r->ev_level && level == r->ev_level + 1 && r->in_args)
        r->in_args = false;
    if (level == 2 && r->in_dist)
        r->in_dist = false;
    if (level == 3 && r->in_dev)
        r->in_dev = false;
    return 1;
}

static int cb_start_array(void *u)
{
    struct reader *r = u;
    int level = r->depth + 1;
    if (r->depth == 0) {
        r->root_kind = 2;
        r->ev_level = 2;
        r->info->root_array = true;
        r->info->found_events = true;
    } else if (r->root_kind == 1 && level == 2 && !r->ev_level &&
               strcmp(r->top_key, "traceEvents") == 0) {
        r->ev_level = 3;
        r->info->found_events = true;
    } else if (r->ev_level && r->in_args && r->depth == r->ev_level + 1 && r->have_arg_key) {
        r->have_arg_key = false;
        r->args_dropped++;
    }
    r->depth = level;
    return 1;
}

static int cb_end_array(void *u)
{
    struct reader *r = u;
    int level = r->depth;
    r->depth--;
    if (r->ev_level && level == r->ev_level - 1) {
        /* the events array closed: later top-level keys are plain again */
        r->ev_level = r->root_kind == 2 ? r->ev_level : 0;
    }
    return 1;
}

static const yajl_callbacks CALLBACKS = {
    cb_null,      cb_bool,    NULL,       NULL,           cb_number,    cb_string,
    cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array,
};

/* ---- feeding the parser ------------------------------------------------------------- */

/* Raw control bytes inside strings become spaces (JSON forbids them; some
 * profilers write them). in_str/esc carry the state across chunks. */
static uint64_t scrub(unsigned char *p, size_t n, bool *in_str, bool *esc)
{
    /* what ends a run of plain string bytes: a quote, a backslash, a
     * control character */
    static bool stop[256];
    if (!stop['"']) {
        for (int c = 0; c < 0x20; c++)
            stop[c] = true;
        stop['"'] = stop['\\'] = true;
    }
    uint64_t fixed = 0;
    size_t i = 0;
    while (i < n) {
        if (*esc) {
            *esc = false;
            i++;
            continue;
        }
        if (!*in_str) {
            const unsigned char *q = memchr(p + i, '"', n - i);
            if (!q)
                break;
            i = (size_t)(q - p) + 1;
            *in_str = true;
            continue;
        }
        while (i < n && !stop[p[i]])
            i++;
        if (i == n)
            break;
        unsigned char c = p[i];
        if (c == '\\')
            *esc = true;
        else if (c == '"')
            *in_str = false;
        else {
            p[i] = ' ';
            fixed++;
        }
        i++;
    }
    return fixed;
}

static enum cp_status parse_error(yajl_handle y, struct reader *r, const struct cp_imp_src *src,
                                  const unsigned char *chunk, size_t n, bool at_end,
                                  struct cp_diag *d)
{
    if (r->st != CP_OK)
        return r->st; /* the handler stopped it and said why */
    uint64_t off = r->base + (at_end ? 0 : yajl_get_bytes_consumed(y));
    unsigned char *msg = yajl_get_error(y, 0, chunk, n);
    char text[200];
    snprintf(text, sizeof text, "%s", msg ? (const char *)msg : "malformed JSON");
    if (msg)
        yajl_free_error(y, msg);
    for (char *p = text; *p; p++)
        if (*p == '\n')
            *p = ' ';
    size_t tl = strlen(text);
    while (tl && text[tl - 1] == ' ')
        text[--tl] = '\0';
    if (at_end)
        return cp_diag_set(
            d, CP_ERR_INVALID, "%s: the JSON ends early, after %llu bytes%s (%s): a truncated file",
            src->name, (unsigned long long)off, src->path ? " (decompressed)" : "", text);
    return cp_diag_set(d, CP_ERR_INVALID, "%s: byte %llu%s: not well-formed JSON: %s", src->name,
                       (unsigned long long)off, src->path ? " (decompressed)" : "", text);
}

enum cp_status cp_imp_read_chrome(const struct cp_imp_src *src, const struct cp_imp_handler *h,
                                  struct cp_imp_read_info *info, struct cp_diag *d)
{
    memset(info, 0, sizeof *info);
    struct reader *r = calloc(1, sizeof *r);
    unsigned char *chunk = malloc(CHUNK);
    if (!r || !chunk) {
        free(r);
        free(chunk);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", src->name);
    }
    r->h = h;
    r->info = info;
    r->d = d;
    gzFile gz = NULL;
    if (src->path) {
        gz = gzopen(src->path, "rb");
        if (!gz) {
            free(chunk);
            free(r);
            return cp_diag_set(d, CP_ERR_IO, "%s: cannot open: %s", src->name, strerror(errno));
        }
        gzbuffer(gz, CHUNK);
    }
    yajl_handle y = yajl_alloc(&CALLBACKS, NULL, r);
    enum cp_status st = CP_OK;
    if (!y) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", src->name);
        goto out;
    }
    yajl_config(y, yajl_dont_validate_strings, 1);
    bool in_str = false, esc = false;
    size_t pos = 0;
    for (;;) {
        size_t n;
        if (gz) {
            int got = gzread(gz, chunk, CHUNK);
            if (got < 0) {
                int zerr = 0;
                const char *m = gzerror(gz, &zerr);
                st = cp_diag_set(d, zerr == Z_DATA_ERROR ? CP_ERR_INVALID : CP_ERR_IO,
                                 "%s: after %llu bytes: %s%s", src->name,
                                 (unsigned long long)r->base, m ? m : "read error",
                                 zerr == Z_DATA_ERROR ? " (corrupt compressed data)" : "");
                goto out;
            }
            n = (size_t)got;
        } else {
            n = src->size - pos < CHUNK ? src->size - pos : CHUNK;
            memcpy(chunk, (const char *)src->data + pos, n);
            pos += n;
        }
        if (n == 0)
            break;
        info->control_bytes += scrub(chunk, n, &in_str, &esc);
        yajl_status ys = yajl_parse(y, chunk, n);
        if (ys != yajl_status_ok) {
            st = parse_error(y, r, src, chunk, n, false, d);
            goto out;
        }
        r->base += n;
        info->bytes = r->base;
    }
    if (gz && !gzeof(gz)) {
        st = cp_diag_set(d, CP_ERR_IO, "%s: read error after %llu bytes", src->name,
                         (unsigned long long)r->base);
        goto out;
    }
    if (yajl_complete_parse(y) != yajl_status_ok) {
        st = parse_error(y, r, src, chunk, 0, true, d);
        goto out;
    }
    if (r->depth != 0 || r->root_kind == 0)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: %s", src->name,
                         r->root_kind == 0 ? "empty: no JSON value" : "the JSON ends early");
out:
    if (y)
        yajl_free(y);
    if (gz)
        gzclose(gz);
    free(r->buf);
    free(r);
    free(chunk);
    return st;
}
