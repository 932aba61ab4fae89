"""STAND-IN Ascend apex addition (test double)."""
ASCEND = True
