/* --constraints (rules/constraints.h): the documented grammar parses into
 * base units, checks measured values, prints back canonically, and every
 * kind of bad input gets a message that quotes the item and says what would
 * be accepted. */
#include "rules/constraints.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct cp_constraints parse_ok(const char *text)
{
    struct cp_constraints c;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_constraints_parse(text, &c, &d);
    cr_assert_eq(st, CP_OK, "'%s': %s", text, d.msg);
    return c;
}

static void expect_error(const char *text, const char *want)
{
    struct cp_constraints c;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_constraints_parse(text, &c, &d);
    cr_expect_eq(st, CP_ERR_USAGE, "'%s': status %d, %s", text, st, d.msg);
    cr_expect_eq(cp_status_exit_code(st), 2);
    cr_expect_eq(c.n, 0, "'%s': a failed parse leaves no constraints", text);
    cr_expect_str_eq(d.msg, want, "'%s': got\n  %s\nwant\n  %s", text, d.msg, want);
}

static char *format(const struct cp_constraints *c)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_constraints_format(c, &b);
    cr_assert_eq(cp_buf_status(&b), CP_OK);
    char *s = cp_buf_steal(&b);
    return s ? s : cp_strdup("");
}

static void expect_value(const struct cp_constraints *c, enum cp_constraint_kind kind,
                         enum cp_constraint_op op, double want)
{
    const struct cp_constraint *k = cp_constraints_find(c, kind);
    cr_assert_not_null(k, "no %s constraint", cp_constraint_kind_name(kind));
    cr_expect_eq(k->op, op, "%s: op %s", cp_constraint_kind_name(kind),
                 cp_constraint_op_text(k->op));
    cr_expect(fabs(k->value - want) <= 1e-12 * fabs(want), "%s = %.17g, want %.17g",
              cp_constraint_kind_name(kind), k->value, want);
}

Test(constraints, the_documented_example_parses_into_base_units)
{
    struct cp_constraints c = parse_ok("memory<3GB,precision_loss<1%");
    cr_expect_eq(c.n, 2);
    expect_value(&c, CP_CONSTRAINT_MEMORY, CP_CONSTRAINT_LT, 3e9);
    expect_value(&c, CP_CONSTRAINT_PRECISION_LOSS, CP_CONSTRAINT_LT, 1.0); /* percent */
    cr_expect_null(cp_constraints_find(&c, CP_CONSTRAINT_LATENCY));
}

Test(constraints, all_four_with_every_unit_and_spaces)
{
    struct cp_constraints c =
        parse_ok(" latency <= 20ms , throughput>=200/s,memory < 2.5 GiB,precision_loss<=0.5% ");
    cr_expect_eq(c.n, 4);
    cr_expect_eq(c.items[0].kind, CP_CONSTRAINT_LATENCY, "order is kept");
    expect_value(&c, CP_CONSTRAINT_LATENCY, CP_CONSTRAINT_LE, 0.02);
    expect_value(&c, CP_CONSTRAINT_THROUGHPUT, CP_CONSTRAINT_GE, 200);
    expect_value(&c, CP_CONSTRAINT_MEMORY, CP_CONSTRAINT_LT, 2.5 * 1073741824.0);
    expect_value(&c, CP_CONSTRAINT_PRECISION_LOSS, CP_CONSTRAINT_LE, 0.5);

    static const struct {
        const char *text;
        enum cp_constraint_kind kind;
        double value;
    } units[] = {
        {"memory<512B", CP_CONSTRAINT_MEMORY, 512},
        {"memory<1KB", CP_CONSTRAINT_MEMORY, 1e3},
        {"memory<1KiB", CP_CONSTRAINT_MEMORY, 1024},
        {"memory<100MB", CP_CONSTRAINT_MEMORY, 1e8},
        {"memory<100MiB", CP_CONSTRAINT_MEMORY, 104857600},
        {"memory<1TB", CP_CONSTRAINT_MEMORY, 1e12},
        {"memory<1TiB", CP_CONSTRAINT_MEMORY, 1099511627776.0},
        {"memory<1.5e9B", CP_CONSTRAINT_MEMORY, 1.5e9},
        {"latency<500us", CP_CONSTRAINT_LATENCY, 5e-4},
        {"latency<500\xc2\xb5s", CP_CONSTRAINT_LATENCY, 5e-4},
        {"latency<500\xce\xbcs", CP_CONSTRAINT_LATENCY, 5e-4},
        {"latency<800ns", CP_CONSTRAINT_LATENCY, 8e-7},
        {"latency<2s", CP_CONSTRAINT_LATENCY, 2},
        {"throughput>50ips", CP_CONSTRAINT_THROUGHPUT, 50},
        {"throughput>12.5 /s", CP_CONSTRAINT_THROUGHPUT, 12.5},
        {"precision_loss<=0%", CP_CONSTRAINT_PRECISION_LOSS, 0},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        c = parse_ok(units[i].text);
        const struct cp_constraint *k = cp_constraints_find(&c, units[i].kind);
        cr_assert_not_null(k, "%s", units[i].text);
        cr_expect(fabs(k->value - units[i].value) <= 1e-12 * fabs(units[i].value),
                  "%s: %.17g, want %.17g", units[i].text, k->value, units[i].value);
    }
}

