/*
 * core/hashmap: one hash map from strings to integers.
 *
 * Names are looked up everywhere: tensors by name in the graph, node inputs
 * during ONNX import, duplicate names in an .om, strings interned by the
 * trace recorder, tensors of a trace's kernel table. They all use this map:
 * open addressing with linear probing over xxHash-64 (core.h's cp_hash64),
 * kept at most half full, keys compared by length and bytes.
 *
 * Keys are borrowed: the map stores the pointer and length it is given and
 * never copies, so a key must stay valid and unchanged while it is in the
 * map (strings of a graph arena, of a protobuf message, of a table that owns
 * them). Keys may hold any bytes, NUL included. Values are int64_t; callers
 * store indices or ids.
 *
 * The struct is embedded: cp_strmap_init (or zeroing) makes an empty map,
 * cp_strmap_release frees it. Lookups allocate nothing; only growth can
 * fail (CP_ERR_NOMEM), and a failed insert leaves the map as it was.
 */
#ifndef CP_CORE_HASHMAP_H
#define CP_CORE_HASHMAP_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cp_strmap_slot {
    const char *key; /* NULL: empty slot */
    size_t len;
    uint64_t hash;
    int64_t value;
};

struct cp_strmap {
    struct cp_strmap_slot *slots; /* cap slots, a power of two, or NULL */
    size_t cap;
    size_t n;
};

void cp_strmap_init(struct cp_strmap *m);
void cp_strmap_release(struct cp_strmap *m); /* safe on an empty map; leaves it empty */

/* Remove every key, keeping the room: inserting as many keys as the map
 * held then cannot fail. */
void cp_strmap_clear(struct cp_strmap *m);

/* Make room for `n` keys in all, so that the next inserts up to that count
 * cannot fail. */
enum cp_status cp_strmap_reserve(struct cp_strmap *m, size_t n);

/* Insert `key` (len bytes, borrowed) with `value` unless it is there.
 * OUT (may be NULL): *found, whether it was there already; *value_out, the
 * value it has now (the old one when found). CP_ERR_NOMEM when the map
 * must grow and cannot. */
enum cp_status cp_strmap_add(struct cp_strmap *m, const char *key, size_t len, int64_t value,
                             bool *found, int64_t *value_out);

/* Insert `key` or replace its value. CP_ERR_NOMEM as cp_strmap_add. */
enum cp_status cp_strmap_put(struct cp_strmap *m, const char *key, size_t len, int64_t value);

/* cp_strmap_put for a NUL-terminated key. */
enum cp_status cp_strmap_puts(struct cp_strmap *m, const char *key, int64_t value);

/* The value of `key`, or `missing` when it is not in the map. */
int64_t cp_strmap_get(const struct cp_strmap *m, const char *key, size_t len, int64_t missing);

/* cp_strmap_get for a NUL-terminated key. */
int64_t cp_strmap_gets(const struct cp_strmap *m, const char *key, int64_t missing);

/* Keys in the map. */
static inline size_t cp_strmap_count(const struct cp_strmap *m)
{
    return m->n;
}

#endif
