"""What the recorder may delete or replace, and how it puts a finished run directory into place:
the rules of docs/trace-format.md ("Writing", "What may be replaced or deleted"), the same as
rematlab-batch's (core/trace/output_dir.cpp), checked against the same cases from both sides
(tests/data/ownership/cases.json). Standard library only."""
import ctypes
import errno
import json
import os
import random
import stat
import warnings

MARKER = ".rematlab-writing"
RUN, SWEEP, RANKS = "run", "sweep", "ranks"
# The file naming each kind of directory, its "format" and the newest "format_version" read.
KIND_FILE = {RUN: "summary.json", SWEEP: "sweep.json", RANKS: "ranks.json"}
FORMAT = {RUN: "rematlab-run", SWEEP: "rematlab-sweep", RANKS: "rematlab-ranks"}
MAX_VERSION = {RUN: 6, SWEEP: 1, RANKS: 1}
# What each kind holds besides the marker (a sweep and a ranks directory also their runs).
FILES = {
    RUN: ("summary.json", "schedule.json", "trace.json", "memory_events.csv", "memory_timeline.csv", "ops.csv",
          "schedule.csv", "ledger.csv", "loss.csv", "routing.csv",
          # a recording's own tables and CUDA snapshot (docs/trace-format.md, "Recorded in PyTorch")
          "saved_tensors.csv", "module_calls.csv", "op_outputs.csv", "cuda_memory_snapshot.pickle"),
    SWEEP: ("sweep.json", "comparison.csv"),
    RANKS: ("ranks.json", "trace.json"),  # trace.json: the trace of all ranks `export` writes
}
JSON_LIMIT = 1 << 30  # bytes of a JSON file (core/util/limits.h)
JSON_DEPTH = 64  # arrays and objects nested in one another (core/util/limits.h)


def _q(p):
    return "'%s'" % p


def _pid_suffix(s, bare_pid):
    head, dash, tail = s.partition("-")
    if not dash:
        return bare_pid and s.isdigit() and s.isascii()
    return head.isdigit() and tail.isdigit() and head.isascii() and tail.isascii()


def _holds_file(kind, name):
    """One of the kind's files, or the temporary file of one being written (`.NAME.tmp-PID-N`,
    or `NAME.tmp-PID` of earlier versions)."""
    if name == MARKER:
        return True
    for f in FILES[kind]:
        if name == f:
            return True
        for tmp in ("." + f + ".tmp-", f + ".tmp-"):
            if len(name) > len(tmp) and name.startswith(tmp) and _pid_suffix(name[len(tmp):], tmp[0] != "."):
                return True
    return False


def _is_file(path):
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _refuse_constant(name):
    raise ValueError("%s is not JSON" % name)


