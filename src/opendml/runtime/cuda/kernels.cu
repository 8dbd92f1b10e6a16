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

// The even elements (size ES) of a 16-byte word, as 8 bytes: a stride-2
// innermost dimension read with fully coalesced 16-byte loads.
template <int ES> __device__ __forceinline__ u64 pick_even(uint4 a) {
    if (ES == 8) return (u64)a.x | ((u64)a.y << 32);
    if (ES == 4) return (u64)a.x | ((u64)a.z << 32);
    constexpr unsigned sel = ES == 2 ? 0x5410 : 0x6420;
    return (u64)__byte_perm(a.x, a.y, sel) | ((u64)__byte_perm(a.z, a.w, sel) << 32);
}

// out[o0 + sum(c*os)] = in[i0 + sum(c*is)] over NDIM dimensions, in words of W.
// PICK (an element size; W = u64 only): the input is read in 16-byte words
// (offsets and strides in 16-byte units) and each 8-byte output word is the
// even elements of one; the host uses it only where the element after a run's
// last needed one (the word's unused tail) is still inside the bound range.
// p = {count, in_offset, out_offset, size[NDIM], in_stride[NDIM], out_stride[NDIM]}.
// ITEMS words per thread, all loads issued before the first store: small
// words (int8 / float16 with a non-unit stride) need more of them in flight.
template <typename W, int NDIM, int REV, typename I, int ITEMS, int PICK>
__global__ void __launch_bounds__(256) strided_copy(const W* __restrict__ src, W* __restrict__ dst,
                                                    const i64* __restrict__ p) {
    const I count = (I)p[0];
    const I first = (I)blockIdx.x * (I)(blockDim.x * ITEMS) + (I)threadIdx.x;
    i64 io[ITEMS], oo[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
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
    W v[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j)  // all loads in flight before the first store
        if (first + (I)j * (I)blockDim.x < count) {
            if constexpr (PICK != 0) v[j] = pick_even<PICK>(reinterpret_cast<const uint4*>(src)[io[j]]);
            else v[j] = src[io[j]];
        }
#pragma unroll
    for (int j = 0; j < ITEMS; ++j)
        if (first + (I)j * (I)blockDim.x < count) dst[oo[j]] = REV ? rev_word<REV>(v[j]) : v[j];
}

// UNFOLD: out[n, c*K + k, b] = in[n, c, b*stride + k*dilation - start_padding]
// or 0 outside the input. A thread writes R vectors of V = 16 / sizeof(T)
// consecutive columns of one output row (16-byte stores where the row is
// contiguous and aligned). The block multi-index, the input positions and the
// input offset advance incrementally from column to column: the divisions are
// paid once per thread, not per element.
// p = {slots, in_offset, out_offset, N, C, K, B, os_n, os_row, os_col, is_n, is_c,
//      then per spatial d: size, window, stride, dilation, start_padding, blocks, in_stride}
template <typename T, int D, typename I, int R>
__global__ void __launch_bounds__(256) unfold_gather(const T* __restrict__ src, T* __restrict__ dst,
                                                     const i64* __restrict__ p) {
    constexpr int V = 16 / sizeof(T);
    constexpr int CH = V * R;
    const I slot = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
    if (slot >= (I)p[0]) return;
    const I K = (I)p[5], B = (I)p[6], C = (I)p[4];
    const I slots_per_row = (B + CH - 1) / CH;
    const I row_all = slot / slots_per_row;
    const I col0 = (slot - row_all * slots_per_row) * CH;
    const I n = row_all / (C * K);
    const I row = row_all - n * (C * K);
    const I c = row / K;
    I k = row - c * K;
    i64 off = p[1] + (i64)n * p[10] + (i64)c * p[11];
    i64 pos[D], size[D], st[D], step[D];
    I bd[D], nb[D];
    I bf = col0;
#pragma unroll
    for (int d = D - 1; d >= 0; --d) {
        const i64* q = p + 12 + 7 * d;
        const I w = (I)q[1];
        nb[d] = (I)q[5];
        const I kd = k % w;
        k /= w;
        bd[d] = bf % nb[d];
        bf /= nb[d];
        size[d] = q[0];
        st[d] = q[2];
        step[d] = q[2] * q[6];
        pos[d] = (i64)bd[d] * q[2] + (i64)kd * q[3] - q[4];
        off += pos[d] * q[6];
    }
    const i64 out0 = p[2] + (i64)n * p[7] + (i64)row * p[8] + (i64)col0 * p[9];
    const bool vec = p[9] == 1 && (((u64)(dst + out0)) & 15) == 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        union { uint4 v; T e[V]; } u;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            T val = (T)0;
            if (col0 + (I)(r * V + j) < B) {
                bool inside = true;
#pragma unroll
                for (int d = 0; d < D; ++d) inside = inside && (u64)pos[d] < (u64)size[d];
                if (inside) val = src[off];
#pragma unroll
                for (int d = D - 1; d >= 0; --d) {  // next column, with carry
                    pos[d] += st[d];
                    off += step[d];
                    if (++bd[d] < nb[d]) break;
                    bd[d] = 0;
                    pos[d] -= (i64)nb[d] * st[d];
                    off -= (i64)nb[d] * step[d];
                }
            }
            u.e[j] = val;
        }
        const I c0 = col0 + (I)(r * V);
        if (vec && c0 + (I)V <= B) {
            *reinterpret_cast<uint4*>(dst + out0 + r * V) = u.v;
        } else {
#pragma unroll
            for (int j = 0; j < V; ++j)
                if (c0 + (I)j < B) dst[out0 + (i64)(r * V + j) * p[9]] = u.e[j];
        }
    }
}

