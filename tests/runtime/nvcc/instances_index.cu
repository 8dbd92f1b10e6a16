// Instantiations of src/opendml/runtime/cuda/index.cu's kernel templates for a spread of arguments, compiled
// by nvcc (-I<that folder> -I<runtime folder>) to check the kernels without a GPU (tests/runtime).
#include "index.cu"

template __global__ void ix_gather<uint4, u32, 1, 1, 1, 4>(IX_PARAMS);
template __global__ void ix_gather_positions<u32, u32, 2, 1, 4>(IX_PARAMS);
template __global__ void ix_gather_positions<u32, u32, 3, 1, 4>(IX_PARAMS);
template __global__ void ix_gather<u32, u32, 2, 2, 1, 4>(IX_PARAMS);
template __global__ void ix_reverse_tile<u16, u64, 4>(IX_PARAMS);
template __global__ void ix_reverse_tile<u32, u32, 4>(IX_PARAMS);
template __global__ void ix_reverse_rows<u32, u32, 3>(IX_PARAMS);
template __global__ void ix_reverse_rows<u64, u64, 2>(IX_PARAMS);
template __global__ void ix_reverse_pieces<u32, u32, 2>(IX_PARAMS);
template __global__ void ix_reverse_pieces<u64, u64, 3>(IX_PARAMS);
template __global__ void ix_reverse_pieces<u16, u32, 2>(IX_PARAMS);
template __global__ void ix_gather_row<u32, u32, 2, 1>(IX_PARAMS);
template __global__ void ix_gather_row<u64, u64, 3, 0>(IX_PARAMS);
template __global__ void ix_scatter<u32, u64, 1, 2, 1, 1, 1>(IX_PARAMS);
template __global__ void ix_owner<u32, 2, 1>(IX_PARAMS);
template __global__ void ix_scatter_group<u32, u32, 2>(IX_PARAMS);
template __global__ void ix_keys<u64, u64, 3, 2>(IX_PARAMS);
template __global__ void ix_apply<u16, u32, u32, 1, 1, 1, 1, 4>(IX_PARAMS);
template __global__ void ix_apply<uint4, u32, u32, 0, 1, 1, 2, 4>(IX_PARAMS);
template __global__ void ix_apply<uint4, u32, u32, 1, 1, 1, 1, 4>(IX_PARAMS);
template __global__ void ix_apply<u64, u64, u64, 1, 2, 1, 1, 1>(IX_PARAMS);
