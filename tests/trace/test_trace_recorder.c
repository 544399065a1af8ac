/* trace recorder: interning, application ranges, reserve, iteration
 * stamping, drops and clear. */
#include "trace/trace.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

static struct cp_trace_recorder *new_recorder(size_t cap)
{
    struct cp_trace_recorder *r = cp_trace_recorder_create(cap);
    cr_assert_not_null(r);
    return r;
}

Test(trace_recorder, intern_gives_same_id_for_same_text)
{
    struct cp_trace_recorder *r = new_recorder(0);
    int32_t a = cp_trace_intern(r, "conv_in");
    int32_t b = cp_trace_intern(r, "relu");
    int32_t a2 = cp_trace_intern(r, "conv_in");
    cr_assert_geq(a, 0);
    cr_assert_geq(b, 0);
    cr_assert_eq(a, a2);
    cr_assert_neq(a, b);
    cr_assert_str_eq(cp_trace_string(r, a), "conv_in");
    cr_assert_str_eq(cp_trace_string(r, b), "relu");
    cr_assert_eq(cp_trace_n_strings(r), 2);
    cr_assert_null(cp_trace_string(r, 2));
    cr_assert_null(cp_trace_string(r, -1));
    cr_assert_eq(cp_trace_intern(r, NULL), -1);
    cp_trace_recorder_free(r);
}

Test(trace_recorder, intern_keeps_ids_stable_across_growth)
{
    struct cp_trace_recorder *r = new_recorder(0);
    char name[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "node_%d", i);
        cr_assert_eq(cp_trace_intern(r, name), i, "ids are dense, in order of first sight");
    }
    for (int i = 0; i < 5000; i += 7) {
        snprintf(name, sizeof(name), "node_%d", i);
        cr_assert_eq(cp_trace_intern(r, name), i);
        cr_assert_str_eq(cp_trace_string(r, i), name);
    }
    cr_assert_eq(cp_trace_n_strings(r), 5000);
    /* The empty string is a string like any other. */
    int32_t e = cp_trace_intern(r, "");
    cr_assert_eq(e, 5000);
    cr_assert_eq(cp_trace_intern(r, ""), e);
    cp_trace_recorder_free(r);
}

Test(trace_recorder, push_pop_nest_and_record_depth)
{
    struct cp_trace_recorder *r = new_recorder(16);
    cr_assert_eq(cp_trace_push(r, "bench"), CP_OK);
    cr_assert_eq(cp_trace_depth(r), 1);
    cr_assert_eq(cp_trace_push(r, "warmup"), CP_OK);
    cr_assert_eq(cp_trace_push(r, "step"), CP_OK);
    cr_assert_eq(cp_trace_depth(r), 3);
    cr_assert_eq(cp_trace_pop(r), CP_OK);
    cr_assert_eq(cp_trace_pop(r), CP_OK);
    cr_assert_eq(cp_trace_push(r, "measure"), CP_OK);
    cr_assert_eq(cp_trace_pop(r), CP_OK);
    cr_assert_eq(cp_trace_pop(r), CP_OK);
    cr_assert_eq(cp_trace_depth(r), 0);

    /* Ranges are recorded when they close: innermost first. */
    cr_assert_eq(cp_trace_n_events(r), 4);
    const struct cp_trace_event *ev = cp_trace_events(r);
    const char *names[] = {"step", "warmup", "measure", "bench"};
    const int depths[] = {2, 1, 1, 0};
    for (int i = 0; i < 4; i++) {
        cr_assert_str_eq(cp_trace_string(r, ev[i].name), names[i]);
        cr_assert_eq(ev[i].depth, depths[i], "%s at depth %d", names[i], ev[i].depth);
        cr_assert_eq(ev[i].layer, CP_LAYER_APP);
        cr_assert_eq(ev[i].kernel, -1);
        cr_assert_eq(ev[i].thread, 0);
        cr_assert_leq(ev[i].start_ns, ev[i].end_ns);
    }
    /* Children lie within their parents. */
    cr_assert_geq(ev[0].start_ns, ev[1].start_ns);
    cr_assert_leq(ev[0].end_ns, ev[1].end_ns);
    cr_assert_geq(ev[1].start_ns, ev[3].start_ns);
    cr_assert_leq(ev[2].end_ns, ev[3].end_ns);
    cr_assert_geq(ev[2].start_ns, ev[1].end_ns);
    cr_assert_eq(cp_trace_dropped(r), 0);
    cp_trace_recorder_free(r);
}