Test(constraints, check_compares_measured_values)
{
    struct cp_constraints c =
        parse_ok("memory<3GB,precision_loss<1%,latency<=20ms,throughput>200/s");
    bool ok;
    cr_expect_eq(cp_constraints_check(&c, "memory", 2.9e9, &ok), CP_OK);
    cr_expect(ok);
    cp_constraints_check(&c, "memory", 3e9, &ok);
    cr_expect(!ok, "< is strict");
    cp_constraints_check(&c, "precision_loss", 0.65, &ok);
    cr_expect(ok, "0.65%% is below 1%%");
    cp_constraints_check(&c, "precision_loss", INFINITY, &ok);
    cr_expect(!ok, "an infinite loss always fails");
    cp_constraints_check(&c, "precision_loss", NAN, &ok);
    cr_expect(!ok, "an unknown loss fails");
    cp_constraints_check(&c, "latency", 0.020, &ok);
    cr_expect(ok, "<= includes the bound");
    cp_constraints_check(&c, "latency", 0.0201, &ok);
    cr_expect(!ok);
    cp_constraints_check(&c, "throughput", 250, &ok);
    cr_expect(ok);
    cp_constraints_check(&c, "throughput", 200, &ok);
    cr_expect(!ok);

    struct cp_constraints only_memory = parse_ok("memory<=1GB");
    cp_constraints_check(&only_memory, "latency", 1e9, &ok);
    cr_expect(ok, "no constraint on latency: anything goes");
    cr_expect_eq(cp_constraints_check(&only_memory, "memroy", 1, &ok), CP_ERR_INVALID);
    cr_expect(!ok);
}

