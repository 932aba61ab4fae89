"""The matrix and its sources: matrix.yaml read, checked and resolved into cells
(model), its schema and YAML loading with lines, the views of it (report), and the
import of Huawei's release data into it (upstream)."""
from .model import (
                    ARCHES,
                    MINOR,
                    PLATFORM_ARCH,
                    SHA256,
                    VERSION,
                    Builder,
                    BuilderCell,
                    CannFile,
                    CannRelease,
                    Cell,
                    ImageSpec,
                    Matrix,
                    OSBase,
                    PythonSource,
                    Stack,
                    expected_kernels,
                    expected_toolkit,
                    load_matrix,
                    load_text,
                    stack_flag,
)

__all__ = ["ARCHES", "MINOR", "PLATFORM_ARCH", "SHA256", "VERSION", "Builder", "BuilderCell", "CannFile",
           "CannRelease", "Cell", "ImageSpec", "Matrix", "OSBase", "PythonSource", "Stack", "expected_kernels",
           "expected_toolkit", "load_matrix", "load_text", "stack_flag"]
