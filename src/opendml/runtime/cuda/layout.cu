// opendml CUDA kernels of the move program that rearrange: small transposes (move_tile: SPACE_TO_DEPTH,
// DEPTH_TO_SPACE), tiled transposes through shared memory (move_transpose: permuted views made contiguous) and a
// padding program in one pass (move_pad: a warp per row; move_padw: a thread per aligned 16-byte output word;
// move_padr: a warp per row, aligned 16-byte stores). Built on move.cu (types, parameter access, index splitting,
// maps) and compiled as it is.
#define ODML_LAYOUT
#include "move.cu"

// 16 bytes starting kb bytes into the 32 bytes a, b (kb a multiple of ES, the element size): whole 4-byte words (kw)
// selected, then funnel shifts (2- and 1-byte elements).
template <int ES>
__device__ __forceinline__ uint4 odml_realign(const uint4 a, const uint4 b, const u32 kb) {
    const u32 x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    const u32 kw = kb >> 2;
    u32 z[6], y[5];
#pragma unroll
    for (int e = 0; e < 6; ++e) z[e] = (kw & 2u) ? x[e + 2] : x[e];
#pragma unroll
    for (int e = 0; e < 5; ++e) y[e] = (ES < 8 && (kw & 1u)) ? z[e + 1] : z[e];
    if (ES >= 4) return make_uint4(y[0], y[1], y[2], y[3]);
    const u32 kr = (kb & 3u) * 8u;
    return make_uint4(__funnelshift_r(y[0], y[1], kr), __funnelshift_r(y[1], y[2], kr),
                      __funnelshift_r(y[2], y[3], kr), __funnelshift_r(y[3], y[4], kr));
}

// The aligned 16-byte word at a (element-aligned), only its bytes inside [lo, hi) (a source row's elements) read:
// whole where it lies inside, else element by element, the rest zero, so realigning the words at a row's ends never
// reads outside the row (nor, at the bound range's ends, the buffer).
template <typename T>
__device__ __forceinline__ uint4 odml_ldg_in(const uint4* a, unsigned long long lo, unsigned long long hi) {
    const unsigned long long b = (unsigned long long)a;
    if (b >= lo && b + 16ull <= hi) return __ldg(a);
    union {
        uint4 w;
        T t[16 / sizeof(T)];
    } f;
    f.w = make_uint4(0u, 0u, 0u, 0u);
    const T* e = reinterpret_cast<const T*>(a);
#pragma unroll
    for (int i = 0; i < 16 / (int)sizeof(T); ++i) {
        const unsigned long long x = b + (unsigned long long)(i * (int)sizeof(T));
        if (x >= lo && x + sizeof(T) <= hi) f.t[i] = __ldg(e + i);
    }
    return f.w;
}

// A plain copy whose destination runs are a small transpose of its source runs (SPACE_TO_DEPTH, DEPTH_TO_SPACE): each
// thread moves an R x V tile, axis X (R positions: p->dim[NDIM]) by axis Y (V positions: element strides in
// p->dim[NDIM + 1]); dims 0..NDIM-1: the tiles' index space (steps.py's group pass, count tiles). Loads: R runs of V
// (Y consecutive in the source) or one run of R*V (X consecutive, Y stride R); stores likewise; vector words where
// aligned.
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

// The shared-memory word of a transposed element: 4 bytes at least, so that
// a warp reading a tile's column (stride TILE + 1 words) touches 32 banks.
template <int B> struct odml_tword { typedef u32 t; };
template <> struct odml_tword<8> { typedef u64 t; };

