# Device call 1, carry [".devstage/p1", ".devstage/so"]: the CUDA tests (no Warp yet: its tests skip)
# and the sanitizers' self-test. About 5 minutes with the machine's start.
mkdir -p /root/stage /root/c1 && cp .devstage/p1/* /root/stage/
source .devstage/so/common.sh
install_wheels "warp"   # MuJoCo, zarr, gymnasium...: Warp's wheel is not whole yet
extension
timeout 330 python3 -m flycuda gpu-check --quick --only tests,selftest --out /root/c1 --results /root/c1/RESULTS.md
pack c1
