# SPDX-License-Identifier: MIT
import re

import pytest

from thrifty.catalog import CatalogFilter, Hardware, load_catalog, load_catalog_file
from thrifty.errors import CatalogError

HEADER = "cloud,instance_type,vcpus,memory_gib,accelerator,accelerator_count,price_per_hour,spot_price_per_hour,region,zone\n"


def test_bundled_catalog_covers_three_clouds():
    vms = load_catalog()
    assert {vm.cloud for vm in vms} == {"aws", "gcp", "azure"}
    assert all(vm.price_per_hour > 0 and vm.instance_type for vm in vms)


def test_gcp_gpu_vm_price_is_host_plus_attachment():
    vms = {(vm.instance_type, vm.accelerator, vm.accelerator_count): vm for vm in load_catalog()}
    a2 = vms[("a2-highgpu-1g", "A100", 1)]
    assert a2.price_per_hour == pytest.approx(0.73948 + 2.93391)  # SOURCE.md's check
    assert ("n1-standard-16", "V100", 1) not in vms  # V100 x1 allows at most 12 vCPUs
    assert ("n1-standard-8", "V100", 1) in vms
    assert ("g2-standard-24", "L4", 2) in vms


def test_skypilot_format_is_detected(tmp_path):
    path = tmp_path / "lambda" / "vms.csv"
    path.parent.mkdir()
    path.write_text("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region\n"
                    "gpu_1x_a100,A100,1,30,200,,1.29,,us-east-1\n"
                    "gpu_1x_a100,A100,1,30,200,,1.29,,us-east-1\n")
    (vm,) = load_catalog_file(path)
    assert (vm.cloud, vm.instance_type, vm.accelerator, vm.price_per_hour) == ("lambda", "gpu_1x_a100", "A100", 1.29)
    assert vm.spot_price_per_hour is None


@pytest.mark.parametrize("row, named", [("gpu_1x_a100,A100,1,30,200,,1.29,nan,us-east-1", "column 'SpotPrice'"),
                                        ("gpu_1x_a100,A100,1,30,200,,inf,,us-east-1", "column 'Price'"),
                                        ("gpu_1x_a100,A100,1,0,200,,1.29,,us-east-1", "columns 'vCPUs' and 'MemoryGiB'"),
                                        ("gpu_1x_a100,A100,1,30,200,,1.29,,", "column 'Region'")])
def test_a_skypilot_files_errors_name_its_own_columns(tmp_path, row, named):
    """Mutation caught: thrifty's names (spot_price_per_hour) for a file whose column is SpotPrice."""
    path = tmp_path / "lambda" / "vms.csv"
    path.parent.mkdir()
    path.write_text("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region\n"
                    + row + "\n")
    with pytest.raises(CatalogError, match=re.escape(named)):
        load_catalog_file(path)


def test_user_catalog_in_native_format(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + "aws,x1.big,16,64,,,0.5,0.2,us-west-2,\n")
    (vm,) = load_catalog([path], bundled=False)
    assert vm.vcpus == 16 and vm.spot_price_per_hour == 0.2 and not vm.is_gpu


