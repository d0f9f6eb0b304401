# SPDX-License-Identifier: MIT
"""Where a spot plan's checkpoints live: a cloud bucket that every node of its SkyPilot task mounts.

A managed job (`sky jobs launch`) comes back on new VMs after a preemption; only a bucket outlives
them. SkyPilot ("Cloud object storage" in docs.skypilot.co; `get_storage_schema` in
sky/utils/schemas.py): `file_mounts: {PATH: {name: NAME, store: s3 | gcs | azure, mode: MOUNT}}`
makes the bucket if it does not exist, keeps it after the job, and mounts it at PATH on every node
(MOUNT: files are read from and written to the bucket as they are used).

Each plan trains in its own folder of the bucket (`run_folder`), so one bucket holds many runs, a
fresh run clears only its own folder's checkpoints, and a restarted task finds its own again.
"""

import getpass
import hashlib
import json
import re
import socket
from pathlib import Path

from thrifty.errors import PlanError
from thrifty.workloads.names import canonical_name, workload_key

MOUNT_PATH = "/checkpoints"
STORES = {"aws": "s3", "gcp": "gcs", "azure": "azure"}  # SkyPilot's store of each cloud's buckets
# What S3 bucket, GCS bucket and Azure container names all allow: 3-63 lowercase letters and
# digits, single hyphens between them (S3 also allows dots, Azure does not; GCS no "goog" prefix).
_BUCKET = re.compile(r"(?!goog)[a-z0-9](?:-?[a-z0-9])+")
BUCKET_CHARS = (3, 63)


def check_bucket_name(name: str) -> str:
    """The name, if every cloud's store accepts it; a PlanError naming the rule otherwise."""
    low, high = BUCKET_CHARS
    if not (_BUCKET.fullmatch(name) and low <= len(name) <= high):
        raise PlanError(f"bucket name {name!r} is not one every cloud accepts: use {low}-{high} lowercase "
                        f"letters and digits, with single hyphens between them")
    return name


def default_bucket_name() -> str:
    """`thrifty-ckpt-USER-HASH`: bucket names are global per cloud, so the user's name alone would
    clash with another user's; HASH (of user@host) keeps it the same for every plan made here."""
    user = getpass.getuser()
    digest = hashlib.sha256(f"{user}@{socket.gethostname()}".encode()).hexdigest()[:8]
    slug = re.sub(r"[^a-z0-9]+", "-", user.lower())[:40].strip("-")  # 13 + 40 + 1 + 8 <= 63
    return check_bucket_name("-".join(part for part in ("thrifty-ckpt", slug, digest) if part))


def bucket_mount(cloud: str, name: str) -> dict:
    """The file_mounts entry of the bucket. A cloud without a known store leaves the store to
    SkyPilot, which takes the task's cloud when it has object storage (Task._get_preferred_store)."""
    mount = {"name": check_bucket_name(name)}
    if cloud in STORES:
        mount["store"] = STORES[cloud]
    mount["mode"] = "MOUNT"
    return mount


def run_folder(choice: dict, workload: str) -> str:
    """The plan's folder in the bucket, `WORKLOAD-HASH`: HASH covers the workload's code (its
    store key) and everything the launch line trains with, so an edited model or another plan
    starts its own folder, while the same plan launched again continues its checkpoints."""
    name = canonical_name(workload)
    slug = re.sub(r"[^a-z0-9]+", "-", Path(name.removeprefix("builtin:")).stem.lower()).strip("-")
    # epochs to 6 significant digits: a re-plan whose float differs in its 15th digit (another
    # machine's BLAS) is the same plan, and its line prints the same --epochs (a review)
    fields = [workload_key(workload)] + [float(f"{choice[key]:.6g}") if key == "epochs" else choice[key] for key in (
        "cloud", "region", "instance_type", "accelerator", "accelerator_count", "nodes", "workers",
        "global_batch", "epochs", "until_target", "precision")]
    digest = hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:12]
    return f"{slug or 'workload'}-{digest}"
