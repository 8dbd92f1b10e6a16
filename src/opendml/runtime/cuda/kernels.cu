// opendml CUDA kernels: the strided copy (SLICE, SLICE1), the windowed gather with zero fill (UNFOLD), FOLD's
// windowed sum computed as a gather, and SLICE_GRAD's scatter into zeros. Compiled at run time by NVRTC through CuPy
// (launch.py), one specialisation per template arguments, with `-I<runtime dir>` for params.h and `--fmad=false`
// (FOLD's sums are plain round-to-nearest additions); tests/runtime/nvcc/ instantiates the templates for plain nvcc
// (the check without a GPU).
//
// Every kernel takes (source words, destination words, parameter block): one of params.h's structs BY VALUE
// (launch.py says why), read through `p`, a pointer to the argument itself (__grid_constant__: no local copy).
// Addresses are 64-bit element offsets; only flat thread/work indices may be 32-bit (index type I), where the host
// finds the count fits.

#include "params.h"

// A by-value parameter whose address is taken stays in the parameter space
// (sm_70 and up); older devices get a local copy, still correct.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#define ODML_GRID_CONSTANT
#else
#define ODML_GRID_CONSTANT __grid_constant__
#endif

// Minimum resident blocks per multiprocessor of the FOLD kernels, capping their registers so more warps hide the
// loads' latency. Measured on an H100 (benchmarks/sweep_fold.py; -DODML_FOLD_MIN_BLOCKS=N forces one value for both):
// fold_gather 5 (48 registers) where that spills little (up to 3-D, 16 bytes a lane), else 4; fold1d_tile 4.
#ifdef ODML_FOLD_MIN_BLOCKS
#define ODML_GATHER_BLOCKS(T, D, V) ODML_FOLD_MIN_BLOCKS
#define ODML_TILE_BLOCKS ODML_FOLD_MIN_BLOCKS
#else
#define ODML_GATHER_BLOCKS(T, D, V) ((D) <= 3 && sizeof(T) * (V) <= 16 ? 5 : 4)
#define ODML_TILE_BLOCKS 4
#endif

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef odml_i64 i64;  // the parameter blocks' integer type

// unfold_tile's 16-byte stores of V = 16 / sizeof(T) elements (16-byte aligned).
template <typename T>
struct alignas(16) Vec16 {
    T v[16 / sizeof(T)];
};

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

template <typename W> __device__ __forceinline__ W zero_word() { return (W)0; }
template <> __device__ __forceinline__ uint4 zero_word<uint4>() { return make_uint4(0, 0, 0, 0); }

// The coordinate of flat index `rest` along a dimension of `size`, rest
// becoming the index over the dimensions outside it.
template <typename I> __device__ __forceinline__ I split_index(I& rest, i64 size) {
    const I q = rest / (I)size;
    const I c = rest - q * (I)size;
    rest = q;
    return c;
}

// A thread's ITEMS stores (its loads all issued before): word j (flat index
// first + j*blockDim.x, below count) to dst[oo[j]], elements reversed where REV.
template <int REV, typename W, typename I, int ITEMS>
__device__ __forceinline__ void store_items(W* __restrict__ dst, const i64 (&oo)[ITEMS], const W (&v)[ITEMS], I first,
                                            I count) {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j)
        if (first + (I)j * (I)blockDim.x < count) dst[oo[j]] = REV ? rev_word<REV>(v[j]) : v[j];
}

