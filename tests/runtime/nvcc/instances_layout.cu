// Instantiations of src/opendml/runtime/cuda/layout.cu's kernel templates for a spread of arguments, compiled
// by nvcc (-I<that folder> -I<runtime folder>) to check the kernels without a GPU (tests/runtime).
#include "layout.cu"

template __global__ void move_tile<u32, 3, u32, 2, 4>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_transpose<u32, 1, 32>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_transpose<u32, 3, 64>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_transpose<u8, 0, 64>(const u8*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_transpose<u16, 2, 32>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_transpose<u64, 14, 64>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_tile<u16, 4, u64, 3, 8>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_tile<u64, 14, u32, 4, 2>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_pad<u32, 3, u32>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_pad<u8, 1, u32>(const u8*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_pad<u16, 4, u64>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_pad<u64, 2, u32>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u32, 3, 4, 1>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u32, 3, 2, 1>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u8, 1, 4, 1>(const u8*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u16, 4, 2, 1>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u64, 2, 1, 1>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u32, 3, 1, 8>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u8, 2, 1, 8>(const u8*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padw<u16, 2, 2, 4>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padr<u32, 3, 2, 6, 2>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padr<u32, 3, 3, 8, 4>(const u32*, u32*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padr<u64, 3, 3, 8, 4>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padr<u8, 2, 1, 8, 0>(const u8*, u8*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padr<u16, 4, 3, 1, 0>(const u16*, u16*, const ODML_GRID_CONSTANT odml_move_params);
template __global__ void move_padr<u64, 1, 2, 4, 2>(const u64*, u64*, const ODML_GRID_CONSTANT odml_move_params);