// A plain copy that transposes: the destination's innermost dimension X (p->dim[NB]: size, source stride, destination
// stride 1) is not the source's, Y (p->dim[NB + 1]: size, source stride 1, destination stride): an NCHW view of an
// NHWC tensor made contiguous, the reverse, a 5-D permutation. Each block moves one TILE x TILE tile of (X, Y)
// through shared memory: TILE coalesced reads of TILE consecutive source elements along Y, then TILE coalesced writes
// along X, a thread's loads all in flight before the barrier. Dims 0..NB-1: the tiles' outer index space (p->count
// positions, any strides). Block b: tile column b % tx (X), tile row (b / tx) % ty (Y), outer position b / (tx * ty);
// partial tiles at the ends.
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
    // the block's tile and outer position in 32-bit arithmetic (grid and quotients below 2^31; a dimension of 2^32
    // and more takes the whole rest): 64-bit divisions cost more than a small tile's copy (32 MiB's 5-D permutation)
    const u32 tx = (u32)((nx + TILE - 1) / TILE), ty = (u32)((ny + TILE - 1) / TILE);
    u32 b = blockIdx.x;
    const u32 bx = b % tx;
    b /= tx;
    const u32 by = b % ty;
    u32 rest = b / ty;
    i64 so = p->src_offset, dof = p->dst_offset;
