"""What a user sees: every requested output is written (and decodes), the plot has
content, a camera the model lacks is an error, and the demo's output folder."""

import os
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
