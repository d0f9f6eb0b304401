"""`thrifty md train-surrogate` and `thrifty md predict`: the nanoconfinement surrogate (md.surrogate).
torch is imported inside the commands; a request is checked (md.params) before a model is loaded."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from thrifty.cli.common import JsonOpt, print_json, stdout
from thrifty.errors import ThriftyError

IONS = ("cation", "anion")


def train_surrogate(
        runs: Annotated[Path, typer.Option(help="Folder of completed runs (each a folder with profiles.csv "
                                                "and params.json)")],
        out: Annotated[Path, typer.Option(help="Model folder (surrogate.pt is written there atomically)")],
        members: Annotated[int, typer.Option(help="Networks in the ensemble")] = 5,
        max_epochs: Annotated[int, typer.Option(help="Epochs at most per network (early stopping)")] = 2000,
        seed: Annotated[int, typer.Option()] = 0,
        json_out: JsonOpt = False) -> None:
    """Train the surrogate ensemble on completed nanoconfinement runs and save it."""
    from thrifty.io import check_writable_dir
    from thrifty.md.runs import read_runs
    from thrifty.md.surrogate import SurrogateConfig, train_ensemble
    if members < 2 or max_epochs < 1:
        raise ThriftyError("--members must be 2 or more (the spread needs two) and --max-epochs positive")
    check_writable_dir(out, "--out")
    completed = read_runs(runs)
    ensemble = train_ensemble(completed, SurrogateConfig(members=members, max_epochs=max_epochs, seed=seed))
    path = ensemble.save(out)
    summary = {"runs": len(completed), "members": members, "best_epochs": ensemble.epochs, "model": str(path)}
    if json_out:
        print_json(summary)
    else:
        stdout.print(f"trained {members} networks on {len(completed)} runs (best epochs "
                     f"{', '.join(map(str, ensemble.epochs))}); saved {path}")


def _check_in_range(point, ensemble) -> None:
    from thrifty.md.params import PARAMETERS
    low, high = ensemble.training_range()
    for name, value, lo, hi in zip(PARAMETERS, point, low, high):
        if not lo - 1e-9 <= value <= hi + 1e-9:
            raise ThriftyError(f"{name} = {value:g} is outside the range the surrogate was trained on "
                               f"({lo:g}-{hi:g}); it does not extrapolate")


def predict(h: Annotated[float, typer.Option("--h", help="Wall separation, nm")],
            zp: Annotated[int, typer.Option("--zp", help="Cation valency, 1..3")],
            c: Annotated[float, typer.Option("--c", help="Salt concentration, molar")],
            d_plus: Annotated[float, typer.Option("--d-plus", help="Cation diameter, nm")],
            d_minus: Annotated[float, typer.Option("--d-minus", help="Anion diameter, nm")],
            model: Annotated[Path, typer.Option(help="Model folder from train-surrogate")],
            zn: Annotated[int, typer.Option("--zn", help="Anion valency (the model has -1)")] = -1,
            plot: Annotated[Optional[Path], typer.Option(help="PNG of both profiles with their bands")] = None,
            json_out: JsonOpt = False) -> None:
    """Predict the cation and anion density profiles (molar) at one point, with the ensemble's interval
    (mean +- 2 sd of the networks)."""
    from thrifty.md.params import PARAMETERS, check_point
    point = check_point(dict(zip(PARAMETERS, (h, zp, zn, c, d_plus, d_minus))))
    if plot is not None:
        from thrifty.io import check_writable_file
        check_writable_file(plot, "--plot")
    from thrifty.md.profile_grid import features, to_z_nm
    from thrifty.md.surrogate import Ensemble
    ensemble = Ensemble.load(model)
    _check_in_range(point, ensemble)
    members = ensemble.predict(point).members[:, 0]  # (members, 2, bins)
    z_nm = to_z_nm(h, ensemble.config.bins)
    result = {"point": dict(zip(PARAMETERS, point.tolist())), "z_nm": z_nm.tolist()}
    for i, (ion, d) in enumerate(zip(IONS, (d_plus, d_minus))):
        per_member = features(members[:, i], h, d)
        result[ion] = {"mean_molar": members[:, i].mean(0).tolist(), "sd_molar": members[:, i].std(0).tolist(),
                       **{name: {"mean": float(v.mean()), "low": float(v.mean() - 2 * v.std()),
                                 "high": float(v.mean() + 2 * v.std())} for name, v in per_member.items()}}
    if plot is not None:
        _plot(plot, z_nm, members, point)
        result["plot"] = str(plot)
    if json_out:
        print_json(result)
        return
    stdout.print(f"{'molar':8}" + "".join(f"{name:>22}" for name in ("contact", "peak", "mid-plane")))
    for ion in IONS:
        stdout.print(f"{ion:8}" + "".join(
            f"{result[ion][name]['mean']:>8.3f} ({result[ion][name]['low']:.3f}-{result[ion][name]['high']:.3f})"
            for name in ("contact", "peak", "mid")))
    stdout.print(f"(mean of {len(members)} networks and mean +- 2 sd)")
    if plot is not None:
        stdout.print(f"plot: {plot}")


def _plot(path: Path, z_nm, members, point) -> None:
    from thrifty.io import write_png

    def draw(fig, ax) -> None:
        for i, (ion, colour) in enumerate(zip(IONS, ("tab:red", "tab:blue"))):
            mean, sd = members[:, i].mean(0), members[:, i].std(0)
            ax.plot(z_nm, mean, color=colour, label=f"{ion} (mean of {len(members)} networks)")
            ax.fill_between(z_nm, mean - 2 * sd, mean + 2 * sd, color=colour, alpha=0.25, label=f"{ion} +-2 sd")
        ax.set_xlabel("z from the mid-plane (nm)")
        ax.set_ylabel("density (molar)")
        ax.legend()

    h, zp, zn, c, dp, dm = point
    write_png(path, draw, title=f"h {h:g} nm, z+ {zp:g}, z- {zn:g}, c {c:g} M, d+ {dp:g} nm, d- {dm:g} nm")
