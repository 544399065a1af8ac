/* Content hashes and checksums, on xxHash (libxxhash). */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

struct cp_hasher {
    XXH3_state_t *st;
};

uint64_t cp_hash64(const void *p, size_t n)
{
    return XXH3_64bits(p, n);
}

struct cp_hasher *cp_hasher_create(void)
{
    struct cp_hasher *h = malloc(sizeof *h);
    if (!h)
        return NULL;
    h->st = XXH3_createState();
    if (!h->st || XXH3_128bits_reset(h->st) != XXH_OK) {
        XXH3_freeState(h->st);
        free(h);
        return NULL;
    }
    return h;
}

void cp_hasher_update(struct cp_hasher *h, const void *p, size_t n)
{
    XXH3_128bits_update(h->st, p, n);
}

static void hex128(XXH128_hash_t v, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)v.high64, (unsigned long long)v.low64);
}

void cp_hasher_hex(struct cp_hasher *h, char out[33])
{
    hex128(XXH3_128bits_digest(h->st), out);
}

void cp_hasher_free(struct cp_hasher *h)
{
    if (!h)
        return;
    XXH3_freeState(h->st);
    free(h);
}

void cp_hash128_hex(const void *p, size_t n, char out[33])
{
    hex128(XXH3_128bits(p, n), out);
}
