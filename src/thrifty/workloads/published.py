# SPDX-License-Identifier: MIT
"""The models of the published GPU training throughput (data/gpu/gpu_training_throughput.csv and
gpu_training_throughput_small.csv), each
with the input, loss and optimizer its source trained it with, so thrifty can count the work of
one of their training steps (workloads.workcount) and calibrate its GPU roofline on them.

One entry per distinct (model, input) pair of the CSV (so DLE's and Lambda's BERT-large SQuAD rows,
whose `input` texts differ, get two keys with the same recipe). Optimizers: where the source used a
multi-tensor optimizer (apex FusedAdam / FusedLAMB in DLE BERT and Transformer) the counting one
is torch's with foreach=True (a few kernels over all tensors, as multi_tensor_apply launches);
where it used a plain torch optimizer of PyTorch <= 1.13 (per-parameter loops), foreach=False.
LAMB has AdamW's state and elementwise kernels plus two norms per tensor; AdamW stands in for it.
Counting runs on the meta device, in fp32 (bytes are fp32 sizes).

Where a published sample is not one counted sample:
- Transformer-big (DLE) is published in tokens/s with batch = --max-tokens per GPU. fairseq's
  throughput counts `ntokens`, the target tokens (with EOS), and fills a batch while
  sentences x max(source, target) length <= max tokens, bucketing by length. A counted sample is
  a pair of 32 + 32 tokens (WMT14 en-de mean, 32k BPE); StepWork.scaled(1/32) makes it per
  target token. Were source tokens counted too, the work per published token would be half.
- Transformer-base (Gavel) is published in sentences/s; its loader pads each shuffled batch of
  128 to the longest sentence (no bucketing): Multi30k sentences average ~13 tokens with BOS/EOS
  and the longest of 128 is ~28, so a counted sentence pair is padded to 28 tokens per side.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from thrifty.errors import WorkloadError
from thrifty.perf.work import StepWork
from thrifty.workloads import bert, gnmt, jasper, nnunet, ssd, tacotron2, transformer_nmt, transformer_xl, waveglow
from thrifty.workloads.resnet import resnet18_cifar, resnet50_imagenet
from thrifty.workloads.workcount import count_model_step

# Typical sentence lengths (tokens per side, after tokenisation, with EOS/BOS).
WMT14_PAIR_TOKENS = 32  # WMT14 en-de, 32k joined BPE: ~26 words -> ~30 subwords + EOS per side
WMT16_BUCKET_TOKENS = 25  # WMT16 en-de, 32k BPE, --train-max-length 50: bucketed sentences ~25 tokens
MULTI30K_PADDED_TOKENS = 28  # Multi30k ~13 tokens/sentence; batches of 128 are padded to the longest


class NeuMF(nn.Module):
    """NCF's NeuMF as DLE trains it (PyTorch/Recommendation/NCF neumf.py defaults): GMF and MLP
    branches with their own user/item embeddings (64 and 128 wide), MLP 256-256-128-64 with ReLU and
    dropout 0.5, a final Linear(64 + 64 -> 1). ML-20m: 138,493 users, 26,744 items
    (data/ml-20m/feature_spec_template.yaml, SOURCE_small.md 1.1)."""

    def __init__(self, users: int = 138_493, items: int = 26_744, factors: int = 64,
                 layers: tuple[int, ...] = (256, 256, 128, 64), dropout: float = 0.5) -> None:
        super().__init__()
        self.mf_user, self.mf_item = nn.Embedding(users, factors), nn.Embedding(items, factors)
        self.mlp_user, self.mlp_item = nn.Embedding(users, layers[0] // 2), nn.Embedding(items, layers[0] // 2)
        self.mlp = nn.ModuleList(nn.Linear(a, b) for a, b in zip(layers[:-1], layers[1:], strict=True))
        self.dropout = dropout
        self.final = nn.Linear(layers[-1] + factors, 1)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        user, item = pairs[:, 0], pairs[:, 1]
        gmf = self.mf_user(user) * self.mf_item(item)
        x = torch.cat([self.mlp_user(user), self.mlp_item(item)], dim=1)
        for layer in self.mlp:
            x = F.dropout(F.relu(layer(x)), self.dropout, self.training)
        return self.final(torch.cat([gmf, x], dim=1)).squeeze(1)


def _pair_batch(b: int, device) -> tuple:
    return torch.zeros(b, 2, dtype=torch.long, device=device), torch.zeros(b, device=device)


@dataclass(frozen=True)
class PublishedModel:
    """How to count one training step of a published model configuration."""

    key: str
    csv_model: str  # `model` column of gpu_training_throughput.csv
    csv_input: str  # `input` column
    unit: str  # `unit` column: what one published sample is
    make_model: Callable[[], nn.Module]
    make_batch: Callable[[int, torch.device], tuple]  # b counted samples -> (inputs, targets)
    loss_fn: Callable[..., torch.Tensor]
    make_optimizer: Callable[..., torch.optim.Optimizer]
    samples_per_unit: float = 1.0  # counted samples per published sample (1/32: a token of a pair)
    batch_unit_samples: float = 1.0  # published samples per unit of the batch_per_gpu column
    counted_sample: str = "one published sample"
    source: str = ""
    calibration_exclusion: str = ""  # why its rows cannot calibrate the kernels' model (empty: they can)


def _image_batch(b: int, device, shape: tuple[int, ...]) -> tuple:
    return torch.zeros(b, *shape, device=device), torch.zeros(b, dtype=torch.long, device=device)


def _sgd(momentum: float, weight_decay: float):
    return lambda params: torch.optim.SGD(params, lr=0.1, momentum=momentum, weight_decay=weight_decay,
                                          foreach=False)


def _adam(cls=torch.optim.Adam, foreach: bool = False, **kwargs):
    return lambda params: cls(params, lr=1e-4, foreach=foreach, **kwargs)


_DLE = "NVIDIA DeepLearningExamples (PyTorch)"
_RN50: dict[str, Any] = dict(csv_model="ResNet-50 v1.5", csv_input="224x224", unit="images/s", make_model=resnet50_imagenet,
             make_batch=partial(_image_batch, shape=(3, 224, 224)))
def _bert_pretraining(phase: int, seq: int, predictions: int) -> PublishedModel:
    """BERT-large pre-training, one phase of NVIDIA's recipe (sequence length, masked tokens)."""
    return PublishedModel(key=f"bert_large_pretrain_seq{seq}",
                          csv_model=f"BERT-large pre-training (phase {phase})",
                          csv_input=f"seq {seq}", unit="sequences/s",
                          make_model=partial(bert.BertForPreTraining, bert.BERT_LARGE),
                          make_batch=partial(bert.pretraining_batch, seq=seq, predictions=predictions),
                          loss_fn=bert.pretraining_loss, make_optimizer=_adam(torch.optim.AdamW, foreach=True),
                          source=f"{_DLE} BERT run_pretraining.py phase {phase} (FusedLAMB -> AdamW), "
                                 f"{predictions} masked/seq")