Test(trace_recorder, pop_without_push_is_an_error)
{
    struct cp_trace_recorder *r = new_recorder(4);
    cr_assert_eq(cp_trace_pop(r), CP_ERR_INVALID);
    cr_assert_eq(cp_trace_push(r, "a"), CP_OK);
    cr_assert_eq(cp_trace_pop(r), CP_OK);
    cr_assert_eq(cp_trace_pop(r), CP_ERR_INVALID);
    cr_assert_eq(cp_trace_n_events(r), 1);
    cp_trace_recorder_free(r);
}

Test(trace_recorder, push_beyond_max_depth_is_refused)
{
    struct cp_trace_recorder *r = new_recorder(0);
    for (int i = 0; i < CP_TRACE_MAX_DEPTH; i++)
        cr_assert_eq(cp_trace_push(r, "deep"), CP_OK);
    cr_assert_eq(cp_trace_push(r, "too deep"), CP_ERR_INVALID);
    cr_assert_eq(cp_trace_depth(r), CP_TRACE_MAX_DEPTH);
    cr_assert_eq(cp_trace_push(r, NULL), CP_ERR_INVALID);
    for (int i = 0; i < CP_TRACE_MAX_DEPTH; i++)
        cr_assert_eq(cp_trace_pop(r), CP_OK);
    cr_assert_eq(cp_trace_n_events(r), CP_TRACE_MAX_DEPTH);
    cr_assert_eq(cp_trace_events(r)[0].depth, CP_TRACE_MAX_DEPTH - 1);
    cp_trace_recorder_free(r);
}

Test(trace_recorder, reserve_then_records_do_not_move_or_drop)
{
    struct cp_trace_recorder *r = new_recorder(0);
    int32_t name = cp_trace_intern(r, "k");
    cr_assert_eq(cp_trace_reserve(r, 10000), CP_OK);
    /* One record to get at the buffer; the rest must not reallocate it. */
    cp_trace_record(r, CP_LAYER_DEVICE, name, 0, 0, 0, 1, 0);
    const struct cp_trace_event *buf = cp_trace_events(r);
    for (int i = 1; i < 10000; i++)
        cp_trace_record(r, CP_LAYER_DEVICE, name, i % 7, 0, (uint64_t)i * 10, (uint64_t)i * 10 + 5,
                        0);
    cr_assert_eq(cp_trace_events(r), buf, "reserved room must not be reallocated");
    cr_assert_eq(cp_trace_n_events(r), 10000);
    cr_assert_eq(cp_trace_dropped(r), 0);
    const struct cp_trace_event *e = &cp_trace_events(r)[9999];
    cr_assert_eq(e->start_ns, 99990);
    cr_assert_eq(e->end_ns, 99995);
    cr_assert_eq(e->kernel, 9999 % 7);
    cr_assert_eq(e->layer, CP_LAYER_DEVICE);
    cp_trace_recorder_free(r);
}

Test(trace_recorder, grows_past_capacity_without_reserve)
{
    struct cp_trace_recorder *r = new_recorder(2);
    for (int i = 0; i < 5000; i++)
        cp_trace_record(r, CP_LAYER_RUNTIME, 0, -1, -1, (uint64_t)i, (uint64_t)i + 1, 0);
    cr_assert_eq(cp_trace_n_events(r), 5000);
    cr_assert_eq(cp_trace_dropped(r), 0);
    cr_assert_eq(cp_trace_events(r)[4999].start_ns, 4999);
    cp_trace_recorder_free(r);
}

Test(trace_recorder, impossible_reserve_fails_and_leaves_recorder_usable)
{
    struct cp_trace_recorder *r = new_recorder(4);
    cp_trace_record(r, CP_LAYER_DEVICE, 0, 0, 0, 1, 2, 0);
    cr_assert_eq(cp_trace_reserve(r, SIZE_MAX), CP_ERR_NOMEM);
    cr_assert_eq(cp_trace_reserve(r, SIZE_MAX / 2), CP_ERR_NOMEM);
    cr_assert_eq(cp_trace_n_events(r), 1);
    cp_trace_record(r, CP_LAYER_DEVICE, 0, 0, 0, 3, 4, 0);
    cr_assert_eq(cp_trace_n_events(r), 2);
    cp_trace_recorder_free(r);
}

