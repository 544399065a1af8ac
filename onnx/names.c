/* A small open-addressing hash map from borrowed strings to indices. Import
 * looks up every node input by name; the graph's own lookup is a linear scan,
 * which turns quadratic on models with thousands of tensors. */
#include "onnx/onnx_internal.h"

#include <stdlib.h>
#include <string.h>

void onnx_names_init(struct onnx_names *m)
{
    m->keys = NULL;
    m->vals = NULL;
    m->cap = 0;
    m->n = 0;
}

void onnx_names_release(struct onnx_names *m)
{
    free(m->keys);
    free(m->vals);
    onnx_names_init(m);
}

static size_t slot_of(const struct onnx_names *m, const char *key)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)cp_hash64(key, strlen(key)) & mask;
    while (m->keys[i] && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & mask;
    return i;
}

int32_t onnx_names_get(const struct onnx_names *m, const char *key)
{
    if (!m->cap || !key)
        return -1;
    size_t i = slot_of(m, key);
    return m->keys[i] ? m->vals[i] : -1;
}

static enum cp_status grow(struct onnx_names *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    struct onnx_names n = {cp_calloc(ncap, sizeof *n.keys), cp_calloc(ncap, sizeof *n.vals), ncap,
                           0};
    if (!n.keys || !n.vals || ncap < m->cap) {
        free(n.keys);
        free(n.vals);
        return CP_ERR_NOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = slot_of(&n, m->keys[i]);
        n.keys[j] = m->keys[i];
        n.vals[j] = m->vals[i];
        n.n++;
    }
    free(m->keys);
    free(m->vals);
    *m = n;
    return CP_OK;
}

enum cp_status onnx_names_put(struct onnx_names *m, const char *key, int32_t val)
{
    /* Keep the load factor at or under one half. */
    if ((m->n + 1) * 2 > m->cap) {
        enum cp_status st = grow(m);
        if (st != CP_OK)
            return st;
    }
    size_t i = slot_of(m, key);
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->n++;
    }
    m->vals[i] = val;
    return CP_OK;
}
