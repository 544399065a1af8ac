/* What the tests need to know about this CPU (see host.h). */
#include "support/host.h"

#include "core/host.h"

#include <stdio.h>
#include <string.h>

bool cp_t_host_has_bf16(char *cpu, size_t cap)
{
    struct cp_host h;
    cp_host_detect(&h);
    if (cpu && cap)
        snprintf(cpu, cap, "%s", h.cpu_model);
    return h.has_bf16;
}

bool cp_t_is_bf16_refusal(const char *msg, const char *mode)
{
    char want[160];
    snprintf(want, sizeof want, "--precision_mode=%s needs bf16 arithmetic", mode);
    const char *parts[] = {want, "avx512_bf16 or amx_bf16", "use --precision_mode=force_fp32"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        if (!msg || !strstr(msg, parts[i])) {
            fprintf(stderr, "not the bf16 refusal (no \"%s\"): %s\n", parts[i],
                    msg ? msg : "(none)");
            return false;
        }
    return true;
}
