// opendml CUDA kernels of the move program's index-driven passes (plan.Gather,
// plan.Scatter), launched by index.py, compiled as kernels.cu and move.cu are.
//
// Every kernel takes one ix_params block BY VALUE (mirror: index.py's IndexParams, same field order, every field 8
// bytes), device addresses included. A pass walks its "outer" positions (the dimensions that read an index,
// row-major, decomposed from a flat number) and, at each, a block of "inner" words (the dimensions that read none,
// the embedding's row); data offsets and strides count words of W (the element, or a 2-16 byte run of elements where
// the host widened the block). Each IndexAxis value becomes a coordinate inside [0, bound) exactly as
// runtime/cpu/indexed/index.c does (ix_coordinate_of), so no index value can move an access outside what the host
// checked against the bound ranges. A checked axis (the array API's index check: ix_axis.flag) sets its flag for each
// value outside its dimension (reversal lengths are never checked): native/cuda_launch.c describes the flags,
// ix_finish the end of a checked call.
//
//   ix_gather<W, I, ...>: dst block = src block at the indexed offset (or 0 where last_only and a later position
//     reads it); ix_gather_positions<W, I, NO, NA, ITEMS>: an element-wise gather, ITEMS positions a thread;
//   ix_gather_row<W, I, NO, STAGE>: an element-wise gather a block a row (gather_elements along rows), the source
//     row staged in shared memory (STAGE) or read in place;
//   ix_reverse_tile<W, I, NO>: a reversal of subsequences by columns (whole lines) staged in shared memory;
//   ix_reverse_pieces<W, I, NO>: along short rows (a length a row) of whole 16-byte pieces, in place;
//   ix_reverse_rows<W, I, NO>: along other rows, a block several rows staged in shared memory;
//   ix_scatter<W, I, OWN, ...>: src block written at the indexed offset (OWN: only by the position owning its
//     destination block); ix_scatter_group<W, I, NO>: a block a group of positions sharing one destination
//     segment, owners in shared memory, then writes;
//   ix_owner<I, ...>: each destination block's owner, the last position reaching it (atomicMax: any order);
//   ix_keys<I, K, ...>: each position's keyed block (destination, or the source for last_only) as a slot number,
//     K max where skipped, which the host sorts stably (CuPy's argsort);
//   ix_apply<W, I, K, ACC, ...>: a thread a run of equal sorted keys and inner words: the run's last position
//     written, or (ACC) every one added in the positions' row-major order, as the CPU kernel adds them (a word
//     of several elements: each on its own).
// The trailing template arguments are exact counts, so every loop over them unrolls: NO outer dimensions, NA index
// axes, NI inner dimensions, ITEMS inner words a thread (words g, g + groups, ...: neighbouring threads take
// neighbouring words), all loaded before the first store. No kernel's result depends on the order threads run in.
// Additions follow the CPU backend on x86 bit for bit: float16 adds in float32 and rounds each sum (NumPy's
// rounding), float32 and float64 round to nearest with subnormals kept (PTX add.rn without .ftz: CuPy appends
// -ftz=true to NVRTC compiles), a NaN sum is the first NaN operand quieted (x86's rule), integers wrap.

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

#define IX_RANK 16
#define IX_AXES 8
#define IX_THREADS 256
#define IX_BATCH 4                           // loads a thread issues before using the first (shared-memory kernels)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#define IX_PARAMS const ix_params p
#else
#define IX_PARAMS const __grid_constant__ ix_params p   // read in place, never copied to local memory
#endif

struct ix_axis {
    i64 type, offset, stride, bound, mode, skip, axis;
    u64 flag;                               // checked: the 4-byte flag an out-of-range value sets to 1; 0 unchecked
    i64 strides[IX_RANK];                   // per outer dimension
};

struct ix_params {
    i64 outer, inner;                       // ranks
    i64 n_outer, n_inner, total;            // positions, inner words a position, threads
    i64 groups;                             // threads a position (ITEMS inner words each)
    i64 src_offset, dst_offset;             // words
    i64 sizes[IX_RANK], src_strides[IX_RANK], dst_strides[IX_RANK];        // outer dims
    i64 isizes[IX_RANK], isrc_strides[IX_RANK], idst_strides[IX_RANK];     // inner dims
    i64 naxes, data_type, has_value, value_bits, last_only;
    i64 key_base, key_div;                  // slot = (offset - key_base) / key_div
    i64 members;                            // ix_scatter_group: positions a group (a block)
    ix_axis axes[IX_AXES];
    u64 src, dst, keys, order, aux;
    u64 idx[IX_AXES];
    u64 done, count;                        // a checked call's last checked launch (else 0): ix_finish
};

// DML_TENSOR_DATA_TYPE values
enum { T_F32 = 1, T_F16 = 2, T_U32 = 3, T_I32 = 6, T_F64 = 9, T_U64 = 10, T_I64 = 11 };

// A checked axis's flag set (the store fenced before this block counts itself in ix_finish).
__device__ __forceinline__ void ix_flag_set(u64 flag) {
    *(volatile u32*)flag = 1;
    __threadfence_system();
}

// Index value `at` of an axis's array as 64 bits (a signed type's sign-extended).
__device__ __forceinline__ u64 ix_load(const ix_axis& ax, u64 base, i64 at) {
    switch (ax.type) {
    case T_I32: return (u64)(i64)((const int*)base)[at];
    case T_I64: return (u64)((const i64*)base)[at];
    case T_U32: return ((const u32*)base)[at];
    default: return ((const u64*)base)[at];
    }
}

// The coordinate c of index value v (ix_load's) at element e of its axis: false where an INDEX_SKIP position is
// dropped. (Loading all ITEMS positions' values of an element-wise gather before their checks was slower on an H200:
// 5.6 us a call against 4.8 on never-seen (1, C, H, W) shapes, 0.150 ms against 0.136 on (64, 512, 512), 54
// registers against 32.)
__device__ __forceinline__ bool ix_coordinate_of(const ix_axis& ax, u64 v, i64 e, i64& c) {
    const i64 bound = ax.bound;
    const bool sgn = ax.type == T_I32 || ax.type == T_I64;
    if (ax.mode == 1) {                     // INDEX_REVERSE_LENGTH
        const i64 sv = (i64)v;
        const i64 len = sgn ? (sv < 0 ? 0 : (sv > bound ? bound : sv)) : (v > (u64)bound ? bound : sv);
        c = e < len ? len - 1 - e : e;
        return true;
    }
    if (sgn) {
        i64 sv = (i64)v;
        if (sv < 0) sv += bound;            // sv >= INT64_MIN, bound > 0: no overflow
        if (sv < 0 || sv >= bound) {
            if (ax.flag) ix_flag_set(ax.flag);   // a checked axis: the host reads it after the launch
            c = 0;
            if (ax.skip) return false;
            sv = sv < 0 ? 0 : bound - 1;
        }
        c = sv;
    } else {
        if (v >= (u64)bound) {
            if (ax.flag) ix_flag_set(ax.flag);
            c = 0;
            if (ax.skip) return false;
            v = (u64)bound - 1;
        }
        c = (i64)v;
    }
    return true;
}

// An INDEX_REVERSE_LENGTH value as ix_coordinate_of clamps it: in [0, bound]. Apart from ix_load so that a caller
// issues a length's load, then other loads, and waits at the clamp once for all.
__device__ __forceinline__ int ix_clamp_length(const ix_axis& ax, u64 v) {
    if ((ax.type == T_I32 || ax.type == T_I64) && (i64)v < 0) return 0;
    return v > (u64)ax.bound ? (int)ax.bound : (int)v;
}
__device__ __forceinline__ int ix_length(const ix_axis& ax, u64 base, i64 at) {
    return ix_clamp_length(ax, ix_load(ax, base, at));
}

