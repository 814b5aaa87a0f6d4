"""``torch.nn.Module`` building blocks of the library's networks (imports torch: load lazily).

* ``MLP`` -- the ReLU multilayer perceptron behind every network of the library
  (behaviour cloning, the dueling Q-network, the AIRL / MaxEnt-IRL / DeepPQR baselines);
* ``StandardizedNetwork`` -- what ``to_torch()`` exports: standardization, the MLP and,
  for a dueling network, the head ``Q = V + A - mean A``.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["MLP", "StandardizedNetwork"]


class MLP(nn.Module):
    """ReLU MLP from ``sizes[0]`` inputs through hidden widths ``sizes[1:-1]`` to ``sizes[-1]`` outputs
    (affine layers with ReLU between them).

    Initialisation is ``nn.Linear``'s default distribution, ``U(-1/sqrt(in), 1/sqrt(in))`` for
    weights and biases, drawn from ``generator`` (layer by layer, weight then bias) on CPU, so a
    seed gives the same network on every device; the global torch RNG is not touched.

    Layout, chosen for speed at the library's sizes (widths 64-128, mini-batches of a few
    hundred rows, where per-operation costs matter as much as the arithmetic): hidden layer
    ``l`` stores its weight input-major, ``weight{l}`` of shape (in, out), so its forward is one
    ``addmm(b, h, W)`` (ReLU in place); the output layer stores ``out_weight`` (out, in) like
    ``nn.Linear`` and ``out_bias`` as a column (out, 1), and :meth:`forward_t`, the training
    forward, returns the output *transposed*, shape (n_out, batch): softmax and per-action
    reductions over a small first dimension are several times faster on CPU than over a small
    last dimension, and the backward pass's matrix products get their fast layout. Parameters
    are looked up in ``_parameters`` directly, without ``nn.Module.__getattr__``: every
    microsecond of a step counts at these sizes. :attr:`weights` and :attr:`biases` give every
    layer in ``nn.Linear`` layout.

    Parameters
    ----------
    sizes : sequence of int
        ``[n_in, *hidden, n_out]``.
    generator : torch.Generator
        Source of the initial weights.
    """

    def __init__(self, sizes, generator):
        super().__init__()
        self.sizes = tuple(int(s) for s in sizes)
        n_layers = len(self.sizes) - 1
        self._hidden_names = tuple((f"weight{i}", f"bias{i}") for i in range(n_layers - 1))
        for i, (fan_in, fan_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:])):
            bound = 1.0 / math.sqrt(fan_in)
            last = i == n_layers - 1
            shape = (fan_out, fan_in) if last else (fan_in, fan_out)
            W = torch.empty(shape).uniform_(-bound, bound, generator=generator)
            b = torch.empty(fan_out).uniform_(-bound, bound, generator=generator)
            if last:  # the output bias is a column: it broadcasts over the transposed output
                self.out_weight, self.out_bias = nn.Parameter(W), nn.Parameter(b.unsqueeze(1))
            else:
                self.register_parameter(f"weight{i}", nn.Parameter(W))
                self.register_parameter(f"bias{i}", nn.Parameter(b))

    def hidden(self, x):
        """The last hidden layer's activations (the input when there is no hidden layer)."""
        params = self._parameters  # direct lookups: this runs once per mini-batch
        for weight, bias in self._hidden_names:
            x = torch.addmm(params[bias], x, params[weight]).relu_()
        return x

    def forward(self, x):
        """Output, shape (batch, n_out)."""
        return self.forward_t(x).t()

    def forward_t(self, x):
        """Output transposed, shape (n_out, batch): the training layout (class docstring)."""
        params = self._parameters
        return torch.addmm(params["out_bias"], params["out_weight"], self.hidden(x).t())

    @property
    def weights(self) -> list:
        """Detached weights in ``nn.Linear`` layout (out, in), one per layer."""
        params = self._parameters
        return [params[w].detach().t() for w, _ in self._hidden_names] + [self.out_weight.detach()]

    @property
    def biases(self) -> list:
        """Detached biases, one per layer, shape (out,)."""
        params = self._parameters
        return [params[b].detach() for _, b in self._hidden_names] + [self.out_bias.detach()[:, 0]]

    @staticmethod
    def apply_layers(x, layers, *, hidden: bool = False):
        """The network with explicit ``[(weight, bias), ...]`` in ``nn.Linear`` layout (e.g.
        float64 copies of :attr:`weights` and :attr:`biases`) on ``x``."""
        last = len(layers) - 1
        for i, (W, b) in enumerate(layers):
            if i == last:
                return x if hidden else F.linear(x, W, b)
            x = torch.relu(F.linear(x, W, b))
        return x


class StandardizedNetwork(nn.Module):
    """Raw float32 inputs (m, d) -> ``MLP((x - mean) / scale)``; with ``dueling`` the output's
    column 0 is V and columns 1.. are A, and the result is ``Q = V + A - mean_a A`` (m, K)."""

    def __init__(self, mlp: MLP, mean, scale, *, dueling: bool):
        super().__init__()
        self.layers = nn.Sequential()
        weights, biases = mlp.weights, mlp.biases
        for i, (W, b) in enumerate(zip(weights, biases)):
            linear = nn.utils.skip_init(nn.Linear, W.shape[1], W.shape[0])
            with torch.no_grad():
                linear.weight.copy_(W.cpu())
                linear.bias.copy_(b.cpu())
            self.layers.append(linear)
            if i < len(weights) - 1:
                self.layers.append(nn.ReLU())
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.float32))
        self.dueling = bool(dueling)

    def forward(self, x):
        """The output at raw float32 inputs ``x`` (m, d): ``Q`` (m, K) with ``dueling``, else the
        MLP's output."""
        out = self.layers((x - self.mean) / self.scale)
        if not self.dueling:
            return out
        value, advantage = out[:, :1], out[:, 1:]
        return value + advantage - advantage.mean(dim=1, keepdim=True)
