# SPDX-License-Identifier: MIT
"""Precision (train.runtime), the loss scaler's skipped steps, learning-rate schedules in samples
(workloads.schedules) and their exact resume; where a rank's model and batches live."""

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from thrifty.checkpoint_file import load_state
from thrifty.errors import ThriftyError
from thrifty.train.loop import fresh_state, run_steps
from thrifty.train.runtime import Runtime, resolve_device
from thrifty.train.step import train_step
from thrifty.train.trainer import TrainConfig, run_training
from thrifty.transient.protocol import checkpoint_files
from thrifty.workloads import load_workload
from thrifty.workloads.schedules import Constant, Cosine, Step, Warmup

SCALED_MLP = str(Path(__file__).with_name("scaled_mlp_workload.py"))


def test_cosine_step_and_warmup_give_their_published_factors():
    """Mutations: the cosine without its (1 + cos) / 2, a milestone counted before it is reached,
    the warm-up ramp ending at `start` instead of the inner schedule."""
    assert Cosine()(0, 1000) == 1.0 and Cosine()(1000, 1000) == pytest.approx(0.0, abs=1e-12)
    assert Cosine()(500, 1000) == pytest.approx(0.5)
    assert Cosine(final=0.1)(1000, 1000) == pytest.approx(0.1)
    step = Step(milestones=(0.5, 0.75), gamma=0.1)
    assert [step(s, 100) for s in (0, 49, 50, 74, 75, 100)] == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01])
    warm = Warmup(samples=100, start=0.1, after=Constant())
    assert [warm(s, 1000) for s in (0, 50, 100, 500)] == pytest.approx([0.1, 0.55, 1.0, 1.0])


def test_the_builtins_train_on_their_recipes_schedules():
    """pytorch-cifar's cosine over the run; Goyal et al.'s 5-epoch warm-up then /10 at 30, 60, 80
    of 90 epochs. Mutation: a built-in left at the constant default."""
    cifar = load_workload("builtin:resnet18-cifar10")
    assert isinstance(cifar.lr_schedule, Cosine)
    imagenet = load_workload("builtin:resnet50-imagenet")
    epoch = imagenet.train_size
    total = 90 * epoch
    assert imagenet.lr_schedule(0, total) == pytest.approx(0.1)
    assert imagenet.lr_schedule(5 * epoch, total) == pytest.approx(1.0)
    assert imagenet.lr_schedule(45 * epoch, total) == pytest.approx(0.1)
    assert imagenet.lr_schedule(85 * epoch, total) == pytest.approx(0.001)


def test_every_step_trains_at_the_base_rate_times_the_schedule_at_the_samples_seen():
    """Mutation: the rate set from the step count (or not set at all) instead of the samples seen."""
    workload = load_workload(SCALED_MLP)
    state = fresh_state(workload, [32], total_samples=320.0)
    base = state.base_lrs[0]
    rates = []
    for _ in range(10):
        state.set_learning_rate()
        rates.append(state.optimizer.param_groups[0]["lr"])
        state.advance(0.0)
    expected = [base * workload.lr_schedule(32 * k, 320.0) for k in range(10)]
    assert rates == pytest.approx(expected)
    assert rates[0] == pytest.approx(0.1 * base) and rates[-1] < rates[5]


def test_a_run_ends_at_the_end_of_its_schedule(tmp_path):
    """The horizon is the run's samples: a cosine run's last rate is near 0. Mutation: the horizon
    left at 0 or at the workload's recipe length."""
    summary = run_training(TrainConfig(workload=SCALED_MLP, workers=1, steps=12, b_max=32, progress=False,
                                       checkpoint_every=0, run_dir=tmp_path))
    base = 0.05 / 256
    assert summary["final_lr"][0] == pytest.approx(base * Cosine()(11 * 32, 12 * 32))
    assert summary["final_lr"][0] < 0.02 * base


def _amp_state(workload, init_scale: float):
    state = fresh_state(workload, [32], runtime=Runtime(precision="amp"), total_samples=3200.0)
    state.scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    return state


