/* Rule packs in YAML (`analyze --rules`, `suggest --rules`, `tune
 * --rules`): the loader takes a path, so the input is written to a file in
 * the target's temporary folder and loaded into an empty set. */
#include "harness.h"

#include "rules/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1024];
    if (!fuzz_tmp_write("pack.yaml", data, size, path, sizeof path))
        return 0;
    struct cp_rule_set *rs = cp_rule_set_create();
    if (rs) {
        struct cp_diag d;
        cp_diag_init(&d);
        fuzz_expect_refusal("cp_rule_set_load_file", cp_rule_set_load_file(rs, path, &d), &d);
        /* loading the same pack again names the rule defined twice */
        cp_diag_init(&d);
        fuzz_expect_refusal("cp_rule_set_load_file", cp_rule_set_load_file(rs, path, &d), &d);
        cp_rule_set_free(rs);
    }
    fuzz_tmp_remove(path);
    return 0;
}
