"""Huawei's official image tags, read in one place: `invoke build --like` (like.py) and the
import of the CANN images (upstream/cann_images.py) both parse them here. quay.io/ascend/cann
tags read `<cann>-<chip>-<os>-py<X.Y>[-devel]` (Ascend/cann-container-image's `cann/<tag>/`
folders), quay.io/ascend/torch-npu tags `<torch_npu>-cann<CANN>-<chip>-<os>-py<X.Y>`
(Ascend/pytorch docker/); the chip is spelled in lower case (a3, 910b), the CANN release as
upstream writes it (8.3.rc2), a pre-release with its suffix (8.5.0.alpha001, 9.1.0-beta.3).
Huawei's SWR registry names its CANN images (9.2.0 on) with the date of their build after the
release: `<cann>_<YYYYMMDDhhmmss>-<chip>-<os>-py<X.Y>[-devel]`
(swr.cn-north-12.myhuaweicloud.com/atlas_inference/cann:9.2.0_20260930220649-910b-ubuntu22.04-py3.12,
as vLLM-Ascend 0.30.0rc2's Dockerfiles name them)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

# A release as Huawei's download folders name it (8.0.RC3, 9.0.1): anything else in the
# release's place is a pre-release (alpha, beta), whose files are not published for download.
RELEASE = re.compile(r"[0-9]+\.[0-9]+\.(RC[0-9]+|[0-9]+)", re.I)
# The CANN part is lazy, so a pre-release's own dashes (9.1.0-beta.3) stay in it.
CANN_TAG = (r"(?P<cann>[0-9][0-9A-Za-z._+-]*?)-(?P<chip>[0-9A-Za-z]+)-(?P<os>[a-z]+[0-9][0-9.]*)"
            r"-py(?P<python>3\.[0-9]+)(?P<devel>-devel)?")
_CANN = re.compile(CANN_TAG)
_TORCH_NPU = re.compile(r"(?P<package>[0-9][\w.+]*)-cann(?P<cann>[0-9][\w.]*)-(?P<chip>[0-9A-Za-z]+)-"
                        r"(?P<os>[a-z]+[0-9][0-9.]*)-py(?P<python>3\.[0-9]+)")
_DATED = re.compile(r"(?P<cann>[0-9]+\.[0-9]+\.[0-9A-Za-z]+)_(?P<built>[0-9]{14})-(?P<chip>[0-9A-Za-z]+)-"
                    r"(?P<os>[a-z]+[0-9][0-9.]*)-py(?P<python>3\.[0-9]+)(?P<devel>-devel)?")
CANN_FORM = ("<cann>-<chip>-<os>-py<X.Y>[-devel] (e.g. 9.0.1-a3-ubuntu22.04-py3.11, and its devel twin "
             "9.0.1-a3-ubuntu22.04-py3.11-devel)")
DATED_FORM = "<cann>_<YYYYMMDDhhmmss>-<chip>-<os>-py<X.Y>[-devel] (e.g. 9.2.0_20260930220649-910b-ubuntu22.04-py3.12)"
TORCH_NPU_FORM = "<torch_npu>-cann<CANN>-<chip>-<os>-py<X.Y> (e.g. 2.12.0-cann9.1.0-a3-openeuler24.03-py3.12)"


@dataclass(frozen=True)
class OfficialTag:
    """What an official tag names: its CANN release (as spelled in the tag), chip, OS and
    Python; a torch-npu image's torch_npu release, and whether it is a -devel variant."""
    cann: str
    chip: str
    os: str
    python: str
    torch_npu: str = ""          # "": a quay.io/ascend/cann image
    devel: bool = False
    built: str = ""              # a dated tag's build time, as written (20260930220649); "": undated

    @property
    def pre_release(self) -> bool:
        return not RELEASE.fullmatch(self.cann)

    @property
    def release(self) -> str:
        """The release a pre-release precedes (9.1.0-beta.3 -> 9.1.0, 8.5.0.alpha001 -> 8.5.0),
        upper-cased as the matrix spells it; a release itself, so spelled."""
        found = RELEASE.match(self.cann)
        return found.group(0).upper() if found else self.cann

    def __str__(self) -> str:
        if self.torch_npu:
            return f"{self.torch_npu}-cann{self.cann}-{self.chip}-{self.os}-py{self.python}"
        return (f"{self.cann}{'_' + self.built if self.built else ''}-{self.chip}-{self.os}-py{self.python}"
                + ("-devel" if self.devel else ""))

    @property
    def built_at(self) -> str:
        """A dated tag's build time in ISO 8601 (2026-09-30T22:06:49; no zone: the tag names none)."""
        return datetime.strptime(self.built, "%Y%m%d%H%M%S").isoformat() if self.built else ""


def cann_tag(tag: str) -> OfficialTag | None:
    """A quay.io/ascend/cann tag, or None when it does not read as one."""
    m = _CANN.fullmatch(tag)
    return OfficialTag(m["cann"], m["chip"], m["os"], m["python"], devel=bool(m["devel"])) if m else None


def dated_tag(tag: str) -> OfficialTag | None:
    """A dated SWR CANN tag (its date a real one), or None when it does not read as one."""
    m = _DATED.fullmatch(tag)
    if m is None:
        return None
    try:
        datetime.strptime(m["built"], "%Y%m%d%H%M%S")
    except ValueError:
        return None
    return OfficialTag(m["cann"], m["chip"], m["os"], m["python"], devel=bool(m["devel"]), built=m["built"])


def torch_npu_tag(tag: str) -> OfficialTag | None:
    """A quay.io/ascend/torch-npu tag, or None when it does not read as one."""
    m = _TORCH_NPU.fullmatch(tag)
    return OfficialTag(m["cann"], m["chip"], m["os"], m["python"], torch_npu=m["package"]) if m else None
