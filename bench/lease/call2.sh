# Device call 2, carry [".devstage/p2", ".devstage/so"]: the op tests on the GPU (torch only: the kernels
# changed since the last lease), 100 s at most.
mkdir -p /root/stage /root/c2 && cp .devstage/p2/* /root/stage/
source .devstage/so/common.sh
extension
timeout 100 python3 -m pytest -q -rfE -p no:cacheprovider -m needs_cuda -n 8 --hang-timeout 60 tests/ops \
  > /root/c2/optests.log 2>&1; tail -15 /root/c2/optests.log
pack c2
