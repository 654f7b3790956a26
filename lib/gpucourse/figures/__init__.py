"""What lectures draw: widgets and pictures, one module per course topic, and the roofline.

Holds: `threads` (module 1), `elementwise` and `reduction` (module 2), `matmul` (module 3),
`conv` (module 4), `fusion` (module 5), `precision` (module 6), `tuning` (module 7: the CPU cost model, Spearman's
rank correlation, the tuning heat map), `roofline` (the one table of data-sheet
figures, `DEVICES`, and `show_prediction`: a traced launch's time if every sector came from DRAM), `occupancy` (blocks per SM from registers and shared
memory). May import: `gpucourse.kernels` and `gpucourse.simulator`.
"""

from . import conv, elementwise, fusion, matmul, occupancy, precision, reduction, roofline, threads, tuning
from .elementwise import draw_views, draw_warp_sectors, positions, warp_positions, warp_sectors
from .occupancy import SM, SMS, Occupancy, blocks_per_sm
from .reduction import (additions, blelloch_steps, draw_reduction_trees, draw_scan, hillis_steele_steps,
                        reduction_levels)
from .roofline import (A100_SXM, DEVICES, H100_SXM, T4, TENSOR_FP16, Device, LaunchBound, attainable, draw_roofline,
                       intensity, launch_bound, seconds_at_least, show_prediction)
from .threads import draw_launch, index_explorer, thread_map

__all__ = ["threads", "elementwise", "reduction", "matmul", "conv", "fusion", "precision", "tuning", "roofline", "occupancy",
           "draw_launch", "index_explorer", "thread_map",
           "draw_views", "draw_warp_sectors", "positions", "warp_positions", "warp_sectors",
           "additions", "blelloch_steps", "draw_reduction_trees", "draw_scan", "hillis_steele_steps",
           "reduction_levels",
           "SM", "SMS", "Occupancy", "blocks_per_sm",
           "Device", "DEVICES", "TENSOR_FP16", "T4", "A100_SXM", "H100_SXM", "attainable", "draw_roofline", "intensity",
           "seconds_at_least", "LaunchBound", "launch_bound", "show_prediction"]
