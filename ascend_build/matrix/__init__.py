"""The matrix and its sources: matrix.yaml (what people decide) and imported.yaml (what
`invoke update` imports) read (load), shaped (schema, checker), typed (records, frameworks,
eras), resolved into cells (model), checked as a whole (semantics); its views (report). The import that
writes imported.yaml is the room above, upstream/."""
from .eras import expected_kernels, expected_toolkit
from .frameworks import FRAMEWORKS, Framework
from .load import load_matrix, load_text
from .model import Matrix
from .records import (
    Builder,
    BuilderCell,
    CannFile,
    CannRelease,
    Cell,
    ImageSpec,
    OSBase,
    PackageRelease,
    PythonSource,
    ServingRelease,
    Stack,
    TorchParts,
    VllmAscendRelease,
    VllmRelease,
)

__all__ = ["FRAMEWORKS", "Builder", "BuilderCell", "CannFile", "CannRelease", "Cell", "Framework", "ImageSpec",
           "Matrix", "OSBase", "PackageRelease", "PythonSource", "ServingRelease", "Stack", "TorchParts",
           "VllmAscendRelease", "VllmRelease", "expected_kernels", "expected_toolkit", "load_matrix", "load_text"]
