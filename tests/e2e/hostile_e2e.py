"""The catalogue of hostile inputs: each case is a command a user (or an attacker) could run, the
exit code it must give and the words its message must contain. Every category of bad input has
rows here; a case that crashes, hangs past its timeout or exits 0 fails. Python standard library
only."""
import argparse
import json
import os
import pickle
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_common  # noqa: E402
from e2e_common import check  # noqa: E402

TINY = {"architecture": "gpt2", "layers": 2, "hidden": 64, "heads": 4, "seq": 16, "batch": 1, "vocab": 100}


def nested(depth):
    return "[" * depth + "]" * depth


class Case:
    def __init__(self, name, args, code, *words, cwd=None, timeout=120, address_space=None, env=None, after=None,
                 file_size=None, native_only=False):
        self.name, self.args, self.code, self.words, self.cwd, self.timeout = name, args, code, words, cwd, timeout
        self.env = env  # variables added to the environment
        self.after = after  # a check of what the command left behind: returns (ok, what)
        self.address_space = address_space  # bytes of virtual memory the process may map
        self.file_size = file_size  # bytes a file the process writes may have (ulimit -f, as a full disk)
        self.native_only = native_only  # needs the system allocator (left out under a sanitizer)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def safetensors(header, data_bytes):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + bytes(data_bytes)


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def one_alloc_snapshot(filename, name):
    """A torch 2 memory snapshot of one allocation whose frame is (filename, 7, name)."""
    return pickle.dumps({"segments": [], "device_traces": [[{
        "action": "alloc", "addr": 4096, "size": 512, "time_us": 10,
        "frames": [{"filename": filename, "line": 7, "name": name}]}]]}, protocol=4)


def reader_findings(w, tiny_run, plugins):
    """Cases of what readers took from users: nested plugin replies, bytes a run directory cannot
    hold, shared or aliased data that expands past the file, a version past 2^63. Each failed
    before its fix (said in the commit that fixed it)."""
    cases = []
    if plugins:
        for lib in ("probe_nested.so", "plan_nested.so"):
            d = os.path.join(w, lib + ".dir")
            os.mkdir(d)
            os.symlink(os.path.join(plugins, lib), os.path.join(d, lib))
        # A child's reply of half a million nested arrays crashed the parent (SIGSEGV).
        cases += [
            Case("a load probe replying nested arrays", ["list", "policies"], 0, "probe_nested.so",
                 "nested deeper than 64", env={"REMAT_PLUGIN_PATH": os.path.join(w, "probe_nested.so.dir")}, timeout=60),
            Case("a plan replying nested arrays", ["plan", "--model", "tiny", "--policy", "plan_nested"], 1,
                 "plan_nested.so", "not a plan reply", "nested deeper than 64",
                 env={"REMAT_PLUGIN_PATH": os.path.join(w, "plan_nested.so.dir")}, timeout=60),
        ]
    # Invalid UTF-8 in a name lost the trained run at the end (nlohmann's type_error.316).
    bad_out = os.fsencode(os.path.join(w, "out")) + b"\xff"
    # NUL and invalid UTF-8 in an imported name made a directory compare and export refuse.
    nul_frame = write_bytes(os.path.join(w, "nul_frame.pickle"), one_alloc_snapshot("/src/model.py", "for\0ward"))
    utf8_frame = write_bytes(os.path.join(w, "utf8_frame.pickle"),
                             one_alloc_snapshot("/src/model.py", "forwarX").replace(b"forwarX", b"forwa\xff\xfe"))
    nul_op = write(os.path.join(w, "nul_op.json"), json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::m\u0000m", "ts": 1, "dur": 2}]}))
    nul_module = os.path.join(w, "nul_module")
    shutil.copytree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gui", "data", "recorded-gpt2"),
                    nul_module)
    calls = os.path.join(nul_module, "module_calls.csv")
    with open(calls, "rb") as f:
        text = f.read()
    write_bytes(calls, text.replace(b",wte,", b",w\0e,", 1))
    # Shared containers: 20,000 references to one list of 50,000 entries walked 10^9 entries.
    entries = [{"action": "snapshot", "time_us": t} for t in range(50000)]
    dag = write_bytes(os.path.join(w, "dag.pickle"),
                      pickle.dumps({"segments": [], "device_traces": [entries] * 20000}, protocol=4))
    memo = write_bytes(os.path.join(w, "memo.pickle"), b"\x80\x04N" + b"\x94" * 1000 + b".")
    # Safetensors names aliasing one buffer, and ranges that overlap.
    alias = write_bytes(os.path.join(w, "alias.safetensors"), safetensors(
        {"w%d" % i: {"dtype": "F32", "shape": [16384], "data_offsets": [0, 65536]} for i in range(2000)}, 65536))
    overlap = write_bytes(os.path.join(w, "overlap.safetensors"), safetensors(
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "b": {"dtype": "BF16", "shape": [4], "data_offsets": [8, 16]}}, 16))
    # A format version past 2^63 was said as "-9223372036854775808".
    huge_version = os.path.join(w, "huge_version")
    shutil.copytree(tiny_run, huge_version)
    with open(os.path.join(huge_version, "summary.json")) as f:
        s = json.load(f)
    s["format_version"] = 2 ** 63
    write(os.path.join(huge_version, "summary.json"), json.dumps(s))
    # Segments and blocks a pickle repeats by reference: one segment's live blocks 2,000 times
    # (4.4 KB became a 4.3 MB run directory of 16,000 allocations at the same eight addresses),
    # one segment of free blocks 2,000 times, one block 400 times in a segment of 4 KiB.
    live = [{"address": 4096 + 512 * i, "size": 512, "state": "active_allocated", "frames": []} for i in range(8)]
    seg = lambda base, blocks: {"device": 0, "address": base, "total_size": 4096, "allocated_size": 0,  # noqa: E731
                                "active_size": 0, "segment_type": "large", "blocks": blocks}
    seg_twice = write_bytes(os.path.join(w, "seg_twice.pickle"), pickle.dumps(
        {"segments": [seg(4096, live)] * 2000, "device_traces": [[]]}, protocol=4))
    free = [{"size": 512, "state": "inactive", "history": []}] * 8
    seg_overlap = write_bytes(os.path.join(w, "seg_overlap.pickle"), pickle.dumps(
        {"segments": [seg(4096, free)] * 2000, "device_traces": [[]]}, protocol=4))
    one_block = {"size": 512, "state": "active_allocated", "history": []}
    seg_overfull = write_bytes(os.path.join(w, "seg_overfull.pickle"), pickle.dumps(
        {"segments": [seg(4096 * 1000 * (k + 1), [one_block] * 400) for k in range(15)], "device_traces": [[]]},
        protocol=4))
    imp = lambda f, name: ["import", f, "--out", os.path.join(w, name)]  # noqa: E731
    cases += [
        Case("a snapshot listing one segment's live blocks 2,000 times", imp(seg_twice, "i6"), 1,
             "segment 1 block 0", "a block listed twice"),
        Case("a snapshot listing one segment 2,000 times", imp(seg_overlap, "i7"), 1,
             "segment 1: its addresses overlap segment 0's"),
        Case("a segment whose blocks hold more than it", imp(seg_overfull, "i8"), 1,
             "segment 0 block 8", "more than its total_size of 4096"),
        Case("--out with invalid UTF-8", ["run", "--model", "tiny", "--steps", "1", "--out", bad_out], 2,
             "argument 7", "not valid UTF-8 (byte 0xff"),
        Case("a snapshot frame with a NUL", imp(nul_frame, "i1"), 1, "frame 0: 'name' holds a NUL byte"),
        Case("a snapshot frame with invalid UTF-8", imp(utf8_frame, "i2"), 1, "'name' is not valid UTF-8"),
        Case("a profiler op name with a NUL", imp(nul_op, "i3"), 1, "event 0 has a 'name' holding a NUL byte"),
        Case("a recorded module name with a NUL", ["plan", "--from-run", nul_module, "--policy", "per-block"], 1,
             "module_calls.csv line 3, column 'module'", "NUL byte"),
        Case("a snapshot sharing one list 20,000 times", imp(dag, "i4"), 1, "expand to more than", timeout=60),
        Case("a pickle memoizing one value 1,000 times", imp(memo, "i5"), 1, "memo PUT of entry 1"),
        Case("2,000 safetensors names aliasing one buffer", ["run", "--model", "tiny", "--steps", "1",
                                                             "--load-weights", alias], 1, "share bytes", timeout=60),
        Case("overlapping safetensors ranges", ["run", "--model", "tiny", "--steps", "1", "--load-weights", overlap],
             1, "'a' and 'b' share bytes"),
        Case("a format version of 2^63", ["run", "--model", "tiny", "--steps", "1", "--out", huge_version, "--force"],
             1, "format version 9223372036854775808,"),
    ]
    return cases


