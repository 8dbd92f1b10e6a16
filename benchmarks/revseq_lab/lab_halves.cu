// Measured on an H200 (benchmarks/RESULTS.md, session 22): halves 0.66-0.75
// of copy on axis 0 and 0.70-0.78 on axis 1, against whole tiles' 0.82-0.85
// and 0.92-0.95; 8-byte stores on whole 256-byte tiles (axis 1) 0.942-0.947
// against 4-byte 0.917-0.921 (ported: index.cu's ix_write_pairs).
//
// Session 22 (appended to lab.cu: its typedefs, smem_addr, cp16, commit,
// wait_group): column sets of LW words reversed along an outer axis of P
// rows, on a (O, P, n) float32 tensor (axis 0: O = 1, n = 256 x 512; axis 1:
// O = 512, P = 256, n = 512), a uint32 length a (o, column): len[o * n + i].
//
// H = 1: one block a set, the whole P x LW tile staged (the production
// kernel's algorithm). H = 2 ("halves"): two blocks a set, block h writing
// output rows [h S, h S + S) (S = P / 2) from a tile of S rows: the source
// rows those outputs read are S rows of distinct residues mod S, so slot
// j = source row mod S; for slot j a column reads row j + S x ((j < L - S)
// xor h). So a column set twice as wide fits the same shared memory, the
// pair reading every row (one from DRAM, the other mostly from L2).
// AG (halves): 0, a thread a column (4-byte cp.async); 1, a thread 4
// columns, one 16-byte cp.async where the 4 agree on the row, else four.
// RN / RD: block b walks its rows (loads of whole tiles, and writes) from
// row b x RN / RD (mod the rows it writes) on, wrapping: blocks started one
// after another reach the same plane at about the same time.
// SV: words a thread stores (1, 2 or 4: 4-, 8-, 16-byte stores), the tile's
// words read in an order rotated by lane (no bank conflicts).
__device__ __forceinline__ void cp4(u32 s, const void* g) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(s), "l"(g) : "memory");
}

template <int LW, int H, int SV, int T, int AG, int RN = 0, int RD = 1>
__device__ __forceinline__ void hv_body(const u32* src, u32* dst, const u32* len, int O, int P, u64 n) {
    extern __shared__ uint4 raw[];
    u32* tile = reinterpret_cast<u32*>(raw);
    const u64 sets = n / LW;
    const u64 b = blockIdx.x;
    const int h = H == 2 ? (int)(b & 1) : 0;
    const u64 s = H == 2 ? b >> 1 : b;
    const u64 o = s / sets, c0 = (s - o * sets) * LW;
    const u32* sb = src + o * (u64)P * n + c0;
    u32* db = dst + o * (u64)P * n + c0;
    const u32* lb = len + o * n + c0;
    const int S = H == 2 ? P / 2 : P;
    const u32 s0 = smem_addr(tile);
    const int off = RN ? (int)((b * RN / RD) % (u64)S) : 0;   // rows walked from `off` on, wrapping
    if (H == 1) {
        for (int q = threadIdx.x; q < P * (LW / 4); q += T) {
            int r = q / (LW / 4) + off;
            const int c = q % (LW / 4);
            if (r >= P) r -= P;
            cp16(s0 + (u32)(r * LW * 4 + c * 16), sb + (u64)r * n + c * 4);
        }
    } else if (AG == 0) {
        const int kk = threadIdx.x % LW, step = T / LW;
        const u32 lv = lb[kk];
        const int thr = (lv > (u32)P ? P : (int)lv) - S;
        for (int j = threadIdx.x / LW; j < S; j += step) {
            const int r = j + (((j < thr) ^ h) ? S : 0);
            cp4(s0 + (u32)((j * LW + kk) * 4), sb + (u64)r * n + kk);
        }
    } else {
        const int pc = threadIdx.x % (LW / 4), step = T / (LW / 4);
        const uint4 lv = reinterpret_cast<const uint4*>(lb)[pc];
        const int t0 = (int)min(lv.x, (u32)P) - S, t1 = (int)min(lv.y, (u32)P) - S;
        const int t2 = (int)min(lv.z, (u32)P) - S, t3 = (int)min(lv.w, (u32)P) - S;
        for (int j = threadIdx.x / (LW / 4); j < S; j += step) {
            const int a0 = (j < t0) ^ h, a1 = (j < t1) ^ h, a2 = (j < t2) ^ h, a3 = (j < t3) ^ h;
            const u32 sd = s0 + (u32)((j * LW + pc * 4) * 4);
            const u32* g = sb + (u64)j * n + pc * 4;
            const u64 up = (u64)S * n;
            if (a0 == a1 && a1 == a2 && a2 == a3) {
                cp16(sd, g + (a0 ? up : 0));
            } else {
                cp4(sd, g + (a0 ? up : 0));
                cp4(sd + 4, g + 1 + (a1 ? up : 0));
                cp4(sd + 8, g + 2 + (a2 ? up : 0));
                cp4(sd + 12, g + 3 + (a3 ? up : 0));
            }
        }
    }
    commit();
    wait_group<0>();
    __syncthreads();
    // write rows [h S, h S + S) (H = 1: all P): a thread SV neighbouring columns
    const int q = threadIdx.x % (LW / SV), step = T / (LW / SV);
    const int lane = threadIdx.x & 31;
    const int rot = SV == 1 ? 0 : (lane >> (SV == 2 ? 4 : 3)) & (SV - 1);
    int L[SV];
#pragma unroll
    for (int i = 0; i < SV; i++) {
        const u32 lv = lb[q * SV + i];
        L[i] = lv > (u32)P ? P : (int)lv;
    }
    const int first = h * S;
    u32* d = db + q * SV;
    for (int e0 = threadIdx.x / (LW / SV); e0 < S; e0 += 8 * step) {
        u32 v[8][SV];
#pragma unroll
        for (int m = 0; m < 8; m++) {
            int e = e0 + m * step + off;
            e = first + (e >= S ? e - S : e);
            if (e0 + m * step < S) {
#pragma unroll
                for (int k = 0; k < SV; k++) {
                    const int i = (k + rot) & (SV - 1);
                    int Li = L[0];
#pragma unroll
                    for (int z = 1; z < SV; z++)
                        if (i == z) Li = L[z];
                    int sr = e < Li ? Li - 1 - e : e;
                    if (H == 2 && sr >= S) sr -= S;
                    const u32 w = tile[sr * LW + q * SV + i];
#pragma unroll
                    for (int z = 0; z < SV; z++)
                        if (i == z) v[m][z] = w;
                }
            }
        }
#pragma unroll
        for (int m = 0; m < 8; m++) {
            int e = e0 + m * step + off;
            e = first + (e >= S ? e - S : e);
            if (e0 + m * step < S) {
                u32* p = d + (u64)e * n;
                if (SV == 1) *p = v[m][0];
                else if (SV == 2) *reinterpret_cast<uint2*>(p) = make_uint2(v[m][0], v[m][SV > 1 ? 1 : 0]);
                else *reinterpret_cast<uint4*>(p) = make_uint4(v[m][0], v[m][SV > 1 ? 1 : 0], v[m][SV > 2 ? 2 : 0],
                                                               v[m][SV > 3 ? 3 : 0]);
            }
        }
    }
}
#define HVR(NAME, LW, H, SV, T, AG, MINB, RN, RD) \
extern "C" __global__ void __launch_bounds__(T, MINB) NAME(const u32* src, u32* dst, const u32* len, int O, int P, u64 n) { \
    hv_body<LW, H, SV, T, AG, RN, RD>(src, dst, len, O, P, n); }
