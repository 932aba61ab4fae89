"""STAND-IN torch_npu (test double): not the real package."""
