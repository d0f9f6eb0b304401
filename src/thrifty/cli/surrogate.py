# SPDX-License-Identifier: MIT
"""`thrifty md train-surrogate` and `thrifty md predict`: the nanoconfinement surrogate (md.surrogate).
torch is imported inside the commands; a request is checked (md.params) before a model is loaded."""

from pathlib import Path
from typing import Annotated

import typer

from thrifty.cli.common import JsonOpt, print_json, renamed, stdout
from thrifty.errors import ThriftyError

IONS = ("cation", "anion")


def train_surrogate(
        runs: Annotated[Path, typer.Option(help="Folder of completed runs (each a folder with profiles.csv "
                                                "and params.json)")],
        out: Annotated[Path, typer.Option(help="Model folder (surrogate.pt is written there atomically)")],
        members: Annotated[int, typer.Option(help="Networks in the ensemble")] = 5,
        max_epochs: Annotated[int, typer.Option(help="Epochs at most per network (early stopping)")] = 2000,
        folds: Annotated[int, typer.Option(help="Cross-validation folds: the held-out scores and the band's "
                                                "calibration")] = 5,
        box_nm: Annotated[float | None, typer.Option(
            help="Wall side of the runs' box, nm (default: the one their summary.json records, else the model's, "
                 "15 nm up to 0.5 M, 10 nm above)")] = None,
        seed: Annotated[int, typer.Option(help="Random seed (0 or more)", min=0)] = 0,
        threads: Annotated[int | None, typer.Option(
            help="CPU threads torch trains with (default: this machine's cores; give 1 on a shared one)")] = None,
        json_out: JsonOpt = False) -> None:
    """Train the surrogate ensemble on completed nanoconfinement runs, calibrate its 90% band by
    cross-validation and save it; print its held-out (cross-validated) scores beside the flat
    profile, the nearest run and a Gaussian process."""
    from thrifty.io import check_writable_dir
    from thrifty.md.runs import read_runs, runs_box_nm
    from thrifty.md.surrogate.calibration import fit_surrogate  # torch: a missing extra is named at once
    from thrifty.md.surrogate.ensemble import SurrogateConfig
    from thrifty.md.torch_physics.threads import available_cores, use_threads
    if threads is not None and threads < 1:
        raise ThriftyError(f"--threads must be at least 1, got {threads}")
    for name, value, least, why in (("--members", members, 2, " (the spread needs two)"),
                                    ("--max-epochs", max_epochs, 1, ""), ("--folds", folds, 2, "")):
        if value < least:
            raise ThriftyError(f"{name} must be {least} or more{why}, got {value}")
    if box_nm is not None and not box_nm > 0:
        raise ThriftyError(f"--box-nm must be a positive number, got {box_nm:g}")
    check_writable_dir(out, "--out")
    completed = read_runs(runs)
    box_nm = runs_box_nm(completed, box_nm)
    config = SurrogateConfig(members=members, max_epochs=max_epochs, box_nm=box_nm, seed=seed)
    with use_threads(threads or available_cores()):  # torch's default competes with every process for the cores
        ensemble, cv = fit_surrogate(completed, config, folds)
    path = ensemble.save(out)
    scores = cv.scores()
    summary = {"runs": len(completed), "members": members, "best_epochs": ensemble.epochs, "model": str(path),
               "band_scale": ensemble.band_scale, "held_out": {"folds": folds, "scores": scores}}
    if json_out:
        print_json(summary)
        return
    stdout.print(f"trained {members} networks on {len(completed)} runs; saved {path}")
    stdout.print(f"held out ({folds}-fold cross-validation, every run predicted by models not trained on it):")
    stdout.print(f"{'':18}{'RMS cation':>11}{'RMS anion':>11}{'within 2 bars':>15}{'chi2/bin':>10}{'|net charge|':>14}")
    for name, row in scores.items():
        stdout.print(f"{name:18}{row['rms_molar']['cation']:>9.3f} M{row['rms_molar']['anion']:>9.3f} M"
                     f"{row['within_2_bars']:>15.1%}{row['chi2_per_bin']:>10.2f}"
                     f"{row['max_abs_net_charge_molar_nm']:>10.3f} M nm")
    stdout.print(f"(an exact predictor: about 95% within 2 bars, chi2/bin about 1; the 90% band is mean +- "
                 f"{ensemble.band_scale:.2f} sqrt(sd^2 + MD error^2))")


