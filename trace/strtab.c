/* String table: text -> dense id, open addressing with linear probing. */
#include "trace/trace_internal.h"

#include <stdlib.h>
#include <string.h>

void cp_strtab_init(struct cp_strtab *t)
{
    memset(t, 0, sizeof(*t));
}

void cp_strtab_release(struct cp_strtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->strs[i]);
    free(t->strs);
    free(t->lens);
    free(t->hashes);
    free(t->slots);
    cp_strtab_init(t);
}

static size_t probe_start(uint64_t h, size_t n_slots)
{
    return (size_t)(h ^ (h >> 32)) & (n_slots - 1);
}

static bool same_text(const struct cp_strtab *t, int32_t id, uint64_t h, const char *s, size_t len)
{
    return t->hashes[id] == h && t->lens[id] == len && memcmp(t->strs[id], s, len) == 0;
}

static int32_t find_hashed(const struct cp_strtab *t, const char *s, size_t len, uint64_t h)
{
    if (t->n_slots == 0)
        return -1;
    for (size_t i = probe_start(h, t->n_slots);; i = (i + 1) & (t->n_slots - 1)) {
        int32_t id = t->slots[i];
        if (id < 0)
            return -1;
        if (same_text(t, id, h, s, len))
            return id;
    }
}

int32_t cp_strtab_find(const struct cp_strtab *t, const char *s, size_t len)
{
    return find_hashed(t, s, len, cp_hash64(s, len));
}

/* Rebuild the hash index with `n_slots` slots (a power of two > 2n). */
static bool rehash(struct cp_strtab *t, size_t n_slots)
{
    int32_t *slots = cp_realloc_array(NULL, n_slots, sizeof(*slots));
    if (!slots)
        return false;
    for (size_t i = 0; i < n_slots; i++)
        slots[i] = -1;
    for (size_t id = 0; id < t->n; id++) {
        size_t i = probe_start(t->hashes[id], n_slots);
        while (slots[i] >= 0)
            i = (i + 1) & (n_slots - 1);
        slots[i] = (int32_t)id;
    }
    free(t->slots);
    t->slots = slots;
    t->n_slots = n_slots;
    return true;
}

/* Room for one more entry in the id arrays. */
static bool grow_entries(struct cp_strtab *t)
{
    if (t->n < t->cap)
        return true;
    size_t cap = t->cap ? t->cap * 2 : 64;
    char **strs = cp_realloc_array(t->strs, cap, sizeof(*strs));
    if (!strs)
        return false;
    t->strs = strs;
    size_t *lens = cp_realloc_array(t->lens, cap, sizeof(*lens));
    if (!lens)
        return false;
    t->lens = lens;
    uint64_t *hashes = cp_realloc_array(t->hashes, cap, sizeof(*hashes));
    if (!hashes)
        return false;
    t->hashes = hashes;
    t->cap = cap;
    return true;
}

int32_t cp_strtab_intern(struct cp_strtab *t, const char *s, size_t len)
{
    uint64_t h = cp_hash64(s, len);
    int32_t id = find_hashed(t, s, len, h);
    if (id >= 0)
        return id;
    if (t->n >= (size_t)INT32_MAX)
        return -1;
    /* Keep the load factor at most 1/2 so probes stay short. */
    if ((t->n + 1) * 2 > t->n_slots && !rehash(t, t->n_slots ? t->n_slots * 2 : 128))
        return -1;
    if (!grow_entries(t))
        return -1;
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, s, len);
    copy[len] = '\0';
    id = (int32_t)t->n++;
    t->strs[id] = copy;
    t->lens[id] = len;
    t->hashes[id] = h;
    size_t i = probe_start(h, t->n_slots);
    while (t->slots[i] >= 0)
        i = (i + 1) & (t->n_slots - 1);
    t->slots[i] = id;
    return id;
}
