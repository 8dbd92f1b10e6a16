// opendml CUDA kernels: the strided copy (SLICE, SLICE1) and the windowed
// gather with zero fill (UNFOLD). Compiled at run time by NVRTC through CuPy,
// one specialisation per (word type, rank, reversal, index width); no headers,
// so this file also compiles with plain nvcc (-DOPENDML_INSTANTIATE).
//
// Addresses are computed in 64-bit element offsets; only the flat output index
// may be 32-bit (index type I), which the host picks when the element count
// fits. Parameters arrive as one small int64 array that the host uploads once
// per binding, so a dispatch passes three pointers.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define OPENDML_ITEMS 4

// Reverse the order of ES-byte elements inside a word (SLICE1 with a negative
// innermost stride, copied a whole word at a time).
template <int ES> __device__ __forceinline__ u32 rev32(u32 x) {
    if (ES == 1) return __byte_perm(x, 0, 0x0123);
    if (ES == 2) return __byte_perm(x, 0, 0x1032);
    return x;
}
template <int ES> __device__ __forceinline__ u16 rev_word(u16 x) { return ES == 1 ? (u16)((x >> 8) | (x << 8)) : x; }
template <int ES> __device__ __forceinline__ u32 rev_word(u32 x) { return rev32<ES>(x); }
template <int ES> __device__ __forceinline__ u64 rev_word(u64 x) {
    if (ES == 8) return x;
    return ((u64)rev32<ES>((u32)x) << 32) | (u64)rev32<ES>((u32)(x >> 32));
}
template <int ES> __device__ __forceinline__ uint4 rev_word(uint4 v) {
    if (ES == 8) return make_uint4(v.z, v.w, v.x, v.y);
    return make_uint4(rev32<ES>(v.w), rev32<ES>(v.z), rev32<ES>(v.y), rev32<ES>(v.x));
}
template <int ES> __device__ __forceinline__ u8 rev_word(u8 x) { return x; }

// out[o0 + sum(c*os)] = in[i0 + sum(c*is)] over NDIM dimensions, in words of W.
// p = {count, in_offset, out_offset, size[NDIM], in_stride[NDIM], out_stride[NDIM]}.
template <typename W, int NDIM, int REV, typename I>
__global__ void __launch_bounds__(256) strided_copy(const W* __restrict__ src, W* __restrict__ dst,
                                                    const i64* __restrict__ p) {
    const I count = (I)p[0];
    const I first = (I)blockIdx.x * (I)(blockDim.x * OPENDML_ITEMS) + (I)threadIdx.x;
    i64 io[OPENDML_ITEMS], oo[OPENDML_ITEMS];
#pragma unroll
    for (int j = 0; j < OPENDML_ITEMS; ++j) {
        I rest = first + (I)j * (I)blockDim.x;
        i64 a = p[1], b = p[2];
#pragma unroll
        for (int d = NDIM - 1; d > 0; --d) {
            const I s = (I)p[3 + d];
            const I q = rest / s;
            const I c = rest - q * s;
            a += (i64)c * p[3 + NDIM + d];
            b += (i64)c * p[3 + 2 * NDIM + d];
            rest = q;
        }
        a += (i64)rest * p[3 + NDIM];
        b += (i64)rest * p[3 + 2 * NDIM];
        io[j] = a;
        oo[j] = b;
    }
    W v[OPENDML_ITEMS];
#pragma unroll
    for (int j = 0; j < OPENDML_ITEMS; ++j)  // all loads in flight before the first store
        if (first + (I)j * (I)blockDim.x < count) v[j] = src[io[j]];
#pragma unroll
    for (int j = 0; j < OPENDML_ITEMS; ++j)
        if (first + (I)j * (I)blockDim.x < count) dst[oo[j]] = REV ? rev_word<REV>(v[j]) : v[j];
}

