"""The profiler's events of a recorded step, turned into RematLab op rows: each top-level aten
op with its time on the run clock, its phase, its module and block and its FLOPs; and what the
events tell about the saved tensors (the op that saved each, the backward node that used it)."""
import bisect
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


# Names torch's own parse leaves out of its events (torch.autograd.profiler_util._filter_name).
_FILTERED = frozenset(["[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                       "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                       "aten::is_leaf", "aten::output_nr", "aten::_version"])


class _Range:
    __slots__ = ("start", "end")

    def __init__(self, start, end):
        self.start, self.end = start, end


class _Event:
    """What read_profile reads of a profiler event: the attributes of torch's FunctionEvent, made
    from the profiler's raw (kineto) events without torch's parse (lean_events)."""
    __slots__ = ("name", "time_range", "sequence_nr", "flops", "device_type", "thread", "is_async",
                 "cpu_parent", "cpu_children", "cpu_memory_usage", "cuda_memory_usage", "id")

    def __init__(self, name, start, end, seq, flops, device_type, thread, is_async, cpu_mem, cuda_mem, eid=0):
        self.id = eid
        self.name, self.time_range = name, _Range(start, end)
        self.sequence_nr, self.flops, self.device_type = seq, flops, device_type
        self.thread, self.is_async = thread, is_async
        self.cpu_parent, self.cpu_children = None, []
        self.cpu_memory_usage, self.cuda_memory_usage = cpu_mem, cuda_mem

    @property
    def self_cpu_memory_usage(self):
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def self_cuda_memory_usage(self):
        return self.cuda_memory_usage - sum(c.cuda_memory_usage for c in self.cpu_children)


def lean_events(result, device_types, rewrite_name=lambda n: n):
    """The events torch's profiler parse would give for its raw result `result` (a step's kineto
    results), with the same names, times (µs from the trace's start), sequence numbers, FLOPs,
    memory usage (the allocations within each CPU event's interval; those within none as
    "[memory]" events), the same order and the same CPU parent/child tree (per thread, by
    interval nesting), built in a fraction of its time: only what read_profile reads.
    device_types: torch's DeviceType (CPU, CUDA and the others torch counts as CPU or CUDA
    memory); rewrite_name: torch's demangling of device kernels' names."""
    cpu, cuda = device_types.CPU, device_types.CUDA
    cpu_kinds = (device_types.CPU, device_types.MKLDNN, device_types.IDEEP)
    cuda_kinds = (device_types.CUDA, device_types.HIP)
    raw = result.events()
    t0 = result.trace_start_us()
    mem = []  # (start_us, cpu bytes, cuda bytes, raw event), by start
    for k in raw:
        if k.name() == "[memory]":
            dev, n = k.device_type(), k.nbytes()
            mem.append((k.start_us(), n if dev in cpu_kinds else 0, n if dev in cuda_kinds else 0, k))
    order = sorted(range(len(mem)), key=lambda i: mem[i][0])
    starts = [mem[i][0] for i in order]
    cpu_sum, cuda_sum = [0], [0]
    for i in order:
        cpu_sum.append(cpu_sum[-1] + mem[i][1])
        cuda_sum.append(cuda_sum[-1] + mem[i][2])
    matched = [0] * (len(order) + 1)  # a difference array over `order`: which records lie in an event
    events, linked = [], {}
    for k in raw:
        name = k.name()
        if name in _FILTERED:
            continue
        start = k.start_us()
        end = start + k.duration_us()
        dev = k.device_type()
        cpu_mem = cuda_mem = 0
        if dev == cpu:
            lo, hi = bisect.bisect_left(starts, start), bisect.bisect_right(starts, end)
            if lo < hi:
                cpu_mem, cuda_mem = cpu_sum[hi] - cpu_sum[lo], cuda_sum[hi] - cuda_sum[lo]
                matched[lo] += 1
                matched[hi] -= 1
        thread = k.start_thread_id()
        if dev != cpu:
            name = rewrite_name(name)  # device kernels' names demangled, as torch shows them
        e = _Event(name, start - t0, end - t0, k.sequence_nr(), k.flops(), dev, thread,
                   k.is_async() or thread != k.end_thread_id(), cpu_mem, cuda_mem, k.correlation_id())
        events.append(e)
        corr = k.linked_correlation_id()
        if corr > 0:
            linked.setdefault(corr, []).append(e)
    # A CUDA runtime event of the CPU takes the thread of the op it launched for (as torch does).
    for e in list(events):
        if e.device_type == cpu and not e.is_async and e.id in linked:
            for f in linked[e.id]:
                if f.device_type == cpu:
                    f.thread = e.thread
    inside = 0
    for j, i in enumerate(order):
        inside += matched[j]
        if not inside:
            st, c, g, k = mem[i]
            events.append(_Event("[memory]", st - t0, st - t0, -1, None, cpu, k.start_thread_id(), False, c, g))
    for k in raw:  # an allocation that failed (the step caught it), as torch keeps it
        if k.name() == "[OutOfMemory]":
            dev, n = k.device_type(), k.nbytes()
            st = k.start_us() - t0
            events.append(_Event("[OutOfMemory]", st, st, -1, None, cpu, k.start_thread_id(), False,
                                 n if dev in cpu_kinds else 0, n if dev in cuda_kinds else 0))
    events.sort(key=lambda e: (e.time_range.start, -e.time_range.end))
    # The tree (torch's _populate_cpu_children): per thread, each synchronous CPU event's parent is
    # the innermost one whose interval holds it.
    by_thread = {}
    for e in events:
        if not e.is_async and e.device_type == cpu:
            by_thread.setdefault(e.thread, []).append(e)
    for group in by_thread.values():
        stack = []
        for e in group:  # already by (start, -end)
            while stack:
                parent = stack[-1]
                if e.time_range.start >= parent.time_range.end or e.time_range.end > parent.time_range.end:
                    stack.pop()
                else:
                    parent.cpu_children.append(e)
                    e.cpu_parent = parent
                    break
            stack.append(e)
    # An event that is its parent's only child and has its name is folded into it, pass after
    # pass as torch's _remove_dup_nodes does.
    while True:
        folded = set()
        for i, e in enumerate(events):
            p = e.cpu_parent
            if p is not None and p.name == e.name and len(p.cpu_children) == 1:
                p.cpu_children = e.cpu_children
                for ch in e.cpu_children:
                    ch.cpu_parent = p
                folded.add(i)
        if not folded:
            return events
        events = [e for i, e in enumerate(events) if i not in folded]


def read_profile(events, rec):
    """The op rows of a recorded step from its profiler events (compat.stop_profiler)."""
    out = Profile()
    events = list(events)
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