def test_an_overflowing_amp_step_is_skipped_not_applied_and_the_scale_halves():
    """Mutations: the optimizer stepped directly (the scaler's step ignored): inf gradients reach
    the weights; the skip not reported in the row; the noise measured on inf gradients."""
    workload = load_workload(SCALED_MLP)
    state = _amp_state(workload, init_scale=2.0 ** 40)  # fp16 gradients overflow at this scale
    before = [p.detach().clone() for p in state.model.parameters()]
    rows = train_step(state.model, state.optimizer, workload, state.indices(0), 32, measure_noise=True,
                      runtime=state.runtime, scaler=state.scaler, world=(0, 1))
    assert rows[0].update_skipped == 1
    assert all(torch.equal(a, b) for a, b in zip(before, state.model.parameters(), strict=True))
    assert state.scaler.get_scale() == 2.0 ** 39
    assert not rows[0].has_noise
    run_steps(state, workload, steps=30)  # the scale backs off until the gradients fit
    assert state.skipped_updates >= 1 and state.scaler.get_scale() < 2.0 ** 20
    assert not all(torch.equal(a, b) for a, b in zip(before, state.model.parameters(), strict=True))


def test_an_amp_step_that_fits_is_applied_and_its_noise_is_unscaled():
    """Mutation: the noise inputs not divided by the loss scale (they come out scale^2 too big)."""
    workload = load_workload("builtin:tabular")
    plain = fresh_state(workload, [32])
    rows_fp32 = train_step(plain.model, plain.optimizer, workload, plain.indices(0), 32, measure_noise=True,
                           world=(0, 1))
    amp = fresh_state(workload, [32], runtime=Runtime(precision="amp"))
    rows_amp = train_step(amp.model, amp.optimizer, workload, amp.indices(0), 32, measure_noise=True,
                          runtime=amp.runtime, scaler=amp.scaler, world=(0, 1))
    assert rows_amp[0].update_skipped == 0
    assert rows_amp[0].small_grad_sq == pytest.approx(rows_fp32[0].small_grad_sq, rel=0.05)
    assert rows_amp[0].big_grad_sq == pytest.approx(rows_fp32[0].big_grad_sq, rel=0.05)


def test_bf16_runs_the_forward_pass_in_bfloat16_on_the_cpu():
    """Mutation: the autocast context dropped (the layers compute in float32)."""
    workload = load_workload("builtin:tabular")
    seen = []
    state = fresh_state(workload, [16], runtime=Runtime(precision="bf16"))
    state.model[0].register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    run_steps(state, workload, steps=2)
    assert seen == [torch.bfloat16, torch.bfloat16]
    assert all(p.dtype == torch.float32 for p in state.model.parameters())  # the weights stay fp32


def test_each_precision_sets_the_tf32_flags_the_plan_projects_for_it():
    """Mutations: activate() leaves the flags as they were; fp32 switches TF32 convolutions off
    (the plan then projects a GPU step 2-4x faster than the trainer runs it)."""
    from thrifty.catalog.gpus import read_gpu_specs
    from thrifty.perf.roofline import KIND_CONV, KIND_MATMUL, matrix_peak_flops
    a100 = read_gpu_specs()["a100"]
    flags = {KIND_MATMUL: lambda: torch.backends.cuda.matmul.allow_tf32, KIND_CONV: lambda: torch.backends.cudnn.allow_tf32}
    try:
        for precision in ("tf32", "fp32", "tf32"):
            Runtime(precision=precision).activate()
            for kind, flag in flags.items():
                rate, _ = matrix_peak_flops(a100, kind, precision)
                assert flag() == (rate == a100.tf32_tflops * 1e12), (precision, kind)
        assert torch.backends.cuda.matmul.allow_tf32  # tf32 last: both flags on
    finally:
        Runtime(precision="fp32").activate()
        torch.backends.cuda.matmul.allow_tf32 = False


def test_the_model_its_optimizer_state_and_its_batches_live_on_the_runtime_device():
    """On the meta device (shapes only), the one device besides the CPU every machine has.
    Mutations: the model left on the CPU where a device is asked for; a batch not moved there."""
    workload = load_workload("builtin:digits")
    runtime = Runtime(device=torch.device("meta"))
    state = fresh_state(workload, [8], runtime=runtime)
    assert {p.device.type for p in state.model.parameters()} == {"meta"}
    assert {b.device.type for b in state.model.buffers()} <= {"meta"}
    inputs, targets = runtime.move(workload.batch(state.indices(0), runtime.device))
    assert inputs.device.type == "meta" and targets.device.type == "meta"


