"""Stand-ins for what this machine lacks: an NVIDIA GPU (a fake NVML module)."""

from __future__ import annotations

from types import SimpleNamespace


class NVMLError(Exception):
    pass


class FakeNVML:
    """Mimics the pynvml calls spectui makes; utilisation can be 'not supported' as on some boards."""

    def __init__(
        self, gpus=(("NVIDIA GeForce RTX 4090", 24 * 1024**3, 6 * 1024**3, 37),), fail_init=False, util_supported=True
    ):
        self.gpus = list(gpus)
        self.fail_init = fail_init
        self.util_supported = util_supported
        self.inited = False
        self.shutdowns = 0

    def nvmlInit(self):
        if self.fail_init:
            raise NVMLError("NVML Shared Library Not Found")
        self.inited = True

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return self.gpus[h][0].encode()  # older pynvml returns bytes

    def nvmlDeviceGetMemoryInfo(self, h):
        _, total, used, _ = self.gpus[h]
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, h):
        if not self.util_supported:
            raise NVMLError("Not Supported")
        return SimpleNamespace(gpu=self.gpus[h][3], memory=0)