// UNFOLD: out[n, c*K + k, b] = in[n, c, b*stride + k*dilation - start_padding]
// or 0 outside the input. A thread writes V = 16 / sizeof(T) consecutive
// columns of one output row, as one 16-byte store where the row is contiguous
// and aligned.
// p = {slots, in_offset, out_offset, N, C, K, B, os_n, os_row, os_col, is_n, is_c,
//      then per spatial d: size, window, stride, dilation, start_padding, blocks, in_stride}
template <typename T, int D, typename I>
__global__ void __launch_bounds__(256) unfold_gather(const T* __restrict__ src, T* __restrict__ dst,
                                                     const i64* __restrict__ p) {
    constexpr int V = 16 / sizeof(T);
    const I slot = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
    if (slot >= (I)p[0]) return;
    const I K = (I)p[5], B = (I)p[6], C = (I)p[4];
    const I slots_per_row = (B + V - 1) / V;
    const I row_all = slot / slots_per_row;
    const I col0 = (slot - row_all * slots_per_row) * V;
    const I n = row_all / (C * K);
    const I row = row_all - n * (C * K);
    const I c = row / K;
    I k = row - c * K;
    i64 base_in = p[1] + (i64)n * p[10] + (i64)c * p[11];
    int kd[D], bd[D];
    I bf = col0;
#pragma unroll
    for (int d = D - 1; d >= 0; --d) {
        const i64* q = p + 12 + 7 * d;
        const I w = (I)q[1], nb = (I)q[5];
        kd[d] = (int)(k % w);
        k /= w;
        bd[d] = (int)(bf % nb);
        bf /= nb;
    }
    union { uint4 v; T e[V]; } u;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        T val = (T)0;
        if (col0 + (I)j < B) {
            bool inside = true;
            i64 off = base_in;
#pragma unroll
            for (int d = 0; d < D; ++d) {
                const i64* q = p + 12 + 7 * d;
                const i64 pos = (i64)bd[d] * q[2] + (i64)kd[d] * q[3] - q[4];
                inside = inside && pos >= 0 && pos < q[0];
                off += pos * q[6];
            }
            if (inside) val = src[off];
            // next column: increment the block multi-index with carry
#pragma unroll
            for (int d = D - 1; d >= 0; --d) {
                if (++bd[d] < (int)p[12 + 7 * d + 5]) break;
                bd[d] = 0;
            }
        }
        u.e[j] = val;
    }
    const i64 out0 = p[2] + (i64)n * p[7] + (i64)row * p[8] + (i64)col0 * p[9];
    if (p[9] == 1 && col0 + (I)V <= B && (((u64)(dst + out0)) & 15) == 0) {
        *reinterpret_cast<uint4*>(dst + out0) = u.v;
    } else {
#pragma unroll
        for (int j = 0; j < V; ++j)
            if (col0 + (I)j < B) dst[out0 + (i64)j * p[9]] = u.e[j];
    }
}

#ifdef OPENDML_INSTANTIATE
// For `nvcc -c` syntax checks on machines without a GPU (tests/backends).
template __global__ void strided_copy<uint4, 3, 1, u32>(const uint4*, uint4*, const i64*);
template __global__ void strided_copy<uint4, 8, 8, u64>(const uint4*, uint4*, const i64*);
template __global__ void strided_copy<u64, 2, 2, u32>(const u64*, u64*, const i64*);
template __global__ void strided_copy<u32, 1, 0, u32>(const u32*, u32*, const i64*);
template __global__ void strided_copy<u16, 4, 1, u64>(const u16*, u16*, const i64*);
template __global__ void strided_copy<u8, 5, 0, u32>(const u8*, u8*, const i64*);
template __global__ void unfold_gather<u8, 1, u32>(const u8*, u8*, const i64*);
template __global__ void unfold_gather<u16, 2, u32>(const u16*, u16*, const i64*);
template __global__ void unfold_gather<u32, 3, u64>(const u32*, u32*, const i64*);
template __global__ void unfold_gather<u64, 6, u64>(const u64*, u64*, const i64*);
#endif
