"""The host check's verdict on machines described by their tools' outputs: the variant, and each problem's fix."""

from __future__ import annotations

from tests.unit.hostcheck.machines import GB, amd_smi, linux, mac, nvidia_smi, wanted
from tunedeck.hostcheck.assess import InstallPlan, assess
from tunedeck.hostcheck.rocm_support import rocm_support


def _blocking(plan: InstallPlan) -> list[str]:
    return [f"{problem.what} | {problem.fix}" for problem in plan.problems if problem.blocking]


def test_no_gpu_installs_the_cpu_variant_with_the_cuda_lock_as_constraints() -> None:
    plan = assess(linux(), wanted())
    assert (plan.variant, plan.blocked) == ("cpu", False)
    assert "no NVIDIA or AMD GPU" in plan.reason
    assert plan.lock_args == ("-c", "requirements-cuda.lock") and plan.torch_index_url is None
    assert any("CPU-only build" in note for note in plan.notes)  # the smaller download is offered


def test_a_working_nvidia_driver_gets_the_cuda_variant_with_bitsandbytes() -> None:
    plan = assess(linux(nvidia_smi("580.95.05", "13.0")), wanted())
    assert (plan.variant, plan.problems) == ("cuda", [])
    assert plan.reason == "2 NVIDIA GPUs found by nvidia-smi"
    assert plan.lock_args == ("-r", "requirements-cuda.lock")


def test_an_nvidia_driver_too_old_for_the_wheels_cuda_blocks_with_the_driver_to_install() -> None:
    facts = linux(nvidia_smi("550.54.15", "12.4"))
    plan = assess(facts, wanted())
    assert facts.gpus[0].cuda_max == "12.4" and facts.gpus[0].driver == "550.54.15"
    assert plan.variant == "cuda" and plan.blocked
    problem = _blocking(plan)[0]
    assert "driver 550.54.15 runs CUDA up to 12.4" in problem and "built for CUDA 13.0" in problem
    assert "580.65.06 or newer" in problem and "nvidia-driver-580" in problem and "TORCH_VARIANT=cpu" in problem


def test_a_gpu_older_than_the_cuda_builds_support_blocks() -> None:
    plan = assess(linux(nvidia_smi("580.95.05", "13.0", capability="6.1", model="Tesla P100")), wanted())
    assert any("compute capability 6.1" in line and "7.5 and newer" in line for line in _blocking(plan))


def test_a_supported_amd_gpu_gets_torch_from_the_rocm_index_of_the_machines_rocm() -> None:
    release = rocm_support().rocm_builds_of("2.13")[0]
    gfx = rocm_support().archs_of(release)[0]
    plan = assess(linux(amd_smi(gfx), system_rocm=f"{release}.0"), wanted())
    assert (plan.variant, plan.problems) == ("rocm", [])
    assert plan.torch_index_url == wanted().needs.rocm_index.format(rocm=release)
    assert plan.torch_index_url.endswith(f"/rocm{release}")
    assert plan.lock_args == ()


def test_an_unsupported_amd_architecture_blocks_and_names_the_supported_ones() -> None:
    release = rocm_support().rocm_builds_of("2.13")[0]
    plan = assess(linux(amd_smi("gfx803", model="Radeon RX 580"), system_rocm=f"{release}.2"), wanted())
    problem = _blocking(plan)[0]
    assert plan.variant == "rocm" and "Radeon RX 580 (gfx803) is not among" in problem
    assert "TORCH_VARIANT=cpu" in problem


def test_a_radeon_sibling_of_a_supported_architecture_is_told_about_the_override() -> None:
    release = rocm_support().rocm_builds_of("2.13")[0]
    plan = assess(linux(amd_smi("gfx1031", model="Radeon RX 6700 XT"), system_rocm=f"{release}.0"), wanted())
    assert "HSA_OVERRIDE_GFX_VERSION for gfx1030" in _blocking(plan)[0]


def test_a_rocm_release_torch_is_not_built_for_blocks() -> None:
    release = rocm_support().rocm_builds_of("2.13")[0]
    gfx = rocm_support().archs_of(release)[0]
    plan = assess(linux(amd_smi(gfx), system_rocm="6.3.1"), wanted())
    assert any("this machine has ROCm 6.3" in line for line in _blocking(plan))


def test_apple_silicon_gets_the_registry_build_with_mps() -> None:
    facts = mac()
    plan = assess(facts, wanted())
    assert facts.gpus[0].model == "Apple M2 Pro" and facts.gpus[0].memory_mib == 32 * 1024
    assert (plan.variant, plan.problems, plan.lock_args) == ("apple", [], ())
    assert "MPS" in plan.reason


def test_too_little_disk_blocks_before_any_download() -> None:
    plan = assess(linux(nvidia_smi("580.95.05", "13.0"), free_disk_bytes=5 * GB), wanted())
    problem = _blocking(plan)[0]
    assert "5.0 GB free at /home/renter/tunedeck; the cuda install needs about 12 GB" in problem
    assert "VENV=" in problem
    assert assess(linux(free_disk_bytes=5 * GB), wanted(index_url=wanted().needs.cpu_index)).blocked is False


def test_the_wrong_python_blocks_and_says_how_to_get_the_right_one() -> None:
    plan = assess(linux(python=(3, 12, 3), python_executable="/usr/bin/python3"), wanted())
    problem = _blocking(plan)[0]
    assert "Python 3.12.3 (/usr/bin/python3) is not the Python 3.11" in problem
    assert "sudo apt install python3.11 python3.11-venv" in problem and "make run PYTHON=python3.11" in problem


def test_a_python_without_ensurepip_blocks_with_the_package_to_install() -> None:
    plan = assess(linux(has_venv=False), wanted())
    assert "sudo apt install python3.11-venv" in _blocking(plan)[0]


def test_platforms_torch_has_no_build_for_block() -> None:
    assert "WSL 2" in _blocking(assess(linux(system="Windows"), wanted()))[0]
    assert "Intel Macs" in _blocking(assess(linux(system="Darwin", machine="x86_64"), wanted()))[0]
    assert "musl" in _blocking(assess(linux(libc=None), wanted()))[0]
    assert "glibc 2.17 is older" in _blocking(assess(linux(libc=("glibc", "2.17")), wanted()))[0]


def test_a_forced_variant_wins_and_an_unknown_one_is_refused() -> None:
    forced = assess(linux(nvidia_smi("580.95.05", "13.0")), wanted(variant="cpu"))
    assert (forced.variant, forced.reason) == ("cpu", "TORCH_VARIANT=cpu was given")
    without_gpu = assess(linux(), wanted(variant="cuda"))
    assert without_gpu.variant == "cuda" and not without_gpu.blocked  # an image built away from its GPU
    assert "TORCH_VARIANT=gpu is not a variant" in _blocking(assess(linux(), wanted(variant="gpu")))[0]
    assert assess(mac(), wanted(variant="cuda")).blocked


def test_a_users_torch_index_is_kept() -> None:
    plan = assess(linux(), wanted(index_url="https://mirror.example/torch"))
    assert plan.torch_index_url == "https://mirror.example/torch" and plan.notes == []


def test_cpu_as_the_index_names_torchs_cpu_only_index_and_its_smaller_install() -> None:
    plan = assess(linux(free_disk_bytes=5 * GB), wanted(index_url="cpu"))
    assert plan.torch_index_url == wanted().needs.cpu_index and not plan.blocked  # 4 GB is enough without CUDA
    assert plan.notes == [f"torch comes from {wanted().needs.cpu_index}"]