@pytest.mark.parametrize("content, message", [
    ("cloud,instance_type,price_per_hour\naws,a,1\n", "missing columns"),
    (HEADER + "aws,a,4,16,,,-1,,r,\n", "finite positive"),
    (HEADER + "aws,a,4,16,,,abc,,r,\n", "not a number"),
    (HEADER, "no rows"),
])
def test_bad_catalog_files(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(CatalogError, match=message):
        load_catalog_file(path)


def test_filters_and_hardware():
    vms = load_catalog()
    gpus = CatalogFilter(clouds=["aws"], gpu=True, accelerator="h100").apply(vms)
    assert gpus and all(vm.accelerator == "H100" and vm.cloud == "aws" for vm in gpus)
    # a GPU's name asks for its variants too, not for other GPUs it begins (mutation caught: an exact
    # match, which left out the A100-80GB; a bare prefix, which took A100 and A10G for A10)
    a100 = {vm.accelerator for vm in CatalogFilter(accelerator="A100").apply(vms)}
    assert a100 == {"A100", "A100-80GB"}
    assert {vm.accelerator for vm in CatalogFilter(accelerator="a10").apply(vms)} == {"A10"}
    # NAME:COUNT, as the SkyPilot task and `model project --accelerator` write it (mutation caught:
    # `T4:1` matched no VM type)
    t4x1 = CatalogFilter(accelerator="T4:1").apply(vms)
    assert t4x1 and {(vm.accelerator, vm.accelerator_count) for vm in t4x1} == {("T4", 1)}
    assert len(CatalogFilter(accelerator="T4").apply(vms)) > len(t4x1)
    for bad in ("T4:four", "T4:0", "T4:\u00b2"):  # a superscript two is a digit to str.isdigit, not to int()
        with pytest.raises(CatalogError, match="NAME:COUNT"):
            CatalogFilter(accelerator=bad)
    cheap = CatalogFilter(max_price_per_hour=0.2, gpu=False).apply(vms)
    assert cheap and all(vm.price_per_hour <= 0.2 for vm in cheap)
    hw = Hardware.load()
    p5 = next(vm for vm in gpus if vm.instance_type == "p5.48xlarge")
    assert hw.gpu(p5).fp32_tflops == pytest.approx(66.9) and hw.network_gbps(p5) == 3200 and p5.ranks_per_node == 8
    n2 = next(vm for vm in vms if vm.instance_type == "n2-standard-4")
    assert hw.network_gbps(n2) == 8  # 2 Gbit/s per vCPU on GCP
    assert hw.cpu_factor(n2) == pytest.approx(1.05)


# --- GCP: a GPU type exists only as host + its GPUs; GPU-only host families are never CPU VMs ---

GPU_ONLY_FAMILIES = {"g2", "a2", "a3"}  # Google Cloud's accelerator-optimized families


def _csv_rows(path) -> list[dict]:
    import csv
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _raw_gcp():
    """The bundled gcp.csv read independently of the loader: host rows and GPU attachment rows."""
    from thrifty.data import data_path
    rows = _csv_rows(data_path("catalog", "gcp.csv"))
    hosts = {r["instance_type"]: r for r in rows if r["instance_type"]}
    attachments = {(r["accelerator"], int(r["accelerator_count"])): r for r in rows if not r["instance_type"]}
    return hosts, attachments


def _pairing_rows() -> list[dict]:
    from thrifty.data import data_path
    return _csv_rows(data_path("gcp_gpu_pairing.csv"))


def _family(instance_type: str) -> str:
    return instance_type.split("-", 1)[0]


def _gcp_vms_to_check():
    """Every bundled GCP VM that is a GPU VM or belongs to a GPU-only family."""
    return [vm for vm in load_catalog() if vm.cloud == "gcp"
            and (vm.is_gpu or _family(vm.instance_type) in GPU_ONLY_FAMILIES)]


def test_pairing_table_marks_the_gpu_only_families():
    flags = {}
    for row in _pairing_rows():
        flags.setdefault(_family(row["host_pattern"]), set()).add(row["host_gpu_only"])
    assert {family for family, values in flags.items() if values == {"yes"}} == GPU_ONLY_FAMILIES
    assert flags["n1"] == {"no"}  # N1 hosts are CPU VMs too
    assert all(len(values) == 1 for values in flags.values())


def test_no_bundled_cpu_vm_of_a_gpu_only_family():
    vms = [vm for vm in load_catalog() if vm.cloud == "gcp"]
    offenders = [vm.instance_type for vm in vms
                 if not vm.is_gpu and _family(vm.instance_type) in GPU_ONLY_FAMILIES]
    assert offenders == []
    assert any(vm.instance_type == "n1-standard-4" and not vm.is_gpu for vm in vms)


def test_every_gcp_gpu_vm_costs_its_host_row_plus_its_attachment_row():
    hosts, attachments = _raw_gcp()
    checked = _gcp_vms_to_check()
    assert len(checked) > 30
    for vm in checked:
        host, gpu = hosts[vm.instance_type], attachments.get((vm.accelerator, vm.accelerator_count))
        assert gpu is not None, f"{vm.label}: no attachment row for {vm.accelerator} x{vm.accelerator_count}"
        assert vm.price_per_hour == pytest.approx(
            float(host["price_per_hour"]) + float(gpu["price_per_hour"]))
        spot = (float(host["spot_price_per_hour"]) + float(gpu["spot_price_per_hour"])
                if host["spot_price_per_hour"] and gpu["spot_price_per_hour"] else None)
        if spot is not None and spot <= vm.price_per_hour:
            assert vm.spot_price_per_hour == pytest.approx(spot)
        else:  # none in the source, or dearer than on-demand (a source error): no spot offer
            assert vm.spot_price_per_hour is None


def test_no_vm_offers_spot_dearer_than_on_demand_and_gpu_counts_are_real():
    vms = load_catalog()
    assert all(vm.spot_price_per_hour is None or vm.spot_price_per_hour <= vm.price_per_hour for vm in vms)
    # GPUs per VM: at most 8 on every bundled type but GCP's a2-megagpu-16g (16 A100)
    assert all(vm.accelerator_count <= 8 for vm in vms if vm.instance_type != "a2-megagpu-16g")
    nd_h100 = next(vm for vm in vms if vm.instance_type == "Standard_ND96isr_H100_v5")
    assert nd_h100.accelerator_count == 8


def test_gcp_types_sold_as_spot_or_flex_start_only_are_not_offered():
    """a3-highgpu-1g/2g/4g have no on-demand offer on Google Cloud, and the bundled H100 rows' spot
    prices are refused (above on-demand): no VM of them, so no plan names one (data/HARDWARE.md).
    Pairing them again with their H100 rows puts them back and fails this."""
    gcp = {vm.instance_type for vm in load_catalog() if vm.cloud == "gcp"}
    assert "a3-highgpu-8g" in gcp
    assert {"a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g"}.isdisjoint(gcp)


def test_gcp_accelerator_counts_match_the_pairing_table():
    import fnmatch
    rules = _pairing_rows()
    for vm in _gcp_vms_to_check():
        allowed = [r for r in rules if fnmatch.fnmatchcase(vm.instance_type, r["host_pattern"])
                   and r["accelerator"] == vm.accelerator
                   and int(r["accelerator_count"]) == vm.accelerator_count
                   and (not r["max_host_vcpus"] or vm.vcpus <= float(r["max_host_vcpus"]))]
        assert allowed, f"{vm.label}: {vm.accelerator} x{vm.accelerator_count} is not in the pairing table"
    # and the other way: every GPU-only host with its attachment row is there, exactly once
    hosts, attachments = _raw_gcp()
    gpu_vms = [(vm.instance_type, vm.accelerator, vm.accelerator_count) for vm in _gcp_vms_to_check()]
    for rule in rules:
        if rule["host_gpu_only"] != "yes" or rule["host_pattern"] not in hosts:
            continue
        if (rule["accelerator"], int(rule["accelerator_count"])) in attachments:
            key = (rule["host_pattern"], rule["accelerator"], int(rule["accelerator_count"]))
            assert gpu_vms.count(key) == 1, key


def test_every_gpu_vm_has_hardware_data():
    hw = Hardware.load()
    vms = [vm for vm in load_catalog() if vm.is_gpu] + _gcp_vms_to_check()
    for vm in vms:
        spec = hw.gpu(vm)  # raises CatalogError for an accelerator without a gpu row
        assert spec.fp32_tflops > 0 and spec.mem_bw_gbs > 0 and spec.memory_gib > 0, vm.label


def test_user_gcp_catalogs_follow_the_same_rules(tmp_path):
    path = tmp_path / "gcp" / "vms.csv"  # SkyPilot's columns; the cloud comes from the path
    path.parent.mkdir()
    path.write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,SpotPrice,Region,"
        "AvailabilityZone\n"
        "g2-standard-24,,,24,96,0.88,0.45,us-east1,us-east1-b\n"
        "g2-standard-4,,,4,16,0.15,0.07,us-east1,us-east1-b\n"
        "a3-highgpu-1g,,,26,234,1.18,0.64,us-east1,us-east1-b\n"
        "n1-standard-4,,,4,15,0.19,0.06,us-east1,us-east1-b\n"
        ",L4,2,,,1.12,0.57,us-east1,us-east1-b\n"
        ",L4,1,,,0.56,,us-east1,us-east1-b\n"
        ",T4,1,,,0.35,0.19,us-east1,us-east1-b\n")
    vms = {(vm.instance_type, vm.accelerator_count): vm for vm in load_catalog_file(path)}
    assert set(vms) == {("g2-standard-24", 2), ("g2-standard-4", 1), ("n1-standard-4", 0),
                        ("n1-standard-4", 1)}  # no CPU g2, no a3 at all (no H100 row)
    assert vms[("g2-standard-24", 2)].price_per_hour == pytest.approx(0.88 + 1.12)
    assert vms[("g2-standard-24", 2)].spot_price_per_hour == pytest.approx(0.45 + 0.57)
    assert vms[("g2-standard-4", 1)].spot_price_per_hour is None  # the GPU row has no spot price
    native = tmp_path / "mine.csv"
    native.write_text(HEADER + "gcp,a2-highgpu-1g,12,85,,,0.74,0.39,us-central1,\n"
                               "aws,g2-standard-4,4,16,,,0.1,,us-east-1,\n")
    assert [(vm.cloud, vm.instance_type) for vm in load_catalog_file(native)] == [("aws", "g2-standard-4")]


