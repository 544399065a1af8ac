/* core/host: one description of the machine, from cpuinfo text whatever the
 * architecture prints. */
#include "core/host.h"

#include <criterion/criterion.h>
#include <string.h>

static const char X86[] = "processor\t: 0\n"
                          "vendor_id\t: AuthenticAMD\n"
                          "model name\t: AMD EPYC 7B13\n"
                          "flags\t\t: fpu sse2 avx2 fma sse4_2 avx avx512f avx512_bf16\n"
                          "\n"
                          "processor\t: 1\n"
                          "model name\t: something else\n"
                          "flags\t\t: fpu\n";

static const char ARM[] = "processor\t: 0\r\n"
                          "Features\t: fp asimd evtstrm aes bf16 i8mm\r\n"
                          "CPU implementer\t: 0x41\r\n"
                          "Hardware\t: Example SoC\r\n"
                          "Model\t\t: Raspberry Pi 4 Model B\r\n";

Test(host, x86_cpuinfo_gives_model_flags_and_the_isa_in_fixed_order)
{
    struct cp_host h;
    memset(&h, 0, sizeof h);
    cp_host_parse_cpuinfo(&h, X86, strlen(X86));
    cr_assert_str_eq(h.cpu_model, "AMD EPYC 7B13");
    cr_assert_str_eq(h.flags, "fpu sse2 avx2 fma sse4_2 avx avx512f avx512_bf16");
    /* CP_HOST_ISA_FEATURES' order, not cpuinfo's */
    cr_assert_str_eq(h.isa, "sse4_2 avx avx2 fma avx512f avx512_bf16");
    cr_assert(h.has_bf16);
    cr_assert_not(h.has_fp16);
}

Test(host, flags_match_whole_words_only)
{
    struct cp_host h;
    memset(&h, 0, sizeof h);
    cp_host_parse_cpuinfo(&h, X86, strlen(X86));
    cr_assert(cp_host_has_flag(&h, "avx"));
    cr_assert(cp_host_has_flag(&h, "avx512_bf16"));
    cr_assert_not(cp_host_has_flag(&h, "avx512"));
    cr_assert_not(cp_host_has_flag(&h, "bf16"));
    cr_assert_not(cp_host_has_flag(&h, ""));
}

Test(host, arm_cpuinfo_with_crlf_prefers_model_over_hardware)
{
    struct cp_host h;
    memset(&h, 0, sizeof h);
    cp_host_parse_cpuinfo(&h, ARM, strlen(ARM));
    cr_assert_str_eq(h.cpu_model, "Raspberry Pi 4 Model B");
    cr_assert_str_eq(h.flags, "fp asimd evtstrm aes bf16 i8mm");
    cr_assert_str_eq(h.isa, "asimd bf16 i8mm");
    /* no bf16 kernels for Arm: native bf16 is an x86 fact here */
    cr_assert_not(h.has_bf16);
}

Test(host, odd_bytes_and_missing_lines_stay_printable_and_unknown)
{
    static const char odd[] = "model name : caf\xc3\xa9\x01 cpu\nnoise without colon\n";
    struct cp_host h;
    memset(&h, 0, sizeof h);
    cp_host_parse_cpuinfo(&h, odd, sizeof odd - 1);
    cr_assert_str_eq(h.cpu_model, "caf??? cpu");
    cr_assert_str_eq(h.flags, "");
    cr_assert_str_eq(h.isa, "");
    cr_assert_not(h.has_bf16);
}

Test(host, detect_describes_this_machine)
{
    struct cp_host h;
    cp_host_detect(&h);
    cr_assert(h.cores >= 1);
    cr_assert(h.cpu_model[0]);
    cr_assert(h.arch[0]);
    /* whatever the CPU, the short form lists only features it has */
    char isa[sizeof h.isa];
    memcpy(isa, h.isa, sizeof isa);
    for (char *save = NULL, *t = strtok_r(isa, " ", &save); t; t = strtok_r(NULL, " ", &save))
        cr_assert(cp_host_has_flag(&h, t), "%s", t);
}
