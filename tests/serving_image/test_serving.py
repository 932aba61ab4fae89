"""The serving suite: run by `invoke build --vllm RELEASE` on every candidate, before the
runtime suite (inherited) and before any tag. It holds what vLLM-Ascend's users hit: vLLM and
the plugin at the releases the labels name, the plugin found by vLLM's platform entry
point, torch and torch_npu still the stack's, no CUDA triton, the serving environment in a
plain `docker run`, and a real serve where an NPU exists."""
from __future__ import annotations

import json
import shlex

import pytest

from ascend_build.locking.layerlock import LayerLock
from ascend_build.locking.lock import normalize, pinned_versions
from tests.image.conftest import run_on_npu

# `import vllm` imports torch, which (torch >= 2.5) loads torch_npu, which needs the host's
# driver (and more than the CANN test doubles give): what these checks read is the packages
# and their registration, so they run without the autoload (the runtime suite holds torch_npu;
# the real serve below runs with it).
NO_AUTOLOAD = "TORCH_DEVICE_BACKEND_AUTOLOAD=0 "

# vLLM's and the plugin's imports in one Python: each imports torch, most of a minute under
# qemu. Each fact read on its own, a failure said as its traceback (the others still read).
_IMPORTS = """import json, traceback
found = {}
def read(key, how):
    try:
        found[key] = how()
    except Exception:
        found[key] = {"error": traceback.format_exc()[-3000:]}
def vllm_version():
    import vllm
    return vllm.__version__
def registered():
    import vllm_ascend
    return vllm_ascend.register()
def kernels():
    import importlib.util as u
    return bool(u.find_spec("vllm_ascend.vllm_ascend_C"))
read("vllm", vllm_version)
read("register", registered)
read("kernels", kernels)
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def imported(host) -> dict:
    return json.loads(_py(host, _IMPORTS).splitlines()[-1])


def _fact(imported: dict, key: str):
    value = imported[key]
    assert not isinstance(value, dict), value["error"]
    return value


def _py(host, code: str):
    out = host.run(NO_AUTOLOAD + "python -c " + shlex.quote(code))
    assert out.rc == 0, out.stderr
    return out.stdout.strip()


def _installed(distributions) -> dict[str, str]:
    """normalized name -> version, of every distribution in the venv's site-packages."""
    return distributions.versions(normalize, site=True)


def test_vllm_is_the_release_the_labels_name(imported, distributions, serving):
    # Not `vllm --version`: the CLI activates the platform plugin first, and vllm_ascend's
    # platform imports torch_npu outright (an NPU check: the real serve below).
    assert _fact(imported, "vllm").split("+")[0] == serving["vllm"]
    # VLLM_TARGET_DEVICE=empty gives the version a local part: 0.23.0+empty
    assert _installed(distributions)["vllm"].split("+")[0] == serving["vllm"]
    assert _installed(distributions)["vllm-ascend"].split("+")[0] == serving["vllm-ascend"]


def test_the_platform_plugin_entry_point_names_the_npu_platform(host, imported):
    """vLLM finds its platform by this entry point: missing, vLLM falls back to no device."""
    found = json.loads(_py(host, "import json, importlib.metadata as m; "
                                 "print(json.dumps({e.name: e.value for e in "
                                 "m.entry_points(group='vllm.platform_plugins')}))"))
    assert found.get("ascend") == "vllm_ascend:register", found
    # register() returns the platform class's path; loading it imports no device code
    assert _fact(imported, "register") == "vllm_ascend.platform.NPUPlatform"


def test_each_distribution_is_there_once(distributions):
    # `pip check` is the runtime suite's (test_byte_code_scripts_and_dependencies_are_the_images_own),
    # which runs on every serving image after this one: a second start of pip under qemu said nothing more.
    seen = [normalize(name) for name, _ in distributions.site]
    assert sorted({n for n in seen if seen.count(n) > 1}) == []


def test_torch_torch_npu_and_numpy_are_as_the_runtime_locked_them(distributions, serving_lock):
    held = LayerLock(None, serving_lock).held
    assert "torch" in held and "torch-npu" in held and "numpy" in held, held
    installed = _installed(distributions)
    assert {n: installed.get(n) for n in held} == held