_SQUAD_LARGE: dict[str, Any] = dict(csv_model="BERT-large fine-tuning (SQuAD v1.1)", unit="sequences/s",
                    make_model=partial(bert.BertForQuestionAnswering, bert.BERT_LARGE),
                    make_batch=partial(bert.squad_batch, seq=384), loss_fn=bert.squad_loss,
                    make_optimizer=_adam(torch.optim.AdamW, foreach=True),
                    source=f"{_DLE} BERT run_squad.py (FusedAdam), seq 384")

_ENTRIES = [
    PublishedModel(key="resnet50_v1.5", **_RN50,
                   loss_fn=partial(F.cross_entropy, label_smoothing=0.1),
                   make_optimizer=_sgd(0.875, 3.0517578125e-05),
                   source=f"{_DLE} ConvNets resnet50v1.5 (torchvision v1.5 layout), label smoothing 0.1, "
                          "SGD momentum 0.875; Lambda runs the same code"),
    PublishedModel(key="resnet50_torchvision", csv_model="ResNet-50 (torchvision)", csv_input="224x224",
                   unit="images/s", make_model=resnet50_imagenet,
                   make_batch=partial(_image_batch, shape=(3, 224, 224)),
                   loss_fn=F.cross_entropy, make_optimizer=_sgd(0.9, 1e-4),
                   source="Gavel workloads/pytorch/image_classification/imagenet/main.py (PyTorch 1.4)"),
    PublishedModel(key="resnet18_cifar", csv_model="ResNet-18 (CIFAR variant, kuangliu)", csv_input="32x32",
                   unit="images/s", make_model=resnet18_cifar,
                   make_batch=partial(_image_batch, shape=(3, 32, 32)),
                   loss_fn=F.cross_entropy, make_optimizer=_sgd(0.9, 5e-4),
                   source="Gavel workloads/pytorch/image_classification/cifar10 (kuangliu pytorch-cifar)"),
    _bert_pretraining(phase=1, seq=128, predictions=20),
    _bert_pretraining(phase=2, seq=512, predictions=80),
    PublishedModel(key="bert_large_squad", csv_input="seq 384 (run_squad.sh --max_seq_length=384)",
                   **_SQUAD_LARGE),
    PublishedModel(key="bert_large_squad_lambda", csv_input="seq 384 (DLE run_squad.sh default)",
                   **_SQUAD_LARGE),
    PublishedModel(key="bert_base_squad", csv_model="BERT-base fine-tuning (SQuAD v1.1)",
                   csv_input="seq 384 (DLE run_squad.sh default)", unit="sequences/s",
                   make_model=partial(bert.BertForQuestionAnswering, bert.BERT_BASE),
                   make_batch=partial(bert.squad_batch, seq=384), loss_fn=bert.squad_loss,
                   make_optimizer=_adam(torch.optim.AdamW, foreach=True),
                   source=f"Lambda's fork of {_DLE} BERT run_squad.py (FusedAdam), seq 384"),
    PublishedModel(key="transformer_big_wmt14", csv_model="Transformer-big (transformer_wmt_en_de_big_t2t)",
                   csv_input="dynamic batching by tokens", unit="tokens/s",
                   make_model=transformer_nmt.FairseqTransformer,
                   make_batch=partial(transformer_nmt.fairseq_batch, src_len=WMT14_PAIR_TOKENS,
                                      tgt_len=WMT14_PAIR_TOKENS),
                   loss_fn=transformer_nmt.label_smoothed_loss,
                   make_optimizer=_adam(foreach=True, betas=(0.9, 0.997), eps=1e-9),
                   samples_per_unit=1.0 / WMT14_PAIR_TOKENS,
                   counted_sample=f"a sentence pair of {WMT14_PAIR_TOKENS}+{WMT14_PAIR_TOKENS} tokens; "
                                  "a published token is one target token (fairseq's ntokens/wps)",
                   source=f"{_DLE} Translation/Transformer (fairseq fork, FusedAdam), --max-tokens per GPU"),
    PublishedModel(key="transformer_base_multi30k", csv_model="Transformer-base (6 layers, d_model 512)",
                   csv_input="sentences", unit="sentences/s", make_model=transformer_nmt.JadoreTransformer,
                   make_batch=partial(transformer_nmt.jadore_batch, src_len=MULTI30K_PADDED_TOKENS,
                                      tgt_len=MULTI30K_PADDED_TOKENS),
                   loss_fn=transformer_nmt.jadore_loss,
                   make_optimizer=_adam(betas=(0.9, 0.98), eps=1e-9),
                   counted_sample=f"a sentence pair, each side padded to {MULTI30K_PADDED_TOKENS} tokens",
                   source="Gavel workloads/pytorch/translation (jadore801120 Transformer, PyTorch 1.4)"),
    PublishedModel(key="nnunet_2d", csv_model="nnU-Net 2D U-Net", csv_input="patch 192x160 (2D)",
                   unit="images(2D slices)/s", make_model=partial(nnunet.DynUNet, 2),
                   make_batch=partial(nnunet.unet_batch, patch=(192, 160)), loss_fn=nnunet.dice_ce_loss,
                   make_optimizer=_adam(), source=f"{_DLE} Segmentation/nnUNet (MONAI DynUNet), Adam"),
    PublishedModel(key="nnunet_3d", csv_model="nnU-Net 3D U-Net", csv_input="patch 128x128x128 (3D)",
                   unit="volumes(3D patches)/s", make_model=partial(nnunet.DynUNet, 3),
                   make_batch=partial(nnunet.unet_batch, patch=(128, 128, 128)), loss_fn=nnunet.dice_ce_loss,
                   make_optimizer=_adam(), source=f"{_DLE} Segmentation/nnUNet (MONAI DynUNet), Adam"),
    PublishedModel(key="ssd300", csv_model="SSD300 v1.1 (ResNet-50 backbone)", csv_input="300x300",
                   unit="images/s", make_model=ssd.SSD300, make_batch=ssd.ssd_batch, loss_fn=ssd.ssd_loss,
                   make_optimizer=_sgd(0.9, 5e-4),
                   source=f"{_DLE} Detection/SSD src/model.py, SGD momentum 0.9; Lambda runs the same code"),
]
_ENTRIES.append(
    PublishedModel(key="ncf_neumf", csv_model="NCF (NeuMF, DLE; MF dim 64 + MLP 256-256-128-64)",
                   csv_input="(user,item) pairs; 4 negatives per positive", unit="samples/s ((user,item) pairs incl. sampled negatives)",
                   make_model=NeuMF, make_batch=_pair_batch, loss_fn=F.binary_cross_entropy_with_logits,
                   make_optimizer=_adam(foreach=True, betas=(0.25, 0.5)),
                   source=f"{_DLE} Recommendation/NCF (FusedAdam -> Adam foreach), BCE, "
                          "pairs incl. 4 negatives per positive"))
