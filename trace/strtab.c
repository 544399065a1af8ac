/* String table: text -> dense id, over core's string map; the table owns
 * the texts, the map borrows them. */
#include "trace/trace_internal.h"

#include <stdlib.h>
#include <string.h>

void cp_strtab_init(struct cp_strtab *t)
{
    memset(t, 0, sizeof(*t));
    cp_strmap_init(&t->ids);
}

void cp_strtab_release(struct cp_strtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->strs[i]);
    free(t->strs);
    cp_strmap_release(&t->ids);
    cp_strtab_init(t);
}

int32_t cp_strtab_find(const struct cp_strtab *t, const char *s, size_t len)
{
    return (int32_t)cp_strmap_get(&t->ids, s, len, -1);
}

int32_t cp_strtab_intern(struct cp_strtab *t, const char *s, size_t len)
{
    int32_t id = cp_strtab_find(t, s, len);
    if (id >= 0)
        return id;
    if (t->n >= (size_t)INT32_MAX)
        return -1;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        char **strs = cp_realloc_array(t->strs, cap, sizeof(*strs));
        if (!strs)
            return -1;
        t->strs = strs;
        t->cap = cap;
    }
    /* Room in the map first: a failure then leaves nothing half added. */
    if (cp_strmap_reserve(&t->ids, t->n + 1) != CP_OK)
        return -1;
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, s, len);
    copy[len] = '\0';
    id = (int32_t)t->n++;
    t->strs[id] = copy;
    (void)cp_strmap_put(&t->ids, copy, len, id); /* room reserved */
    return id;
}
