// Candidate kernels for dml.reverse_subsequences on a (P, R, C) float32 tensor
// (benchmarks/revseq_lab/lab.py compiles them with NVRTC through CuPy and
// times them against the production kernels of runtime/cuda/index.cu).
//
// Axis 0 (a length a column): the tensor as P planes of n words (n = R x C),
// unit u = one column set of LO = 32 words (128 bytes) down all P planes
// (P x 128 bytes staged in shared memory); out[e][c] = x[e < L ? L-1-e : e][c].
// Axis 2 (a length a row): rows of W words, unit = ROWS consecutive rows.
// Plain arguments (no parameter block); lengths are uint32, clamped to the axis.
typedef unsigned int u32;
typedef unsigned long long u64;
#define LO 32

__device__ __forceinline__ u32 smem_addr(const void* p) {
    u32 a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
__device__ __forceinline__ void cp16(u32 s, const void* g) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void cp16_ef(u32 s, const void* g, u64 pol) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" :: "r"(s), "l"(g), "l"(pol) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_group() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

template <int CS>
__device__ __forceinline__ void st32(u32* p, u32 v) {
    if (CS == 1) asm volatile("st.global.cs.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
    else *p = v;
}
template <int CS>
__device__ __forceinline__ void st128(uint4* p, uint4 v) {
    if (CS == 1) asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
    else *p = v;
}

// ---------------------------------------------------------------- axis 0 ---
// Stage unit u (P rows of 128 bytes, source row stride n words) into tile:
// 8 threads a row, 16 bytes each (EF: an L2 evict-first policy on the loads).
template <int T, int EF>
__device__ __forceinline__ void a0_load(u32* tile, const u32* src, u64 n, int P, u64 u) {
    const u32 s0 = smem_addr(tile);
    const u32* base = src + u * LO;
    u64 pol = 0;
    if (EF) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    for (int h = threadIdx.x; h < P * 8; h += T) {
        const int r = h >> 3, c = h & 7;
        if (EF) cp16_ef(s0 + (u32)(r * 128 + c * 16), base + (u64)r * n + c * 4, pol);
        else cp16(s0 + (u32)(r * 128 + c * 16), base + (u64)r * n + c * 4);
    }
}

// Write the staged unit: VEC 0: a thread a column (4-byte stores, a warp a
// 128-byte line); VEC 1: a thread 4 neighbouring columns (16-byte stores),
// the lanes of different rows reading the 4 components in rotated order (no
// bank conflicts).
template <int T, int VEC, int CS>
__device__ __forceinline__ void a0_write(const u32* tile, u32* dst, const u32* len, u64 n, int P, u64 u) {
    if (VEC == 0) {
        const int kk = threadIdx.x & 31, step = T / 32;
        const u32 lv = len[u * LO + kk];
        const int L = lv > (u32)P ? P : (int)lv;
        u32* d = dst + u * LO + kk;
        for (int e0 = threadIdx.x / 32; e0 < P; e0 += 8 * step) {
            u32 v[8];
#pragma unroll
            for (int m = 0; m < 8; m++) {
                const int e = e0 + m * step;
                if (e < P) v[m] = tile[(e < L ? L - 1 - e : e) * LO + kk];
            }
#pragma unroll
            for (int m = 0; m < 8; m++) {
                const int e = e0 + m * step;
                if (e < P) st32<CS>(d + (u64)e * n, v[m]);
            }
        }
    } else {
        const int q = threadIdx.x & 7, g = (threadIdx.x >> 3) & 3, step = T / 8;
        const uint4 lv = reinterpret_cast<const uint4*>(len + u * LO)[q];
        int L[4] = {(int)min(lv.x, (u32)P), (int)min(lv.y, (u32)P), (int)min(lv.z, (u32)P), (int)min(lv.w, (u32)P)};
        uint4* d = reinterpret_cast<uint4*>(dst + u * LO) + q;
        for (int e0 = threadIdx.x / 8; e0 < P; e0 += 4 * step) {
            uint4 out[4];
            int ee[4];
#pragma unroll
            for (int m = 0; m < 4; m++) {
                const int e = e0 + m * step;
                ee[m] = e;
                if (e < P) {
                    u32 w[4];
#pragma unroll
                    for (int k = 0; k < 4; k++) {           // component (k + g) % 4 read at step k
                        const int c = (k + g) & 3;
                        const int Lc = c == 0 ? L[0] : c == 1 ? L[1] : c == 2 ? L[2] : L[3];
                        w[k] = tile[(e < Lc ? Lc - 1 - e : e) * LO + q * 4 + c];
                    }
                    // out component c = w[(c - g) & 3]
                    u32 o[4];
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const int k = (c - g) & 3;
                        o[c] = k == 0 ? w[0] : k == 1 ? w[1] : k == 2 ? w[2] : w[3];
                    }
                    out[m] = make_uint4(o[0], o[1], o[2], o[3]);
                }
            }
#pragma unroll
            for (int m = 0; m < 4; m++)
                if (ee[m] < P) st128<CS>(d + (u64)ee[m] * (n / 4), out[m]);
        }
    }
}

// One unit a block (the production kernel's shape). ORDER 0: unit =
// blockIdx.x; 1: an odd multiplier spreads consecutive blocks over the
// units (nunits a power of two); 2: the units as (rows, sets of 16):
// consecutive blocks take the same set of consecutive rows (2 KiB apart).
template <int T, int ORDER, int VEC, int CS, int EF, int MINB>
__device__ __forceinline__ void a0_single_body(const u32* src, u32* dst, const u32* len, u64 n, int P) {
    extern __shared__ uint4 raw[];
    u32* tile = reinterpret_cast<u32*>(raw);
    const u64 nunits = n / LO;
    u64 u = blockIdx.x;
    if (ORDER == 1) u = (u * 2654435761ull) & (nunits - 1);
    if (ORDER == 2) { const u64 sets = 16, rows = nunits / sets; u = (u % rows) * sets + u / rows; }
    a0_load<T, EF>(tile, src, n, P, u);
    commit();
    wait_group<0>();
    __syncthreads();
    a0_write<T, VEC, CS>(tile, dst, len, n, P, u);
}
#define A0_SINGLE(NAME, T, ORDER, VEC, CS, EF, MINB) \
extern "C" __global__ void __launch_bounds__(T, MINB) NAME(const u32* src, u32* dst, const u32* len, u64 n, int P) { \
    a0_single_body<T, ORDER, VEC, CS, EF, MINB>(src, dst, len, n, P); }
A0_SINGLE(cand_a0_single, 256, 0, 0, 0, 0, 3)
A0_SINGLE(cand_a0_single_swz, 256, 1, 0, 0, 0, 3)
A0_SINGLE(cand_a0_single_rowmajor, 256, 2, 0, 0, 0, 3)
A0_SINGLE(cand_a0_single_cs, 256, 0, 0, 1, 0, 3)
A0_SINGLE(cand_a0_single_vec, 256, 0, 1, 0, 0, 3)
A0_SINGLE(cand_a0_single_ef_cs, 256, 0, 0, 1, 1, 3)
A0_SINGLE(cand_a0_single_512, 512, 0, 0, 0, 0, 3)

// Persistent: gridDim.x blocks walk the units u = blockIdx.x + i x gridDim.x,
// STAGES units in a ring (unit i + STAGES - 1 loading while unit i is written).
template <int T, int STAGES, int VEC, int CS>
__device__ __forceinline__ void a0_pipe_body(const u32* src, u32* dst, const u32* len, u64 n, int P) {
    extern __shared__ uint4 raw[];
    u32* ring = reinterpret_cast<u32*>(raw);
    const int stage = P * LO;
    const u64 nunits = n / LO;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        const u64 u = blockIdx.x + (u64)s * gridDim.x;
        if (u < nunits) a0_load<T, 0>(ring + s * stage, src, n, P, u);
        commit();
    }
    for (u64 i = 0;; i++) {
        const u64 u = blockIdx.x + i * gridDim.x;
        if (u >= nunits) break;
        const u64 un = u + (u64)(STAGES - 1) * gridDim.x;
        if (un < nunits) a0_load<T, 0>(ring + (int)((i + STAGES - 1) % STAGES) * stage, src, n, P, un);
        commit();
        wait_group<STAGES - 1>();
        __syncthreads();
        a0_write<T, VEC, CS>(ring + (int)(i % STAGES) * stage, dst, len, n, P, u);
        __syncthreads();
    }
}
#define A0_PIPE(NAME, T, STAGES, VEC, CS, MINB) \
extern "C" __global__ void __launch_bounds__(T, MINB) NAME(const u32* src, u32* dst, const u32* len, u64 n, int P) { \
    a0_pipe_body<T, STAGES, VEC, CS>(src, dst, len, n, P); }