_ENTRIES.append(
    PublishedModel(key="gnmt_v2", csv_model="GNMT v2 (4+4 layer LSTM, hidden 1024; DLE)",
                   csv_input="BPE shared vocab (32,000 merges); --train-max-length 50; bucketing (5 buckets)",
                   unit="tokens/s (source + target tokens, summed over GPUs)", make_model=gnmt.GNMT,
                   make_batch=partial(gnmt.gnmt_batch, src_len=WMT16_BUCKET_TOKENS, tgt_len=WMT16_BUCKET_TOKENS),
                   loss_fn=gnmt.gnmt_loss, make_optimizer=_adam(),
                   samples_per_unit=1.0 / (2 * WMT16_BUCKET_TOKENS),
                   batch_unit_samples=2.0 * WMT16_BUCKET_TOKENS,
                   counted_sample=f"a sentence pair of {WMT16_BUCKET_TOKENS}+{WMT16_BUCKET_TOKENS} tokens "
                                  "(bucketing pads little); a published sample is a source or target token, "
                                  "the batch column counts sentences",
                   source=f"{_DLE} Translation/GNMT (torch Adam, label smoothing 0.1); LSTMs counted as "
                          "cuDNN runs them (perf.rnn_kernels)"))


def _novograd_standin(foreach: bool):
    """Novograd (Jasper's per-tensor one; QuartzNet's apex FusedNovoGrad, multi-tensor) keeps one
    moment per element and one second moment per tensor: per element it reads the parameter, its
    gradient and the moment and writes two, as SGD with momentum does, which stands in for it (the
    per-tensor norms it also takes are left out)."""
    return lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.95, weight_decay=1e-3, foreach=foreach)


