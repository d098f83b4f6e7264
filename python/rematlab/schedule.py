"""The schedule of a recorded step in RematLab's block terms (schedule.json and schedule.csv):
each block forward, and for a block-level checkpoint plan the recompute of each checkpointed
segment before its backward, the way torch.utils.checkpoint runs it."""


def _actions(blocks, regions):
    """(kind, block, keep) in order. `regions`: checkpointed segments (first, last) of blocks."""
    region_of = {}
    for s, e in regions:
        for b in range(s, e + 1):
            region_of[b] = (s, e)
    acts = []
    for b in range(blocks):
        r = region_of.get(b)
        acts.append(("forward", b, "all" if r is None else "input" if b == r[0] else "none"))
    b = blocks - 1
    while b >= 0:
        r = region_of.get(b)
        if r is None:
            acts.append(("backward", b, ""))
            b -= 1
            continue
        s, e = r
        for x in range(s, e):
            acts.append(("forward", x, "all"))
        acts.append(("recompute", e, "all"))
        for x in range(e, s - 1, -1):
            acts.append(("backward", x, ""))
        b = s - 1
    return acts


def _spans(rec, ops):
    """(phase, block) -> [start, end] on the run clock, from the module calls and the ops."""
    spans = {}

    def add(key, s, e):
        if key in spans:
            spans[key][0] = min(spans[key][0], s)
            spans[key][1] = max(spans[key][1], e)
        else:
            spans[key] = [s, e]
    for c in rec.calls:
        if c["block"] >= 0 and c["phase"] in ("forward", "recompute"):
            add((c["phase"], c["block"]), c["start_ns"], c["end_ns"])
    for o in ops:
        if o["block"] >= 0 and o["phase"] in ("forward", "recompute", "backward"):
            add((o["phase"], o["block"]), o["start_ns"], o["end_ns"])
    return spans


def block_schedule(rec, plan, ops):
    blocks = max(rec.blocks, 1)
    regions = plan.regions(rec.blocks) if plan is not None and rec.blocks > 0 else []
    acts = _actions(blocks, regions)
    spans = _spans(rec, ops)
    rows, prev_end, recomputed = [], rec.start_ns, set()
    for i, (kind, b, keep) in enumerate(acts):
        if kind == "forward" and i >= blocks:
            phase = "recompute"
        else:
            phase = {"forward": "forward", "recompute": "recompute", "backward": "backward"}[kind]
        if phase == "recompute":
            recomputed.add(b)
        s, e = spans.get((phase, b), (prev_end, prev_end))
        s = max(s, 0)
        e = max(e, s)
        prev_end = e
        rows.append({"index": i, "action": kind, "block": b, "keep": keep, "phase": phase, "start_ns": s,
                     "end_ns": e, "step": 0})
    schedule = {"format": "rematlab-schedule", "version": 1, "policy": plan.spec if plan is not None else "none",
                "params": "", "blocks": blocks, "checkpoint_slots": 0,
                "actions": [dict({"action": k, "block": b}, **({"keep": keep} if keep else {}))
                            for k, b, keep in acts]}
    flops = {"forward": 0, "recompute": 0, "backward": 0}
    for o in ops:
        if o["phase"] == "recompute":
            flops["recompute"] += o["flops"]
        elif o["block"] >= 0 and o["phase"] in flops:
            flops[o["phase"]] += o["flops"]
    stats = {"actions": len(acts), "block_forwards": sum(1 for k, _, _ in acts if k != "backward"),
             "first_forwards": blocks, "forward_flops": flops["forward"], "recompute_flops": flops["recompute"],
             "backward_flops": flops["backward"], "max_checkpoints": len(regions), "offloads": 0, "prefetches": 0}
    return schedule, rows, stats
