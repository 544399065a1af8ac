/* The string map (core/hashmap.h). */
#include "core/hashmap.h"

#include <stdlib.h>
#include <string.h>

void cp_strmap_init(struct cp_strmap *m)
{
    memset(m, 0, sizeof *m);
}

void cp_strmap_release(struct cp_strmap *m)
{
    free(m->slots);
    cp_strmap_init(m);
}

void cp_strmap_clear(struct cp_strmap *m)
{
    if (m->slots)
        memset(m->slots, 0, m->cap * sizeof *m->slots);
    m->n = 0;
}

/* The slot holding `key`, or the empty slot where it would go. The map has
 * slots and at least one is empty (it is at most half full). */
static size_t slot_of(const struct cp_strmap_slot *slots, size_t cap, const char *key, size_t len,
                      uint64_t h)
{
    size_t mask = cap - 1;
    size_t i = (size_t)(h ^ (h >> 32)) & mask;
    while (slots[i].key &&
           !(slots[i].hash == h && slots[i].len == len && memcmp(slots[i].key, key, len) == 0))
        i = (i + 1) & mask;
    return i;
}

enum cp_status cp_strmap_reserve(struct cp_strmap *m, size_t n)
{
    if (n <= m->cap / 2)
        return CP_OK;
    size_t cap = m->cap ? m->cap : 16;
    while (cap / 2 < n) {
        if (cap > SIZE_MAX / 2 / sizeof *m->slots)
            return CP_ERR_NOMEM;
        cap *= 2;
    }
    struct cp_strmap_slot *slots = cp_calloc(cap, sizeof *slots);
    if (!slots)
        return CP_ERR_NOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        const struct cp_strmap_slot *s = &m->slots[i];
        if (s->key)
            slots[slot_of(slots, cap, s->key, s->len, s->hash)] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return CP_OK;
}

enum cp_status cp_strmap_add(struct cp_strmap *m, const char *key, size_t len, int64_t value,
                             bool *found, int64_t *value_out)
{
    uint64_t h = cp_hash64(key, len);
    if (m->cap) {
        size_t i = slot_of(m->slots, m->cap, key, len, h);
        if (m->slots[i].key) {
            if (found)
                *found = true;
            if (value_out)
                *value_out = m->slots[i].value;
            return CP_OK;
        }
    }
    enum cp_status st = cp_strmap_reserve(m, m->n + 1);
    if (st != CP_OK)
        return st;
    size_t i = slot_of(m->slots, m->cap, key, len, h);
    m->slots[i] = (struct cp_strmap_slot){.key = key, .len = len, .hash = h, .value = value};
    m->n++;
    if (found)
        *found = false;
    if (value_out)
        *value_out = value;
    return CP_OK;
}

enum cp_status cp_strmap_put(struct cp_strmap *m, const char *key, size_t len, int64_t value)
{
    if (m->cap) {
        size_t i = slot_of(m->slots, m->cap, key, len, cp_hash64(key, len));
        if (m->slots[i].key) {
            m->slots[i].value = value;
            return CP_OK;
        }
    }
    return cp_strmap_add(m, key, len, value, NULL, NULL);
}

enum cp_status cp_strmap_puts(struct cp_strmap *m, const char *key, int64_t value)
{
    return cp_strmap_put(m, key, strlen(key), value);
}

int64_t cp_strmap_get(const struct cp_strmap *m, const char *key, size_t len, int64_t missing)
{
    if (!m->cap || !key)
        return missing;
    size_t i = slot_of(m->slots, m->cap, key, len, cp_hash64(key, len));
    return m->slots[i].key ? m->slots[i].value : missing;
}

int64_t cp_strmap_gets(const struct cp_strmap *m, const char *key, int64_t missing)
{
    return key ? cp_strmap_get(m, key, strlen(key), missing) : missing;
}