def catalogue(w, tiny_run):
    """Builds the files the cases read, in `w`, and returns the cases."""
    j = lambda name, obj: write(os.path.join(w, name), json.dumps(obj))  # noqa: E731
    deep_model = write(os.path.join(w, "deep_model.json"),
                       '{"architecture": "gpt2", "name": %s}' % nested(100000))
    deep_sched = write(os.path.join(w, "deep_schedule.json"), '{"blocks": 2, "actions": [%s]}' % nested(100000))
    trailing = write(os.path.join(w, "trailing.json"), json.dumps(TINY) + " trailing bytes")
    fifo = os.path.join(w, "fifo.json")
    os.mkfifo(fifo)
    big_layers = j("big_layers.json", dict(TINY, layers=4294967298))
    huge_layers = j("huge_layers.json", dict(TINY, layers=10 ** 6))
    hf_big = j("hf_big.json", {"model_type": "gpt2", "n_layer": 4294967298, "n_embd": 64, "n_head": 4,
                               "n_positions": 16, "vocab_size": 100})
    fwd = lambda b: {"action": "forward", "block": b, "keep": "all"}  # noqa: E731
    bwd = lambda b: {"action": "backward", "block": b}  # noqa: E731
    wide_block = j("wide_block.json", {"blocks": 2, "actions": [fwd(0), fwd(4294967297), bwd(1), bwd(0)]})
    sched_v3 = j("sched_v3.json", {"format": "rematlab-schedule", "version": 3, "blocks": 4,
                                   "actions": [fwd(0), fwd(1), fwd(2), fwd(3), bwd(3), bwd(2), bwd(1), bwd(0)]})
    # A version 2 action (a backward that rebuilds a tensor inside itself) in a version 1 file.
    inner = dict(bwd(3), recompute=["attn.probs"])
    sched_v1_inner = j("sched_v1_inner.json", {"format": "rematlab-schedule", "version": 1, "blocks": 4,
                                               "actions": [fwd(0), fwd(1), fwd(2), fwd(3), inner, bwd(2), bwd(1),
                                                           bwd(0)]})
    # A run directory whose summary.json holds 100,000 nested arrays where the model's name is.
    deep_run = os.path.join(w, "deep_run")
    shutil.copytree(tiny_run, deep_run)
    with open(os.path.join(deep_run, "summary.json")) as f:
        text = f.read()
    s = json.loads(text)
    name = s["model"]["name"]
    write(os.path.join(deep_run, "summary.json"),
          text.replace('"name": "%s"' % name, '"name": %s' % nested(100000), 1))
    fifo_run = os.path.join(w, "fifo_run")
    shutil.copytree(tiny_run, fifo_run)
    os.remove(os.path.join(fifo_run, "summary.json"))
    os.mkfifo(os.path.join(fifo_run, "summary.json"))
    # Libraries a process must never load from its current directory.
    libs = os.path.join(w, "libs")
    os.mkdir(libs)
    for lib in ("libgcc_s.so.1", "libstdc++.so.6", "libopenblas.so.0", "librematcore.so.0", "libc.so.6", "libm.so.6"):
        write(os.path.join(libs, lib), "not a library")
    # A file named like a preset in the current directory.
    shadow = os.path.join(w, "shadow")
    os.mkdir(shadow)
    j("shadow/tiny", dict(TINY, layers=7))
    out = os.path.join(w, "out")
    many_layers = j("many_layers.json", dict(TINY, layers=100000))
    # A directory of someone else's that happens to hold a summary.json.
    proj = os.path.join(w, "proj")
    os.mkdir(proj)
    write(os.path.join(proj, "summary.json"), "{}")
    thesis = write(os.path.join(proj, "thesis.tex"), "work")
    other = write(os.path.join(w, "notes.txt"), "mine")
    # Sharded weights whose index names a FIFO, a directory, or a file outside its directory.
    fifo_shard = os.path.join(w, "fifo_shard")
    os.mkdir(fifo_shard)
    os.mkfifo(os.path.join(fifo_shard, "model-00001-of-00001.safetensors"))
    write(os.path.join(fifo_shard, "model.safetensors.index.json"),
          json.dumps({"weight_map": {"transformer.wte.weight": "model-00001-of-00001.safetensors"}}))
    dir_shard = j("dir_shard.index.json", {"weight_map": {"transformer.wte.weight": "."}})
    outside_shard = j("outside.index.json", {"weight_map": {"transformer.wte.weight": "../etc/passwd"}})
    # A plugin directory with a FIFO named like a plugin.
    plugdir = os.path.join(w, "plugins")
    os.mkdir(plugdir)
    os.mkfifo(os.path.join(plugdir, "x.so"))
    # Corrupt run directories: a schedule action on a block the model lacks; a time of INT64_MIN.
    bad_block = os.path.join(w, "bad_block")
    shutil.copytree(tiny_run, bad_block)
    with open(os.path.join(bad_block, "schedule.json")) as f:
        sj = json.load(f)
    sj["actions"][0]["block"] = 99
    write(os.path.join(bad_block, "schedule.json"), json.dumps(sj))
    bad_time = os.path.join(w, "bad_time")
    shutil.copytree(tiny_run, bad_time)
    with open(os.path.join(bad_time, "ops.csv")) as f:
        rows = f.read().split("\n")
    rows[1] = "-9223372036854775808" + rows[1][rows[1].index(","):]
    write(os.path.join(bad_time, "ops.csv"), "\n".join(rows))
    # What an interrupted write leaves: a temporary directory of a process that is gone.
    leftover_parent = os.path.join(w, "with_leftover")
    os.mkdir(leftover_parent)
    shutil.copytree(tiny_run, os.path.join(leftover_parent, "run"))
    os.mkdir(os.path.join(leftover_parent, ".run.tmp-999999999-1"))
    survives = lambda path, text: lambda: (os.path.isfile(path) and open(path).read() == text,  # noqa: E731
                                           "%s was deleted or changed" % path)
    return [
        # Nothing outside our own run directories is deleted or overwritten.
        Case("--force on a directory that is not a run", ["run", "--model", "tiny", "--steps", "1", "--out", proj,
                                                          "--force"], 1, "thesis.tex", after=survives(thesis, "work")),
        Case("export --out onto an existing file", ["export", tiny_run, "--format", "chrome", "--out", other], 1,
             "exists", after=survives(other, "mine")),
        Case("a leftover of an interrupted write is reported", ["compare", os.path.join(leftover_parent, "run")], 0,
             ".run.tmp-999999999-1"),
        # Plugins: a FIFO named like one never hangs a command.
        Case("a FIFO named x.so among the plugins", ["list", "policies"], 0, "x.so", "skipped",
             env={"REMAT_PLUGIN_PATH": plugdir}, timeout=60),
        # Corrupt run directories are refused naming what is wrong.
        Case("schedule.json on block 99", ["compare", bad_block], 1, "schedule.json", "99"),
        Case("ops.csv time INT64_MIN", ["export", bad_time, "--format", "chrome", "--out", os.path.join(w, "t.json")],
             1, "ops.csv", "-9223372036854775808"),
        # Deeply nested JSON: every reader refuses it by name, none overflows its stack.
        Case("nested model file", ["plan", "--model", deep_model], 1, "nested deeper than 64", "deep_model.json"),
        Case("nested schedule", ["plan", "--model", "tiny", "--schedule", deep_sched], 1, "nested deeper than 64"),
        Case("nested summary, compare", ["compare", deep_run], 1, "nested deeper than 64", "summary.json"),
        Case("nested summary, export", ["export", deep_run, "--format", "chrome", "--out", os.path.join(w, "exp.json")], 1,
             "nested deeper than 64"),
        # Only regular files: a FIFO never hangs a reader.
        Case("FIFO model file", ["plan", "--model", fifo], 1, "FIFO", timeout=20),
        Case("FIFO schedule", ["plan", "--model", "tiny", "--schedule", fifo], 1, "FIFO", timeout=20),
        Case("FIFO summary.json", ["compare", fifo_run], 1, "FIFO", timeout=20),
        Case("directory as model file", ["plan", "--model", w + "/"], 1, "directory"),
        Case("a FIFO as a shard of an index", ["run", "--model", "tiny", "--steps", "1", "--load-weights", fifo_shard],
             1, "FIFO", "a shard of", timeout=20),
        Case("a directory as a shard of an index", ["run", "--model", "tiny", "--steps", "1", "--load-weights",
                                                    dir_shard], 1, "is a directory", "a shard of"),
        Case("a shard outside its index's directory", ["run", "--model", "tiny", "--steps", "1", "--load-weights",
                                                       outside_shard], 1, "outside the index's directory"),
        # Nothing is loaded from the current directory.
        Case("libraries in the current directory", ["list", "models"], 0, "tiny", cwd=libs),
        # A file in the current directory never shadows a preset; a path still loads it.
        Case("preset shadowed by ./tiny", ["plan", "--model", "tiny", "--json"], 0, '"layers": 4', cwd=shadow),
        Case("./tiny loads the file", ["plan", "--model", "./tiny", "--json"], 0, '"layers": 7', cwd=shadow),
        # 64-bit integers are never truncated.
        Case("layers past 32 bits", ["plan", "--model", big_layers], 1, "layers", "4294967298"),
        Case("HF n_layer past 32 bits", ["plan", "--model", hf_big], 1, "n_layer", "4294967298"),
        Case("schedule block past 32 bits", ["plan", "--model", "tiny", "--schedule", wide_block], 1,
             "block", "4294967297"),
        # Limits: a named error, quickly, instead of exhausting memory.
        Case("a million layers", ["plan", "--model", huge_layers], 1, "layers a model may have", timeout=20),
        Case("--layers a million", ["plan", "--model", "tiny", "--layers", "1000000"], 1, "layers a model may have",
             timeout=20),
        # Running out of memory is said as such, not as a bare std::bad_alloc.
        Case("out of memory while planning", ["plan", "--model", many_layers], 1, "out of memory",
             address_space=512 << 20),
        # Settings that would be recorded without acting, or silently overridden.
        Case("--memory-budget with a policy that ignores it", ["plan", "--model", "tiny", "--policy", "selective",
                                                               "--memory-budget", "2MiB"], 1, "takes no memory budget"),
        Case("a policy parameter given twice", ["plan", "--model", "tiny", "--policy",
                                                "uniform:segments=2,segments=3"], 1, "twice"),
        # Formats and versions.
        Case("trailing bytes after a model", ["plan", "--model", trailing], 1, "not valid JSON"),
        Case("schedule version 3", ["plan", "--model", "tiny", "--schedule", sched_v3], 1, "version 3",
             "(1 or 2)"),
        Case("a version 2 action in a version 1 schedule", ["plan", "--model", "tiny", "--schedule", sched_v1_inner],
             1, "action 4", "version 2 action", "says version 1"),
        # Training settings that cannot give a meaningful step.
        Case("--lr nan", ["run", "--model", "tiny", "--lr", "nan", "--steps", "1"], 2, "lr", "positive finite"),
        Case("--lr inf", ["run", "--model", "tiny", "--lr", "inf", "--steps", "1"], 2, "lr", "positive finite"),
        Case("--lr -1", ["run", "--model", "tiny", "--lr", "-1", "--steps", "1"], 2, "lr", "positive finite"),
        Case("diverging run", ["run", "--model", "tiny", "--lr", "1e30", "--steps", "3", "--warmup", "0",
                               "--out", out], 1, "diverged"),
    ]