def test_cli_cpu_list_has_no_gpu_only_gcp_types(run_cli):
    import json
    code, out, _ = run_cli("catalog", "list", "--cpu", "--cloud", "gcp", "--json")
    types = [vm["instance_type"] for vm in json.loads(out)]
    assert code == 0 and "n1-standard-4" in types
    assert [t for t in types if _family(t) in GPU_ONLY_FAMILIES] == []
    code, out, _ = run_cli("catalog", "list", "--gpu", "--cloud", "gcp", "--json")
    g2 = [vm for vm in json.loads(out) if vm["instance_type"] == "g2-standard-24"]
    assert code == 0 and [(vm["accelerator"], vm["accelerator_count"]) for vm in g2] == [("L4", 2)]
    assert g2[0]["price_per_hour"] == pytest.approx(0.88075 + 1.12008)


def test_profile_rejects_an_unknown_instance_type(run_cli, tmp_path):
    code, _, err = run_cli("profile", "--instance-type", "n1-standard-5", "--db", tmp_path / "db")
    assert code == 2 and "not in the catalog" in err and "n1-standard-4" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "db").exists()
    # a type from a --catalog file passes the check (the bad --workers stops it right after)
    mine = tmp_path / "mine.csv"
    mine.write_text(HEADER + "aws,my-box,8,32,,,0.4,,us-east-1,\n")
    for args in (["--instance-type", "my-box", "--catalog", mine], ["--instance-type", "n1-standard-4"],
                 ["--instance-type", "local"]):
        code, _, err = run_cli("profile", *args, "--workers", "x", "--db", tmp_path / "db")
        assert code == 2 and "--workers" in err and "not in the catalog" not in err


