"""The outputs of the forward's classed ops (rematlab.op_classes) while recording, seen by a
torch-function mode: each call of torch.matmul, F.linear, Tensor.__matmul__, torch.bmm, ... with
the tensor it returned. Autograd's backward never calls through it, so only the forward (and a
checkpoint's recompute, which is not recorded) is seen. Each output is kept alive until backward
starts so that storage identities stay distinct (a selective plan keeps them anyway)."""
import torch
from torch.overrides import TorchFunctionMode

from . import compat
from .op_classes import class_of


def _tensors(out):
    if isinstance(out, torch.Tensor):
        yield out
    elif isinstance(out, (tuple, list)):
        for x in out:
            yield from _tensors(x)


def aten_name(func):
    """The aten name of a torch function: torch.matmul, Tensor.__matmul__ and __rmatmul__ are
    aten::matmul, F.linear aten::linear."""
    name = getattr(func, "__name__", "")
    if name in ("__matmul__", "__rmatmul__"):
        name = "matmul"
    return "aten::" + name if name else ""


class OpOutputs(TorchFunctionMode):
    def __init__(self, rec):
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        rec = self.rec
        if rec.backward_start_ns is not None or rec._in_optimizer or not torch.is_grad_enabled():
            return out
        name = aten_name(func)
        cls = class_of(name)
        if cls:
            module = rec._stack[-1] if rec._stack else ""
            for t in _tensors(out):
                key, sbytes = compat.storage_of(t)
                rec._keep.append(t)
                rec.op_outputs.append({
                    "id": len(rec.op_outputs), "op": name, "op_class": cls, "module": module,
                    "block": rec.block_of(module), "dtype": compat.dtype_name(t.dtype),
                    "shape": "x".join(str(d) for d in t.shape), "bytes": compat.tensor_bytes(t),
                    "storage": rec._storage_index(key), "storage_bytes": sbytes})
        return out