// I ck: the coordinate of flat number r along dimension k of `sizes`, r
// becoming the number over the dimensions outside it; the outermost (k == 0)
// takes it whole (a macro: the same PTX as the loops written out).
#define IX_DIGIT(ck, r, sizes, k)     \
    I ck;                             \
    if (k == 0) {                     \
        ck = r;                       \
    } else {                          \
        const I n_ = (I)(sizes)[k];   \
        const I q_ = r / n_;          \
        ck = r - q_ * n_;             \
        r = q_;                       \
    }

// The end of a checked call's last checked launch (p.done: a zeroed 4-byte word in host-mapped memory;
// p.count: a 32-bit device counter at 0): each block counts itself once its threads are done (flag stores
// fenced first, ix_coordinate_of); the last resets the counter and sets the word, which the host waits for
// instead of the stream (the kernel's completion reaches the host later). Every thread of the grid reaches
// it. A no-op where p.done is 0 (unchecked calls, the Python route's launches).
__device__ __forceinline__ void ix_finish(const ix_params& p) {
    if (!p.done) return;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd((u32*)p.count, 1u) == gridDim.x - 1) {
            atomicExch((u32*)p.count, 0u);
            __threadfence_system();
            *(volatile u32*)p.done = 1;
        }
    }
}

// Outer position o's source and destination word offsets before its index coordinates, and (INDEXED) each index
// axis's value offset at[a] and coordinate e[a] along its own axis (NO outer dimensions, NA axes).
template <typename I, bool INDEXED, int NO, int NA>
__device__ __forceinline__ void ix_offsets(const ix_params& p, I o, i64& so, i64& dd, i64* at, i64* e) {
    so = p.src_offset;
    dd = p.dst_offset;
#pragma unroll
    for (int a = 0; a < NA; a++) {
        at[a] = p.axes[a].offset;
        e[a] = 0;
    }
    I r = o;
#pragma unroll
    for (int k = NO - 1; k >= 0; --k) {
        IX_DIGIT(ck, r, p.sizes, k);
        so += (i64)ck * p.src_strides[k];
        dd += (i64)ck * p.dst_strides[k];
        if (INDEXED) {
#pragma unroll
            for (int a = 0; a < NA; a++) {
                at[a] += (i64)ck * p.axes[a].strides[k];
                if (p.axes[a].axis == k) e[a] = (i64)ck;
            }
        }
    }
}

// The index axes' coordinates of values v (at elements e) added to the source
// (GATHER) or destination offset: false where a coordinate drops the position.
template <bool GATHER, int NA>
__device__ __forceinline__ bool ix_indexed(const ix_params& p, const u64* v, const i64* e, i64& so, i64& dd) {
#pragma unroll
    for (int a = 0; a < NA; a++) {
        i64 c;
        const bool keep = ix_coordinate_of(p.axes[a], v[a], e[a], c);
        if (GATHER) {
            so += c * p.axes[a].stride;
        } else {
            if (!keep) return false;
            dd += c * p.axes[a].stride;
        }
    }
    return true;
}

// Source and destination word offsets of outer position o (INDEXED: index coordinates added to the source where
// GATHER, else the destination); false where an INDEX_SKIP coordinate drops the position (a gather clamps instead).
template <typename I, bool INDEXED, bool GATHER, int NO, int NA>
__device__ __forceinline__ bool ix_outer(const ix_params& p, I o, i64& so, i64& dd) {
    i64 at[NA > 0 ? NA : 1], e[NA > 0 ? NA : 1];
    ix_offsets<I, INDEXED, NO, NA>(p, o, so, dd, at, e);
    if (INDEXED) {
        u64 v[NA > 0 ? NA : 1];
#pragma unroll
        for (int a = 0; a < NA; a++) v[a] = ix_load(p.axes[a], p.idx[a], at[a]);
        return ix_indexed<GATHER, NA>(p, v, e, so, dd);
    }
    return true;
}

// Inner word r's offsets from its block's origin (NI inner dimensions).
template <typename I, int NI>
__device__ __forceinline__ void ix_inner(const ix_params& p, I r, i64& si, i64& di) {
    si = 0;
    di = 0;
#pragma unroll
    for (int k = NI - 1; k >= 0; --k) {
        IX_DIGIT(ck, r, p.isizes, k);
        si += (i64)ck * p.isrc_strides[k];
        di += (i64)ck * p.idst_strides[k];
    }
}

// This thread's position o (or sorted run member) and first inner word g:
// it takes words g, g + groups, ..., g + (ITEMS - 1) * groups below n_inner.
template <typename I>
__device__ __forceinline__ bool ix_split(const ix_params& p, I& o, I& g) {
    const I t = (I)blockIdx.x * (I)IX_THREADS + (I)threadIdx.x;
    if (t >= (I)p.total) return false;
    if (p.groups == 1) {
        o = t;
        g = 0;
    } else {
        const I n = (I)p.groups;
        o = t / n;
        g = t - o * n;
    }
    return true;
}

template <typename W>
__device__ __forceinline__ W ix_value(const ix_params& p) {
    return *reinterpret_cast<const W*>(&p.value_bits);   // (never 16-byte words: the host widens no constant)
}

// The ITEMS inner words g, g + groups, ... (below n_inner) of this position's
// block: VALUE (of si, the word's source offset from so) written at dd + di,
// every load before the first store (a macro, as IX_DIGIT).
#define IX_BLOCK(VALUE)                                           \
    W v[ITEMS];                                                   \
    i64 at[ITEMS];                                                \
    _Pragma("unroll")                                             \
    for (int u = 0; u < ITEMS; u++) {                             \
        const I j = g + (I)u * (I)p.groups;                       \
        at[u] = -1;                                               \
        if (ITEMS == 1 || j < (I)p.n_inner) {                     \
            i64 si, di;                                           \
            ix_inner<I, NI>(p, j, si, di);                        \
            v[u] = VALUE;                                         \
            at[u] = dd + di;                                      \
        }                                                         \
    }                                                             \
    _Pragma("unroll")                                             \
    for (int u = 0; u < ITEMS; u++)                               \
        if (ITEMS == 1 || at[u] >= 0) ((W*)p.dst)[at[u]] = v[u]

template <typename W, typename I, int NO, int NA, int NI, int ITEMS>
__device__ __forceinline__ void ix_gather_body(const ix_params& p) {
    I o, g;
    if (!ix_split<I>(p, o, g)) return;
    i64 so, dd;
    ix_outer<I, true, true, NO, NA>(p, o, so, dd);
    const bool zero = p.last_only && !((const u8*)p.aux)[o];
    IX_BLOCK(zero ? W() : ((const W*)p.src)[so + si]);
}
template <typename W, typename I, int NO, int NA, int NI, int ITEMS>
__global__ void __launch_bounds__(IX_THREADS) ix_gather(IX_PARAMS) {   // the body, then ix_finish
    ix_gather_body<W, I, NO, NA, NI, ITEMS>(p);
    ix_finish(p);
}

