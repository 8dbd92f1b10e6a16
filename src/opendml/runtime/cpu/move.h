/* One pass of the data-movement family's move program (plan.MovePlan's Copy and Fill), as the compiled kernel
 * odml_move (move.c) takes it. Mirrored by MoveParams in runtime/cpu/backend.py (ctypes, same field order; every
 * field 64 bits, so no padding; tests/runtime/test_cpu_move.py checks the sizes).
 *
 * Copy: dst[dst_offset + sum(d*dst_strides)] = f(src[src_offset + sum(m(d)*src_strides)]) over `sizes`, where m is
 * the axis's map (map_mode 0: the identity; else i = d - map_shift, taken back into [0, map_size) by the mode, as
 * plan.AxisMap.source does) and f converts src_type to dst_type by CAST's rules (ops/cast.py), after x * scale + bias
 * where has_scale_bias (computed in float64 for a FLOAT64 source, else in float32).
 * Fill: every destination element gets the dst-size low bytes of fill_bits.
 *
 * Offsets and strides count elements of each side's type. Declared here, not in runtime/params.h: only the CPU
 * kernels read it. */
#ifndef OPENDML_CPU_MOVE_H
#define OPENDML_CPU_MOVE_H

#include "common.h"

#define ODML_CPU_MOVE_MAX_RANK 16

enum { ODML_MOVE_COPY = 0, ODML_MOVE_FILL = 1 };

/* plan.AxisMap modes */
enum { ODML_MAP_NONE = 0, ODML_MAP_CLAMP = 1, ODML_MAP_REFLECT = 2, ODML_MAP_SYMMETRIC = 3, ODML_MAP_WRAP = 4 };

/* DataType values (model/data_type.py) */
enum {
    ODML_T_FLOAT32 = 1, ODML_T_FLOAT16 = 2, ODML_T_UINT32 = 3, ODML_T_UINT16 = 4, ODML_T_UINT8 = 5,
    ODML_T_INT32 = 6, ODML_T_INT16 = 7, ODML_T_INT8 = 8, ODML_T_FLOAT64 = 9, ODML_T_UINT64 = 10,
    ODML_T_INT64 = 11
};
/* Their element sizes (index 0: none), the one copy every C file reads. */
static const int odml_type_size[12] = {0, 4, 2, 4, 2, 1, 4, 2, 1, 8, 8, 8};

typedef struct odml_cpu_move_params {
    int64_t kind;                            /* ODML_MOVE_COPY or ODML_MOVE_FILL */
    int64_t src_type;                        /* DataType values 1..11 (src_type unused by a fill) */
    int64_t dst_type;
    int64_t rank;                            /* 1..ODML_CPU_MOVE_MAX_RANK */
    int64_t src_offset;
    int64_t dst_offset;
    int64_t has_scale_bias;
    double scale;
    double bias;
    uint64_t fill_bits;
    int64_t sizes[ODML_CPU_MOVE_MAX_RANK];
    int64_t src_strides[ODML_CPU_MOVE_MAX_RANK];  /* signed */
    int64_t dst_strides[ODML_CPU_MOVE_MAX_RANK];  /* >= 0 */
    int64_t map_mode[ODML_CPU_MOVE_MAX_RANK];
    int64_t map_shift[ODML_CPU_MOVE_MAX_RANK];
    int64_t map_size[ODML_CPU_MOVE_MAX_RANK];     /* source extent of a mapped axis (>= 1) */
} odml_cpu_move_params;

/* One pass of a move program before its canonical form (plan.Copy or plan.Fill as the operators' lowerings give it):
 * n dimensions (sizes, both sides' strides, per dimension a map (map_mode 0: none) for a copy), the fill's bits.
 * odml_move_pack (move_params.c) packs its canonical form, the bytes CpuBackend._native_move_pass gives: 0, or -1
 * (the Python route builds it). */
#define ODML_MOVE_PASS_MAX_DIMS 64
typedef struct {
    int fill, n, has_scale_bias;
    int64_t src_type, dst_type, src_offset, dst_offset;
    int64_t sizes[ODML_MOVE_PASS_MAX_DIMS], src_strides[ODML_MOVE_PASS_MAX_DIMS];
    int64_t dst_strides[ODML_MOVE_PASS_MAX_DIMS];
    int64_t map_mode[ODML_MOVE_PASS_MAX_DIMS], map_shift[ODML_MOVE_PASS_MAX_DIMS];
    int64_t map_size[ODML_MOVE_PASS_MAX_DIMS];
    double scale, bias;
    uint64_t fill_bits;
} odml_move_pass;

int odml_move_pack(const odml_move_pass *in, odml_cpu_move_params *out);
/* plan.AxisMap.source: the source index of destination index d (mode ODML_MAP_*, 0: none) */
int64_t odml_map_source(int64_t mode, int64_t shift, int64_t size, int64_t d);

int odml_move(char *dst, const char *src, const odml_cpu_move_params *p, int threads, const char **error);

/* odml_move in two steps, for a pass run many times (the call cache, calls.c): odml_move_prepare checks the
 * parameters and lays the pass out once (ODML_OK with *out set, else ODML_EPARAM with a message or ODML_ENOMEM, *out
 * NULL); odml_move_run runs it on any buffers (the same bytes as odml_move; it only reads the prepared pass, so runs
 * on several threads may share one); odml_move_free releases it (NULL is allowed). */
typedef struct odml_move_prepared odml_move_prepared;
int odml_move_prepare(const odml_cpu_move_params *p, int threads, odml_move_prepared **out, const char **error);
int odml_move_run(const odml_move_prepared *m, char *dst, const char *src);
void odml_move_free(odml_move_prepared *m);

#endif /* OPENDML_CPU_MOVE_H */
