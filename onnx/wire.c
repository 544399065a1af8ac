/* A guard run before protobuf-c's unpack: how deeply do messages nest?
 *
 * protobuf-c decodes nested messages by recursion with no depth limit, so a
 * crafted file of a megabyte (graph -> node -> attribute -> graph -> ...)
 * overflows the stack. This walk follows the wire format only far enough to
 * measure nesting: it uses protobuf-c's own descriptors to tell submessages
 * from strings and bytes, decodes no values and judges nothing else; it
 * stops only at framing unpack would refuse as well (a truncated varint, a
 * length past the end, group or unknown wire types). The limit matches protobuf's C++ default
 * (100), which the reference ONNX tools use. */
#include "onnx/onnx_internal.h"

#include <protobuf-c/protobuf-c.h>

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* false: malformed framing or nesting beyond `depth_left`. */
static bool walk(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *desc,
                 int depth_left, bool *too_deep)
{
    while (p < end) {
        uint64_t key, len;
        if (!read_varint(&p, end, &key))
            return false;
        uint64_t number = key >> 3;
        switch (key & 7) {
        case 0: /* varint */
            if (!read_varint(&p, end, &len))
                return false;
            break;
        case 1: /* 64-bit */
            if (end - p < 8)
                return false;
            p += 8;
            break;
        case 5: /* 32-bit */
            if (end - p < 4)
                return false;
            p += 4;
            break;
        case 2: { /* length-delimited: a submessage, string, bytes or packed array */
            if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p))
                return false;
            const ProtobufCFieldDescriptor *f =
                desc && number <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(desc, (unsigned)number)
                    : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth_left == 0) {
                    *too_deep = true;
                    return false;
                }
                if (!walk(p, p + len, f->descriptor, depth_left - 1, too_deep))
                    return false;
            }
            p += len;
            break;
        }
        default: /* groups (3, 4) and invalid types: unpack refuses them too */
            return false;
        }
    }
    return true;
}

enum cp_status onnx_wire_check(struct onnx_ctx *c, const uint8_t *data, size_t len)
{
    bool too_deep = false;
    if (walk(data, data + len, &onnx__model_proto__descriptor, CP_ONNX_MAX_NESTING, &too_deep))
        return CP_OK;
    if (too_deep)
        return onnx_err(c, CP_ERR_PARSE,
                        "not a valid ONNX model: messages nest more than %d levels deep",
                        CP_ONNX_MAX_NESTING);
    return onnx_err(c, CP_ERR_PARSE,
                    "not a valid ONNX model: its protobuf encoding could not be decoded (the "
                    "file is truncated, corrupt or not ONNX)");
}
