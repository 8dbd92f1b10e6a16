// opendml CUDA kernels of the move program (plan.MovePlan: the data-movement family), compiled as kernels.cu is;
// `g++ -x c++ -DODML_MOVE_HOST` builds the conversion functions alone for the host (tests/runtime/test_cuda_move.py
// compares them with the CPU backend's NumPy conversion bit for bit).
//
// Kernels (each takes (source words, destination words, odml_move_params BY VALUE), as every opendml kernel does; one
// launch per pass of the program): move_fill (dst[o] = fill word), move_vec (vectorised copies, conversions, maps),
// move_wcopy (16-byte word copies), move_cvt (a contiguous conversion, U runs a thread); layout.cu's the transposes
// and padding programs. Threads walk the destination in memory order (the host orders dimensions by destination
// stride), ITEMS elements per thread, all loads before the first store. Destination coordinates come from the flat
// index by multiply-shift division (I = u32, where count and sizes fit below 2^31) or 64-bit division (I = u64);
// element offsets are 64-bit.
//
// Conversion (CONV = 1) follows the CPU backend's NumPy kernels
// (numpy_kernels.convert_array, prepare_move_pass) bit for bit on an x86 host:
//   * float -> integer: truncate toward zero, saturate, NaN -> 0 (via float64);
//   * integer -> integer: two's complement wrap (low bits);
//   * integer -> float: round to nearest even (int -> float16 through float32:
//     every integer a float16 holds is exact in float32, the others overflow
//     to infinity either way);
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
// ODML_DEV(device statements, host statements): a function's body on the
// device and in the host build (ODML_MOVE_HOST) of the conversions.
#ifdef __CUDA_ARCH__
#define ODML_DEV(dev, host) dev
#else
#define ODML_DEV(dev, host) host
#endif

ODML_HD float odml_f32(u32 b) { ODML_DEV(return __uint_as_float(b);, float f; memcpy(&f, &b, 4); return f;) }
ODML_HD u32 odml_b32(float f) { ODML_DEV(return __float_as_uint(f);, u32 b; memcpy(&b, &f, 4); return b;) }
ODML_HD double odml_f64(u64 b) {
    ODML_DEV(return __longlong_as_double((s64)b);,
             double f; memcpy(&f, &b, 8); return f;)
}
ODML_HD u64 odml_b64(double f) { ODML_DEV(return (u64)__double_as_longlong(f);, u64 b; memcpy(&b, &f, 8); return b;) }
ODML_HD int odml_clz32(u32 x) { ODML_DEV(return __clz((int)x);, return __builtin_clz(x);) }
// round to nearest even, subnormals kept (no .ftz)
ODML_HD float odml_mul32(float a, float b) {
    ODML_DEV(float r; asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r;,
             volatile float r = a * b; return r;)
}
ODML_HD float odml_add32(float a, float b) {
    ODML_DEV(float r; asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r;,
             volatile float r = a + b; return r;)
}
ODML_HD double odml_mul64(double a, double b) {
    ODML_DEV(return __dmul_rn(a, b);,
             volatile double r = a * b; return r;)
}
ODML_HD double odml_add64(double a, double b) {
    ODML_DEV(return __dadd_rn(a, b);,
             volatile double r = a + b; return r;)
}
ODML_HD float odml_d2f(double d) {   // not NaN
    ODML_DEV(float r; asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(d)); return r;,
             return (float)d;)
}
ODML_HD float odml_s2f(s64 x) { ODML_DEV(return __ll2float_rn(x);, return (float)x;) }
ODML_HD float odml_u2f(u64 x) { ODML_DEV(return __ull2float_rn(x);, return (float)x;) }
ODML_HD double odml_s2d(s64 x) { ODML_DEV(return __ll2double_rn(x);, return (double)x;) }
ODML_HD double odml_u2d(u64 x) { ODML_DEV(return __ull2double_rn(x);, return (double)x;) }
ODML_HD double odml_trunc(double d) { ODML_DEV(return trunc(d);, return __builtin_trunc(d);) }

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

