"""DeepSpeech2 (Amodei et al. 2016) for PyTorch and Keras 3, trained with CTC.

Input: spectrograms (batch, frames, freq_bins) float32, the same array in both frameworks
(each model adds the channel axis itself).  Two 2D convolutions over (time, frequency),
each without bias and followed by batch norm and a clipped ReLU, min(max(x, 0), 20):
32 filters of 11x41 with stride (2, 2), then 32 filters of 11x21 with stride (1, 2), padded
as PyTorch pads (half the kernel on each side), so time is halved once and frequency twice.
The (frames', 32 x freq') features go through ``model.layers`` bidirectional GRU layers of
``model.hidden`` units per direction (outputs concatenated), then a linear layer gives
``model.vocab_size`` logits per output frame; index 0 is the CTC blank.  This is the
layout of the deepspeech.pytorch reference with GRUs, without its batch norm between
recurrent layers.

GRU parity: PyTorch's GRU has an input and a recurrent bias (6 x units) and applies the
reset gate after the recurrent matmul; Keras' GRU does exactly that with
``reset_after=True`` (its default, and what cuDNN computes), so the counts match with no
extra weights.  Initialization is PyTorch's default in both (U(+-1/sqrt(fan_in)) for the
convolutions and the output layer, U(+-1/sqrt(units)) for the GRUs).

Nothing here imports a framework until a builder is called.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import keras
    import torch

    from bench.core.config import ModelConfig

CHANNELS = 32
# (kernel, stride, padding) over (time, frequency) for the two convolutions.
CONVS = (((11, 41), (2, 2), (5, 20)), ((11, 21), (1, 2), (5, 10)))
CLIP = 20.0
BN_EPS = 1e-5


def _out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def output_frames(frames: int) -> int:
    """Output frames (CTC time steps) for ``frames`` input frames."""
    for kernel, stride, pad in CONVS:
        frames = _out(frames, kernel[0], stride[0], pad[0])
    return frames


def output_bins(freq_bins: int) -> int:
    for kernel, stride, pad in CONVS:
        freq_bins = _out(freq_bins, kernel[1], stride[1], pad[1])
    return freq_bins


def max_label_length(frames: int) -> int:
    """Longest label sequence the synthetic data uses: half the output frames, so that CTC
    always has room for a blank between repeated characters."""
    return output_frames(frames) // 2


def check(model: ModelConfig) -> list[str]:
    """Problems with the sizes in ``model`` for this architecture."""
    problems = []
    if max_label_length(model.seq_len) < 1:
        problems.append(
            f"model.seq_len: {model.name} needs at least 3 spectrogram frames, got {model.seq_len}"
        )
    if model.vocab_size < 2:
        problems.append(
            f"model.vocab_size: {model.name} needs the CTC blank and at least one character, "
            f"got {model.vocab_size}"
        )
    return problems


def param_count(freq_bins: int, hidden: int, layers: int, vocab_size: int) -> int:
    """Parameters of the model, computed from its layout (the tests check the builds)."""
    total, in_ch = 0, 1
    for (kt, kf), _, _ in CONVS:
        total += in_ch * CHANNELS * kt * kf + 2 * CHANNELS  # conv, BN scale and shift
        in_ch = CHANNELS
    features = CHANNELS * output_bins(freq_bins)
    for _ in range(layers):
        total += 2 * (3 * hidden * features + 3 * hidden * hidden + 6 * hidden)
        features = 2 * hidden
    return total + features * vocab_size + vocab_size


def build_torch(model: ModelConfig) -> torch.nn.Module:
    """Logits (batch, output_frames, vocab_size) from spectrograms (batch, frames, bins)."""
    from torch import nn

    convs: list[nn.Module] = []
    in_ch = 1
    for kernel, stride, pad in CONVS:
        convs += [
            nn.Conv2d(in_ch, CHANNELS, kernel, stride=stride, padding=pad, bias=False),
            nn.BatchNorm2d(CHANNELS, eps=BN_EPS),
            nn.Hardtanh(0.0, CLIP, inplace=True),
        ]
        in_ch = CHANNELS

    class DeepSpeech2(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Sequential(*convs)
            features = CHANNELS * output_bins(model.freq_bins)
            self.rnn = nn.GRU(
                features, model.hidden, model.layers, batch_first=True, bidirectional=True
            )
            self.fc = nn.Linear(2 * model.hidden, model.vocab_size)

        def forward(self, spectrograms: torch.Tensor) -> torch.Tensor:
            x = self.conv(spectrograms.unsqueeze(1))  # (B, C, T', F')
            x = x.permute(0, 2, 1, 3).flatten(2)  # (B, T', C * F')
            x, _ = self.rnn(x)
            out: torch.Tensor = self.fc(x)
            return out

    return DeepSpeech2()


def build_keras(model: ModelConfig) -> keras.Model:
    """Logits (batch, output_frames, vocab_size) from spectrograms (batch, frames, bins)."""
    import keras
    from keras import layers

    def uniform(fan_in: int) -> keras.initializers.Initializer:
        bound = 1.0 / math.sqrt(fan_in)
        return keras.initializers.RandomUniform(-bound, bound)

    spectrograms = keras.Input((model.seq_len, model.freq_bins))
    x: Any = layers.Reshape((model.seq_len, model.freq_bins, 1))(spectrograms)
    in_ch = 1
    for kernel, stride, pad in CONVS:
        x = layers.ZeroPadding2D(pad)(x)  # PyTorch's symmetric padding, then "valid"
        x = layers.Conv2D(
            CHANNELS, kernel, strides=stride, padding="valid", use_bias=False,
            kernel_initializer=uniform(in_ch * kernel[0] * kernel[1]),
        )(x)  # fmt: skip
        x = layers.BatchNormalization(epsilon=BN_EPS, momentum=0.9)(x)
        x = layers.ReLU(max_value=CLIP)(x)
        in_ch = CHANNELS
    frames, bins = output_frames(model.seq_len), output_bins(model.freq_bins)
    x = layers.Reshape((frames, bins * CHANNELS))(x)  # (B, T', F' * C)
    for _ in range(model.layers):
        gru = layers.GRU(
            model.hidden,
            return_sequences=True,
            reset_after=True,
            kernel_initializer=uniform(model.hidden),
            recurrent_initializer=uniform(model.hidden),
            bias_initializer=uniform(model.hidden),
        )
        x = layers.Bidirectional(gru)(x)
    h = 2 * model.hidden
    logits = layers.Dense(
        model.vocab_size, kernel_initializer=uniform(h), bias_initializer=uniform(h)
    )(x)
    return keras.Model(spectrograms, logits, name="deepspeech2")
