/* Test support: small hand-built ONNX models (see onnx_model.h). */
#include "support/onnx_model.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_CHAIN 8

void cp_t_onnx_value_init(struct cp_t_onnx_value *v, const char *name, int elem_type, int64_t d0,
                          int64_t d1)
{
    const int64_t d[2] = {d0, d1};
    for (int i = 0; i < 2; i++) {
        Onnx__TensorShapeProto__Dimension init = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        v->dim[i] = init;
        v->dim[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        v->dim[i].dim_value = d[i];
        v->dims[i] = &v->dim[i];
    }
    Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    v->shape = shape;
    v->shape.n_dim = 2;
    v->shape.dim = v->dims;
    Onnx__TypeProto__Tensor tensor = ONNX__TYPE_PROTO__TENSOR__INIT;
    v->tensor = tensor;
    v->tensor.has_elem_type = 1;
    v->tensor.elem_type = elem_type;
    v->tensor.shape = &v->shape;
    Onnx__TypeProto type = ONNX__TYPE_PROTO__INIT;
    v->type = type;
    v->type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    v->type.tensor_type = &v->tensor;
    Onnx__ValueInfoProto info = ONNX__VALUE_INFO_PROTO__INIT;
    v->info = info;
    v->info.name = (char *)name;
    v->info.type = &v->type;
}

uint8_t *cp_t_onnx_pack(Onnx__GraphProto *graph, const char *producer, size_t *len)
{
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    opset.domain = (char *)"";
    opset.has_version = 1;
    opset.version = 17;
    Onnx__OperatorSetIdProto *opsets[] = {&opset};
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.n_opset_import = 1;
    m.opset_import = opsets;
    m.producer_name = (char *)producer;
    m.graph = graph;
    *len = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(*len ? *len : 1);
    if (!buf || onnx__model_proto__pack(&m, buf) != *len) {
        free(buf);
        *len = 0;
        return NULL;
    }
    return buf;
}

uint8_t *cp_t_onnx_chain(const char *const *ops, size_t n, int cast_to, size_t *len)
{
    *len = 0;
    if (n == 0 || n > MAX_CHAIN)
        return NULL;
    struct cp_t_onnx_value x, y;
    cp_t_onnx_value_init(&x, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, 4);
    cp_t_onnx_value_init(&y, "y", cast_to ? cast_to : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, 4);
    Onnx__AttributeProto to = ONNX__ATTRIBUTE_PROTO__INIT;
    to.name = (char *)"to";
    to.has_type = 1;
    to.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    to.has_i = 1;
    to.i = cast_to;
    Onnx__AttributeProto *to_attrs[] = {&to};
    Onnx__ValueInfoProto *ins[] = {&x.info};
    Onnx__ValueInfoProto *outs[] = {&y.info};

    Onnx__NodeProto nodes[MAX_CHAIN];
    Onnx__NodeProto *node_ptrs[MAX_CHAIN];
    char out_names[MAX_CHAIN][32], node_names[MAX_CHAIN][32];
    char *in_ptr[MAX_CHAIN], *out_ptr[MAX_CHAIN];
    for (size_t i = 0; i < n; i++) {
        Onnx__NodeProto init = ONNX__NODE_PROTO__INIT;
        nodes[i] = init;
        snprintf(out_names[i], sizeof out_names[i], i + 1 == n ? "y" : "t%zu", i);
        snprintf(node_names[i], sizeof node_names[i], "node_%zu", i);
        in_ptr[i] = i == 0 ? (char *)"x" : out_names[i - 1];
        out_ptr[i] = out_names[i];
        nodes[i].n_input = 1;
        nodes[i].input = &in_ptr[i];
        nodes[i].n_output = 1;
        nodes[i].output = &out_ptr[i];
        nodes[i].name = node_names[i];
        nodes[i].op_type = (char *)ops[i];
        if (cast_to && i + 1 == n) {
            nodes[i].n_attribute = 1;
            nodes[i].attribute = to_attrs;
        }
        node_ptrs[i] = &nodes[i];
    }
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    graph.name = (char *)"handmade";
    graph.n_node = n;
    graph.node = node_ptrs;
    graph.n_input = 1;
    graph.input = ins;
    graph.n_output = 1;
    graph.output = outs;
    return cp_t_onnx_pack(&graph, "cannprof-test", len);
}
