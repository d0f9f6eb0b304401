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


def test_user_catalog_in_native_format(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + "aws,x1.big,16,64,,,0.5,0.2,us-west-2,\n")
    (vm,) = load_catalog([path], bundled=False)
    assert vm.vcpus == 16 and vm.spot_price_per_hour == 0.2 and not vm.is_gpu


@pytest.mark.parametrize("content, message", [
    ("cloud,instance_type,price_per_hour\naws,a,1\n", "missing columns"),
    (HEADER + "aws,a,4,16,,,-1,,r,\n", "non-negative"),
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
    cheap = CatalogFilter(max_price_per_hour=0.2, gpu=False).apply(vms)
    assert cheap and all(vm.price_per_hour <= 0.2 for vm in cheap)
    hw = Hardware.load()
    p5 = next(vm for vm in gpus if vm.instance_type == "p5.48xlarge")
    assert hw.rank_speed(p5) == 1340 and hw.network_gbps(p5) == 3200 and p5.ranks_per_node == 8
    n2 = next(vm for vm in vms if vm.instance_type == "n2-standard-4")
    assert hw.network_gbps(n2) == 8  # 2 Gbit/s per vCPU on GCP
    assert hw.rank_speed(n2) == pytest.approx(4 * 1.05)