def test_the_serving_packages_are_its_lock(distributions, serving_lock):
    locked = pinned_versions({"serving": serving_lock})
    assert locked, "the serving lock names no package"
    installed = _installed(distributions)
    assert {n: installed.get(n) for n in locked} == locked


def test_ray_for_many_nodes_and_vllm_bench_work_without_a_network(host, distributions):
    """A server across nodes joins its pods in Ray (invoke job --kind serving --nodes N), and
    `vllm bench serve` needs vLLM's bench extra: both in the image, nothing fetched when run."""
    installed = _installed(distributions)
    assert "ray" in installed, "no Ray: a LeaderWorkerSet's pods cannot join one server"
    for name in ("pandas", "datasets", "matplotlib"):
        assert name in installed, f"{name}: vLLM's bench extra is not in the image"
    out = host.run(NO_AUTOLOAD + "HF_HUB_OFFLINE=1 ray --version && python -c 'import ray, pandas, datasets'")
    assert out.rc == 0, out.stdout + out.stderr


def test_no_cuda_triton_and_no_cuda_package(distributions):
    installed = _installed(distributions)
    assert "triton" not in installed, "CUDA's triton is in the image: vLLM-Ascend runs on triton-ascend"
    assert sorted(n for n in installed if n.startswith(("nvidia-", "cuda-"))) == []


def test_the_kernels_are_there_when_built_with_them_and_labelled_when_not(imported, serving):
    assert _fact(imported, "kernels") is (serving["kernels"] == "yes"), serving


def test_the_serving_environment_holds_in_a_plain_run(image_env, serving):
    """What vLLM-Ascend's images set, in the image ENV (a plain `docker run`, no shell rc)."""
    assert image_env.get("SOC_VERSION") == serving["soc-version"]
    assert image_env.get("TASK_QUEUE_ENABLE") == "1"
    assert image_env.get("OMP_NUM_THREADS") == "1"
    assert image_env.get("ASCEND_TOOLKIT_HOME"), "CANN's toolkit environment is not in the image ENV"


def test_a_short_real_serve_on_an_npu(suite_engine, image):
    """A tiny model the test makes itself, `vllm serve` answering /v1/models and one
    completion; an NPU is needed (the one allowed skip)."""
    code = (
        "import json, os, subprocess, sys, tempfile, time, urllib.request\n"
        "from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast\n"
        "from tokenizers import Tokenizer, models, pre_tokenizers\n"
        "d = tempfile.mkdtemp()\n"
        "vocab = {c: i for i, c in enumerate(['<unk>', '<s>', '</s>'] + list('abcdefghijklmnopqrstuvwxyz '))}\n"
        "tok = Tokenizer(models.WordLevel(vocab, unk_token='<unk>')); tok.pre_tokenizer = pre_tokenizers.Split('', 'isolated')\n"
        "PreTrainedTokenizerFast(tokenizer_object=tok, bos_token='<s>', eos_token='</s>', unk_token='<unk>').save_pretrained(d)\n"
        "LlamaForCausalLM(LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=2,\n"
        "    num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128)).save_pretrained(d)\n"
        "p = subprocess.Popen(['vllm', 'serve', d, '--port', '8000', '--max-model-len', '128', '--enforce-eager'])\n"
        "for _ in range(600):\n"
        "    try:\n"
        "        models = json.load(urllib.request.urlopen('http://127.0.0.1:8000/v1/models')); break\n"
        "    except OSError:\n"
        "        time.sleep(1)\n"
        "else:\n"
        "    p.kill(); sys.exit('vllm serve did not answer in 600 s')\n"
        "body = json.dumps({'model': d, 'prompt': 'ab', 'max_tokens': 4}).encode()\n"
        "r = json.load(urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:8000/v1/completions', body,\n"
        "    {'Content-Type': 'application/json'})))\n"
        "p.terminate()\n"
        "print(json.dumps({'models': [m['id'] for m in models['data']], 'choices': len(r['choices'])}))\n")
    done = run_on_npu(suite_engine, image, code, "a real `vllm serve`")
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["choices"] == 1 and len(said["models"]) == 1
