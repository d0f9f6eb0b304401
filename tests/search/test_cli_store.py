# SPDX-License-Identifier: MIT
"""`thrifty search --db/--resume/--plot` and the live view, run in-process. Each test names the
mutation it caught."""

import io
import json

import pytest
from rich.console import Console
from search_support import NOISE_SCALE, TARGET

from thrifty.search.loop import Search
from thrifty.store import Store


def args(trace, *more):
    return ["search", "--trace", trace, "--target-samples", TARGET, "--noise-scale", NOISE_SCALE, *more]


def test_an_interrupted_search_resumes_from_its_database_to_the_same_json(run_cli, trace, tmp_path, monkeypatch):
    # mutation caught: --resume ignored (a new search from scratch: two searches, windows stored twice)
    db = tmp_path / "t.db"
    code, whole, _ = run_cli(*args(trace, "--seed", 1, "--json"))
    assert code == 0
    tell, told = Search._tell, []

    def interrupted(self):
        tell(self)
        told.append(1)
        if len(told) == 4:
            raise KeyboardInterrupt
    monkeypatch.setattr(Search, "_tell", interrupted)
    code, _, err = run_cli(*args(trace, "--seed", 1, "--db", db, "--json"))
    assert code == 130 and err.strip() == "error: interrupted"  # one line (mutation caught: a silent 130)
    monkeypatch.setattr(Search, "_tell", tell)
    code, resumed, _ = run_cli(*args(trace, "--seed", 1, "--db", db, "--resume", "--json"))
    assert code == 0 and json.loads(resumed) == json.loads(whole)
    with Store(db) as store:
        assert store.count("searches") == 1
        assert store.count("search_probes") == len(json.loads(whole)["probes"])


def test_a_resume_of_a_finished_search_says_it_is_read_from_the_store(run_cli, trace, tmp_path):
    # mutation caught: the stored result shown as if the search had just run (nothing said, from_store false)
    db = tmp_path / "t.db"
    code, first, _ = run_cli(*args(trace, "--seeds", 2, "--db", db, "--json"))
    assert code == 0 and json.loads(first)["seeds_from_store"] == 0
    code, again, _ = run_cli(*args(trace, "--seeds", 2, "--db", db, "--resume", "--json"))
    assert code == 0 and json.loads(again)["seeds_from_store"] == 2
    assert [r["from_store"] for r in json.loads(again)["per_seed"]] == [True, True]
    code, out, _ = run_cli(*args(trace, "--seed", 0, "--db", db, "--resume"))
    assert code == 0 and "this search had finished: read from --db as stored, nothing ran" in " ".join(out.split())
    code, out, _ = run_cli(*args(trace, "--seeds", 3, "--db", db, "--resume"))  # seed 2 never ran: it runs now
    assert code == 0 and "2 of 3 seeds' searches had finished" in " ".join(out.split())


@pytest.mark.parametrize("extra, message", [
    ((), "--resume needs --db"),
    (("--db", "{tmp}/empty.db"), "no search with these options is stored"),
])
def test_a_resume_with_nothing_to_resume_is_one_line(run_cli, trace, tmp_path, extra, message):
    code, _, err = run_cli(*args(trace, "--resume", *(e.format(tmp=tmp_path) for e in extra)))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "empty.db").exists()


def test_plot_writes_a_png_and_a_bad_path_fails_before_any_work(run_cli, trace, tmp_path):
    # mutation caught: the writability check after the search (the database gets written first)
    png = tmp_path / "out" / "path.png"
    code, _, _ = run_cli(*args(trace, "--plot", png, "--json"))
    assert code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run_cli(*args(trace, "--plot", png))
    assert code == 0 and f"plot{png}(seed0)" in "".join(out.split())  # the report says where it went (rich folds long paths)
    (tmp_path / "afile").write_text("x")
    code, _, err = run_cli(*args(trace, "--db", tmp_path / "t.db", "--plot", tmp_path / "afile" / "p.png"))
    assert code == 2 and "cannot write" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "t.db").exists()


def test_on_a_terminal_a_live_panel_shows_windows_prediction_and_exploration(run_cli, trace, monkeypatch):
    # mutations caught: the view not registered as a listener; the prediction not passed to events
    screen = io.StringIO()
    monkeypatch.setattr("thrifty.cli.search.stdout", Console(file=screen, force_terminal=True, width=200))
    code, _, _ = run_cli(*args(trace, "--objective", "time"))
    shown = screen.getvalue()
    assert code == 0 and "exploration $" in shown and "small 1x1 B=64" in shown
    assert "predicted best: - (profiling)" in shown and "time left" in shown and "(90%:" in shown
    assert "search ended on" in shown  # the report still follows the panel
