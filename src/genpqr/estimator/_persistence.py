"""Saving fitted models, with or without their training data.

A fitted :class:`genpqr.GenPQR` (finite or continuous actions) keeps the
transitions it was fitted on (``training_data_``) and, when cross-fitted, the fold of every
training row (``policy_.fold_of_row``; on the exact path the fold models of ``policy_folds_``, which
serve the out-of-fold diagnostics only): together O(n) memory, tens of MB for a million rows,
while everything else is O(states x actions) or the size of the fitted models.

``save(path)`` (``include_data=False``, the default) writes the model without them. The
saved model still predicts: ``reward``, ``continuation``, ``q``, ``policy``, ``reward_table``,
``summary``, ``diagnostics_`` and, on the exact tabular path, ``value_difference``. What
needs the data (and says so when it is missing): ``renormalize``, ``value_difference`` with
fitted Q evaluation, the DDC likelihood's default weights, the fit report's figures, and a
refit. ``save(path, include_data=True)`` (``genpqr fit --save-data``) keeps everything.

A model file is code: it is a pickle, and unpickling runs whatever the file holds. ``save``
writes a signed file (``genpqr.estimator._manifest.write_signed``: size, SHA-256 and an HMAC under
this user's key, checked before anything is unpickled), and ``read_model``
(:func:`genpqr.load`) loads without ``trusted=True`` only what genpqr signed under that key.
What a saved model still pickles, and why: ``pickled_parts`` and
``docs/saving_and_loading.md``.
"""

from __future__ import annotations

import copy
import dataclasses

from ..messages import Mention, Message

__all__ = ["dump", "read_model", "without_data", "require_data", "pickled_parts", "HOLDS", "MODEL_FILE"]

#: What a model file's signed header says it holds.
HOLDS = "GenPQR"
#: The model file of a ``genpqr fit`` output folder.
MODEL_FILE = "model.joblib"


def without_data(model):
    """A shallow copy of a fitted model without its per-row training data (``model`` is not
    modified): the fitted state without ``training_data``, the fold of every training row and
    the exact path's fold models (their out-of-fold diagnostics are computed), per type too."""
    state = model.fitted_
    policy = state.policy
    if getattr(policy, "fold_of_row", None) is not None:
        policy = copy.copy(policy)
        policy.fold_of_row = None
    types = state.types
    if types is not None:  # latent types: one fitted model per type
        types = dataclasses.replace(types, type_models=[without_data(m) for m in types.type_models])
    return model._fitted_copy(state.replace(training_data=None, policy=policy, policy_folds=None, types=types,
                                            saved_without_data=True))


def require_data(model, what: str) -> None:
    """Raise a ``ValueError`` naming ``what`` when the model was saved without its data."""
    if not hasattr(model, "training_data_"):
        raise ValueError(Message(f"{what} needs the training data, but this model was saved without it; save it "
                                 "with ", Mention("include_data", True, python="save(path, include_data=True)"),
                                 " or refit it"))


def dump(model, path, *, include_data: bool = False) -> None:
    """Write the model (or :func:`without_data`) to a signed file (``genpqr.estimator._manifest.write_signed``:
    a header with the payload's size, SHA-256 and this user's HMAC signature, then a joblib pickle;
    cloudpickle for models holding user-supplied closures such as a lambda ``g``). ``read_model``
    (:func:`genpqr.load`) reads it back."""
    from ._manifest import write_signed

    write_signed(model if include_data else without_data(model), path, holds=HOLDS)


