"""rematlab.predict: one training step recorded, and what checkpoint plans would make of it.

The prediction is the engine's own (`rematlab-batch plan --from-run`), compiled into the
package as rematlab._predictor when it is installed (python/setup.py)."""
import json
import os
import shutil
import tempfile

import torch

from .plan import parse_plan
from .recorder import record

_BUILD_HINT = ("install the package, which compiles it (pip install --no-build-isolation ./python, "
               "docs/own-model.md), or build it in place: cd python && python3 setup.py build_ext --inplace")


def _predictor():
    try:
        from . import _predictor as p
    except ImportError as e:
        raise RuntimeError("rematlab.predict needs the package's compiled predictor (rematlab._predictor), "
                           "which is not built here (%s); %s" % (e, _BUILD_HINT)) from None
    return p


class Prediction:
    """What a checkpoint plan gives the recorded step. Bytes are exact for the recorded step's
    tensors (docs/own-model.md, "Predicting"):

    saved_bytes      held for the backward when it starts (saved tensors and checkpoints)
    peak_bytes       the step's peak of parameters, gradients, optimizer state and what the
                     backward holds, the tensors recomputed inside a checkpoint included; None
                     for a selective plan
    held_peak_bytes  the same without the recomputed tensors: what rematlab.record measures
                     for the planned step (it does not see inside torch.utils.checkpoint)
    recompute_flops  FLOPs the plan runs again in the backward (the profiler's count); None
                     when the step was recorded without the profiler
    recorded_saved_bytes, recorded_peak_bytes: the step as recorded
    checkpointed     module paths run under a checkpoint
    saved_bytes_per_block, recomputed_blocks; `raw` holds every field of the engine's JSON."""

    def __init__(self, raw):
        self.raw = raw
        self.plan = raw["policy"]
        self.saved_bytes = raw["saved_bytes"]
        self.peak_bytes = _known(raw["peak_bytes"])
        self.held_peak_bytes = _known(raw["held_peak_bytes"])
        self.recompute_flops = _known(raw["recompute_flops"])
        self.recorded_saved_bytes = raw["recorded_saved_bytes"]
        self.recorded_peak_bytes = raw["recorded_peak_bytes"]
        self.checkpointed = list(raw["checkpointed"])
        self.saved_bytes_per_block = list(raw["saved_bytes_per_block"])
        self.recomputed_blocks = raw["recomputed_blocks"]

    def __repr__(self):
        return "Prediction(plan=%r, saved_bytes=%d, peak_bytes=%s, recompute_flops=%s)" % (
            self.plan, self.saved_bytes, self.peak_bytes, self.recompute_flops)


def _known(v):
    return None if v == "unknown" else v


def loss_value(value):
    """What a step returned, if it is a loss to record: a number or a one-element tensor."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) or (isinstance(value, torch.Tensor) and value.numel() == 1):
        return value
    return None


def check_plans(plans):
    """The plans as a list of texts, each read by both the engine and checkpoint_plan; ValueError
    for one that either refuses, before anything runs."""
    one = isinstance(plans, str)
    texts = [plans] if one else list(plans)
    if not texts:
        raise ValueError("rematlab.predict: no plan given (plan='none' predicts the step as recorded)")
    for t in texts:
        if not isinstance(t, str):
            raise ValueError("rematlab.predict: a plan is a text such as 'per-block', not %r" % (t,))
        _predictor().check_plan(t)
        parse_plan(t)
    return one, texts


def predict_run(run_dir, plan="none"):
    """The prediction of `plan` (a text, or a list of texts) for the run directory `run_dir`
    that rematlab.record wrote: a Prediction, or a dict of them by plan text."""
    one, texts = check_plans(plan)
    out = {t: Prediction(json.loads(_predictor().predict_json(os.fspath(run_dir), t))) for t in texts}
    return out[texts[0]] if one else out


def predict(model, step, plan="none", optimizer=None, model_config=None, profile=True, out_dir=None):
    """Runs `step()` once (the forward and the backward, and the optimizer's step if it takes
    one) under rematlab.record, and predicts `plan` for it: a Prediction, or for a list of
    plans a dict of them by plan text. plan 'none' is the step as recorded.

    The step really runs: the model's parameters change if it steps an optimizer. A loss
    tensor or number that step() returns is recorded as the step's loss. optimizer: the one
    step() steps, so that its state is counted (and its step timed). profile=False records
    without torch.profiler: faster, but recompute_flops is None. out_dir: keep the recording
    there (rematlab.record's rules); by default it is written to a temporary directory and
    removed. Plans are checked before the step runs; a model with a plan applied
    (checkpoint_plan) is refused, since the plans are predicted from the unplanned step."""
    one, texts = check_plans(plan)
    _predictor()
    if getattr(model, "_rematlab_plan", None) is not None:
        raise ValueError("rematlab.predict: the model has checkpoint plan %r applied; predictions start from the "
                         "unplanned step: remove() it first" % model._rematlab_plan.spec)
    if not callable(step):
        raise ValueError("rematlab.predict: step must be a callable that runs the forward and the backward")
    tmp = None
    if out_dir is None:
        tmp = tempfile.mkdtemp(prefix="rematlab-predict-")
        out_dir = os.path.join(tmp, "run")
    try:
        with record(out_dir, model=model, optimizer=optimizer, profile=profile, model_config=model_config) as rec:
            loss = loss_value(step())
            if loss is not None:
                rec.loss(loss)
        out = predict_run(rec.path, texts)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return out[texts[0]] if one else out
