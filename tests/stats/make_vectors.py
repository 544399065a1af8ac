#!/usr/bin/python3
"""Reference values for stats/ (tests/stats/test_stats.c), computed with SciPy.

Run from the repository root with Debian's Python (python3-scipy):

    /usr/bin/python3 tests/stats/make_vectors.py > tests/stats/vectors.h

The output is committed; SciPy is a development-time tool only and the tests
never run it. Inputs are fixed (literal lists, or NumPy's PCG64 with fixed
seeds, rounded so that the header stays readable); every expected value is
what SciPy/NumPy compute for them, printed with repr() so that the C compiler
reads back the very same double.
"""
import math
import platform
import sys

import numpy as np
import scipy
from scipy import stats

P = [0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0]
LEVEL = 0.95
MWU_EXACT_MAX = 10000  # CP_STATS_MWU_EXACT_MAX


def rng(seed):
    return np.random.default_rng(seed)


def latencies(seed, n, base=1000.0, spread=0.05, spikes=0, digits=2):
    g = rng(seed)
    v = base * np.exp(g.normal(0.0, spread, n))
    if spikes:
        idx = g.choice(n, spikes, replace=False)
        v[idx] *= g.uniform(1.5, 3.0, spikes)
    return [round(float(a), digits) for a in v]


def normal(seed, n, mu, sd, digits=3):
    return [round(float(a), digits) for a in rng(seed).normal(mu, sd, n)]


def ints(seed, n, lo, hi):
    return [float(a) for a in rng(seed).integers(lo, hi + 1, n)]


# ---- one-sample cases ---------------------------------------------------------

ONE = [
    ("one", [42.5]),
    ("two", [1.0, 2.0]),
    ("odd7", [12.1, 11.8, 12.4, 30.2, 12.0, 11.9, 12.3]),
    ("ties10", [5.0, 3.0, 5.0, 7.0, 3.0, 3.0, 9.0, 5.0, 1.0, 5.0]),
    ("neg9", [-3.2, -1.5, 0.4, -2.2, -7.9, 1.1, -0.3, -4.4, -2.0]),
    ("const5", [7.25] * 5),
    ("lat200", latencies(1, 200, spikes=6)),
    ("gamma1000", [round(float(a), 3) for a in rng(2).gamma(2.0, 3.0, 1000)]),
]

# ---- two-sample cases -----------------------------------------------------------

TWO = [
    ("small_5_7", [3.1, 4.7, 2.2, 5.9, 4.1], [5.3, 6.2, 4.4, 7.8, 6.9, 5.0, 6.6]),
    ("sep_10_10", normal(3, 10, 10.0, 1.0), normal(4, 10, 20.0, 1.0)),
    ("shift_8_8", normal(5, 8, 100.0, 5.0), normal(6, 8, 106.0, 5.0)),
    ("unequal_3_20", [9.7, 12.2, 10.9], normal(7, 20, 10.0, 2.0)),
    ("mid_12_15", normal(8, 12, 50.0, 4.0), normal(9, 15, 52.5, 4.0)),
    ("over_20_20", normal(10, 20, 0.0, 1.0), normal(11, 20, 0.1, 1.0)),
    ("ties_10_12", ints(12, 10, 1, 6), ints(13, 12, 2, 7)),
    ("uneqvar_6_30", normal(14, 6, 20.0, 0.2), normal(15, 30, 21.0, 3.0)),
    ("one_vs_5", [3.0], [2.5, 4.1, 3.3, 5.2, 4.8]),
    ("const_x_8_9", [4.0] * 8, normal(16, 9, 4.5, 0.5)),
    ("same_15_15", normal(17, 15, 7.0, 1.0), None),  # y is a copy of x
    ("exact_50_50", latencies(18, 50, digits=4), latencies(19, 50, base=1010.0, digits=4)),
    ("exact_100_100", latencies(20, 100, digits=4), latencies(21, 100, base=1008.0, digits=4)),
    ("tail_30_30", normal(22, 30, 100.0, 1.0), normal(23, 30, 104.0, 1.0)),
    ("far_40_40", normal(24, 40, 100.0, 1.0), normal(25, 40, 110.0, 1.0)),
    ("large_200_250", latencies(26, 200, spikes=4), latencies(27, 250, base=1030.0, spikes=5)),
    ("large_ties_300_300", ints(28, 300, 90, 110), ints(29, 300, 91, 111)),
    ("hl_big_2000_1500", latencies(30, 2000, digits=3), latencies(31, 1500, base=990.0, digits=3)),
]
TWO = [(n, x, list(x) if y is None else y) for n, x, y in TWO]

