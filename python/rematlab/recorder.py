"""Recording one training step: every tensor autograd saves (saved_tensors_hooks), the module
it was saved in (forward pre/post hooks), when backward released it, and the ops with their
times and FLOPs (torch.profiler). `record` writes the result as a RematLab run directory."""
import os
import time
import warnings

import torch

from . import compat
from .op_outputs import OpOutputs
from .profiled_ops import read_profile
from .run_writer import check_target, write_run

_active = []  # the recorders inside their `with`, innermost last


def current():
    """The recorder whose `with` block is running (None outside one)."""
    return _active[-1] if _active else None



def _text_problem(text):
    """What keeps `text` from being written into a run directory, or None."""
    if "\0" in text:
        return "holds a NUL byte (at %d)" % text.index("\0")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return "cannot be written as UTF-8 (%s at %d)" % (e.reason, e.start)
    return None

class _Held:
    """What autograd keeps for a saved tensor while recording: the tensor and, when autograd
    drops it (the node ran, or the graph was freed), a note of the time."""
    __slots__ = ("t", "rec", "sid")

    def __init__(self, t, rec, sid):
        self.t, self.rec, self.sid = t, rec, sid

    def __del__(self):
        rec = self.rec
        if rec is not None:
            try:
                rec._released(self.sid)
            except Exception:  # never raise from a finalizer
                pass


