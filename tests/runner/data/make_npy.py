#!/usr/bin/python3
"""Regenerate the small .npy fixtures used by tests/runner/test_io.c.

Run with Debian's python3-numpy (1.24): /usr/bin/python3 make_npy.py
The tests read the committed files and never need Python themselves.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, arr, version=None):
    with open(os.path.join(HERE, name), "wb") as f:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=False)


grid = (np.arange(6, dtype="<f4").reshape(2, 3) * 0.5 - 1.0).astype("<f4")
save("f32_2x3_v1.npy", grid)                   # values -1.0 .. 1.5
save("f32_2x3_v2.npy", grid, version=(2, 0))
save("f32_2x3_v3.npy", grid, version=(3, 0))
save("f16_3_v1.npy", np.array([1.5, -2.0, 0.25], dtype="<f2"))
save("i64_scalar_v1.npy", np.array(-7, dtype="<i8"))
save("i32_5_v2.npy", np.array([0, 1, -2, 300000, -2147483648], dtype="<i4"), version=(2, 0))
save("i8_2x2_v1.npy", np.array([[-128, -1], [0, 127]], dtype="i1"))
save("u8_4_v1.npy", np.array([0, 1, 200, 255], dtype="u1"))
save("bool_2x2_v1.npy", np.array([[True, False], [False, True]]))
save("f32_0x3_v1.npy", np.zeros((0, 3), dtype="<f4"))
save("u2_bits_3_v1.npy", np.array([0x3F80, 0xC000, 0x0000], dtype="<u2"))  # bf16 1, -2, 0
# Refused:
save("f32_big_endian.npy", grid.astype(">f4"))
save("f32_fortran.npy", np.asfortranarray(grid))
save("f64_2_v1.npy", np.array([1.0, 2.0], dtype="<f8"))
