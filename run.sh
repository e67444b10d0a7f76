#!/usr/bin/env bash
# flycuda's one entry point on a fresh machine: sets up a virtual environment
# (once), builds the extension (incrementally), then runs what you ask:
#
#   bash run.sh demo [flycuda replay options]   # the main job: replay demo (no options: outputs in out/demo)
#   bash run.sh test [pytest options]           # the test suite (a worker per core: FLYCUDA_TEST_WORKERS=N)
#   bash run.sh gpu-check [--out DIR]           # GPU self-check (needs an NVIDIA GPU)
#   bash run.sh build                           # set up and build only
#
# Two lanes (each its own venv and requirements file):
#   flygym  Python >= 3.12 with FlyGym 2.1 and its pins (mujoco/mujoco-warp 3.16):
#           .venv-flygym, requirements-flygym.txt; the demo replays NeuroMechFly
#           and FlyGym's Spotlight recording;
#   latest  the newest mujoco-warp on any Python >= 3.11: .venv, requirements.txt;
#           the demo replays the built-in hexapod.
# The lane is flygym when a Python >= 3.12 is found (python3.12, python3.13 on
# PATH or under pyenv), latest otherwise; FLYCUDA_LANE=flygym|latest picks it.
#
# Environment: FLYCUDA_LANE, FLYCUDA_BASE_PYTHON (the interpreter the venv is
# made from), FLYCUDA_VENV (the venv folder), FLYCUDA_UV (a uv binary that installs the
# dependencies instead of pip: CI: .ci/tools), CUDA_HOME (default: found by
# flycuda/_buildcfg.py: CUDA_PATH, the toolkit holding nvcc, /usr/local/cuda),
# FLYCUDA_FORCE_CUDA=1 / FLYCUDA_FORCE_CPU=1 (see setup.py),
# TORCH_CUDA_ARCH_LIST (default 8.0;8.6;8.9;9.0+PTX when no GPU is visible).
# FLYCUDA_PYTHON=/path/to/python uses that interpreter as it is (no venv, no
# installs: for machines without network, such as a lent GPU machine whose
# torch is preinstalled); flycuda is then built in place with it.
set -euo pipefail
cd "$(dirname "$0")"

py_minor() {  # "3.12" for a working interpreter, nothing otherwise
  "$1" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")' 2>/dev/null || true
}

find_py312() {  # a Python >= 3.12 (FlyGym 2.x), preferring 3.12
  local c v
  for c in python3.12 python3.13 \
           $(command -v pyenv >/dev/null 2>&1 && ls -d "$(pyenv root)"/versions/3.1[23]*/bin/python3 2>/dev/null); do
    v="$(py_minor "$c")"
    case "$v" in 3.12|3.13) echo "$c"; return 0 ;; esac
  done
  return 1
}

if [ -n "${FLYCUDA_PYTHON:-}" ]; then
  PY="$FLYCUDA_PYTHON"
  LANE="${FLYCUDA_LANE:-$("$PY" -c 'import importlib.util as u, sys
print("flygym" if sys.version_info >= (3, 12) and u.find_spec("flygym_demo") else "latest")')}"
else
  LANE="${FLYCUDA_LANE:-}"
  BASE="${FLYCUDA_BASE_PYTHON:-}"
  if [ -z "$BASE" ] && [ "$LANE" != "latest" ]; then BASE="$(find_py312 || true)"; fi
  if [ -z "$LANE" ]; then
    case "$(py_minor "${BASE:-python3}")" in 3.12|3.13) LANE=flygym ;; *) LANE=latest ;; esac
  fi
  BASE="${BASE:-python3}"
  case "$LANE" in
    flygym) VENV="${FLYCUDA_VENV:-.venv-flygym}"; REQS=requirements-flygym.txt
            case "$(py_minor "$BASE")" in
              3.12|3.13) ;;
              *) echo "run.sh: the flygym lane needs Python 3.12 or 3.13 (FlyGym 2.x; its pinned wheels); got '$BASE' (set FLYCUDA_BASE_PYTHON, or FLYCUDA_LANE=latest)" >&2; exit 2 ;;
            esac ;;
    latest) VENV="${FLYCUDA_VENV:-.venv}"; REQS=requirements.txt ;;
    *) echo "run.sh: FLYCUDA_LANE must be flygym or latest, got '$LANE'" >&2; exit 2 ;;
  esac
  PY="$VENV/bin/python"
  install() {  # pip install into the venv; with FLYCUDA_UV=/path/to/uv, uv installs (CI: .ci/tools)
    if [ -z "${FLYCUDA_UV:-}" ]; then "$PY" -m pip install "$@"; return; fi
    # uv reads no pip.conf: it gets this machine's pip constraint and local wheels, as pip would
    local conf c f
    conf="$("$PY" -m pip config list 2>/dev/null || true)"  # (`pip config get` misses /etc/xdg's keys)
    c="$(echo "$conf" | sed -n "s/^global\.constraint='\(.*\)'$/\1/p")"
    f="$(echo "$conf" | sed -n "s/^global\.find-links='\(.*\)'$/\1/p")"
    UV_CONSTRAINT="${UV_CONSTRAINT:-$c}" UV_FIND_LINKS="${UV_FIND_LINKS:-$f}" \
      "$FLYCUDA_UV" pip install --python "$PY" "$@"
  }
  if [ ! -x "$PY" ]; then
    echo "run.sh: creating $VENV ($LANE lane, Python $(py_minor "$BASE"))" >&2
    "$BASE" -m venv "$VENV"
  fi
  stamp="$VENV/.flycuda-requirements"
  EXTRA=""  # the FlyGym lane's test-only flyvis, without its unused dependencies (--no-deps)
  [ "$LANE" = flygym ] && EXTRA=requirements-flyvis.txt
  if ! cat "$REQS" requirements.txt $EXTRA | cmp -s - "$stamp"; then
    echo "run.sh: installing dependencies ($REQS${EXTRA:+, $EXTRA}${FLYCUDA_UV:+, with uv})" >&2
    install -q --upgrade pip setuptools wheel
    install -q -r "$REQS"
    [ -z "$EXTRA" ] || install -q --no-deps -r "$EXTRA"
    cat "$REQS" requirements.txt $EXTRA > "$stamp"
  fi