Test(constraints, format_prints_canonically_and_round_trips)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"memory<3GB,precision_loss<1%", "memory<3GB,precision_loss<1%"},
        {"memory <= 3072 MiB", "memory<=3GiB"},
        {"memory<1500MB", "memory<1.5GB"},
        {"memory<1536MiB", "memory<1.5GiB"},
        {"memory<1000B", "memory<1KB"},
        {"memory<1024B", "memory<1KiB"},
        {"memory<123456789B", "memory<123456789B"}, /* shorter than 123.456789MB */
        {"latency<0.02s", "latency<20ms"},
        {"latency<=1500us", "latency<=1.5ms"},
        {"latency<250\xc2\xb5s", "latency<250us"},
        {"throughput>=200ips", "throughput>=200/s"},
        {"precision_loss<0.5%", "precision_loss<0.5%"},
        {"precision_loss<=0%", "precision_loss<=0%"},
        {" throughput > 10/s , latency < 2s ", "throughput>10/s,latency<2s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cp_constraints c = parse_ok(cases[i].in);
        char *s = format(&c);
        cr_expect_str_eq(s, cases[i].out, "'%s'", cases[i].in);
        /* Parsing the canonical text gives the same constraints. */
        struct cp_constraints again = parse_ok(s);
        cr_expect_eq(again.n, c.n);
        for (size_t k = 0; k < c.n; k++) {
            cr_expect_eq(again.items[k].kind, c.items[k].kind);
            cr_expect_eq(again.items[k].op, c.items[k].op);
            cr_expect(fabs(again.items[k].value - c.items[k].value) <=
                          1e-12 * fabs(c.items[k].value),
                      "'%s': %.17g after a round trip, %.17g before", s, again.items[k].value,
                      c.items[k].value);
        }
        free(s);
    }
    struct cp_constraints none;
    cp_constraints_init(&none);
    char *s = format(&none);
    cr_expect_str_eq(s, "");
    free(s);

    char v[48];
    cp_constraint_format_value(CP_CONSTRAINT_LATENCY, 0.0042, v);
    cr_expect_str_eq(v, "4.2ms");
    cp_constraint_format_value(CP_CONSTRAINT_PRECISION_LOSS, 0.65, v);
    cr_expect_str_eq(v, "0.65%");
    cp_constraint_format_value(CP_CONSTRAINT_MEMORY, 0, v);
    cr_expect_str_eq(v, "0B");
    cp_constraint_format_value(CP_CONSTRAINT_THROUGHPUT, 0.25, v);
    cr_expect_str_eq(v, "0.25/s");
}

Test(constraints, bad_input_gets_a_clear_error)
{
    expect_error("memroy<3GB",
                 "--constraints: 'memroy<3GB': unknown constraint 'memroy' (did you mean "
                 "'memory'?); known: memory, precision_loss, latency, throughput");
    expect_error("memory<3GB,speed>10/s",
                 "--constraints: 'speed>10/s': unknown constraint 'speed'; known: memory, "
                 "precision_loss, latency, throughput");
    expect_error("memory<3gb",
                 "--constraints: 'memory<3gb': unknown unit 'gb' for memory (did you mean 'GB'?); "
                 "units are case-sensitive: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, "
                 "TiB (powers of 1024)");
    expect_error("latency<20m",
                 "--constraints: 'latency<20m': unknown unit 'm' for latency; use ns, us (or "
                 "\xc2\xb5s), ms, s");
    expect_error("memory<3",
                 "--constraints: 'memory<3': memory needs a unit: B, KB, MB, GB, TB (powers of "
                 "1000) or KiB, MiB, GiB, TiB (powers of 1024); as in memory<3GB");
    expect_error("precision_loss<0.01",
                 "--constraints: 'precision_loss<0.01': precision_loss needs a unit: % "
                 "(precision_loss is a percentage); as in precision_loss<1%");
    expect_error("latency<20",
                 "--constraints: 'latency<20': latency needs a unit: ns, us (or \xc2\xb5s), ms, s; "
                 "as in latency<20ms");
    expect_error("throughput>200",
                 "--constraints: 'throughput>200': throughput needs a unit: /s or ips (items "
                 "per second); as in throughput>200/s");
    expect_error("memory<", "--constraints: 'memory<': missing value after '<', as in memory<3GB");
    expect_error("memory<abcGB",
                 "--constraints: 'memory<abcGB': expected a number after '<', found 'abcGB'; as "
                 "in memory<3GB");
    expect_error("memory3GB",
                 "--constraints: 'memory3GB': unknown constraint 'memory3GB' (did you mean "
                 "'memory'?); known: memory, precision_loss, latency, throughput");
    expect_error("memory 3GB",
                 "--constraints: 'memory 3GB': expected <, <=, > or >= after 'memory', as in "
                 "memory<3GB");
    expect_error("memory=3GB",
                 "--constraints: 'memory=3GB': a constraint is a bound: use <, <=, > or >=, as in "
                 "memory<3GB");
    expect_error("<3GB", "--constraints: '<3GB': expected a constraint name first; known: memory, "
                         "precision_loss, latency, throughput");
    expect_error("memory<3GB,memory<2GB",
                 "--constraints: 'memory<2GB': memory is constrained twice (also 'memory<3GB'); "
                 "give one bound");
    expect_error("memory>3GB",
                 "--constraints: 'memory>3GB': memory is an upper limit; write memory<3GB or "
                 "memory<=3GB");
    expect_error("latency>=5ms",
                 "--constraints: 'latency>=5ms': latency is an upper limit; write latency<5ms or "
                 "latency<=5ms");
    expect_error("throughput<200/s",
                 "--constraints: 'throughput<200/s': throughput is a lower limit; write "
                 "throughput>200/s or throughput>=200/s");
    expect_error("latency<-5ms",
                 "--constraints: 'latency<-5ms': a latency bound cannot be negative");
    expect_error("latency<0ms",
                 "--constraints: 'latency<0ms': this can never hold: nothing is below 0");
    expect_error("memory<1e999GB", "--constraints: 'memory<1e999GB': the number '1e999' is out of "
                                   "range");
    expect_error("memory<3GB,,latency<5ms",
                 "--constraints: 'memory<3GB,,latency<5ms': constraint 2 is empty; separate "
                 "constraints with single commas, as in memory<3GB,latency<20ms");
    expect_error("memory<3GB,",
                 "--constraints: 'memory<3GB,': constraint 2 is empty; separate constraints with "
                 "single commas, as in memory<3GB,latency<20ms");
    expect_error("", "--constraints: no constraint given; expected e.g. "
                     "memory<3GB,precision_loss<1%");
    expect_error(" , ", "--constraints: no constraint given; expected e.g. "
                        "memory<3GB,precision_loss<1%");
}

