"""The serving image's own refusals, run by its last build step (images/serving/<os>/Dockerfile)
after vLLM-Ascend is installed, before the suites and any tag:

    python3 serving_check.py TORCH_VERSION TORCH_NPU_VERSION

- torch and torch_npu are still the stack's releases (a step that moved either is a refused
  build, not a warning: the runtime's suite passed on those);
- CUDA's `triton` is not installed (vLLM-Ascend runs on triton-ascend; vLLM's own images
  remove triton too);
- vLLM finds its platform: the `vllm.platform_plugins` entry point `ascend` is there and
  names `vllm_ascend:register` (missing, vLLM falls back to no device at all).

Exit 1 with a line per refusal. The same file is run on the built image with each of these
broken by hand (tests/integration/test_serving.py). Standard library only: it runs in the
image's own Python, without importing torch (which would load torch_npu: an NPU's driver)."""
from __future__ import annotations

import importlib.metadata as md
import site
import sys

PLUGIN = ("vllm.platform_plugins", "ascend", "vllm_ascend:register")


def _installed() -> dict[str, md.Distribution]:
    found: dict[str, md.Distribution] = {}
    for dist in md.distributions(path=site.getsitepackages()):
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        found.setdefault(name, dist)
    return found


def refusals(torch: str, torch_npu: str) -> list[str]:
    dists = _installed()
    out = []
    for name, wanted in (("torch", torch), ("torch-npu", torch_npu)):
        got = dists[name].version.split("+")[0] if name in dists else "absent"
        if got != wanted:
            out.append(f"refused: the serving layers moved {name} to {got}, not the stack's {wanted}")
    if "triton" in dists:
        out.append(f"refused: CUDA's triton {dists['triton'].version} is in the image (vLLM-Ascend runs on "
                   "triton-ascend)")
    group, name, value = PLUGIN
    points = {e.name: e.value for e in md.entry_points(group=group)}
    if points.get(name) != value:
        out.append(f"refused: vLLM's platform entry point {group}:{name} is {points.get(name) or 'missing'}, "
                   f"not {value}: vLLM would find no NPU platform")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: serving_check.py TORCH_VERSION TORCH_NPU_VERSION", file=sys.stderr)
        return 2
    found = refusals(argv[1], argv[2])
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
