"""Hardware fingerprint: parsing /proc/cpuinfo and sysfs caches, class and a stable id."""

from harness.hardware import cpu_fingerprint, parse_cpuinfo

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_1 sse4_2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_tile amx_bf16

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_1 sse4_2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_tile amx_bf16
"""
AMD_AVX2 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B12\nflags\t\t: sse4_2 avx avx2 fma\n"
ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes sve sve2 bf16\nCPU implementer\t: 0x41\n"


def caches(tmp_path):
    for i, (level, kind, size) in enumerate(
        [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"), (3, "Unified", "105M")]
    ):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    return tmp_path


def test_x86_fingerprint_fields(tmp_path):
    hw = cpu_fingerprint(X86, "x86_64", caches(tmp_path), cores=2)
    assert hw.vendor == "intel" and hw.class_ == "x86_64-avx512" and hw.cpu_model == "Intel(R) Xeon(R) Platinum 8480+"
    assert {"avx2", "avx512f", "amx_tile", "amx_bf16", "avx512_bf16"} <= set(hw.isa)
    assert hw.caches == {"l1d": 48 * 1024, "l1i": 32 * 1024, "l2": 2 << 20, "l3": 105 << 20}
    assert hw.id.startswith("cpu-") and len(hw.id) == 12


def test_class_and_vendor_of_other_machines(tmp_path):
    amd = cpu_fingerprint(AMD_AVX2, "x86_64", tmp_path, cores=4)
    assert (amd.vendor, amd.class_) == ("amd", "x86_64-avx2")
    arm = cpu_fingerprint(ARM, "aarch64", tmp_path, cores=4)
    assert (arm.vendor, arm.class_) == ("arm", "aarch64-sve") and "neon" in arm.isa and "sve2" in arm.isa


def test_id_is_stable_and_depends_on_the_machine(tmp_path):
    a = cpu_fingerprint(X86, "x86_64", tmp_path, cores=2)
    assert cpu_fingerprint(X86, "x86_64", tmp_path, cores=2).id == a.id
    assert cpu_fingerprint(X86, "x86_64", tmp_path, cores=4).id != a.id
    assert cpu_fingerprint(AMD_AVX2, "x86_64", tmp_path, cores=2).id != a.id


def test_this_machine_has_a_fingerprint():
    hw = cpu_fingerprint()
    assert hw.cores >= 1 and hw.arch and hw.class_ and hw.gpu is None
    assert set(hw.to_dict()) == {"id", "class", "vendor", "arch", "cpu_model", "cores", "isa", "caches", "gpu"}


def test_parse_cpuinfo_reads_the_first_block():
    info = parse_cpuinfo(X86)
    assert info["processor"] == "0" and info["vendor_id"] == "GenuineIntel"
