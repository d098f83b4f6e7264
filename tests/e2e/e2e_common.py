"""What the end-to-end scripts share: the failure list, check(), and a driver of rematlab-batch
that runs it as a user would (without the test environment's plugin or resource overrides and
without a display). Python standard library only."""
import csv
import json
import os
import shutil
import struct
import subprocess
import sys
import time

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, flush=True)
    return cond


def exit_code(ok_message="ok"):
    """The script's exit code: 1 after printing the failure count, 0 after `ok_message`."""
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print(ok_message)
    return 0


def torch_or_skip(source_dir):
    """torch and the repository's python/rematlab (on sys.path), or exit 77 (skipped) without torch."""
    try:
        import torch
    except ImportError:
        print("skipped: no torch for %s" % sys.executable)
        sys.exit(77)
    sys.path.insert(0, os.path.join(source_dir, "python"))
    return torch


def csv_rows(path):
    """The rows of a CSV table with a header, as dicts."""
    with open(path) as f:
        return list(csv.DictReader(f))


def read_safetensors(path):
    """{name: (shape, (float, ...))} of an F32 safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, d in header.items():
        if name == "__metadata__":
            continue
        check(d["dtype"] == "F32", "%s: %s is F32" % (path, name))
        b, e = d["data_offsets"]
        out[name] = (d["shape"], struct.unpack("<%df" % ((e - b) // 4), data[8 + n + b:8 + n + e]))
    return out


def read_sharded_safetensors(d):
    """({name: (shape, values)}, shard count) of the F32 shards under d/model.safetensors.index.json,
    checked as Hugging Face lays them out: shards named model-0000i-of-0000N.safetensors, each
    tensor in the shard the weight_map names, total_size the bytes of their data."""
    with open(os.path.join(d, "model.safetensors.index.json")) as f:
        index = json.load(f)
    shards = sorted(set(index["weight_map"].values()))
    n = len(shards)
    check(shards == ["model-%05d-of-%05d.safetensors" % (i + 1, n) for i in range(n)],
          "%s: shards are named as Hugging Face names them: %r" % (d, shards))
    out, total = {}, 0
    for s in shards:
        for name, (shape, values) in read_safetensors(os.path.join(d, s)).items():
            check(index["weight_map"].get(name) == s, "%s: %s is in %s, as the weight_map says" % (d, name, s))
            out[name] = (shape, values)
            total += 4 * len(values)
    check(sorted(out) == sorted(index["weight_map"]), "%s: every tensor of the weight_map is in a shard" % d)
    check(index["metadata"]["total_size"] == total, "%s: total_size %r is the shards' data, %d bytes"
          % (d, index["metadata"]["total_size"], total))
    return out, n


def log_time(seconds, what):
    """With REMAT_E2E_TIMES=FILE, appends each command's wall seconds to FILE (where a slow e2e
    test spends its time: docs/testing.md)."""
    path = os.environ.get("REMAT_E2E_TIMES")
    if path:
        with open(path, "a") as f:
            f.write("%.2f %s %s\n" % (seconds, os.path.basename(sys.argv[0]), what))


class Batch:
    def __init__(self, binary):
        self.binary = binary
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("REMAT_PLUGIN_PATH", "REMAT_RESOURCE_DIR", "DISPLAY", "WAYLAND_DISPLAY")}

    def run(self, *args, expect=0, cwd=None):
        """Runs the binary; `expect` is the exit code it must give, or "fail" for any but 0."""
        start = time.monotonic()
        p = subprocess.run([self.binary] + [str(a) for a in args], capture_output=True, text=True,
                           env=self.env, cwd=cwd, timeout=600)
        shown = " ".join(str(a) for a in args)
        log_time(time.monotonic() - start, shown)
        if expect == "fail":
            check(p.returncode != 0, "`%s` should fail but exited 0" % shown)
        else:
            check(p.returncode == expect, "`%s` exited %d, expected %d: %s"
                  % (shown, p.returncode, expect, p.stderr.strip()[-2000:]))
        return p

    def refuses(self, args, *words):
        """The command fails, and its message names every word."""
        p = self.run(*args, expect="fail")
        msg = p.stderr
        for w in words:
            check(w.lower() in msg.lower(),
                  "`%s`: the message should name %r: %r" % (" ".join(map(str, args)), w, msg.strip()))
        check("Traceback" not in msg and "terminate called" not in msg,
              "`%s` crashed: %r" % (" ".join(map(str, args)), msg[-500:]))
        return p

    def json(self, *args):
        """The JSON the command prints on stdout (None when it is not JSON)."""
        p = self.run(*args)
        try:
            return json.loads(p.stdout)
        except ValueError as e:
            check(False, "`%s` did not print JSON: %s: %r" % (" ".join(map(str, args)), e, p.stdout[:300]))
            return None


def gpus():
    """Usable NVIDIA GPUs here as `nvidia-smi -L` lists them (0 without it)."""
    if not shutil.which("nvidia-smi"):
        return 0
    p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(1 for line in p.stdout.splitlines() if line.startswith("GPU ")) if p.returncode == 0 else 0


# Processes of a distributed job, from /proc: a launcher's children, the rank a process was
# started as (REMAT_RANK), and whether it still runs (not a zombie).
def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def rank_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            for kv in f.read().split(b"\0"):
                if kv.startswith(b"REMAT_RANK="):
                    return int(kv.split(b"=", 1)[1])
    except OSError:
        pass
    return None


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def fail_rank(b, args, victim, sig, settle=2.0):
    """Starts `rematlab-batch run` with args (a long job of several ranks), sends `sig` to rank
    `victim` once every rank up to it runs and `settle` seconds more have passed (mid-run: past
    the rendezvous, in the steps), and waits for the job. Checks that the launcher started the
    ranks and that no rank process is left afterwards. Returns (exit code, stderr, seconds from
    the signal to the job's end), or None when the ranks never started."""
    p = subprocess.Popen([b.binary, "run", *map(str, args)], env=b.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kids, pid = [], None
    deadline = time.time() + 60
    while time.time() < deadline and pid is None:
        kids = children(p.pid)
        ranks = {rank_of(k): k for k in kids}
        if all(r in ranks for r in range(victim + 1)):
            pid = ranks[victim]
        time.sleep(0.05)
    if not check(pid is not None, "the launcher started ranks 0 to %d" % victim):
        p.kill()
        p.wait()
        return None
    time.sleep(settle)
    os.kill(pid, sig)
    t0 = time.time()
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        check(False, "the job did not end after rank %d was signalled" % victim)
    took = time.time() - t0
    time.sleep(0.2)
    left = [k for k in kids if alive(k)]
    check(not left, "no rank process is left: %r" % left)
    return p.returncode, err, took
