"""Checkpoint plans (the syntax of `rematlab-batch plan --from-run ... --policy P`, docs/batch.md)
and applying one to a model with torch.utils.checkpoint.

  per-block        checkpoint every block (each child of the first ModuleList) on its own
  every:K          checkpoint blocks 0, K, 2K, ...
  segments:K       cut the blocks into segments of K consecutive blocks, one checkpoint each
  sqrt             segments of ceil(sqrt(N)) blocks
  modules:G[,G]    checkpoint each module whose path matches a glob (fnmatch), outermost wins
  selective:keep=C[,C][@PLAN]
                   selective checkpointing of the regions of PLAN (one of the above; per-block
                   when left out): inside each, the outputs of the ops of classes C
                   (rematlab.op_classes) are saved, every other op is recomputed
"""
import fnmatch
import functools
import inspect
import math
import threading

import torch
import torch.utils.checkpoint as tuc

from .op_classes import OP_CLASSES, ops_of

BLOCK_KINDS = ("per-block", "every", "segments", "sqrt")


SELECTIVE_MIN_TORCH = "2.4"


class CheckpointPlan:
    """kind, k, globs: the regions (a block plan or modules); keep: for a selective plan the op
    classes whose outputs are saved inside them (empty: a plain checkpoint)."""

    def __init__(self, spec, kind, k=0, globs=(), keep=()):
        self.spec, self.kind, self.k, self.globs, self.keep = spec, kind, k, tuple(globs), tuple(keep)

    def regions(self, blocks):
        """The checkpointed segments (first, last) of a block-level plan; [] for `modules`."""
        if self.kind == "per-block":
            return [(b, b) for b in range(blocks)]
        if self.kind == "every":
            return [(b, b) for b in range(0, blocks, self.k)]
        if self.kind in ("segments", "sqrt"):
            k = self.k if self.kind == "segments" else math.isqrt(blocks) + (math.isqrt(blocks) ** 2 < blocks)
            return [(s, min(s + k, blocks) - 1) for s in range(0, blocks, max(k, 1))]
        return []

    def __repr__(self):
        return "CheckpointPlan(%r)" % self.spec


def _parse_selective(s, arg):
    if not arg.startswith("keep="):
        raise ValueError("checkpoint plan %r: selective needs keep=CLASS[,CLASS], e.g. selective:keep=matmul" % s)
    classes, at, base = arg[len("keep="):].partition("@")
    keep = classes.split(",")
    if not classes or any(not c for c in keep):
        raise ValueError("checkpoint plan %r: selective needs keep=CLASS[,CLASS], e.g. selective:keep=matmul" % s)
    for c in keep:
        if c not in OP_CLASSES:
            raise ValueError("checkpoint plan %r: unknown op class %r (op classes: %s)"
                             % (s, c, ", ".join(sorted(OP_CLASSES))))
    if at and not base:
        raise ValueError("checkpoint plan %r: nothing after '@' (a plan of the regions, e.g. @modules:h.*)" % s)
    if base.startswith("selective"):
        raise ValueError("checkpoint plan %r: the regions after '@' cannot be selective themselves" % s)
    regions = _parse_regions(base, s) if at else CheckpointPlan(s, "per-block")
    return CheckpointPlan(s, regions.kind, regions.k, regions.globs, keep)


def parse_plan(spec):
    """A CheckpointPlan from its text; ValueError naming what is wrong."""
    if isinstance(spec, CheckpointPlan):
        return spec
    s = str(spec).strip()
    kind, _, arg = s.partition(":")
    if kind == "selective":
        return _parse_selective(s, arg)
    return _parse_regions(s, s)


def _parse_regions(s, whole):
    """The plan `s` of regions (not selective), `whole` the text it is part of, for messages."""
    kind, _, arg = s.partition(":")
    if kind in ("per-block", "sqrt") and not arg:
        return CheckpointPlan(s, kind)
    if kind in ("every", "segments"):
        if not arg.isdigit() or int(arg) < 1:
            raise ValueError("checkpoint plan %r: %s needs a whole number of blocks >= 1, e.g. %s:2"
                             % (whole, kind, kind))
        return CheckpointPlan(s, kind, int(arg))
    if kind == "modules":
        globs = [g for g in arg.split(",") if g]
        if not globs:
            raise ValueError("checkpoint plan %r: modules needs a module path glob, e.g. modules:h.*.mlp" % whole)
        return CheckpointPlan(s, kind, globs=globs)
    raise ValueError("checkpoint plan %r: not one of per-block, every:K, segments:K, sqrt, modules:GLOB, "
                     "selective:keep=CLASS[@PLAN]" % whole)


def _blocks(model):
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) > 0:
            return name, mod
    return None, None


def _checkpoint(fn, *args, _context_fn=None, **kwargs):
    if _context_fn is not None:  # selective: torch >= 2.4, checked by selective_context_fn
        return tuc.checkpoint(fn, *args, use_reentrant=False, context_fn=_context_fn, **kwargs)
    if "use_reentrant" in inspect.signature(tuc.checkpoint).parameters:
        return tuc.checkpoint(fn, *args, use_reentrant=False, **kwargs)
    return tuc.checkpoint(fn, *args, **kwargs)  # pragma: no cover (torch before 1.11)


