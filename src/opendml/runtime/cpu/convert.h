/* CAST's conversions between the 11 element types (ops/cast.py states the rules; these give the bytes of the reference,
 * runtime/cpu/numpy_kernels.convert_array, for every pair: tests/runtime/test_cpu_move.py checks):
 *
 *   same type        the bits, unchanged
 *   float -> float   round to nearest even; float16 by NumPy's bit routines (npy_floatbits_to_halfbits,
 *                    npy_doublebits_to_halfbits, npy_halfbits_to_doublebits: NaN payloads kept), float32 <-> float64
 *                    by the C cast (as NumPy's astype)
 *   int -> float     the C cast (one rounding); to float16 through float32 (exact below 2^24; anything larger is
 *                    infinity)
 *   float -> int     truncate toward zero, saturate, NaN -> 0
 *   int -> int       two's complement wrap-around (the low bits)
 *
 * Each pair is a run function conv(d, s, n, ds, ss): n elements, byte strides, loads and stores through memcpy (any
 * alignment). Static: included by move.c only. */
#ifndef OPENDML_CPU_CONVERT_H
#define OPENDML_CPU_CONVERT_H

#include <stdint.h>
#include <string.h>

#include "fp16.h"
#include "move.h"

/* float64 -> float16 bits: npy_doublebits_to_halfbits (nearest even, overflow to infinity, NaN payload's top bits). */
static inline uint16_t odml_d2h(double value) {
    uint64_t d, d_sig;
    memcpy(&d, &value, 8);
    uint16_t h_sgn = (uint16_t)((d & 0x8000000000000000ull) >> 48), h_exp, h_sig;
    uint64_t d_exp = d & 0x7ff0000000000000ull;
    if (d_exp >= 0x40f0000000000000ull)
        return odml_h_beyond(h_sgn, d_exp == 0x7ff0000000000000ull && (d & 0x000fffffffffffffull),
                             (uint16_t)((d & 0x000fffffffffffffull) >> 42));
    if (d_exp <= 0x3f00000000000000ull) {
        if (d_exp < 0x3e60000000000000ull) return h_sgn;
        d_exp >>= 52;
        d_sig = 0x0010000000000000ull + (d & 0x000fffffffffffffull);
        d_sig <<= (d_exp - 998);
        if ((d_sig & 0x003fffffffffffffull) != 0x0010000000000000ull) d_sig += 0x0010000000000000ull;
        h_sig = (uint16_t)(d_sig >> 53);
        return (uint16_t)(h_sgn + h_sig);
    }
    h_exp = (uint16_t)((d_exp - 0x3f00000000000000ull) >> 42);
    d_sig = d & 0x000fffffffffffffull;
    if ((d_sig & 0x000007ffffffffffull) != 0x0000020000000000ull) d_sig += 0x0000020000000000ull;
    h_sig = (uint16_t)(d_sig >> 42);
    return (uint16_t)(h_sgn + h_sig + h_exp);
}

/* float16 bits -> float64: exact, NaN payloads kept (a signalling NaN stays one), as npy_halfbits_to_doublebits. */
static inline double odml_h2d(uint16_t h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x03ffu)) {
        uint64_t bits = ((uint64_t)(h & 0x8000u) << 48) | 0x7ff0000000000000ull | ((uint64_t)(h & 0x03ffu) << 42);
        double v;
        memcpy(&v, &bits, 8);
        return v;
    }
    return (double)odml_h2f(h);
}

/* float -> integer: truncate toward zero, saturate, NaN -> 0. LO is the type's minimum minus one (for int64 it rounds
 * to -2^63, which saturates to the same minimum); HI its maximum plus one, a power of two. */
#define ODML_F2I(NAME, T, LO, HI, MIN, MAX)                                          \
    static inline T NAME(double v) {                                                 \
        if (v != v) return 0;                                                        \
        if (v >= (HI)) return (MAX);                                                 \
        if (v <= (LO)) return (MIN);                                                 \
        return (T)v;                                                                 \
    }
ODML_F2I(f2i_u64, uint64_t, -1.0, 18446744073709551616.0, 0, UINT64_MAX)
ODML_F2I(f2i_i64, int64_t, -9223372036854775808.0, 9223372036854775808.0, INT64_MIN, INT64_MAX)

/* Types of at most 32 bits: their limits are doubles, so the same rule is a clamp (NaN first) in the float type F,
 * which compilers vectorise. */
