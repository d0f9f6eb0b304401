# SPDX-License-Identifier: MIT
"""torch.distributed runtime: exact weighted aggregation, batch splitting, measured steps."""