def test_a_profile_as_a_vm_with_other_than_this_machines_cpu_count_is_refused(run_cli, tmp_path, monkeypatch):
    # a new user's pass: profiled on 2 cores as c5.2xlarge (8 vCPUs), the plan priced that VM as
    # "measured" at 2 cores' speed and would launch it with 1 thread a rank. Mutation caught: no check
    import thrifty.train.busy as busy
    mine = tmp_path / "mine.csv"
    mine.write_text(HEADER + "aws,my-box,8,32,,,0.4,,us-east-1,\n")
    monkeypatch.setattr(busy, "cores", lambda: 2)
    code, _, err = run_cli("profile", "--instance-type", "my-box", "--catalog", mine, "--steps", "2",
                           "--db", tmp_path / "db")
    assert code == 2 and "my-box has 8 vCPUs and this machine has 2 usable CPUs" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "db").exists()
    # the same VM type on a machine of its size passes the check, on to the profile
    import thrifty.pipeline
    from thrifty.errors import ThriftyError

    def profiled(store, workload, settings, report):
        raise ThriftyError(f"profiling as {settings.instance_type}")
    monkeypatch.setattr(busy, "cores", lambda: 8)
    monkeypatch.setattr(thrifty.pipeline, "profile_and_store", profiled)
    code, _, err = run_cli("profile", "--instance-type", "my-box", "--catalog", mine, "--db", tmp_path / "db")
    assert code == 2 and "profiling as my-box" in err


SKYPILOT_AWS = ("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,"
                "AvailabilityZone\n"
                "p3.2xlarge,V100,1,8,61,,3.06,0.95,us-east-1,use1-az1\n"
                "p3.2xlarge,V100,1,8,61,,3.06,0.91,us-east-1,use1-az2\n"
                "p3.2xlarge,V100,1,8,61,,3.06,1.02,us-east-1,use1-az4\n"
                "p3.2xlarge,V100,1,8,61,,3.06,0.99,us-west-2,usw2-az1\n"
                "p3.2xlarge,V100,1,8,61,,3.06,0.97,us-west-2,usw2-az2\n"
                "p3.2xlarge,V100,1,8,61,,3.305,1.1,eu-west-1,euw1-az1\n")


