# SPDX-License-Identifier: MIT
"""A live `thrifty serve` on a free loopback port (its own process): what it listens on, its
event stream while a search writes, the page in headless Chromium with every plot drawn from the
stored data, a live training run under `thrifty run` updating on the page, and that run stopped
from the page (checkpoint, then the runner's exit 75)."""

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from serve_support import PYTHON, ROOT, SEARCH, TOKEN, copy_db, env

from thrifty.transient.protocol import PREEMPTED_EXIT, checkpoint_files

# the picture in docs/serve.md; the test writes it only when asked (a test run leaves the tree as it was)
DOC_SCREENSHOT = ROOT / "benchmarks" / "results" / "serve_page.png"


def get(url: str, token: str | None = None, method: str = "GET") -> tuple[int, dict]:
    request = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None,
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=600) as response:  # a plan's plane: a minute when loaded
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def select_run(browser, run_id: str) -> None:
    """Pick a run in the page's run list. The list is rebuilt when the event stream reports a change,
    so an element found a moment ago can be gone: find it again until the pick holds."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import Select

    def pick() -> bool:
        try:
            Select(browser.find_element("id", "pick-runs")).select_by_value(run_id)
            return True
        except StaleElementReferenceException:
            return False
    wait_for(pick, 30, f"run {run_id} in the run list")


def wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.timeout(300)
def test_a_default_serve_listens_on_loopback_only(stores, serve_process):
    """`ss -tlnp`: every listening socket of the serve process is on 127.0.0.1. Mutation caught:
    a default host of 0.0.0.0."""
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed")
    served = serve_process("--db", stores["db"])
    lines = [line for line in subprocess.run(["ss", "-tlnpH"], capture_output=True, text=True).stdout.splitlines()
             if f"pid={served.proc.pid}," in line]
    assert lines, "ss shows no socket of thrifty serve"
    assert all(line.split()[3].startswith("127.0.0.1:") for line in lines), lines


@pytest.mark.timeout(300)
def test_a_surrogate_alone_is_something_to_serve(surrogate, serve_process):
    """`thrifty serve --surrogate DIR` with no store answers its profiles (a new user's pass: it was
    refused, "nothing to serve"). Mutation caught: the CLI's check counting the stores alone."""
    served = serve_process("--surrogate", surrogate)
    point = "h_nm=3.5&z_plus=2&c_molar=0.5&d_plus_nm=0.474&d_minus_nm=0.627"
    status, body = get(f"{served.url}/api/surrogate/profile?{point}")
    assert status == 200 and body["band"] == "90% (calibrated)"


@pytest.mark.timeout(300)
def test_a_stop_signal_ends_the_server_quietly_while_a_page_holds_its_event_stream(stores, serve_process):
    """Mutations caught: no end to the event streams on a stop signal (the server waited for the
    page's stream for ever and ignored SIGTERM), or only uvicorn's cancelling of it (a traceback)."""
    served = serve_process("--db", stores["db"])
    stream = urllib.request.urlopen(served.url + "/api/events", timeout=60)
    assert stream.readline().startswith(b"event: hello")
    served.proc.send_signal(signal.SIGTERM)
    _, err = served.proc.communicate(timeout=60)  # a hang fails here
    stream.close()
    # ended by the signal it was sent (uvicorn raises it again once shut down), with nothing said
    assert served.proc.returncode == -signal.SIGTERM and "Traceback" not in err and "ERROR" not in err, err