def predict(h: Annotated[float, typer.Option("--h", help="Wall separation, nm")],
            zp: Annotated[int, typer.Option("--zp", help="Cation valency, 1..3")],
            c: Annotated[float, typer.Option("--c", help="Salt concentration, molar")],
            d_plus: Annotated[float, typer.Option("--d-plus", help="Cation diameter, nm")],
            d_minus: Annotated[float, typer.Option("--d-minus", help="Anion diameter, nm")],
            surrogate: Annotated[Path, typer.Option(help="The surrogate's folder, from train-surrogate")],
            zn: Annotated[int, typer.Option("--zn", help="Anion valency (the model has -1)")] = -1,
            plot: Annotated[Path | None, typer.Option(help="PNG of both profiles with their bands")] = None,
            old_model: Annotated[str | None, renamed("--model", "--surrogate", "the folder of train-surrogate")] = None,
            json_out: JsonOpt = False) -> None:
    """Predict the cation and anion density profiles (molar) at one point, with the 90% band an MD run
    there would fall in (calibrated on runs the networks did not train on)."""
    from thrifty.md.params import PARAMETERS, check_point
    point = check_point(dict(zip(PARAMETERS, (h, zp, zn, c, d_plus, d_minus), strict=True)))
    if plot is not None:
        from thrifty.io import check_png_path
        check_png_path(plot, "--plot")
    from thrifty.md.profile_grid import features, to_z_nm
    from thrifty.md.surrogate import Ensemble
    ensemble = Ensemble.load(surrogate)
    distance = ensemble.domain.check(point)
    prediction = ensemble.predict(point)
    mean, (low, high) = prediction.mean[0], (b[0] for b in prediction.band())
    z_nm = to_z_nm(h, ensemble.config.bins)
    result = {"point": dict(zip(PARAMETERS, point.tolist(), strict=True)), "z_nm": z_nm.tolist(),
              "nearest_training_distance": distance, "band": "90% (calibrated)"}
    for i, (ion, d) in enumerate(zip(IONS, (d_plus, d_minus), strict=True)):
        at = {k: features(v[i], h, d) for k, v in (("mean", mean), ("low", low), ("high", high))}
        result[ion] = {"mean_molar": mean[i].tolist(), "low_molar": low[i].tolist(), "high_molar": high[i].tolist(),
                       **{name: {k: float(at[k][name]) for k in ("mean", "low", "high")}
                          for name in ("contact", "peak", "mid")}}
    if plot is not None:
        _plot(plot, z_nm, mean, low, high, point)
        result["plot"] = str(plot)
    if json_out:
        print_json(result)
        return
    stdout.print(f"{'molar':8}" + "".join(f"{name:>22}" for name in ("contact", "peak", "mid-plane")))
    for ion in IONS:
        stdout.print(f"{ion:8}" + "".join(
            f"{result[ion][name]['mean']:>8.3f} ({result[ion][name]['low']:.3f}-{result[ion][name]['high']:.3f})"
            for name in ("contact", "peak", "mid")))
    stdout.print(f"(mean of {len(ensemble.networks)} networks and the 90% band an MD run falls in)")
    if plot is not None:
        stdout.print(f"plot: {plot}")


def _plot(path: Path, z_nm, mean, low, high, point) -> None:
    from thrifty.io import write_png

    def draw(fig, ax) -> None:
        for i, (ion, colour) in enumerate(zip(IONS, ("tab:red", "tab:blue"), strict=True)):
            ax.plot(z_nm, mean[i], color=colour, label=f"{ion} (ensemble mean)")
            ax.fill_between(z_nm, low[i], high[i], color=colour, alpha=0.25, label=f"{ion} 90% band")
        ax.set_xlabel("z from the mid-plane (nm)")
        ax.set_ylabel("density (molar)")
        ax.legend()

    h, zp, zn, c, dp, dm = point
    write_png(path, draw, title=f"h {h:g} nm, z+ {zp:g}, z- {zn:g}, c {c:g} M, d+ {dp:g} nm, d- {dm:g} nm")
