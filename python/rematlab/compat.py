"""What differs between the torch versions the recorder supports (1.13 and 2.x)."""
import contextlib
import inspect
import threading

import torch


def storage_of(t):
    """(key, bytes) of the storage under tensor `t`: its data pointer and its size in bytes."""
    if hasattr(t, "untyped_storage"):  # torch >= 2.0
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()
    s = t.storage()  # torch 1.13: a TypedStorage
    return s.data_ptr(), s.nbytes()


def tensor_bytes(t):
    return t.numel() * t.element_size()


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def cuda_memory_history(enable):
    """Starts (True) or stops (False) CUDA's allocator history where this torch has it: torch
    1.13 and 2.0 take a bool, 2.1 on "all" / None."""
    mem = getattr(torch.cuda, "memory", None)
    f = getattr(mem, "_record_memory_history", None) if mem is not None else None
    if f is None or not torch.cuda.is_available():
        return False
    try:
        f("all" if enable else None)
    except (TypeError, ValueError, RuntimeError):
        f(bool(enable))
    return True


def cuda_memory_snapshot():
    mem = getattr(torch.cuda, "memory", None)
    f = getattr(mem, "_snapshot", None) if mem is not None else None
    return f() if f is not None else None


def record_range(name):
    """An open profiler range (torch.profiler.record_function) that the caller closes."""
    r = torch.autograd.profiler.record_function(name)
    r.__enter__()
    return r


_call_kwargs = threading.local()  # torch before 2.0: per module id, the keyword arguments of its calls


def forward_pre_hook(mod, hook):
    """Registers hook(module, args, kwargs) to run before `mod`'s forward; the handle. torch >= 2.0
    hands hooks the keyword arguments itself (with_kwargs=True); before, they come from
    `module_call_kwargs()`, which must be active around the calls."""
    if "with_kwargs" in inspect.signature(mod.register_forward_pre_hook).parameters:
        def with_kwargs(m, args, kwargs):
            hook(m, args, kwargs)
        return mod.register_forward_pre_hook(with_kwargs, with_kwargs=True)

    def stashed(m, args):
        calls = getattr(_call_kwargs, "by_id", {}).get(id(m))
        hook(m, args, calls[-1] if calls else {})
    return mod.register_forward_pre_hook(stashed)


@contextlib.contextmanager
def module_call_kwargs():
    """Before torch 2.0, forward pre-hooks see no keyword arguments: while active, every module
    call notes its keyword arguments for `forward_pre_hook`'s hooks (nn.Module.__call__ wrapped,
    and put back on exit). Nothing to do where hooks take them."""
    if "with_kwargs" in inspect.signature(torch.nn.Module.register_forward_pre_hook).parameters:
        yield
        return
    orig = torch.nn.Module.__call__

    def call(self, *args, **kwargs):
        by_id = _call_kwargs.__dict__.setdefault("by_id", {})
        stack = by_id.setdefault(id(self), [])
        stack.append(kwargs)
        try:
            return orig(self, *args, **kwargs)
        finally:
            stack.pop()
            if not stack:
                del by_id[id(self)]
    torch.nn.Module.__call__ = call
    try:
        yield
    finally:
        torch.nn.Module.__call__ = orig


def block_stack(model):
    """(path, container) of a model's blocks: its first nn.ModuleList, or without one its first
    nn.Sequential of two or more modules of one class (torchvision's ResNet stages; not a stem of
    a convolution, a norm and an activation); (None, None) without."""
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) > 0:
            return name, mod
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Sequential) and len(mod) >= 2 and len({type(c) for c in mod}) == 1:
            return name, mod
    return None, None


def stop_profiler(prof, read=True):
    """Stops the torch.profiler.profile `prof` and returns its events as read_profile reads them
    (None with read=False: a step that raised). With torch 1.13, whose raw (kineto) results the
    autograd profiler keeps, they are read by profiled_ops.lean_events and torch's own parse of
    them, which takes most of a recording's time, is skipped; with any other torch (its parse may
    differ), or raw events of another shape, torch's parse gives them."""
    from .profiled_ops import lean_events
    inner = getattr(prof, "profiler", None)
    parse = getattr(type(inner), "_parse_kineto_results", None) if inner is not None else None
    lean = parse is not None and (torch.__version__.startswith("1.13") or not read)
    if not lean:
        prof.__exit__(None, None, None)
        return list(prof.events()) if read else None
    inner._parse_kineto_results = lambda result: []
    try:
        prof.__exit__(None, None, None)
    finally:
        del inner._parse_kineto_results
    if not read:
        return None
    result = getattr(inner, "kineto_results", None)
    try:
        from torch.autograd import DeviceType
        from torch.autograd.profiler_util import _rewrite_name
        return lean_events(result, DeviceType, lambda n: _rewrite_name(name=n, with_wildcard=True))
    except (AttributeError, TypeError, ImportError):
        from torch.autograd.profiler_util import EventList
        events = EventList(parse(inner, result))
        events._build_tree()
        return list(events)
