"""What differs between the torch versions the recorder supports (1.13 and 2.x)."""
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
