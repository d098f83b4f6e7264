"""The catalogue of hostile inputs: each case is a command a user (or an attacker) could run, the
exit code it must give and the words its message must contain. Every category of bad input has
rows here; a case that crashes, hangs past its timeout or exits 0 fails. Python standard library
only."""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_common  # noqa: E402
from e2e_common import check  # noqa: E402

TINY = {"architecture": "gpt2", "layers": 2, "hidden": 64, "heads": 4, "seq": 16, "batch": 1, "vocab": 100}


def nested(depth):
    return "[" * depth + "]" * depth


class Case:
    def __init__(self, name, args, code, *words, cwd=None, timeout=120, address_space=None, env=None, after=None):
        self.name, self.args, self.code, self.words, self.cwd, self.timeout = name, args, code, words, cwd, timeout
        self.env = env  # variables added to the environment
        self.after = after  # a check of what the command left behind: returns (ok, what)
        self.address_space = address_space  # bytes of virtual memory the process may map


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


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
    sched_v2 = j("sched_v2.json", {"format": "rematlab-schedule", "version": 2, "blocks": 2,
                                   "actions": [fwd(0), fwd(1), bwd(1), bwd(0)]})
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
        Case("schedule version 2", ["plan", "--model", "tiny", "--schedule", sched_v2], 1, "version 2"),
        # Training settings that cannot give a meaningful step.
        Case("--lr nan", ["run", "--model", "tiny", "--lr", "nan", "--steps", "1"], 2, "lr", "positive finite"),
        Case("--lr inf", ["run", "--model", "tiny", "--lr", "inf", "--steps", "1"], 2, "lr", "positive finite"),
        Case("--lr -1", ["run", "--model", "tiny", "--lr", "-1", "--steps", "1"], 2, "lr", "positive finite"),
        Case("diverging run", ["run", "--model", "tiny", "--lr", "1e30", "--steps", "3", "--warmup", "0",
                               "--out", out], 1, "diverged"),
    ]


def run_case(binary, env, c):
    try:
        limit = None
        if c.address_space:
            limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (c.address_space, c.address_space))  # noqa: E731
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
        for c in catalogue(w, tiny_run):
            if c.address_space and a.sanitized:
                print("skip %s (no address-space limit under a sanitizer)" % c.name)
                continue
            run_case(binary, b.env, c)
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
