#!/usr/bin/env bash
# Stage what a 15-minute GPU lease needs, here (no GPU), into .devstage/ (git-ignored):
#   p1, p2, p3  the Python 3.12 wheels the GPU machine lacks, in three parts of <= 55 MiB (one per
#               device call: the carry limit is 64 MiB a call with the working tree): the small wheels
#               first (MuJoCo, zarr, gymnasium...: the first call installs them from p1 alone), Warp's
#               150 MB wheel last (the third call completes it);
#   so          flycuda's extension as built here (xz), its build record, and the call scripts;
#   nmf         NeuroMechFly frozen (flycuda.flygym.frozen: its worlds, clip and retina; about 7 MiB);
#   terrain     FlyGym's terrains' worlds (bench_terrain --export).
# Run from the repository root after `bash run.sh build` (with CUDA_HOME and TORCH_CUDA_ARCH_LIST=9.0+PTX).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qxF '/.devstage/' .git/info/exclude 2>/dev/null || echo '/.devstage/' >> .git/info/exclude
[ -f flycuda/_C.abi3.so ] || { echo "stage.sh: build flycuda first (bash run.sh build)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/wheels"
pins=(mujoco==4.0.0 mujoco-core==4.0.0 mujoco-warp==4.0.0 warp-lang==1.19.0 wurlitzer glfw pyopengl etils
      importlib_resources websockets zarr==3.4.2 numcodecs donfig google-crc32c msgspec gymnasium==1.4.0
      farama-notifications)  # mujoco-studio (MuJoCo's GUI, 13 MB) is optional to `import mujoco`: left out
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$work/wheels" "${pins[@]}" 2>&1 \
  | { grep -v '^WARNING: Location' || true; }
rm -rf .devstage && mkdir -p .devstage/so
(cd "$work" && tar -cf - $(ls wheels/*.whl | grep -v warp_lang) wheels/warp_lang-*.whl) | split -b 55M -d - .devstage/chunk.
i=0
for c in .devstage/chunk.*; do i=$((i+1)); mkdir -p ".devstage/p$i"; mv "$c" ".devstage/p$i/"; done
[ "$i" = 3 ] || { echo "stage.sh: expected 3 parts, got $i (bench/lease/README.md)" >&2; exit 1; }
xz -T2 -6 -c flycuda/_C.abi3.so > .devstage/so/_C.abi3.so.xz
cp flycuda/_build_info.json bench/lease/*.sh .devstage/so/
conn="$(ls .venv-flygym/lib/python3.*/site-packages/flyvis/connectome/fib25-fib19_v2.2.json 2>/dev/null | head -n1)"
[ -z "$conn" ] || cp "$conn" .devstage/so/  # flyvis's connectome file for bench_connectome (no flyvis there)
if [ -x .venv-flygym/bin/python ]; then  # NeuroMechFly frozen (issue 53's nmf steps), its terrains (bench_terrain)
  .venv-flygym/bin/python -W ignore -m flycuda.flygym.freeze .devstage/nmf
  PYTHONPATH=. .venv-flygym/bin/python bench/bench_terrain.py --export .devstage/terrain
fi
du -sh .devstage/*