def _depth(value):
    """How many arrays and objects are nested in one another at the deepest point."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if items is None:
            continue
        deepest = max(deepest, d)
        stack.extend((x, d + 1) for x in items if isinstance(x, (dict, list)))
    return deepest


def read_json_file(path):
    """A JSON file that is a regular file of at most JSON_LIMIT bytes, opened without following a
    link and without waiting (a FIFO in its place is refused, never waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise ValueError("cannot open %s: %s" % (_q(path), e.strerror))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("%s is not a regular file" % _q(path))
        if st.st_size > JSON_LIMIT:
            raise ValueError("%s is larger than %d bytes" % (_q(path), JSON_LIMIT))
        chunks, left = [], st.st_size + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > JSON_LIMIT:
        raise ValueError("%s is larger than %d bytes" % (_q(path), JSON_LIMIT))
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as e:
        raise ValueError("%s is not valid JSON (%s)" % (_q(path), str(e)[:120]))
    if _depth(value) > JSON_DEPTH:
        raise ValueError("%s: JSON nested deeper than %d levels" % (_q(path), JSON_DEPTH))
    return value


def _why_not_our_file(path, kind, needs_complete):
    what = "a RematLab %s summary" % kind
    try:
        j = read_json_file(path)
    except ValueError as e:
        return "%s, so not %s" % (e, what)
    if not isinstance(j, dict):
        return "%s is not a JSON object, so not %s" % (_q(path), what)
    if j.get("format") != FORMAT[kind]:
        return '%s is not %s (its "format" is not "%s")' % (_q(path), what, FORMAT[kind])
    v = j.get("format_version")
    if type(v) is not int:
        return '%s has no integer "format_version"' % _q(path)
    if v < 1 or v > MAX_VERSION[kind]:
        return "%s has format version %d, this program knows 1 to %d (written by a newer RematLab?)" % (
            _q(path), v, MAX_VERSION[kind])
    if needs_complete and type(j.get("complete")) is not bool:
        return '%s has no "complete" flag, so not %s' % (_q(path), what)
    return ""


def _kind_by_file(path):
    for k in (RUN, SWEEP, RANKS):
        if _is_file(os.path.join(path, KIND_FILE[k])):
            return k
    return None


def why_not_ours(path, must_be=None):
    """Why `path` is not an output directory of ours that may be deleted or replaced; "" when it
    is (an empty directory is too: there is nothing to lose). The reason names the file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "%s does not exist" % _q(path)
    except OSError as e:
        return "cannot read %s: %s" % (_q(path), e.strerror)
    if stat.S_ISLNK(st.st_mode):
        return "%s is a symbolic link" % _q(path)
    if not stat.S_ISDIR(st.st_mode):
        return "%s is not a directory" % _q(path)
    marker = _is_file(os.path.join(path, MARKER))
    if sum(_is_file(os.path.join(path, f)) for f in KIND_FILE.values()) > 1:
        return "%s holds more than one of summary.json, sweep.json and ranks.json" % _q(path)
    kind = _kind_by_file(path)
    summary = kind is not None
    if kind is None and marker:
        for k in (RUN, SWEEP, RANKS):  # being written: the marker says what
            if not _why_not_our_file(os.path.join(path, MARKER), k, False):
                kind = k
        if kind is None:
            return _why_not_our_file(os.path.join(path, MARKER), must_be or RUN, False)
    if kind and must_be and kind != must_be:
        return "%s is a %s directory where a %s directory belongs" % (_q(path), kind, must_be)
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        return "cannot read %s: %s" % (_q(path), e.strerror)
    if kind is None:
        if not names:
            return ""
        return ("%s holds %s and neither summary.json nor sweep.json, so it is not a RematLab run or sweep "
                "directory" % (_q(path), _q(names[0])))
    for name in names:  # first what it holds (a stray file is named even when the summary is not ours)...
        e = os.path.join(path, name)
        try:
            est = os.lstat(e)
        except OSError as err:
            return "cannot read %s: %s" % (_q(e), err.strerror)
        if stat.S_ISREG(est.st_mode) and _holds_file(kind, name):
            if est.st_nlink > 1:
                return ("%s has %d links (a hard link shares its contents with another file), so it is not "
                        "RematLab's alone" % (_q(e), est.st_nlink))
            continue
        if kind in (SWEEP, RANKS) and not must_be and stat.S_ISDIR(est.st_mode):
            why = why_not_ours(e, RUN)
            if why:
                return why
            continue
        return "%s holds %s, which a RematLab %s directory does not hold" % (_q(path), _q(name), kind)
    if summary:  # ...then that its files are ours, with a version this program knows
        return _why_not_our_file(os.path.join(path, KIND_FILE[kind]), kind, True)
    return ""


def _new_marker(path, kind):
    m = os.path.join(path, MARKER)
    try:
        os.unlink(m)  # never written through: were it a link to someone's file, that file would change
    except OSError:
        pass
    try:
        fd = os.open(m, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError:
        return
    try:
        os.write(fd, (json.dumps({"format": FORMAT[kind], "format_version": MAX_VERSION[kind]}) + "\n").encode())
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_ours(path):
    """Deletes a directory that why_not_ours accepted, its marker written anew first and removed
    last, so an interrupted deletion leaves a leftover that is still recognisably ours."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return
    except OSError:
        return
    kind = _kind_by_file(path)
    if kind:
        _new_marker(path, kind)
    for name in os.listdir(path):
        if name == MARKER:
            continue
        e = os.path.join(path, name)
        try:
            if stat.S_ISDIR(os.lstat(e).st_mode):
                remove_ours(e)
            else:
                os.unlink(e)
        except OSError:
            pass
    for victim, rm in ((os.path.join(path, MARKER), os.unlink), (path, os.rmdir)):
        try:
            rm(victim)
        except OSError:
            pass  # what stays is a leftover that `rematlab-batch clean` recognises


# ------------------------------------------------------------------ moving into place

_RENAME_NOREPLACE, _RENAME_EXCHANGE, _AT_FDCWD = 1, 2, -100
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _renameat2 = _libc.renameat2
    _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
except (OSError, AttributeError):
    _renameat2 = None


def _rename2(src, dst, flags):
    """0 or the errno of renameat2 (ENOSYS where the C library lacks it)."""
    if _renameat2 is None:
        return errno.ENOSYS
    if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return 0
    return ctypes.get_errno()


def _unsupported(err):
    return err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP)


def _checked_rename(src, dst):
    """Without renameat2's flags: the target checked absent right before a plain rename."""
    if os.path.lexists(dst):
        return errno.EEXIST
    try:
        os.rename(src, dst)
        return 0
    except OSError as e:
        return e.errno


def _place_new(tmp, dst):
    err = _rename2(tmp, dst, _RENAME_NOREPLACE)
    return _checked_rename(tmp, dst) if _unsupported(err) else err


