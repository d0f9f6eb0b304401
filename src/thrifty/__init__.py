# SPDX-License-Identifier: MIT
"""thrifty: train and simulate on the cloud for less.

The public API is re-exported lazily by the sub-packages: `thrifty.catalog`, `thrifty.perf`,
`thrifty.plan`, `thrifty.train`, `thrifty.workloads` and `thrifty.store`.
"""

from thrifty.errors import ThriftyError

__all__ = ["ThriftyError", "__version__"]
__version__ = "0.1.0"
