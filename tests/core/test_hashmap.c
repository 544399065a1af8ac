/* core/hashmap: the one string map, checked against a plain search over
 * random keys, with the edge cases the five maps it replaced relied on. */
#include "core/hashmap.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(hashmap, an_empty_map_finds_nothing_and_releases_cleanly)
{
    struct cp_strmap m;
    cp_strmap_init(&m);
    cr_assert_eq(cp_strmap_gets(&m, "x", -7), -7);
    cr_assert_eq(cp_strmap_gets(&m, NULL, -7), -7);
    cr_assert_eq(cp_strmap_count(&m), 0);
    cp_strmap_release(&m);
    cp_strmap_release(&m);
}

Test(hashmap, add_keeps_the_first_value_and_put_replaces_it)
{
    struct cp_strmap m;
    cp_strmap_init(&m);
    bool found = true;
    int64_t v = 0;
    cr_assert_eq(cp_strmap_add(&m, "conv", 4, 1, &found, &v), CP_OK);
    cr_assert_not(found);
    cr_assert_eq(v, 1);
    cr_assert_eq(cp_strmap_add(&m, "conv", 4, 2, &found, &v), CP_OK);
    cr_assert(found);
    cr_assert_eq(v, 1);
    cr_assert_eq(cp_strmap_gets(&m, "conv", -1), 1);
    cr_assert_eq(cp_strmap_puts(&m, "conv", 3), CP_OK);
    cr_assert_eq(cp_strmap_gets(&m, "conv", -1), 3);
    cr_assert_eq(cp_strmap_count(&m), 1);
    cp_strmap_release(&m);
}

Test(hashmap, keys_are_bytes_with_a_length)
{
    static const char a[] = {'a', '\0', 'b'};
    static const char b[] = {'a', '\0', 'c'};
    struct cp_strmap m;
    cp_strmap_init(&m);
    cr_assert_eq(cp_strmap_put(&m, a, 3, 10), CP_OK);
    cr_assert_eq(cp_strmap_put(&m, b, 3, 20), CP_OK);
    cr_assert_eq(cp_strmap_put(&m, "a", 1, 30), CP_OK);
    cr_assert_eq(cp_strmap_put(&m, "", 0, 40), CP_OK);
    cr_assert_eq(cp_strmap_get(&m, a, 3, -1), 10);
    cr_assert_eq(cp_strmap_get(&m, b, 3, -1), 20);
    cr_assert_eq(cp_strmap_gets(&m, "a", -1), 30);
    cr_assert_eq(cp_strmap_gets(&m, "", -1), 40);
    cr_assert_eq(cp_strmap_count(&m), 4);
    cp_strmap_release(&m);
}

Test(hashmap, many_keys_through_growth_and_clear_match_a_plain_search)
{
    enum { N = 5000 };
    char(*keys)[24] = calloc(N, sizeof *keys);
    cr_assert_not_null(keys);
    struct cp_strmap m;
    cp_strmap_init(&m);
    srand(7);
    for (int i = 0; i < N; i++) {
        /* short keys that collide in their low bits often */
        snprintf(keys[i], sizeof keys[i], "t%d_%d", i, rand() % 97);
        cr_assert_eq(cp_strmap_puts(&m, keys[i], i), CP_OK);
    }
    cr_assert_eq(cp_strmap_count(&m), N);
    for (int i = 0; i < N; i++)
        cr_assert_eq(cp_strmap_gets(&m, keys[i], -1), i, "%s", keys[i]);
    cr_assert_eq(cp_strmap_gets(&m, "t5000_0", -1), -1);
    size_t cap = m.cap;
    cp_strmap_clear(&m);
    cr_assert_eq(cp_strmap_count(&m), 0);
    cr_assert_eq(cp_strmap_gets(&m, keys[0], -1), -1);
    cr_assert_eq(m.cap, cap, "clear keeps the room");
    for (int i = 0; i < N; i++)
        cr_assert_eq(cp_strmap_puts(&m, keys[i], -i), CP_OK);
    cr_assert_eq(m.cap, cap, "as many keys again fit without growing");
    cr_assert_eq(cp_strmap_gets(&m, keys[N - 1], 1), -(N - 1));
    cp_strmap_release(&m);
    free(keys);
}

Test(hashmap, reserve_makes_the_next_inserts_allocation_free)
{
    struct cp_strmap m;
    cp_strmap_init(&m);
    cr_assert_eq(cp_strmap_reserve(&m, 100), CP_OK);
    size_t cap = m.cap;
    cr_assert(cap >= 200);
    char k[100][8];
    for (int i = 0; i < 100; i++) {
        snprintf(k[i], sizeof k[i], "%d", i);
        cr_assert_eq(cp_strmap_puts(&m, k[i], i), CP_OK);
    }
    cr_assert_eq(m.cap, cap);
    cr_assert_eq(cp_strmap_reserve(&m, SIZE_MAX / 2), CP_ERR_NOMEM);
    cr_assert_eq(cp_strmap_gets(&m, "42", -1), 42, "a failed reserve leaves the map as it was");
    cp_strmap_release(&m);
}
