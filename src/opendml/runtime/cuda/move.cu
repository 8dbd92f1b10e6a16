// opendml CUDA kernels of the move program (plan.MovePlan: the data-movement
// family). Compiled at run time by NVRTC through CuPy (backend.py, one
// specialisation per template arguments, `-I<runtime dir>` for params.h,
// `--fmad=false`); `nvcc -I<runtime dir> -DOPENDML_INSTANTIATE -c` checks the
// syntax on machines without a GPU; `g++ -x c++ -DODML_MOVE_HOST` builds the
// conversion functions alone for the host (tests/runtime/test_cuda_move.py
// compares them with the CPU backend's NumPy conversion bit for bit).
//
// Kernels (each takes (source words, destination words, odml_move_params BY
// VALUE), as every opendml kernel does; one launch per pass of the program):
//   move_copy<S, D, NDIM, I, ITEMS, CONV, MAPS>  dst[o] = f(src[m(o)])
//   move_fill<D, NDIM, I, ITEMS>                 dst[o] = fill word
//   move_vec, move_tile                          vectorised copies/conversions, small transposes
//   move_pad, move_padw                          a padding program in one pass (rows / 16-byte words)
//   move_cvt                                     a contiguous conversion, U runs a thread
// Threads walk the destination in memory order (dimensions are ordered by
// destination stride by the host), ITEMS elements per thread, all loads issued
// before the first store. Destination coordinates come from the flat index by
// multiply-shift division (32-bit index type I, the host picks it where the
// count and sizes fit below 2^31) or plain 64-bit division (I = u64); element
// offsets are 64-bit.
//
// Conversion (CONV = 1) follows the CPU backend's NumPy kernels
// (numpy_kernels.convert_array, prepare_move_pass) bit for bit on an x86 host:
//   * float -> integer: truncate toward zero, saturate, NaN -> 0 (via float64);
//   * integer -> integer: two's complement wrap (low bits);
//   * integer -> float: round to nearest even (int -> float16 through float32,
//     exact where it matters: every integer a float16 can hold is exact in
//     float32, and the others overflow to infinity either way);
//   * float16 <-> float32/float64: NumPy's software conversion (round to
//     nearest even, subnormals kept, NaN payload shifted and NOT quieted,
//     a NaN whose payload would vanish gets payload 1);
//   * float32 <-> float64: x86 conversion (NaN quieted: bit 22 / bit 51 set);
//   * scale/bias: x*scale then +bias, two roundings, in float32 (float16 and
//     float32 sources; integer sources convert to float32 first) or float64
//     (float64 source); a NaN result is the canonical NaN (0x7FC00000 /
//     0x7FF8000000000000), then converted like any value.
// Every float operation here is explicit PTX without .ftz (CuPy adds -ftz=true
// to NVRTC compiles), so subnormals are kept as NumPy keeps them.

#ifndef ODML_MOVE_HOST
#include "params.h"
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#define ODML_GRID_CONSTANT
#else
#define ODML_GRID_CONSTANT __grid_constant__
#endif
#define ODML_HD __device__ __forceinline__
#else
#include <stdint.h>
#include <string.h>
#define ODML_HD static inline
#endif

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long s64;

// DataType values (model/data_type.py).
#define ODML_T_FLOAT32 1
#define ODML_T_FLOAT16 2
#define ODML_T_UINT32 3
#define ODML_T_UINT16 4
#define ODML_T_UINT8 5
#define ODML_T_INT32 6
#define ODML_T_INT16 7
#define ODML_T_INT8 8
#define ODML_T_FLOAT64 9
#define ODML_T_UINT64 10
#define ODML_T_INT64 11

// -- bit casts and the few hardware operations used -----------------------------

ODML_HD float odml_f32(u32 b) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float f; memcpy(&f, &b, 4); return f;
#endif
}
ODML_HD u32 odml_b32(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    u32 b; memcpy(&b, &f, 4); return b;
#endif
}
ODML_HD double odml_f64(u64 b) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double((s64)b);
#else
    double f; memcpy(&f, &b, 8); return f;
#endif
}
ODML_HD u64 odml_b64(double f) {
#ifdef __CUDA_ARCH__
    return (u64)__double_as_longlong(f);
#else
    u64 b; memcpy(&b, &f, 8); return b;
#endif
}
ODML_HD int odml_clz32(u32 x) {
#ifdef __CUDA_ARCH__
    return __clz((int)x);
#else
    return __builtin_clz(x);
#endif
}
// round to nearest even, subnormals kept (no .ftz)
ODML_HD float odml_mul32(float a, float b) {
#ifdef __CUDA_ARCH__
    float r; asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r;
#else
    volatile float r = a * b; return r;
#endif
}
ODML_HD float odml_add32(float a, float b) {
#ifdef __CUDA_ARCH__
    float r; asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r;
#else
    volatile float r = a + b; return r;
#endif
}
ODML_HD double odml_mul64(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    volatile double r = a * b; return r;
#endif
}
ODML_HD double odml_add64(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    volatile double r = a + b; return r;
#endif
}
ODML_HD float odml_d2f(double d) {   // not NaN
#ifdef __CUDA_ARCH__
    float r; asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(d)); return r;
#else
    return (float)d;
#endif
}
ODML_HD float odml_s2f(s64 x) {
#ifdef __CUDA_ARCH__
    return __ll2float_rn(x);
#else
    return (float)x;
#endif
}
ODML_HD float odml_u2f(u64 x) {
#ifdef __CUDA_ARCH__
    return __ull2float_rn(x);
#else
    return (float)x;
#endif
}
ODML_HD double odml_s2d(s64 x) {
#ifdef __CUDA_ARCH__
    return __ll2double_rn(x);
#else
    return (double)x;
#endif
}
ODML_HD double odml_u2d(u64 x) {
#ifdef __CUDA_ARCH__
    return __ull2double_rn(x);
#else
    return (double)x;
#endif
}
ODML_HD double odml_trunc(double d) {
#ifdef __CUDA_ARCH__
    return trunc(d);
#else
    return __builtin_trunc(d);
#endif
}

// -- float formats, in bits ------------------------------------------------------

ODML_HD bool odml_nan32(u32 b) { return (b & 0x7fffffffu) > 0x7f800000u; }
ODML_HD bool odml_nan64(u64 b) { return (b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }

ODML_HD u32 odml_h2f(u32 h) {  // float16 -> float32 bits (NumPy: exact, NaN not quieted)
    const u32 sign = (h & 0x8000u) << 16, e = h & 0x7c00u, m = h & 0x3ffu;
    if (e == 0x7c00u) return sign | 0x7f800000u | (m << 13);
    if (e != 0) return sign | (((h & 0x7fffu) + 0x1c000u) << 13);
    if (m == 0) return sign;
    const int top = 31 - odml_clz32(m);             // value m * 2^-24
    return sign | ((u32)(top + 103) << 23) | ((m << (23 - top)) & 0x7fffffu);
}

ODML_HD u64 odml_h2d(u32 h) {  // float16 -> float64 bits
    const u64 sign = (u64)(h & 0x8000u) << 48, e = h & 0x7c00u, m = h & 0x3ffu;
    if (e == 0x7c00u) return sign | 0x7ff0000000000000ull | (m << 42);
    if (e != 0) return sign | (((u64)(h & 0x7fffu) + 0xfc000ull) << 42);
    if (m == 0) return sign;
    const int top = 31 - odml_clz32((u32)m);
    return sign | ((u64)(top + 999) << 52) | ((m << (52 - top)) & 0xfffffffffffffull);
}

ODML_HD u64 odml_f2d(u32 f) {  // float32 -> float64 bits (x86: NaN quieted)
    const u64 sign = (u64)(f & 0x80000000u) << 32;
    const u32 e = (f >> 23) & 0xffu, m = f & 0x7fffffu;
    if (e == 0xffu) return sign | 0x7ff0000000000000ull | (m ? 0x8000000000000ull : 0) | ((u64)m << 29);
    if (e != 0) return sign | ((u64)(e + 896) << 52) | ((u64)m << 29);
    if (m == 0) return sign;
    const int top = 31 - odml_clz32(m);             // value m * 2^-149
    return sign | ((u64)(top + 874) << 52) | (((u64)m << (52 - top)) & 0xfffffffffffffull);
}

ODML_HD u32 odml_d2f_bits(u64 d) {  // float64 -> float32 bits (x86: NaN quieted, payload's top bits)
    if (odml_nan64(d))
        return (u32)((d >> 32) & 0x80000000u) | 0x7fc00000u | (u32)((d >> 29) & 0x7fffffu);
    return odml_b32(odml_d2f(odml_f64(d)));
}

ODML_HD u32 odml_f2h(u32 f) {  // float32 -> float16 bits, round to nearest even (NumPy's)
    const u32 sign = (f >> 16) & 0x8000u, a = f & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        if (a == 0x7f800000u) return sign | 0x7c00u;
        u32 r = 0x7c00u | ((a & 0x7fffffu) >> 13);
        return sign | (r == 0x7c00u ? 0x7c01u : r);
    }
    if (a >= 0x477ff000u) return sign | 0x7c00u;    // >= 65520: rounds to infinity
    if (a < 0x38800000u) {                          // below 2^-14: float16 subnormal or zero
        if (a <= 0x33000000u) return sign;          // <= 2^-25: rounds to zero (the tie to even)
        const u32 e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        const u32 shift = 126 - e;                  // 14..24; the result counts 2^-24
        u32 q = m >> shift;
        const u32 rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) ++q;
        return sign | q;
    }
    u32 r = (a - 0x38000000u) >> 13;
    const u32 rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) ++r;
    return sign | r;
}

