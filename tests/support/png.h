/* A small valid PNG for the tests that need an image: 4x4 RGB, 8 bits. */
#ifndef CP_TEST_PNG_H
#define CP_TEST_PNG_H

#include <stddef.h>

extern const unsigned char cp_t_png[];
extern const size_t cp_t_png_len;

#endif