A0_PIPE(cand_a0_pipe_1024x3, 1024, 3, 0, 0, 1)
A0_PIPE(cand_a0_pipe_1024x3_vec, 1024, 3, 1, 0, 1)
A0_PIPE(cand_a0_pipe_1024x3_cs, 1024, 3, 0, 1, 1)
A0_PIPE(cand_a0_pipe_512x3, 512, 3, 0, 0, 1)
A0_PIPE(cand_a0_pipe_256x3, 256, 3, 0, 0, 1)
A0_PIPE(cand_a0_pipe_256x1, 256, 1, 0, 0, 3)
A0_PIPE(cand_a0_pipe_512x1, 512, 1, 0, 0, 3)

// ---------------------------------------------------------------- axis 2 ---
// Rows of W words (W a multiple of 4, rows 16-byte aligned), unit = ROWS rows
// (the last unit may hold fewer), staged whole.
template <int T>
__device__ __forceinline__ void r_load(u32* buf, const u32* src, int W, u64 nrows, int ROWS, u64 u) {
    const u64 first = u * ROWS;
    const int g = (int)min((u64)ROWS, nrows - first);
    const int pieces = W / 4;
    const u32 s0 = smem_addr(buf);
    const u32* base = src + first * W;
    for (int h = threadIdx.x; h < g * pieces; h += T)
        cp16(s0 + (u32)h * 16, base + (u64)h * 4);      // rows packed: W words a row
}