#pragma unroll
    for (int d = NB - 1; d >= 0; --d) {
        const odml_move_dim& q = p->dim[d];
        u32 c = rest;
        if (d > 0 && q.size < (i64)0xffffffffll) c = odml_split<u32>(rest, q);
        else if (d > 0) rest = 0;
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

// A 16-byte word of 16 / sizeof(T) copies of v.
template <typename T> __device__ __forceinline__ uint4 odml_splat(T v) {
    union {
        uint4 w;
        T t[16 / sizeof(T)];
    } f;
#pragma unroll
    for (int e = 0; e < 16 / (int)sizeof(T); ++e) f.t[e] = v;
    return f.w;
}

// A padding pass's row map (its innermost dimension q0, of W columns;
// move_padw, move_padr): the row's source columns are [L, L + n), all W
// (L 0) where the pass maps nothing there.
struct odml_rowmap {
    int W, mode, L, n;
    __device__ __forceinline__ explicit odml_rowmap(const odml_move_dim& q0)
        : W((int)q0.size), mode((int)q0.map_mode), L(mode ? (int)q0.map_shift : 0), n(mode ? (int)q0.map_size : W) {}
    // The source column of output column c through the map; -1: the fill.
    __device__ __forceinline__ int source(int c) const {
        const int i = c - L;
        return (u32)i >= (u32)n ? odml_map_outside(i, mode, n) : i;
    }
};

// A padding program as one pass over the output, one warp per output row (the innermost dimension, destination and
// source stride 1; p: the fused padding pass, dims 0..NDIM-2 the rows' index space with their maps, dim NDIM-1 the
// row with its map). The row's first elements up to a 16-byte boundary and its last ones are stored element by
// element; in between each lane stores aligned 16-byte words: one whose elements all come from the source row's
// interior is read as the one or two aligned 16-byte source words holding them, realigned with funnel shifts (one
// shift along the row); the others (borders, CONSTANT rows) element by element through the row's map.
// CONSTANT-outside rows are the fill word. (Two rows a warp, all loads first: slower on an H100, 0.39-0.40 ms against
// 0.27.)
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
            s = odml_map_outside(s, mode, (i64)n);
            if (s < 0) return fv;
        }
        return srow[s];
    };
    if (lane < head) drow[lane] = col(lane);
    if (tail + lane < W) drow[tail + lane] = col(tail + lane);
    // interior words: the source of column c is srow[c - L]; its byte
    // misalignment kb is the same for every aligned destination word
    const unsigned long long s0 = (unsigned long long)(srow + (head - L));
    const int kb = (int)(s0 & 15ull);
    const unsigned long long rlo = (unsigned long long)srow, rhi = (unsigned long long)(srow + n);
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
                const uint4 a0 = odml_ldg_in<T>(a, rlo, rhi);
                out[u] = odml_realign<sizeof(T)>(a0, kb ? odml_ldg_in<T>(a + 1, rlo, rhi) : a0, (u32)kb);
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
        const u32 c = odml_split<u32>(rest, q, d == 0);
        int s = (int)c;
        if (q.map_mode) {
            s -= (int)q.map_shift;
            if ((u32)s >= (u32)q.map_size) {
                s = odml_map_outside(s, (int)q.map_mode, (int)q.map_size);
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

// A padding program as one pass over the FLAT output (contiguous: the fused padding pass of move_pad with destination
// offset 0 and row-major destination strides; 32-bit indices, every size below 2^30), in aligned 16-byte output
// words: word k covers flat elements [k*V - m, k*V - m + V) (m: the output address's misalignment in elements), so
// every full word is one aligned 16-byte store whatever the row length. Each thread takes U words of a block of
// blockDim*U words (word (b*U + j)*blockDim.x + threadIdx.x of block b: coalesced stores) and issues all their loads
// before the first store: first every word whose V elements lie in one row and come from the source row's interior,
// as the one or two aligned 16-byte source words holding them (realigned after the loads), then the others (a row's
// borders, a word crossing into the next row, a fill row) element by element through the row's and the column's maps.
// The (at most two) partial words at the output's ends go element by element after the loads. MINB: resident blocks
// per multiprocessor (__launch_bounds__; on an H100 one word a thread, MINB 8, 32 registers, ran fastest:
// benchmarks/RESULTS.md). (Measured no faster, not kept: shuffled source words, a persistent grid, the L2::256B load
// hint, an affine one-period border map. move_padr is the default for rows of 256 bytes and more.)
template <typename T, int NDIM, int U, int MINB>
__global__ void __launch_bounds__(256, MINB) move_padw(const T* __restrict__ src, T* __restrict__ dst,
                                                       const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    constexpr int V = 16 / (int)sizeof(T);
    const odml_move_dim& q0 = p->dim[NDIM - 1];
    const u32 W = (u32)q0.size;
    const u32 count = (u32)p->count;
    const odml_rowmap rm(q0);
    const u32 m = (u32)(((unsigned long long)dst & 15ull) / sizeof(T));
    const u32 blk = blockIdx.x;
    union Word {
        uint4 w;
        T t[V];
    };
    Word A[U];
    uint4 B[U];
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
            const int s = (int)c - rm.L;
            state[j] = 1;
            if (so >= 0 && c + (u32)V <= W && s >= 0 && s + V <= rm.n) {
                const unsigned long long sp = (unsigned long long)(src + so + s);
                const uint4* a = reinterpret_cast<const uint4*>(sp & ~15ull);
                const u32 kb = (u32)(sp & 15ull);
                const unsigned long long rlo = (unsigned long long)(src + so), rhi = rlo + (u64)rm.n * sizeof(T);
                state[j] = 2u | (kb << 2);
                A[j].w = odml_ldg_in<T>(a, rlo, rhi);
                B[j] = kb ? odml_ldg_in<T>(a + 1, rlo, rhi) : A[j].w;
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
            const int i = rm.source((int)(nx ? ce - W : ce));
            off[e] = base < 0 || i < 0 ? (i64)-1 : base + i;
        }
#pragma unroll
        for (int e = 0; e < V; ++e) A[j].t[e] = off[e] < 0 ? fv : src[off[e]];
    }
#pragma unroll
    for (int j = 0; j < U; ++j) {
        const u32 start = ((blk * (u32)U + (u32)j) * blockDim.x + threadIdx.x) * (u32)V;
        if (state[j] >= 2u) {
            const uint4 o = odml_realign<sizeof(T)>(A[j].w, B[j], state[j] >> 2);
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
                    const int i = rm.source((int)(fe - re * W));
                    dst[fe] = so < 0 || i < 0 ? fv : src[so + i];
                }
            }
        }
    }
}

