# SPDX-License-Identifier: MIT
"""Every bad input to every command: exit code 2, one line on stderr, no traceback, and nothing
left behind in the working folder (no empty database, no half-written file).

Each case runs the CLI in this process from an empty working folder, with its inputs in a
folder beside it; the default database is redirected there too."""

import shlex
import stat
import sys
from pathlib import Path

import pytest

from thrifty.cli.app import main

BAD_UTF8 = b"num_nodes,num_workers\n\xff\xfe\xfa,1\n"

CATALOG_HEADER = "cloud,instance_type,region,vcpus,memory_gib,accelerator,accelerator_count,price_per_hour,spot_price_per_hour\n"
INPUT_FILES: dict[str, bytes | str] = {
    "bad_utf8.csv": BAD_UTF8,
    "empty.csv": "",
    "header_only.csv": "num_nodes,num_workers,local_batch,step_time_s\n",
    "wrong_columns.csv": "a,b\n1,2\n",
    "binary.bin": bytes(range(256)) * 4,
    "not_json.json": "this is not json\n",
    "list.json": "[1, 2, 3]\n",
    "no_model.json": '{"params": {"rate": 1}}\n',
    "samples_nan.csv": "num_nodes,num_workers,local_batch,step_time_s\n1,1,32,nan\n1,2,32,0.1\n1,1,64,0.2\n1,2,64,0.2\n",
    "samples_text.csv": "num_nodes,num_workers,local_batch,step_time_s\n1,1,32,fast\n",
    "samples_negative.csv": "num_nodes,num_workers,local_batch,step_time_s\n1,1,32,-0.1\n1,2,32,0.1\n1,1,64,0.2\n1,2,64,0.2\n",
    "samples_zero_workers.csv": "num_nodes,num_workers,local_batch,step_time_s\n1,0,32,0.1\n1,2,32,0.1\n1,1,64,0.2\n1,2,64,0.2\n",
    "samples_two.csv": "num_nodes,num_workers,local_batch,step_time_s\n1,1,32,0.1\n1,2,32,0.12\n",
    "samples_inf.csv": "num_nodes,num_workers,local_batch,step_time_s\n1,1,32,inf\n1,2,32,0.1\n1,1,64,0.2\n1,2,64,0.2\n",
    "samples_huge.csv": "num_nodes,num_workers,local_batch,step_time_s\n1,1,32,1e300\n1,2,32,2e300\n1,1,64,3e300\n1,2,64,4e308\n",
    "samples_huge_batch.csv": "num_nodes,num_workers,local_batch,step_time_s\n1,1,1e300,0.1\n1,2,32,0.1\n1,1,64,0.2\n1,2,64,0.2\n",
    "samples_huge_workers.csv": "num_nodes,num_workers,local_batch,step_time_s\n1,1e300,32,0.1\n1,2,32,0.1\n1,1,64,0.2\n1,2,64,0.2\n",
    "samples_huge_compute.csv": "num_nodes,num_workers,local_batch,step_time_s,compute_time_s\n1,1,32,0.1,1e308\n"
                                "1,2,32,0.1,0.05\n1,1,64,0.2,0.1\n1,2,64,0.2,0.1\n",
    "samples_parts_over.csv": "num_nodes,num_workers,local_batch,step_time_s,compute_time_s,sync_time_s\n"
                              "1,1,32,0.1,0.05,0\n1,2,32,0.1,5,5\n1,1,64,0.2,0.1,0\n1,2,64,0.2,0.1,0.05\n",
    "samples_half_worker.csv": "num_nodes,num_workers,local_batch,step_time_s\n1,1.5,32,0.1\n1,2,32,0.1\n"
                               "1,1,64,0.2\n1,2,64,0.2\n",
    "configs_nan.csv": "num_nodes,num_workers,local_batch\n1,nan,32\n",
    "configs_zero.csv": "num_nodes,num_workers,local_batch\n1,1,0\n",
    "configs_fractional.csv": "num_nodes,num_workers,local_batch\n1,2.5,32\n",
    "configs_past_fits.csv": "num_nodes,num_workers,local_batch\n1,1,1e30\n",
    "configs_negative.csv": "num_nodes,num_workers,local_batch\n-1,1,32\n",
    "configs_huge.csv": "num_nodes,num_workers,local_batch\n1,1,1e308\n",
    "lifetimes_text.csv": "lifetime_s,event\nlong,1\n",
    "lifetimes_negative.csv": "lifetime_s,event\n-5,preempted\n100,preempted\n200,stopped\n",
    "lifetimes_nan.csv": "lifetime_s,event\nnan,preempted\n100,preempted\n200,stopped\n",
    "lifetimes_huge.csv": "lifetime_s,event\n1e15,preempted\n100,preempted\n200,stopped\n",
    "lifetimes_event.csv": "lifetime_s,event\n100,7\n200,preempted\n300,stopped\n",
    "lifetimes_two.csv": "lifetime_s,event\n100,preempted\n200,preempted\n",
    "lifetimes_censored.csv": "lifetime_s,event\n100,stopped\n200,stopped\n300,stopped\n400,stopped\n",
    "catalog_nan_price.csv": CATALOG_HEADER +
                             "aws,x1.fake,us-east-1,4,16,,,nan,0.1\n",
    "catalog_negative.csv": CATALOG_HEADER +
                            "aws,x1.fake,us-east-1,-4,16,,,0.2,0.1\n",
    "catalog_inf_price.csv": CATALOG_HEADER +
                             "aws,x1.fake,us-east-1,4,16,,,inf,0.1\n",
    "catalog_inf_spot.csv": CATALOG_HEADER +
                            "aws,x1.fake,us-east-1,4,16,,,0.2,inf\n",
    "catalog_zero_price.csv": CATALOG_HEADER +
                              "aws,x1.fake,us-east-1,4,16,,,0,\n",
    "catalog_dear_spot.csv": CATALOG_HEADER +
                             "aws,x1.fake,us-east-1,4,16,,,0.2,0.3\n",
    # accepted before: a batch limit of -50209 (no memory), 1x V100 (count 0), a CPU type (count 2,
    # no name), region '' and costs that overflowed
    **{f"catalog_{name}.csv": CATALOG_HEADER + row for name, row in (
        ("no_memory", "aws,x1.fake,us-east-1,4,0,V100,1,3,\n"), ("zero_gpus", "aws,x1.fake,us-east-1,4,16,V100,0,3,\n"),
        ("nameless_gpus", "aws,x1.fake,us-east-1,4,16,,2,3,\n"), ("no_region", "aws,x1.fake,,4,16,,,0.2,\n"),
        ("huge_price", "aws,x1.fake,us-east-1,4,16,,,1e308,\n"))},
    "not_module.py": "from thrifty.workloads.digits import make_workload as digits\n\n"
                     "def make_workload():\n    w = digits()\n    w.make_model = lambda: 'a string'\n    return w\n",
    "forward_raises.py": "from thrifty.workloads.digits import make_workload as digits\nCALLS = [0]\n\n"
                         "def make_workload():\n    w, base = digits(), None\n    base = w.loss_fn\n\n"
                         "    def loss_fn(out, y):\n        CALLS[0] += 1\n        if CALLS[0] > 2:\n"
                         "            raise RuntimeError('forward broke on batch 3')\n        return base(out, y)\n"
                         "    w.loss_fn = loss_fn\n    return w\n",
    "nan_loss.py": "from thrifty.workloads.digits import make_workload as digits\nCALLS = [0]\n\n"
                   "def make_workload():\n    w = digits()\n    base = w.loss_fn\n\n"
                   "    def loss_fn(out, y):\n        CALLS[0] += 1\n"
                   "        return base(out, y) * (float('nan') if CALLS[0] > 2 else 1.0)\n"
                   "    w.loss_fn = loss_fn\n    return w\n",
    "evaluate_breaks.py": "from thrifty.workloads.digits import make_workload as digits\n\n"
                          "def make_workload():\n    w = digits()\n    base = w.evaluate\n\n"
                          "    def evaluate(model, data):\n        if len(data) > 4:\n"
                          "            raise ValueError('evaluate broke on the full set')\n"
                          "        return base(model, data)\n    w.evaluate = evaluate\n    return w\n",
    "model_no_cov.json": '{"kind": "thrifty.steptime", "version": 3, "theta": [0.01, 0.001, 0.0001, 0.0, 0.0]}\n',
    "schedule_bad.json": '{"steps": "many"}\n',
    "schedule_step.json": '[{"step": 0, "slowdown": [1, 1]}, {"step": 2.7, "slowdown": [1, 2]}]\n',
    "schedule_nan.json": '[{"step": 0, "slowdown": [1, 1]}, {"step": NaN, "slowdown": [1, 2]}]\n',
    "schedule_order.json": '[{"step": 20, "slowdown": [1, 1]}, {"step": 10, "slowdown": [1, 2]}]\n',
    "hardware_inf.csv": "name,speed_per_vcpu\nn1-*,inf\n",
    "hardware_twice.csv": "name,speed_per_vcpu\naws:c5,2\naws:c5,0.5\n",
    "exit3.py": "import sys\n\ndef make_workload():\n    sys.exit(3)\n",
    # a field of the wrong type (it had ended profile and plan in a traceback after the profile's work)
    "target_str.py": "from thrifty.workloads.digits import make_workload as digits\n\n"
                     "def make_workload():\n    w = digits()\n    w.target_metric = '0.9'\n    return w\n",
    "batch_zero.py": "from thrifty.workloads.digits import make_workload as digits\n\n"
                     "def make_workload():\n    w = digits()\n    w.default_global_batch = 0\n    return w\n",
    "exit_at_import.py": "import sys\nsys.exit(0)\n",
    "syntax.py": "def make_workload(:\n",
    "raises.py": "def make_workload():\n    raise RuntimeError('no data here')\n",
    "no_factory.py": "x = 1\n",
    "returns_none.py": "def make_workload():\n    return None\n",
    "not_python.txt": "hello\n",
    "not_a_db.db": "this is not a database\n",
    "trace_ok.csv": "instance_type,num_nodes,num_workers,local_batch,step_time_s,price_per_hour\n"
                    "x,1,1,32,0.1,1\nx,1,1,64,0.18,1\nx,2,2,32,0.12,1\n",
    "afile": "a regular file\n",
    "script.sh": "#!/bin/sh\necho hi\n",
    **{f"trace_step_{name}.csv": "instance_type,num_nodes,num_workers,local_batch,step_time_s,price_per_hour\n"
                                 f"x,1,1,32,{step},1\nx,1,1,64,0.18,1\n" for name, step in (("huge", "1e300"), ("tiny", "1e-300"))},
    # a new user's pass: the first stored a search row and a window before the search found it could not
    # fit; the others ended in SQLite's OverflowError, a traceback
    "trace_one_batch.csv": "instance_type,num_nodes,num_workers,local_batch,step_time_s,price_per_hour\n"
                           "x,1,1,32,0.1,1\nx,2,2,32,0.12,1\n",
    **{f"trace_{column}_huge.csv": "instance_type,num_nodes,num_workers,local_batch,step_time_s,price_per_hour\n"
                                   f"x,1,1,32,0.1,1\nx,1,1,64,0.18,1\n{row}\n"
       for column, row in (("local_batch", "x,1,1,10000000000000000000,0.2,1"),
                           ("num_workers", "x,1,10000000000000000000,32,0.2,1"))},
}