# ---- bootstrap -------------------------------------------------------------------

BOOT_X = latencies(40, 40, spread=0.04)
BOOT_Y = latencies(41, 50, base=1080.0, spread=0.04)
BOOT_RUNS = 30

# ---- power -------------------------------------------------------------------------

# (n1, n2, alpha, power, sigma, baseline, relative effect in %)
POWER = [
    (10, 10, 0.05, 0.80, 12.0, 1000.0, 2.0),
    (30, 30, 0.05, 0.90, 25.0, 1000.0, 5.0),
    (50, 80, 0.01, 0.80, 3.5, 250.0, 1.5),
    (200, 200, 0.05, 0.95, 40.0, -800.0, 0.7),
    (5, 1000, 0.10, 0.50, 1.0, 10.0, 33.0),
    (2, 2, 0.05, 0.80, 0.5, 2.0, 0.1),
]


# ---- output ---------------------------------------------------------------------------

out = []


def emit(s=""):
    out.append(s)


def num(v):
    v = float(v)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    r = repr(v)
    return r if ("." in r or "e" in r) else r + ".0"


def array(name, vals):
    emit(f"static const double {name}[{len(vals)}] = {{")
    for i in range(0, len(vals), 6):
        emit("    " + ", ".join(num(v) for v in vals[i:i + 6]) + ",")
    emit("};")


def b(v):
    return "true" if v else "false"


def one_sample(name, x):
    a = np.array(x)
    n = len(a)
    r = {}
    r["mean"] = np.mean(a)
    r["median"] = np.median(a)
    r["q"] = np.percentile(a, [100 * p for p in P], method="linear")
    r["sd_ok"] = n >= 2
    r["sd"] = np.std(a, ddof=1) if n >= 2 else math.nan
    r["cv_ok"] = n >= 2 and np.mean(a) != 0
    r["cv"] = stats.variation(a, ddof=1) if r["cv_ok"] else math.nan
    r["mad_raw"] = stats.median_abs_deviation(a)
    r["mad_scaled"] = stats.median_abs_deviation(a, scale="normal")
    q1, q3 = np.percentile(a, [25, 75])
    r["q1"], r["q3"] = q1, q3
    for k, tag in ((1.5, "k15"), (3.0, "k3")):
        lo, hi = q1 - k * (q3 - q1), q3 + k * (q3 - q1)
        r["lo_" + tag], r["hi_" + tag] = lo, hi
        r["nout_" + tag] = int(np.sum((a < lo) | (a > hi)))
    return r


def ttest(x, y, equal_var):
    nx, ny = len(x), len(y)
    if min(nx, ny) < 2:  # SciPy: NaN (the variance of one value is NaN)
        return None
    vx = np.var(x, ddof=1) if nx > 1 else 0.0
    vy = np.var(y, ddof=1) if ny > 1 else 0.0
    if (equal_var and (nx - 1) * vx + (ny - 1) * vy == 0) or (not equal_var and vx + vy == 0):
        return None
    r = stats.ttest_ind(x, y, equal_var=equal_var)
    if equal_var:
        df = nx + ny - 2
        se = math.sqrt(((nx - 1) * vx + (ny - 1) * vy) / df * (1 / nx + 1 / ny))
    else:
        a, c = vx / nx, vy / ny
        df = (a + c) ** 2 / (a * a / (nx - 1) + c * c / (ny - 1))
        se = math.sqrt(a + c)
    diff = np.mean(x) - np.mean(y)
    # SciPy 1.10's ttest_ind has no confidence_interval(); build it from
    # scipy.stats.t.ppf exactly as SciPy >= 1.11 does.
    q = stats.t.ppf((1 + LEVEL) / 2, df)
    return dict(t=r.statistic, p=r.pvalue, df=df, lo=diff - q * se, hi=diff + q * se)


