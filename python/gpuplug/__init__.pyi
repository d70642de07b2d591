# SPDX-License-Identifier: Apache-2.0
from typing import Any, Optional

from ._gpuplug import (ArrayView as ArrayView, Buffer as Buffer, Error as Error, Event as Event,
                       GpuBackend as GpuBackend, Kernel as Kernel, MemoryScope as MemoryScope,
                       OpCache as OpCache, PluginRegistry as PluginRegistry, Stream as Stream,
                       Teardown as Teardown, TeardownError as TeardownError,
                       __version__ as __version__, abi_version as abi_version, as_array as as_array)

KDL_CPU: int

def host_backend() -> GpuBackend: ...
def from_dlpack(x: Any, backend: Optional[GpuBackend] = None, writable: bool = False) -> Buffer: ...
