"""Each example model's gradient sizes, as `whatif --bucket-cap --gradients` reads them: writes
``datasets/examples/<model>/gradients.json`` (``param_bytes``: each trained parameter's gradient bytes, in the
order the model registers them, at the size the model has on a GPU).

    python bench/groundtruth/gradients.py   # needs torch (the collect extra); no GPU

The model is built on PyTorch's meta device (shapes, no memory), as its ``get_model`` builds it on a GPU: the
examples pick their full size when CUDA is available, so the check is answered yes while the module loads.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import sys
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("gpt2", "llama", "bert", "vit", "resnet50")


def gradient_bytes(folder: Path) -> list[int]:
    """The trained parameters' gradient bytes of the example in ``folder``, at its GPU size."""
    import torch

    spec = importlib.util.spec_from_file_location(f"example_{folder.name}", folder / "define_model.py")
    module = importlib.util.module_from_spec(spec)
    with mock.patch("torch.cuda.is_available", return_value=True):
        spec.loader.exec_module(module)
        # get_model's own construction (``model = Name(args).to(device)``), on the meta device
        built = re.search(r"model = (\w+\(.*?\))\.to\(", inspect.getsource(module.get_model))
        if built is None:
            raise SystemExit(f"{folder}: get_model builds its model in a way this script does not read")
        with torch.device("meta"):
            model = eval(built.group(1), vars(module))  # noqa: S307 - the example's own expression
    return [p.numel() * p.element_size() for p in model.parameters() if p.requires_grad]


def main() -> int:
    for name in MODELS:
        folder = ROOT / "datasets" / "examples" / name
        sizes = gradient_bytes(folder)
        out = {"param_bytes": sizes, "model": name,
               "how": "bench/groundtruth/gradients.py: each trained parameter's gradient bytes, registration order"}
        (folder / "gradients.json").write_text(json.dumps(out) + "\n")
        print(f"{name:9s} {len(sizes):4d} gradients {sum(sizes) / 1e6:8.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
