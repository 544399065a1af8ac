/* Windows and the mel weight matrix (see op_eval.h). */
#include "graph/op_eval.h" /* cp_eval_window, cp_eval_mel_weight_matrix */

#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

void cp_eval_window(enum cp_op op, bool periodic, int64_t size, enum cp_dtype dt, void *out)
{
    double a0 = 0.5, a1 = 0.5, a2 = 0.0; /* Hann */
    if (op == CP_OP_HAMMING_WINDOW) {
        a0 = 25.0 / 46.0;
        a1 = 1.0 - a0;
    } else if (op == CP_OP_BLACKMAN_WINDOW) {
        a0 = 0.42;
        a1 = 0.5;
        a2 = 0.08;
    }
    double N = (double)(periodic ? size : size - 1);
    for (int64_t i = 0; i < size; i++) {
        double v = a0 - a1 * cos(2.0 * M_PI * (double)i / N) + a2 * cos(4.0 * M_PI * (double)i / N);
        cp_elem_store_f64(out, dt, i, v);
    }
}

bool cp_eval_mel_weight_matrix(int64_t mel, int64_t dft, int64_t rate, double lo, double hi,
                               enum cp_dtype dt, void *out)
{
    if (mel < 1 || dft < 1 || rate < 1)
        return false;
    int64_t bins = dft / 2 + 1;
    for (int64_t e = 0; e < bins * mel; e++)
        cp_elem_store_f64(out, dt, e, 0.0);
    double lo_mel = 2595.0 * log10(1.0 + lo / 700.0), hi_mel = 2595.0 * log10(1.0 + hi / 700.0);
    double step = (hi_mel - lo_mel) / (double)(mel + 2);
    for (int64_t m = 0; m < mel; m++) {
        int64_t pt[3];
        for (int q = 0; q < 3; q++) {
            double hz = 700.0 * (pow(10.0, ((double)(m + q) * step + lo_mel) / 2595.0) - 1.0);
            pt[q] = (int64_t)floor((double)(dft + 1) * hz / (double)rate);
        }
        int64_t up = pt[1] - pt[0], down = pt[2] - pt[1];
        if (up == 0) {
            if (pt[1] >= 0 && pt[1] < bins)
                cp_elem_store_f64(out, dt, pt[1] * mel + m, 1.0);
        } else {
            for (int64_t j = pt[0]; j <= pt[1]; j++)
                if (j >= 0 && j < bins)
                    cp_elem_store_f64(out, dt, j * mel + m, (double)(j - pt[0]) / (double)up);
        }
        for (int64_t j = pt[1]; down > 0 && j < pt[2]; j++)
            if (j >= 0 && j < bins)
                cp_elem_store_f64(out, dt, j * mel + m, (double)(pt[2] - j) / (double)down);
    }
    return true;
}
