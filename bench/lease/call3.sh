# Device call 3, carry [".devstage/p3", ".devstage/sh", ".devstage/nmf"]: Warp and MuJoCo Warp whole;
# issue 53's NeuroMechFly rows (gpu-check --only nmf: the replay beside FlyGym's loop, the renderer,
# the env with eyes and with descending drives, odor). The extension is call 1's (kept on the machine);
# .devstage/sh holds the scripts alone (the carry limit).
mkdir -p /root/stage /root/c3 && cp .devstage/p3/* /root/stage/ && rm -rf /root/stage/wheels
mkdir -p .devstage/so && cp -n .devstage/sh/* .devstage/so/
source .devstage/so/common.sh
install_wheels ""
extension
timeout 520 python3 -m flycuda gpu-check --quick --only nmf --out /root/c3 --results /root/c3/RESULTS.md
pack c3