// float32 -> float16 bits as odml_f2h: on the device the hardware's cvt.rn.f16.f32 (no .ftz: odml_f2h's result for
// every non-NaN value, subnormals and overflow to infinity included), NaNs through odml_f2h (NumPy's payload rule;
// the hardware would give its canonical NaN).
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

// x*scale + bias, two roundings; a NaN result is the canonical NaN, as the CPU backend stores it (the payload an
// operation on NaNs keeps is the processor's choice).
ODML_HD u32 odml_scale_bias32(u32 x, u32 scale, u32 bias) {
    const u32 r = odml_b32(odml_add32(odml_mul32(odml_f32(x), odml_f32(scale)), odml_f32(bias)));
    return odml_nan32(r) ? 0x7fc00000u : r;
}
ODML_HD u64 odml_scale_bias64(u64 x, u64 scale, u64 bias) {
    const u64 r = odml_b64(odml_add64(odml_mul64(odml_f64(x), odml_f64(scale)), odml_f64(bias)));
    return odml_nan64(r) ? 0x7ff8000000000000ull : r;
}

ODML_HD int odml_is_float(int t) { return t == ODML_T_FLOAT32 || t == ODML_T_FLOAT16 || t == ODML_T_FLOAT64; }

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

template <typename N> __device__ __forceinline__ N odml_floor_mod(N a, N m) {
    const N r = a % m;
    return r < 0 ? r + m : r;
}

