# SPDX-License-Identifier: MIT
"""The published models (workloads.published) match their papers' sizes and work, and the shipped
counted work (data/gpu/published_work.json) matches a fresh count."""

import csv
import functools
import json

import numpy as np
import pytest
import torch

from thrifty.data import data_path
from thrifty.errors import WorkloadError
from thrifty.perf.work import StepWork
from thrifty.workloads import bert
from thrifty.workloads.published import PUBLISHED, count_published, excluded_reason, lookup

SHIPPED = json.loads(data_path("gpu", "published_work.json").read_text())
STALE = "data/gpu/published_work.json is stale: rerun python -m thrifty.workloads.recount_published"

# Reference sizes. HF BertModel (with pooler) at vocab 30522: bert-large-uncased 335,141,888 and
# bert-base-uncased 109,482,240 parameters; DLE pads the vocabulary to 30528 (6 more rows).
BERT_LARGE_MODEL, BERT_BASE_MODEL = 335_141_888, 109_482_240
POOLER_LARGE, POOLER_BASE = 1024 * 1024 + 1024, 768 * 768 + 768


@functools.cache
def fresh(key: str) -> StepWork:
    return count_published(PUBLISHED[key])


def params(key: str) -> int:
    with torch.device("meta"):
        model = PUBLISHED[key].make_model()
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("key, expected", [
    ("resnet50_v1.5", 25_557_032),  # torchvision resnet50
    ("resnet18_cifar", 11_173_962),  # kuangliu pytorch-cifar ResNet18
    # NeuMF on ML-20m: (138,493 users + 26,744 items) x (64 + 128) embedding columns, MLP
    # 256-256-128-64 (106,944), final 128 -> 1 (129)
    ("ncf_neumf", 31_832_577),
    # + padded vocab rows, MLM transform (dense + LayerNorm) and decoder bias, NSP head
    ("bert_large_pretrain_seq128", BERT_LARGE_MODEL + 6 * 1024 + POOLER_LARGE + 2048 + 30528 + 2050),
    # + padded vocab rows - unused pooler + span head (2 logits)
    ("bert_large_squad", BERT_LARGE_MODEL + 6 * 1024 - POOLER_LARGE + 2 * 1024 + 2),
    ("bert_base_squad", BERT_BASE_MODEL + 6 * 768 - POOLER_BASE + 2 * 768 + 2),
    # fairseq big: 6 encoder layers (attention 4(d^2+d), FFN 2*d*4d + 5d, 2 LayerNorms) + 6 decoder
    # layers (+ cross-attention + LayerNorm) + 2 final LayerNorms + one shared 33712 x 1024 embedding
    ("transformer_big_wmt14", 6 * 12_596_224 + 6 * 16_796_672 + 4096 + 33712 * 1024),
])
def test_parameter_counts_match_the_published_architectures(key, expected):
    assert params(key) == expected
    assert SHIPPED["models"][key]["summary"]["param_count"] == expected


def test_bert_and_transformer_big_sizes_are_the_published_ones():
    assert 335e6 <= params("bert_large_pretrain_seq128") <= 340e6  # Devlin et al.: 340M
    assert 108e6 <= params("bert_base_squad") <= 111e6  # Devlin et al.: 110M
    assert 210e6 <= params("transformer_big_wmt14") <= 215e6  # Vaswani et al. big: 213M (37k vocab)


@pytest.mark.parametrize("key, published, rel", [
    ("jasper_10x5dr", 333e6, 0.005),  # DLE Jasper README: "Jasper Large, 333M params"
    ("quartznet_15x5", 18.9e6, 0.005),  # Kriman et al. 2020 (QuartzNet), Table 3: 15x5, 18.9M
])
def test_speech_models_have_their_published_sizes(key, published, rel):
    assert params(key) == pytest.approx(published, rel=rel)


def test_transformer_xl_base_has_the_parameters_of_its_configuration():
    d, inner, layers, heads, head = 512, 2048, 16, 8, 64
    per_layer = (d * 3 * heads * head + d * heads * head + heads * head * d  # qkv, r_net, o_net (no bias)
                 + d * inner + inner + inner * d + d + 2 * 2 * d)  # FFN with biases, 2 LayerNorms
    vocab = 267_735
    tied_output = 3 * d + 3 + vocab  # cluster logits (weights, biases) and the output biases
    expected = vocab * d + layers * per_layer + 2 * heads * head + tied_output
    assert params("transformer_xl_base") == expected


