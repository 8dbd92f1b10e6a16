// Session 18 candidates (lab.py compiles this file appended to lab.cu, as a
// second module, so that a compile failure here leaves lab.cu's rows alone).
// The question: does the axis-0 pattern (one line a plane, planes 512 KiB
// apart) reach more of copy when each plane's line is wider than 128 bytes,
// and can a reversal read and write such lines without 128 KiB a block?
//
// Walks (copies, no reversal): W bytes of each of PCH planes a block, V bytes
// a thread, D loads in flight a thread; block b takes column group b % ncg
// (ncg = plane bytes / W) of the planes chunk b / ncg. With PCH = P x 128 / W
// every block moves 64 KiB (4096 blocks) whatever W is: width alone changes.

template <int V> struct vec_of;
template <> struct vec_of<4> { typedef u32 t; };
template <> struct vec_of<16> { typedef uint4 t; };

template <int WB, int V, int T, int PCH, int D>
__device__ __forceinline__ void walk_body(const u32* src, u32* dst, u64 n, int P) {
    typedef typename vec_of<V>::t vt;
    constexpr int TL = WB / V, LP = T / TL;          // threads a line, lines a pass
    const u64 nb = n * 4, ncg = nb / WB;
    const u64 cg = blockIdx.x % ncg, p0 = (blockIdx.x / ncg) * PCH;
    const int t = threadIdx.x % TL, l = threadIdx.x / TL;
    const char* s = reinterpret_cast<const char*>(src) + cg * WB + t * V + p0 * nb;
    char* d = reinterpret_cast<char*>(dst) + cg * WB + t * V + p0 * nb;
    const int planes = min(PCH, P - (int)p0);
    for (int e0 = l; e0 < planes; e0 += D * LP) {
        vt v[D];
#pragma unroll
        for (int m = 0; m < D; m++)
            if (e0 + m * LP < planes) v[m] = *reinterpret_cast<const vt*>(s + (u64)(e0 + m * LP) * nb);
#pragma unroll
        for (int m = 0; m < D; m++)
            if (e0 + m * LP < planes) *reinterpret_cast<vt*>(d + (u64)(e0 + m * LP) * nb) = v[m];
    }
}
#define WALK(NAME, WB, V, T, PCH) \
extern "C" __global__ void __launch_bounds__(T) NAME(const u32* src, u32* dst, const u32* len, u64 n, int P) { \
    walk_body<WB, V, T, PCH, 8>(src, dst, n, P); }
// 64 KiB a block (4096 blocks of 256 threads), 4-byte and 16-byte lanes
WALK(w_walk_128_v4, 128, 4, 256, 512)
WALK(w_walk_256_v4, 256, 4, 256, 256)
WALK(w_walk_512_v4, 512, 4, 256, 128)
WALK(w_walk_1024_v4, 1024, 4, 256, 64)
WALK(w_walk_128_v16, 128, 16, 256, 512)
WALK(w_walk_256_v16, 256, 16, 256, 256)
WALK(w_walk_512_v16, 512, 16, 256, 128)
WALK(w_walk_1024_v16, 1024, 16, 256, 64)
WALK(w_walk_2048_v16, 2048, 16, 256, 32)
// every plane a block (the shape a reversal needs): W x 512 bytes a block,
// more threads for wider lines
WALK(w_walkall_256_v4, 256, 4, 512, 512)
WALK(w_walkall_512_v16, 512, 16, 512, 512)
WALK(w_walkall_1024_v16, 1024, 16, 1024, 512)
WALK(w_walkall_2048_v16, 2048, 16, 1024, 512)