// UNFOLD in 1-D where neighbouring columns lie far apart in the input
// (framing: window 1024, stride 256): a block transposes a tile of 32 window
// elements x 32 blocks through shared memory, reading along the window (input
// contiguous for dilation 1) and writing along the blocks (output contiguous),
// so both sides are coalesced. Blocks are ordered window tile fastest: the
// tiles that read the same input (k and k + stride/dilation) run together.
// p as unfold_gather with D = 1 (p[0] unused).
template <typename T, typename I>
__global__ void __launch_bounds__(256) unfold1d_tile(const T* __restrict__ src, T* __restrict__ dst,
                                                     const i64* __restrict__ p) {
    __shared__ T tile[32][33];
    const I K = (I)p[5], B = (I)p[6], C = (I)p[4];
    const I ktiles = (K + 31) / 32, btiles = (B + 31) / 32;
    I t = (I)blockIdx.x;
    const I kt = t % ktiles;
    t /= ktiles;
    const I bt = t % btiles;
    const I nc = t / btiles;
    const I n = nc / C, c = nc - n * C;
    const i64 size = p[12], st = p[14], dil = p[15], pad = p[16], is = p[18];
    const i64 in0 = p[1] + (i64)n * p[10] + (i64)c * p[11];
    const I k0 = kt * 32, b0 = bt * 32;
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int bl = ty + 8 * i;
        const I b = b0 + (I)bl, k = k0 + (I)tx;
        T v = (T)0;
        if (b < B && k < K) {
            const i64 pos = (i64)b * st + (i64)k * dil - pad;
            if (pos >= 0 && pos < size) v = src[in0 + pos * is];
        }
        tile[bl][tx] = v;
    }
    __syncthreads();
    const i64 out0 = p[2] + (i64)n * p[7] + (i64)c * (i64)K * p[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int kl = ty + 8 * i;
        const I k = k0 + (I)kl, b = b0 + (I)tx;
        if (b < B && k < K) dst[out0 + (i64)k * p[8] + (i64)b * p[9]] = tile[tx][kl];
    }
}