def read_model(path, *, trusted: bool = False):
    """The object in a model file, or in the ``model.joblib`` of a ``genpqr fit`` output folder.

    A file written by :meth:`GenPQR.save` under this user's signing key loads as it is; any
    other file (a plain joblib or pickle file, e.g. from a genpqr before signed files, or a file
    signed on another account or machine) needs ``trusted=True``, because unpickling runs any
    code the file holds. A folder is first checked against its ``manifest.json``
    (``genpqr.estimator._manifest.verify_folder``, kind ``"fit"``); when the manifest's own signature
    verifies, the ``model.joblib`` it lists (same SHA-256) counts as trusted.

    Raises
    ------
    genpqr.exceptions.ModelFormatError
        A model of another genpqr's format (saved before the fitted state was one object, or
        naming classes that are gone): refit it.
    genpqr.exceptions.UntrustedFileError
        Not signed by genpqr under this user's key, and ``trusted`` is False (nothing has run).
    genpqr.exceptions.IntegrityError
        Empty, truncated, edited or text file; an incomplete or edited output folder.
    TypeError
        A signed file holding something else (e.g. a counterfactual result).
    """
    from pathlib import Path

    from ._manifest import manifest_trusted, read_signed, verify_folder

    path = Path(path)
    if path.is_dir():
        manifest = verify_folder(path, kind="fit", require=(MODEL_FILE,))
        listed = manifest["files"][MODEL_FILE]["sha256"] if manifest_trusted(manifest) else None
        return read_signed(path / MODEL_FILE, holds=HOLDS, trusted=trusted, sha256=listed)
    if not path.exists():
        raise FileNotFoundError(f"model file {str(path)!r} does not exist")
    return read_signed(path, holds=HOLDS, trusted=trusted)


def pickled_parts(model, *, include_data: bool = False):
    """What a saved model pickles, measured: one row per parameter and per field of its fitted
    state (named as the attribute that reads it: ``policy_``, ``stage2_``, ...), and a last row
    ``"(all)"`` for the whole.

    Columns: ``attribute``, ``type``, ``array_bytes`` (numeric arrays and torch tensors, which
    a non-executing format such as ``.npz`` or a ``weights_only`` state dict could hold),
    ``object_bytes`` (everything else: the pickle's instructions that import and rebuild Python
    objects), ``classes`` (the classes and functions the pickle names: imported and rebuilt on
    loading) and ``share`` (of the whole's bytes). Sizes are those of a cloudpickle of each
    attribute with the arrays counted apart (an object that two attributes share counts in
    both rows, once in ``"(all)"``); the saved file (joblib) differs by a few percent.
    """
    import pandas as pd

    obj = model if include_data else without_data(model)
    params = [(k, v) for k, v in vars(obj).items() if k != "fitted_"]
    fields = [(f"{f.name}_", getattr(obj.fitted_, f.name)) for f in dataclasses.fields(obj.fitted_)]
    rows = []
    for name, value in [*params, *[(k, v) for k, v in fields if v is not None], ("(all)", obj)]:
        arrays, rest, classes = _measure(value)
        rows.append(dict(attribute=name, type=type(value).__name__, array_bytes=arrays, object_bytes=rest,
                         classes=", ".join(sorted(classes))))
    frame = pd.DataFrame(rows)
    size = frame["array_bytes"] + frame["object_bytes"]
    frame["share"] = size / size.iloc[-1]
    order = frame.iloc[:-1].assign(size=size.iloc[:-1]).sort_values("size", ascending=False).drop(columns="size")
    return pd.concat([order, frame.iloc[-1:]], ignore_index=True)


def _measure(value) -> tuple[int, int, set]:
    """(numeric array and tensor bytes, other pickled bytes, names of the non-builtin classes and
    functions the pickle rebuilds)."""
    import io
    import sys
    import types

    import cloudpickle
    import numpy as np

    torch = sys.modules.get("torch")
    arrays, classes = {}, set()  # id -> bytes: an array referenced twice is stored once

    class Pickler(cloudpickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, np.ndarray) and obj.dtype.kind in "biufcmM":
                arrays.setdefault(id(obj), (obj, obj.nbytes))
                return id(obj)
            if torch is not None and isinstance(obj, torch.Tensor):
                arrays.setdefault(id(obj), (obj, obj.element_size() * obj.nelement()))
                classes.add("torch:Tensor")
                return id(obj)
            kind = obj if isinstance(obj, (type, types.FunctionType)) else type(obj)
            module = getattr(kind, "__module__", None) or ""
            plain = isinstance(obj, (type(None), bool, int, float, str, bytes, np.dtype)) or \
                (isinstance(obj, type) and issubclass(obj, np.dtype))
            if module != "builtins" and not plain:
                classes.add(f"{module}:{getattr(kind, '__qualname__', kind.__name__)}")
            return None

    buffer = io.BytesIO()
    Pickler(buffer, protocol=5).dump(value)
    return int(sum(n for _, n in arrays.values())), len(buffer.getvalue()), classes