// float32 -> float16 bits as odml_f2h: on the device the hardware's
// round-to-nearest-even conversion (cvt.rn.f16.f32, no .ftz: the same result
// as odml_f2h for every non-NaN value, subnormals and the overflow to infinity
// included), NaNs through odml_f2h (NumPy's payload rule; the hardware would
// give its canonical NaN).
ODML_HD u32 odml_f2h_fast(u32 f) {
#ifdef __CUDA_ARCH__
    if (odml_nan32(f)) return odml_f2h(f);
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(odml_f32(f)));
    return (u32)h;
#else
    return odml_f2h(f);
#endif
}

ODML_HD u32 odml_d2h(u64 d) {  // float64 -> float16 bits, one rounding (NumPy's)
    const u32 sign = (u32)(d >> 48) & 0x8000u;
    const u64 a = d & 0x7fffffffffffffffull;
    if (a >= 0x7ff0000000000000ull) {
        if (a == 0x7ff0000000000000ull) return sign | 0x7c00u;
        u32 r = 0x7c00u | (u32)((a & 0xfffffffffffffull) >> 42);
        return sign | (r == 0x7c00u ? 0x7c01u : r);
    }
    if (a >= 0x40effe0000000000ull) return sign | 0x7c00u;      // >= 65520
    if (a < 0x3f10000000000000ull) {                             // below 2^-14
        if (a <= 0x3e60000000000000ull) return sign;             // <= 2^-25
        const u32 e = (u32)(a >> 52);
        const u64 m = (a & 0xfffffffffffffull) | 0x10000000000000ull;
        const u32 shift = 1051 - e;                              // 43..53
        u64 q = m >> shift;
        const u64 rem = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) ++q;
        return sign | (u32)q;
    }
    u64 r = (a - 0x3f00000000000000ull) >> 42;
    const u64 rem = a & 0x3ffffffffffull;
    if (rem > 0x20000000000ull || (rem == 0x20000000000ull && (r & 1))) ++r;
    return sign | (u32)r;
}

// x*scale + bias, two roundings; a NaN result is the canonical NaN (as the
// CPU backend stores it: which payload an operation on NaNs keeps is the
// processor's choice).
ODML_HD u32 odml_scale_bias32(u32 x, u32 scale, u32 bias) {
    const u32 r = odml_b32(odml_add32(odml_mul32(odml_f32(x), odml_f32(scale)), odml_f32(bias)));
    return odml_nan32(r) ? 0x7fc00000u : r;
}
ODML_HD u64 odml_scale_bias64(u64 x, u64 scale, u64 bias) {
    const u64 r = odml_b64(odml_add64(odml_mul64(odml_f64(x), odml_f64(scale)), odml_f64(bias)));
    return odml_nan64(r) ? 0x7ff8000000000000ull : r;
}

ODML_HD int odml_is_float(int t) { return t == ODML_T_FLOAT32 || t == ODML_T_FLOAT16 || t == ODML_T_FLOAT64; }
ODML_HD int odml_is_signed(int t) { return t == ODML_T_INT8 || t == ODML_T_INT16 || t == ODML_T_INT32 || t == ODML_T_INT64; }

// An integer word (zero-extended bits of type t) as a signed 64-bit value
// (sign-extended for the signed types): the source of integer conversions.
ODML_HD s64 odml_int_value(u64 x, int t) {
    switch (t) {
        case ODML_T_INT8: return (s64)(signed char)(u8)x;
        case ODML_T_INT16: return (s64)(short)(u16)x;
        case ODML_T_INT32: return (s64)(int)(u32)x;
        default: return (s64)x;
    }
}

// A float word as float64 bits (exact).
ODML_HD u64 odml_float_as_d(u64 x, int t) {
    if (t == ODML_T_FLOAT64) return x;
    if (t == ODML_T_FLOAT32) return odml_f2d((u32)x);
    return odml_h2d((u32)x);
}

// A float value (float64 bits, exact copy of the source) to integer type dt:
// truncate toward zero, saturate, NaN -> 0.
ODML_HD u64 odml_float_to_int(u64 dbits, int dt) {
    if (odml_nan64(dbits)) return 0;
    const double t = odml_trunc(odml_f64(dbits));
    switch (dt) {
        case ODML_T_UINT8: return t >= 256.0 ? 0xffull : t < 0.0 ? 0 : (u64)(u8)(u32)t;
        case ODML_T_UINT16: return t >= 65536.0 ? 0xffffull : t < 0.0 ? 0 : (u64)(u16)(u32)t;
        case ODML_T_UINT32: return t >= 4294967296.0 ? 0xffffffffull : t < 0.0 ? 0 : (u64)(u32)t;
        case ODML_T_UINT64: return t >= 18446744073709551616.0 ? ~0ull : t < 0.0 ? 0 : (u64)t;
        case ODML_T_INT8: return (u64)(u8)(t >= 128.0 ? 127 : t < -128.0 ? -128 : (int)t);
        case ODML_T_INT16: return (u64)(u16)(t >= 32768.0 ? 32767 : t < -32768.0 ? -32768 : (int)t);
        case ODML_T_INT32:
            return (u64)(u32)(t >= 2147483648.0 ? 2147483647 : t < -2147483648.0 ? (int)0x80000000u : (int)t);
        default:
            return (u64)(t >= 9223372036854775808.0 ? (s64)0x7fffffffffffffffll
                         : t < -9223372036854775808.0 ? (s64)0x8000000000000000ull : (s64)t);
    }
}

// One element from type st to type dt (DataType values), bits zero-extended
// into 64; with sb, x*scale + bias first (f32 bits of scale/bias in the low
// halves of scale32/bias32; float64 bits in scale64/bias64).
ODML_HD u64 odml_convert(u64 x, int st, int dt, int sb, u64 scale32, u64 bias32, u64 scale64, u64 bias64) {
    if (sb) {
        if (st == ODML_T_FLOAT64) {
            x = odml_scale_bias64(x, scale64, bias64);
        } else {
            u32 v;
            if (st == ODML_T_FLOAT32) v = (u32)x;
            else if (st == ODML_T_FLOAT16) v = odml_h2f((u32)x);
            else if (st == ODML_T_UINT64) v = odml_b32(odml_u2f(x));
            else v = odml_b32(odml_s2f(odml_int_value(x, st)));
            x = odml_scale_bias32(v, (u32)scale32, (u32)bias32);
            st = ODML_T_FLOAT32;
        }
    }
    if (st == dt) return x;
    const int sf = odml_is_float(st);
    switch (dt) {
        case ODML_T_FLOAT32:
            if (st == ODML_T_FLOAT16) return odml_h2f((u32)x);
            if (st == ODML_T_FLOAT64) return odml_d2f_bits(x);
            if (st == ODML_T_UINT64) return odml_b32(odml_u2f(x));
            return odml_b32(odml_s2f(odml_int_value(x, st)));
        case ODML_T_FLOAT64:
            if (st == ODML_T_FLOAT16) return odml_h2d((u32)x);
            if (st == ODML_T_FLOAT32) return odml_f2d((u32)x);
            if (st == ODML_T_UINT64) return odml_b64(odml_u2d(x));
            return odml_b64(odml_s2d(odml_int_value(x, st)));
        case ODML_T_FLOAT16:
            if (st == ODML_T_FLOAT32) return odml_f2h_fast((u32)x);
            if (st == ODML_T_FLOAT64) return odml_d2h(x);
            if (st == ODML_T_UINT64) return odml_f2h(odml_b32(odml_u2f(x)));
            return odml_f2h(odml_b32(odml_s2f(odml_int_value(x, st))));
        default:
#ifdef __CUDA_ARCH__
            if (st == ODML_T_FLOAT32) {  // the exact widening in hardware (no .ftz: subnormals kept)
                if (odml_nan32((u32)x)) return 0;
                double w;
                asm("cvt.f64.f32 %0, %1;" : "=d"(w) : "f"(odml_f32((u32)x)));
                return odml_float_to_int(odml_b64(w), dt);
            }
#endif
            if (sf) return odml_float_to_int(odml_float_as_d(x, st), dt);
            {
                const u64 v = (u64)odml_int_value(x, st);
                switch (dt) {
                    case ODML_T_UINT8: case ODML_T_INT8: return v & 0xffull;
                    case ODML_T_UINT16: case ODML_T_INT16: return v & 0xffffull;
                    case ODML_T_UINT32: case ODML_T_INT32: return v & 0xffffffffull;
                    default: return v;
                }
            }
    }
}