def test_transformer_xl_counts_work_per_target_token_with_memory():
    summary = SHIPPED["models"]["transformer_xl_base"]["summary"]
    non_embedding = summary["param_count"] - 267_735 * 512
    # 6 N per token for the layers (Kaplan et al. 2020) and more: attention over 384 keys, the
    # memory's k/v projections, the shortlist's logits (20,000 x 512 per token)
    assert 6 * non_embedding < summary["flops_per_sample"] < 3 * 6 * non_embedding


def test_tacotron2_decoder_runs_kernels_every_mel_frame(monkeypatch):
    """The decoder is a loop over mel frames (counted here at 2 and 4 frames of an 8-character
    text, which a count at full length takes minutes to repeat). Mutation caught: a decoder
    vectorised over frames (the kernel count would not grow with the frames)."""
    from thrifty.workloads import tacotron2
    full = tacotron2.MEL_FRAMES
    monkeypatch.setattr(tacotron2, "TEXT_CHARS", 8)
    kernels = []
    for frames in (2, 4):
        monkeypatch.setattr(tacotron2, "MEL_FRAMES", frames)
        kernels.append(count_published(PUBLISHED["tacotron2"]).kernels)
    per_frame = (kernels[1] - kernels[0]) / 2
    assert 50 <= per_frame <= 120  # ~25 forward, ~45 backward
    assert SHIPPED["models"]["tacotron2"]["summary"]["kernels_per_step"] >= per_frame * full


def test_resnet50_training_flops_per_image():
    # forward 4.1 GMACs at 224x224 (He et al. Table 1) = 8.2 GFLOP; backward ~ 2x forward
    assert fresh("resnet50_v1.5").summary()["flops_per_sample"] == pytest.approx(3 * 8.2e9, rel=0.10)


def test_bert_large_seq128_training_flops_per_sequence():
    c, seq = bert.BERT_LARGE, 128
    embedding = (c.vocab + c.max_positions + c.type_vocab) * c.hidden
    non_embedding = params("bert_large_pretrain_seq128") - embedding
    attention = 3 * c.layers * 2 * 2 * seq * seq * c.hidden  # QK^T and PV, forward + 2x backward
    expected = 6 * non_embedding * seq + attention  # Kaplan et al. 2020: 6 N FLOPs per token
    assert fresh("bert_large_pretrain_seq128").summary()["flops_per_sample"] == pytest.approx(expected, rel=0.15)


def test_transformer_big_is_counted_per_target_token():
    summary = SHIPPED["models"]["transformer_big_wmt14"]["summary"]
    # every token passes through all non-embedding weights once per side; the output projection
    # (the shared embedding) once per target token: ~ 6 x all parameters per token
    assert summary["flops_per_sample"] == pytest.approx(6 * summary["param_count"], rel=0.10)


@pytest.mark.parametrize("key", ["resnet18_cifar", "bert_base_squad"])
def test_shipped_work_equals_a_fresh_count(key):
    work, shipped = fresh(key), SHIPPED["models"][key]
    assert shipped["summary"] == work.summary(), STALE
    restored = StepWork.from_dict(shipped["step_work"])
    for name in ("kind", "flops_fixed", "flops_per_sample", "bytes_fixed", "bytes_per_sample",
                 "outputs_fixed", "outputs_per_sample", "activation_bytes_per_sample", "state_bytes", "count"):
        assert np.array_equal(getattr(restored, name), getattr(work, name)), STALE


def test_every_published_row_is_counted_or_excluded_with_a_reason():
    pairs = {}
    for name in ("gpu_training_throughput.csv", "gpu_training_throughput_small.csv"):
        with data_path("gpu", name).open(newline="", encoding="utf-8") as handle:
            pairs.update({(r["model"], r["input"]): r["unit"] for r in csv.DictReader(handle)})
    assert len(pairs) >= 24
    for (model, csv_input), unit in pairs.items():
        reason = excluded_reason(model)
        if reason:
            assert reason in SHIPPED["excluded"].values()
            continue
        entry = lookup(model, csv_input)
        assert entry.unit == unit
        assert (SHIPPED["models"][entry.key]["csv_model"], SHIPPED["models"][entry.key]["csv_input"]) == \
            (model, csv_input)
    assert set(SHIPPED["models"]) == set(PUBLISHED), STALE
    with pytest.raises(WorkloadError, match="data-dependent"):
        lookup("Mask R-CNN (ResNet-50-FPN)", "COCO images")
    with pytest.raises(WorkloadError, match="no published model"):
        lookup("GPT-9", "seq 1")