// out[o0 + sum(c*os)] = in[i0 + sum(c*is)] over NDIM dimensions, in words of W (odml_copy_params, counted in words).
// PICK (an element size; W = u64 only): the input is read in 16-byte words (offset and strides in 16-byte units),
// each 8-byte output word the even elements of one, where the element after a run's last needed one (the word's
// unused tail) is inside the bound range. ITEMS words per thread, all loads before the first store: small words
// (int8 / float16 with a non-unit stride) need more in flight.
template <typename W, int NDIM, int REV, typename I, int ITEMS, int PICK>
__global__ void __launch_bounds__(256) strided_copy(const W* __restrict__ src, W* __restrict__ dst,
                                                    const ODML_GRID_CONSTANT odml_copy_params params) {
    const odml_copy_params* __restrict__ p = &params;
    const I count = (I)p->count;
    const I first = (I)blockIdx.x * (I)(blockDim.x * ITEMS) + (I)threadIdx.x;
    i64 io[ITEMS], oo[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        I rest = first + (I)j * (I)blockDim.x;
        i64 a = p->in_offset, b = p->out_offset;
#pragma unroll
        for (int d = NDIM - 1; d > 0; --d) {
            const I c = split_index<I>(rest, p->sizes[d]);
            a += (i64)c * p->in_strides[d];
            b += (i64)c * p->out_strides[d];
        }
        a += (i64)rest * p->in_strides[0];
        b += (i64)rest * p->out_strides[0];
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
    store_items<REV>(dst, oo, v, first, count);
}

// UNFOLD: out[n, c*K + k, b] = in[n, c, b*stride + k*dilation - start_padding] or 0 outside the input
// (odml_unfold_params; work_items: thread slots). A thread writes R vectors of V = 16 / sizeof(T) consecutive columns
// of one output row (16-byte stores where the row is contiguous and aligned). Block index, input positions and offset
// advance column by column: the divisions are paid once per thread, not per element.
template <typename T, int D, typename I, int R>
__global__ void __launch_bounds__(256) unfold_gather(const T* __restrict__ src, T* __restrict__ dst,
                                                     const ODML_GRID_CONSTANT odml_unfold_params params) {
    const odml_unfold_params* __restrict__ p = &params;
    constexpr int V = 16 / sizeof(T);
    constexpr int CH = V * R;
    const I slot = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
    if (slot >= (I)p->work_items) return;
    const I K = (I)p->window_count, B = (I)p->block_count, C = (I)p->channels;
    const I slots_per_row = (B + CH - 1) / CH;
    const I row_all = slot / slots_per_row;
    const I col0 = (slot - row_all * slots_per_row) * CH;
    const I n = row_all / (C * K);
    const I row = row_all - n * (C * K);
    const I c = row / K;
    I k = row - c * K;
    // Offsets wrap (unsigned): a window element in the padding may sit far outside the image (huge padding times huge
    // stride); only offsets of elements inside are used, where the wrapped value is the true one. Signed overflow
    // would be undefined.
    u64 off = (u64)(p->in_offset + (i64)n * p->in_batch_stride + (i64)c * p->in_channel_stride);
    i64 pos[D], size[D], st[D];
    u64 step[D];
    I bd[D], nb[D];
    I bf = col0;
#pragma unroll
    for (int d = D - 1; d >= 0; --d) {
        const odml_window_dim& q = p->dim[d];
        const I w = (I)q.window;
        nb[d] = (I)q.blocks;
        const I kd = k % w;
        k /= w;
        bd[d] = bf % nb[d];
        bf /= nb[d];
        size[d] = q.size;
        st[d] = q.stride;
        step[d] = (u64)q.stride * (u64)q.image_stride;
        pos[d] = (i64)bd[d] * q.stride + (i64)kd * q.dilation - q.start_padding;
        off += (u64)pos[d] * (u64)q.image_stride;
    }
    const i64 ocol = p->out_column_stride;
    const i64 out0 = p->out_offset + (i64)n * p->out_batch_stride + (i64)row * p->out_row_stride + (i64)col0 * ocol;
    const bool vec = ocol == 1 && (((u64)(dst + out0)) & 15) == 0;
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
                if (inside) val = src[(i64)off];
#pragma unroll
                for (int d = D - 1; d >= 0; --d) {  // next column, with carry
                    pos[d] += st[d];
                    off += step[d];
                    if (++bd[d] < nb[d]) break;
                    bd[d] = 0;
                    pos[d] -= (i64)nb[d] * st[d];
                    off -= (u64)nb[d] * step[d];
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
                if (c0 + (I)j < B) dst[out0 + (i64)(r * V + j) * ocol] = u.e[j];
        }
    }
}

// UNFOLD in 1-D where neighbouring columns lie far apart in the input (framing: window 1024, stride 256): a block
// transposes a tile of 32 window elements x 32 blocks through shared memory, reading along the window and writing
// along the blocks, both coalesced. Window tile fastest: tiles reading the same input (k and k + stride/dilation) run
// together. odml_unfold_params with dims = 1 (work_items unused).
template <typename T, typename I>
__global__ void __launch_bounds__(256) unfold1d_tile(const T* __restrict__ src, T* __restrict__ dst,
                                                     const ODML_GRID_CONSTANT odml_unfold_params params) {
    const odml_unfold_params* __restrict__ p = &params;
    __shared__ T tile[32][33];
    const I K = (I)p->window_count, B = (I)p->block_count, C = (I)p->channels;
    const I ktiles = (K + 31) / 32, btiles = (B + 31) / 32;
    I t = (I)blockIdx.x;
    const I kt = t % ktiles;
    t /= ktiles;
    const I bt = t % btiles;
    const I nc = t / btiles;
    const I n = nc / C, c = nc - n * C;
    const odml_window_dim& q = p->dim[0];
    const i64 size = q.size, st = q.stride, dil = q.dilation, pad = q.start_padding, is = q.image_stride;
    const i64 in0 = p->in_offset + (i64)n * p->in_batch_stride + (i64)c * p->in_channel_stride;
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
    const i64 orow = p->out_row_stride, ocol = p->out_column_stride;
    const i64 out0 = p->out_offset + (i64)n * p->out_batch_stride + (i64)c * (i64)K * orow;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int kl = ty + 8 * i;
        const I k = k0 + (I)kl, b = b0 + (I)tx;
        if (b < B && k < K) dst[out0 + (i64)k * orow + (i64)b * ocol] = tile[tx][kl];
    }
}