#ifdef ODML_MOVE_HOST
// The host build: y[i] = odml_convert(x[i], ...) over n words.
extern "C" void odml_convert_host(const u64* x, u64* y, long long n, int st, int dt, int sb, u64 scale32,
                                  u64 bias32, u64 scale64, u64 bias64) {
    for (long long i = 0; i < n; ++i) y[i] = odml_convert(x[i], st, dt, sb, scale32, bias32, scale64, bias64);
}
#else

// -- kernels ----------------------------------------------------------------------

typedef odml_i64 i64;

// MAPS: the source coordinate along a mapped dimension (plan.AxisMap):
// i = c - shift, then outside [0, size) CLAMP, REFLECT, SYMMETRIC, WRAP, or
// CONSTANT (the element is the fill word).
#define ODML_MAP_CLAMP 1
#define ODML_MAP_REFLECT 2
#define ODML_MAP_SYMMETRIC 3
#define ODML_MAP_WRAP 4
#define ODML_MAP_CONSTANT 5

__device__ __forceinline__ i64 odml_floor_mod(i64 a, i64 m) {
    i64 r = a % m;
    return r < 0 ? r + m : r;
}

// The source coordinate of i outside [0, n) (n >= 1), or -1 for CONSTANT.
// Within one period of the border (every padding narrower than the input)
// without a division.
__device__ __forceinline__ i64 odml_map_outside(i64 i, i64 mode, i64 n) {
    switch (mode) {
        case ODML_MAP_CLAMP: return i < 0 ? 0 : n - 1;
        case ODML_MAP_WRAP:
            if (i < 0 && i >= -n) return i + n;
            if (i >= n && i < 2 * n) return i - n;
            return odml_floor_mod(i, n);
        case ODML_MAP_SYMMETRIC: {
            if (i < 0 && i >= -n) return -1 - i;
            if (i >= n && i < 2 * n) return 2 * n - 1 - i;
            const i64 r = odml_floor_mod(i, 2 * n);
            return r < n ? r : 2 * n - 1 - r;
        }
        case ODML_MAP_REFLECT: {
            if (n == 1) return 0;
            if (i < 0 && i > -n) return -i;
            if (i >= n && i < 2 * n - 1) return 2 * (n - 1) - i;
            const i64 r = odml_floor_mod(i, 2 * (n - 1));
            return r < n ? r : 2 * (n - 1) - r;
        }
        default:
            return -1;
    }
}

// The quotient of n by a dimension's size: multiply-shift for 32-bit indices
// (n < 2^31; magic and shift from the host), division for 64-bit ones.
template <typename I> __device__ __forceinline__ I odml_div(I n, const odml_move_dim& d);
template <> __device__ __forceinline__ u32 odml_div<u32>(u32 n, const odml_move_dim& d) {
    const u32 t = __umulhi(n, (u32)d.div_magic);
    return (t + n) >> (u32)d.div_shift;
}
template <> __device__ __forceinline__ u64 odml_div<u64>(u64 n, const odml_move_dim& d) {
    return n / (u64)d.size;
}

// Destination and source offsets of flat destination index `rest`; `fill`
// set where a CONSTANT map falls outside the source.
template <int NDIM, typename I, int MAPS>
__device__ __forceinline__ void odml_offsets(const odml_move_params* __restrict__ p, I rest, i64& so, i64& dof,
                                             bool& fill) {
    i64 a = p->src_offset, b = p->dst_offset;
#pragma unroll
    for (int d = NDIM - 1; d >= 0; --d) {
        const odml_move_dim& q = p->dim[d];
        I c;
        if (d > 0) {
            const I qd = odml_div<I>(rest, q);
            c = rest - qd * (I)q.size;
            rest = qd;
        } else {
            c = rest;
        }
        b += (i64)c * q.dst_stride;
        i64 s = (i64)c;
        if (MAPS && q.map_mode) {
            s -= q.map_shift;
            if ((u64)s >= (u64)q.map_size) {
                s = odml_map_outside(s, q.map_mode, q.map_size);
                if (s < 0) {
                    fill = true;
                    s = 0;
                }
            }
        }
        a += s * q.src_stride;
    }
    so = a;
    dof = b;
}

// dst[o] = f(src[m(o)]) over the pass's destination index space (S, D: words
// of the source and destination element sizes). CONV 0: the same type, words
// copied; 1: odml_convert with the pass's types and scale/bias.
template <typename S, typename D, int NDIM, typename I, int ITEMS, int CONV, int MAPS>
__global__ void __launch_bounds__(256) move_copy(const S* __restrict__ src, D* __restrict__ dst,
                                                 const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    const I count = (I)p->count;
    const I first = (I)blockIdx.x * (I)(blockDim.x * ITEMS) + (I)threadIdx.x;
    i64 so[ITEMS], dof[ITEMS];
    bool fill[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        fill[j] = false;
        odml_offsets<NDIM, I, MAPS>(p, first + (I)j * (I)blockDim.x, so[j], dof[j], fill[j]);
    }
    S v[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j)  // all loads in flight before the first store
        if (first + (I)j * (I)blockDim.x < count && !fill[j]) v[j] = src[so[j]];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        if (first + (I)j * (I)blockDim.x < count) {
            D out;
            if (MAPS && fill[j]) {
                out = (D)p->fill_bits;
            } else if (CONV) {
                out = (D)odml_convert((u64)v[j], (int)p->src_type, (int)p->dst_type, (int)p->scale_bias,
                                      (u64)p->scale32, (u64)p->bias32, (u64)p->scale64, (u64)p->bias64);
            } else {
                out = (D)v[j];
            }
            dst[dof[j]] = out;
        }
    }
}

// dst[o] = the fill word over the pass's destination index space.
template <typename D, int NDIM, typename I, int ITEMS>
__global__ void __launch_bounds__(256) move_fill(const D* __restrict__ src, D* __restrict__ dst,
                                                 const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    (void)src;
    const I count = (I)p->count;
    const I first = (I)blockIdx.x * (I)(blockDim.x * ITEMS) + (I)threadIdx.x;
    const D value = (D)p->fill_bits;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        const I idx = first + (I)j * (I)blockDim.x;
        if (idx < count) {
            i64 so, dof;
            bool fill = false;
            odml_offsets<NDIM, I, 0>(p, idx, so, dof, fill);
            dst[dof] = value;
        }
    }
}

// -- vectorised kernels ------------------------------------------------------------

template <int B> struct odml_word;
template <> struct odml_word<1> { typedef u8 t; };
template <> struct odml_word<2> { typedef u16 t; };
template <> struct odml_word<4> { typedef u32 t; };
template <> struct odml_word<8> { typedef uint2 t; };
template <> struct odml_word<16> { typedef uint4 t; };