def test_a_device_this_machine_lacks_or_a_bad_precision_is_one_clear_error():
    if not torch.cuda.is_available():
        with pytest.raises(ThriftyError, match="no CUDA device"):
            resolve_device("cuda")
        assert resolve_device(None) == torch.device("cpu")
    with pytest.raises(ThriftyError, match="not a device"):
        resolve_device("gpu0")
    with pytest.raises(ThriftyError, match="unknown --precision"):
        TrainConfig(precision="fp8")


def test_a_gpu_this_torch_has_no_kernels_for_is_refused_before_its_first_kernel(monkeypatch):
    """A V100 (7.0) under a build for sm_75 and later (PyPI's torch 2.13.0) is refused in one line as
    its rank activates it and by the dry run (which had blamed the workload for the CUDA error);
    a T4, and any GPU under a build with PTX at or below its capability, passes. CUDA is
    stood in for: no GPU here. Mutations caught: the check not called in activate or dry_run; the
    PTX entries read as binaries (an sm_90 GPU refused under compute_80 PTX)."""
    from thrifty.train import runtime
    from thrifty.train.dryrun import dry_run
    from thrifty.workloads import load_workload
    capability = {"value": (7, 0)}
    archs = {"value": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]}
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: archs["value"])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability["value"])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-16GB")
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    gpu = Runtime(torch.device("cuda", 0), "fp32")
    with pytest.raises(ThriftyError, match=r"cuda:0 \(Tesla V100-SXM2-16GB\) has compute capability 7.0, and "
                                           r"torch .* has kernels for sm_75, sm_80, .* only: install a torch built"):
        gpu.activate()
    with pytest.raises(ThriftyError, match="has compute capability 7.0"):
        dry_run(load_workload("builtin:digits"), gpu)
    capability["value"] = (7, 5)
    runtime.check_kernels_for(gpu.device)
    capability["value"], archs["value"] = (9, 0), ["sm_70", "compute_80"]
    runtime.check_kernels_for(gpu.device)  # PTX for 8.0 is compiled for a 9.0 GPU at load time
    archs["value"] = []  # a build that lists nothing: not judged
    runtime.check_kernels_for(gpu.device)


@pytest.mark.timeout(400)
def test_an_amp_run_with_a_schedule_resumes_exactly(tmp_path):
    """Two ranks, amp with early overflows (the scale backs off from 2^16) and a warm-up + cosine
    schedule over 24 steps: the run resumed from its step-12 checkpoint (as a preempted run is)
    ends bit for bit where the uninterrupted one does. Mutations: the schedule reset on resume
    (samples seen not restored); the scaler's state not restored (the resumed run starts at 2^16
    again and skips other steps)."""
    config = TrainConfig(workload=SCALED_MLP, workers=2, global_batch=32, policy="uniform", b_max=32,
                         precision="amp", progress=False, timeout_s=300, eval_every=1000, checkpoint_every=12,
                         steps=24, run_dir=tmp_path / "whole")
    whole = run_training(config)
    assert whole["skipped_updates"] >= 1  # the scaler's state matters to the second half
    halfway = next(f for f in checkpoint_files(tmp_path / "whole") if load_state(f)["step"] == 12)
    (tmp_path / "resumed").mkdir()
    shutil.copy(halfway, tmp_path / "resumed" / halfway.name)
    for log in ("steps.csv", "evals.csv"):  # ahead of the checkpoint, as a killed run leaves it
        shutil.copy(tmp_path / "whole" / log, tmp_path / "resumed" / log)
    resumed = run_training(replace(config, resume=True, run_dir=tmp_path / "resumed"))
    assert resumed["resumed_at_step"] == 12
    assert resumed["skipped_updates"] == whole["skipped_updates"]
    assert resumed["final_lr"] == whole["final_lr"]
    assert resumed["parameter_digests"] == whole["parameter_digests"]


def test_a_micro_batch_cuts_every_tensor_of_a_nested_batch():
    """slice_batch (the noise measurement's two halves) cuts tensors inside tuples, lists and
    mappings, and keeps everything else. Mutation: a mapping passed through uncut."""
    from thrifty.train.step import slice_batch
    batch = {"ids": torch.arange(6), "pair": (torch.arange(6) * 2, "tag"), "n": 3}
    cut = slice_batch(batch, 2, 4)
    assert cut["ids"].tolist() == [2, 3] and cut["pair"][0].tolist() == [4, 6]
    assert cut["pair"][1] == "tag" and cut["n"] == 3