# ------------------------------------------------------------------ writer and process findings
# Every file the tool writes goes through one writer (core/util/output_file.h): never over a
# FIFO, a device, a directory, one of the run's inputs or a file with a second name; every write
# checked. Leftovers of killed writes are all known to `clean`.

DEAD = "999999999"  # a pid no process has


def writer_process_cases(w, tiny_run):
    def untouched(path, text):
        return lambda: (os.path.isfile(path) and open(path).read() == text, "%s was changed" % path)

    def still_fifo(path):
        return lambda: (stat.S_ISFIFO(os.lstat(path).st_mode), "%s is no longer a FIFO" % path)

    def gone(*paths):
        return lambda: (not any(os.path.lexists(p) for p in paths), "left in place: %s"
                        % [p for p in paths if os.path.lexists(p)])

    d = os.path.join(w, "writers")
    os.mkdir(d)
    fifo = os.path.join(d, "out.fifo")
    os.mkfifo(fifo)
    ids = os.path.join(d, "ids.bin")
    with open(ids, "wb") as f:
        f.write(struct.pack("<2048H", *[i % 200 for i in range(2048)]))
    with open(ids, "rb") as f:
        id_bytes = f.read()
    same_ids = lambda: (open(ids, "rb").read() == id_bytes, "the --tokens file was changed")  # noqa: E731
    run = ["run", "--model", "tiny", "--steps", "1", "--warmup", "0"]
    # A run directory whose marker is a hard link to a user's file; a leftover whose marker is one.
    notes = write(os.path.join(d, "notes.txt"), "the user's notes")
    linked_run = os.path.join(d, "linked_run")
    shutil.copytree(tiny_run, linked_run)
    os.link(notes, os.path.join(linked_run, ".rematlab-writing"))
    linked_sweep = os.path.join(d, "linked_sweep")
    os.mkdir(linked_sweep)
    write(os.path.join(linked_sweep, "sweep.json"), json.dumps({"format": "rematlab-sweep", "format_version": 1,
                                                                "complete": True}))
    shutil.copytree(tiny_run, os.path.join(linked_sweep, "none"))
    os.link(notes, os.path.join(linked_sweep, "none", ".rematlab-writing"))
    linked_leftover = os.path.join(d, ".gone.tmp-%s-1" % DEAD)
    shutil.copytree(tiny_run, linked_leftover)
    os.link(notes, os.path.join(linked_leftover, ".rematlab-writing"))
    # What killed writes leave: an in-place export's table, weights being saved, a launcher's store.
    exported = os.path.join(d, "exported")
    shutil.copytree(tiny_run, exported)
    export_tmp = write(os.path.join(exported, "trace.json.tmp-" + DEAD), '{"traceEv')
    partial = os.path.join(d, "w.safetensors.partial-" + DEAD)
    with open(partial, "wb") as f:
        f.write(struct.pack("<Q", 64) + b'{"__metadata__"')
    scratch = os.path.join(d, "rematlab-dp-" + DEAD)
    os.makedirs(os.path.join(scratch, "store"))
    write(os.path.join(scratch, "store", "1844674407370955161"), "address")
    # A second one, cleaned by the path of its store (the path a user sees in the rank's message).
    scratch_too = os.path.join(d, "rematlab-dp-" + str(int(DEAD) - 1))
    os.makedirs(os.path.join(scratch_too, "store"))
    write(os.path.join(scratch_too, "store", "1844674407370955161"), "address")
    # A third, holding a file that is not RematLab's: named by its store, it is kept, saying why.
    scratch_foreign = os.path.join(d, "rematlab-dp-" + str(int(DEAD) - 2))
    os.makedirs(os.path.join(scratch_foreign, "store"))
    foreign_notes = write(os.path.join(scratch_foreign, "notes.txt"), "mine")
    unfinished = os.path.join(d, ".never.tmp-%s-2" % DEAD)
    shutil.copytree(tiny_run, unfinished)
    # A character device of our own, the kind of /dev/full (which a run replaced by a 3 MB file):
    # made here, so that a regression could replace only this node. Where nodes cannot be made
    # (not root), the unit test of the writer still covers devices (output_file_test.cpp).
    device = os.path.join(d, "full")
    try:
        os.mknod(device, stat.S_IFCHR | 0o600, os.makedev(1, 7))
    except OSError:
        device = None

    def still_device():
        return (stat.S_ISCHR(os.lstat(device).st_mode), "%s is no longer a character device" % device)

    devices = [] if device is None else [
        Case("--save-weights onto a character device", run + ["--save-weights", device], 1, "character device",
             "--save-weights", after=still_device),
        Case("--save-grads onto a character device", run + ["--save-grads", device], 1, "character device",
             "--save-grads", after=still_device),
        Case("--dump-batch onto a character device", run + ["--dump-batch", device], 1, "character device",
             "--dump-batch", after=still_device),
    ]
    return devices + [
        Case("--save-weights onto a FIFO", run + ["--save-weights", fifo], 1, "FIFO", "--save-weights", timeout=60,
             after=still_fifo(fifo)),
        Case("--save-grads onto a FIFO", run + ["--save-grads", fifo], 1, "FIFO", timeout=60, after=still_fifo(fifo)),
        Case("--dump-batch onto a FIFO", run + ["--dump-batch", fifo], 1, "FIFO", "--dump-batch", timeout=60,
             after=still_fifo(fifo)),
        Case("--save-weights onto a directory", run + ["--save-weights", d], 1, "directory"),
        Case("--dump-batch onto the --tokens file", run + ["--tokens", ids, "--dump-batch", ids], 1, "--tokens",
             after=same_ids),
        Case("--save-weights onto the --tokens file", run + ["--tokens", ids, "--save-weights", ids], 1, "--tokens",
             after=same_ids),
        Case("--save-weights onto the --tokens file by another name",
             run + ["--tokens", ids, "--save-weights", os.path.join(d, "..", "writers", "ids.bin")], 1, "--tokens",
             after=same_ids),
        Case("--save-weights and --save-grads onto one file", run + ["--save-weights", os.path.join(d, "x.st"),
                                                                     "--save-grads", os.path.join(d, "x.st")], 1,
             "both"),
        Case("--dump-batch past a file size limit (as a full disk)",
             run + ["--dump-batch", os.path.join(d, "batch.npy")], 1, "--dump-batch", "batch.npy",
             "large", file_size=64, after=gone(os.path.join(d, "batch.npy"))),
        Case("run --force onto a run whose marker is a hard link", run + ["--out", linked_run, "--force"], 1, "links",
             after=untouched(notes, "the user's notes")),
        Case("sweep --force onto a sweep whose run's marker is a hard link",
             ["sweep", "--model", "tiny", "--policies", "none", "--steps", "1", "--warmup", "0", "--out", linked_sweep,
              "--force"], 1, "links", after=untouched(notes, "the user's notes")),
        Case("clean of a leftover whose marker is a hard link", ["clean", linked_leftover], 1, "links",
             after=untouched(notes, "the user's notes")),
        Case("clean of a run with a killed export's trace.json.tmp-PID", ["clean", exported], 0, "removed",
             "trace.json.tmp-", after=gone(export_tmp)),
        Case("clean of w.safetensors.partial-PID", ["clean", partial], 0, "removed", after=gone(partial)),
        Case("clean of a killed launcher's rematlab-dp-PID", ["clean", scratch], 0, "removed", after=gone(scratch)),
        Case("clean of the store in a killed launcher's rematlab-dp-PID", ["clean", os.path.join(scratch_too, "store")],
             0, "removed " + scratch_too, after=gone(scratch_too)),
        Case("clean of the store in a launcher's directory holding someone's file",
             ["clean", os.path.join(scratch_foreign, "store")], 1, "kept " + scratch_foreign,
             after=untouched(foreign_notes, "mine")),
        Case("clean NAME where only a leftover of writing NAME is left", ["clean", os.path.join(d, "never")], 0,
             "removed", after=gone(unfinished)),
    ]