// N consecutive elements of T moved in words of up to 16 bytes (PIECE: the
// largest power of two dividing their bytes; the address must be a multiple
// of it, `aligned`).
template <typename T, int N> struct odml_run {
    static constexpr int BYTES = N * (int)sizeof(T);
    static constexpr int PIECE = BYTES % 16 == 0 ? 16 : BYTES % 8 == 0 ? 8 : BYTES % 4 == 0 ? 4 : BYTES % 2 == 0 ? 2 : 1;
    typedef typename odml_word<PIECE>::t W;
    union U {
        W w[BYTES / PIECE];
        T t[N];
    };
    static __device__ __forceinline__ bool aligned(const void* a) {
        return ((unsigned long long)a & (unsigned long long)(PIECE - 1)) == 0;
    }
    static __device__ __forceinline__ void load(const T* __restrict__ a, T (&v)[N]) {
        U u;
        const W* q = reinterpret_cast<const W*>(a);
#pragma unroll
        for (int i = 0; i < BYTES / PIECE; ++i) u.w[i] = q[i];
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] = u.t[j];
    }
    static __device__ __forceinline__ void store(T* __restrict__ a, const T (&v)[N]) {
        U u;
#pragma unroll
        for (int j = 0; j < N; ++j) u.t[j] = v[j];
        W* q = reinterpret_cast<W*>(a);
#pragma unroll
        for (int i = 0; i < BYTES / PIECE; ++i) q[i] = u.w[i];
    }
};

// The source coordinate of c along q (its map applied), -1 where a CONSTANT
// map falls outside the source.
template <int MAPS> __device__ __forceinline__ i64 odml_src_coord(i64 c, const odml_move_dim& q) {
    if (MAPS && q.map_mode) {
        const i64 s = c - q.map_shift;
        return (u64)s < (u64)q.map_size ? s : odml_map_outside(s, q.map_mode, q.map_size);
    }
    return c;
}

// Flat destination index `rest` split into the innermost coordinate c0
// (dimension NDIM-1), the next one c1 (NDIM-2; 0 where NDIM is 1) and the
// source/destination offsets of the dimensions outside them (a, b; `fill`
// where a CONSTANT map of theirs falls outside the source).
template <int NDIM, typename I, int MAPS>
__device__ __forceinline__ void odml_outer(const odml_move_params* __restrict__ p, I rest, I& c0, I& c1, i64& a,
                                           i64& b, bool& fill) {
    a = p->src_offset;
    b = p->dst_offset;
    fill = false;
    c1 = 0;
    if (NDIM == 1) {
        c0 = rest;
        return;
    }
    {
        const odml_move_dim& q = p->dim[NDIM - 1];
        const I qd = odml_div<I>(rest, q);
        c0 = rest - qd * (I)q.size;
        rest = qd;
    }
    if (NDIM == 2) {
        c1 = rest;
        return;
    }
    {
        const odml_move_dim& q = p->dim[NDIM >= 2 ? NDIM - 2 : 0];
        const I qd = odml_div<I>(rest, q);
        c1 = rest - qd * (I)q.size;
        rest = qd;
    }
#pragma unroll
    for (int d = NDIM - 3; d >= 0; --d) {
        const odml_move_dim& q = p->dim[d];
        I c;
        if (d > 0) {
            const I qd = odml_div<I>(rest, q);
            c = rest - qd * (I)q.size;
            rest = qd;
        } else {
            c = rest;
        }
        b += (i64)c * q.dst_stride;
        const i64 s = odml_src_coord<MAPS>((i64)c, q);
        if (MAPS && s < 0) fill = true;
        a += (MAPS && s < 0 ? 0 : s) * q.src_stride;
    }
}

// dst[o] = f(src[m(o)]) as move_copy, V consecutive destination elements per
// thread: the flat index split once per thread, the innermost two coordinates
// then stepped (a full split again only where they carry past the second);
// all V loads before the stores, one vector load where the V sources are
// consecutive and aligned, one vector store where the destinations are (the
// usual case: the destination is walked in memory order). ST, DT: the
// DataType values (the conversion specialised at compile time; ST == DT and
// SB 0: words copied); SB: scale/bias.
template <typename S, typename D, int NDIM, typename I, int V, int ST, int DT, int SB, int MAPS>
__global__ void __launch_bounds__(256) move_vec(const S* __restrict__ src, D* __restrict__ dst,
                                                const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    const I count = (I)p->count;
    const I f0 = ((I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x) * (I)V;
    if (f0 >= count) return;
    const int n = count - f0 < (I)V ? (int)(count - f0) : V;
    const odml_move_dim& q0 = p->dim[NDIM - 1];
    const odml_move_dim& q1 = p->dim[NDIM >= 2 ? NDIM - 2 : 0];
    I c0, c1;
    i64 a, b;
    bool fo;
    odml_outer<NDIM, I, MAPS>(p, f0, c0, c1, a, b, fo);
    i64 a1 = 0, b1 = 0;
    bool f1 = false;
    if (NDIM >= 2) {
        const i64 s = odml_src_coord<MAPS>((i64)c1, q1);
        f1 = MAPS && s < 0;
        a1 = (f1 ? 0 : s) * q1.src_stride;
        b1 = (i64)c1 * q1.dst_stride;
    }
    i64 so[V], dof[V];
    bool fill[V];
    bool cs = true, cd = n == V;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        fill[j] = false;
        so[j] = 0;
        dof[j] = 0;
        if (j < n) {
            const i64 s0 = odml_src_coord<MAPS>((i64)c0, q0);
            fill[j] = MAPS && (fo || f1 || s0 < 0);
            so[j] = a + a1 + (MAPS && s0 < 0 ? 0 : s0) * q0.src_stride;
            dof[j] = b + b1 + (i64)c0 * q0.dst_stride;
            cs = cs && !fill[j] && so[j] == so[0] + j;
            cd = cd && dof[j] == dof[0] + j;
            if (j + 1 < n) {
                ++c0;
                if (NDIM >= 2 && c0 == (I)q0.size) {
                    c0 = 0;
                    ++c1;
                    if (NDIM >= 3 && c1 == (I)q1.size) odml_outer<NDIM, I, MAPS>(p, f0 + (I)(j + 1), c0, c1, a, b, fo);
                    const i64 s = odml_src_coord<MAPS>((i64)c1, q1);
                    f1 = MAPS && s < 0;
                    a1 = (f1 ? 0 : s) * q1.src_stride;
                    b1 = (i64)c1 * q1.dst_stride;
                }
            }
        }
    }
    S v[V];
    cs = cs && n == V && odml_run<S, V>::aligned(src + so[0]);
    if (cs) {
        odml_run<S, V>::load(src + so[0], v);
    } else {
#pragma unroll
        for (int j = 0; j < V; ++j) {
            v[j] = 0;
            if (j < n && !fill[j]) v[j] = src[so[j]];
        }
    }
    D out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
        if (MAPS && fill[j]) {
            out[j] = (D)p->fill_bits;
        } else if (ST == DT && !SB) {
            out[j] = (D)v[j];
        } else {
            out[j] = (D)odml_convert((u64)v[j], ST, DT, SB, (u64)p->scale32, (u64)p->bias32, (u64)p->scale64,
                                     (u64)p->bias64);
        }
    }
    const bool va = cd && odml_run<D, V>::aligned(dst + dof[0]);
    if (va) {
        odml_run<D, V>::store(dst + dof[0], out);
        return;
    }
    if (!MAPS && odml_run<D, V>::BYTES == 16 && __activemask() == 0xffffffffu) {
        // A warp whose 32 runs are one misaligned destination run (the
        // interior of a padding): each lane stores the aligned 16 bytes made
        // of its last k elements and the next lane's first V - k; lane 0
        // stores its head and lane 31 its tail element by element.
        const int lane = (int)(threadIdx.x & 31u);
        const i64 next = __shfl_down_sync(0xffffffffu, dof[0], 1);
        if (__all_sync(0xffffffffu, cd && (lane == 31 || next == dof[0] + V))) {
            const int k = (int)(((unsigned long long)(dst + dof[0]) & 15ull) / sizeof(D));  // 1..V-1
            D nv[V], w[V];
#pragma unroll
            for (int j = 0; j < V; ++j) nv[j] = (D)__shfl_down_sync(0xffffffffu, (u64)out[j], 1);
#pragma unroll
            for (int kk = 1; kk < V; ++kk)
                if (k == kk) {
#pragma unroll
                    for (int e = 0; e < V; ++e) w[e] = e < kk ? out[V - kk + e] : nv[e - kk];
                }
            if (lane < 31) odml_run<D, V>::store(dst + dof[0] + (V - k), w);
#pragma unroll
            for (int j = 0; j < V; ++j)
                if ((lane == 0 && j < V - k) || (lane == 31 && j >= V - k)) dst[dof[0] + j] = out[j];
            return;
        }
    }
    {
#pragma unroll
        for (int j = 0; j < V; ++j)
            if (j < n) dst[dof[j]] = out[j];
    }
}