#define ODML_F2I_CLAMP(NAME, F, T, MIN, MAX)                                         \
    static inline T NAME(F v) {                                                      \
        v = v != v ? (F)0 : v;                                                       \
        v = v < (F)(MIN) ? (F)(MIN) : v;                                             \
        v = v > (F)(MAX) ? (F)(MAX) : v;                                             \
        return (T)v;                                                                 \
    }
ODML_F2I_CLAMP(f2i_u8, double, uint8_t, 0, UINT8_MAX)
ODML_F2I_CLAMP(f2i_u16, double, uint16_t, 0, UINT16_MAX)
ODML_F2I_CLAMP(f2i_u32, double, uint32_t, 0, UINT32_MAX)
ODML_F2I_CLAMP(f2i_i8, double, int8_t, INT8_MIN, INT8_MAX)
ODML_F2I_CLAMP(f2i_i16, double, int16_t, INT16_MIN, INT16_MAX)
ODML_F2I_CLAMP(f2i_i32, double, int32_t, INT32_MIN, INT32_MAX)

typedef void (*odml_conv_fn)(char *d, const char *s, int64_t n, int64_t ds, int64_t ss);

/* The loop of a conversion run: n elements from s to d (byte strides SS, DS). */
#define ODML_CONV_LOOP(S, D, EXPR, DS, SS)                                            \
    for (int64_t i = 0; i < n; i++) {                                                \
        S x; D y;                                                                    \
        memcpy(&x, s + i * (SS), sizeof x);                                          \
        y = (EXPR);                                                                  \
        memcpy(d + i * (DS), &y, sizeof y);                                          \
    }

/* One run function per pair: a packed form (both strides the element sizes; compilers vectorise it), a strided one. */
#define ODML_CONV(NAME, S, D, EXPR)                                                   \
    static void NAME(char *d, const char *s, int64_t n, int64_t ds, int64_t ss) {    \
        if (ds == (int64_t)sizeof(D) && ss == (int64_t)sizeof(S)) {                  \
            ODML_CONV_LOOP(S, D, EXPR, (int64_t)sizeof(D), (int64_t)sizeof(S))       \
            return;                                                                  \
        }                                                                            \
        ODML_CONV_LOOP(S, D, EXPR, ds, ss)                                           \
    }

/* Storage types: float16 is its bits (uint16_t). The value of a source x as a double (exact for every type but
 * (u)int64, which only the float targets read through these, with their own casts below). */
#define V_F64(x) (x)
#define V_F16(x) ((double)odml_h2f(x))