class Recorder:
    """Context manager of `record`; after the block, `saved` lists every saved tensor and
    `summary` the figures written to summary.json."""

    def __init__(self, out_dir, model=None, optimizer=None, profile=True, model_config=None,
                 overwrite=False):
        self.out_dir = os.fspath(out_dir)
        self.model, self.optimizer = model, optimizer
        self.profile = profile
        self.model_config = dict(model_config or {})
        self.overwrite = overwrite
        self.saved, self.calls, self.events = [], [], []
        self.op_outputs = []  # outputs of the forward's classed ops (rematlab.op_classes)
        self.loss_value = float("nan")
        self.loss_given = False
        self.summary = None
        self.path = None  # the run directory, once written

    # ------------------------------------------------------------------ clock and phases

    def _now(self):
        return time.perf_counter_ns() - self._t0

    def _phase(self):
        if self._in_optimizer:
            return "optimizer"
        return "recompute" if self.backward_start_ns is not None else "forward"

    def block_of(self, path):
        """Index of the block (compat.block_stack) that `path` lies in, -1 outside."""
        if self.block_prefix is None or not path:
            return -1
        p = self.block_prefix
        if not path.startswith(p):
            return -1
        head = path[len(p):].split(".", 1)[0]
        return self._block_index.get(head, -1)

    # ------------------------------------------------------------------ memory events

    def _event(self, delta, category, block, freed, name, phase, step=0):
        """Appends an allocation (delta > 0: a new id, returned) or the free of allocation `freed`."""
        self._live += delta
        self._alloc_seq += 0 if delta < 0 else 1
        eid = freed if delta < 0 else self._alloc_seq
        self.events.append({"t_ns": max(self._now(), 0), "step": step, "id": eid, "delta": delta,
                            "category": category, "block": block, "name": name, "phase": phase,
                            "live": self._live})
        return eid

    def _storage_index(self, key):
        idx = self._sindex.get(key)
        if idx is None:
            idx = self._sindex[key] = len(self._sindex)
        return idx

    def _add_saved(self, t, category, module, op=""):
        now = max(self._now(), 0)
        sid = len(self.saved)
        key, sbytes = compat.storage_of(t)
        row = {"id": sid, "module": module, "block": self.block_of(module), "category": category,
               "phase": self._phase(), "op": op, "node": "", "producer": t.grad_fn.name() if t.grad_fn is not None else "",
               "dtype": compat.dtype_name(t.dtype), "shape": "x".join(str(d) for d in t.shape),
               "bytes": compat.tensor_bytes(t), "storage": self._storage_index(key), "storage_bytes": sbytes,
               "alias": "", "packed_ns": now, "unpacked_ns": -1, "released_ns": -1, "held_at_backward": 0,
               "alloc_id": 0, "free_id": 0}
        self.saved.append(row)
        if key in self._param_keys:
            row["alias"] = "parameter:" + self._param_keys[key]
        elif key in self._buffer_keys:  # model state (BatchNorm's running statistics), no activation
            row["alias"] = "buffer:" + self._buffer_keys[key]
        elif key in self._live_storage:
            owner = self._live_storage[key]
            owner["holders"] += 1
            row["alias"] = "saved:%d" % owner["sid"]
            row["alloc_id"] = owner["alloc_id"]
            owner["rows"].append(sid)
        else:
            aid = self._event(sbytes, category, row["block"], sid, ("saved", sid), row["phase"]) if sbytes else 0
            row["alloc_id"] = aid
            self._live_storage[key] = {"sid": sid, "holders": 1, "alloc_id": aid, "bytes": sbytes,
                                       "rows": [sid]}
        row["_key"] = key
        return sid

    def _released(self, sid):
        if self._closed:
            return
        row = self.saved[sid]
        if row["released_ns"] >= 0:
            return
        row["released_ns"] = max(self._now(), 0)
        if row["alias"].startswith(("parameter:", "buffer:")):
            return
        key = row["_key"]
        owner = self._live_storage.get(key)
        if owner is None:
            return
        owner["holders"] -= 1
        if owner["holders"] == 0:
            del self._live_storage[key]
            first = self.saved[owner["sid"]]
            first["storage_freed_ns"] = row["released_ns"]
            if owner["bytes"]:
                self._event(-owner["bytes"], first["category"], first["block"], owner["alloc_id"],
                            ("saved", owner["sid"]), self._phase() if self.backward_start_ns is None else "backward")
            for r in owner["rows"]:
                self.saved[r]["free_id"] = owner["alloc_id"]

    # ------------------------------------------------------------------ autograd hooks

    def _pack(self, t):
        sid = self._add_saved(t, "saved_activations", self._stack[-1] if self._stack else "")
        if self.profile:
            compat.record_range("rematlab::pack#%d" % sid).__exit__(None, None, None)
        return _Held(t, self, sid)

    def _unpack(self, h):
        if not isinstance(h, _Held):  # packed before the recording began
            return h
        self._begin_backward()
        row = self.saved[h.sid]
        if row["unpacked_ns"] < 0:
            row["unpacked_ns"] = max(self._now(), 0)
        if self.profile:
            compat.record_range("rematlab::unpack#%d" % h.sid).__exit__(None, None, None)
        return h.t

    def _begin_backward(self):
        if self.backward_start_ns is not None:
            return
        self.backward_start_ns = max(self._now(), 0)
        self.saved_at_backward = sum(o["bytes"] for o in self._live_storage.values())
        for o in self._live_storage.values():
            for r in o["rows"]:
                if self.saved[r]["released_ns"] < 0:
                    self.saved[r]["held_at_backward"] = 1
        self._keep.clear()  # forward's inputs: no longer needed to keep storage keys apart

    def note_checkpoint(self, module, tensors):
        """Tensors torch.utils.checkpoint keeps for `module` (its inputs) instead of what the
        module would have saved; counted as category `checkpoints`."""
        import weakref
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                continue
            sid = self._add_saved(t, "checkpoints", module, op="torch.utils.checkpoint")
            self.saved[sid]["node"] = "checkpoint"
            try:
                weakref.finalize(t, self._released, sid)
            except TypeError:
                pass

    def _grad_hook(self, name, p):
        def hook(_g):
            self._begin_backward()
            if p.grad is None and name not in self._grads:
                self._grads.add(name)
                self._event(compat.tensor_bytes(p), "gradients", self.block_of(name.rsplit(".", 1)[0]),
                            0, ("param", name), "backward")
        return hook

    # ------------------------------------------------------------------ module hooks

    def _pre_hook(self, mod, args, kwargs):
        path = self._paths.get(id(mod), "")
        now = max(self._now(), 0)
        tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        if self.input_shape is None and tensors:  # the model's first input (input_ids=... too)
            self.input_shape = tuple(tensors[0].shape)
            self.input_is_tokens = not tensors[0].is_floating_point() and tensors[0].dim() == 2
        inputs = []
        for a in tensors:
            key, b = compat.storage_of(a)
            inputs.append((self._storage_index(key), b))
            if self.backward_start_ns is None:
                self._keep.append(a)
        call = {"index": len(self.calls), "module": path, "block": self.block_of(path), "phase": self._phase(),
                "start_ns": now, "end_ns": now, "inputs": inputs, "flops": None,
                "parent": self._call_stack[-1]["index"] if self._call_stack else -1}
        self.calls.append(call)
        self._call_stack.append(call)
        self._stack.append(path)
        if self.profile:
            self._ranges.append(compat.record_range("rematlab::mod::%d::%s" % (call["index"], path)))

    def _post_hook(self, mod, args, out):
        if not self._call_stack:
            return
        call = self._call_stack.pop()
        self._stack.pop()
        call["end_ns"] = max(self._now(), call["start_ns"])
        if self.profile and self._ranges:
            self._ranges.pop().__exit__(None, None, None)

    def _wrap_optimizer(self):
        opt = self.optimizer
        self._own_step = "step" in opt.__dict__
        orig = opt.step

        def step(*a, **k):
            self._begin_backward()
            self._in_optimizer = True
            self.optimizer_span[0] = max(self._now(), 0)
            rng = compat.record_range("rematlab::optimizer") if self.profile else None
            try:
                return orig(*a, **k)
            finally:
                if rng is not None:
                    rng.__exit__(None, None, None)
                self.optimizer_span[1] = max(self._now(), 0)
                self._count_optimizer_state("optimizer")
                self._in_optimizer = False
        self._orig_step = orig
        opt.step = step

    def _count_optimizer_state(self, phase):
        if self.optimizer is None:
            return
        for st in self.optimizer.state.values():
            for k, v in st.items():
                if isinstance(v, torch.Tensor):
                    key, b = compat.storage_of(v)
                    if key in self._opt_keys or b == 0:
                        continue
                    self._opt_keys.add(key)
                    self._event(b, "optimizer_state", -1, 0, ("optimizer", k), phase,
                                step=-1 if phase == "init" else 0)

    # ------------------------------------------------------------------ the block

    def loss(self, value):
        """The step's loss (a tensor or a number), written to loss.csv; NaN when not given. A loss
        given as NaN or infinite makes the recording a diverged run (complete false)."""
        self.loss_value = float(value.detach().item() if isinstance(value, torch.Tensor) else value)
        self.loss_given = True

    def __enter__(self):
        check_target(self.out_dir, self.overwrite)
        self._t0 = time.perf_counter_ns() - 1000
        self._closed = False
        self._in_optimizer = False
        self.backward_start_ns = None
        self.saved_at_backward = 0
        self.optimizer_span = [0, 0]
        self._live, self._alloc_seq = 0, 0
        self._stack, self._call_stack, self._ranges, self._keep = [], [], [], []
        self._sindex, self._live_storage, self._grads, self._opt_keys = {}, {}, set(), set()
        self._param_keys, self._buffer_keys, self._paths, self._handles = {}, {}, {}, []
        self.block_prefix, self._block_index, self.blocks = None, {}, 0
        self.device = "cpu"
        self.input_shape = None
        self.input_is_tokens = False
        if self.model is not None:
            self._attach_model()
        self._count_optimizer_state("init")
        if self.optimizer is not None:
            self._wrap_optimizer()
        self.start_ns = max(self._now(), 0)
        self._first_event = len(self.events)
        self._cuda_history = self.device == "cuda" and compat.cuda_memory_history(True)
        self._prof = None
        if self.profile:
            acts = [torch.profiler.ProfilerActivity.CPU]
            if self.device == "cuda":
                acts.append(torch.profiler.ProfilerActivity.CUDA)
            self._prof = torch.profiler.profile(activities=acts, profile_memory=True, with_flops=True,
                                                record_shapes=True)
            self._prof.__enter__()
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        self._mode = OpOutputs(self)
        self._mode.__enter__()
        self._kwargs = compat.module_call_kwargs()  # keyword tensors of module calls (torch < 2.0)
        self._kwargs.__enter__()
        _active.append(self)
        return self

    def _attach_model(self):
        m = self.model
        # Module and parameter names become CSV and JSON text of the run directory: refused here,
        # before the step runs, when they hold what RematLab's readers refuse or UTF-8 cannot hold.
        for kind, names in (("module", (n for n, _ in m.named_modules())),
                            ("parameter", (n for n, _ in m.named_parameters()))):
            for name in names:
                problem = _text_problem(name)
                if problem:
                    raise ValueError("rematlab.record: the %s name %r %s; rename it to record this model"
                                     % (kind, name, problem))
        stack_name, stack = compat.block_stack(m)
        if stack is not None:
            self.block_prefix = stack_name + "." if stack_name else ""
            self._block_index = {str(i): i for i in range(len(stack))}
            self.blocks = len(stack)
        for name, mod in m.named_modules():
            self._paths[id(mod)] = name
            self._handles.append(compat.forward_pre_hook(mod, self._pre_hook))
            self._handles.append(mod.register_forward_hook(self._post_hook))
        for name, buf in m.named_buffers():
            self._buffer_keys.setdefault(compat.storage_of(buf)[0], name)
        for name, p in m.named_parameters():
            key, b = compat.storage_of(p)
            if p.is_cuda:
                self.device = "cuda"
            if key not in self._param_keys:
                self._param_keys[key] = name
                self._storage_index(key)
                self._event(b, "parameters", -1, 0, ("param", name), "init", step=-1)
            if p.requires_grad:
                if p.grad is not None:
                    self._grads.add(name)
                    self._event(compat.tensor_bytes(p.grad), "gradients", -1, 0, ("param", name), "init", step=-1)
                self._handles.append(p.register_hook(self._grad_hook(name, p)))

    def _detach(self):
        _active.remove(self)
        self._kwargs.__exit__(None, None, None)
        self._mode.__exit__(None, None, None)
        self._hooks.__exit__(None, None, None)
        for r in reversed(self._ranges):
            r.__exit__(None, None, None)
        self._ranges.clear()
        for h in self._handles:
            h.remove()
        if self.optimizer is not None:
            if self._own_step:
                self.optimizer.step = self._orig_step
            else:
                del self.optimizer.step

    def __exit__(self, exc_type, exc, tb):
        self.end_ns = max(self._now(), 0)
        try:
            self._detach()
        finally:
            if self._prof is not None:
                self._prof_events = compat.stop_profiler(self._prof, read=exc_type is None)
        if exc_type is not None:
            self._closed = True
            return False  # the step's error propagates; nothing is written
        snapshot = compat.cuda_memory_snapshot() if self._cuda_history else None
        if self._cuda_history:
            compat.cuda_memory_history(False)
        self._closed = True
        self._keep.clear()
        profile = read_profile(self._prof_events, self) if self._prof is not None else None
        if not self.saved:
            warnings.warn("rematlab.record: the step saved no tensors for backward (no parameter needs a "
                          "gradient, or the forward ran under torch.no_grad); the ledger is empty")
        self.path = write_run(self, profile, snapshot)
        return False


def record(out_dir, model=None, optimizer=None, profile=True, model_config=None, overwrite=False):
    """Records the training step run inside the `with` block into run directory `out_dir`.

    model: the torch.nn.Module (its modules give each saved tensor its module path; the
    children of its first ModuleList, or without one of its first nn.Sequential of two or more
    modules of one class, are the blocks). optimizer: its step is timed as the
    optimizer phase and its state counted. profile: also run torch.profiler (ops, times,
    FLOPs). model_config: RematLab model keys (docs/model-config.md) for summary.json's
    `model`, over what is inferred. overwrite: replace an earlier recorded run there."""
    return Recorder(out_dir, model, optimizer, profile, model_config, overwrite)
