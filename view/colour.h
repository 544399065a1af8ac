/* The colours the views share (private to view/): what a layer's events are
 * drawn in, in the flame graph and the timeline alike, from the chart
 * module's palette (report/chart.h). */
#ifndef CP_VIEW_COLOUR_H
#define CP_VIEW_COLOUR_H

#include <stddef.h>
#include <stdint.h>

/* The palette colour of a trace layer's events: application sky blue,
 * runtime orange, kernels bluish green, any other layer blue. */
size_t vw_layer_colour(int32_t layer);

/* The fill of an event or frame of palette colour c named `name`:
 * lightened by the name (report/chart.h), as "#rrggbb". */
void vw_fill(size_t c, const char *name, char out[8]);

/* The fill of a root or a track, which has no colour of its own: a grey
 * lightened by its name. */
void vw_grey_fill(const char *name, char out[8]);

#endif
