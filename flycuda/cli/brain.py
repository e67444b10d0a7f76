"""``flycuda brain run``: an activation and silencing experiment on the whole-brain model
(:func:`flycuda.brain.run`), its spikes written as model.py writes them (a parquet table: t, trial,
flywire_id) and its mean rates printed."""

from __future__ import annotations

import os

from ..brain import Connectome, synthetic
from ..brain import run as run_experiment
from ..errors import FlycudaError
from .args import positive_float

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """The ``brain`` subcommand's options."""
    b = sub.add_parser("brain", help="the FlyWire whole-brain spiking model (Shiu et al. 2024), many trials at once",
                       description="Runs an activation/silencing experiment of philshiu/Drosophila_brain_model's "
                                   "model: the excited neurons get Poisson input, the silenced ones' synapses "
                                   "carry nothing; the trials run as brains of one batch.")
    b.add_argument("action", choices=["run"], help="run an experiment")
    b.add_argument("--connectome", required=True, metavar="DIR|synthetic:N",
                   help="the folder of Completeness_783.csv and Connectivity_783.parquet (FlyWire v783, from "
                        "https://github.com/philshiu/Drosophila_brain_model), or synthetic:N for a generated one")
    b.add_argument("--excite", default="", metavar="IDS", help="FlyWire root ids to excite, comma-separated")
    b.add_argument("--silence", default="", metavar="IDS", help="FlyWire root ids to silence, comma-separated")
    b.add_argument("--rate", type=positive_float, default=None, help="Poisson rate (Hz; default 150, model.py's)")
    b.add_argument("--trials", type=int, default=30, help="trials (default 30)")
    b.add_argument("--duration", type=positive_float, default=1.0, help="seconds per trial (default 1)")
    b.add_argument("--batch", type=int, default=None, help="brains stepped at once (default: every trial)")
    b.add_argument("--seed", type=int, default=0, help="trial k's stream is seed + k")
    b.add_argument("--out", default=None, metavar="SPIKES.parquet", help="the spikes, as model.py's result file")
    b.add_argument("--device", choices=["cuda", "cpu"], default=None)
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.set_defaults(run=run)


def _ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise FlycudaError(f"--excite/--silence: expected comma-separated FlyWire root ids, got {text!r}") from None


def _connectome(spec: str) -> Connectome:
    if spec.startswith("synthetic:"):
        try:
            return synthetic(int(spec.split(":", 1)[1]))
        except ValueError:
            raise FlycudaError(f"--connectome: synthetic:N needs a neuron count, got {spec!r}") from None
    return Connectome.load(spec)


def run(args) -> int:
    """``flycuda brain run``: the experiment, its spikes written, its rates printed."""
    import torch  # noqa: PLC0415

    if args.out and not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        raise FlycudaError(f"output directory does not exist: {os.path.dirname(os.path.abspath(args.out))}")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    c = _connectome(args.connectome)
    exp = run_experiment(c, _ids(args.excite), _ids(args.silence), rate=args.rate, trials=args.trials,
                         duration=args.duration, batch=args.batch, device=device, seed=args.seed,
                         progress=not args.no_progress)
    rates = exp.mean_rates()
    top = sorted(rates.items(), key=lambda kv: -kv[1])[:10]
    kind = "synthetic " if c.synthetic else ""
    print(f"flycuda brain: {args.trials} trials x {args.duration:g} s on a {kind}connectome of {c.N:,} neurons and "
          f"{c.E:,} connections ({device}): {len(exp.t):,} spikes, {len(rates):,} neurons fired")
    for rid, hz in top:
        print(f"  {rid}  {hz:8.1f} Hz")
    if args.out:
        exp.to_dataframe().to_parquet(args.out)
        print(f"  wrote          {args.out}")
    return 0
