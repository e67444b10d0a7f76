"""The bridge to MuJoCo Warp: a batch of worlds with zero-copy torch views.

:class:`Sim` builds mjw Model/Data from an MJCF path, an MJCF string or a
``mujoco.MjModel`` (nworld, nconmax, njmax settable), or wraps an existing mjw
Model/Data pair (e.g. the ``mjw_model``/``mjw_data`` of a FlyGym GPUSimulation,
without importing FlyGym). Its :meth:`Sim.view` returns torch tensors that share
memory with Warp's arrays on Warp's device (CUDA or CPU): writing into
``sim.view("ctrl")`` is what the next ``sim.step()`` sees.
"""

from __future__ import annotations

import atexit
import gc
import os
from typing import Iterable, Sequence

import mujoco
import torch

from .. import _ext
from .._buildcfg import cuda_version
from ..driver import kernels_problem
from ..errors import BridgeError
from .hexapod import fly_model

VIEW_FIELDS = ("ctrl", "qpos", "qvel", "time", "geom_xpos", "geom_xmat", "cam_xpos", "cam_xmat", "xpos", "xmat",
               "xquat", "site_xpos", "sensordata", "actuator_force", "overflow")
# MuJoCo Warp's overflow bits (mujoco_warp.OverflowType, the same in 3.16 and 4.0), set by
# mjw.step in data.overflow [W] and kept until the world's reset: what each means, for reports.
OVERFLOW_BITS = {1: "constraint rows > njmax", 2: "sparse Jacobian entries > njmax_nnz",
                 4: "broadphase pairs > naconmax", 8: "contacts > naconmax", 16: "CCD buffer",
                 32: "heightfield contacts", 64: "contact-match sensor", 128: "islands > nvmax",
                 256: "EPA horizon buffer", 512: "solver iteration limit", 1024: "line-search iteration limit",
                 2048: "tactile sensor pairs"}
# The bits of a step whose physics dropped something (constraint rows, contacts, collision
# work, islands): its state is no longer MuJoCo's, and flycuda.env ends the world. The others
# (an iteration limit reached, a sensor's own buffer) are reported only.
DROPPED_BITS = 1 | 2 | 4 | 8 | 16 | 32 | 128 | 256


def overflow_words(bits: int) -> str:
    """"constraint rows > njmax, contacts > naconmax" for MuJoCo Warp's overflow bitmask."""
    words = [w for b, w in OVERFLOW_BITS.items() if bits & b]
    rest = bits & ~sum(OVERFLOW_BITS)  # a bit of a newer MuJoCo Warp
    return ", ".join(words + ([f"bits {rest:#x}"] if rest else [])) or "none"



def quiet_warp(wp) -> None:
    """Silences Warp's banner and per-module load lines (warnings still show)."""
    wp.config.quiet = True
    if hasattr(wp, "LOG_WARNING") and hasattr(wp.config, "log_level"):
        wp.config.log_level = wp.LOG_WARNING


def _skip_the_exit_collection() -> None:
    """At exit, the interpreter's last garbage collection walks every object left, and Warp's
    kernels keep millions (their parsed sources): 3-5 s at the end of every process that ran
    MuJoCo Warp, ``flycuda`` commands included. Freezing them first (``gc.freeze``, an atexit
    handler) skips that walk; what a run writes is closed before exit, never left to the collector."""
    if not getattr(_skip_the_exit_collection, "registered", False):
        atexit.register(gc.freeze)
        _skip_the_exit_collection.registered = True


def import_warp():
    _skip_the_exit_collection()
    try:
        import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

        quiet_warp(wp)  # before mujoco_warp initializes Warp
        import mujoco_warp as mjw  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)
    except ImportError as e:
        raise BridgeError(f"MuJoCo Warp is not installed ({e}); pip install mujoco-warp warp-lang") from None
    wp.init()
    return wp, mjw


