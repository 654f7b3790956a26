"""What test cells call: run a kernel against a NumPy spec, explain failures, enforce budgets.

Holds: `core` (`check_kernel`, launch plans, `CheckFailed`), `runner`, `threads` (module 1: `check_copies`),
the checks of `elementwise` and `reduction` (module 2), `matmul` (module 3), `conv` (module 4), `fusion` (module 5), `precision`
(module 6) and `tuning` (module 7: the tuning problems of the SGEMM, conv and softmax, and the checks of
assignment 7), `feedback`, and the differential test of the simulator against a GPU (`differential`, its
kernels and runner in `differential_cases`).
May import: `gpucourse.run`,
`gpucourse.simulator`, `gpucourse.kernels`.
"""

from .core import (TOLERANCES, Case, CheckFailed, blocks_1d, blocks_2d, blocks_needed, case, check_function,
                   check_kernel, one_block, one_block_2d, outer)
from .conv import (check_conv, check_conv_function, check_conv1d, check_loader, check_nhwc_rows, depthwise_pixels,
                   filter_gradients, gemm_tiles, halo_tile_reads, im2col_columns, input_gradients, nhwc_rows, output_tiles,
                   pooled_tiles)
from .elementwise import check_broadcast_zip, check_strided_map, tensor
from .fusion import (block_rows, check_attention, check_bias_relu, check_cross_entropy, check_gemm_epilogue,
                     check_layernorm, check_registers_only, check_row_group_max, check_row_kernel, global_bytes,
                     global_traffic, kv_reads_per_query_block, make_flash_exercise, memory_independent_of_n,
                     reads_per_element, thread_rows, warp_rows)
from .matmul import (barrier_before_reads, check_block_step, check_matrix_kernel, check_tile_copies,
                     check_transposed_product,
                     coalesced, coarsened_grid, conflict_free_shared_memory, float32_only, matmul_tiles, no_local_memory,
                     no_shared_memory, reads_per_thread, register_tiles, shared_reads_per_fma, tiled_reads,
                     transpose_tiles, warp_per_row, warp_reads_its_row)
from .precision import (bfloat16_inputs, bfloat16_reference, bit_fields, check_dot_rows, check_kahan_rows,
                        check_linear_fp16, check_loss_scale_update, check_master_sgd, check_mma_gemm,
                        check_mma_nt, check_scaled_gradient, check_softmax_fp16, check_to_bfloat16,
                        check_training_step, check_unscale)
from .reduction import (block_per_row, block_sums, check_axis_reduce, check_reduction, halo_reads, no_atomics,
                        one_block_reduce, pairs_per_thread, reads_each_element_once, shared_reads_per_element,
                        stencil_blocks, tree_reads, writes_each_element_once)
from .runner import REDUCTION_RTOL
from .threads import check_copies
from . import tuning  # noqa: E402 (after the checks: it builds on run.tuning)

__all__ = ["CheckFailed", "Case", "case", "check_kernel", "check_function", "check_copies", "TOLERANCES", "REDUCTION_RTOL", "blocks_needed",
           "one_block", "blocks_1d", "one_block_2d", "blocks_2d", "outer",
           "tensor", "check_strided_map", "check_broadcast_zip",
           "one_block_reduce", "block_per_row", "block_sums", "check_axis_reduce", "check_reduction",
           "reads_each_element_once", "writes_each_element_once",
           "pairs_per_thread", "stencil_blocks", "halo_reads", "shared_reads_per_element", "tree_reads", "no_atomics",
           "check_matrix_kernel", "transpose_tiles", "matmul_tiles", "register_tiles", "shared_reads_per_fma", "warp_per_row", "coarsened_grid",
           "coalesced", "reads_per_thread", "tiled_reads", "warp_reads_its_row", "conflict_free_shared_memory",
           "no_shared_memory", "no_local_memory", "float32_only", "barrier_before_reads", "check_transposed_product", "check_block_step",
           "check_tile_copies",
           "check_conv", "check_conv_function", "check_conv1d", "check_loader", "check_nhwc_rows", "nhwc_rows",
           "im2col_columns", "gemm_tiles",
           "output_tiles", "pooled_tiles",
           "depthwise_pixels", "filter_gradients", "input_gradients", "halo_tile_reads",
           "check_gemm_epilogue", "check_bias_relu", "check_layernorm", "check_row_kernel", "check_row_group_max", "check_registers_only", "make_flash_exercise", "check_cross_entropy", "check_attention",
           "warp_rows", "thread_rows", "block_rows", "global_bytes", "global_traffic", "reads_per_element", "kv_reads_per_query_block",
           "memory_independent_of_n",
           "bit_fields", "bfloat16_reference", "bfloat16_inputs", "check_linear_fp16", "check_kahan_rows",
           "check_to_bfloat16", "check_unscale", "check_loss_scale_update", "check_master_sgd", "check_training_step",
           "check_mma_gemm",
           "check_dot_rows", "check_scaled_gradient", "check_mma_nt", "check_softmax_fp16", "tuning"]