// A plain copy whose destination runs are a small transpose of its source
// runs (SPACE_TO_DEPTH, DEPTH_TO_SPACE): each thread moves an R x V tile,
// axis X (R positions: p->dim[NDIM]) by axis Y (V positions: element strides
// in p->dim[NDIM + 1]); dims 0..NDIM-1 are the tiles' index space (the pass
// without X, Y's dimension divided by V: count tiles). Loads: R runs of V
// (Y consecutive in the source) or one run of R*V (X consecutive, Y stride R);
// stores likewise on the destination side; vector words where aligned.
template <typename S, int NDIM, typename I, int R, int V>
__global__ void __launch_bounds__(256) move_tile(const S* __restrict__ src, S* __restrict__ dst,
                                                 const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    const I g = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
    if (g >= (I)p->count) return;
    i64 so, dof;
    bool fill = false;
    odml_offsets<NDIM, I, 0>(p, g, so, dof, fill);
    const i64 sx = p->dim[NDIM].src_stride, dx = p->dim[NDIM].dst_stride;
    const i64 sy = p->dim[NDIM + 1].src_stride, dy = p->dim[NDIM + 1].dst_stride;
    S v[R][V];
    if (sy == 1) {
#pragma unroll
        for (int x = 0; x < R; ++x) {
            const S* a = src + so + x * sx;
            if (odml_run<S, V>::aligned(a)) {
                odml_run<S, V>::load(a, v[x]);
            } else {
#pragma unroll
                for (int y = 0; y < V; ++y) v[x][y] = a[y];
            }
        }
    } else if (sx == 1 && sy == R && odml_run<S, R * V>::aligned(src + so)) {
        S t[R * V];
        odml_run<S, R * V>::load(src + so, t);
#pragma unroll
        for (int y = 0; y < V; ++y)
#pragma unroll
            for (int x = 0; x < R; ++x) v[x][y] = t[y * R + x];
    } else {
#pragma unroll
        for (int x = 0; x < R; ++x)
#pragma unroll
            for (int y = 0; y < V; ++y) v[x][y] = src[so + x * sx + y * sy];
    }
    if (dy == 1) {
#pragma unroll
        for (int x = 0; x < R; ++x) {
            S* a = dst + dof + x * dx;
            if (odml_run<S, V>::aligned(a)) {
                odml_run<S, V>::store(a, v[x]);
            } else {
#pragma unroll
                for (int y = 0; y < V; ++y) a[y] = v[x][y];
            }
        }
    } else if (dx == 1 && dy == R && odml_run<S, R * V>::aligned(dst + dof)) {
        S t[R * V];
#pragma unroll
        for (int y = 0; y < V; ++y)
#pragma unroll
            for (int x = 0; x < R; ++x) t[y * R + x] = v[x][y];
        odml_run<S, R * V>::store(dst + dof, t);
    } else {
#pragma unroll
        for (int x = 0; x < R; ++x)
#pragma unroll
            for (int y = 0; y < V; ++y) dst[dof + x * dx + y * dy] = v[x][y];
    }
}


// A plain copy in aligned 16-byte words (the pass widened by the host's
// word_plan: sizes, strides and offsets count words): U words a thread,
// word (blockIdx.x * U + j) * blockDim.x + threadIdx.x (each load and store
// instruction coalesced across the warp), every offset from the flat index by
// multiply-shift division, all U loads in flight before the first store.
// TILE with repeats, JOIN, SPLIT and slices whose rows are whole words.
template <int NDIM, typename I, int U>
__global__ void __launch_bounds__(256) move_wcopy(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                  const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    const I count = (I)p->count;
    i64 so[U], dof[U];
    bool in[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
        I rest = ((I)blockIdx.x * (I)U + (I)j) * (I)blockDim.x + (I)threadIdx.x;
        in[j] = rest < count;
        so[j] = dof[j] = 0;
        if (!in[j]) continue;
        i64 a = p->src_offset, b = p->dst_offset;
#pragma unroll
        for (int d = NDIM - 1; d > 0; --d) {
            const odml_move_dim& q = p->dim[d];
            const I qd = odml_div<I>(rest, q);
            const I c = rest - qd * (I)q.size;
            a += (i64)c * q.src_stride;
            b += (i64)c * q.dst_stride;
            rest = qd;
        }
        so[j] = a + (i64)rest * p->dim[0].src_stride;
        dof[j] = b + (i64)rest * p->dim[0].dst_stride;
    }
    uint4 v[U];
#pragma unroll
    for (int j = 0; j < U; ++j)
        if (in[j]) v[j] = __ldg(src + so[j]);
#pragma unroll
    for (int j = 0; j < U; ++j)
        if (in[j]) dst[dof[j]] = v[j];
}

// The shared-memory word of a transposed element: 4 bytes at least, so that
// a warp reading a tile's column (stride TILE + 1 words) touches 32 banks.
template <int B> struct odml_tword { typedef u32 t; };
template <> struct odml_tword<8> { typedef u64 t; };

// A plain copy that transposes: the destination's innermost dimension X
// (p->dim[NB]: size, source stride, destination stride 1) is not the
// source's, whose innermost dimension is Y (p->dim[NB + 1]: size, source
// stride 1, destination stride) -- an NCHW view of an NHWC tensor made
// contiguous, the reverse, a 5-D permutation. Each block moves one TILE x
// TILE tile of (X, Y) through shared memory: it reads TILE runs of TILE
// consecutive source elements along Y (coalesced across the warp), then
// writes TILE runs of TILE consecutive destination elements along X
// (coalesced), all of a thread's loads in flight before the barrier. Dims
// 0..NB-1 are the tiles' outer index space (p->count positions, any
// strides). Block b: tile column b % tx (X), tile row (b / tx) % ty (Y),
// outer position b / (tx * ty); partial tiles at the ends of X and Y.
template <typename T, int NB, int TILE>
__global__ void __launch_bounds__(256) move_transpose(const T* __restrict__ src, T* __restrict__ dst,
                                                      const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    typedef typename odml_tword<(int)sizeof(T)>::t W;
    constexpr int ROWS = 256 / 32;                 // warps a block
    constexpr int PER = TILE / ROWS;               // tile rows a warp
    constexpr int LANES = TILE / 32;               // elements a lane along a run
    __shared__ W tile[TILE][TILE + 1];
    const odml_move_dim& X = p->dim[NB];
    const odml_move_dim& Y = p->dim[NB + 1];
    const u64 nx = (u64)X.size, ny = (u64)Y.size;
    const u64 tx = (nx + TILE - 1) / TILE, ty = (ny + TILE - 1) / TILE;
    u64 b = (u64)blockIdx.x;
    const u64 bx = b % tx;
    b /= tx;
    const u64 by = b % ty;
    u64 rest = b / ty;
    i64 so = p->src_offset, dof = p->dst_offset;
#pragma unroll
    for (int d = NB - 1; d >= 0; --d) {
        const odml_move_dim& q = p->dim[d];
        u64 c = rest;
        if (d > 0) {
            c = rest % (u64)q.size;
            rest /= (u64)q.size;
        }
        so += (i64)c * q.src_stride;
        dof += (i64)c * q.dst_stride;
    }
    const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
    const u64 x0 = bx * TILE, y0 = by * TILE;
    const i64 sx = X.src_stride, dy = Y.dst_stride;
    // reads: warp w takes tile rows (X) w, w + ROWS, ...; lanes run along Y
    W v[PER][LANES];
#pragma unroll
    for (int r = 0; r < PER; ++r) {
        const u64 x = x0 + (u64)(warp + r * ROWS);
#pragma unroll
        for (int l = 0; l < LANES; ++l) {
            const u64 y = y0 + (u64)(lane + 32 * l);
            v[r][l] = 0;
            if (x < nx && y < ny) v[r][l] = (W)src[so + (i64)x * sx + (i64)y];
        }
    }
#pragma unroll
    for (int r = 0; r < PER; ++r)
#pragma unroll
        for (int l = 0; l < LANES; ++l) tile[warp + r * ROWS][lane + 32 * l] = v[r][l];
    __syncthreads();
    // writes: warp w takes tile columns (Y) w, w + ROWS, ...; lanes run along X
#pragma unroll
    for (int r = 0; r < PER; ++r) {
        const u64 y = y0 + (u64)(warp + r * ROWS);
        if (y >= ny) continue;
        T* __restrict__ drow = dst + dof + (i64)y * dy;
#pragma unroll
        for (int l = 0; l < LANES; ++l) {
            const u64 x = x0 + (u64)(lane + 32 * l);
            if (x < nx) drow[x] = (T)tile[lane + 32 * l][warp + r * ROWS];
        }
    }
}


