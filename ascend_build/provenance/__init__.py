"""What an image says of itself and how that is checked, below the builds that use it: the
labels' names, what a built image holds (probe), its SBOM, the comparison of two images
layer by layer (imagediff) and the rewrite of a built image's times (restamp)."""