def process_cases(w, plugins):
    """Options range-checked, plans proportional to what they print, ranks refused before they
    open a socket, plugin processes bounded."""
    d = os.path.join(w, "process")
    os.mkdir(d)
    store = os.path.join(d, "store")
    os.mkdir(store)
    empty_store = os.path.join(d, "empty_store")
    os.mkdir(empty_store)
    stage_store = os.path.join(d, "stage_store")
    os.mkdir(stage_store)
    taken_store, taken_out = os.path.join(d, "taken_store"), os.path.join(d, "taken_out")
    os.mkdir(taken_store)
    os.makedirs(os.path.join(taken_out, "rank-0"))
    write(os.path.join(taken_out, "rank-0", "mine"), "someone's file\n")
    with open(os.path.join(d, "store-file"), "w") as f:
        f.write("not a directory\n")
    run = ["run", "--model", "tiny", "--steps", "1", "--warmup", "0"]
    cases = [
        Case("--seed -1", run + ["--seed", "-1"], 2, "--seed", "not a whole number"),
        Case("--seed 2^64", run + ["--seed", "18446744073709551616"], 2, "--seed", "largest"),
        Case("--seed 2^64 - 1 is taken", run + ["--seed", "18446744073709551615"], 0, "peak memory"),
        Case("WORLD_SIZE past the most ranks", run, 1, "WORLD_SIZE", "1048576", "1048577",
             env={"RANK": "0", "WORLD_SIZE": "1048577", "REMAT_DIST_STORE": store}),
        Case("RANK=0 WORLD_SIZE=100000 refused before it opens a socket", run + ["--batch", "100000"], 1, "100000",
             "port", env={"RANK": "0", "WORLD_SIZE": "100000", "REMAT_DIST_STORE": store}, timeout=30),
        Case("a rank waiting for rank 0 gives up after --dist-timeout", run + ["--batch", "2", "--dist-timeout", "2"],
             1, "rank 1", "dist-timeout", env={"RANK": "1", "WORLD_SIZE": "2", "REMAT_DIST_STORE": empty_store},
             timeout=20),
        Case("a rendezvous directory that does not exist", run, 1, "REMAT_DIST_STORE", "does not exist",
             env={"RANK": "1", "WORLD_SIZE": "2", "REMAT_DIST_STORE": os.path.join(d, "no-such-store")}),
        Case("a rendezvous directory that is a file", run, 1, "REMAT_DIST_STORE", "is not a directory",
             env={"RANK": "0", "WORLD_SIZE": "2", "REMAT_DIST_STORE": os.path.join(d, "store-file")}),
        Case("a rank of another launcher without --out prints its summary", run, 0, "peak memory",
             env={"RANK": "0", "WORLD_SIZE": "1"}),
        Case("a stage's plan refused before any rank starts", ["run", "--model", "tiny", "--pp", "2", "--policy",
                                                               "uniform:segments=4"], 1, "pipeline stage", "segments"),
        # Rank 0 (stage 0 of 3 blocks) refuses what only stage 1 (1 block) cannot take, before it
        # connects: it waited in the rendezvous for 30 s, and its peer saw Gloo's "Connection closed".
        Case("a rank of another launcher refuses another stage's plan before it connects",
             ["run", "--model", "tiny", "--pp", "2", "--first-stage-layers", "3", "--policy", "uniform:segments=2",
              "--steps", "1", "--warmup", "0", "--dist-timeout", "30"], 1, "pipeline stage 1 of 2 (1 block)",
             "segments", env={"RANK": "0", "WORLD_SIZE": "2", "REMAT_DIST_STORE": stage_store}, timeout=20,
             after=lambda: (os.listdir(stage_store) == [], "the rendezvous directory untouched: %s" %
                            os.listdir(stage_store))),
        # Its OUT/rank-0 there already: refused before it connects (it was found after the run).
        Case("a rank of another launcher refuses an OUT/rank-N that is there before it connects",
             ["run", "--model", "tiny", "--steps", "1", "--warmup", "0", "--dist-timeout", "30", "--out", taken_out],
             1, os.path.join(taken_out, "rank-0") + "' exists; use --force",
             env={"RANK": "0", "WORLD_SIZE": "2", "REMAT_DIST_STORE": taken_store}, timeout=20,
             after=lambda: (os.listdir(taken_store) == [] and os.listdir(os.path.join(taken_out, "rank-0")) == ["mine"],
                            "the rendezvous directory and rank-0 untouched: %s, %s" %
                            (os.listdir(taken_store), os.listdir(os.path.join(taken_out, "rank-0"))))),
        Case("plan --micro-batches 0", ["plan", "--model", "tiny", "--pp", "2", "--micro-batches", "0"], 2,
             "--micro-batches"),
        Case("plan --dp -1", ["plan", "--model", "tiny", "--dp", "-1"], 2, "--dp"),
        Case("plan --pp past the most layers", ["plan", "--model", "tiny", "--pp", "100001"], 2, "--pp"),
        # Time and memory proportional to what plan prints: micro-batches used memory each (24 GB
        # for 4,000 of a large model), stages took time squared (1,000 did not finish in 180 s), a
        # batch of 2^24 needed more than 12 GB.
        Case("plan --micro-batches 16000", ["plan", "--model", "llama-3.1-8b", "--pp", "2", "--micro-batches",
                                             "16000"], 0, "per-rank peak", timeout=60, address_space=1 << 30),
        Case("plan --pp 4000", ["plan", "--model", "tiny", "--layers", "4000", "--pp", "4000"], 0, "per-rank peak",
             timeout=60, address_space=1 << 30),
        Case("plan --batch 2^24", ["plan", "--model", "tiny", "--batch", "16777216"], 0, "peak", timeout=60,
             address_space=2 << 30),
    ]
    if plugins:
        # Only the two plugins these cases use (the other test plugins' warnings name crashes).
        chosen = os.path.join(d, "plugins")
        os.mkdir(chosen)
        for name in ("plan_orphan.so", "plan_hog.so"):
            os.symlink(os.path.join(plugins, name), os.path.join(chosen, name))
        plugins = chosen
        pidfile = os.path.join(d, "orphan.pid")
        env = {"REMAT_PLUGIN_PATH": plugins, "REMAT_TEST_ORPHAN_PIDFILE": pidfile}

        def orphan_gone():
            try:
                pid = int(open(pidfile).read())
            except (OSError, ValueError):
                return False, "the plugin's sleeper wrote no pid"
            time.sleep(0.2)
            return not os.path.exists("/proc/%d" % pid), "the plugin's sleeper %d outlived the command" % pid
        cases += [
            Case("a plugin's grandchild that left its group ends with the plan", ["plan", "--model", "tiny", "--policy",
                                                                                "plan_orphan"], 0, "peak",
                 env=env, timeout=30, after=orphan_gone),
            Case("a plugin that takes more memory than its limit", ["plan", "--model", "tiny", "--policy", "plan_hog"],
                 1, "out of memory", "REMAT_PLUGIN_MEMORY", "plan_hog",
                 env={"REMAT_PLUGIN_PATH": plugins, "REMAT_PLUGIN_MEMORY": "256MiB"}, timeout=60,
                 native_only=True),
            # Without REMAT_PLUGIN_MEMORY: the default limit (8 GiB) holds; 12 GiB asked for at
            # once and never touched is refused in the plugin's process.
            Case("a plugin asking for 12 GiB under the default limit", ["plan", "--model", "tiny", "--policy",
                                                                         "plan_hog"],
                 1, "out of memory", "REMAT_PLUGIN_MEMORY", "plan_hog",
                 env={"REMAT_PLUGIN_PATH": plugins, "REMAT_TEST_HOG_RESERVE_GIB": "12"}, timeout=60,
                 native_only=True),
        ]
    return cases