// Read-only and write-only halves of the pattern (128 / 2048 bytes a plane,
// 64 KiB a block) and of a contiguous copy: which side loses.
template <int WB, int PCH, int MODE>   // MODE 1: read only, 2: write only
__device__ __forceinline__ void half_body(const u32* src, u32* dst, u64 n, int P) {
    constexpr int TL = WB / 16, LP = 256 / TL, D = 8;
    const u64 nb = n * 4, ncg = nb / WB;
    const u64 cg = blockIdx.x % ncg, p0 = (blockIdx.x / ncg) * PCH;
    const int t = threadIdx.x % TL, l = threadIdx.x / TL;
    const char* s = reinterpret_cast<const char*>(src) + cg * WB + t * 16 + p0 * nb;
    char* d = reinterpret_cast<char*>(dst) + cg * WB + t * 16 + p0 * nb;
    u32 acc = 0;
    for (int e0 = l; e0 < PCH; e0 += D * LP) {
        uint4 v[D];
        if (MODE == 1) {
#pragma unroll
            for (int m = 0; m < D; m++) v[m] = *reinterpret_cast<const uint4*>(s + (u64)(e0 + m * LP) * nb);
#pragma unroll
            for (int m = 0; m < D; m++) acc ^= v[m].x ^ v[m].y ^ v[m].z ^ v[m].w;
        } else {
#pragma unroll
            for (int m = 0; m < D; m++)
                *reinterpret_cast<uint4*>(d + (u64)(e0 + m * LP) * nb) = make_uint4(e0 + m, t, l, 0);
        }
    }
    if (MODE == 1 && acc == 0x9e3779b9u) dst[blockIdx.x] = acc;     // keeps the loads
}
extern "C" __global__ void __launch_bounds__(256) w_read_128(const u32* src, u32* dst, const u32* len, u64 n, int P) { half_body<128, 512, 1>(src, dst, n, P); }
extern "C" __global__ void __launch_bounds__(256) w_read_2048(const u32* src, u32* dst, const u32* len, u64 n, int P) { half_body<2048, 32, 1>(src, dst, n, P); }
extern "C" __global__ void __launch_bounds__(256) w_write_128(const u32* src, u32* dst, const u32* len, u64 n, int P) { half_body<128, 512, 2>(src, dst, n, P); }
extern "C" __global__ void __launch_bounds__(256) w_write_2048(const u32* src, u32* dst, const u32* len, u64 n, int P) { half_body<2048, 32, 2>(src, dst, n, P); }
// contiguous: the whole tensor as one plane of 64 KiB blocks (n x P words, WB = 64 KiB)
template <int MODE>
__device__ __forceinline__ void cont_body(const u32* src, u32* dst) {
    const uint4* s = reinterpret_cast<const uint4*>(src) + blockIdx.x * 4096ull + threadIdx.x;
    uint4* d = reinterpret_cast<uint4*>(dst) + blockIdx.x * 4096ull + threadIdx.x;
    u32 acc = 0;
    for (int i0 = 0; i0 < 4096; i0 += 8 * 256) {
        uint4 v[8];
        if (MODE == 1) {
#pragma unroll
            for (int m = 0; m < 8; m++) v[m] = s[i0 + m * 256];
#pragma unroll
            for (int m = 0; m < 8; m++) acc ^= v[m].x ^ v[m].y ^ v[m].z ^ v[m].w;
        } else {
#pragma unroll
            for (int m = 0; m < 8; m++) d[i0 + m * 256] = make_uint4(i0 + m, threadIdx.x, 0, 0);
        }
    }
    if (MODE == 1 && acc == 0x9e3779b9u) dst[blockIdx.x] = acc;
}
extern "C" __global__ void __launch_bounds__(256) w_read_cont(const u32* src, u32* dst, const u32* len, u64 n, int P) { cont_body<1>(src, dst); }
extern "C" __global__ void __launch_bounds__(256) w_write_cont(const u32* src, u32* dst, const u32* len, u64 n, int P) { cont_body<2>(src, dst); }

