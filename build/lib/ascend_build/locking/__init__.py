"""Locking: each stack's Python packages pinned per Python and arch (exact versions, sha256)
and each user layer's lock, held against its runtime's. lock reads, checks and stages a
cell's lock; resolve makes them (`invoke lock`, with uv for the target's Python and arch);
layerlock parses a user layer's requirements and holds the runtime's packages;
layer_resolve locks a layer and says what it would move."""
