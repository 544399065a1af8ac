/* core/json: the helpers that keep JSON text (cp_json_text) and put stored
 * JSON text inside a larger document (cp_json_embed). */
#include "core/json.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

Test(core_json, text_is_compact_with_nan_as_null_and_repaired_strings)
{
    json_t *o = json_object();
    cr_assert(cp_json_set_num(o, "x", NAN));
    cr_assert(cp_json_set_num(o, "y", 0.1));
    cr_assert(cp_json_set_str(o, "s", "a\xff"));
    char *t = cp_json_text(o);
    cr_assert_str_eq(t, "{\"x\":null,\"y\":0.10000000000000001,\"s\":\"a\xef\xbf\xbd\"}");
    free(t);
    json_decref(o);
    cr_assert_null(cp_json_text(NULL));
}

Test(core_json, embed_parses_json_and_keeps_other_text_as_a_string)
{
    json_t *j = cp_json_embed("{\"a\":[1,2]}");
    cr_assert(json_is_object(j));
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(j, "a"), 1)), 2);
    json_decref(j);
    j = cp_json_embed("not json {");
    cr_assert_str_eq(json_string_value(j), "not json {");
    json_decref(j);
    j = cp_json_embed("bad \xfe utf8");
    cr_assert_str_eq(json_string_value(j), "bad \xef\xbf\xbd utf8");
    json_decref(j);
    j = cp_json_embed(NULL);
    cr_assert(json_is_null(j));
    json_decref(j);
}

/* Strings: the one escaper (it replaced cp_buf_json_str, whose tests these
 * were) escapes quotes, backslashes and control characters, keeps valid
 * UTF-8 and DEL as they are, and quotes the empty string (hex digits of
 * \u escapes in upper case, which JSON reads the same). */
Test(core_json, strings_escape_quotes_backslashes_and_control_chars)
{
    json_t *a = json_array();
    cr_assert(cp_json_push(a, cp_json_str("say \"hi\" \\ path\n\t\r\x01\x1f end")));
    cr_assert(cp_json_push(a, cp_json_str("")));
    cr_assert(cp_json_push(a, cp_json_str("caf\xc3\xa9 \x7f")));
    char *t = cp_json_text(a);
    cr_assert_str_eq(t, "[\"say \\\"hi\\\" \\\\ path\\n\\t\\r\\u0001\\u001F end\",\"\","
                        "\"caf\xc3\xa9 \x7f\"]");
    free(t);
    json_decref(a);
}
