/* Private to graph/: the graph's layout. Other modules use graph.h only. */
#ifndef CP_GRAPH_INTERNAL_H
#define CP_GRAPH_INTERNAL_H

#include "graph/graph.h"

struct cp_arena_chunk;

struct cp_graph {
    struct cp_arena_chunk *arena;
    char *name;
    int64_t opset;
    struct cp_tensor **tensors;
    size_t n_tensors, cap_tensors;
    struct cp_node **nodes;
    size_t n_nodes, cap_nodes;
    int32_t *inputs;
    size_t n_inputs, cap_inputs;
    int32_t *outputs;
    size_t n_outputs, cap_outputs;
    /* Open-addressing index of tensor names: slot = tensor index + 1, 0 =
     * empty. Capacity is a power of two, at least twice n_tensors. */
    uint32_t *name_slots;
    size_t cap_slots;
    struct cp_mmap *maps; /* adopted mappings */
    size_t n_maps;
};

/* Replace the node array by exactly `order` (indices into the current
 * array), dropping every node not listed, and renumber tensor producers. */
enum cp_status cp_graph_reorder_nodes_(struct cp_graph *g, const int32_t *order, size_t n);

#endif