// The source coordinate of i outside [0, n) (n >= 1), or -1 for CONSTANT; no division within one period of the border
// (every padding narrower than the input). N: i64, or int where |i| < 2^31 and n < 2^30.
template <typename N> __device__ __forceinline__ N odml_map_outside(N i, int mode, N n) {
    switch (mode) {
        case ODML_MAP_CLAMP: return i < 0 ? 0 : n - 1;
        case ODML_MAP_WRAP:
            if (i < 0 && i >= -n) return i + n;
            if (i >= n && i - n < n) return i - n;
            return odml_floor_mod(i, n);
        case ODML_MAP_SYMMETRIC: {
            if (i < 0 && i >= -n) return -1 - i;
            if (i >= n && i - n < n) return 2 * n - 1 - i;
            const N r = odml_floor_mod(i, 2 * n);
            return r < n ? r : 2 * n - 1 - r;
        }
        case ODML_MAP_REFLECT: {
            if (n == 1) return 0;
            if (i < 0 && i > -n) return -i;
            if (i >= n && i - n < n - 1) return 2 * (n - 1) - i;
            const N r = odml_floor_mod(i, 2 * (n - 1));
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

// The coordinate of flat index `rest` along dimension q, rest becoming the
// index over the dimensions outside it; the outermost (outer) takes it whole.
template <typename I>
__device__ __forceinline__ I odml_split(I& rest, const odml_move_dim& q, bool outer = false) {
    if (outer) return rest;
    const I qd = odml_div<I>(rest, q);
    const I c = rest - qd * (I)q.size;
    rest = qd;
    return c;
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
        const I c = odml_split<I>(rest, q, d == 0);
        b += (i64)c * q.dst_stride;
        i64 s = (i64)c;
        if (MAPS && q.map_mode) {
            s -= q.map_shift;
            if ((u64)s >= (u64)q.map_size) {
                s = odml_map_outside(s, (int)q.map_mode, q.map_size);
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
        return (u64)s < (u64)q.map_size ? s : odml_map_outside(s, (int)q.map_mode, q.map_size);
    }
    return c;
}

// Flat destination index `rest` split into the innermost coordinate c0 (dimension NDIM-1), the next one c1 (NDIM-2;
// 0 where NDIM is 1) and the outer dimensions' source/destination offsets (a, b; `fill` where a CONSTANT map of theirs
// falls outside the source).
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
    c0 = odml_split<I>(rest, p->dim[NDIM - 1]);
    if (NDIM == 2) {
        c1 = rest;
        return;
    }
    c1 = odml_split<I>(rest, p->dim[NDIM >= 2 ? NDIM - 2 : 0]);
#pragma unroll
    for (int d = NDIM - 3; d >= 0; --d) {
        const odml_move_dim& q = p->dim[d];
        const I c = odml_split<I>(rest, q, d == 0);
        b += (i64)c * q.dst_stride;
        const i64 s = odml_src_coord<MAPS>((i64)c, q);
        if (MAPS && s < 0) fill = true;
        a += (MAPS && s < 0 ? 0 : s) * q.src_stride;
    }
}

// dst[o] = f(src[m(o)]), V consecutive destination elements per thread: the flat index split once per thread, the
// innermost two coordinates then stepped (split again only where they carry past the second); all V loads before the
// stores, one vector load where the V sources are consecutive and aligned, one vector store where the destinations
// are (usually: the destination is walked in memory order). ST, DT: the DataType values (the conversion specialised
// at compile time; ST == DT and SB 0: words copied); SB: scale/bias.
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
        // A warp whose 32 runs are one misaligned destination run (a padding's interior): each lane stores the
        // aligned 16 bytes of its last k elements and the next lane's first V - k; lane 0 stores its head and lane 31
        // its tail element by element.
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


// A plain copy in aligned 16-byte words (the pass widened by the host's word_plan: sizes, strides and offsets count
// words): U words a thread, word (blockIdx.x * U + j) * blockDim.x + threadIdx.x (coalesced), offsets by
// multiply-shift division, all U loads in flight before the first store. TILE with repeats, JOIN, SPLIT and slices
// whose rows are whole words. NR (0..2) repeat dimensions (source stride 0) after the NDIM of the index space,
// dim[NDIM] and dim[NDIM + 1]: each thread stores its U words at each of their destination offsets (a word read once,
// not once a repeat).
template <int NDIM, typename I, int U, int NR>
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
            const I c = odml_split<I>(rest, q);
            a += (i64)c * q.src_stride;
            b += (i64)c * q.dst_stride;
        }
        so[j] = a + (i64)rest * p->dim[0].src_stride;
        dof[j] = b + (i64)rest * p->dim[0].dst_stride;
    }
    uint4 v[U];
#pragma unroll
    for (int j = 0; j < U; ++j)
        if (in[j]) v[j] = __ldg(src + so[j]);
    static_assert(NR >= 0 && NR <= 2, "move_wcopy takes 0, 1 or 2 repeat dimensions");
    const odml_move_dim &r1 = p->dim[NR > 0 ? NDIM : 0], &r2 = p->dim[NR > 1 ? NDIM + 1 : 0];
    const i64 n1 = NR > 0 ? r1.size : 1, n2 = NR > 1 ? r2.size : 1;
    for (i64 a = 0; a < n1; ++a)
        for (i64 b = 0; b < n2; ++b) {
            const i64 o = (NR > 0 ? a * r1.dst_stride : 0) + (NR > 1 ? b * r2.dst_stride : 0);
#pragma unroll
            for (int j = 0; j < U; ++j)
                if (in[j]) dst[dof[j] + o] = v[j];
        }
}

// A contiguous conversion or scale/bias pass (one dimension, stride 1 on both sides): dst[i] = f(src[i]), i < count.
// Each thread takes U runs of V elements of a block of blockDim*U runs (run (b*U + j)*blockDim.x + threadIdx.x of
// block b: coalesced), all loads before the first store: 16-byte words where both sides are aligned, elements at the
// end. float32 -> float16 converts pairs with one cvt.rn.f16x2.f32 (round to nearest even, subnormals kept:
// odml_f2h's bits for every non-NaN value); a run holding a NaN goes element by element through odml_f2h_fast
// (NumPy's payload rule). FL & 2: a persistent grid (block b = blockIdx.x, blockIdx.x + gridDim.x, ...; registers
// capped for 8 resident blocks where U <= 2, else 4; measured slower, off by default). (Measured no faster, not kept:
// the L2::256B load hint, runs of 16 source bytes for narrowing conversions.)
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

#endif  // ODML_MOVE_HOST