def two_sample(name, x, y):
    xa, ya = np.array(x), np.array(y)
    r = {"welch": ttest(xa, ya, False), "student": ttest(xa, ya, True)}
    ties = len(np.unique(np.concatenate([xa, ya]))) < len(x) + len(y)
    r["ties"] = ties
    r["exact_ok"] = not ties and len(x) * len(y) <= MWU_EXACT_MAX
    if r["exact_ok"]:
        e = stats.mannwhitneyu(xa, ya, use_continuity=True, alternative="two-sided",
                               method="exact")
        r["u"], r["p_exact"] = e.statistic, e.pvalue
    else:
        r["p_exact"] = math.nan
    a = stats.mannwhitneyu(xa, ya, use_continuity=True, alternative="two-sided",
                           method="asymptotic")
    r["u"], r["p_asym"] = a.statistic, a.pvalue
    # SciPy does not return z; recover it from the p-value where that is
    # well conditioned (and away from the cap at 1).
    r["z"] = stats.norm.isf(a.pvalue / 2) if 1e-300 < a.pvalue < 0.9 else math.nan
    r["hl"] = np.median(np.subtract.outer(ya, xa))
    return r


def boot():
    x, y = np.array(BOOT_X), np.array(BOOT_Y)

    def ratio(a, c, axis=-1):
        return np.median(c, axis=axis) / np.median(a, axis=axis)

    los, his = [], []
    for seed in range(BOOT_RUNS):
        res = stats.bootstrap((x, y), ratio, n_resamples=10000, confidence_level=LEVEL,
                              method="percentile", vectorized=True, random_state=seed)
        los.append(res.confidence_interval.low)
        his.append(res.confidence_interval.high)
    return dict(est=ratio(x, y), lo=np.mean(los), lo_sd=np.std(los, ddof=1), hi=np.mean(his),
                hi_sd=np.std(his, ddof=1))


def power(n1, n2, alpha, pw, sigma, base, pct):
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(pw)
    mde = z * math.sqrt(1 / n1 + 1 / n2)
    eff = pct / 100 * abs(base) / sigma
    need = 2 * (z / eff) ** 2
    return dict(mde=mde, rel=100 * mde * sigma / abs(base), eff=eff,
                n=max(2, math.ceil(need)), need=need)


