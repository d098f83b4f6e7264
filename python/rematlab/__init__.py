"""RematLab for your own PyTorch model.

``record`` writes one training step as a RematLab run directory (docs/own-model.md);
``checkpoint_plan`` applies a checkpoint plan of ``rematlab-batch plan --from-run`` with
``torch.utils.checkpoint``.
"""
from .plan import CheckpointPlan, checkpoint_plan, parse_plan
from .recorder import Recorder, record

__all__ = ["record", "Recorder", "checkpoint_plan", "CheckpointPlan", "parse_plan"]
__version__ = "0.1.0"