// VEC 0: a thread a word (4-byte stores); VEC 1: a thread 4 words (16-byte
// stores), the reversed 4 words read as two aligned 16-byte pieces.
template <int T, int VEC, int CS>
__device__ __forceinline__ void r_write(const u32* buf, u32* dst, const u32* len, int W, u64 nrows, int ROWS, u64 u) {
    const u64 first = u * ROWS;
    const int g = (int)min((u64)ROWS, nrows - first);
    u32* d = dst + first * W;
    if (VEC == 0) {
        for (int f0 = threadIdx.x; f0 < g * W; f0 += 4 * T) {
            u32 v[4];
#pragma unroll
            for (int m = 0; m < 4; m++) {
                const int f = f0 + m * T;
                if (f < g * W) {
                    const int r = f / W, j = f - r * W;
                    const u32 lv = len[first + r];
                    const int L = lv > (u32)W ? W : (int)lv;
                    v[m] = buf[r * W + (j < L ? L - 1 - j : j)];
                }
            }
#pragma unroll
            for (int m = 0; m < 4; m++)
                if (f0 + m * T < g * W) st32<CS>(d + f0 + m * T, v[m]);
        }
    } else {
        const int Q = W / 4;
        const uint4* b4 = reinterpret_cast<const uint4*>(buf);
        for (int f0 = threadIdx.x; f0 < g * Q; f0 += 2 * T) {
            uint4 v[2];
#pragma unroll
            for (int m = 0; m < 2; m++) {
                const int f = f0 + m * T;
                if (f < g * Q) {
                    const int r = f / Q, q = f - r * Q;
                    const u32 lv = len[first + r];
                    const int L = lv > (u32)W ? W : (int)lv;
                    const u32* row = buf + r * W;
                    const int j = 4 * q;
                    if (j >= L) {
                        v[m] = b4[r * Q + q];
                    } else if (j + 3 < L) {                 // words L-1-j .. L-4-j, descending
                        const int lo = L - 4 - j, a = lo >> 2, s = lo & 3;
                        const uint4 A = b4[r * Q + a];
                        const uint4 B = s ? b4[r * Q + a + 1] : A;
                        u32 c[8] = {A.x, A.y, A.z, A.w, B.x, B.y, B.z, B.w};
                        u32 o0, o1, o2, o3;                  // o_m = word lo + 3 - m = c[s + 3 - m]
                        switch (s) {
                        case 0: o0 = c[3]; o1 = c[2]; o2 = c[1]; o3 = c[0]; break;
                        case 1: o0 = c[4]; o1 = c[3]; o2 = c[2]; o3 = c[1]; break;
                        case 2: o0 = c[5]; o1 = c[4]; o2 = c[3]; o3 = c[2]; break;
                        default: o0 = c[6]; o1 = c[5]; o2 = c[4]; o3 = c[3]; break;
                        }
                        v[m] = make_uint4(o0, o1, o2, o3);
                    } else {
                        u32 o[4];
#pragma unroll
                        for (int k = 0; k < 4; k++) o[k] = row[j + k < L ? L - 1 - j - k : j + k];
                        v[m] = make_uint4(o[0], o[1], o[2], o[3]);
                    }
                }
            }
#pragma unroll
            for (int m = 0; m < 2; m++)
                if (f0 + m * T < g * Q) st128<CS>(reinterpret_cast<uint4*>(d) + f0 + m * T, v[m]);
        }
    }
}

template <int T, int VEC, int CS>
__device__ __forceinline__ void r_single_body(const u32* src, u32* dst, const u32* len, int W, u64 nrows, int ROWS) {
    extern __shared__ uint4 raw[];
    u32* buf = reinterpret_cast<u32*>(raw);
    r_load<T>(buf, src, W, nrows, ROWS, blockIdx.x);
    commit();
    wait_group<0>();
    __syncthreads();
    r_write<T, VEC, CS>(buf, dst, len, W, nrows, ROWS, blockIdx.x);
}
#define R_SINGLE(NAME, T, VEC, CS) \
extern "C" __global__ void __launch_bounds__(T) NAME(const u32* src, u32* dst, const u32* len, int W, u64 nrows, int ROWS) { \
    r_single_body<T, VEC, CS>(src, dst, len, W, nrows, ROWS); }
