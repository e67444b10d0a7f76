# Device call 3, carry [".devstage/p3", ".devstage/so"]: Warp and MuJoCo Warp whole; the graph-captured
# replay with rendering and the benchmarks at one size each.
mkdir -p /root/stage /root/c3 && cp .devstage/p3/* /root/stage/ && rm -rf /root/stage/wheels
source .devstage/so/common.sh
install_wheels ""
extension
timeout 330 python3 -m flycuda gpu-check --quick --only replay,bench --out /root/c3 --results /root/c3/RESULTS.md
pack c3
