// Instantiations of src/opendml/runtime/cuda/move.cu's kernel templates for a spread of arguments, compiled
// by nvcc (-I<that folder> -I<runtime folder>) to check the kernels without a GPU (tests/runtime).
#include "move.cu"

template __global__ void move_vec<u32, u16, 1, u32, 4, 1, 2, 0, 0>(const u32*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_vec<u32, u32, 1, u32, 4, 1, 6, 0, 0>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_vec<u32, u32, 4, u32, 4, 1, 1, 0, 1>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_vec<u16, u16, 2, u64, 8, 2, 2, 1, 0>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_vec<u8, u64, 3, u32, 4, 5, 9, 1, 1>(const u8*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_vec<u64, u64, 16, u64, 2, 11, 11, 0, 1>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_wcopy<5, u32, 4, 0>(const uint4*, uint4*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_wcopy<1, u64, 2, 1>(const uint4*, uint4*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_wcopy<3, u32, 1, 2>(const uint4*, uint4*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_wcopy<16, u32, 1, 0>(const uint4*, uint4*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_fill<u16, 3, u32, 8>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_fill<u64, 16, u64, 4>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_cvt<u32, u16, u32, 8, 1, 2, 0, 2, 0>(const u32*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_cvt<u32, u16, u32, 8, 1, 2, 0, 4, 0>(const u32*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_cvt<u32, u32, u32, 4, 1, 6, 0, 2, 0>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_cvt<u32, u16, u64, 8, 1, 2, 0, 4, 2>(const u32*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_cvt<u16, u64, u64, 2, 2, 9, 1, 1, 0>(const u16*, u64*, const ODML_GRID_CONSTANT odml_move_params);
