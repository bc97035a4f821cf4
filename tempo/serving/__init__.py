"""Serving runtime (paper Section 4.4): dispatch tables, count collection, the fused
dispatch-and-count kernel, the out-of-process solver and the refresher that publishes
tables race-safely.  numpy-only except :mod:`.kernels` (torch) and :mod:`.triton_kernels`
(triton), which import their libraries where used."""
from .counters import CumulativeCounts, window_counts
from .tables import DispatchTable, effective_probabilities, replica_map, validate_table

__all__ = ["CumulativeCounts", "window_counts", "DispatchTable", "effective_probabilities", "replica_map",
           "validate_table"]
