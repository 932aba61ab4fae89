"""`python -m ascend_build TASK ...`: the same as the `ascend-build` console script."""
from .cli.entry import main

if __name__ == "__main__":      # a walk over the package's modules imports this one too
    main()
