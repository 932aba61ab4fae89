"""Images: rendering Dockerfiles, the CANN packages they install, building, testing,
tagging and pushing runtime and builder images, and the wheels built from source."""