// An element-wise gather (one word a position): ITEMS positions a thread,
// t, t + total, ... (neighbouring threads take neighbouring positions), every
// index and source load before the first store.
template <typename W, typename I, int NO, int NA, int ITEMS>
__device__ __forceinline__ void ix_gather_positions_body(const ix_params& p) {
    const I t = (I)blockIdx.x * (I)IX_THREADS + (I)threadIdx.x;
    if (t >= (I)p.total) return;
    W v[ITEMS];
    i64 at[ITEMS];
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
        const I o = t + (I)u * (I)p.total;
        at[u] = -1;
        if (o < (I)p.n_outer) {
            i64 so, dd;
            ix_outer<I, true, true, NO, NA>(p, o, so, dd);
            v[u] = ((const W*)p.src)[so];
            at[u] = dd;
        }
    }
#pragma unroll
    for (int u = 0; u < ITEMS; u++)
        if (at[u] >= 0) ((W*)p.dst)[at[u]] = v[u];
}
template <typename W, typename I, int NO, int NA, int ITEMS>
__global__ void __launch_bounds__(IX_THREADS) ix_gather_positions(IX_PARAMS) {   // the body, then ix_finish
    ix_gather_positions_body<W, I, NO, NA, ITEMS>(p);
    ix_finish(p);
}

// Source, destination and first index axis offsets of combination r of the
// leading dimensions 0..K (row-major; a block's: blockIdx.x).
template <typename I, int K>
__device__ __forceinline__ void ix_lead(const ix_params& p, I r, i64& sb, i64& db, i64& ab) {
    sb = p.src_offset;
    db = p.dst_offset;
    ab = p.axes[0].offset;
#pragma unroll
    for (int k = K; k >= 0; --k) {
        IX_DIGIT(ck, r, p.sizes, k);
        sb += (i64)ck * p.src_strides[k];
        db += (i64)ck * p.dst_strides[k];
        ab += (i64)ck * p.axes[0].strides[k];
    }
}

// An element-wise gather along a row (index.py's _row: one clamping index axis, the last outer dimension of source
// stride 0, e.g. gather_elements along the last axis): one block a row (the leading dimensions decoded once from
// blockIdx.x); STAGE: the source row's `bound` words first copied to shared memory by coalesced loads, so each
// position reads shared memory, not a scattered global sector. IX_TILE_BATCH positions a thread in flight (index
// loads, then reads, then stores).
#define IX_TILE_BATCH 8
template <typename W, typename I, int NO, int STAGE>
__device__ __forceinline__ void ix_gather_row_body(const ix_params& p) {
    extern __shared__ uint4 ix_row_raw[];
    W* row = reinterpret_cast<W*>(ix_row_raw);
    const ix_axis& ax = p.axes[0];
    i64 sb, db, ab;                          // the row: the leading dimensions
    ix_lead<I, NO - 2>(p, (I)blockIdx.x, sb, db, ab);
    const W* src = (const W*)p.src + sb;
    const I n = (I)p.sizes[NO - 1], bound = (I)ax.bound;
    if (STAGE) {
        I c_from = 0;                        // the words below it copied asynchronously
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        if (ax.stride == 1 && (u64)src % 16 == 0) {   // the whole row in flight: 16-byte cp.async pieces
            const I pieces = bound * (I)sizeof(W) / 16;
            u32 s0;
            asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(s0) : "l"(row));
            for (I h = threadIdx.x; h < pieces; h += IX_THREADS)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s0 + (u32)h * 16u),
                             "l"((u64)src + (u64)h * 16u) : "memory");
            c_from = pieces * 16 / (I)sizeof(W);
        }
#endif
        for (I c0 = c_from + threadIdx.x; c0 < bound; c0 += IX_TILE_BATCH * IX_THREADS) {
            W v[IX_TILE_BATCH];
#pragma unroll
            for (int u = 0; u < IX_TILE_BATCH; u++)
                if (c0 + u * IX_THREADS < bound) v[u] = src[(i64)(c0 + u * IX_THREADS) * ax.stride];
#pragma unroll
            for (int u = 0; u < IX_TILE_BATCH; u++)
                if (c0 + u * IX_THREADS < bound) row[c0 + u * IX_THREADS] = v[u];
        }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm volatile("cp.async.wait_all;" ::: "memory");
#endif
        __syncthreads();
    }
    W* dst = (W*)p.dst + db;
    const i64 xs = ax.strides[NO - 1], ds = p.dst_strides[NO - 1];
    for (I j0 = threadIdx.x; j0 < n; j0 += IX_TILE_BATCH * IX_THREADS) {
        i64 c[IX_TILE_BATCH];
#pragma unroll
        for (int u = 0; u < IX_TILE_BATCH; u++) {
            c[u] = 0;
            if (j0 + u * IX_THREADS < n)
                ix_coordinate_of(ax, ix_load(ax, p.idx[0], ab + (i64)(j0 + u * IX_THREADS) * xs), 0, c[u]);
        }
        W v[IX_TILE_BATCH];
#pragma unroll
        for (int u = 0; u < IX_TILE_BATCH; u++)   // c in [0, bound): inside the row
            if (j0 + u * IX_THREADS < n) v[u] = STAGE ? row[c[u]] : src[c[u] * ax.stride];
#pragma unroll
        for (int u = 0; u < IX_TILE_BATCH; u++)
            if (j0 + u * IX_THREADS < n) dst[(i64)(j0 + u * IX_THREADS) * ds] = v[u];
    }
}
template <typename W, typename I, int NO, int STAGE>
__global__ void __launch_bounds__(IX_THREADS) ix_gather_row(IX_PARAMS) {   // the body, then ix_finish
    ix_gather_row_body<W, I, NO, STAGE>(p);
    ix_finish(p);
}

// An element-wise reversal of subsequences walked as columns (index.py's _column_walk: outer dimensions (...,
// reversed axis, lo columns), the reversed axis of source stride 0, size `bound` and length stride 0, lo dividing
// IX_THREADS, lo words up to 128 bytes: whole cache lines): a column set (bound rows of lo words) is staged in shared
// memory by coalesced loads, then each thread, keeping one column and its length (read and clamped once), writes its
// rows in order, each from its reversed row.
//
// ix_stage_columns: the column set at source offset sb into `tile`, as cp.async 16-byte copies (one commit group: the
// caller waits) where rows are whole aligned 16-byte pieces, else plain loads (the caller's __syncthreads publishes
// them).
template <typename W, typename I, int NO>
__device__ __forceinline__ void ix_stage_columns(const ix_params& p, W* tile, i64 sb) {
    const ix_axis& ax = p.axes[0];
    const int lo = (int)p.sizes[NO - 1], rows = (int)ax.bound;   // lo divides IX_THREADS; rows * lo words fit
    const int kk = (int)threadIdx.x % lo, step = IX_THREADS / lo;
    const i64 ss = ax.stride;
    const int chunks = lo * (int)sizeof(W) / 16;                     // 16-byte pieces of a staged row
    const u64 base = (u64)((const W*)p.src + sb);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (chunks >= 1 && p.src_strides[NO - 1] == 1 && base % 16 == 0 && (ss * (i64)sizeof(W)) % 16 == 0) {
        const int h = (int)threadIdx.x % chunks, cstep = IX_THREADS / chunks;   // chunks divides lo, lo divides IX_THREADS
        u32 s0;
        asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(s0) : "l"(tile));
        for (int c = (int)threadIdx.x / chunks; c < rows; c += cstep)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::
                         "r"(s0 + (u32)(c * lo * (int)sizeof(W) + h * 16)),
                         "l"(base + (u64)((i64)c * ss * (i64)sizeof(W)) + (u64)(h * 16)) : "memory");
        asm volatile("cp.async.commit_group;" ::: "memory");
        return;
    }
    asm volatile("cp.async.commit_group;" ::: "memory");   // (an empty group: waits count alike)
