/* The timeline page's fixed parts, one string per line, NULL-terminated
 * (view/timeline_page.c). Private to view/. */
#ifndef CP_VIEW_TIMELINE_PAGE_H
#define CP_VIEW_TIMELINE_PAGE_H

extern const char *const TL_CSS[];    /* inline style: no fonts or images fetched */
extern const char *const TL_BODY[];   /* the markup the script fills */
extern const char *const TL_SCRIPT[]; /* zoom, pan, details, flows, search */

#endif