def test_a_multi_region_catalog_keeps_one_row_per_region_at_its_cheapest_zone(tmp_path):
    """Mutations: the first zone's row kept (spot 0.95, not 0.91), regions merged into one row."""
    path = tmp_path / "aws" / "vms.csv"
    path.parent.mkdir()
    path.write_text(SKYPILOT_AWS)
    vms = {vm.region: vm for vm in load_catalog_file(path)}
    assert sorted(vms) == ["eu-west-1", "us-east-1", "us-west-2"]
    assert (vms["us-east-1"].zone, vms["us-east-1"].spot_price_per_hour) == ("use1-az2", 0.91)
    assert (vms["us-west-2"].zone, vms["us-west-2"].spot_price_per_hour) == ("usw2-az2", 0.97)
    assert vms["eu-west-1"].price_per_hour == 3.305


def test_region_filters_a_user_catalog_and_an_unknown_region_names_the_known_ones(tmp_path, run_cli):
    """What `plan --region` and `catalog list --region` use. Mutations: the region filter ignored
    (three p3.2xlarge rows), the error without the regions there are."""
    import json
    path = tmp_path / "aws" / "vms.csv"
    path.parent.mkdir()
    path.write_text(SKYPILOT_AWS)
    code, out, _ = run_cli("catalog", "list", "--catalog", path, "--region", "us-west-2", "--json")
    assert code == 0 and [(vm["instance_type"], vm["region"], vm["spot_price_per_hour"])
                          for vm in json.loads(out)] == [("p3.2xlarge", "us-west-2", 0.97)]
    code, out, _ = run_cli("catalog", "list", "--catalog", path, "--region", "eu-west-1", "--region", "us-east-1",
                           "--accelerator", "V100", "--cloud", "aws", "--max-price", "4", "--json")
    assert code == 0 and sorted((vm["region"], vm["price_per_hour"]) for vm in json.loads(out)) == [
        ("eu-west-1", 3.305), ("us-east-1", 3.06)]  # the file's row replaces the bundled one
    code, _, err = run_cli("catalog", "list", "--region", "us-west-2")
    assert code == 2 and "us-east-1" in err and "us-central1" in err and "eastus" in err
    code, out, _ = run_cli("catalog", "list", "--region", "US-EAST-1", "--cloud", "AWS", "--json")  # as --cloud AWS
    assert code == 0 and {vm["region"] for vm in json.loads(out)} == {"us-east-1"}
    code, _, err = run_cli("catalog", "list", "--catalog", path, "--region", "ap-south-1")
    assert code == 2 and "us-west-2" in err and "eu-west-1" in err


def test_plan_rows_of_one_type_in_two_regions_each_name_their_region(tmp_path, run_cli, profiled_db):
    """Two regions of one catalog printed `aws:p3.2xlarge 1 x 1 ...` twice, told apart by the cost
    alone. Mutation: the region line left out of the VM type cell. (On T4s: the V100 of p3 is no
    longer offered, catalog.torch_cuda.)"""
    path = tmp_path / "aws" / "vms.csv"
    path.parent.mkdir()
    path.write_text(SKYPILOT_AWS.replace("p3.2xlarge,V100,1,8,61", "g4dn.xlarge,T4,1,4,16"))
    code, out, err = run_cli("plan", "--db", profiled_db, "--workload", "builtin:digits", "--catalog", path,
                             "--cloud", "aws", "--gpu", "--region", "us-west-2", "--region",
                             "eu-west-1", "--max-workers", "1", "--plot", tmp_path / "p.png")
    assert code == 0, err
    table = out.split("Pareto front")[0]
    assert "us-west-2" in table and "eu-west-1" in table
    code, out, err = run_cli("plan", "--db", profiled_db, "--workload", "builtin:digits", "--catalog", path,
                             "--cloud", "aws", "--gpu", "--region", "us-west-2",
                             "--max-workers", "1", "--plot", tmp_path / "p.png")
    assert code == 0 and "us-west-2" not in out.split("Pareto front")[0]  # one region: no line for it