def selective_context_fn(plan):
    """The context_fn of torch.utils.checkpoint for the selective plan `plan`: a policy that
    saves the outputs of the ops of plan.keep's classes (CheckpointPolicy.MUST_SAVE) and
    recomputes every other op (PREFER_RECOMPUTE). RuntimeError where torch has no selective
    checkpointing (before 2.4), naming the installed version."""
    if not (hasattr(tuc, "create_selective_checkpoint_contexts") and hasattr(tuc, "CheckpointPolicy")
            and "context_fn" in inspect.signature(tuc.checkpoint).parameters):
        raise RuntimeError("checkpoint_plan %r: selective checkpointing needs torch >= %s "
                           "(torch.utils.checkpoint.create_selective_checkpoint_contexts); this is torch %s"
                           % (plan.spec, SELECTIVE_MIN_TORCH, torch.__version__))
    names = ops_of(plan.keep)
    policy = tuc.CheckpointPolicy

    def policy_fn(ctx, func, *args, **kwargs):
        # func: the aten OpOverload; its schema name is "aten::mm" for aten.mm.default
        name = getattr(getattr(func, "_schema", None), "name", "")
        return policy.MUST_SAVE if name in names else policy.PREFER_RECOMPUTE
    return functools.partial(tuc.create_selective_checkpoint_contexts, policy_fn)


class _Applied:
    """What checkpoint_plan changed; remove() puts the model back."""

    def __init__(self, model, plan):
        self.model, self.plan, self._patched = model, plan, []

    def patch(self, mod, forward):
        self._patched.append((mod, "forward" in mod.__dict__, mod.__dict__.get("forward")))
        mod.forward = forward

    def remove(self):
        for mod, had, old in reversed(self._patched):
            if had:
                mod.forward = old
            else:
                del mod.forward
        self._patched.clear()
        if getattr(self.model, "_rematlab_plan", None) is self.plan:
            del self.model._rematlab_plan


def _region_forward(applied, path, mods, first, context_fn=None):
    """The forward of `first` (the first module of a region) run under a checkpoint: the region's
    modules in order, each through its own call (its hooks run, within the checkpoint)."""
    from . import recorder
    orig = first.forward
    inside = threading.local()

    def run(*args, **kwargs):
        rec = recorder.current()
        rng = torch.autograd.profiler.record_function("rematlab::ckpt::" + path) if rec and rec.profile else None
        if rng is not None:
            rng.__enter__()
        try:
            inside.on = True
            x = orig(*args, **kwargs)
            for m in mods[1:]:
                x = m(x, *args[1:], **kwargs)
            return x
        finally:
            inside.on = False
            if rng is not None:
                rng.__exit__(None, None, None)

    def forward(*args, **kwargs):
        if getattr(inside, "on", False) or not torch.is_grad_enabled():
            return orig(*args, **kwargs)
        rec = recorder.current()
        if rec is not None:
            rec.note_checkpoint(path, list(args) + list(kwargs.values()))
        return _checkpoint(run, *args, _context_fn=context_fn, **kwargs)
    applied.patch(first, forward)
    for m in mods[1:]:
        inner = m.forward

        def passthrough(x, *a, _inner=inner, **k):
            return _inner(x, *a, **k) if getattr(inside, "on", False) else x
        applied.patch(m, passthrough)


def checkpoint_plan(model, plan):
    """Applies `plan` (text or CheckpointPlan) to `model` with torch.utils.checkpoint
    (use_reentrant=False where torch has it): the chosen modules' forward is wrapped. A segment
    of several blocks runs as one checkpoint from its first block; the other blocks of it pass
    their first argument through, so blocks must take the hidden state first and return it alone.
    Returns a handle whose remove() undoes it; `record` writes the plan into the run."""
    plan = parse_plan(plan)
    if getattr(model, "_rematlab_plan", None) is not None:
        raise ValueError("checkpoint_plan: the model already has plan %r; remove() it first" % model._rematlab_plan.spec)
    context_fn = selective_context_fn(plan) if plan.keep else None
    applied = _Applied(model, plan)
    if plan.kind == "modules":
        chosen = []
        for name, mod in model.named_modules():
            if name and any(fnmatch.fnmatchcase(name, g) for g in plan.globs) and \
                    not any(name.startswith(c + ".") for c, _ in chosen):
                chosen.append((name, mod))
        if not chosen:
            raise ValueError("checkpoint_plan %r: no module path matches" % plan.spec)
        for name, mod in chosen:
            _region_forward(applied, name, [mod], mod, context_fn)
    else:
        prefix, blocks = _blocks(model)
        if blocks is None:
            raise ValueError("checkpoint_plan %r: the model has no ModuleList of blocks" % plan.spec)
        for s, e in plan.regions(len(blocks)):
            mods = [blocks[b] for b in range(s, e + 1)]
            _region_forward(applied, (prefix + "." if prefix else "") + str(s), mods, mods[0], context_fn)
    model._rematlab_plan = plan
    return applied