/* The round trip fuzz/fuzz_constraints.c checks: the number was checked
 * before its unit multiplied it, so 1e300TB became an infinite bound that
 * every value satisfied, and whose canonical text ("infB") did not parse. */
Test(constraints, a_value_that_overflows_in_base_units_is_refused)
{
    expect_error("memory<1e300TB", "--constraints: 'memory<1e300TB': the value is out of range "
                                   "once converted from TB");
    expect_error("latency<1ms,memory<=1.7e308KiB",
                 "--constraints: 'memory<=1.7e308KiB': the value is out of range once converted "
                 "from KiB");
    struct cp_constraints c = parse_ok("memory<1e290GB");
    char *text = format(&c);
    struct cp_constraints back = parse_ok(text);
    cr_expect_eq(back.n, 1, "%s", text);
    free(text);
}

Test(constraints, origin_names_the_source_of_the_text)
{
    struct cp_constraints c;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_expect_eq(cp_constraints_parse_from("pipeline.yaml:4:15", "memory<3XB", &c, &d),
                 CP_ERR_USAGE);
    cr_expect_str_eq(d.msg, "pipeline.yaml:4:15: 'memory<3XB': unknown unit 'XB' for memory; use "
                            "B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of "
                            "1024)");
}

Test(constraints, junk_never_crashes)
{
    static const char alphabet[] = "memory<>=,% GBKiMsunthrougpt_lcay/.0123456789e-+\xc2\xb5\xff";
    unsigned long long s = 88172645463325252ULL;
    char buf[128];
    int n_ok = 0;
    for (int iter = 0; iter < 20000; iter++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        size_t n = (size_t)(s % 48);
        for (size_t i = 0; i < n; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            buf[i] = alphabet[s % (sizeof alphabet - 1)];
        }
        buf[n] = '\0';
        /* Some start from a valid prefix, to get past the name; some are a
         * valid text with one character changed. */
        if (iter % 3 == 2) {
            static const char *const valid[] = {"memory<3GB,precision_loss<1%",
                                                "latency <= 20ms, throughput>=200/s",
                                                "memory<2.5GiB,latency<1.5e3us"};
            const char *v = valid[iter / 3 % 3];
            size_t vl = strlen(v);
            memcpy(buf, v, vl + 1);
            buf[n % vl] = alphabet[(s >> 20) % (sizeof alphabet - 1)];
        } else if (iter % 3 == 1) {
            static const char *const pre[] = {"memory<", "latency<=", "throughput>",
                                              "precision_loss<", "memory<3GB,"};
            const char *p = pre[iter / 2 % 5];
            size_t pl = strlen(p);
            memmove(buf + pl, buf, n + 1);
            memcpy(buf, p, pl);
        }
        struct cp_constraints c;
        struct cp_diag d;
        cp_diag_init(&d);
        if (cp_constraints_parse(buf, &c, &d) == CP_OK) {
            n_ok++;
            char *f = format(&c);
            struct cp_constraints again;
            cr_expect_eq(cp_constraints_parse(f, &again, &d), CP_OK, "'%s' -> '%s': %s", buf, f,
                         d.msg);
            free(f);
        } else {
            cr_expect(strncmp(d.msg, "--constraints: ", 15) == 0, "'%s': %s", buf, d.msg);
        }
    }
    cr_expect_gt(n_ok, 100, "only %d parsed", n_ok);
}

