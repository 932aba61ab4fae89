"""STAND-IN Ascend apex (test double): not the real package."""