// ------------------------------------------------- reversals, clusters ---
// Hopper thread-block clusters of CL consecutive blocks (CL consecutive
// 128-byte column groups), each block its own group's 64 KiB tile.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ u32 map_rank(u32 saddr, u32 rank) {   // a shared address in block `rank` of the cluster
    u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(saddr), "r"(rank));
    return r;
}
__device__ __forceinline__ u32 ld_cluster(u32 a) {
    u32 v;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(a) : "memory");
    return v;
}
__device__ __forceinline__ void st_cluster4(u32 a, uint4 v) {
    asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" :: "r"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// LOCK 0: the cluster only co-launches the blocks (each as a0_single);
// 1: a cluster barrier before the loads and another before the writes, so
// the CL blocks issue the same planes together (DRAM sees CL x 128 bytes).
template <int T, int LOCK>
__device__ __forceinline__ void cl_lock_body(const u32* src, u32* dst, const u32* len, u64 n, int P) {
    extern __shared__ uint4 raw[];
    u32* tile = reinterpret_cast<u32*>(raw);
    if (LOCK) cluster_sync();
    a0_load<T, 0>(tile, src, n, P, blockIdx.x);
    commit();
    wait_group<0>();
    __syncthreads();
    if (LOCK) cluster_sync();
    a0_write<T, 0, 0>(tile, dst, len, n, P, blockIdx.x);
}
#define CL_LOCK(NAME, CL, T, LOCK) \
extern "C" __global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(T, 3) NAME(const u32* src, u32* dst, const u32* len, u64 n, int P) { \
    cl_lock_body<T, LOCK>(src, dst, len, n, P); }
CL_LOCK(w_cl2_colaunch, 2, 256, 0)
CL_LOCK(w_cl2_lock, 2, 256, 1)
CL_LOCK(w_cl4_lock, 4, 256, 1)
CL_LOCK(w_cl2_lock_512, 2, 512, 1)

// Distributed shared memory: the cluster's CL tiles are one (CL x 128)-byte
// wide column set; block `rank` moves the planes e = rank (mod CL) whole,
// CL x 128 bytes a plane. DSW 1: loads as a0_load (own group, every plane),
// writes whole wide lines (each warp's CL 128-byte stores of a plane read
// from the CL tiles); DSW 2: the loads too are whole wide lines, through
// registers into the owning block's tile (st.shared::cluster).
template <int CL, int DSW>
__device__ __forceinline__ void cl_ds_body(const u32* src, u32* dst, const u32* len, u64 n, int P) {
    constexpr int T = 256;
    extern __shared__ uint4 raw[];
    u32* tile = reinterpret_cast<u32*>(raw);
    const u32 rank = cluster_rank();
    const u64 u0 = blockIdx.x - rank;                   // the cluster's first column group
    const u32 own = smem_addr(tile);
    cluster_sync();                                     // every tile of the cluster is live
    if (DSW == 1) {
        a0_load<T, 0>(tile, src, n, P, blockIdx.x);
        commit();
        wait_group<0>();
    } else {
        // planes rank, rank + CL, ...: (P / CL) lines of CL x 8 pieces of 16 bytes
        const uint4* s4 = reinterpret_cast<const uint4*>(src + u0 * LO);
        const int per = CL * 8, total = (P / CL) * per;
        for (int h0 = threadIdx.x; h0 < total; h0 += 8 * T) {
            uint4 v[8];
#pragma unroll
            for (int m = 0; m < 8; m++) {
                const int h = h0 + m * T;
                if (h < total) {
                    const int e = (h / per) * CL + (int)rank, c = h % per;
                    v[m] = s4[(u64)e * (n / 4) + c];
                }
            }
#pragma unroll
            for (int m = 0; m < 8; m++) {
                const int h = h0 + m * T;
                if (h < total) {
                    const int e = (h / per) * CL + (int)rank, c = h % per;
                    st_cluster4(map_rank(own + (u32)(e * 128 + (c & 7) * 16), (u32)(c >> 3)), v[m]);
                }
            }
        }
    }
    __syncthreads();
    cluster_sync();                                     // every tile loaded
    const int kk = threadIdx.x & 31, w = threadIdx.x >> 5;
    int L[CL];
    u32 base[CL];
#pragma unroll
    for (int g = 0; g < CL; g++) {
        const u32 lv = len[(u0 + g) * LO + kk];
        L[g] = lv > (u32)P ? P : (int)lv;
        base[g] = map_rank(own + (u32)kk * 4, (u32)g);
    }
    u32* d = dst + u0 * LO + kk;
    constexpr int B = 8 / CL > 1 ? 8 / CL : 1;           // planes a warp keeps in flight
    for (int j0 = w; j0 < P / CL; j0 += B * (T / 32)) {
        u32 v[B][CL];
#pragma unroll
        for (int b = 0; b < B; b++) {
            const int e = (j0 + b * (T / 32)) * CL + (int)rank;
            if (e < P) {
#pragma unroll
                for (int g = 0; g < CL; g++) v[b][g] = ld_cluster(base[g] + (u32)((e < L[g] ? L[g] - 1 - e : e) * 128));
            }
        }
#pragma unroll
        for (int b = 0; b < B; b++) {
            const int e = (j0 + b * (T / 32)) * CL + (int)rank;
            if (e < P) {
#pragma unroll
                for (int g = 0; g < CL; g++) d[(u64)e * n + g * LO] = v[b][g];
            }
        }
    }
    cluster_sync();                                     // no tile leaves while read
}
#define CL_DS(NAME, CL, DSW) \
extern "C" __global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(256, 3) NAME(const u32* src, u32* dst, const u32* len, u64 n, int P) { \
    cl_ds_body<CL, DSW>(src, dst, len, n, P); }
CL_DS(w_cl2_dsw, 2, 1)
CL_DS(w_cl4_dsw, 4, 1)
CL_DS(w_cl2_dsrw, 2, 2)
CL_DS(w_cl4_dsrw, 4, 2)

// ------------------------------------------- reversal, smem + registers ---
// A 256-byte column set (64 words) a block of 512 threads, 2 blocks a
// multiprocessor: the left 128 bytes of each plane staged in shared memory
// (64 KiB, cp.async), the right 128 bytes held in registers (8 x 16 bytes a
// thread), both halves of a plane loaded by the same thread back to back
// (DRAM sees 256-byte lines). Left half written, registers moved into the
// tile, right half written.
extern "C" __global__ void __launch_bounds__(512, 2) w_hyb256(const u32* src, u32* dst, const u32* len, u64 n, int P) {
    constexpr int T = 512;
    extern __shared__ uint4 raw[];
    u32* tile = reinterpret_cast<u32*>(raw);
    const u32 s0 = smem_addr(tile);
    const u32* base = src + (u64)blockIdx.x * 64;
    uint4 keep[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int h = threadIdx.x + i * T;              // h < P * 8 (P = 512)
        const int r = h >> 3, c = h & 7;
        if (r < P) {
            cp16(s0 + (u32)(r * 128 + c * 16), base + (u64)r * n + c * 4);
            keep[i] = *reinterpret_cast<const uint4*>(base + (u64)r * n + 32 + c * 4);
        }
    }
    commit();
    wait_group<0>();
    __syncthreads();
    a0_write<T, 0, 0>(tile, dst + (u64)blockIdx.x * 64, len + (u64)blockIdx.x * 64, n, P, 0);
    __syncthreads();
    uint4* t4 = reinterpret_cast<uint4*>(raw);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int h = threadIdx.x + i * T;
        if ((h >> 3) < P) t4[h] = keep[i];
    }
    __syncthreads();
    a0_write<T, 0, 0>(tile, dst + (u64)blockIdx.x * 64 + 32, len + (u64)blockIdx.x * 64 + 32, n, P, 0);
}