Test(constraints, precision_loss_may_bound_one_output)
{
    struct cp_constraints c =
        parse_ok("precision_loss[logits] < 0.5%, precision_loss<1%, precision_loss[ box ]<=2%");
    cr_assert_eq(c.n, 3);
    cr_expect_str_eq(c.items[0].output, "logits");
    cr_expect_eq(c.items[0].value, 0.5);
    cr_expect_str_eq(c.items[1].output, "", "no name: every output together");
    cr_expect_str_eq(c.items[2].output, "box", "blanks around the name are dropped");
    cr_expect_eq(c.items[2].op, CP_CONSTRAINT_LE);
    /* find: the whole-model bound, and each output's */
    cr_expect_eq(cp_constraints_find(&c, CP_CONSTRAINT_PRECISION_LOSS), &c.items[1]);
    cr_expect_eq(cp_constraints_find_output(&c, CP_CONSTRAINT_PRECISION_LOSS, "logits"),
                 &c.items[0]);
    cr_expect_null(cp_constraints_find_output(&c, CP_CONSTRAINT_PRECISION_LOSS, "other"));
    cr_expect_eq(cp_constraints_n_outputs(&c), 2);
    char *text = format(&c);
    cr_expect_str_eq(text, "precision_loss[logits]<0.5%,precision_loss<1%,precision_loss[box]<=2%");
    struct cp_constraints back = parse_ok(text);
    cr_expect_eq(back.n, 3);
    cr_expect_str_eq(back.items[2].output, "box");
    free(text);

    expect_error("precision_loss[logits]<1%,precision_loss[logits]<2%",
                 "--constraints: 'precision_loss[logits]<2%': precision_loss[logits] is "
                 "constrained twice (also 'precision_loss[logits]<1%'); give one bound");
    expect_error("memory[logits]<3GB",
                 "--constraints: 'memory[logits]<3GB': only precision_loss names an output "
                 "([NAME]); memory is the model's");
    expect_error("precision_loss[]<1%",
                 "--constraints: 'precision_loss[]<1%': an empty output name: write "
                 "precision_loss[NAME]<0.5%");
    expect_error("precision_loss[logits<1%",
                 "--constraints: 'precision_loss[logits<1%': '[' opens an output name that no "
                 "']' closes");
}
