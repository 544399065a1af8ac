/* Test support: a fixed machine calibration (see calibration.h). */
#include "support/calibration.h"
#include "support/cli.h"

#include "core/core.h"
#include "core/json.h"
#include "rules/calibrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cp_t_fixed_calibration(void)
{
    struct cp_diag d;
    cp_diag_init(&d);
    char dir[900];
    if (cp_calibrate_cache_dir(NULL, dir, sizeof dir, &d) != CP_OK ||
        cp_calibrate_cache_mkdir(dir, &d) != CP_OK) {
        fprintf(stderr, "cp_t_fixed_calibration: %s\n", d.msg);
        return false;
    }
    /* the identity must be this machine's, or the cache is not used */
    struct cp_machine m;
    cp_machine_detect(&m);
    m.threads_used = m.cores;
    m.peak_flops_f32 = CP_T_CAL_PEAK_F32;
    m.peak_flops_f32_1t = CP_T_CAL_PEAK_F32_1T;
    m.peak_flops_bf16 = m.has_bf16 ? 4 * CP_T_CAL_PEAK_F32 : 0;
    m.peak_flops_bf16_1t = m.has_bf16 ? 4 * CP_T_CAL_PEAK_F32_1T : 0;
    m.mem_bw = CP_T_CAL_MEM_BW;
    snprintf(m.impl_f32, sizeof m.impl_f32, "fixed");
    snprintf(m.impl_bf16, sizeof m.impl_bf16, "%s", m.has_bf16 ? "fixed" : "");
    m.matmul_size = 1024;
    m.triad_array_bytes = 1 << 28;
    m.budget_ms = 1;
    m.load_avg = 0;
    snprintf(m.measured_at, sizeof m.measured_at, "2025-01-01T00:00:00Z");
    snprintf(m.source, sizeof m.source, "measured");
    char path[1024];
    snprintf(path, sizeof path, "%s/calibration-%s.json", dir, m.cache_key);
    json_t *json = cp_machine_to_json(&m);
    bool ok = json && cp_json_write_file(json, path, &d) == CP_OK;
    if (!ok)
        fprintf(stderr, "cp_t_fixed_calibration: %s: %s\n", path, d.msg[0] ? d.msg : "no memory");
    json_decref(json);
    return ok;
}

void cp_t_scratch_calibrated_setup(void)
{
    cp_t_scratch_setup();
    char *cache = cp_t_path("cache");
    bool ok = setenv("XDG_CACHE_HOME", cache, 1) == 0 && cp_t_fixed_calibration();
    free(cache);
    if (!ok) {
        fprintf(stderr, "cp_t_scratch_calibrated_setup: no fixed calibration\n");
        abort();
    }
}
