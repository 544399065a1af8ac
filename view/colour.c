/* The colours the views share (view/colour.h). */
#include "view/colour.h"

#include "report/chart.h"
#include "trace/trace.h"

/* Greys: from 60% (the palette's black lightened) up by the name's tint. */
#define GREY_BASE 0.6

size_t vw_layer_colour(int32_t layer)
{
    switch (layer) {
    case CP_LAYER_APP:
        return CP_CHART_SKY;
    case CP_LAYER_RUNTIME:
        return CP_CHART_ORANGE;
    case CP_LAYER_DEVICE:
        return CP_CHART_GREEN;
    default:
        return CP_CHART_BLUE;
    }
}

void vw_fill(size_t c, const char *name, char out[8])
{
    cp_chart_tint_hex(c, cp_chart_name_tint(name), out);
}

void vw_grey_fill(const char *name, char out[8])
{
    cp_chart_tint_hex(CP_CHART_BLACK, GREY_BASE + (1 - GREY_BASE) * cp_chart_name_tint(name), out);
}