// unfold_tile's step to the next window element: kk its position along each spatial dimension (the last fastest),
// koff its offset in the staged region; a dimension reaching its window size wraps to 0 and carries.
template <int D>
__device__ __forceinline__ void next_window_element(int (&kk)[D], int& koff, const int (&kstep)[D],
                                                    const int (&kwrap)[D], const int (&wk)[D]) {
#pragma unroll
    for (int d = D - 1; d >= 0; --d) {
        koff += kstep[d];
        if (++kk[d] < wk[d]) break;
        kk[d] = 0;
        koff -= kwrap[d];
    }
}

// UNFOLD through shared memory: a block stages the input region a box of t[0] x ... x t[D-1] blocks reads,
// zero-filled outside the input, then writes the box's output columns for each of the K window elements: the input
// read once per box instead of K times, an output element one shared load and one store, no bounds check. Region
// coordinates are int (the host keeps the region within the shared memory it asks for); offsets are 64-bit.
// odml_unfold_params: work_items = boxes; per spatial d, box (t), box_extent (region extent e) and box_count (boxes
// along d). Blocks run box fastest, then channel, then batch. VEC = 1: 16-byte stores where the output allows (see
// the write below); VEC = 0: one element per store.
template <typename T, int D, int VEC>
__global__ void __launch_bounds__(256) unfold_tile(const T* __restrict__ src, T* __restrict__ dst,
                                                   const ODML_GRID_CONSTANT odml_unfold_params params) {
    const odml_unfold_params* __restrict__ p = &params;
    extern __shared__ __align__(16) unsigned char smem[];
    T* region = reinterpret_cast<T*>(smem);
    const odml_window_dim* dm = p->dim;
    const int C = (int)p->channels, K = (int)p->window_count;
    int t = (int)blockIdx.x;
    i64 b0[D];          // first block of this box along d
    int tb[D], ext[D];  // box size (smaller at the far edge), region extent
#pragma unroll
    for (int d = D - 1; d >= 0; --d) {
        const int nt = (int)dm[d].box_count;
        const int j = t % nt;
        t /= nt;
        b0[d] = (i64)j * dm[d].box;
        tb[d] = (int)min(dm[d].box, dm[d].blocks - b0[d]);
        ext[d] = (int)dm[d].box_extent;
    }
    const int c = t % C, n = t / C;
    const i64 in0 = p->in_offset + (i64)n * p->in_batch_stride + (i64)c * p->in_channel_stride;

    // Stage: one line of the region (innermost extent) per 32 threads, or the
    // whole block on it when the region is a single line.
    int lines = 1;
#pragma unroll
    for (int d = 0; d < D - 1; ++d) lines *= ext[d];
    const int E = ext[D - 1];
    const int G = lines == 1 ? 256 : 32;
    const int gi = threadIdx.x / G, gl = threadIdx.x % G;
    const odml_window_dim& dl = dm[D - 1];
    const i64 start_last = b0[D - 1] * dl.stride - dl.start_padding;
    for (int l = gi; l < lines; l += 256 / G) {
        int rest = l;
        bool inside = true;
        u64 off = (u64)in0;    // wrapping, as in unfold_gather: used only where inside
#pragma unroll
        for (int d = D - 2; d >= 0; --d) {
            const int y = rest % ext[d];
            rest /= ext[d];
            const i64 pos = b0[d] * dm[d].stride - dm[d].start_padding + y;
            inside = inside && pos >= 0 && pos < dm[d].size;
            off += (u64)pos * (u64)dm[d].image_stride;
        }
        for (int x = gl; x < E; x += G) {
            const i64 pos = start_last + x;
            T v = (T)0;
            if (inside && pos >= 0 && pos < dl.size) v = src[(i64)(off + (u64)(pos * dl.image_stride))];
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
        wk[d] = (int)dm[d].window;
        kstep[d] = (int)dm[d].dilation * rs[d];
        kwrap[d] = wk[d] * kstep[d];
    }
    const i64 orow = p->out_row_stride;
    T* const out0 = dst + p->out_offset + (i64)n * p->out_batch_stride + (i64)c * (i64)K * orow;
    // One element per store: positions from, from + 256, ... of the box.
    auto one_by_one = [&](const int from) {
        for (int i = from + (int)threadIdx.x; i < P; i += 256) {
            int rest = i, loc = 0;
            i64 col = 0, cs = 1;
#pragma unroll
            for (int d = D - 1; d >= 0; --d) {
                const int y = rest % tb[d];
                rest /= tb[d];
                loc += y * (int)dm[d].stride * rs[d];
                col += (b0[d] + y) * cs;
                cs *= dm[d].blocks;
            }
            T* o = out0 + col * p->out_column_stride;
            int kk[D];
#pragma unroll
            for (int d = 0; d < D; ++d) kk[d] = 0;
            int koff = loc;
            for (int k = 0; k < K; ++k) {
                *o = region[koff];
                o += orow;
                next_window_element<D>(kk, koff, kstep, kwrap, wk);
            }
        }
    };
    if (!VEC) {
        one_by_one(0);
        return;
    }
    // VEC = 1 (where the box spans every inner dimension whole, the output's columns are contiguous and its rows
    // 16-byte multiples): the box's output columns are one contiguous run per window element (each row's columns
    // col0 .. col0 + P - 1); where col0's address is 16-byte aligned too (checked here, block-uniform), a thread
    // writes V consecutive positions with one 16-byte store per window element, their region offsets computed once.
    // The positions after the last whole vector, and all where the check fails, go to the one-element loop.
    constexpr int V = (int)(16 / sizeof(T));
    int first = 0;
    bool whole = p->out_column_stride == 1 && (orow * (i64)sizeof(T)) % 16 == 0;
    i64 col0 = b0[0];
#pragma unroll
    for (int d = 1; d < D; ++d) {
        whole = whole && tb[d] == dm[d].blocks;
        col0 *= dm[d].blocks;
    }
    if (whole && reinterpret_cast<unsigned long long>(out0 + col0) % 16 == 0) {
        int sstep[D];
#pragma unroll
        for (int d = 0; d < D; ++d) sstep[d] = (int)dm[d].stride * rs[d];
        const int G = P / V;
        for (int g = threadIdx.x; g < G; g += 256) {
            int y[D], rest = g * V, loc = 0;
#pragma unroll
            for (int d = D - 1; d >= 0; --d) {
                y[d] = rest % tb[d];
                rest /= tb[d];
                loc += y[d] * sstep[d];
            }
            int locs[V];
#pragma unroll
            for (int e = 0; e < V; ++e) {
                locs[e] = loc;
                // next position, with carry (never past the box's last position within the vector)
                if (e + 1 < V) {
                    loc += sstep[D - 1];
#pragma unroll
                    for (int d = D - 1; d > 0; --d) {
                        if (++y[d] < tb[d]) break;
                        y[d] = 0;
                        loc += sstep[d - 1] - tb[d] * sstep[d];
                    }
                }
            }
            Vec16<T>* o = reinterpret_cast<Vec16<T>*>(out0 + col0 + (i64)g * V);
            const i64 ostep = orow / V;
            int kk[D];
#pragma unroll
            for (int d = 0; d < D; ++d) kk[d] = 0;
            int koff = 0;
            for (int k = 0; k < K; ++k) {
                Vec16<T> v;
#pragma unroll
                for (int e = 0; e < V; ++e) v.v[e] = region[locs[e] + koff];
                *o = v;
                o += ostep;
                next_window_element<D>(kk, koff, kstep, kwrap, wk);
            }
        }
        first = G * V;
    }
    one_by_one(first);
}

// ---------------------------------------------------------------------------
// FOLD's sums. SumOf<T, FLT>::type: the accumulator for storage word T. FLT = 0: integers of any signedness, summed
// as unsigned words (two's complement wrap-around; 8- and 16-bit words sum in 32 bits, truncated once: the same modulo
// 2^8 / 2^16). FLT = 1: float16 (T = u16) sums in float32 and rounds once to nearest-even (cvt.rn.f16.f32, NumPy's
// astype); float32 / float64 sum in their own type. Every float addition is an explicit round-to-nearest add.rn
// (never an FMA), in PTX for float32 so that CuPy's -ftz=true (on every NVRTC compile) cannot flush subnormal sums to
// zero. A sum starts at +0 and adding +0 never changes it (it is never -0): fold1d_tile adds +0 for contributions
// that do not exist. A NaN sum is stored as the canonical quiet NaN (sign +, payload 0: float16 0x7E00, float32
// 0x7FC00000, float64 0x7FF8000000000000), as bits: the payload a sum of NaNs keeps differs between processors, so
// every backend stores this (runtime/cpu/fold.c, numpy_kernels.prepare_fold).

__device__ __forceinline__ float half_bits_to_float(u16 h) {
    float f;
    asm("{ cvt.f32.f16 %0, %1; }" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ u16 float_to_half_bits(float f) {
    u16 h;
    asm("{ cvt.rn.f16.f32 %0, %1; }" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float add_rn_f32(float a, float b) {  // IEEE, subnormals kept
    float c;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(c) : "f"(a), "f"(b));
    return c;
}

template <bool WIDE> struct sum_word { typedef u32 type; };
template <> struct sum_word<true> { typedef u64 type; };

template <typename T> struct IntSum {
    typedef typename sum_word<sizeof(T) == 8>::type A;
    static __device__ __forceinline__ A zero() { return (A)0; }
    static __device__ __forceinline__ A load(T v) { return (A)v; }
    static __device__ __forceinline__ A add(A a, A b) { return a + b; }
    static __device__ __forceinline__ T store(A a) { return (T)a; }
};
struct HalfSum {
    typedef float A;
    static __device__ __forceinline__ A zero() { return 0.0f; }
    static __device__ __forceinline__ A load(u16 v) { return half_bits_to_float(v); }
    static __device__ __forceinline__ A add(A a, A b) { return add_rn_f32(a, b); }
    static __device__ __forceinline__ u16 store(A a) { return a != a ? (u16)0x7E00u : float_to_half_bits(a); }
};
struct FloatSum {
    typedef float A;
    static __device__ __forceinline__ A zero() { return 0.0f; }
    static __device__ __forceinline__ A load(u32 v) { return __uint_as_float(v); }
    static __device__ __forceinline__ A add(A a, A b) { return add_rn_f32(a, b); }
    static __device__ __forceinline__ u32 store(A a) { return a != a ? 0x7FC00000u : __float_as_uint(a); }
};
struct DoubleSum {
    typedef double A;
    static __device__ __forceinline__ A zero() { return 0.0; }
    static __device__ __forceinline__ A load(u64 v) { return __longlong_as_double((long long)v); }
    static __device__ __forceinline__ A add(A a, A b) { return __dadd_rn(a, b); }
    static __device__ __forceinline__ u64 store(A a) {
        return a != a ? 0x7FF8000000000000ull : (u64)__double_as_longlong(a);
    }
};
template <typename T, int FLT> struct SumOf { typedef IntSum<T> type; };
template <> struct SumOf<u16, 1> { typedef HalfSum type; };
template <> struct SumOf<u32, 1> { typedef FloatSum type; };
template <> struct SumOf<u64, 1> { typedef DoubleSum type; };

// a / b and a % b for a >= 0, b >= 1: 32-bit division where both fit (always, in practice), else 64-bit.
__device__ __forceinline__ i64 udiv(i64 a, i64 b) {
    if (((u64)a | (u64)b) >> 32 == 0) return (i64)((u32)a / (u32)b);
    return (i64)((u64)a / (u64)b);
}
__device__ __forceinline__ i64 umod(i64 a, i64 b) { return a - udiv(a, b) * b; }

// The window elements k of one spatial dimension that reach image coordinate x, in increasing order: k = first,
// first + step, ... (count of them), where block b = (x + start_padding - k*dilation) / stride is whole, in
// [0, blocks). `block`: the first one's; each further one moves it by -step*dilation/stride.
struct WindowRun {
    i64 first, block, count;
};

// Inverse of a modulo m (a and m coprime, m >= 2), by the extended Euclid.
__device__ __forceinline__ i64 inverse_mod(i64 a, i64 m) {
    i64 r0 = m, r1 = a, t0 = 0, t1 = 1;
    while (r1 != 0) {
        const i64 q = udiv(r0, r1);
        i64 t = r0 - q * r1; r0 = r1; r1 = t;
        t = t0 - q * t1; t0 = t1; t1 = t;
    }
    return t0 < 0 ? t0 + m : t0;
}

// Per-dimension constants of the congruence k*dilation == q (mod stride):
// g = gcd(dilation, stride), step = stride / g, inv = (dilation/g)^-1 mod step.
struct WindowCongruence {
    i64 g, step, inv;
};
__device__ __forceinline__ WindowCongruence window_congruence(const odml_window_dim& w) {
    WindowCongruence c;
    c.g = 1; c.step = 1; c.inv = 0;
    if (w.stride == 1) return c;
    i64 a = w.dilation, b = w.stride;
    while (b != 0) { const i64 t = umod(a, b); a = b; b = t; }
    c.g = a;
    c.step = udiv(w.stride, a);
    if (c.step > 1) c.inv = inverse_mod(umod(udiv(w.dilation, a), c.step), c.step);
    return c;
}

__device__ __forceinline__ WindowRun window_run(const odml_window_dim& w, const WindowCongruence& c, i64 x) {
    WindowRun r;
    const i64 q = x + w.start_padding;                      // >= 0
    const i64 dil = w.dilation, s = w.stride;
    const i64 hi = min(w.window - 1, dil == 1 ? q : udiv(q, dil));   // k*dil <= q: block >= 0
    const i64 lo_num = q - (w.blocks - 1) * s;              // k*dil >= q - (blocks-1)*s: block < blocks
    const i64 lo = lo_num <= 0 ? 0 : (dil == 1 ? lo_num : udiv(lo_num + dil - 1, dil));
    if (s == 1) {
        r.first = lo;
    } else {
        const i64 res = umod(q, s);
        if (c.g != 1 && umod(res, c.g) != 0) { r.first = 0; r.block = 0; r.count = 0; return r; }
        // k == (res/g) * inv (mod step); both factors < step < 2^32
        const i64 k0 = c.step == 1 ? 0 : (i64)(((u64)umod(udiv(res, c.g), c.step) * (u64)c.inv) % (u64)c.step);
        r.first = lo + umod(k0 + c.step - umod(lo, c.step), c.step);
    }
    r.count = r.first <= hi ? (c.step == 1 ? hi - r.first : udiv(hi - r.first, c.step)) + 1 : 0;
    const i64 rem = q - r.first * dil;
    r.block = r.count ? (s == 1 ? rem : udiv(rem, s)) : 0;
    return r;
}

// FOLD as a gather, any dimension count: image[n, c, x] = +0 + the contributions of every window element k
// (row-major, increasing) whose block reaches x. A warp owns a run of 32*V neighbouring image positions of one line
// (innermost spatial dimension): lane l sums positions x0 + l + 32*j (j < V), so for each window element the warp
// loads consecutive columns (coalesced) and stores consecutive image elements. The outer dimensions' window runs are
// shared by the warp; each address is a base plus a multiple of a per-dimension step (window index and block move
// together): no division in the loop. The contributions (outer window elements, then the inner run) are walked in
// batches of U steps, their U*V loads all issued before their adds. odml_fold_params: work_items = warps (lines x
// runs per line).
template <typename T, int FLT, int D, typename I, int V>
__global__ void __launch_bounds__(256, ODML_GATHER_BLOCKS(T, D, V)) fold_gather(const T* __restrict__ src, T* __restrict__ dst,
                                                   const ODML_GRID_CONSTANT odml_fold_params params) {
    const odml_fold_params* __restrict__ p = &params;
    typedef typename SumOf<T, FLT>::type S;
    typedef typename S::A A;
    constexpr int U = V >= 4 ? 2 : 8 / V;  // steps per batch: 8 loads in flight per thread
    const I gt = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
    const I warp = gt >> 5;
    const int lane = (int)(threadIdx.x & 31);
    if (warp >= (I)p->work_items) return;
    const odml_window_dim* dm = p->dim;
    const i64 width = dm[D - 1].size;
    const I runs = (I)((width + 32 * V - 1) / (32 * V));
    I rest = warp / runs;
    const i64 x0 = (i64)(warp - rest * runs) * (32 * V) + lane;
    i64 pos[D];
#pragma unroll
    for (int d = D - 2; d >= 0; --d) pos[d] = (i64)split_index<I>(rest, dm[d].size);
    const I C = (I)p->channels;
    const I n = rest / C, c = rest - n * C;
    const i64 isr = p->in_row_stride, isc = p->in_column_stride;
    // row stride of window element k_d and column stride of block b_d
    i64 kst[D], bst[D];
    {
        i64 ks = 1, bs = 1;
#pragma unroll
        for (int d = D - 1; d >= 0; --d) {
            kst[d] = ks * isr;
            bst[d] = bs * isc;
            ks *= dm[d].window;
            bs *= dm[d].blocks;
        }
    }
    i64 base = p->in_offset + (i64)n * p->in_batch_stride + (i64)c * (i64)p->window_count * isr;
    i64 cnt[D], coef[D];
    bool empty = false;
#pragma unroll
    for (int d = 0; d < D - 1; ++d) {
        const WindowCongruence cg = window_congruence(dm[d]);
        const WindowRun r = window_run(dm[d], cg, pos[d]);
        base += r.first * kst[d] + r.block * bst[d];
        cnt[d] = r.count;
        coef[d] = cg.step * kst[d] - (dm[d].stride == 1 ? dm[d].dilation : udiv(cg.step * dm[d].dilation,
                                                                                 dm[d].stride)) * bst[d];
        empty = empty || r.count == 0;
    }
    const WindowCongruence cgi = window_congruence(dm[D - 1]);
    const i64 coef_in = cgi.step * kst[D - 1] -
        (dm[D - 1].stride == 1 ? dm[D - 1].dilation : udiv(cgi.step * dm[D - 1].dilation, dm[D - 1].stride)) *
            bst[D - 1];
    i64 addr[V];
    int ncnt[V];
    int most = 0;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const i64 x = x0 + 32 * j;
        ncnt[j] = 0;
        addr[j] = 0;
        if (x < width) {
            const WindowRun r = window_run(dm[D - 1], cgi, x);
            ncnt[j] = (int)r.count;
            addr[j] = base + r.first * kst[D - 1] + r.block * bst[D - 1];
        }
        most = max(most, ncnt[j]);
    }
    A acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = S::zero();
    bool more = !empty && most > 0;
    i64 ci[D];
#pragma unroll
    for (int d = 0; d < D; ++d) ci[d] = 0;
    i64 off = 0;    // outer window elements' offset
    int i = 0;      // step of the inner run
    while (more) {
        T v[U][V];
        u32 mask = 0;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (more) {
#pragma unroll
                for (int j = 0; j < V; ++j)
                    if (i < ncnt[j]) {
                        v[u][j] = src[addr[j] + off + (i64)i * coef_in];
                        mask |= 1u << (u * V + j);
                    }
                if (++i >= most) {  // next combination of the outer dimensions' window elements
                    i = 0;
                    more = false;
#pragma unroll
                    for (int e = D - 2; e >= 0; --e) {
                        off += coef[e];
                        if (++ci[e] < cnt[e]) { more = true; break; }
                        off -= cnt[e] * coef[e];
                        ci[e] = 0;
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < V; ++j)
                if (mask & (1u << (u * V + j))) acc[j] = S::add(acc[j], S::load(v[u][j]));
    }
    i64 out0 = p->out_offset + (i64)n * p->out_batch_stride + (i64)c * p->out_channel_stride;
#pragma unroll
    for (int d = 0; d < D - 1; ++d) out0 += pos[d] * dm[d].image_stride;
    const i64 osx = dm[D - 1].image_stride;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const i64 x = x0 + 32 * j;
        if (x < width) dst[out0 + x * osx] = S::store(acc[j]);
    }
}

// FOLD in 1-D with a stride of 32 or more (overlap-add: frames of 1024, hop 256). Image position x is written q = x +
// start_padding = m*stride + r (m: hop, r: residue). Its contributions are the window elements k with k*dilation = r
// + j*stride for j = 0, 1, ... (increasing j is increasing k), from block m - j. A CUDA block owns MH = 32 hops x RC
// residues; for each j it stages the RC x MH columns it needs in shared memory (read along the blocks, coalesced;
// zero where no such window element or block exists) and each thread adds its tile entries to its register
// accumulators, then writes its positions: consecutive residues, consecutive stores. Blocks run residue tile fastest,
// then hop tile, then channel, then batch.
template <typename T, int FLT, int RC>
__global__ void __launch_bounds__(256, ODML_TILE_BLOCKS) fold1d_tile(const T* __restrict__ src, T* __restrict__ dst,
                                                   const ODML_GRID_CONSTANT odml_fold_params params) {
    const odml_fold_params* __restrict__ p = &params;
    typedef typename SumOf<T, FLT>::type S;
    typedef typename S::A A;
    constexpr int MH = 32;
    constexpr int G = 256 / RC;      // thread groups over the hops
    constexpr int NA = MH / G;       // accumulators per thread
    __shared__ T tile[RC][MH + 1];
    const odml_window_dim& w = p->dim[0];
    const i64 s = w.stride, dil = w.dilation, pad = w.start_padding, width = w.size;
    const i64 m_first = udiv(pad, s);
    const i64 hops = udiv(pad + width - 1, s) - m_first + 1;
    const i64 mtiles = (hops + MH - 1) / MH, rtiles = udiv(s + RC - 1, RC);
    i64 t = blockIdx.x;
    const i64 rt = umod(t, rtiles);
    t = udiv(t, rtiles);
    const i64 mt = umod(t, mtiles);
    t = udiv(t, mtiles);
    const i64 C = p->channels;
    const i64 n = udiv(t, C), c = t - n * C;
    const i64 m0 = m_first + mt * MH, r0 = rt * RC;
    const i64 K = p->window_count, B = p->block_count;
    const i64 isr = p->in_row_stride, isc = p->in_column_stride;
    const i64 in0 = p->in_offset + n * p->in_batch_stride + c * K * isr;
    const i64 reach = (w.window - 1) * dil;  // largest k*dilation
    const i64 J = reach >= r0 ? udiv(reach - r0, s) + 1 : 0;
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    const int rr = threadIdx.x % RC, g = threadIdx.x / RC;
    A acc[NA];
#pragma unroll
    for (int a = 0; a < NA; ++a) acc[a] = S::zero();
    for (i64 j = 0; j < J; ++j) {
        const i64 b = m0 + lane - j;
        const bool bok = b >= 0 && b < B;
        const i64 col = in0 + b * isc;
#pragma unroll
        for (int i = 0; i < RC / 8; ++i) {
            const int row = wp + 8 * i;
            const i64 kd = r0 + row + j * s;  // k * dilation
            T v = (T)0;
            if (dil == 1) {
                if (bok && r0 + row < s && kd <= reach) v = src[col + kd * isr];
            } else if (bok && r0 + row < s && kd <= reach && umod(kd, dil) == 0) {
                v = src[col + udiv(kd, dil) * isr];
            }
            tile[row][lane] = v;
        }
        __syncthreads();
#pragma unroll
        for (int a = 0; a < NA; ++a) acc[a] = S::add(acc[a], S::load(tile[rr][g + G * a]));
        __syncthreads();
    }
    const i64 osx = w.image_stride;
    const i64 out0 = p->out_offset + n * p->out_batch_stride + c * p->out_channel_stride;
#pragma unroll
    for (int a = 0; a < NA; ++a) {
        const i64 x = (m0 + g + G * a) * s + r0 + rr - pad;
        if (r0 + rr < s && x >= 0 && x < width) dst[out0 + x * osx] = S::store(acc[a]);
    }
}

// SLICE_GRAD: out[p] = in[i] where p == first + i*step in every dimension (0 <= i < taken), else 0; every output word
// written once (odml_scatter_params in words of W: the host widens a contiguous, aligned innermost dimension to
// 16-byte words as for copies; REV: the innermost input runs backwards, elements reversed inside a word). ITEMS words
// per thread, loads before stores; threads follow the output's memory order (coalesced stores).
template <typename W, int D, int REV, typename I, int ITEMS>
__global__ void __launch_bounds__(256) scatter(const W* __restrict__ src, W* __restrict__ dst,
                                               const ODML_GRID_CONSTANT odml_scatter_params params) {
    const odml_scatter_params* __restrict__ p = &params;
    const I count = (I)p->count;
    const I first = (I)blockIdx.x * (I)(blockDim.x * ITEMS) + (I)threadIdx.x;
    i64 io[ITEMS], oo[ITEMS];
    bool inside[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        I rest = first + (I)j * (I)blockDim.x;
        bool ok = rest < count;
        i64 a = p->in_offset, b = p->out_offset;
#pragma unroll
        for (int d = D - 1; d >= 0; --d) {
            const I x = d > 0 ? split_index<I>(rest, p->sizes[d]) : rest;
            b += (i64)x * p->out_strides[d];
            const i64 rel = (i64)x - p->first[d];
            const i64 st = p->step[d];
            i64 i = rel;
            if (st != 1) {
                i = (i64)((I)(rel < 0 ? 0 : rel) / (I)st);
                ok = ok && i * st == rel;
            }
            ok = ok && rel >= 0 && i < p->taken[d];
            a += i * p->in_strides[d];
        }
        io[j] = a;
        oo[j] = b;
        inside[j] = ok;
    }
    W v[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        v[j] = zero_word<W>();
        if (inside[j]) v[j] = src[io[j]];
    }
    store_items<REV>(dst, oo, v, first, count);
}
