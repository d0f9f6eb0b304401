# SPDX-License-Identifier: MIT
"""docs/results.md is rendered from benchmarks/results/*.json, never typed; every benchmark is
registered in benchmarks/run_all.py with its tags; results record their provenance."""

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield (importlib.import_module("run_all"), importlib.import_module("render_results"),
               importlib.import_module("common"))
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_docs_results_md_is_what_the_json_renders_to(bench):
    """Editing a result's JSON without rendering again, or typing into docs/results.md, fails here:
    run `python benchmarks/render_results.py`."""
    _, render_results, _ = bench
    assert (ROOT / "docs" / "results.md").read_text() == render_results.render(), \
        "docs/results.md is stale: run python benchmarks/render_results.py"


def test_every_marked_table_in_the_docs_is_what_its_json_renders_to(bench):
    """A results table quoted in a prose page (search.md, gpu-projection.md, md-surrogate.md) is
    rendered between `<!-- table: NAME -->` markers; typing into one, or a JSON re-run without
    rendering, fails here."""
    _, render_results, _ = bench
    docs = render_results.rendered_docs()
    stale = [p.name for p, text in docs.items() if p.read_text() != text]
    assert stale == [], f"{stale} stale: run python benchmarks/render_results.py"
    assert {"search.md", "gpu-projection.md", "md-surrogate.md"} <= {p.name for p in docs}


def test_every_doc_table_is_quoted_and_names_the_json_it_reads(bench):
    _, render_results, _ = bench
    sys.path.insert(0, str(BENCHMARKS))
    doc_tables = importlib.import_module("doc_tables")
    quoted = " ".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    for name, table in doc_tables.TABLES.items():
        assert f"<!-- table: {name} -->" in quoted, f"{name} is rendered by no doc: remove it or quote it"
        data = json.loads((BENCHMARKS / "results" / f"{table.result}.json").read_text())
        assert f"`{table.result}.json`" in table.render(data)[0]


def test_a_marked_table_follows_its_json_and_an_unknown_name_is_refused(bench, tmp_path):
    _, render_results, _ = bench
    shutil.copy(BENCHMARKS / "results" / "search_real.json", tmp_path)
    doc = "text\n<!-- table: search_real_summary -->\ntyped by hand\n<!-- /table -->\nmore\n"
    before = render_results.fill_tables(doc, tmp_path)
    assert "typed by hand" not in before and before.startswith("text\n<!-- table: search_real_summary -->\n")
    assert before.endswith("<!-- /table -->\nmore\n") and render_results.fill_tables(before, tmp_path) == before
    data = json.loads((tmp_path / "search_real.json").read_text())
    data["results"]["held out 101 | 3 h, time"]["after"]["worst"] = 1.987  # above every stored worst seed
    data["results"]["held out 101 | 3 h, time"]["after"]["settle_gap_median"] = 0.777
    (tmp_path / "search_real.json").write_text(json.dumps(data))
    after = render_results.fill_tables(before, tmp_path)
    row = next(line for line in after.splitlines() if line.startswith("| held out, 3 h, time |"))
    assert after != before and "| +198.7% | +0.0% to +77.7% |" in row  # the worst seed and where it ended
    with pytest.raises(KeyError, match="no such table"):
        render_results.fill_tables("<!-- table: typo -->\n<!-- /table -->\n", tmp_path)


def test_an_edited_result_changes_the_rendering(bench, tmp_path):
    _, render_results, _ = bench
    shutil.copy(BENCHMARKS / "results" / "noise_overhead.json", tmp_path)
    before = render_results.render(tmp_path)
    data = json.loads((tmp_path / "noise_overhead.json").read_text())
    data["max_overhead_percent"] = 123.456
    (tmp_path / "noise_overhead.json").write_text(json.dumps(data))
    after = render_results.render(tmp_path)
    assert after != before and "| `max_overhead_percent` | 123.5 |" in after


def test_every_benchmark_script_is_registered(bench):
    run_all, _, _ = bench
    scripts = {p.name for p in BENCHMARKS.glob("bench_*.py")}
    registered = {b.script for b in run_all.REGISTRY}
    assert scripts - registered == set(), "add it to REGISTRY in benchmarks/run_all.py"
    assert registered - scripts == set()
    for b in run_all.REGISTRY:
        assert b.tags and b.tags <= run_all.TAGS, b.command
        assert b.measures.strip(), b.command


def test_every_result_file_belongs_to_a_registered_benchmark(bench):
    run_all, _, _ = bench
    names = [p.stem for p in (BENCHMARKS / "results").glob("*.json") if not p.stem.endswith("_quick")]
    assert [n for n in names if run_all.by_result(n) is None] == []
    writers = [r for b in run_all.REGISTRY for r in b.results]
    assert len(writers) == len(set(writers)), "two registered benchmarks claim one result file"


def test_tags_select_a_subset_and_unknown_tags_are_refused(bench):
    run_all, _, _ = bench
    quick = run_all.select(["quick"])
    assert quick and all("quick" in b.tags for b in quick) and len(quick) < len(run_all.REGISTRY)
    assert {b.script for b in run_all.select(["md"])} >= {"bench_torch_md.py", "bench_md_campaign_real.py"}
    assert run_all.select(None) == list(run_all.REGISTRY)
    with pytest.raises(ValueError, match="unknown tag"):
        run_all.select(["fast"])
    listed = subprocess.run([sys.executable, str(BENCHMARKS / "run_all.py"), "--list", "--tags", "gpu"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and listed.stdout.strip() == \
        f"{run_all.select(['gpu'])[0].command:50s} [gpu] -> gpu_training"
    refused = subprocess.run([sys.executable, str(BENCHMARKS / "run_all.py"), "--tags", "fast"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "unknown tag fast" in refused.stderr


def test_a_result_records_revision_dirty_flag_command_and_versions(bench, tmp_path, monkeypatch):
    _, render_results, common = bench
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(sys, "argv", ["benchmarks/bench_example.py", "--seeds", "3"])
    path = common.write_result("example", {"value": 1.5})
    data = json.loads(path.read_text())
    assert data["command"] == "python benchmarks/bench_example.py --seeds 3"
    assert isinstance(data["dirty"], bool) and not data["revision"].endswith("+changes")
    assert data["versions"]["numpy"] and data["machine"]
    rendered = "\n".join(render_results.provenance(data))
    assert f"| git revision | {data['revision']} |" in rendered
    assert f"| uncommitted changes in src/ or benchmarks/ | {'yes' if data['dirty'] else 'no'} |" in rendered
    assert "| command line | `python benchmarks/bench_example.py --seeds 3` |" in rendered


def test_older_results_render_what_they_lack_as_not_recorded(bench):
    _, render_results, _ = bench
    rendered = "\n".join(render_results.provenance({"date": "2026-11-30 10:00:00 UTC"}))
    for row in ("git revision", "uncommitted changes in src/ or benchmarks/", "command line", "library versions"):
        assert f"| {row} | not recorded |" in rendered
    old_dirty = "\n".join(render_results.provenance({"revision": "abc123+changes"}))
    assert "| git revision | abc123 |" in old_dirty and "| uncommitted changes in src/ or benchmarks/ | yes |" in old_dirty