def profiler_events(n):
    """A torch.profiler trace of n events: per 8, six ops (CPU, backward, runtime, kernel) and an
    allocation and its free."""
    ev = []
    for i in range(n):
        ts, k, xid = 1000 + 10 * i, i % 8, i // 8
        if k < 4:
            ev.append('{"ph":"X","cat":"cpu_op","name":"%s","pid":1,"tid":%d,"ts":%d,"dur":8,"args":{"External id":%d}}'
                      % ("MmBackward0" if k == 3 else "aten::mm", 2 if k == 3 else 1, ts, xid))
        elif k == 4:
            ev.append('{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":%d,"dur":3,'
                      '"args":{"correlation":%d}}' % (ts, xid))
        elif k == 5:
            ev.append('{"ph":"X","cat":"kernel","name":"sgemm","pid":0,"tid":7,"ts":%d,"dur":5,"args":{"correlation":%d}}'
                      % (ts, xid))
        else:
            ev.append('{"ph":"i","name":"[memory]","pid":1,"tid":1,"ts":%d,"args":{"Addr":%d,"Bytes":%d}}'
                      % (ts, 4096 + 512 * (xid % 1000), 512 if k == 6 else -512))
    return '{"schemaVersion":1,"traceEvents":[' + ",".join(ev) + "]}"


