"""The library's memory default: freed activations are reused, not faulted in again.

Each case runs in a fresh interpreter, since the setting is process-wide and
read at import.
"""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")

# An 8 MiB tensor is written, freed, and allocated and written again; the second
# time's page faults are printed (2,048 fresh 4 KiB pages if the memory went back).
_PROBE = """
import resource, torch, hookscope.core as hc
if {release}:
    hc.release_freed_memory()
a = torch.empty(2 << 20).fill_(1.0)
del a
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
b = torch.empty(2 << 20).fill_(2.0)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, hc.freed_memory_kept())
"""


def _faults(env_value: str | None, release: bool = False) -> tuple[int, bool]:
    import os
    env = {k: v for k, v in os.environ.items() if k != "HOOKSCOPE_KEEP_FREED_MEMORY"}
    if env_value is not None:
        env["HOOKSCOPE_KEEP_FREED_MEMORY"] = env_value
    out = subprocess.run([sys.executable, "-c", _PROBE.format(release=release)], env=env,
                         capture_output=True, text=True, check=True, timeout=120).stdout.split()
    return int(out[0]), out[1] == "True"


def test_import_keeps_freed_activation_memory_for_the_next_run():
    faults, kept = _faults(None)
    assert kept
    assert faults < 100  # reused from the heap


@pytest.mark.parametrize("how", ["env", "call"])
def test_opting_out_gives_freed_memory_back(how):
    faults, kept = _faults("0") if how == "env" else _faults(None, release=True)
    assert not kept
    assert faults > 1500  # the pages were unmapped and fault in again
