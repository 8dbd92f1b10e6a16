/* Exact float16 <-> float32 conversion by bit manipulation (no F16C, no _Float16, no special compiler flags), for
 * FOLD's float16 sums (fold.c), CAST (convert.h) and float16 accumulation (indexed/index.c).
 *
 * odml_h2f is exact for every bit pattern (NaN payloads kept, as NumPy's float16 -> float32 cast keeps them). odml_f2h
 * rounds to nearest, ties to even, overflowing to infinity: NumPy's npy_floatbits_to_halfbits step for step, so it
 * gives the bytes of NumPy's float32 -> float16 astype (tests/runtime/test_cpu_fold.py compares them). */
#ifndef OPENDML_CPU_FP16_H
#define OPENDML_CPU_FP16_H

#include <stdint.h>
#include <string.h>

/* The canonical quiet NaNs (sign +, payload 0) that FOLD's sums and scale/bias results store for every NaN
 * (float16's is 0x7E00, odml_f2h of the float32 one). */
static inline float odml_nan_f32(void) { uint32_t b = 0x7FC00000u; float f; memcpy(&f, &b, 4); return f; }
static inline double odml_nan_f64(void) { uint64_t b = 0x7FF8000000000000ull; double f; memcpy(&f, &b, 8); return f; }

static inline float odml_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu, bits;
    float f;
    if (em >= 0x7c00u) {                      /* infinity, NaN: payload kept */
        bits = 0x7f800000u | ((em & 0x3ffu) << 13);
    } else if (em >= 0x0400u) {               /* normal: rebias the exponent (127 - 15 = 112) */
        bits = (em << 13) + 0x38000000u;
    } else {                                  /* zero, subnormal: em * 2^-24, exact and normal in float32 */
        f = (float)em * 5.9604644775390625e-08f;
        memcpy(&bits, &f, 4);
    }
    bits |= sign;
    memcpy(&f, &bits, 4);
    return f;
}

/* A value beyond float16's range (odml_f2h, odml_d2h): infinity of sign h_sgn, or, for a NaN, a NaN keeping its
 * payload's top 10 bits `top` (1 where they are all 0, so it stays a NaN). */
static inline uint16_t odml_h_beyond(uint16_t h_sgn, int nan, uint16_t top) {
    return (uint16_t)(h_sgn + 0x7c00u + (nan ? (top ? top : 1u) : 0u));
}

static inline uint16_t odml_f2h(float value) {
    uint32_t f, f_exp, f_sig;
    uint16_t h_sgn, h_exp, h_sig;
    memcpy(&f, &value, 4);
    h_sgn = (uint16_t)((f & 0x80000000u) >> 16);
    f_exp = f & 0x7f800000u;
    if (f_exp >= 0x47800000u)                 /* overflow, infinity, NaN */
        return odml_h_beyond(h_sgn, f_exp == 0x7f800000u && (f & 0x007fffffu),
                             (uint16_t)((f & 0x007fffffu) >> 13));
    if (f_exp <= 0x38000000u) {               /* subnormal half or signed zero */
        if (f_exp < 0x33000000u) return h_sgn;
        f_exp >>= 23;
        f_sig = 0x00800000u + (f & 0x007fffffu);
        f_sig >>= (113 - f_exp);
        /* ties to even: add half an ulp unless the kept part is even and the
         * rest is exactly one half (bits shifted out are checked in f) */
        if (((f_sig & 0x00003fffu) != 0x00001000u) || (f & 0x000007ffu)) f_sig += 0x00001000u;
        h_sig = (uint16_t)(f_sig >> 13);
        return (uint16_t)(h_sgn + h_sig);     /* a carry into the exponent is the right result */
    }
    h_exp = (uint16_t)((f_exp - 0x38000000u) >> 13);
    f_sig = f & 0x007fffffu;
    if ((f_sig & 0x00003fffu) != 0x00001000u) f_sig += 0x00001000u;
    h_sig = (uint16_t)(f_sig >> 13);
    return (uint16_t)(h_sgn + h_exp + h_sig); /* a carry may reach infinity: right too */
}

#endif /* OPENDML_CPU_FP16_H */
