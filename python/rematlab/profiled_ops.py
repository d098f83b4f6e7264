"""The profiler's events of a recorded step, turned into RematLab op rows: each top-level aten
op with its time on the run clock, its phase, its module and block and its FLOPs; and what the
events tell about the saved tensors (the op that saved each, the backward node that used it)."""
import statistics

MOD = "rematlab::mod::"
CKPT = "rematlab::ckpt::"
PACK = "rematlab::pack#"
UNPACK = "rematlab::unpack#"
OPTIMIZER = "rematlab::optimizer"
EVALUATE = "autograd::engine::evaluate_function: "


class Profile:
    """ops: rows of ops.csv (dicts); the saved rows and the module calls get `op`, `node` and
    `flops` filled in by read_profile. memory_peak_bytes: the profiler's own peak of allocator
    bytes over the step (profile_memory=True)."""

    def __init__(self):
        self.ops = []
        self.memory_peak_bytes = 0
        self.offset_ns = 0


def _walk(events):
    """Per event (by id()): innermost module call, evaluate_function ancestor, optimizer flag,
    outermost aten op, and the checkpointed module it runs in (its recompute in backward)."""
    info = {}

    def get(e):
        k = id(e)
        if k in info:
            return info[k]
        chain = []
        x = e
        while x is not None and id(x) not in info:
            chain.append(x)
            x = x.cpu_parent
        up = info[id(x)] if x is not None else (None, None, False, None, None)
        for y in reversed(chain):
            call, ev, opt, aten, ckpt = up
            n = y.name
            # what y's descendants see
            if n.startswith(MOD):
                call = int(n[len(MOD):].split("::", 1)[0])
            elif n.startswith(EVALUATE):
                ev = y
            elif n == OPTIMIZER:
                opt = True
            elif n.startswith(CKPT):
                ckpt = n[len(CKPT):]
            elif n.startswith("aten::") and aten is None:
                aten = y
            info[id(y)] = (call, ev, opt, aten, ckpt)
            up = info[id(y)]
        return info[k]

    return get


def _parent_info(get, e):
    p = e.cpu_parent
    return get(p) if p is not None else (None, None, False, None, None)


def _subtree_flops(e):
    total, stack = 0, [e]
    while stack:
        x = stack.pop()
        total += int(getattr(x, "flops", 0) or 0)
        stack.extend(x.cpu_children)
    return total


def _innermost_seq_op(e):
    """The innermost aten op around event `e` that made an autograd node (sequence_nr >= 0)."""
    x = e.cpu_parent
    first = None
    while x is not None:
        if x.name.startswith("aten::"):
            first = first or x
            if getattr(x, "sequence_nr", -1) >= 0:
                return x
        x = x.cpu_parent
    return first


def read_profile(prof, rec):
    out = Profile()
    events = list(prof.events())
    get = _walk(events)
    calls = rec.calls

    # The profiler's clock against the run clock: each module call is timed by both.
    diffs = []
    for e in events:
        if e.name.startswith(MOD):
            i = int(e.name[len(MOD):].split("::", 1)[0])
            if 0 <= i < len(calls):
                diffs.append(calls[i]["start_ns"] - int(round(e.time_range.start * 1000)))
    out.offset_ns = int(statistics.median(diffs)) if diffs else rec.start_ns - int(
        round(min((e.time_range.start for e in events), default=0) * 1000))

    def clock(us):
        return max(int(round(us * 1000)) + out.offset_ns, 0)

    # Forward ops by the sequence number of the node they made; backward nodes by the same number.
    seq_call, seq_node = {}, {}
    bwd_start = None
    for e in events:
        seq = getattr(e, "sequence_nr", -1)
        if e.name.startswith(EVALUATE):
            if seq >= 0:
                seq_node[seq] = e.name[len(EVALUATE):]
            if bwd_start is None or e.time_range.start < bwd_start:
                bwd_start = e.time_range.start
        elif e.name.startswith("aten::") and seq >= 0:
            call, ev = get(e)[:2]
            if ev is None and seq not in seq_call:
                seq_call[seq] = call

    for e in events:
        n = e.name
        if n.startswith(PACK):
            row = rec.saved[int(n[len(PACK):])]
            op = _innermost_seq_op(e)
            if op is not None:
                row["op"] = op.name
                seq = getattr(op, "sequence_nr", -1)
                if seq in seq_node and not row["node"]:
                    row["node"] = seq_node[seq]
        elif n.startswith(UNPACK):
            row = rec.saved[int(n[len(UNPACK):])]
            ev = _parent_info(get, e)[1]
            if ev is not None:
                row["node"] = ev.name[len(EVALUATE):]  # exact: the node that read it

    for e in events:
        dev = str(getattr(e, "device_type", "CPU"))
        is_cuda = dev.endswith("CUDA")
        if not is_cuda and not e.name.startswith("aten::"):
            continue
        call, ev, opt, aten, ckpt = _parent_info(get, e)
        if not is_cuda and aten is not None:
            continue  # inside another op: counted with it
        if opt:
            phase = "optimizer"
        elif ev is not None:
            phase = "recompute" if call is not None or ckpt is not None else "backward"
        elif bwd_start is not None and e.time_range.start >= bwd_start:
            phase = "backward"
        else:
            phase = "forward"
        if call is None and ev is not None:
            call = seq_call.get(getattr(ev, "sequence_nr", -1))
        module = calls[call]["module"] if call is not None else ckpt if phase == "recompute" else ""
        flops = _subtree_flops(e) if not is_cuda else 0
        start, end = clock(e.time_range.start), clock(e.time_range.end)
        out.ops.append({"start_ns": start, "end_ns": max(end, start), "stream": "compute", "name": e.name, "op": module, "block": rec.block_of(module),
                        "phase": phase, "flops": flops, "_call": call if phase == "forward" else None,
                        "_cuda": is_cuda})
        if phase == "forward" and call is not None and not is_cuda:
            c = call
            while c is not None and c >= 0:
                calls[c]["flops"] = (calls[c]["flops"] or 0) + flops
                c = calls[c]["parent"]
    for c in calls:
        if c["flops"] is None:
            c["flops"] = 0  # the profiler ran: a call without ops did none
    out.ops.sort(key=lambda o: (o["start_ns"], o["end_ns"]))

    # The profiler's allocator view: each event's own net allocations (profile_memory), summed
    # in start order; a transient peak inside one op is not seen.
    cuda = rec.device == "cuda"
    live = peak = 0
    for e in sorted(events, key=lambda e: e.time_range.start):
        if e.name == "[memory]":
            d = e.cuda_memory_usage if cuda else e.cpu_memory_usage
        else:
            d = e.self_cuda_memory_usage if cuda else e.self_cpu_memory_usage
        live += int(d or 0)
        peak = max(peak, live)
    out.memory_peak_bytes = peak
    return out
