"""STAND-IN apex (test double): not the real package."""