def scale_cases(w, tiny_run):
    """Inputs where a reader was quadratic (a DOM rescanned per object, a header checked column by
    column against every other, white space read a byte per call): each took from half a minute to
    minutes, or did not finish, and must now be read within its timeout. Not under a sanitizer: its slowdown is not
    the reader's."""
    trace = write(os.path.join(w, "trace_500k.json"), profiler_events(500000))
    spaces = os.path.join(w, "spaces.json")
    with open(spaces, "w") as f:
        f.write(" " * (100 << 20))
        f.write(profiler_events(8))
    fwd = lambda b: {"action": "forward", "block": b, "keep": "all"}  # noqa: E731
    acts = [fwd(b) for b in range(4)] + [fwd(3)] * 399992 + [{"action": "backward", "block": b} for b in (3, 2, 1, 0)]
    sched = write(os.path.join(w, "sched_400k.json"), json.dumps({"blocks": 4, "actions": acts}))
    wide = os.path.join(w, "wide_header")
    shutil.copytree(tiny_run, wide)
    with open(os.path.join(wide, "loss.csv")) as f:
        rows = f.read().split("\n")
    rows[0] += "".join(",c%d" % i for i in range(1000000))
    write(os.path.join(wide, "loss.csv"), "\n".join(rows))
    return [
        # 10^5 events took 2.1 s, 10^6 204 s.
        Case("a profiler trace of 500,000 events", ["import", trace, "--out", os.path.join(w, "t500k")], 0,
             "375000 ops", "125000 memory events", timeout=30),
        # 100 MB of white space took 54 s.
        Case("100 MB of white space before a trace", ["import", spaces, "--out", os.path.join(w, "tspaces")], 0,
             "6 ops", timeout=20),
        # 400,000 actions took 26.9 s.
        Case("a schedule of 400,000 actions", ["plan", "--model", "tiny", "--schedule", sched], 1,
             "schedule action 4", "already holds", timeout=15),
        # A header of 10^5 columns took 9.8 s, 10^6 did not finish.
        Case("a loss.csv header of 1,000,000 columns", ["compare", wide], 1, "column 'c0' is not in format version",
             timeout=15),
    ]


