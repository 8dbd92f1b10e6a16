/* opendml kernel parameter blocks, read by the C kernels (runtime/cpu) and the CUDA kernels
 * (runtime/cuda/kernels.cu), mirrored by runtime/params.py's ctypes structures (tests/runtime/test_params.py checks
 * that they agree).
 *
 * Units: offsets and strides count elements of `element_size` bytes from the pointer the kernel is given (a CUDA
 * copy widened to 16-byte words counts words). Input strides are signed, output strides >= 0; only the first `rank`
 * (or `dims`) entries of an array are meaningful. Every field is 64 bits: one layout for every compiler. */
#ifndef OPENDML_PARAMS_H
#define OPENDML_PARAMS_H

#ifdef __CUDACC_RTC__
typedef long long odml_i64;
#else
#include <stdint.h>
typedef int64_t odml_i64;
#endif

#define ODML_MAX_RANK 8
#define ODML_MAX_SPATIAL 6

/* CopyPlan: out[out_offset + sum(i*out_strides)] = in[in_offset + sum(i*in_strides)]
 * for every index i < sizes (SLICE, SLICE1). */
typedef struct odml_copy_params {
    odml_i64 element_size;               /* bytes per element (word) */
    odml_i64 rank;
    odml_i64 count;                      /* prod(sizes) */
    odml_i64 in_offset;
    odml_i64 out_offset;
    odml_i64 sizes[ODML_MAX_RANK];
    odml_i64 in_strides[ODML_MAX_RANK];
    odml_i64 out_strides[ODML_MAX_RANK];
} odml_copy_params;

/* One spatial dimension of UNFOLD or FOLD. `size` and `image_stride` describe the image (UNFOLD's input, FOLD's
 * output). Block b's window element k sits at image position b*stride + k*dilation - start_padding. */
typedef struct odml_window_dim {
    odml_i64 size;
    odml_i64 image_stride;               /* elements between neighbours in the image */
    odml_i64 window;
    odml_i64 stride;
    odml_i64 dilation;
    odml_i64 start_padding;
    odml_i64 blocks;
    odml_i64 box;                        /* CUDA unfold_tile: blocks per box */
    odml_i64 box_extent;                 /* CUDA unfold_tile: staged region extent */
    odml_i64 box_count;                  /* CUDA unfold_tile: boxes along the dimension */
} odml_window_dim;

/* UnfoldPlan: out[n, c*K + k, b] = image[n, c, position(b, k)] or 0 in padding. */
typedef struct odml_unfold_params {
    odml_i64 element_size;
    odml_i64 dims;                       /* spatial dimensions */
    odml_i64 batch;
    odml_i64 channels;
    odml_i64 window_count;               /* K = prod(window) */
    odml_i64 block_count;                /* B = prod(blocks) */
    odml_i64 work_items;                 /* CUDA: threads' work slots or boxes */
    odml_i64 in_offset;
    odml_i64 in_batch_stride;
    odml_i64 in_channel_stride;
    odml_i64 out_offset;
    odml_i64 out_batch_stride;
    odml_i64 out_row_stride;
    odml_i64 out_column_stride;
    odml_i64 column_tiles;               /* CPU: 1 = read in column tiles across window rows */
    odml_i64 tile_columns;               /* CPU: columns per tile */
    odml_window_dim dim[ODML_MAX_SPATIAL];
} odml_unfold_params;

/* FoldPlan: image[n, c, p] = +0, then += columns[n, c*K + k, b] for every window element k in increasing
 * (row-major) order whose block b has b*stride + k*dilation - start_padding == p; float16 sums in float32 and rounds
 * once, integers wrap. */
#define ODML_SUM_INTEGER 0               /* two's complement wrap-around, any signedness */
#define ODML_SUM_FLOAT 1                 /* IEEE: float16 (in float32), float32, float64 */
typedef struct odml_fold_params {
    odml_i64 element_size;
    odml_i64 sum_kind;                   /* ODML_SUM_INTEGER or ODML_SUM_FLOAT */
    odml_i64 dims;
    odml_i64 batch;
    odml_i64 channels;
    odml_i64 window_count;
    odml_i64 block_count;
    odml_i64 work_items;                 /* CUDA: threads' work slots */
    odml_i64 in_offset;                  /* the columns tensor (N, C*K, B) */
    odml_i64 in_batch_stride;
    odml_i64 in_row_stride;
    odml_i64 in_column_stride;
    odml_i64 out_offset;                 /* the image (N, C, *spatial) */
    odml_i64 out_batch_stride;
    odml_i64 out_channel_stride;
    odml_window_dim dim[ODML_MAX_SPATIAL];
} odml_fold_params;