// A column of a padded row: the source element of column c through the
// row's map (srow: the source row; live: false in a fill row), the fill word
// where CONSTANT-outside or in a fill row.
template <typename T>
__device__ __forceinline__ T odml_padcol(const T* __restrict__ srow, bool live, int c, const odml_rowmap& rm, T fv) {
    if (!live) return fv;
    int i = c - rm.L;
    if ((u32)i >= (u32)rm.n) {
        i = odml_map_outside(i, rm.mode, rm.n);
        if (i < 0) return fv;
    }
    return srow[i];
}

// A padding program as one pass over the contiguous output (move_padw's conditions), one warp per output row r
// (columns 0..W-1, flat elements r*W..): the row's source offset once (odml_row_offset32, -1: a fill row), then (1)
// the aligned 16-byte output words of the row whose V elements all come from the source row's interior (for a fill
// row: all its aligned words), U words a lane a round, each realigned from the one or two aligned 16-byte source
// words holding it (the byte shift kb is the same all along the row): the second is the next lane's first (warp
// shuffles), loaded only for the round's last word of each lane that has no next one, and (2) the row's other columns
// (its borders and the partial words it shares with the rows beside it), one element a lane through the row's map,
// loaded with the first round. Every load of a round is issued before its stores. Few live registers (a row's state
// is a handful of words) so that many warps fit: the kernel waits on memory (H200, ncu: 56 registers, 4 blocks a
// multiprocessor, held it at 0.84-0.86 of copy bandwidth). MINB: resident blocks per multiprocessor
// (__launch_bounds__); FL & 4: element by element (below); FL & 2 (elements of 4 bytes and more): each interior word
// read as its V elements, coalesced across the warp, no realignment nor shuffles.
template <typename T, int NDIM, int U, int MINB, int FL>
__global__ void __launch_bounds__(256, MINB) move_padr(const T* __restrict__ src, T* __restrict__ dst,
                                                 const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    constexpr int V = 16 / (int)sizeof(T);
    const odml_rowmap rm(p->dim[NDIM - 1]);
    const int W = rm.W;
    const u32 r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= (u32)p->count / (u32)W) return;       // whole warps
    const int lane = (int)(threadIdx.x & 31u);
    const i64 so = odml_row_offset32<NDIM - 1>(p, r);
    const bool live = so >= 0;
    const T* __restrict__ srow = src + (live ? so : 0);
    T* __restrict__ drow = dst + (u64)r * (u64)W;
    if constexpr ((FL & 4) != 0) {
        // FL & 4: the row element by element, lane l moving columns l, l + 32, ..., 4U of them a round
        // (2U of 8 bytes), every load of a round before its stores (as the slice's strided_copy moves its
        // elements): no realignment nor shuffles, few registers (MINB 8 without spills)
        const T fv = (T)p->fill_bits;
        constexpr int K = (sizeof(T) >= 8 ? 2 : 4) * U;
        for (int c0 = lane; c0 < W; c0 += 32 * K) {
            T v[K];
#pragma unroll
            for (int k = 0; k < K; ++k)
                v[k] = c0 + 32 * k < W ? odml_padcol<T>(srow, live, c0 + 32 * k, rm, fv) : fv;
#pragma unroll
            for (int k = 0; k < K; ++k)
                if (c0 + 32 * k < W) drow[c0 + 32 * k] = v[k];
        }
        return;
    }
    // the aligned words: columns a0 + k*V; those of (1): [lo, lo + nvec*V)
    const int a0 = (int)((16u - (u32)((unsigned long long)drow & 15ull)) & 15u) / (int)sizeof(T);
    int lo = a0, lim = W;
    if (live) {
        if (rm.L > a0) lo = a0 + (rm.L - a0 + V - 1) / V * V;
        if (rm.L + rm.n < lim) lim = rm.L + rm.n;
    }
    const int nvec = lim > lo ? (lim - lo) / V : 0;
    const unsigned long long sb = (unsigned long long)(srow + (lo - rm.L));
    const u32 kb = (u32)(sb & 15ull);
    const uint4* __restrict__ sa = reinterpret_cast<const uint4*>(sb & ~15ull);
    const unsigned long long rlo = (unsigned long long)srow, rhi = (unsigned long long)(srow + rm.n);
    uint4* __restrict__ dw = reinterpret_cast<uint4*>(drow + lo);
    const T fv = (T)p->fill_bits;
    // (2): lane's first other column and its value
    const int left = nvec ? lo : 0, right = nvec ? lo + nvec * V : 0, E = left + W - right;
    const int ec = lane < left ? lane : right + lane - left;
    T ev = fv;
    for (int i0 = 0; i0 < nvec; i0 += 32 * U) {
        uint4 A[U];
        if constexpr ((FL & 2) && sizeof(T) >= 4) {  // V elements a word, no realignment
            const T* __restrict__ s0 = srow + (lo - rm.L) + (i0 + lane) * V;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                union {
                    uint4 w;
                    T t[V];
                } a;
                if (live && i0 + 32 * u + lane < nvec) {
#pragma unroll
                    for (int e = 0; e < V; ++e) a.t[e] = __ldg(s0 + 32 * u * V + e);
                }
                A[u] = a.w;
            }
            if (i0 == 0 && lane < E) ev = odml_padcol<T>(srow, live, ec, rm, fv);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int i = i0 + 32 * u + lane;
                if (i < nvec) {
                    const uint4 o = live ? A[u] : odml_splat(fv);
                    dw[i] = o;
                }
            }
        } else {
            uint4 X;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int i = i0 + 32 * u + lane;
                if (live && i < nvec) {
                    // a row's first word and the word after its last may pass the row's ends
                    A[u] = i ? __ldg(sa + i) : odml_ldg_in<T>(sa, rlo, rhi);
                    // the one word a lane loads twice: after its last word of the round
                    if (kb && (i + 1 == nvec || (u == U - 1 && lane == 31)))
                        X = i + 1 == nvec ? odml_ldg_in<T>(sa + i + 1, rlo, rhi) : __ldg(sa + i + 1);
                }
            }
            if (i0 == 0 && lane < E) ev = odml_padcol<T>(srow, live, ec, rm, fv);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int i = i0 + 32 * u + lane;
                uint4 o;
                if (live && kb) {                       // warp-uniform
                    uint4 nb;
                    nb.x = __shfl_down_sync(0xffffffffu, A[u].x, 1);
                    nb.y = __shfl_down_sync(0xffffffffu, A[u].y, 1);
                    nb.z = __shfl_down_sync(0xffffffffu, A[u].z, 1);
                    nb.w = __shfl_down_sync(0xffffffffu, A[u].w, 1);
                    if (u + 1 < U) {                    // lane 31: lane 0's word of the next u
                        const uint4 a1 = A[u + 1 < U ? u + 1 : u];
                        const uint4 n0 = make_uint4(
                            __shfl_sync(0xffffffffu, a1.x, 0), __shfl_sync(0xffffffffu, a1.y, 0),
                            __shfl_sync(0xffffffffu, a1.z, 0), __shfl_sync(0xffffffffu, a1.w, 0));
                        if (lane == 31) nb = n0;
                    }
                    o = odml_realign<sizeof(T)>(A[u], i + 1 < nvec && (lane < 31 || u + 1 < U) ? nb : X, kb);
                } else if (live) {
                    o = A[u];
                } else {
                    o = odml_splat(fv);
                }
                if (i < nvec) {
                    dw[i] = o;
                }
            }
        }
    }
    if (!nvec && lane < E) ev = odml_padcol<T>(srow, live, ec, rm, fv);
    if (lane < E) drow[ec] = ev;
    for (int j = lane + 32; j < E; j += 32) {
        const int c = j < left ? j : right + j - left;
        drow[c] = odml_padcol<T>(srow, live, c, rm, fv);
    }
}