def test_type_names_take_the_cloud_prefix_the_plan_prints():
    """Mutations: the `cloud:` prefix not stripped (nothing found), the prefix ignored (gcp:p3.2xlarge
    finds AWS's type)."""
    from thrifty.catalog.names import find_type, split_type_name
    assert split_type_name("aws:p5.48xlarge") == ("aws", "p5.48xlarge")
    assert split_type_name("p5.48xlarge") == (None, "p5.48xlarge")
    vms = load_catalog()
    assert [vm.cloud for vm in find_type(vms, "aws:p3.2xlarge")] == ["aws"]
    assert find_type(vms, "gcp:p3.2xlarge") == [] and find_type(vms, "p3.2xlarge", "gcp") == []
    assert find_type(vms, "AWS:p3.2xlarge") == find_type(vms, "p3.2xlarge")
    for bad in ("aws:", ":p3.2xlarge"):
        with pytest.raises(CatalogError, match="CLOUD:TYPE"):
            split_type_name(bad)
    with pytest.raises(CatalogError, match="not on gcp"):
        find_type(vms, "aws:p3.2xlarge", "gcp")


def test_every_command_taking_an_instance_type_takes_cloud_type(run_cli, tmp_path):
    """catalog show and model project accept `aws:p3.2xlarge` as printed by the plan, profile
    `aws:c5.4xlarge` (a CPU type: it measures this machine's CPUs); a bad option after the type
    stops model project and profile before they profile anything."""
    import json
    code, out, _ = run_cli("catalog", "show", "aws:p3.2xlarge", "--json")
    assert code == 0 and [row["cloud"] for row in json.loads(out)] == ["aws"]
    code, _, err = run_cli("model", "project", "--instance-type", "aws:p3.2xlarge", "--workers", "0",
                           "--db", tmp_path / "db")
    assert code == 2 and "--workers must be between 1 and 4096" in err
    code, _, err = run_cli("profile", "--instance-type", "aws:c5.4xlarge", "--workers", "x", "--db", tmp_path / "db")
    assert code == 2 and "--workers" in err and "not in the catalog" not in err
    code, _, err = run_cli("catalog", "show", "gcp:p3.2xlarge")
    assert code == 2 and "not in the catalog of gcp (it is aws's)" in err  # mutation caught: no hint
    code, _, err = run_cli("catalog", "show", "p3.2xlarge", "--cloud", "gcp")
    assert code == 2 and "not in the catalog of gcp (it is aws's)" in err
    assert not (tmp_path / "db").exists()


def test_a_rate_a_gpu_does_not_have_is_none_not_nan(run_cli):
    # mutation caught: the NaN passed through ("nan" in the table, NaN in the JSON, which strict
    # parsers refuse): a P100 has no FP16 tensor cores
    import json
    code, out, _ = run_cli("catalog", "show", "gcp:n1-standard-2", "--json")
    rows = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    p100 = [r for r in rows if r["accelerator"] == "P100"]
    assert code == 0 and p100 and all(r["gpu_tensor_tflops_fp16"] is None for r in p100)
    code, out, _ = run_cli("catalog", "show", "gcp:n1-standard-2")
    assert code == 0 and "nan" not in out


def test_user_catalog_prices_must_be_finite_and_spot_not_above_on_demand(tmp_path):
    """Mutations: inf accepted as a price; a price of 0 accepted (the planner divided by it and
    crashed); a dearer spot price dropped silently in a user's file."""
    path = tmp_path / "mine.csv"
    for row, message in (("aws,x1.big,16,64,,,inf,0.2,us-west-2,", "finite"),
                         ("aws,x1.big,16,64,,,0.5,inf,us-west-2,", "finite"),
                         ("aws,x1.big,16,64,,,0,,us-west-2,", "'price_per_hour' must be a finite positive"),
                         ("aws,x1.big,16,64,,,0.5,0,us-west-2,", "'spot_price_per_hour' must be a finite positive"),
                         ("aws,x1.big,16,64,,,0.5,0.7,us-west-2,", "above the on-demand"),
                         # a new user's pass: 1e9 vCPUs became OMP_NUM_THREADS=1000000000 in the launch line
                         ("aws,x1.big,1e9,64,,,0.5,,us-west-2,", "'vcpus' is 1e\\+09, above 4096"),
                         ("aws,x1.big,16,1e9,,,0.5,,us-west-2,", "'memory_gib' is 1e\\+09 GiB, above 65536")):
        path.write_text(HEADER + row + "\n")
        with pytest.raises(CatalogError, match=message):
            load_catalog([path], bundled=False)