# output paths that cannot be written: under /proc, in sysfs (no regular files, read-only in containers),
# under a regular file, an existing folder
UNWRITABLE = {"proc": "/proc/thrifty-nowhere/out", "sysfs": "/sys/thrifty-out", "under_file": "{in}/afile/out",
              "folder": "{in}/adir"}
UNWRITABLE_DIRS = {"proc": "/proc/thrifty-nowhere/dir", "sysfs": "/sys/thrifty-dir", "under_file": "{in}/afile/dir",
                   "file": "{in}/afile"}
BAD_CSV = {"missing": "{in}/missing.csv", "bad_utf8": "{in}/bad_utf8.csv", "empty": "{in}/empty.csv",
           "wrong_columns": "{in}/wrong_columns.csv", "binary": "{in}/binary.bin", "folder": "{in}/adir"}
BAD_WORKLOADS = {"missing": "{in}/missing.py", "unknown_builtin": "builtin:nosuch", "exit3": "{in}/exit3.py",
                 "exit_at_import": "{in}/exit_at_import.py", "syntax": "{in}/syntax.py",
                 "raises": "{in}/raises.py", "no_factory": "{in}/no_factory.py",
                 "returns_none": "{in}/returns_none.py", "not_python": "{in}/not_python.txt",
                 "folder": "{in}/adir", "target_str": "{in}/target_str.py", "batch_zero": "{in}/batch_zero.py"}
BAD_DBS = {"under_file": "{in}/afile/t.db", "folder": "{in}/adir", "not_a_db": "{in}/not_a_db.db",
           "proc": "/proc/thrifty-nowhere/t.db", "sysfs": "/sys/thrifty.db", "empty_file": "{in}/empty.csv",
           "foreign_sqlite": "{in}/foreign.db", "journal_blocked": "{in}/locked/t.db"}
# what the error line says about each bad path
UNWRITABLE_REASONS = {"proc": "no file can be created in /proc (no such file or directory)", "sysfs": "permission denied",
                      "under_file": "is a file, not a folder", "folder": "it is a folder"}
UNWRITABLE_DIR_REASONS = {"proc": "no file can be created in /proc (no such file or directory)",
                          "sysfs": "permission denied",
                          "under_file": "is a file, not a folder", "file": "is a file, not a folder"}
WORKLOAD_REASONS = {"missing": "neither a built-in", "unknown_builtin": "unknown built-in workload 'nosuch'",
                    "exit3": "make_workload() called sys.exit(3)", "exit_at_import": "importing it called sys.exit(0)",
                    "syntax": "importing it failed with SyntaxError", "raises": "raised RuntimeError: no data here",
                    "no_factory": "has no make_workload() function",
                    "returns_none": "must return a thrifty.workloads.Workload", "not_python": "neither a built-in",
                    "folder": "neither a built-in", "target_str": "Workload.target_metric must be a finite number",
                    "batch_zero": "Workload.default_global_batch must be a positive whole number"}
DB_REASONS = {"under_file": "afile is a file, not a folder", "folder": "it is a folder",
              "not_a_db": "file is not a database", "proc": "no such file or directory",
              "sysfs": "cannot create or open a file in /sys", "empty_file": "an empty file, not a thrifty database",
              "foreign_sqlite": "another program's sqlite database",
              "journal_blocked": "cannot write its journal"}
# typer's words for a value that is not a number at all, and thrifty's for a number out of range
NOT_A_NUMBER, NOT_AN_INTEGER = "input should be a valid number", "input should be a valid integer"
# what the error line says about each BAD_CSV file (an empty catalog "has no rows"; other empty CSV files
# are reported by the columns they miss)
CSV_REASONS = {"missing": "not found", "bad_utf8": "is not a text csv file", "empty": "missing columns",
               "wrong_columns": "missing columns", "binary": "is not a text csv file", "folder": "is a folder, not a csv"}
