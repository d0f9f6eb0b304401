# SPDX-License-Identifier: MIT
"""Whose run folders a campaign's work folder holds, and who is running it now.

A run folder is named by its parameter point alone (point_samplers.point_key), so two campaigns
sharing a work folder wrote into each other's runs: a second campaign in the same `--db` rewrote
the first one's summaries and profiles (which the first one's store still counted, and which
`md train-surrogate` then read), and shared its batches' attempt logs. And two `md sweep` drivers of
one campaign ran every run twice and billed two pools. So each campaign gets its own folder by
default (`default_work_dir`), and a work folder is claimed (`claim`): a marker file names the
database and campaign that own it, and a lock file is held for the driver's life (folder_lock: the
kernel drops a killed driver's lock, so a crash never leaves the campaign held).
"""

import hashlib
import json
import re
from pathlib import Path
from typing import IO

from thrifty.errors import ThriftyError
from thrifty.folder_lock import FolderBusy, open_lock, take, write_holder
from thrifty.io import write_text_atomic

OWNER_FILE = ".campaign.json"  # {"db": absolute path, "campaign": name}
LOCK_FILE = ".sweep.lock"
DEFAULT_CAMPAIGN = "default"
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def default_work_dir(db: Path, campaign: str) -> Path:
    """The run folders beside `db`: DB.runs for the default campaign (as before campaigns had
    folders of their own), DB.NAME.runs for another (a name that is no plain file name, by its
    digest)."""
    if campaign == DEFAULT_CAMPAIGN:
        return db.with_suffix(".runs")
    name = campaign if _PLAIN_NAME.fullmatch(campaign) and campaign not in (".", "..") else \
        "campaign-" + hashlib.sha256(campaign.encode()).hexdigest()[:12]
    return db.with_name(f"{db.stem}.{name}.runs")


def check_owner(work: Path, db: Path, campaign: str) -> None:
    """Refuse in one line when `work` holds another campaign's runs (read only: checked before the
    store is opened, so a refusal writes nothing)."""
    marker, owner = work / OWNER_FILE, _owner(db, campaign)
    try:
        found = json.loads(marker.read_text()) if marker.exists() else None
    except (OSError, ValueError):
        found = None  # unreadable: taken as unclaimed, and claimed anew
    if isinstance(found, dict) and (found.get("db"), found.get("campaign")) != (owner["db"], owner["campaign"]):
        raise ThriftyError(f"{work} holds the runs of campaign {found.get('campaign')!r} of {found.get('db')}: "
                           f"give campaign {campaign!r} its own --work-dir")


def claim(work: Path, db: Path, campaign: str) -> IO[str]:
    """Hold `work` for this driver of `campaign` in `db` (the open lock file: keep it until the
    campaign's session ends) and mark it as the campaign's. Refused in one line when another
    driver runs it, or when it holds another campaign's runs."""
    what = f"the campaign's work folder {work}"
    handle = open_lock(work / LOCK_FILE, what)
    try:
        take(handle, what)
    except FolderBusy as busy:
        raise ThriftyError(f"campaign {campaign!r} is being run by another md sweep{busy.by} in {work}: "
                           f"wait for it, or stop it first") from None
    try:
        check_owner(work, db, campaign)
    except ThriftyError:
        handle.close()
        raise
    write_text_atomic(work / OWNER_FILE, json.dumps(_owner(db, campaign)) + "\n")
    write_holder(handle)
    return handle


def _owner(db: Path, campaign: str) -> dict[str, str]:
    return {"db": str(Path(db).resolve()), "campaign": campaign}
