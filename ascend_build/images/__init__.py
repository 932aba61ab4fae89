"""Images: rendering Dockerfiles, building, testing,
tagging and pushing runtime and builder images, and the wheels built from source."""