CATALOG_CSV_REASONS = {**CSV_REASONS, "empty": "has no rows"}


def _cases() -> list[tuple[str, str, tuple[str, ...]]]:
    """(name, argv, the words the error line must contain, all of them: the case failed for the reason meant)."""
    cases: list[tuple[str, str, tuple[str, ...]]] = []

    def add(name: str, argv: str, *reason: str) -> None:
        assert reason and all(isinstance(word, str) and word.strip() for word in reason), f"{name!r} states no reason"
        cases.append((name, argv, reason))

    def numbers(command: str, option: str, bad: tuple[str, ...], rest: str = "", why=None) -> None:
        """Each bad value of one option; the error names the option and says `why(value)` (typer's words
        for a value that is no number; `why` for the others), unless `why(value)` returns a tuple: the
        whole reason."""
        for value in bad:
            reason = why(value) if why else None
            if reason is None and value == "abc":
                reason = "input should be a valid"  # typer's: "... a valid number" or "... a valid integer"
            add(f"{command} {option}={value or 'empty'}", f"{command} {option} {shlex.quote(value)} {rest}",
                *(reason if isinstance(reason, tuple) else (option, reason)))

    # catalog
    for name, path in BAD_CSV.items():
        add(f"catalog list --catalog {name}", f"catalog list --catalog {path}", CATALOG_CSV_REASONS[name])
        add(f"catalog show --catalog {name}", f"catalog show n1-standard-4 --catalog {path}", CATALOG_CSV_REASONS[name])
    add("catalog list --catalog nan price", "catalog list --catalog {in}/catalog_nan_price.csv", "finite")
    add("catalog list --catalog negative vcpus", "catalog list --catalog {in}/catalog_negative.csv", "'vcpus' must be")
    for name, reason in (("no_memory", "'memory_gib' must be positive"), ("zero_gpus", "accelerator_count 0 with"),
                         ("nameless_gpus", "accelerator_count 2 with accelerator (none)"),
                         ("no_region", "column 'region' is empty"), ("huge_price", "above 1000")):
        add(f"catalog list --catalog {name}", f"catalog list --catalog {{in}}/catalog_{name}.csv", reason)
    add("catalog list --catalog inf price", "catalog list --catalog {in}/catalog_inf_price.csv", "finite")
    add("catalog list --catalog inf spot", "catalog list --catalog {in}/catalog_inf_spot.csv", "finite")
    add("catalog list --catalog zero price", "catalog list --catalog {in}/catalog_zero_price.csv", "finite positive")
    # rich would print ":fire:" as an emoji (and a CSV's line 100 as ":100:" did): the text as typed
    add("catalog list --region emoji code", "catalog list --region :fire:", "--region :fire: is not")
    add("catalog list --region of another cloud",  # (it said no VM type matches the filters)
        "catalog list --cloud aws --region eastus", "--region eastus is not a region of aws", "us-east-1")
    add("plan --region of another cloud", "plan --db {w}/t.db --cloud gcp --region us-east-1",
        "--region us-east-1 is not a region of gcp")
    add("catalog list --catalog spot above on-demand", "catalog list --catalog {in}/catalog_dear_spot.csv",
        "above the on-demand price")
    add("catalog show bad cloud:type", "catalog show aws:", "CLOUD:TYPE")
    add("catalog show cloud:type on another cloud", "catalog show gcp:p3.2xlarge", "not in the catalog")
    add("model project type with several accelerators", "model project --instance-type gcp:n1-standard-8",
        "several accelerators", "T4:4")
    add("model project accelerator the type lacks",
        "model project --instance-type gcp:n1-standard-8 --accelerator A100:1", "--accelerator 'A100:1'", "comes with")
    for option in ("--min-vcpus", "--min-memory", "--max-price"):
        numbers("catalog list", option, ("abc", "nan", "inf", "-1"),
                why=lambda v, o=option: None if v == "abc" else
                "is not a finite positive number" if o == "--max-price" else "is not a finite number >= 0")
    add("catalog list --max-price 0", "catalog list --max-price 0", "--max-price", "0.0 is not a finite positive number")
    add("catalog list --gpu --cpu", "catalog list --gpu --cpu", "not both")
    add("catalog list unknown cloud", "catalog list --cloud nosuch", "--cloud nosuch is not in the catalog", "aws")
    add("catalog list unknown accelerator", "catalog list --accelerator Z9000", "no VM type matches", "(--accelerator)",
        "accelerators in the catalog: a10")
    add("catalog show unknown type", "catalog show no-such-type", "not in the catalog")
    add("catalog show --hardware inf speed",  # (it was taken: every CPU projection became NaN or 0)
        "catalog show n1-standard-4 --hardware {in}/hardware_inf.csv", "'inf' must be a finite positive number")
    add("catalog show --hardware a family twice",  # a new user's pass: the first row won in silence
        "catalog show c5.2xlarge --hardware {in}/hardware_twice.csv", "aws:c5 is on line 2 already")
    for option in ("--hardware", "--network"):
        for name in ("bad_utf8", "wrong_columns", "missing"):
            add(f"catalog show {option} {name}", f"catalog show n1-standard-4 {option} {BAD_CSV[name]}",
                f"{option} file", CSV_REASONS[name])  # --network's errors said "hardware file"

    # profile (fails before measuring anything)
    for name, spec in BAD_WORKLOADS.items():
        add(f"profile --workload {name}", f"profile --workload {spec} --db {{w}}/t.db", WORKLOAD_REASONS[name])
    for value in ("abc", "0", "-1", "", "1,,2", "100000"):
        add(f"profile --workers {value or 'empty'}", f"profile --workers {shlex.quote(value)} --db {{w}}/t.db",
            *(("worker count 100000", "allowed on this machine") if value == "100000" else ("--workers", _int_list_reason(value))))
    for value in ("abc", "0", "-8"):
        add(f"profile --batch {value}", f"profile --batch {value} --db {{w}}/t.db", "--batch", _int_list_reason(value))
    numbers("profile", "--steps", ("0", "-1", "abc"), "--db {w}/t.db", lambda v: None if v == "abc" else "must be at least 2")
    add("profile --instance-type unknown", "profile --instance-type n9-nosuch --db {w}/t.db", "not in the catalog")
    # mutations caught: a GPU type taken for a profile of this machine's CPUs (the plan kept projecting
    # it); a --catalog left unread beside `local`; one batch size stored (every plan of it refused)
    add("profile --instance-type GPU", "profile --instance-type aws:p3.2xlarge --db {w}/t.db",
        "is a GPU VM, and a profile measures this machine's CPUs")
    add("profile --catalog missing", "profile --catalog {in}/missing.csv --db {w}/t.db", "missing.csv")
    add("profile --batch 16,16", "profile --workers 2,2 --batch 16,16 --db {w}/t.db",
        "at least two different local batch sizes", "got 16, 16")
    for name, path in BAD_DBS.items():
        add(f"profile --db {name}", f"profile --workload {{in}}/raises.py --db {path}", "cannot open the database",
            DB_REASONS[name])

    # model fit / predict / project
    samples_reasons = {**CSV_REASONS, "nan": "step times must be finite positive", "text": "not a number",
                       "negative": "step times must be finite positive", "zero_workers": "num_workers >= num_nodes",
                       "two_rows": "two different local batch sizes", "inf": "step times must be finite positive",
                       "header_only": "has no rows"}
    for name, path in {**BAD_CSV, "nan": "{in}/samples_nan.csv", "text": "{in}/samples_text.csv",
                       "negative": "{in}/samples_negative.csv", "zero_workers": "{in}/samples_zero_workers.csv",
                       "two_rows": "{in}/samples_two.csv", "inf": "{in}/samples_inf.csv",
                       "header_only": "{in}/header_only.csv"}.items():
        add(f"model fit --samples {name}", f"model fit --samples {path}", samples_reasons[name])
    for name, reason in {"huge": "step times must be finite positive", "huge_batch": "need finite sizes",
                         "huge_workers": "need finite sizes", "huge_compute": "compute_time_s must be numbers",
                         "parts_over": "exceed 2x step_time_s in 1 sample", "half_worker": "whole numbers"}.items():  # a traceback, before
        add(f"model fit --samples {name}", f"model fit --samples {{in}}/samples_{name}.csv --out {{w}}/m.json", reason)
    add("model fit nothing", "model fit", "exactly one of")
    add("model fit both", "model fit --samples {in}/samples_two.csv --workload builtin:digits", "exactly one of")
    add("model fit --workload unprofiled", "model fit --workload builtin:digits --db {w}/t.db", "no stored profile")
    for name, path in UNWRITABLE.items():
        add(f"model fit --out {name}", f"model fit --samples {{in}}/samples_ok.csv --out {path}", "cannot write",
            UNWRITABLE_REASONS[name])
    for name, path in {"missing": "{in}/missing.json", "not_json": "{in}/not_json.json", "list": "{in}/list.json",
                       "no_cov": "{in}/model_no_cov.json", "bad_utf8": "{in}/bad_utf8.csv",
                       "folder": "{in}/adir"}.items():
        reason = {"missing": "not found", "not_json": "not valid json", "list": "not a thrifty step-time model",
                  "no_cov": "malformed", "bad_utf8": "utf-8", "folder": "is a directory"}[name]
        add(f"model predict --step-time-model {name}",
            f"model predict --step-time-model {path} --configs {{in}}/configs_ok.csv", reason)
    for name, path in {**BAD_CSV, "nan": "{in}/configs_nan.csv", "zero": "{in}/configs_zero.csv",
                       "negative": "{in}/configs_negative.csv", "huge": "{in}/configs_huge.csv",
                       "fractional": "{in}/configs_fractional.csv", "past fits": "{in}/configs_past_fits.csv",
                       }.items():  # the last two: a fit refuses such a sample, a prediction made one up
        reason = {**CSV_REASONS, "nan": "need finite sizes", "zero": "num_workers >= num_nodes",
                  "negative": "num_workers >= num_nodes", "huge": "need finite sizes",
                  "fractional": "whole numbers", "past fits": "local_batch up to 1e+07"}[name]
        add(f"model predict --configs {name}", f"model predict --step-time-model {{in}}/model_ok.json --configs {path}", reason)
    project = "model project --instance-type n1-standard-4 --accelerator none --db {w}/t.db"
    add("model project unknown type", "model project --instance-type n9-nosuch --db {w}/t.db", "unknown instance type")
    add("model project no type", "model project --db {w}/t.db", "missing option '--instance-type'")
    for value in ("abc", "0", "-32", ""):
        add(f"model project --local-batch {value or 'empty'}", f"{project} --local-batch {shlex.quote(value)}",
            "--local-batch", _int_list_reason(value))
    numbers("model project", "--workers", ("0", "-1", "4097", "99999999999999999999", "abc"),  # the huge: 6e15 s a step
            "--instance-type n1-standard-4 --accelerator none --db {w}/t.db",
            lambda v: None if v == "abc" else "must be between 1 and 4096")
    add("model project --precision", f"{project} --precision fp7", "unknown precision")
    add("model project --precision bf16 on a V100",  # (it said no batch fits: at most 0 at bf16)
        "model project --instance-type p3.2xlarge --precision bf16 --db {w}/t.db", "needs BF16 tensor cores", "use amp")
    add("model project --precision amp on a CPU VM",  # (it had printed the fp32 numbers under amp)
        f"{project} --precision amp", "--precision amp is for GPUs", "n1-standard-4")
    add("model project --cloud", f"{project} --cloud nosuch", "unknown instance type")
    for name, spec in list(BAD_WORKLOADS.items())[:5]:
        add(f"model project --workload {name}", f"{project} --workload {spec}", WORKLOAD_REASONS[name])

    # plan
    plan = "plan --db {w}/t.db"
    add("plan --objective", f"{plan} --objective cheapest", "unknown objective")
    for value in ("abc", "-1", "0", "nan", "inf", "5 weeks"):
        add(f"plan --deadline {value}", f"{plan} --deadline {shlex.quote(value)}",
            "deadline must be positive" if value in ("0", "-1") else "cannot read deadline")  # -1: as 0 (a pass)
    for value in ("abc", "-5", "0", "nan", "inf", "$"):
        add(f"plan --budget {value}", f"{plan} --budget {shlex.quote(value)}",
            "cannot read budget" if value in ("abc", "$") else "budget must be a positive dollar amount")
    numbers("plan", "--max-workers", ("0", "-1", "abc", "1000000000"), "--db {w}/t.db",
            lambda v: None if v == "abc" else "must be between 1 and 4096")
    numbers("plan", "--max-price", ("0", "-1", "nan", "abc", "0.0001"), "--db {w}/t.db",
            lambda v: None if v == "abc" else "no vm type matches" if v == "0.0001" else "is not a finite positive number")
    numbers("plan", "--epochs", ("0", "-1", "nan", "inf", "1e30", "abc"), "--db {w}/t.db",
            lambda v: None if v == "abc" else "is not a number of epochs in (0, 10,000]")
    numbers("plan", "--top", ("0", "-1", "abc"), "--db {w}/t.db", lambda v: None if v == "abc" else "must be at least 1")
    for value in ("abc", "0", "-64", "", "3.5"):
        add(f"plan --batch {value or 'empty'}", f"{plan} --batch {shlex.quote(value)}", "--batch", _int_list_reason(value))
    for value in ("abc", "-1", "nan"):
        add(f"plan --startup {value}", f"{plan} --startup {value}",  # a negative one is read, and refused
            *(("--startup must be 0 or more",) if value == "-1" else ("cannot read --startup", "use a number with ms, s")))
    for value in ("100d", "90000"):  # a new user's pass: 100d was planned (mutation caught: no upper bound)
        add(f"plan --startup {value}", f"{plan} --startup {value}", "is over a day")
    add("plan --spot", f"{plan} --spot sometimes", "unknown spot choice")
    add("plan --precision", f"{plan} --precision fp7", "unknown precision")
    for value in ("My_Ckpts", "ab", "a--b"):
        add(f"plan --bucket {value}", f"{plan} --bucket {value}", "bucket name")
    add("plan --gpu --cpu", f"{plan} --gpu --cpu", "not both")
    add("plan --cloud unknown", f"{plan} --cloud nosuch", "--cloud nosuch is not in the catalog", "gcp")
    add("plan --region unknown", f"{plan} --region mars-north-1", "us-central1")
    add("plan --catalog inf price", f"{plan} --catalog {{in}}/catalog_inf_price.csv", "finite")
    add("plan --catalog zero price", f"{plan} --catalog {{in}}/catalog_zero_price.csv", "finite positive")
    add("plan --catalog spot above on-demand", f"{plan} --catalog {{in}}/catalog_dear_spot.csv", "above the on-demand")
    for option in ("--catalog", "--hardware", "--network", "--gpus"):
        for name in ("missing", "bad_utf8", "wrong_columns", "empty", "binary"):
            add(f"plan {option} {name}", f"{plan} {option} {BAD_CSV[name]}",
                (CATALOG_CSV_REASONS if option == "--catalog" else CSV_REASONS)[name])
    for name, path in UNWRITABLE.items():
        add(f"plan --plot {name}", f"{plan} --plot {path}", "cannot write", UNWRITABLE_REASONS[name])
    # PNG is what every --plot writes: a p.svg held PNG bytes
    add("plan --plot svg", f"{plan} --plot {{w}}/p.svg", "written as png", ".png name")
    add("preempt show --plot pdf", "preempt show --plot {w}/p.pdf", "written as png")
    for name, spec in BAD_WORKLOADS.items():
        add(f"plan --workload {name}", f"{plan} --workload {spec}", WORKLOAD_REASONS[name])
    for name, path in BAD_DBS.items():
        add(f"plan --db {name}", f"plan --db {path}", "cannot open the database", DB_REASONS[name])

    # train (fails before any worker starts)
    train = "train --steps 2 --db {w}/t.db --run-dir {w}/run"
    numbers("train", "--nproc", ("0", "-1", "abc", "100000"), "--steps 2 --db {w}/t.db --run-dir {w}/run",
            lambda v: None if v == "abc" else "allowed on this machine" if v == "100000" else "must be at least 1")
    numbers("train", "--global-batch", ("0", "-1", "abc", "100000000"), "--steps 2 --db {w}/t.db --run-dir {w}/run",
            lambda v: ("exceeds the training set",) if v == "100000000" else None if v == "abc" else "must be positive")
    for option, value in (("--policy", "fastest"), ("--mode", "async"), ("--emulate", "magic"),
                          ("--hetero-profile", "HL99"), ("--b-max-rule", "vibes")):
        add(f"train {option} {value}", f"{train} {option} {value}", "unknown", f"{value!r}; choose")
    for value in ("abc", "0", "-1", "nan", "1,abc", "1,2,3", "1,1e9", "1,0.5"):
        add(f"train --slowdown {value}", f"{train} --slowdown {shlex.quote(value)}",
            "the slowdown setting is for 3 workers, the run has 2" if value == "1,2,3" else
            "--slowdown must be comma-separated positive numbers" if "abc" in value else
            "slowdown factors above 100 are not emulated" if value == "1,1e9" else
            # a sleep cannot speed a rank up: 0.5 ran as 1 (mutation caught: only f > 0 checked)
            "slowdown factors are 1 (full speed) or more, got 0.5" if value == "1,0.5" else
            "slowdown factors must be positive numbers")
    for value in ("abc", "0", "-1", "nan"):
        add(f"train --capacities {value}", f"{train} --policy static --capacities {value}", "--capacities",
            "must be comma-separated numbers" if value == "abc" else "must be positive numbers")
    for name in ("missing", "not_json", "schedule_bad", "schedule_step", "schedule_nan", "schedule_order", "bad_utf8"):
        path = {"missing": "{in}/missing.json", "not_json": "{in}/not_json.json",
                "schedule_bad": "{in}/schedule_bad.json", "schedule_step": "{in}/schedule_step.json",
                "schedule_nan": "{in}/schedule_nan.json", "schedule_order": "{in}/schedule_order.json",
                "bad_utf8": "{in}/bad_utf8.csv"}[name]
        reason = {"missing": "not found", "not_json": "is not valid json", "schedule_bad": "must be a non-empty json list",
                  # mutation caught: int() on the step (2.7 ran as step 2)
                  "schedule_step": "step must be an integer", "schedule_nan": "step must be an integer",
                  # a new user's pass: "must start at step 0" for entries out of order (mutation: that order of checks)
                  "schedule_order": "slowdown schedule steps must be strictly increasing, got 20, 10",
                  "bad_utf8": "'utf-8' codec can't decode"}[name]
        add(f"train --slowdown-schedule {name}", f"{train} --slowdown-schedule {path}", "slowdown schedule", reason)
    add("train two slowdowns", f"{train} --slowdown 1,2 --hetero-profile HL2", "at most one of")
    at_least = {"--steps": 1, "--b-min": 1, "--b-max": 1, "--eval-every": 1, "--checkpoint-every": 0, "--loader-workers": 0}
    numbers("train", "--steps", ("0", "-1", "abc"), "--db {w}/t.db --run-dir {w}/run",
            lambda v: None if v == "abc" else "must be at least 1")
    numbers("train", "--epochs", ("0", "-1", "nan", "inf", "abc", "1e9"), "--db {w}/t.db --run-dir {w}/run",
            lambda v: None if v == "abc" else "must be at most 100,000" if v == "1e9" else "must be a positive number")
    numbers("train", "--target", ("nan", "inf", "abc"), "--steps 2 --db {w}/t.db --run-dir {w}/run",
            lambda v: None if v == "abc" else "must be a finite number")
    for option in ("--b-min", "--b-max"):
        numbers("train", option, ("0", "-1"), "--steps 2 --db {w}/t.db --run-dir {w}/run",
                lambda v, o=option: f"must be at least {at_least[o]}")
    add("train b-min above b-max", f"{train} --b-min 64 --b-max 8", "is above --b-max")
    numbers("train", "--dead-band", ("nan", "-0.1", "2", "abc"), "--steps 2 --db {w}/t.db --run-dir {w}/run",
            lambda v: None if v == "abc" else ("dead-band must be in [0, 1)",))
    numbers("train", "--adjust-every", ("0", "-1"), "--steps 2 --db {w}/t.db --run-dir {w}/run",
            lambda v: ("--adjust-every", "must be at least one step"))
    for option, bad in (("--eval-every", ("0", "-1")), ("--checkpoint-every", ("-1", "abc"))):
        numbers("train", option, bad, "--steps 2 --db {w}/t.db --run-dir {w}/run",
                lambda v, o=option: None if v == "abc" else f"must be at least {at_least[o]}")
    add("train --capacities not the ranks", f"{train} --nproc 2 --policy static --capacities 1,2,3", "3 capacities")
    add("train forward raises", "train --steps 3 --nproc 1 --db {w}/t.db --run-dir {w}/run --workload {in}/forward_raises.py",
        "forward broke")
    add("train forward raises, an existing empty run directory",  # emptied again: not even its .lock
        "train --steps 3 --nproc 1 --db {w}/t.db --run-dir {in}/adir --workload {in}/forward_raises.py", "forward broke")
    add("train nan loss, a run directory holding the user's files",  # theirs stay; the run's .lock goes
        "train --steps 3 --nproc 2 --db {w}/t.db --run-dir {in}/garbage --workload {in}/nan_loss.py", "the loss is nan")
    add("train nan loss", "train --steps 3 --nproc 1 --db {w}/t.db --run-dir {w}/run --workload {in}/nan_loss.py",
        "the loss is nan")
    add("train evaluate breaks", "train --steps 2 --nproc 1 --db {w}/t.db --run-dir {w}/run "
        "--workload {in}/evaluate_breaks.py", "evaluate broke")
    add("train --resume nothing to resume", f"{train} --resume", "checkpoint not found")
    add("train --resume asp", f"{train} --resume --mode asp", "--resume is for --mode bsp")
    add("train --resume and --resume-if-any", f"{train} --resume --resume-if-any",  # a pass: "checkpoint not found"
        "give one of --resume (a checkpoint must be there) and --resume-if-any")
    add("train --resume-if-any asp", f"{train} --resume-if-any --mode asp", "--resume-if-any is for --mode bsp")
    add("train --resume-if-any --force", f"{train} --resume-if-any --force",
        "give --resume-if-any (continue the run) or --force (start over), not both")
    add("train --precision fp8", f"{train} --precision fp8", "unknown precision 'fp8'")
    add("train --device gpu0", f"{train} --device gpu0", "not a device")
    add("train --device tpu", f"{train} --device xla", "thrifty trains on cpu or cuda")
    add("train --device cuda:99", f"{train} --device cuda:99", "no cuda device on this machine")
    add("train --precision bf16 asp", f"{train} --precision bf16 --mode asp", "--mode asp")
    # a new user's pass: asp trained past its target and wrote no stream, silently (mutation caught: no check)
    add("train --until-target asp", f"{train} --until-target --mode asp", "--until-target and --step-stream are for --mode bsp")
    add("train --step-stream asp", f"{train} --step-stream {{w}}/s.jsonl --mode asp",
        "--until-target and --step-stream are for --mode bsp")
    for name, path in UNWRITABLE_DIRS.items():  # refused before any rank starts (it was rank 0's traceback line)
        add(f"train --step-stream {name}", f"{train} --step-stream {path}/s.jsonl", "cannot write to --step-stream",
            UNWRITABLE_DIR_REASONS[name])
    numbers("train", "--loader-workers", ("-1", "abc"), "--steps 2 --db {w}/t.db --run-dir {w}/run",
            lambda v: None if v == "abc" else "must be at least 0")
    for name, path in UNWRITABLE_DIRS.items():
        add(f"train --run-dir {name}", f"train --steps 2 --db {{w}}/t.db --run-dir {path}",
            "cannot write to the run directory", UNWRITABLE_DIR_REASONS[name])
    for name, spec in BAD_WORKLOADS.items():
        add(f"train --workload {name}", f"{train} --workload {spec}", WORKLOAD_REASONS[name])
    for name, path in BAD_DBS.items():
        add(f"train --db {name}", f"train --steps 2 --run-dir {{w}}/run --db {path}", "cannot open the database",
            DB_REASONS[name])

    # preempt
    for name, path in {**BAD_CSV, "text": "{in}/lifetimes_text.csv", "negative": "{in}/lifetimes_negative.csv",
                       "nan": "{in}/lifetimes_nan.csv", "huge": "{in}/lifetimes_huge.csv", "event": "{in}/lifetimes_event.csv",
                       "censored_only": "{in}/lifetimes_censored.csv"}.items():
        reason = {**CSV_REASONS, "text": "is not a number", "negative": "must be a positive", "nan": "must be a positive",
                  "huge": "lifetime_s 1e15 is over 10 years: are they in seconds?", "event": "unknown event", "censored_only": "no preemptions in the data"}[name]
        add(f"preempt fit {name}", f"preempt fit {path}", reason)
    add("preempt fit --family", "preempt fit {in}/lifetimes_ok.csv --family gamma", "unknown lifetime model 'gamma'")
    add("preempt fit --method", "preempt fit {in}/lifetimes_ok.csv --method guess", "unknown fit method 'guess'")
    add("preempt fit --machine-type", "preempt fit {in}/lifetimes_ok.csv --machine-type n9-nosuch",
        "no lifetimes for machine type 'n9-nosuch'")
    for name, path in UNWRITABLE.items():
        add(f"preempt fit --out {name}", f"preempt fit {{in}}/lifetimes_ok.csv --out {path}", "cannot write",
            UNWRITABLE_REASONS[name])
    for name, value in {"unknown": "nosuch", "not_json": "{in}/not_json.json", "list": "{in}/list.json",
                        "bad_utf8": "{in}/bad_utf8.csv", "no_model": "{in}/no_model.json"}.items():
        reason = {"unknown": "unknown lifetime model", "not_json": "not valid json", "list": "json object",
                  "bad_utf8": "unknown lifetime model", "no_model": 'names its model ("model": one of'}[name]
        add(f"preempt show {name}", f"preempt show {value}", reason)
    for name, path in UNWRITABLE.items():
        add(f"preempt show --plot {name}", f"preempt show --plot {path}", "cannot write", UNWRITABLE_REASONS[name])
    schedule = "preempt schedule --job-hours 5"
    numbers("preempt schedule", "--job-hours", ("0", "-1", "nan", "inf", "abc", "1e9"),
            why=lambda v: ("h this lifetime model's checkpoint schedule takes", "give at most that") if v == "1e9"
            else None if v == "abc"
            else "is not a finite positive number")
    for option in ("--ckpt-cost", "--restart-cost", "--vm-age", "--mttf"):
        for value in ("abc", "-1", "nan"):
            add(f"preempt schedule {option} {value}", f"{schedule} {option} {value}",
                f"{option} must be" if value == "-1" else f"cannot read {option}")
    add("preempt schedule --ckpt-cost 0", f"{schedule} --ckpt-cost 0", "--ckpt-cost must be positive")
    add("preempt schedule --vm-age beyond", f"{schedule} --vm-age 30h", "past the model's longest lifetime")
    add("preempt schedule --policy", f"{schedule} --policy sometimes", "unknown checkpoint policy")
    add("preempt schedule --lifetime-model", f"{schedule} --lifetime-model nosuch", "unknown lifetime model")
    add("preempt schedule --lifetime-model not json", f"{schedule} --lifetime-model {{in}}/not_json.json", "not valid json")
    for value in ("abc", "0", "-1", "nan", "", "1,,2"):  # 1,,2: an empty item had been dropped in silence
        add(f"preempt reuse --job-hours {value or 'empty'}", f"preempt reuse --job-hours {shlex.quote(value)}",
            "--job-hours", "must be comma-separated numbers" if value in ("abc", "", "1,,2") else "must be positive numbers")
    for option in ("--ckpt-cost", "--restart-cost", "--startup"):
        add(f"preempt reuse {option} abc", f"preempt reuse {option} abc", f"cannot read {option}")
    # its DP grows with the square of the job: 1e9 h asked for 89 GiB (a traceback), 1,000 h ran for minutes
    add("preempt reuse --job-hours 1e9", "preempt reuse --job-hours 5,1e9", "1e+09 h job is beyond the reuse table")
    add("preempt reuse --job-hours 201", "preempt reuse --job-hours 201", "at most 200 h")
    add("preempt reuse --lifetime-model", "preempt reuse --lifetime-model nosuch", "unknown lifetime model")
    spot = "preempt spot --job-hours 5 --deadline 8h --spot-price 1 --on-demand-price 3"
    for option in ("--spot-price", "--on-demand-price", "--job-hours"):
        for value in ("0", "-1", "nan", "inf", "abc"):
            add(f"preempt spot {option} {value}", f"{spot} {option} {value}", option,
                "input should be a valid number" if value == "abc" else "is not a finite positive number")
    for value in ("0", "-1", "1000000000", "abc"):
        add(f"preempt spot --runs {value}", f"{spot} --runs {value}", "--runs",
            {"abc": "a valid integer", "1000000000": "less than or equal to 1000000"}.get(value,
                                                                                          "greater than or equal to 1"))
    for value in ("abc", "0", "-1"):
        add(f"preempt spot --deadline {value}", f"{spot} --deadline {value}",
            "--deadline must be positive" if value in ("0", "-1") else "cannot read --deadline")
    add("preempt spot --lifetimes", f"{spot} --lifetimes fake", "--lifetimes must be model or real")
    add("preempt spot --lifetime-model", f"{spot} --lifetime-model nosuch", "unknown lifetime model")
    add("preempt spot deadline shorter than the job", f"{spot} --deadline 1h", "shorter than the job")
    add("preempt spot price above on-demand", f"{spot} --spot-price 5", "above the --on-demand-price")

    # run
    add("run no command", "run", "no command to run")
    for name, command in (("missing command", "/nonexistent/cmd"), ("not executable", "{in}/afile"),
                          ("a folder", "{in}/adir")):
        add(f"run {name}", f"run --checkpoint-dir {{w}}/ck -- {command}", "cannot run",
            "not found, or not an executable file")
    # a new user's pass: the plan's torchrun line under the runner took no checkpoint request, a
    # notice read as a failure, and a kill left its ranks training (mutation caught: no refusal)
    torchrun = Path(sys.executable).parent / "torchrun"
    for name, prefix in (("torchrun", ""), ("torchrun after env", "env OMP_NUM_THREADS=2 ")):
        add(f"run {name}", f"run --checkpoint-dir {{w}}/ck -- {prefix}{torchrun} --standalone -m thrifty.train",
            "thrifty run does not run torchrun", "python -m thrifty.train --nproc N")
    add("run a shell's variable prefix", "run --checkpoint-dir {w}/ck -- OMP_NUM_THREADS=2 true",
        "cannot run 'OMP_NUM_THREADS=2'", "thrifty run -- env OMP_NUM_THREADS=2 ...")
    for name, path in UNWRITABLE_DIRS.items():
        add(f"run --checkpoint-dir {name}", f"run --checkpoint-dir {path} -- true", "cannot write",
            UNWRITABLE_DIR_REASONS[name])
    for option, values in (("--job-hours", ("-3", "0", "nan", "inf")), ("--time-scale", ("0", "-1", "nan", "inf")),
                           ("--ckpt-cost", ("abc", "-1")), ("--restart-cost", ("abc",)), ("--notice", ("abc", "-5")),
                           ("--kill", ("gently",)), ("--lifetime-model", ("nosuch",))):
        for value in values:
            reason = {"--kill": ("unknown kill mode",), "--lifetime-model": ("unknown lifetime model",),
                      "--job-hours": (option, "is not a finite positive number"),
                      "--time-scale": (option, "is not a finite positive number")}.get(
                option, (f"{option} must be",) if value.startswith("-") else (f"cannot read {option}",))
            add(f"run {option} {value}", f"run --checkpoint-dir {{w}}/ck {option} {value} -- true", *reason)

    # md run
    md = "md run --steps 10 --chunk 5 --out {w}/md"
    add("md run --system", f"{md} --system plasma", "unknown md system")
    numbers("md run", "--steps", ("0", "-1", "abc"), "--chunk 5 --out {w}/md",
            lambda v: None if v == "abc" else "must be positive")
    numbers("md run", "--chunk", ("0", "-1", "abc"), "--steps 10 --out {w}/md",
            lambda v: None if v == "abc" else "must be positive")
    add("md run --platform", f"{md} --platform Quantum", "unknown openmm platform")
    # numpy's generators take no negative seed: a traceback (and an empty md checkpoint folder) before
    for name, argv in (("md run", md), ("search", "search --trace {in}/trace_ok.csv --target-samples 1e5 "
                                                  "--noise-scale 100"),
                       ("train", train), ("run", "run --checkpoint-dir {w}/ck")):
        add(f"{name} --seed -1", f"{argv} --seed -1" + (" -- true" if name == "run" else ""),
            "--seed", "greater than or equal to 0")
    add("md run --chunk longer than --steps", "md run --steps 10 --chunk 20 --out {w}/md", "longer than the run")
    add("md run --checkpoint-dir of other files", f"{md} --checkpoint-dir {{in}}/garbage", "not checkpoints")
    add("md run --checkpoint-dir of damaged checkpoints", f"{md} --checkpoint-dir {{in}}/damaged", "none is intact")
    for name, path in UNWRITABLE_DIRS.items():
        add(f"md run --out {name}", f"md run --steps 10 --chunk 5 --out {path}", "cannot write to --out",
            UNWRITABLE_DIR_REASONS[name])
        add(f"md run --checkpoint-dir {name}", f"{md} --checkpoint-dir {path}", "cannot write to --checkpoint-dir",
            UNWRITABLE_DIR_REASONS[name])

    # search (fails before the first window)
    search = "search --trace {in}/trace_ok.csv --target-samples 1e5 --noise-scale 100"
    for name, path in UNWRITABLE.items():
        add(f"search --plot {name}", f"{search} --plot {path} --db {{w}}/t.db", "cannot write", UNWRITABLE_REASONS[name])
    for name, path in BAD_DBS.items():
        add(f"search --db {name}", f"{search} --db {path}", "cannot open the database", DB_REASONS[name])
    add("search --resume without --db", f"{search} --resume", "needs --db")
    add("search --resume nothing stored", f"{search} --resume --db {{w}}/t.db", "no search")
    add("search --start unknown type", f"{search} --start y:1:1:32", "not in the trace")
    local = "search --backend local --workload builtin:digits --target-samples 1e4 --noise-scale 100"
    add("search local --batches too big", f"{local} --batches 32,100000 --work-dir {{w}}/s", "exceeds the training set")
    add("search local --start unknown type", f"{local} --start y:1:1:32 --work-dir {{w}}/s", "not in the emulated types")
    add("search local --types missing", f"{local} --types {{w}}/none.csv --work-dir {{w}}/s", "not found")
    add("search sim without --trace", "search --target-samples 1e5 --noise-scale 100", "needs --trace")
    add("search sim a type of one local batch", "search --trace {in}/trace_one_batch.csv --target-samples 1e5 "
        "--noise-scale 100 --db {w}/t.db", "two local batch sizes", "x has one (32)")
    for column in ("local_batch", "num_workers"):
        add(f"search --trace {column} huge", f"search --trace {{in}}/trace_{column}_huge.csv --target-samples 1e5 "
            "--noise-scale 100 --db {w}/t.db", f"{column} 10000000000000000000 is beyond")
    add("search sim with local options", f"{search} --max-ranks 1 --work-dir {{w}}/s",
        "--max-ranks, --work-dir are for --backend local")
    # a sigma of 40 drew steps of 0 s (a ZeroDivisionError), one of 10 a job 77% faster than its oracle
    # nan was told "should be less than or equal to 1"
    numbers("search", "--measurement-noise", ("1.5", "40", "-0.1", "nan"), "--trace {in}/trace_ok.csv "
            "--target-samples 1e5 --noise-scale 100", lambda v: "is not a number in [0, 1]")
    numbers("search", "--target-samples", ("0", "-1", "nan", "1e300", "abc"),  # 1e300: a cost 300 digits long
            "--trace {in}/trace_ok.csv --noise-scale 100", lambda v: None if v == "abc" else "is not a positive number")
    for name, path in BAD_CSV.items():
        add(f"search --trace {name}", f"search --trace {path} --target-samples 1e5 --noise-scale 100", CSV_REASONS[name])
    for name in ("huge", "tiny"):  # 1e300 overflowed into "needs measurements at two local batch sizes"
        add(f"search --trace step time {name}", f"search --trace {{in}}/trace_step_{name}.csv --target-samples 1e5 "
            "--noise-scale 100", "step_time_s", "is outside 1e-06-1e+06 s")

    # md predict and md train-surrogate (the request is checked before a model is looked for)
    point = {"--h": "3.5", "--zp": "2", "--c": "0.5", "--d-plus": "0.474", "--d-minus": "0.627"}
    for option, values in (("--h", ("0", "-1", "nan", "inf", "abc")), ("--zp", ("0", "4", "2.5", "abc")),
                           ("--zn", ("-2", "1")), ("--c", ("0", "-0.5", "nan", "abc")),
                           ("--d-plus", ("0", "-1", "inf")), ("--d-minus", ("0", "nan"))):
        rest = " ".join(f"{k} {v}" for k, v in point.items() if k != option)
        field = {"--h": "h_nm", "--zp": "z+", "--zn": "z-", "--c": "c_molar", "--d-plus": "d_plus_nm",
                 "--d-minus": "d_minus_nm"}[option]
        rule = {"--zp": "(cation valency) must be 1, 2 or 3", "--zn": "(anion valency) must be -1"}.get(
            option, "must be a positive number")
        numbers("md predict", option, values, f"{rest} --surrogate {{in}}/adir",
                lambda v, f=field, r=rule: "input should be a valid" if v in ("abc", "2.5") else (f, r))
    predict = "md predict " + " ".join(f"{k} {v}" for k, v in point.items())
    # below an ion's diameter, as md run refuses it (a new user's pass: "2.21 from the nearest training run")
    add("md predict --h below the ions", "md predict --h 0.3 --zp 2 --c 0.5 --d-plus 0.474 --d-minus 0.627 "
        "--surrogate {in}/adir", "h_nm 0.3 nm is below the ion diameter 0.627 nm: the ions do not fit")
    add("md predict --surrogate empty folder", f"{predict} --surrogate {{in}}/adir", "surrogate.pt not found")
    add("md predict --surrogate missing", f"{predict} --surrogate {{w}}/none", "surrogate.pt not found")
    add("preempt spot --on-demand-price huge", "preempt spot --job-hours 8 --deadline 12h --spot-price 0.3 "
        "--on-demand-price 1e308", "--on-demand-price $1e+308/h is above $1000/h")  # costs overflowed to null
    add("md predict --surrogate a file", f"{predict} --surrogate {{in}}/afile", "afile is a file: give the folder")
    for name, path in UNWRITABLE.items():
        add(f"md predict --plot {name}", f"{predict} --surrogate {{in}}/adir --plot {path}", "cannot write",
            UNWRITABLE_REASONS[name])
    surrogate = "md train-surrogate --out {w}/model"
    add("md train-surrogate --runs missing", f"{surrogate} --runs {{w}}/none", "runs folder not found")
    add("md train-surrogate --runs empty", f"{surrogate} --runs {{in}}/adir", "no completed runs")
    add("md train-surrogate --runs a file", f"{surrogate} --runs {{in}}/afile", "afile is a file, not a runs folder")
    numbers("md train-surrogate", "--members", ("1", "0", "abc"), "--runs {in}/adir --out {w}/model",
            lambda v: None if v == "abc" else "must be 2 or more")
    for name, path in UNWRITABLE_DIRS.items():
        add(f"md train-surrogate --out {name}", f"md train-surrogate --runs {{in}}/adir --out {path}", "cannot write",
            UNWRITABLE_DIR_REASONS[name])

    # a workload whose make_model() builds no module: named before any process starts
    for command in ("profile --db {w}/t.db", "plan --db {w}/t.db", "train --steps 2 --db {w}/t.db --run-dir {w}/run",
                    "model project --instance-type n1-standard-4 --accelerator none --db {w}/t.db"):
        add(f"{command.split(' --')[0]} --workload not_module", f"{command} --workload {{in}}/not_module.py",
            "make_model() must return a torch.nn.Module")

    # the command line itself
    add("unknown command", "fly", "no such command")
    add("unknown option", "plan --fast", "no such option")
    add("missing value", "plan --objective", "requires an argument")
    add("unknown subcommand", "preempt guess", "no such command")
    return cases