// A padding program as one pass over the output, one warp per output row
// (the innermost dimension, destination and source stride 1; p: the fused
// padding pass, dims 0..NDIM-2 the rows' index space with their maps, dim
// NDIM-1 the row with its map). The row's first elements up to a 16-byte
// boundary and its last ones are stored element by element; in between each
// lane stores aligned 16-byte words: one whose elements all come from the
// source row's interior is read as the one or two aligned 16-byte source words
// holding them, realigned with funnel shifts (the shift is the same all along
// the row); the others (the row's borders, CONSTANT rows) element by element
// through the row's map. Rows whose source coordinate is CONSTANT-outside are
// the fill word.
// A padding program as one pass over the output, one warp per output row
// (the innermost dimension, destination and source stride 1; p: the fused
// padding pass, dims 0..NDIM-2 the rows' index space with their maps, dim
// NDIM-1 the row with its map). The row's first elements up to a 16-byte
// boundary and its last ones are stored element by element; in between each
// lane stores aligned 16-byte words: one whose elements all come from the
// source row's interior is read as the one or two aligned 16-byte source words
// holding them, realigned with funnel shifts (the shift is the same all along
// the row); the others (the row's borders, CONSTANT rows) element by element
// through the row's map. Rows whose source coordinate is CONSTANT-outside are
// the fill word. (Two rows a warp, all loads first, measured slower on an
// H100: 0.39-0.40 ms against 0.27 ms.)
template <typename T, int NDIM, typename I>
__global__ void __launch_bounds__(256) move_pad(const T* __restrict__ src, T* __restrict__ dst,
                                                const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    constexpr int V = 16 / (int)sizeof(T);
    const odml_move_dim& q0 = p->dim[NDIM - 1];
    const int W = (int)q0.size;
    const I rows = (I)(p->count / q0.size);
    const I row = (I)blockIdx.x * (I)(blockDim.x >> 5) + (I)(threadIdx.x >> 5);
    if (row >= rows) return;
    const int lane = (int)(threadIdx.x & 31u);
    i64 so, dof;
    bool fill = false;
    odml_offsets<NDIM - 1, I, 1>(p, row, so, dof, fill);
    T* __restrict__ drow = dst + dof;
    const T* __restrict__ srow = src + so;
    const T fv = (T)p->fill_bits;
    const int mode = (int)q0.map_mode;
    const int L = mode ? (int)q0.map_shift : 0;
    const int n = mode ? (int)q0.map_size : W;
    const int h0 = (int)(((16u - (u32)((unsigned long long)drow & 15ull)) & 15u) / (u32)sizeof(T));
    const int head = h0 < W ? h0 : W;
    const int nvec = (W - head) / V;
    const int tail = head + nvec * V;
    // the source element of column c (the fill word where CONSTANT-outside)
    auto col = [&](int c) -> T {
        if (fill) return fv;
        i64 s = (i64)(c - L);
        if ((u64)s >= (u64)n) {
            s = odml_map_outside(s, (i64)mode, (i64)n);
            if (s < 0) return fv;
        }
        return srow[s];
    };
    if (lane < head) drow[lane] = col(lane);
    if (tail + lane < W) drow[tail + lane] = col(tail + lane);
    // interior words: the source of column c is srow[c - L]; its byte
    // misalignment kb is the same for every aligned destination word
    const unsigned long long s0 = (unsigned long long)(srow + (head - L));
    const int kb = (int)(s0 & 15ull), kw = kb >> 2, kr = (kb & 3) * 8;
    for (int i0 = lane; i0 < nvec; i0 += 64) {
        uint4 out[2];
        bool inner[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const int i = i0 + 32 * u;
            const int c = head + i * V;
            inner[u] = i < nvec && !fill && c >= L && c + V <= L + n;
            if (inner[u]) {
                const uint4* a = reinterpret_cast<const uint4*>((s0 + (unsigned long long)(i * 16)) & ~15ull);
                const uint4 A = a[0];
                uint4 B = A;
                if (kb) B = a[1];
                const u32 x[8] = {A.x, A.y, A.z, A.w, B.x, B.y, B.z, B.w};
                u32 y[5];
#pragma unroll
                for (int w = 0; w < 4; ++w)
                    if (kw == w) {
#pragma unroll
                        for (int e = 0; e < 5; ++e) y[e] = e + w < 8 ? x[e + w] : 0u;
                    }
                out[u].x = __funnelshift_r(y[0], y[1], kr);
                out[u].y = __funnelshift_r(y[1], y[2], kr);
                out[u].z = __funnelshift_r(y[2], y[3], kr);
                out[u].w = __funnelshift_r(y[3], y[4], kr);
            }
        }
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const int i = i0 + 32 * u;
            if (i >= nvec) continue;
            const int c = head + i * V;
            if (inner[u]) {
                *reinterpret_cast<uint4*>(drow + c) = out[u];
            } else {
                T v[V];
#pragma unroll
                for (int j = 0; j < V; ++j) v[j] = col(c + j);
                odml_run<T, V>::store(drow + c, v);
            }
        }
    }
}

// odml_map_outside in 32-bit arithmetic (|i| < 2^31, n < 2^30).
__device__ __forceinline__ int odml_map_outside32(int i, int mode, int n) {
    switch (mode) {
        case ODML_MAP_CLAMP: return i < 0 ? 0 : n - 1;
        case ODML_MAP_WRAP: {
            if (i < 0 && i >= -n) return i + n;
            if (i >= n && i - n < n) return i - n;
            const int r = i % n;
            return r < 0 ? r + n : r;
        }
        case ODML_MAP_SYMMETRIC: {
            if (i < 0 && i >= -n) return -1 - i;
            if (i >= n && i - n < n) return 2 * n - 1 - i;
            int r = i % (2 * n);
            if (r < 0) r += 2 * n;
            return r < n ? r : 2 * n - 1 - r;
        }
        case ODML_MAP_REFLECT: {
            if (n == 1) return 0;
            if (i < 0 && i > -n) return -i;
            if (i >= n && i - n < n - 1) return 2 * (n - 1) - i;
            int r = i % (2 * (n - 1));
            if (r < 0) r += 2 * (n - 1);
            return r < n ? r : 2 * (n - 1) - r;
        }
        default:
            return -1;
    }
}

// The source offset of row `rest` of a padding pass over dims 0..NDIM-1
// (sizes, map shifts and map sizes below 2^30), or -1 where a CONSTANT map
// falls outside the source (a fill row).
template <int NDIM>
__device__ __forceinline__ i64 odml_row_offset32(const odml_move_params* __restrict__ p, u32 rest) {
    i64 a = p->src_offset;
    bool fill = false;
#pragma unroll
    for (int d = NDIM - 1; d >= 0; --d) {
        const odml_move_dim& q = p->dim[d];
        u32 c;
        if (d > 0) {
            const u32 qd = odml_div<u32>(rest, q);
            c = rest - qd * (u32)q.size;
            rest = qd;
        } else {
            c = rest;
        }
        int s = (int)c;
        if (q.map_mode) {
            s -= (int)q.map_shift;
            if ((u32)s >= (u32)q.map_size) {
                s = odml_map_outside32(s, (int)q.map_mode, (int)q.map_size);
                if (s < 0) {
                    fill = true;
                    s = 0;
                }
            }
        }
        a += (i64)s * q.src_stride;
    }
    return fill ? (i64)-1 : a;
}

