# SPDX-License-Identifier: MIT
"""GPU memory (perf.gpu_memory): every per-GPU batch that a published recipe ran is accepted on the
GPU it ran on, and absurd batches are still refused."""

import numpy as np
import pytest

from thrifty.perf.gpu_calibration import load_published
from thrifty.perf.gpu_memory import GIB, max_local_batch
from thrifty.perf.roofline import read_gpu_specs

ROWS, WORKS, _ = load_published(for_calibration=False)  # every batch that ran, input-bound or not


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.model_key}-{r.gpu}-{r.gpus}-{r.precision}-{r.batch_per_gpu:g}")
def test_every_published_batch_fits_on_its_gpu(row):
    """Mutation caught: activations counted as every forward output (the old upper bound, which
    refused ResNet-50 AMP at 256 on a 16 GB GPU), or AMP's FP16 activations counted as FP32."""
    limit = float(max_local_batch(WORKS[row.model_key], row.spec.memory_gib * GIB, row.precision))
    assert row.batch_per_gpu <= limit


def test_an_absurd_batch_is_refused():
    """Mutation caught: the activations or the persistent state dropped from the memory model."""
    for key, work in WORKS.items():
        largest = max(r.batch_per_gpu for r in ROWS if r.model_key == key)
        assert float(max_local_batch(work, 80 * GIB, "fp32")) < 100 * largest, key
    # and a model whose weights and Adam state alone exceed the GPU fits no batch at all
    bert = WORKS["bert_large_squad"]
    assert float(max_local_batch(bert, bert.state_bytes * 0.9, "fp32")) == 0


def test_resnet50_amp_at_256_fits_on_a_t4():
    """The issue's refusal: ResNet-50 AMP at batch 256 ran on a real 16 GB T4."""
    t4 = read_gpu_specs()["t4"]
    assert float(max_local_batch(WORKS["resnet50_v1.5"], t4.memory_gib * GIB, "amp")) >= 256
    assert float(max_local_batch(WORKS["resnet50_v1.5"], t4.memory_gib * GIB, "fp32")) < 256
    assert np.isfinite(t4.memory_gib)
