"""Which precision `quantize: auto` (the semantic ranker's default) runs at on this machine.

bf16 embeds about 2x faster than fp32 at cosine 0.9999 to it, but only where the CPU has
native bf16 matrix instructions (avx512_bf16 or AMX); elsewhere oneDNN emulates bf16 and it
is slower than fp32. So `auto` is bf16 on such a CPU and fp32 everywhere else (another
device, the onnx engine, an unreadable /proc/cpuinfo). The resolved value is what the run
logs (`ranker....quantize` param and the `index.quantize` tag) and what keys the embedding
cache, so runs on two kinds of machine never share vectors. `quantize: null` is still fp32.
"""

from __future__ import annotations

#: Read for the CPU's feature flags (a module constant so tests can point it at a file).
CPUINFO = "/proc/cpuinfo"
#: Flags that mean native bf16 matrix multiplies.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
AUTO = "auto"


def cpu_flags() -> set[str]:
    """The CPU feature flags of this machine (empty where /proc/cpuinfo is unreadable)."""
    try:
        with open(CPUINFO, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def native_bf16(flags: set[str] | None = None) -> bool:
    """True when the CPU multiplies bf16 matrices natively (avx512_bf16 or AMX)."""
    return bool((cpu_flags() if flags is None else flags) & BF16_FLAGS)


def resolve_quantize(quantize: str | None, engine: str = "torch", device: str = "cpu") -> str | None:
    """`auto` -> "bf16" on a CPU with native bf16 and the torch engine, else None (fp32);
    any other value is returned as it is."""
    if quantize != AUTO:
        return quantize
    return "bf16" if engine == "torch" and device == "cpu" and native_bf16() else None