def main():
    emit("/* Reference values for tests/stats/test_stats.c. GENERATED: do not edit.")
    emit(f" * SciPy {scipy.__version__}, NumPy {np.__version__}, "
         f"Python {platform.python_version()} (Debian python3-scipy).")
    emit(" * Regenerate from the repository root with")
    emit(" *     /usr/bin/python3 tests/stats/make_vectors.py > tests/stats/vectors.h")
    emit(" * NAN marks a value SciPy does not define for that input. */")
    emit("/* clang-format off */")
    emit("#ifndef CP_TEST_STATS_VECTORS_H")
    emit("#define CP_TEST_STATS_VECTORS_H")
    emit()
    emit("#include <math.h>")
    emit("#include <stdbool.h>")
    emit("#include <stddef.h>")
    emit()
    emit(f'#define VEC_SCIPY_VERSION "{scipy.__version__}"')
    emit(f'#define VEC_NUMPY_VERSION "{np.__version__}"')
    emit(f"#define VEC_LEVEL {num(LEVEL)}")
    emit(f"#define VEC_NP {len(P)}")
    emit("static const double vec_p[VEC_NP] = {" + ", ".join(num(p) for p in P) + "};")
    emit()

    emit("struct vec_one {")
    emit("    const char *name;")
    emit("    const double *x;")
    emit("    size_t n;")
    emit("    double mean, median;")
    emit("    double q[VEC_NP]; /* numpy.percentile(x, 100 * vec_p, method='linear') */")
    emit("    bool sd_ok, cv_ok;")
    emit("    double sd;        /* numpy.std(x, ddof=1) */")
    emit("    double cv;        /* scipy.stats.variation(x, ddof=1) */")
    emit("    double mad_raw;   /* scipy.stats.median_abs_deviation(x) */")
    emit("    double mad_scaled; /* ... scale='normal' */")
    emit("    double q1, q3;")
    emit("    double lo_k15, hi_k15, lo_k3, hi_k3;")
    emit("    size_t nout_k15, nout_k3;")
    emit("};")
    emit()
    rows = []
    for i, (name, x) in enumerate(ONE):
        array(f"one_{i}", x)
        r = one_sample(name, x)
        rows.append(
            f'    {{"{name}", one_{i}, {len(x)}, {num(r["mean"])}, {num(r["median"])},\n'
            f'     {{{", ".join(num(v) for v in r["q"])}}},\n'
            f'     {b(r["sd_ok"])}, {b(r["cv_ok"])}, {num(r["sd"])}, {num(r["cv"])}, '
            f'{num(r["mad_raw"])}, {num(r["mad_scaled"])},\n'
            f'     {num(r["q1"])}, {num(r["q3"])}, {num(r["lo_k15"])}, {num(r["hi_k15"])}, '
            f'{num(r["lo_k3"])}, {num(r["hi_k3"])}, {r["nout_k15"]}, {r["nout_k3"]}}},')
    emit("static const struct vec_one vec_one[] = {")
    emit("\n".join(rows))
    emit("};")
    emit()

    emit("/* scipy.stats.ttest_ind(x, y, equal_var=...); the CI is diff -/+ t.ppf * se. */")
    emit("struct vec_ttest {")
    emit("    bool ok; /* false: SciPy gives NaN (too few values or zero variance) */")
    emit("    double t, df, p, lo, hi;")
    emit("};")
    emit()
    emit("struct vec_two {")
    emit("    const char *name;")
    emit("    const double *x;")
    emit("    size_t nx;")
    emit("    const double *y;")
    emit("    size_t ny;")
    emit("    struct vec_ttest welch, student;")
    emit("    bool ties, exact_ok;")
    emit("    double u;       /* mannwhitneyu(x, y).statistic: U1 */")
    emit("    double p_exact; /* method='exact', two-sided */")
    emit("    double p_asym;  /* method='asymptotic', use_continuity=True, two-sided */")
    emit("    double z;       /* norm.isf(p_asym / 2) */")
    emit("    double hl;      /* numpy.median(numpy.subtract.outer(y, x)) */")
    emit("};")
    emit()

    def tt(t):
        if t is None:
            return "{false, NAN, NAN, NAN, NAN, NAN}"
        return (f'{{true, {num(t["t"])}, {num(t["df"])}, {num(t["p"])}, {num(t["lo"])}, '
                f'{num(t["hi"])}}}')

    rows = []
    for i, (name, x, y) in enumerate(TWO):
        array(f"two_{i}_x", x)
        array(f"two_{i}_y", y)
        r = two_sample(name, x, y)
        rows.append(
            f'    {{"{name}", two_{i}_x, {len(x)}, two_{i}_y, {len(y)},\n'
            f'     {tt(r["welch"])},\n'
            f'     {tt(r["student"])},\n'
            f'     {b(r["ties"])}, {b(r["exact_ok"])}, {num(r["u"])}, {num(r["p_exact"])}, '
            f'{num(r["p_asym"])}, {num(r["z"])}, {num(r["hl"])}}},')
    emit("static const struct vec_two vec_two[] = {")
    emit("\n".join(rows))
    emit("};")
    emit()

    r = boot()
    emit(f"/* scipy.stats.bootstrap((x, y), median(y)/median(x), method='percentile',")
    emit(f" * n_resamples=10000, confidence_level={LEVEL}) over random_state 0..{BOOT_RUNS - 1}:")
    emit(" * the mean and the standard deviation of each end of the interval. */")
    array("vec_boot_x", BOOT_X)
    array("vec_boot_y", BOOT_Y)
    emit(f"#define VEC_BOOT_EST {num(r['est'])}")
    emit(f"#define VEC_BOOT_LO {num(r['lo'])}")
    emit(f"#define VEC_BOOT_LO_SD {num(r['lo_sd'])}")
    emit(f"#define VEC_BOOT_HI {num(r['hi'])}")
    emit(f"#define VEC_BOOT_HI_SD {num(r['hi_sd'])}")
    emit()

    emit("/* z = norm.ppf(1 - alpha/2) + norm.ppf(power); mde = z * sqrt(1/n1 + 1/n2);")
    emit(" * rel = 100 * mde * sigma / |baseline|; eff = pct/100 * |baseline| / sigma;")
    emit(" * n = max(2, ceil(2 * (z / eff)^2)). */")
    emit("struct vec_power {")
    emit("    size_t n1, n2;")
    emit("    double alpha, power, sigma, baseline, pct;")
    emit("    double mde, rel, eff;")
    emit("    size_t n;")
    emit("    double need; /* the unrounded n */")
    emit("};")
    emit("static const struct vec_power vec_power[] = {")
    for n1, n2, al, pw, sg, base, pct in POWER:
        r = power(n1, n2, al, pw, sg, base, pct)
        emit(f"    {{{n1}, {n2}, {num(al)}, {num(pw)}, {num(sg)}, {num(base)}, {num(pct)},\n"
             f"     {num(r['mde'])}, {num(r['rel'])}, {num(r['eff'])}, {r['n']}, "
             f"{num(r['need'])}}},")
    emit("};")
    emit()
    emit("#endif")
    emit("/* clang-format on */")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
