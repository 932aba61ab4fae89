"""The SBOM document from what an image's labels and its probe report (a crafted probe
result here; the image suite checks the SBOM of every real image)."""
from __future__ import annotations

import json

from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from ascend_build.images.kinds import label
from ascend_build.provenance.sbom import make

TOOLKIT = {"file": "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run", "version": "8.0.RC3", "sha256": "1" * 64,
           "verified": "sha256 pinned in matrix.yaml", "zip_sha256": None, "url": "https://example.invalid/t.run"}
KERNELS = {"file": "Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run", "version": "8.0.RC3", "sha256": "2" * 64,
           "verified": "the .run taken out of Huawei's .zip", "zip_sha256": "3" * 64, "url": "https://example.invalid/k.zip"}
LABELS = {label("cann-sha256"): json.dumps([TOOLKIT, KERNELS]), label("content-tag"): "sha-0123456789abcdef",
          label("stack"): "2.1.0", label("platform"): "linux/arm64", label("lock"): "2.1.0/py3.11-aarch64",
          "org.opencontainers.image.base.name": "debian:bookworm"}
NUMPY_ARM = "numpy-1.26.4-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"
LOCK = {"cann": ("--require-hashes\nnumpy==1.26.4 \\\n    --hash=sha256:" + "a" * 64 + " \\\n    --hash=sha256:" + "b" * 64
                 + "\n    # " + "a" * 16 + " " + NUMPY_ARM
                 + "\n    # " + "b" * 16 + " numpy-1.26.4-cp311-cp311-manylinux_2_34_aarch64.whl\n"),
        "torch": "--require-hashes\n", "torch_npu": "--require-hashes\n"}
FOUND = {
    "os_release": 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n',
    "deb": "bash\t5.2.15-2+b7\tarm64\nlibc6\t2.36-9+deb12u9\tarm64\n",
    "rpm": None,
    "python": [{"name": "numpy", "version": "1.26.4", "tags": ["cp311-cp311-manylinux_2_17_aarch64",
                                                               "cp311-cp311-manylinux2014_aarch64"]},
               {"name": "pip", "version": "23.0.1", "tags": ["py3-none-any"]}],
    "requirements": LOCK,
}


def _doc():
    text = make(LABELS, "ascend-runtime:cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-arm64", FOUND)
    return text, json.loads(text)


def test_the_sbom_is_valid_cyclonedx_1_6():
    text, doc = _doc()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    assert doc["specVersion"] == "1.6" and doc["metadata"]["component"]["version"] == "sha-0123456789abcdef"


def test_cann_installers_carry_the_sums_the_build_verified():
    _, doc = _doc()
    cann = {c["name"]: c for c in doc["components"] if c.get("group") == "Huawei CANN"}
    assert {n: c["hashes"][0]["content"] for n, c in cann.items()} == {TOOLKIT["file"]: "1" * 64,
                                                                        KERNELS["file"]: "2" * 64}
    props = {p["name"]: p["value"] for p in cann[KERNELS["file"]]["properties"]}
    assert props["io.ascend-build:zip-sha256"] == "3" * 64


def test_python_packages_get_the_sha256_of_the_wheel_installed():
    _, doc = _doc()
    lib = {c["bom-ref"]: c for c in doc["components"]}
    assert lib["pypi:numpy"]["hashes"] == [{"alg": "SHA-256", "content": "a" * 64}]    # the 2_17 wheel, by its tags
    assert lib["pypi:numpy"]["purl"] == "pkg:pypi/numpy@1.26.4"
    assert "hashes" not in lib["pypi:pip"]          # a venv seed: not in the lock, said so
    assert lib["pypi:pip"]["properties"][0]["value"].startswith("not locked")


def test_os_packages_and_the_base_are_listed():
    _, doc = _doc()
    lib = {c["bom-ref"]: c for c in doc["components"]}
    assert lib["deb:bash"]["purl"] == "pkg:deb/debian/bash@5.2.15-2%2Bb7?arch=arm64"
    assert lib["base-image"]["name"] == "debian:bookworm" and lib["os"]["version"] == "12"


def test_a_renamed_wheel_and_a_user_layer_package_get_their_sha256():
    """torchvision's wheels keep `linux_aarch64` in WHEEL after being renamed manylinux:
    the lock's one file for that interpreter and ABI is the one installed. A user layer's
    lock (layer-NAME.txt in the image) is read like the runtime's."""
    vision = "torchvision-0.16.0-cp311-cp311-manylinux2014_aarch64.whl"
    found = {**FOUND, "python": FOUND["python"] + [
        {"name": "torchvision", "version": "0.16.0", "tags": ["cp311-cp311-linux_aarch64"]},
        {"name": "einops", "version": "0.8.1", "tags": ["py3-none-any"]}],
        "requirements": {**LOCK, "torch": "--require-hashes\ntorchvision==0.16.0 \\\n    --hash=sha256:" + "c" * 64
                         + "\n    # " + "c" * 16 + " " + vision + "\n",
                         "layer-team": "--require-hashes\neinops==0.8.1 \\\n    --hash=sha256:" + "d" * 64
                         + "\n    # " + "d" * 16 + " einops-0.8.1-py3-none-any.whl\n"}}
    lib = {c["bom-ref"]: c for c in json.loads(make(LABELS, "x", found))["components"]}
    assert lib["pypi:torchvision"]["hashes"] == [{"alg": "SHA-256", "content": "c" * 64}]
    assert lib["pypi:einops"]["hashes"] == [{"alg": "SHA-256", "content": "d" * 64}]
