# SPDX-License-Identifier: MIT
"""Where a campaign's run folders go, whose runs a work folder holds, and who is running it now.

A run folder is named by its parameter point alone (point_samplers.point_key), so two campaigns
sharing a work folder wrote into each other's runs: a second campaign in the same `--db` rewrote
the first one's summaries and profiles (which the first one's store still counted, and which
`md train-surrogate` then read), and shared its batches' attempt logs. And two `md sweep` drivers of
one campaign ran every run twice and billed two pools. So:
- a campaign goes on in the folder its stored sessions used (`campaign_work_dir`; a campaign started
  before folders were per campaign continues where its runs are), and a new one gets a folder of
  its own beside the database (`default_work_dir`);
- a work folder is claimed (`claim`): a marker file names the campaign and the database file that
  own it (by file name, so a database moved with its runs stays the owner), and a lock file is held
  for the driver's life (folder_lock: the kernel drops a killed driver's lock, so a crash never
  leaves the folder held). A folder another campaign owns is refused (`check_owner`), unless this
  campaign's own sessions ran there (folders shared before the marker existed).
"""

import contextlib
import hashlib
import json
import re
import sqlite3
from pathlib import Path
from typing import IO

from thrifty.errors import ThriftyError
from thrifty.folder_lock import FolderBusy, open_lock, take, write_holder
from thrifty.io import write_text_atomic

OWNER_FILE = ".campaign.json"  # {"db_name", "campaign", "db": the absolute path, for messages}
LOCK_FILE = ".sweep.lock"
DEFAULT_CAMPAIGN = "default"
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def default_work_dir(db: Path, campaign: str) -> Path:
    """A new campaign's run folders beside `db`: DB.runs for the default campaign (as before
    campaigns had folders of their own), DB.runs-NAME for another (a name that is no plain file
    name, by its digest; "-" after ".runs" keeps it apart from another database's DB.runs)."""
    if campaign == DEFAULT_CAMPAIGN:
        return db.with_suffix(".runs")
    name = campaign if _PLAIN_NAME.fullmatch(campaign) and campaign not in (".", "..") else \
        "campaign-" + hashlib.sha256(campaign.encode()).hexdigest()[:12]
    return db.with_name(f"{db.stem}.runs-{name}")


def stored_work_dirs(db: Path, campaign: str) -> list[Path]:
    """The work folders the campaign's stored sessions used, newest first (read only; none for a
    database or campaign not yet stored, or a store from before sessions kept their folder)."""
    if not Path(db).is_file():
        return []
    try:
        with contextlib.closing(sqlite3.connect(f"file:{Path(db).resolve()}?mode=ro", uri=True)) as conn:
            rows = conn.execute("SELECT work_dir FROM md_campaign_sessions WHERE campaign = ? AND work_dir IS NOT NULL "
                                "ORDER BY rowid DESC", (campaign,)).fetchall()
    except sqlite3.Error:  # no such table or column, or not a database: the store's own checks say so
        return []
    return list(dict.fromkeys(Path(r[0]) for r in rows))


def campaign_work_dir(db: Path, campaign: str, given: Path | None) -> tuple[Path, bool]:
    """(work folder, whether this campaign's sessions ran there before): `given` (--work-dir), else
    the newest stored session's folder where it still exists, else default_work_dir."""
    stored = stored_work_dirs(db, campaign)
    if given is not None:
        work = Path(given)
    else:
        work = next((p for p in stored if p.is_dir()), default_work_dir(Path(db), campaign))
    return work, work.resolve() in {p.resolve() for p in stored}


def check_owner(work: Path, db: Path, campaign: str) -> None:
    """Refuse in one line when `work` holds another campaign's runs (read only: checked before the
    store is written, so a refusal writes nothing)."""
    found = _owner_in(work)
    if found is not None and (found.get("db_name"), found.get("campaign")) != (Path(db).name, campaign):
        raise ThriftyError(f"{work} holds the runs of campaign {found.get('campaign')!r} of {found.get('db')}: "
                           f"give campaign {campaign!r} of {db} its own --work-dir")  # both may be 'default'


def claim(work: Path, db: Path, campaign: str, *, ran_here: bool = False) -> IO[str]:
    """Hold `work` for this driver of `campaign` in `db` (the open lock file: keep it until the
    campaign's session ends) and mark it as the campaign's where no other campaign has. Refused in
    one line when another md sweep holds it, or when it holds another campaign's runs (unless this
    campaign's own sessions ran there: `ran_here`)."""
    what = f"the campaign's work folder {work}"
    handle = open_lock(work / LOCK_FILE, what)
    try:
        take(handle, what)
    except FolderBusy as busy:
        raise ThriftyError(f"{work} is in use by another md sweep{busy.by}: wait for it, or stop it first") from None
    try:
        if not ran_here:
            check_owner(work, db, campaign)
        if _owner_in(work) is None:
            write_text_atomic(work / OWNER_FILE, json.dumps({"db_name": Path(db).name, "campaign": campaign,
                                                              "db": str(Path(db).resolve())}) + "\n")
        write_holder(handle)
    except BaseException:
        handle.close()
        raise
    return handle


def _owner_in(work: Path) -> dict | None:
    """The owner the folder's marker names, or None (no marker, or an unreadable one)."""
    try:
        found = json.loads((work / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None
