"""Import-only stand-in for torchvision in the optional SGLang test environment: SGLang's
multimodal utilities import it at module load, and no torchvision build matches the CPU
torch pinned here.  Any attribute is a harmless placeholder; nothing under test calls it."""
import sys
import types


class _Any:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Any()

    def __getattr__(self, name):
        return _Any()

    def __mro_entries__(self, bases):
        return (object,)


__version__ = "0.28.0"


def __getattr__(name):
    return _Any()


for _sub in ("transforms", "transforms.functional", "transforms.v2", "transforms.v2.functional", "io", "ops",
             "datasets", "models", "utils"):
    _m = types.ModuleType(f"torchvision.{_sub}")
    _m.__getattr__ = lambda name: _Any()
    sys.modules[f"torchvision.{_sub}"] = _m
