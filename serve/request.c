/* A /v1/infer request's body read into a job's inputs
 * (serve/serve_internal.h): raw (a JSON header line, then the tensors'
 * bytes) or multipart (one .npy per input); the connection's state. */
#include "serve/serve_internal.h"
#include "core/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum MHD_Result sv_on_part(void *cls, enum MHD_ValueKind kind, const char *key,
                           const char *filename, const char *content_type,
                           const char *transfer_encoding, const char *data, uint64_t off,
                           size_t size)
{
    (void)kind;
    (void)filename;
    (void)content_type;
    (void)transfer_encoding;
    (void)off;
    struct conn *c = cls;
    size_t i = 0;
    while (i < c->n_parts && strcmp(c->part[i].name, key) != 0)
        i++;
    if (i == c->n_parts) {
        if (c->n_parts == MAX_PARTS || !(c->part[i].name = cp_strdup(key)))
            return MHD_NO;
        cp_buf_init(&c->part[i].data);
        c->n_parts++;
    }
    cp_buf_append(&c->part[i].data, data, size);
    return cp_buf_status(&c->part[i].data) == CP_OK ? MHD_YES : MHD_NO;
}

void sv_free_conn(struct conn *c)
{
    if (!c)
        return;
    if (c->pp)
        MHD_destroy_post_processor(c->pp);
    for (size_t i = 0; i < c->n_parts; i++) {
        free(c->part[i].name);
        cp_buf_release(&c->part[i].data);
    }
    cp_buf_release(&c->body);
    free(c);
}

bool sv_parse_raw(struct server *sv, struct conn *c, struct job *j, char *err, size_t n_err)
{
    const char *body = c->body.data ? c->body.data : "";
    size_t len = c->body.len;
    const char *nl = memchr(body, '\n', len);
    if (!nl) {
        snprintf(err, n_err, "the body starts with a JSON header line ({\"inputs\": [...]})");
        return false;
    }
    json_error_t e;
    json_t *h = json_loadb(body, (size_t)(nl - body), 0, &e);
    json_t *ins = json_object_get(h, "inputs");
    if (!json_is_array(ins) || json_array_size(ins) != sv->n_in) {
        snprintf(err, n_err, "the header needs \"inputs\": a list of %zu (name, dtype, shape)",
                 sv->n_in);
        json_decref(h);
        return false;
    }
    size_t at = (size_t)(nl - body) + 1;
    for (size_t i = 0; i < sv->n_in; i++) {
        const struct cp_tensor *pt = cp_plan_input(sv->s.plan, i);
        json_t *o = json_array_get(ins, i);
        const char *dt = json_string_value(json_object_get(o, "dtype"));
        if (!dt || cp_dtype_from_name(dt) != pt->dtype) {
            snprintf(err, n_err, "input %s: dtype %s, the model takes %s", pt->name,
                     dt ? dt : "(none)", cp_dtype_name(pt->dtype));
            json_decref(h);
            return false;
        }
        if (len - at < sv->slice_in[i]) {
            snprintf(err, n_err, "input %s: %zu bytes left in the body, it takes %zu", pt->name,
                     len - at, sv->slice_in[i]);
            json_decref(h);
            return false;
        }
        struct cp_host_tensor *t = &j->in[i];
        snprintf(t->name, sizeof t->name, "%s", pt->name);
        t->dtype = pt->dtype;
        t->nbytes = sv->slice_in[i];
        /* the input stays in the request's body, which lives until the
         * answer is sent: borrowed, not copied */
        t->data = c->body.data + at;
        j->in_borrowed = true;
        at += t->nbytes;
    }
    json_decref(h);
    if (at != len) {
        snprintf(err, n_err, "%zu bytes after the last input", len - at);
        return false;
    }
    return true;
}

/* The request's inputs from multipart parts, one .npy per input name. */
bool sv_parse_parts(struct server *sv, struct conn *c, struct job *j, char *err, size_t n_err)
{
    for (size_t i = 0; i < sv->n_in; i++) {
        const struct cp_tensor *pt = cp_plan_input(sv->s.plan, i);
        size_t k = 0;
        while (k < c->n_parts && strcmp(c->part[k].name, pt->name) != 0)
            k++;
        if (k == c->n_parts) {
            snprintf(err, n_err, "no part named %s (one .npy per input)", pt->name);
            return false;
        }
        struct cp_diag d;
        cp_diag_init(&d);
        if (cp_tensor_read_buffer(pt->name, c->part[k].data.data, c->part[k].data.len, &j->in[i],
                                  &d) != CP_OK) {
            snprintf(err, n_err, "%.380s", d.msg);
            return false;
        }
        if (j->in[i].dtype != pt->dtype || j->in[i].nbytes != sv->slice_in[i]) {
            snprintf(err, n_err, "input %s: %s of %zu bytes, the model takes %s of %zu", pt->name,
                     cp_dtype_name(j->in[i].dtype), j->in[i].nbytes, cp_dtype_name(pt->dtype),
                     sv->slice_in[i]);
            return false;
        }
    }
    return true;
}

/* A /v1/infer request was answered: its node histograms, the hook, the
 * captures of GET /v1/trace. */
