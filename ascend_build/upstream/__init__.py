"""Upstream facts by import: Huawei's published release data read into the matrix, with
the source of every entry recorded (never retyped by hand)."""