@pytest.mark.timeout(300)
def test_a_foreign_database_is_refused_in_one_line(tmp_path):
    """Mutation caught: serving a database without thrifty's tables."""
    import sqlite3
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE invoices (n)")
    done = subprocess.run([PYTHON, "-m", "thrifty.cli", "serve", "--db", other, "--port", "0"], env=env(),
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "not a thrifty database" in lines[0], done.stderr
    # a database of the other kind, or a folder: said so (mutation caught: "not a thrifty database"
    # for a thrifty one given as a campaign's, "does not exist" for a folder)
    for name, table in (("thrifty.db", "profiles"), ("campaign.db", "md_campaigns")):
        with sqlite3.connect(tmp_path / name) as conn:
            conn.execute(f"CREATE TABLE {table} (n)")
    for option, path, said in (("--campaign-db", tmp_path / "thrifty.db", "give it with --db"),
                               ("--db", tmp_path / "campaign.db", "give it with --campaign-db"),
                               ("--db", tmp_path, "is a folder")):
        done = subprocess.run([PYTHON, "-m", "thrifty.cli", "serve", option, path, "--port", "0"], env=env(),
                              capture_output=True, text=True, timeout=120)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2 and len(lines) == 1 and said in lines[0], done.stderr


@pytest.mark.timeout(600)
def test_the_event_stream_reports_each_window_of_a_running_search(stores, trace_csv, tmp_path, serve_process):
    """Mutation caught: a change to the database not noticed (no `change` event for searches)."""
    db = tmp_path / "live.db"
    copy_db(stores["db"], db)
    served = serve_process("--db", db)
    stream = urllib.request.urlopen(served.url + "/api/events?limit=50", timeout=300)
    assert stream.readline().startswith(b"event: hello")
    search = subprocess.Popen([PYTHON, "-m", "thrifty.cli", "search", "--backend", "sim", "--trace", trace_csv, *SEARCH,
                               "--seed", "7", "--db", db, "--json"], env=env(), stdout=subprocess.DEVNULL)
    try:
        seen = set()
        while "0-2" not in seen:
            line = stream.readline()
            assert line, "the stream ended"
            if line.startswith(b"data: ") and b'"kind": "searches"' in line:
                seen.update(json.loads(line[6:])["ids"])
        assert search.wait(300) == 0
    finally:
        search.kill()


@pytest.fixture(scope="module")
def live_job(tmp_path_factory):
    """`thrifty run -- thrifty train` on two ranks, slowed down so it runs for minutes, its
    steps.csv appended at every other step's checkpoint; shared by the tests below, the last of
    which stops it."""
    tmp_path = tmp_path_factory.mktemp("live")
    watch = tmp_path / "watch"
    command = [PYTHON, "-m", "thrifty.cli", "run", "--checkpoint-dir", watch / "ck", "--notice", "60s", "--",
               PYTHON, "-m", "thrifty.cli", "train", "--run-dir", watch / "live-run", "--db", tmp_path / "live.db",
               "--steps", "3000", "--nproc", "2", "--slowdown", "20,40", "--checkpoint-every", "2"]
    proc = subprocess.Popen([str(c) for c in command], env=env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (watch / "live-run" / "steps.csv").is_file() or proc.poll() is not None, 400,
                 "the training run's first rows")
        assert proc.poll() is None, proc.stderr.read()
        yield {"watch": watch, "proc": proc}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.timeout(900)
def test_stopping_a_job_needs_the_token(live_job, serve_process):
    """Mutation caught: the stop served without the token (the run would end)."""
    served = serve_process("--watch", live_job["watch"], "--allow-writes", env_extra={"THRIFTY_SERVE_TOKEN": TOKEN})
    jobs = get(f"{served.url}/api/jobs")[1]
    assert len(jobs) == 1 and jobs[0]["running"]
    assert get(f"{served.url}/api/jobs/{jobs[0]['id']}/stop", method="POST")[0] == 401
    assert get(f"{served.url}/api/jobs/{jobs[0]['id']}/stop", token="wrong", method="POST")[0] == 401
    time.sleep(2)
    assert live_job["proc"].poll() is None


def chrome():
    webdriver = pytest.importorskip("selenium.webdriver")
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed (make browser installs them as root)")
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,2600", "--no-proxy-server", "--disable-background-networking"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver), options=options)


def points(browser, plot: str) -> int:
    return int(browser.find_element("id", plot).get_attribute("data-points") or 0)


@pytest.mark.timeout(1200)
def test_the_page_draws_every_store_updates_live_and_stops_a_run(stores, campaign, surrogate, live_job, serve_process,
                                                                 tmp_path):
    """In headless Chromium: each plot drawn with as many points as the API holds, nothing loaded
    from another origin, the live run's plots growing by the event stream, and its Stop button
    ending the run with a checkpoint (the runner exits 75, PREEMPTED_EXIT). Mutations caught: a
    plot drawn from other data (point counts), an external script URL, the page not refetching
    on `change`, the stop not reaching the runner."""
    served = serve_process("--db", stores["db"], "--campaign-db", campaign, "--watch", live_job["watch"],
                           "--watch", stores["runs"], "--surrogate", surrogate, "--allow-writes",
                           env_extra={"THRIFTY_SERVE_TOKEN": TOKEN})
    api = {kind: get(f"{served.url}/api/{kind}")[1] for kind in ("plans", "searches", "runs", "campaigns")}
    plan = get(f"{served.url}/api/plans/{api['plans'][0]['id']}")[1]
    search = get(f"{served.url}/api/searches/{api['searches'][0]['id']}")[1]
    stored_run = next(r for r in api["runs"] if r["source"] == "database")
    live_run = next(r for r in api["runs"] if r["source"] == "folder" and r["job"])
    browser = chrome()
    try:
        browser.set_page_load_timeout(120)
        browser.get(served.url + "/")
        wait_for(lambda: points(browser, "plot-plan") == plan["plane"]["shown"], 180, "the plan's plot")
        assert browser.execute_script("return document.getElementById('plot-plan').data.length") == 4
        wait_for(lambda: points(browser, "plot-search") == len(search["windows"]), 60, "the search's plot")
        wait_for(lambda: points(browser, "plot-campaign-progress") == 4, 60, "the campaign's plot")
        wait_for(lambda: points(browser, "plot-campaign-accuracy") == 4, 60, "the surrogate accuracy plot")
        select_run(browser, stored_run["id"])
        wait_for(lambda: browser.find_element("id", "plot-split").get_attribute("data-source") == stored_run["id"]
                 and points(browser, "plot-split") == 12, 60, "the stored run's plots")
        assert points(browser, "plot-steptime") == 12
        for name, value in (("h_nm", "3.5"), ("z_plus", "2"), ("c_molar", "0.5"), ("d_plus_nm", "0.474"),
                            ("d_minus_nm", "0.627")):
            browser.find_element("id", f"in-{name}").send_keys(value)
        browser.find_element("css selector", "#surrogate-form button").click()
        wait_for(lambda: points(browser, "plot-surrogate") == 50, 60, "the surrogate profile")
        # a live run: its plots grow as steps.csv does, by the event stream alone
        select_run(browser, live_run["id"])
        wait_for(lambda: browser.find_element("id", "plot-split").get_attribute("data-source") == live_run["id"]
                 and points(browser, "plot-split") > 0, 60, "the live run's plots")
        first = points(browser, "plot-split")
        wait_for(lambda: points(browser, "plot-split") > first, 300, "the live run's plot to grow")
        assert "updated" in browser.find_element("id", "live").text
        origins = browser.execute_script(
            "return [...performance.getEntriesByType('resource').map(e => e.name), "
            "...[...document.querySelectorAll('[src],[href]')].map(e => e.src || e.href)]")
        assert origins and all(u.startswith(served.url + "/") for u in origins), origins
        screenshot = DOC_SCREENSHOT if os.environ.get("THRIFTY_DOC_SCREENSHOT") == "1" else tmp_path / "page.png"
        browser.save_screenshot(str(screenshot))
        # stop it from the page: the token typed in, the run's button pressed
        browser.find_element("id", "token").send_keys(TOKEN)
        wait_for(lambda: browser.find_elements("id", "stop-run"), 60, "the run's stop button")
        browser.find_element("id", "stop-run").click()  # the button stays while the view refreshes
        assert live_job["proc"].wait(240) == PREEMPTED_EXIT
        assert checkpoint_files(live_job["watch"] / "ck")
        wait_for(lambda: "notice sent" in browser.find_element("id", "note-jobs").text, 60, "the page's note")
    finally:
        browser.quit()
    assert screenshot.read_bytes()[:4] == b"\x89PNG"