QUARTZNET_INPUT_BOUND = (
    "input-bound: 79-90 utterances/s per GPU at batch 48 and 72, TF32 and AMP alike, the ceiling that "
    "Jasper's AMP rows (64-76/s, 18x the FLOPs per utterance) approach too: the data pipeline (DALI speed "
    "perturbation and features on the GPU, audio decoding), not the step's kernels, sets it")
_ASR: dict[str, Any] = dict(make_batch=jasper.utterance_batch, loss_fn=jasper.ctc_loss,
                            counted_sample=f"an utterance padded to {jasper.PADDED_FRAMES} frames (16.8 s)")
_ENTRIES += [
    PublishedModel(key="jasper_10x5dr", csv_model="Jasper 10x5 dense-residual (Jasper Large, 333M params)",
                   csv_input="64 mel filterbanks, 10 ms stride; variable-length utterances padded to multiple of 16",
                   unit="utterances/s (sequences/s, summed over GPUs)", make_model=jasper.jasper_10x5_dr, make_optimizer=_novograd_standin(foreach=False), **_ASR,
                   source=f"{_DLE} SpeechRecognition/Jasper (Novograd -> SGD momentum), CTC"),
    PublishedModel(key="quartznet_15x5",
                   csv_model="QuartzNet 15x5 (shipped config quartznet15x5_speedp-online-1.15_speca.yaml; "
                             "README prose says '10x5')",
                   csv_input="64 mel filterbanks (config n_filt 64); time-channel separable 1D conv; "
                             "variable-length utterances",
                   unit="utterances/s (summed over GPUs)", make_model=jasper.quartznet_15x5, make_optimizer=_novograd_standin(foreach=True), **_ASR,
                   source=f"{_DLE} SpeechRecognition/QuartzNet (FusedNovoGrad -> SGD momentum foreach), CTC",
                   calibration_exclusion=QUARTZNET_INPUT_BOUND),
    PublishedModel(key="waveglow", csv_model="WaveGlow (DLE; 12 flows, groups 8, 8 WN layers x 512 channels, kernel 3)",
                   csv_input="80-ch mel -> audio segment of 8000 samples (--segment-length 8000)",
                   unit="audio samples/s (summed over GPUs)", make_model=waveglow.WaveGlow, make_batch=waveglow.segment_batch,
                   loss_fn=waveglow.waveglow_loss, make_optimizer=_adam(),
                   samples_per_unit=1.0 / waveglow.SEGMENT, batch_unit_samples=float(waveglow.SEGMENT),
                   counted_sample=f"a segment of {waveglow.SEGMENT} audio samples; the batch column counts segments",
                   source=f"{_DLE} SpeechSynthesis/Tacotron2 waveglow (Adam)"),
    PublishedModel(key="tacotron2",
                   csv_model="Tacotron 2 (DLE; enc 3 conv x512 k5 + BiLSTM 512; attention RNN 1024; decoder RNN 1024; "
                             "prenet 256; postnet 5 conv x512)",
                   csv_input="characters -> 80-channel mel frames (precomputed mels, --load-mel-from-disk); variable length",
                   unit="mel frames/s (sum of output mel lengths, summed over GPUs)", make_model=tacotron2.Tacotron2, make_batch=tacotron2.clip_batch,
                   loss_fn=tacotron2.tacotron2_loss,
                   make_optimizer=lambda params: torch.optim.Adam(params, lr=1e-3, weight_decay=1e-6, foreach=False),
                   samples_per_unit=1.0 / tacotron2.MEAN_FRAMES, batch_unit_samples=float(tacotron2.MEAN_FRAMES),
                   counted_sample=f"a clip padded to {tacotron2.TEXT_CHARS} characters and {tacotron2.MEL_FRAMES} "
                                  f"mel frames; a published sample is one of a clip's {tacotron2.MEAN_FRAMES} real "
                                  "frames on average, the batch column counts clips",
                   source=f"{_DLE} SpeechSynthesis/Tacotron2 (Adam, weight decay 1e-6)"),
]
for _name, _xl in (("base", transformer_xl.BASE), ("large", transformer_xl.LARGE)):
    _ENTRIES.append(PublishedModel(
        key=f"transformer_xl_{_name}",
        csv_model=(f"Transformer-XL {_name} ({_xl.layers} layers, d_model {_xl.d_model}, {_xl.heads} heads x "
                   f"{_xl.d_head}, d_inner {_xl.d_inner})"),
        csv_input=f"tgt_len {_xl.tgt_len}, mem_len {_xl.mem_len}",
        unit="tokens/s (target tokens = batch x tgt_len, summed over GPUs)",
        make_model=partial(transformer_xl.TransformerXL, _xl), make_batch=partial(transformer_xl.segment_batch, c=_xl),
        loss_fn=transformer_xl.model_loss, make_optimizer=_adam(torch.optim.AdamW),
        samples_per_unit=1.0 / _xl.tgt_len, batch_unit_samples=float(_xl.tgt_len),
        counted_sample=f"a segment of {_xl.tgt_len} target tokens with {_xl.mem_len} cached states per layer; "
                       "a published token is a target token, the batch column counts segments",
        source=f"{_DLE} LanguageModeling/Transformer-XL (jitlamb, a per-tensor LAMB -> AdamW)"))