#endif
    const W* src = (const W*)p.src + sb + kk * p.src_strides[NO - 1];
    for (int c0 = (int)threadIdx.x / lo; c0 < rows; c0 += 2 * IX_TILE_BATCH * step) {
        W v[2 * IX_TILE_BATCH];              // the loads in flight before the first store
#pragma unroll
        for (int u = 0; u < 2 * IX_TILE_BATCH; u++)
            if (c0 + u * step < rows) v[u] = src[(i64)(c0 + u * step) * ss];
#pragma unroll
        for (int u = 0; u < 2 * IX_TILE_BATCH; u++)
            if (c0 + u * step < rows) tile[(c0 + u * step) * lo + kk] = v[u];
    }
}

// The staged column set's rows written at destination offset db, n the
// length of this thread's column (ix_reverse_tile's column_lengths).
template <typename W, typename I, int NO>
__device__ __forceinline__ void ix_write_columns(const ix_params& p, const W* tile, i64 db, int n) {
    const ix_axis& ax = p.axes[0];
    const int lo = (int)p.sizes[NO - 1], rows = (int)ax.bound;
    const int kk = (int)threadIdx.x % lo, step = IX_THREADS / lo;   // a thread keeps one column
    W* dst = (W*)p.dst + db + kk * p.dst_strides[NO - 1];
    const i64 ds = p.dst_strides[NO - 2];
    for (int e0 = (int)threadIdx.x / lo; e0 < rows; e0 += IX_TILE_BATCH * step) {
        W v[IX_TILE_BATCH];
#pragma unroll
        for (int u = 0; u < IX_TILE_BATCH; u++) {
            const int e = e0 + u * step;
            if (e < rows) v[u] = tile[(e < n ? n - 1 - e : e) * lo + kk];   // n <= rows: inside the tile
        }
#pragma unroll
        for (int u = 0; u < IX_TILE_BATCH; u++)
            if (e0 + u * step < rows) dst[(i64)(e0 + u * step) * ds] = v[u];
    }
}

// The same for 4-byte words where lo is a multiple of 32 and the destination's columns are contiguous and 8-byte
// aligned: a thread two neighbouring columns and 8-byte stores (a warp's store covers 256 bytes of a row, or two
// 128-byte rows), the staged words read even-first or odd-first by half-warp (no bank conflicts). H200, (512, 256,
// 512) float32 reversed along axis 1 (256-byte lines), of copy: 8-byte stores 0.94-0.95, 4-byte 0.92, 16-byte 0.86;
// along axis 0 (128-byte lines) all 0.82.
template <typename W, typename I, int NO>
__device__ __forceinline__ void ix_write_pairs(const ix_params& p, const W* tile, i64 db, int n0, int n1) {
    const ix_axis& ax = p.axes[0];
    const int lo = (int)p.sizes[NO - 1], rows = (int)ax.bound;
    const int q = (int)threadIdx.x % (lo / 2), step = 2 * IX_THREADS / lo, k = ((int)threadIdx.x >> 4) & 1;
    const int na = k ? n1 : n0, nb = k ? n0 : n1;            // column 2q + k read first, then the other
    const u32* ta = (const u32*)tile + 2 * q + k;
    const u32* tb = (const u32*)tile + 2 * q + (k ^ 1);
    uint2* dst = (uint2*)((W*)p.dst + db + 2 * q);
    const i64 ds = p.dst_strides[NO - 2] / 2;
    for (int e0 = (int)threadIdx.x / (lo / 2); e0 < rows; e0 += IX_TILE_BATCH * step) {
        u32 a[IX_TILE_BATCH], b[IX_TILE_BATCH];
#pragma unroll
        for (int u = 0; u < IX_TILE_BATCH; u++) {
            const int e = e0 + u * step;
            if (e < rows) {
                a[u] = ta[(e < na ? na - 1 - e : e) * lo];    // na, nb <= rows: inside the tile
                b[u] = tb[(e < nb ? nb - 1 - e : e) * lo];
            }
        }
#pragma unroll
        for (int u = 0; u < IX_TILE_BATCH; u++)
            if (e0 + u * step < rows) dst[(i64)(e0 + u * step) * ds] = k ? make_uint2(b[u], a[u]) : make_uint2(a[u], b[u]);
    }
}

// One block a column set (blockIdx.x over the leading dimensions), the whole set's copies in flight at once, then one
// wait. IX_TILE_BLOCKS: the blocks a multiprocessor holds with 64 KiB tiles (128-byte lines, 512 rows), capping
// registers at 65536 / (3 x 256): unbounded, the kernel took 96 and ran two blocks (H200, (512, 256, 512) float32
// along axis 0: 0.72-0.735 of copy, against 0.79).
#define IX_TILE_BLOCKS 3
template <typename W, typename I, int NO>
__global__ void __launch_bounds__(IX_THREADS, IX_TILE_BLOCKS) ix_reverse_tile(IX_PARAMS) {
    extern __shared__ uint4 ix_tile_raw[];
    W* tile = reinterpret_cast<W*>(ix_tile_raw);
    i64 sb, db, ab;                          // the set: the leading dimensions
    ix_lead<I, NO - 3>(p, (I)blockIdx.x, sb, db, ab);
    const ix_axis& ax = p.axes[0];
    const int lo = (int)p.sizes[NO - 1];
    const bool pairs = sizeof(W) == 4 && lo % 32 == 0 && p.dst_strides[NO - 1] == 1 && p.dst_strides[NO - 2] % 2 == 0 &&
                       (u64)((const W*)p.dst + db) % 8 == 0;
    // this thread's columns' lengths loaded while the set is staged (pairs: columns 2q and 2q + 1, else column kk)
    const i64 at = ab + (pairs ? 2 * ((int)threadIdx.x % (lo / 2)) : (int)threadIdx.x % lo) * ax.strides[NO - 1];
    const u64 b0 = ix_load(ax, p.idx[0], at), b1 = pairs ? ix_load(ax, p.idx[0], at + ax.strides[NO - 1]) : 0;
    ix_stage_columns<W, I, NO>(p, tile, sb);
    const int n0 = ix_clamp_length(ax, b0), n1 = ix_clamp_length(ax, b1);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
    __syncthreads();
    if (pairs)
        ix_write_pairs<W, I, NO>(p, tile, db, n0, n1);
    else
        ix_write_columns<W, I, NO>(p, tile, db, n0);
}

// An element-wise reversal of subsequences along the last outer dimension (a length a row: index.py's _rows): one
// block `members` consecutive rows of `bound` words, staged in shared memory as ix_stage_columns stages, each row's
// offsets and length (read and clamped once) in shared memory; then the threads walk the block's words in order
// (coalesced stores), each read from its reversed word of the staged row: a thread a 16-byte piece (ix_write_pieces)
// for words of 4 or 8 bytes in rows of whole 16-byte pieces written contiguously at 16-byte boundaries, else a thread
// a word.
#define IX_ROWS 64
// IX_ROWS_BLOCKS: the blocks a multiprocessor holds with REVERSE_ROWS (32 KiB) staged, capping registers (unbounded,
// 4-byte words' pieces took 44: 5 blocks). 8-byte words: 5 blocks, 48 registers (6 would spill).
#define IX_ROWS_BLOCKS 6