R_SINGLE(cand_r_single, 256, 0, 0)
R_SINGLE(cand_r_single_vec, 256, 1, 0)
R_SINGLE(cand_r_single_cs, 256, 0, 1)
R_SINGLE(cand_r_single_vec_cs, 256, 1, 1)

template <int T, int STAGES, int VEC, int CS>
__device__ __forceinline__ void r_pipe_body(const u32* src, u32* dst, const u32* len, int W, u64 nrows, int ROWS) {
    extern __shared__ uint4 raw[];
    u32* ring = reinterpret_cast<u32*>(raw);
    const int stage = ROWS * W;
    const u64 nunits = (nrows + ROWS - 1) / ROWS;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        const u64 u = blockIdx.x + (u64)s * gridDim.x;
        if (u < nunits) r_load<T>(ring + s * stage, src, W, nrows, ROWS, u);
        commit();
    }
    for (u64 i = 0;; i++) {
        const u64 u = blockIdx.x + i * gridDim.x;
        if (u >= nunits) break;
        const u64 un = u + (u64)(STAGES - 1) * gridDim.x;
        if (un < nunits) r_load<T>(ring + (int)((i + STAGES - 1) % STAGES) * stage, src, W, nrows, ROWS, un);
        commit();
        wait_group<STAGES - 1>();
        __syncthreads();
        r_write<T, VEC, CS>(ring + (int)(i % STAGES) * stage, dst, len, W, nrows, ROWS, u);
        __syncthreads();
    }
}
#define R_PIPE(NAME, T, STAGES, VEC, CS) \
extern "C" __global__ void __launch_bounds__(T) NAME(const u32* src, u32* dst, const u32* len, int W, u64 nrows, int ROWS) { \
    r_pipe_body<T, STAGES, VEC, CS>(src, dst, len, W, nrows, ROWS); }
R_PIPE(cand_r_pipe_1024x3, 1024, 3, 0, 0)
R_PIPE(cand_r_pipe_1024x3_vec, 1024, 3, 1, 0)
R_PIPE(cand_r_pipe_512x3_vec, 512, 3, 1, 0)
R_PIPE(cand_r_pipe_256x2_vec, 256, 2, 1, 0)
R_PIPE(cand_r_pipe_256x4_vec, 256, 4, 1, 0)

// ----------------------------------------------------------- diagnostics ---
// The axis-0 access pattern without the reversal: the unit staged and
// written back in place (lengths ignored: every row its own), and the same
// 128-byte lines walked down the planes with no staging (8 rows a thread in
// flight, loads then stores); and a contiguous 16-byte copy (the pattern a
// plain copy makes), to read the DRAM's share of peak on each.
extern "C" __global__ void __launch_bounds__(256, 3) cand_a0_single_copy(const u32* src, u32* dst, const u32* len, u64 n, int P) {
    extern __shared__ uint4 raw[];
    u32* tile = reinterpret_cast<u32*>(raw);
    const u64 u = blockIdx.x;
    a0_load<256, 0>(tile, src, n, P, u);
    commit();
    wait_group<0>();
    __syncthreads();
    const int kk = threadIdx.x & 31;
    for (int e = threadIdx.x / 32; e < P; e += 8) dst[u * LO + kk + (u64)e * n] = tile[e * LO + kk];
}
extern "C" __global__ void __launch_bounds__(256) cand_a0_walk_copy(const u32* src, u32* dst, const u32* len, u64 n, int P) {
    const u64 u = blockIdx.x;
    const int kk = threadIdx.x & 31;
    const u32* s = src + u * LO + kk;
    u32* d = dst + u * LO + kk;
    for (int e0 = threadIdx.x / 32; e0 < P; e0 += 64) {
        u32 v[8];
#pragma unroll
        for (int m = 0; m < 8; m++) if (e0 + 8 * m < P) v[m] = s[(u64)(e0 + 8 * m) * n];
#pragma unroll
        for (int m = 0; m < 8; m++) if (e0 + 8 * m < P) d[(u64)(e0 + 8 * m) * n] = v[m];
    }
}
extern "C" __global__ void __launch_bounds__(256) cand_copy16(const u32* src, u32* dst, const u32* len, u64 n, int P) {
    const u64 total = n * (u64)P / 4, stride = (u64)gridDim.x * 256;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (u64 i = blockIdx.x * 256ull + threadIdx.x; i < total; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int m = 0; m < 4; m++) if (i + m * stride < total) v[m] = s[i + m * stride];
#pragma unroll
        for (int m = 0; m < 4; m++) if (i + m * stride < total) d[i + m * stride] = v[m];
    }
}