def _int_list_reason(value: str) -> str:
    """What thrifty's comma-separated integer options say about `value`."""
    if not value:
        return "is empty"
    return "must be positive integers" if value.lstrip("-").isdigit() else "must be comma-separated integers"


CASES = _cases()


SAMPLES_OK = "num_nodes,num_workers,local_batch,step_time_s\n" + "".join(
    f"1,{n},{b},{0.002 + b * n * 1e-4 + 0.001 * (n > 1)}\n" for n in (1, 2, 4) for b in (16, 32, 64))


@pytest.fixture(scope="session")
def model_ok(tmp_path_factory) -> bytes:
    """A step-time model fitted (once for all cases) on SAMPLES_OK, as `model fit` writes it."""
    folder = tmp_path_factory.mktemp("model_ok")
    (folder / "samples_ok.csv").write_text(SAMPLES_OK)
    assert main(["model", "fit", "--samples", str(folder / "samples_ok.csv"), "--out", str(folder / "model_ok.json"),
                 "--json"]) == 0
    return (folder / "model_ok.json").read_bytes()


@pytest.fixture()
def folders(tmp_path, monkeypatch, model_ok):
    inputs, work = tmp_path / "in", tmp_path / "work"
    inputs.mkdir()
    work.mkdir()
    (inputs / "adir").mkdir()
    (inputs / "garbage").mkdir()
    (inputs / "garbage" / "notes.txt").write_text("not a checkpoint\n")
    (inputs / "damaged").mkdir()
    (inputs / "damaged" / "ckpt-000001.bin").write_bytes(b"THRIFTY1" + bytes(64))
    import sqlite3

    from thrifty.store import SCHEMA
    with sqlite3.connect(inputs / "foreign.db") as conn:
        conn.execute("CREATE TABLE notes (x)")
    (inputs / "locked").mkdir()
    with sqlite3.connect(inputs / "locked" / "t.db") as conn:  # a thrifty database whose folder
        conn.executescript(SCHEMA)                              # takes no journal (as if read-only)
    (inputs / "locked" / "t.db-journal").mkdir()
    for name, content in INPUT_FILES.items():
        (inputs / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    (inputs / "script.sh").chmod(0o755)
    (inputs / "afile").chmod(stat.S_IRUSR | stat.S_IWUSR)
    # valid inputs, for the cases where another option is the bad one
    (inputs / "samples_ok.csv").write_text(SAMPLES_OK)
    (inputs / "configs_ok.csv").write_text("num_nodes,num_workers,local_batch\n1,2,32\n")
    (inputs / "lifetimes_ok.csv").write_text(
        "lifetime_s,event\n" + "".join(f"{600 * (i + 1)},{'preempted' if i % 5 else 'stopped'}\n" for i in range(40)))
    (inputs / "model_ok.json").write_bytes(model_ok)
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(work))  # nothing may land in the default database's folder either
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "matplotlib"))
    monkeypatch.delenv("THRIFTY_CHECKPOINT_DIR", raising=False)
    return inputs, work


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"<dir>") for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("argv, reason", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_bad_input_gets_one_line_and_exit_code_2(folders, capsys, argv, reason):
    inputs, work = folders
    capsys.readouterr()
    before = _snapshot(inputs)
    code = main(shlex.split(argv.format(**{"in": inputs, "w": work})))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, f"exit {code}; stderr: {err!r}"
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("error: ") and all(word.lower() in lines[0].lower() for word in reason), (lines[0], reason)
    assert _snapshot(work) == {}, f"left behind: {sorted(_snapshot(work))}"
    assert _snapshot(inputs) == before


def test_there_are_at_least_240_cases_each_with_its_reason():
    """(An empty reason cannot get into the table: `add` refuses it.)"""
    assert len(CASES) >= 240
    assert len({case[0] for case in CASES}) == len(CASES)