PUBLISHED: dict[str, PublishedModel] = {e.key: e for e in _ENTRIES}

EXCLUDED: dict[str, str] = {
    "Mask R-CNN (ResNet-50-FPN)": "data-dependent work: the number of region proposals kept after NMS, "
                                  "the RoI shapes and the instance masks depend on the image, so one "
                                  "training step cannot be counted from shapes alone (meta device)",
    "DLRM": "hybrid model/data parallel with sparse (touched-rows) embedding updates and a custom "
            "CUDA interaction kernel; the 1- and 8-GPU rows train different models (SOURCE_small.md 1.2)",
    "GNMT (MLPerf": "MLPerf's implementation replaces DLE's kernels with fused attention, fused "
                    "cross-entropy and a distributed weight update: not the counted model",
}


def excluded_reason(csv_model: str) -> str | None:
    """Why a published model is not counted (EXCLUDED keys are the model names' first word(s))."""
    for prefix, reason in EXCLUDED.items():
        if csv_model.startswith(prefix):
            return reason
    return None


def lookup(csv_model: str, csv_input: str) -> PublishedModel:
    """The registry entry of one (model, input) pair of the published CSV."""
    for entry in _ENTRIES:
        if (entry.csv_model, entry.csv_input) == (csv_model, csv_input):
            return entry
    reason = excluded_reason(csv_model)
    if reason:
        raise WorkloadError(f"{csv_model} is not counted: {reason}")
    raise WorkloadError(f"no published model matches ({csv_model!r}, {csv_input!r}); "
                        f"known: {', '.join(sorted(PUBLISHED))}")


def rounded(work: StepWork) -> StepWork:
    """The work with whole FLOPs and bytes per kernel, as shipped in published_work.json."""
    return StepWork(work.kind, np.round(work.flops_fixed), np.round(work.flops_per_sample),
                    np.round(work.bytes_fixed), np.round(work.bytes_per_sample), np.round(work.outputs_fixed),
                    np.round(work.outputs_per_sample), work.param_count, float(round(work.gradient_bytes)),
                    float(round(work.activation_bytes_per_sample)), float(round(work.state_bytes)), work.count)


def count_published(entry: PublishedModel) -> StepWork:
    """Counted work of one training step per published sample (meta device, rounded)."""
    work = count_model_step(entry.make_model, entry.make_batch, entry.loss_fn, entry.make_optimizer,
                            device="meta")
    return rounded(work.scaled(entry.samples_per_unit) if entry.samples_per_unit != 1.0 else work).merged()