def sigterm_keeps_the_run(binary, env, w):
    """SIGTERM (timeout, a batch scheduler, docker stop) ends a run as Ctrl-C does: kept, cancelled."""
    out = os.path.join(w, "terminated")
    p = subprocess.Popen([binary, "run", "--model", "tiny", "--steps", "1000000", "--warmup", "0", "--no-profile",
                          "--out", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(1.5)
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        check(False, "a run did not end on SIGTERM")
        return
    ok = check(p.returncode == 1, "SIGTERM: exit %d, expected 1: %s" % (p.returncode, err[-300:]))
    try:
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        ok = check(s["status"] == "cancelled" and not s["complete"], "SIGTERM: the run is kept as %s" % s["status"]) and ok
    except (OSError, ValueError) as e:
        ok = check(False, "SIGTERM: the run directory was not written: %s" % e) and ok
    print("%s SIGTERM keeps the run, cancelled" % ("ok  " if ok else "FAIL"), flush=True)


def stopped_rank_is_named(b):
    """After SIGSTOP of rank 1 the message names rank 1, not rank 0 that gave up waiting."""
    res = e2e_common.fail_rank(b, ["--model", "tiny", "--dp", "2", "--steps", "100000", "--warmup", "0",
                                   "--no-profile", "--dist-timeout", "2"], 1, signal.SIGSTOP, settle=1.0)
    if res is None:
        return
    code, err, _ = res
    ok = check(code == 1 and "rank 1 was stopped" in err, "SIGSTOP of rank 1: exit %d: %r" % (code, err[-400:]))
    print("%s a stopped rank is named" % ("ok  " if ok else "FAIL"), flush=True)


def rendezvous_directory_reused(binary, env, w):
    """A job's rendezvous keys are gone when it ends; another job's left in the directory (a killed
    rank's) are refused with a clear message, not Gloo's raw "File already exists"."""
    store = os.path.join(w, "reused_store")
    os.mkdir(store)
    args = [binary, "run", "--model", "tiny", "--steps", "1", "--warmup", "0", "--no-profile"]

    def ranks(world, rank, timeout="30"):
        e = dict(env, RANK=str(rank), WORLD_SIZE=str(world), REMAT_DIST_STORE=store)
        return subprocess.Popen(args + ["--dist-timeout", timeout], env=e, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    procs = [ranks(2, r) for r in range(2)]
    codes = [p.wait(timeout=120) for p in procs]
    errs = [p.stderr.read() for p in procs]
    ok = check(codes == [0, 0], "two ranks of another launcher: %s %r" % (codes, [e[-300:] for e in errs]))
    ok = check(os.listdir(store) == [], "the rendezvous directory is empty after the job: %s" % os.listdir(store)) and ok
    # A rank killed in the rendezvous leaves its key; the next job is refused with a message.
    p = ranks(2, 0)
    deadline = time.time() + 30
    while time.time() < deadline and not [f for f in os.listdir(store) if not f.startswith(".")]:
        time.sleep(0.02)  # its key written (Gloo writes `.KEY` first and renames it)
    p.kill()
    p.communicate()
    ok = check(os.listdir(store) != [], "a killed rank left its key") and ok
    q = ranks(2, 0)
    try:
        _, err = q.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        q.kill()
        _, err = q.communicate()
    ok = check(q.returncode == 1 and "another job" in err and "File already exists" not in err,
               "a key of another job in the rendezvous directory: exit %s: %r" % (q.returncode, err[-400:])) and ok
    # Both ranks of the next job, its --dist-timeout shorter than the dead rank's key is old: rank 1
    # reads the dead rank's address and cannot connect; it says the key is another job's, not only
    # Gloo's "Connection refused".
    time.sleep(1.5)
    both = [ranks(2, r, timeout="1") for r in range(2)]
    try:
        errs = [p.communicate(timeout=60)[1] for p in both]
    except subprocess.TimeoutExpired:
        for p in both:
            p.kill()
        errs = [p.communicate()[1] for p in both]
    ok = check(both[1].returncode == 1 and "longer ago than --dist-timeout" in errs[1] and "another job" in errs[1],
               "rank 1 of a job meeting another job's key: exit %s: %r" % (both[1].returncode, errs[1][-500:])) and ok
    print("%s a rendezvous directory reused" % ("ok  " if ok else "FAIL"), flush=True)


def token_file_cut_short(binary, env, w):
    """A token file truncated while a run reads it ends the run with a message naming it."""
    tokens = os.path.join(w, "cut.bin")
    with open(tokens, "wb") as f:
        f.write(struct.pack("<%dH" % (1 << 20), *[i % 250 for i in range(1 << 20)]))
    p = subprocess.Popen([binary, "run", "--model", "tiny", "--tokens", tokens, "--steps", "1000000", "--warmup", "0",
                          "--no-profile"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.time() + 60
        opened = False
        while time.time() < deadline and not opened and p.poll() is None:
            for fd in os.listdir("/proc/%d/fd" % p.pid):
                try:
                    opened = opened or os.readlink("/proc/%d/fd/%s" % (p.pid, fd)) == tokens
                except OSError:
                    pass
            time.sleep(0.02)
        check(opened, "the run opened its token file")
        os.truncate(tokens, 0)
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        check(False, "a run whose token file was cut short did not end")
        return
    ok = check(p.returncode == 1, "a token file cut short: exit %d, expected 1: %s" % (p.returncode, err[-400:]))
    ok = check("truncated" in err and tokens in err, "the message names the token file: %r" % err[-400:]) and ok
    print("%s a token file truncated while a run reads it" % ("ok  " if ok else "FAIL"), flush=True)


def run_case(binary, env, c):
    try:
        limit = None
        if c.address_space:
            limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (c.address_space, c.address_space))  # noqa: E731
        elif c.file_size:
            limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (c.file_size, c.file_size))  # noqa: E731
        p = subprocess.run([binary] + c.args, capture_output=True, text=True, env=dict(env, **(c.env or {})),
                           cwd=c.cwd, timeout=c.timeout, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        check(False, "%s: hung past %d s" % (c.name, c.timeout))
        return
    text = p.stdout + p.stderr
    ok = check(p.returncode == c.code, "%s: exit %d, expected %d: %s"
               % (c.name, p.returncode, c.code, text.strip()[-600:]))
    check(p.returncode >= 0, "%s: killed by signal %d" % (c.name, -p.returncode))
    for word in c.words:
        ok = check(word.lower() in text.lower(), "%s: the output should contain %r: %r"
                   % (c.name, word, text.strip()[-600:])) and ok
    if c.after:
        good, what = c.after()
        ok = check(good, "%s: %s" % (c.name, what)) and ok
    check("terminate called" not in text and "Segmentation" not in text, "%s crashed: %r" % (c.name, text[-400:]))
    print("%s %s" % ("ok  " if ok else "FAIL", c.name), flush=True)


def offload_pairs_peak_rss(binary, env, w, pairs):
    """Peak resident memory (KiB) of a run of `pairs` offload/prefetch pairs on tiny, profiler on."""
    acts = [{"action": "forward", "block": b, "keep": "all"} for b in range(4)]
    for _ in range(pairs):
        acts += [{"action": "offload", "block": 0}, {"action": "prefetch", "block": 0}]
    acts += [{"action": "backward", "block": b} for b in (3, 2, 1, 0)]
    path = write(os.path.join(w, "pairs.json"), json.dumps({"blocks": 4, "actions": acts}))
    proc = subprocess.Popen([binary, "run", "--model", "tiny", "--schedule", path, "--steps", "1", "--warmup", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    check(os.waitstatus_to_exitcode(status) == 0, "the offload/prefetch run failed: %r" % proc.stderr.read()[-500:])
    return usage.ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--plugins", help="the test plugins (build/test-plugins): a plugin's orphan, its memory, nested replies")
    ap.add_argument("--sanitized", action="store_true",
                    help="a sanitizer build: its own allocator and shadow memory, so the cases that "
                         "bound the address space or measure resident memory are left out")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    b = e2e_common.Batch(binary)
    w = tempfile.mkdtemp(prefix="rematlab-hostile-")
    try:
        tiny_run = os.path.join(w, "tiny_run")
        b.run("run", "--model", "tiny", "--steps", "1", "--warmup", "0", "--out", tiny_run)
        plugins = os.path.abspath(a.plugins) if a.plugins else None
        for c in (catalogue(w, tiny_run) + writer_process_cases(w, tiny_run) + process_cases(w, plugins) +
                  reader_findings(w, tiny_run, plugins) + ([] if a.sanitized else scale_cases(w, tiny_run))):
            if (c.address_space or c.native_only) and a.sanitized:
                print("skip %s (no address-space limit under a sanitizer)" % c.name)
                continue
            run_case(binary, b.env, c)
        if a.sanitized:
            print("skip the inputs at scale (their timeouts check the optimized readers, not a sanitizer's)")
        token_file_cut_short(binary, b.env, w)
        sigterm_keeps_the_run(binary, b.env, w)
        stopped_rank_is_named(b)
        rendezvous_directory_reused(binary, b.env, w)
        # Memory follows what is live: 3,000 offload/prefetch pairs stayed near 60 MiB (fragmented
        # heap: 2.8 GiB before).
        if a.sanitized:
            print("skip the resident memory of offload/prefetch pairs (the sanitizer's allocator)")
        else:
            rss = offload_pairs_peak_rss(binary, b.env, w, 3000)
            check(rss < 400 * 1024, "3,000 offload/prefetch pairs peaked at %d KiB resident" % rss)
            print("offload/prefetch pairs: peak RSS %d KiB" % rss)
        # The diverged run's directory says what happened and holds the steps it ran.
        d = os.path.join(w, "out")
        if check(os.path.isfile(os.path.join(d, "summary.json")), "the diverged run's directory was written"):
            with open(os.path.join(d, "summary.json")) as f:
                s = json.load(f)
            check(s["status"] == "error" and not s["complete"], "the diverged run is marked incomplete: %s" % s["status"])
            check("diverged" in s.get("error", ""), "the diverged run's error says so")
    finally:
        shutil.rmtree(w, ignore_errors=True)
    return e2e_common.exit_code("all hostile inputs refused as they should be")


if __name__ == "__main__":
    sys.exit(main())
