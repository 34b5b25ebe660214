"""What a run ran on, for its config.json: the versions of the packages that decide its numbers
(`packages`) and the device its agent trained on (`device_of`: where the parameters are, not
what `--cuda` asked for)."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

# the packages whose versions can change a run's numbers: the emulators, the frameworks, NumPy
PACKAGES = ("torch", "envpool", "ale-py", "gymnasium", "jax", "jaxlib", "flax", "optax", "numpy")


def packages() -> dict[str, str]:
    """The installed versions of `PACKAGES` (those not installed are left out)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def cpu_name() -> str:
    """The processor's model name (Linux: /proc/cpuinfo), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_of(state: dict) -> dict | None:
    """The device of the first parameters in a run's `state` (a torch module, or a JAX pytree
    such as a flax TrainState): `{"framework": "torch" | "jax", "type": "cpu" | "cuda" | "gpu" |
    ..., "name": ...}`; None when `state` holds no parameters."""
    torch = sys.modules.get("torch")
    for value in state.values():
        if torch is not None and isinstance(value, torch.nn.Module):
            parameter = next(value.parameters(), None)
            if parameter is None:
                continue
            device = parameter.device
            if device.type == "cuda":
                name = torch.cuda.get_device_name(device)
            else:
                name = cpu_name() if device.type == "cpu" else device.type
            return {"framework": "torch", "type": device.type, "name": name}
        jax = sys.modules.get("jax")
        if jax is None:
            continue
        for leaf in jax.tree_util.tree_leaves(value):
            if isinstance(leaf, jax.Array):
                device = next(iter(leaf.devices()))
                name = cpu_name() if device.platform == "cpu" else device.device_kind
                return {"framework": "jax", "type": device.platform, "name": name}
    return None
