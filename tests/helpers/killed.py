"""A replay, or a ``flycuda env`` rollout, killed at a chosen point (the kill tests'
subprocess), and what the tests compare.

:func:`killed` runs one in a subprocess and returns its exit status; :func:`assert_same_store`
holds a resumed store equal, bit for bit, to an uninterrupted run's. As a module:

    python -m helpers.killed '{"kw": {...replay options...}, "at": "step", "n": 37, "signal": "KILL"}'

``at`` says where the signal is sent to the process itself, deterministically:

* ``step``: as the loop counts step ``n`` done (before its host work: mid-chunk unless ``n``
  ends one; a rollout: before its snapshot check);
* ``flush``: right after the writer thread wrote the ``n``-th chunk of joint angles (a
  rollout's: of observations);
* ``snapshot-part``: inside the ``n``-th snapshot's write, its file half written (not renamed);
* ``snapshot-marker``: the ``n``-th snapshot's file whole and renamed, its marker not yet written.

SIGKILL ends the process there; SIGTERM asks the replay to stop (it exits 143 via the CLI's
mapping, here by :class:`flycuda.sim.preempt.Preempted`'s ``exit_code``).
"""

import json
import os
import signal
import subprocess
import sys

import numpy as np

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _hit(sig: int) -> None:
    os.kill(os.getpid(), sig)


def _arm_step(n: int, sig: int) -> None:
    from flycuda.sim import stepper

    orig = stepper.Loop.advanced

    def advanced(self, k):
        if self.done < n <= self.done + k:
            _hit(sig)
        orig(self, k)

    stepper.Loop.advanced = advanced


def _arm_rollout_step(n: int, sig: int) -> None:
    from flycuda.cli import rollout

    orig = rollout.Rollout._after_step

    def _after_step(self):
        if self.k == n:
            _hit(sig)
        orig(self)

    rollout.Rollout._after_step = _after_step


def _arm_flush(n: int, sig: int, array: str = "angles") -> None:
    from flycuda.recording import store

    orig, count = store.Writer._write, [0]

    def _write(self, name, *args):
        orig(self, name, *args)
        if name == array:
            count[0] += 1
            if count[0] == n:
                _hit(sig)

    store.Writer._write = _write


def _arm_snapshot(n: int, sig: int, marker: bool) -> None:
    from flycuda.replay import snapshot

    orig, count = snapshot._write_atomic, [0]

    def _write_atomic(path, write):
        count[0] += 1
        if count[0] == 2 * n - 1 and not marker:  # the n-th snapshot's file, half written
            with open(path + ".part", "wb") as f:
                write(f)
                f.truncate(f.tell() // 2)
            _hit(sig)
        if count[0] == 2 * n and marker:  # its file renamed, its marker not yet written
            _hit(sig)
        orig(path, write)

    snapshot._write_atomic = _write_atomic


def killed(store, at: str, n: int, sig: str = "KILL", *, kw: dict | None = None, argv: list | None = None) -> int:
    """The replay of ``kw`` into ``store`` (or the command line ``flycuda ARGV --record
    STORE``) in a subprocess that signals itself at ``at`` ``n`` (tests/helpers/killed.py);
    its exit status."""
    spec = {"at": at, "n": n, "signal": sig}
    if argv is not None:
        spec["argv"] = [str(a) for a in (*argv, "--record", store)]
    else:
        spec["kw"] = dict(kw, record=str(store))
    env = dict(os.environ, PYTHONPATH=TESTS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "helpers.killed", json.dumps(spec)], env=env, capture_output=True,
                          text=True, timeout=600)
    return proc.returncode


def copy_run(store, folder):
    """A copy of ``store`` and its snapshots (``STORE.resume``) as ``folder/run.zarr``."""
    import shutil

    dst = folder / "run.zarr"
    shutil.copytree(store, dst)
    shutil.copytree(str(store) + ".resume", str(dst) + ".resume")
    return dst


def store_digest(store) -> str:
    """Every file of a store and its snapshots (names and bytes)."""
    import hashlib

    h = hashlib.sha256()
    for root in (str(store), str(store) + ".resume"):
        for dp, _, files in sorted(os.walk(root)):
            for f in sorted(files):
                h.update(os.path.join(dp, f).encode())
                with open(os.path.join(dp, f), "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


def arrays(path) -> dict:
    import zarr

    g = zarr.open_group(str(path), mode="r")
    return {name: np.asarray(a[...]) for name, a in g.arrays()}


def assert_same_store(got, want) -> None:
    """Every array equal bit for bit (NaN where NaN), the run complete, the same tracking error."""
    from flycuda.recording import Recording

    a, b = arrays(got), arrays(want)
    assert sorted(a) == sorted(b)
    for name in b:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        if a[name].dtype.kind == "f":
            assert np.array_equal(a[name].view(np.uint32 if a[name].itemsize == 4 else np.uint64),
                                  b[name].view(np.uint32 if b[name].itemsize == 4 else np.uint64)), name
        else:
            assert np.array_equal(a[name], b[name]), name
    ra, rb = Recording.open(got), Recording.open(want)
    assert ra.complete and ra.info.get("rmse_per_dof") == rb.info.get("rmse_per_dof")  # (a replay's)
    assert not os.path.exists(str(got) + ".resume")  # the completed run's snapshots are gone


def main(spec: dict) -> int:
    sig = getattr(signal, "SIG" + spec.get("signal", "KILL"))
    at, n, cli = spec["at"], int(spec["n"]), "argv" in spec
    if at == "step":
        (_arm_rollout_step if cli else _arm_step)(n, sig)
    elif at == "flush":
        _arm_flush(n, sig, "obs" if cli else "angles")  # flycuda env's observations, a replay's joint angles
    else:
        _arm_snapshot(n, sig, marker=at == "snapshot-marker")
    if cli:
        from flycuda.cli.main import main as flycuda

        return flycuda(spec["argv"])
    from flycuda.replay import replay
    from flycuda.sim.preempt import Preempted

    try:
        replay(**spec["kw"])
    except Preempted as e:
        print(f"preempted: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
