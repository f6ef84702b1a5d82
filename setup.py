"""pip's way in: builds memsnap with CMake and packs it into the `memsnap` package.

pyproject.toml names setuptools as the backend and setup.cfg holds the
metadata; this file adds one step to setuptools' build_py: configure and
build CMake's target python_parts (the memsnap command, memsnap-smoke,
memsnap-decode, the recorder, the simulated device, libmemsnap_alloc and
the font), copy the files that CMake lists in python-parts.txt into
memsnap/_native/ in the installed layout (bin/, lib/), and bundle the
shared libraries they load (packaging/bundle_libs.py).  The wheel is tagged
py3-none-<platform>: no CPython extension, so one wheel serves every Python
3 on the same platform.  What the build needs and does not find (an old
setuptools, no wheel package, no CMake 3.18) is one line saying what to
install, not a traceback.  docs/install.md says more.

Settings, from the environment:
  CUDA_HOME             the CUDA toolkit (default /usr/local/cuda when there)
  MEMSNAP_CMAKE_ARGS    more arguments for CMake's configure step
  MEMSNAP_BUILD_JOBS    parallel build jobs (default: the number of CPUs)
  MEMSNAP_WHEEL_PLATFORM  the wheel's platform tag instead of the build
                        machine's (linux_x86_64): scripts/build-wheel.sh sets
                        manylinux_2_31_x86_64, and checks that the wheel
                        keeps to it (packaging/check_wheel.py)
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

SETUPTOOLS_MIN = (52, 0)    # Debian 11's; every later one works (docs/install.md)
CMAKE_MIN = (3, 18)         # CMakeLists.txt's cmake_minimum_required


def version_tuple(text):
    """(major, minor, ...) of a version string's leading numbers: "58.1.0" -> (58, 1, 0)."""
    return tuple(int(n) for n in re.findall(r"\d+", re.match(r"[\d.]*", text).group(0)))


def need(what):
    """Stops the build with one line saying what to install (no traceback)."""
    sys.exit("setup.py: building memsnap needs " + what)


try:
    import setuptools
    from setuptools import Distribution, setup
    from setuptools.command.build_py import build_py
    from setuptools.command.install import install
except ImportError:
    need("setuptools %d or later: pip install setuptools wheel, or apt-get install "
         "python3-setuptools python3-wheel" % SETUPTOOLS_MIN[0])
if version_tuple(setuptools.__version__) < SETUPTOOLS_MIN:
    need("setuptools %d or later (this Python has %s): pip install -U setuptools wheel"
         % (SETUPTOOLS_MIN[0], setuptools.__version__))
try:                                    # setuptools >= 70.1 has its own
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:                     # older: the wheel package's (Debian 11, 12)
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        need("the wheel package with setuptools %s (70.1 and later need none): "
             "pip install wheel, or apt-get install python3-wheel" % setuptools.__version__)

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


def check_cmake():
    """Stops the build with one line unless a CMake of CMAKE_MIN or later is on PATH."""
    want = "%d.%d" % CMAKE_MIN
    cmake = shutil.which("cmake")
    if not cmake:
        need("CMake %s or later: pip install cmake, or apt-get install cmake" % want)
    r = subprocess.run([cmake, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    m = re.search(r"cmake version (\d[\d.]*)", r.stdout)
    if not m:
        need("CMake %s or later (%s --version says: %s): pip install cmake"
             % (want, cmake, r.stdout.strip()[:100]))
    if version_tuple(m.group(1)) < CMAKE_MIN:
        need("CMake %s or later (%s is %s): pip install cmake, which puts a newer one first "
             "on PATH" % (want, cmake, m.group(1)))


class build_with_cmake(build_py):
    """build_py, then memsnap's C parts into memsnap/_native/."""

    def run(self):
        super().run()
        check_cmake()
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
        run(["cmake", "--build", cmake_dir, "--target", "python_parts", "manpages", "-j", jobs],
            env=env)

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
        # the man pages (made from the --help texts) and the bash completion,
        # inside the package as everything else: memsnap.paths()["man"] is a
        # MANPATH entry, `memsnap help --bash-completion` the script
        man = os.path.join(native, "share", "man", "man1")
        os.makedirs(man, exist_ok=True)
        for page in sorted(os.listdir(os.path.join(cmake_dir, "man", "man1"))):
            if page.endswith(".1"):
                shutil.copyfile(os.path.join(cmake_dir, "man", "man1", page),
                                os.path.join(man, page))
        comp = os.path.join(native, "share", "bash-completion", "completions")
        os.makedirs(comp, exist_ok=True)
        shutil.copyfile(os.path.join(ROOT, "packaging", "memsnap.bash-completion"),
                        os.path.join(comp, "memsnap"))
        run([sys.executable, os.path.join(ROOT, "packaging", "bundle_libs.py"), native])
        with open(os.path.join(pkg, "_version.py"), "w") as f:
            f.write('"""Written by setup.py from CMakeLists.txt."""\n__version__ = "%s"\n'
                    % project_version())


class install_platlib(install):
    """install, into platlib, the wheel's root (not pure): the distutils of
    Python 3.9 with setuptools before 60 (Debian 11) picks platlib only for
    ext_modules, and so would put the package in the wheel's .data/purelib."""

    def finalize_options(self):
        super().finalize_options()
        if os.path.normpath(self.install_lib) == os.path.normpath(self.install_purelib):
            self.install_lib = self.install_platlib


class with_binaries(Distribution):
    """Not pure: the package goes to platlib, at the wheel's root."""

    def has_ext_modules(self):
        return True


class bdist_wheel_binaries(bdist_wheel):
    """Binaries, no extension module: py3-none-<platform> (linux_x86_64, or
    MEMSNAP_WHEEL_PLATFORM: manylinux_2_31_x86_64 from scripts/build-wheel.sh)."""

    def get_tag(self):
        plat = os.environ.get("MEMSNAP_WHEEL_PLATFORM") or super().get_tag()[2]
        if not re.match(r"^(linux|manylinux_\d+_\d+)_[a-z0-9_]+$", plat):
            sys.exit("setup.py: MEMSNAP_WHEEL_PLATFORM=%s is not a platform tag "
                     "(linux_x86_64, manylinux_2_31_x86_64)" % plat)
        return "py3", "none", plat


os.makedirs(os.path.join(ROOT, "build-wheel"), exist_ok=True)   # egg_base below
setup(
    version=project_version(),
    package_dir={"": "python"},
    packages=["memsnap"],
    distclass=with_binaries,
    cmdclass={"build_py": build_with_cmake, "bdist_wheel": bdist_wheel_binaries,
              "install": install_platlib},
    # Not build/: that is where scripts/build.sh puts the CMake build, whose
    # lib/ setuptools would otherwise take for its own.
    options={"build": {"build_base": "build-wheel"},
             "egg_info": {"egg_base": "build-wheel"}},
    zip_safe=False,
)
