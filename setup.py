"""pip's way in: builds memsnap with CMake and packs it into the `memsnap` package.

pyproject.toml names setuptools as the backend; this file adds one step to
its build_py: configure and build CMake's target python_parts (the memsnap
command, memsnap-smoke, memsnap-decode, the recorder, the simulated device,
libmemsnap_alloc and the font), copy the files that CMake lists in
python-parts.txt into memsnap/_native/ in the installed layout (bin/, lib/),
and bundle the shared libraries they load (packaging/bundle_libs.py).  The
wheel is tagged py3-none-<platform>: no CPython extension, so one wheel
serves every Python 3 on the same platform.  docs/install.md says more.

Settings, from the environment:
  CUDA_HOME             the CUDA toolkit (default /usr/local/cuda when there)
  MEMSNAP_CMAKE_ARGS    more arguments for CMake's configure step
  MEMSNAP_BUILD_JOBS    parallel build jobs (default: the number of CPUs)
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:                                    # setuptools >= 70.1 has its own
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:                     # older: the wheel package's (Debian 12)
    from wheel.bdist_wheel import bdist_wheel

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(memsnap\s+VERSION\s+([0-9.]+)", f.read())
    if not m:
        sys.exit("setup.py: no project(memsnap VERSION ...) in CMakeLists.txt")
    return m.group(1)


def run(cmd, **kw):
    print("setup.py: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    subprocess.check_call(cmd, **kw)


class build_with_cmake(build_py):
    """build_py, then memsnap's C parts into memsnap/_native/."""

    def run(self):
        super().run()
        if not shutil.which("cmake"):
            sys.exit("setup.py: cmake (3.24 or later) is needed: apt-get install cmake, "
                     "or pip install cmake")
        build_base = self.get_finalized_command("build").build_base
        cmake_dir = os.path.abspath(os.path.join(build_base, "cmake"))
        args = ["-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DCMAKE_INSTALL_BINDIR=bin",
                "-DCMAKE_INSTALL_LIBDIR=lib", "-DMEMSNAP_TORCH=OFF"]
        cuda = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
        env = dict(os.environ)
        if os.path.isdir(cuda):
            args.append("-DCUDAToolkit_ROOT=" + cuda)
            env["PATH"] = os.path.join(cuda, "bin") + os.pathsep + env.get("PATH", "")
        args += shlex.split(os.environ.get("MEMSNAP_CMAKE_ARGS", ""))
        run(["cmake", "-S", ROOT, "-B", cmake_dir] + args, env=env)
        jobs = os.environ.get("MEMSNAP_BUILD_JOBS") or str(os.cpu_count() or 1)
        run(["cmake", "--build", cmake_dir, "--target", "python_parts", "-j", jobs], env=env)

        pkg = os.path.join(self.build_lib, "memsnap")
        native = os.path.join(pkg, "_native")
        shutil.rmtree(native, ignore_errors=True)
        with open(os.path.join(cmake_dir, "python-parts.txt")) as f:
            for line in f:
                if not line.strip():
                    continue
                src, place = line.rstrip("\n").split("\t")
                dst = os.path.join(native, place)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copyfile(src, dst)        # follows links: a wheel holds none
                shutil.copymode(src, dst)
        run([sys.executable, os.path.join(ROOT, "packaging", "bundle_libs.py"), native])
        with open(os.path.join(pkg, "_version.py"), "w") as f:
            f.write('"""Written by setup.py from CMakeLists.txt."""\n__version__ = "%s"\n'
                    % project_version())


class with_binaries(Distribution):
    """Not pure: the package goes to platlib, at the wheel's root."""

    def has_ext_modules(self):
        return True


class bdist_wheel_binaries(bdist_wheel):
    """Binaries, no extension module: py3-none-<platform> (linux_x86_64)."""

    def get_tag(self):
        return "py3", "none", super().get_tag()[2]


os.makedirs(os.path.join(ROOT, "build-wheel"), exist_ok=True)   # egg_base below
setup(
    version=project_version(),
    package_dir={"": "python"},
    packages=["memsnap"],
    distclass=with_binaries,
    cmdclass={"build_py": build_with_cmake, "bdist_wheel": bdist_wheel_binaries},
    # Not build/: that is where scripts/build.sh puts the CMake build, whose
    # lib/ setuptools would otherwise take for its own.
    options={"build": {"build_base": "build-wheel"},
             "egg_info": {"egg_base": "build-wheel"}},
    zip_safe=False,
)
