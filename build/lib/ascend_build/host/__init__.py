"""The 910B host: running an image there with its NPUs."""