#define HV(NAME, LW, H, SV, T, AG, MINB) HVR(NAME, LW, H, SV, T, AG, MINB, 0, 1)
// full tiles (one block a set)
HV(hv_full32_sv1, 32, 1, 1, 256, 0, 3)
HV(hv_full32_sv1_512, 32, 1, 1, 512, 0, 3)
HV(hv_full64_sv1, 64, 1, 1, 256, 0, 3)
HV(hv_full64_sv2, 64, 1, 2, 256, 0, 3)
HV(hv_full64_sv4, 64, 1, 4, 256, 0, 3)
HV(hv_full32_sv1_6, 32, 1, 1, 256, 0, 6)
// halves
HV(hv_half64_sv1_ag0, 64, 2, 1, 256, 0, 3)
HV(hv_half64_sv1, 64, 2, 1, 256, 1, 3)
HV(hv_half64_sv2, 64, 2, 2, 256, 1, 3)
HV(hv_half64_sv4, 64, 2, 4, 256, 1, 3)
HV(hv_half64_sv2_512, 64, 2, 2, 512, 1, 3)
HV(hv_half32_sv1, 32, 2, 1, 256, 1, 6)
HV(hv_half64_sv1_6, 64, 2, 1, 256, 1, 6)
HV(hv_half128_sv1, 128, 2, 1, 256, 1, 3)
HV(hv_half128_sv2, 128, 2, 2, 256, 1, 3)
HV(hv_half128_sv4, 128, 2, 4, 256, 1, 3)
// rotated walks (RN / RD rows a block)
HVR(hv_full32_sv1_rot43, 32, 1, 1, 256, 0, 3, 4, 3)
HVR(hv_full32_sv1_rot1, 32, 1, 1, 256, 0, 3, 1, 1)
HVR(hv_half64_sv1_rot23, 64, 2, 1, 256, 1, 3, 2, 3)
HVR(hv_half64_sv1_rot1, 64, 2, 1, 256, 1, 3, 1, 1)
// 8-byte stores on 128-byte lines; whole 256-byte sets of 512 rows (128 KiB: one block a multiprocessor)
HV(hv_full32_sv2, 32, 1, 2, 256, 0, 3)
HV(hv_full64_sv2_512, 64, 1, 2, 512, 0, 1)
HV(hv_full64_sv2_1024, 64, 1, 2, 1024, 0, 1)
HV(hv_full64_sv1_1024, 64, 1, 1, 1024, 0, 1)