// The 16-byte piece of words lo + V - 1, ..., lo (descending; V words a piece, lo = a x V + s) from the staged
// pieces A = a and B = a + 1 (B read only where s > 0): result word m is word s + V - 1 - m of A:B.
template <typename W>
__device__ __forceinline__ uint4 ix_reversed_piece(const uint4& A, const uint4& B, int s) {
    constexpr int V = 16 / (int)sizeof(W);
    union { uint4 q[2]; W w[2 * V]; } c;
    union { uint4 q; W w[V]; } o;
    c.q[0] = A;
    c.q[1] = B;
#pragma unroll
    for (int t = 0; t < V; t++)              // (s uniform along a row: predicated moves, no local memory)
        if (s == t) {
#pragma unroll
            for (int m = 0; m < V; m++) o.w[m] = c.w[t + V - 1 - m];
        }
    return o.q;
}

// The staged rows (each Lp words, L = bound words of whole 16-byte pieces, r_n[r] its length in [0, L]) written as
// 16-byte pieces at p.dst + r_db[r] (16-byte aligned), two pieces a thread in flight: a piece at or past the length
// is the row's own; one wholly below it, from the two staged pieces holding its reversed words; one across it, word
// by word.
template <typename W>
__device__ __forceinline__ void ix_write_pieces(const ix_params& p, const W* rowbuf, const i64* r_db,
                                                const int* r_n, int g, int L, int Lp) {
    constexpr int V = 16 / (int)sizeof(W);
    const int Q = L / V, rq = Lp / V;
    const uint4* b4 = reinterpret_cast<const uint4*>(rowbuf);
    for (int f0 = threadIdx.x; f0 < g * Q; f0 += 2 * IX_THREADS) {
        uint4 v[2];
        i64 at[2];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int f = f0 + u * IX_THREADS;
            at[u] = -1;
            if (f < g * Q) {
                const int r = f / Q, q = f - r * Q, j = q * V, n = r_n[r];
                const uint4* row = b4 + r * rq;
                if (j >= n) {
                    v[u] = row[q];
                } else if (j + V <= n) {     // words n-1-j down to n-V-j, inside [0, L)
                    const int lo = n - V - j, a = lo / V, s = lo - a * V;
                    const uint4 A = row[a];
                    v[u] = ix_reversed_piece<W>(A, s ? row[a + 1] : A, s);
                } else {
                    union { uint4 q; W w[V]; } o;
#pragma unroll
                    for (int k = 0; k < V; k++) o.w[k] = rowbuf[r * Lp + (j + k < n ? n - 1 - j - k : j + k)];
                    v[u] = o.q;
                }
                at[u] = r_db[r] + j;
            }
        }
#pragma unroll
        for (int u = 0; u < 2; u++)
            if (at[u] >= 0) *reinterpret_cast<uint4*>((W*)p.dst + at[u]) = v[u];
    }
}
template <typename W, typename I, int NO>
__global__ void __launch_bounds__(IX_THREADS, sizeof(W) == 8 ? 5 : IX_ROWS_BLOCKS) ix_reverse_rows(IX_PARAMS) {
    extern __shared__ uint4 ix_rows_raw[];
    W* rowbuf = reinterpret_cast<W*>(ix_rows_raw);
    __shared__ i64 r_sb[IX_ROWS], r_db[IX_ROWS];
    __shared__ int r_n[IX_ROWS];
    const ix_axis& ax = p.axes[0];
    const int L = (int)ax.bound, Lp = (int)((L * (i64)sizeof(W) + 15) / 16 * 16 / (i64)sizeof(W));
    const I nrows = (I)(p.n_outer / L), first = (I)blockIdx.x * (I)p.members;
    const int g = (int)(nrows - first < (I)p.members ? nrows - first : (I)p.members);   // rows of this block
    bool aligned = true, dst_aligned = true;
    u64 length = 0;                          // this thread's row's length: loaded here, clamped into r_n once the
    if ((int)threadIdx.x < g) {              // rows' loads are issued
        i64 sb, db, ab;
        ix_lead<I, NO - 2>(p, first + (I)threadIdx.x, sb, db, ab);
        length = ix_load(ax, p.idx[0], ab);
        r_sb[threadIdx.x] = sb;
        r_db[threadIdx.x] = db;
        aligned = ((u64)((const W*)p.src + sb)) % 16 == 0;
        dst_aligned = ((u64)((W*)p.dst + db)) % 16 == 0;
    }
    bool whole = __syncthreads_and(aligned) && ax.stride == 1 && (L * (int)sizeof(W)) % 16 == 0;
    const bool pieces = __syncthreads_and(dst_aligned) && (sizeof(W) == 4 || sizeof(W) == 8) &&
                        p.dst_strides[NO - 1] == 1 && (L * (int)sizeof(W)) % 16 == 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (whole) {                             // every row in flight at once
        const int pieces = L * (int)sizeof(W) / 16, rp = Lp * (int)sizeof(W) / 16;
        u32 s0;
        asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(s0) : "l"(rowbuf));
        for (int h = threadIdx.x; h < g * pieces; h += IX_THREADS) {
            const int r = h / pieces, c = h - r * pieces;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s0 + (u32)((r * rp + c) * 16)),
                         "l"((u64)((const W*)p.src + r_sb[r]) + (u64)c * 16u) : "memory");
        }
        asm volatile("cp.async.wait_all;" ::: "memory");
    }
#else
    whole = false;
#endif
    if (!whole) {
        for (int f0 = threadIdx.x; f0 < g * L; f0 += IX_TILE_BATCH * IX_THREADS) {
            W v[IX_TILE_BATCH];
            int at[IX_TILE_BATCH];
#pragma unroll
            for (int u = 0; u < IX_TILE_BATCH; u++) {
                const int f = f0 + u * IX_THREADS, r = f / L, j = f - r * L;
                at[u] = -1;
                if (f < g * L) {
                    v[u] = ((const W*)p.src)[r_sb[r] + (i64)j * ax.stride];
                    at[u] = r * Lp + j;
                }
            }
#pragma unroll
            for (int u = 0; u < IX_TILE_BATCH; u++)
                if (at[u] >= 0) rowbuf[at[u]] = v[u];
        }
    }
    if ((int)threadIdx.x < g) r_n[threadIdx.x] = ix_clamp_length(ax, length);   // in [0, L]
    __syncthreads();
    if constexpr (sizeof(W) == 4 || sizeof(W) == 8) {
        if (pieces) {                        // (on an H200, 512 float32 a row: 0.86-0.89 of copy a word a thread, 0.92 so)
            ix_write_pieces<W>(p, rowbuf, r_db, r_n, g, L, Lp);
            return;
        }
    }
    const i64 ds = p.dst_strides[NO - 1];
    int r = (int)threadIdx.x / L, j = (int)threadIdx.x - r * L;   // word f = r * L + j, f += IX_THREADS
    while (r < g) {
        W v[IX_TILE_BATCH];
        i64 at[IX_TILE_BATCH];
#pragma unroll
        for (int u = 0; u < IX_TILE_BATCH; u++) {
            at[u] = -1;
            if (r < g) {
                const int n = r_n[r];
                v[u] = rowbuf[r * Lp + (j < n ? n - 1 - j : j)];   // n <= L: inside the row
                at[u] = r_db[r] + (i64)j * ds;
                j += IX_THREADS;
                while (j >= L) {
                    j -= L;
                    ++r;
                }
            }
        }
#pragma unroll
        for (int u = 0; u < IX_TILE_BATCH; u++)
            if (at[u] >= 0) ((W*)p.dst)[at[u]] = v[u];
    }
}

