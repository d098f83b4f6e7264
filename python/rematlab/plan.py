"""Checkpoint plans (the syntax of `rematlab-batch plan --from-run ... --policy P`, docs/batch.md)
and applying one to a model with torch.utils.checkpoint.

  none             nothing checkpointed: the step as recorded
  per-block        checkpoint every block (each child of the first ModuleList, or without one of
                   the first nn.Sequential of two or more modules of one class) on its own
  every:K          checkpoint blocks 0, K, 2K, ...
  segments:K       cut the blocks into K segments of consecutive blocks (lengths within one of each
                   other, the longer first, as uniform:segments=K), one checkpoint each
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
import warnings

import torch
import torch.utils.checkpoint as tuc

from . import compat
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
        if self.kind == "segments":  # K segments, as uniform:segments=K: the longer first
            if self.k > blocks:
                raise ValueError("checkpoint plan %r: %d blocks make at most %d segments" % (self.spec, blocks, blocks))
            q, r = divmod(blocks, self.k)
            starts = [i * q + min(i, r) for i in range(self.k + 1)]
            return [(starts[i], starts[i + 1] - 1) for i in range(self.k)]
        if self.kind == "sqrt":
            k = math.isqrt(blocks) + (math.isqrt(blocks) ** 2 < blocks)
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
    if regions.kind == "none":
        raise ValueError("checkpoint plan %r: selective needs regions to checkpoint after '@', not none" % s)
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
    if kind in ("per-block", "sqrt", "none") and not arg:
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
    raise ValueError("checkpoint plan %r: not one of none, per-block, every:K, segments:K, sqrt, modules:GLOB, "
                     "selective:keep=CLASS[@PLAN]" % whole)


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
        self.unfinished = []  # per region of several modules: refuses when its last run went unused

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


def _hidden(out):
    """What a model hands the next block of a stack: the block's output, or the first element
    of the tuple it returns (Hugging Face's blocks return (hidden_states, ...))."""
    return out[0] if isinstance(out, tuple) and out else out


def _same_args(a, b):
    """The same arguments: the same tensors (the very objects), equal other values."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_args(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same_args(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 (a value whose == is not a truth value: compare objects)
        return a is b


def _tracks_stats(mod):
    """Whether `mod`'s forward updates buffers in training: a BatchNorm or InstanceNorm tracking
    its running statistics."""
    return isinstance(mod, torch.nn.modules.batchnorm._NormBase) and mod.track_running_stats


def _running_stats(mods):
    """The buffers the forward of `mods` updates in training. Looked up at each use: moving a
    model to another device replaces its buffers."""
    return [b for m in mods for sub in m.modules() if _tracks_stats(sub) for b in sub.buffers(recurse=False)]


def _region_forward(applied, plan, paths, mods, context_fn=None):
    """Runs the region `mods` (consecutive blocks, or one module) under one checkpoint from the
    call of its first module, each module through its own call (its hooks run, within the
    checkpoint). The checkpoint returns every module's output: a later module of the region,
    called by the model next, returns its own output without running again, so whatever the
    model reads (every block's output, a tuple's other elements) is what it computes unplanned.
    The model must call them in order, each on the hidden state of the one before (unchanged
    since) and with the first one's other arguments, and call them all (no layer dropped, no
    early exit): anything else is refused with the reason. Without gradients nothing is
    checkpointed and every module runs."""
    from . import recorder
    first, path = mods[0], paths[0]
    orig = first.forward
    inner = [m.forward for m in mods]
    inside = threading.local()
    # outs: the outputs of the region's last run, at: the next module; args, kwargs: the first
    # module's; hidden: the keyword the hidden state came in by ("" positionally); versions: of
    # the hidden states handed on
    seg = threading.local()
    first_run = threading.local()

    def refuse(i, why):
        seg.outs = None
        raise RuntimeError("checkpoint plan %r: %s runs as part of the checkpointed segment %s..%s, but %s; "
                           "a segment runs its blocks from its first one, each on the hidden state of the one "
                           "before: checkpoint them one by one (per-block) or name the modules (modules:GLOB)"
                           % (plan.spec, paths[i], paths[0], paths[-1], why))

    def split(args, kwargs, name):
        """(hidden state, other positional arguments, other keyword arguments) of a call."""
        if name:
            rest = dict(kwargs)
            return rest.pop(name, None), args, rest
        return (args[0] if args else None), args[1:], kwargs

    def run(*args, **kwargs):
        rec = recorder.current()
        rng = torch.autograd.profiler.record_function("rematlab::ckpt::" + path) if rec and rec.profile else None
        if rng is not None:
            rng.__enter__()
        recompute = not getattr(first_run, "on", False)
        first_run.on = False
        stats = _running_stats(mods) if recompute else []
        kept = [b.detach().clone() for b in stats]
        try:
            inside.on = True
            outs = [orig(*args, **kwargs)]
            _, rest, other = split(args, kwargs, seg.hidden)
            for m in mods[1:]:
                h = _hidden(outs[-1])
                outs.append(m(*rest, **dict(other, **{seg.hidden: h})) if seg.hidden else m(h, *rest, **other))
            return outs
        finally:
            inside.on = False
            with torch.no_grad():
                for b, k in zip(stats, kept):
                    b.copy_(k)
            if rng is not None:
                rng.__exit__(None, None, None)

    def unfinished():
        """Refuses when this region's last run was not used whole on this thread."""
        if len(mods) > 1 and getattr(seg, "outs", None) is not None:
            refuse(seg.at, "the model did not call it after %s ran (a dropped layer, an early exit, or an error "
                           "in the forward before it)" % paths[0])

    def forward(*args, **kwargs):
        if getattr(inside, "on", False) or not torch.is_grad_enabled():
            return orig(*args, **kwargs)
        for check in applied.unfinished:  # every segment's, this one's included
            check()
        rec = recorder.current()
        if rec is not None:
            rec.note_checkpoint(path, list(args) + list(kwargs.values()))
        # The hidden state: the first positional argument, or else the first keyword tensor.
        seg.hidden = "" if args else next((k for k, v in kwargs.items() if isinstance(v, torch.Tensor)), "")
        first_run.on = True
        try:
            outs = _checkpoint(run, *args, _context_fn=context_fn, **kwargs)
        finally:
            first_run.on = False
        if len(mods) > 1:
            seg.outs, seg.at, seg.args, seg.kwargs = outs, 1, args, kwargs
            seg.versions = [getattr(_hidden(o), "_version", None) for o in outs]
        return outs[0]
    applied.patch(first, forward)
    applied.unfinished.append(unfinished)

    def later(i):
        def call(*a, **k):
            if getattr(inside, "on", False) or not torch.is_grad_enabled():
                return inner[i](*a, **k)
            outs = getattr(seg, "outs", None)
            if outs is None:
                refuse(i, "it was called without %s before it (or an outer checkpoint recomputes it: "
                          "a segment cannot nest in another checkpoint)" % paths[0])
            if seg.at != i:
                refuse(i, "it was called out of order (after %s)" % paths[seg.at - 1])
            x, rest, other = split(a, k, seg.hidden)
            _, first_rest, first_other = split(seg.args, seg.kwargs, seg.hidden)
            want = _hidden(outs[i - 1])
            if x is not want:
                refuse(i, "it was called on something other than the hidden state %s returned" % paths[i - 1])
            if getattr(x, "_version", None) != seg.versions[i - 1]:
                refuse(i, "the hidden state %s returned was changed in place before it" % paths[i - 1])
            if not (_same_args(rest, first_rest) and _same_args(other, first_other)):
                refuse(i, "it was called with other arguments than %s" % paths[0])
            seg.at += 1
            out = outs[i]
            outs[i - 1] = None  # checked: the model holds it if it reads it
            if seg.at == len(mods):  # the region's outputs and arguments are the model's alone now
                seg.outs = seg.args = seg.kwargs = None
            return out
        return call
    for i in range(1, len(mods)):
        applied.patch(mods[i], later(i))


