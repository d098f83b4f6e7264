"""The outputs of the forward's classed ops (rematlab.op_classes) while recording, seen by a
torch-function mode: each call of torch.matmul, F.linear, Tensor.__matmul__, torch.bmm, ... with
the tensor it returned. Autograd's backward never calls through it, so only the forward (and a
checkpoint's recompute, which is not recorded) is seen. Each output is kept alive until backward
starts so that storage identities stay distinct (a selective plan keeps them anyway)."""
import torch
from torch.overrides import TorchFunctionMode

from . import compat
from .op_classes import OP_CLASSES, class_of


def _tensors(out):
    if isinstance(out, torch.Tensor):
        yield out
    elif isinstance(out, (tuple, list)):
        for x in out:
            yield from _tensors(x)


# The torch function's __name__ -> the aten op it calls, for the classed ops: torch.matmul,
# Tensor.__matmul__ and __rmatmul__ are aten::matmul, F.linear aten::linear.
_ATEN = {op.split("::", 1)[1]: op for ops in OP_CLASSES.values() for op in ops}
_ATEN.update({"__matmul__": "aten::matmul", "__rmatmul__": "aten::matmul"})


class OpOutputs(TorchFunctionMode):
    def __init__(self, rec):
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = _ATEN.get(getattr(func, "__name__", None))
        rec = self.rec
        if name is None or rec.backward_start_ns is not None or rec._in_optimizer or not torch.is_grad_enabled():
            return out
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