// The first `count` words of v over the rest of own's (count <= 0: own;
// count >= V: v), by masks of whole 4-byte lanes (2-byte words: halves).
template <typename W>
__device__ __forceinline__ uint4 ix_first_words(const uint4& v, const uint4& own, int count) {
    const u32 vw[4] = {v.x, v.y, v.z, v.w}, ow[4] = {own.x, own.y, own.z, own.w};
    u32 o[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const u32 m = sizeof(W) == 2 ? (2 * i < count ? 0xffffu : 0u) | (2 * i + 1 < count ? 0xffff0000u : 0u)
                                     : (i * 4 / (int)sizeof(W) < count ? 0xffffffffu : 0u);
        o[i] = (vw[i] & m) | (ow[i] & ~m);
    }
    return make_uint4(o[0], o[1], o[2], o[3]);
}

// w[i] of eight 4-byte words, i in [0, 8): a three-level select tree.
__device__ __forceinline__ u32 ix_pick8(const u32 (&w)[8], int i) {
    const u32 a = (i & 1) ? w[1] : w[0], b = (i & 1) ? w[3] : w[2], c = (i & 1) ? w[5] : w[4], d = (i & 1) ? w[7] : w[6];
    const u32 e = (i & 2) ? b : a, f = (i & 2) ? d : c;
    return (i & 4) ? f : e;
}

// ix_reversed_piece for 2-byte words: result lane i (words 2i and 2i + 1: source words s + 7 - 2i and s + 6 - 2i,
// neighbours) is one byte permute of the 4-byte lanes holding them (lane (s + 6) / 2 - i with its halves swapped
// where s is even; the low half of lane (s + 7) / 2 - i under the high half of lane (s + 5) / 2 - i where s is odd):
// five lanes picked, each by a select tree. The generic form's eight predicated alternatives spilled 44 bytes a
// thread (32 registers): H200 float16 rows of 16 0.71 of copy against 0.89 (a pick for each of the eight operands
// 0.81; 40 registers, 6 blocks, no spill, 0.76-0.84).
template <>
__device__ __forceinline__ uint4 ix_reversed_piece<u16>(const uint4& A, const uint4& B, int s) {
    const u32 c[8] = {A.x, A.y, A.z, A.w, B.x, B.y, B.z, B.w};
    const int odd = s & 1, hi = (s + 6 + odd) >> 1;         // lane hi - i: the result's low half
    const u32 sel = odd ? 0x7610u : 0x1032u;
    u32 l[5], o[4];                          // lanes hi, hi - 1, ..., hi - 4 (the last read only where s is odd)
#pragma unroll
    for (int i = 0; i < 5; i++) l[i] = ix_pick8(c, hi - i);
#pragma unroll
    for (int i = 0; i < 4; i++) o[i] = __byte_perm(l[i], odd ? l[i + 1] : l[i], sel);
    return make_uint4(o[0], o[1], o[2], o[3]);
}

// An element-wise reversal of subsequences along rows of whole 16-byte pieces of 2-, 4- or 8-byte words, both sides
// contiguous along the row (a length a row: index.py's _pieces), read and written in place like a copy. Block b takes
// the rows whose first piece is in [b x members, (b + 1) x members) of the rows' `total` pieces (row-major); a warp
// takes R = 32 / Q whole rows of Q pieces a step, a lane a piece (lanes R x Q and above idle where Q does not divide
// 32): each load and store instruction R x Q x 16 contiguous bytes where the rows are. A lane loads its own piece and
// its row's length together (one memory latency a step), then takes the two source pieces it needs from its row's
// lanes (warp shuffles): a piece at or past the length n is its own; one wholly below it (words j ... j + V - 1 from
// words n - 1 - j down to n - V - j) is made of pieces (n - V - j) / V and the one after; one across the length takes
// its reversed words from piece 0. Where the leading dimensions collapse to one (every row at a fixed stride on each
// side and in the lengths: decided once, block-uniform) a row's offsets are one multiply each, else ix_lead's. A row
// with either side off 16 bytes goes word by word. Loop and shuffles are warp-uniform. One piece a lane a step in 32
// registers (8 blocks a multiprocessor). The piece's load is issued before the length's (after it, the piece waited
// for the clamp: two memory latencies a step), and every piece takes one path (masks, ix_first_words), not three
// divergent ones: (4096, 4096, 8) float32 along rows went from 0.84-0.86 of copy to 0.95 (1.24x torch.flip), float16
// rows of 16 from 0.72 to 0.89 (with ix_reversed_piece<u16>). Four pieces a lane a step (72 registers) ran 0.65, two
// 0.73-0.77, a piece a thread 0.62 (ix_gather_positions 0.34). H200 measurements: benchmarks/RESULTS.md, sessions 20
// (the pieces a lane) and 25 (the load order).
template <typename W, typename I, int NO>
__global__ void __launch_bounds__(IX_THREADS, 8) ix_reverse_pieces(IX_PARAMS) {
    constexpr int V = 16 / (int)sizeof(W);
    const ix_axis& ax = p.axes[0];
    const int Q = (int)(ax.bound / V), R = 32 / Q, lane = (int)(threadIdx.x & 31), m = lane / Q, q = lane - m * Q;
    const u64 total = (u64)p.total, first = (u64)blockIdx.x * (u64)p.members;
    const u64 last = total - first < (u64)p.members ? total : first + (u64)p.members;
    const I r0 = (I)((first + Q - 1) / Q), r1 = (I)((last + Q - 1) / Q);   // this block's rows
    i64 rs = 0, rd = 0, ra = 0, span = 1;
    bool flat = true;                        // row r at src_offset + r x rs, dst_offset + r x rd, axis offset + r x ra
#pragma unroll
    for (int k = NO - 2; k >= 0; --k) {
        const i64 n = p.sizes[k];
        if (n == 1) continue;
        if (span == 1) {
            rs = p.src_strides[k];
            rd = p.dst_strides[k];
            ra = ax.strides[k];
        } else {
            flat = flat && p.src_strides[k] == rs * span && p.dst_strides[k] == rd * span && ax.strides[k] == ra * span;
        }
        span *= n;
    }
    const int j = q * V, lead = lane - q;   // this lane's piece's first word; its row's first lane
    for (I w = r0 + (I)((threadIdx.x >> 5) * R); w < r1; w += (I)((IX_THREADS / 32) * R)) {   // (a warp's first row)
        const I r = w + (I)m;
        const bool go = m < R && r < r1;
        uint4 a = make_uint4(0, 0, 0, 0);
        i64 sb = 0, db = 0, ab;
        int n = 0;
        bool al = false;
        if (go) {
            if (flat) {
                sb = p.src_offset + (i64)r * rs;
                db = p.dst_offset + (i64)r * rd;
                ab = ax.offset + (i64)r * ra;
            } else {
                ix_lead<I, NO - 2>(p, r, sb, db, ab);
            }
            al = ((((u64)((const W*)p.src + sb)) | (u64)((W*)p.dst + db)) & 15) == 0;
            if (al) a = reinterpret_cast<const uint4*>((const W*)p.src + sb)[q];   // (before the length's load: both
            n = (int)ix_length(ax, p.idx[0], ab);   // in [0, bound]                in flight together)
        }
        const int lo = n - V - j, pa = lo >= 0 ? lo / V : 0;
        uint4 A, B;                          // pieces pa and pa + 1 of the row (piece 0 twice across the length)
        const int la = lead + pa, lb = lo >= 0 && pa + 1 < Q ? la + 1 : la;
        A.x = __shfl_sync(0xffffffffu, a.x, la);
        A.y = __shfl_sync(0xffffffffu, a.y, la);
        A.z = __shfl_sync(0xffffffffu, a.z, la);
        A.w = __shfl_sync(0xffffffffu, a.w, la);
        B.x = __shfl_sync(0xffffffffu, a.x, lb);
        B.y = __shfl_sync(0xffffffffu, a.y, lb);
        B.z = __shfl_sync(0xffffffffu, a.z, lb);
        B.w = __shfl_sync(0xffffffffu, a.w, lb);
        if (!go) continue;
        W* d = (W*)p.dst + db + j;
        if (!al) {                           // word by word (every lane of this row takes this branch)
            const W* s = (const W*)p.src + sb;
#pragma unroll
            for (int k = 0; k < V; k++) d[k] = s[j + k < n ? n - 1 - j - k : j + k];
            continue;
        }
        // one path for every piece (no divergence): wholly below the length, the reversed words of A:B from s;
        // across it, word k < n - j is word n - 1 - j - k of piece 0 (A:A from n - j); at or past it, its own
        const int s = lo >= 0 ? lo - pa * V : (n > j ? n - j : 0);
        *reinterpret_cast<uint4*>(d) = ix_first_words<W>(ix_reversed_piece<W>(A, B, s), a, n - j);
    }
}