// UNFOLD through shared memory: a block stages the input region that a box of
// t[0] x ... x t[D-1] blocks reads (every window element included), zero-filled
// outside the input, then writes the box's output columns for each of the K
// window elements. The input is read once per box instead of K times, and an
// output element costs one shared-memory load and one store, with no bounds
// check. Region coordinates are int (the host keeps the region within the
// shared memory it asks for); input and output offsets are 64-bit.
// p as unfold_gather (p[0]: boxes), then per spatial d: {box t, region extent
// e, boxes along d}. Blocks run box fastest, then channel, then batch.
template <typename T, int D>
__global__ void __launch_bounds__(256) unfold_tile(const T* __restrict__ src, T* __restrict__ dst,
                                                   const i64* __restrict__ p) {
    extern __shared__ __align__(16) unsigned char smem[];
    T* region = reinterpret_cast<T*>(smem);
    const i64* q = p + 12;
    const i64* tq = p + 12 + 7 * D;
    const int C = (int)p[4], K = (int)p[5];
    int t = (int)blockIdx.x;
    i64 b0[D];          // first block of this box along d
    int tb[D], ext[D];  // box size (smaller at the far edge), region extent
#pragma unroll
    for (int d = D - 1; d >= 0; --d) {
        const int nt = (int)tq[3 * d + 2];
        const int j = t % nt;
        t /= nt;
        b0[d] = (i64)j * tq[3 * d];
        tb[d] = (int)min(tq[3 * d], q[7 * d + 5] - b0[d]);
        ext[d] = (int)tq[3 * d + 1];
    }
    const int c = t % C, n = t / C;
    const i64 in0 = p[1] + (i64)n * p[10] + (i64)c * p[11];

    // Stage: one line of the region (innermost extent) per 32 threads, or the
    // whole block on it when the region is a single line.
    int lines = 1;
#pragma unroll
    for (int d = 0; d < D - 1; ++d) lines *= ext[d];
    const int E = ext[D - 1];
    const int G = lines == 1 ? 256 : 32;
    const int gi = threadIdx.x / G, gl = threadIdx.x % G;
    const i64* ql = q + 7 * (D - 1);
    const i64 start_last = b0[D - 1] * ql[2] - ql[4];
    for (int l = gi; l < lines; l += 256 / G) {
        int rest = l;
        bool inside = true;
        i64 off = in0;
#pragma unroll
        for (int d = D - 2; d >= 0; --d) {
            const int y = rest % ext[d];
            rest /= ext[d];
            const i64 pos = b0[d] * q[7 * d + 2] - q[7 * d + 4] + y;
            inside = inside && pos >= 0 && pos < q[7 * d];
            off += pos * q[7 * d + 6];
        }
        for (int x = gl; x < E; x += G) {
            const i64 pos = start_last + x;
            T v = (T)0;
            if (inside && pos >= 0 && pos < ql[0]) v = src[off + pos * ql[6]];
            region[l * E + x] = v;
        }
    }
    __syncthreads();

    // Write: each thread owns box positions; for each, K stores down the rows.
    int rs[D], kstep[D], kwrap[D], wk[D];
    rs[D - 1] = 1;
#pragma unroll
    for (int d = D - 2; d >= 0; --d) rs[d] = rs[d + 1] * ext[d + 1];
    int P = 1;
#pragma unroll
    for (int d = 0; d < D; ++d) {
        P *= tb[d];
        wk[d] = (int)q[7 * d + 1];
        kstep[d] = (int)q[7 * d + 3] * rs[d];
        kwrap[d] = wk[d] * kstep[d];
    }
    const i64 orow = p[8];
    T* const out0 = dst + p[2] + (i64)n * p[7] + (i64)c * (i64)K * orow;
    for (int i = threadIdx.x; i < P; i += 256) {
        int rest = i, loc = 0;
        i64 col = 0, cs = 1;
#pragma unroll
        for (int d = D - 1; d >= 0; --d) {
            const int y = rest % tb[d];
            rest /= tb[d];
            loc += y * (int)q[7 * d + 2] * rs[d];
            col += (b0[d] + y) * cs;
            cs *= q[7 * d + 5];
        }
        T* o = out0 + col * p[9];
        int kk[D];
#pragma unroll
        for (int d = 0; d < D; ++d) kk[d] = 0;
        int koff = loc;
        for (int k = 0; k < K; ++k) {
            *o = region[koff];
            o += orow;
#pragma unroll
            for (int d = D - 1; d >= 0; --d) {  // next window element, with carry
                koff += kstep[d];
                if (++kk[d] < wk[d]) break;
                kk[d] = 0;
                koff -= kwrap[d];
            }
        }
    }
}

#ifdef OPENDML_INSTANTIATE
// For `nvcc -c` syntax checks on machines without a GPU (tests/backends).
template __global__ void strided_copy<uint4, 3, 1, u32, 4, 0>(const uint4*, uint4*, const i64*);
template __global__ void strided_copy<uint4, 8, 8, u64, 4, 0>(const uint4*, uint4*, const i64*);
template __global__ void strided_copy<u64, 2, 2, u32, 4, 0>(const u64*, u64*, const i64*);
template __global__ void strided_copy<u32, 1, 0, u32, 4, 0>(const u32*, u32*, const i64*);
template __global__ void strided_copy<u16, 4, 1, u64, 8, 0>(const u16*, u16*, const i64*);
template __global__ void strided_copy<u8, 5, 0, u32, 16, 0>(const u8*, u8*, const i64*);
template __global__ void strided_copy<u64, 3, 0, u32, 4, 4>(const u64*, u64*, const i64*);
template __global__ void strided_copy<u64, 2, 0, u64, 4, 1>(const u64*, u64*, const i64*);
template __global__ void strided_copy<u64, 4, 0, u32, 4, 2>(const u64*, u64*, const i64*);
template __global__ void strided_copy<u64, 1, 0, u32, 4, 8>(const u64*, u64*, const i64*);
template __global__ void unfold_tile<u32, 2>(const u32*, u32*, const i64*);
template __global__ void unfold_tile<u8, 1>(const u8*, u8*, const i64*);
template __global__ void unfold_tile<u64, 8>(const u64*, u64*, const i64*);
template __global__ void unfold_tile<u16, 3>(const u16*, u16*, const i64*);
template __global__ void unfold1d_tile<u32, u32>(const u32*, u32*, const i64*);
template __global__ void unfold1d_tile<u8, u64>(const u8*, u8*, const i64*);
template __global__ void unfold_gather<u8, 1, u32, 1>(const u8*, u8*, const i64*);
template __global__ void unfold_gather<u16, 2, u32, 1>(const u16*, u16*, const i64*);
template __global__ void unfold_gather<u32, 3, u64, 2>(const u32*, u32*, const i64*);
template __global__ void unfold_gather<u64, 6, u64, 2>(const u64*, u64*, const i64*);
#endif
