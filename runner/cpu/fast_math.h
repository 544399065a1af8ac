/*
 * Private to runner/cpu: single-precision exp and erf written so that the
 * compiler can vectorise loops that call them (no branches, no table
 * look-ups, no library calls). Both stay within a few ulp of the correctly
 * rounded result over the whole float range.
 *
 * exp: x = n*ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), e^r by
 * its degree-7 Taylor polynomial (truncation < 1e-8 relative), then 2^n
 * applied in two halves so results in the subnormal range and overflow to
 * +inf come out right.
 *
 * erf: an odd polynomial x*P(x^2) for |x| < 1, and 1 - e^(-x^2) Q(1/|x|)/|x|
 * for 1 <= |x| < 4 (erfc(x)*e^(x^2)*x is smooth in 1/x); beyond 4 erf is
 * +-1 in single precision. The coefficients are near-minimax (Chebyshev)
 * fits computed with mpmath at 40 digits; P's error is 1.5e-9 relative and
 * Q's 3e-9 absolute on its range.
 */
#ifndef CP_RUNNER_FAST_MATH_H
#define CP_RUNNER_FAST_MATH_H

#include <stdint.h>
#include <string.h>

static inline float cp_fm_bits_to_float(int32_t i)
{
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

static inline float cp_fm_exp(float x)
{
    /* Clamp so that n stays within [-160, 160]: e^110 is +inf and e^-110 is
     * 0 in single precision anyway. NaN passes through the clamps. */
    x = x > 110.0f ? 110.0f : x;
    x = x < -110.0f ? -110.0f : x;
    const float shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to int */
    float t = x * 1.44269504088896341f + shift;
    float n = t - shift;
    float r = x - n * 0.693145751953125f;  /* ln2 high part (exact in n*) */
    r = r - n * 1.428606765330187045e-06f; /* ln2 low part */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t ni = (int32_t)n;
    int32_t n1 = ni / 2, n2 = ni - n1;
    /* shifted as unsigned: for NaN, n is out of range and p is NaN anyway */
    float s1 = cp_fm_bits_to_float((int32_t)((uint32_t)(n1 + 127) << 23));
    float s2 = cp_fm_bits_to_float((int32_t)((uint32_t)(n2 + 127) << 23));
    return p * s1 * s2;
}

/* e^x for x <= 0 only (softmax after subtracting the row max): no overflow
 * handling, results below the normal range flushed to 0, and a degree-6
 * minimax polynomial (2.8e-9 relative on [-ln2/2, ln2/2]), so about a third
 * fewer operations than cp_fm_exp. */
static inline float cp_fm_exp_nonpos(float x)
{
    float xc = x < -87.0f ? -87.0f : x;
    const float shift = 12582912.0f;
    float t = xc * 1.44269504088896341f + shift;
    float n = t - shift;
    float r = xc - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    float p = 1.394110843e-03f;
    p = p * r + 8.375126398e-03f;
    p = p * r + 4.166635290e-02f;
    p = p * r + 1.666641551e-01f;
    p = p * r + 5.000000047e-01f;
    p = p * r + 1.000000038e+00f;
    p = p * r + 1.0f;
    /* shifted as unsigned: for NaN, n is out of range and p is NaN anyway */
    float s = cp_fm_bits_to_float((int32_t)((uint32_t)((int32_t)n + 127) << 23));
    return x < -87.0f ? 0.0f : p * s;
}

static inline float cp_fm_erf(float x)
{
    float a = x < 0.0f ? -x : x;
    /* |x| < 1: x * P(x^2) */
    float t = a * a;
    float p = 7.875875063e-05f;
    p = p * t - 8.016864287e-04f;
    p = p * t + 5.189087423e-03f;
    p = p * t - 2.685421201e-02f;
    p = p * t + 1.128359472e-01f;
    p = p * t - 3.761262667e-01f;
    p = p * t + 1.128379166e+00f;
    float small = a * p;
    /* 1 <= |x| < 4: 1 - exp(-x^2) * Q(1/|x| - 0.625) / |x| */
    float ac = a < 1.0f ? 1.0f : (a > 4.0f ? 4.0f : a);
    float u = 1.0f / ac;
    float v = u - 0.625f;
    float q = -4.782262702e-02f;
    q = q * v + 5.492168508e-02f;
    q = q * v - 2.460380006e-02f;
    q = q * v - 1.123284912e-02f;
    q = q * v + 4.961214224e-02f;
    q = q * v - 7.798336436e-02f;
    q = q * v + 7.210193058e-02f;
    q = q * v - 1.295486959e-03f;
    q = q * v - 1.715856514e-01f;
    q = q * v + 4.895247903e-01f;
    float big = 1.0f - cp_fm_exp(-ac * ac) * q * u;
    float r = a < 1.0f ? small : (a < 4.0f ? big : 1.0f);
    r = a != a ? x : r; /* NaN stays NaN */
    return x < 0.0f ? -r : r;
}

/* 1 / (1 + e^-x) from e = e^-|x| <= 1, with the cheaper cp_fm_exp_nonpos:
 * 1 / (1 + e) for x >= 0, e / (1 + e) below (no e^-x overflow to handle,
 * and no 1 - tiny cancellation for large negative x). A fifth less work
 * for SiLU, which dominates the fused GroupNorm + SiLU of diffusion U-Nets.
 * NaN stays NaN. */
static inline float cp_fm_sigmoid(float x)
{
    float e = cp_fm_exp_nonpos(x < 0.0f ? x : -x);
    float r = 1.0f / (1.0f + e);
    return x >= 0.0f ? r : e * r;
}

#endif