// ----------------------------------- reversal, 256-byte column sets whole ---
// The walks put the pattern's ceiling at 0.93 of copy for 256-byte lines read
// and written a 16-byte piece a thread (0.88 with 4-byte lanes, 0.85 at 128
// bytes). A 256-byte column set down the 512 planes is 128 KiB: one block a
// multiprocessor, so the block must load and write fast. Loads: 16 cp.async
// pieces a row (a warp: 2 rows x 256 bytes). SV 1: stores of 16-byte pieces,
// 4 neighbouring columns a thread, each column read at its own reversed row;
// the four 8-lane groups of a warp read the 4 words in rotated order (row
// stride 64 words: banks 4q + (k + g) % 4, conflict-free). SV 0: 4-byte
// lanes (two warps a 256-byte row).
template <int T, int SV>
__device__ __forceinline__ void t256_body(const u32* src, u32* dst, const u32* len, u64 n, int P) {
    constexpr int G = 64;                               // words a row
    extern __shared__ uint4 raw[];
    u32* tile = reinterpret_cast<u32*>(raw);
    const u32 s0 = smem_addr(tile);
    const u64 u = blockIdx.x;
    const u32* base = src + u * G;
    for (int h = threadIdx.x; h < P * 16; h += T) {
        const int r = h >> 4, c = h & 15;
        cp16(s0 + (u32)(r * 256 + c * 16), base + (u64)r * n + c * 4);
    }
    commit();
    wait_group<0>();
    __syncthreads();
    if (SV) {
        const int q = threadIdx.x & 15, g = (threadIdx.x >> 3) & 3, step = T / 16;
        const uint4 lv = reinterpret_cast<const uint4*>(len + u * G)[q];
        const int L0 = (int)min(lv.x, (u32)P), L1 = (int)min(lv.y, (u32)P), L2 = (int)min(lv.z, (u32)P), L3 = (int)min(lv.w, (u32)P);
        uint4* d = reinterpret_cast<uint4*>(dst + u * G) + q;
        for (int e0 = threadIdx.x / 16; e0 < P; e0 += 4 * step) {
            uint4 out[4];
#pragma unroll
            for (int m = 0; m < 4; m++) {
                const int e = e0 + m * step;
                if (e < P) {
                    u32 w[4];
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        const int c = (k + g) & 3;
                        const int Lc = c == 0 ? L0 : c == 1 ? L1 : c == 2 ? L2 : L3;
                        w[k] = tile[(e < Lc ? Lc - 1 - e : e) * G + q * 4 + c];
                    }
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
                if (e0 + m * step < P) d[(u64)(e0 + m * step) * (n / 4)] = out[m];
        }
    } else {
        const int kk = threadIdx.x & 63, step = T / 64;
        const u32 lv = len[u * G + kk];
        const int L = lv > (u32)P ? P : (int)lv;
        u32* d = dst + u * G + kk;
        for (int e0 = threadIdx.x / 64; e0 < P; e0 += 8 * step) {
            u32 v[8];
#pragma unroll
            for (int m = 0; m < 8; m++) {
                const int e = e0 + m * step;
                if (e < P) v[m] = tile[(e < L ? L - 1 - e : e) * G + kk];
            }
#pragma unroll
            for (int m = 0; m < 8; m++)
                if (e0 + m * step < P) d[(u64)(e0 + m * step) * n] = v[m];
        }
    }
}
#define T256(NAME, T, SV) \
extern "C" __global__ void __launch_bounds__(T, 1) NAME(const u32* src, u32* dst, const u32* len, u64 n, int P) { \
    t256_body<T, SV>(src, dst, len, n, P); }
T256(w_t256_v16_1024, 1024, 1)
T256(w_t256_v16_512, 512, 1)
T256(w_t256_v16_256, 256, 1)
T256(w_t256_v4_1024, 1024, 0)

// Persistent 256-byte sets with the next set's first rows loading while one
// is written: a ring of SLOTS 256-byte row slots (896: 224 KiB), set i's row
// r in slot (i x P + r) mod SLOTS; while set i is written, rows [0, SLOTS - P)
// of set i + 1 load into the slots set i leaves free, the rest after.
template <int T>
__device__ __forceinline__ void ring_load(u32 s0, const u32* src, u64 n, u64 u, int slot0, int r0, int r1) {
    constexpr int SLOTS = 896;
    const u32* base = src + u * 64;
    for (int h = threadIdx.x + r0 * 16; h < r1 * 16; h += T) {
        const int r = h >> 4, c = h & 15;
        int sl = slot0 + r;
        if (sl >= SLOTS) sl -= SLOTS;
        cp16(s0 + (u32)(sl * 256 + c * 16), base + (u64)r * n + c * 4);
    }
}
template <int T>
__device__ __forceinline__ void t256_ring_body(const u32* src, u32* dst, const u32* len, u64 n, int P) {
    constexpr int SLOTS = 896, G = 64;
    extern __shared__ uint4 raw[];
    const u32* tile = reinterpret_cast<const u32*>(raw);
    const u32 s0 = smem_addr(raw);
    const u64 nunits = n / G;
    const int pre = SLOTS - P;                          // rows of the next set loaded during a write
    int slot = 0;
    if (blockIdx.x < nunits) ring_load<T>(s0, src, n, blockIdx.x, 0, 0, P);
    commit();
    const int q = threadIdx.x & 15, g = (threadIdx.x >> 3) & 3, step = T / 16;
    for (u64 u = blockIdx.x; u < nunits; u += gridDim.x) {
        const u64 un = u + gridDim.x;
        int next = slot + P;
        if (next >= SLOTS) next -= SLOTS;
        if (un < nunits) ring_load<T>(s0, src, n, un, next, 0, pre);
        commit();
        wait_group<1>();
        __syncthreads();
        const uint4 lv = reinterpret_cast<const uint4*>(len + u * G)[q];
        const int L0 = (int)min(lv.x, (u32)P), L1 = (int)min(lv.y, (u32)P), L2 = (int)min(lv.z, (u32)P), L3 = (int)min(lv.w, (u32)P);
        uint4* d = reinterpret_cast<uint4*>(dst + u * G) + q;
        for (int e0 = threadIdx.x / 16; e0 < P; e0 += 4 * step) {
            uint4 out[4];
#pragma unroll
            for (int m = 0; m < 4; m++) {
                const int e = e0 + m * step;
                if (e < P) {
                    u32 w[4];
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        const int c = (k + g) & 3;
                        const int Lc = c == 0 ? L0 : c == 1 ? L1 : c == 2 ? L2 : L3;
                        int sl = slot + (e < Lc ? Lc - 1 - e : e);
                        if (sl >= SLOTS) sl -= SLOTS;
                        w[k] = tile[sl * G + q * 4 + c];
                    }
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
                if (e0 + m * step < P) d[(u64)(e0 + m * step) * (n / 4)] = out[m];
        }
        __syncthreads();                                // set u's slots free
        if (un < nunits) ring_load<T>(s0, src, n, un, next, pre, P);
        commit();
        slot = next;
    }
}
extern "C" __global__ void __launch_bounds__(1024, 1) w_t256_ring_1024(const u32* src, u32* dst, const u32* len, u64 n, int P) { t256_ring_body<1024>(src, dst, len, n, P); }
extern "C" __global__ void __launch_bounds__(512, 1) w_t256_ring_512(const u32* src, u32* dst, const u32* len, u64 n, int P) { t256_ring_body<512>(src, dst, len, n, P); }
