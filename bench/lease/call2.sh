# Device call 2, carry [".devstage/p2", ".devstage/so"]: compute-sanitizer on a sample of the op tests;
# the walking controllers' ops timed in a graph (bench_control).
mkdir -p /root/stage /root/c2 && cp .devstage/p2/* /root/stage/
source .devstage/so/common.sh
extension
timeout 330 python3 -m flycuda gpu-check --quick --only sanitizer,control --out /root/c2 --results /root/c2/RESULTS.md
pack c2
