"""What a user sees: every requested output is written (and decodes), the plot has
content, a camera the model lacks is an error, and the demo's output folder."""

import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.needs_warp

DT = 0.0005


def _run_cli(args, capsys):
    from flycuda.cli import main

    rc = main(["replay", "--device", "cpu", "--worlds", "2", "--no-progress"] + args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_frames_written_when_no_frame_fell_due(tmp_path, capsys):
    """10 steps at the default 30 fps render interval (67 steps): no frame is due, yet
    --frames gets the final state's mosaic (and --render the first and last states)."""
    import imageio.v3 as iio

    png, mp4 = tmp_path / "f.png", tmp_path / "v.mp4"
    rc, out, _ = _run_cli(["--duration", str(10 * DT), "--frames", str(png), "--render", str(mp4),
                           "--render-size", "32x24"], capsys)
    assert rc == 0 and f"wrote          {png}" in out and f"wrote          {mp4}" in out
    img = iio.imread(png)
    assert img.shape == (24, 2 * 32, 3) and img.std() > 5  # the mosaic of 2 worlds, not blank
    frames = iio.imread(mp4, index=None)
    assert frames.shape[0] == 2  # the first and the last state
    assert "render         2 frames x 2 worlds" in out


def test_video_frame_count_follows_render_every(tmp_path, capsys):
    import imageio.v3 as iio

    mp4 = tmp_path / "v.mp4"
    rc, out, _ = _run_cli(["--duration", str(50 * DT), "--render", str(mp4), "--render-every", "20",
                           "--render-size", "16x12"], capsys)
    assert rc == 0
    # steps 0, 20, 40 and the final state 50
    assert iio.imread(mp4, index=None).shape[0] == 4


@pytest.mark.parametrize("render", [False, True])
def test_unknown_camera_is_an_error_whether_or_not_rendering(tmp_path, capsys, render):
    args = ["--duration", str(5 * DT), "--camera", "nope"] + (["--frames", str(tmp_path / "f.png")] if render else [])
    rc, out, err = _run_cli(args, capsys)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flycuda: error: unknown camera 'nope'")
    assert not (tmp_path / "f.png").exists()


def test_plot_from_recording_has_content(tmp_path, capsys):
    """--record then plot_tracking on the .npz: an image of the expected size whose
    axes hold drawn lines (pixels, not just a file)."""
    import imageio.v3 as iio

    from flycuda.replay import plot_tracking

    rec = tmp_path / "r.npz"
    rc, _, _ = _run_cli(["--duration", str(40 * DT), "--record", str(rec)], capsys)
    assert rc == 0
    fig = plot_tracking(str(rec), str(tmp_path / "p.png"))
    img = iio.imread(tmp_path / "p.png")
    w, h = (fig.get_size_inches() * 90).round().astype(int)
    assert img.shape[:2] == (h, w)
    assert len(fig.axes) == 8  # 7 DOFs of one leg + the RMSE bars
    assert [ax.get_title() for ax in fig.axes[:7]] == [f"joint_LF{n}" for n in
                                                      ("Coxa", "Coxa_roll", "Coxa_yaw", "Femur", "Femur_roll",
                                                       "Tibia", "Tarsus1")]
    assert fig.axes[0].get_xlabel() == "time (s)" and fig.axes[0].get_ylabel() == "angle (deg)"
    for ax in fig.axes[:7]:  # every panel: 2 worlds x (replayed, target) lines with data
        assert len(ax.lines) == 4 and all(len(ln.get_xdata()) == 41 for ln in ax.lines)
    # inside the first panel's box, drawn pixels in more than one color (the line colors)
    x0, y0, x1, y1 = (fig.axes[0].get_window_extent().extents * 90 / fig.dpi).round().astype(int)
    box = img[h - y1:h - y0, x0:x1, :3].reshape(-1, 3)
    colored = box[(np.abs(box.astype(int) - box.mean(1, keepdims=True)) > 30).any(1)]
    assert len(colored) > 100 and len(np.unique(colored // 64, axis=0)) >= 2


def test_plot_rejects_what_is_not_a_recording(tmp_path):
    from flycuda.replay import plot_tracking

    np.savez(tmp_path / "x.npz", a=np.zeros(3))
    with pytest.raises(ValueError, match="is not a flycuda recording"):
        plot_tracking(str(tmp_path / "x.npz"))


def test_out_folder_holds_everything(tmp_path, capsys):
    out_dir = tmp_path / "demo"
    rc, out, _ = _run_cli(["--duration", str(20 * DT), "--out", str(out_dir), "--render-size", "16x12"], capsys)
    assert rc == 0 and f"output folder  {out_dir}" in out
    names = sorted(os.listdir(out_dir))
    assert names == ["joint_angles.png", "last_frame.png", "recording.zarr", "replay.mp4"]
    assert "images/s" in out and "ms per frame, afterwards from the store" in out
    from flycuda.recording import Recording

    rec = Recording.open(out_dir / "recording.zarr")  # what the video was rendered from
    assert rec.complete and {"angles", "targets", "qpos", "body_pos"} <= set(rec.names)
    assert rec.columns("body_pos") == ["Thorax:x", "Thorax:y", "Thorax:z"] and rec.info["model"] == "hexapod"


def test_cli_subprocess_unknown_camera_exit_code():
    proc = subprocess.run([sys.executable, "-m", "flycuda", "replay", "--device", "cpu", "--worlds", "1",
                           "--duration", "0.001", "--camera", "nope", "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("flycuda: error: unknown camera 'nope'")


# --- every output a CLI user asks for is written, or refused before anything runs ------------

def test_plot_alone_records_in_memory(tmp_path, capsys):
    """--plot without --record: the angles are kept in memory (a small run) and plotted."""
    png = tmp_path / "p.png"
    rc, out, err = _run_cli(["--duration", str(30 * DT), "--plot", str(png)], capsys)
    assert rc == 0, err
    assert png.stat().st_size > 10_000 and f"wrote          {png}" in out


def test_plot_of_a_large_run_without_a_store_names_the_option(tmp_path, capsys, monkeypatch):
    from flycuda.replay import job

    monkeypatch.setattr(job, "MEMORY_LIMIT", 1000)
    rc, out, err = _run_cli(["--duration", str(30 * DT), "--plot", str(tmp_path / "p.png")], capsys)
    assert rc == 2 and "add --record out.zarr" in err and not out
    assert not (tmp_path / "p.png").exists()


def test_any_store_can_be_rendered_afterwards(tmp_path, capsys):
    """`flycuda replay --record r.zarr` then `flycuda render r.zarr`: qpos is recorded at the
    video rate whenever a store is written (--no-qpos leaves it out)."""
    from flycuda.cli import main
    from flycuda.recording import Recording

    store = tmp_path / "r.zarr"
    rc, _, err = _run_cli(["--duration", str(150 * DT), "--record", str(store)], capsys)
    assert rc == 0, err
    assert Recording.open(str(store)).every("qpos") == round(1 / (30 * DT))
    assert main(["render", str(store), "--out", str(tmp_path / "v.mp4"), "--no-progress", "--size", "32x24"]) == 0
    assert (tmp_path / "v.mp4").stat().st_size > 0
    rc, _, err = _run_cli(["--duration", str(20 * DT), "--record", str(tmp_path / "n.zarr"), "--no-qpos"], capsys)
    assert rc == 0, err
    assert "qpos" not in Recording.open(str(tmp_path / "n.zarr")).names


@pytest.mark.parametrize("args,words", [
    (["--observe", "qpos@30hz"], "--observe qpos@30hz records into a store: add --record out.zarr"),
    (["--observe", "qvel", "--record", "{tmp}/r.npz"], "needs a .zarr store (--record out.zarr)"),
    (["--model", "{tmp}/missing.xml"], "model file not found"),
    (["--record", "{tmp}/r.txt"], "--record must end in .zarr"),
    (["--vision"], "--vision needs a fly with eyes: --model neuromechfly"),
    (["--plot", "{tmp}/nofolder/p.png"], "output directory does not exist"),
])
def test_cli_errors_speak_in_options(tmp_path, capsys, args, words):
    """Each error a CLI user can reach: exit 2, one line, in the command line's words (no
    Python argument such as record= or steps_per_graph), before anything is written."""
    rc, out, err = _run_cli([a.replace("{tmp}", str(tmp_path)) for a in args] + ["--duration", str(10 * DT)], capsys)
    assert rc == 2 and not out, (out, err)
    assert err.count("\n") == 1 and err.startswith("flycuda: error: ") and words in err, err
    assert not re.search(r"\b[a-z]+_[a-z_]+\b|\b(record|worlds|duration)=", err.replace("flycuda: error: ", "")), err
    assert not any(tmp_path.iterdir())


def test_replay_errors_are_translated_into_options():
    from flycuda.cli.replay import in_options

    assert in_options("vision every 20 steps is not a multiple of steps_per_graph=4") == \
        "--vision every 20 steps is not a multiple of --steps-per-graph 4"
    assert in_options("worlds must be a positive integer, got 0") == "--worlds must be a positive integer, got 0"
    assert in_options("sim has 3 worlds but worlds=4") == "sim has 3 worlds but --worlds 4"


def test_the_demos_store_opens_in_xarray(tmp_path, capsys):
    """The store opens where the README says: xr.open_zarr gives one Dataset, each array with
    its own dimensions, times and column names as coordinates, units in the attributes; the
    thorax's x is selected by name over time."""
    xr = pytest.importorskip("xarray")
    rc, _, err = _run_cli(["--duration", str(100 * DT), "--out", str(tmp_path / "demo")], capsys)
    assert rc == 0, err
    ds = xr.open_zarr(str(tmp_path / "demo" / "recording.zarr"))
    x = ds["body_pos"].sel(body_pos_column="Thorax:x")
    assert x.dims == ("world", "body_pos_time") and x.sizes["body_pos_time"] == 101
    assert ds["body_pos_time"].values[-1] == pytest.approx(100 * DT) and ds["body_pos_time"].attrs["units"] == "s"
    assert ds["angles"].attrs["units"] == "rad" and ds.attrs["flycuda"]["length_unit"] == "m"
    assert ds.attrs["flycuda"]["complete"] is True  # the consolidated metadata is the final one
    assert set(ds.data_vars) >= {"angles", "targets", "qpos", "body_pos"}
    assert float(x.isel(world=0, body_pos_time=-1)) != float(x.isel(world=0, body_pos_time=0))  # it moved


def test_video_of_odd_sized_frames(tmp_path):
    """A mosaic of odd height (e.g. 2 worlds with their eyes: 211 rows) still makes an mp4:
    H.264's yuv420p needs even sizes, so frames are padded by a row."""
    import imageio.v3 as iio
    import torch

    from flycuda.render.frames import FrameWriter

    w = FrameWriter(video=str(tmp_path / "odd.mp4"), fps=10)
    for k in range(3):
        w.add(torch.full((211, 319, 3), 40 * k, dtype=torch.uint8))
    assert w.close() == [str(tmp_path / "odd.mp4")]
    frames = iio.imread(str(tmp_path / "odd.mp4"))
    assert frames.shape[0] == 3 and frames.shape[1:3] == (212, 320)


@pytest.mark.parametrize("args,module", [(["--render", "{tmp}/v.mp4"], "imageio"), (["--frames", "{tmp}/f.png"], "imageio"),
                                         (["--plot", "{tmp}/p.png"], "matplotlib")])
def test_a_missing_extra_is_named_before_the_run(tmp_path, capsys, monkeypatch, args, module):
    """Without the `video` extra, an output that needs it fails before anything runs and says
    what to install."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    rc, out, err = _run_cli([a.replace("{tmp}", str(tmp_path)) for a in args] + ["--duration", str(10 * DT)], capsys)
    assert rc == 2 and not out, (out, err)
    assert f'needs {module}, which is not installed: pip install "flycuda[video]"' in err, err
    assert not any(tmp_path.iterdir())


def test_a_bare_folder_of_the_same_name_is_not_the_package(tmp_path, monkeypatch):
    """flycuda.errors.installed: a folder named like a package on sys.path (the tests' own
    tests/flygym once stood in for a missing FlyGym) is not an installed package."""
    from flycuda.errors import installed

    (tmp_path / "flycuda_absent_pkg").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert importlib.util.find_spec("flycuda_absent_pkg") is not None  # what the old check took for installed
    assert not installed("flycuda_absent_pkg") and not installed("no_such_module_at_all")
    assert installed("numpy") and installed("json")