def test_skypilot_rows_without_a_price_are_left_out_with_a_warning(tmp_path, caplog):
    """SkyPilot's own vms.csv holds rows with an empty or zero Price (AWS p5e.48xlarge, GCP's
    a4-highgpu-8g host): they are left out, said once, and the file is used; a user's file in
    thrifty's columns still refuses them (above). Mutation caught: the row parsed (the whole file
    refused, "column 'Price' is empty")."""
    path = tmp_path / "aws" / "vms.csv"
    path.parent.mkdir()
    path.write_text("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,SpotPrice,Region,AvailabilityZone\n"
                    "c5.2xlarge,,,8,16,0.34,0.1,us-west-2,us-west-2a\n"
                    "p5e.48xlarge,H200,8,192,2048,,,us-west-2,us-west-2a\n"
                    "e2-micro,,,0.25,1,0.0,,us-west-2,us-west-2a\n")
    with caplog.at_level("WARNING"):
        vms = load_catalog_file(path)
    assert [vm.instance_type for vm in vms] == ["c5.2xlarge"]
    assert "2 row(s) without an on-demand price left out: p5e.48xlarge (line 3), e2-micro (line 4)" in caplog.text



def test_paired_gcp_gpu_prices_carry_no_binary_residue():
    """Host + GPU prices print as decimals (mutation caught: the plain float sum, 0.31915000000000004)."""
    for vm in load_catalog():
        for price in (vm.price_per_hour, vm.spot_price_per_hour):
            assert price is None or len(repr(price).split(".")[-1]) <= 6, (vm.label, price)


def test_a_type_with_several_accelerators_needs_one_named():
    """GCP's n1-standard-8 comes bare and with T4/P4/V100/P100 attached: `model project` took the
    first row (the bare host) for a plan printed with four T4s. Mutations: the first row taken
    silently; the accelerator's count ignored (T4:1 for T4:4)."""
    from thrifty.catalog.names import find_type, one_hardware
    rows = find_type(load_catalog(), "gcp:n1-standard-8")
    with pytest.raises(CatalogError, match="several accelerators: pass --accelerator with one of .*T4:4.*none"):
        one_hardware(rows, "gcp:n1-standard-8")
    four = one_hardware(rows, "gcp:n1-standard-8", "t4:4")
    assert (four.accelerator, four.accelerator_count) == ("T4", 4)
    assert one_hardware(rows, "gcp:n1-standard-8", "none").accelerator is None
    with pytest.raises(CatalogError, match="'T4:3': gcp:n1-standard-8 comes with"):
        one_hardware(rows, "gcp:n1-standard-8", "T4:3")
    p3 = find_type(load_catalog(), "aws:p3.2xlarge")
    assert one_hardware(p3, "aws:p3.2xlarge").accelerator == "V100"  # one kind of hardware: no option needed


def test_a_user_row_replaces_the_bundled_row_of_its_type_and_region(tmp_path):
    """A negotiated price for aws:p3.2xlarge in us-east-1 replaces the bundled row. Mutation: both
    kept (the plan ranked the same machine twice, and its SkyPilot task could not tell them apart)."""
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + "aws,p3.2xlarge,8,61,V100,1,1.0,0.5,us-east-1,\n")
    rows = [vm for vm in load_catalog([path]) if (vm.cloud, vm.instance_type) == ("aws", "p3.2xlarge")]
    assert [(vm.region, vm.price_per_hour, vm.spot_price_per_hour) for vm in rows] == [("us-east-1", 1.0, 0.5)]


def test_a_type_twice_in_one_region_of_a_users_file(tmp_path):
    """Zones may repeat a type with their own spot prices (the cheapest is kept); other specs or
    on-demand prices for the same type and region are refused. Mutation: the row with the cheaper
    spot price kept silently (an 8-vCPU $2 row over a 64-vCPU $1 one)."""
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + "c,x1,8,16,,,2,0.5,r1,a\nc,x1,8,16,,,2,0.4,r1,b\n")
    (vm,) = load_catalog([path], bundled=False)
    assert (vm.zone, vm.spot_price_per_hour) == ("b", 0.4)
    path.write_text(HEADER + "c,x1,8,16,,,2,0.5,r1,a\nc,x1,64,512,,,1,0.5,r1,b\n")
    with pytest.raises(CatalogError, match="c:x1 in r1 appears twice with other specs"):
        load_catalog([path], bundled=False)


