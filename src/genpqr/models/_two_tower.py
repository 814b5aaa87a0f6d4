r"""A two-tower (bilinear) policy model over actions described by features: stage 1 for
thousands of actions.

.. math::

    \pi(a \mid s) = \frac{\exp(f(s)^\top h(x_a))}{\sum_{a'} \exp(f(s)^\top h(x_{a'}))},

with ``f`` a ReLU MLP on the (standardized) states and ``h`` a ReLU MLP -- or, with no hidden
layer, an affine map -- on the (standardized) action features ``x_a``, both ending in an
embedding of width ``embedding_dim``; temperature 1. With no hidden layers it is
:class:`genpqr.stage1.ConditionalLogit`'s bilinear score ``[1, z(s)]^T W x_a`` with ``W`` of rank
at most ``embedding_dim``. An action never taken in the data gets the probability its features
predict.

**Interaction.** ``interaction="dot"`` (the default) is the score above. ``interaction="mlp"``
replaces the dot product by a small ReLU MLP ``g`` on the towers' elementwise product,

.. math::

    \mathrm{score}(s, a) = g\big(f(s) \odot h(x_a)\big)

(``interaction="mlp+dot"`` adds ``f(s)^T h(x_a)``), the generalized matrix factorization / neural
collaborative filtering interaction (He et al. 2017, "Neural collaborative filtering", WWW). It
contains the dot product (``g`` a sum) and every score that is a smooth function of a few bilinear
forms of the state and the action, e.g. ``G(f_1(s)^T h_1(x_a), f_2(s)^T h_2(x_a))``: each hidden
unit of ``g`` is a ridge function of the product, so ``g`` can apply a nonlinear link to the
bilinear indices that a conditional logit or a plain two-tower model leaves linear. It costs
``K x width`` hidden activations per row instead of ``K`` dot products.

Training (Adam on mini-batches, ``genpqr.models._torch_training``'s conventions) uses the full
softmax over the K actions when K is moderate, and a **sampled softmax with the log-Q
correction** when K is large: per mini-batch, ``m`` negatives are drawn (with replacement) from a
proposal ``Q`` -- the data's action frequencies mixed with a uniform floor, so actions never taken
are drawn too -- every candidate's logit is corrected by ``- log(m Q(a))`` (the expected number of
its draws), each row's own action is always among its candidates, and a negative that equals it
(an accidental hit) is masked. This is the importance-sampling approximation of the softmax's
gradient of Bengio & Senecal (2008, IEEE Trans. Neural Networks 19(4)) in the form of Jean et al.
(2015, "On using very large target vocabulary for neural machine translation", ACL), with the
logit correction of two-tower retrieval models (Yi et al. 2019, "Sampling-bias-corrected neural
modeling for large corpus item recommendations", RecSys). Prediction always normalises over all
K actions (never a sampled normaliser), in blocks of rows and of actions, in float64 on CPU.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from ..data import ActionTable
from ..data._validation import as_float_array
from ..exceptions import NotFittedError
from ..stage1._conditional_logit import action_codes, action_feature_matrix
from ..stage1._bilinear import bilinear_log_proba_at
from ._torch_training import (
    PREDICT_CHUNK,
    batch_mean,
    batches,
    check_hidden_layer_sizes,
    check_positive,
    evaluate,
    import_torch,
    make_optimizer,
    optimization_step,
    permutation,
    resolve_device,
    seeded_generator,
    standardization,
    to_tensor,
    training_session,
)

__all__ = ["TwoTowerClassifier", "LOSSES", "INTERACTIONS"]

#: The training losses by name (``"auto"``: full up to ``full_softmax_max_actions`` actions).
LOSSES = ("auto", "full", "sampled")
#: How the towers meet: the dot product, an MLP on their elementwise product, or both summed.
INTERACTIONS = ("dot", "mlp", "mlp+dot")


class TwoTowerClassifier(ClassifierMixin, BaseEstimator):
    r"""Two-tower policy ``pi(a|s) ~ exp(f(s)^T h(x_a))`` over actions with features ``x_a``.

    Parameters
    ----------
    action_features : ActionTable or array-like of shape (K, d), optional
        The actions' features, as for :class:`genpqr.stage1.ConditionalLogit`: a table (``y``
        holds its labels) or an array (``y`` holds row codes ``0..K-1``); None inside
        :class:`genpqr.GenPQR`, which passes the data's table (``bind_action_features``).
    state_layers, action_layers : tuple of int
        Hidden widths of the state tower ``f`` (default (64,)) and the action tower ``h``
        (default (): an affine map of the features).
    embedding_dim : int
        Width of both towers' output (the rank of the bilinear score).
    interaction : {"dot", "mlp", "mlp+dot"}
        How the towers' outputs make the score (module docstring): ``f(s)^T h(x_a)``, an MLP
        ``g(f(s) * h(x_a))`` on their elementwise product, or the sum of the two.
    interaction_layers : tuple of int
        Hidden widths of ``g`` (default (32,)); unused with ``interaction="dot"``.
    loss : {"auto", "full", "sampled"}
        ``"full"``: softmax over all K actions at every step; ``"sampled"``: sampled softmax with
        the log-Q correction (module docstring); ``"auto"``: full when
        ``K <= full_softmax_max_actions``.
    full_softmax_max_actions : int
    n_negatives : int
        ``m``, negatives drawn per mini-batch (shared by its rows) for the sampled softmax.
    proposal_floor : float in (0, 1]
        The proposal is ``Q = (1 - floor) * frequency + floor / K``.
    learning_rate, batch_size, max_epochs, weight_decay
        Adam's step size, rows per mini-batch, passes over the data, L2 penalty.
    block_size : int
        At most this many (row, action) scores at a time when predicting.
    random_state : int, Generator or None
        Seeds the initial weights, the shuffles and the negatives (one ``torch.Generator``).
    device : {"cpu", "cuda", "cuda:N", "auto"}
        Where it trains; the fitted towers are kept on CPU and predict in float64.
    verbose : bool
        Print each epoch's loss on stdout.
    progress : bool or None
        A bar over the epochs on stderr with the last epoch's loss, shown once training has run 2
        seconds (None: only on a terminal; False: never). :class:`genpqr.GenPQR` passes its own
        ``progress`` to a model left at None.

    Attributes
    ----------
    classes_ : ndarray of shape (K,)
    action_features_ : ndarray of shape (K, d)
    n_features_in_ : int
    state_network_, action_network_ : genpqr.models._torch_modules.MLP
    interaction_network_ : genpqr.models._torch_modules.MLP or None
        ``g`` (``embedding_dim`` inputs, one output); None with ``interaction="dot"``.
    loss_ : str
        ``"full"`` or ``"sampled"``, the loss used.
    proposal_ : ndarray of shape (K,) or None
        ``Q`` of the sampled softmax.
    loss_curve_ : list of float
        Mean training loss of every epoch (for ``"sampled"``, the sampled loss: not the log loss).
    epoch_seconds_ : list of float
        Wall time of every epoch.
    n_iter_ : int
    device_ : str
    """

    def __init__(self, action_features=None, state_layers=(64,), action_layers=(), embedding_dim=16, loss="auto",
                 full_softmax_max_actions=2048, n_negatives=256, proposal_floor=0.1, learning_rate=5e-3,
                 batch_size=256, max_epochs=40, weight_decay=0.0, block_size=2 ** 20, random_state=None,
                 verbose=False, device="cpu", interaction="dot", interaction_layers=(32,), progress=None):
        self.action_features = action_features
        self.state_layers = state_layers
        self.action_layers = action_layers
        self.embedding_dim = embedding_dim
        self.interaction = interaction
        self.interaction_layers = interaction_layers
        self.loss = loss
        self.full_softmax_max_actions = full_softmax_max_actions
        self.n_negatives = n_negatives
        self.proposal_floor = proposal_floor
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.weight_decay = weight_decay
        self.block_size = block_size
        self.random_state = random_state
        self.verbose = verbose
        self.device = device
        self.progress = progress

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, sample_weight=None):
        """Fit both towers to the choices ``y`` in states ``X`` (n, d_s); returns self."""
        settings = self._check_params()
        features, classes = action_feature_matrix(self.action_features, "TwoTowerClassifier")
        X = as_float_array(X, "X", ndim=2, allow_1d_as_column=True)
        codes = action_codes(y, classes, X.shape[0], "TwoTowerClassifier")
        w = _check_weights(sample_weight, X.shape[0])
        K = features.shape[0]
        loss = settings["loss"] if settings["loss"] != "auto" else \
            ("full" if K <= int(self.full_softmax_max_actions) else "sampled")
        self.n_features_in_, self.classes_, self.action_features_ = X.shape[1], classes, features
        self.mean_, self.scale_ = standardization(X, True)
        self.action_mean_, self.action_scale_ = standardization(features, True)
        self.loss_ = loss
        self.proposal_ = proposal(codes, K, w, float(self.proposal_floor)) if loss == "sampled" else None
        self._train(X, codes, w, settings)
        return self

    def _check_params(self) -> dict:
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if self.interaction not in INTERACTIONS:
            raise ValueError(f"interaction must be one of {INTERACTIONS}, got {self.interaction!r}")
        floor = self.proposal_floor
        if not (np.isscalar(floor) and 0 < floor <= 1):
            raise ValueError(f"proposal_floor must be a number in (0, 1], got {floor!r}")
        check_positive(self.full_softmax_max_actions, "full_softmax_max_actions", integer=True)
        check_positive(self.block_size, "block_size", integer=True)
        return dict(
            loss=self.loss, state=check_hidden_layer_sizes(self.state_layers),
            action=check_hidden_layer_sizes(self.action_layers),
            pair=check_hidden_layer_sizes(self.interaction_layers),
            dim=check_positive(self.embedding_dim, "embedding_dim", integer=True),
            m=check_positive(self.n_negatives, "n_negatives", integer=True),
            lr=check_positive(self.learning_rate, "learning_rate"),
            batch=check_positive(self.batch_size, "batch_size", integer=True),
            epochs=check_positive(self.max_epochs, "max_epochs", integer=True),
            decay=check_positive(self.weight_decay, "weight_decay", allow_zero=True),
            device=resolve_device(self.device))

    def _train(self, X, codes, w, cfg) -> None:
        torch = import_torch()
        from ._torch_modules import MLP

        device, generator = cfg["device"], seeded_generator(self.random_state)
        with training_session(device):
            f = MLP((X.shape[1], *cfg["state"], cfg["dim"]), generator).to(device)
            h = MLP((self.action_features_.shape[1], *cfg["action"], cfg["dim"]), generator).to(device)
            g = None if self.interaction == "dot" else MLP((cfg["dim"], *cfg["pair"], 1), generator).to(device)
            params = [*f.parameters(), *h.parameters(), *(g.parameters() if g is not None else ())]
            adam = make_optimizer("adam", params, lr=cfg["lr"], weight_decay=cfg["decay"])
            score = _TorchScore(g, self.interaction)
            data = dict(S=to_tensor(X, self.mean_, self.scale_, device),
                        A=to_tensor(self.action_features_, self.action_mean_, self.action_scale_, device),
                        y=torch.as_tensor(codes, dtype=torch.int64).to(device),
                        w=torch.from_numpy((w / w.mean()).astype(np.float32)).to(device))
            if self.loss_ == "sampled":
                data["Q"] = torch.from_numpy(self.proposal_.astype(np.float32))
                data["logmQ"] = torch.log(cfg["m"] * data["Q"]).to(device)
            self.loss_curve_, self.epoch_seconds_ = [], []
            bar = _epoch_bar(self.progress, cfg["epochs"], self.loss_)
            for epoch in range(cfg["epochs"]):
                start = time.perf_counter()
                self.loss_curve_.append(self._epoch(f, h, score, adam, data, cfg, generator))
                self.epoch_seconds_.append(time.perf_counter() - start)
                if bar is not None:
                    bar.set_postfix_str(f"{self.loss_} loss {self.loss_curve_[-1]:.5f}", refresh=False)
                    bar.update(1)
                if self.verbose:
                    print(f"[TwoTowerClassifier] epoch {epoch + 1}/{cfg['epochs']}  {self.loss_} loss "
                          f"{self.loss_curve_[-1]:.5f}")
            if bar is not None:
                bar.close()
        self.state_network_, self.action_network_ = f.to("cpu"), h.to("cpu")
        self.interaction_network_ = None if g is None else g.to("cpu")
        self.device_, self.n_iter_ = str(device), cfg["epochs"]

    def _epoch(self, f, h, score, adam, data, cfg, generator) -> float:
        """One shuffled pass; returns the mean (weighted) training loss."""
        torch = import_torch()
        n, m = data["S"].shape[0], cfg["m"]
        perm = permutation(n, generator, data["S"].device)
        losses = []
        for start, stop in batches(n, cfg["batch"]):
            rows = perm[start:stop]
            state, chosen, weight = f(data["S"].index_select(0, rows)), data["y"].index_select(0, rows), \
                data["w"].index_select(0, rows)
            if self.loss_ == "full":
                logits = score.matrix(state, h(data["A"]))  # (B, K)
                picked = torch.log_softmax(logits, dim=1).gather(1, chosen[:, None])[:, 0]
            else:
                negatives = torch.multinomial(data["Q"], m, replacement=True, generator=generator).to(state.device)
                picked = _sampled_log_softmax(state, h, score, data, chosen, negatives)
            loss = (picked * weight).sum().div(-(stop - start))
            optimization_step(loss, adam)
            losses.append(loss.detach())
        return batch_mean(losses, n, cfg["batch"])

    # ------------------------------------------------------------------ prediction
    def _check_fitted(self):
        if not hasattr(self, "state_network_"):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet; call fit(X, y) before "
                                 "using it")

    def _towers(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``f(s)`` (n, e) and ``h(x_a)`` (K, e) in float64."""
        self._check_fitted()
        X = as_float_array(X, "X", ndim=2, allow_1d_as_column=True)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} column(s) but {type(self).__name__} was fitted on "
                             f"{self.n_features_in_}")
        F = evaluate(self.state_network_, X, self.mean_, self.scale_, exact=True)
        H = evaluate(self.action_network_, self.action_features_, self.action_mean_, self.action_scale_, exact=True)
        return F, H

    def _score(self):
        """The float64 numpy score ``(F (r, e), H (k, e)) -> (r, k)`` and the number of values it
        holds per (row, action) pair (for the block sizes)."""
        net = getattr(self, "interaction_network_", None)
        if net is None:
            return _dot_score, 1
        layers = [(W.double().numpy(), b.double().numpy()) for W, b in zip(net.weights, net.biases)]
        return (lambda F, H: _mlp_score(F, H, layers, self.interaction == "mlp+dot")), max(net.sizes[:-1])

    def decision_function(self, X) -> np.ndarray:
        """Scores ``f(s)^T h(x_a)`` (or ``g(f(s) * h(x_a))``, ``interaction``), shape (n, K)."""
        F, H = self._towers(X)
        score, width = self._score()
        out = np.empty((F.shape[0], H.shape[0]))
        for r0, r1 in batches(F.shape[0], PREDICT_CHUNK):
            step = max(1, int(self.block_size) // max((r1 - r0) * width, 1))
            for a0 in range(0, H.shape[0], step):
                out[r0:r1, a0:a0 + step] = score(F[r0:r1], H[a0:a0 + step])
        return out

    def predict_log_proba(self, X) -> np.ndarray:
        """``log pi(a|s)`` for every action of the table (never-taken ones included), (n, K), the
        softmax normalised over all K actions in blocks of rows and actions."""
        F, H = self._towers(X)
        score, width = self._score()
        out = np.empty((F.shape[0], H.shape[0]))
        for r0, r1 in batches(F.shape[0], PREDICT_CHUNK):
            out[r0:r1] = blocked_log_softmax(F[r0:r1], H, max(1, int(self.block_size) // width), score)
        return out

    def predict_log_proba_at(self, X, codes, max_bytes: int | None = None) -> np.ndarray:
        """``log pi(a_ij|s_i)`` at action codes ``codes`` (n,) or (n, c), same shape: the softmax
        normalised over all K actions by an online log-sum-exp in blocks of at most ``max_bytes``
        (default ``8 * block_size``) of scores (``genpqr.stage1._bilinear.bilinear_log_proba_at``); no
        (n, K) matrix. Equals ``predict_log_proba(X)[i, codes[i]]``."""
        F, H = self._towers(X)
        return bilinear_log_proba_at(F, H, codes, 8 * int(self.block_size) if max_bytes is None else max_bytes)

    def predict_proba(self, X) -> np.ndarray:
        """``pi(a|s)``, shape (n, K)."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        """The most probable action (a label of ``classes_``), shape (n,)."""
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags


# ---------------------------------------------------------------------------- helpers
class _TorchScore:
    """The training score: ``matrix(F (B, e), H (k, e)) -> (B, k)`` for every row against every
    action, ``pairs(F (B, e), H (B, e)) -> (B,)`` for row ``i`` against action ``i``."""

    def __init__(self, g, interaction: str):
        self.g, self.plus_dot = g, interaction == "mlp+dot"

    def matrix(self, F, H):
        if self.g is None:
            return F @ H.t()
        B, k, e = F.shape[0], H.shape[0], F.shape[1]
        out = self.g.forward_t((F[:, None, :] * H[None, :, :]).reshape(B * k, e)).reshape(B, k)
        return out + F @ H.t() if self.plus_dot else out

    def pairs(self, F, H):
        dot = (F * H).sum(dim=1)
        if self.g is None:
            return dot
        out = self.g.forward_t(F * H)[0]
        return out + dot if self.plus_dot else out


def _dot_score(F: np.ndarray, H: np.ndarray) -> np.ndarray:
    return F @ H.T


def _mlp_score(F: np.ndarray, H: np.ndarray, layers, plus_dot: bool) -> np.ndarray:
    """``g(F_i * H_j)`` (r, k) in float64 (``layers``: ``g``'s ``(W (out, in), b)``), plus
    ``F H^T`` with ``plus_dot``."""
    x = (F[:, None, :] * H[None, :, :]).reshape(-1, F.shape[1])
    for i, (W, b) in enumerate(layers):
        x = x @ W.T + b
        if i < len(layers) - 1:
            np.maximum(x, 0.0, out=x)
    out = x.reshape(F.shape[0], H.shape[0])
    return out + F @ H.T if plus_dot else out


def _sampled_log_softmax(state, h, score, data, chosen, negatives):
    """Each row's corrected log-softmax of its own action among ``{y_i} + negatives``: logits
    ``score(s, a) - log(m Q(a))``; accidental hits (a negative equal to ``y_i``) masked."""
    torch = import_torch()
    logmQ = data["logmQ"]
    positive = score.pairs(state, h(data["A"].index_select(0, chosen))) - logmQ.index_select(0, chosen)
    negative = score.matrix(state, h(data["A"].index_select(0, negatives))) - logmQ.index_select(0, negatives)[None, :]
    negative = negative.masked_fill(negatives[None, :] == chosen[:, None], float("-inf"))
    logits = torch.cat([positive[:, None], negative], dim=1)
    return positive - torch.logsumexp(logits, dim=1)


def proposal(codes, K: int, weights, floor: float) -> np.ndarray:
    """The sampled softmax's proposal ``Q = (1 - floor) * frequency + floor / K`` (K,): every
    action, a never-taken one included, has probability at least ``floor / K``."""
    freq = np.bincount(codes, weights=weights, minlength=K)
    return (1.0 - floor) * freq / freq.sum() + floor / K


def blocked_log_softmax(F: np.ndarray, H: np.ndarray, block_size: int, score=_dot_score) -> np.ndarray:
    """``log softmax(score(F, H))`` over all rows of ``H`` (n, K) (``score`` defaults to ``F H^T``):
    an online log-sum-exp over blocks of at most ``block_size`` scores, then the scores minus the
    normaliser, block by block."""
    n, K = F.shape[0], H.shape[0]
    step = max(1, block_size // max(n, 1))
    top, total = np.full(n, -np.inf), np.zeros(n)
    for start in range(0, K, step):
        scores = score(F, H[start:start + step])
        new_top = np.maximum(top, scores.max(axis=1))
        total = total * np.exp(top - new_top) + np.exp(scores - new_top[:, None]).sum(axis=1)
        top = new_top
    log_z = top + np.log(total)
    out = np.empty((n, K))
    for start in range(0, K, step):
        out[:, start:start + step] = score(F, H[start:start + step]) - log_z[:, None]
    return out


def _epoch_bar(progress, epochs: int, loss: str):
    """The tqdm bar over the training epochs (None with ``progress=False``)."""
    if progress is False:
        return None
    from ..stage1._stage1 import progress_bar

    return progress_bar(progress, total=epochs, desc=f"two-tower ({loss} softmax)", unit="epoch")


def _check_weights(sample_weight, n: int) -> np.ndarray:
    if sample_weight is None:
        return np.ones(n)
    w = as_float_array(sample_weight, "sample_weight", ndim=1)
    if w.shape != (n,) or w.min() < 0 or w.sum() <= 0:
        raise ValueError(f"sample_weight must be ({n},) non-negative with a positive sum, got shape {w.shape}")
    return w