fi
export FLYCUDA_LANE="$LANE"
# FlyGym's own vision (MuJoCo's OpenGL renderer), the reference flycuda.vision is tested
# against, needs an OpenGL; without a display that is Debian's libosmesa6 (MUJOCO_GL=osmesa).
if [ "$LANE" = flygym ] && ! ldconfig -p 2>/dev/null | grep -q libOSMesa; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "run.sh: installing libosmesa6 (software OpenGL for FlyGym's own vision)" >&2
    { apt-get install -y -qq libosmesa6 || { apt-get update -qq && apt-get install -y -qq libosmesa6; }; } \
      >/dev/null 2>&1 || echo "run.sh: could not install libosmesa6: tests against FlyGym's own vision skip" >&2
  else
    echo "run.sh: no libOSMesa (apt-get install libosmesa6): tests against FlyGym's own vision skip" >&2
  fi
fi
export MAX_JOBS="${MAX_JOBS:-$(nproc)}"

# Build: a first `pip install -e` (registers the `flycuda` command), then
# incremental in-place builds whenever csrc/ is newer than the extension.
# One abi3 extension (PyTorch's stable ABI) serves every lane's Python and torch.
so="flycuda/_C.abi3.so"
[ -f "$so" ] || so=""
stale() { [ -n "$(find csrc setup.py flycuda/_buildcfg.py -newer "$so" -type f | head -n1)" ] || ! "$PY" flycuda/_buildcfg.py --matches; }
if ! "$PY" -m pip show -q flycuda >/dev/null 2>&1 && [ -n "$so" ] && ! stale; then
  # another lane built it here already, for the archs this one asks for: register, don't compile
  echo "run.sh: registering flycuda (pip install -e .; the abi3 flycuda._C built here serves this lane too)" >&2
  FLYCUDA_NO_BUILD=1 "$PY" -m pip install -q --no-index --no-build-isolation --no-deps -e .
elif ! "$PY" -m pip show -q flycuda >/dev/null 2>&1 || [ -z "$so" ]; then
  # built in place (build/, where later builds find its objects: an editable install would
  # build in a temporary folder), then registered (pip install -e .: the `flycuda` command)
  echo "run.sh: building flycuda (setup.py build_ext --inplace; pip install --no-build-isolation -e .)" >&2
  "$PY" setup.py -q build_ext --inplace
  FLYCUDA_NO_BUILD=1 "$PY" -m pip install -q --no-index --no-build-isolation --no-deps -e .
elif stale; then
  echo "run.sh: csrc/ changed (or another build is asked for: archs, CPU/CUDA), rebuilding flycuda._C" >&2
  "$PY" setup.py -q build_ext --inplace
fi

cmd="${1:-demo}"
shift || true
case "$cmd" in
  demo)  # no options: the default replay; its recording (zarr), the video rendered from it, last frame and plot in out/demo
    if [ $# -eq 0 ]; then
      if [ "$LANE" = flygym ]; then  # NeuroMechFly replaying FlyGym's Spotlight clip, FlyGym-exact targets
        set -- --model neuromechfly --motion spotlight --snippet 0.2 --vision exact@100hz --out out/demo --overwrite \
          --render-size 160x120
      else
        set -- --out out/demo --overwrite --snippet 0.5 --render-size 160x120
      fi
    fi
    exec "$PY" -m flycuda replay "$@" ;;
  # pytest-xdist: a worker per core, a file at a time, in collection order (tests/conftest.py puts
  # the slowest files first; xdist's own reorder, by number of tests, put them last)
  test) exec "$PY" -m pytest -q -n "${FLYCUDA_TEST_WORKERS:-auto}" --dist loadfile --no-loadscope-reorder tests "$@" ;;
  gpu-check) exec "$PY" -m flycuda gpu-check "$@" ;;
  build) "$PY" -c "import flycuda; print('flycuda', flycuda.__version__, 'CUDA kernels built:', flycuda.has_cuda_ops())" ;;
  *) echo "run.sh: unknown command '$cmd' (use demo, test, gpu-check or build)" >&2; exit 2 ;;
esac