// A padding program as one pass over the FLAT output (contiguous: the fused
// padding pass of move_pad with destination offset 0 and row-major
// destination strides; 32-bit indices, every size below 2^30), in aligned
// 16-byte output words: word k covers flat elements [k*V - m, k*V - m + V)
// (m: the output address's misalignment in elements), so every full word is
// one aligned 16-byte store whatever the row length. Each thread takes U
// words of a block of blockDim*U words (word (b*U + j)*blockDim.x +
// threadIdx.x of block b: each store instruction is coalesced across the
// warp) and issues the loads of all of them before the first store: first
// every word whose V elements lie in one row and all come from the source
// row's interior, as the one or two aligned 16-byte source words holding them
// (realigned after the loads), then the others (a row's borders, a word
// crossing into the next row, a fill row) element by element through the
// row's and the column's maps. The (at most two) partial words at the ends of
// the output go element by element after the loads. MINB: resident blocks per
// multiprocessor the registers must allow (__launch_bounds__; on an H100 one
// word a thread with MINB 8, 32 registers, ran fastest: benchmarks/RESULTS.md,
// session 7). FL & 4: a lane's second source word is the next lane's first
// where that is the next aligned word (one 16-byte load a word, exchanged by
// warp shuffles; the last lane of a warp and a row's last words load it).
// FL & 2: a persistent grid (block b = blockIdx.x, blockIdx.x +
// gridDim.x, ...; measured no faster, off by default). (The row kernel
// move_pad stored its rows' first and last elements, and read its border
// words, in separate round trips to memory before and after the interior,
// with 56 registers a thread. Measured slower and not kept: two or four words
// a thread (more registers, fewer resident warps), the L2::256B load hint, and
// an affine form of the one-period border map, which spilled a register.)
template <typename T, int NDIM, int U, int MINB, int FL>
__global__ void __launch_bounds__(256, MINB) move_padw(const T* __restrict__ src, T* __restrict__ dst,
                                                       const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    constexpr int V = 16 / (int)sizeof(T);
    const odml_move_dim& q0 = p->dim[NDIM - 1];
    const u32 W = (u32)q0.size;
    const u32 count = (u32)p->count;
    const int mode = (int)q0.map_mode;
    const int L = mode ? (int)q0.map_shift : 0;
    const int n = mode ? (int)q0.map_size : (int)W;
    const u32 m = (u32)(((unsigned long long)dst & 15ull) / sizeof(T));
    const u32 nblk = (FL & 2) ? ((count + m + (u32)V - 1) / (u32)V + blockDim.x * (u32)U - 1) / (blockDim.x * (u32)U)
                              : blockIdx.x + 1;
    for (u32 blk = blockIdx.x; blk < nblk; blk += gridDim.x) {
        union Word {
            uint4 w;
            T t[V];
        };
        Word A[U];
        uint4 B[U];
        unsigned long long awj[U];   // FL & 4: the aligned address of A
        u32 state[U];   // 0: partial or outside, 1: gathered into A, 2 | byte shift << 2: realign A, B
#pragma unroll
        for (int j = 0; j < U; ++j) {
            const u32 start = ((blk * (u32)U + (u32)j) * blockDim.x + threadIdx.x) * (u32)V;
            state[j] = 0;
            if (start >= m && start - m + (u32)V <= count) {
                const u32 f = start - m;
                const u32 r = odml_div<u32>(f, q0);
                const u32 c = f - r * W;
                const i64 so = odml_row_offset32<NDIM - 1>(p, r);
                const int s = (int)c - L;
                state[j] = 1;
                if (so >= 0 && c + (u32)V <= W && s >= 0 && s + V <= n) {
                    const unsigned long long sp = (unsigned long long)(src + so + s);
                    const uint4* a = reinterpret_cast<const uint4*>(sp & ~15ull);
                    const u32 kb = (u32)(sp & 15ull);
                    state[j] = 2u | (kb << 2);
                    awj[j] = sp & ~15ull;
                    A[j].w = __ldg(a);
                    if (!(FL & 4)) B[j] = kb ? __ldg(a + 1) : A[j].w;
                }
            }
        }
        if (FL & 4) {
            // B from the next lane's A where that is the next aligned source
            // word (a row's interior: every lane but the last); a load else
            const u32 lane = threadIdx.x & 31u;
#pragma unroll
            for (int j = 0; j < U; ++j) {
                const unsigned long long aw = state[j] >= 2u ? awj[j] : 0ull;
                const unsigned long long na = __shfl_down_sync(0xffffffffu, aw, 1);
                uint4 nb;
                nb.x = __shfl_down_sync(0xffffffffu, A[j].w.x, 1);
                nb.y = __shfl_down_sync(0xffffffffu, A[j].w.y, 1);
                nb.z = __shfl_down_sync(0xffffffffu, A[j].w.z, 1);
                nb.w = __shfl_down_sync(0xffffffffu, A[j].w.w, 1);
                if (state[j] >= 2u) {
                    if (!(state[j] >> 2)) B[j] = A[j].w;
                    else if (lane < 31u && na == aw + 16ull) B[j] = nb;
                    else B[j] = __ldg(reinterpret_cast<const uint4*>(aw) + 1);
                }
            }
        }
        const T fv = (T)p->fill_bits;
#pragma unroll
        for (int j = 0; j < U; ++j) {
            if (state[j] != 1u) continue;
            // a border word, a word crossing into row r + 1, or a fill row
            const u32 f = ((blk * (u32)U + (u32)j) * blockDim.x + threadIdx.x) * (u32)V - m;
            const u32 r = odml_div<u32>(f, q0);
            const u32 c = f - r * W;
            const i64 so = odml_row_offset32<NDIM - 1>(p, r);
            const i64 so2 = c + (u32)V > W ? odml_row_offset32<NDIM - 1>(p, r + 1) : so;
            i64 off[V];
#pragma unroll
            for (int e = 0; e < V; ++e) {
                const u32 ce = c + (u32)e;
                const bool nx = ce >= W;
                const i64 base = nx ? so2 : so;
                int i = (int)(nx ? ce - W : ce) - L;
                if ((u32)i >= (u32)n) i = odml_map_outside32(i, mode, n);
                off[e] = base < 0 || i < 0 ? (i64)-1 : base + i;
            }
#pragma unroll
            for (int e = 0; e < V; ++e) A[j].t[e] = off[e] < 0 ? fv : src[off[e]];
        }
#pragma unroll
        for (int j = 0; j < U; ++j) {
            const u32 start = ((blk * (u32)U + (u32)j) * blockDim.x + threadIdx.x) * (u32)V;
            if (state[j] >= 2u) {
                // the V elements start kb bytes into A: whole 4-byte words
                // (kw) selected, then (2-byte and 1-byte elements) funnel shifts
                const u32 kb = state[j] >> 2;
                const uint4 a0 = A[j].w, b0 = B[j];
                const u32 x[8] = {a0.x, a0.y, a0.z, a0.w, b0.x, b0.y, b0.z, b0.w};
                const u32 kw = kb >> 2;
                u32 z[6], y[5];
#pragma unroll
                for (int e = 0; e < 6; ++e) z[e] = (kw & 2u) ? x[e + 2] : x[e];
#pragma unroll
                for (int e = 0; e < 5; ++e) y[e] = (sizeof(T) < 8 && (kw & 1u)) ? z[e + 1] : z[e];
                uint4 o;
                if (sizeof(T) >= 4) {
                    o = make_uint4(y[0], y[1], y[2], y[3]);
                } else {
                    const u32 kr = (kb & 3u) * 8u;
                    o.x = __funnelshift_r(y[0], y[1], kr);
                    o.y = __funnelshift_r(y[1], y[2], kr);
                    o.z = __funnelshift_r(y[2], y[3], kr);
                    o.w = __funnelshift_r(y[3], y[4], kr);
                }
                *reinterpret_cast<uint4*>(dst + (start - m)) = o;
            } else if (state[j] == 1u) {
                *reinterpret_cast<uint4*>(dst + (start - m)) = A[j].w;
            } else if (start < count + m && start + (u32)V > m) {
                // a partial word at either end of the output
#pragma unroll 1
                for (int e = 0; e < V; ++e) {
                    const u32 pos = start + (u32)e;
                    if (pos >= m && pos - m < count) {
                        const u32 fe = pos - m, re = odml_div<u32>(fe, q0);
                        const i64 so = odml_row_offset32<NDIM - 1>(p, re);
                        int i = (int)(fe - re * W) - L;
                        if ((u32)i >= (u32)n) i = odml_map_outside32(i, mode, n);
                        dst[fe] = so < 0 || i < 0 ? fv : src[so + i];
                    }
                }
            }
        }
    }
}

