/* `cannprof suggest` on a measured trace: the opset-14 transformer
 * converted with LayerNorm fusion off and benchmarked on one thread, whose
 * LayerNorm change pastes into `cannprof convert` and takes effect. That
 * there is a LayerNorm finding at all depends on the kernel times this
 * machine measured, so this runs under the ctest label `perf`
 * (bench/perf_tests.sh), never in scripts/test.sh; tests/cli/
 * test_cli_suggest.c runs the same test on a trace of the same conversion
 * whose kernel times are injected. */
#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"
#include "cli/suggest_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *g_trace;

/* A trace of the opset-14 transformer converted with LayerNorm fusion off:
 * decomposed LayerNorms for the rules to find. */
static void setup(void)
{
    cp_t_scratch_setup();
    char *f = ct_switch_file("ln_off.cfg", "LayerNormFusionPass:off\n");
    char *om = ct_convert_to("transformer_encoder_op14", "ln_off", f, NULL);
    g_trace = cp_t_path("ln_off.db");
    cr_assert(cp_t_bench_trace(om, g_trace, "-n", "20", "-w", "3", "--threads", "1", NULL),
              "bench --trace failed (see stderr)");
    free(f);
    free(om);
}

static void teardown(void)
{
    cp_t_scratch_close();
    free(g_trace);
}

TestSuite(cli_suggest, .init = setup, .fini = teardown, .timeout = 300);

Test(cli_suggest, the_layernorm_change_pastes_into_convert_and_takes_effect)
{
    st_expect_layernorm_change_takes_effect(g_trace);
}
