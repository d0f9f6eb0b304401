# SPDX-License-Identifier: MIT
"""The kernels of a recurrent layer (GRU, LSTM) as cuDNN runs it on a GPU, and of one step of a
recurrent cell (nn.GRUCell, nn.LSTMCell) as ATen's CUDA path runs it (pure Python).

Counted op by op, one GRU time step decomposes into some twenty matmuls and elementwise kernels
forward and as many backward; cuDNN, which PyTorch uses for nn.GRU / nn.LSTM on CUDA, runs one
layer as one GEMM of the input projections over all time steps, then per time step one recurrent
GEMM and one fused gate kernel (forward), one fused gate-gradient kernel and one recurrent GEMM
(backward), then the input-gradient and the two weight-gradient GEMMs over all steps (Appleyard,
Kocisky & Blunsom 2016, "Optimizing Performance of Recurrent Neural Networks on GPUs", the
optimisations cuDNN 5+ ships; NVIDIA cuDNN developer guide, "RNN functions").

A cell step on CUDA (ATen RNN.cpp: lstm_cell / gru_cell call _thnn_fused_lstm_cell /
_thnn_fused_gru_cell) is two GEMMs (input and hidden projections) and one fused gate kernel
forward; backward, one fused gate-gradient kernel (ATen's _thnn_fused_*_cell_backward, which also
sums the bias gradient over the batch: a second, reduction kernel), then the matmuls' own
gradients: two data-gradient and two weight-gradient GEMMs.

Kernels are (name, kind, FLOPs, bytes, output elements); bytes count 4-byte elements as counted
elsewhere (perf.work: FP32 sizes; AMP halves the per-sample part).
"""

from thrifty.perf.work import KIND_MATMUL, KIND_OTHER

GATES = {"gru": 3, "lstm": 4, "rnn_tanh": 1, "rnn_relu": 1}
ELEMENT_BYTES = 4

Kernel = tuple[str, int, float, float, float]


def _gemm(name: str, m: float, n: float, k: float) -> Kernel:
    return (name, KIND_MATMUL, 2.0 * m * n * k, ELEMENT_BYTES * (m * k + k * n + m * n), m * n)


def layer_forward(mode: str, steps: int, batch: int, inputs: int, hidden: int) -> list[Kernel]:
    """Forward kernels of one layer and direction."""
    gh = GATES[mode] * hidden
    kernels = [_gemm("rnn_input_gemm", steps * batch, gh, inputs)]
    for _ in range(steps):
        kernels.append(_gemm("rnn_recurrent_gemm", batch, gh, hidden))
        # gates of input and recurrent projections in, hidden (and cell) state in and out
        kernels.append(("rnn_gates", KIND_OTHER, 4.0 * batch * gh, ELEMENT_BYTES * batch * (2 * gh + 4 * hidden),
                        float(batch * hidden)))
    return kernels


def layer_backward(mode: str, steps: int, batch: int, inputs: int, hidden: int) -> list[Kernel]:
    """Backward kernels of one layer and direction (data and weight gradients)."""
    gh = GATES[mode] * hidden
    kernels: list[Kernel] = []
    for _ in range(steps):
        kernels.append(("rnn_gates_backward", KIND_OTHER, 6.0 * batch * gh,
                        ELEMENT_BYTES * batch * (3 * gh + 4 * hidden), float(batch * gh)))
        kernels.append(_gemm("rnn_recurrent_dgrad", batch, hidden, gh))
    kernels.append(_gemm("rnn_input_dgrad", steps * batch, inputs, gh))
    kernels.append(_gemm("rnn_input_wgrad", inputs, gh, steps * batch))
    kernels.append(_gemm("rnn_recurrent_wgrad", hidden, gh, steps * batch))
    return kernels


def rnn_kernels(mode: str, steps: int, batch: int, inputs: int, hidden: int, layers: int,
                directions: int, *, backward: bool) -> list[Kernel]:
    """All kernels of a stacked (optionally bidirectional) recurrent module, forward or backward."""
    per_layer = layer_backward if backward else layer_forward
    kernels = []
    for layer in range(layers):
        width = inputs if layer == 0 else hidden * directions
        for _ in range(directions):
            kernels += per_layer(mode, steps, batch, width, hidden)
    return kernels


def cell_kernels(mode: str, batch: int, inputs: int, hidden: int, *, backward: bool) -> list[Kernel]:
    """The kernels of one step of a GRU or LSTM cell, forward or backward."""
    gh = GATES[mode] * hidden
    if not backward:
        return [_gemm("cell_input_gemm", batch, gh, inputs), _gemm("cell_hidden_gemm", batch, gh, hidden),
                ("cell_gates", KIND_OTHER, 4.0 * batch * gh, ELEMENT_BYTES * (batch * (3 * gh + 4 * hidden) + 2 * gh),
                 float(batch * hidden))]
    return [("cell_gates_backward", KIND_OTHER, 6.0 * batch * gh,
             ELEMENT_BYTES * batch * (4 * gh + 4 * hidden), float(batch * gh)),
            ("cell_bias_grad", KIND_OTHER, float(batch * gh), ELEMENT_BYTES * (batch * gh + gh), float(gh)),
            _gemm("cell_input_dgrad", batch, inputs, gh), _gemm("cell_hidden_dgrad", batch, hidden, gh),
            _gemm("cell_input_wgrad", gh, inputs, batch), _gemm("cell_hidden_wgrad", gh, hidden, batch)]