template <typename W, typename I, int OWN, int NO, int NA, int NI, int ITEMS>
__device__ __forceinline__ void ix_scatter_body(const ix_params& p) {
    I o, g;
    if (!ix_split<I>(p, o, g)) return;
    i64 so, dd;
    if (!ix_outer<I, true, false, NO, NA>(p, o, so, dd)) return;
    if (OWN && ((const u32*)p.aux)[(dd - p.key_base) / p.key_div] != (u32)o + 1u) return;
    IX_BLOCK(p.has_value ? ix_value<W>(p) : ((const W*)p.src)[so + si]);
}
template <typename W, typename I, int OWN, int NO, int NA, int NI, int ITEMS>
__global__ void __launch_bounds__(IX_THREADS) ix_scatter(IX_PARAMS) {   // the body, then ix_finish
    ix_scatter_body<W, I, OWN, NO, NA, NI, ITEMS>(p);
    ix_finish(p);
}

// One block a group of `members` consecutive positions (trailing outer dimensions of destination stride 0, differing
// only by the index coordinate, which stays inside the group's own `bound` destination words, distinct from every
// other group's) of one index axis and one word: the owners in shared memory (atomicMax of the member number: the
// last position in row-major order), then the owners write. No global slot array, one launch.
template <typename W, typename I, int NO>
__device__ __forceinline__ void ix_scatter_group_body(const ix_params& p) {
    extern __shared__ u32 own[];
    const I members = (I)p.members, first = (I)blockIdx.x * members;
    const i64 bound = p.axes[0].bound, stride = p.axes[0].stride;
    for (i64 s = threadIdx.x; s < bound; s += IX_THREADS) own[s] = 0;
    i64 so, d0;
    ix_outer<I, false, false, NO, 1>(p, first, so, d0);     // the group's origin (index coordinate 0)
    __syncthreads();
    if (members <= (I)(IX_BATCH * IX_THREADS)) {   // one round (a block-wide test): each member's value read
        const I m0 = threadIdx.x;                  // with its index, in flight across the owners' atomics and
        i64 sv[IX_BATCH], dd[IX_BATCH], at[IX_BATCH][1], e[IX_BATCH][1];   // the barrier: a memory latency
        u64 iv[IX_BATCH][1];                       // less on a checked call's clock, no index read twice
        bool keep[IX_BATCH];
        W v[IX_BATCH];
#pragma unroll
        for (int u = 0; u < IX_BATCH; u++) {
            keep[u] = m0 + (I)u * IX_THREADS < members;
            if (keep[u]) ix_offsets<I, true, NO, 1>(p, first + m0 + (I)u * IX_THREADS, sv[u], dd[u], at[u], e[u]);
        }
#pragma unroll
        for (int u = 0; u < IX_BATCH; u++)
            if (keep[u]) iv[u][0] = ix_load(p.axes[0], p.idx[0], at[u][0]);
#pragma unroll
        for (int u = 0; u < IX_BATCH; u++) {
            keep[u] = keep[u] && ix_indexed<false, 1>(p, iv[u], e[u], sv[u], dd[u]);
            if (keep[u]) v[u] = ((const W*)p.src)[sv[u]];
        }
#pragma unroll
        for (int u = 0; u < IX_BATCH; u++)
            if (keep[u]) atomicMax(own + (dd[u] - d0) / stride, (u32)(m0 + (I)u * IX_THREADS) + 1u);
        __syncthreads();
#pragma unroll
        for (int u = 0; u < IX_BATCH; u++)
            if (keep[u] && own[(dd[u] - d0) / stride] == (u32)(m0 + (I)u * IX_THREADS) + 1u)
                ((W*)p.dst)[dd[u]] = v[u];
        return;
    }
    for (I m0 = threadIdx.x; m0 < members; m0 += IX_BATCH * IX_THREADS) {
        i64 dd[IX_BATCH];                    // IX_BATCH index loads in flight
        bool keep[IX_BATCH];
#pragma unroll
        for (int u = 0; u < IX_BATCH; u++) {
            const I m = m0 + (I)u * IX_THREADS;
            keep[u] = m < members && ix_outer<I, true, false, NO, 1>(p, first + m, so, dd[u]);
        }
#pragma unroll
        for (int u = 0; u < IX_BATCH; u++)
            if (keep[u]) atomicMax(own + (dd[u] - d0) / stride, (u32)(m0 + (I)u * IX_THREADS) + 1u);
    }
    __syncthreads();
    for (I m0 = threadIdx.x; m0 < members; m0 += IX_BATCH * IX_THREADS) {
        i64 sv[IX_BATCH], dd[IX_BATCH];
        bool keep[IX_BATCH];
#pragma unroll
        for (int u = 0; u < IX_BATCH; u++) {
            const I m = m0 + (I)u * IX_THREADS;
            keep[u] = m < members && ix_outer<I, true, false, NO, 1>(p, first + m, sv[u], dd[u]);
        }
        W v[IX_BATCH];
#pragma unroll
        for (int u = 0; u < IX_BATCH; u++) {
            keep[u] = keep[u] && own[(dd[u] - d0) / stride] == (u32)(m0 + (I)u * IX_THREADS) + 1u;
            if (keep[u]) v[u] = ((const W*)p.src)[sv[u]];
        }
#pragma unroll
        for (int u = 0; u < IX_BATCH; u++)
            if (keep[u]) ((W*)p.dst)[dd[u]] = v[u];
    }
}
template <typename W, typename I, int NO>
__global__ void __launch_bounds__(IX_THREADS) ix_scatter_group(IX_PARAMS) {   // the body, then ix_finish
    ix_scatter_group_body<W, I, NO>(p);
    ix_finish(p);
}

template <typename I, int NO, int NA>
__device__ __forceinline__ void ix_owner_body(const ix_params& p) {
    const I o = (I)blockIdx.x * (I)IX_THREADS + (I)threadIdx.x;
    if (o >= (I)p.n_outer) return;
    i64 so, dd;
    if (!ix_outer<I, true, false, NO, NA>(p, o, so, dd)) return;
    atomicMax(((u32*)p.aux) + (dd - p.key_base) / p.key_div, (u32)o + 1u);
}
template <typename I, int NO, int NA>
__global__ void __launch_bounds__(IX_THREADS) ix_owner(IX_PARAMS) {   // the body, then ix_finish
    ix_owner_body<I, NO, NA>(p);
    ix_finish(p);
}

