"""Builds the package's one extension, rematlab._predictor: the engine's prediction for a
recorded step, from the repository's own C++ sources (listed below), with pybind11 and
nlohmann-json from Debian (python3-pybind11, nlohmann-json3-dev). Offline:
pip install --no-build-isolation ./python (docs/own-model.md)."""
import glob
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
os.chdir(HERE)  # the sources are named relative to python/, wherever this runs from
# The engine's sources the predictor needs; a new dependency of theirs is added here.
CORE = ["analysis/recorded_plan.cpp", "analysis/recorded_peak.cpp", "analysis/recorded_plan_json.cpp",
        "trace/csv.cpp", "trace/schema.cpp", "trace/trace.cpp", "schedule/schedule.cpp",
        "memory/categories.cpp", "util/json_io.cpp", "util/json_parse.cpp", "util/text_check.cpp",
        "util/host_memory.cpp", "util/output_file.cpp"]


def _sources():
    missing = [c for c in CORE if not os.path.isfile(os.path.join(ROOT, "core", c))]
    if missing:
        sys.exit("rematlab: the engine's sources are not beside python/ (%s missing): install from a checkout "
                 "of the repository, pip install --no-build-isolation ./python" % ", ".join(missing))
    # Relative to python/, as setuptools wants them.
    return ["src/predictor_module.cpp"] + [os.path.join("..", "core", c) for c in CORE]


def _pybind11_include():
    try:
        import pybind11
    except ImportError:
        sys.exit("rematlab: pybind11 is missing: apt-get install python3-pybind11 (or pip install pybind11); "
                 "with pip, install with --no-build-isolation so that the build sees it")
    return pybind11.get_include()


class BuildExt(build_ext):
    """Compiles the extension's sources in parallel, one per core."""

    def build_extension(self, ext):
        compile_one = self.compiler.compile

        def compile_all(sources, output_dir=None, *args, **kwargs):
            for o in self.compiler.object_filenames(sources, output_dir=output_dir):
                os.makedirs(os.path.dirname(o) or ".", exist_ok=True)
            kwargs["output_dir"] = output_dir
            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                parts = pool.map(lambda s: compile_one([s], *args, **kwargs), sources)
                return [o for objects in parts for o in objects]

        self.compiler.compile = compile_all
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_one


setup(
    ext_modules=[Extension(
        "rematlab._predictor", sources=_sources(), language="c++",
        include_dirs=[ROOT, _pybind11_include()],
        depends=sorted(glob.glob(os.path.join("..", "core", "**", "*.h"), recursive=True)),
        extra_compile_args=["-std=c++20", "-O2", "-g0", "-fvisibility=hidden"],
    )],
    cmdclass={"build_ext": BuildExt},
)