/* Pairs are named conv_<src>_<dst>. Integer sources: */
#define INT_SOURCE(SN, S)                                                            \
    ODML_CONV(conv_##SN##_f32, S, float, (float)x)                                   \
    ODML_CONV(conv_##SN##_f64, S, double, (double)x)                                 \
    ODML_CONV(conv_##SN##_f16, S, uint16_t, odml_f2h((float)x))                      \
    ODML_CONV(conv_##SN##_u8, S, uint8_t, (uint8_t)x)                                \
    ODML_CONV(conv_##SN##_u16, S, uint16_t, (uint16_t)x)                             \
    ODML_CONV(conv_##SN##_u32, S, uint32_t, (uint32_t)x)                             \
    ODML_CONV(conv_##SN##_u64, S, uint64_t, (uint64_t)x)                             \
    ODML_CONV(conv_##SN##_i8, S, int8_t, (int8_t)x)                                  \
    ODML_CONV(conv_##SN##_i16, S, int16_t, (int16_t)x)                               \
    ODML_CONV(conv_##SN##_i32, S, int32_t, (int32_t)x)                               \
    ODML_CONV(conv_##SN##_i64, S, int64_t, (int64_t)x)

/* Float sources (V turns x into a double; F32/F64/F16 the float targets): */
#define FLOAT_SOURCE(SN, S, V, TO_F32, TO_F64, TO_F16)                               \
    ODML_CONV(conv_##SN##_f32, S, float, TO_F32)                                     \
    ODML_CONV(conv_##SN##_f64, S, double, TO_F64)                                    \
    ODML_CONV(conv_##SN##_f16, S, uint16_t, TO_F16)                                  \
    ODML_CONV(conv_##SN##_u8, S, uint8_t, f2i_u8(V(x)))                              \
    ODML_CONV(conv_##SN##_u16, S, uint16_t, f2i_u16(V(x)))                           \
    ODML_CONV(conv_##SN##_u32, S, uint32_t, f2i_u32(V(x)))                           \
    ODML_CONV(conv_##SN##_u64, S, uint64_t, f2i_u64(V(x)))                           \
    ODML_CONV(conv_##SN##_i8, S, int8_t, f2i_i8(V(x)))                               \
    ODML_CONV(conv_##SN##_i16, S, int16_t, f2i_i16(V(x)))                            \
    ODML_CONV(conv_##SN##_i32, S, int32_t, f2i_i32(V(x)))                            \
    ODML_CONV(conv_##SN##_i64, S, int64_t, f2i_i64(V(x)))

INT_SOURCE(u8, uint8_t)
INT_SOURCE(u16, uint16_t)
INT_SOURCE(u32, uint32_t)
INT_SOURCE(u64, uint64_t)
INT_SOURCE(i8, int8_t)
INT_SOURCE(i16, int16_t)
INT_SOURCE(i32, int32_t)
INT_SOURCE(i64, int64_t)
/* float32 to the integers of at most 32 bits in float32 itself (4 lanes where compilers vectorise, not 2): the same
 * truncate-and-saturate, NaN -> 0. int32's and uint32's maxima are not float32 values: the clamp stops at the largest
 * float below 2^31 (2^32) and values from 2^31 (2^32) up take the maximum. */
ODML_F2I_CLAMP(f32i_u8, float, uint8_t, 0, 255.0f)
ODML_F2I_CLAMP(f32i_u16, float, uint16_t, 0, 65535.0f)
ODML_F2I_CLAMP(f32i_i8, float, int8_t, INT8_MIN, 127.0f)
ODML_F2I_CLAMP(f32i_i16, float, int16_t, INT16_MIN, 32767.0f)
ODML_F2I_CLAMP(f32i_i32_low, float, int32_t, INT32_MIN, 2147483520.0f)
ODML_F2I_CLAMP(f32i_u32_low, float, uint32_t, 0, 4294967040.0f)
static inline int32_t f32i_i32(float v) { int32_t r = f32i_i32_low(v); return v >= 2147483648.0f ? INT32_MAX : r; }
static inline uint32_t f32i_u32(float v) { uint32_t r = f32i_u32_low(v); return v >= 4294967296.0f ? UINT32_MAX : r; }

ODML_CONV(conv_f32_f32, float, float, x)
ODML_CONV(conv_f32_f64, float, double, (double)x)
ODML_CONV(conv_f32_f16, float, uint16_t, odml_f2h(x))
ODML_CONV(conv_f32_u8, float, uint8_t, f32i_u8(x))
ODML_CONV(conv_f32_u16, float, uint16_t, f32i_u16(x))
ODML_CONV(conv_f32_u32, float, uint32_t, f32i_u32(x))
ODML_CONV(conv_f32_u64, float, uint64_t, f2i_u64((double)x))
ODML_CONV(conv_f32_i8, float, int8_t, f32i_i8(x))
ODML_CONV(conv_f32_i16, float, int16_t, f32i_i16(x))
ODML_CONV(conv_f32_i32, float, int32_t, f32i_i32(x))
ODML_CONV(conv_f32_i64, float, int64_t, f2i_i64((double)x))
FLOAT_SOURCE(f64, double, V_F64, (float)x, x, odml_d2h(x))
FLOAT_SOURCE(f16, uint16_t, V_F16, odml_h2f(x), odml_h2d(x), x)

/* The conversion table, indexed [src_type][dst_type] by DataType value. */
#define ROW(SN)                                                                      \
    { NULL, conv_##SN##_f32, conv_##SN##_f16, conv_##SN##_u32, conv_##SN##_u16, conv_##SN##_u8, \
      conv_##SN##_i32, conv_##SN##_i16, conv_##SN##_i8, conv_##SN##_f64, conv_##SN##_u64, conv_##SN##_i64 }
static const odml_conv_fn odml_conv_table[12][12] = {
    { NULL },
    ROW(f32), ROW(f16), ROW(u32), ROW(u16), ROW(u8), ROW(i32), ROW(i16), ROW(i8), ROW(f64), ROW(u64), ROW(i64),
};
#undef ROW

#endif /* OPENDML_CPU_CONVERT_H */