template <typename I, typename K, int NO, int NA>
__global__ void __launch_bounds__(IX_THREADS) ix_keys(IX_PARAMS) {
    const I o = (I)blockIdx.x * (I)IX_THREADS + (I)threadIdx.x;
    if (o >= (I)p.n_outer) return;
    i64 so, dd;
    K key = (K)-1;                           // the unsigned maximum: a skipped position sorts last
    if (p.last_only) {
        ix_outer<I, true, true, NO, NA>(p, o, so, dd);
        key = (K)((so - p.key_base) / p.key_div);
    } else if (ix_outer<I, true, false, NO, NA>(p, o, so, dd)) {
        key = (K)((dd - p.key_base) / p.key_div);
    }
    ((K*)p.keys)[o] = key;
}

// --- additions as the CPU backend makes them (x86, NumPy) ----------------------

__device__ __forceinline__ float ix_add32(float a, float b) {
    const u32 ab = __float_as_uint(a), bb = __float_as_uint(b);
    if ((ab & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(ab | 0x00400000u);
    if ((bb & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(bb | 0x00400000u);
    float c;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(c) : "f"(a), "f"(b));
    return c;
}

__device__ __forceinline__ double ix_add64(double a, double b) {
    const u64 ab = __double_as_longlong(a), bb = __double_as_longlong(b);
    if ((ab & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return __longlong_as_double(ab | 0x0008000000000000ull);
    if ((bb & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return __longlong_as_double(bb | 0x0008000000000000ull);
    return __dadd_rn(a, b);
}

__device__ __forceinline__ float ix_h2f(u16 h) {   // exact, NaN payload kept
    const u32 sign = (u32)(h & 0x8000u) << 16, em = h & 0x7fffu;
    u32 bits;
    if (em >= 0x7c00u) bits = 0x7f800000u | ((em & 0x3ffu) << 13);
    else if (em >= 0x0400u) bits = (em << 13) + 0x38000000u;
    else bits = __float_as_uint((float)em * 5.9604644775390625e-08f);   // em * 2^-24, exact
    return __uint_as_float(bits | sign);
}

// float32 -> float16 as NumPy rounds it: cvt.rn.f16.f32 without .ftz (NumPy's result for every non-NaN value), a NaN
// by NumPy's rule (the payload's top bits kept, still a NaN).
__device__ __forceinline__ u16 ix_f2h(float value) {
    const u32 f = __float_as_uint(value);
    if ((f & 0x7fffffffu) > 0x7f800000u) {
        u16 ret = (u16)(0x7c00u + ((f & 0x007fffffu) >> 13));
        if (ret == 0x7c00u) ret++;
        return (u16)(((f & 0x80000000u) >> 16) + ret);
    }
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(value));
    return h;
}

template <typename W>
__device__ __forceinline__ W ix_add(W a, W b, i64 type) {
    if (sizeof(W) == 4 && type == T_F32) {
        const float r = ix_add32(__uint_as_float((u32)a), __uint_as_float((u32)b));
        return (W)__float_as_uint(r);
    }
    if (sizeof(W) == 8 && type == T_F64) {
        const double r = ix_add64(__longlong_as_double((i64)a), __longlong_as_double((i64)b));
        return (W)(u64)__double_as_longlong(r);
    }
    if (sizeof(W) == 2 && type == T_F16) return (W)ix_f2h(ix_add32(ix_h2f((u16)a), ix_h2f((u16)b)));
    return (W)(a + b);                       // integers: two's complement wrap
}

// Bytes an element of DML data type t (the 11 whole-byte types).
__device__ __forceinline__ int ix_esize(i64 t) {
    return t == T_F32 || t == T_U32 || t == T_I32 ? 4 : t == T_F16 || t == 4 || t == 7 ? 2 : t == 5 || t == 8 ? 1 : 8;
}

template <typename E, typename W>
__device__ __forceinline__ W ix_add_lanes(const W& a, const W& b, i64 type) {
    W r;
#pragma unroll
    for (int l = 0; l < (int)(sizeof(W) / sizeof(E)); l++)
        reinterpret_cast<E*>(&r)[l] = ix_add<E>(reinterpret_cast<const E*>(&a)[l], reinterpret_cast<const E*>(&b)[l], type);
    return r;
}

// a + b of words W holding sizeof(W) / element size elements (an accumulating pass's contiguous inner run widened
// into 2-16 byte words): each element added on its own, as ix_add adds one.
template <typename W>
__device__ __forceinline__ W ix_add_words(const W& a, const W& b, i64 type) {
    const int es = ix_esize(type);
    if constexpr (sizeof(W) >= 8) if (es == 8) return ix_add_lanes<u64>(a, b, type);
    if constexpr (sizeof(W) >= 4) if (es == 4) return ix_add_lanes<u32>(a, b, type);
    if constexpr (sizeof(W) >= 2) if (es == 2) return ix_add_lanes<u16>(a, b, type);
    return ix_add_lanes<u8>(a, b, type);
}

template <typename W, typename I, typename K, int ACC, int NO, int NA, int NI, int ITEMS>
__global__ void __launch_bounds__(IX_THREADS) ix_apply(IX_PARAMS) {
    I i, g;
    if (!ix_split<I>(p, i, g)) return;
    const K* sk = (const K*)p.keys;          // sorted keys
    const i64* order = (const i64*)p.order;  // the positions in that order (stable)
    const K key = sk[i];
    if (key == (K)-1 || (i > 0 && sk[i - 1] == key)) return;
    I end = i;
    while (end + 1 < (I)p.n_outer && sk[end + 1] == key) ++end;
    const i64 base = p.key_base + (i64)key * p.key_div;
    W* dst = (W*)p.dst;
    const W* src = (const W*)p.src;
    i64 si[ITEMS], at[ITEMS];
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
        const I j = g + (I)u * (I)p.groups;
        at[u] = -1;
        si[u] = 0;
        if (ITEMS == 1 || j < (I)p.n_inner) {
            i64 di;
            ix_inner<I, NI>(p, j, si[u], di);
            at[u] = base + di;
        }
    }
    i64 so, dd;
    if constexpr (!ACC) {
        W value = W();                       // (a constant: never a widened word)
        if constexpr (sizeof(W) <= 8)
            if (p.has_value) value = ix_value<W>(p);
        ix_outer<I, false, false, NO, NA>(p, (I)order[end], so, dd);
#pragma unroll
        for (int u = 0; u < ITEMS; u++)
            if (ITEMS == 1 || at[u] >= 0) dst[at[u]] = p.has_value ? value : src[so + si[u]];
    } else {
        W acc[ITEMS];
#pragma unroll
        for (int u = 0; u < ITEMS; u++)
            if (ITEMS == 1 || at[u] >= 0) acc[u] = dst[at[u]];
        W value = W();                       // (a constant: never a widened word)
        if constexpr (sizeof(W) <= 8)
            if (p.has_value) value = ix_value<W>(p);
        for (I r = i; r <= end; ++r) {
            if (!p.has_value) ix_outer<I, false, false, NO, NA>(p, (I)order[r], so, dd);
            W v[ITEMS];                      // every load of the member before its additions
#pragma unroll
            for (int u = 0; u < ITEMS; u++)
                if (ITEMS == 1 || at[u] >= 0) v[u] = p.has_value ? value : src[so + si[u]];
#pragma unroll
            for (int u = 0; u < ITEMS; u++)
                if (ITEMS == 1 || at[u] >= 0) acc[u] = ix_add_words<W>(acc[u], v[u], p.data_type);
        }
#pragma unroll
        for (int u = 0; u < ITEMS; u++)
            if (ITEMS == 1 || at[u] >= 0) dst[at[u]] = acc[u];
    }
}
