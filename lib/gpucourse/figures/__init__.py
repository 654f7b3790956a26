"""What lectures draw: widgets and pictures, one module per course topic, and the roofline.

Holds: `threads` (module 1), `elementwise` and `reduction` (module 2), `matmul` (module 3),
`roofline`. May import: `gpucourse.kernels` and `gpucourse.simulator`.
"""

from . import elementwise, matmul, reduction, roofline, threads
from .elementwise import draw_views, draw_warp_sectors, positions, warp_positions, warp_sectors
from .reduction import (additions, blelloch_steps, draw_reduction_trees, draw_scan, hillis_steele_steps,
                        reduction_levels)
from .roofline import H100_SXM, Device, attainable, draw_roofline, intensity, seconds_at_least
from .threads import draw_launch, index_explorer, thread_map

__all__ = ["threads", "elementwise", "reduction", "matmul", "roofline",
           "draw_launch", "index_explorer", "thread_map",
           "draw_views", "draw_warp_sectors", "positions", "warp_positions", "warp_sectors",
           "additions", "blelloch_steps", "draw_reduction_trees", "draw_scan", "hillis_steele_steps",
           "reduction_levels",
           "Device", "H100_SXM", "attainable", "draw_roofline", "intensity", "seconds_at_least"]