def unusable_gpu(wp=None, index: int | None = None) -> str | None:
    """Why a GPU that Warp (the driver) sees cannot run flycuda, or None: torch built for a
    newer CUDA than the driver supports (torch then reports no GPU at all), a CPU build of
    torch, or a driver too old for (or a GPU not covered by) flycuda's kernels
    (:func:`flycuda.driver.kernels_problem`, the judge ``flycuda doctor`` uses), on CUDA device
    ``index`` (None: torch's current one). ``device="cpu"`` asks for the CPU explicitly."""
    wp = wp if wp is not None else import_warp()[0]
    if not wp.is_cuda_available():
        return None
    driver = wp.get_cuda_driver_version()  # 12080 for CUDA 12.8; (13, 0) from Warp 1.19
    drv = cuda_version(driver) if driver else "unknown"
    if torch.cuda.is_available():
        if not _ext.has_cuda_ops():
            return None
        return kernels_problem(driver=drv, index=index)
    if torch.version.cuda is None:
        return (f"Warp sees a GPU (driver for CUDA {drv}) but torch {torch.__version__} is a CPU build: install a "
                f"CUDA build of torch for CUDA <= {drv}, or pass device='cpu' to run on the CPU")
    return (f"Warp sees a GPU but torch {torch.__version__} cannot use it: torch is built for CUDA {torch.version.cuda} "
            f"and the NVIDIA driver supports CUDA {drv}; update the driver (for CUDA >= {torch.version.cuda}) or "
            f"install a torch built for CUDA <= {drv}, or pass device='cpu' to run on the CPU")


def warp_device_for(device: str | torch.device | None) -> str:
    """Warp's device name for a torch-style device ("cpu", "cuda", "cuda:1"). A
    "cuda" without an index is torch's current CUDA device (``torch.cuda.current_device()``,
    as torch itself reads it), not cuda:0. None picks the current CUDA device when a
    GPU is visible to Warp and torch and flycuda was built with its CUDA kernels (not
    with FLYCUDA_FORCE_CPU=1), else the CPU."""
    wp, _ = import_warp()
    if device is None:
        why = unusable_gpu(wp)
        if why:
            raise BridgeError(why)
        if wp.is_cuda_available() and torch.cuda.is_available() and _ext.has_cuda_ops():  # looked up on use (tests stand it in)
            return f"cuda:{torch.cuda.current_device()}"
        return "cpu"
    dev = torch.device(device)
    if dev.type == "cpu":
        return "cpu"
    if dev.type == "cuda":
        if not wp.is_cuda_available():
            raise BridgeError("device cuda was asked for but Warp sees no CUDA device")
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        why = unusable_gpu(wp, index)
        if why:
            raise BridgeError(why)
        return f"cuda:{index}"
    raise BridgeError(f"device must be cpu or cuda, got {device}")


def load_mjmodel(source):
    """A ``mujoco.MjModel`` from None (the built-in hexapod), an MjModel, an MJCF
    path or an MJCF string."""
    if source is None:
        return fly_model()
    if isinstance(source, mujoco.MjModel):
        return source
    if isinstance(source, (str, os.PathLike)):
        s = os.fspath(source)
        if s.lstrip().startswith("<"):
            return mujoco.MjModel.from_xml_string(s)
        if not os.path.isfile(s):
            raise BridgeError(f"model file not found: {s}")
        try:
            return mujoco.MjModel.from_xml_path(s)
        except Exception as e:  # noqa: BLE001 - MuJoCo's parse errors become one line
            raise BridgeError(f"cannot load model {s}: {str(e).splitlines()[0]}") from None
    raise BridgeError(f"model must be None, a mujoco.MjModel, an MJCF path or string; got {type(source).__name__}")


# Data fields that carry over from one step to the next (the rest a step recomputes);
# what a snapshot keeps (flycuda.replay.snapshot), held bit for bit by the resume tests.
CARRIED = ("qpos", "qvel", "act", "ctrl", "qacc_warmstart", "time", "mocap_pos", "mocap_quat", "qfrc_applied",
           "xfrc_applied", "eq_active", "userdata", "plastic", "history", "tree_asleep", "tree_awake", "body_awake",
           "overflow")


def _has(data, field: str) -> bool:
    arr = getattr(data, field, None)
    return arr is not None and hasattr(arr, "ptr") and arr.shape[0] > 0


