# SPDX-License-Identifier: MIT
"""The real data sets of the built-in workloads, read from the package (thrifty/data/datasets,
sources in its SOURCE.md) with numpy: no scikit-learn import (about 3 s per process) for 160 KB."""

import numpy as np

from thrifty.data import data_path


def digits() -> tuple[np.ndarray, np.ndarray]:
    """(images 1797 x 8 x 8 of pixel counts 0..16 as float64, digit labels), as sklearn's
    load_digits gives them."""
    table = np.loadtxt(data_path("datasets", "digits.csv.gz"), delimiter=",")
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)


def breast_cancer() -> tuple[np.ndarray, np.ndarray]:
    """(569 x 30 features, labels 0 malignant / 1 benign), as sklearn's load_breast_cancer."""
    table = np.loadtxt(data_path("datasets", "breast_cancer.csv.gz"), delimiter=",", skiprows=1)
    return table[:, :-1], table[:, -1].astype(np.int64)