/* ScatterPlan (SLICE_GRAD): out[p] = in[i] where p = first + i*step for some i < taken in every dimension, else 0;
 * each output element written once. */
typedef struct odml_scatter_params {
    odml_i64 element_size;
    odml_i64 rank;
    odml_i64 count;                      /* prod(sizes): output elements */
    odml_i64 in_offset;
    odml_i64 out_offset;
    odml_i64 sizes[ODML_MAX_RANK];       /* output sizes */
    odml_i64 out_strides[ODML_MAX_RANK];
    odml_i64 first[ODML_MAX_RANK];       /* first output position receiving input */
    odml_i64 step[ODML_MAX_RANK];        /* >= 1 */
    odml_i64 taken[ODML_MAX_RANK];       /* input sizes */
    odml_i64 in_strides[ODML_MAX_RANK];  /* signed */
} odml_scatter_params;

/* MovePlan (the data-movement family), one pass per launch over its destination index space (dims ordered by
 * destination stride, innermost last; sizes and strides in elements of each side's type):
 * dst[dst_offset + sum(c*dst_stride)] = f(src[src_offset + sum(m(c)*src_stride)]), m the dimension's map (map_mode
 * 0: none; 1 CLAMP, 2 REFLECT, 3 SYMMETRIC, 4 WRAP as plan.AxisMap with map_shift and map_size; 5 CONSTANT: outside
 * [0, map_size) the element is fill_bits), f a conversion from src_type to dst_type (DataType values) after x*scale +
 * bias where scale_bias is 1 (float32 bits in scale32/bias32, float64 bits in scale64/bias64). A Fill pass writes
 * fill_bits (the destination word). div_magic/div_shift: the 32-bit multiply-shift division by `size`. */
#define ODML_MAX_MOVE_RANK 16
typedef struct odml_move_dim {
    odml_i64 size;
    odml_i64 src_stride;                 /* signed */
    odml_i64 dst_stride;
    odml_i64 map_mode;
    odml_i64 map_shift;
    odml_i64 map_size;
    odml_i64 div_magic;
    odml_i64 div_shift;
} odml_move_dim;

typedef struct odml_move_params {
    odml_i64 rank;
    odml_i64 count;                      /* prod(sizes) */
    odml_i64 src_offset;
    odml_i64 dst_offset;
    odml_i64 src_type;
    odml_i64 dst_type;
    odml_i64 scale_bias;
    odml_i64 scale32;
    odml_i64 bias32;
    odml_i64 scale64;
    odml_i64 bias64;
    odml_i64 fill_bits;
    odml_move_dim dim[ODML_MAX_MOVE_RANK];
} odml_move_params;

/* The CPU kernels that take one of the blocks above: X(NAME, name, parameter struct), kernel code ODML_KERNEL_<NAME>
 * its position. `name` is the kernel's everywhere: its C function odml_<name> (runtime/cpu/common.h), the
 * extension's function, the call cache's record (pass kind TUNED_PASS + its code) and the parameter union's member
 * (windows: UNFOLD's, window_sums: FOLD's). runtime/params.py's KERNELS mirrors the list (test_params.py checks). */
#define ODML_CPU_KERNELS(X)                         \
    X(COPY, copy, odml_copy_params)                 \
    X(WINDOWS, windows, odml_unfold_params)         \
    X(WINDOW_SUMS, window_sums, odml_fold_params)   \
    X(SCATTER, scatter, odml_scatter_params)

#define ODML_KERNEL_CODE_(NAME, name, type) ODML_KERNEL_##NAME,
enum { ODML_CPU_KERNELS(ODML_KERNEL_CODE_) ODML_KERNEL_COUNT };
#undef ODML_KERNEL_CODE_

#endif /* OPENDML_PARAMS_H */