class Sim:
    """A batch of MuJoCo Warp worlds: ``mjm`` (host model), ``model``/``data`` (mjw)."""

    def __init__(self, mjm, model, data):
        wp, mjw = import_warp()
        self.mjm, self.model, self.data = mjm, model, data
        self._wp, self._mjw = wp, mjw
        self.wp_device = str(data.qpos.device)
        self._views: dict[str, torch.Tensor] = {}

    # -- construction ---------------------------------------------------------------
    @classmethod
    def build(cls, source=None, nworld: int = 1, *, device: str | torch.device | None = None,
              nconmax: int | None = None, njmax: int | None = None) -> "Sim":
        """Builds ``nworld`` worlds of ``source`` (see :func:`load_mjmodel`) on ``device``."""
        if not isinstance(nworld, int) or nworld <= 0:
            raise BridgeError(f"worlds must be a positive integer, got {nworld!r}")
        wp, mjw = import_warp()
        mjm = load_mjmodel(source)
        wdev = warp_device_for(device)
        with wp.ScopedDevice(wdev):
            model = mjw.put_model(mjm)
            data = mjw.make_data(mjm, nworld=nworld, nconmax=nconmax, njmax=njmax)
        return cls(mjm, model, data)

    @classmethod
    def wrap(cls, mjw_model, mjw_data, mjm) -> "Sim":
        """Wraps an existing mjw Model/Data pair; ``mjm`` (the MjModel it was made
        from) gives the names. Nothing is copied."""
        if not isinstance(mjm, mujoco.MjModel):
            raise BridgeError(f"wrap needs the mujoco.MjModel the pair was made from, got {type(mjm).__name__}")
        for name, obj in (("mjw_model", mjw_model), ("mjw_data", mjw_data)):
            if not hasattr(obj, "qpos0" if name == "mjw_model" else "qpos"):
                raise BridgeError(f"{name} is not a MuJoCo Warp {'Model' if name == 'mjw_model' else 'Data'}")
        if tuple(mjw_data.ctrl.shape)[-1] != mjm.nu or tuple(mjw_data.qpos.shape)[-1] != mjm.nq:
            raise BridgeError(f"mjw_data (nu={mjw_data.ctrl.shape[-1]}, nq={mjw_data.qpos.shape[-1]}) does not "
                              f"belong to mjm (nu={mjm.nu}, nq={mjm.nq})")
        return cls(mjm, mjw_model, mjw_data)

    # -- facts ------------------------------------------------------------------------
    @property
    def nworld(self) -> int:
        return int(self.data.qpos.shape[0])

    @property
    def timestep(self) -> float:
        return float(self.mjm.opt.timestep)

    @property
    def device(self) -> torch.device:
        """The torch device of the views (Warp's device)."""
        return torch.device("cpu" if self.wp_device == "cpu" else self.wp_device)

    # -- zero-copy views -------------------------------------------------------------
    def view(self, field: str) -> torch.Tensor:
        """A torch tensor sharing memory with ``data.<field>`` (no copy).

        Fields: ctrl [W, nu], qpos [W, nq], qvel [W, nv], time [W], geom_xpos
        [W, ngeom, 3], geom_xmat [W, ngeom, 3, 3], cam_xpos [W, ncam, 3],
        cam_xmat [W, ncam, 3, 3], xpos [W, nbody, 3], xmat [W, nbody, 3, 3], xquat [W, nbody, 4] (w, x, y, z),
        site_xpos [W, nsite, 3], sensordata [W, nsensordata], actuator_force [W, nu], overflow [W] int32 (MuJoCo
        Warp's overflow bits of each world, :data:`OVERFLOW_BITS`: set by a step that had
        to drop constraint rows or contacts, kept until the world is reset).
        """
        if field not in VIEW_FIELDS:
            raise BridgeError(f"unknown field {field!r}; views exist for {', '.join(VIEW_FIELDS)}")
        if field not in self._views:
            import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

            arr = getattr(self.data, field)
            t = wp.to_torch(arr)
            if field.endswith("xmat") and t.shape[-1] != 3:  # mat33 -> [.., 3, 3]
                t = t.view(*t.shape[:-1], 3, 3)
            if t.numel() and t.data_ptr() != arr.ptr:  # pragma: no cover - guards Warp behaviour changes
                raise BridgeError(f"wp.to_torch copied data.{field}; a zero-copy view was expected")
            self._views[field] = t
        return self._views[field]

    def contact_views(self) -> list[torch.Tensor]:
        """The contact arrays :func:`flycuda.ops.hybrid_senses` reads, as zero-copy torch views
        in :data:`flycuda.ops.CONTACT_FIELDS`' order: ``data.contact``'s geom [slots, 2], worldid,
        frame [slots, 3, 3], friction [slots, 5], dim, efc_address [slots, 6] and adhesion, then
        ``data.efc.force`` [W, njmax] and ``data.nacon`` [1] (the pool's slots are MuJoCo
        Warp's naconmax, shared by all worlds; the first nacon are in use after a step)."""
        if "contacts" not in self._views:
            import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use)

            from ..ops import CONTACT_FIELDS  # noqa: PLC0415  (ops loads the extension)

            c = self.data.contact
            arrays = {"efc_force": self.data.efc.force, "nacon": self.data.nacon}
            views = []
            for name in CONTACT_FIELDS:
                arr = arrays[name] if name in arrays else getattr(c, name)
                t = wp.to_torch(arr)
                if name == "frame" and t.shape[-1] != 3:
                    t = t.view(t.shape[0], 3, 3)
                if t.numel() and t.data_ptr() != arr.ptr:  # pragma: no cover - guards Warp behaviour changes
                    raise BridgeError(f"wp.to_torch copied the contact array {name}; a zero-copy view was expected")
                views.append(t)
            self._views["contacts"] = views
        return self._views["contacts"]

    # -- names -------------------------------------------------------------------------
    def _names(self, objtype, count) -> list[str]:
        return [mujoco.mj_id2name(self.mjm, objtype, i) or "" for i in range(count)]

    def actuator_ids(self, names: Sequence[str]) -> torch.Tensor:
        """int32 [D] actuator index per name; a name matches an actuator's name or
        the name of the joint it drives, with or without a ``prefix/`` (FlyGym names
        a fly's joints ``<fly>/<dof>``) when that is unambiguous. Raises BridgeError
        listing what did not match."""
        acts = self._names(mujoco.mjtObj.mjOBJ_ACTUATOR, self.mjm.nu)
        joints = self._names(mujoco.mjtObj.mjOBJ_JOINT, self.mjm.njnt)
        by_name = {n: i for i, n in enumerate(acts) if n}
        for i in range(self.mjm.nu):
            if int(self.mjm.actuator_trntype[i]) == int(mujoco.mjtTrn.mjTRN_JOINT):
                by_name.setdefault(joints[self.mjm.actuator_trnid[i, 0]], i)
        by_suffix: dict[str, list[int]] = {}  # "nmf/lf_coxa-yaw" also answers to "lf_coxa-yaw"
        for full, i in by_name.items():
            if "/" in full:
                by_suffix.setdefault(full.split("/", 1)[1], []).append(i)
        ids, missing = [], []
        for n in names:
            if n in by_name:
                ids.append(by_name[n])
            elif len(set(by_suffix.get(n, []))) == 1:  # a prefixed name (FlyGym: "<fly>/<dof>"), if unique
                ids.append(by_suffix[n][0])
            else:
                missing.append(n)
        if missing:
            avail = sorted(by_name)
            shown = ", ".join(avail[:12]) + (f", ... ({len(avail)} in all)" if len(avail) > 12 else "")
            raise BridgeError(f"{len(missing)} of {len(names)} motion DOFs match no actuator or actuated "
                              f"joint: {', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}; "
                              f"the model has: {shown or 'no actuators'}")
        if len(set(ids)) != len(ids):
            raise BridgeError("two motion DOFs map to the same actuator")
        return torch.tensor(ids, dtype=torch.int32, device=self.device)

    def qpos_adrs(self, act_ids: Iterable[int]) -> torch.Tensor:
        """int32 [D] qpos address of the hinge/slide joint each actuator drives."""
        adrs = []
        for a in [int(i) for i in torch.as_tensor(act_ids).cpu()]:
            if int(self.mjm.actuator_trntype[a]) != int(mujoco.mjtTrn.mjTRN_JOINT):
                raise BridgeError(f"actuator {a} does not drive a joint; its angle cannot be recorded")
            j = self.mjm.actuator_trnid[a, 0]
            if int(self.mjm.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
                raise BridgeError(f"actuator {a} drives a joint that is not a hinge or slide")
            adrs.append(int(self.mjm.jnt_qposadr[j]))
        return torch.tensor(adrs, dtype=torch.int32, device=self.device)

    def camera_id(self, name: str) -> int:
        cid = mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_CAMERA, name)
        if cid < 0:
            cams = self._names(mujoco.mjtObj.mjOBJ_CAMERA, self.mjm.ncam)
            raise BridgeError(f"unknown camera {name!r}; the model has: {', '.join(cams) or 'no cameras'}")
        return cid

    # -- state ---------------------------------------------------------------------------
    def carried_state(self) -> dict:
        """Host copies of the Data fields a step carries over to the next (:data:`CARRIED`,
        those this MuJoCo Warp has): with the model, all the next step depends on."""
        import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use)

        return {f: wp.to_torch(getattr(self.data, f)).cpu().clone() for f in CARRIED if _has(self.data, f)}

    def load_carried_state(self, state: dict) -> None:
        """Sets the fields :meth:`carried_state` returned (same worlds and model; all checked
        before any is set), then poses the worlds from them (:meth:`kinematics`: no sensor
        history advances)."""
        import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use)

        views = {}
        for f, value in state.items():
            if f not in CARRIED or not _has(self.data, f):
                raise BridgeError(f"the state names data.{f}, which this MuJoCo Warp's Data does not carry")
            t = views[f] = wp.to_torch(getattr(self.data, f))
            if tuple(t.shape) != tuple(value.shape) or t.dtype != value.dtype:
                raise BridgeError(f"the state's data.{f} is {value.dtype} {tuple(value.shape)}, these worlds' "
                                  f"{t.dtype} {tuple(t.shape)}: another model or number of worlds")
        for f, value in state.items():
            views[f].copy_(value)
        self.kinematics()

    # -- stepping -----------------------------------------------------------------------
    def step(self) -> None:
        """One physics step of every world (mjw.step) on the Sim's own device (MuJoCo
        Warp launches on Warp's current device), on that device's current stream."""
        with self._wp.ScopedDevice(self.wp_device):
            self._mjw.step(self.model, self.data)

    def overflowed(self) -> dict[int, str]:
        """The worlds whose physics overflowed MuJoCo Warp's buffers since their last reset
        (``world: what overflowed``): their steps dropped constraint rows or contacts, so
        their states are not what MuJoCo would compute. Reads the device (one copy)."""
        bits = self.view("overflow").cpu().tolist()
        return {w: overflow_words(b) for w, b in enumerate(bits) if b}

    def reset(self, mask) -> None:
        """MuJoCo Warp's own reset (``mjw.reset_data``) of the worlds ``mask`` marks (bool [W]:
        a torch tensor on the Sim's device or a Warp array; the others untouched): qpos0,
        zero velocities, contacts, warm starts, time and the overflow bits cleared."""
        m = self._wp.from_torch(mask, dtype=self._wp.bool) if isinstance(mask, torch.Tensor) else mask
        with self._wp.ScopedDevice(self.wp_device):
            self._mjw.reset_data(self.model, self.data, reset=m)

    def kinematics(self) -> None:
        """Poses (bodies, geoms, cameras, lights) from qpos alone, as FlyGym's renderers
        do before drawing a recorded state: mjw.kinematics, com_pos, camlight."""
        with self._wp.ScopedDevice(self.wp_device):
            self._mjw.kinematics(self.model, self.data)
            self._mjw.com_pos(self.model, self.data)
            self._mjw.camlight(self.model, self.data)

    def forward(self) -> None:
        """Recomputes derived quantities (poses) from qpos without stepping, on the
        Sim's own device."""
        with self._wp.ScopedDevice(self.wp_device):
            self._mjw.forward(self.model, self.data)