// A padding program as one pass over the FLAT output (contiguous, as
// move_padw takes it), element by element: ITEMS elements a thread, element
// (blockIdx.x * ITEMS + j) * blockDim.x + threadIdx.x (each load and store
// instruction coalesced across the warp whatever the rows' alignment), each
// through its row's source offset and the row's map, all loads before the
// first store.
template <typename T, int NDIM, int ITEMS>
__global__ void __launch_bounds__(256) move_pade(const T* __restrict__ src, T* __restrict__ dst,
                                                 const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    const odml_move_dim& q0 = p->dim[NDIM - 1];
    const u32 W = (u32)q0.size;
    const u32 count = (u32)p->count;
    const int mode = (int)q0.map_mode;
    const int L = mode ? (int)q0.map_shift : 0;
    const int n = mode ? (int)q0.map_size : (int)W;
    const T fv = (T)p->fill_bits;
    i64 off[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        const u32 f = ((blockIdx.x * (u32)ITEMS + (u32)j) * blockDim.x + threadIdx.x);
        off[j] = -2;
        if (f < count) {
            const u32 r = odml_div<u32>(f, q0);
            const i64 so = odml_row_offset32<NDIM - 1>(p, r);
            int i = (int)(f - r * W) - L;
            if ((u32)i >= (u32)n) i = odml_map_outside32(i, mode, n);
            off[j] = so < 0 || i < 0 ? (i64)-1 : so + i;
        }
    }
    T v[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) v[j] = off[j] >= 0 ? src[off[j]] : fv;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j)
        if (off[j] != -2) dst[(blockIdx.x * (u32)ITEMS + (u32)j) * blockDim.x + threadIdx.x] = v[j];
}

// A contiguous conversion or scale/bias pass (one dimension, stride 1 on both
// sides): dst[i] = f(src[i]), i < count. Each thread takes U runs of V
// elements of a block of blockDim*U runs (run (b*U + j)*blockDim.x +
// threadIdx.x of block b, coalesced across the warp) and issues the loads of
// all of them before the first store: 16-byte words where both sides are
// aligned, elements at the end. float32 -> float16 converts pairs with one
// hardware cvt.rn.f16x2.f32 (round to nearest even, subnormals kept: the same
// bits as odml_f2h for every non-NaN value); a run holding a NaN goes element
// by element through odml_f2h_fast (NumPy's payload rule). FL & 2: a
// persistent grid (block b = blockIdx.x, blockIdx.x + gridDim.x, ...;
// registers capped for 8 resident blocks a multiprocessor where U <= 2, else
// 4; measured slower, off by default). (Measured no faster and not kept: the
// L2::256B load hint, runs of 16 source bytes for narrowing conversions.)
template <typename S, typename D, typename I, int V, int ST, int DT, int SB, int U, int FL>
__global__ void __launch_bounds__(256, (FL & 2) ? (U <= 2 ? 8 : 4) : 1)
    move_cvt(const S* __restrict__ src, D* __restrict__ dst, const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    const I count = (I)p->count;
    const S* __restrict__ s0 = src + p->src_offset;
    D* __restrict__ d0 = dst + p->dst_offset;
    const bool al = odml_run<S, V>::aligned(s0) && odml_run<D, V>::aligned(d0);
    const I nblk = (FL & 2) ? (count + (I)V * (I)U * (I)blockDim.x - 1) / ((I)V * (I)U * (I)blockDim.x)
                            : (I)blockIdx.x + 1;
    for (I blk = (I)blockIdx.x; blk < nblk; blk += (I)gridDim.x) {
        S v[U][V];
        I first[U];
#pragma unroll
        for (int j = 0; j < U; ++j) {
            first[j] = ((blk * (I)U + (I)j) * (I)blockDim.x + (I)threadIdx.x) * (I)V;
            if (al && first[j] + (I)V <= count) {
                odml_run<S, V>::load(s0 + first[j], v[j]);
            } else {
#pragma unroll
                for (int e = 0; e < V; ++e) v[j][e] = first[j] + (I)e < count ? s0[first[j] + (I)e] : (S)0;
            }
        }
#pragma unroll
        for (int j = 0; j < U; ++j) {
            if (first[j] >= count) continue;
            D out[V];
            if (ST == ODML_T_FLOAT32 && DT == ODML_T_FLOAT16 && !SB && V % 2 == 0) {
                bool nan = false;
#pragma unroll
                for (int e = 0; e < V; ++e) nan = nan || odml_nan32((u32)v[j][e]);
                if (!nan) {
#pragma unroll
                    for (int e = 0; e < V; e += 2) {
                        u32 h2;
                        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h2) : "f"(odml_f32((u32)v[j][e + 1])),
                            "f"(odml_f32((u32)v[j][e])));
                        out[e] = (D)(h2 & 0xffffu);
                        out[e + 1] = (D)(h2 >> 16);
                    }
                } else {
#pragma unroll
                    for (int e = 0; e < V; ++e) out[e] = (D)odml_f2h_fast((u32)v[j][e]);
                }
            } else {
#pragma unroll
                for (int e = 0; e < V; ++e)
                    out[e] = (D)odml_convert((u64)v[j][e], ST, DT, SB, (u64)p->scale32, (u64)p->bias32,
                                             (u64)p->scale64, (u64)p->bias64);
            }
            if (al && first[j] + (I)V <= count) {
                odml_run<D, V>::store(d0 + first[j], out);
            } else {
#pragma unroll
                for (int e = 0; e < V; ++e)
                    if (first[j] + (I)e < count) d0[first[j] + (I)e] = out[e];
            }
        }
    }
}

#ifdef OPENDML_INSTANTIATE
// For `nvcc -c` syntax checks on machines without a GPU (tests/runtime).
template __global__ void move_copy<u32, u16, 1, u32, 4, 1, 0>(const u32*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_copy<u64, u8, 3, u64, 4, 1, 1>(const u64*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_copy<u16, u64, 2, u32, 8, 1, 0>(const u16*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_copy<u32, u32, 4, u32, 4, 0, 1>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_copy<u8, u8, 16, u64, 16, 0, 1>(const u8*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_copy<u32, u32, 6, u32, 4, 0, 0>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_vec<u32, u16, 1, u32, 4, 1, 2, 0, 0>(const u32*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_vec<u32, u32, 1, u32, 4, 1, 6, 0, 0>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_vec<u32, u32, 4, u32, 4, 1, 1, 0, 1>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_vec<u16, u16, 2, u64, 8, 2, 2, 1, 0>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_vec<u8, u64, 3, u32, 4, 5, 9, 1, 1>(const u8*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_vec<u64, u64, 16, u64, 2, 11, 11, 0, 1>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_tile<u32, 3, u32, 2, 4>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_wcopy<5, u32, 4>(const uint4*, uint4*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_wcopy<1, u64, 2>(const uint4*, uint4*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_wcopy<3, u32, 1>(const uint4*, uint4*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_pade<u32, 3, 4>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_pade<u8, 1, 16>(const u8*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_pade<u64, 4, 4>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_transpose<u32, 1, 32>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_transpose<u32, 3, 64>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_transpose<u8, 0, 64>(const u8*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_transpose<u16, 2, 32>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_transpose<u64, 14, 64>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_tile<u16, 4, u64, 3, 8>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_tile<u64, 14, u32, 4, 2>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_fill<u16, 3, u32, 8>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_fill<u64, 16, u64, 4>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_pad<u32, 3, u32>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_pad<u8, 1, u32>(const u8*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_pad<u16, 4, u64>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_pad<u64, 2, u32>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u32, 3, 4, 1, 0>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u32, 3, 2, 1, 0>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u8, 1, 4, 1, 0>(const u8*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u16, 4, 2, 1, 0>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u64, 2, 1, 1, 0>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u32, 3, 1, 8, 4>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u8, 2, 1, 8, 4>(const u8*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u32, 3, 1, 8, 2>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u16, 2, 2, 4, 2>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_cvt<u32, u16, u32, 8, 1, 2, 0, 2, 0>(const u32*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_cvt<u32, u16, u32, 8, 1, 2, 0, 4, 0>(const u32*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_cvt<u32, u32, u32, 4, 1, 6, 0, 2, 0>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_cvt<u32, u16, u64, 8, 1, 2, 0, 4, 2>(const u32*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_cvt<u16, u64, u64, 2, 2, 9, 1, 1, 0>(const u16*, u64*, const ODML_GRID_CONSTANT odml_move_params);
#endif

#endif  // ODML_MOVE_HOST
