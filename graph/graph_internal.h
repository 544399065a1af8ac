/* Private to graph/: the graph's layout. Other modules use graph.h only. */
#ifndef CP_GRAPH_INTERNAL_H
#define CP_GRAPH_INTERNAL_H

#include "graph/graph.h"
#include "core/hashmap.h"

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
    /* Tensor name -> index; keys are the names in the arena. */
    struct cp_strmap names;
    struct cp_mmap *maps; /* adopted mappings */
    size_t n_maps;
    struct cp_graph **subs; /* subgraphs of GRAPH attributes, owned */
    size_t n_subs;
    int32_t *outer; /* outer-scope references (see graph.h) */
    size_t n_outer, cap_outer;
};

/* Replace the node array by exactly `order` (indices into the current
 * array), dropping every node not listed, and renumber tensor producers. */
enum cp_status cp_graph_reorder_nodes_(struct cp_graph *g, const int32_t *order, size_t n);

#endif