def _keep(tmp, out_dir, why):
    """The result stays under a name of its own next to the target (returned, with a warning
    saying why); FileExistsError when no such name can be taken."""
    for k in range(2, 1000):
        cand = "%s-%d" % (out_dir, k)
        err = _place_new(tmp, cand)
        if err == 0:
            warnings.warn("rematlab.record: %s; the recording is kept in %s" % (why, _q(cand)))
            return cand
        if err not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            break
    raise FileExistsError("rematlab.record: %s; the recording is left in %s" % (why, _q(tmp)))


def move_into_place(tmp, out_dir, overwrite):
    """Moves the complete temporary directory `tmp` to `out_dir`: without overwrite nothing is
    replaced; with it only a directory that is ours at that moment (checked again after the
    exchange, before the old contents are deleted). Where the target cannot be taken the result
    is kept next to it as `NAME-2`, ... and that path is returned, with a warning saying why."""
    if not os.path.lexists(out_dir):
        err = _place_new(tmp, out_dir)
        if err == 0:
            return out_dir
        return _keep(tmp, out_dir, "%s appeared while the recording was written and was not replaced" % _q(out_dir)
              if err in (errno.EEXIST, errno.ENOTEMPTY) else "cannot write %s: %s" % (_q(out_dir), os.strerror(err)))
    if not overwrite:
        return _keep(tmp, out_dir, "%s appeared while the recording was written and was not replaced" % _q(out_dir))
    why = why_not_ours(out_dir)
    if why:
        return _keep(tmp, out_dir, "%s is not a RematLab run directory and is not replaced: %s" % (_q(out_dir), why))
    err = _rename2(tmp, out_dir, _RENAME_EXCHANGE)
    if err == 0:
        why = why_not_ours(tmp)  # the old contents, now at the temporary name
        if why:
            if _rename2(tmp, out_dir, _RENAME_EXCHANGE) == 0:
                return _keep(tmp, out_dir, "%s changed while it was replaced and was put back: %s" % (_q(out_dir), why))
            raise FileExistsError("rematlab.record: %s changed while it was replaced (%s); it is now at %s"
                                  % (_q(out_dir), why, _q(tmp)))
        remove_ours(tmp)
        return out_dir
    if not _unsupported(err):
        return _keep(tmp, out_dir, "cannot replace %s: %s" % (_q(out_dir), os.strerror(err)))
    # Two checked steps: the old directory aside, checked again, the new one in, the old deleted.
    parent, name = os.path.split(out_dir)
    old = os.path.join(parent, ".%s.old-%d-%d" % (name, os.getpid(), random.randrange(1 << 30)))
    if _checked_rename(out_dir, old):
        return _keep(tmp, out_dir, "cannot move %s aside" % _q(out_dir))
    why = why_not_ours(old)
    if why:
        _checked_rename(old, out_dir)
        return _keep(tmp, out_dir, "%s changed while it was replaced: %s" % (_q(out_dir), why))
    err = _checked_rename(tmp, out_dir)
    if err:
        _checked_rename(old, out_dir)
        return _keep(tmp, out_dir, "cannot write %s: %s" % (_q(out_dir), os.strerror(err)))
    remove_ours(old)
    return out_dir


def check_target(out_dir, overwrite):
    """Refuses, before the step runs, a target that exists (without overwrite) or is not ours,
    and a parent path that is not a directory and cannot become one (a missing parent is made
    when the run is written, as rematlab-batch makes it)."""
    out_dir = os.fspath(out_dir)
    if not os.path.lexists(out_dir):
        parent = os.path.dirname(os.path.abspath(out_dir))
        while not os.path.lexists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            raise NotADirectoryError("rematlab.record: cannot write %r: %r is not a directory" % (out_dir, parent))
        return
    if not overwrite:
        raise FileExistsError("rematlab.record: %r exists (pass overwrite=True to replace a recorded run)" % out_dir)
    why = why_not_ours(out_dir)
    if why:
        raise FileExistsError("rematlab.record: %r is not a RematLab run directory (%s); not replacing it"
                              % (out_dir, why))


def make_temp_dir(out_dir):
    """The temporary directory `.NAME.tmp-PID-N` next to `out_dir`, with the writing marker."""
    parent, name = os.path.split(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    for _ in range(16):
        tmp = os.path.join(parent, ".%s.tmp-%d-%d" % (name, os.getpid(), random.randrange(1 << 30)))
        try:
            os.mkdir(tmp)
        except FileExistsError:
            continue
        _new_marker(tmp, RUN)
        return tmp
    raise FileExistsError("rematlab.record: cannot make a temporary directory next to %r" % out_dir)


def complete(tmp):
    """The marker goes once every file is written: from here the directory speaks for itself."""
    os.unlink(os.path.join(tmp, MARKER))
