# SPDX-License-Identifier: MIT
"""thermo.csv: physical values, and a resume that continues it without duplicates or gaps."""

import csv

import pytest
from md_jobs import OpenMMJob, run_openmm

from thrifty.errors import ThriftyError
from thrifty.md.engines.openmm_checkpoint import unpack
from thrifty.md.thermo import COLUMNS, ThermoLog

HEADER = ",".join(COLUMNS) + "\n"


def _row(step: int) -> str:
    return f"{step},{step * 0.005:.6f},-1.000000,2.000000,3.000000\n"


def test_lj_temperature_follows_the_thermostat_and_the_summary_holds_the_last_row(tmp_path, run_job):
    summary = run_job(OpenMMJob(system="lj", steps=800, chunk=50))
    with (tmp_path / "out" / "thermo.csv").open() as handle:
        rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(handle)]
    assert [r["step"] for r in rows] == list(range(0, 801, 50))
    assert rows[-1]["time_ps"] == pytest.approx(800 * 0.005)
    late = [r["temperature_k"] for r in rows[len(rows) // 2:]]
    assert sum(late) / len(late) == pytest.approx(120.0, rel=0.15)  # Langevin bath at 120 K, 216 atoms
    assert all(r["potential_energy_kj_mol"] < 0 for r in rows[1:])  # a bound liquid
    for key in ("potential_energy_kj_mol", "kinetic_energy_kj_mol", "temperature_k"):
        assert summary[key] == pytest.approx(rows[-1][key], abs=1e-5)


def test_each_checkpoint_finds_its_rows_already_in_the_file(tmp_path, flaky):
    """Rows reach the file before the checkpoint that covers them (read here through another handle:
    that proves the flush; the fsync after it, against the machine's loss, no test here can see)."""
    seen: list[str] = []

    class Watching(flaky):
        def save(self, payload: bytes, *, began_s: float | None = None):
            step = unpack(payload, self.directory).step
            seen.append((tmp_path / "out" / "thermo.csv").read_text().splitlines()[-1].split(",")[0])
            assert seen[-1] == str(step)
            return super().save(payload, began_s=began_s)

    run_openmm(OpenMMJob(system="lj", steps=150, chunk=50), tmp_path / "out", Watching(tmp_path / "ck", 1, None))
    assert seen == ["50", "100", "150"]


def test_resume_drops_rows_past_the_checkpoint_and_a_half_written_line(tmp_path):
    path = tmp_path / "thermo.csv"
    path.write_text(HEADER + "".join(_row(s) for s in (0, 50, 100, 150)) + "10")  # "10..." cut short
    with ThermoLog(path, resume_step=100) as log:
        log.append({"step": 150, "time_ps": 0.75, "potential_energy_kj_mol": -1.0, "kinetic_energy_kj_mol": 2.0,
                    "temperature_k": 3.0})
    assert path.read_text() == HEADER + "".join(_row(s) for s in (0, 50, 100, 150))


@pytest.mark.parametrize("content", [None, HEADER + _row(0) + _row(50)], ids=["missing", "short"])
def test_resume_without_the_checkpoint_s_rows_is_refused(tmp_path, content):
    path = tmp_path / "thermo.csv"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ThriftyError, match="lacks the rows up to the checkpoint's step 100"):
        ThermoLog(path, resume_step=100)
    assert (path.read_text() if path.exists() else None) == content  # left as it was


def test_a_fresh_run_starts_a_new_file(tmp_path):
    path = tmp_path / "thermo.csv"
    path.write_text(HEADER + _row(0) + _row(50))
    with ThermoLog(path, resume_step=None):
        pass
    assert path.read_text() == HEADER