Test(trace_recorder, iteration_is_stamped_on_ranges_and_current_records)
{
    struct cp_trace_recorder *r = new_recorder(16);
    cr_assert_eq(cp_trace_iteration(r), -1);
    cr_assert_eq(cp_trace_push(r, "load"), CP_OK);
    cr_assert_eq(cp_trace_pop(r), CP_OK);
    cp_trace_set_iteration(r, 3);
    cr_assert_eq(cp_trace_iteration(r), 3);
    cr_assert_eq(cp_trace_push(r, "iter"), CP_OK);
    cp_trace_record(r, CP_LAYER_DEVICE, 0, 0, CP_TRACE_ITER_CURRENT, 10, 20, 0);
    cp_trace_record(r, CP_LAYER_DEVICE, 0, 0, 7, 20, 30, 0); /* explicit wins */
    cp_trace_set_iteration(r, 4);
    cr_assert_eq(cp_trace_pop(r), CP_OK); /* keeps the iteration it opened in */
    cp_trace_set_iteration(r, -5);
    cr_assert_eq(cp_trace_iteration(r), -1);
    cp_trace_record(r, CP_LAYER_RUNTIME, 0, -1, CP_TRACE_ITER_CURRENT, 30, 40, 0);

    const struct cp_trace_event *ev = cp_trace_events(r);
    cr_assert_eq(cp_trace_n_events(r), 5);
    cr_assert_eq(ev[0].iteration, -1);
    cr_assert_eq(ev[1].iteration, 3);
    cr_assert_eq(ev[2].iteration, 7);
    cr_assert_eq(ev[3].iteration, 3);
    cr_assert_str_eq(cp_trace_string(r, ev[3].name), "iter");
    cr_assert_eq(ev[4].iteration, -1);
    cp_trace_recorder_free(r);
}

Test(trace_recorder, record_normalises_odd_input)
{
    struct cp_trace_recorder *r = new_recorder(8);
    cp_trace_record(r, CP_LAYER_DEVICE, 0, -9, -3, 100, 50, -2);
    cp_trace_record(r, CP_LAYER_DEVICE, 0, 1, 0, 0, 1, 1 << 20);
    cp_trace_record(r, (enum cp_trace_layer)7, 0, 1, 0, 0, 1, 0);
    cp_trace_record_depth(r, CP_LAYER_RUNTIME, 0, -1, 0, 0, 1, 0, 1000);
    cr_assert_eq(cp_trace_n_events(r), 3);
    cr_assert_eq(cp_trace_dropped(r), 1, "an unknown layer is dropped, and counted");
    const struct cp_trace_event *ev = cp_trace_events(r);
    cr_assert_eq(ev[0].end_ns, 100, "end before start becomes a zero-length interval");
    cr_assert_eq(ev[0].kernel, -1);
    cr_assert_eq(ev[0].iteration, -1);
    cr_assert_eq(ev[0].thread, 0);
    cr_assert_eq(ev[1].thread, INT16_MAX);
    cr_assert_eq(ev[2].depth, 255);
    cp_trace_recorder_free(r);
}

Test(trace_recorder, clear_forgets_events_but_keeps_strings_and_open_ranges)
{
    struct cp_trace_recorder *r = new_recorder(8);
    int32_t id = cp_trace_intern(r, "conv");
    cr_assert_eq(cp_trace_push(r, "outer"), CP_OK);
    cp_trace_set_iteration(r, 2);
    cp_trace_record(r, CP_LAYER_DEVICE, id, 0, CP_TRACE_ITER_CURRENT, 1, 2, 0);
    cp_trace_record(r, (enum cp_trace_layer)9, id, 0, 0, 1, 2, 0);
    cr_assert_eq(cp_trace_dropped(r), 1);
    cp_trace_clear(r);
    cr_assert_eq(cp_trace_n_events(r), 0);
    cr_assert_eq(cp_trace_dropped(r), 0);
    cr_assert_eq(cp_trace_intern(r, "conv"), id);
    cr_assert_eq(cp_trace_iteration(r), 2);
    cr_assert_eq(cp_trace_depth(r), 1);
    cr_assert_eq(cp_trace_pop(r), CP_OK);
    cr_assert_eq(cp_trace_n_events(r), 1);
    cp_trace_recorder_free(r);
}

Test(trace_recorder, free_null_is_a_noop)
{
    cp_trace_recorder_free(NULL);
}

Test(trace_recorder, layer_names)
{
    cr_assert_str_eq(cp_trace_layer_name(CP_LAYER_APP), "application");
    cr_assert_str_eq(cp_trace_layer_name(CP_LAYER_RUNTIME), "runtime");
    cr_assert_str_eq(cp_trace_layer_name(CP_LAYER_DEVICE), "device");
    cr_assert_str_eq(cp_trace_layer_name((enum cp_trace_layer)42), "unknown");
}
