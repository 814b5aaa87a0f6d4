"""Small PyTorch models with the scikit-learn interface.

Two models plug into GenPQR's two stages:

* :class:`MLPClassifier` -- a ReLU multilayer perceptron trained with cross-entropy and Adam;
  the behaviour-cloning model of stage 1 (any slot that takes a classifier with
  ``predict_proba``).
* :class:`~genpqr.models.DuelingQNetwork` (defined in ``genpqr.models._qnetwork``,
  importable from here) -- a *native Q-model* for stage 2 (fitted Q evaluation): a dueling
  network ``Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a')`` that is warm-started across Bellman
  iterations through ``fit_q`` / ``predict_q``.

PyTorch is an optional dependency: it is imported when a model is fitted or used, never when
``genpqr`` or this module is imported.

Implementation: the networks are ``torch.nn.Module`` s (``genpqr.models._torch_modules.MLP``)
trained by ``torch.autograd`` and ``torch.optim.Adam`` (its fused kernel); the shared machinery
(devices, threads, seeding, mini-batches, evaluation) is ``genpqr.models._torch_training``.
Training is float32 on ``device`` (CPU by default, one torch thread); the classifier predicts in
float64 on CPU (so a row's probabilities do not depend on the batch it is predicted in), the
Q-network in float32 on its device (speed). ``to_torch()`` exports an equivalent
``torch.nn.Module``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets

try:
    from sklearn.utils.validation import validate_data
except ImportError:  # scikit-learn < 1.6

    def validate_data(estimator, /, X="no_validation", y="no_validation", **kwargs):
        if "ensure_all_finite" in kwargs:
            kwargs["force_all_finite"] = kwargs.pop("ensure_all_finite")
        return estimator._validate_data(X, y, **kwargs)


from ..data._validation import as_float_array
from ..exceptions import NotFittedError
from ._qnetwork import DuelingQNetwork
from ._torch_training import (
    check_hidden_layer_sizes,
    check_positive,
    cross_entropy_epochs,
    evaluate,
    import_torch,
    make_optimizer,
    n_rows,
    resolve_device,
    seeded_generator,
    standardization,
    to_tensor,
    training_session,
)

__all__ = ["MLPClassifier", "DuelingQNetwork"]


class MLPClassifier(ClassifierMixin, BaseEstimator):
    """ReLU multilayer perceptron classifier (cross-entropy, Adam), scikit-learn style.

    The paper's behaviour-cloning model: hidden layers (64, 64), ReLU, standardized inputs,
    Adam with learning rate 5e-3, mini-batches of 256, 40 epochs. Training is deterministic
    given ``random_state`` (initial weights and the per-epoch shuffles come from one
    ``torch.Generator`` seeded from it).

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(64, 64)
        Widths of the hidden layers; ``()`` gives multinomial logistic regression.
    learning_rate : float, default=5e-3
        Adam step size.
    batch_size : int, default=256
        Rows per mini-batch (the last batch of an epoch may be smaller).
    max_epochs : int, default=40
        Passes over the data (there is no early stopping, so every fit runs this many).
    weight_decay : float, default=0.0
        L2 penalty added to the gradient, as in ``torch.optim.Adam`` (biases included).
    standardize : bool, default=True
        Standardize the inputs with the training mean and standard deviation.
    random_state : int, numpy Generator/RandomState or None, default=None
        Seed for the initial weights and the shuffles; None draws fresh entropy.
    verbose : bool, default=False
        Print the mean training loss after every epoch.
    device : {"cpu", "cuda", "cuda:N", "auto"}, default="cpu"
        Where the network trains (``"auto"``: CUDA when available). The fitted network is
        kept on CPU (predictions in float64 there), so a model fitted on a GPU pickles and
        loads anywhere; a seed gives the same draws on every device.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The labels seen in ``fit``, sorted; column ``k`` of :meth:`predict_proba` is
        ``classes_[k]``.
    n_features_in_ : int
        Number of input features d.
    mean_, scale_ : ndarray of shape (d,)
        Standardization statistics (0 and 1 when ``standardize=False``).
    loss_curve_ : list of float
        Mean (sample-weighted) training cross-entropy of each epoch, length ``max_epochs``.
    n_iter_ : int
        Number of epochs run.
    network_ : genpqr.models._torch_modules.MLP
        The fitted network (on CPU); ``network_.weights`` / ``network_.biases`` in
        ``nn.Linear`` layout.
    device_ : str
        The device it was trained on.

    Examples
    --------
    >>> import numpy as np
    >>> from genpqr.models._nn import MLPClassifier
    >>> X = np.random.default_rng(0).normal(size=(500, 3)); y = (X[:, 0] > 0).astype(int)
    >>> clf = MLPClassifier(max_epochs=5, random_state=0).fit(X, y)
    >>> clf.predict_proba(X).shape
    (500, 2)
    """

    def __init__(
        self,
        hidden_layer_sizes=(64, 64),
        learning_rate=5e-3,
        batch_size=256,
        max_epochs=40,
        weight_decay=0.0,
        standardize=True,
        random_state=None,
        verbose=False,
        device="cpu",
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.weight_decay = weight_decay
        self.standardize = standardize
        self.random_state = random_state
        self.verbose = verbose
        self.device = device

    def fit(self, X, y, sample_weight=None):
        """Fit the network to labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Finite numeric features. Not modified.
        y : array-like of shape (n,)
            Class labels of any type sortable by ``LabelEncoder``; at least two distinct.
        sample_weight : array-like of shape (n,), optional
            Non-negative row weights (the loss is the weighted mean cross-entropy).

        Returns
        -------
        self : MLPClassifier
        """
        torch = import_torch()
        hidden = check_hidden_layer_sizes(self.hidden_layer_sizes)
        lr = check_positive(self.learning_rate, "learning_rate")
        batch_size = check_positive(self.batch_size, "batch_size", integer=True)
        max_epochs = check_positive(self.max_epochs, "max_epochs", integer=True)
        weight_decay = check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        device = resolve_device(self.device)

        X, codes, classes, sw = self._validate_training_data(X, y, sample_weight)
        n, d = X.shape
        mean, scale = standardization(X, bool(self.standardize))
        generator = seeded_generator(self.random_state)
        from ._torch_modules import MLP

        with training_session(device):
            net = MLP((d, *hidden, len(classes)), generator).to(device)
            adam = make_optimizer("adam", net.parameters(), lr=lr, weight_decay=weight_decay)
            weights = None if sw is None else torch.from_numpy((sw / sw.mean()).astype(np.float32)).to(device)
            loss_curve = cross_entropy_epochs(
                net, adam, to_tensor(X, mean, scale, device), codes,
                max_epochs, batch_size, generator, weights=weights, on_epoch=self._report_epoch,
            )
        self.classes_ = classes
        self.n_features_in_ = d
        self.mean_, self.scale_ = mean, scale
        self.network_ = net.to("cpu")
        self.device_ = str(device)
        self.loss_curve_ = loss_curve
        self.n_iter_ = max_epochs
        return self

    def _report_epoch(self, epoch: int, loss: float) -> None:
        if self.verbose:
            print(f"[MLPClassifier] epoch {epoch + 1}/{self.max_epochs}  loss {loss:.5f}")

    def _validate_training_data(self, X, y, sample_weight):
        """sklearn-standard validation, with our own messages for mismatched lengths."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        n_X, n_y = n_rows(X), n_rows(y)
        if n_X is not None and n_y is not None and n_y != n_X:
            raise ValueError(f"y has {n_y} rows but X has {n_X}; they must match")
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=True, order="C")
        check_classification_targets(y)
        encoder = LabelEncoder()
        codes = encoder.fit_transform(y)
        classes = encoder.classes_
        if len(classes) < 2:
            raise ValueError(
                f"y must contain at least two classes, got 1 class ({classes[0]!r}); "
                "a policy over a single action needs no classifier"
            )
        sw = None
        if sample_weight is not None:
            sw = np.asarray(sample_weight)
            if sw.ndim != 1:
                raise ValueError(f"sample_weight must be a 1-D array, got shape {sw.shape}")
            if sw.shape[0] != X.shape[0]:
                raise ValueError(f"sample_weight has {sw.shape[0]} rows but X has {X.shape[0]}; they must match")
            sw = as_float_array(sw, "sample_weight", ndim=1)
            if (sw < 0).any():
                raise ValueError(f"sample_weight must be non-negative, got minimum {sw.min()!r}")
            if not sw.any():
                raise ValueError("Sample weights must contain at least one non-zero number (sample_weight is all zero)")
        return X, codes, classes, sw

    def _check_fitted(self):
        if not hasattr(self, "network_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit(X, y) before using it"
            )

    def _logits(self, X) -> np.ndarray:
        """Logits (m, n_classes), float64."""
        self._check_fitted()
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=True)
        return evaluate(self.network_, X, self.mean_, self.scale_, exact=True)

    def predict_log_proba(self, X) -> np.ndarray:
        """Log class probabilities.

        Parameters
        ----------
        X : array-like of shape (m, d)

        Returns
        -------
        log_proba : ndarray of shape (m, n_classes), float64
            Columns ordered as ``classes_``.
        """
        logits = self._logits(X)
        logits -= logits.max(axis=1, keepdims=True)
        logits -= np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return logits

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (rows sum to 1).

        Parameters
        ----------
        X : array-like of shape (m, d)

        Returns
        -------
        proba : ndarray of shape (m, n_classes), float64
            Columns ordered as ``classes_``.
        """
        proba = np.exp(self.predict_log_proba(X))
        proba /= proba.sum(axis=1, keepdims=True)
        return proba

    def hidden_representation(self, X) -> np.ndarray:
        """The last hidden layer's activations: the network's learned representation of ``X``.

        ``log pi(.|x)`` is an affine function of it followed by a log-softmax, so it is a natural
        feature map for linear models of quantities that vary with the policy (e.g. the
        closed-form Q-evaluation of :class:`genpqr.stage2.LSTDQ`). (Not named ``transform``: that
        would make scikit-learn treat the classifier as a transformer.)

        Parameters
        ----------
        X : array-like of shape (m, d)

        Returns
        -------
        hidden : ndarray of shape (m, hidden_layer_sizes[-1]), float64
            Non-negative (after ReLU). With no hidden layer: the standardized inputs.
        """
        self._check_fitted()
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=True)
        return evaluate(self.network_, X, self.mean_, self.scale_, exact=True, hidden=True)

    def predict(self, X) -> np.ndarray:
        """Most probable label.

        Parameters
        ----------
        X : array-like of shape (m, d)

        Returns
        -------
        labels : ndarray of shape (m,)
            Elements of ``classes_``.
        """
        logits = self._logits(X)  # checks fitted before classes_ is read
        return self.classes_[np.argmax(logits, axis=1)]

    def to_torch(self):
        """An equivalent ``torch.nn.Module`` (eval mode) mapping raw float32 inputs (m, d) to
        logits (m, n_classes); standardization is included as buffers."""
        self._check_fitted()
        from ._torch_modules import StandardizedNetwork

        return StandardizedNetwork(self.network_, self.mean_, self.scale_, dueling=False).eval()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags
