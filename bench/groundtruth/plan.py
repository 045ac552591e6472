"""The ground-truth matrix: which runs make it, named so that a configuration's runs find each other.

A *configuration* is (model, GPUs, bucket cap) on one GPU kind. Its runs:

- ``stock``: DDP as it ships, 6 captured steps and 2 isolated steps (the in-run reference);
- ``serial``: the same with ``comm=serial`` (every bucket all-reduced after the backward): the measured
  answer to "what if nothing overlapped";
- the model's isolated ``twin`` (one GPU, no DDP, the same shapes), shared by the model's configurations;
- once per model (on 2 GPUs, cap 25): a ``cpu-straggler`` (rank 1 sleeps 30 ms before steps 3 and 5) and a
  ``gpu-delay`` (rank 1's GPU spins 12 ms before steps 3 and 5);
- the CPU-bound ResNet-50 (batch 32) stock and serial three times each (``-r1`` .. ``-r3``);
- batch ``d``: bucket-cap pairs only, where another cap moves the step (Llama-style at 25 and 1000 MB, GPT-2 at
  25 and 400 MB: every gradient, or the last several hundred MB, in the last bucket), 4 captured steps, no
  isolated steps and no twin (they are not labelled);
- batch ``h``: the two-tower's third stock and second and third serialized runs, then a fourth to sixth stock and
  serialized run of each library model (shipped light: their steps, traced and untraced, without traces);
- batches ``f`` and ``g``: models from libraries (torchvision's EfficientNet-B0, transformers' BART and Qwen2-MoE in
  bf16 autocast, a two-tower recommender of embedding bags), launch-bound in part: each model's twin and its
  stock and serialized runs on 2 GPUs at 25 MB, three times each (``f`` the first, with twins; ``g`` the other
  two), their untraced steps (outside the capture) in each rank's result;
- batch ``i``: *alternating* runs (``comm=alternate``: stock and serialized steps alternate in one process), 8
  captured steps (the last epoch whole) of 4 epochs, no isolated steps: each library model three times, the
  CPU-bound ResNet-50 twice and BERT (GPU-bound) once, on 2 GPUs at 25 MB (``<model>-2g-cap25-alt-r<k>``);
- batch ``j``: torchvision's RegNetY-400MF, a family the alternating runs' analysis never saw, three alternating
  runs as in batch ``i`` (its held-out check);
- batch ``k``: a fourth alternating run of each library model and RegNet, its steps' CPU sections in ranges;
- batch ``l``: each library family's twin and stock runs (2 GPUs, 25 MB and 2 MB, isolated steps): its labels;
- batch ``e``: repeats of the stock and serialized runs (a configuration's runs on every host of its GPU kind
  are pooled), 2 GPUs, then 4; no twin. They ship their measured step times alone (``lighten.py``): the size
  budget holds no more traces.

Run names: ``<model>-<g>g-cap<cap>-<role>`` (``resnet50`` is batch 128, GPU-bound; ``resnet50b32`` the
CPU-bound batch 32), twins ``<model>-twin``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EXAMPLE = {"gpt2": "gpt2", "llama": "llama", "bert": "bert", "vit": "vit", "resnet50": "resnet50",
           "resnet50b32": "resnet50", **{m: m for m in ("efficientnet", "bart", "qwen2moe", "twotower", "regnet")}}
BATCH = {"resnet50": 128, "resnet50b32": 32}
STEPS, ISOLATED = 6, 2
ALTERNATE = {"comm": "alternate", "epochs": 4}  # batch i: the last epoch's 8 steps captured, 24 before it
STRAGGLER = {"rank": 1, "steps": [3, 5], "sleep_ms": 30}
GPU_DELAY = {"rank": 1, "steps": [3, 5], "ms": 12}


@dataclass(frozen=True)
class Run:
    """One collection of the matrix."""

    name: str
    model: str
    world: int
    role: str  # stock, serial, alternate, twin, cpu-straggler, gpu-delay
    cap: int = 25
    overrides: dict = field(default_factory=dict, hash=False)
    isolated: int = 0
    steps: int = STEPS

    @property
    def example(self) -> str:
        return EXAMPLE[self.model]

    def settings(self) -> dict:
        """local_config overrides of this run."""
        out = {"world_size": self.world, "cap_size": self.cap, **self.overrides}
        if self.model in BATCH:
            out["batchsize"] = BATCH[self.model]
        return out


def twin(model: str) -> Run:
    return Run(f"{model}-twin", model, 1, "twin")


def config_runs(model: str, world: int, cap: int, repeats: int = 1) -> list[Run]:
    """The stock and serial runs of one configuration (``repeats`` of each, interleaved)."""
    base = f"{model}-{world}g-cap{cap}"
    out = []
    for r in range(1, repeats + 1):
        tail = f"-r{r}" if repeats > 1 else ""
        out += [Run(f"{base}-stock{tail}", model, world, "stock", cap, isolated=ISOLATED),
                Run(f"{base}-serial{tail}", model, world, "serial", cap, {"comm": "serial"})]
    return out


def stragglers(model: str) -> list[Run]:
    base = f"{model}-2g-cap25"
    return [Run(f"{base}-cpu-straggler", model, 2, "cpu-straggler", 25, {"straggler": STRAGGLER}),
            Run(f"{base}-gpu-delay", model, 2, "gpu-delay", 25, {"gpu_delay": GPU_DELAY})]


MODELS = ("gpt2", "llama", "bert", "vit", "resnet50")
LIBRARY = ("efficientnet", "bart", "qwen2moe", "twotower")  # batches f and g


def alternating(model: str, repeat: int) -> Run:
    return Run(f"{model}-2g-cap25-alt-r{repeat}", model, 2, "alternate", 25, ALTERNATE, steps=8)


def plan(kind: str) -> list[Run]:
    """The runs of one batch, in the order they are worth having (a deadline cuts the tail). ``c``: the 2-GPU
    configurations and the CPU-bound repeats, serialized by the hook that reduces at the last bucket."""
    if kind == "d":
        return [Run(f"{m}-2g-cap{cap}-stock", m, 2, "stock", cap, steps=4)
                for m, big in (("llama", 1000), ("gpt2", 400)) for cap in (25, big)]
    if kind == "h":  # the two-tower's missing repeats, then more repeats of every library model (light)
        more = [config_runs(m, 2, 25, repeats=6)[2 * r:2 * r + 2] for r in range(3, 6) for m in LIBRARY]
        return config_runs("twotower", 2, 25, repeats=3)[3:] + [r for pair in more for r in pair]
    if kind == "l":  # labels on the library families: each one's twin, its stock runs at 25 and 2 MB
        return [r for m in (*LIBRARY, "regnet") for r in (
            twin(m), Run(f"{m}-2g-cap25-stock-r6", m, 2, "stock", 25, isolated=ISOLATED),
            Run(f"{m}-2g-cap2-stock", m, 2, "stock", 2, isolated=ISOLATED))]
    if kind == "k":  # a fourth repeat of each launch-bound model, its steps' CPU sections in ranges
        return [alternating(m, 4) for m in (*LIBRARY, "regnet")]
    if kind == "j":
        return [alternating("regnet", r) for r in (1, 2, 3)]
    if kind == "i":  # a repeat of every model before the next
        return [alternating(m, r) for r in (1, 2, 3) for m in (*LIBRARY, "resnet50b32", "bert")
                if r == 1 or m != "bert" and (r < 3 or m != "resnet50b32")]
    if kind in ("f", "g"):
        if kind == "f":
            return [twin(m) for m in LIBRARY] + [r for m in LIBRARY for r in config_runs(m, 2, 25, repeats=3)[:2]]
        return [r for m in LIBRARY for r in config_runs(m, 2, 25, repeats=3)[2:]]
    if kind == "e":
        runs = [r for cap in (2, 25) for m in MODELS for r in config_runs(m, 2, cap)]
        runs += config_runs("resnet50b32", 2, 25, repeats=3)
        runs += config_runs("bert", 4, 2, repeats=2)
        runs += [r for m in MODELS if m != "bert" for r in config_runs(m, 4, 2)]
        return runs + [r for m in MODELS for r in config_runs(m, 4, 25)]
    runs = [twin(m) for m in (*MODELS, "resnet50b32")]
    if kind == "c":
        runs += config_runs("resnet50b32", 2, 25, repeats=3)
        for cap in (2, 25):
            for m in MODELS:
                runs += config_runs(m, 2, cap)
        return runs
    for cap in (25, 2):
        for m in MODELS:
            runs += config_runs(m, 2, cap)
    if kind == "a":  # the first host: stragglers, the CPU-bound repeats, then 4 GPUs
        for m in MODELS:
            runs += stragglers(m)
        runs += config_runs("resnet50b32", 2, 25, repeats=3)
    for cap in (2, 25):
        for m in MODELS:
            runs += config_runs(m, 4, cap)
    return runs
