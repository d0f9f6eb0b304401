# SPDX-License-Identifier: MIT
"""Memory traffic of embedding lookups and their backward as a GPU runs them (pure Python).

Counting an operator by the sizes of its arguments charges an embedding lookup for its whole
table, every step, whatever the batch; a GPU reads only the gathered rows. Its backward (dense
gradient) is a fill of the whole gradient table plus a sort of the indices and a segmented
reduction whose traffic grows with the number of looked-up indices, so a recommender's step time
grows with the batch even when its matmuls are tiny.

Source: PyTorch aten/src/ATen/native/cuda/Embedding.cu (embedding_dense_backward_cuda: grad_weight
= zeros, indices sorted with cuda::cub::radix_sort_pairs over end_bit = ceil(log2(num_weights))
bits) and EmbeddingBackwardKernel.cu (embedding_backward_cuda_kernel: segment offsets, partial
sums per segment, sum and scatter into the touched rows). PyTorch takes a single sort-free kernel
when there are at most 3072 indices; the sort path is counted at every size so that the work stays
linear in the batch (perf.work.linear_work), which overstates small lookups by a few kernels.
"""

import math

INDEX_BYTES = 8  # int64 indices and positions
SECTOR_BYTES = 32  # DRAM is read in 32-byte sectors: a row narrower than that still costs a sector
RADIX_BITS = 8  # bits sorted per pass of cub's onesweep radix sort (keys + values read and written)


def _row_bytes(dim: int, element_bytes: int) -> float:
    return float(max(dim * element_bytes, SECTOR_BYTES))


def gather_kernel(indices: int, dim: int, element_bytes: int) -> tuple[float, float]:
    """(bytes, elements written) of a forward lookup: read the indices and the gathered rows,
    write the output."""
    return (indices * (INDEX_BYTES + _row_bytes(dim, element_bytes) + dim * element_bytes),
            float(indices * dim))


def dense_backward_kernels(indices: int, num_weights: int, dim: int,
                           element_bytes: int) -> list[tuple[float, float]]:
    """(bytes, elements written) of each kernel of a dense embedding backward."""
    table = float(num_weights * dim * element_bytes)
    row = _row_bytes(dim, element_bytes)
    passes = max(1, math.ceil(math.ceil(math.log2(max(num_weights, 2))) / RADIX_BITS))
    pair = 2 * INDEX_BYTES  # a sorted key (index) and its value (position)
    kernels = [(table, float(num_weights * dim))]  # grad_weight = zeros
    kernels.append((indices * INDEX_BYTES, float(indices)))  # the sort's histogram of the keys
    kernels += [(indices * 2.0 * pair, float(indices))] * passes  # each radix pass reads and writes pairs
    kernels += [(indices * 2.0 * INDEX_BYTES, float(indices))] * 3  # segment starts, partials, offsets
    kernels.append((indices * (INDEX_BYTES + 2 * row), float(indices * dim)))  # partial sums of grad rows
    kernels.append((indices * 3.0 * row, float(indices * dim)))  # sum partials, read-modify-write rows
    return kernels
