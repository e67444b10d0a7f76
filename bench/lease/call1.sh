# Device call 1, carry [".devstage/p1", ".devstage/so"]: issue 53's torch-only rows: flyvis's network
# against torch's CSR SpMM (bench_connectome), the walking controllers' ops in a graph (bench_control).
mkdir -p /root/stage /root/c1 && cp .devstage/p1/* /root/stage/
source .devstage/so/common.sh
install_wheels "warp"   # MuJoCo, zarr, gymnasium...: Warp's wheel is not whole yet
extension
timeout 200 python3 -m flycuda gpu-check --quick --only connectome,control --out /root/c1 --results /root/c1/RESULTS.md
pack c1
