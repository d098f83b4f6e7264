"""RematLab for your own PyTorch model.

``record`` writes one training step as a RematLab run directory (docs/own-model.md);
``predict`` records a step and predicts what checkpoint plans save, hold at the peak and
recompute (``predict_run`` for a recorded run directory); ``checkpoint_plan`` applies a plan
with ``torch.utils.checkpoint``. From a shell: ``python -m rematlab record|plan|predict``.
"""
from .plan import CheckpointPlan, checkpoint_plan, parse_plan
from .predict import Prediction, predict, predict_run
from .recorder import Recorder, record

__all__ = ["record", "Recorder", "checkpoint_plan", "CheckpointPlan", "parse_plan", "predict", "predict_run",
           "Prediction"]
__version__ = "0.1.0"
