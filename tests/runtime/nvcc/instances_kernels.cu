// Instantiations of src/opendml/runtime/cuda/kernels.cu's kernel templates for a spread of arguments, compiled
// by nvcc (-I<that folder> -I<runtime folder>) to check the kernels without a GPU (tests/runtime).
#include "kernels.cu"

template __global__ void strided_copy<uint4, 3, 1, u32, 4, 0>(const uint4*, uint4*, const ODML_GRID_CONSTANT odml_copy_params);
template __global__ void strided_copy<uint4, 8, 8, u64, 4, 0>(const uint4*, uint4*, const ODML_GRID_CONSTANT odml_copy_params);
template __global__ void strided_copy<u64, 2, 2, u32, 4, 0>(const u64*, u64*, const ODML_GRID_CONSTANT odml_copy_params);
template __global__ void strided_copy<u32, 1, 0, u32, 4, 0>(const u32*, u32*, const ODML_GRID_CONSTANT odml_copy_params);
template __global__ void strided_copy<u16, 4, 1, u64, 8, 0>(const u16*, u16*, const ODML_GRID_CONSTANT odml_copy_params);
template __global__ void strided_copy<u8, 5, 0, u32, 16, 0>(const u8*, u8*, const ODML_GRID_CONSTANT odml_copy_params);
template __global__ void strided_copy<u64, 3, 0, u32, 4, 4>(const u64*, u64*, const ODML_GRID_CONSTANT odml_copy_params);
template __global__ void strided_copy<u64, 2, 0, u64, 4, 1>(const u64*, u64*, const ODML_GRID_CONSTANT odml_copy_params);
template __global__ void strided_copy<u64, 4, 0, u32, 4, 2>(const u64*, u64*, const ODML_GRID_CONSTANT odml_copy_params);
template __global__ void strided_copy<u64, 1, 0, u32, 4, 8>(const u64*, u64*, const ODML_GRID_CONSTANT odml_copy_params);
template __global__ void unfold_tile<u32, 2, 0>(const u32*, u32*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void unfold_tile<u32, 2, 1>(const u32*, u32*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void unfold_tile<u8, 1, 1>(const u8*, u8*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void unfold_tile<u64, 6, 0>(const u64*, u64*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void unfold_tile<u16, 3, 1>(const u16*, u16*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void unfold_tile<u64, 4, 1>(const u64*, u64*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void unfold1d_tile<u32, u32>(const u32*, u32*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void unfold1d_tile<u8, u64>(const u8*, u8*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void unfold_gather<u8, 1, u32, 1>(const u8*, u8*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void unfold_gather<u16, 2, u32, 1>(const u16*, u16*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void unfold_gather<u32, 3, u64, 2>(const u32*, u32*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void unfold_gather<u64, 6, u64, 2>(const u64*, u64*, const ODML_GRID_CONSTANT odml_unfold_params);
template __global__ void fold_gather<u32, 1, 2, u32, 2>(const u32*, u32*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold_gather<u16, 1, 2, u32, 2>(const u16*, u16*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold_gather<u32, 1, 3, u32, 1>(const u32*, u32*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold_gather<u64, 1, 1, u64, 4>(const u64*, u64*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold_gather<u8, 0, 6, u32, 1>(const u8*, u8*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold_gather<u16, 0, 4, u64, 4>(const u16*, u16*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold_gather<u32, 0, 5, u32, 2>(const u32*, u32*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold_gather<u64, 0, 1, u32, 1>(const u64*, u64*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold1d_tile<u32, 1, 256>(const u32*, u32*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold1d_tile<u16, 1, 128>(const u16*, u16*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold1d_tile<u64, 1, 64>(const u64*, u64*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold1d_tile<u8, 0, 32>(const u8*, u8*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void fold1d_tile<u64, 0, 128>(const u64*, u64*, const ODML_GRID_CONSTANT odml_fold_params);
template __global__ void scatter<uint4, 3, 0, u32, 1>(const uint4*, uint4*, const ODML_GRID_CONSTANT odml_scatter_params);
template __global__ void scatter<uint4, 2, 4, u64, 1>(const uint4*, uint4*, const ODML_GRID_CONSTANT odml_scatter_params);
template __global__ void scatter<u64, 8, 2, u32, 4>(const u64*, u64*, const ODML_GRID_CONSTANT odml_scatter_params);
template __global__ void scatter<u32, 1, 0, u32, 4>(const u32*, u32*, const ODML_GRID_CONSTANT odml_scatter_params);
template __global__ void scatter<u16, 4, 0, u64, 8>(const u16*, u16*, const ODML_GRID_CONSTANT odml_scatter_params);
template __global__ void scatter<u8, 5, 0, u32, 16>(const u8*, u8*, const ODML_GRID_CONSTANT odml_scatter_params);