def test_two_user_files_must_agree_on_a_types_machine_and_a_later_price_is_said(tmp_path, caplog):
    """A new user's pass: two --catalog files giving one type 8 and 64 vCPUs were merged in silence, the
    last file winning. Now other hardware is refused naming both files, and another price replaces the
    earlier with a warning. Mutations caught: the merge unchecked; the warning at debug level."""
    import logging
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text(HEADER + "c,x1,8,32,,,1.0,0.5,r1,\n")
    second.write_text(HEADER + "c,x1,64,512,,,2.0,0.5,r1,\n")
    with pytest.raises(CatalogError, match="b.csv: c:x1 in r1 has 64 vCPUs and 512 GiB, and .*a.csv gives it 8"):
        load_catalog([first, second], bundled=False)
    second.write_text(HEADER + "c,x1,8,32,,,2.0,0.5,r1,\n")
    with caplog.at_level(logging.WARNING, logger="thrifty.catalog.loader"):
        (vm,) = load_catalog([first, second], bundled=False)
    assert vm.price_per_hour == 2.0 and "b.csv's prices replace" in caplog.text


def test_a_skypilot_file_must_say_its_cloud_by_its_path(tmp_path):
    """SkyPilot's columns name no cloud: aws/vms.csv is AWS; a bare vms.csv is refused. Mutation: the
    file name taken as the cloud ('vms:p3.2xlarge', which no launcher knows)."""
    path = tmp_path / "vms.csv"
    path.write_text("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region\n"
                    "p3.2xlarge,V100,1,8,61,,3.06,,us-east-1\n")
    with pytest.raises(CatalogError, match="cannot tell its cloud.*aws/vms.csv"):
        load_catalog_file(path)


def test_a_skypilot_file_named_for_no_known_cloud_says_which_cloud_it_became(tmp_path, caplog):
    """`--catalog prices.csv` in SkyPilot's columns becomes cloud 'prices': said, not silent (a new
    user read `prices:m5.large` in a plan). Mutation caught: the warning dropped."""
    path = tmp_path / "prices.csv"
    path.write_text("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region\n"
                    "m5.large,,,2,8,,0.096,,us-east-1\n")
    with caplog.at_level("WARNING", logger="thrifty"):
        (vm,) = load_catalog_file(path)
    assert vm.cloud == "prices" and "cloud 'prices'" in caplog.text and "aws/vms.csv" in caplog.text


@pytest.mark.parametrize("kind", ["--gpu", "--cpu", None])
def test_catalog_list_prints_every_name_region_and_price_whole_at_80_columns(run_cli, monkeypatch, kind):
    """Without a terminal (80 columns) names were cut to `g2-stan…`, and then prices and regions
    folded over two lines (0.21320 read as 0.2132 over a stray 0, `us-eas` over `t-1`). Mutations:
    the table's default overflow (an ellipsis); every column folding."""
    from thrifty.cli.common import stdout
    monkeypatch.setattr(stdout, "_width", 80)  # rich read COLUMNS when the console was made: pin it
    code, out, _ = run_cli("catalog", "list", *([kind] if kind else []))
    assert code == 0 and "…" not in out and max(map(len, out.splitlines())) <= 80
    rows = [line.split() for line in out.splitlines() if ":" in line.split(" ")[0]]
    listed = [vm for vm in load_catalog() if kind is None or vm.is_gpu == (kind == "--gpu")]
    assert len(rows) == len(listed)  # a VM a row (GCP's N1 hosts come bare and with each GPU)
    for vm in listed:
        whole = [vm.qualified_type, vm.region, f"{vm.price_per_hour:.4g}"] + \
            ([] if vm.spot_price_per_hour is None else [f"{vm.spot_price_per_hour:.4g}"])
        assert any(all(cell in cells for cell in whole) for cells in rows), whole


def test_skypilots_layout_names_the_cloud_and_regions_match_in_any_case(tmp_path):
    """paperspace/vms.csv is Paperspace's (mutation: only the three bundled clouds and a few others
    known); a user's US-EAST-1 row replaces the bundled us-east-1 one (mutation: regions kept as
    written, both rows ranked)."""
    path = tmp_path / "paperspace" / "vms.csv"
    path.parent.mkdir()
    path.write_text("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region\n"
                    "A100,A100,1,8,45,,3.09,,NY2\n")
    (vm,) = load_catalog_file(path)
    assert (vm.cloud, vm.region) == ("paperspace", "ny2")
    mine = tmp_path / "mine.csv"
    mine.write_text(HEADER + "aws,p3.2xlarge,8,61,V100,1,1.0,0.5,US-EAST-1,\n")
    rows = [vm for vm in load_catalog([mine]) if (vm.cloud, vm.instance_type) == ("aws", "p3.2xlarge")]
    assert [(vm.region, vm.price_per_hour) for vm in rows] == [("us-east-1", 1.0)]