def checkpoint_plan(model, plan):
    """Applies `plan` (text or CheckpointPlan) to `model` with torch.utils.checkpoint
    (use_reentrant=False where torch has it): the chosen modules' forward is wrapped. A segment
    of several blocks runs as one checkpoint from its first block's call, which returns every
    block's output; the later blocks return theirs when the model calls them (in order, each on
    the hidden state of the one before, a tuple's first element, with the first block's other
    arguments, all of them), or refuse with the reason: a plan never changes what the model
    computes.
    Returns a handle whose remove() undoes it; `record` writes the plan into the run."""
    plan = parse_plan(plan)
    if getattr(model, "_rematlab_plan", None) is not None:
        raise ValueError("checkpoint_plan: the model already has plan %r; remove() it first" % model._rematlab_plan.spec)
    context_fn = selective_context_fn(plan) if plan.keep else None
    # transformers' own checkpointing (gradient_checkpointing_enable()) would rerun our regions
    # from outside them.
    nested = [n for n, m in model.named_modules() if getattr(m, "gradient_checkpointing", False) is True]
    if nested:
        raise ValueError("checkpoint_plan %r: %s checkpoints already (gradient_checkpointing_enable()); "
                         "disable that first, a plan cannot run inside another checkpoint"
                         % (plan.spec, nested[0] or type(model).__name__))
    regions = []  # (paths, modules)
    if plan.kind == "modules":
        chosen = []
        for name, mod in model.named_modules():
            if name and any(fnmatch.fnmatchcase(name, g) for g in plan.globs) and \
                    not any(name.startswith(c + ".") for c, _ in chosen):
                chosen.append((name, mod))
        if not chosen:
            raise ValueError("checkpoint_plan %r: no module path matches" % plan.spec)
        regions = [([name], [mod]) for name, mod in chosen]
    elif plan.kind != "none":
        prefix, blocks = compat.block_stack(model)
        if blocks is None:
            raise ValueError("checkpoint_plan %r: the model has no blocks (no nn.ModuleList, no nn.Sequential of two "
                             "or more modules of one class); name the modules to checkpoint with modules:GLOB" % plan.spec)
        regions = [([(prefix + "." if prefix else "") + str(b) for b in range(s, e + 1)],
                    [blocks[b] for b in range(s, e + 1)]) for s, e in plan.regions(len(blocks))]
    stats = [p + "." + n if n else p for paths, mods in regions for p, m in zip(paths, mods)
             for n, sub in m.named_modules() if _tracks_stats(sub)]
    if stats:
        warnings.warn("checkpoint_plan %r: %s update their running statistics in their forward; where they are "
                      "recomputed the statistics are put back as the first run left them, so they change once a "
                      "step, as without the plan" % (plan.spec, ", ".join(stats[:4]) + (", ..." if len(stats) > 4 else "")))
    applied = _Applied(model, plan)
    for paths, mods in regions:
        _region_forward(applied, plan, paths, mods, context_fn)
    model._rematlab_plan = plan
    return applied
