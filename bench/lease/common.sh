# Sourced by each device call (bench/lease/README.md): the environment, the staged wheels
# installed into /root/site (from a partial stream too: `install_wheels EXCLUDE`), flycuda's
# extension in place (the one carried, else built there).
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 CUDA_HOME=/usr/local/cuda PYTHONUNBUFFERED=1 PYTHONPATH=/root/site MAX_JOBS=16
[ -f .devstage/so/fib25-fib19_v2.2.json ] && export FLYCUDA_CONNECTOME="$PWD/.devstage/so/fib25-fib19_v2.2.json"
[ -d .devstage/nmf ] && export FLYCUDA_NEUROMECHFLY="$PWD/.devstage/nmf"  # NeuroMechFly without FlyGym
[ -d "$CUDA_HOME" ] || CUDA_HOME="$(dirname "$(dirname "$(command -v nvcc)")")"
install_wheels() {  # the wheels whose bytes have arrived in /root/stage, all but those matching $1
  (cd /root/stage && cat chunk.* | tar -xf - 2>/dev/null; true)
  ls /root/stage/wheels/*.whl | grep -vE "${1:-^$}" |
    xargs python3 -m pip install -q --no-index --no-deps --no-compile --target /root/site 2>&1 | grep -v "^WARNING" | tail -3
}
extension() {  # flycuda._C: the carried build, else one built here (about 90 s on 16 cores)
  if [ ! -f flycuda/_C.abi3.so ] && [ -f .devstage/so/_C.abi3.so.xz ]; then  # later calls: kept from call 1
    python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.devstage/so/_C.abi3.so.xz'), open('flycuda/_C.abi3.so', 'wb'))"
    cp .devstage/so/_build_info.json flycuda/
  fi
  if ! python3 -c "import flycuda, sys; sys.exit(0 if flycuda.cuda_ready() else 1)"; then
    echo "lease: the carried extension does not load here; building it in place"
    rm -f flycuda/_C.abi3.so
    FLYCUDA_FORCE_CUDA=1 python3 setup.py -q build_ext --inplace 2>&1 | tail -3
  fi
  python3 -c "import flycuda, torch; print('flycuda', flycuda.__version__, 'cuda_ready', flycuda.cuda_ready(), 'torch', torch.__version__, torch.cuda.get_device_name())"
}
pack() { tar czf "$OUT/$1.tgz" -C "/root/$1" . 2>/dev/null; ls -la "$OUT"; }
