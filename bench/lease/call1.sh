# Device call 1, carry [".devstage/p1", ".devstage/so"]: issue 53's torch-only rows: flyvis's network
# against torch's CSR SpMM (bench_connectome), the walking controllers' ops in a graph (bench_control);
# issue 55's whole brains at FlyWire's scale, 1/32/256 brains x 1 s (bench_brain).
mkdir -p /root/stage /root/c1 && cp .devstage/p1/* /root/stage/
source .devstage/so/common.sh
install_wheels "warp"   # MuJoCo, zarr, gymnasium...: Warp's wheel is not whole yet
extension
timeout 380 python3 -m flycuda gpu-check --quick --only connectome,control,brain --out /root/c1 --results /root/c1/RESULTS.md
pack c1
